//! The Llama family of decoder-only language models (Llama 2 and 3, SmolLM2, TinyLlama, ...),
//! loaded from a GGUF file: RMSNorm, rotary position embeddings with the file's base,
//! grouped-query attention over a key-value cache, a SwiGLU feed-forward block, and an output
//! head that is the token embedding when the file has no `output.weight`.
//!
//! ```no_run
//! use rtx::prelude::*;
//! use rtx_models::llama::{KvCache, Llama, WeightFormat};
//!
//! # fn main() -> rtx::Result<()> {
//! let path = rtx_models::pretrained::smollm2_135m_instruct()?;
//! let model = Llama::from_gguf_file(&path, WeightFormat::Quantized, Device::Cpu)?;
//! let mut cache = model.new_cache(512)?;
//! let logits = model.forward(&[504, 3458, 282], 0, &mut cache)?; // prefill: [3, vocab]
//! let next = model.forward(&[314], 3, &mut cache)?;                // decode: [1, vocab]
//! assert_eq!(next.dims(), &[1, model.config().vocab_size]);
//! # Ok(())
//! # }
//! ```
//!
//! **Sizes come from the file.** [`LlamaConfig::from_gguf`] reads the `llama.*` metadata
//! (block count, widths, head counts, rotary base, RMS epsilon, context length), and every
//! tensor is checked against it when it loads; an error names the metadata key or the tensor
//! and both shapes. The sizes are therefore run-time values, unlike [`crate::bert`]'s types:
//! one type serves every Llama-shaped file.
//!
//! **Weights stay quantized.** With [`WeightFormat::Quantized`] each projection keeps the
//! file's blocks and multiplies with [`QTensor::matmul_t`] (Q8_0 and Q4_1: the CPU quantizes
//! the activations to 8 bits on the fly as llama.cpp does, a GPU decodes each weight block in
//! registers); a type rtx has no quantized product for is dequantized to f32 once, when the
//! model loads.
//! [`WeightFormat::F32`] dequantizes everything: the numerics of `transformers` running the
//! same file in f32, which the parity tests compare against.
//!
//! **The Q/K row order.** llama.cpp's converter permutes the rows of `attn_q` and `attn_k`
//! within each head so that its rotary embedding can rotate *adjacent* pairs `(2i, 2i + 1)`,
//! where Hugging Face's rotates the halves `(i, i + head_dim / 2)`. Undoing the permutation
//! would mean reordering quantized rows; instead the model rotates adjacent pairs, as the file
//! is laid out. Queries and keys are permuted alike, so every dot product between them, and
//! hence the attention, is the one of the unpermuted model; values are not permuted.
//!
//! **The cache.** [`KvCache`] holds each layer's keys and values as `[kv_heads, max_len,
//! head_dim]` tensors, preallocated; a step writes its rows in place (one small kernel) and
//! attends over the first `position + tokens` of them. Keeping each head's positions
//! contiguous is what a paged cache would split into pages later.

use rtx::io::Gguf;
use rtx::kernel::{Arg, LaunchConfig};
use rtx::prelude::*;
use rtx::quant::{GgmlType, QTensor};
use std::path::Path;

/// The sizes and constants of a Llama model, from a GGUF file's `llama.*` metadata.
#[derive(Clone, Debug, PartialEq)]
pub struct LlamaConfig {
    /// Tokens in the vocabulary (`llama.vocab_size`, else the length of
    /// `tokenizer.ggml.tokens`).
    pub vocab_size: usize,
    /// The longest context the model was trained for (`llama.context_length`).
    pub context_length: usize,
    /// The width of the residual stream (`llama.embedding_length`).
    pub embedding_length: usize,
    /// The inner width of the feed-forward block (`llama.feed_forward_length`).
    pub feed_forward_length: usize,
    /// The number of transformer blocks (`llama.block_count`).
    pub block_count: usize,
    /// Query heads (`llama.attention.head_count`).
    pub head_count: usize,
    /// Key and value heads (`llama.attention.head_count_kv`; equal to `head_count` when
    /// absent). Each serves `head_count / head_count_kv` query heads.
    pub head_count_kv: usize,
    /// The width of one head: `embedding_length / head_count`.
    pub head_dim: usize,
    /// The base of the rotary frequencies (`llama.rope.freq_base`, 10000 when absent).
    pub rope_freq_base: f64,
    /// Added to the mean square in every RMSNorm
    /// (`llama.attention.layer_norm_rms_epsilon`).
    pub rms_eps: f64,
}

impl LlamaConfig {
    /// Reads the config from `gguf`'s metadata. The architecture (`general.architecture`) must
    /// be `llama`; every error names the key at fault.
    pub fn from_gguf(gguf: &Gguf) -> Result<LlamaConfig> {
        let arch = gguf.get_str("general.architecture")?;
        if arch != "llama" {
            return Err(bad_file(
                gguf,
                format!(
                    "metadata key `general.architecture` is `{arch}`, but this model reads \
                     `llama` files"
                ),
            ));
        }
        let int = |key: &str| -> Result<usize> { Ok(gguf.get_u64(key)? as usize) };
        let embedding_length = int("llama.embedding_length")?;
        let head_count = int("llama.attention.head_count")?;
        let head_count_kv = if gguf
            .metadata()
            .contains_key("llama.attention.head_count_kv")
        {
            int("llama.attention.head_count_kv")?
        } else {
            head_count
        };
        let vocab_size = if gguf.metadata().contains_key("llama.vocab_size") {
            int("llama.vocab_size")?
        } else {
            gguf.get_array("tokenizer.ggml.tokens")?.len()
        };
        let rope_freq_base = if gguf.metadata().contains_key("llama.rope.freq_base") {
            f64::from(gguf.get_f32("llama.rope.freq_base")?)
        } else {
            10000.0
        };
        let config = LlamaConfig {
            vocab_size,
            context_length: int("llama.context_length")?,
            embedding_length,
            feed_forward_length: int("llama.feed_forward_length")?,
            block_count: int("llama.block_count")?,
            head_count,
            head_count_kv,
            head_dim: embedding_length.checked_div(head_count).unwrap_or(0),
            rope_freq_base,
            rms_eps: f64::from(gguf.get_f32("llama.attention.layer_norm_rms_epsilon")?),
        };
        config.check(gguf)?;
        Ok(config)
    }

    /// The sizes must divide as the architecture needs, and the file must not ask for what
    /// this model does not do (partial rotary, scaled rotary frequencies).
    fn check(&self, gguf: &Gguf) -> Result<()> {
        let mut wrong = Vec::new();
        let (d, h, kv) = (self.embedding_length, self.head_count, self.head_count_kv);
        if h == 0 || kv == 0 || !d.is_multiple_of(h) || !h.is_multiple_of(kv) {
            wrong.push(format!(
                "`llama.embedding_length` {d}, `llama.attention.head_count` {h} and \
                 `llama.attention.head_count_kv` {kv}: the width must be a multiple of the \
                 heads, and the query heads a multiple of the key-value heads"
            ));
        }
        if !self.head_dim.is_multiple_of(2) {
            wrong.push(format!(
                "the head width {} is odd: rotary embeddings rotate pairs",
                self.head_dim
            ));
        }
        if let Ok(n) = gguf.get_u64("llama.rope.dimension_count")
            && n as usize != self.head_dim
        {
            wrong.push(format!(
                "`llama.rope.dimension_count` is {n}, but only rotating the whole head ({}) \
                 is supported",
                self.head_dim
            ));
        }
        if let Ok(kind) = gguf.get_str("llama.rope.scaling.type")
            && kind != "none"
        {
            wrong.push(format!(
                "`llama.rope.scaling.type` is `{kind}`: scaled rotary frequencies are not \
                 supported"
            ));
        }
        if wrong.is_empty() {
            Ok(())
        } else {
            Err(bad_file(gguf, wrong.join("; ")))
        }
    }

    /// The number of query heads that share one key-value head.
    pub fn group_size(&self) -> usize {
        self.head_count / self.head_count_kv
    }
}

/// How a model keeps the file's weight matrices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum WeightFormat {
    /// The file's blocks, multiplied without dequantizing where rtx has a quantized product
    /// for the type on the device (Q8_0 and Q4_1 on the CPU), else dequantized to f32 once.
    #[default]
    Quantized,
    /// Every weight dequantized to f32 when the model loads: `transformers`' numerics on the
    /// same file, at four to eight times the memory.
    F32,
}

/// One weight matrix `[out, in]` (a Linear's, without bias), quantized or dense.
#[derive(Clone, Debug)]
pub enum Weight {
    /// The file's blocks, multiplied by [`QTensor::matmul_t`].
    Quantized(QTensor),
    /// Dense f32 values.
    Dense(Tensor<(usize, usize)>),
}

impl Weight {
    /// `x · selfᵀ`: `[T, in]` activations to `[T, out]`.
    pub fn forward(&self, x: &Tensor<(usize, usize)>) -> Result<Tensor<(usize, usize)>> {
        match self {
            Weight::Quantized(q) => q.matmul_t(x),
            Weight::Dense(w) => x.try_matmul(&w.t()),
        }
    }

    /// `[out, in]`.
    pub fn dims(&self) -> [usize; 2] {
        let d = match self {
            Weight::Quantized(q) => q.dims(),
            Weight::Dense(w) => w.dims(),
        };
        [d[0], d[1]]
    }

    /// Whether the weight is held as quantized blocks.
    pub fn is_quantized(&self) -> bool {
        matches!(self, Weight::Quantized(_))
    }
}

/// One transformer block: pre-norm attention and pre-norm SwiGLU feed-forward, each added to
/// the residual stream.
#[derive(Clone, Debug)]
pub struct LlamaBlock {
    /// RMSNorm scale before attention (`blk.N.attn_norm.weight`), `[D]`.
    pub attn_norm: Tensor<(usize,)>,
    /// Query projection (`attn_q`), `[heads * head_dim, D]`, rows in llama.cpp's order.
    pub q: Weight,
    /// Key projection (`attn_k`), `[kv_heads * head_dim, D]`, rows in llama.cpp's order.
    pub k: Weight,
    /// Value projection (`attn_v`), `[kv_heads * head_dim, D]`.
    pub v: Weight,
    /// Attention output projection (`attn_output`), `[D, heads * head_dim]`.
    pub o: Weight,
    /// RMSNorm scale before the feed-forward block (`ffn_norm`), `[D]`.
    pub ffn_norm: Tensor<(usize,)>,
    /// The gate of SwiGLU (`ffn_gate`), `[FF, D]`: `silu(gate x) * (up x)`.
    pub gate: Weight,
    /// The linear branch of SwiGLU (`ffn_up`), `[FF, D]`.
    pub up: Weight,
    /// Back to the residual width (`ffn_down`), `[D, FF]`.
    pub down: Weight,
}

/// A Llama model: token embedding, blocks, final norm and output head.
#[derive(Clone, Debug)]
pub struct Llama {
    config: LlamaConfig,
    device: Device,
    /// The token embedding's raw blocks on the host (`token_embd.weight`, `[V, D]`): a step
    /// dequantizes only the rows of its tokens, so the table is never held in f32.
    embedding: Vec<u8>,
    embedding_type: GgmlType,
    /// The transformer blocks, in order.
    blocks: Vec<LlamaBlock>,
    /// The final RMSNorm scale (`output_norm.weight`).
    norm: Tensor<(usize,)>,
    /// The output head, `[V, D]`: `output.weight`, or the token embedding when tied.
    head: Weight,
    head_tied: bool,
    /// The rotary angles of every position of the context.
    rope: Rotary,
}

/// A `[T, D]` matrix of run-time size, the shape of the activations.
type Matrix = Tensor<(usize, usize)>;

/// `cos` and `sin` of the rotary angles of consecutive positions, `[positions, head_dim / 2]`
/// each.
#[derive(Clone, Debug)]
struct Rotary {
    cos: Matrix,
    sin: Matrix,
}

/// The keys and values of earlier positions, per block: `[kv_heads, max_len, head_dim]` each,
/// allocated once. Positions `0..len()` are filled.
#[derive(Debug)]
pub struct KvCache {
    keys: Vec<Tensor<(usize, usize, usize)>>,
    values: Vec<Tensor<(usize, usize, usize)>>,
    max_len: usize,
    len: usize,
}

impl KvCache {
    /// The positions filled.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no position is filled.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The most positions the cache holds.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Forgets every position (the memory stays allocated): the next forward starts at 0.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Forgets the positions from `len` on, to generate again from a shorter prefix.
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Block `block`'s keys, `[kv_heads, max_len, head_dim]` (only `..len()` along axis 1 are
    /// meaningful).
    pub fn keys(&self, block: usize) -> &Tensor<(usize, usize, usize)> {
        &self.keys[block]
    }

    /// Block `block`'s values, laid out as the keys.
    pub fn values(&self, block: usize) -> &Tensor<(usize, usize, usize)> {
        &self.values[block]
    }
}

/// Writes a step's `[T, heads, head_dim]` rows into a `[heads, max_len, head_dim]` cache at
/// positions `pos..pos + T`: the one in-place write of a decoding step.
#[rtx::kernel]
fn kv_write<T: Float>(
    src: &[T],
    dst: &mut [T],
    n: usize,
    heads: usize,
    head_dim: usize,
    max_len: usize,
    pos: usize,
) {
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    if i < n {
        let row = heads * head_dim;
        let t = i / row;
        let h = i % row / head_dim;
        let d = i % head_dim;
        dst[(h * max_len + pos + t) * head_dim + d] = src[i];
    }
}

impl Llama {
    /// Opens the GGUF file at `path` and loads the model from it (see
    /// [`Llama::from_gguf`]).
    pub fn from_gguf_file(
        path: impl AsRef<Path>,
        format: WeightFormat,
        device: Device,
    ) -> Result<Llama> {
        Llama::from_gguf(&Gguf::open(path)?, format, device)
    }

    /// Loads a Llama model from `gguf` onto `device`, keeping its weights as `format` says.
    /// Every tensor is checked against the config; an error names the tensor, what the
    /// config asks for and what the file holds.
    pub fn from_gguf(gguf: &Gguf, format: WeightFormat, device: Device) -> Result<Llama> {
        let c = LlamaConfig::from_gguf(gguf)?;
        let (d, hd) = (c.embedding_length, c.head_dim);
        let (q_out, kv_out) = (c.head_count * hd, c.head_count_kv * hd);
        let ff = c.feed_forward_length;

        let embd = gguf.tensor_info("token_embd.weight")?;
        expect_dims(gguf, "token_embd.weight", embd.dims(), &[c.vocab_size, d])?;
        let embedding_type = embd
            .ggml_type()
            .map_err(|e| bad_file(gguf, format!("tensor `token_embd.weight`: {e}")))?;
        let embedding = gguf.tensor_bytes("token_embd.weight")?.to_vec();

        let weight = |name: &str, dims: [usize; 2]| load_weight(gguf, name, dims, format, device);
        let vector = |name: &str| -> Result<Tensor<(usize,)>> {
            let info = gguf.tensor_info(name)?;
            expect_dims(gguf, name, info.dims(), &[d])?;
            gguf.tensor(name, device)?.dequantize()
        };
        let blocks = (0..c.block_count)
            .map(|i| {
                let n = |part: &str| format!("blk.{i}.{part}.weight");
                Ok(LlamaBlock {
                    attn_norm: vector(&n("attn_norm"))?,
                    q: weight(&n("attn_q"), [q_out, d])?,
                    k: weight(&n("attn_k"), [kv_out, d])?,
                    v: weight(&n("attn_v"), [kv_out, d])?,
                    o: weight(&n("attn_output"), [d, q_out])?,
                    ffn_norm: vector(&n("ffn_norm"))?,
                    gate: weight(&n("ffn_gate"), [ff, d])?,
                    up: weight(&n("ffn_up"), [ff, d])?,
                    down: weight(&n("ffn_down"), [d, ff])?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        // Small models tie the head to the embedding: llama.cpp's converter then writes no
        // `output.weight`, and the head reads `token_embd.weight`.
        let head_tied = gguf.tensor_info("output.weight").is_err();
        let head_name = if head_tied {
            "token_embd.weight"
        } else {
            "output.weight"
        };
        let head = weight(head_name, [c.vocab_size, d])?;
        let rope = Rotary::new(&c, device)?;
        Ok(Llama {
            norm: vector("output_norm.weight")?,
            config: c,
            device,
            embedding,
            embedding_type,
            blocks,
            head,
            head_tied,
            rope,
        })
    }

    /// The config read from the file.
    pub fn config(&self) -> &LlamaConfig {
        &self.config
    }

    /// The device the weights are on.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The transformer blocks.
    pub fn blocks(&self) -> &[LlamaBlock] {
        &self.blocks
    }

    /// The output head, `[vocab, D]`.
    pub fn head(&self) -> &Weight {
        &self.head
    }

    /// Whether the head is the token embedding (the file has no `output.weight`).
    pub fn head_is_tied(&self) -> bool {
        self.head_tied
    }

    /// An empty cache for up to `max_len` positions (at most the context length), on the
    /// model's device.
    pub fn new_cache(&self, max_len: usize) -> Result<KvCache> {
        let c = &self.config;
        if max_len == 0 || max_len > c.context_length {
            return Err(Error::BadArgument {
                op: "Llama::new_cache",
                msg: format!(
                    "a cache of {max_len} positions: it must hold 1 to the model's context \
                     length of {}",
                    c.context_length
                ),
            });
        }
        let shape = (c.head_count_kv, max_len, c.head_dim);
        let make = || {
            (0..c.block_count)
                .map(|_| Tensor::zeros(shape, self.device))
                .collect()
        };
        Ok(KvCache {
            keys: make(),
            values: make(),
            max_len,
            len: 0,
        })
    }

    /// The logits of every position of `tokens`, `[tokens.len(), vocab]`, for tokens placed at
    /// positions `position..position + tokens.len()`, attending to the cache's first
    /// `position` entries and to each other causally; their keys and values are written to
    /// the cache, whose length becomes `position + tokens.len()`. Many tokens prefill, one
    /// decodes.
    ///
    /// # Errors
    /// [`Error::BadArgument`] when `tokens` is empty, a token is outside the vocabulary,
    /// `position` is past the cache's filled length, or the cache cannot hold the tokens.
    pub fn forward(
        &self,
        tokens: &[u32],
        position: usize,
        cache: &mut KvCache,
    ) -> Result<Tensor<(usize, usize)>> {
        let x = self.hidden(tokens, position, cache)?;
        self.head.forward(&x)
    }

    /// The logits of the last position only, `[1, vocab]`: what generation needs, without
    /// the head's product for the other positions of a prefill.
    ///
    /// # Errors
    /// As for [`Llama::forward`].
    pub fn forward_last(
        &self,
        tokens: &[u32],
        position: usize,
        cache: &mut KvCache,
    ) -> Result<Tensor<(usize, usize)>> {
        let x = self.hidden(tokens, position, cache)?;
        let t = x.dims()[0];
        self.head
            .forward(&x.narrow::<0, usize>(t - 1, 1).contiguous())
    }

    /// The final hidden states `[T, D]` (after the last norm), updating the cache.
    fn hidden(
        &self,
        tokens: &[u32],
        position: usize,
        cache: &mut KvCache,
    ) -> Result<Tensor<(usize, usize)>> {
        let c = &self.config;
        let t = tokens.len();
        let bad = |msg: String| {
            Err(Error::BadArgument {
                op: "Llama::forward",
                msg,
            })
        };
        if t == 0 {
            return bad("no tokens given".into());
        }
        if let Some(&id) = tokens.iter().find(|&&id| id as usize >= c.vocab_size) {
            return bad(format!(
                "token id {id} is outside the vocabulary of {}",
                c.vocab_size
            ));
        }
        if cache.keys.len() != c.block_count
            || cache.keys[0].dims() != [c.head_count_kv, cache.max_len, c.head_dim]
        {
            return bad(format!(
                "the cache was made for another model: {} blocks of {:?}",
                cache.keys.len(),
                cache.keys.first().map(|k| k.dims().to_vec())
            ));
        }
        if position > cache.len {
            return bad(format!(
                "position {position} is past the {} positions the cache holds: positions \
                 must follow each other",
                cache.len
            ));
        }
        if position + t > cache.max_len {
            return bad(format!(
                "{t} tokens at position {position} need {} positions, but the cache holds \
                 {}",
                position + t,
                cache.max_len
            ));
        }
        let mut x = self.embed(tokens)?;
        let rope = self.rope.at(position, t);
        let mask = (t > 1).then(|| self.causal_mask(t, position));
        for (i, block) in self.blocks.iter().enumerate() {
            x = self.block(block, &x, &rope, mask.as_ref(), position, cache, i)?;
        }
        cache.len = position + t;
        Ok(rms_norm(&x, &self.norm, c.rms_eps))
    }

    /// The embedding rows of `tokens`, `[T, D]` in f32: their blocks gathered on the host and
    /// dequantized on the device.
    fn embed(&self, tokens: &[u32]) -> Result<Tensor<(usize, usize)>> {
        let d = self.config.embedding_length;
        let row = self.embedding.len() / self.config.vocab_size;
        let mut bytes = Vec::with_capacity(row * tokens.len());
        for &id in tokens {
            let start = id as usize * row;
            bytes.extend_from_slice(&self.embedding[start..start + row]);
        }
        QTensor::from_bytes(&bytes, &[tokens.len(), d], self.embedding_type, self.device)?
            .dequantize()
    }

    /// The additive mask of a `t`-token step at `position`, `[group * t, position + t]`: row
    /// `r` is query token `r % t` (queries are grouped by key-value head, see
    /// [`Llama::block`]), which sees the keys up to its own position.
    fn causal_mask(&self, t: usize, position: usize) -> Tensor<(usize, usize)> {
        let (g, s) = (self.config.group_size(), position + t);
        let mut m = vec![0f32; g * t * s];
        for r in 0..g * t {
            let seen = position + r % t + 1;
            m[r * s + seen..(r + 1) * s].fill(f32::NEG_INFINITY);
        }
        Tensor::from_vec(m, (g * t, s), self.device)
    }

    /// One block over `[T, D]`.
    #[allow(clippy::too_many_arguments)]
    fn block(
        &self,
        b: &LlamaBlock,
        x: &Tensor<(usize, usize)>,
        rope: &Rotary,
        mask: Option<&Tensor<(usize, usize)>>,
        position: usize,
        cache: &mut KvCache,
        layer: usize,
    ) -> Result<Tensor<(usize, usize)>> {
        let c = &self.config;
        let (t, d, hd) = (x.dims()[0], c.embedding_length, c.head_dim);
        let (h, kvh, g) = (c.head_count, c.head_count_kv, c.group_size());
        let s = position + t;

        let n = rms_norm(x, &b.attn_norm, c.rms_eps);
        let q = rope.rotate(&b.q.forward(&n)?, h);
        let k = rope.rotate(&b.k.forward(&n)?, kvh);
        let v = b.v.forward(&n)?;
        write_rows(&mut cache.keys[layer], &k, position)?;
        write_rows(&mut cache.values[layer], &v, position)?;
        let keys = cache.keys[layer].narrow::<1, usize>(0, s);
        let values = cache.values[layer].narrow::<1, usize>(0, s);

        // Grouped-query attention without repeating the keys: query heads `j * g .. (j + 1) *
        // g` share key-value head `j`, so `[H, T, hd]` read as `[kv_heads, g * T, hd]` puts
        // each key-value head's queries in one batch entry.
        let q = q
            .reshape((t, h, hd))
            .permute::<Axes3<1, 0, 2>>()
            .contiguous()
            .reshape((kvh, g * t, hd));
        let scores = q.matmul(&keys.transpose::<1, 2>()) * (1.0 / (hd as f32).sqrt());
        let scores = match mask {
            Some(m) => scores + m.broadcast_to((kvh, g * t, s)),
            None => scores,
        };
        let attn = scores.softmax::<2>().matmul(&values);
        let attn = attn
            .reshape((h, t, hd))
            .permute::<Axes3<1, 0, 2>>()
            .contiguous()
            .reshape((t, h * hd));
        let x = x + b.o.forward(&attn)?;

        let n = rms_norm(&x, &b.ffn_norm, c.rms_eps);
        let hidden = b.gate.forward(&n)?.silu() * b.up.forward(&n)?;
        debug_assert_eq!(x.dims(), [t, d]);
        Ok(x + b.down.forward(&hidden)?)
    }
}

/// `x / sqrt(mean(x²) + eps) * w` over the rows of `[T, D]`, in f32 as `transformers` does.
fn rms_norm(x: &Tensor<(usize, usize)>, w: &Tensor<(usize,)>, eps: f64) -> Tensor<(usize, usize)> {
    let shape = x.shape();
    let inv = ((x * x).mean_keepdim::<1>() + eps as f32).rsqrt();
    x * inv.broadcast_to(shape) * w.broadcast_to(shape)
}

/// Writes `[T, heads * head_dim]` rows into the cache tensor `[heads, max_len, head_dim]` at
/// `position`, in place.
fn write_rows(
    cache: &mut Tensor<(usize, usize, usize)>,
    rows: &Tensor<(usize, usize)>,
    position: usize,
) -> Result<()> {
    let (heads, max_len, head_dim) = (cache.dims()[0], cache.dims()[1], cache.dims()[2]);
    let n = rows.numel();
    debug_assert!(position + n / (heads * head_dim) <= max_len);
    let threads = 256;
    let config = LaunchConfig::new(n.div_ceil(threads) as u32, threads as u32);
    let mut args = [
        Arg::input(rows),
        Arg::output(cache),
        Arg::usize(n),
        Arg::usize(heads),
        Arg::usize(head_dim),
        Arg::usize(max_len),
        Arg::usize(position),
    ];
    // SAFETY: thread `i < n` reads `src[i]`, inside the `n` rows, and writes row `pos + t <
    // max_len` (checked by `Llama::hidden`) of head `h < heads`, inside the cache.
    unsafe { rtx::kernel::launch(kv_write::Op, config, &mut args) }
}

impl Rotary {
    /// The angles `p * base^(-2i / head_dim)` for every position `p` of the context and pair
    /// `i`, computed in f64 and rounded once.
    fn new(c: &LlamaConfig, device: Device) -> Result<Rotary> {
        let half = c.head_dim / 2;
        let inv_freq: Vec<f64> = (0..half)
            .map(|i| c.rope_freq_base.powf(-((2 * i) as f64) / c.head_dim as f64))
            .collect();
        let n = c.context_length * half;
        let (mut cos, mut sin) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for p in 0..c.context_length {
            for f in &inv_freq {
                let angle = p as f64 * f;
                cos.push(angle.cos() as f32);
                sin.push(angle.sin() as f32);
            }
        }
        let shape = (c.context_length, half);
        Ok(Rotary {
            cos: Tensor::try_from_vec(cos, shape, device)?,
            sin: Tensor::try_from_vec(sin, shape, device)?,
        })
    }

    /// The angles of positions `position..position + t` (views).
    fn at(&self, position: usize, t: usize) -> Rotary {
        Rotary {
            cos: self.cos.narrow::<0, usize>(position, t),
            sin: self.sin.narrow::<0, usize>(position, t),
        }
    }

    /// Rotates `[T, heads * head_dim]` in llama.cpp's row order: the adjacent pair `(2i, 2i +
    /// 1)` of every head turns by its position's angle `i` (see the module docs for why
    /// adjacent pairs).
    fn rotate(&self, x: &Matrix, heads: usize) -> Matrix {
        let (t, width) = (x.dims()[0], x.dims()[1]);
        let half = width / heads / 2;
        let pairs = x.reshape((t, heads, half, 2usize));
        let (a, b) = (
            pairs.narrow::<3, usize>(0, 1),
            pairs.narrow::<3, usize>(1, 1),
        );
        let shape = (t, heads, half, 1usize);
        let cos = self
            .cos
            .reshape((t, 1usize, half, 1usize))
            .broadcast_to(shape);
        let sin = self
            .sin
            .reshape((t, 1usize, half, 1usize))
            .broadcast_to(shape);
        let first = &a * &cos - &b * &sin;
        let second = &a * &sin + &b * &cos;
        Tensor::cat::<3, usize>(&[&first, &second]).reshape((t, width))
    }
}

/// The weight `name`, checked to be `dims`, kept as `format` says.
fn load_weight(
    gguf: &Gguf,
    name: &str,
    dims: [usize; 2],
    format: WeightFormat,
    device: Device,
) -> Result<Weight> {
    expect_dims(gguf, name, gguf.tensor_info(name)?.dims(), &dims)?;
    let q = gguf.tensor(name, device)?;
    if format == WeightFormat::Quantized && has_quantized_product(&q)? {
        return Ok(Weight::Quantized(q));
    }
    Ok(Weight::Dense(q.dequantize()?))
}

/// Whether rtx multiplies this weight's type on its device without dequantizing. The backend
/// answers by erring on what it lacks, so it is asked once, with a one-row product; plain
/// float types are better dense.
fn has_quantized_product(q: &QTensor) -> Result<bool> {
    if matches!(
        q.ggml_type(),
        GgmlType::F32 | GgmlType::F16 | GgmlType::BF16
    ) {
        return Ok(false);
    }
    let probe: Tensor<(usize, usize)> = Tensor::zeros((1, q.dims()[1]), q.device());
    Ok(q.matmul_t(&probe).is_ok())
}

/// An error unless the tensor `name` has `want` dims.
fn expect_dims(gguf: &Gguf, name: &str, got: &[usize], want: &[usize]) -> Result<()> {
    if got == want {
        return Ok(());
    }
    Err(bad_file(
        gguf,
        format!(
            "tensor `{name}` is {got:?}, but the config's sizes make it {want:?} (row-major [out, in])"
        ),
    ))
}

/// An error about the file, naming it.
fn bad_file(gguf: &Gguf, msg: String) -> Error {
    Error::Gguf {
        file: gguf.path().to_path_buf(),
        msg,
    }
}
