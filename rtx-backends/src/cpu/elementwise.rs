//! Elementwise loops over strided inputs: a contiguous fast path the compiler vectorizes and a
//! general strided path, both parallel over fixed output chunks.

use super::CHUNK;
use crate::Layout;
use rayon::prelude::*;
use std::mem::MaybeUninit;

/// Fills a fresh vector of `n` elements chunk by chunk; `fill(start, chunk)` writes the output
/// elements `start..start + chunk.len()`.
pub fn build<U: Send>(n: usize, fill: impl Fn(usize, &mut [MaybeUninit<U>]) + Sync) -> Vec<U> {
    let mut out = Vec::with_capacity(n);
    let spare = &mut out.spare_capacity_mut()[..n];
    if n <= CHUNK {
        fill(0, spare);
    } else {
        spare
            .par_chunks_mut(CHUNK)
            .enumerate()
            .for_each(|(c, chunk)| fill(c * CHUNK, chunk));
    }
    // SAFETY: every `fill` call writes each slot of its chunk (all callers below write
    // through an iterator that covers the whole chunk), and the chunks cover 0..n.
    unsafe { out.set_len(n) };
    out
}

/// `f` applied to every element of a strided input, in logical order.
pub fn map<A: Copy + Sync, U: Send>(src: &[A], l: &Layout, f: impl Fn(A) -> U + Sync) -> Vec<U> {
    let n = l.numel();
    if let Some(range) = l.contiguous_range() {
        let src = &src[range];
        return build(n, |start, out| {
            let end = start + out.len();
            for (o, &x) in out.iter_mut().zip(&src[start..end]) {
                o.write(f(x));
            }
        });
    }
    build(n, |start, out| {
        for (o, off) in out.iter_mut().zip(l.offsets_from(start)) {
            o.write(f(src[off]));
        }
    })
}

/// `f` applied pairwise to two strided inputs of the same logical sizes (broadcast already
/// folded into their strides).
pub fn zip_map<A: Copy + Sync, B: Copy + Sync, U: Send>(
    a: &[A],
    la: &Layout,
    b: &[B],
    lb: &Layout,
    f: impl Fn(A, B) -> U + Sync,
) -> Vec<U> {
    debug_assert_eq!(la.dims(), lb.dims());
    let n = la.numel();
    match (la.contiguous_range(), lb.contiguous_range()) {
        (Some(ra), Some(rb)) => {
            let (a, b) = (&a[ra], &b[rb]);
            build(n, |start, out| {
                let end = start + out.len();
                for ((o, &x), &y) in out.iter_mut().zip(&a[start..end]).zip(&b[start..end]) {
                    o.write(f(x, y));
                }
            })
        }
        (Some(ra), None) if lb.strides().iter().all(|&s| s == 0) => {
            // A scalar (or fully broadcast) right-hand side.
            let (a, y) = (&a[ra], b[lb.offset()]);
            build(n, |start, out| {
                let end = start + out.len();
                for (o, &x) in out.iter_mut().zip(&a[start..end]) {
                    o.write(f(x, y));
                }
            })
        }
        _ => build(n, |start, out| {
            let offs = la.offsets_from(start).zip(lb.offsets_from(start));
            for (o, (ia, ib)) in out.iter_mut().zip(offs) {
                o.write(f(a[ia], b[ib]));
            }
        }),
    }
}

/// `f` applied to three strided inputs of the same logical sizes (used by `where`).
pub fn zip3_map<A: Copy + Sync, B: Copy + Sync, C: Copy + Sync, U: Send>(
    (a, la): (&[A], &Layout),
    (b, lb): (&[B], &Layout),
    (c, lc): (&[C], &Layout),
    f: impl Fn(A, B, C) -> U + Sync,
) -> Vec<U> {
    build(la.numel(), |start, out| {
        let offs = la
            .offsets_from(start)
            .zip(lb.offsets_from(start))
            .zip(lc.offsets_from(start));
        for (o, ((ia, ib), ic)) in out.iter_mut().zip(offs) {
            o.write(f(a[ia], b[ib], c[ic]));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strided_and_contiguous_paths_agree() {
        let n = 3 * CHUNK + 17;
        let data: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let l = Layout::contiguous(&[n]);
        assert_eq!(map(&data, &l, |x| x * 2.0)[n - 1], (n - 1) as f32 * 2.0);
        let t = Layout::contiguous(&[n / 7, 7]).transpose(0, 1);
        let got = map(&data, &t, |x| x);
        let want: Vec<f32> = t.offsets_from(0).map(|o| o as f32).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn zip_broadcasts_a_row() {
        let a = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        let b = [10.0f32, 20.0, 30.0];
        let la = Layout::contiguous(&[2, 3]);
        let lb = Layout::contiguous(&[3]).broadcast_to(&[2, 3]).unwrap();
        assert_eq!(
            zip_map(&a, &la, &b, &lb, |x, y| x + y),
            vec![11.0, 22.0, 33.0, 14.0, 25.0, 36.0]
        );
    }
}
