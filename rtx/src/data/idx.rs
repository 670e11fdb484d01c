//! The IDX file format of MNIST and its relatives (Fashion-MNIST, KMNIST, EMNIST).
//!
//! An IDX file is a 4-byte magic number (two zero bytes, an element-type code, the number of
//! dims), one big-endian `u32` per dim, then the elements in row-major order. Only unsigned
//! bytes (type code `0x08`) are read, which is what those data sets use.
//!
//! Invariant: a parsed [`IdxBytes`] holds exactly the product of its dims in elements; any
//! other file (bad magic, zero dims, truncated, trailing bytes) is an error naming the file.

use crate::error::{Error, Result};

/// The contents of an unsigned-byte IDX file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdxBytes {
    /// The sizes, outermost first (`[60000, 28, 28]` for MNIST's training images).
    pub dims: Vec<usize>,
    /// The elements in row-major order; `data.len()` is the product of `dims`.
    pub data: Vec<u8>,
}

/// The element-type code of unsigned bytes.
const UBYTE: u8 = 0x08;

fn bad(name: &str, msg: String) -> Error {
    Error::Data {
        path: name.to_string(),
        msg: format!("not a valid IDX file: {msg}"),
    }
}

fn type_name(code: u8) -> &'static str {
    match code {
        0x08 => "unsigned byte",
        0x09 => "signed byte",
        0x0B => "i16",
        0x0C => "i32",
        0x0D => "f32",
        0x0E => "f64",
        _ => "unknown",
    }
}

/// Parses an unsigned-byte IDX file held in memory; `name` is the file named in errors.
///
/// ```
/// use rtx::data::idx::parse_idx;
/// // A 2 x 3 array: magic 0, 0, 0x08, 2 dims; sizes 2 and 3; six bytes.
/// let bytes = vec![0, 0, 8, 2, 0, 0, 0, 2, 0, 0, 0, 3, 1, 2, 3, 4, 5, 6];
/// let idx = parse_idx(bytes, "tiny-idx2-ubyte").unwrap();
/// assert_eq!((idx.dims, idx.data), (vec![2, 3], vec![1, 2, 3, 4, 5, 6]));
/// ```
pub fn parse_idx(mut bytes: Vec<u8>, name: &str) -> Result<IdxBytes> {
    if bytes.len() < 4 {
        let msg = format!(
            "{} bytes, shorter than the 4-byte magic number",
            bytes.len()
        );
        return Err(bad(name, msg));
    }
    let [z0, z1, code, rank] = [bytes[0], bytes[1], bytes[2], bytes[3]];
    if z0 != 0 || z1 != 0 {
        let msg = format!("the magic number starts {z0:#04x} {z1:#04x}, not 0x00 0x00");
        return Err(bad(name, msg));
    }
    if code != UBYTE {
        let msg = format!(
            "element type {code:#04x} ({}); only unsigned bytes (0x08) are supported",
            type_name(code)
        );
        return Err(bad(name, msg));
    }
    if rank == 0 {
        return Err(bad(name, "the magic number gives 0 dimensions".into()));
    }
    let header = 4 + 4 * rank as usize;
    if bytes.len() < header {
        let msg = format!(
            "{} bytes, shorter than the {header}-byte header of a {rank}-dim file",
            bytes.len()
        );
        return Err(bad(name, msg));
    }
    let dims: Vec<usize> = bytes[4..header]
        .chunks_exact(4)
        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]) as usize)
        .collect();
    let numel = dims
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .ok_or_else(|| {
            bad(
                name,
                format!("the dims {dims:?} overflow the address space"),
            )
        })?;
    let body = bytes.len() - header;
    if body != numel {
        let what = if body < numel {
            "truncated"
        } else {
            "trailing bytes"
        };
        let msg = format!(
            "{what}: dims {dims:?} need {numel} bytes after the {header}-byte header, found {body}"
        );
        return Err(bad(name, msg));
    }
    bytes.drain(..header);
    Ok(IdxBytes { dims, data: bytes })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An unsigned-byte IDX file with the given dims and data.
    fn idx(dims: &[u32], data: &[u8]) -> Vec<u8> {
        let mut b = vec![0, 0, UBYTE, dims.len() as u8];
        for d in dims {
            b.extend_from_slice(&d.to_be_bytes());
        }
        b.extend_from_slice(data);
        b
    }

    fn err(bytes: Vec<u8>) -> String {
        parse_idx(bytes, "f-idx").unwrap_err().to_string()
    }

    #[test]
    fn parses_three_dims() {
        let data: Vec<u8> = (0..24).collect();
        let p = parse_idx(idx(&[2, 3, 4], &data), "x").unwrap();
        assert_eq!(p.dims, vec![2, 3, 4]);
        assert_eq!(p.data, data);
        // Big-endian sizes above 255 too.
        let p = parse_idx(idx(&[300], &[7; 300]), "x").unwrap();
        assert_eq!(p.dims, vec![300]);
    }

    #[test]
    fn corrupt_headers_name_the_file_and_the_fault() {
        assert_eq!(
            err(vec![0, 0, 8]),
            "f-idx: not a valid IDX file: 3 bytes, shorter than the 4-byte magic number"
        );
        assert_eq!(
            err(vec![1, 0, 8, 1, 0, 0, 0, 0]),
            "f-idx: not a valid IDX file: the magic number starts 0x01 0x00, not 0x00 0x00"
        );
        assert_eq!(
            err(vec![0, 0, 0x0D, 1, 0, 0, 0, 0]),
            "f-idx: not a valid IDX file: element type 0x0d (f32); only unsigned bytes (0x08) \
             are supported"
        );
        assert_eq!(
            err(vec![0, 0, 8, 0]),
            "f-idx: not a valid IDX file: the magic number gives 0 dimensions"
        );
        assert_eq!(
            err(vec![0, 0, 8, 3, 0, 0, 0, 1, 0, 0]),
            "f-idx: not a valid IDX file: 10 bytes, shorter than the 16-byte header of a 3-dim file"
        );
    }

    #[test]
    fn truncated_and_padded_bodies_are_errors() {
        let mut short = idx(&[2, 2], &[1, 2, 3, 4]);
        short.pop();
        assert_eq!(
            err(short),
            "f-idx: not a valid IDX file: truncated: dims [2, 2] need 4 bytes after the 12-byte \
             header, found 3"
        );
        let mut long = idx(&[2, 2], &[1, 2, 3, 4]);
        long.push(0);
        assert_eq!(
            err(long),
            "f-idx: not a valid IDX file: trailing bytes: dims [2, 2] need 4 bytes after the \
             12-byte header, found 5"
        );
    }

    #[test]
    fn empty_arrays_parse() {
        let p = parse_idx(idx(&[0, 28, 28], &[]), "x").unwrap();
        assert_eq!((p.dims, p.data.len()), (vec![0, 28, 28], 0));
    }
}
