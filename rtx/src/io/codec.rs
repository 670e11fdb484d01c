//! Element values to and from safetensors' little-endian bytes. Same-type conversions are bit
//! for bit (no arithmetic touches the values); float-to-float casts round once, to nearest.

use ::safetensors::Dtype;
use rtx_kernels::{DType, Element, bf16, f16};
use std::any::Any;

/// safetensors' tag for an rtx element type.
pub(crate) fn to_st(d: DType) -> Dtype {
    match d {
        DType::F32 => Dtype::F32,
        DType::F64 => Dtype::F64,
        DType::F16 => Dtype::F16,
        DType::BF16 => Dtype::BF16,
        DType::I32 => Dtype::I32,
        DType::I64 => Dtype::I64,
        DType::U8 => Dtype::U8,
        DType::Bool => Dtype::BOOL,
    }
}

/// The rtx element type of a safetensors tag, if rtx has one (it has no `F8_*`, `U16`, ...).
pub(crate) fn from_st(d: Dtype) -> Option<DType> {
    Some(match d {
        Dtype::F32 => DType::F32,
        Dtype::F64 => DType::F64,
        Dtype::F16 => DType::F16,
        Dtype::BF16 => DType::BF16,
        Dtype::I32 => DType::I32,
        Dtype::I64 => DType::I64,
        Dtype::U8 => DType::U8,
        Dtype::BOOL => DType::Bool,
        _ => return None,
    })
}

/// A dtype's name for messages: PyTorch's (`float32`) where rtx knows the type, else the
/// safetensors tag (`F8_E4M3`).
pub(crate) fn name(d: Dtype) -> String {
    match from_st(d) {
        Some(t) => t.name().to_string(),
        None => format!("{d:?}"),
    }
}

/// Applies `f` to each `N`-byte little-endian chunk of `bytes` (a trailing partial chunk,
/// which validated files never have, is ignored).
fn le<const N: usize, T>(bytes: &[u8], f: fn([u8; N]) -> T) -> Vec<T> {
    bytes
        .chunks_exact(N)
        .map(|c| {
            let mut a = [0u8; N];
            a.copy_from_slice(c);
            f(a)
        })
        .collect()
}

/// The bytes of `values`, in their own element type, bit for bit.
pub(crate) fn encode<E: Element>(values: Vec<E>) -> Vec<u8> {
    // A shell: the encoders are compiled once, not once per element type.
    encode_any(Box::new(values))
}

/// [`encode`] on the values as a `Box<Vec<E>>`, whatever `E` is.
fn encode_any(any: Box<dyn Any>) -> Vec<u8> {
    // `Element` is sealed to these eight types, so one of the arms matches.
    let any = match any.downcast::<Vec<f32>>() {
        Ok(v) => return v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Err(a) => a,
    };
    let any = match any.downcast::<Vec<f64>>() {
        Ok(v) => return v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Err(a) => a,
    };
    let any = match any.downcast::<Vec<f16>>() {
        Ok(v) => return v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Err(a) => a,
    };
    let any = match any.downcast::<Vec<bf16>>() {
        Ok(v) => return v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Err(a) => a,
    };
    let any = match any.downcast::<Vec<i32>>() {
        Ok(v) => return v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Err(a) => a,
    };
    let any = match any.downcast::<Vec<i64>>() {
        Ok(v) => return v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Err(a) => a,
    };
    let any = match any.downcast::<Vec<u8>>() {
        Ok(v) => return *v,
        Err(a) => a,
    };
    match any.downcast::<Vec<bool>>() {
        Ok(v) => v.iter().map(|&b| u8::from(b)).collect(),
        Err(_) => Vec::new(),
    }
}

/// The values of `bytes` holding elements of type `E` itself, bit for bit; `None` when a
/// bool byte is neither 0 nor 1.
pub(crate) fn decode_exact<E: Element>(bytes: &[u8]) -> Option<Vec<E>> {
    let any: Box<dyn Any> = match E::DTYPE {
        DType::F32 => Box::new(le(bytes, f32::from_le_bytes)),
        DType::F64 => Box::new(le(bytes, f64::from_le_bytes)),
        DType::F16 => Box::new(le(bytes, f16::from_le_bytes)),
        DType::BF16 => Box::new(le(bytes, bf16::from_le_bytes)),
        DType::I32 => Box::new(le(bytes, i32::from_le_bytes)),
        DType::I64 => Box::new(le(bytes, i64::from_le_bytes)),
        DType::U8 => Box::new(bytes.to_vec()),
        DType::Bool => {
            if bytes.iter().any(|&b| b > 1) {
                return None;
            }
            Box::new(bytes.iter().map(|&b| b == 1).collect::<Vec<bool>>())
        }
    };
    any.downcast::<Vec<E>>().ok().map(|v| *v)
}

/// The values of `bytes` of type `dtype`, widened to `f64` (exact for every float type and
/// for integers up to 2^53); `None` for types rtx does not know and for bad bool bytes.
pub(crate) fn decode_f64(dtype: Dtype, bytes: &[u8]) -> Option<Vec<f64>> {
    Some(match from_st(dtype)? {
        DType::F32 => le(bytes, |b| f32::from_le_bytes(b) as f64),
        DType::F64 => le(bytes, f64::from_le_bytes),
        DType::F16 => le(bytes, |b| f16::from_le_bytes(b).to_f64()),
        DType::BF16 => le(bytes, |b| bf16::from_le_bytes(b).to_f64()),
        DType::I32 => le(bytes, |b| i32::from_le_bytes(b) as f64),
        DType::I64 => le(bytes, |b| i64::from_le_bytes(b) as f64),
        DType::U8 => bytes.iter().map(|&b| b as f64).collect(),
        DType::Bool => {
            if bytes.iter().any(|&b| b > 1) {
                return None;
            }
            bytes.iter().map(|&b| b as f64).collect()
        }
    })
}

/// `values` (exact `f64` images of elements of `dtype`) as bytes of `dtype`: the inverse of
/// [`decode_f64`] for float types, bit for bit.
pub(crate) fn encode_f64(dtype: DType, values: &[f64]) -> Vec<u8> {
    match dtype {
        DType::F32 => values
            .iter()
            .flat_map(|&x| (x as f32).to_le_bytes())
            .collect(),
        DType::F64 => values.iter().flat_map(|x| x.to_le_bytes()).collect(),
        DType::F16 => values
            .iter()
            .flat_map(|&x| f16::from_f64(x).to_le_bytes())
            .collect(),
        DType::BF16 => values
            .iter()
            .flat_map(|&x| bf16::from_f64(x).to_le_bytes())
            .collect(),
        DType::I32 => values
            .iter()
            .flat_map(|&x| (x as i32).to_le_bytes())
            .collect(),
        DType::I64 => values
            .iter()
            .flat_map(|&x| (x as i64).to_le_bytes())
            .collect(),
        DType::U8 => values.iter().map(|&x| x as u8).collect(),
        DType::Bool => values.iter().map(|&x| u8::from(x != 0.0)).collect(),
    }
}

/// The values of `bytes` (of type `dtype`) as `E`: bit for bit when `dtype` is `E`'s type,
/// else widened to `f64` and rounded once to `E`. `None` for types rtx does not know.
pub(crate) fn decode_as<E: Element>(dtype: Dtype, bytes: &[u8]) -> Option<Vec<E>> {
    if dtype == to_st(E::DTYPE) {
        return decode_exact(bytes);
    }
    decode_f64(dtype, bytes).map(|v| v.into_iter().map(E::from_f64).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_round_trips_bit_for_bit() {
        let f = vec![
            1.5f32,
            -0.0,
            f32::MIN_POSITIVE / 2.0,
            f32::NAN,
            f32::INFINITY,
        ];
        let back: Vec<f32> = decode_exact(&encode(f.clone())).unwrap_or_default();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&back), bits(&f));
        let h = vec![bf16::from_f32(3.25), bf16::from_bits(0x0001)];
        assert_eq!(decode_exact::<bf16>(&encode(h.clone())), Some(h.clone()));
        let i = vec![i64::MIN, -1, 7];
        assert_eq!(decode_exact::<i64>(&encode(i.clone())), Some(i));
        assert_eq!(
            decode_exact::<bool>(&encode(vec![true, false])),
            Some(vec![true, false])
        );
        assert_eq!(decode_exact::<bool>(&[2]), None);
        // The f64 image of an f16 value encodes back to the same bits.
        let h16 = vec![f16::from_bits(0x0001), f16::from_f32(-65504.0)];
        let wide = decode_f64(Dtype::F16, &encode(h16.clone())).unwrap_or_default();
        assert_eq!(encode_f64(DType::F16, &wide), encode(h16));
    }

    #[test]
    fn float_casts_round_once() {
        let x = 1.0f64 + f64::EPSILON; // not an f32: rounds to 1.0
        let got: Vec<f32> = decode_as(Dtype::F64, &encode(vec![x])).unwrap_or_default();
        assert_eq!(got, vec![1.0f32]);
        let got: Vec<f32> = decode_as(Dtype::I64, &encode(vec![7i64])).unwrap_or_default();
        assert_eq!(got, vec![7.0f32]);
        assert_eq!(decode_as::<f32>(Dtype::F8_E4M3, &[0]), None);
    }
}
