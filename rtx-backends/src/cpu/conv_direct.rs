//! Direct 2-d convolution for f32 on CPUs with AVX-512: the forward pass, the input gradient
//! and the weight gradient of unit-stride, undilated, ungrouped convolutions, with no im2col
//! matrix.
//!
//! Each of the three is one product `dst[o, q] = init[o] + Σ_k w[k, o] · src[kofs[k] + q']`
//! whose right-hand side is read in place: `q'` walks a "row" of consecutive source elements
//! for consecutive outputs `q`. The forward pass reduces over taps `k = (c, i, j)` of the
//! zero-padded image, with one row per output row; the input gradient is the forward pass of
//! the padded output gradient with the weight flipped and transposed; the weight gradient
//! reduces over the images' output positions, with one row per kernel row `(c, i)`. A register
//! tile holds 16 or 32 channels `o` (one or two 512-bit vectors) of up to 12 or 28 outputs;
//! each reduction step loads the weights once and broadcasts one source element per output,
//! so it does one or two fused multiply-adds per load and nothing else, where im2col writes
//! and re-reads every tap of every position and a general GEMM packs both operands again.
//!
//! Determinism: every output is one chain of fused multiply-adds over `k` in order; tiles,
//! images and tasks only decide which thread runs which chains, and the weight gradient's
//! per-task partial sums are added in task order (see `conv.rs`). Machines without AVX-512 take
//! the im2col path, whose results differ in the last bits.

use crate::Conv2dParams;
use std::mem::MaybeUninit;

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// The most outputs a tile holds (16-channel tiles; 32-channel tiles hold up to 12). Source
/// buffers keep this many elements of slack after their last row, since a tile reads a whole
/// tile's worth of elements even when its row is shorter.
const SLACK: usize = 28;

/// Whether the direct kernels run this convolution: f32 (checked by the caller), an AVX-512
/// CPU, unit stride and dilation, one group, and padding below the kernel size (the input
/// gradient pads the output gradient by `kernel - 1 - padding`).
pub(super) fn usable(p: &Conv2dParams, (kh, kw): (usize, usize)) -> bool {
    let shape = p.stride == [1, 1]
        && p.dilation == [1, 1]
        && p.groups == 1
        && p.padding[0] < kh
        && p.padding[1] < kw;
    #[cfg(target_arch = "x86_64")]
    {
        shape && std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = shape;
        false
    }
}

/// Consecutive outputs `dst..dst + len` (within each channel's row of `dst`) that read the
/// consecutive source elements `src..src + len` (plus each step's `kofs`).
#[derive(Clone, Copy, Debug)]
struct Run {
    dst: usize,
    src: usize,
    len: usize,
}

/// One direct product: `dst[o * stride + run.dst + r] = init[o] + Σ_k w[k * lanes + o] ·
/// src[kofs[k] + run.src + r]` for `o < channels`, every run and `r < run.len`.
struct Product<'a> {
    kofs: &'a [usize],
    /// `[K, lanes]`: the channels of each step, zero past `channels`.
    w: &'a [f32],
    /// `channels` rounded up to a multiple of 16.
    lanes: usize,
    channels: usize,
    /// `[lanes]`, zero past `channels`.
    init: &'a [f32],
    runs: &'a [Run],
}

impl Product<'_> {
    /// Writes every output of every run into `dst` (channel `o`'s row at `o * stride`).
    ///
    /// # Panics
    /// When a read or write would leave `src` or `dst`, or the operands' sizes disagree.
    fn run(&self, src: &[f32], dst: &mut [MaybeUninit<f32>], stride: usize) {
        let k = self.kofs.len();
        assert!(self.lanes.is_multiple_of(16) && self.channels <= self.lanes);
        assert!(self.w.len() >= k * self.lanes && self.init.len() >= self.lanes);
        if self.channels == 0 || self.runs.is_empty() {
            return;
        }
        let reach = self.kofs.iter().max().copied().unwrap_or(0);
        for r in self.runs {
            // A tile reads up to SLACK elements from its first; the runs' tiles start inside
            // the run, so this bounds every read.
            assert!(reach + r.src + r.len.max(1) - 1 + SLACK <= src.len());
            assert!(r.dst + r.len <= stride);
            assert!((self.channels - 1) * stride + r.dst + r.len <= dst.len());
        }
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller checked AVX-512F with `usable`; the asserts above bound every
        // read of `src` (through `kofs`, a run and a tile's SLACK), `w` (K rows of `lanes`)
        // and `init`, and every write of `dst` (channels below `channels`, positions in a run).
        unsafe {
            self.run_avx512(src.as_ptr(), dst.as_mut_ptr().cast::<f32>(), stride)
        }
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!("the direct kernels need AVX-512");
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn run_avx512(&self, src: *const f32, dst: *mut f32, stride: usize) {
        let mut ob = 0;
        while ob < self.lanes {
            // SAFETY: forwarded from `run`.
            unsafe {
                if self.lanes - ob >= 32 {
                    self.runs_of::<2>(ob, src, dst, stride);
                    ob += 32;
                } else {
                    self.runs_of::<1>(ob, src, dst, stride);
                    ob += 16;
                }
            }
        }
    }

    /// The runs for channels `ob..ob + 16 * NV`, in tiles as even as the tile sizes allow.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn runs_of<const NV: usize>(
        &self,
        ob: usize,
        src: *const f32,
        dst: *mut f32,
        stride: usize,
    ) {
        let most = if NV == 2 { 12 } else { SLACK };
        for run in self.runs {
            let tiles = run.len.div_ceil(most).max(1);
            let size = tile_size(run.len.div_ceil(tiles), NV);
            let mut done = 0;
            while done < run.len {
                let count = size.min(run.len - done);
                let (s, d) = (run.src + done, run.dst + done);
                // SAFETY: forwarded from `run`; `s` and `d` stay inside the run.
                unsafe {
                    let (s, d) = (src.add(s), dst.add(d));
                    match size {
                        4 => self.tile::<NV, 4>(ob, s, d, stride, count),
                        5 => self.tile::<NV, 5>(ob, s, d, stride, count),
                        6 => self.tile::<NV, 6>(ob, s, d, stride, count),
                        8 => self.tile::<NV, 8>(ob, s, d, stride, count),
                        10 => self.tile::<NV, 10>(ob, s, d, stride, count),
                        12 => self.tile::<NV, 12>(ob, s, d, stride, count),
                        14 => self.tile::<NV, 14>(ob, s, d, stride, count),
                        16 => self.tile::<NV, 16>(ob, s, d, stride, count),
                        20 => self.tile::<NV, 20>(ob, s, d, stride, count),
                        24 => self.tile::<NV, 24>(ob, s, d, stride, count),
                        _ => self.tile::<NV, 28>(ob, s, d, stride, count),
                    }
                }
                done += size;
            }
        }
    }

    /// `count` (at most `R`) outputs of channels `ob..ob + 16 * NV` from the source elements at
    /// `s0 + kofs[k]..` and the outputs at `d0 + o * stride..`. All `R` are computed (reading
    /// `R` source elements, which the slack keeps in bounds); only `count` are stored.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn tile<const NV: usize, const R: usize>(
        &self,
        ob: usize,
        s0: *const f32,
        d0: *mut f32,
        stride: usize,
        count: usize,
    ) {
        // SAFETY (whole body): every pointer offset below is bounded by the asserts in `run`:
        // `init` and `w` hold `lanes` floats per row, the reads reach `kofs + R - 1 <= SLACK`
        // past a run's element, and the stores cover channels below `channels` and `count`
        // positions of the run.
        unsafe {
            let mut acc = [[_mm512_setzero_ps(); NV]; R];
            for v in 0..NV {
                let b = _mm512_loadu_ps(self.init.as_ptr().add(ob + 16 * v));
                for a in acc.iter_mut() {
                    a[v] = b;
                }
            }
            let mut wq = self.w.as_ptr().add(ob);
            for &ko in self.kofs {
                let s = s0.add(ko);
                let mut wv = [_mm512_setzero_ps(); NV];
                for (v, x) in wv.iter_mut().enumerate() {
                    *x = _mm512_loadu_ps(wq.add(16 * v));
                }
                for (r, a) in acc.iter_mut().enumerate() {
                    let xv = _mm512_set1_ps(*s.add(r));
                    for v in 0..NV {
                        a[v] = _mm512_fmadd_ps(wv[v], xv, a[v]);
                    }
                }
                wq = wq.add(self.lanes);
            }
            // Through memory with constant indices, so the accumulators stay in registers.
            let mut out = [[[0f32; 16]; NV]; R];
            for (o, a) in out.iter_mut().zip(&acc) {
                for v in 0..NV {
                    _mm512_storeu_ps(o[v].as_mut_ptr(), a[v]);
                }
            }
            let valid = self.channels - ob;
            for (r, o) in out.iter().enumerate().take(count) {
                for (v, lanes) in o.iter().enumerate() {
                    let n = valid.saturating_sub(16 * v).min(16);
                    for (lane, &x) in lanes[..n].iter().enumerate() {
                        *d0.add((ob + 16 * v + lane) * stride + r) = x;
                    }
                }
            }
        }
    }
}

/// The smallest tile size at least `want` (at most 12 for 32-channel tiles, 28 for 16).
fn tile_size(want: usize, nv: usize) -> usize {
    let sizes: &[usize] = if nv == 2 {
        &[4, 5, 6, 8, 10, 12]
    } else {
        &[4, 5, 6, 8, 10, 12, 14, 16, 20, 24, 28]
    };
    sizes
        .iter()
        .copied()
        .find(|&s| s >= want)
        .unwrap_or(sizes[sizes.len() - 1])
}

/// `n` rounded up to a multiple of 16.
fn lanes(n: usize) -> usize {
    n.div_ceil(16) * 16
}

/// Appends `planes` images of `[h, w]` to `dst`, each zero-padded by `pad` on every side.
fn pad_planes(dst: &mut Vec<f32>, src: &[f32], planes: usize, [h, w]: [usize; 2], pad: [usize; 2]) {
    let (hp, wp) = (h + 2 * pad[0], w + 2 * pad[1]);
    let start = dst.len();
    dst.resize(start + planes * hp * wp, 0.0);
    for (p, plane) in src.chunks_exact(h * w).take(planes).enumerate() {
        for (y, row) in plane.chunks_exact(w).enumerate() {
            let at = start + (p * hp + y + pad[0]) * wp + pad[1];
            dst[at..at + w].copy_from_slice(row);
        }
    }
}

/// The forward convolution of `images` images `[C, H, W]` (dense, one after another) with the
/// weight `w` (`[O, C, KH, KW]`, dense) and an optional bias, into `out` (`[images, O, HO,
/// WO]`), writing every element. `usable` must hold.
pub(super) fn forward(
    x: &[f32],
    [c, h, wd]: [usize; 3],
    w: &[f32],
    [o, kh, kw]: [usize; 3],
    bias: Option<&[f32]>,
    p: &Conv2dParams,
    out: &mut [MaybeUninit<f32>],
) {
    let [ph, pw] = p.padding;
    let (hp, wp) = (h + 2 * ph, wd + 2 * pw);
    let (ho, wo) = (hp + 1 - kh, wp + 1 - kw);
    let ck = c * kh * kw;
    let lanes_o = lanes(o);
    // w[k, o] from W[o, k].
    let mut wt = vec![0f32; ck * lanes_o];
    for (oi, row) in w.chunks_exact(ck).enumerate() {
        for (k, &v) in row.iter().enumerate() {
            wt[k * lanes_o + oi] = v;
        }
    }
    let mut init = vec![0f32; lanes_o];
    if let Some(b) = bias {
        init[..o].copy_from_slice(b);
    }
    let kofs: Vec<usize> = (0..ck)
        .map(|k| (k / (kh * kw)) * hp * wp + (k / kw % kh) * wp + k % kw)
        .collect();
    let runs: Vec<Run> = (0..ho)
        .map(|oy| Run {
            dst: oy * wo,
            src: oy * wp,
            len: wo,
        })
        .collect();
    let prod = Product {
        kofs: &kofs,
        w: &wt,
        lanes: lanes_o,
        channels: o,
        init: &init,
        runs: &runs,
    };
    let mut xp = Vec::new();
    for (img, dst) in x
        .chunks_exact(c * h * wd)
        .zip(out.chunks_exact_mut(o * ho * wo))
    {
        xp.clear();
        pad_planes(&mut xp, img, c, [h, wd], p.padding);
        xp.resize(xp.len() + SLACK, 0.0);
        prod.run(&xp, dst, ho * wo);
    }
}

/// The input gradient of [`forward`] for `images` images: the output gradient `g` (`[images,
/// O, HO, WO]`) padded by `kernel - 1 - padding` and convolved with the weight flipped in space
/// and transposed (`[C, O, KH, KW]`), into `dx` (`[images, C, H, W]`), writing every element.
pub(super) fn backward_input(
    g: &[f32],
    [o, ho, wo]: [usize; 3],
    w: &[f32],
    [c, kh, kw]: [usize; 3],
    [h, wd]: [usize; 2],
    p: &Conv2dParams,
    dx: &mut [MaybeUninit<f32>],
) {
    let pad = [kh - 1 - p.padding[0], kw - 1 - p.padding[1]];
    let (hg, wg) = (ho + 2 * pad[0], wo + 2 * pad[1]);
    let ok = o * kh * kw;
    let lanes_c = lanes(c);
    // wf[(o, i', j'), c] = W[o, c, kh-1-i', kw-1-j'].
    let mut wf = vec![0f32; ok * lanes_c];
    for (k, row) in wf.chunks_exact_mut(lanes_c).enumerate() {
        let (oi, i, j) = (k / (kh * kw), k / kw % kh, k % kw);
        for (ci, v) in row[..c].iter_mut().enumerate() {
            *v = w[((oi * c + ci) * kh + kh - 1 - i) * kw + kw - 1 - j];
        }
    }
    let init = vec![0f32; lanes_c];
    let kofs: Vec<usize> = (0..ok)
        .map(|k| (k / (kh * kw)) * hg * wg + (k / kw % kh) * wg + k % kw)
        .collect();
    let runs: Vec<Run> = (0..h)
        .map(|y| Run {
            dst: y * wd,
            src: y * wg,
            len: wd,
        })
        .collect();
    let prod = Product {
        kofs: &kofs,
        w: &wf,
        lanes: lanes_c,
        channels: c,
        init: &init,
        runs: &runs,
    };
    let mut gp = Vec::new();
    for (img, dst) in g
        .chunks_exact(o * ho * wo)
        .zip(dx.chunks_exact_mut(c * h * wd))
    {
        gp.clear();
        pad_planes(&mut gp, img, o, [ho, wo], pad);
        gp.resize(gp.len() + SLACK, 0.0);
        prod.run(&gp, dst, h * wd);
    }
}

/// The weight gradient of [`forward`] summed over `images` images, written (not added) into
/// `dw` (`[O, C, KH, KW]`): per channel `o` and tap `(c, i, j)`, the sum over images and output
/// positions of `g[o, oy, ox] · x_padded[c, oy + i, ox + j]`, in the order image, row, column.
pub(super) fn backward_weight(
    g: &[f32],
    x: &[f32],
    [c, h, wd]: [usize; 3],
    [o, kh, kw]: [usize; 3],
    p: &Conv2dParams,
    dw: &mut [f32],
) {
    let [ph, pw] = p.padding;
    let (hp, wp) = (h + 2 * ph, wd + 2 * pw);
    let (ho, wo) = (hp + 1 - kh, wp + 1 - kw);
    let l = ho * wo;
    let images = x.len() / (c * h * wd).max(1);
    let span = c * hp * wp;
    let lanes_o = lanes(o);
    // The reduction runs over (image, oy, ox); its "weights" are the gradients, transposed.
    let mut gt = vec![0f32; images * l * lanes_o];
    for (img, rows) in g.chunks_exact(o * l).zip(gt.chunks_exact_mut(l * lanes_o)) {
        // Row by row of the result, reading the channels' planes side by side.
        for (q, row) in rows.chunks_exact_mut(lanes_o).enumerate() {
            for (oi, v) in row[..o].iter_mut().enumerate() {
                *v = img[oi * l + q];
            }
        }
    }
    let mut xp = Vec::with_capacity(images * span + SLACK);
    pad_planes(&mut xp, x, images * c, [h, wd], p.padding);
    xp.resize(xp.len() + SLACK, 0.0);
    // Built by nested loops: one division per entry would cost as much as the products here.
    let mut kofs = Vec::with_capacity(images * l);
    for img in 0..images {
        for oy in 0..ho {
            kofs.extend((0..wo).map(|ox| img * span + oy * wp + ox));
        }
    }
    let runs: Vec<Run> = (0..c * kh)
        .map(|ci| Run {
            dst: ci * kw,
            src: (ci / kh) * hp * wp + (ci % kh) * wp,
            len: kw,
        })
        .collect();
    let init = vec![0f32; lanes_o];
    let prod = Product {
        kofs: &kofs,
        w: &gt,
        lanes: lanes_o,
        channels: o,
        init: &init,
        runs: &runs,
    };
    // SAFETY: an `f32` is a valid `MaybeUninit<f32>`, and `run` only writes.
    let dst = unsafe {
        std::slice::from_raw_parts_mut(dw.as_mut_ptr().cast::<MaybeUninit<f32>>(), dw.len())
    };
    prod.run(&xp, dst, c * kh * kw);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Layout;
    use crate::cpu::conv;

    /// Deterministic values in [-1, 1).
    fn data(n: usize, seed: usize) -> Vec<f32> {
        (0..n)
            .map(|i| (((i + seed) * 7919 + seed * 31) % 2003) as f32 / 1001.5 - 1.0)
            .collect()
    }

    /// The convolution, its input gradient and its weight gradient in f64, straight from the
    /// definition.
    #[allow(clippy::type_complexity)]
    fn reference(
        x: &[f32],
        [n, c, h, w]: [usize; 4],
        wt: &[f32],
        [o, kh, kw]: [usize; 3],
        g: &[f32],
        [ph, pw]: [usize; 2],
    ) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
        let (ho, wo) = (h + 2 * ph + 1 - kh, w + 2 * pw + 1 - kw);
        let mut y = vec![0.0; n * o * ho * wo];
        let mut dx = vec![0.0; n * c * h * w];
        let mut dw = vec![0.0; o * c * kh * kw];
        for ni in 0..n {
            for oi in 0..o {
                for oy in 0..ho {
                    for ox in 0..wo {
                        let at = ((ni * o + oi) * ho + oy) * wo + ox;
                        for ci in 0..c {
                            for i in 0..kh {
                                for j in 0..kw {
                                    let (iy, ix) = (oy + i, ox + j);
                                    if iy < ph || ix < pw || iy - ph >= h || ix - pw >= w {
                                        continue;
                                    }
                                    let xa = ((ni * c + ci) * h + iy - ph) * w + ix - pw;
                                    let wa = ((oi * c + ci) * kh + i) * kw + j;
                                    y[at] += x[xa] as f64 * wt[wa] as f64;
                                    dx[xa] += g[at] as f64 * wt[wa] as f64;
                                    dw[wa] += g[at] as f64 * x[xa] as f64;
                                }
                            }
                        }
                    }
                }
            }
        }
        (y, dx, dw)
    }

    fn close(got: &[f32], want: &[f64], what: &str) {
        assert_eq!(got.len(), want.len(), "{what}: length");
        let scale = want.iter().fold(1.0f64, |m, v| m.max(v.abs()));
        for (i, (&a, &b)) in got.iter().zip(want).enumerate() {
            assert!(
                (a as f64 - b).abs() <= 1e-5 * scale,
                "{what}[{i}]: {a} vs {b}"
            );
        }
    }

    /// LeNet's second convolution (the direct kernels where the CPU has AVX-512, im2col and a
    /// GEMM elsewhere) gives the same bits on one thread and on four.
    #[test]
    fn results_do_not_depend_on_the_thread_count() {
        let (n, c, h, w, o) = (24, 16, 14, 14, 32);
        let p = Conv2dParams {
            stride: [1, 1],
            padding: [0, 0],
            dilation: [1, 1],
            groups: 1,
        };
        let (x, wt, g) = (
            data(n * c * h * w, 1),
            data(o * c * 25, 2),
            data(n * o * 100, 3),
        );
        let (xl, wl) = (
            Layout::contiguous(&[n, c, h, w]),
            Layout::contiguous(&[o, c, 5, 5]),
        );
        let gl = Layout::contiguous(&[n, o, 10, 10]);
        let run = || {
            let y = conv::conv2d((&x, &xl), (&wt, &wl), None, &p);
            let dx = conv::conv2d_backward_input((&g, &gl), (&wt, &wl), [n, c, h, w], &p);
            let dw = conv::conv2d_backward_weight((&g, &gl), (&x, &xl), [o, c, 5, 5], &p);
            [y, dx, dw].map(|v| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>())
        };
        let pool = |t| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(t)
                .build()
                .unwrap()
        };
        assert_eq!(pool(1).install(run), pool(4).install(run));
    }

    /// Channel counts below, at and past one and two vectors, rows shorter and longer than a
    /// tile, padding and none: through the public entry points, which pick these kernels.
    #[test]
    fn direct_kernels_match_the_definition() {
        let cases = [
            // (n, c, h, w, o, kh, kw, ph, pw)
            (3, 16, 14, 14, 32, 5, 5, 0, 0),
            (2, 5, 9, 31, 20, 3, 3, 1, 1),
            (2, 8, 7, 6, 48, 3, 5, 2, 1),
            (1, 70, 4, 4, 3, 1, 1, 0, 0),
            (2, 3, 12, 40, 16, 5, 5, 2, 2),
            // Same-size with 16 input channels: the entry point's direct input gradient.
            (3, 16, 9, 11, 24, 3, 3, 1, 1),
        ];
        for (ci, &(n, c, h, w, o, kh, kw, ph, pw)) in cases.iter().enumerate() {
            let p = Conv2dParams {
                stride: [1, 1],
                padding: [ph, pw],
                dilation: [1, 1],
                groups: 1,
            };
            if !usable(&p, (kh, kw)) {
                eprintln!("no AVX-512: the direct kernels are not used here");
                return;
            }
            let (ho, wo) = (h + 2 * ph + 1 - kh, w + 2 * pw + 1 - kw);
            let x = data(n * c * h * w, ci);
            let wt = data(o * c * kh * kw, ci + 10);
            let b = data(o, ci + 20);
            let g = data(n * o * ho * wo, ci + 30);
            let (mut y_ref, dx_ref, dw_ref) =
                reference(&x, [n, c, h, w], &wt, [o, kh, kw], &g, [ph, pw]);
            for (i, v) in y_ref.iter_mut().enumerate() {
                *v += b[i / (ho * wo) % o] as f64;
            }
            let (xl, wl) = (
                Layout::contiguous(&[n, c, h, w]),
                Layout::contiguous(&[o, c, kh, kw]),
            );
            let (bl, gl) = (
                Layout::contiguous(&[o]),
                Layout::contiguous(&[n, o, ho, wo]),
            );
            let y = conv::conv2d((&x, &xl), (&wt, &wl), Some((&b, &bl)), &p);
            close(&y, &y_ref, &format!("case {ci} forward"));
            let dx = conv::conv2d_backward_input((&g, &gl), (&wt, &wl), [n, c, h, w], &p);
            close(&dx, &dx_ref, &format!("case {ci} input gradient"));
            let dw = conv::conv2d_backward_weight((&g, &gl), (&x, &xl), [o, c, kh, kw], &p);
            close(&dw, &dw_ref, &format!("case {ci} weight gradient"));
            // The kernels themselves, whatever depth the entry points ask for.
            let mut out = vec![MaybeUninit::new(f32::NAN); n * o * ho * wo];
            forward(&x, [c, h, w], &wt, [o, kh, kw], Some(&b), &p, &mut out);
            let out: Vec<f32> = out.iter().map(|v| unsafe { v.assume_init() }).collect();
            close(&out, &y_ref, &format!("case {ci} direct forward"));
            let mut dxd = vec![MaybeUninit::new(f32::NAN); n * c * h * w];
            backward_input(&g, [o, ho, wo], &wt, [c, kh, kw], [h, w], &p, &mut dxd);
            let dxd: Vec<f32> = dxd.iter().map(|v| unsafe { v.assume_init() }).collect();
            close(&dxd, &dx_ref, &format!("case {ci} direct input gradient"));
            let mut dwd = vec![f32::NAN; o * c * kh * kw];
            backward_weight(&g, &x, [c, h, w], [o, kh, kw], &p, &mut dwd);
            close(&dwd, &dw_ref, &format!("case {ci} direct weight gradient"));
        }
    }
}
