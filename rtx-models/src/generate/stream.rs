//! [`Generation`]: the streaming iterator over the tokens of one prompt's continuation.

use super::decoder::{Decoder, graphs_enabled};
use super::sequence::Sequence;
use super::{FinishReason, GenerateOptions, GenerationStats, Sampler, Token};
use crate::llama::Llama;
use crate::tokenizer::Tokenizer;
use rtx::{Error, Result};
use std::time::Instant;

/// A generation in progress: an iterator over the tokens of a continuation of a prompt,
/// each computed when asked for: the first by a prefill of the prompt, the rest by one-token
/// decoding steps through the cache (on a CUDA GPU, replays of a captured graph; see
/// [`GenerateOptions::cuda_graph`]).
pub struct Generation<'a> {
    decoder: Decoder<'a>,
    tokenizer: Option<&'a Tokenizer>,
    sampler: Sampler,
    options: GenerateOptions,
    seq: Sequence,
    prefilled: bool,
    stats: GenerationStats,
}

/// The cache length a generation allocates for prompts of up to `longest` tokens, and an
/// error naming the sizes when a prompt does not fit it.
pub(crate) fn cache_len(
    op: &'static str,
    model: &Llama,
    longest: usize,
    options: &GenerateOptions,
) -> Result<usize> {
    let context = model.config().context_length;
    let max_len = options
        .max_len
        .unwrap_or_else(|| (longest + options.max_tokens).min(context));
    if longest > max_len {
        return Err(Error::BadArgument {
            op,
            msg: format!(
                "the prompt has {longest} tokens, more than the {max_len} positions of the \
                 cache (the model's context is {context})"
            ),
        });
    }
    Ok(max_len)
}

/// `prompt`'s ids as the tokenizer makes them from text taken as it is (special tokens
/// written in it matched whole, no BOS added).
pub(crate) fn encode(op: &'static str, tokenizer: &Tokenizer, prompt: &str) -> Result<Vec<u32>> {
    let ids = tokenizer
        .hf()
        .encode(prompt, false)
        .map_err(|e| Error::BadArgument {
            op,
            msg: format!("the prompt cannot be tokenized: {e}"),
        })?;
    Ok(ids.get_ids().to_vec())
}

impl<'a> Generation<'a> {
    /// A generation continuing `prompt` (token ids), without a tokenizer: the tokens come
    /// with empty text, and stop strings cannot be seen (use [`Generation::with_tokenizer`]).
    ///
    /// # Errors
    /// [`Error::BadArgument`] for an empty prompt, a prompt longer than the cache, or
    /// sampling settings out of range.
    pub fn new(
        model: &'a Llama,
        prompt: &[u32],
        options: &GenerateOptions,
    ) -> Result<Generation<'a>> {
        if prompt.is_empty() {
            return Err(Error::BadArgument {
                op: "Generation::new",
                msg: "the prompt has no tokens; a generation needs at least one".into(),
            });
        }
        let max_len = cache_len("Generation::new", model, prompt.len(), options)?;
        Ok(Generation {
            decoder: Decoder::new(model, 1, max_len, graphs_enabled(options))?,
            tokenizer: None,
            sampler: Sampler::new(options.sampling.clone())?,
            options: options.clone(),
            seq: Sequence::new(prompt),
            prefilled: false,
            stats: GenerationStats {
                prompt_tokens: prompt.len(),
                ..GenerationStats::default()
            },
        })
    }

    /// A generation continuing `prompt`, a text tokenized as it is (special tokens written in
    /// it, such as a chat template's `<|im_start|>`, are matched whole; no BOS is added, since
    /// a chat template writes its own).
    ///
    /// # Errors
    /// As for [`Generation::new`], and the tokenizer's errors.
    pub fn from_text(
        model: &'a Llama,
        tokenizer: &'a Tokenizer,
        prompt: &str,
        options: &GenerateOptions,
    ) -> Result<Generation<'a>> {
        let ids = encode("Generation::from_text", tokenizer, prompt)?;
        Ok(Generation::new(model, &ids, options)?.with_tokenizer(tokenizer))
    }

    /// This generation decoding its tokens to text with `tokenizer` (which stop strings need).
    pub fn with_tokenizer(mut self, tokenizer: &'a Tokenizer) -> Self {
        self.tokenizer = Some(tokenizer);
        self
    }

    /// The generated token ids so far (stop tokens left out).
    pub fn generated(&self) -> &[u32] {
        self.seq.generated()
    }

    /// Why the generation ended, once it has.
    pub fn finish_reason(&self) -> Option<&FinishReason> {
        self.seq.finished.as_ref()
    }

    /// Times and counts so far.
    pub fn stats(&self) -> GenerationStats {
        self.stats
    }

    /// Whether the decode steps run as a captured CUDA graph.
    pub fn uses_cuda_graph(&self) -> bool {
        self.decoder.uses_graph()
    }

    /// The next token, or `None` when a stop condition is met.
    fn step(&mut self) -> Result<Option<Token>> {
        let max_len = self.decoder.max_len();
        if !self.seq.may_continue(&self.options, max_len) {
            return Ok(None);
        }
        let start = Instant::now();
        let logits = if self.prefilled {
            let last = *self.seq.context.last().expect("a prompt has a token");
            self.decoder.decode(&[Some(last)])?
        } else {
            self.decoder.prefill(&[&self.seq.context])?
        };
        let logits = logits.row(0).expect("the one sequence took part");
        let id = self.sampler.sample(logits, &self.seq.context);
        if self.prefilled {
            self.stats.decode += start.elapsed();
            self.stats.decoded_tokens += 1;
        } else {
            self.stats.prefill += start.elapsed();
            self.prefilled = true;
        }
        self.seq.accept(id, self.tokenizer, &self.options, max_len)
    }
}

impl Iterator for Generation<'_> {
    type Item = Result<Token>;

    fn next(&mut self) -> Option<Result<Token>> {
        if self.seq.finished.is_some() {
            return None;
        }
        match self.step() {
            Ok(token) => token.map(Ok),
            Err(e) => {
                self.seq.finished = Some(FinishReason::Error);
                Some(Err(e))
            }
        }
    }
}
