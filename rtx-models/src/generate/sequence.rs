//! One sequence's side of a generation, shared by [`super::Generation`] and
//! [`super::BatchGeneration`]: its tokens so far, when it stops (token budget, full cache,
//! stop tokens, stop strings), and the text each new token releases.
//!
//! Invariant: the text released so far is a prefix of the final text, in order; text that
//! may still turn out to be an unfinished UTF-8 character or the start of a stop string is
//! held back until a later token settles it.

use super::{FinishReason, GenerateOptions, Token};
use crate::tokenizer::Tokenizer;
use rtx::Result;

/// A prompt and what has been generated after it.
#[derive(Clone, Debug)]
pub(crate) struct Sequence {
    /// The prompt, then every generated token.
    pub context: Vec<u32>,
    pub prompt_len: usize,
    /// Bytes of the generated text already released.
    emitted: usize,
    pub finished: Option<FinishReason>,
}

impl Sequence {
    pub(crate) fn new(prompt: &[u32]) -> Sequence {
        Sequence {
            context: prompt.to_vec(),
            prompt_len: prompt.len(),
            emitted: 0,
            finished: None,
        }
    }

    /// The generated tokens (stop tokens left out).
    pub(crate) fn generated(&self) -> &[u32] {
        &self.context[self.prompt_len..]
    }

    /// Whether another token may be generated with a cache of `max_len` positions; if not,
    /// the sequence is finished (at the token budget or with a full cache).
    pub(crate) fn may_continue(&mut self, options: &GenerateOptions, max_len: usize) -> bool {
        if self.finished.is_some() {
            return false;
        }
        if self.generated().len() >= options.max_tokens {
            self.finished = Some(FinishReason::MaxTokens);
            return false;
        }
        // The newest token goes to position `context.len() - 1`, which the cache must hold.
        if self.context.len() > max_len {
            self.finished = Some(FinishReason::CacheFull);
            return false;
        }
        true
    }

    /// Takes the sampled `id`: a stop token ends the sequence, anything else joins it.
    /// Returns the token to yield with the text it releases, if any.
    pub(crate) fn accept(
        &mut self,
        id: u32,
        tokenizer: Option<&Tokenizer>,
        options: &GenerateOptions,
        max_len: usize,
    ) -> Result<Option<Token>> {
        if options.stop_tokens.contains(&id) {
            self.finished = Some(FinishReason::StopToken(id));
            // Text held back for a stop string that never came is released with the stop
            // token, the one time it is yielded.
            let text = self.release_text(tokenizer, options, true)?;
            return Ok((!text.is_empty()).then_some(Token { id, text }));
        }
        self.context.push(id);
        // After the last token nothing can complete a held-back tail: release it all.
        let last = self.generated().len() >= options.max_tokens || self.context.len() > max_len;
        let text = self.release_text(tokenizer, options, last)?;
        if self.finished.is_some() && text.is_empty() {
            // A stop string ended the text before anything of this token's.
            return Ok(None);
        }
        Ok(Some(Token { id, text }))
    }

    /// The text the newest token releases, all of it when `last`; ends the sequence at a
    /// stop string (the token that completes it is still yielded, with the text before the
    /// stop string, when there is any).
    fn release_text(
        &mut self,
        tokenizer: Option<&Tokenizer>,
        options: &GenerateOptions,
        last: bool,
    ) -> Result<String> {
        let Some(tok) = tokenizer else {
            return Ok(String::new());
        };
        let text = tok.decode(&self.context[self.prompt_len..], false)?;
        if let Some((at, stop)) = options
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
            let held = options
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
