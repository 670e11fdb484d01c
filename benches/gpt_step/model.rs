//! A GPT-style decoder as a compiled `#[model]`: token and position embeddings, `L` pre-norm
//! transformer blocks with causal self-attention and a GELU (tanh) MLP, a final layer norm and
//! an untied language-model head. Every size of the model is a const parameter, so the
//! benchmark runs the size (`Gpt<8192, 256, 512, 8, 2048, 6, bf16>`) while tests/integration/gpt.rs
//! checks a small one on the CPU. The forwards are generic over the batch: the decoder takes
//! `N` token ids of any dim type, and the batch `N / T` its blocks see is a run-time size the
//! forward computes (checked when the reshape runs), declared nowhere.

use rtx::prelude::*;

/// One pre-norm block: `x + attn(ln1(x))`, then `x + fc2(gelu(fc1(ln2(x))))`.
#[model]
pub struct GptBlock<const T: usize, const D: usize, const H: usize, const F: usize, E: Float> {
    ln1: LayerNorm<D, E>,
    attn: CausalSelfAttention<D, H, E>,
    ln2: LayerNorm<D, E>,
    fc1: Linear<D, F, E>,
    fc2: Linear<F, D, E>,
}

#[model]
impl<const T: usize, const D: usize, const H: usize, const F: usize, E: Float>
    GptBlock<T, D, H, F, E>
{
    pub fn forward<B: Dim>(
        &self,
        x: &Tensor<(B, Const<T>, Const<D>), E>,
    ) -> Tensor<(B, Const<T>, Const<D>), E> {
        let h = self.ln1.forward(x);
        let a = self.attn.forward(&h);
        let x1 = x + &a;
        let h2 = self.ln2.forward(&x1);
        let f = self.fc1.forward(&h2);
        let f = f.gelu_tanh();
        let f = self.fc2.forward(&f);
        x1 + f
    }
}

/// The decoder: vocabulary `V`, context `T`, width `D`, `H` heads, MLP width `F`, `L` blocks.
#[model]
pub struct Gpt<
    const V: usize,
    const T: usize,
    const D: usize,
    const H: usize,
    const F: usize,
    const L: usize,
    E: Float,
> {
    wte: Embedding<V, D, E>,
    wpe: Embedding<T, D, E>,
    blocks: [GptBlock<T, D, H, F, E>; L],
    ln_f: LayerNorm<D, E>,
    pub head: Linear<D, V, E>,
}

#[model]
impl<
    const V: usize,
    const T: usize,
    const D: usize,
    const H: usize,
    const F: usize,
    const L: usize,
    E: Float,
> Gpt<V, T, D, H, F, L, E>
{
    /// Next-token logits `[N, V]` for the `[N]` token ids (rows of `T`, row-major) at
    /// positions `pos` (`0..T`). The batch, `N / T` rows, is a run-time size.
    pub fn forward<N: Dim>(
        &self,
        ids: &Tensor<(N,), i64>,
        pos: &Tensor<(Const<T>,), i64>,
    ) -> Tensor<(N, Const<V>), E> {
        let tok = self.wte.forward(ids);
        // ANCHOR: derived
        let tok = tok.reshape((ids.dim::<0>().size() / T, Const::<T>, Const::<D>));
        // ANCHOR_END: derived
        let p = self.wpe.forward(pos);
        let mut x = tok + p;
        for b in &self.blocks {
            x = b.forward(&x);
        }
        let x = self.ln_f.forward(&x);
        let x = x.reshape((ids.dim::<0>(), Const::<D>));
        self.head.forward(&x)
    }
}
