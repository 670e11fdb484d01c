//! GGUF files and quantized tensors against the `gguf` Python package (0.19.0): the fixture
//! written by `tests/fixtures/gguf_quants.py` reads back with every metadata value and tensor
//! entry, and every ggml type dequantizes on the CPU bit for bit as `gguf.quants.dequantize`
//! does (the GPU is held to the same values in `tests/devices/quant.rs`). Corrupt headers,
//! GGUF and safetensors alike, give errors and never panics (property tests, cases capped by
//! `PROPTEST_CASES`).

use proptest::prelude::*;
use rtx::io::{Checkpoint, Gguf, GgufValue};
use rtx::prelude::*;
use rtx::quant::{GgmlType, QTensor};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// The tensors of the fixture and their types, in file order.
const TENSORS: [(&str, GgmlType, [usize; 2]); 11] = [
    ("f32", GgmlType::F32, [3, 64]),
    ("f16", GgmlType::F16, [3, 64]),
    ("bf16", GgmlType::BF16, [3, 64]),
    ("q4_0", GgmlType::Q4_0, [4, 64]),
    ("q4_1", GgmlType::Q4_1, [4, 64]),
    ("q5_0", GgmlType::Q5_0, [4, 64]),
    ("q5_1", GgmlType::Q5_1, [4, 64]),
    ("q8_0", GgmlType::Q8_0, [4, 64]),
    ("q4_k", GgmlType::Q4_K, [4, 512]),
    ("q5_k", GgmlType::Q5_K, [4, 512]),
    ("q6_k", GgmlType::Q6_K, [4, 512]),
];

/// `gguf.quants.dequantize` of the fixture's tensor `name`.
fn expected(name: &str) -> Tensor<(usize, usize)> {
    let ck = Checkpoint::open(fixture("gguf_quants_expected.safetensors")).unwrap();
    ck.tensor(name, Device::Cpu).unwrap()
}

/// Asserts `got` is `want` bit for bit.
#[track_caller]
fn same_bits(what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(
            g.to_bits(),
            w.to_bits(),
            "{what}, element {i}: got {g:e}, want {w:e}"
        );
    }
}

#[test]
fn metadata_of_every_value_type_reads_back() {
    for (file, version) in [("gguf_quants.gguf", 3), ("gguf_quants_v2.gguf", 2)] {
        let g = Gguf::open(fixture(file)).unwrap();
        assert_eq!(g.version(), version);
        assert_eq!(g.alignment(), 32);
        let m = g.metadata();
        assert_eq!(g.get_str("general.architecture").unwrap(), "tiny");
        assert_eq!(m["test.u8"], GgufValue::U8(200));
        assert_eq!(m["test.i8"], GgufValue::I8(-100));
        assert_eq!(m["test.u16"], GgufValue::U16(60000));
        assert_eq!(m["test.i16"], GgufValue::I16(-30000));
        assert_eq!(g.get_u32("test.u32").unwrap(), 4_000_000_000);
        assert_eq!(g.get_i32("test.i32").unwrap(), -2_000_000_000);
        assert_eq!(g.get_f32("test.f32").unwrap(), 0.1f32);
        assert!(g.get_bool("test.bool").unwrap());
        assert_eq!(g.get_str("test.string").unwrap(), "héllo, GGUF");
        assert_eq!(g.get_u64("test.u64").unwrap(), (1 << 63) + 5);
        assert_eq!(m["test.i64"], GgufValue::I64(-(1 << 62)));
        assert_eq!(m["test.f64"], GgufValue::F64(-1.0e300));
        let strings: Vec<&str> = g
            .get_array("test.strings")
            .unwrap()
            .iter()
            .filter_map(GgufValue::as_str)
            .collect();
        assert_eq!(strings, ["a", "bb", ""]);
        let floats = g.get_array("test.floats").unwrap();
        assert_eq!(floats, [GgufValue::F32(0.5), GgufValue::F32(-1.25)]);
        let nested = g.get_array("test.nested").unwrap();
        assert_eq!(
            nested,
            [
                GgufValue::Array(vec![GgufValue::I32(1), GgufValue::I32(2)]),
                GgufValue::Array(vec![GgufValue::I32(3)]),
            ]
        );
        let u64s = g.get_array("test.u64s").unwrap();
        assert_eq!(u64s, [GgufValue::U64(1), GgufValue::U64(1 << 40)]);
        let e = g.get_u32("test.string").unwrap_err().to_string();
        assert!(
            e.contains(file) && e.contains("`test.string`: expected"),
            "{e}"
        );
    }
}

#[test]
fn the_directory_lists_every_tensor_with_row_major_dims() {
    let g = Gguf::open(fixture("gguf_quants.gguf")).unwrap();
    let names: Vec<&str> = g.tensors().iter().map(|t| t.name()).collect();
    assert_eq!(names, TENSORS.map(|t| t.0));
    for (name, ty, dims) in TENSORS {
        let t = g.tensor_info(name).unwrap();
        assert_eq!(t.dims(), dims, "{name}");
        assert_eq!(t.ggml_dims(), [dims[1], dims[0]], "{name}");
        assert_eq!(t.ggml_type().unwrap(), ty, "{name}");
        assert_eq!(t.type_name(), ty.name());
        assert_eq!(t.size_bytes(), ty.bytes_for(dims[0] * dims[1]).unwrap());
        assert_eq!(t.offset() % 32, 0);
        assert_eq!(g.tensor_bytes(name).unwrap().len(), t.size_bytes());
    }
}

#[test]
fn every_type_dequantizes_bitwise_as_gguf_does_on_the_cpu() {
    for file in ["gguf_quants.gguf", "gguf_quants_v2.gguf"] {
        let g = Gguf::open(fixture(file)).unwrap();
        for (name, ty, dims) in TENSORS {
            let q = g.tensor(name, Device::Cpu).unwrap();
            assert_eq!((q.dims(), q.ggml_type()), (&dims[..], ty));
            assert_eq!(q.to_bytes(), g.tensor_bytes(name).unwrap());
            let got: Tensor<(usize, usize)> = q.dequantize().unwrap();
            assert_eq!(got.dims(), dims);
            same_bits(
                &format!("{file} {name}"),
                &got.to_vec(),
                &expected(name).to_vec(),
            );
        }
    }
}

#[test]
fn other_float_types_are_the_f32_values_rounded_once() {
    let g = Gguf::open(fixture("gguf_quants.gguf")).unwrap();
    let q = g.tensor("q6_k", Device::Cpu).unwrap();
    let want = expected("q6_k");
    let h: Tensor<(usize, Const<512>), f16> = q.dequantize().unwrap();
    assert_eq!(h.to_vec(), want.cast::<f16>().to_vec());
    let d: Tensor<(Dyn<'R'>, usize), f64> = q.dequantize().unwrap();
    assert_eq!(d.to_vec(), want.cast::<f64>().to_vec());
    let e = q
        .dequantize::<Rank2<4, 256>, f32>()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("[4, 512] (Q6_K)") && e.contains("[4, 256]"),
        "{e}"
    );
    let e = q.dequantize::<(usize,), f32>().unwrap_err().to_string();
    assert!(e.contains("[4, 512] (Q6_K) vs [_]"), "{e}");
}

#[test]
fn qtensors_check_their_bytes_and_move_between_devices() {
    let e = QTensor::from_bytes(&[0; 34], &[2, 16], GgmlType::Q8_0, Device::Cpu).unwrap_err();
    assert!(e.to_string().contains("rows of 16 elements"), "{e}");
    let e = QTensor::from_bytes(&[0; 33], &[32], GgmlType::Q8_0, Device::Cpu).unwrap_err();
    assert!(
        e.to_string()
            .contains("33 bytes given, but [32] of Q8_0 take 34"),
        "{e}"
    );
    let g = Gguf::open(fixture("gguf_quants.gguf")).unwrap();
    let q = g.tensor("q5_1", Device::Cpu).unwrap();
    let back = q.to_device(Device::Cpu).unwrap();
    assert_eq!(back.to_bytes(), q.to_bytes());
    assert_eq!(back.device(), Device::Cpu);
}

#[test]
fn the_gpu_gives_the_same_bits_where_there_is_one() {
    if !rtx::cuda::is_available() {
        println!("skipped: no CUDA device: the CUDA runtime reports no usable GPU");
        return;
    }
    let g = Gguf::open(fixture("gguf_quants.gguf")).unwrap();
    for (name, ..) in TENSORS {
        let q = g.tensor(name, Device::Cuda(0)).unwrap();
        let got: Tensor<(usize, usize)> = q.dequantize().unwrap();
        same_bits(
            &format!("{name} on cuda:0"),
            &got.to_vec(),
            &expected(name).to_vec(),
        );
    }
}

/// A temporary file for one property case.
fn temp(tag: &str, bytes: &[u8]) -> PathBuf {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("rtx-gguf-prop-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{tag}-{n}"));
    std::fs::write(&path, bytes).unwrap();
    path
}

/// A corruption of a file whose header is its first `header` bytes.
#[derive(Clone, Debug)]
enum Mutation {
    /// XOR these bytes into the header at these positions.
    Flip(Vec<(usize, u8)>),
    /// Overwrite header bytes.
    Set(Vec<(usize, u8)>),
    /// Cut the file after this many bytes (a fraction of its length, in 1/1000).
    Truncate(usize),
    /// Write a large little-endian u64 at a position of the header.
    Huge(usize, u64),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let huge = prop_oneof![
        Just(u64::MAX),
        Just(1u64 << 60),
        Just(1u64 << 32),
        Just(i64::MAX as u64),
        Just(u32::MAX as u64),
        any::<u64>(),
    ];
    prop_oneof![
        prop::collection::vec((any::<usize>(), 1u8..), 1..4).prop_map(Mutation::Flip),
        prop::collection::vec((any::<usize>(), any::<u8>()), 1..4).prop_map(Mutation::Set),
        (0usize..1000).prop_map(Mutation::Truncate),
        (any::<usize>(), huge).prop_map(|(at, v)| Mutation::Huge(at, v)),
    ]
}

fn apply(bytes: &[u8], header: usize, m: &Mutation) -> Vec<u8> {
    let mut out = bytes.to_vec();
    match m {
        Mutation::Flip(v) => v.iter().for_each(|&(at, x)| out[at % header] ^= x),
        Mutation::Set(v) => v.iter().for_each(|&(at, x)| out[at % header] = x),
        Mutation::Truncate(k) => out.truncate(bytes.len() * k / 1000),
        Mutation::Huge(at, v) => {
            let at = at % (header - 8);
            out[at..at + 8].copy_from_slice(&v.to_le_bytes());
        }
    }
    out
}

/// Dequantizes `q` at its own rank, for any rank a GGUF tensor may have.
fn dequantize_any(q: &QTensor) -> rtx::Result<Vec<f32>> {
    Ok(match q.dims().len() {
        0 => q.dequantize::<(), f32>()?.to_vec(),
        1 => q.dequantize::<(usize,), f32>()?.to_vec(),
        2 => q.dequantize::<(usize, usize), f32>()?.to_vec(),
        3 => q.dequantize::<(usize, usize, usize), f32>()?.to_vec(),
        _ => q
            .dequantize::<(usize, usize, usize, usize), f32>()?
            .to_vec(),
    })
}

/// Caps the cases at 64 (`PROPTEST_CASES` may lower it): each case writes and opens a file.
fn file_cases() -> ProptestConfig {
    ProptestConfig {
        cases: ProptestConfig::default().cases.min(64),
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(file_cases())]

    /// A mutated GGUF header opens or fails with an error naming the file; whatever opens
    /// lies inside the file, and every tensor reads and dequantizes or fails, never panics.
    #[test]
    fn corrupt_gguf_headers_never_panic(m in mutation()) {
        let source = fixture("gguf_quants.gguf");
        let bytes = std::fs::read(&source).unwrap();
        let header = Gguf::open(&source).unwrap().data_offset();
        let path = temp("g", &apply(&bytes, header, &m));
        match Gguf::open(&path) {
            Err(e) => {
                let msg = e.to_string();
                prop_assert!(msg.contains(&*path.to_string_lossy()), "{}", msg);
            }
            Ok(g) => {
                let data = g.file_len() - g.data_offset();
                for t in g.tensors() {
                    prop_assert!(t.offset() as usize + t.size_bytes() <= data, "{:?}", t);
                    prop_assert_eq!(t.offset() % g.alignment() as u64, 0);
                    if let Ok(q) = g.tensor(t.name(), Device::Cpu) {
                        prop_assert_eq!(q.to_bytes().len(), t.size_bytes());
                        let v = dequantize_any(&q);
                        prop_assert_eq!(v.map(|v| v.len()).unwrap_or(t.numel()), t.numel());
                    }
                }
            }
        }
        std::fs::remove_file(&path).ok();
    }

    /// A mutated safetensors header written by rtx's own `save` loads through the checkpoint
    /// path or fails with an error, never panics; what loads has the model's shapes.
    #[test]
    fn corrupt_safetensors_headers_never_panic(m in mutation()) {
        let model = Linear::<4, 3>::new(Device::Cpu, 0);
        let clean = temp("s", &[]);
        model.save(&clean).unwrap();
        let bytes = std::fs::read(&clean).unwrap();
        let header = 8 + u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let path = temp("s", &apply(&bytes, header, &m));
        let mut copy = Linear::<4, 3>::new(Device::Cpu, 1);
        match copy.load(&path) {
            Err(e) => {
                let msg = e.to_string();
                prop_assert!(msg.contains(&*path.to_string_lossy()), "{}", msg);
            }
            Ok(()) => {
                prop_assert_eq!(copy.weight.dims(), &[3, 4]);
                prop_assert_eq!(copy.bias.as_ref().map(|b| b.dims().to_vec()), Some(vec![3]));
            }
        }
        if let Ok(ck) = Checkpoint::open(&path) {
            let names: Vec<String> = ck.names().map(String::from).collect();
            for name in names {
                let _ = ck.tensor::<(usize, usize), f32>(&name, Device::Cpu);
                let _ = ck.tensor::<(usize,), f32>(&name, Device::Cpu);
            }
        }
        std::fs::remove_file(&path).ok();
        std::fs::remove_file(&clean).ok();
    }
}

/// The book's tour of a GGUF file (book/src/pretrained-models.md).
#[test]
fn a_tour_of_a_gguf_file() -> rtx::Result<()> {
    // ANCHOR: tour
    let gguf = Gguf::open(fixture("gguf_quants.gguf"))?;
    let arch = gguf.get_str("general.architecture")?;
    println!(
        "GGUF v{}, `{arch}`, {} tensors",
        gguf.version(),
        gguf.tensors().len()
    );
    let info = gguf.tensor_info("q4_k")?;
    println!(
        "`{}`: {} {:?}, {} bytes",
        info.name(),
        info.type_name(),
        info.dims(),
        info.size_bytes()
    );
    // The blocks stay quantized, on the device, until values are asked for.
    let q: QTensor = gguf.tensor("q4_k", Device::Cpu)?;
    let w: Tensor<(usize, Const<512>)> = q.dequantize()?;
    // ANCHOR_END: tour
    assert_eq!(arch, "tiny");
    assert_eq!(w.dims(), &[4, 512]);
    assert_eq!(info.size_bytes(), 4 * 2 * 144);
    Ok(())
}
