//! [`CapturedDecode`]: a decode step of a [`Llama`] over a batch of fixed size, captured once
//! as a CUDA graph and replayed for every later step.
//!
//! A replay repeats the captured launches on the same addresses, so everything that changes
//! from step to step lives in one device buffer the graph reads, `[3, batch]` f32: each
//! sequence's token id, its index, and its position (the length of its cache). Before each
//! replay the host uploads the new values and copies them into that buffer, outside the
//! graph; the embedding lookup, rotary angles, cache writes and attention lengths inside it
//! all read the buffer (`kernels.rs`). The token embedding is looked up in an f32 copy of
//! the table that the step owns, since the host-side gather of the uncaptured step cannot be
//! captured.
//!
//! The graph also writes and reads the cache's buffers where they were at capture, so the
//! step checks before each replay that the cache it is given still has them
//! ([`Tensor::buffer_id`]).

use super::cache::BatchKvCache;
use super::forward::{Places, Plan};
use super::{Llama, Matrix, kernels};
use rtx::prelude::*;

/// One decode step of a [`Llama`] captured as a CUDA graph for a batch of fixed size and one
/// cache: [`CapturedDecode::step`] writes the new token ids and positions into the graph's
/// input buffer and replays it. The logits it returns are the graph's own buffer.
pub struct CapturedDecode {
    ordinal: usize,
    batch: usize,
    vocab: usize,
    /// `[3, batch]`: token ids, sequence indices, positions; read by the graph.
    inputs: Matrix,
    /// The f32 token embedding `[vocab, D]` the graph looks rows up in.
    _table: Matrix,
    /// `[batch, vocab]`, written by every replay.
    logits: Matrix,
    graph: rtx::cuda::Graph,
    /// Where the cache's tensors were at capture.
    cache_buffers: Vec<usize>,
}

impl std::fmt::Debug for CapturedDecode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CapturedDecode")
            .field("gpu", &self.ordinal)
            .field("batch", &self.batch)
            .finish_non_exhaustive()
    }
}

impl Llama {
    /// Captures one decode step (one token per sequence) over `cache`'s batch as a CUDA
    /// graph. The step runs once uncaptured first, on a scratch cache (so its kernels are
    /// compiled and `cache` is untouched); nothing runs on `cache` until
    /// [`CapturedDecode::step`].
    ///
    /// # Errors
    /// [`Error::BadArgument`] when the model is not on a CUDA GPU or `cache` was made for
    /// another model, and the capture's errors.
    pub fn capture_decode(&self, cache: &mut BatchKvCache) -> Result<CapturedDecode> {
        let Device::Cuda(ordinal) = self.device else {
            return Err(Error::BadArgument {
                op: "Llama::capture_decode",
                msg: format!(
                    "a captured decode step needs a CUDA device; the model is on {}",
                    self.device
                ),
            });
        };
        let c = &self.config;
        let want = [c.block_count, c.head_count_kv, c.head_dim];
        let got = [
            cache.keys.len(),
            cache.keys[0].dims()[1],
            cache.keys[0].dims()[3],
        ];
        if got != want {
            return Err(Error::BadArgument {
                op: "Llama::capture_decode",
                msg: format!(
                    "the cache was made for another model: {got:?} (blocks, kv heads, head \
                     width), where this model has {want:?}"
                ),
            });
        }
        let batch = cache.batch_size();
        let table = self.embedding_table()?;
        // Token 0 of sequence `s` at position 0 until the first step writes real values.
        let mut host = vec![0f32; 3 * batch];
        for s in 0..batch {
            host[batch + s] = s as f32;
        }
        let inputs: Matrix = Tensor::try_from_vec(host, (3, batch), self.device)?;
        let mut scratch = self.new_batch_cache(batch, 1)?;
        self.decode_rows(&table, &inputs, &mut scratch)?;
        drop(scratch);
        let (graph, logits) =
            rtx::cuda::capture(ordinal, || self.decode_rows(&table, &inputs, cache))?;
        Ok(CapturedDecode {
            ordinal,
            batch,
            vocab: c.vocab_size,
            inputs,
            _table: table,
            logits,
            graph,
            cache_buffers: cache.buffer_ids(),
        })
    }

    /// The decode step the graph holds: logits `[batch, vocab]` of the rows whose ids and
    /// places are the rows of `inputs`.
    fn decode_rows(
        &self,
        table: &Matrix,
        inputs: &Matrix,
        cache: &mut BatchKvCache,
    ) -> Result<Matrix> {
        let batch = inputs.dims()[1];
        let ids = inputs.narrow::<0, usize>(0, 1).reshape((batch,));
        let places = Places::from_rows(inputs, 1);
        let x = kernels::embed(table, &ids)?;
        let x = self.layers(x, &places, &Plan::Decode, cache)?;
        self.logits(&x)
    }
}

impl CapturedDecode {
    /// The batch size the step was captured for.
    pub fn batch_size(&self) -> usize {
        self.batch
    }

    /// The GPU the graph runs on.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// One decode step: `tokens[s]` is appended to sequence `s` at position `cache.len(s)`;
    /// a `None` (a finished sequence) leaves that sequence's length as it is (its row is
    /// still computed, on token 0 at its last position, and its logits mean nothing).
    /// Returns the logits `[batch, vocab]`, the graph's own buffer, which the next step
    /// overwrites: read or copy them first. The work is queued, not waited for; reading the
    /// logits waits.
    ///
    /// # Errors
    /// [`Error::BadArgument`] naming the sizes when `tokens` is not one entry per sequence, a
    /// token is outside the vocabulary, a sequence's cache is full, or `cache` is not the
    /// cache the step was captured on (or one of its tensors was given a new buffer).
    pub fn step(&mut self, tokens: &[Option<u32>], cache: &mut BatchKvCache) -> Result<&Matrix> {
        let bad = |msg: String| {
            Err(Error::BadArgument {
                op: "CapturedDecode::step",
                msg,
            })
        };
        if tokens.len() != self.batch {
            return bad(format!(
                "{} tokens for a step captured for {} sequences",
                tokens.len(),
                self.batch
            ));
        }
        if cache.batch_size() != self.batch || cache.buffer_ids() != self.cache_buffers {
            return bad(
                "the cache is not the one the step was captured on, or one of its tensors \
                 has moved to a new buffer (a clone of a cache tensor makes the next write \
                 copy it): capture again"
                    .into(),
            );
        }
        let b = self.batch;
        let mut host = vec![0f32; 3 * b];
        for (s, token) in tokens.iter().enumerate() {
            let len = cache.lens[s];
            host[b + s] = s as f32;
            host[2 * b + s] = match *token {
                Some(id) => {
                    if id as usize >= self.vocab {
                        return bad(format!(
                            "sequence {s}: token id {id} is outside the vocabulary of {}",
                            self.vocab
                        ));
                    }
                    if len >= cache.max_len {
                        return bad(format!(
                            "sequence {s}: its cache holds all {} positions",
                            cache.max_len
                        ));
                    }
                    host[s] = id as f32;
                    len as f32
                }
                // Any position the sequence will not read back: its next one, or the
                // last of a full cache.
                None => len.min(cache.max_len - 1) as f32,
            };
        }
        let fresh: Matrix = Tensor::try_from_vec(host, (3, b), self.inputs.device())?;
        kernels::copy_into(&fresh, &mut self.inputs)?;
        self.graph.replay()?;
        for (s, token) in tokens.iter().enumerate() {
            if token.is_some() {
                cache.lens[s] += 1;
            }
        }
        Ok(&self.logits)
    }
}
