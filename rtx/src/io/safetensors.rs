//! The safetensors container: reading and validating a file's header, and serializing
//! tensors into one. Every check names the file and, once the header has been read, the
//! tensor; after [`read`] succeeds every entry's bytes lie inside the file and their length is
//! exactly its element count times its element size, so decoding cannot fail or misread.

use super::codec;
use crate::error::{Error, Result};
use ::safetensors::Dtype;
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::path::Path;

/// The longest header the safetensors crate accepts (100 MB); a longer one is corruption.
const MAX_HEADER: u64 = 100_000_000;

/// One tensor of a file: its element type, dims, and where its bytes lie in the buffer.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Entry {
    pub dtype: Dtype,
    pub dims: Vec<usize>,
    pub bytes: Range<usize>,
}

/// A validated file: its tensors by name (byte ranges into the file's bytes) and its
/// `__metadata__`.
pub(crate) struct Header {
    pub entries: BTreeMap<String, Entry>,
    pub metadata: BTreeMap<String, String>,
}

/// A [`Error::Checkpoint`] for `file`.
pub(crate) fn error(file: &Path, msg: impl Into<String>) -> Error {
    Error::Checkpoint {
        file: file.to_path_buf(),
        msg: msg.into(),
    }
}

/// Dims as `[2, 3]`.
pub(crate) fn dims_str(dims: &[usize]) -> String {
    format!("{dims:?}")
}

/// Reads and validates the header of `bytes`, the whole content of `file`.
pub(crate) fn read(file: &Path, bytes: &[u8]) -> Result<Header> {
    let len = bytes.len();
    let fail = |msg: String| Err(error(file, msg));
    let Some(prefix) = bytes.get(..8) else {
        return fail(format!(
            "the file is {len} bytes, shorter than the 8-byte header length of a safetensors \
             file (truncated?)"
        ));
    };
    let mut n = [0u8; 8];
    n.copy_from_slice(prefix);
    let n = u64::from_le_bytes(n);
    if n > MAX_HEADER {
        return fail(format!(
            "the header length field says {n} bytes, more than the 100 MB safetensors allows \
             (not a safetensors file, or corrupt)"
        ));
    }
    let n = n as usize;
    if n > len - 8 {
        return fail(format!(
            "the header length field says {n} bytes but only {} follow (truncated?)",
            len - 8
        ));
    }
    let Ok(text) = std::str::from_utf8(&bytes[8..8 + n]) else {
        return fail("the header is not UTF-8 (corrupt)".to_string());
    };
    let json: serde_json::Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => return fail(format!("the header is not valid JSON ({e}) (corrupt)")),
    };
    let Some(object) = json.as_object() else {
        return fail("the header is not a JSON object (corrupt)".to_string());
    };
    let start = 8 + n;
    let data_len = len - start;
    let mut entries = BTreeMap::new();
    let mut metadata = BTreeMap::new();
    for (name, value) in object {
        if name == "__metadata__" {
            metadata = read_metadata(file, value)?;
            continue;
        }
        let (dtype, dims, (s, e)) = read_info(file, name, value)?;
        let numel = dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        let size = numel.and_then(|k| k.checked_mul(dtype.bitsize()));
        let Some(size) = size.map(|bits| bits.div_ceil(8)) else {
            return fail(format!(
                "tensor `{name}`: dims {} overflow the address space",
                dims_str(&dims)
            ));
        };
        if e < s {
            return fail(format!(
                "tensor `{name}`: data_offsets [{s}, {e}] end before they start"
            ));
        }
        if e - s != size {
            return fail(format!(
                "tensor `{name}` is {} {}, which takes {size} bytes, but its data_offsets \
                 [{s}, {e}] span {} bytes",
                codec::name(dtype),
                dims_str(&dims),
                e - s
            ));
        }
        if e > data_len {
            return fail(format!(
                "tensor `{name}`: data_offsets [{s}, {e}] run past the end of the data, which \
                 is {data_len} bytes (truncated?)"
            ));
        }
        let bytes = start + s..start + e;
        entries.insert(name.clone(), Entry { dtype, dims, bytes });
    }
    check_coverage(file, &entries, start, data_len)?;
    // The crate's own parser, as a second opinion on everything checked above.
    if let Err(e) = ::safetensors::SafeTensors::read_metadata(bytes) {
        return fail(format!("not a valid safetensors file: {e}"));
    }
    Ok(Header { entries, metadata })
}

/// `__metadata__`: an object of strings.
fn read_metadata(file: &Path, value: &serde_json::Value) -> Result<BTreeMap<String, String>> {
    let bad = || error(file, "`__metadata__` is not an object of strings (corrupt)");
    let object = value.as_object().ok_or_else(bad)?;
    object
        .iter()
        .map(|(k, v)| Ok((k.clone(), v.as_str().ok_or_else(bad)?.to_string())))
        .collect()
}

/// One tensor's `dtype`, `shape` and `data_offsets`.
fn read_info(
    file: &Path,
    name: &str,
    value: &serde_json::Value,
) -> Result<(Dtype, Vec<usize>, (usize, usize))> {
    let bad = |what: &str| {
        error(
            file,
            format!("tensor `{name}`: {what} in the header entry {value} (corrupt)"),
        )
    };
    let field = |key: &str| value.get(key).ok_or_else(|| bad(&format!("no `{key}`")));
    let dtype = field("dtype")?;
    let dtype: Dtype = serde_json::from_value(dtype.clone())
        .map_err(|_| bad(&format!("unknown dtype {dtype}")))?;
    let numbers = |key: &str| -> Result<Vec<usize>> {
        let list = field(key)?
            .as_array()
            .ok_or_else(|| bad(&format!("`{key}` is not a list")))?;
        list.iter()
            .map(|x| {
                x.as_u64()
                    .and_then(|x| usize::try_from(x).ok())
                    .ok_or_else(|| bad(&format!("`{key}` holds {x}, not a size")))
            })
            .collect()
    };
    let dims = numbers("shape")?;
    let offsets = numbers("data_offsets")?;
    let &[s, e] = offsets.as_slice() else {
        return Err(bad("`data_offsets` is not two numbers"));
    };
    Ok((dtype, dims, (s, e)))
}

/// The tensors' bytes must tile the data exactly: no gaps, no overlaps, nothing after.
fn check_coverage(
    file: &Path,
    entries: &BTreeMap<String, Entry>,
    start: usize,
    data_len: usize,
) -> Result<()> {
    let mut spans: Vec<(&String, &Range<usize>)> =
        entries.iter().map(|(n, e)| (n, &e.bytes)).collect();
    spans.sort_by_key(|(_, r)| (r.start, r.end));
    let mut at = start;
    let mut last: Option<&String> = None;
    for (name, r) in spans {
        if r.start < at {
            let other = last.map_or(String::new(), |l| format!(" `{l}` and"));
            return Err(error(
                file,
                format!(
                    "tensors{other} `{name}` overlap at data bytes {}..{}",
                    r.start - start,
                    at - start
                ),
            ));
        }
        if r.start > at {
            return Err(error(
                file,
                format!(
                    "data bytes {}..{} belong to no tensor (before `{name}`) (corrupt)",
                    at - start,
                    r.start - start
                ),
            ));
        }
        at = r.end;
        last = Some(name);
    }
    if at != start + data_len {
        return Err(error(
            file,
            format!(
                "the tensors cover {} data bytes but the file holds {data_len} (trailing bytes)",
                at - start
            ),
        ));
    }
    Ok(())
}

/// One tensor to serialize: borrows its bytes.
pub(crate) struct View<'a> {
    pub dtype: Dtype,
    pub dims: &'a [usize],
    pub bytes: &'a [u8],
}

impl ::safetensors::View for View<'_> {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        self.dims
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(self.bytes)
    }
    fn data_len(&self) -> usize {
        self.bytes.len()
    }
}

/// The bytes of a safetensors file holding `tensors` and, when not empty, `metadata`. The
/// crate orders tensors by dtype alignment, then name, as `safetensors.torch.save_file` does,
/// so the same state dict gives the same bytes from either side.
pub(crate) fn serialize<'a>(
    file: &Path,
    tensors: impl IntoIterator<Item = (&'a String, View<'a>)>,
    metadata: &BTreeMap<String, String>,
) -> Result<Vec<u8>> {
    let meta = (!metadata.is_empty())
        .then(|| metadata.iter().map(|(k, v)| (k.clone(), v.clone())))
        .map(HashMap::from_iter);
    ::safetensors::serialize(tensors, meta)
        .map_err(|e| error(file, format!("cannot serialize: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn file(header: &str, data: &[u8]) -> Vec<u8> {
        let mut h = header.as_bytes().to_vec();
        h.resize(h.len().next_multiple_of(8), b' ');
        let mut out = (h.len() as u64).to_le_bytes().to_vec();
        out.extend(h);
        out.extend(data);
        out
    }

    fn msg(bytes: &[u8]) -> String {
        match read(&PathBuf::from("f.safetensors"), bytes) {
            Ok(_) => "ok".to_string(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_valid_file_reads_with_ranges_inside_it() {
        let bytes = file(
            r#"{"__metadata__":{"k":"v"},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]},"a":{"dtype":"F64","shape":[],"data_offsets":[0,8]}}"#,
            &[0; 12],
        );
        let Ok(h) = read(&PathBuf::from("f"), &bytes) else {
            panic!("{}", msg(&bytes));
        };
        assert_eq!(h.metadata["k"], "v");
        assert_eq!(h.entries["b"].bytes.end, bytes.len());
        assert_eq!(h.entries["a"].dims, Vec::<usize>::new());
    }

    #[test]
    fn each_defect_is_named() {
        let one = r#"{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#;
        assert!(msg(&[1, 0]).contains("shorter than the 8-byte"));
        assert!(msg(&file(one, &[0; 4])).contains("`w`: data_offsets [0, 8] run past"));
        assert!(msg(&file(one, &[0; 9])).contains("trailing bytes"));
        assert!(msg(&file("{\"w\":", &[])).contains("not valid JSON"));
        let short = r#"{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}"#;
        assert!(msg(&file(short, &[0; 8])).contains("`w` is float32 [3], which takes 12 bytes"));
        let gap = r#"{"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}"#;
        assert!(msg(&file(gap, &[0; 8])).contains("bytes 0..4 belong to no tensor"));
        let over = r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}"#;
        assert!(msg(&file(over, &[0; 8])).contains("`a` and `b` overlap"));
        let dt = r#"{"w":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}}"#;
        assert!(msg(&file(dt, &[0; 4])).contains("unknown dtype \"F33\""));
        let huge = r#"{"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}}"#;
        assert!(msg(&file(huge, &[0; 4])).contains("overflow"));
        let mut long = file(one, &[0; 8]);
        long[..8].copy_from_slice(&1000u64.to_le_bytes());
        assert!(msg(&long).contains("says 1000 bytes but only"));
    }
}
