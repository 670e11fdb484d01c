//! Dequantization of ggml's block formats (the types of GGUF files): one SIMT kernel,
//! [`dequantize_ggml`], with one thread per output element in a grid-stride loop, and a
//! device function per family of formats. The blocks arrive as little-endian 32-bit words
//! (the bytes zero-padded to a multiple of 4), read a byte or half-word at a time.
//!
//! Invariant: each formula is `gguf.quants.dequantize` of the `gguf` Python package (0.19.0)
//! operation for operation, in the compute type (f32 for the f32 entry, which rtx launches):
//! f16, bf16 and f32 bit patterns are decoded by exact arithmetic (an integer significand
//! times a power of two), and every product that feeds an addition is exact, so the result is
//! bitwise the reference's on every device, with or without fused multiply-adds.

use crate::Float;
use rtx_macros::kernel;

/// Byte `at` of the blocks held as little-endian words `q`.
#[kernel(device, crate = crate)]
pub fn ggml_byte<T: Float>(q: &[i32], at: usize) -> u32 {
    ((q[at >> 2] as u32) >> ((at & 3) * 8)) & 255
}

/// The little-endian 16 bits at the even byte offset `at` (which never straddle two words).
#[kernel(device, crate = crate)]
pub fn ggml_half<T: Float>(q: &[i32], at: usize) -> u32 {
    ((q[at >> 2] as u32) >> ((at & 2) * 8)) & 65535
}

/// `x * 2^k`, exact whenever the result is representable: a chain of multiplications (or
/// divisions) by powers of two, none of which rounds, since each step's result has `x`'s
/// significand and lies between `x` and the result.
#[kernel(device, crate = crate)]
pub fn ggml_ldexp<T: Float>(x: T, k: i32) -> T {
    let mut v = x;
    let mut e = k;
    while e > 24 {
        v *= 16777216.0;
        e -= 24;
    }
    while e < -24 {
        v /= 16777216.0;
        e += 24;
    }
    if e >= 0 {
        v * ((1u32 << (e as u32)) as T)
    } else {
        v / ((1u32 << ((-e) as u32)) as T)
    }
}

/// The value of a float bit pattern of `exp_bits` exponent bits and `man_bits` significand
/// bits (f16: 5 and 10, bf16: 8 and 7, f32: 8 and 23), decoded exactly; NaN patterns give
/// `T::NAN`.
#[kernel(device, crate = crate)]
pub fn ggml_float_bits<T: Float>(bits: u32, exp_bits: u32, man_bits: u32) -> T {
    let emax = (1u32 << exp_bits) - 1;
    let bias = (emax >> 1) as i32;
    let e = (bits >> man_bits) & emax;
    let m = bits & ((1u32 << man_bits) - 1);
    let v = if e == emax {
        if m == 0 { T::INFINITY } else { T::NAN }
    } else if e == 0 {
        ggml_ldexp(m as T, 1 - bias - man_bits as i32)
    } else {
        ggml_ldexp(
            (m | (1u32 << man_bits)) as T,
            e as i32 - bias - man_bits as i32,
        )
    };
    if (bits >> (exp_bits + man_bits)) & 1 == 1 {
        -v
    } else {
        v
    }
}

/// The f16 at the even byte offset `at`, widened exactly (numpy's `astype(np.float32)`):
/// [`ggml_float_bits`]'s value without its loops, as every block scale is decoded this way:
/// the significand times `2^e` is exact in f32 (at most 11 bits times a power of two below
/// 2^31), and so is the scaling by a power of two after it.
#[kernel(device, crate = crate)]
pub fn ggml_f16_at<T: Float>(q: &[i32], at: usize) -> T {
    let h: u32 = ggml_half(q, at);
    ggml_f16(h)
}

/// The f16 of bit pattern `h` (its low 16 bits), widened exactly: see [`ggml_f16_at`].
#[kernel(device, crate = crate)]
pub fn ggml_f16<T: Float>(h: u32) -> T {
    let e = (h >> 10) & 31;
    let m = h & 1023;
    let v: T = if e == 31 {
        if m == 0 { T::INFINITY } else { T::NAN }
    } else if e == 0 {
        (m as T) * (1.0 / 16777216.0)
    } else {
        ((m | 1024) as T) * ((1u32 << e) as T) * (1.0 / 33554432.0)
    };
    if (h >> 15) & 1 == 1 { -v } else { v }
}

/// A signed byte from its bits.
#[kernel(device, crate = crate)]
pub fn ggml_i8<T: Float>(b: u32) -> i32 {
    if b >= 128 { b as i32 - 256 } else { b as i32 }
}

/// Element `j` (of 32) of the 4- and 5-bit block at byte `base` of type `kind` (2: Q4_0,
/// 3: Q4_1, 6: Q5_0, 7: Q5_1): `d * (q - 8)`, `d * q + m`, `d * (q - 16)`, `d * q + m`.
#[kernel(device, crate = crate)]
pub fn ggml_q4_q5<T: Float>(q: &[i32], base: usize, j: usize, kind: u32) -> T {
    let d: T = ggml_f16_at(q, base);
    let has_min = kind == 3 || kind == 7;
    let five = kind == 6 || kind == 7;
    let mut qs = base + 2;
    if has_min {
        qs += 2;
    }
    let mut high: u32 = 0;
    if five {
        // Bit j of the little-endian u32 `qh`: bit j % 8 of its byte j / 8.
        let b: u32 = ggml_byte(q, qs + j / 8);
        high = ((b >> (j % 8)) & 1) << 4;
        qs += 4;
    }
    let b: u32 = ggml_byte(q, qs + j % 16);
    let low = (b >> ((j / 16) * 4)) & 15;
    let v = low | high;
    if has_min {
        let m: T = ggml_f16_at(q, base + 2);
        d * (v as T) + m
    } else {
        let offset: i32 = if five { 16i32 } else { 8i32 };
        d * ((v as i32 - offset) as T)
    }
}

/// Element `j` (of 32) of the Q8_0 block at byte `base`: `x * d`.
#[kernel(device, crate = crate)]
pub fn ggml_q8_0<T: Float>(q: &[i32], base: usize, j: usize) -> T {
    let d: T = ggml_f16_at(q, base);
    let b: u32 = ggml_byte(q, base + 2 + j);
    let x: i32 = ggml_i8(b);
    (x as T) * d
}

/// Element `j` (of 256) of the Q4_K (`kind` 12) or Q5_K (13) block at byte `base`:
/// `(d * sc) * q - dmin * m`, with sub-block `j / 32`'s 6-bit scale and minimum unpacked as
/// `Q4_K.get_scale_min` does.
#[kernel(device, crate = crate)]
pub fn ggml_q45_k<T: Float>(q: &[i32], base: usize, j: usize, kind: u32) -> T {
    let d: T = ggml_f16_at(q, base);
    let dmin: T = ggml_f16_at(q, base + 2);
    let s = j / 32;
    let scales = base + 4;
    // The 12 scale bytes as three rows of four: `d`, `m` and `m_d` in gguf's names.
    let t = s % 4;
    let dv: u32 = ggml_byte(q, scales + t);
    let mv: u32 = ggml_byte(q, scales + 4 + t);
    let md: u32 = ggml_byte(q, scales + 8 + t);
    let sc = if s < 4 {
        dv & 63
    } else {
        (md & 15) | ((dv >> 2) & 48)
    };
    let mn = if s < 4 {
        mv & 63
    } else {
        (md >> 4) | ((mv >> 2) & 48)
    };
    let mut qs = base + 16;
    let mut high: u32 = 0;
    if kind == 13 {
        let b: u32 = ggml_byte(q, qs + j % 32);
        high = ((b >> s) & 1) << 4;
        qs += 32;
    }
    let b: u32 = ggml_byte(q, qs + (s / 2) * 32 + j % 32);
    let low = (b >> ((s % 2) * 4)) & 15;
    let dl = d * (sc as T);
    let ml = dmin * (mn as T);
    dl * ((low | high) as T) - ml
}

/// Element `j` (of 256) of the Q6_K block at byte `base`: `(d * scale) * (q - 32)`, with the
/// 8-bit scale of sub-block `j / 16`.
#[kernel(device, crate = crate)]
pub fn ggml_q6_k<T: Float>(q: &[i32], base: usize, j: usize) -> T {
    let half = j / 128;
    let r = j % 128;
    let bl: u32 = ggml_byte(q, base + half * 64 + r % 64);
    let low = (bl >> ((r / 64) * 4)) & 15;
    let bh: u32 = ggml_byte(q, base + 128 + half * 32 + r % 32);
    let high = (bh >> ((r / 32) * 2)) & 3;
    let bs: u32 = ggml_byte(q, base + 192 + j / 16);
    let scale: i32 = ggml_i8(bs);
    let d: T = ggml_f16_at(q, base + 208);
    let dl = d * (scale as T);
    dl * (((low | (high << 4)) as i32 - 32) as T)
}

/// The first `n` values of the ggml blocks `q` (little-endian words) of type `kind`, the GGUF
/// type id (0: F32, 1: F16, 30: BF16, 2, 3, 6, 7, 8: Q4_0 to Q8_0, 12, 13, 14: Q4_K to Q6_K),
/// with `block` elements in `type_size` bytes per block, into `out`. Any grid works.
///
/// ```
/// use rtx_kernels::{kernels::dequantize_ggml, kernel::LaunchConfig};
/// // One Q8_0 block: scale 0.5 (f16 0x3800), then the bytes 0, 1, 2, ... 31.
/// let mut bytes = vec![0x00, 0x38];
/// bytes.extend(0..32u8);
/// bytes.resize(36, 0);
/// let words: Vec<i32> = bytes.chunks(4).map(|c| i32::from_le_bytes(c.try_into().unwrap())).collect();
/// let mut out = vec![0.0f32; 32];
/// dequantize_ggml(LaunchConfig::new(1, 32), &words, &mut out, 8, 32, 34, 32).unwrap();
/// assert_eq!(out[3], 1.5);
/// ```
#[kernel(crate = crate)]
pub fn dequantize_ggml<T: Float>(
    q: &[i32],
    out: &mut [T],
    kind: u32,
    block: usize,
    type_size: usize,
    n: usize,
) {
    let step = block_dim_x() * grid_dim_x();
    let mut i = block_idx_x() * block_dim_x() + thread_idx_x();
    while i < n {
        let base = (i / block) * type_size;
        let j = i % block;
        let v: T = if kind == 0 {
            ggml_float_bits(q[i] as u32, 8, 23)
        } else if kind == 1 {
            ggml_f16_at(q, 2 * i)
        } else if kind == 30 {
            let h: u32 = ggml_half(q, 2 * i);
            ggml_float_bits(h, 8, 7)
        } else if kind == 8 {
            ggml_q8_0(q, base, j)
        } else if kind == 12 || kind == 13 {
            ggml_q45_k(q, base, j, kind)
        } else if kind == 14 {
            ggml_q6_k(q, base, j)
        } else {
            ggml_q4_q5(q, base, j, kind)
        };
        out[i] = v;
        i += step;
    }
}
