//! [`BatchGeneration`]: several prompts of different lengths continued together. One prefill
//! step takes every prompt; each decode step then feeds every unfinished sequence's newest
//! token as one row of a `[batch, D]` product through the projections, the feed-forward
//! block and the head (on a CUDA GPU, as one replay of a captured graph), while each
//! sequence attends only to its own cache. Sequences finish on their own (stop token, stop
//! string, token budget, full cache) and the others go on.
//!
//! Every sequence samples with its own [`Sampler`], seeded by [`Sampling::seed`], so each
//! gets the tokens it would get generated alone with the same options.

use super::decoder::{Decoder, graphs_enabled};
use super::sequence::Sequence;
use super::stream::{cache_len, encode};
use super::{FinishReason, GenerateOptions, GenerationStats, Sampler, Sampling, Token};
use crate::llama::Llama;
use crate::tokenizer::Tokenizer;
use rtx::{Error, Result};
use std::collections::VecDeque;
use std::time::Instant;

/// One token of one sequence of a [`BatchGeneration`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchToken {
    /// The sequence, the index of its prompt.
    pub seq: usize,
    /// The token id.
    pub id: u32,
    /// The text it releases (see [`Token::text`]).
    pub text: String,
}

/// A generation of several prompts at once: an iterator over their tokens, step by step
/// (within a step, in sequence order), each step computed when its first token is asked
/// for. [`BatchGeneration::step`] gives a whole step's tokens instead.
///
/// ```no_run
/// use rtx::prelude::*;
/// use rtx_models::generate::{BatchGeneration, GenerateOptions, Sampling};
/// use rtx_models::llama::{Llama, WeightFormat};
/// use rtx_models::tokenizer::Tokenizer;
///
/// # fn main() -> rtx::Result<()> {
/// let gguf = rtx::io::Gguf::open(rtx_models::pretrained::smollm2_135m_instruct()?)?;
/// let model = Llama::from_gguf(&gguf, WeightFormat::Quantized, Device::Cpu)?;
/// let tokenizer = Tokenizer::from_gguf(&gguf)?;
/// let options = GenerateOptions::from_gguf(&gguf, Sampling::greedy())?.with_max_tokens(32);
/// let prompts = ["The capital of France is", "1, 2, 3,"];
/// let mut run = BatchGeneration::from_texts(&model, &tokenizer, &prompts, &options)?;
/// let mut texts = vec![String::new(); prompts.len()];
/// for token in run.by_ref() {
///     let token = token?;
///     texts[token.seq].push_str(&token.text);
/// }
/// println!("{texts:?}, stopped: {:?}", run.finish_reasons());
/// # Ok(())
/// # }
/// ```
pub struct BatchGeneration<'a> {
    decoder: Decoder<'a>,
    tokenizer: Option<&'a Tokenizer>,
    samplers: Vec<Sampler>,
    options: GenerateOptions,
    seqs: Vec<Sequence>,
    prefilled: bool,
    /// Tokens of the last step not yet taken by the iterator.
    pending: VecDeque<BatchToken>,
    /// Set when a step failed: the iterator ends after yielding the error.
    failed: bool,
    stats: GenerationStats,
}

impl<'a> BatchGeneration<'a> {
    /// A generation continuing each of `prompts` (token ids), without a tokenizer (see
    /// [`BatchGeneration::with_tokenizer`]). The cache holds `options.max_len` positions per
    /// sequence, by default the longest prompt plus `max_tokens`, capped at the context.
    ///
    /// # Errors
    /// [`Error::BadArgument`] naming the prompt when there are no prompts, a prompt is
    /// empty or longer than the cache, or the sampling settings are out of range.
    pub fn new<P: AsRef<[u32]>>(
        model: &'a Llama,
        prompts: &[P],
        options: &GenerateOptions,
    ) -> Result<BatchGeneration<'a>> {
        const OP: &str = "BatchGeneration::new";
        if prompts.is_empty() {
            return Err(Error::BadArgument {
                op: OP,
                msg: "no prompts given; a batch needs at least one".into(),
            });
        }
        if let Some(i) = prompts.iter().position(|p| p.as_ref().is_empty()) {
            return Err(Error::BadArgument {
                op: OP,
                msg: format!(
                    "prompt {i} of {} has no tokens; a generation needs at least one",
                    prompts.len()
                ),
            });
        }
        let longest = prompts.iter().map(|p| p.as_ref().len()).max().unwrap_or(0);
        let max_len = cache_len(OP, model, longest, options).map_err(|e| match e {
            Error::BadArgument { op, msg } => {
                let i = prompts
                    .iter()
                    .position(|p| p.as_ref().len() == longest)
                    .unwrap_or(0);
                Error::BadArgument {
                    op,
                    msg: format!("prompt {i}: {msg}"),
                }
            }
            other => other,
        })?;
        let sampler = Sampler::new(options.sampling.clone())?;
        Ok(BatchGeneration {
            decoder: Decoder::new(model, prompts.len(), max_len, graphs_enabled(options))?,
            tokenizer: None,
            samplers: vec![sampler; prompts.len()],
            options: options.clone(),
            seqs: prompts.iter().map(|p| Sequence::new(p.as_ref())).collect(),
            prefilled: false,
            pending: VecDeque::new(),
            failed: false,
            stats: GenerationStats {
                prompt_tokens: prompts.iter().map(|p| p.as_ref().len()).sum(),
                ..GenerationStats::default()
            },
        })
    }

    /// A generation continuing each of `prompts`, texts tokenized as they are (as
    /// [`super::Generation::from_text`] does), decoding tokens to text with `tokenizer`.
    ///
    /// # Errors
    /// As for [`BatchGeneration::new`], and the tokenizer's errors.
    pub fn from_texts<S: AsRef<str>>(
        model: &'a Llama,
        tokenizer: &'a Tokenizer,
        prompts: &[S],
        options: &GenerateOptions,
    ) -> Result<BatchGeneration<'a>> {
        let ids = prompts
            .iter()
            .map(|p| encode("BatchGeneration::from_texts", tokenizer, p.as_ref()))
            .collect::<Result<Vec<_>>>()?;
        Ok(BatchGeneration::new(model, &ids, options)?.with_tokenizer(tokenizer))
    }

    /// This generation decoding its tokens to text with `tokenizer` (which stop strings need).
    pub fn with_tokenizer(mut self, tokenizer: &'a Tokenizer) -> Self {
        self.tokenizer = Some(tokenizer);
        self
    }

    /// The number of sequences.
    pub fn batch_size(&self) -> usize {
        self.seqs.len()
    }

    /// Sequence `seq`'s generated token ids so far (stop tokens left out).
    ///
    /// # Panics
    /// When `seq` is not below [`BatchGeneration::batch_size`].
    pub fn generated(&self, seq: usize) -> &[u32] {
        self.seqs[seq].generated()
    }

    /// Why each sequence ended, `None` for those still going.
    pub fn finish_reasons(&self) -> Vec<Option<&FinishReason>> {
        self.seqs.iter().map(|s| s.finished.as_ref()).collect()
    }

    /// Whether every sequence has ended.
    pub fn is_finished(&self) -> bool {
        self.failed || self.seqs.iter().all(|s| s.finished.is_some())
    }

    /// Times and counts so far, over all sequences.
    pub fn stats(&self) -> GenerationStats {
        self.stats
    }

    /// Whether the decode steps run as a captured CUDA graph.
    pub fn uses_cuda_graph(&self) -> bool {
        self.decoder.uses_graph()
    }

    /// One step for every unfinished sequence: the prefill of every prompt first, then one
    /// decode step. Returns the tokens it yields, in sequence order (a sequence that stops
    /// may yield none); empty once every sequence has ended.
    ///
    /// # Errors
    /// The model's errors; the generation then ends.
    pub fn step(&mut self) -> Result<Vec<BatchToken>> {
        let result = self.try_step();
        if result.is_err() {
            self.failed = true;
            for s in &mut self.seqs {
                s.finished.get_or_insert(FinishReason::Error);
            }
        }
        result
    }

    fn try_step(&mut self) -> Result<Vec<BatchToken>> {
        if self.failed {
            return Ok(Vec::new());
        }
        let max_len = self.decoder.max_len();
        let options = &self.options;
        let active: Vec<bool> = self
            .seqs
            .iter_mut()
            .map(|s| s.may_continue(options, max_len))
            .collect();
        if !active.contains(&true) {
            return Ok(Vec::new());
        }
        let start = Instant::now();
        let logits = if self.prefilled {
            let tokens: Vec<Option<u32>> = self
                .seqs
                .iter()
                .zip(&active)
                .map(|(s, &a)| a.then(|| *s.context.last().expect("a prompt has a token")))
                .collect();
            self.decoder.decode(&tokens)?
        } else {
            let prompts: Vec<&[u32]> = self
                .seqs
                .iter()
                .zip(&active)
                .map(|(s, &a)| if a { &s.context[..] } else { &[][..] })
                .collect();
            self.decoder.prefill(&prompts)?
        };
        let mut out = Vec::new();
        for (i, seq) in self.seqs.iter_mut().enumerate() {
            let Some(row) = logits.row(i).filter(|_| active[i]) else {
                continue;
            };
            let id = self.samplers[i].sample(row, &seq.context);
            if let Some(Token { id, text }) = seq.accept(id, self.tokenizer, options, max_len)? {
                out.push(BatchToken { seq: i, id, text });
            }
        }
        let rows = active.iter().filter(|&&a| a).count();
        if self.prefilled {
            self.stats.decode += start.elapsed();
            self.stats.decoded_tokens += rows;
        } else {
            self.stats.prefill += start.elapsed();
            self.prefilled = true;
        }
        Ok(out)
    }

    /// Runs to the end and returns every sequence's generated token ids.
    ///
    /// # Errors
    /// The first step's error.
    pub fn run(mut self) -> Result<Vec<Vec<u32>>> {
        while !self.is_finished() {
            self.step()?;
        }
        Ok(self.seqs.iter().map(|s| s.generated().to_vec()).collect())
    }
}

impl Iterator for BatchGeneration<'_> {
    type Item = Result<BatchToken>;

    fn next(&mut self) -> Option<Result<BatchToken>> {
        loop {
            if let Some(t) = self.pending.pop_front() {
                return Some(Ok(t));
            }
            if self.is_finished() {
                return None;
            }
            match self.step() {
                Ok(tokens) => self.pending.extend(tokens),
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

/// Up to `max_tokens` token ids continuing each of `prompts`, each stopping before any of
/// `stop_tokens`: a [`BatchGeneration`] without text, run to the end. Sequence `i`'s ids are
/// those [`super::generate_ids`] gives for prompt `i` alone.
///
/// # Errors
/// As for [`BatchGeneration::new`], and the model's errors.
pub fn generate_batch<P: AsRef<[u32]>>(
    model: &Llama,
    prompts: &[P],
    max_tokens: usize,
    sampling: &Sampling,
    stop_tokens: &[u32],
) -> Result<Vec<Vec<u32>>> {
    let options = GenerateOptions {
        sampling: sampling.clone(),
        max_tokens,
        stop_tokens: stop_tokens.to_vec(),
        ..GenerateOptions::default()
    };
    BatchGeneration::new(model, prompts, &options)?.run()
}
