//! [`Llama::random`]: a model of any config with deterministic random weights in the ggml
//! types a GGUF file would hold, for benchmarks and device tests where the real file cannot
//! go (a GPU machine without network access) and for small models in tests.
//!
//! The blocks are raw ggml bytes: random scales chosen so each weight has a standard
//! deviation of about 0.02 (Q4_1: `d * q + m` with `m` near `-8 d`; Q8_0: `d * q`), so the
//! activations keep the magnitudes of a trained model's and the products do the same work.

use super::{Llama, LlamaBlock, LlamaConfig, Rotary, Weight, WeightFormat};
use rtx::prelude::*;
use rtx::quant::GgmlType;

/// SplitMix64: a small, fast, seeded stream of bits.
struct Bits(u64);

impl Bits {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// The bytes of `n` values of type `ty` (a multiple of its block), random.
fn random_bytes(ty: GgmlType, n: usize, bits: &mut Bits) -> Result<Vec<u8>> {
    let half = |x: f32| f16::from_f32(x).to_bits().to_le_bytes();
    let mut out = Vec::with_capacity(ty.bytes_for(n).unwrap_or(0));
    match ty {
        GgmlType::F32 => {
            for _ in 0..n {
                out.extend(((bits.unit() - 0.5) * 0.07).to_le_bytes());
            }
        }
        GgmlType::Q8_0 => {
            for _ in 0..n / 32 {
                out.extend(half(0.0003 * (0.5 + bits.unit())));
                out.extend((0..32).map(|_| bits.next() as u8));
            }
        }
        GgmlType::Q4_1 => {
            for _ in 0..n / 32 {
                let d = 0.004 * (0.5 + bits.unit());
                out.extend(half(d));
                out.extend(half(-8.0 * d * (0.9 + 0.2 * bits.unit())));
                out.extend((0..16).map(|_| bits.next() as u8));
            }
        }
        other => {
            return Err(Error::BadArgument {
                op: "Llama::random",
                msg: format!("random {other:?} weights: only F32, Q8_0 and Q4_1 are written"),
            });
        }
    }
    Ok(out)
}

impl Llama {
    /// A model of `config`'s sizes with deterministic random weights (the same `seed` gives
    /// the same bytes): every projection of type `projections`, the token embedding, which
    /// is also the (tied) output head, of type `embedding`, each kept as `format` says, as
    /// [`Llama::from_gguf`] keeps a file's. SmolLM2-135M-Instruct's file is
    /// [`LlamaConfig::smollm2_135m`] with Q4_1 projections and a Q8_0 embedding.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// # use rtx::quant::GgmlType;
    /// # use rtx_models::llama::{Llama, LlamaConfig, WeightFormat};
    /// let mut config = LlamaConfig::smollm2_135m();
    /// config.block_count = 2;
    /// config.vocab_size = 256;
    /// let model = Llama::random(&config, GgmlType::Q4_1, GgmlType::Q8_0, 7, WeightFormat::Quantized, Device::Cpu).unwrap();
    /// let mut cache = model.new_cache(8).unwrap();
    /// assert_eq!(model.forward(&[1, 2, 3], 0, &mut cache).unwrap().dims(), &[3, 256]);
    /// ```
    ///
    /// # Errors
    /// [`Error::BadArgument`] naming the sizes when they do not divide as the architecture
    /// needs or are not whole blocks of the types, or a type has no random writer.
    pub fn random(
        config: &LlamaConfig,
        projections: GgmlType,
        embedding: GgmlType,
        seed: u64,
        format: WeightFormat,
        device: Device,
    ) -> Result<Llama> {
        let c = config.clone();
        let (d, ff) = (c.embedding_length, c.feed_forward_length);
        let mut wrong = c.size_errors();
        for (what, ty) in [("projection", projections), ("embedding", embedding)] {
            let block = ty.block_size();
            if !d.is_multiple_of(block) || !ff.is_multiple_of(block) {
                wrong.push(format!(
                    "the width {d} and feed-forward width {ff} must be whole {ty:?} blocks of \
                     {block} for the {what} weights"
                ));
            }
        }
        if c.block_count == 0 || c.vocab_size == 0 || c.context_length == 0 {
            wrong.push(format!(
                "{} blocks, a vocabulary of {} and a context of {}: each must be positive",
                c.block_count, c.vocab_size, c.context_length
            ));
        }
        if !wrong.is_empty() {
            return Err(Error::BadArgument {
                op: "Llama::random",
                msg: wrong.join("; "),
            });
        }
        let mut bits = Bits(seed);
        let (q_out, kv_out) = (c.head_count * c.head_dim, c.head_count_kv * c.head_dim);
        // Drawn in the file's order (q, k, v, o, gate, up, down), each stack joined after.
        let mut draw = |rows: &[usize], cols: usize| -> Result<Weight> {
            let bytes = rows
                .iter()
                .map(|&r| random_bytes(projections, r * cols, &mut bits))
                .collect::<Result<Vec<_>>>()?;
            let parts: Vec<(&[u8], [usize; 2], GgmlType)> = bytes
                .iter()
                .zip(rows)
                .map(|(b, &r)| (b.as_slice(), [r, cols], projections))
                .collect();
            Weight::stack(&parts, format, device)
        };
        let mut blocks = Vec::with_capacity(c.block_count);
        for _ in 0..c.block_count {
            let qkv = draw(&[q_out, kv_out, kv_out], d)?;
            let o = draw(&[d], q_out)?;
            let gate_up = draw(&[ff, ff], d)?;
            blocks.push(LlamaBlock {
                attn_norm: Tensor::ones((d,), device),
                qkv,
                o,
                ffn_norm: Tensor::ones((d,), device),
                gate_up,
                down: draw(&[d], ff)?,
            });
        }
        let table = random_bytes(embedding, c.vocab_size * d, &mut bits)?;
        let head = Weight::stack(&[(&table, [c.vocab_size, d], embedding)], format, device)?;
        Ok(Llama {
            norm: Tensor::ones((d,), device),
            rope: Rotary::new(&c, device)?,
            config: c,
            device,
            embedding: table,
            embedding_type: embedding,
            blocks,
            head,
            head_tied: true,
        })
    }
}
