//! One forward step of a [`Llama`] over rows from several sequences: the embedding, the
//! blocks and the final norm, with every projection and the feed-forward block one product
//! over all the step's rows, and attention kept to each row's own sequence.
//!
//! A step is a list of [`Segment`]s, runs of consecutive tokens of one sequence each. Rows
//! carry their sequence and position in device buffers ([`Places`]), which the rotary,
//! cache-write and attention kernels read, so the same code serves a captured decode step
//! (`graph.rs`), whose buffers the host refills between replays. On a GPU a single-token
//! segment attends through the cached-attention kernel and a longer one (a prefill) through
//! the causal attention over its sequence's slab of the cache; on the CPU every segment
//! attends with llama.cpp's arithmetic (`ggml_numerics.rs`). Either way a row's result depends
//! only on its own sequence, which is why a batch generates what each of its prompts
//! generates alone.

use super::cache::BatchKvCache;
use super::kernels;
use super::{Llama, LlamaBlock, Matrix, Weight, ggml_numerics};
use rtx::prelude::*;
use rtx::quant::{GgmlType, QInput};

/// Consecutive tokens of one sequence: `tokens` placed at positions `position..position +
/// tokens.len()` of sequence `seq`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Segment<'a> {
    pub seq: usize,
    pub tokens: &'a [u32],
    pub position: usize,
}

/// Each row's sequence and position, `[rows]` each, as f32 on the model's device (see
/// `kernels.rs` for why f32).
pub(super) struct Places {
    pub seq: Tensor<(usize,)>,
    pub pos: Tensor<(usize,)>,
}

/// How a step's rows attend.
pub(super) enum Plan<'a> {
    /// Every row is one token of its own sequence: one cached-attention launch for all.
    Decode,
    /// The step's segments, in row order: each attends on its own.
    Segments(&'a [Segment<'a>]),
}

impl Places {
    /// The places of `segments`' rows, uploaded as one buffer.
    fn of(segments: &[Segment<'_>], device: Device) -> Result<Places> {
        let rows: usize = segments.iter().map(|s| s.tokens.len()).sum();
        let mut host = Vec::with_capacity(2 * rows);
        for s in segments {
            host.extend(std::iter::repeat_n(s.seq as f32, s.tokens.len()));
        }
        for s in segments {
            host.extend((s.position..s.position + s.tokens.len()).map(|p| p as f32));
        }
        let both: Tensor<(usize, usize)> = Tensor::try_from_vec(host, (2, rows), device)?;
        Ok(Places::from_rows(&both, 0))
    }

    /// Views of rows `first` (sequences) and `first + 1` (positions) of `buffer`.
    pub(super) fn from_rows(buffer: &Tensor<(usize, usize)>, first: usize) -> Places {
        let n = buffer.dims()[1];
        let row = |r: usize| buffer.narrow::<0, usize>(r, 1).reshape((n,));
        Places {
            seq: row(first),
            pos: row(first + 1),
        }
    }

    /// The places of rows `start..start + len`.
    fn narrow(&self, start: usize, len: usize) -> Places {
        Places {
            seq: self.seq.narrow::<0, usize>(start, len),
            pos: self.pos.narrow::<0, usize>(start, len),
        }
    }
}

impl Llama {
    /// The final hidden states `[rows, D]` of every token of `segments`, in order, after the
    /// last norm; their keys and values are written to `cache`, and each segment's sequence
    /// then holds the positions up to the segment's end.
    pub(super) fn run_segments(
        &self,
        op: &'static str,
        segments: &[Segment<'_>],
        cache: &mut BatchKvCache,
    ) -> Result<Matrix> {
        self.check_segments(op, segments, cache)?;
        let ids: Vec<u32> = segments.iter().flat_map(|s| s.tokens).copied().collect();
        let places = Places::of(segments, self.device)?;
        // The cached-attention kernel is for GPUs; the CPU runs it emulated, block by block, so
        // there a decoding row attends through the tensors' attention, which runs natively.
        let gpu = self.device.is_cuda();
        let plan = if gpu && segments.iter().all(|s| s.tokens.len() == 1) {
            Plan::Decode
        } else {
            Plan::Segments(segments)
        };
        let x = self.layers(self.embed(&ids)?, &places, &plan, cache)?;
        for s in segments {
            cache.lens[s.seq] = s.position + s.tokens.len();
        }
        Ok(x)
    }

    /// An error naming what does not fit: the cache's sizes, a sequence, a token id, a
    /// position. Sequences are named only when the cache holds several.
    fn check_segments(
        &self,
        op: &'static str,
        segments: &[Segment<'_>],
        cache: &BatchKvCache,
    ) -> Result<()> {
        let c = &self.config;
        let bad = |msg: String| Err(Error::BadArgument { op, msg });
        let want = [c.head_count_kv, cache.max_len, c.head_dim];
        if cache.keys.len() != c.block_count || cache.keys[0].dims()[1..] != want {
            return bad(format!(
                "the cache was made for another model: {} blocks of {:?}, where this model \
                 has {} blocks of [batch, {}, max_len, {}]",
                cache.keys.len(),
                cache.keys.first().map(|k| k.dims().to_vec()),
                c.block_count,
                c.head_count_kv,
                c.head_dim
            ));
        }
        if segments.is_empty() {
            return bad("no tokens given".into());
        }
        let mut seen = vec![false; cache.batch_size()];
        for s in segments {
            let who = if cache.batch_size() > 1 {
                format!("sequence {}: ", s.seq)
            } else {
                String::new()
            };
            if s.seq >= seen.len() || std::mem::replace(&mut seen[s.seq], true) {
                return bad(format!(
                    "{who}sequence {} given twice, or past the cache's {}",
                    s.seq,
                    seen.len()
                ));
            }
            let t = s.tokens.len();
            if t == 0 {
                return bad(format!("{who}no tokens given"));
            }
            if let Some(&id) = s.tokens.iter().find(|&&id| id as usize >= c.vocab_size) {
                return bad(format!(
                    "{who}token id {id} is outside the vocabulary of {}",
                    c.vocab_size
                ));
            }
            let (p, len) = (s.position, cache.lens[s.seq]);
            if p > len {
                return bad(format!(
                    "{who}position {p} is past the {len} positions the cache holds: positions \
                     must follow each other"
                ));
            }
            if p + t > cache.max_len {
                return bad(format!(
                    "{who}{t} tokens at position {p} need {} positions, but the cache holds {}",
                    p + t,
                    cache.max_len
                ));
            }
        }
        Ok(())
    }

    /// The blocks over the embedded rows `x`, placed by `places`: the residual stream after
    /// the last block (the final norm is joined to the head, [`Llama::logits`]).
    pub(super) fn layers(
        &self,
        x: Matrix,
        places: &Places,
        plan: &Plan<'_>,
        cache: &mut BatchKvCache,
    ) -> Result<Matrix> {
        let mut x = x;
        for (i, block) in self.blocks.iter().enumerate() {
            x = self.block(block, &x, places, plan, cache, i)?;
        }
        Ok(x)
    }

    /// One block over the residual stream `x` (`[rows, D]`), giving the stream after it.
    /// Each RMS norm is joined to the product after it, each residual add to the product
    /// before it, and SwiGLU to the gate-and-up product ([`super::Weight::forward_joined`],
    /// [`super::Weight::forward_swiglu`]), so that
    /// a decoding step on a GPU is five launches a block: the `qkv` product with the rotary
    /// turn and cache write as its output ([`kernels::qkv_rope_store`]), attention, the `o`
    /// product, and the gate-and-up and down products; or, when asked for (see
    /// [`Llama::one_launch`]), those five as phases of one cooperative launch
    /// ([`kernels::decode_block_fused`]).
    fn block(
        &self,
        b: &LlamaBlock,
        x: &Matrix,
        places: &Places,
        plan: &Plan<'_>,
        cache: &mut BatchKvCache,
        layer: usize,
    ) -> Result<Matrix> {
        let c = &self.config;
        let (h, eps) = (c.head_count, c.rms_eps);
        let (cos, sin) = (&self.rope.cos, &self.rope.sin);
        // A decoding step's few rows on a GPU: the whole block in one cooperative launch.
        if let (Plan::Decode, Some(w)) = (plan, self.one_launch(b, x.dims()[0])) {
            let (keys, values) = (&mut cache.keys[layer], &mut cache.values[layer]);
            let (seq, pos) = (&places.seq, &places.pos);
            return kernels::decode_block_fused(&w, x, keys, values, cos, sin, seq, pos, 0);
        }
        // One product for the query, key and value heads, which turns the query and key heads
        // and writes the keys and values into the cache as it finishes its sums (a decoding
        // step's few rows of a quantized weight on a GPU); else the product, then one launch
        // for the turn and the writes.
        let (keys, values) = (&mut cache.keys[layer], &mut cache.values[layer]);
        let qkv = match &b.qkv {
            Weight::Quantized(w)
                if x.device().is_cuda()
                    && x.dims()[0] <= kernels::QKV_ROPE_ROWS
                    && matches!(w.ggml_type(), GgmlType::Q8_0 | GgmlType::Q4_1) =>
            {
                kernels::qkv_rope_store(
                    w,
                    x,
                    Some((&b.attn_norm, eps)),
                    keys,
                    values,
                    cos,
                    sin,
                    &places.seq,
                    &places.pos,
                    h,
                )?
            }
            _ => {
                let mut qkv = b
                    .qkv
                    .forward_joined(x, QInput::RmsNorm(&b.attn_norm, eps), None)?;
                kernels::rope_store(
                    &mut qkv,
                    keys,
                    values,
                    cos,
                    sin,
                    &places.seq,
                    &places.pos,
                    h,
                )?;
                qkv
            }
        };
        let attn = match plan {
            Plan::Decode => kernels::attend(
                &qkv,
                &cache.keys[layer],
                &cache.values[layer],
                &places.seq,
                &places.pos,
                h,
            )?,
            Plan::Segments(segments) => {
                self.attend_segments(&qkv, segments, places, cache, layer)?
            }
        };
        // ANCHOR: joined
        let x = b.o.forward_joined(&attn, QInput::Rows, Some(x))?;
        let hidden = b
            .gate_up
            .forward_swiglu(&x, QInput::RmsNorm(&b.ffn_norm, eps))?;
        b.down.forward_joined(&hidden, QInput::Rows, Some(&x))
        // ANCHOR_END: joined
    }

    /// The weights of block `b` for [`kernels::decode_block_fused`], when it takes `rows`
    /// decoding rows of this model: with `RTX_LLAMA_ONE_LAUNCH=1`, one row (the kernel's
    /// entries specialized for it keep within 128 registers; its generic entry spills a
    /// kilobyte a thread, by `tools/ptxas-info`), on a GPU, all four products quantized as its
    /// kernel takes them. Off by default: on an H100 the one launch took 34 µs a block where
    /// the five took 23.5 (benches/README.md, the Llama decode section); it is the ground for
    /// a block whose phases load their weights before the barrier that precedes them.
    fn one_launch<'a>(
        &'a self,
        b: &'a LlamaBlock,
        rows: usize,
    ) -> Option<kernels::BlockWeights<'a>> {
        static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        let on = *ON.get_or_init(|| std::env::var("RTX_LLAMA_ONE_LAUNCH").is_ok_and(|v| v == "1"));
        let (
            Weight::Quantized(qkv),
            Weight::Quantized(o),
            Weight::Quantized(gate_up),
            Weight::Quantized(down),
        ) = (&b.qkv, &b.o, &b.gate_up, &b.down)
        else {
            return None;
        };
        let w = kernels::BlockWeights {
            qkv,
            o,
            gate_up,
            down,
            attn_norm: &b.attn_norm,
            ffn_norm: &b.ffn_norm,
            eps: self.config.rms_eps,
            heads: self.config.head_count,
        };
        (on && rows == 1 && self.device.is_cuda() && w.fit(self.config.head_dim)).then_some(w)
    }

    /// Attention of each segment's rows over its own sequence, joined in row order; `qkv` is
    /// the step's stacked projections, whose query heads come first in each row.
    fn attend_segments(
        &self,
        qkv: &Matrix,
        segments: &[Segment<'_>],
        places: &Places,
        cache: &BatchKvCache,
        layer: usize,
    ) -> Result<Matrix> {
        let h = self.config.head_count;
        let mut parts = Vec::with_capacity(segments.len());
        let mut first = 0;
        for s in segments {
            let t = s.tokens.len();
            let rows = qkv.narrow::<0, usize>(first, t);
            parts.push(if !self.device.is_cuda() {
                self.attend_cpu(&rows, s, cache, layer)?
            } else if t == 1 {
                let at = places.narrow(first, 1);
                let (keys, values) = (&cache.keys[layer], &cache.values[layer]);
                kernels::attend(&rows, keys, values, &at.seq, &at.pos, h)?
            } else {
                self.attend_prefill(&rows, s, cache, layer)?
            });
            first += t;
        }
        if parts.len() == 1 {
            return Ok(parts.pop().expect("one part"));
        }
        let refs: Vec<&Matrix> = parts.iter().collect();
        Ok(Tensor::cat::<0, usize>(&refs))
    }

    /// The causal attention of a segment's `t` rows of stacked projections `qkv` (their query
    /// heads; `t > 1` on a GPU, where a decoding row takes the cached-attention kernel) over
    /// its sequence's cached positions `0..position + t` (its own keys already written): query
    /// `i` sees positions up to `position + i`, which is the causal mask with its diagonal at
    /// the bottom right. Every view is free: the rows read as `[kv_heads, group, t, hd]` (a
    /// key-value head's queries are consecutive heads) and the sequence's slab of the cache
    /// shared by the group (stride 0).
    fn attend_prefill(
        &self,
        qkv: &Matrix,
        s: &Segment<'_>,
        cache: &BatchKvCache,
        layer: usize,
    ) -> Result<Matrix> {
        let c = &self.config;
        let (hd, h, kvh, g) = (c.head_dim, c.head_count, c.head_count_kv, c.group_size());
        let t = s.tokens.len();
        let len = s.position + t;
        let shared =
            |all: &super::cache::CacheTensor| -> Result<Tensor<(usize, usize, usize, usize)>> {
                all.narrow::<0, usize>(s.seq, 1)
                    .try_reshape((kvh, 1usize, cache.max_len, hd))?
                    .narrow::<2, usize>(0, len)
                    .try_broadcast_to((kvh, g, len, hd))
            };
        let (keys, values) = (shared(&cache.keys[layer])?, shared(&cache.values[layer])?);
        // A key-value head's queries are consecutive heads of each row.
        let q = qkv
            .narrow::<1, usize>(0, h * hd)
            .try_reshape((t, kvh, g, hd))?
            .permute::<Axes4<1, 2, 0, 3>>();
        let scale = 1.0 / (hd as f64).sqrt();
        // `[kv_heads, group, t, hd]` back to the rows' order, `[t, heads * hd]`.
        q.try_causal_attention(&keys, &values, scale)?
            .permute::<Axes4<2, 0, 1, 3>>()
            .contiguous()
            .try_reshape((t, h * hd))
    }

    /// The causal attention of a segment's `t` rows of stacked projections `qkv` (their query
    /// heads first) over its sequence's cached positions `0..position + t` on the CPU, with
    /// llama.cpp's arithmetic ([`ggml_numerics::attention`]), reading the caches in place.
    fn attend_cpu(
        &self,
        qkv: &Matrix,
        s: &Segment<'_>,
        cache: &BatchKvCache,
        layer: usize,
    ) -> Result<Matrix> {
        let c = &self.config;
        let (hd, h, kvh) = (c.head_dim, c.head_count, c.head_count_kv);
        let t = s.tokens.len();
        let q = qkv.narrow::<1, usize>(0, h * hd).contiguous();
        let slab = ggml_numerics::CacheSlab {
            keys: cache.keys[layer]
                .as_cpu_slice()
                .expect("a CPU cache is one dense buffer"),
            values: cache.values[layer]
                .as_cpu_slice()
                .expect("a CPU cache is one dense buffer"),
            seq: s.seq,
            max_len: cache.max_len,
        };
        let q = q.as_cpu_slice().expect("a dense CPU tensor");
        let out = ggml_numerics::attention(
            q,
            (t, h, kvh, hd),
            &slab,
            s.position,
            1.0 / (hd as f32).sqrt(),
        );
        Tensor::try_from_vec(out, (t, h * hd), self.device)
    }
}
