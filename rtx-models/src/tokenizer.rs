//! Text to token ids and back, through Hugging Face's `tokenizers`: from a `tokenizer.json`
//! ([`Tokenizer::from_file`]) or from the byte-level BPE vocabulary stored in a GGUF file's
//! metadata ([`Tokenizer::from_gguf`], built in `tokenizer/gguf.rs`).
//!
//! Invariant: every text is encoded with the tokenizer's special tokens (BERT's `[CLS]` and
//! `[SEP]`, a BOS where the vocabulary asks for one), truncated on the right to
//! [`Tokenizer::max_len`] tokens when that is set, and a [`Batch`] is padded on the right to
//! its longest text with [`Tokenizer::pad_id`], its mask 1 exactly on the texts' own tokens.
//! These are the rules of sentence-transformers and of `transformers`' tokenizers called with
//! `padding=True, truncation=True`, so the ids are theirs.

mod gguf;

use rtx::{Error, Result};
use std::path::Path;
use tokenizers::{
    PaddingDirection, PaddingParams, PaddingStrategy, TruncationDirection, TruncationParams,
    TruncationStrategy,
};

/// A tokenizer: a vocabulary with its normalization, pre-tokenization, model, special tokens
/// and decoder, plus the truncation length and pad id that batches use.
///
/// ```no_run
/// use rtx_models::tokenizer::Tokenizer;
/// let tok = Tokenizer::from_file("tokenizer.json")?.with_max_len(Some(256));
/// let ids = tok.encode("Hello world!")?;
/// let batch = tok.encode_batch(&["Hello world!", "A man is eating food."])?;
/// assert_eq!(batch.row(0), &ids[..]);
/// assert_eq!(tok.decode(&ids, true)?, "hello world!");
/// # Ok::<(), rtx::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    /// Where the tokenizer came from, for messages: the file.
    source: String,
    max_len: Option<usize>,
    pad_id: u32,
    specials: SpecialTokens,
}

/// The ids of a vocabulary's special tokens, where it names them.
///
/// A `tokenizer.json` names only its pad token (in its padding settings); BOS and EOS are in
/// a model's other files. A GGUF file names all four in its metadata.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpecialTokens {
    /// Beginning of sequence (`tokenizer.ggml.bos_token_id`).
    pub bos: Option<u32>,
    /// End of sequence (`tokenizer.ggml.eos_token_id`): where generation stops.
    pub eos: Option<u32>,
    /// The unknown token (`tokenizer.ggml.unknown_token_id`).
    pub unk: Option<u32>,
    /// Padding (`tokenizer.ggml.padding_token_id`, or a `tokenizer.json`'s `padding.pad_id`).
    pub pad: Option<u32>,
}

/// Several texts encoded as one rectangular batch: `len` rows of `seq_len` tokens, each row
/// padded on the right with the tokenizer's pad id. What a BERT encoder takes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Batch {
    /// Token ids, `len * seq_len`, row-major.
    pub ids: Vec<u32>,
    /// The attention mask, laid out as `ids`: 1 on a text's own tokens, 0 on padding.
    pub mask: Vec<u32>,
    /// Token type (segment) ids, laid out as `ids`: 0 everywhere for single texts.
    pub type_ids: Vec<u32>,
    /// Each text's token count after truncation, before padding.
    pub lens: Vec<usize>,
    /// The number of texts (rows).
    pub len: usize,
    /// The length of every row: the longest text's token count.
    pub seq_len: usize,
}

impl Batch {
    /// Text `i`'s token ids, without padding.
    ///
    /// # Panics
    /// When `i >= self.len`.
    pub fn row(&self, i: usize) -> &[u32] {
        let start = i * self.seq_len;
        &self.ids[start..start + self.lens[i]]
    }

    /// The ids as `i64`, the index type of rtx's `index_select` and `gather`.
    pub fn ids_i64(&self) -> Vec<i64> {
        self.ids.iter().map(|&x| i64::from(x)).collect()
    }

    /// The type ids as `i64`.
    pub fn type_ids_i64(&self) -> Vec<i64> {
        self.type_ids.iter().map(|&x| i64::from(x)).collect()
    }

    /// The mask as `f32` (1.0 on tokens, 0.0 on padding), for masked means and attention.
    pub fn mask_f32(&self) -> Vec<f32> {
        self.mask.iter().map(|&x| x as f32).collect()
    }
}

impl Tokenizer {
    /// Reads a `tokenizer.json` (Hugging Face's format). Its own truncation length, if it
    /// sets one, becomes [`Tokenizer::max_len`]; its own padding rule is replaced by
    /// padding each batch to its longest text, with its pad id (or the id of `[PAD]`,
    /// `<pad>` or `<|pad|>`, else 0).
    ///
    /// # Errors
    /// [`Error::Data`] naming the file when it cannot be read or is not a tokenizer.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Tokenizer> {
        let path = path.as_ref();
        let inner = tokenizers::Tokenizer::from_file(path).map_err(|e| Error::Data {
            path: path.display().to_string(),
            msg: format!("cannot be read as a tokenizer.json: {e}"),
        })?;
        let max_len = inner.get_truncation().map(|t| t.max_length);
        let pad = inner.get_padding().map(|p| p.pad_id).or_else(|| {
            ["[PAD]", "<pad>", "<|pad|>"]
                .iter()
                .find_map(|t| inner.token_to_id(t))
        });
        let specials = SpecialTokens {
            pad,
            ..SpecialTokens::default()
        };
        Tokenizer::new(inner, path.display().to_string(), max_len, specials)
    }

    /// Wraps a configured `tokenizers::Tokenizer`: sets batch padding to the longest text with
    /// the pad id (`specials.pad`, else `specials.eos`, else 0) and truncation to `max_len`.
    fn new(
        mut inner: tokenizers::Tokenizer,
        source: String,
        max_len: Option<usize>,
        specials: SpecialTokens,
    ) -> Result<Tokenizer> {
        let pad_id = specials.pad.or(specials.eos).unwrap_or(0);
        let pad_token = inner.id_to_token(pad_id).unwrap_or_default();
        inner.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            direction: PaddingDirection::Right,
            pad_to_multiple_of: None,
            pad_id,
            pad_type_id: 0,
            pad_token,
        }));
        let mut tok = Tokenizer {
            inner,
            source,
            max_len: None,
            pad_id,
            specials,
        };
        tok.set_max_len(max_len)?;
        Ok(tok)
    }

    /// This tokenizer truncating every text to `max_len` tokens (special tokens included), or
    /// never with `None`. sentence-transformers' all-MiniLM-L6-v2 truncates at 256.
    ///
    /// # Panics
    /// As [`Tokenizer::try_with_max_len`] errs.
    pub fn with_max_len(self, max_len: Option<usize>) -> Tokenizer {
        self.try_with_max_len(max_len)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Tokenizer::with_max_len`], returning an error instead of panicking.
    ///
    /// # Errors
    /// [`Error::BadArgument`] when `max_len` leaves no room for a text's own tokens beside
    /// the special tokens the tokenizer adds (2 for BERT's `[CLS]` and `[SEP]`).
    pub fn try_with_max_len(mut self, max_len: Option<usize>) -> Result<Tokenizer> {
        self.set_max_len(max_len)?;
        Ok(self)
    }

    fn set_max_len(&mut self, max_len: Option<usize>) -> Result<()> {
        if let Some(max_length) = max_len {
            // The special tokens a single text gets: what an empty text encodes to.
            let added = self.inner.get_post_processor().map_or(0, |p| {
                use tokenizers::PostProcessor;
                p.added_tokens(false)
            });
            if max_length <= added {
                return Err(Error::BadArgument {
                    op: "Tokenizer::with_max_len",
                    msg: format!(
                        "max_len {max_length} leaves no room for text beside the {added} \
                         special tokens {} adds",
                        self.source
                    ),
                });
            }
        }
        let params = max_len.map(|max_length| TruncationParams {
            direction: TruncationDirection::Right,
            max_length,
            strategy: TruncationStrategy::LongestFirst,
            stride: 0,
        });
        if let Err(e) = self.inner.with_truncation(params) {
            return Err(self.error(format!("truncation to {max_len:?} tokens: {e}")));
        }
        self.max_len = max_len;
        Ok(())
    }

    /// The truncation length, if any.
    pub fn max_len(&self) -> Option<usize> {
        self.max_len
    }

    /// The id that pads a [`Batch`].
    pub fn pad_id(&self) -> u32 {
        self.pad_id
    }

    /// The special tokens the vocabulary names.
    pub fn specials(&self) -> SpecialTokens {
        self.specials
    }

    /// The number of tokens, added (special) tokens included.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// The id of a token, spelled as the vocabulary spells it (`[CLS]`, `<|im_start|>`, and
    /// for byte-level vocabularies `Ġthe` for " the").
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// The token of an id, spelled as the vocabulary spells it.
    pub fn id_to_token(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)
    }

    /// The underlying `tokenizers::Tokenizer`, for what this type does not wrap (offsets,
    /// pairs of texts).
    pub fn hf(&self) -> &tokenizers::Tokenizer {
        &self.inner
    }

    /// One text's token ids, with the tokenizer's special tokens, truncated to
    /// [`Tokenizer::max_len`]. Special tokens written in the text (`<|im_start|>`, `[SEP]`)
    /// are matched whole.
    ///
    /// # Errors
    /// [`Error::Data`] naming the tokenizer's file when `tokenizers` fails.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let enc = self
            .inner
            .encode(text, true)
            .map_err(|e| self.error(format!("encoding {:?} failed: {e}", preview(text))))?;
        Ok(enc.get_ids().to_vec())
    }

    /// Several texts as one [`Batch`]: each encoded as by [`Tokenizer::encode`], then padded
    /// on the right to the longest. An empty slice gives an empty batch.
    ///
    /// # Errors
    /// As for [`Tokenizer::encode`].
    pub fn encode_batch<S: AsRef<str>>(&self, texts: &[S]) -> Result<Batch> {
        let inputs: Vec<&str> = texts.iter().map(AsRef::as_ref).collect();
        let encodings = self.inner.encode_batch(inputs, true).map_err(|e| {
            self.error(format!(
                "encoding a batch of {} texts failed: {e}",
                texts.len()
            ))
        })?;
        let seq_len = encodings.first().map_or(0, |e| e.get_ids().len());
        let mut batch = Batch {
            len: encodings.len(),
            seq_len,
            ..Batch::default()
        };
        for e in &encodings {
            debug_assert_eq!(e.get_ids().len(), seq_len, "padded to the longest");
            batch.ids.extend_from_slice(e.get_ids());
            batch.mask.extend_from_slice(e.get_attention_mask());
            batch.type_ids.extend_from_slice(e.get_type_ids());
            batch
                .lens
                .push(e.get_attention_mask().iter().filter(|&&m| m == 1).count());
        }
        Ok(batch)
    }

    /// The text of token ids, leaving out special tokens when `skip_special` is set (as
    /// `transformers`' `decode(ids, skip_special_tokens=True)` does).
    ///
    /// # Errors
    /// [`Error::Data`] naming the tokenizer's file when `tokenizers` fails (an id outside the
    /// vocabulary is left out, not an error).
    pub fn decode(&self, ids: &[u32], skip_special: bool) -> Result<String> {
        self.inner
            .decode(ids, skip_special)
            .map_err(|e| self.error(format!("decoding {} ids failed: {e}", ids.len())))
    }

    /// An error about this tokenizer, naming its file.
    fn error(&self, msg: String) -> Error {
        Error::Data {
            path: self.source.clone(),
            msg,
        }
    }
}

/// The start of a text, for messages.
fn preview(text: &str) -> String {
    let mut p: String = text.chars().take(40).collect();
    if p.len() < text.len() {
        p.push_str("...");
    }
    p
}
