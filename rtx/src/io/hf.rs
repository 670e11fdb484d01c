//! [`HfCheckpoint`]: Hugging Face checkpoints — one `model.safetensors` or shards listed by a
//! `model.safetensors.index.json` — memory-mapped and loaded into rtx models through a
//! [`KeyMap`] from the checkpoint's names to the model's.
//!
//! Invariant: every shard has passed the same validation as a [`Checkpoint`](super::Checkpoint)
//! file (header, dtypes, offsets, exact tiling of the data) and every key of the index lies in
//! the shard the index names, before any tensor is read; no key is in two shards.

use super::codec;
use super::key_map::KeyMap;
use super::safetensors::{self as st, Entry, dims_str, error};
use super::state_dict::{self, Stored};
use crate::error::Result;
use crate::nn::{Module, short_type_name};
use crate::shape::Shape;
use crate::tensor::Tensor;
use rtx_backends::Device;
use rtx_kernels::{DType, Element};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The name of a single-file checkpoint in a Hugging Face model directory.
const SINGLE: &str = "model.safetensors";
/// The name of a sharded checkpoint's index in a Hugging Face model directory.
const INDEX: &str = "model.safetensors.index.json";

/// One memory-mapped safetensors file.
struct Shard {
    path: PathBuf,
    bytes: memmap2::Mmap,
}

/// A Hugging Face checkpoint, opened and validated, its shards memory-mapped.
///
/// ```
/// # use rtx::prelude::*;
/// use rtx::io::{HfCheckpoint, KeyMap};
/// # fn main() -> rtx::Result<()> {
/// let dir = std::env::temp_dir().join(format!("rtx-doc-hf-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// Linear::<3, 2>::new(Device::Cpu, 0).save(dir.join("model.safetensors"))?;
///
/// // The file calls the layer `weight`/`bias`; this model keeps it under `head.`.
/// #[model]
/// struct Head {
///     head: Linear<3, 2>,
/// }
/// let mut m = Head::init(&Device::Cpu, 1);
/// let ck = HfCheckpoint::open(&dir)?;
/// ck.load_model(&mut m, &KeyMap::new().rename("weight", "head.weight").rename("bias", "head.bias"))?;
/// assert_eq!(m.head.weight.to_vec(), Linear::<3, 2>::new(Device::Cpu, 0).weight.to_vec());
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok(())
/// # }
/// ```
pub struct HfCheckpoint {
    /// What was opened: a file, an index or a directory; named in errors.
    path: PathBuf,
    shards: Vec<Shard>,
    /// Every tensor: its shard and its entry in that shard.
    entries: BTreeMap<String, (usize, Entry)>,
}

impl std::fmt::Debug for HfCheckpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HfCheckpoint")
            .field("path", &self.path)
            .field("shards", &self.shards.len())
            .field("tensors", &self.entries.len())
            .finish()
    }
}

impl HfCheckpoint {
    /// Opens `path`: a `.safetensors` file, a `model.safetensors.index.json` (whose shards
    /// are beside it), or a directory holding either. Every shard is validated; errors name
    /// the file and the tensor or field. The files are mapped, not read: do not rewrite them
    /// while the checkpoint is open.
    ///
    /// ```
    /// let e = rtx::io::HfCheckpoint::open("no/such/dir").unwrap_err();
    /// assert!(e.to_string().contains("no/such/dir"));
    /// ```
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let file = if path.is_dir() {
            let (single, index) = (path.join(SINGLE), path.join(INDEX));
            if index.exists() {
                index
            } else if single.exists() {
                single
            } else {
                return Err(error(
                    path,
                    format!("the directory holds neither {SINGLE} nor {INDEX}"),
                ));
            }
        } else {
            path.to_path_buf()
        };
        if file.to_string_lossy().ends_with(".json") {
            Self::open_index(&file)
        } else {
            let shard = map(&file)?;
            let header = st::read(&file, &shard.bytes)?;
            let entries = header
                .entries
                .into_iter()
                .map(|(k, e)| (k, (0, e)))
                .collect();
            Ok(HfCheckpoint {
                path: file,
                shards: vec![shard],
                entries,
            })
        }
    }

    /// A sharded checkpoint: `{"metadata": .., "weight_map": {key: shard file}}`.
    fn open_index(index: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(index)
            .map_err(|e| super::atomic::io_error(index, "cannot read", &e))?;
        let json: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| error(index, format!("the index is not valid JSON ({e})")))?;
        let Some(weight_map) = json.get("weight_map").and_then(|w| w.as_object()) else {
            return Err(error(index, "the index has no `weight_map` object"));
        };
        let dir = index.parent().unwrap_or(Path::new("."));
        let mut shard_of: BTreeMap<&str, usize> = BTreeMap::new();
        let mut shards = Vec::new();
        let mut listed: BTreeMap<&String, usize> = BTreeMap::new();
        for (key, file) in weight_map {
            let Some(file) = file.as_str() else {
                return Err(error(
                    index,
                    format!("`weight_map.{key}` is {file}, not a file name"),
                ));
            };
            // Shards are siblings of the index: a name with a path in it is refused, so a
            // corrupt index cannot point the loader at other files.
            if file.is_empty() || file.contains(['/', '\\']) || file == ".." {
                return Err(error(
                    index,
                    format!(
                        "`weight_map.{key}` names `{file}`, which is not a file beside the index"
                    ),
                ));
            }
            let i = match shard_of.get(file) {
                Some(&i) => i,
                None => {
                    shards.push(map(&dir.join(file))?);
                    shard_of.insert(file, shards.len() - 1);
                    shards.len() - 1
                }
            };
            listed.insert(key, i);
        }
        let mut entries = BTreeMap::new();
        for (i, shard) in shards.iter().enumerate() {
            let header = st::read(&shard.path, &shard.bytes)?;
            for (key, entry) in header.entries {
                match listed.get(&key) {
                    Some(&j) if j == i => {}
                    Some(&j) => {
                        return Err(error(
                            index,
                            format!(
                                "`{key}` is in {} but the index puts it in {}",
                                shard.path.display(),
                                shards[j].path.display()
                            ),
                        ));
                    }
                    None => {
                        return Err(error(
                            index,
                            format!(
                                "{} holds `{key}`, which the index does not list",
                                shard.path.display()
                            ),
                        ));
                    }
                }
                entries.insert(key, (i, entry));
            }
        }
        if let Some((key, &i)) = listed.iter().find(|(k, _)| !entries.contains_key(**k)) {
            return Err(error(
                index,
                format!(
                    "the index puts `{key}` in {}, which does not hold it",
                    shards[i].path.display()
                ),
            ));
        }
        Ok(HfCheckpoint {
            path: index.to_path_buf(),
            shards,
            entries,
        })
    }

    /// The file or index this checkpoint was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The names of all tensors, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    /// The dims of tensor `name`, if the checkpoint has it.
    pub fn dims(&self, name: &str) -> Option<&[usize]> {
        self.entries.get(name).map(|(_, e)| e.dims.as_slice())
    }

    /// The element type of tensor `name`, if rtx has that type.
    pub fn dtype(&self, name: &str) -> Option<DType> {
        self.entries
            .get(name)
            .and_then(|(_, e)| codec::from_st(e.dtype))
    }

    /// The bytes of an entry.
    fn bytes(&self, shard: usize, entry: &Entry) -> &[u8] {
        &self.shards[shard].bytes[entry.bytes.clone()]
    }

    /// The tensor `name` as a `Tensor<S, E>` on `device`: bit for bit when the file's dtype is
    /// `E`, cast when both are float types; its dims must fit `S`.
    pub fn tensor<S: Shape, E: Element>(&self, name: &str, device: Device) -> Result<Tensor<S, E>> {
        let Some((shard, entry)) = self.entries.get(name) else {
            return Err(error(&self.path, format!("has no tensor `{name}`")));
        };
        let file = &self.shards[*shard].path;
        let file_dtype = codec::from_st(entry.dtype);
        let castable = file_dtype.is_some_and(DType::is_float) && E::DTYPE.is_float();
        if file_dtype != Some(E::DTYPE) && !castable {
            let msg = format!("`{name}` is {}, not {}", codec::name(entry.dtype), E::DTYPE);
            return Err(error(file, msg));
        }
        let Some(shape) = S::from_dims(&entry.dims) else {
            let msg = format!(
                "`{name}` is {}, which does not fit the shape `{}`",
                dims_str(&entry.dims),
                short_type_name(std::any::type_name::<S>())
            );
            return Err(error(file, msg));
        };
        let values = codec::decode_as::<E>(entry.dtype, self.bytes(*shard, entry))
            .ok_or_else(|| error(file, format!("`{name}` holds a bool that is not 0 or 1")))?;
        Tensor::try_from_vec(values, shape, device)
    }

    /// Sets every parameter and buffer of `model` from the checkpoint, with `map` turning the
    /// checkpoint's keys into the model's names. Strict, as PyTorch's
    /// `load_state_dict(strict=True)`: a tensor of the model that no key maps to, a key that
    /// maps to no tensor of the model (unless `map` ignores it), two keys mapping to one name,
    /// a wrong shape or a non-float dtype are errors naming the keys (the model's and the
    /// file's) and both shapes; all problems are reported at once and the model is left
    /// unchanged. Float dtypes are cast to the model's (`F32` weights into a `bf16` model).
    pub fn load_model<M: Module + ?Sized>(&self, model: &mut M, map: &KeyMap) -> Result<()> {
        let mut stored: BTreeMap<String, Stored> = BTreeMap::new();
        for (key, (shard, entry)) in &self.entries {
            let Some(name) = map.apply(key) else {
                continue;
            };
            let tensor = Stored {
                dtype: entry.dtype,
                dims: &entry.dims,
                bytes: self.bytes(*shard, entry),
                file_key: key,
            };
            if let Some(other) = stored.insert(name.clone(), tensor) {
                let msg = format!(
                    "the key map sends both `{}` and `{key}` to `{name}`",
                    other.file_key
                );
                return Err(error(&self.path, msg));
            }
        }
        let available: BTreeSet<&String> = stored.keys().collect();
        state_dict::import("", model, &stored, available).map_err(|m| error(&self.path, m))
    }
}

/// Memory-maps `path`.
fn map(path: &Path) -> Result<Shard> {
    let file =
        std::fs::File::open(path).map_err(|e| super::atomic::io_error(path, "cannot open", &e))?;
    // SAFETY: the map is read only, and every read is bounds-checked against its length,
    // which was validated with the header. The one hazard of any file map remains: another
    // process truncating or rewriting the file while it is open, which the docs of `open`
    // rule out as they do for every checkpoint reader that maps its file.
    let bytes = unsafe { memmap2::Mmap::map(&file) }
        .map_err(|e| super::atomic::io_error(path, "cannot memory-map", &e))?;
    Ok(Shard {
        path: path.to_path_buf(),
        bytes,
    })
}
