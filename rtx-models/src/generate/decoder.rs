//! The model side of a generation: a [`Decoder`] owns the cache of a batch of sequences, runs
//! the prefill and the decode steps, and hands back each sequence's logits on the host. On a
//! CUDA GPU the decode steps go through a [`CapturedDecode`] (one graph launch a step),
//! captured at the first decode step, unless [`GenerateOptions::cuda_graph`] is off or the
//! environment sets `RTX_DECODE_GRAPH=0`; elsewhere, and then, each step is
//! [`Llama::forward_batch`].

use super::GenerateOptions;
use crate::llama::{BatchKvCache, CapturedDecode, Llama};
use rtx::prelude::*;

/// Whether decode steps on a GPU may be captured: `options.cuda_graph`, unless the
/// environment's `RTX_DECODE_GRAPH` is `0` (or `false`, `off`).
pub(crate) fn graphs_enabled(options: &GenerateOptions) -> bool {
    let env_off = std::env::var("RTX_DECODE_GRAPH")
        .map(|v| matches!(v.trim(), "0" | "false" | "off"))
        .unwrap_or(false);
    options.cuda_graph && !env_off
}

/// The logits of one step, on the host: one row per sequence that took part.
pub(crate) struct StepLogits {
    data: Vec<f32>,
    vocab: usize,
    /// The row of each sequence of the batch, `None` for those left out.
    rows: Vec<Option<usize>>,
}

impl StepLogits {
    /// Sequence `seq`'s logits, if it took part in the step.
    pub(crate) fn row(&self, seq: usize) -> Option<&[f32]> {
        let r = (seq < self.rows.len()).then(|| self.rows[seq]).flatten()?;
        Some(&self.data[r * self.vocab..(r + 1) * self.vocab])
    }
}

/// A batch's cache and the steps over it.
pub(crate) struct Decoder<'a> {
    model: &'a Llama,
    cache: BatchKvCache,
    use_graph: bool,
    graph: Option<CapturedDecode>,
}

impl<'a> Decoder<'a> {
    /// A decoder for `batch` sequences of up to `max_len` positions; decode steps are
    /// captured when `graphs` is set and the model is on a CUDA GPU.
    pub(crate) fn new(
        model: &'a Llama,
        batch: usize,
        max_len: usize,
        graphs: bool,
    ) -> Result<Decoder<'a>> {
        Ok(Decoder {
            model,
            cache: model.new_batch_cache(batch, max_len)?,
            use_graph: graphs && matches!(model.device(), Device::Cuda(_)),
            graph: None,
        })
    }

    /// The most positions a sequence holds.
    pub(crate) fn max_len(&self) -> usize {
        self.cache.max_len()
    }

    /// Whether decode steps run as a captured graph.
    pub(crate) fn uses_graph(&self) -> bool {
        self.use_graph
    }

    /// Appends `tokens[s]` to each sequence `s` (an empty list leaves it out) in one step.
    pub(crate) fn prefill(&mut self, tokens: &[&[u32]]) -> Result<StepLogits> {
        let logits = self.model.forward_batch(tokens, &mut self.cache)?;
        Ok(self.host(logits, tokens.iter().map(|t| !t.is_empty())))
    }

    /// One decode step: `tokens[s]` appended to sequence `s`, `None` leaving it out.
    pub(crate) fn decode(&mut self, tokens: &[Option<u32>]) -> Result<StepLogits> {
        if self.use_graph {
            if self.graph.is_none() {
                self.graph = Some(self.model.capture_decode(&mut self.cache)?);
            }
            let graph = self.graph.as_mut().expect("captured above");
            let logits = graph.step(tokens, &mut self.cache)?.to_vec();
            let vocab = self.model.config().vocab_size;
            // The graph computes every row; those of finished sequences are not read.
            let rows = tokens
                .iter()
                .enumerate()
                .map(|(s, t)| t.map(|_| s))
                .collect();
            return Ok(StepLogits {
                data: logits,
                vocab,
                rows,
            });
        }
        let ids: Vec<[u32; 1]> = tokens.iter().map(|t| [t.unwrap_or(0)]).collect();
        let lists: Vec<&[u32]> = ids
            .iter()
            .zip(tokens)
            .map(|(id, t)| if t.is_some() { &id[..] } else { &[][..] })
            .collect();
        let logits = self.model.forward_batch(&lists, &mut self.cache)?;
        Ok(self.host(logits, tokens.iter().map(Option::is_some)))
    }

    /// `logits` (one row per sequence that took part, in order) on the host.
    fn host(
        &self,
        logits: Tensor<(usize, usize)>,
        took_part: impl Iterator<Item = bool>,
    ) -> StepLogits {
        let vocab = logits.dims()[1];
        let mut next = 0;
        let rows = took_part
            .map(|yes| {
                yes.then(|| {
                    next += 1;
                    next - 1
                })
            })
            .collect();
        StepLogits {
            data: logits.to_vec(),
            vocab,
            rows,
        }
    }
}
