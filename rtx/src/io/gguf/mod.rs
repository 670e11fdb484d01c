//! GGUF files (llama.cpp's format for pretrained and quantized models), versions 2 and 3: the
//! metadata, the tensor directory, and each tensor's raw blocks from a memory map, read with
//! every size, count and offset checked.
//!
//! ```no_run
//! use rtx::prelude::*;
//! use rtx::io::Gguf;
//!
//! # fn main() -> rtx::Result<()> {
//! let gguf = Gguf::open("model.gguf")?;
//! let arch = gguf.get_str("general.architecture")?;
//! let layers = gguf.get_u32(&format!("{arch}.block_count"))?;
//! let q = gguf.tensor("blk.0.attn_q.weight", Device::Cpu)?; // raw Q4_K blocks, say
//! let w: Tensor<(usize, usize)> = q.dequantize()?;          // row-major [out, in]
//! # Ok(())
//! # }
//! ```
//!
//! **File format.** Little-endian throughout: the magic `GGUF`, a `u32` version, the tensor
//! count and the metadata count (`u64` each), the metadata entries (a string key, a `u32` value
//! type, the value; strings are a `u64` length and UTF-8 bytes; arrays an element type, a `u64`
//! count and the elements), the tensor entries (name, `u32` dim count, `u64` dims, `u32` ggml
//! type, `u64` offset), padding to `general.alignment` (32 by default), then the data section,
//! where each tensor's offset counts from its start and is a multiple of the alignment.
//! Version 1 (32-bit counts, before August 2023) and big-endian files are errors that say so.
//!
//! **Dims.** GGUF lists a tensor's dims innermost first: `ne[0]` is the length of a row, the
//! dim whose elements are contiguous and are cut into quantization blocks. rtx's dims are
//! row-major, outermost first, so [`GgufTensorInfo::dims`] is the file's list reversed: a
//! `blk.0.attn_q.weight` stored with `ne = [4096, 1024]` has rtx dims `[1024, 4096]`, which is
//! PyTorch's `[out, in]` of that `nn.Linear`. [`GgufTensorInfo::ggml_dims`] gives the file's
//! order.
//!
//! **Reading never trusts the file.** Every count (metadata entries, tensors, array elements,
//! string lengths) is checked against the bytes that remain before anything is allocated for
//! it; every tensor's dims, type, alignment and byte range are checked when the file is opened,
//! and no two tensors may overlap. A truncated or corrupt file is an
//! [`Error::Gguf`](crate::Error) naming the file and the field (the metadata key or the
//! tensor), never a panic and never a read out of bounds.
//!
//! **Memory.** The file is memory-mapped, not read: opening a large model costs its header
//! only, and [`Gguf::tensor`] copies one tensor's blocks to its device. Like every memory map,
//! the view assumes no other process truncates or rewrites the file while it is open.

mod parse;
mod value;

pub use value::GgufValue;

use crate::error::{Error, Result};
use crate::quant::{GgmlType, QTensor, types::layout_of_id};
use rtx_backends::Device;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One entry of a GGUF file's tensor directory, checked against the file when it was opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GgufTensorInfo {
    pub(crate) name: String,
    /// Row-major (outermost first): the file's list reversed.
    pub(crate) dims: Vec<usize>,
    pub(crate) type_id: u32,
    pub(crate) offset: u64,
    pub(crate) size: usize,
}

impl GgufTensorInfo {
    /// The tensor's name (`blk.0.attn_q.weight`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The dims in rtx's row-major order, outermost first: the file's list reversed (see the
    /// module docs).
    pub fn dims(&self) -> &[usize] {
        &self.dims
    }

    /// The dims in the file's order, innermost first (`ne[0]` is the row length).
    pub fn ggml_dims(&self) -> Vec<usize> {
        self.dims.iter().rev().copied().collect()
    }

    /// The number of elements.
    pub fn numel(&self) -> usize {
        self.dims.iter().product()
    }

    /// The ggml type id as the file names it (any type ggml defines).
    pub fn type_id(&self) -> u32 {
        self.type_id
    }

    /// The name of the tensor's ggml type (`"Q4_K"`), for any type ggml defines.
    pub fn type_name(&self) -> &'static str {
        layout_of_id(self.type_id).map_or("?", |l| l.0)
    }

    /// The tensor's type, or an error for a ggml type rtx cannot dequantize (`Q3_K`, ...).
    pub fn ggml_type(&self) -> Result<GgmlType> {
        GgmlType::from_id(self.type_id)
    }

    /// Where the tensor's bytes start, counted from the start of the data section.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The number of bytes the tensor takes.
    pub fn size_bytes(&self) -> usize {
        self.size
    }
}

/// An open GGUF file: its metadata and tensor directory, validated, over a memory map of
/// the file.
pub struct Gguf {
    file: PathBuf,
    version: u32,
    alignment: usize,
    metadata: BTreeMap<String, GgufValue>,
    tensors: Vec<GgufTensorInfo>,
    by_name: BTreeMap<String, usize>,
    data_start: usize,
    map: memmap2::Mmap,
}

impl std::fmt::Debug for Gguf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gguf")
            .field("file", &self.file)
            .field("version", &self.version)
            .field("metadata", &self.metadata.len())
            .field("tensors", &self.tensors.len())
            .finish()
    }
}

impl Gguf {
    /// Opens `path`: maps it into memory and reads and validates its header (see the module
    /// docs for everything checked). Errors name the file and the field at fault.
    pub fn open(path: impl AsRef<Path>) -> Result<Gguf> {
        let file = path.as_ref();
        let io = |doing: &str, e: std::io::Error| crate::io::atomic::io_error(file, doing, &e);
        let handle = std::fs::File::open(file).map_err(|e| io("cannot open", e))?;
        let len = handle
            .metadata()
            .map_err(|e| io("cannot read the size of", e))?
            .len();
        if len < 24 {
            return Err(parse::error(
                file,
                format!(
                    "the file is {len} bytes, shorter than the 24-byte header of a GGUF file \
                     (truncated, or not GGUF)"
                ),
            ));
        }
        // SAFETY: the map is only read, through bounds-checked slices; like any memory map
        // it assumes the file is not truncated or rewritten while it is open (module docs).
        let map = unsafe { memmap2::Mmap::map(&handle) }.map_err(|e| io("cannot map", e))?;
        let header = parse::read(file, &map)?;
        let by_name = header
            .tensors
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), i))
            .collect();
        Ok(Gguf {
            file: file.to_path_buf(),
            version: header.version,
            alignment: header.alignment,
            metadata: header.metadata,
            tensors: header.tensors,
            by_name,
            data_start: header.data_start,
            map,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.file
    }

    /// The format version: 2 or 3.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The alignment of the data section: `general.alignment`, or 32 by default.
    pub fn alignment(&self) -> usize {
        self.alignment
    }

    /// Where the data section starts in the file: the end of the header, padded to the
    /// alignment. Tensor offsets count from here.
    pub fn data_offset(&self) -> usize {
        self.data_start
    }

    /// The length of the file in bytes.
    pub fn file_len(&self) -> usize {
        self.map.len()
    }

    /// Every metadata entry, by key.
    pub fn metadata(&self) -> &BTreeMap<String, GgufValue> {
        &self.metadata
    }

    /// The value of `key`, or an error naming the key and the file.
    pub fn get(&self, key: &str) -> Result<&GgufValue> {
        self.metadata
            .get(key)
            .ok_or_else(|| parse::error(&self.file, format!("metadata key `{key}` is missing")))
    }

    /// The value of `key` through `pick`, or an error naming the key, what was expected and
    /// what was found.
    fn typed<'a, T>(
        &'a self,
        key: &str,
        expected: &str,
        pick: impl Fn(&'a GgufValue) -> Option<T>,
    ) -> Result<T> {
        let v = self.get(key)?;
        pick(v).ok_or_else(|| {
            parse::error(
                &self.file,
                format!("metadata key `{key}`: expected {expected}, found {v}"),
            )
        })
    }

    /// The string `key`.
    pub fn get_str(&self, key: &str) -> Result<&str> {
        self.typed(key, "a string", GgufValue::as_str)
    }

    /// The unsigned integer `key`, if it fits in a `u32` type (`uint8`, `uint16`, `uint32`).
    pub fn get_u32(&self, key: &str) -> Result<u32> {
        self.typed(
            key,
            "an unsigned integer of at most 32 bits",
            GgufValue::as_u32,
        )
    }

    /// The unsigned integer `key`, of any width.
    pub fn get_u64(&self, key: &str) -> Result<u64> {
        self.typed(key, "an unsigned integer", GgufValue::as_u64)
    }

    /// The signed integer `key`, if it fits in an `i32` type (`int8`, `int16`, `int32`).
    pub fn get_i32(&self, key: &str) -> Result<i32> {
        self.typed(
            key,
            "a signed integer of at most 32 bits",
            GgufValue::as_i32,
        )
    }

    /// The `float32` `key`.
    pub fn get_f32(&self, key: &str) -> Result<f32> {
        self.typed(key, "a float32", GgufValue::as_f32)
    }

    /// The bool `key`.
    pub fn get_bool(&self, key: &str) -> Result<bool> {
        self.typed(key, "a bool", GgufValue::as_bool)
    }

    /// The array `key`: its elements, each readable with [`GgufValue`]'s `as_*` methods.
    pub fn get_array(&self, key: &str) -> Result<&[GgufValue]> {
        self.typed(key, "an array", GgufValue::as_array)
    }

    /// The tensor directory, in the file's order.
    pub fn tensors(&self) -> &[GgufTensorInfo] {
        &self.tensors
    }

    /// The directory entry of the tensor `name`, or an error naming it.
    pub fn tensor_info(&self, name: &str) -> Result<&GgufTensorInfo> {
        match self.by_name.get(name) {
            Some(&i) => Ok(&self.tensors[i]),
            None => Err(parse::error(
                &self.file,
                format!(
                    "no tensor `{name}` in the file (it holds {} tensors)",
                    self.tensors.len()
                ),
            )),
        }
    }

    /// The raw bytes of the tensor `name` (its blocks, as the file stores them), borrowed
    /// from the memory map.
    pub fn tensor_bytes(&self, name: &str) -> Result<&[u8]> {
        let t = self.tensor_info(name)?;
        // In bounds: the offset and size were checked against the data section on open.
        let start = self.data_start + t.offset as usize;
        Ok(&self.map[start..start + t.size])
    }

    /// The tensor `name` as a [`QTensor`] on `device`: its raw blocks copied there, with its
    /// dims (row-major) and type. A type rtx cannot dequantize is an error naming the tensor.
    pub fn tensor(&self, name: &str, device: Device) -> Result<QTensor> {
        let t = self.tensor_info(name)?;
        let ty = t.ggml_type().map_err(|e| {
            let msg = match e {
                Error::BadArgument { msg, .. } => msg,
                other => other.to_string(),
            };
            parse::error(&self.file, format!("tensor `{name}`: {msg}"))
        })?;
        QTensor::from_bytes(self.tensor_bytes(name)?, t.dims(), ty, device)
    }
}

#[cfg(test)]
mod tests;
