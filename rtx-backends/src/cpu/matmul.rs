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
//! Outputs of large float products are not zero-filled first (gemm writes every element of
//! them), and a parallel product started outside the rayon pool runs inside it, so that gemm's
//! several handoffs per product do not each wait for a pool thread to wake.

use super::CHUNK;
use super::elementwise::{INLINE, advise_huge_pages, map};
use crate::Layout;
use rtx_kernels::op::BinaryOpT;
use rtx_kernels::op::markers::Add;
use rtx_kernels::{DType, Num, f16};
use std::any::TypeId;
use std::mem::MaybeUninit;

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

/// gemm's own threshold (`gemm_common::gemm::DEFAULT_THREADING_THRESHOLD`): it computes
/// smaller products on one thread even when given the pool, so they are not moved into it.
const GEMM_THREADS_FROM: usize = 48 * 48 * 256;

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
    assert_eq!(
        dst.len(),
        m * n,
        "call_gemm: destination has the wrong length"
    );
    // SAFETY: `dst` holds exactly m×n initialized elements, which gemm reads only when
    // `accumulate` asks it to.
    unsafe { call_gemm_raw((m, n, k), dst.as_mut_ptr(), lhs, rhs, accumulate, parallel) }
}

/// [`call_gemm`] into raw memory.
///
/// # Safety
/// `dst` points to m×n writable elements (row-major); when `accumulate` they must be
/// initialized. Without `accumulate`, gemm's main kernels write every element without reading
/// it (its small-matrix and vector paths may read first: callers pass uninitialized memory
/// only for matrices that take the main path, see [`WRITES_WITHOUT_READING`]). `lhs` and
/// `rhs` passed `check_bounds` for m×k and k×n.
unsafe fn call_gemm_raw<T: 'static + Copy + Num>(
    (m, n, k): (usize, usize, usize),
    dst: *mut T,
    lhs: MatRef<'_, T>,
    rhs: MatRef<'_, T>,
    accumulate: bool,
    parallel: bool,
) {
    let parallel = parallel && m * n * k >= GEMM_THREADS_FROM && rayon::current_num_threads() > 1;
    let parallelism = if parallel {
        gemm::Parallelism::Rayon(0)
    } else {
        gemm::Parallelism::None
    };
    let run = |dst: *mut T| {
        // SAFETY: the caller's contract: every element of the m×k lhs and the k×n rhs lies
        // inside its slice and `dst` holds m×n elements; `T` is f32, f64 or f16, the three
        // types gemm supports, and gemm computes `dst = alpha*dst + beta*lhs*rhs`.
        unsafe {
            gemm::gemm(
                m,
                n,
                k,
                dst,
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
    };
    if parallel && rayon::current_thread_index().is_none() {
        // gemm hands work to the pool several times per product (packing, then the tiles of
        // each depth block). From a thread outside the pool each handoff blocks the caller
        // until a pool thread wakes; run inside the pool, the product pays that once.
        let dst = SendPtr(dst);
        rayon::scope(move |_| run(dst.get()));
    } else {
        run(dst);
    }
}

/// A raw output pointer moved into the pool for the duration of one product.
struct SendPtr<T>(*mut T);

impl<T> SendPtr<T> {
    /// The pointer (a method, so that a closure captures the whole wrapper, not the field).
    fn get(&self) -> *mut T {
        self.0
    }
}
// SAFETY: the pointer is used by one product at a time, which the caller waits for, and the
// elements it points to (f32, f64, f16) are plain data.
unsafe impl<T: Send> Send for SendPtr<T> {}
// SAFETY: as above; gemm splits the writes among its threads by disjoint tiles.
unsafe impl<T: Send> Sync for SendPtr<T> {}

/// The smallest sides of a product that gemm computes through its main kernels, which write
/// the output without reading it when not accumulating: below, gemm may take a vector or a
/// small-matrix path that copies the output first, so such outputs are zeroed beforehand.
const WRITES_WITHOUT_READING: usize = 17;

/// `dst = lhs · rhs` into fresh memory, writing every element of `dst` (m×n, row-major).
/// Large float products skip zero-filling the output, which gemm would overwrite anyway.
fn gemm_uninit<E: Num>(
    (m, n, k): (usize, usize, usize),
    dst: &mut [MaybeUninit<E>],
    lhs: MatRef<'_, E>,
    rhs: MatRef<'_, E>,
    parallel: bool,
) {
    assert_eq!(
        dst.len(),
        m * n,
        "gemm_uninit: destination has the wrong length"
    );
    lhs.check_bounds(m, k);
    rhs.check_bounds(k, n);
    let direct = k > 0 && m >= WRITES_WITHOUT_READING && n >= WRITES_WITHOUT_READING;
    if direct {
        macro_rules! direct {
            ($t:ty) => {
                if let (Some(a), Some(b)) =
                    (same_type::<E, $t>(lhs.data), same_type::<E, $t>(rhs.data))
                {
                    // SAFETY: `dst` holds m×n elements of `E`, which is `$t`; the sides are
                    // large enough for gemm's main kernels, which write each element without
                    // reading it; the operands passed `check_bounds`.
                    unsafe {
                        call_gemm_raw(
                            (m, n, k),
                            dst.as_mut_ptr().cast::<$t>(),
                            retype(lhs, a),
                            retype(rhs, b),
                            false,
                            parallel,
                        )
                    };
                    return;
                }
            };
        }
        direct!(f32);
        direct!(f64);
        direct!(f16);
    }
    for d in dst.iter_mut() {
        d.write(E::ZERO);
    }
    // SAFETY: every element was just initialized, and `MaybeUninit<E>` has `E`'s layout.
    let dst = unsafe { &mut *(dst as *mut [MaybeUninit<E>] as *mut [E]) };
    gemm_into((m, n, k), dst, lhs, rhs, false, parallel);
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
        super::for_chunks_mut(dst, INT_ROWS * n, &|c, block| rows(c * INT_ROWS, block));
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
    matmul_onto(a, la, b, lb, None)
}

/// One `[M, K]` by `[K, N]` product with `bias` (`[N]`, viewed by `bl`) added to every row:
/// a Linear's forward. The output's rows start as copies of the bias and the product
/// accumulates onto them, so the bias costs no second pass over the output (the sum's order
/// differs from a product followed by an add in the last bits, never between runs).
pub fn matmul_bias<E: Num>(
    a: &[E],
    la: &Layout,
    b: &[E],
    lb: &Layout,
    bias: &[E],
    bl: &Layout,
) -> Vec<E> {
    matmul_bias_then(a, la, b, lb, bias, bl, &|_| {})
}

/// What [`matmul_bias_then`] does to each block of output rows once its product is done.
pub type BlockEpilogue<'a, E> = &'a (dyn Fn(&mut [E]) + Sync);

/// [`matmul_bias`] with `then` applied to each block of whole output rows as soon as its
/// product is done, while the block is still in cache: a Linear and its activation in one
/// pass over the output instead of two. `then` must treat every element alike (an elementwise
/// op), since the blocks depend on the sizes.
pub fn matmul_bias_then<E: Num>(
    a: &[E],
    la: &Layout,
    b: &[E],
    lb: &Layout,
    bias: &[E],
    bl: &Layout,
    then: BlockEpilogue<'_, E>,
) -> Vec<E> {
    debug_assert!(la.rank() == 2 && bl.dims() == [lb.dims()[1]]);
    let row: Vec<E> = map(bias, bl, |x| x);
    matmul_onto(a, la, b, lb, Some((&row, then)))
}

/// [`matmul`], or with `row` (as long as the product's last dim) the product added onto
/// copies of that row, each block of rows then passed to the epilogue.
fn matmul_onto<E: Num>(
    a: &[E],
    la: &Layout,
    b: &[E],
    lb: &Layout,
    row: Option<(&[E], BlockEpilogue<'_, E>)>,
) -> Vec<E> {
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

    let total = a_offsets.len() * m * n;
    if total == 0 {
        return Vec::new();
    }
    if let Some((row, then)) = row {
        debug_assert!(a_offsets.len() == 1 && row.len() == n);
        let lhs = MatRef {
            data: a,
            offset: a_offsets[0],
            rs: a_rs,
            cs: a_cs,
        };
        let rhs = MatRef {
            data: b,
            offset: b_offsets[0],
            rs: b_rs,
            cs: b_cs,
        };
        return bias_product((m, n, k), lhs, rhs, row, then);
    }
    let mut out: Vec<E> = Vec::with_capacity(total);
    advise_huge_pages(&mut out);
    let spare = &mut out.spare_capacity_mut()[..total];
    let one = |i: usize, dst: &mut [MaybeUninit<E>], parallel: bool| {
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
        gemm_uninit((m, n, k), dst, lhs, rhs, parallel);
    };
    if a_offsets.len() > 1 && m * n * k < SMALL_MATMUL {
        super::for_chunks_mut(spare, m * n, &|i, dst| one(i, dst, false));
    } else {
        for (i, dst) in spare.chunks_mut(m * n).enumerate() {
            one(i, dst, true);
        }
    }
    // SAFETY: `gemm_uninit` wrote every element of each of the batch matrices, which cover
    // 0..total.
    unsafe { out.set_len(total) };
    out
}

/// `then(lhs · rhs + row)` (m×k by k×n, `row` added to every output row) into fresh memory:
/// one product over all cores, then the bias and `then` over blocks of rows in parallel, each
/// block in cache for both. One product packs the weights once per thread; a product per
/// block of rows (the bias rows written first and the product added onto them) packs them
/// once per block, which cost a fifth more on the MiniLM shapes of benches/README.md. Each
/// element is `then(product + bias)`, the bits of a product followed by the two elementwise
/// ops, and the blocks do not depend on the number of threads.
fn bias_product<E: Num>(
    (m, n, k): (usize, usize, usize),
    lhs: MatRef<'_, E>,
    rhs: MatRef<'_, E>,
    row: &[E],
    then: BlockEpilogue<'_, E>,
) -> Vec<E> {
    let total = m * n;
    let mut out: Vec<E> = Vec::with_capacity(total);
    advise_huge_pages(&mut out);
    gemm_uninit(
        (m, n, k),
        &mut out.spare_capacity_mut()[..total],
        lhs,
        rhs,
        true,
    );
    // SAFETY: `gemm_uninit` wrote all m×n elements.
    unsafe { out.set_len(total) };
    let finish = |rows: &mut [E]| {
        for r in rows.chunks_mut(n) {
            for (d, b) in r.iter_mut().zip(row) {
                *d = Add::apply(*d, *b);
            }
        }
        then(rows);
    };
    if total <= INLINE {
        finish(&mut out);
    } else {
        super::for_chunks_mut(&mut out, (CHUNK / n).max(1) * n, &|_, rows| finish(rows));
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

    /// A Linear's product with its bias, read through a strided view, against the naive
    /// product plus the bias; small integers, so every type must match exactly.
    #[test]
    fn products_with_a_bias_add_it_to_every_row() {
        fn run<E: Num>(m: usize, k: usize, n: usize, transposed_rhs: bool) {
            let a: Vec<f64> = (0..m * k).map(|i| (i % 5) as f64 - 2.0).collect();
            let b: Vec<f64> = (0..k * n).map(|i| (i % 7) as f64 - 3.0).collect();
            // Strided and offset, as a view into a larger tensor would be; integers, so i64 holds it.
            let bias: Vec<f64> = (0..2 * n).map(|i| i as f64 - 3.0).collect();
            let conv = |x: &[f64]| x.iter().map(|&v| E::from_f64(v)).collect::<Vec<E>>();
            let (bv, lb) = if transposed_rhs {
                let mut t = vec![0.0; k * n];
                for i in 0..k {
                    for j in 0..n {
                        t[j * k + i] = b[i * n + j];
                    }
                }
                (conv(&t), Layout::contiguous(&[n, k]).transpose(0, 1))
            } else {
                (conv(&b), Layout::contiguous(&[k, n]))
            };
            let bias_layout = Layout::new(&[n], &[2], 1);
            let got: Vec<f64> = matmul_bias(
                &conv(&a),
                &Layout::contiguous(&[m, k]),
                &bv,
                &lb,
                &conv(&bias),
                &bias_layout,
            )
            .iter()
            .map(|x| x.to_f64())
            .collect();
            let mut want = naive(&a, &b, m, k, n);
            for (i, w) in want.iter_mut().enumerate() {
                *w += bias[1 + 2 * (i % n)];
            }
            assert_eq!(got, want, "{m}x{k}x{n}, transposed rhs {transposed_rhs}");
        }
        // 700 rows of 100 take `bias_product`'s parallel pass over blocks of 163 rows, the
        // last one partial; the smaller ones its pass on the calling thread.
        for (m, k, n) in [
            (37, 19, 41),
            (3, 4, 5),
            (130, 70, 20),
            (300, 7, 40),
            (700, 9, 100),
            (0, 3, 4),
            (4, 0, 3),
        ] {
            for t in [false, true] {
                run::<f32>(m, k, n, t);
                run::<f64>(m, k, n, t);
                run::<i64>(m, k, n, t);
            }
        }
        // bf16 holds these sums exactly only while they stay small.
        run::<bf16>(3, 4, 5, false);
        run::<bf16>(3, 4, 5, true);
    }

    /// The epilogue of [`matmul_bias_then`] sees every output element once, after the bias:
    /// on the calling thread for a small output and over blocks of rows for a large one.
    #[test]
    fn the_epilogue_follows_the_bias_on_every_row() {
        for (m, k, n) in [(5, 3, 4), (700, 9, 100), (1000, 2, 33)] {
            let a: Vec<f32> = (0..m * k).map(|i| (i % 5) as f32 - 2.0).collect();
            let b: Vec<f32> = (0..k * n).map(|i| (i % 7) as f32 - 3.0).collect();
            let bias: Vec<f32> = (0..n).map(|i| i as f32 - 1.0).collect();
            let (la, lb, bl) = (
                Layout::contiguous(&[m, k]),
                Layout::contiguous(&[k, n]),
                Layout::contiguous(&[n]),
            );
            let plain = matmul_bias(&a, &la, &b, &lb, &bias, &bl);
            let then = matmul_bias_then(&a, &la, &b, &lb, &bias, &bl, &|rows| {
                assert_eq!(rows.len() % n, 0, "a block of whole rows");
                for v in rows {
                    *v = *v * 2.0 + 1.0;
                }
            });
            let want: Vec<f32> = plain.iter().map(|v| v * 2.0 + 1.0).collect();
            assert_eq!(then, want, "{m}x{k}x{n}");
        }
    }

    /// Products large enough to skip zero-filling the output (each side at least
    /// `WRITES_WITHOUT_READING`) against the naive product, with row-major, transposed and
    /// batched operands and an empty depth; the inputs are small integers, so every float
    /// type must match exactly.
    #[test]
    fn unfilled_outputs_are_fully_written() {
        fn run<E: Num>(m: usize, k: usize, n: usize, transpose: (bool, bool), batch: usize) {
            let a: Vec<f64> = (0..batch * m * k).map(|i| (i % 5) as f64 - 2.0).collect();
            let b: Vec<f64> = (0..batch * k * n).map(|i| (i % 7) as f64 - 3.0).collect();
            // A transposed operand is stored as its transpose and viewed back through strides.
            let store = |x: &[f64], r: usize, c: usize, t: bool| -> (Vec<E>, Layout) {
                if !t {
                    let v = x.iter().map(|&v| E::from_f64(v)).collect();
                    return (v, Layout::contiguous(&[batch, r, c]));
                }
                let mut v = vec![E::ZERO; x.len()];
                for (p, mat) in x.chunks((r * c).max(1)).enumerate() {
                    for i in 0..r {
                        for j in 0..c {
                            v[p * r * c + j * r + i] = E::from_f64(mat[i * c + j]);
                        }
                    }
                }
                (v, Layout::contiguous(&[batch, c, r]).transpose(1, 2))
            };
            let (av, la) = store(&a, m, k, transpose.0);
            let (bv, lb) = store(&b, k, n, transpose.1);
            if transpose.0 && m > 1 && k > 1 {
                assert!(!la.is_contiguous());
            }
            let got: Vec<f64> = matmul(&av, &la, &bv, &lb)
                .iter()
                .map(|x| x.to_f64())
                .collect();
            let mut want = Vec::new();
            for p in 0..batch {
                want.extend(naive(
                    &a[p * m * k..(p + 1) * m * k],
                    &b[p * k * n..(p + 1) * k * n],
                    m,
                    k,
                    n,
                ));
            }
            assert_eq!(
                got, want,
                "{m}x{k}x{n}, transposed {transpose:?}, batch {batch}"
            );
        }
        for (m, k, n) in [
            (37, 19, 41),
            (17, 1, 17),
            (40, 0, 33),
            (16, 5, 64),
            (130, 70, 20),
        ] {
            for t in [(false, false), (true, false), (false, true), (true, true)] {
                run::<f32>(m, k, n, t, 1);
                run::<f64>(m, k, n, t, 2);
                run::<f16>(m, k, n, t, 1);
                run::<i32>(m, k, n, t, 2);
            }
        }
        // Outputs are written in place of whatever the allocator hands back: a product after
        // a freed buffer full of other values must not see them.
        drop(vec![f32::NAN; 37 * 41]);
        run::<f32>(37, 19, 41, (false, false), 1);
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
