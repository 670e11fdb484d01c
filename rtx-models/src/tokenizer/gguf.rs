//! The byte-level BPE tokenizer stored in a GGUF file's metadata (the `tokenizer.ggml.*` keys
//! llama.cpp writes for `tokenizer.ggml.model` = "gpt2"), rebuilt as a `tokenizers`
//! tokenizer.
//!
//! Invariant: text is split by the regexes llama.cpp applies for the file's pre-tokenizer
//! type (`tokenizer.ggml.pre`), one after another, each keeping both what it matches and
//! what lies between; each piece is mapped to GPT-2's byte alphabet and merged by the file's
//! merges in rank order; control tokens are matched whole and left out when decoding with
//! `skip_special`. A pre-tokenizer type not listed in [`PRE_TYPES`] is an error naming it,
//! never a silent fallback to another split.
//!
//! The regexes are llama.cpp's (`llm_tokenizer_bpe` in `llama-vocab.cpp`) written in the
//! syntax of the Hugging Face `tokenizer.json` they come from, which fancy-regex runs.

use super::{SpecialTokens, Tokenizer};
use rtx::io::{Gguf, GgufValue};
use rtx::{Error, Result};
use std::collections::HashMap;
use std::path::Path;
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::{BPE, Vocab};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::processors::PostProcessorWrapper;
use tokenizers::{AddedToken, PreTokenizerWrapper, SplitDelimiterBehavior};

/// GPT-2's split: contractions, letters, numbers, other symbols, each with at most one
/// leading space, and whitespace runs that leave the last space to the next word.
const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

/// Llama 3's split: case-insensitive contractions, a letter run with one leading non-letter,
/// numbers of up to 3 digits, symbols with their trailing newlines, newline runs.
const LLAMA3: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Qwen2's split: Llama 3's with single digits.
const QWEN2: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// A pre-tokenizer type as llama.cpp knows it.
pub(crate) struct PreType {
    /// The `tokenizer.ggml.pre` values that select it.
    names: &'static [&'static str],
    /// The regexes, applied in order to the pieces the previous one left.
    splits: &'static [&'static str],
    /// Whether a piece that is itself a token is taken whole before any merge (Llama 3).
    ignore_merges: bool,
    /// Whether a BOS is added when the file does not say (`tokenizer.ggml.add_bos_token`).
    add_bos: bool,
}

/// The pre-tokenizer types supported, by llama.cpp's name for them.
pub(crate) const PRE_TYPES: &[PreType] = &[
    PreType {
        // llama.cpp's LLAMA_VOCAB_PRE_TYPE_DEFAULT, also taken when the key is absent.
        names: &["default"],
        splits: &[r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", "[0-9][0-9][0-9]"],
        ignore_merges: false,
        add_bos: false,
    },
    PreType {
        names: &["gpt-2", "gpt2", "phi-2", "mpt", "olmo", "jais"],
        splits: &[GPT2],
        ignore_merges: false,
        add_bos: false,
    },
    PreType {
        // Digits one by one, then GPT-2's split (SmolLM's and StarCoder's tokenizer.json:
        // `Digits(individual_digits)` before `ByteLevel`).
        names: &[
            "smollm",
            "starcoder",
            "refact",
            "command-r",
            "codeshell",
            "exaone",
            "minerva-7b",
        ],
        splits: &[r"\p{N}", GPT2],
        ignore_merges: false,
        add_bos: false,
    },
    PreType {
        names: &[
            "llama3",
            "llama-v3",
            "llama-bpe",
            "falcon3",
            "falcon-h1",
            "pixtral",
            "midm-2.0",
            "lfm2",
        ],
        splits: &[LLAMA3],
        ignore_merges: true,
        add_bos: true,
    },
    PreType {
        names: &["dbrx", "smaug-bpe"],
        splits: &[LLAMA3],
        ignore_merges: false,
        add_bos: false,
    },
    PreType {
        names: &["qwen2", "deepseek-r1-qwen", "kormo", "megrez", "stablelm2"],
        splits: &[QWEN2],
        ignore_merges: false,
        add_bos: false,
    },
];

/// `tokenizer.ggml.token_type` values (llama.cpp's `llama_token_type`).
const CONTROL: i32 = 3;
const USER_DEFINED: i32 = 4;

/// The tokenizer part of a GGUF file's metadata, read out.
#[derive(Clone, Debug, Default)]
pub(crate) struct GgufVocab {
    /// `tokenizer.ggml.model`: "gpt2" for byte-level BPE.
    pub model: String,
    /// `tokenizer.ggml.pre`, if present.
    pub pre: Option<String>,
    /// `tokenizer.ggml.tokens`, by id.
    pub tokens: Vec<String>,
    /// `tokenizer.ggml.token_type`, by id (empty when absent: every token normal).
    pub token_types: Vec<i32>,
    /// `tokenizer.ggml.merges`: "left right", best first.
    pub merges: Vec<String>,
    /// `tokenizer.ggml.{bos,eos,unknown,padding}_token_id`.
    pub specials: SpecialTokens,
    /// `tokenizer.ggml.add_bos_token`, if present.
    pub add_bos: Option<bool>,
    /// `tokenizer.ggml.add_eos_token`, if present.
    pub add_eos: Option<bool>,
}

impl Tokenizer {
    /// The byte-level BPE tokenizer in a GGUF file's metadata (`tokenizer.ggml.model` =
    /// "gpt2"), as llama.cpp runs it: split by the regexes of the file's pre-tokenizer type
    /// (`tokenizer.ggml.pre`: "smollm", "gpt-2", "llama-bpe", "qwen2", "default", ... with
    /// "default" when the key is absent), merged by `tokenizer.ggml.merges`, control tokens
    /// (`<|im_start|>`) matched whole, a BOS added when `tokenizer.ggml.add_bos_token` says
    /// so. No truncation; batches pad with `tokenizer.ggml.padding_token_id`.
    ///
    /// ```no_run
    /// use rtx_models::tokenizer::Tokenizer;
    /// let gguf = rtx::io::Gguf::open(rtx_models::pretrained::smollm2_135m_instruct()?)?;
    /// let tok = Tokenizer::from_gguf(&gguf)?;
    /// assert_eq!(tok.encode("Hello world! 123")?, [19556, 905, 17, 216, 33, 34, 35]);
    /// # Ok::<(), rtx::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Gguf`] naming the file when a key is missing or of the wrong type, the model
    /// is not "gpt2", the pre-tokenizer type is not one llama.cpp's list this crate knows
    /// (the message names it and the known ones), a merge names a token the vocabulary lacks,
    /// or a special token id is outside the vocabulary.
    pub fn from_gguf(gguf: &Gguf) -> Result<Tokenizer> {
        build(read_vocab(gguf)?, gguf.path())
    }

    /// [`Tokenizer::from_gguf`] for the GGUF file at `path`.
    ///
    /// # Errors
    /// Those of [`Gguf::open`] and [`Tokenizer::from_gguf`].
    pub fn from_gguf_file(path: impl AsRef<Path>) -> Result<Tokenizer> {
        Tokenizer::from_gguf(&Gguf::open(path)?)
    }
}

/// Reads the `tokenizer.ggml.*` keys.
fn read_vocab(gguf: &Gguf) -> Result<GgufVocab> {
    let strings = |key: &str| -> Result<Vec<String>> {
        gguf.get_array(key)?
            .iter()
            .enumerate()
            .map(|(i, v)| {
                v.as_str().map(str::to_owned).ok_or_else(|| {
                    data(
                        gguf.path(),
                        format!("metadata key `{key}`: element {i} is {v}, not a string"),
                    )
                })
            })
            .collect()
    };
    let meta = gguf.metadata();
    let optional = |key: &str, pick: fn(&GgufValue) -> Option<u32>| -> Result<Option<u32>> {
        meta.get(key)
            .map(|v| {
                pick(v).ok_or_else(|| {
                    data(
                        gguf.path(),
                        format!("metadata key `{key}`: expected an unsigned integer, found {v}"),
                    )
                })
            })
            .transpose()
    };
    let token_types = match meta.get("tokenizer.ggml.token_type") {
        None => Vec::new(),
        Some(_) => gguf
            .get_array("tokenizer.ggml.token_type")?
            .iter()
            .map(|v| v.as_i32().or_else(|| v.as_u32().map(|u| u as i32)))
            .collect::<Option<Vec<i32>>>()
            .ok_or_else(|| {
                data(
                    gguf.path(),
                    "metadata key `tokenizer.ggml.token_type`: not an array of integers".into(),
                )
            })?,
    };
    let flag = |key: &str| -> Result<Option<bool>> {
        meta.get(key).map(|_| gguf.get_bool(key)).transpose()
    };
    Ok(GgufVocab {
        model: gguf.get_str("tokenizer.ggml.model")?.to_owned(),
        pre: match meta.get("tokenizer.ggml.pre") {
            None => None,
            Some(_) => Some(gguf.get_str("tokenizer.ggml.pre")?.to_owned()),
        },
        tokens: strings("tokenizer.ggml.tokens")?,
        token_types,
        merges: strings("tokenizer.ggml.merges")?,
        specials: SpecialTokens {
            bos: optional("tokenizer.ggml.bos_token_id", GgufValue::as_u32)?,
            eos: optional("tokenizer.ggml.eos_token_id", GgufValue::as_u32)?,
            unk: optional("tokenizer.ggml.unknown_token_id", GgufValue::as_u32)?,
            pad: optional("tokenizer.ggml.padding_token_id", GgufValue::as_u32)?,
        },
        add_bos: flag("tokenizer.ggml.add_bos_token")?,
        add_eos: flag("tokenizer.ggml.add_eos_token")?,
    })
}

/// An error about the GGUF file at `path`.
fn data(path: &Path, msg: String) -> Error {
    Error::Gguf {
        file: path.to_path_buf(),
        msg,
    }
}

/// GPT-2's byte alphabet: each byte as the printable character that stands for it in
/// byte-level vocabularies (printable Latin-1 bytes as themselves, the others shifted to
/// 256 and up, in byte order: the space is `Ġ`, the newline `Ċ`).
pub(crate) fn byte_alphabet() -> [char; 256] {
    let printable = |b: u32| (33..=126).contains(&b) || (161..=172).contains(&b) || b >= 174;
    let mut table = ['\0'; 256];
    let mut shifted = 256;
    for b in 0..256u32 {
        table[b as usize] = if printable(b) {
            char::from_u32(b).expect("below 256")
        } else {
            shifted += 1;
            char::from_u32(shifted - 1).expect("below 512")
        };
    }
    table
}

/// The tokenizer the vocabulary describes; errors name `path`.
pub(crate) fn build(v: GgufVocab, path: &Path) -> Result<Tokenizer> {
    if v.model != "gpt2" {
        return Err(data(
            path,
            format!(
                "tokenizer.ggml.model is {:?}; only byte-level BPE (\"gpt2\") is supported",
                v.model
            ),
        ));
    }
    let pre_name = v.pre.as_deref().unwrap_or("default");
    let Some(pre) = PRE_TYPES.iter().find(|p| p.names.contains(&pre_name)) else {
        let known: Vec<&str> = PRE_TYPES
            .iter()
            .flat_map(|p| p.names.iter().copied())
            .collect();
        return Err(data(
            path,
            format!(
                "tokenizer.ggml.pre is {pre_name:?}, a pre-tokenizer type this tokenizer does \
                 not know (known: {})",
                known.join(", ")
            ),
        ));
    };
    let n = v.tokens.len();
    for (key, id) in [
        ("bos_token_id", v.specials.bos),
        ("eos_token_id", v.specials.eos),
        ("unknown_token_id", v.specials.unk),
        ("padding_token_id", v.specials.pad),
    ] {
        if let Some(id) = id.filter(|&id| id as usize >= n) {
            return Err(data(
                path,
                format!("tokenizer.ggml.{key} is {id}, outside the {n} tokens"),
            ));
        }
    }

    // The vocabulary in the byte alphabet. A token written in other characters (a raw space,
    // say) is spelled as the bytes of its UTF-8, as transformers' GGUF loader does.
    let alphabet = byte_alphabet();
    let in_alphabet = |t: &str| t.chars().all(|c| alphabet.contains(&c));
    let mut vocab: HashMap<String, u32> = HashMap::with_capacity(n);
    for (id, token) in v.tokens.iter().enumerate() {
        let spelled = if in_alphabet(token) {
            token.clone()
        } else {
            token.bytes().map(|b| alphabet[b as usize]).collect()
        };
        vocab.insert(spelled, id as u32);
    }
    let merges = v
        .merges
        .iter()
        .enumerate()
        .map(|(i, m)| {
            // The separator is the first space after the first character (llama.cpp's rule).
            let first = m.chars().next().map_or(0, char::len_utf8);
            match m[first..].find(' ') {
                Some(at) => Ok((m[..first + at].to_owned(), m[first + at + 1..].to_owned())),
                None => Err(data(
                    path,
                    format!("tokenizer.ggml.merges[{i}] is {m:?}, not two tokens and a space"),
                )),
            }
        })
        .collect::<Result<Vec<_>>>()?;
    let bpe = BPE::builder()
        .vocab_and_merges(vocab.into_iter().collect::<Vocab>(), merges)
        .ignore_merges(pre.ignore_merges)
        .build()
        .map_err(|e| data(path, format!("the vocabulary and merges do not fit: {e}")))?;

    let mut splits: Vec<PreTokenizerWrapper> = Vec::new();
    for re in pre.splits {
        let split = Split::new(
            SplitPattern::Regex((*re).to_owned()),
            SplitDelimiterBehavior::Isolated,
            false,
        )
        .map_err(|e| data(path, format!("the {pre_name:?} split regex {re:?}: {e}")))?;
        splits.push(split.into());
    }
    // The pieces are already split: the byte-level step only maps them to the alphabet.
    splits.push(ByteLevel::new(false, false, false).into());

    let mut inner = tokenizers::Tokenizer::new(bpe);
    inner.with_pre_tokenizer(Some(Sequence::new(splits)));
    inner.with_decoder(Some(ByteLevelDecoder::default()));

    // Control tokens are special (matched whole, skipped when decoding); user-defined ones
    // are matched whole but kept. One spelled outside the byte alphabet cannot be one of the
    // vocabulary's own tokens, so it is left out (transformers' loader does the same).
    let kind = |id: usize| v.token_types.get(id).copied();
    let added = |want: i32| -> Vec<AddedToken> {
        v.tokens
            .iter()
            .enumerate()
            .filter(|&(id, t)| kind(id) == Some(want) && in_alphabet(t))
            .map(|(_, t)| AddedToken::from(t.clone(), want == CONTROL).normalized(false))
            .collect()
    };
    inner.add_special_tokens(&added(CONTROL));
    inner.add_tokens(&added(USER_DEFINED));

    let add_bos = v.add_bos.unwrap_or(pre.add_bos);
    let add_eos = v.add_eos.unwrap_or(false);
    if add_bos || add_eos {
        inner.with_post_processor(Some(template(&v, add_bos, add_eos, path)?));
    }
    Tokenizer::new(inner, path.display().to_string(), None, v.specials)
}

/// The post-processor that adds BOS before and EOS after a text, as asked.
fn template(v: &GgufVocab, bos: bool, eos: bool, path: &Path) -> Result<PostProcessorWrapper> {
    // The token of `key` ("bos", "eos"), which must be named when it is to be added.
    let token = |key: &str, id: Option<u32>| -> Result<(String, u32)> {
        let id = id.ok_or_else(|| {
            data(
                path,
                format!("tokenizer.ggml.add_{key}_token is set but {key}_token_id is missing"),
            )
        })?;
        Ok((v.tokens[id as usize].clone(), id))
    };
    let mut ends = Vec::new();
    if bos {
        ends.push((0, token("bos", v.specials.bos)?));
    }
    if eos {
        ends.push((1, token("eos", v.specials.eos)?));
    }
    let sequence = |seq: &str, type_id: u32| {
        let mut pieces = Vec::new();
        for (end, (t, _)) in &ends {
            if *end == 0 {
                pieces.push(serde_json::json!({"SpecialToken": {"id": t, "type_id": type_id}}));
            }
        }
        pieces.push(serde_json::json!({"Sequence": {"id": seq, "type_id": type_id}}));
        for (end, (t, _)) in &ends {
            if *end == 1 {
                pieces.push(serde_json::json!({"SpecialToken": {"id": t, "type_id": type_id}}));
            }
        }
        pieces
    };
    let single = sequence("A", 0);
    let mut pair = single.clone();
    pair.extend(sequence("B", 1));
    let specials: serde_json::Map<String, serde_json::Value> = ends
        .iter()
        .map(|(_, (t, id))| {
            (
                t.clone(),
                serde_json::json!({"id": t, "ids": [id], "tokens": [t]}),
            )
        })
        .collect();
    serde_json::from_value(serde_json::json!({
        "type": "TemplateProcessing",
        "single": single,
        "pair": pair,
        "special_tokens": specials,
    }))
    .map_err(|e| data(path, format!("building the BOS/EOS template: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_byte_alphabet_is_gpt2s() {
        let a = byte_alphabet();
        assert_eq!(a[b' ' as usize], 'Ġ');
        assert_eq!(a[b'\n' as usize], 'Ċ');
        assert_eq!(a[b'a' as usize], 'a');
        assert_eq!(a[0], 'Ā');
        assert_eq!(a[0xad], 'Ń');
        let mut unique = a.to_vec();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), 256);
    }

    /// A tiny byte-level vocabulary: the 256 byte characters, then merged tokens.
    fn tiny(pre: Option<&str>) -> GgufVocab {
        let mut tokens: Vec<String> = vec!["<|endoftext|>".into(), "<|im_start|>".into()];
        tokens.extend(byte_alphabet().iter().map(|c| c.to_string()));
        let merges = ["Ġ t", "h e", "Ġt he", "Ġ Ġ", "1 2"];
        tokens.extend(["Ġt", "he", "Ġthe", "ĠĠ", "12"].map(String::from));
        let mut token_types = vec![1; tokens.len()];
        token_types[0] = CONTROL;
        token_types[1] = CONTROL;
        GgufVocab {
            model: "gpt2".into(),
            pre: pre.map(String::from),
            tokens,
            token_types,
            merges: merges.map(String::from).to_vec(),
            specials: SpecialTokens {
                bos: Some(1),
                eos: Some(0),
                unk: None,
                pad: Some(0),
            },
            add_bos: Some(false),
            add_eos: None,
        }
    }

    fn ids(tok: &Tokenizer, text: &str) -> Vec<String> {
        tok.encode(text)
            .unwrap()
            .iter()
            .map(|&id| tok.id_to_token(id).unwrap())
            .collect()
    }

    #[test]
    fn merges_specials_and_digits_follow_the_pre_type() {
        let path = Path::new("tiny.gguf");
        let smollm = build(tiny(Some("smollm")), path).unwrap();
        assert_eq!(ids(&smollm, " the<|im_start|>"), ["Ġthe", "<|im_start|>"]);
        // smollm isolates digits before any merge; gpt-2 keeps " 12" one piece.
        assert_eq!(ids(&smollm, "  12"), ["ĠĠ", "1", "2"]);
        let gpt2 = build(tiny(Some("gpt-2")), path).unwrap();
        assert_eq!(ids(&gpt2, "  12"), ["Ġ", "Ġ", "12"]);
        assert_eq!(
            smollm
                .decode(&smollm.encode(" the<|im_start|>").unwrap(), true)
                .unwrap(),
            " the"
        );
    }

    #[test]
    fn bos_is_added_when_the_file_says_so() {
        let mut v = tiny(Some("smollm"));
        v.add_bos = Some(true);
        let tok = build(v, Path::new("tiny.gguf")).unwrap();
        assert_eq!(ids(&tok, "he"), ["<|im_start|>", "he"]);
        // llama-bpe adds one by default.
        let mut v = tiny(Some("llama-bpe"));
        v.add_bos = None;
        assert_eq!(
            ids(&build(v, Path::new("t")).unwrap(), "he"),
            ["<|im_start|>", "he"]
        );
    }

    #[test]
    fn an_unknown_pre_type_is_named() {
        let err = build(tiny(Some("klingon")), Path::new("m.gguf"))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(
                "GGUF file m.gguf: tokenizer.ggml.pre is \"klingon\", a pre-tokenizer type"
            ),
            "{err}"
        );
        assert!(err.contains("smollm"), "{err}");
    }

    #[test]
    fn a_merge_outside_the_vocabulary_is_an_error() {
        let mut v = tiny(None);
        v.merges.push("x y".into());
        let err = build(v, Path::new("m.gguf")).unwrap_err().to_string();
        assert!(
            err.contains("the vocabulary and merges do not fit"),
            "{err}"
        );
        let mut v = tiny(None);
        v.merges.push("nospace".into());
        let err = build(v, Path::new("m.gguf")).unwrap_err().to_string();
        assert!(
            err.contains("tokenizer.ggml.merges[5] is \"nospace\""),
            "{err}"
        );
    }
}
