//! [`StaticForward`] for [`CausalSelfAttention`], composed of tensor methods with their tape
//! rules ([`vjp1`], [`vjp2`]) and `Linear`'s static forward, step for step as the eager
//! forward computes it; the backward runs those steps' backwards in reverse.
//!
//! Between the fused projection's output `[B, T, 3D]` and the output projection's input
//! `[B, T, D]`, attention runs one of two ways. Fused (a GPU in f16 or bf16): the kernels read
//! q, k and v in place from the projection's output, write the heads' output side by side as
//! `[B, T, D]`, and write dq, dk and dv straight into one `[B, T, 3D]` gradient
//! (`AttentionLayout::qkv`), so no head is split, merged or joined by a copy. Composed
//! (anywhere else): the heads are split out of the projection, the attention is the eager
//! forward's products and softmax, and the three heads' gradients are joined back into the
//! projection's gradient along its last axis (the tape adds three zero-padded copies instead:
//! the same values).

use super::{asked, back1, back2, linear};
use crate::compile::grad::{vjp1, vjp2};
use crate::compile::{Gradients, StaticForward};
use crate::error::ok;
use crate::ir::{Builder, Value};
use crate::nn::CausalSelfAttention;
use crate::no_grad;
use crate::shape::{Axes4, Const, Dim};
use crate::tensor::Tensor;
use crate::tensor::attention::dense;
use rtx_backends::storage::{AttentionGrads, flash_attention_supported};
use rtx_backends::{AttentionDims, AttentionLayout, Storage};
use rtx_kernels::Float;

impl<B: Dim, T: Dim, const D: usize, const H: usize, E: Float>
    StaticForward<(Tensor<(B, T, Const<D>), E>,)> for CausalSelfAttention<D, H, E>
{
    type Output = Tensor<(B, T, Const<D>), E>;
    type ArgGrads = (Option<Tensor<(B, T, Const<D>), E>>,);

    fn forward_fused(&self, (x,): (Tensor<(B, T, Const<D>), E>,)) -> Self::Output {
        self.forward(&x)
    }

    fn forward_train(
        &self,
        (x,): (Tensor<(B, T, Const<D>), E>,),
    ) -> (
        Self::Output,
        impl FnOnce(Self::Output, &mut Gradients, bool) -> Self::ArgGrads,
    ) {
        let (b, t) = (x.dims()[0], x.dims()[1]);
        let x = x.detach();
        let (x3, back_x3) = vjp1(&x, &|z| z.reshape((b, t, Const::<D>)));
        let (wt, back_wt) = vjp1(&self.qkv_weight, &|w| w.t());
        // The bias is added by the product (in its epilogue on a GPU), as a `Linear`'s is.
        let bias = (self.qkv_bias.storage(), self.qkv_bias.layout());
        let (qkv, saved_qkv) = ok(x3.matmul_saving_bias(&wt, Some(bias)));
        let (y3, back_attn) = attend(&qkv, H);
        let (y, back_y) = vjp1(&y3, &|z| {
            z.reshape((x.dim::<0>(), x.dim::<1>(), Const::<D>))
        });
        let (out, back_proj) = linear::train(&self.proj, &y);
        let backward = move |dout: Self::Output, grads: &mut Gradients, need_x: bool| {
            let dy = asked(back_proj(dout, grads, true).0);
            let dqkv = back_attn(&back1(back_y, &dy));
            let need_w = self.qkv_weight.tracks_grad();
            // As in `Linear`: the bias's gradient comes with the weight's product.
            let bias = self.qkv_bias.tracks_grad().then(|| self.qkv_bias.shape());
            let (dx3, dwt, db) = ok(saved_qkv.grads_with_bias(&dqkv, need_x, need_w, bias));
            if let Some(db) = db {
                grads.add(&self.qkv_bias, db);
            }
            if let Some(dwt) = dwt {
                grads.add(&self.qkv_weight, back1(back_wt, &dwt));
            }
            (dx3.map(|d| back1(back_x3, &d)),)
        };
        (out, backward)
    }

    /// The fused projection (a `linear` node), the attention between its heads (one
    /// `causal_attention` node, which runs `attend`: fused kernels or the composed
    /// products and softmax, as here), and the output projection.
    fn emit_ir(
        &self,
        b: &mut Builder,
        (x,): (Value<(B, T, Const<D>), E>,),
    ) -> Value<(B, T, Const<D>), E> {
        let w = b.param::<(usize, Const<D>), E>("qkv.weight");
        let bias = b.param::<(usize,), E>("qkv.bias");
        let qkv = b.linear::<(B, T, usize), _, _, E>(x, w, Some(bias.id()));
        let y = b.causal_attention::<(B, T, Const<D>), _, E>(qkv, H);
        b.scope("proj", |b| linear::emit(&self.proj, b, y))
    }
}

/// A sequence `[B, T, width]` with run-time dims: the fused projection's output `[B, T, 3D]`
/// or the heads' output `[B, T, D]`.
pub(crate) type Seq<E> = Tensor<(usize, usize, usize), E>;

/// The backward of the attention between the fused projection's output and the output
/// projection's input: the gradient `[B, T, 3D]` of the one for the gradient `[B, T, D]` of
/// the other.
pub(crate) type QkvBack<E> = Box<dyn FnOnce(&Seq<E>) -> Seq<E>>;

/// A head view `[B, H, T, D/H]` with run-time dims.
type Heads<E> = Tensor<(usize, usize, usize, usize), E>;

/// The backward of the attention between the heads: the gradients of `q`, `k` and `v` for
/// the gradient of its output.
type HeadsBack<E> = Box<dyn FnOnce(&Heads<E>) -> [Option<Heads<E>>; 3]>;

/// Causal attention over `heads` heads from the projection's output `qkv` `[B, T, 3D]` to
/// the heads' output `[B, T, D]`, with its backward: the fused kernels on a GPU in f16 or
/// bf16, the composition elsewhere. The compiled `CausalSelfAttention` and the IR's
/// `causal_attention` node both run this.
pub(crate) fn attend<E: Float>(qkv: &Seq<E>, heads: usize) -> (Seq<E>, QkvBack<E>) {
    let (b, t, w3) = (qkv.dims()[0], qkv.dims()[1], qkv.dims()[2]);
    let hd = w3 / 3 / heads;
    let dims = AttentionDims {
        batch: b,
        heads,
        t_q: t,
        t_k: t,
        d: hd,
        scale: 1.0 / (hd as f64).sqrt(),
        causal: true,
    };
    if qkv.device().is_cuda() && flash_attention_supported(E::DTYPE, hd) {
        fused(qkv, dims)
    } else {
        composed(qkv, dims)
    }
}

/// Causal attention from the projection's output `qkv` `[B, T, 3D]` to the heads' output
/// `[B, T, D]` by the fused kernels (`Storage::flash_attention`): q, k and v read in place,
/// the output and each row's log-sum-exp from one launch; the backward recomputes the
/// probabilities from them in three launches and writes the projection's gradient whole.
fn fused<E: Float>(qkv: &Seq<E>, dims: AttentionDims) -> (Seq<E>, QkvBack<E>) {
    // The product's output is dense from its first element, as `AttentionLayout::qkv` reads.
    let qkv = ok(dense(qkv));
    let layout = AttentionLayout::qkv(&dims);
    let s = qkv.storage();
    let (o, lse) = ok(s.flash_attention(s, s, dims, layout).map_err(Into::into));
    let y = Tensor::from_storage(o, (dims.batch, dims.t_q, dims.heads * dims.d));
    let out = y.clone();
    let backward = move |dy: &Seq<E>| {
        // The output projection's input gradient is dense `[B, T, D]`: the output's layout.
        let dy = ok(dense(dy));
        let s = qkv.storage();
        let grads =
            s.flash_attention_backward((s, s), (out.storage(), &lse), dy.storage(), dims, layout);
        match ok(grads.map_err(Into::into)) {
            AttentionGrads::Packed(dqkv) => Tensor::from_storage(dqkv, qkv.shape()),
            AttentionGrads::Separate(_) => unreachable!("a qkv layout's gradients are packed"),
        }
    };
    (y, Box::new(backward))
}

/// Causal attention from the projection's output `qkv` `[B, T, 3D]` to the heads' output
/// `[B, T, D]` as the eager forward composes it: the heads split out of the projection, the
/// attention between the heads ([`composed_heads`]), the heads merged; the backward joins the
/// heads' gradients into the projection's.
fn composed<E: Float>(qkv: &Seq<E>, dims: AttentionDims) -> (Seq<E>, QkvBack<E>) {
    let (b, t, h, hd) = (dims.batch, dims.t_q, dims.heads, dims.d);
    let w = h * hd;
    // The heads split out of the fused projection, [B, T, 3D] -> [B, H, T, D/H]: each part
    // made dense by its reshape, then a view.
    let heads = [0, 1, 2].map(|i| {
        let part = qkv.narrow::<2, usize>(i * w, w);
        let (r, back_r) = vjp1(&part, &|z| z.reshape((b, t, h, hd)));
        let (p, back_p) = vjp1(&r, &|z| z.permute::<Axes4<0, 2, 1, 3>>());
        (p, (back_r, back_p))
    });
    let [(q, back_q), (k, back_k), (v, back_v)] = heads;
    let (av, back_heads) = composed_heads(&q, &k, &v, dims);
    let (merged, back_merge) = vjp1(&av, &|z| z.permute::<Axes4<0, 2, 1, 3>>());
    let (y, back_y) = vjp1(&merged, &|z| z.reshape((b, t, w)));
    let qkv_shape = qkv.shape();
    let backward = move |dy: &Seq<E>| {
        let dav = back1(back_merge, &back1(back_y, dy));
        let [dq, dk, dv] = back_heads(&dav);
        // Each head's gradient is made dense at [B, T, D] (a vectorized copy) before the
        // join: stacking the strided [B, T, H, D/H] views straight into the fused layout
        // saves that copy but made the join's row segments 64 values long, and measured
        // 58 us a part against 15 + 28 (H200, GPT step, bf16).
        let dheads = [(dq, back_q), (dk, back_k), (dv, back_v)]
            .map(|(dh, (back_r, back_p))| back1(back_r, &back1(back_p, &asked(dh))));
        let parts = dheads.each_ref().map(|d| (d.storage(), d.layout()));
        let joined = ok(Storage::concat(&parts, 2).map_err(Into::into));
        Tensor::from_storage(joined, qkv_shape)
    };
    (y, Box::new(backward))
}

/// Causal attention between the heads as the eager forward composes it: the queries scaled,
/// the scores, the mask, a softmax and the weighted values, each step's backward kept.
fn composed_heads<E: Float>(
    q: &Heads<E>,
    k: &Heads<E>,
    v: &Heads<E>,
    dims: AttentionDims,
) -> (Heads<E>, HeadsBack<E>) {
    let t = dims.t_q;
    // Keys and values are read by a batched product here and again by its backward, and
    // cuBLAS cannot read a head view in place: one dense copy each, here, is shared by
    // both, where the views would be copied once by each product.
    let (k, v) = (ok(k.try_contiguous()), ok(v.try_contiguous()));
    // The scale goes on the queries, whose dense copy the product needs anyway, rather
    // than on the T x T scores.
    let scale = E::from_f64(dims.scale);
    let q = q * scale;
    let (kt, back_kt) = vjp1(&k, &|z| z.transpose::<2, 3>());
    let (scores, back_qk) = vjp2(&q, &kt, &|a, b| a.matmul(b));
    let future = Tensor::<(usize, usize), bool>::full((t, t), true, q.device()).triu(1);
    let ninf = E::from_f64(f64::NEG_INFINITY);
    // The mask needs no backward: a masked score's softmax output is exactly 0 (its
    // exp(-inf)), so the softmax backward, y (g - Σ g y), already gives it exactly 0 where
    // the tape's masked-fill backward would write one. That spares a pass over the scores.
    let masked = no_grad(|| scores.masked_fill(&future, ninf));
    let (att, back_softmax) = vjp1(&masked, &|z| z.softmax::<3>());
    let (av, back_av) = vjp2(&att, &v, &|a, b| a.matmul(b));
    let backward = move |dav: &Heads<E>| {
        let (datt, dv) = back2(back_av, dav, [true, true]);
        let dscores = back1(back_softmax, &asked(datt));
        let (dq, dkt) = back2(back_qk, &dscores, [true, true]);
        let dq = dq.map(|d| &d * scale);
        let dk = back1(back_kt, &asked(dkt));
        [dq, Some(dk), dv]
    };
    (av, Box::new(backward))
}
