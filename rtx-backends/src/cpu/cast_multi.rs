//! The CPU loop of the multi-tensor casts (`rtx-backends/src/storage/cast_multi.rs`): every
//! pair of buffers converted in one pass, parallel over fixed chunks of each buffer.
//!
//! Invariant: each element converts with `Element::cast` (the single-tensor cast's
//! conversion); a scale multiplies in f32 between the two conversions.

use super::CHUNK;
use super::elementwise::INLINE;
use super::for_chunks_mut;
use rtx_kernels::Element;

/// Writes `dst[t][i] = cast(src[t][i])`, or `cast(f32(src[t][i]) * scale)` with a scale, for
/// every pair `(src[t], dst[t])` of equal lengths.
pub fn cast_multi<A: Element, B: Element>(pairs: Vec<(&[A], &mut [B])>, scale: Option<f32>) {
    let work = |s: &[A], d: &mut [B]| match scale {
        None => d.iter_mut().zip(s).for_each(|(d, &s)| *d = s.cast()),
        Some(k) => d
            .iter_mut()
            .zip(s)
            .for_each(|(d, &s)| *d = (s.cast::<f32>() * k).cast()),
    };
    let total: usize = pairs.iter().map(|(s, _)| s.len()).sum();
    if total <= INLINE {
        pairs.into_iter().for_each(|(s, d)| work(s, d));
    } else {
        let mut tasks: Vec<(&[A], &mut [B])> = pairs
            .into_iter()
            .flat_map(|(s, d)| s.chunks(CHUNK).zip(d.chunks_mut(CHUNK)))
            .collect();
        for_chunks_mut(&mut tasks, 1, &|_, task| {
            for (s, d) in task {
                work(s, d);
            }
        });
    }
}
