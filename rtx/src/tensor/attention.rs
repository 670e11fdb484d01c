//! Scaled dot-product attention over `[B, H, T, Dh]` heads, with an optional key-padding
//! mask or the causal mask: `softmax(q kᵀ · scale) v` (PyTorch's
//! `F.scaled_dot_product_attention` with a boolean mask over the keys, or `is_causal`).
//!
//! Attention is a composition (two batched products and a softmax), and that composition is
//! its definition: it runs wherever no faster path applies, and the tests hold each faster
//! path to it. Two do: on a GPU in f16 and bf16 (head dims a multiple of 16 up to 128, no
//! padding mask) the fused FlashAttention-2-style kernels forward and backward
//! (`rtx-backends/src/cuda/ops_attention.rs`); on the CPU in f32 and f64 without a tape, one
//! pass per tile of query rows, skipping what the causal mask hides
//! (`rtx-backends/src/cpu/attention.rs`).
//!
//! Both write the output with the heads side by side (`[B, T, H, Dh]` in memory, seen as
//! `[B, H, T, Dh]`), so merging the heads afterwards (`permute` then `reshape` to
//! `[B, T, H Dh]`) is a view. The fused kernels also read q, k and v where they lie when their
//! strides allow it (head views of a fused projection's output do), and write the gradients
//! of q, k and v in their inputs' memory order: one buffer for the three when they are the
//! parts of one projection's output.

use crate::autograd;
use crate::error::{Error, Result, ok};
use crate::shape::{Dim, Shape, describe};
use crate::tensor::Tensor;
use rtx_backends::storage::{AttentionGrads, flash_attention_supported};
use rtx_backends::{AttentionDims, AttentionLayout, HeadStrides, Layout};
use rtx_kernels::{DType, Element, Float};

impl<B: Dim, H: Dim, T: Dim, Dh: Dim, E: Float> Tensor<(B, H, T, Dh), E> {
    /// Attention of these queries over the keys `k` and values `v` (`[B, H, S, Dh]`):
    /// `softmax(q kᵀ · scale) v`, where keys that `key_padding` (`[B, S]`) marks true get no
    /// weight. `scale` is usually `1 / sqrt(Dh)`.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let q: Tensor<(usize, usize, usize, usize)> = Tensor::randn((2, 3, 4, 8), 0, Device::Cpu);
    /// let k: Tensor<(usize, usize, usize, usize)> = Tensor::randn((2, 3, 5, 8), 1, Device::Cpu);
    /// let pad = Tensor::from_vec(vec![false, false, false, true, true, false, false, false, false, false], (2usize, 5usize), Device::Cpu);
    /// let y = q.attention(&k, &k, Some(&pad), 8f64.sqrt().recip());
    /// assert_eq!(y.dims(), &[2, 3, 4, 8]);
    /// ```
    ///
    /// # Panics
    /// When a run-time size of `k`, `v` or the mask does not fit (see
    /// [`Tensor::try_attention`]).
    #[track_caller]
    pub fn attention<S: Dim>(
        &self,
        k: &Tensor<(B, H, S, Dh), E>,
        v: &Tensor<(B, H, S, Dh), E>,
        key_padding: Option<&Tensor<(B, S), bool>>,
        scale: f64,
    ) -> Self {
        ok(self.try_attention(k, v, key_padding, scale))
    }

    /// [`Tensor::attention`], returning an error naming the shapes when they do not fit.
    pub fn try_attention<S: Dim>(
        &self,
        k: &Tensor<(B, H, S, Dh), E>,
        v: &Tensor<(B, H, S, Dh), E>,
        key_padding: Option<&Tensor<(B, S), bool>>,
        scale: f64,
    ) -> Result<Self> {
        self.attend(k, v, key_padding, false, scale)
    }

    /// Causal attention of these queries over the keys `k` and values `v` (`[B, H, S, Dh]`):
    /// [`Tensor::attention`] where query `i` sees only the keys `j <= i + S - T` (the diagonal
    /// aligned to the bottom right, as PyTorch's `is_causal` and FlashAttention's; `j <= i`
    /// when `S == T`). A decoder's self-attention.
    ///
    /// On a GPU in f16 or bf16 with `Dh` a multiple of 16 up to 128, it runs fused (the
    /// kernels of `rtx::kernels::flash_attn_fwd`, FlashAttention-2's method): one launch
    /// forward, three backward, and no `T x S` matrix in memory; on the CPU in f32 and f64
    /// without a tape, one pass over tiles of query rows that scores only the keys each tile
    /// sees; elsewhere it is the composition. A query row left with no key (only when `T >
    /// S`) is zeros when fused and NaN otherwise, as the composition gives.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let q: Tensor<(usize, usize, usize, usize)> = Tensor::randn((1, 2, 3, 4), 0, Device::Cpu);
    /// let y = q.causal_attention(&q, &q, 0.5);
    /// // The first query sees the first key alone: its output is that key's value.
    /// assert_eq!(y.to_vec()[..4], q.to_vec()[..4]);
    /// ```
    ///
    /// # Panics
    /// When a run-time size of `k` or `v` does not fit (see [`Tensor::try_causal_attention`]).
    #[track_caller]
    pub fn causal_attention<S: Dim>(
        &self,
        k: &Tensor<(B, H, S, Dh), E>,
        v: &Tensor<(B, H, S, Dh), E>,
        scale: f64,
    ) -> Self {
        ok(self.try_causal_attention(k, v, scale))
    }

    /// [`Tensor::causal_attention`], returning an error naming the shapes when they do not fit.
    pub fn try_causal_attention<S: Dim>(
        &self,
        k: &Tensor<(B, H, S, Dh), E>,
        v: &Tensor<(B, H, S, Dh), E>,
        scale: f64,
    ) -> Result<Self> {
        self.attend(k, v, None, true, scale)
    }

    /// Attention with an optional key-padding mask and an optional causal mask: the fused GPU
    /// kernels where they apply, the one-pass CPU loop where it applies, else the composition.
    fn attend<S: Dim>(
        &self,
        k: &Tensor<(B, H, S, Dh), E>,
        v: &Tensor<(B, H, S, Dh), E>,
        key_padding: Option<&Tensor<(B, S), bool>>,
        causal: bool,
        scale: f64,
    ) -> Result<Self> {
        let (q_dims, k_dims) = (self.dims(), k.dims());
        let (b, h, t, dh) = (q_dims[0], q_dims[1], q_dims[2], q_dims[3]);
        let s = k_dims[2];
        let mismatch = |what: String, rule| Error::ShapeMismatch {
            op: "attention",
            lhs: describe(&self.shape()),
            rhs: what,
            rule,
        };
        if k_dims[0] != b || k_dims[1] != h || k_dims[3] != dh || v.dims() != k_dims {
            return Err(mismatch(
                format!("k {} and v {}", describe(&k.shape()), describe(&v.shape())),
                "keys and values must be [B, H, S, Dh] with the queries' B, H and Dh",
            ));
        }
        if let Some(m) = key_padding
            && m.dims() != [b, s]
        {
            return Err(mismatch(
                format!("key padding {}", describe(&m.shape())),
                "the key-padding mask must be [B, S]",
            ));
        }
        if self.device().is_cuda()
            && key_padding.is_none()
            && flash_attention_supported(E::DTYPE, dh)
        {
            let dims = AttentionDims {
                batch: b,
                heads: h,
                t_q: t,
                t_k: s,
                d: dh,
                scale,
                causal,
            };
            return fused(self, k, v, dims);
        }
        let recording = autograd::must_record(&[self.node(), k.node(), v.node()]);
        let one_pass =
            !self.device().is_cuda() && matches!(E::DTYPE, DType::F32 | DType::F64) && !recording;
        if one_pass {
            let out = self.storage().attention_cpu(
                self.layout(),
                (k.storage(), k.layout()),
                (v.storage(), v.layout()),
                key_padding.map(|m| (m.storage(), m.layout())),
                causal,
                scale,
            )?;
            // The storage is [B, T, H, Dh]; seen as [B, H, T, Dh] it needs no copy.
            let layout = Layout::new(&[b, h, t, dh], &[t * h * dh, dh, h * dh, 1], 0);
            return Ok(Tensor::from_storage_layout(out, layout, self.shape()));
        }
        // Run-time dims for the broadcasts below; views, not copies, of strided heads.
        let q = self.retype((b, h, t, dh))?;
        let k = k.retype((b, h, s, dh))?;
        let v = v.retype((b, h, s, dh))?;
        // Scaling the queries touches T x Dh values per head rather than T x S scores.
        let mut scores = (q * E::from_f64(scale)).try_matmul(&k.transpose::<2, 3>())?;
        if causal {
            let future = Tensor::<(usize, usize), bool>::full((t, s), true, self.device())
                .try_triu(1 + s as i64 - t as i64)?;
            scores = scores.try_masked_fill(
                &future.try_broadcast_to((b, h, t, s))?,
                E::from_f64(f64::NEG_INFINITY),
            )?;
        }
        if let Some(m) = key_padding {
            let m = m.try_reshape((b, 1usize, 1usize, s))?;
            scores = scores.try_masked_fill(
                &m.try_broadcast_to((b, h, t, s))?,
                E::from_f64(f64::NEG_INFINITY),
            )?;
        }
        let y = scores.softmax::<3>().try_matmul(&v)?;
        y.retype(self.shape())
    }
}

/// `x` as a dense buffer of exactly its elements from the first (a copy unless it is one),
/// which is what the fused kernels read.
pub(crate) fn dense<S: Shape, E: Element>(x: &Tensor<S, E>) -> Result<Tensor<S, E>> {
    let l = x.layout();
    if l.is_contiguous() && l.offset() == 0 && x.storage().len() == l.numel() {
        return Ok(x.clone());
    }
    Ok(Tensor::from_storage(x.storage().contiguous(l)?, x.shape()))
}

/// Where the fused kernels can read `q`, `k` and `v` as they lie, writing the output with the
/// heads side by side and the gradients in their inputs' memory order: packed into one buffer
/// when q, k and v are the three parts of one (a fused projection's head views), otherwise one
/// buffer each. `None` when their strides do not allow it (the head dim not contiguous,
/// strides or offsets the kernels cannot copy from, k and v laid out differently, or
/// gradients that would not fill their buffers).
fn in_place([q, k, v]: [&Layout; 3], dims: &AttentionDims) -> Option<AttentionLayout> {
    let heads = |l: &Layout| {
        let s = l.strides();
        (s[3] == 1).then_some(HeadStrides {
            batch: s[0],
            head: s[1],
            row: s[2],
        })
    };
    let (qs, ks) = (heads(q)?, heads(k)?);
    if heads(v)? != ks {
        return None;
    }
    let packed = AttentionLayout {
        q: qs,
        k: ks,
        o: HeadStrides::tokens(dims.t_q, dims.heads * dims.d, dims.d),
        offsets: [q, k, v].map(Layout::offset),
        packed: true,
    };
    if packed.check(dims).is_ok() {
        return Some(packed);
    }
    let separate = AttentionLayout {
        packed: false,
        ..packed
    };
    separate.check(dims).is_ok().then_some(separate)
}

/// The fused forward (and, when recording, its backward rule) of [`Tensor::causal_attention`]
/// and [`Tensor::attention`] on a GPU: the output and the log-sum-exp of each query row come
/// from one launch; the rule recomputes the probabilities from them in three launches.
fn fused<B: Dim, H: Dim, T: Dim, S: Dim, Dh: Dim, E: Float>(
    q: &Tensor<(B, H, T, Dh), E>,
    k: &Tensor<(B, H, S, Dh), E>,
    v: &Tensor<(B, H, S, Dh), E>,
    dims: AttentionDims,
) -> Result<Tensor<(B, H, T, Dh), E>> {
    // In place where the kernels can read them; otherwise dense copies, which they always can.
    let (qd, kd, vd, layout) = match in_place([q.layout(), k.layout(), v.layout()], &dims) {
        Some(layout) => (q.detach(), k.detach(), v.detach(), layout),
        None => {
            let (qd, kd, vd) = (dense(q)?, dense(k)?, dense(v)?);
            let dense = [qd.layout(), kd.layout(), vd.layout()];
            let layout = in_place(dense, &dims).unwrap_or_else(|| {
                unreachable!("dense heads of a supported head dim are read in place")
            });
            (qd.detach(), kd.detach(), vd.detach(), layout)
        }
    };
    let (o, lse) = qd
        .storage()
        .flash_attention(kd.storage(), vd.storage(), dims, layout)?;
    let view = move |s: &HeadStrides, offset: usize, t: usize| {
        Layout::new(
            &[dims.batch, dims.heads, t, dims.d],
            &[s.batch, s.head, s.row, 1],
            offset,
        )
    };
    let o_layout = view(&layout.o, 0, dims.t_q);
    let out = Tensor::from_storage_layout(o, o_layout, q.shape());
    if !autograd::must_record(&[q.node(), k.node(), v.node()]) {
        return Ok(out);
    }
    let inputs = vec![q.node().cloned(), k.node().cloned(), v.node().cloned()];
    let od = out.detach();
    Ok(out.record(inputs, move |g| {
        // The kernels read the output's gradient in the output's memory order: the merge of
        // the heads' backward gives it so; anything else is copied into it.
        let copy;
        let g = if g.layout().strides() == o_layout.strides() && g.layout().offset() == 0 {
            g.storage()
        } else {
            copy = g.storage().contiguous(&g.layout().permute(&[0, 2, 1, 3]))?;
            &copy
        };
        let grads = qd.storage().flash_attention_backward(
            (kd.storage(), vd.storage()),
            (od.storage(), &lse),
            g,
            dims,
            layout,
        )?;
        let (dq, dk, dv) = match grads {
            // One buffer, seen as q, k and v see theirs.
            AttentionGrads::Packed(all) => {
                let [oq, ok, ov] = layout.offsets;
                let dq =
                    Tensor::from_storage_layout(all, view(&layout.q, oq, dims.t_q), qd.shape());
                let dk = dq.view(view(&layout.k, ok, dims.t_k), kd.shape());
                let dv = dq.view(view(&layout.k, ov, dims.t_k), vd.shape());
                (dq, dk, dv)
            }
            AttentionGrads::Separate([dq, dk, dv]) => (
                Tensor::from_storage_layout(dq, view(&layout.q, 0, dims.t_q), qd.shape()),
                Tensor::from_storage_layout(dk, view(&layout.k, 0, dims.t_k), kd.shape()),
                Tensor::from_storage_layout(dv, view(&layout.k, 0, dims.t_k), vd.shape()),
            ),
        };
        Ok(vec![
            autograd::erase(dq),
            autograd::erase(dk),
            autograd::erase(dv),
        ])
    }))
}

#[cfg(test)]
mod tests {
    use crate::prelude::*;

    type Heads<E> = Tensor<(usize, usize, usize, usize), E>;

    /// The one-pass CPU attention against the composition it stands for (forced by asking
    /// for gradients), with and without padding, in f32 and f64.
    #[test]
    fn one_pass_attention_is_the_composition() {
        let (b, h, t, s, dh) = (3usize, 2usize, 5usize, 7usize, 4usize);
        let pad: Vec<bool> = (0..b * s).map(|i| i % s >= s - i / s).collect();
        let pad = Tensor::from_vec(pad, (b, s), Device::Cpu);
        for mask in [None, Some(&pad)] {
            let q: Heads<f64> = Tensor::randn((b, h, t, dh), 1, Device::Cpu);
            let k: Heads<f64> = Tensor::randn((b, h, s, dh), 2, Device::Cpu);
            let v: Heads<f64> = Tensor::randn((b, h, s, dh), 3, Device::Cpu);
            let fast = q.attention(&k, &v, mask, 0.5).to_vec();
            let slow = q
                .clone()
                .requires_grad()
                .attention(&k, &v, mask, 0.5)
                .to_vec();
            for (f, s) in fast.iter().zip(&slow) {
                assert!((f - s).abs() < 1e-12, "{f} vs {s}");
            }
            let q32: Heads<f32> = q.cast();
            let (k32, v32): (Heads<f32>, Heads<f32>) = (k.cast(), v.cast());
            let fast = q32.attention(&k32, &v32, mask, 0.5).to_vec();
            for (f, s) in fast.iter().zip(&slow) {
                assert!((f64::from(*f) - s).abs() < 1e-5, "{f} vs {s}");
            }
        }
    }

    /// Causal attention against a plain loop in f64: query `i` of `T` weighs keys
    /// `j <= i + S - T` only, for `T == S` and for fewer queries than keys (the diagonal aligned
    /// to the bottom right), over one tile of query rows and several (the one-pass CPU path),
    /// and through the composition (taken when recording).
    #[test]
    fn causal_attention_sees_only_the_keys_up_to_the_diagonal() {
        for (t, s) in [(5usize, 5usize), (3, 7), (70, 70), (40, 75)] {
            let (b, h, dh) = (2usize, 3usize, 4usize);
            let q: Heads<f64> = Tensor::randn((b, h, t, dh), 4, Device::Cpu);
            let k: Heads<f64> = Tensor::randn((b, h, s, dh), 5, Device::Cpu);
            let v: Heads<f64> = Tensor::randn((b, h, s, dh), 6, Device::Cpu);
            let one_pass = q.causal_attention(&k, &v, 0.7).to_vec();
            let composed = q
                .clone()
                .requires_grad()
                .causal_attention(&k, &v, 0.7)
                .to_vec();
            for (got, path) in [(&one_pass, "one pass"), (&composed, "composition")] {
                check_causal(got, [&q, &k, &v], path);
            }
        }
    }

    /// `got` against a plain loop of causal attention at scale 0.7 over `q`, `k` and `v`.
    fn check_causal(got: &[f64], [q, k, v]: [&Heads<f64>; 3], path: &str) {
        let [b, h, t, dh] = [0, 1, 2, 3].map(|i| q.dims()[i]);
        let s = k.dims()[2];
        let (qv, kv, vv) = (q.to_vec(), k.to_vec(), v.to_vec());
        for bh in 0..b * h {
            for i in 0..t {
                let seen = i + s - t + 1;
                let row = &qv[(bh * t + i) * dh..][..dh];
                let scores: Vec<f64> = (0..seen)
                    .map(|j| {
                        let key = &kv[(bh * s + j) * dh..][..dh];
                        0.7 * row.iter().zip(key).map(|(a, b)| a * b).sum::<f64>()
                    })
                    .collect();
                let m = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = scores.iter().map(|x| (x - m).exp()).collect();
                let z: f64 = e.iter().sum();
                for c in 0..dh {
                    let want: f64 = (0..seen)
                        .map(|j| e[j] / z * vv[(bh * s + j) * dh + c])
                        .sum();
                    let g = got[(bh * t + i) * dh + c];
                    assert!(
                        (g - want).abs() < 1e-12,
                        "{path} [{bh}, {i}, {c}]: {g} vs {want}"
                    );
                }
            }
        }
    }

    /// The causal one-pass path with a key-padding mask, and with more queries than keys (rows
    /// that see no key are NaN), against the composition, NaN for NaN.
    #[test]
    fn causal_one_pass_with_padding_and_empty_rows_is_the_composition() {
        for (t, s) in [(40usize, 75usize), (9, 6)] {
            let (b, h, dh) = (2usize, 2usize, 8usize);
            let pad: Vec<bool> = (0..b * s).map(|i| i % s == 1 + i / s).collect();
            let pad = Tensor::from_vec(pad, (b, s), Device::Cpu);
            let q: Heads<f64> = Tensor::randn((b, h, t, dh), 7, Device::Cpu);
            let k: Heads<f64> = Tensor::randn((b, h, s, dh), 8, Device::Cpu);
            let v: Heads<f64> = Tensor::randn((b, h, s, dh), 9, Device::Cpu);
            let run = |q: &Heads<f64>| q.attend(&k, &v, Some(&pad), true, 0.3).unwrap().to_vec();
            let fast = run(&q);
            let slow = run(&q.clone().requires_grad());
            let mut nans = 0;
            for (f, s) in fast.iter().zip(&slow) {
                nans += usize::from(f.is_nan());
                assert_eq!(f.is_nan(), s.is_nan(), "{f} vs {s}");
                assert!(f.is_nan() || (f - s).abs() < 1e-12, "{f} vs {s}");
            }
            // Query i sees keys up to i + s - t: with 9 queries over 6 keys, the first 3 see none.
            assert_eq!(nans, if t > s { b * h * (t - s) * dh } else { 0 });
        }
    }

    /// Which layouts the fused kernels read in place (decided on the host, so on any device):
    /// head views of one fused projection (gradients packed like it), of three projections
    /// and dense heads (a gradient each), and not a head dim that is not contiguous, nor keys
    /// and values laid out differently.
    #[test]
    fn head_views_are_read_in_place_where_the_kernels_can() {
        use super::in_place;
        use rtx_backends::{AttentionDims, AttentionLayout, HeadStrides, Layout};
        let (b, h, t, d) = (2, 8, 256, 64);
        let w = h * d;
        let dims = AttentionDims {
            batch: b,
            heads: h,
            t_q: t,
            t_k: t,
            d,
            scale: 0.125,
            causal: true,
        };
        // [B, T, n w] -> the [B, H, T, d] view of the `part`-th heads.
        let view = |n: usize, part: usize| {
            Layout::contiguous(&[b, t, n * h, d])
                .permute(&[0, 2, 1, 3])
                .narrow(1, part * h, h)
        };
        let qkv = [0, 1, 2].map(|p| view(3, p));
        let got = in_place(qkv.each_ref(), &dims).unwrap();
        assert_eq!(got, AttentionLayout::qkv(&dims));
        let three = [0, 0, 0].map(|c| view(1, c));
        let got = in_place(three.each_ref(), &dims).unwrap();
        let tokens = HeadStrides::tokens(t, w, d);
        assert_eq!((got.q, got.k, got.packed), (tokens, tokens, false));
        let dense = Layout::contiguous(&[b, h, t, d]);
        let got = in_place([&dense; 3], &dims).unwrap();
        assert_eq!(got.q, AttentionLayout::dense(&dims).q);
        assert!(!got.packed);
        let transposed = dense.transpose(2, 3);
        let square = AttentionDims {
            t_q: d,
            t_k: d,
            ..dims
        };
        assert!(in_place([&transposed; 3], &square).is_none());
        assert!(in_place([&qkv[0], &three[1], &dense], &dims).is_none());
        // k and v of one [B, T, 2 w] projection fill no buffer of their own: copied dense.
        let kv = [0, 1].map(|p| view(2, p));
        assert!(in_place([&three[0], &kv[0], &kv[1]], &dims).is_none());
    }

    #[test]
    fn shapes_that_do_not_fit_are_named() {
        let q: Heads<f32> = Tensor::zeros((2, 2, 3, 4), Device::Cpu);
        let k: Heads<f32> = Tensor::zeros((2, 2, 5, 3), Device::Cpu);
        let e = q.try_attention(&k, &k, None, 1.0).unwrap_err().to_string();
        assert!(e.contains("k [2, 2, 5, 3]"), "{e}");
        let k: Heads<f32> = Tensor::zeros((2, 2, 5, 4), Device::Cpu);
        let pad: Tensor<(usize, usize), bool> = Tensor::full((2, 4), false, Device::Cpu);
        let e = q
            .try_attention(&k, &k, Some(&pad), 1.0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("key padding [2, 4]"), "{e}");
    }
}
