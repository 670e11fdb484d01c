//! Reading and validating a GGUF header: the magic, version, metadata, tensor directory and
//! the layout of the data section. Every read is bounded by the bytes that remain, every
//! count is checked against the bytes it needs before anything is allocated for it, and every
//! error names the file and the field (the key, or the tensor).
//!
//! Invariant: after [`read`] succeeds, every tensor's bytes `data_start + offset ..
//! data_start + offset + size` lie inside the file, start on the alignment, and overlap no
//! other tensor's; its dims' product does not overflow and is a whole number of its type's
//! blocks along the innermost dim.

use super::GgufTensorInfo;
use super::value::GgufValue;
use crate::error::{Error, Result};
use crate::quant::types::{bytes_of, layout_of_id};
use std::collections::BTreeMap;
use std::path::Path;

/// The most dims a ggml tensor has (`GGML_MAX_DIMS`).
const MAX_DIMS: u32 = 4;
/// The deepest nesting of arrays read; deeper is corruption (and would exhaust the stack).
const MAX_DEPTH: usize = 16;
/// The longest metadata array read (16M elements, far above any tokenizer's vocabulary): an
/// element in memory takes up to 32 times its smallest encoding, so a corrupt count over a
/// large file could otherwise ask for many times the file's size.
const MAX_ARRAY: u64 = 1 << 24;
/// The alignment of the data section when the file does not set `general.alignment`.
pub(crate) const DEFAULT_ALIGNMENT: usize = 32;

/// A [`Error::Gguf`] for `file`.
pub(crate) fn error(file: &Path, msg: impl Into<String>) -> Error {
    Error::Gguf {
        file: file.to_path_buf(),
        msg: msg.into(),
    }
}

/// A validated header.
pub(crate) struct Header {
    pub version: u32,
    pub metadata: BTreeMap<String, GgufValue>,
    pub tensors: Vec<GgufTensorInfo>,
    pub alignment: usize,
    /// Where the data section starts in the file (the tensors' offsets count from here).
    pub data_start: usize,
}

/// A reader over the file's bytes that never reads past their end.
struct Cursor<'a> {
    file: &'a Path,
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    /// The next `n` bytes, or an error saying that `what` needs them.
    fn take(&mut self, n: usize, what: &dyn Fn() -> String) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(error(
                self.file,
                format!(
                    "{}: needs {n} bytes at offset {}, but the file ends at {} (truncated?)",
                    what(),
                    self.at,
                    self.bytes.len()
                ),
            ));
        }
        let out = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self, what: &dyn Fn() -> String) -> Result<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N, what)?);
        Ok(a)
    }

    fn u32(&mut self, what: &dyn Fn() -> String) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &dyn Fn() -> String) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A GGUF string: a `u64` length, then that many bytes of UTF-8.
    fn string(&mut self, what: &dyn Fn() -> String) -> Result<String> {
        let len = self.u64(what)?;
        if len > self.remaining() as u64 {
            return Err(error(
                self.file,
                format!(
                    "{}: string length {len} at offset {} runs past the end of the file \
                     ({} bytes remain) (corrupt or truncated)",
                    what(),
                    self.at - 8,
                    self.remaining()
                ),
            ));
        }
        let at = self.at;
        let bytes = self.take(len as usize, what)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_string()),
            Err(e) => Err(error(
                self.file,
                format!(
                    "{}: the string at offset {at} is not UTF-8 ({e}) (corrupt)",
                    what()
                ),
            )),
        }
    }
}

/// The fewest bytes one value of GGUF value type `ty` takes, or `None` for an unknown type.
fn min_size(ty: u32) -> Option<usize> {
    Some(match ty {
        0 | 1 | 7 => 1,
        2 | 3 => 2,
        4..=6 => 4,
        8 | 10..=12 => 8,
        9 => 12,
        _ => return None,
    })
}

/// One value of type `ty` of metadata key `key` (`what` names it for messages).
fn value(
    c: &mut Cursor<'_>,
    ty: u32,
    what: &dyn Fn() -> String,
    depth: usize,
) -> Result<GgufValue> {
    Ok(match ty {
        0 => GgufValue::U8(u8::from_le_bytes(c.array(what)?)),
        1 => GgufValue::I8(i8::from_le_bytes(c.array(what)?)),
        2 => GgufValue::U16(u16::from_le_bytes(c.array(what)?)),
        3 => GgufValue::I16(i16::from_le_bytes(c.array(what)?)),
        4 => GgufValue::U32(u32::from_le_bytes(c.array(what)?)),
        5 => GgufValue::I32(i32::from_le_bytes(c.array(what)?)),
        6 => GgufValue::F32(f32::from_le_bytes(c.array(what)?)),
        7 => match c.array::<1>(what)?[0] {
            0 => GgufValue::Bool(false),
            1 => GgufValue::Bool(true),
            b => {
                return Err(error(
                    c.file,
                    format!(
                        "{}: bool byte {b} at offset {} is neither 0 nor 1 (corrupt)",
                        what(),
                        c.at - 1
                    ),
                ));
            }
        },
        8 => GgufValue::String(c.string(what)?),
        9 => {
            if depth >= MAX_DEPTH {
                return Err(error(
                    c.file,
                    format!(
                        "{}: arrays nested more than {MAX_DEPTH} deep (corrupt)",
                        what()
                    ),
                ));
            }
            let elem = c.u32(what)?;
            let Some(size) = min_size(elem) else {
                return Err(error(
                    c.file,
                    format!("{}: unknown array element type {elem} (corrupt)", what()),
                ));
            };
            let count = c.u64(what)?;
            if count > MAX_ARRAY {
                return Err(error(
                    c.file,
                    format!(
                        "{}: an array of {count} elements, more than the {MAX_ARRAY} rtx reads \
                         (corrupt?)",
                        what()
                    ),
                ));
            }
            let fits = c.remaining() / size;
            if count > fits as u64 {
                return Err(error(
                    c.file,
                    format!(
                        "{}: an array of {count} elements of type {elem} needs at least {size} \
                         bytes each, but only {} bytes remain (corrupt or truncated)",
                        what(),
                        c.remaining()
                    ),
                ));
            }
            // `count` is bounded by the bytes left; the capacity is bounded further, since
            // an element in memory is larger than its smallest encoding.
            let mut items = Vec::with_capacity((count as usize).min(1 << 16));
            for i in 0..count as usize {
                let item = || format!("{}[{i}]", what());
                items.push(value(c, elem, &item, depth + 1)?);
            }
            GgufValue::Array(items)
        }
        10 => GgufValue::U64(u64::from_le_bytes(c.array(what)?)),
        11 => GgufValue::I64(i64::from_le_bytes(c.array(what)?)),
        12 => GgufValue::F64(f64::from_le_bytes(c.array(what)?)),
        _ => {
            return Err(error(
                c.file,
                format!("{}: unknown value type {ty} (corrupt)", what()),
            ));
        }
    })
}

/// Reads and validates the header of `bytes`, the whole content of `file`.
pub(crate) fn read(file: &Path, bytes: &[u8]) -> Result<Header> {
    let mut c = Cursor { file, bytes, at: 0 };
    let fail = |msg: String| Err(error(file, msg));
    let magic = c.array::<4>(&|| "the magic".into())?;
    if &magic != b"GGUF" {
        return fail(format!(
            "not a GGUF file: it starts with the bytes {magic:02x?}, not \"GGUF\""
        ));
    }
    let version = c.u32(&|| "the version".into())?;
    match version {
        2 | 3 => {}
        1 => {
            return fail(
                "GGUF version 1 is not supported (rtx reads versions 2 and 3; version 1 \
                 files predate August 2023: convert the model again with a current llama.cpp)"
                    .into(),
            );
        }
        v if matches!(v.swap_bytes(), 2 | 3) => {
            return fail(format!(
                "the version field reads {v}, which is version {} written big-endian: \
                 rtx reads little-endian GGUF files only",
                v.swap_bytes()
            ));
        }
        v => {
            return fail(format!(
                "GGUF version {v} is not supported (rtx reads 2 and 3)"
            ));
        }
    }
    let n_tensors = c.u64(&|| "the tensor count".into())?;
    let n_kv = c.u64(&|| "the metadata count".into())?;
    // A tensor's entry takes at least 24 bytes (name length, dim count, type, offset), a
    // metadata entry at least 13 (key length, value type, one byte of value).
    if n_tensors > (c.remaining() / 24) as u64 {
        return fail(format!(
            "the tensor count says {n_tensors}, but the {} bytes after it hold at most {} \
             tensor entries (corrupt)",
            c.remaining(),
            c.remaining() / 24
        ));
    }
    if n_kv > (c.remaining() / 13) as u64 {
        return fail(format!(
            "the metadata count says {n_kv}, but the {} bytes after it hold at most {} \
             entries (corrupt)",
            c.remaining(),
            c.remaining() / 13
        ));
    }
    let mut metadata = BTreeMap::new();
    for i in 0..n_kv as usize {
        let key = c.string(&|| format!("metadata entry {i}: the key"))?;
        let what = || format!("metadata key `{key}`");
        let ty = c.u32(&what)?;
        let v = value(&mut c, ty, &what, 0)?;
        if metadata.insert(key.clone(), v).is_some() {
            return fail(format!("metadata key `{key}` appears twice (corrupt)"));
        }
    }
    let alignment = match metadata.get("general.alignment") {
        None => DEFAULT_ALIGNMENT,
        Some(GgufValue::U32(a)) if a.is_power_of_two() => *a as usize,
        Some(v) => {
            return fail(format!(
                "metadata key `general.alignment`: expected a uint32 power of two, found {v}"
            ));
        }
    };
    // Bounded by the bytes left, and further: entries in memory are larger than on disk.
    let mut tensors = Vec::with_capacity((n_tensors as usize).min(1 << 12));
    let mut names = BTreeMap::new();
    for i in 0..n_tensors as usize {
        let name = c.string(&|| format!("tensor {i}: the name"))?;
        let what = || format!("tensor `{name}`");
        let n_dims = c.u32(&what)?;
        if n_dims > MAX_DIMS {
            return fail(format!(
                "tensor `{name}`: {n_dims} dims, more than ggml's {MAX_DIMS} (corrupt)"
            ));
        }
        let mut ggml_dims = Vec::with_capacity(n_dims as usize);
        for _ in 0..n_dims {
            ggml_dims.push(c.u64(&what)?);
        }
        let type_id = c.u32(&what)?;
        let offset = c.u64(&what)?;
        let dims_usize: Option<Vec<usize>> = ggml_dims
            .iter()
            .map(|&d| {
                usize::try_from(d)
                    .ok()
                    .filter(|&d| d as u64 <= i64::MAX as u64)
            })
            .collect();
        let numel = dims_usize
            .as_ref()
            .and_then(|d| d.iter().try_fold(1usize, |a, &x| a.checked_mul(x)));
        let (Some(dims), Some(numel)) = (dims_usize, numel) else {
            return fail(format!(
                "tensor `{name}`: dims {ggml_dims:?} (innermost first) overflow the address \
                 space (corrupt)"
            ));
        };
        let Some((type_name, block, _)) = layout_of_id(type_id) else {
            return fail(format!(
                "tensor `{name}`: unknown ggml type id {type_id} (corrupt, or a type newer \
                 than this rtx)"
            ));
        };
        let row = dims.first().copied().unwrap_or(1);
        if !row.is_multiple_of(block) {
            return fail(format!(
                "tensor `{name}`: its rows of {row} elements are not a whole number of \
                 {type_name} blocks of {block} (corrupt)"
            ));
        }
        let Some(size) = bytes_of(type_id, numel) else {
            return fail(format!(
                "tensor `{name}`: {numel} elements of {type_name} overflow the address space \
                 (corrupt)"
            ));
        };
        if !offset.is_multiple_of(alignment as u64) {
            return fail(format!(
                "tensor `{name}`: data offset {offset} is not a multiple of the alignment \
                 {alignment} (corrupt)"
            ));
        }
        if names.insert(name.clone(), i).is_some() {
            return fail(format!(
                "tensor `{name}` appears twice in the directory (corrupt)"
            ));
        }
        let mut dims = dims;
        dims.reverse();
        tensors.push(GgufTensorInfo {
            name,
            dims,
            type_id,
            offset,
            size,
        });
    }
    let header_end = c.at;
    let data_start = header_end.next_multiple_of(alignment);
    let data_len = bytes.len().saturating_sub(data_start);
    if data_start > bytes.len() && !tensors.is_empty() {
        return fail(format!(
            "the data section starts at offset {data_start} (the header ends at {header_end}, \
             padded to the alignment {alignment}), past the end of the file ({} bytes) \
             (truncated?)",
            bytes.len()
        ));
    }
    for t in &tensors {
        let end = t.offset.checked_add(t.size as u64);
        if end.is_none_or(|e| e > data_len as u64) {
            return fail(format!(
                "tensor `{}`: offset {} + {} bytes runs past the end of the data ({data_len} \
                 bytes) (truncated?)",
                t.name, t.offset, t.size
            ));
        }
    }
    check_overlaps(file, &tensors)?;
    Ok(Header {
        version,
        metadata,
        tensors,
        alignment,
        data_start,
    })
}

/// No two tensors may share a byte of the data section (gaps are padding, and allowed).
fn check_overlaps(file: &Path, tensors: &[GgufTensorInfo]) -> Result<()> {
    let mut spans: Vec<&GgufTensorInfo> = tensors.iter().filter(|t| t.size > 0).collect();
    spans.sort_by_key(|t| t.offset);
    for w in spans.windows(2) {
        let (a, b) = (w[0], w[1]);
        let a_end = a.offset + a.size as u64;
        if b.offset < a_end {
            return Err(error(
                file,
                format!(
                    "tensors `{}` and `{}` overlap: `{}` spans data bytes {}..{a_end} and \
                     `{}` starts at {} (corrupt)",
                    a.name, b.name, a.name, a.offset, b.name, b.offset
                ),
            ));
        }
    }
    Ok(())
}
