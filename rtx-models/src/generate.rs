//! Text generation with a [`Llama`] model: sampling ([`Sampling`], [`Sampler`]), stop
//! conditions (end-of-sequence tokens from the GGUF metadata, stop strings, a token budget),
//! a streaming iterator of tokens ([`Generation`]), and chat templates rendered from the
//! file's `tokenizer.chat_template` with `minijinja` ([`ChatTemplate`]).
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
//! **Reproducible.** Sampling draws from its own generator, seeded by [`Sampling::seed`]:
//! the same model, prompt and settings give the same tokens on every run.
//!
//! **Streaming text.** A token can end inside a UTF-8 character (byte-level vocabularies
//! split emoji and CJK text), and the text generated so far can end with the start of a stop
//! string; [`Generation`] holds such text back until the next token settles it, so what it
//! streams is exactly the final text, in order.

use crate::llama::{KvCache, Llama};
use crate::tokenizer::Tokenizer;
use rtx::io::Gguf;
use rtx::{Error, Result};
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// How the next token is chosen from the logits.
///
/// The steps run in llama.cpp's and `transformers`' order: the repetition penalty on the raw
/// logits, then (unless greedy) the temperature, top-k, top-p and min-p, and a draw from what
/// is left, renormalized.
#[derive(Clone, Debug, PartialEq)]
pub struct Sampling {
    /// Divides the logits; 0 (or less) is greedy decoding: always the most likely token.
    pub temperature: f32,
    /// Keeps the `top_k` most likely tokens; 0 keeps all.
    pub top_k: usize,
    /// Keeps the most likely tokens whose probabilities add up to `top_p` (nucleus sampling);
    /// 1 keeps all.
    pub top_p: f32,
    /// Drops tokens less likely than `min_p` times the most likely one; 0 keeps all.
    pub min_p: f32,
    /// Makes every token already in the context less likely: a positive logit is divided by
    /// it and a negative one multiplied (the CTRL paper's rule, as `transformers` applies it);
    /// 1 does nothing.
    pub repetition_penalty: f32,
    /// Seeds the draws.
    pub seed: u64,
}

impl Default for Sampling {
    /// llama.cpp's defaults: temperature 0.8, top-k 40, top-p 0.95, min-p 0.05, no
    /// repetition penalty, seed 0.
    fn default() -> Self {
        Sampling {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repetition_penalty: 1.0,
            seed: 0,
        }
    }
}

impl Sampling {
    /// Greedy decoding: the most likely token every step (ties to the lowest id).
    pub fn greedy() -> Self {
        Sampling {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            ..Sampling::default()
        }
    }

    /// These settings with `temperature`.
    pub fn with_temperature(mut self, temperature: f32) -> Self {
        self.temperature = temperature;
        self
    }

    /// These settings with `seed`.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// These settings with `repetition_penalty`.
    pub fn with_repetition_penalty(mut self, penalty: f32) -> Self {
        self.repetition_penalty = penalty;
        self
    }

    /// An error naming the first setting out of range.
    fn check(&self) -> Result<()> {
        let bad = |msg: String| {
            Err(Error::BadArgument {
                op: "Sampling",
                msg,
            })
        };
        if self.temperature.is_nan() {
            return bad("the temperature is NaN".into());
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return bad(format!("top_p is {}; it must be in (0, 1]", self.top_p));
        }
        if !(0.0..=1.0).contains(&self.min_p) {
            return bad(format!("min_p is {}; it must be in [0, 1]", self.min_p));
        }
        if !(self.repetition_penalty > 0.0 && self.repetition_penalty.is_finite()) {
            return bad(format!(
                "the repetition penalty is {}; it must be positive (1 is none)",
                self.repetition_penalty
            ));
        }
        Ok(())
    }
}

/// Chooses tokens from logits by a [`Sampling`], with its own seeded random generator.
#[derive(Clone, Debug)]
pub struct Sampler {
    settings: Sampling,
    rng: SplitMix64,
}

impl Sampler {
    /// A sampler drawing with `settings`, its generator seeded by `settings.seed`.
    ///
    /// # Errors
    /// [`Error::BadArgument`] naming a setting out of range (top-p outside (0, 1], ...).
    pub fn new(settings: Sampling) -> Result<Sampler> {
        settings.check()?;
        Ok(Sampler {
            rng: SplitMix64(settings.seed),
            settings,
        })
    }

    /// The settings.
    pub fn settings(&self) -> &Sampling {
        &self.settings
    }

    /// The next token from one position's `logits` (one per vocabulary entry), `context`
    /// being the tokens so far (prompt and generated), which the repetition penalty reads.
    ///
    /// # Panics
    /// When `logits` is empty.
    pub fn sample(&mut self, logits: &[f32], context: &[u32]) -> u32 {
        assert!(!logits.is_empty(), "Sampler::sample: no logits");
        let s = &self.settings;
        let mut logits = logits.to_vec();
        if s.repetition_penalty != 1.0 {
            let mut seen = vec![false; logits.len()];
            for &id in context {
                let Some(l) = logits.get_mut(id as usize) else {
                    continue;
                };
                if !std::mem::replace(&mut seen[id as usize], true) {
                    *l = if *l > 0.0 {
                        *l / s.repetition_penalty
                    } else {
                        *l * s.repetition_penalty
                    };
                }
            }
        }
        if s.temperature <= 0.0 {
            return argmax(&logits);
        }
        // Candidates most likely first; top-k cuts before sorting, as most logits never
        // matter.
        let mut ids: Vec<u32> = (0..logits.len() as u32).collect();
        let by_logit = |a: &u32, b: &u32| {
            logits[*b as usize]
                .total_cmp(&logits[*a as usize])
                .then(a.cmp(b))
        };
        if s.top_k > 0 && s.top_k < ids.len() {
            ids.select_nth_unstable_by(s.top_k - 1, by_logit);
            ids.truncate(s.top_k);
        }
        ids.sort_unstable_by(by_logit);
        let top = logits[ids[0] as usize];
        // Softmax with the temperature, relative to the largest logit (so exp never
        // overflows): the first weight is exactly 1.
        let mut p: Vec<f64> = ids
            .iter()
            .map(|&i| (f64::from(logits[i as usize] - top) / f64::from(s.temperature)).exp())
            .collect();
        let total: f64 = p.iter().sum();
        p.iter_mut().for_each(|x| *x /= total);
        let mut keep = p.len();
        if s.top_p < 1.0 {
            // The shortest prefix whose mass reaches top_p (at least one token).
            let mut mass = 0.0;
            keep = p
                .iter()
                .position(|&x| {
                    mass += x;
                    mass >= f64::from(s.top_p)
                })
                .map_or(p.len(), |i| i + 1);
        }
        if s.min_p > 0.0 {
            let floor = p[0] * f64::from(s.min_p);
            keep = keep.min(p.iter().take_while(|&&x| x >= floor).count().max(1));
        }
        let kept = &p[..keep];
        let mut u = self.rng.next_f64() * kept.iter().sum::<f64>();
        for (i, &x) in kept.iter().enumerate() {
            if u < x {
                return ids[i];
            }
            u -= x;
        }
        ids[keep - 1]
    }
}

/// The index of the largest value, the first one on ties.
fn argmax(x: &[f32]) -> u32 {
    let mut best = 0;
    for (i, v) in x.iter().enumerate() {
        if *v > x[best] {
            best = i;
        }
    }
    best as u32
}

/// Sebastiano Vigna's SplitMix64: small, fast, and statistically fine for picking tokens.
#[derive(Clone, Debug)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1), from the top 53 bits.
    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

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
}

impl GenerateOptions {
    /// Options stopping at the end-of-sequence and end-of-turn tokens `gguf`'s metadata names
    /// (`tokenizer.ggml.eos_token_id`, `tokenizer.ggml.eot_token_id`,
    /// `tokenizer.ggml.eom_token_id`), after at most 256 tokens.
    ///
    /// # Errors
    /// [`Error::Gguf`] naming the key when one of them is not an unsigned integer.
    pub fn from_gguf(gguf: &Gguf, sampling: Sampling) -> Result<GenerateOptions> {
        Ok(GenerateOptions {
            sampling,
            max_tokens: 256,
            stop_tokens: stop_tokens(gguf)?,
            stop_strings: Vec::new(),
            max_len: None,
        })
    }

    /// These options with at most `max_tokens` generated.
    pub fn with_max_tokens(mut self, max_tokens: usize) -> Self {
        self.max_tokens = max_tokens;
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
/// [`Error::Gguf`] naming the key when one is present but not an unsigned integer.
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

/// A generation in progress: an iterator over the tokens of a continuation of a prompt,
/// each computed when asked for: the first by a prefill of the prompt, the rest by one-token
/// decoding steps through the cache.
pub struct Generation<'a> {
    model: &'a Llama,
    tokenizer: Option<&'a Tokenizer>,
    cache: KvCache,
    sampler: Sampler,
    options: GenerateOptions,
    /// The prompt, then every generated token.
    context: Vec<u32>,
    prompt_len: usize,
    /// Bytes of the generated text already yielded.
    emitted: usize,
    finished: Option<FinishReason>,
    stats: GenerationStats,
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
        let context = model.config().context_length;
        let max_len = options
            .max_len
            .unwrap_or_else(|| (prompt.len() + options.max_tokens).min(context));
        if prompt.len() > max_len {
            return Err(Error::BadArgument {
                op: "Generation::new",
                msg: format!(
                    "the prompt has {} tokens, more than the {max_len} positions of the cache \
                     (the model's context is {context})",
                    prompt.len()
                ),
            });
        }
        Ok(Generation {
            model,
            tokenizer: None,
            cache: model.new_cache(max_len)?,
            sampler: Sampler::new(options.sampling.clone())?,
            options: options.clone(),
            context: prompt.to_vec(),
            prompt_len: prompt.len(),
            emitted: 0,
            finished: None,
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
        let ids = tokenizer
            .hf()
            .encode(prompt, false)
            .map_err(|e| Error::BadArgument {
                op: "Generation::from_text",
                msg: format!("the prompt cannot be tokenized: {e}"),
            })?;
        Ok(Generation::new(model, ids.get_ids(), options)?.with_tokenizer(tokenizer))
    }

    /// This generation decoding its tokens to text with `tokenizer` (which stop strings need).
    pub fn with_tokenizer(mut self, tokenizer: &'a Tokenizer) -> Self {
        self.tokenizer = Some(tokenizer);
        self
    }

    /// The generated token ids so far (stop tokens left out).
    pub fn generated(&self) -> &[u32] {
        &self.context[self.prompt_len..]
    }

    /// Why the generation ended, once it has.
    pub fn finish_reason(&self) -> Option<&FinishReason> {
        self.finished.as_ref()
    }

    /// Times and counts so far.
    pub fn stats(&self) -> GenerationStats {
        self.stats
    }

    /// The next token, or `None` when a stop condition is met.
    fn step(&mut self) -> Result<Option<Token>> {
        let generated = self.context.len() - self.prompt_len;
        if generated >= self.options.max_tokens {
            return Ok(self.finish(FinishReason::MaxTokens));
        }
        // The newest token goes to position `context.len() - 1`, which the cache must hold.
        if self.context.len() > self.cache.max_len() {
            return Ok(self.finish(FinishReason::CacheFull));
        }
        let start = Instant::now();
        // The cache holds every position but the newest token's (all of the prompt's at first).
        let position = self.cache.len();
        let logits = self
            .model
            .forward_last(&self.context[position..], position, &mut self.cache)?
            .to_vec();
        let id = self.sampler.sample(&logits, &self.context);
        if position == 0 {
            self.stats.prefill += start.elapsed();
        } else {
            self.stats.decode += start.elapsed();
            self.stats.decoded_tokens += 1;
        }
        if self.options.stop_tokens.contains(&id) {
            self.finished = Some(FinishReason::StopToken(id));
            // Text held back for a stop string that never came is released with the stop
            // token, the one time it is yielded.
            let text = self.release_text(true)?;
            return Ok((!text.is_empty()).then_some(Token { id, text }));
        }
        self.context.push(id);
        // After the last token nothing can complete a held-back tail: release it all.
        let last = self.context.len() - self.prompt_len >= self.options.max_tokens
            || self.context.len() > self.cache.max_len();
        let text = self.release_text(last)?;
        if self.finished.is_some() && text.is_empty() {
            // A stop string ended the text before anything of this token's.
            return Ok(None);
        }
        Ok(Some(Token { id, text }))
    }

    fn finish(&mut self, reason: FinishReason) -> Option<Token> {
        self.finished = Some(reason);
        None
    }

    /// The text the newest token releases, all of it when `last`; ends the generation at a
    /// stop string (the token that completes it is still yielded, with the text before the
    /// stop string, when there is any).
    fn release_text(&mut self, last: bool) -> Result<String> {
        let Some(tok) = self.tokenizer else {
            return Ok(String::new());
        };
        let text = tok.decode(&self.context[self.prompt_len..], false)?;
        if let Some((at, stop)) = self
            .options
            .stop_strings
            .iter()
            .filter(|s| !s.is_empty())
            .filter_map(|s| text.find(s.as_str()).map(|at| (at, s.clone())))
            .min()
        {
            self.finished = Some(FinishReason::StopString(stop));
            let out = text.get(self.emitted..at).unwrap_or_default().to_string();
            self.emitted = at.max(self.emitted);
            return Ok(out);
        }
        // Hold back an unfinished character (the decoder writes U+FFFD for its bytes) and any
        // tail that could still grow into a stop string.
        let mut end = text.len();
        if !last {
            end = text.trim_end_matches('\u{FFFD}').len();
            let held = self
                .options
                .stop_strings
                .iter()
                .filter_map(|stop| {
                    (1..stop.len())
                        .rev()
                        .find(|&k| stop.is_char_boundary(k) && text[..end].ends_with(&stop[..k]))
                })
                .max()
                .unwrap_or(0);
            end -= held;
        }
        if end <= self.emitted {
            return Ok(String::new());
        }
        let out = text[self.emitted..end].to_string();
        self.emitted = end;
        Ok(out)
    }
}

impl Iterator for Generation<'_> {
    type Item = Result<Token>;

    fn next(&mut self) -> Option<Result<Token>> {
        if self.finished.is_some() {
            return None;
        }
        match self.step() {
            Ok(token) => token.map(Ok),
            Err(e) => {
                self.finished = Some(FinishReason::Error);
                Some(Err(e))
            }
        }
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
        stop_strings: Vec::new(),
        max_len: None,
    };
    Generation::new(model, prompt, &options)?
        .map(|t| t.map(|t| t.id))
        .collect()
}

/// One message of a conversation: a role (`system`, `user`, `assistant`) and its text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Who speaks: `system`, `user` or `assistant`.
    pub role: String,
    /// What they say.
    pub content: String,
}

impl Message {
    /// A message of `role`.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Message {
        Message {
            role: role.into(),
            content: content.into(),
        }
    }

    /// A `user` message.
    pub fn user(content: impl Into<String>) -> Message {
        Message::new("user", content)
    }

    /// A `system` message.
    pub fn system(content: impl Into<String>) -> Message {
        Message::new("system", content)
    }

    /// An `assistant` message.
    pub fn assistant(content: impl Into<String>) -> Message {
        Message::new("assistant", content)
    }
}

/// A chat template: the Jinja text that turns a conversation into a model's prompt, rendered
/// as `transformers`' `apply_chat_template` renders it (blocks trimmed and left-stripped,
/// `messages`, `add_generation_prompt`, `bos_token` and `eos_token` defined,
/// `raise_exception` raising, Python's string methods available).
#[derive(Clone, Debug)]
pub struct ChatTemplate {
    source: String,
    bos_token: String,
    eos_token: String,
    /// Where the template came from, for messages.
    origin: String,
}

impl ChatTemplate {
    /// A template from its Jinja `source`, with the texts of the BOS and EOS tokens it may
    /// refer to.
    ///
    /// # Errors
    /// [`Error::BadArgument`] with minijinja's message when the template does not parse.
    pub fn new(
        source: impl Into<String>,
        bos_token: impl Into<String>,
        eos_token: impl Into<String>,
    ) -> Result<ChatTemplate> {
        let template = ChatTemplate {
            source: source.into(),
            bos_token: bos_token.into(),
            eos_token: eos_token.into(),
            origin: "chat template".into(),
        };
        template.environment()?;
        Ok(template)
    }

    /// The template in `gguf`'s `tokenizer.chat_template`, with its BOS and EOS tokens' texts
    /// from `tokenizer.ggml.tokens`.
    ///
    /// # Errors
    /// [`Error::Gguf`] naming the key when the template or a token is missing, and naming
    /// the file when the template does not parse.
    pub fn from_gguf(gguf: &Gguf) -> Result<ChatTemplate> {
        let source = gguf.get_str("tokenizer.chat_template")?;
        let tokens = gguf.get_array("tokenizer.ggml.tokens")?;
        let token = |key: &str| -> Result<String> {
            if !gguf.metadata().contains_key(key) {
                return Ok(String::new());
            }
            let id = gguf.get_u32(key)? as usize;
            tokens
                .get(id)
                .and_then(|t| t.as_str())
                .map(str::to_string)
                .ok_or_else(|| Error::Gguf {
                    file: gguf.path().to_path_buf(),
                    msg: format!("metadata key `{key}` is {id}, which `tokenizer.ggml.tokens` does not hold as a string"),
                })
        };
        let mut t = ChatTemplate::new(
            source,
            token("tokenizer.ggml.bos_token_id")?,
            token("tokenizer.ggml.eos_token_id")?,
        )
        .map_err(|e| Error::Gguf {
            file: gguf.path().to_path_buf(),
            msg: format!("metadata key `tokenizer.chat_template`: {e}"),
        })?;
        t.origin = format!("{}: tokenizer.chat_template", gguf.path().display());
        Ok(t)
    }

    /// The template's Jinja text.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The prompt for `messages`; with `add_generation_prompt` it ends where the assistant's
    /// reply starts.
    ///
    /// # Errors
    /// [`Error::BadArgument`] with minijinja's message (or the template's own
    /// `raise_exception`) when rendering fails.
    pub fn render(&self, messages: &[Message], add_generation_prompt: bool) -> Result<String> {
        let env = self.environment()?;
        let template = env.get_template("chat").map_err(|e| self.error(&e))?;
        template
            .render(minijinja::context! {
                messages => messages,
                add_generation_prompt => add_generation_prompt,
                bos_token => &self.bos_token,
                eos_token => &self.eos_token,
            })
            .map_err(|e| self.error(&e))
    }

    /// A minijinja environment holding the template as `chat`, set up as `transformers` sets
    /// up Jinja for chat templates.
    fn environment(&self) -> Result<minijinja::Environment<'_>> {
        let mut env = minijinja::Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function(
            "raise_exception",
            |msg: String| -> std::result::Result<String, minijinja::Error> {
                Err(minijinja::Error::new(
                    minijinja::ErrorKind::InvalidOperation,
                    msg,
                ))
            },
        );
        env.add_template("chat", &self.source)
            .map_err(|e| self.error(&e))?;
        Ok(env)
    }

    fn error(&self, e: &minijinja::Error) -> Error {
        let mut msg = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            msg.push_str(&format!(": {s}"));
            source = s.source();
        }
        Error::BadArgument {
            op: "ChatTemplate",
            msg: format!("{}: {msg}", self.origin),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn logits() -> Vec<f32> {
        vec![1.0, 3.0, 2.0, -1.0, 2.9, 0.5]
    }

    #[test]
    fn greedy_takes_the_largest_logit_and_the_first_on_ties() {
        let mut s = Sampler::new(Sampling::greedy()).unwrap();
        assert_eq!(s.sample(&logits(), &[]), 1);
        assert_eq!(s.sample(&[0.5, 2.0, 2.0], &[]), 1);
    }

    #[test]
    fn top_k_of_one_is_greedy_at_any_temperature() {
        let settings = Sampling {
            temperature: 5.0,
            top_k: 1,
            ..Sampling::default()
        };
        let mut s = Sampler::new(settings).unwrap();
        assert!((0..50).all(|_| s.sample(&logits(), &[]) == 1));
    }

    #[test]
    fn a_seed_makes_draws_reproducible() {
        let settings = Sampling {
            temperature: 1.5,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            ..Sampling::default()
        };
        let draw = |seed| {
            let mut s = Sampler::new(settings.clone().with_seed(seed)).unwrap();
            (0..400)
                .map(|_| s.sample(&logits(), &[]))
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(3), draw(3));
        assert_ne!(draw(3), draw(4));
        // At a high temperature every token turns up (the least likely, id 3, 2% of draws).
        let seen: std::collections::BTreeSet<u32> = draw(3).into_iter().collect();
        assert_eq!(seen.len(), 6, "{seen:?}");
    }

    #[test]
    fn top_p_and_min_p_keep_only_the_likely_tokens() {
        // Probabilities at temperature 1: ids 1 and 4 hold about 0.77 of the mass.
        let only_top_two = |settings: Sampling| {
            let mut s = Sampler::new(settings).unwrap();
            (0..200).all(|_| matches!(s.sample(&logits(), &[]), 1 | 4))
        };
        let base = Sampling {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            ..Sampling::default()
        };
        assert!(only_top_two(Sampling {
            top_p: 0.7,
            ..base.clone()
        }));
        // min-p 0.5: id 2 (e^2 / e^3 = 0.37 of the top) is dropped, id 4 (0.9) is kept.
        assert!(only_top_two(Sampling {
            min_p: 0.5,
            ..base.clone()
        }));
        assert!(!only_top_two(base));
    }

    #[test]
    fn the_repetition_penalty_divides_positive_and_multiplies_negative_logits() {
        let mut s = Sampler::new(Sampling::greedy().with_repetition_penalty(2.0)).unwrap();
        // 3.0 / 2 = 1.5 falls below 2.9 and 2.0: id 4 wins; once id 4 is seen too, id 2 does.
        assert_eq!(s.sample(&logits(), &[1, 1]), 4);
        assert_eq!(s.sample(&logits(), &[1, 4]), 2);
        // A negative logit moves further down: -0.6 * 2 falls below -1.0.
        assert_eq!(s.sample(&[-1.0, -0.6], &[1]), 0);
    }

    #[test]
    fn settings_out_of_range_are_errors_naming_them() {
        let e = Sampler::new(Sampling {
            top_p: 0.0,
            ..Sampling::default()
        })
        .unwrap_err();
        assert!(e.to_string().contains("top_p"), "{e}");
        let e = Sampler::new(Sampling::greedy().with_repetition_penalty(0.0)).unwrap_err();
        assert!(e.to_string().contains("repetition penalty"), "{e}");
    }

    #[test]
    fn chat_templates_render_as_transformers_sets_up_jinja() {
        // trim_blocks drops the newline after a tag, lstrip_blocks the indent before one.
        let source = "{% for m in messages %}\n{{ bos_token }}{{ m['role'] }}: {{ m['content'].strip() }}\n{% endfor %}\n    {% if add_generation_prompt %}\nassistant:{% endif %}";
        let t = ChatTemplate::new(source, "<s>", "</s>").unwrap();
        let text = t
            .render(&[Message::user("  hi  "), Message::assistant("yo")], true)
            .unwrap();
        assert_eq!(text, "<s>user: hi\n<s>assistant: yo\nassistant:");
        let raising =
            ChatTemplate::new("{{ raise_exception('roles must alternate') }}", "", "").unwrap();
        let e = raising.render(&[], false).unwrap_err();
        assert!(e.to_string().contains("roles must alternate"), "{e}");
        let e = ChatTemplate::new("{% for %}", "", "").unwrap_err();
        assert!(e.to_string().contains("chat template"), "{e}");
    }
}
