//! 2-d max and average pooling over `[N, C, H, W]`, forward and backward, one thread per
//! output (forward) or per input element (backward) in grid-stride loops.
//!
//! Invariant: the CPU backend's semantics (`rtx-backends/src/cpu/conv.rs`): windows start at
//! `o * stride - padding` and are clipped to the input; max pooling skips the padding and lets
//! a NaN win, and its gradient goes to the first maximum of each window in row-major order
//! (the first NaN, if any); average pooling divides by the full window area, padding counted.
//! The backward is a gather: each input element adds the gradients of the windows holding it,
//! in output order, so no two threads write one element and the sums are deterministic.

use crate::Float;
use rtx_macros::kernel;

/// Max (`mode` 0) or average (`mode` 1) pooling of `x` (an `[n, c, h, w]` view with element
/// strides `sn, sc, sy, sx`) into a dense `[n, c, ho, wo]` `out`, windows `kh x kw` stepped
/// by `stride_y, stride_x` over an input padded by `pad_y, pad_x`; or (`mode` 2), for each
/// window of max pooling, the position `y * w + x` in its plane of the first maximum in
/// row-major order (the first NaN, if any), or -1 for a window with no input under it, into
/// a dense `[n, c, ho, wo]` `idx`. Only the buffer the mode names is written (the other may
/// be empty). Any grid works.
///
/// ```
/// use rtx_kernels::{kernels::pool2d_forward, kernel::LaunchConfig};
/// // A 2x2 image, one 2x2 window.
/// let (mut out, mut idx) = (vec![0.0f32; 1], vec![0i64; 1]);
/// let x = [4.0, 1.0, 4.0, 2.0];
/// let launch = LaunchConfig::new(1, 32);
/// pool2d_forward(launch, &x, &mut out, &mut [], 1, 1, 2, 2, 1, 1, 2, 2, 1, 1, 0, 0, 4, 4, 2, 1, 0)
///     .unwrap();
/// assert_eq!(out, vec![4.0]);
/// pool2d_forward(launch, &x, &mut out, &mut [], 1, 1, 2, 2, 1, 1, 2, 2, 1, 1, 0, 0, 4, 4, 2, 1, 1)
///     .unwrap();
/// assert_eq!(out, vec![2.75]);
/// // Ties go to the first maximum.
/// pool2d_forward(launch, &x, &mut [], &mut idx, 1, 1, 2, 2, 1, 1, 2, 2, 1, 1, 0, 0, 4, 4, 2, 1, 2)
///     .unwrap();
/// assert_eq!(idx, vec![0]);
/// ```
#[kernel(crate = crate)]
pub fn pool2d_forward<T: Float>(
    x: &[T],
    out: &mut [T],
    idx: &mut [i64],
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    ho: usize,
    wo: usize,
    kh: usize,
    kw: usize,
    stride_y: usize,
    stride_x: usize,
    pad_y: usize,
    pad_x: usize,
    sn: usize,
    sc: usize,
    sy: usize,
    sx: usize,
    mode: u32,
) {
    let total = n * c * ho * wo;
    let step = block_dim_x() * grid_dim_x();
    let mut p = block_idx_x() * block_dim_x() + thread_idx_x();
    while p < total {
        let ox = p % wo;
        let oy = p / wo % ho;
        let ci = p / (wo * ho) % c;
        let ni = p / (wo * ho * c);
        let plane = ni * sn + ci * sc;
        // Window bounds in padded coordinates, clipped to the input.
        let y_lo = (oy * stride_y).max(pad_y);
        let y_hi = (oy * stride_y + kh).min(h + pad_y);
        let x_lo = (ox * stride_x).max(pad_x);
        let x_hi = (ox * stride_x + kw).min(w + pad_x);
        if mode == 1 {
            let mut s = 0.0;
            for y in y_lo..y_hi {
                for xx in x_lo..x_hi {
                    s += x[plane + (y - pad_y) * sy + (xx - pad_x) * sx];
                }
            }
            out[p] = s / ((kh * kw) as T);
        } else if mode == 0 {
            let mut m = T::NEG_INFINITY;
            for y in y_lo..y_hi {
                for xx in x_lo..x_hi {
                    let v = x[plane + (y - pad_y) * sy + (xx - pad_x) * sx];
                    if v > m || v != v {
                        m = v;
                    }
                }
            }
            out[p] = m;
        } else {
            let mut best: i64 = -1;
            let mut m = T::NEG_INFINITY;
            let mut found_nan = false;
            for y in y_lo..y_hi {
                for xx in x_lo..x_hi {
                    let v = x[plane + (y - pad_y) * sy + (xx - pad_x) * sx];
                    let nan = v != v;
                    if best < 0 || v > m || nan {
                        best = ((y - pad_y) * w + (xx - pad_x)) as i64;
                        m = v;
                    }
                    if nan {
                        found_nan = true;
                        break;
                    }
                }
                if found_nan {
                    break;
                }
            }
            idx[p] = best;
        }
        p += step;
    }
}

/// The input gradient of pooling: `dx` (dense `[n, c, h, w]`) from the dense output gradient
/// `grad` (`[n, c, ho, wo]`). Each input element adds, over the windows that hold it in output
/// order, the window's gradient divided by `kh * kw` (`avg` not 0), or the whole gradient when
/// `idx` (from [`pool2d_forward`](pool2d_forward())'s mode 2) names it as the window's maximum.
/// `idx` is not read for average pooling. Any grid works.
///
/// ```
/// use rtx_kernels::{kernels::pool2d_backward, kernel::LaunchConfig};
/// // One 2x2 window whose maximum is at position 1.
/// let mut dx = vec![0.0f32; 4];
/// let launch = LaunchConfig::new(1, 32);
/// pool2d_backward(launch, &[8.0], &[1], &mut dx, 1, 1, 2, 2, 1, 1, 2, 2, 1, 1, 0, 0, 0).unwrap();
/// assert_eq!(dx, vec![0.0, 8.0, 0.0, 0.0]);
/// pool2d_backward(launch, &[8.0], &[], &mut dx, 1, 1, 2, 2, 1, 1, 2, 2, 1, 1, 0, 0, 1).unwrap();
/// assert_eq!(dx, vec![2.0; 4]);
/// ```
#[kernel(crate = crate)]
pub fn pool2d_backward<T: Float>(
    grad: &[T],
    idx: &[i64],
    dx: &mut [T],
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    ho: usize,
    wo: usize,
    kh: usize,
    kw: usize,
    stride_y: usize,
    stride_x: usize,
    pad_y: usize,
    pad_x: usize,
    avg: u32,
) {
    let total = n * c * h * w;
    let step = block_dim_x() * grid_dim_x();
    let area = (kh * kw) as T;
    let mut p = block_idx_x() * block_dim_x() + thread_idx_x();
    while p < total {
        let xx = p % w;
        let y = p / w % h;
        let plane = p / (w * h);
        let here = (y * w + xx) as i64;
        // Windows o with o * stride <= pos + pad < o * stride + kernel, in padded coordinates.
        let py = y + pad_y;
        let px = xx + pad_x;
        let mut oy_lo = 0;
        if py + 1 > kh {
            oy_lo = (py + 1 - kh + stride_y - 1) / stride_y;
        }
        let oy_hi = (py / stride_y + 1).min(ho);
        let mut ox_lo = 0;
        if px + 1 > kw {
            ox_lo = (px + 1 - kw + stride_x - 1) / stride_x;
        }
        let ox_hi = (px / stride_x + 1).min(wo);
        let mut acc = 0.0;
        for oy in oy_lo..oy_hi {
            for ox in ox_lo..ox_hi {
                let o = (plane * ho + oy) * wo + ox;
                if avg != 0 {
                    acc += grad[o] / area;
                } else if idx[o] == here {
                    acc += grad[o];
                }
            }
        }
        dx[p] = acc;
        p += step;
    }
}
