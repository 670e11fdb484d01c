//! A GPT-style decoder as a compiled `#[model]`: token and position embeddings, `L` pre-norm
//! transformer blocks with causal self-attention and a GELU (tanh) MLP, a final layer norm and
//! an untied language-model head. Every size is a const parameter, so the benchmark runs the
//! issue's size (`Gpt<8192, 256, 512, 8, 2048, 6, 32, 8192, bf16>`) while tests/gpt.rs checks
//! a small one on the CPU. `B` is the batch, `N = B * T` the token count (checked when the
//! reshapes are compiled).

use rtx::prelude::*;

/// One pre-norm block: `x + attn(ln1(x))`, then `x + fc2(gelu(fc1(ln2(x))))`.
#[model]
pub struct GptBlock<
    const T: usize,
    const D: usize,
    const H: usize,
    const F: usize,
    const B: usize,
    E: Float,
> {
    ln1: LayerNorm<D, E>,
    attn: CausalSelfAttention<D, H, E>,
    ln2: LayerNorm<D, E>,
    fc1: Linear<D, F, E>,
    fc2: Linear<F, D, E>,
}

#[model]
impl<const T: usize, const D: usize, const H: usize, const F: usize, const B: usize, E: Float>
    GptBlock<T, D, H, F, B, E>
{
    pub fn forward(
        &self,
        x: &Tensor<(Const<B>, Const<T>, Const<D>), E>,
    ) -> Tensor<(Const<B>, Const<T>, Const<D>), E> {
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

/// The decoder: vocabulary `V`, context `T`, width `D`, `H` heads, MLP width `F`, `L` blocks,
/// batch `B` and `N = B * T` tokens.
#[model]
pub struct Gpt<
    const V: usize,
    const T: usize,
    const D: usize,
    const H: usize,
    const F: usize,
    const L: usize,
    const B: usize,
    const N: usize,
    E: Float,
> {
    wte: Embedding<V, D, E>,
    wpe: Embedding<T, D, E>,
    blocks: [GptBlock<T, D, H, F, B, E>; L],
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
    const B: usize,
    const N: usize,
    E: Float,
> Gpt<V, T, D, H, F, L, B, N, E>
{
    /// Next-token logits `[N, V]` for the `[N]` token ids (`B` rows of `T`, row-major) at
    /// positions `pos` (`0..T`).
    pub fn forward(
        &self,
        ids: &Tensor<(Const<N>,), i64>,
        pos: &Tensor<(Const<T>,), i64>,
    ) -> Tensor<(Const<N>, Const<V>), E> {
        let tok = self.wte.forward(ids);
        let tok = tok.reshape((Const::<B>, Const::<T>, Const::<D>));
        let p = self.wpe.forward(pos);
        let mut x = tok + p;
        for b in &self.blocks {
            x = b.forward(&x);
        }
        let x = self.ln_f.forward(&x);
        let x = x.reshape((Const::<N>, Const::<D>));
        self.head.forward(&x)
    }
}
