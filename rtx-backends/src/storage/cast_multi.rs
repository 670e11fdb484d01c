//! Multi-tensor casts: many buffers converted to another element type in one dispatch, into
//! destination buffers that already exist (mixed-precision training copies its f32 master
//! weights into the bf16 working model's own buffers, and the working gradients back to f32,
//! each in one launch however many tensors the model has). The GPU side is in
//! `rtx-backends/src/cuda/ops_cast_multi.rs`, the CPU loop in
//! `rtx-backends/src/cpu/cast_multi.rs`.
//!
//! Invariant: every element converts exactly as [`Storage::cast`] converts it (`Element::cast`
//! on the CPU, the same conversion functions on a GPU); a scale multiplies in f32, between a
//! conversion to f32 and one from it. Destinations are written in place and keep their
//! buffers, so a captured CUDA graph may read them at fixed addresses.

use super::Storage;
use super::optim_multi::TableCache;
use crate::cuda::ops_cast_multi::{self as ops, Direction};
use crate::cuda::{CudaStorage, DevicePtr};
use crate::{BackendError, Device, Layout, Result};
use rtx_kernels::op::markers::Mul;
use rtx_kernels::{DType, Float};

const OP: &str = "cast_multi";

/// The GPU buffer of one operand, or an error naming it when it lives elsewhere.
fn on_gpu<'a, E: Float>(
    ordinal: usize,
    what: &str,
    s: &'a Storage<E>,
) -> Result<&'a CudaStorage<E>> {
    match s {
        Storage::Cuda(c) if c.ordinal() == ordinal => Ok(c),
        _ => Err(BackendError::BadArgument {
            op: OP,
            msg: format!(
                "{what} is on {}, the first source on {}",
                s.device(),
                Device::Cuda(ordinal)
            ),
        }),
    }
}

/// Which kernel converts `A` to `B` in one launch, and its element type: f32 to f32, f16 or
/// bf16, and f16 or bf16 to f32. Other pairs (f64, f16 to bf16) have none.
fn kernel_for(a: DType, b: DType) -> Option<(Direction, DType)> {
    let low = |d: DType| matches!(d, DType::F16 | DType::BF16);
    match (a, b) {
        (DType::F32, b) if b == DType::F32 || low(b) => Some((Direction::FromAcc, b)),
        (a, DType::F32) if low(a) => Some((Direction::ToAcc, a)),
        _ => None,
    }
}

impl<A: Float> Storage<A> {
    /// A buffer of `len` elements on `device` to be overwritten (by [`Storage::cast_multi`]):
    /// zeros on the CPU, left as the allocator gives it on a GPU (no upload, so it may be
    /// allocated while a CUDA graph is captured).
    ///
    /// ```
    /// use rtx_backends::{Device, Storage};
    /// assert_eq!(Storage::<f32>::uninit(Device::Cpu, 3).unwrap().len(), 3);
    /// ```
    pub fn uninit(device: Device, len: usize) -> Result<Self> {
        match device {
            Device::Cpu => Ok(Storage::Cpu(vec![A::default(); len])),
            Device::Cuda(n) => Ok(Storage::Cuda(CudaStorage::uninit(n, len)?)),
            Device::Backend(_) => Storage::full(A::default(), len, device),
        }
    }

    /// Converts every `src[t]` into `dst[t]` in place, in one dispatch: `dst[t]` (dense, as
    /// many elements as `src[t]` holds) is overwritten with `cast(src[t])`, or with
    /// `cast(f32(src[t]) * scale[0])` when a scale is given (the product in f32, the scale read
    /// on the device, so a captured graph sees its current value). Elements convert exactly as
    /// [`Storage::cast`] converts them. Every buffer is on one device.
    ///
    /// On a GPU this is one launch for f32 to f32, f16 or bf16 and for f16 or bf16 to f32 (other
    /// pairs take a few launches per tensor); `cache` keeps the launch's table of buffers on the
    /// device, uploaded again only when a buffer moves, so a launch over the same buffers can
    /// be captured in a CUDA graph. On the CPU, `cache` is not used.
    ///
    /// ```
    /// use rtx_backends::storage::TableCache;
    /// use rtx_backends::{Device, Layout, Storage, launch_count};
    /// use rtx_kernels::bf16;
    /// let w = Storage::from_vec(vec![1.0f32, 2.5], Device::Cpu).unwrap();
    /// let b = Storage::from_vec(vec![-3.0f32], Device::Cpu).unwrap();
    /// let mut w16 = Storage::from_vec(vec![bf16::ZERO; 2], Device::Cpu).unwrap();
    /// let mut b16 = Storage::from_vec(vec![bf16::ZERO; 1], Device::Cpu).unwrap();
    /// let before = launch_count(Device::Cpu);
    /// Storage::cast_multi(&[&w, &b], &mut [&mut w16, &mut b16], None, &mut TableCache::default())
    ///     .unwrap();
    /// assert_eq!(launch_count(Device::Cpu) - before, 1);
    /// assert_eq!(w16.to_vec(&Layout::contiguous(&[2])), [bf16::ONE, bf16::from_f32(2.5)]);
    /// ```
    pub fn cast_multi<B: Float>(
        src: &[&Storage<A>],
        dst: &mut [&mut Storage<B>],
        scale: Option<&Storage<f32>>,
        cache: &mut TableCache,
    ) -> Result<()> {
        if src.len() != dst.len() {
            return Err(BackendError::BadArgument {
                op: OP,
                msg: format!("{} sources for {} destinations", src.len(), dst.len()),
            });
        }
        for (t, (s, d)) in src.iter().zip(dst.iter()).enumerate() {
            if s.len() != d.len() {
                return Err(BackendError::BadArgument {
                    op: OP,
                    msg: format!(
                        "tensor {t}: {} elements cannot fill a buffer of {}",
                        s.len(),
                        d.len()
                    ),
                });
            }
        }
        if let Some(k) = scale
            && k.is_empty()
        {
            return Err(BackendError::BadArgument {
                op: OP,
                msg: "the scale holds no element".into(),
            });
        }
        let Some(first) = src.first() else {
            return Ok(());
        };
        match first.device() {
            Device::Cpu => cast_cpu(src, dst, scale),
            Device::Cuda(ordinal) => cast_gpu(ordinal, src, dst, scale, cache),
            other => Err(super::no_kernel("cast_multi", other)),
        }
    }
}

/// The CPU pass, one dispatch.
fn cast_cpu<A: Float, B: Float>(
    src: &[&Storage<A>],
    dst: &mut [&mut Storage<B>],
    scale: Option<&Storage<f32>>,
) -> Result<()> {
    let not_cpu = |what: &str, d: Device| BackendError::BadArgument {
        op: OP,
        msg: format!("{what} is on {d}, the first source on the CPU"),
    };
    let k = match scale {
        None => None,
        Some(Storage::Cpu(v)) => Some(v[0]),
        Some(s) => return Err(not_cpu("the scale", s.device())),
    };
    let mut pairs = Vec::with_capacity(src.len());
    for (t, (s, d)) in src.iter().zip(dst.iter_mut()).enumerate() {
        let dev = d.device();
        match (s, &mut **d) {
            (Storage::Cpu(s), Storage::Cpu(d)) => pairs.push((&s[..], &mut d[..])),
            (Storage::Cpu(_), _) => return Err(not_cpu(&format!("destination {t}"), dev)),
            (s, _) => return Err(not_cpu(&format!("source {t}"), s.device())),
        }
    }
    crate::dispatch::cpu();
    crate::cpu::cast_multi::cast_multi(pairs, k);
    Ok(())
}

/// The GPU launch: one for the pairs a kernel converts, else per tensor.
fn cast_gpu<A: Float, B: Float>(
    ordinal: usize,
    src: &[&Storage<A>],
    dst: &mut [&mut Storage<B>],
    scale: Option<&Storage<f32>>,
    cache: &mut TableCache,
) -> Result<()> {
    let srcs = src
        .iter()
        .enumerate()
        .map(|(t, s)| on_gpu(ordinal, &format!("source {t}"), s))
        .collect::<Result<Vec<_>>>()?;
    let dsts = dst
        .iter()
        .enumerate()
        .map(|(t, d)| on_gpu(ordinal, &format!("destination {t}"), d))
        .collect::<Result<Vec<_>>>()?;
    let k = scale.map(|k| on_gpu(ordinal, "the scale", k)).transpose()?;
    let Some((dir, dtype)) = kernel_for(A::DTYPE, B::DTYPE) else {
        return per_tensor(src, dst, scale);
    };
    let lens: Vec<usize> = srcs.iter().map(|s| s.len()).collect();
    let sp: Vec<DevicePtr> = srcs.iter().map(|c| c.device_ptr()).collect();
    let dp: Vec<DevicePtr> = dsts.iter().map(|c| c.device_ptr()).collect();
    // SAFETY: every source and destination is a buffer of `lens[t]` elements of its own type
    // on this GPU (checked above), the f32 side being the compute type of `dtype`; the scale
    // holds at least one f32. The borrows keep them alive past the launch's queueing, and the
    // caching allocator's stream order keeps a freed buffer intact for launches queued before.
    unsafe {
        ops::cast(
            ordinal,
            dir,
            dtype,
            &sp,
            &dp,
            &lens,
            k.map(|k| k.device_ptr()),
            cache,
        )
    }
}

/// The pairs no kernel converts in one launch: per tensor, through f32 when scaled.
fn per_tensor<A: Float, B: Float>(
    src: &[&Storage<A>],
    dst: &mut [&mut Storage<B>],
    scale: Option<&Storage<f32>>,
) -> Result<()> {
    for (s, d) in src.iter().zip(dst.iter_mut()) {
        let l = Layout::contiguous(&[s.len()]);
        let converted = match scale {
            None => s.cast::<B>(&l)?,
            Some(k) => {
                let kl = Layout::contiguous(&[1])
                    .broadcast_to(&[s.len()])
                    .ok_or_else(|| BackendError::BadArgument {
                        op: OP,
                        msg: format!("the scale does not broadcast to {} elements", s.len()),
                    })?;
                s.cast::<f32>(&l)?
                    .binary::<Mul>(&l, k, &kl)?
                    .cast::<B>(&l)?
            }
        };
        converted.copy_into(&l, d)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtx_kernels::{Element, bf16, f16};

    /// Tensor lengths: odd ones, an empty one, and enough elements in all to split into many
    /// parallel chunks (and, on a GPU, many of the launch's chunks).
    const LENS: [usize; 9] = [1, 0, 7, 33, 1 << 14, (1 << 14) + 1, 3, 70_001, 2];

    /// Reproducible values of every class: random bit patterns of `A` (NaN, infinities,
    /// subnormals included) mixed with values of ordinary size.
    fn sources<A: Float>(bits: impl Fn(u64) -> A) -> Vec<Storage<A>> {
        let mut s = 0x9E37_79B9_7F4A_7C15u64;
        LENS.iter()
            .map(|&n| {
                let v = (0..n)
                    .map(|i| {
                        s ^= s >> 12;
                        s ^= s << 25;
                        s ^= s >> 27;
                        let w = s.wrapping_mul(0x2545_F491_4F6C_DD1D);
                        if i % 2 == 0 {
                            bits(w)
                        } else {
                            A::from_f64((w >> 11) as f64 / (1u64 << 53) as f64 * 200.0 - 100.0)
                        }
                    })
                    .collect();
                Storage::Cpu(v)
            })
            .collect()
    }

    /// The per-tensor route: `cast`, or `cast` to f32, `Mul` by the broadcast scale and
    /// `cast` (what mixed precision did before the multi-tensor cast).
    fn reference<A: Float, B: Float>(s: &Storage<A>, k: Option<&Storage<f32>>) -> Vec<B> {
        let l = Layout::contiguous(&[s.len()]);
        let out = match k {
            None => s.cast::<B>(&l).unwrap(),
            Some(k) => {
                let kl = Layout::contiguous(&[1]).broadcast_to(&[s.len()]).unwrap();
                s.cast::<f32>(&l)
                    .unwrap()
                    .binary::<Mul>(&l, k, &kl)
                    .unwrap()
                    .cast::<B>(&l)
                    .unwrap()
            }
        };
        out.to_vec(&l)
    }

    /// Bits of `x`, with every NaN the same (Rust leaves NaN payloads of `as` unspecified).
    fn key<E: Element>(x: E) -> u64 {
        let v = x.to_f64();
        if v.is_nan() { u64::MAX } else { v.to_bits() }
    }

    fn check<A: Float, B: Float>(bits: impl Fn(u64) -> A, scale: Option<f32>) {
        let src = sources(bits);
        let k = scale.map(|k| Storage::Cpu(vec![k]));
        let mut dst: Vec<Storage<B>> = LENS
            .iter()
            .map(|&n| Storage::Cpu(vec![B::default(); n]))
            .collect();
        let refs: Vec<&Storage<A>> = src.iter().collect();
        let mut outs: Vec<&mut Storage<B>> = dst.iter_mut().collect();
        let before = crate::launch_count(Device::Cpu);
        Storage::cast_multi(&refs, &mut outs, k.as_ref(), &mut TableCache::default()).unwrap();
        assert_eq!(
            crate::launch_count(Device::Cpu) - before,
            1,
            "one dispatch for all"
        );
        for (t, (s, d)) in src.iter().zip(&dst).enumerate() {
            let want = reference::<A, B>(s, k.as_ref());
            let got = d.as_cpu_slice().unwrap();
            assert_eq!(got.len(), want.len());
            for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(
                    key(g),
                    key(w),
                    "{:?} to {:?} scale {scale:?}: tensor {t} element {i}: {g:?}, want {w:?}",
                    A::DTYPE,
                    B::DTYPE
                );
            }
        }
    }

    #[test]
    fn multi_casts_match_per_tensor_casts_bitwise() {
        let f32_bits = |w: u64| f32::from_bits((w >> 32) as u32);
        check::<f32, bf16>(f32_bits, None);
        check::<f32, f16>(f32_bits, None);
        check::<f32, bf16>(f32_bits, Some(0.25));
        let bf16_bits = |w: u64| bf16::from_bits((w >> 48) as u16);
        let f16_bits = |w: u64| f16::from_bits((w >> 48) as u16);
        check::<bf16, f32>(bf16_bits, None);
        check::<bf16, f32>(bf16_bits, Some(1.0 / 65536.0));
        check::<f16, f32>(f16_bits, Some(1.0 / 65536.0));
        check::<f16, f32>(f16_bits, Some(0.3));
        // Pairs without a one-launch kernel on a GPU convert the same way on the CPU.
        check::<f64, f16>(|w: u64| f64::from_bits(w), None);
        check::<f16, bf16>(f16_bits, Some(3.0));
    }

    #[test]
    fn bad_lists_are_errors_naming_the_tensor() {
        let a = Storage::Cpu(vec![1.0f32; 3]);
        let mut b = Storage::Cpu(vec![bf16::ZERO; 2]);
        let mut c = TableCache::default();
        let e = Storage::cast_multi(&[&a], &mut [&mut b], None, &mut c).unwrap_err();
        assert!(e.to_string().contains("tensor 0: 3 elements"), "{e}");
        let e = Storage::<f32>::cast_multi::<bf16>(&[&a], &mut [], None, &mut c).unwrap_err();
        assert!(
            e.to_string().contains("1 sources for 0 destinations"),
            "{e}"
        );
        let mut b3 = Storage::Cpu(vec![bf16::ZERO; 3]);
        let empty = Storage::Cpu(Vec::<f32>::new());
        let e = Storage::cast_multi(&[&a], &mut [&mut b3], Some(&empty), &mut c).unwrap_err();
        assert!(e.to_string().contains("scale holds no element"), "{e}");
        // Nothing to do is no dispatch.
        let before = crate::launch_count(Device::Cpu);
        Storage::<f32>::cast_multi::<bf16>(&[], &mut [], None, &mut c).unwrap();
        assert_eq!(crate::launch_count(Device::Cpu), before);
    }

    #[test]
    fn the_gpu_kernels_cover_the_mixed_precision_pairs() {
        assert_eq!(
            kernel_for(DType::F32, DType::BF16),
            Some((Direction::FromAcc, DType::BF16))
        );
        assert_eq!(
            kernel_for(DType::F32, DType::F32),
            Some((Direction::FromAcc, DType::F32))
        );
        assert_eq!(
            kernel_for(DType::F16, DType::F32),
            Some((Direction::ToAcc, DType::F16))
        );
        assert_eq!(kernel_for(DType::F64, DType::F32), None);
        assert_eq!(kernel_for(DType::F16, DType::BF16), None);
    }
}
