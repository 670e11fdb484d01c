//! Matrix products on the CPU: one strided matrix product ([`gemm_into`]) and the batched
//! product over broadcast batch dims ([`matmul`]) that the matmul and conv ops are built on.
//!
//! Floats go through the `gemm` crate (f32, f64, f16; bf16 through f32, since gemm's bf16 path
//! is a bare panic), integers through a plain loop that wraps as integer arithmetic does.
//!
//! Determinism: gemm (0.19, `gemm-common/src/gemm.rs`, `gemm_basic_generic`) blocks the product
//! by `kc`/`mc`/`nc` sizes that depend only on m, n, k, the element size and the cache sizes of
//! the machine, walks the depth blocks one after another on the calling thread, and inside a
//! depth block hands out whole MR x NR output tiles to threads (`job_start..job_end`). Every
//! output element is therefore computed by exactly one thread, in the same order of depth,
//! whatever the number of threads; only packing (a copy) is split among threads. The choice
//! between one gemm call per batch matrix with rayon inside and batch matrices in parallel is
//! made from the sizes alone, so results are bitwise reproducible on a machine.
//!
//! Speed: the workspace enables gemm's `x86-v4` feature, which adds AVX-512 kernels picked at
//! run time (`is_x86_feature_detected!("avx512f")`); without it gemm stops at AVX2+FMA even on
//! AVX-512 machines and runs at about half of MKL's speed there (1024³ f32 on one core of a
//! Sapphire Rapids: 28 ms without, 14 ms with). The kernel, like the cache sizes, is chosen
//! per machine, so results may differ in the last bits between machines, never between runs.

use super::elementwise::map;
use crate::Layout;
use rayon::prelude::*;
use rtx_kernels::{DType, Num, f16};
use std::any::TypeId;

/// A matrix inside a slice: element (i, j) sits at `offset + i * rs + j * cs`.
#[derive(Clone, Copy, Debug)]
pub struct MatRef<'a, E> {
    /// The storage the matrix lives in.
    pub data: &'a [E],
    /// The position of element (0, 0).
    pub offset: usize,
    /// The row stride, in elements.
    pub rs: usize,
    /// The column stride, in elements.
    pub cs: usize,
}

impl<'a, E: Copy> MatRef<'a, E> {
    /// A dense row-major `rows x cols` matrix at the start of `data`.
    pub fn row_major(data: &'a [E], cols: usize) -> Self {
        MatRef {
            data,
            offset: 0,
            rs: cols,
            cs: 1,
        }
    }

    #[inline(always)]
    fn at(&self, i: usize, j: usize) -> E {
        self.data[self.offset + i * self.rs + j * self.cs]
    }

    /// Panics unless every element of a `rows x cols` matrix lies inside `data`: the unsafe
    /// gemm call below relies on it.
    fn check_bounds(&self, rows: usize, cols: usize) {
        if rows > 0 && cols > 0 {
            let last = self.offset + (rows - 1) * self.rs + (cols - 1) * self.cs;
            assert!(last < self.data.len(), "matrix reaches past its storage");
        }
    }

    /// The matrix copied into a dense row-major vector, converted by `f`.
    fn to_dense<U>(self, rows: usize, cols: usize, f: impl Fn(E) -> U) -> Vec<U> {
        let mut out = Vec::with_capacity(rows * cols);
        for i in 0..rows {
            for j in 0..cols {
                out.push(f(self.at(i, j)));
            }
        }
        out
    }
}

/// Matrices with fewer multiply-adds than this are computed on one thread: splitting them
/// costs more than it saves. (gemm itself stays on one thread below 48*48*256.)
const SMALL_MATMUL: usize = 1 << 18;

/// `dst = lhs · rhs` (or `dst += lhs · rhs` when `accumulate`), with `lhs` m×k, `rhs` k×n and
/// `dst` dense row-major m×n. `parallel` lets the product use all cores.
pub fn gemm_into<E: Num>(
    (m, n, k): (usize, usize, usize),
    dst: &mut [E],
    lhs: MatRef<'_, E>,
    rhs: MatRef<'_, E>,
    accumulate: bool,
    parallel: bool,
) {
    assert_eq!(
        dst.len(),
        m * n,
        "gemm_into: destination has the wrong length"
    );
    lhs.check_bounds(m, k);
    rhs.check_bounds(k, n);
    if m == 0 || n == 0 {
        return;
    }
    if let (Some(d), Some(a), Some(b)) = (
        same_type_mut::<E, f32>(dst),
        same_type::<E, f32>(lhs.data),
        same_type::<E, f32>(rhs.data),
    ) {
        return call_gemm(
            (m, n, k),
            d,
            retype(lhs, a),
            retype(rhs, b),
            accumulate,
            parallel,
        );
    }
    if let (Some(d), Some(a), Some(b)) = (
        same_type_mut::<E, f64>(dst),
        same_type::<E, f64>(lhs.data),
        same_type::<E, f64>(rhs.data),
    ) {
        return call_gemm(
            (m, n, k),
            d,
            retype(lhs, a),
            retype(rhs, b),
            accumulate,
            parallel,
        );
    }
    if let (Some(d), Some(a), Some(b)) = (
        same_type_mut::<E, f16>(dst),
        same_type::<E, f16>(lhs.data),
        same_type::<E, f16>(rhs.data),
    ) {
        return call_gemm(
            (m, n, k),
            d,
            retype(lhs, a),
            retype(rhs, b),
            accumulate,
            parallel,
        );
    }
    if E::DTYPE == DType::BF16 {
        // bf16 -> f32 is exact, and f32 -> f64 -> bf16 rounds once, as f32 -> bf16 does.
        let a = lhs.to_dense(m, k, |x| x.to_f64() as f32);
        let b = rhs.to_dense(k, n, |x| x.to_f64() as f32);
        let mut d: Vec<f32> = if accumulate {
            dst.iter().map(|x| x.to_f64() as f32).collect()
        } else {
            vec![0.0; m * n]
        };
        let (a, b) = (MatRef::row_major(&a, k), MatRef::row_major(&b, n));
        call_gemm((m, n, k), &mut d, a, b, accumulate, parallel);
        for (o, v) in dst.iter_mut().zip(d) {
            *o = E::from_f64(v as f64);
        }
        return;
    }
    integer_gemm((m, n, k), dst, lhs, rhs, accumulate, parallel);
}

/// One call into the gemm crate, with each operand's own strides (no copy).
fn call_gemm<T: 'static + Copy + Num>(
    (m, n, k): (usize, usize, usize),
    dst: &mut [T],
    lhs: MatRef<'_, T>,
    rhs: MatRef<'_, T>,
    accumulate: bool,
    parallel: bool,
) {
    let parallelism = if parallel && m * n * k >= SMALL_MATMUL {
        gemm::Parallelism::Rayon(0)
    } else {
        gemm::Parallelism::None
    };
    // SAFETY: `gemm_into` checked that every element of the m×k lhs and the k×n rhs lies
    // inside its slice and that `dst` holds exactly m×n elements; `T` is f32, f64 or f16,
    // the three types gemm supports, and gemm computes `dst = alpha*dst + beta*lhs*rhs`.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            n as isize,
            accumulate,
            lhs.data.as_ptr().add(lhs.offset),
            lhs.cs as isize,
            lhs.rs as isize,
            rhs.data.as_ptr().add(rhs.offset),
            rhs.cs as isize,
            rhs.rs as isize,
            T::ONE,
            T::ONE,
            false,
            false,
            false,
            parallelism,
        );
    }
}

/// Output rows per parallel task of the integer loop.
const INT_ROWS: usize = 16;

/// The integer product: row by row, each output row accumulated over k in order (wrapping).
fn integer_gemm<E: Num>(
    (m, n, k): (usize, usize, usize),
    dst: &mut [E],
    lhs: MatRef<'_, E>,
    rhs: MatRef<'_, E>,
    accumulate: bool,
    parallel: bool,
) {
    if !accumulate {
        dst.fill(E::ZERO);
    }
    let rows = |first: usize, block: &mut [E]| {
        for (r, out) in block.chunks_mut(n).enumerate() {
            let i = first + r;
            for p in 0..k {
                let a = lhs.at(i, p);
                if a == E::ZERO {
                    continue;
                }
                for (j, o) in out.iter_mut().enumerate() {
                    *o = o.add(a.mul(rhs.at(p, j)));
                }
            }
        }
    };
    if parallel && m * n * k >= SMALL_MATMUL {
        dst.par_chunks_mut(INT_ROWS * n)
            .enumerate()
            .for_each(|(c, block)| rows(c * INT_ROWS, block));
    } else {
        rows(0, dst);
    }
}

/// Whether a matrix with these sizes and strides has a unit stride along rows or columns, so
/// gemm can read it in place.
fn unit_strided(rows: usize, cols: usize, rs: usize, cs: usize) -> bool {
    cs == 1 || rs == 1 || cols <= 1 || rows <= 1
}

/// The batched product of `a` (`[batch.., M, K]`) and `b` (`[batch.., K, N]`), whose layouts
/// have the same rank (at least 2) and the same batch sizes (broadcast batch dims have stride
/// 0), as a dense row-major `[batch.., M, N]` vector.
pub fn matmul<E: Num>(a: &[E], la: &Layout, b: &[E], lb: &Layout) -> Vec<E> {
    let r = la.rank();
    debug_assert!(r >= 2 && lb.rank() == r && la.dims()[..r - 2] == lb.dims()[..r - 2]);
    let (m, k, n) = (la.dims()[r - 2], la.dims()[r - 1], lb.dims()[r - 1]);
    debug_assert_eq!(lb.dims()[r - 2], k);

    // Matrices gemm cannot read in place are copied once into dense row-major storage.
    let (a_dense, b_dense);
    let (a, la) = if unit_strided(m, k, la.strides()[r - 2], la.strides()[r - 1]) {
        (a, *la)
    } else {
        a_dense = map(a, la, |x| x);
        (&a_dense[..], Layout::contiguous(la.dims()))
    };
    let (b, lb) = if unit_strided(k, n, lb.strides()[r - 2], lb.strides()[r - 1]) {
        (b, *lb)
    } else {
        b_dense = map(b, lb, |x| x);
        (&b_dense[..], Layout::contiguous(lb.dims()))
    };

    let batch = &la.dims()[..r - 2];
    let a_offsets: Vec<usize> = Layout::new(batch, &la.strides()[..r - 2], la.offset())
        .offsets_from(0)
        .collect();
    let b_offsets: Vec<usize> = Layout::new(batch, &lb.strides()[..r - 2], lb.offset())
        .offsets_from(0)
        .collect();
    let (a_rs, a_cs) = (la.strides()[r - 2], la.strides()[r - 1]);
    let (b_rs, b_cs) = (lb.strides()[r - 2], lb.strides()[r - 1]);

    let mut out = vec![E::ZERO; a_offsets.len() * m * n];
    if out.is_empty() {
        return out;
    }
    let one = |i: usize, dst: &mut [E], parallel: bool| {
        let lhs = MatRef {
            data: a,
            offset: a_offsets[i],
            rs: a_rs,
            cs: a_cs,
        };
        let rhs = MatRef {
            data: b,
            offset: b_offsets[i],
            rs: b_rs,
            cs: b_cs,
        };
        gemm_into((m, n, k), dst, lhs, rhs, false, parallel);
    };
    if a_offsets.len() > 1 && m * n * k < SMALL_MATMUL {
        out.par_chunks_mut(m * n)
            .enumerate()
            .for_each(|(i, dst)| one(i, dst, false));
    } else {
        for (i, dst) in out.chunks_mut(m * n).enumerate() {
            one(i, dst, true);
        }
    }
    out
}

/// `s` as a slice of `T` when `E` is `T`.
pub(super) fn same_type<E: 'static, T: 'static>(s: &[E]) -> Option<&[T]> {
    // SAFETY: the type ids are equal, so `E` and `T` are the same type.
    (TypeId::of::<E>() == TypeId::of::<T>())
        .then(|| unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<T>(), s.len()) })
}

/// `s` as a mutable slice of `T` when `E` is `T`.
pub(super) fn same_type_mut<E: 'static, T: 'static>(s: &mut [E]) -> Option<&mut [T]> {
    if TypeId::of::<E>() == TypeId::of::<T>() {
        // SAFETY: the type ids are equal, so `E` and `T` are the same type.
        Some(unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast::<T>(), s.len()) })
    } else {
        None
    }
}

/// The same matrix over its storage seen as the concrete type `T`.
fn retype<'a, E, T>(m: MatRef<'_, E>, data: &'a [T]) -> MatRef<'a, T> {
    MatRef {
        data,
        offset: m.offset,
        rs: m.rs,
        cs: m.cs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtx_kernels::bf16;

    fn naive(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
        let mut out = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                out[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
            }
        }
        out
    }

    #[test]
    fn every_type_matches_a_naive_product() {
        let (m, k, n) = (5, 7, 3);
        let a: Vec<f64> = (0..m * k).map(|i| (i % 5) as f64 - 2.0).collect();
        let b: Vec<f64> = (0..k * n).map(|i| (i % 3) as f64 - 1.0).collect();
        let want = naive(&a, &b, m, k, n);
        fn run<E: Num>(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
            let a: Vec<E> = a.iter().map(|&x| E::from_f64(x)).collect();
            let b: Vec<E> = b.iter().map(|&x| E::from_f64(x)).collect();
            let la = Layout::contiguous(&[m, k]);
            let lb = Layout::contiguous(&[k, n]);
            matmul(&a, &la, &b, &lb)
                .iter()
                .map(|x| x.to_f64())
                .collect()
        }
        assert_eq!(run::<f32>(&a, &b, m, k, n), want);
        assert_eq!(run::<f64>(&a, &b, m, k, n), want);
        assert_eq!(run::<f16>(&a, &b, m, k, n), want);
        assert_eq!(run::<bf16>(&a, &b, m, k, n), want);
        assert_eq!(run::<i32>(&a, &b, m, k, n), want);
        assert_eq!(run::<i64>(&a, &b, m, k, n), want);
    }

    #[test]
    fn large_products_are_bitwise_reproducible() {
        let (m, k, n) = (130, 300, 90);
        let a: Vec<f32> = (0..m * k)
            .map(|i| ((i * 7919) % 1000) as f32 / 997.0)
            .collect();
        let b: Vec<f32> = (0..k * n)
            .map(|i| ((i * 104729) % 1000) as f32 / 991.0)
            .collect();
        let la = Layout::contiguous(&[m, k]);
        let lb = Layout::contiguous(&[k, n]);
        let first = matmul(&a, &la, &b, &lb);
        let single = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let again = single.install(|| matmul(&a, &la, &b, &lb));
        assert!(
            first
                .iter()
                .zip(&again)
                .all(|(x, y)| x.to_bits() == y.to_bits())
        );
    }
}
