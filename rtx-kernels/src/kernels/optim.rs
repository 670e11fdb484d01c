//! Fused optimizer updates (Adam/AdamW and SGD), one thread per parameter element in a
//! grid-stride loop: each reads the parameter, its gradient and its state and writes the new
//! ones, so one launch updates a whole tensor.
//!
//! Invariant: each element goes through the CPU backend's sequence of roundings
//! (`rtx-backends/src/cpu/optim.rs`, itself PyTorch's single-tensor order): computed in the
//! compute type and rounded to `T` where PyTorch stores a tensor. An intermediate that PyTorch
//! rounds is rounded here by storing it to an output and reading it back, the one way the
//! kernel subset has to round to `T`. Inputs and outputs may be the same buffers on a GPU
//! (each thread reads its element before writing it); natively they are distinct slices.

use crate::Float;
use rtx_macros::kernel;

/// One Adam or AdamW step over `n` elements: `p`, `g`, `m`, `v` (and `vmax` under AMSGrad)
/// in, the new `p_out`, `m_out`, `v_out` (and `vmax_out`) out. The scalars are those of
/// `AdamScalars`: `decay` (`1 - lr * weight_decay`, applied when `decoupled` is not 0: AdamW),
/// `l2` (added to the gradient when `use_l2` is not 0: Adam's weight decay), `w1 = 1 - beta1`
/// (the `lerp` weight; `small_w` says `|w1| < 0.5`, which picks `lerp`'s formula), `beta2`,
/// `w2 = 1 - beta2`, `bc2_sqrt = sqrt(1 - beta2^step)`, `neg_step = -lr / (1 - beta1^step)`
/// and `eps`. `vmax` and `vmax_out` are touched only when `amsgrad` is not 0. Any grid works.
///
/// ```
/// use rtx_kernels::{kernels::adam_step, kernel::LaunchConfig};
/// let (mut p, mut m, mut v) = (vec![0.0f64], vec![0.0f64], vec![0.0f64]);
/// // First step, lr 0.1: the parameter moves by about lr against the gradient's sign.
/// let (b1, b2) = (0.9, 0.999);
/// adam_step(
///     LaunchConfig::new(1, 32), &[1.0], &[2.0], &[0.0], &[0.0], &[], &mut p, &mut m, &mut v,
///     &mut [], 1, 1.0, 0.0, 1.0 - b1, b2, 1.0 - b2, (1.0f64 - b2).sqrt(), -0.1 / (1.0 - b1),
///     1e-8, 0, 0, 1, 0,
/// )
/// .unwrap();
/// assert!((p[0] - 0.9).abs() < 1e-6);
/// ```
#[kernel(crate = crate)]
pub fn adam_step<T: Float>(
    p: &[T],
    g: &[T],
    m: &[T],
    v: &[T],
    vmax: &[T],
    p_out: &mut [T],
    m_out: &mut [T],
    v_out: &mut [T],
    vmax_out: &mut [T],
    n: usize,
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
    let step = block_dim_x() * grid_dim_x();
    let mut i = block_idx_x() * block_dim_x() + thread_idx_x();
    while i < n {
        let mut pa = p[i];
        let mut ga = g[i];
        if decoupled != 0 {
            // PyTorch stores the decayed parameter before using it.
            p_out[i] = pa * decay;
            pa = p_out[i];
        }
        if use_l2 != 0 {
            // The gradient with decay added is a stored tensor too; `m_out` is scratch until
            // the moment is written below.
            m_out[i] = ga + l2 * pa;
            ga = m_out[i];
        }
        let mi = m[i];
        if small_w != 0 {
            m_out[i] = mi + w1 * (ga - mi);
        } else {
            m_out[i] = ga - (ga - mi) * (1.0 - w1);
        }
        let mr = m_out[i];
        v_out[i] = v[i] * beta2;
        let v2 = v_out[i];
        v_out[i] = v2 + w2 * ga * ga;
        let mut second = v_out[i];
        if amsgrad != 0 {
            let old = vmax[i];
            // `max_of`: the larger, a NaN on either side wins (the new one first).
            let new = if old < second {
                second
            } else if second != second {
                second
            } else {
                old
            };
            vmax_out[i] = new;
            second = vmax_out[i];
        }
        let denom = second.sqrt() / bc2_sqrt + eps;
        p_out[i] = pa + neg_step * mr / denom;
        i += step;
    }
}

/// One SGD step over `n` elements: `p` and `g` (and the momentum buffer `buf` when
/// `has_buf` is not 0) in, `p_out` (and `buf_out`) out. `neg_lr = -lr`; `weight_decay` is
/// added to the gradient when `use_decay` is not 0; the buffer becomes `momentum * buf +
/// damp * g` with `damp = 1 - dampening`, or the gradient itself on the `first` step; with
/// `nesterov` the step uses `g + momentum * buf`. Any grid works.
///
/// ```
/// use rtx_kernels::{kernels::sgd_step, kernel::LaunchConfig};
/// let mut p = vec![0.0f32; 2];
/// sgd_step(
///     LaunchConfig::new(1, 32), &[1.0, 1.0], &[2.0, -2.0], &[], &mut p, &mut [], 2,
///     -0.5, 0.0, 1.0, 0.0, 0, 0, 0, 0,
/// )
/// .unwrap();
/// assert_eq!(p, vec![0.0, 2.0]);
/// ```
#[kernel(crate = crate)]
pub fn sgd_step<T: Float>(
    p: &[T],
    g: &[T],
    buf: &[T],
    p_out: &mut [T],
    buf_out: &mut [T],
    n: usize,
    neg_lr: T,
    momentum: T,
    damp: T,
    weight_decay: T,
    use_decay: u32,
    has_buf: u32,
    first: u32,
    nesterov: u32,
) {
    let step = block_dim_x() * grid_dim_x();
    let mut i = block_idx_x() * block_dim_x() + thread_idx_x();
    while i < n {
        let pa = p[i];
        let mut ga = g[i];
        if use_decay != 0 {
            // Rounded to `T` through `p_out`, which is written for good at the end.
            p_out[i] = ga + weight_decay * pa;
            ga = p_out[i];
        }
        if has_buf != 0 {
            if first != 0 {
                buf_out[i] = ga;
            } else {
                buf_out[i] = buf[i] * momentum;
                let scaled = buf_out[i];
                buf_out[i] = scaled + damp * ga;
            }
            let b = buf_out[i];
            if nesterov != 0 {
                p_out[i] = ga + momentum * b;
                ga = p_out[i];
            } else {
                ga = b;
            }
        }
        p_out[i] = pa + neg_lr * ga;
        i += step;
    }
}
