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
//! **The cache.** [`KvCache`] holds each layer's keys and values as `[1, kv_heads, max_len,
//! head_dim]` tensors, preallocated; a step writes its rows in place (one small kernel) and
//! attends over the first `position + tokens` of them. [`BatchKvCache`] is the same for
//! `batch` sequences of their own lengths, `[batch, kv_heads, max_len, head_dim]`: each
//! sequence's positions of one head are contiguous, the unit a paged cache would later split
//! into pages.
//!
//! **Batches.** [`Llama::forward_batch`] appends tokens to several sequences at once, each at
//! its own positions: every projection and the feed-forward block are one product over all
//! the step's rows, while the rotary angles, the cache writes and the attention read each
//! row's sequence and position from device buffers (`llama/kernels.rs`), so a row attends
//! only to its own sequence. On a GPU a single new token attends through a cached-attention
//! kernel and a longer run (a prefill) through [`Tensor::causal_attention`]; a row's result
//! depends only on its own sequence, so a batch computes what each sequence computes alone.
//!
//! **llama.cpp's arithmetic on the CPU.** There the f32 steps between the quantized products
//! (the RMS norms, SwiGLU, the rotary turn and attention) are computed as llama.cpp's CPU
//! build computes them, operation for operation (`llama/ggml_numerics.rs`), so the quantized
//! model's logits are llama.cpp's bit for bit: without it, a last-bit difference now and then
//! moves an 8-bit activation across a rounding boundary and every later position inherits
//! the change.
//!
//! **Captured decode steps.** On a CUDA GPU, [`Llama::capture_decode`] captures a decode step
//! for a batch as one CUDA graph ([`CapturedDecode`]): the token ids and positions it reads
//! live in a device buffer refilled before each replay, so one capture serves every step.
//!
//! ```no_run
//! use rtx::prelude::*;
//! use rtx_models::llama::{Llama, WeightFormat};
//!
//! # fn main() -> rtx::Result<()> {
//! # let path = rtx_models::pretrained::smollm2_135m_instruct()?;
//! let model = Llama::from_gguf_file(&path, WeightFormat::Quantized, Device::Cuda(0))?;
//! let mut cache = model.new_batch_cache(2, 256)?;
//! let first = model.forward_batch(&[&[504, 3458, 282], &[28, 61]], &mut cache)?; // [2, vocab]
//! let mut step = model.capture_decode(&mut cache)?;
//! let next = step.step(&[Some(314), Some(17)], &mut cache)?; // one replay, [2, vocab]
//! assert_eq!(cache.lens(), &[4, 3]);
//! # Ok(())
//! # }
//! ```

use rtx::io::Gguf;
use rtx::prelude::*;
use rtx::quant::{GgmlType, QInput, QTensor};
use std::path::Path;

mod cache;
mod config;
mod forward;
mod ggml_numerics;
mod graph;
#[cfg(test)]
mod kernel_tests;
mod kernels;
mod random;

pub use cache::{BatchKvCache, CacheTensor, KvCache};
pub use config::LlamaConfig;
use forward::Segment;
pub use graph::CapturedDecode;

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
    /// Row blocks of different types, stacked (`[out_0 + out_1 + .., in]`), multiplied one by
    /// one: what [`Weight::stack`] gives for parts that cannot be joined into one matrix.
    Stacked(Vec<Weight>),
}

impl Weight {
    /// `x · selfᵀ`: `[T, in]` activations to `[T, out]`.
    pub fn forward(&self, x: &Tensor<(usize, usize)>) -> Result<Tensor<(usize, usize)>> {
        match self {
            Weight::Quantized(q) => q.matmul_t(x),
            Weight::Dense(w) => x.try_matmul(&w.t()),
            Weight::Stacked(parts) => {
                let outs = parts
                    .iter()
                    .map(|p| p.forward(x))
                    .collect::<Result<Vec<_>>>()?;
                let refs: Vec<&Tensor<(usize, usize)>> = outs.iter().collect();
                Ok(Tensor::cat::<1, usize>(&refs))
            }
        }
    }

    /// `input(x) · selfᵀ + residual`: a block's product with the step before it joined (its
    /// RMS norm, as [`QInput`] says) and the residual add after it (`[T, out]`, optional). A
    /// quantized weight on a GPU joins them to its product ([`QTensor::matmul_t_joined`]: one
    /// launch when decoding, where they are three); other weights and the CPU run the norm
    /// (llama.cpp's arithmetic on the CPU), the product and the sum in turn.
    pub fn forward_joined(
        &self,
        x: &Tensor<(usize, usize)>,
        input: QInput<'_>,
        residual: Option<&Tensor<(usize, usize)>>,
    ) -> Result<Tensor<(usize, usize)>> {
        if let Weight::Quantized(q) = self
            && x.device().is_cuda()
        {
            return q.matmul_t_joined(x, input, residual);
        }
        let y = match input {
            QInput::Rows => self.forward(x)?,
            QInput::RmsNorm(w, eps) => self.forward(&rms_norm(x, w, eps)?)?,
        };
        Ok(match residual {
            Some(r) => r + &y,
            None => y,
        })
    }

    /// SwiGLU of a stacked gate-and-up weight (`[2 ff, in]`, the gate's rows first) over
    /// `input(x)`: `silu(x · gateᵀ) * (x · upᵀ)`, `[T, ff]`. A quantized weight on a GPU takes
    /// each output's two sums together ([`QTensor::matmul_t_swiglu`]: one launch when
    /// decoding); other weights and the CPU run [`Weight::forward_joined`], then SwiGLU
    /// (llama.cpp's arithmetic on the CPU).
    pub fn forward_swiglu(
        &self,
        x: &Tensor<(usize, usize)>,
        input: QInput<'_>,
    ) -> Result<Tensor<(usize, usize)>> {
        if let Weight::Quantized(q) = self
            && x.device().is_cuda()
        {
            return q.matmul_t_swiglu(x, input);
        }
        swiglu(&self.forward_joined(x, input, None)?)
    }

    /// `[out, in]`.
    pub fn dims(&self) -> [usize; 2] {
        match self {
            Weight::Quantized(q) => [q.dims()[0], q.dims()[1]],
            Weight::Dense(w) => [w.dims()[0], w.dims()[1]],
            Weight::Stacked(parts) => {
                let rows = parts.iter().map(|p| p.dims()[0]).sum();
                [rows, parts.first().map_or(0, |p| p.dims()[1])]
            }
        }
    }

    /// Whether the weight is held as quantized blocks (every part of a stacked one).
    pub fn is_quantized(&self) -> bool {
        match self {
            Weight::Quantized(_) => true,
            Weight::Dense(_) => false,
            Weight::Stacked(parts) => parts.iter().all(Weight::is_quantized),
        }
    }

    /// The matrices `parts` (each `[out_i, in]` as raw GGUF bytes of its type) stacked by rows
    /// into one `[sum out_i, in]` weight kept as `format` says, so one product computes all
    /// their outputs: one matrix when every part has the same type (a row of a GGUF matrix is
    /// whole blocks, so stacking is joining the bytes), else [`Weight::Stacked`].
    ///
    /// # Errors
    /// When the parts differ in `in`, or their bytes do not hold their dims.
    pub fn stack(
        parts: &[(&[u8], [usize; 2], GgmlType)],
        format: WeightFormat,
        device: Device,
    ) -> Result<Weight> {
        let k = parts.first().map_or(0, |p| p.1[1]);
        if let Some((_, dims, _)) = parts.iter().find(|p| p.1[1] != k) {
            return Err(Error::BadArgument {
                op: "Weight::stack",
                msg: format!("a part of {dims:?} among parts of {k} columns"),
            });
        }
        if parts.iter().all(|p| p.2 == parts[0].2) {
            let bytes: Vec<u8> = parts.iter().flat_map(|p| p.0.iter().copied()).collect();
            let rows = parts.iter().map(|p| p.1[0]).sum();
            return Weight::from_bytes(&bytes, [rows, k], parts[0].2, format, device);
        }
        let each = parts
            .iter()
            .map(|&(bytes, dims, ty)| Weight::from_bytes(bytes, dims, ty, format, device))
            .collect::<Result<Vec<_>>>()?;
        Ok(Weight::Stacked(each))
    }

    /// The `[out, in]` matrix in the GGUF `bytes` of type `ty`, kept as `format` says: the
    /// blocks where rtx multiplies the type on `device` without dequantizing, else f32.
    fn from_bytes(
        bytes: &[u8],
        dims: [usize; 2],
        ty: GgmlType,
        format: WeightFormat,
        device: Device,
    ) -> Result<Weight> {
        let q = QTensor::from_bytes(bytes, &dims, ty, device)?;
        if format == WeightFormat::Quantized && has_quantized_product(&q)? {
            return Ok(Weight::Quantized(q));
        }
        Ok(Weight::Dense(q.dequantize()?))
    }
}

/// One transformer block: pre-norm attention and pre-norm SwiGLU feed-forward, each added to
/// the residual stream.
#[derive(Clone, Debug)]
pub struct LlamaBlock {
    /// RMSNorm scale before attention (`blk.N.attn_norm.weight`), `[D]`.
    pub attn_norm: Tensor<(usize,)>,
    /// The query, key and value projections stacked by rows (`attn_q`, `attn_k`, `attn_v`),
    /// `[(heads + 2 kv_heads) * head_dim, D]`, so one product projects all three: query rows
    /// first, then key rows, then value rows; query and key rows in llama.cpp's order.
    pub qkv: Weight,
    /// Attention output projection (`attn_output`), `[D, heads * head_dim]`.
    pub o: Weight,
    /// RMSNorm scale before the feed-forward block (`ffn_norm`), `[D]`.
    pub ffn_norm: Tensor<(usize,)>,
    /// SwiGLU's gate and linear branch stacked by rows (`ffn_gate`, then `ffn_up`), `[2 FF,
    /// D]`: the block computes `silu(gate x) * (up x)` from the one product's two halves.
    pub gate_up: Weight,
    /// Back to the residual width (`ffn_down`), `[D, FF]`.
    pub down: Weight,
}

/// A Llama model: token embedding, blocks, final norm and output head.
#[derive(Clone, Debug)]
pub struct Llama {
    config: LlamaConfig,
    device: Device,
    /// The token embedding's raw blocks on the host (`token_embd.weight`, `[V, D]`): a step
    /// dequantizes only the rows of its tokens, so the table is held in f32 only by a
    /// captured decode step, which looks rows up on the device.
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
                let stacked = |names: &[(&str, usize)]| -> Result<Weight> {
                    let mut parts = Vec::with_capacity(names.len());
                    for &(part, rows) in names {
                        let name = n(part);
                        let info = gguf.tensor_info(&name)?;
                        expect_dims(gguf, &name, info.dims(), &[rows, d])?;
                        let ty = info
                            .ggml_type()
                            .map_err(|e| bad_file(gguf, format!("tensor `{name}`: {e}")))?;
                        parts.push((gguf.tensor_bytes(&name)?, [rows, d], ty));
                    }
                    Weight::stack(&parts, format, device)
                };
                Ok(LlamaBlock {
                    attn_norm: vector(&n("attn_norm"))?,
                    qkv: stacked(&[("attn_q", q_out), ("attn_k", kv_out), ("attn_v", kv_out)])?,
                    o: weight(&n("attn_output"), [d, q_out])?,
                    ffn_norm: vector(&n("ffn_norm"))?,
                    gate_up: stacked(&[("ffn_gate", ff), ("ffn_up", ff)])?,
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

    /// An empty cache for one sequence of up to `max_len` positions (at most the context
    /// length), on the model's device.
    ///
    /// # Errors
    /// [`Error::BadArgument`] naming `max_len` and the context length when it does not fit.
    pub fn new_cache(&self, max_len: usize) -> Result<KvCache> {
        Ok(KvCache {
            inner: self.new_batch_cache(1, max_len)?,
        })
    }

    /// An empty cache for `batch` sequences of up to `max_len` positions each (at most the
    /// context length), on the model's device: what [`Llama::forward_batch`] runs on.
    ///
    /// # Errors
    /// [`Error::BadArgument`] naming the sizes when `batch` is 0 or `max_len` is 0 or longer
    /// than the context.
    pub fn new_batch_cache(&self, batch: usize, max_len: usize) -> Result<BatchKvCache> {
        let c = &self.config;
        if batch == 0 || max_len == 0 || max_len > c.context_length {
            return Err(Error::BadArgument {
                op: "Llama::new_cache",
                msg: format!(
                    "a cache of {batch} sequences of {max_len} positions: it must hold at \
                     least one sequence, of 1 to the model's context length of {} positions",
                    c.context_length
                ),
            });
        }
        BatchKvCache::new(
            c.block_count,
            batch,
            c.head_count_kv,
            max_len,
            c.head_dim,
            self.device,
        )
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
    pub fn forward(&self, tokens: &[u32], position: usize, cache: &mut KvCache) -> Result<Matrix> {
        let x = self.hidden("Llama::forward", tokens, position, cache)?;
        self.logits(&x)
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
    ) -> Result<Matrix> {
        let x = self.hidden("Llama::forward_last", tokens, position, cache)?;
        let t = x.dims()[0];
        self.logits(&x.narrow::<0, usize>(t - 1, 1).contiguous())
    }

    /// One step over a batch of sequences of different lengths: `tokens[i]` (any number,
    /// possibly none) are appended to sequence `i` of `cache` at its own positions
    /// `cache.len(i)..`, attending only to that sequence's cached positions and to each other
    /// causally. Every projection and the feed-forward block run as one product over all the
    /// step's rows. Returns the logits of the last new token of each sequence given tokens,
    /// `[sequences given tokens, vocab]`, in sequence order: `[batch, vocab]` for a decode
    /// step of one token each.
    ///
    /// ```no_run
    /// # use rtx::prelude::*;
    /// # use rtx_models::llama::{Llama, WeightFormat};
    /// # fn main() -> rtx::Result<()> {
    /// # let model = Llama::from_gguf_file(rtx_models::pretrained::smollm2_135m_instruct()?, WeightFormat::Quantized, Device::Cpu)?;
    /// let mut cache = model.new_batch_cache(2, 64)?;
    /// let prefill = model.forward_batch(&[&[504, 3458, 282], &[28]], &mut cache)?;
    /// assert_eq!(cache.lens(), &[3, 1]);
    /// let decode = model.forward_batch(&[&[314], &[17]], &mut cache)?; // [2, vocab]
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`Error::BadArgument`] naming the sizes when `tokens` does not have one entry per
    /// sequence of the cache, no sequence is given tokens, a token is outside the vocabulary,
    /// or a sequence's cache cannot hold its tokens.
    pub fn forward_batch(&self, tokens: &[&[u32]], cache: &mut BatchKvCache) -> Result<Matrix> {
        const OP: &str = "Llama::forward_batch";
        if tokens.len() != cache.batch_size() {
            return Err(Error::BadArgument {
                op: OP,
                msg: format!(
                    "{} token lists for a cache of {} sequences: give one per sequence (an \
                     empty one leaves it as it is)",
                    tokens.len(),
                    cache.batch_size()
                ),
            });
        }
        let segments: Vec<Segment<'_>> = tokens
            .iter()
            .enumerate()
            .filter(|(_, t)| !t.is_empty())
            .map(|(seq, &tokens)| Segment {
                seq,
                tokens,
                position: cache.len(seq),
            })
            .collect();
        if segments.is_empty() {
            return Err(Error::BadArgument {
                op: OP,
                msg: format!(
                    "none of the {} sequences was given tokens",
                    cache.batch_size()
                ),
            });
        }
        let x = self.run_segments(OP, &segments, cache)?;
        if segments.iter().all(|s| s.tokens.len() == 1) {
            return self.logits(&x);
        }
        // Each sequence's last row, then one product of the head over them.
        let mut last = Vec::with_capacity(segments.len());
        let mut end = 0;
        for s in &segments {
            end += s.tokens.len();
            last.push(x.narrow::<0, usize>(end - 1, 1));
        }
        let refs: Vec<&Matrix> = last.iter().collect();
        self.logits(&Tensor::cat::<0, usize>(&refs))
    }

    /// The logits `[T, vocab]` of the residual stream `x` (`[T, D]`) after the last block:
    /// the final norm joined to the head's product.
    fn logits(&self, x: &Matrix) -> Result<Matrix> {
        let eps = self.config.rms_eps;
        self.head
            .forward_joined(x, QInput::RmsNorm(&self.norm, eps), None)
    }

    /// The residual stream `[T, D]` after the last block for one sequence's tokens (the final
    /// norm not yet applied: [`Llama::logits`] joins it to the head), updating its cache.
    fn hidden(
        &self,
        op: &'static str,
        tokens: &[u32],
        position: usize,
        cache: &mut KvCache,
    ) -> Result<Matrix> {
        let segment = Segment {
            seq: 0,
            tokens,
            position,
        };
        self.run_segments(op, &[segment], &mut cache.inner)
    }

    /// The embedding rows of `tokens`, `[T, D]` in f32: their blocks gathered on the host and
    /// dequantized on the device.
    fn embed(&self, tokens: &[u32]) -> Result<Matrix> {
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

    /// The whole token embedding as f32 `[vocab, D]` on the model's device, for a captured
    /// step's lookup by ids held on the device.
    fn embedding_table(&self) -> Result<Matrix> {
        let (v, d) = (self.config.vocab_size, self.config.embedding_length);
        QTensor::from_bytes(&self.embedding, &[v, d], self.embedding_type, self.device)?
            .dequantize()
    }
}

/// `x / sqrt(mean(x²) + eps) * w` over the rows of `[T, D]`, in f32 as `transformers` does.
fn rms_norm(
    x: &Tensor<(usize, usize)>,
    w: &Tensor<(usize,)>,
    eps: f64,
) -> Result<Tensor<(usize, usize)>> {
    // On a GPU the fused rows are one launch where the composition is six (decoding is bound
    // by launches); the CPU follows llama.cpp's arithmetic (see `ggml_numerics`).
    if x.device().is_cuda() {
        return rtx::nn::rms_norm(x, w, eps);
    }
    ggml_numerics::rms_norm(x, w, eps)
}

/// `silu(gate) * up` of the stacked feed-forward projection `[rows, 2 ff]`: one launch on a
/// GPU, llama.cpp's arithmetic on the CPU.
fn swiglu(gate_up: &Matrix) -> Result<Matrix> {
    if gate_up.device().is_cuda() {
        return kernels::swiglu(gate_up);
    }
    ggml_numerics::swiglu(gate_up)
}

impl Rotary {
    /// The angles `p * base^(-2i / head_dim)` for every position `p` of the context and pair
    /// `i`, as llama.cpp computes them (its rotary cache): in f32, the angle of pair `i + 1`
    /// that of pair `i` times `base^(-2 / head_dim)`, then `cos` and `sin` of each. Each
    /// angle is a few ulp from the exact one; computing them the same way keeps the CPU's
    /// logits equal to llama.cpp's (see `ggml_numerics`).
    fn new(c: &LlamaConfig, device: Device) -> Result<Rotary> {
        let half = c.head_dim / 2;
        let n = c.context_length * half;
        let (mut cos, mut sin) = (Vec::with_capacity(n), Vec::with_capacity(n));
        let step = (c.rope_freq_base as f32).powf(-2.0 / c.head_dim as f32);
        for p in 0..c.context_length {
            let mut theta = p as f32;
            for _ in 0..half {
                cos.push(theta.cos());
                sin.push(theta.sin());
                theta *= step;
            }
        }
        let shape = (c.context_length, half);
        Ok(Rotary {
            cos: Tensor::try_from_vec(cos, shape, device)?,
            sin: Tensor::try_from_vec(sin, shape, device)?,
        })
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
    let info = gguf.tensor_info(name)?;
    expect_dims(gguf, name, info.dims(), &dims)?;
    let ty = info
        .ggml_type()
        .map_err(|e| bad_file(gguf, format!("tensor `{name}`: {e}")))?;
    Weight::from_bytes(gguf.tensor_bytes(name)?, dims, ty, format, device)
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
