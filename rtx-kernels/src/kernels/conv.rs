//! The data movement around a convolution's matrix products: `im2col` lays each input window
//! out as a column (so the convolution is a GEMM), and `col2im` folds a column matrix back
//! onto the input positions its taps read (the input gradient).
//!
//! Invariant: `col2im` is a gather, one thread per input element summing its taps in tap
//! order `(i, j)`, so it needs no atomics and its sums do not depend on scheduling; `im2col`
//! writes zeros where a tap falls on the padding. Both follow the CPU backend's
//! `rtx-backends/src/cpu/conv.rs` index for index.

use crate::Float;
use rtx_macros::kernel;

/// The im2col matrix of `x` (an `[n, c, h, w]` view with element strides `sn, sc, sy, sx`):
/// element `(row, l)` of image `ni`, with `row = (ci * kh + i) * kw + j` and output position
/// `l = oy * wo + ox`, is the input under tap `(i, j)` of the window at `(oy, ox)` (0 over the
/// padding), written to `col[row * row_stride + ni * img_stride + l]`: `[n, c*kh*kw, ho*wo]`
/// with `row_stride = ho*wo` and `img_stride = c*kh*kw*ho*wo`, or `[c*kh*kw, n, ho*wo]` with
/// `row_stride = n*ho*wo` and `img_stride = ho*wo`. Any grid works.
///
/// ```
/// use rtx_kernels::{kernels::im2col, kernel::LaunchConfig};
/// // A 1x3 row, a 1x2 kernel, padding 1 along the width: windows [0 1] [1 2] [2 3] [3 0].
/// let mut col = vec![9.0f32; 8];
/// let x = [1.0, 2.0, 3.0];
/// let launch = LaunchConfig::new(1, 32);
/// im2col(launch, &x, &mut col, 1, 1, 1, 3, 1, 2, 1, 4, 1, 1, 0, 1, 1, 1, 3, 3, 3, 1, 4, 8)
///     .unwrap();
/// assert_eq!(col, vec![0.0, 1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 0.0]);
/// ```
#[kernel(crate = crate)]
pub fn im2col<T: Float>(
    x: &[T],
    col: &mut [T],
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    kh: usize,
    kw: usize,
    ho: usize,
    wo: usize,
    stride_y: usize,
    stride_x: usize,
    pad_y: usize,
    pad_x: usize,
    dil_y: usize,
    dil_x: usize,
    sn: usize,
    sc: usize,
    sy: usize,
    sx: usize,
    row_stride: usize,
    img_stride: usize,
) {
    let len = ho * wo;
    let rows = c * kh * kw;
    let total = n * rows * len;
    let step = block_dim_x() * grid_dim_x();
    let mut p = block_idx_x() * block_dim_x() + thread_idx_x();
    while p < total {
        let l = p % len;
        let row = p / len % rows;
        let ni = p / (len * rows);
        let ox = l % wo;
        let oy = l / wo;
        let j = row % kw;
        let i = row / kw % kh;
        let ci = row / (kw * kh);
        // Positions in padded coordinates, so they stay unsigned.
        let iy = oy * stride_y + i * dil_y;
        let ix = ox * stride_x + j * dil_x;
        let mut v = 0.0;
        if iy >= pad_y && iy - pad_y < h && ix >= pad_x && ix - pad_x < w {
            v = x[ni * sn + ci * sc + (iy - pad_y) * sy + (ix - pad_x) * sx];
        }
        col[row * row_stride + ni * img_stride + l] = v;
        p += step;
    }
}

/// Folds a dense column matrix `col` (`[n, c*kh*kw, ho*wo]`, rows and positions as in
/// [`im2col`](im2col())) back onto a dense `[n, c, h, w]` `dx`: each input element is the sum,
/// over taps `(i, j)` in order, of the column entry that read it (nothing where no window
/// reads it). Any grid works.
///
/// ```
/// use rtx_kernels::{kernels::col2im, kernel::LaunchConfig};
/// // The transpose of the `im2col` example: each input was read by two windows.
/// let mut dx = vec![0.0f32; 3];
/// let col = [1.0, 2.0, 3.0, 4.0, 10.0, 20.0, 30.0, 40.0];
/// let launch = LaunchConfig::new(1, 32);
/// col2im(launch, &col, &mut dx, 1, 1, 1, 3, 1, 2, 1, 4, 1, 1, 0, 1, 1, 1).unwrap();
/// assert_eq!(dx, vec![12.0, 23.0, 34.0]);
/// ```
#[kernel(crate = crate)]
pub fn col2im<T: Float>(
    col: &[T],
    dx: &mut [T],
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    kh: usize,
    kw: usize,
    ho: usize,
    wo: usize,
    stride_y: usize,
    stride_x: usize,
    pad_y: usize,
    pad_x: usize,
    dil_y: usize,
    dil_x: usize,
) {
    let len = ho * wo;
    let total = n * c * h * w;
    let step = block_dim_x() * grid_dim_x();
    let mut p = block_idx_x() * block_dim_x() + thread_idx_x();
    while p < total {
        let xx = p % w;
        let y = p / w % h;
        // Image and channel together: the column rows of channel `ci` of image `ni` start at
        // `(ni * c + ci) * kh * kw`.
        let plane = p / (w * h);
        let py = y + pad_y;
        let px = xx + pad_x;
        let mut acc = 0.0;
        for i in 0..kh {
            if py >= i * dil_y && (py - i * dil_y) % stride_y == 0 {
                let oy = (py - i * dil_y) / stride_y;
                if oy < ho {
                    for j in 0..kw {
                        if px >= j * dil_x && (px - j * dil_x) % stride_x == 0 {
                            let ox = (px - j * dil_x) / stride_x;
                            if ox < wo {
                                acc += col[((plane * kh + i) * kw + j) * len + oy * wo + ox];
                            }
                        }
                    }
                }
            }
        }
        dx[p] = acc;
        p += step;
    }
}
