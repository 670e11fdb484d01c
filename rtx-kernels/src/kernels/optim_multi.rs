//! Multi-tensor optimizer kernels: one launch updates (or measures, or scales) every tensor of
//! one element type, addressed through tables of buffers (`&[&[T]]`, `&[&mut [T]]`).
//!
//! Work is split into fixed chunks of at most `chunk` elements of one tensor: chunk `c` covers
//! `rows[c]`'s elements `starts[c] .. min(starts[c] + chunk, lens[rows[c]])`, so blocks get
//! even work whatever the tensors' sizes. Block `b` takes chunks `b`, `b + grid`, ...; its
//! threads stride through a chunk. Any grid works.
//!
//! Invariant: each element of the updates goes through exactly the per-tensor kernels'
//! (`optim.rs`) sequence of operations and roundings, and the updates work in place (each
//! thread reads an element's old values before writing it); the sum of squares is
//! deterministic (fixed chunks, a fixed reduction tree, no atomics).

use crate::Float;
use rtx_macros::kernel;

/// One Adam or AdamW step over every tensor of a table, in place: row `t` of `p`, `m`, `v`
/// (and `vmax` under AMSGrad) is overwritten with its new values, reading the gradient row
/// `g[t]` with step `gstep[t]` (1 for a dense gradient, 0 for one broadcast from a single
/// value). The scalars are [`adam_step`](super::adam_step)'s; `rows`, `starts`, `lens`,
/// `n_chunks` and `chunk` describe the chunks (see the module docs). `vmax` is touched only
/// when `amsgrad` is not 0.
///
/// ```
/// use rtx_kernels::{kernels::adam_multi, kernel::LaunchConfig};
/// let (mut p0, mut p1) = (vec![1.0f32], vec![2.0f32, -2.0]);
/// let (mut m0, mut m1, mut v0, mut v1) = (vec![0.0f32], vec![0.0f32; 2], vec![0.0f32], vec![0.0f32; 2]);
/// let (b1, b2) = (0.9f32, 0.999f32);
/// // Two tensors, one chunk each; first step, lr 0.1.
/// adam_multi(
///     LaunchConfig::new(2, 32),
///     &mut [&mut p0, &mut p1], &[&[2.0], &[1.0, -1.0]], &[1, 1], &mut [&mut m0, &mut m1],
///     &mut [&mut v0, &mut v1], &mut [], &[0, 1], &[0, 0], &[1, 2], 2, 1024,
///     1.0, 0.0, 1.0 - b1, b2, 1.0 - b2, (1.0 - b2).sqrt(), -0.1 / (1.0 - b1), 1e-8, 0, 0, 1, 0,
/// )
/// .unwrap();
/// // Each weight moves by about lr against its gradient's sign.
/// assert!((p0[0] - 0.9).abs() < 1e-5 && (p1[1] + 1.9).abs() < 1e-5);
/// ```
#[kernel(crate = crate)]
pub fn adam_multi<T: Float>(
    p: &[&mut [T]],
    g: &[&[T]],
    gstep: &[usize],
    m: &[&mut [T]],
    v: &[&mut [T]],
    vmax: &[&mut [T]],
    rows: &[usize],
    starts: &[usize],
    lens: &[usize],
    n_chunks: usize,
    chunk: usize,
    decay: T,
    l2: T,
    w1: T,
    beta2: T,
    w2: T,
    bc2_sqrt: T,
    neg_step: T,
    eps: T,
    decoupled: u32,
    use_l2: u32,
    small_w: u32,
    amsgrad: u32,
) {
    let mut c = block_idx_x();
    while c < n_chunks {
        let t = rows[c];
        let gs = gstep[t];
        let end = (starts[c] + chunk).min(lens[t]);
        let mut i = starts[c] + thread_idx_x();
        while i < end {
            let mut pa = p[t][i];
            let mut ga = g[t][i * gs];
            let mi = m[t][i];
            let vi = v[t][i];
            if decoupled != 0 {
                // PyTorch stores the decayed parameter before using it.
                p[t][i] = pa * decay;
                pa = p[t][i];
            }
            if use_l2 != 0 {
                // The gradient with decay added is a stored tensor too; `m` (already read) is
                // scratch until the moment is written below.
                m[t][i] = ga + l2 * pa;
                ga = m[t][i];
            }
            if small_w != 0 {
                m[t][i] = mi + w1 * (ga - mi);
            } else {
                m[t][i] = ga - (ga - mi) * (1.0 - w1);
            }
            let mr = m[t][i];
            v[t][i] = vi * beta2;
            let v2 = v[t][i];
            v[t][i] = v2 + w2 * ga * ga;
            let mut second = v[t][i];
            if amsgrad != 0 {
                let old = vmax[t][i];
                // `max_of`: the larger, a NaN on either side wins (the new one first).
                let new = if old < second {
                    second
                } else if second != second {
                    second
                } else {
                    old
                };
                vmax[t][i] = new;
                second = vmax[t][i];
            }
            let denom = second.sqrt() / bc2_sqrt + eps;
            p[t][i] = pa + neg_step * mr / denom;
            i += block_dim_x();
        }
        c += grid_dim_x();
    }
}

/// One SGD step over every tensor of a table, in place: row `t` of `p` (and of the momentum
/// buffers `buf` when `has_buf` is not 0) is overwritten, reading the gradient row `g[t]`
/// with step `gstep[t]` (as in [`adam_multi`]).
/// The scalars are [`sgd_step`](super::sgd_step)'s; the chunks are described as for
/// [`adam_multi`].
///
/// ```
/// use rtx_kernels::{kernels::sgd_multi, kernel::LaunchConfig};
/// let (mut a, mut b) = (vec![1.0f32, 1.0], vec![4.0f32]);
/// sgd_multi(
///     LaunchConfig::new(1, 32), &mut [&mut a, &mut b], &[&[2.0, -2.0], &[1.0]], &[1, 1], &mut [],
///     &[0, 1], &[0, 0], &[2, 1], 2, 1024, -0.5, 0.0, 1.0, 0.0, 0, 0, 0, 0,
/// )
/// .unwrap();
/// assert_eq!((a, b), (vec![0.0, 2.0], vec![3.5]));
/// ```
#[kernel(crate = crate)]
pub fn sgd_multi<T: Float>(
    p: &[&mut [T]],
    g: &[&[T]],
    gstep: &[usize],
    buf: &[&mut [T]],
    rows: &[usize],
    starts: &[usize],
    lens: &[usize],
    n_chunks: usize,
    chunk: usize,
    neg_lr: T,
    momentum: T,
    damp: T,
    weight_decay: T,
    use_decay: u32,
    has_buf: u32,
    first: u32,
    nesterov: u32,
) {
    let mut c = block_idx_x();
    while c < n_chunks {
        let t = rows[c];
        let gs = gstep[t];
        let end = (starts[c] + chunk).min(lens[t]);
        let mut i = starts[c] + thread_idx_x();
        while i < end {
            let pa = p[t][i];
            let mut ga = g[t][i * gs];
            if use_decay != 0 {
                // Rounded to `T` through `p` (already read), written for good at the end.
                p[t][i] = ga + weight_decay * pa;
                ga = p[t][i];
            }
            if has_buf != 0 {
                if first != 0 {
                    buf[t][i] = ga;
                } else {
                    buf[t][i] = buf[t][i] * momentum;
                    let scaled = buf[t][i];
                    buf[t][i] = scaled + damp * ga;
                }
                let b = buf[t][i];
                if nesterov != 0 {
                    p[t][i] = ga + momentum * b;
                    ga = p[t][i];
                } else {
                    ga = b;
                }
            }
            p[t][i] = pa + neg_lr * ga;
            i += block_dim_x();
        }
        c += grid_dim_x();
    }
}

/// The sum of squares of each chunk of a table of gradients (read with steps `gstep`, as in
/// [`adam_multi`]), in `f64`: `partial[c]` for chunk `c` (chunks as for [`adam_multi`]). Deterministic: each chunk's threads sum fixed strides
/// and a fixed tree adds them. The block is a power of two of at most 256 threads.
///
/// ```
/// use rtx_kernels::{kernels::sum_squares_multi, kernel::LaunchConfig};
/// let mut partial = vec![0.0f64; 3];
/// // Three chunks of at most 2 elements: [1, 2], [3] of the first tensor, [4] of the second.
/// sum_squares_multi(
///     LaunchConfig::new(2, 64), &[&[1.0f32, 2.0, 3.0], &[4.0]], &[1, 1], &[0, 0, 1], &[0, 2, 0],
///     &[3, 1], 3, 2, &mut partial,
/// )
/// .unwrap();
/// assert_eq!(partial, vec![5.0, 9.0, 16.0]);
/// ```
#[kernel(crate = crate)]
pub fn sum_squares_multi<T: Float>(
    g: &[&[T]],
    gstep: &[usize],
    rows: &[usize],
    starts: &[usize],
    lens: &[usize],
    n_chunks: usize,
    chunk: usize,
    partial: &mut [f64],
) {
    #[shared]
    let acc: [f64; 256];
    let tid = thread_idx_x();
    let mut c = block_idx_x();
    while c < n_chunks {
        let t = rows[c];
        let gs = gstep[t];
        let end = (starts[c] + chunk).min(lens[t]);
        let mut s = 0.0 as f64;
        let mut i = starts[c] + tid;
        while i < end {
            let x = g[t][i * gs] as f64;
            s += x * x;
            i += block_dim_x();
        }
        acc[tid] = s;
        sync_threads();
        let mut w = block_dim_x() / 2;
        while w > 0 {
            if tid < w {
                acc[tid] = acc[tid] + acc[tid + w];
            }
            sync_threads();
            w = w / 2;
        }
        if tid == 0 {
            partial[c] = acc[0];
        }
        // Nobody refills `acc` for the next chunk before thread 0 has read it.
        sync_threads();
        c += grid_dim_x();
    }
}

/// Gradient clipping's norm and coefficient from the `n` partial sums of squares of
/// [`sum_squares_multi`], in one block (a power of two of at most 256 threads, grid of 1):
/// `out[0] = sqrt(Σ partial)` and `out[1] = max_norm / (out[0] + 1e-6)` (PyTorch's
/// `clip_grad_norm_` coefficient, applied when below 1). Deterministic: fixed strides and a
/// fixed tree. `T` only picks the entry; the work is in `f64`.
///
/// ```
/// use rtx_kernels::{kernels::clip_coef, kernel::LaunchConfig};
/// let mut out = vec![0.0f64; 2];
/// clip_coef::<f32>(LaunchConfig::new(1, 64), &[9.0, 16.0], 2, 1.0, &mut out).unwrap();
/// assert_eq!(out[0], 5.0);
/// assert_eq!(out[1], 1.0 / (5.0 + 1e-6));
/// ```
#[kernel(crate = crate)]
pub fn clip_coef<T: Float>(partial: &[f64], n: usize, max_norm: f64, out: &mut [f64]) {
    #[shared]
    let acc: [f64; 256];
    let tid = thread_idx_x();
    let mut s = 0.0 as f64;
    let mut i = tid;
    while i < n {
        s += partial[i];
        i += block_dim_x();
    }
    acc[tid] = s;
    sync_threads();
    let mut w = block_dim_x() / 2;
    while w > 0 {
        if tid < w {
            acc[tid] = acc[tid] + acc[tid + w];
        }
        sync_threads();
        w = w / 2;
    }
    if tid == 0 {
        let norm = acc[0].sqrt();
        out[0] = norm;
        out[1] = max_norm / (norm + 1e-6);
    }
}

/// Gradient clipping's scale over a table (gradients read with steps `gstep`, as in
/// [`adam_multi`]): `out[t] = g[t] * coef` where `coef = k[1]` (the
/// coefficient [`clip_coef`] wrote, read from device memory) is below 1, rounded to `T` first
/// as a scalar operand is; otherwise `out[t]` is a copy of `g[t]`. Chunks as for
/// [`adam_multi`].
///
/// ```
/// use rtx_kernels::{kernels::scale_multi, kernel::LaunchConfig};
/// let (mut a, mut b) = (vec![0.0f32; 2], vec![0.0f32]);
/// scale_multi(
///     LaunchConfig::new(1, 32), &[&[2.0, -4.0], &[8.0]], &[1, 0], &mut [&mut a, &mut b],
///     &[0, 1], &[0, 0], &[2, 1], 2, 1024, &[3.0, 0.5],
/// )
/// .unwrap();
/// assert_eq!((a, b), (vec![1.0, -2.0], vec![4.0]));
/// ```
#[kernel(crate = crate)]
pub fn scale_multi<T: Float>(
    g: &[&[T]],
    gstep: &[usize],
    out: &[&mut [T]],
    rows: &[usize],
    starts: &[usize],
    lens: &[usize],
    n_chunks: usize,
    chunk: usize,
    k: &[f64],
) {
    let coef = k[1];
    let mut c = block_idx_x();
    while c < n_chunks {
        let t = rows[c];
        let gs = gstep[t];
        let end = (starts[c] + chunk).min(lens[t]);
        let mut i = starts[c] + thread_idx_x();
        while i < end {
            if coef < 1.0 {
                // The coefficient rounded to `T` (through the output, written for good next).
                out[t][i] = coef as T;
                let f = out[t][i];
                out[t][i] = g[t][i * gs] * f;
            } else {
                out[t][i] = g[t][i * gs];
            }
            i += block_dim_x();
        }
        c += grid_dim_x();
    }
}
