//! Unit tests of the GGUF reader: a valid file reads back, and each defect class gives an
//! error naming the file and the field.

use super::parse::read;
use super::*;

/// A GGUF string.
fn s(x: &str) -> Vec<u8> {
    let mut v = (x.len() as u64).to_le_bytes().to_vec();
    v.extend(x.as_bytes());
    v
}

/// A metadata entry: key, value type, value bytes.
fn kv(key: &str, ty: u32, value: &[u8]) -> Vec<u8> {
    let mut v = s(key);
    v.extend(ty.to_le_bytes());
    v.extend(value);
    v
}

/// A tensor entry: name, dims (innermost first), type id, offset.
fn ti(name: &str, dims: &[u64], ty: u32, offset: u64) -> Vec<u8> {
    let mut v = s(name);
    v.extend((dims.len() as u32).to_le_bytes());
    for d in dims {
        v.extend(d.to_le_bytes());
    }
    v.extend(ty.to_le_bytes());
    v.extend(offset.to_le_bytes());
    v
}

/// A whole file: header, entries, padding to 32, then `data` bytes of data.
fn file(version: u32, kvs: &[Vec<u8>], tensors: &[Vec<u8>], data: usize) -> Vec<u8> {
    let mut v = b"GGUF".to_vec();
    v.extend(version.to_le_bytes());
    v.extend((tensors.len() as u64).to_le_bytes());
    v.extend((kvs.len() as u64).to_le_bytes());
    kvs.iter().for_each(|k| v.extend(k));
    tensors.iter().for_each(|t| v.extend(t));
    v.resize(v.len().next_multiple_of(32), 0);
    v.resize(v.len() + data, 7);
    v
}

fn msg(bytes: &[u8]) -> String {
    match read(Path::new("m.gguf"), bytes) {
        Ok(_) => "ok".to_string(),
        Err(e) => e.to_string(),
    }
}

/// Asserts that `bytes` fails with a message naming the file and containing `want`.
#[track_caller]
fn fails(bytes: &[u8], want: &str) {
    let m = msg(bytes);
    assert!(m.starts_with("GGUF file m.gguf: "), "{m}");
    assert!(m.contains(want), "expected `{want}` in: {m}");
}

fn name_kv() -> Vec<u8> {
    kv("general.name", 8, &s("tiny"))
}

#[test]
fn a_valid_file_reads_back() {
    let arr = {
        let mut v = 4u32.to_le_bytes().to_vec(); // uint32 elements
        v.extend(2u64.to_le_bytes());
        v.extend(5u32.to_le_bytes());
        v.extend(6u32.to_le_bytes());
        v
    };
    let bytes = file(
        3,
        &[name_kv(), kv("a", 9, &arr), kv("b", 7, &[1])],
        &[ti("w", &[32, 2], 8, 0), ti("v", &[4], 0, 96)],
        128,
    );
    let Ok(h) = read(Path::new("m.gguf"), &bytes) else {
        panic!("{}", msg(&bytes));
    };
    assert_eq!(h.version, 3);
    assert_eq!(h.metadata["general.name"], GgufValue::String("tiny".into()));
    assert_eq!(
        h.metadata["a"],
        GgufValue::Array(vec![GgufValue::U32(5), GgufValue::U32(6)])
    );
    assert_eq!(h.metadata["b"], GgufValue::Bool(true));
    assert_eq!(h.tensors[0].dims, vec![2, 32]);
    assert_eq!(h.tensors[0].size, 68);
    assert_eq!(h.tensors[1].size, 16);
    assert_eq!(h.data_start % 32, 0);
    assert_eq!(msg(&file(2, &[name_kv()], &[], 0)), "ok");
}

#[test]
fn the_magic_and_version_are_checked() {
    fails(b"GGML\x03\0\0\0", "not a GGUF file");
    fails(&file(1, &[], &[], 0), "GGUF version 1 is not supported");
    fails(&file(3u32.swap_bytes(), &[], &[], 0), "big-endian");
    fails(&file(4, &[], &[], 0), "GGUF version 4 is not supported");
    fails(b"GGUF\x03\0", "the version: needs 4 bytes at offset 4");
}

#[test]
fn truncation_anywhere_is_an_error() {
    let bytes = file(3, &[name_kv()], &[ti("w", &[32], 8, 0)], 64);
    for len in 0..bytes.len() - 64 + 34 {
        let m = msg(&bytes[..len]);
        assert!(m.starts_with("GGUF file m.gguf: "), "at {len}: {m}");
    }
    fails(
        &bytes[..bytes.len() - 64 + 33],
        "tensor `w`: offset 0 + 34 bytes runs past",
    );
}

#[test]
fn absurd_counts_and_lengths_are_errors() {
    let mut bytes = file(3, &[name_kv()], &[], 0);
    bytes[8..16].copy_from_slice(&(1u64 << 60).to_le_bytes());
    fails(&bytes, "the tensor count says 1152921504606846976");
    let mut bytes = file(3, &[name_kv()], &[], 0);
    bytes[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
    fails(&bytes, "the metadata count says 18446744073709551615");
    let mut big = 8u32.to_le_bytes().to_vec();
    big.extend((1u64 << 60).to_le_bytes());
    fails(
        &file(3, &[kv("k", 8, &(1u64 << 60).to_le_bytes())], &[], 0),
        "metadata key `k`: string length 1152921504606846976",
    );
    fails(
        &file(3, &[kv("k", 9, &big)], &[], 0),
        "metadata key `k`: an array of 1152921504606846976 elements",
    );
    let mut long = 0u32.to_le_bytes().to_vec();
    long.extend((1u64 << 25).to_le_bytes());
    long.resize(long.len() + (1 << 25), 0);
    fails(
        &file(3, &[kv("k", 9, &long)], &[], 0),
        "metadata key `k`: an array of 33554432 elements, more than the 16777216",
    );
    let mut key = file(3, &[name_kv()], &[], 0);
    key[24..32].copy_from_slice(&(1u64 << 60).to_le_bytes());
    fails(&key, "metadata entry 0: the key: string length");
}

#[test]
fn bad_values_are_errors_naming_the_key() {
    fails(
        &file(3, &[kv("k", 13, &[0; 8])], &[], 0),
        "metadata key `k`: unknown value type 13",
    );
    fails(
        &file(3, &[kv("k", 7, &[2])], &[], 0),
        "metadata key `k`: bool byte 2",
    );
    let mut bad_utf8 = 1u64.to_le_bytes().to_vec();
    bad_utf8.push(0xff);
    fails(
        &file(3, &[kv("k", 8, &bad_utf8)], &[], 0),
        "metadata key `k`: the string at offset",
    );
    fails(
        &file(3, &[name_kv(), name_kv()], &[], 0),
        "`general.name` appears twice",
    );
    let mut nested = Vec::new();
    for _ in 0..20 {
        nested.extend(9u32.to_le_bytes());
        nested.extend(1u64.to_le_bytes());
    }
    fails(
        &file(3, &[kv("k", 9, &nested)], &[], 0),
        "metadata key `k`[0][0]",
    );
    fails(
        &file(
            3,
            &[kv("general.alignment", 4, &24u32.to_le_bytes())],
            &[],
            0,
        ),
        "`general.alignment`: expected a uint32 power of two, found uint32 24",
    );
}

#[test]
fn bad_tensor_entries_are_errors_naming_the_tensor() {
    let one = |t: Vec<u8>, data| file(3, &[], &[t], data);
    fails(
        &one(ti("w", &[32], 99, 0), 64),
        "tensor `w`: unknown ggml type id 99",
    );
    fails(
        &one(ti("w", &[33], 8, 0), 64),
        "tensor `w`: its rows of 33 elements are not a whole number of Q8_0 blocks of 32",
    );
    fails(
        &one(ti("w", &[32], 8, 4), 64),
        "tensor `w`: data offset 4 is not a multiple of the alignment 32",
    );
    fails(
        &one(ti("w", &[1 << 32, 1 << 32, 16], 0, 0), 64),
        "tensor `w`: dims",
    );
    fails(&one(ti("w", &[1 << 40, 1 << 30], 0, 0), 64), "overflow");
    fails(
        &one(ti("w", &[1, 1, 1, 1, 1], 0, 0), 64),
        "tensor `w`: 5 dims",
    );
    fails(
        &one(ti("w", &[32], 8, 32), 64),
        "tensor `w`: offset 32 + 34 bytes runs past the end of the data (64 bytes)",
    );
    fails(
        &one(ti("w", &[4], 0, u64::MAX - 31), 64),
        "tensor `w`: offset 18446744073709551584 + 16 bytes",
    );
    let two = file(3, &[], &[ti("a", &[32], 8, 0), ti("b", &[32], 8, 64)], 128);
    assert_eq!(msg(&two), "ok");
    let over = file(3, &[], &[ti("a", &[64], 8, 0), ti("b", &[32], 8, 64)], 128);
    fails(
        &over,
        "tensors `a` and `b` overlap: `a` spans data bytes 0..68 and `b` starts at 64",
    );
    let dup = file(3, &[], &[ti("a", &[32], 8, 0), ti("a", &[32], 8, 64)], 128);
    fails(&dup, "tensor `a` appears twice");
    let mut cut = file(3, &[], &[ti("a", &[4], 0, 0)], 0);
    cut.truncate(cut.len() - 1);
    fails(&cut, "the data section starts at offset");
}

#[test]
fn typed_getters_name_the_key_and_what_was_found() {
    let dir = std::env::temp_dir().join(format!("rtx-gguf-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("g.gguf");
    let bytes = file(
        3,
        &[name_kv(), kv("n", 4, &7u32.to_le_bytes())],
        &[ti("w", &[32], 8, 0)],
        64,
    );
    std::fs::write(&path, &bytes).unwrap();
    let g = Gguf::open(&path).unwrap();
    assert_eq!(g.get_str("general.name").unwrap(), "tiny");
    assert_eq!(g.get_u32("n").unwrap(), 7);
    assert_eq!(g.get_u64("n").unwrap(), 7);
    let e = g.get_str("n").unwrap_err().to_string();
    assert!(
        e.contains("g.gguf: metadata key `n`: expected a string, found uint32 7"),
        "{e}"
    );
    let e = g.get_f32("missing").unwrap_err().to_string();
    assert!(e.contains("metadata key `missing` is missing"), "{e}");
    let e = g.tensor_info("v").unwrap_err().to_string();
    assert!(e.contains("no tensor `v`"), "{e}");
    assert_eq!(g.tensor_bytes("w").unwrap(), &[7; 34][..]);
    assert_eq!(g.tensor_info("w").unwrap().ggml_dims(), vec![32]);
    std::fs::write(&path, b"GGUF").unwrap();
    let e = Gguf::open(&path).unwrap_err().to_string();
    assert!(e.contains("shorter than the 24-byte header"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
