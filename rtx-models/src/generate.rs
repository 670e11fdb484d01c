//! Text generation with a [`Llama`] model: sampling ([`Sampling`], [`Sampler`]), stop
//! conditions (end-of-sequence tokens from the GGUF metadata, stop strings, a token budget),
//! streaming iterators of tokens ([`Generation`], and [`BatchGeneration`] for several
//! prompts), and chat templates rendered from the file's `tokenizer.chat_template` with
//! `minijinja` ([`ChatTemplate`]).
//!
//! ```no_run
//! use rtx::prelude::*;
//! use rtx_models::generate::{ChatTemplate, GenerateOptions, Generation, Message, Sampling};
//! use rtx_models::llama::{Llama, WeightFormat};
//! use rtx_models::tokenizer::Tokenizer;
//!
//! # fn main() -> rtx::Result<()> {
//! let gguf = rtx::io::Gguf::open(rtx_models::pretrained::smollm2_135m_instruct()?)?;
//! let model = Llama::from_gguf(&gguf, WeightFormat::Quantized, Device::Cpu)?;
//! let tokenizer = Tokenizer::from_gguf(&gguf)?;
//! let chat = ChatTemplate::from_gguf(&gguf)?;
//! let prompt = chat.render(&[Message::user("Name three colors.")], true)?;
//! let options = GenerateOptions::from_gguf(&gguf, Sampling::default().with_seed(7))?;
//! for token in Generation::from_text(&model, &tokenizer, &prompt, &options)? {
//!     print!("{}", token?.text);
//! }
//! # Ok(())
//! # }
//! ```
//!
//! **Batches.** [`BatchGeneration`] continues several prompts of different lengths together:
//! each decode step is one product over the batch's rows, every sequence stops on its own,
//! and each gets the tokens it would get alone. On a CUDA GPU both iterators decode through
//! a step captured as a CUDA graph ([`GenerateOptions::cuda_graph`], `RTX_DECODE_GRAPH=0`).
//!
//! **Reproducible.** Sampling draws from its own generator, seeded by [`Sampling::seed`]:
//! the same model, prompt and settings give the same tokens on every run.
//!
//! **Streaming text.** A token can end inside a UTF-8 character (byte-level vocabularies
//! split emoji and CJK text), and the text generated so far can end with the start of a stop
//! string; [`Generation`] holds such text back until the next token settles it, so what it
//! streams is exactly the final text, in order.

use crate::llama::Llama;
use rtx::Result;
use rtx::io::Gguf;
use std::time::Duration;

mod batch;
mod chat;
mod decoder;
mod sampling;
mod sequence;
mod stream;

pub use batch::{BatchGeneration, BatchToken, generate_batch};
pub use chat::{ChatTemplate, Message};
pub use sampling::{Sampler, Sampling};
pub use stream::Generation;

/// What a [`Generation`] does besides sampling: when it stops.
#[derive(Clone, Debug, PartialEq)]
pub struct GenerateOptions {
    /// How tokens are chosen.
    pub sampling: Sampling,
    /// The most tokens to generate.
    pub max_tokens: usize,
    /// Tokens that end the text (not part of it): the end-of-sequence token, and for chat
    /// models the end-of-turn token.
    pub stop_tokens: Vec<u32>,
    /// Texts that end the text where they first appear (not part of it).
    pub stop_strings: Vec<String>,
    /// The cache length to allocate: the prompt and every generated token must fit. `None`
    /// is the prompt plus `max_tokens`, capped at the model's context length.
    pub max_len: Option<usize>,
    /// On a CUDA GPU, run the decode steps as replays of one captured CUDA graph (true by
    /// default; the environment's `RTX_DECODE_GRAPH=0` turns it off too). Elsewhere it does
    /// nothing.
    pub cuda_graph: bool,
}

impl Default for GenerateOptions {
    /// [`Sampling::default`], at most 256 tokens, no stop tokens or strings, the cache sized
    /// for the prompt and the tokens, decode steps captured on a GPU.
    fn default() -> Self {
        GenerateOptions {
            sampling: Sampling::default(),
            max_tokens: 256,
            stop_tokens: Vec::new(),
            stop_strings: Vec::new(),
            max_len: None,
            cuda_graph: true,
        }
    }
}

impl GenerateOptions {
    /// Options stopping at the end-of-sequence and end-of-turn tokens `gguf`'s metadata names
    /// (`tokenizer.ggml.eos_token_id`, `tokenizer.ggml.eot_token_id`,
    /// `tokenizer.ggml.eom_token_id`), after at most 256 tokens.
    ///
    /// # Errors
    /// [`rtx::Error::Gguf`] naming the key when one of them is not an unsigned integer.
    pub fn from_gguf(gguf: &Gguf, sampling: Sampling) -> Result<GenerateOptions> {
        Ok(GenerateOptions {
            sampling,
            stop_tokens: stop_tokens(gguf)?,
            ..GenerateOptions::default()
        })
    }

    /// These options with at most `max_tokens` generated.
    pub fn with_max_tokens(mut self, max_tokens: usize) -> Self {
        self.max_tokens = max_tokens;
        self
    }

    /// These options with decode steps captured as a CUDA graph on a GPU, or not.
    pub fn with_cuda_graph(mut self, on: bool) -> Self {
        self.cuda_graph = on;
        self
    }

    /// These options also stopping at `stop`.
    pub fn with_stop_string(mut self, stop: impl Into<String>) -> Self {
        self.stop_strings.push(stop.into());
        self
    }
}

/// The ids of the tokens that end generation, as `gguf`'s metadata names them: end of
/// sequence, end of turn and end of message, those present, without repeats.
///
/// # Errors
/// [`rtx::Error::Gguf`] naming the key when one is present but not an unsigned integer.
pub fn stop_tokens(gguf: &Gguf) -> Result<Vec<u32>> {
    let mut ids = Vec::new();
    for key in [
        "tokenizer.ggml.eos_token_id",
        "tokenizer.ggml.eot_token_id",
        "tokenizer.ggml.eom_token_id",
    ] {
        if gguf.metadata().contains_key(key) {
            let id = gguf.get_u32(key)?;
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
    }
    Ok(ids)
}

/// Why a [`Generation`] ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FinishReason {
    /// A stop token was sampled (it is not yielded).
    StopToken(u32),
    /// The text reached one of the stop strings (cut before it).
    StopString(String),
    /// `max_tokens` were generated.
    MaxTokens,
    /// The cache is full: the newest token has no position left.
    CacheFull,
    /// A step failed; the error was the iterator's last item.
    Error,
}

/// One generated token and the text it adds. Stop tokens are not yielded, except when text
/// was still held back as the possible start of a stop string: the stop token then comes
/// last, carrying that text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    /// The token id.
    pub id: u32,
    /// The text this token releases: empty while it ends inside a UTF-8 character or may
    /// begin a stop string, and then the held text with the next token's.
    pub text: String,
}

/// Times and counts of a generation, for tokens per second.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GenerationStats {
    /// Tokens in the prompt.
    pub prompt_tokens: usize,
    /// The prompt's forward pass (prefill) and its first sample.
    pub prefill: Duration,
    /// Tokens generated after the first.
    pub decoded_tokens: usize,
    /// The time those took (each a one-token forward and a sample).
    pub decode: Duration,
}

impl GenerationStats {
    /// Prompt tokens per second of the prefill.
    pub fn prefill_tokens_per_second(&self) -> f64 {
        self.prompt_tokens as f64 / self.prefill.as_secs_f64().max(1e-9)
    }

    /// Generated tokens per second after the first.
    pub fn decode_tokens_per_second(&self) -> f64 {
        self.decoded_tokens as f64 / self.decode.as_secs_f64().max(1e-9)
    }
}

/// Up to `max_tokens` token ids continuing `prompt`, stopping before any of `stop_tokens`: a
/// [`Generation`] without text, collected.
///
/// # Errors
/// As for [`Generation::new`], and the model's errors.
pub fn generate_ids(
    model: &Llama,
    prompt: &[u32],
    max_tokens: usize,
    sampling: &Sampling,
    stop_tokens: &[u32],
) -> Result<Vec<u32>> {
    let options = GenerateOptions {
        sampling: sampling.clone(),
        max_tokens,
        stop_tokens: stop_tokens.to_vec(),
        ..GenerateOptions::default()
    };
    Generation::new(model, prompt, &options)?
        .map(|t| t.map(|t| t.id))
        .collect()
}
