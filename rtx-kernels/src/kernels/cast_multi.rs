//! Multi-tensor casts: one launch converts every tensor of a table between the element type
//! `T` and its compute type `T::Acc` (f32 for f16, bf16 and f32): the f32 master weights of
//! mixed-precision training into their bf16 working copy, and the working gradients back, each
//! in one launch however many tensors the model has.
//!
//! Work is split into chunks as in the multi-tensor optimizer kernels (`optim_multi.rs`):
//! chunk `c` covers `rows[c]`'s elements `starts[c] .. min(starts[c] + chunk, lens[rows[c]])`;
//! block `b` takes chunks `b`, `b + grid`, ... and its threads stride through a chunk, so any
//! grid works.
//!
//! Invariant: each element converts exactly as `Element::cast` (and the single-tensor `cast`
//! kernel) converts it, through f64; with a scale (`use_scale` not 0) the value is first
//! multiplied by `scale[0]` in the compute type, so `dst = cast(src * scale)` for the cast to
//! `T` and `dst = cast(src) * scale` for the cast from `T`, the product rounded once to f32.

use crate::Float;
use rtx_macros::kernel;

/// Converts every row of a compute-type table `src` (f32 for f16, bf16 and f32) to `T` into
/// the row of `dst` of the same length, multiplied first by `scale[0]` when `use_scale` is
/// not 0 (`scale` is not read otherwise). `rows`, `starts`, `lens`, `n_chunks` and `chunk`
/// describe the chunks (see the module docs).
///
/// ```
/// use rtx_kernels::{bf16, kernels::cast_from_acc_multi, kernel::LaunchConfig};
/// let (mut a, mut b) = (vec![bf16::ZERO; 2], vec![bf16::ZERO; 1]);
/// cast_from_acc_multi::<bf16>(
///     LaunchConfig::new(2, 32), &[&[1.0f32, 3.0], &[-0.5]], &mut [&mut a, &mut b],
///     &[0, 1], &[0, 0], &[2, 1], 2, 1024, &[], 0,
/// )
/// .unwrap();
/// assert_eq!((a[1], b[0]), (bf16::from_f32(3.0), bf16::from_f32(-0.5)));
/// ```
#[kernel(crate = crate)]
pub fn cast_from_acc_multi<T: Float>(
    src: &[&[T::Acc]],
    dst: &[&mut [T]],
    rows: &[usize],
    starts: &[usize],
    lens: &[usize],
    n_chunks: usize,
    chunk: usize,
    scale: &[T::Acc],
    use_scale: u32,
) {
    let mut c = block_idx_x();
    while c < n_chunks {
        let t = rows[c];
        let end = (starts[c] + chunk).min(lens[t]);
        let mut i = starts[c] + thread_idx_x();
        while i < end {
            let mut x = src[t][i];
            if use_scale != 0 {
                x = x * scale[0];
            }
            // Through f64, as `Element::cast` converts.
            dst[t][i] = (x as f64) as T;
            i += block_dim_x();
        }
        c += grid_dim_x();
    }
}

/// Converts every row of a `T` table `src` to the compute type (f32 for f16, bf16 and f32)
/// into the row of `dst` of the same length, multiplied after by `scale[0]` when `use_scale`
/// is not 0 (`scale` is not read otherwise). Chunks as for [`cast_from_acc_multi`].
///
/// ```
/// use rtx_kernels::{f16, kernels::cast_to_acc_multi, kernel::LaunchConfig};
/// let (mut a, mut b) = (vec![0.0f32; 2], vec![0.0f32; 1]);
/// let (x, y) = ([f16::from_f32(2.0), f16::from_f32(-8.0)], [f16::from_f32(0.5)]);
/// cast_to_acc_multi::<f16>(
///     LaunchConfig::new(1, 32), &[&x, &y], &mut [&mut a, &mut b],
///     &[0, 1], &[0, 0], &[2, 1], 2, 1024, &[0.25], 1,
/// )
/// .unwrap();
/// assert_eq!((a, b), (vec![0.5, -2.0], vec![0.125]));
/// ```
#[kernel(crate = crate)]
pub fn cast_to_acc_multi<T: Float>(
    src: &[&[T]],
    dst: &[&mut [T::Acc]],
    rows: &[usize],
    starts: &[usize],
    lens: &[usize],
    n_chunks: usize,
    chunk: usize,
    scale: &[T::Acc],
    use_scale: u32,
) {
    let mut c = block_idx_x();
    while c < n_chunks {
        let t = rows[c];
        let end = (starts[c] + chunk).min(lens[t]);
        let mut i = starts[c] + thread_idx_x();
        while i < end {
            // Through f64, as `Element::cast` converts (exact: the compute type holds every
            // `T`).
            let mut x = (src[t][i] as f64) as T;
            if use_scale != 0 {
                x = x * scale[0];
            }
            dst[t][i] = x;
            i += block_dim_x();
        }
        c += grid_dim_x();
    }
}
