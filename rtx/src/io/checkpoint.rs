//! [`Checkpoint`]: several parts (models, optimizers, loose tensors, metadata) in one
//! safetensors file, each part's keys under its own prefix. The checkpoint owns its tensors'
//! bytes, so it can be built, saved, opened and read in any order; every entry it holds has
//! been validated (bytes inside the buffer, length equal to dtype size times element count).

use super::safetensors::{self as st, Entry, View, dims_str, error};
use super::state_dict::{self, Owned, Stored, key};
use super::{atomic, codec};
use crate::error::Result;
use crate::nn::short_type_name;
use crate::optim::{OptimState, Optimizer, StateTensor};
use crate::shape::Shape;
use crate::tensor::Tensor;
use ::safetensors::Dtype;
use rtx_backends::Device;
use rtx_kernels::{DType, Element};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The metadata key under which an optimizer part lists its tensors and scalars.
const OPTIMIZER_KEY: &str = "rtx.optimizer.";

/// The names stored by one optimizer part (relative to its prefix).
#[derive(Clone, Debug, Default, PartialEq)]
struct OptimizerPart {
    tensors: Vec<String>,
    scalars: Vec<String>,
}

/// Named tensors and string metadata, read from or bound for one safetensors file (see the
/// [module docs](crate::io) for the format and naming).
///
/// ```
/// use rtx::io::Checkpoint;
/// use rtx::prelude::*;
///
/// # fn main() -> rtx::Result<()> {
/// let mut model = Linear::<3, 2>::new(Device::Cpu, 0);
/// let mut opt = Adam::new(1e-3);
/// model.track_gradients();
/// let x: Tensor<Rank2<4, 3>> = Tensor::ones((Const, Const), Device::Cpu);
/// let grads = model.forward(&x).sum_all().backward();
/// opt.step(&mut model, &grads);
///
/// let path = std::env::temp_dir().join(format!("rtx-doc-ck-{}.safetensors", std::process::id()));
/// let mut ck = Checkpoint::new();
/// ck.add_model("model", &model)?.add_optimizer("optim", &opt)?;
/// ck.set_metadata("epoch", "3");
/// ck.save(&path)?;
///
/// let (mut model2, mut opt2) = (Linear::<3, 2>::new(Device::Cpu, 1), Adam::new(1e-3));
/// let ck = Checkpoint::open(&path)?;
/// ck.load_model("model", &mut model2)?;
/// ck.load_optimizer("optim", &mut opt2)?;
/// assert_eq!(model2.weight.to_vec(), model.weight.to_vec());
/// assert_eq!(opt2.state_dict(), opt.state_dict());
/// assert_eq!(ck.metadata("epoch"), Some("3"));
/// # std::fs::remove_file(&path).ok();
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Checkpoint {
    /// The file it was opened from, named in errors.
    file: PathBuf,
    /// The bytes every entry's range points into.
    data: Vec<u8>,
    entries: BTreeMap<String, Entry>,
    /// User metadata.
    metadata: BTreeMap<String, String>,
    /// Optimizer parts by their prefix (without a trailing dot).
    optimizers: BTreeMap<String, OptimizerPart>,
}

impl std::fmt::Debug for Checkpoint {
    /// The file, the tensor count and the metadata; not the bytes.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checkpoint")
            .field("file", &self.file)
            .field("tensors", &self.entries.len())
            .field("bytes", &self.data.len())
            .field("metadata", &self.metadata)
            .field("optimizers", &self.optimizers.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Default for Checkpoint {
    fn default() -> Self {
        Checkpoint::new()
    }
}

impl Checkpoint {
    /// An empty checkpoint, to fill with `add_*` and write with [`Checkpoint::save`].
    ///
    /// ```
    /// let ck = rtx::io::Checkpoint::new();
    /// assert_eq!(ck.names().count(), 0);
    /// ```
    pub fn new() -> Self {
        Checkpoint {
            file: PathBuf::from("<unsaved checkpoint>"),
            data: Vec::new(),
            entries: BTreeMap::new(),
            metadata: BTreeMap::new(),
            optimizers: BTreeMap::new(),
        }
    }

    /// Reads and validates a safetensors file (one written by rtx, or by PyTorch's
    /// `safetensors.torch.save_file`). Errors name the file and, where known, the tensor.
    ///
    /// ```
    /// let e = rtx::io::Checkpoint::open("no/such.safetensors").unwrap_err();
    /// assert!(e.to_string().starts_with("no/such.safetensors: cannot read"));
    /// ```
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let file = path.as_ref();
        let data = std::fs::read(file).map_err(|e| atomic::io_error(file, "cannot read", &e))?;
        let header = st::read(file, &data)?;
        let mut metadata = header.metadata;
        let mut optimizers = BTreeMap::new();
        let parts: Vec<String> = metadata
            .keys()
            .filter(|k| k.starts_with(OPTIMIZER_KEY))
            .cloned()
            .collect();
        for k in parts {
            let value = metadata.remove(&k).unwrap_or_default();
            let prefix = k[OPTIMIZER_KEY.len()..].to_string();
            optimizers.insert(prefix, parse_part(file, &k, &value)?);
        }
        Ok(Checkpoint {
            file: file.to_path_buf(),
            data,
            entries: header.entries,
            metadata,
            optimizers,
        })
    }

    /// The file this checkpoint was opened from (`<unsaved checkpoint>` for a new one).
    ///
    /// ```
    /// assert_eq!(rtx::io::Checkpoint::new().path().to_str(), Some("<unsaved checkpoint>"));
    /// ```
    pub fn path(&self) -> &Path {
        &self.file
    }

    /// The names of all tensors, sorted.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let mut ck = rtx::io::Checkpoint::new();
    /// ck.add_model("enc", &Linear::<2, 2>::new(Device::Cpu, 0))?;
    /// assert_eq!(ck.names().collect::<Vec<_>>(), ["enc.bias", "enc.weight"]);
    /// # Ok::<(), rtx::Error>(())
    /// ```
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    /// The element type of the tensor `name`; `None` when there is no such tensor or its
    /// dtype is one rtx does not have (`F8_E4M3`, ...).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let mut ck = rtx::io::Checkpoint::new();
    /// ck.add_model("", &BatchNorm1d::<2, bf16>::new(Device::Cpu))?;
    /// assert_eq!(ck.dtype("weight"), Some(DType::BF16));
    /// assert_eq!(ck.dtype("num_batches_tracked"), Some(DType::I64)); // as PyTorch keeps it
    /// # Ok::<(), rtx::Error>(())
    /// ```
    pub fn dtype(&self, name: &str) -> Option<DType> {
        self.entries.get(name).and_then(|e| codec::from_st(e.dtype))
    }

    /// The dims of the tensor `name`, if there is one.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let mut ck = rtx::io::Checkpoint::new();
    /// ck.add_model("fc", &Linear::<3, 2>::new(Device::Cpu, 0))?;
    /// assert_eq!(ck.dims("fc.weight"), Some(&[2, 3][..])); // PyTorch's [out, in]
    /// # Ok::<(), rtx::Error>(())
    /// ```
    pub fn dims(&self, name: &str) -> Option<&[usize]> {
        self.entries.get(name).map(|e| e.dims.as_slice())
    }

    /// The metadata value stored under `key`, if any (see [`Checkpoint::set_metadata`]).
    pub fn metadata(&self, key: &str) -> Option<&str> {
        self.metadata.get(key).map(String::as_str)
    }

    /// Stores a string in the file's `__metadata__` (replacing any value of that key). Keys
    /// starting with `rtx.optimizer.` are reserved; [`Checkpoint::save`] rejects them.
    ///
    /// ```
    /// let mut ck = rtx::io::Checkpoint::new();
    /// ck.set_metadata("step", "1000");
    /// assert_eq!(ck.metadata("step"), Some("1000"));
    /// ```
    pub fn set_metadata(&mut self, key: impl Into<String>, value: impl Into<String>) -> &mut Self {
        self.metadata.insert(key.into(), value.into());
        self
    }

    /// Adds every parameter and buffer of `model`, named `prefix.` + its `state_dict` name
    /// (no prefix when `prefix` is empty), each in its own dtype (batch counts as `int64`).
    /// Fails, changing nothing, when a name is already taken.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let mut ck = rtx::io::Checkpoint::new();
    /// ck.add_model("", &BatchNorm1d::<2>::new(Device::Cpu))?;
    /// assert_eq!(ck.names().count(), 5);
    /// # Ok::<(), rtx::Error>(())
    /// ```
    pub fn add_model<M: crate::nn::Module + ?Sized>(
        &mut self,
        prefix: &str,
        model: &M,
    ) -> Result<&mut Self> {
        let owned = state_dict::export(prefix, model).map_err(|m| error(&self.file, m))?;
        self.insert(owned)?;
        Ok(self)
    }

    /// Adds an optimizer's [`OptimState`] under `prefix`: each state tensor in its own dtype,
    /// bit for bit, and each scalar (`lr`, step counts) as a 0-d `float64` tensor. The part's
    /// names are listed in the metadata key `rtx.optimizer.<prefix>`.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let mut ck = rtx::io::Checkpoint::new();
    /// ck.add_optimizer("optim", &Sgd::new(0.1))?;
    /// assert_eq!(ck.names().collect::<Vec<_>>(), ["optim.lr"]);
    /// # Ok::<(), rtx::Error>(())
    /// ```
    pub fn add_optimizer<O: Optimizer>(&mut self, prefix: &str, opt: &O) -> Result<&mut Self> {
        // A shell: the work is not generic over the optimizer (compiled once, in rtx).
        self.add_optimizer_state(prefix, opt.state_dict())
    }

    /// [`Checkpoint::add_optimizer`] with the optimizer's state exported.
    fn add_optimizer_state(&mut self, prefix: &str, state: OptimState) -> Result<&mut Self> {
        let prefix = prefix.trim_end_matches('.');
        if self.optimizers.contains_key(prefix) {
            return Err(error(
                &self.file,
                format!("already holds an optimizer under the prefix `{prefix}`"),
            ));
        }
        let mut owned = Vec::new();
        let mut part = OptimizerPart::default();
        for (name, t) in &state.tensors {
            if t.values.len() != t.dims.iter().product::<usize>() {
                return Err(error(
                    &self.file,
                    format!(
                        "optimizer state `{name}` holds {} values for dims {}",
                        t.values.len(),
                        dims_str(&t.dims)
                    ),
                ));
            }
            owned.push(Owned {
                name: key(prefix, name),
                dtype: codec::to_st(t.dtype),
                dims: t.dims.clone(),
                bytes: codec::encode_f64(t.dtype, &t.values),
            });
            part.tensors.push(name.clone());
        }
        for (name, &v) in &state.scalars {
            owned.push(Owned {
                name: key(prefix, name),
                dtype: Dtype::F64,
                dims: Vec::new(),
                bytes: v.to_le_bytes().to_vec(),
            });
            part.scalars.push(name.clone());
        }
        self.insert(owned)?;
        self.optimizers.insert(prefix.to_string(), part);
        Ok(self)
    }

    /// Adds one tensor of any element type under `name`, in its own dtype (for inputs,
    /// outputs, or anything outside a model).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let ids: Tensor<Rank1<3>, i64> = Tensor::from_array([4, 0, 9], Device::Cpu);
    /// let mut ck = rtx::io::Checkpoint::new();
    /// ck.add_tensor("ids", &ids)?;
    /// let back: Tensor<(usize,), i64> = ck.tensor("ids", Device::Cpu)?;
    /// assert_eq!(back.to_vec(), vec![4, 0, 9]);
    /// # Ok::<(), rtx::Error>(())
    /// ```
    pub fn add_tensor<S: Shape, E: Element>(
        &mut self,
        name: &str,
        tensor: &Tensor<S, E>,
    ) -> Result<&mut Self> {
        self.insert(vec![Owned {
            name: name.to_string(),
            dtype: codec::to_st(E::DTYPE),
            dims: tensor.dims().to_vec(),
            bytes: codec::encode(tensor.to_vec()),
        }])?;
        Ok(self)
    }

    /// Appends tensors, all or none: fails when a name is taken.
    fn insert(&mut self, owned: Vec<Owned>) -> Result<()> {
        let mut names = BTreeSet::new();
        for o in &owned {
            if self.entries.contains_key(&o.name) || !names.insert(&o.name) {
                return Err(error(
                    &self.file,
                    format!("the name `{}` is taken twice", o.name),
                ));
            }
        }
        for o in owned {
            let start = self.data.len();
            self.data.extend_from_slice(&o.bytes);
            let entry = Entry {
                dtype: o.dtype,
                dims: o.dims,
                bytes: start..self.data.len(),
            };
            self.entries.insert(o.name, entry);
        }
        Ok(())
    }

    /// Writes the checkpoint to `path` atomically: `path` keeps its previous content if
    /// anything fails (see the [module docs](crate::io)).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let path = std::env::temp_dir().join(format!("rtx-doc-ck-save-{}.safetensors", std::process::id()));
    /// let mut ck = rtx::io::Checkpoint::new();
    /// ck.add_model("", &Linear::<3, 2>::new(Device::Cpu, 0))?;
    /// ck.save(&path)?;
    /// assert_eq!(rtx::io::Checkpoint::open(&path)?.names().count(), 2);
    /// # std::fs::remove_file(&path).ok();
    /// # Ok::<(), rtx::Error>(())
    /// ```
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        self.save_failing_after(path.as_ref(), None)
    }

    /// [`Checkpoint::save`], with writes failing after `fail_after` bytes (for tests).
    pub(crate) fn save_failing_after(&self, path: &Path, fail_after: Option<usize>) -> Result<()> {
        if let Some(k) = self.metadata.keys().find(|k| k.starts_with(OPTIMIZER_KEY)) {
            return Err(error(
                path,
                format!("the metadata key `{k}` is reserved for optimizer parts"),
            ));
        }
        let mut metadata = self.metadata.clone();
        for (prefix, part) in &self.optimizers {
            metadata.insert(format!("{OPTIMIZER_KEY}{prefix}"), render_part(part));
        }
        let views = self.entries.iter().map(|(name, e)| {
            let view = View {
                dtype: e.dtype,
                dims: &e.dims,
                bytes: &self.data[e.bytes.clone()],
            };
            (name, view)
        });
        let bytes = st::serialize(path, views, &metadata)?;
        atomic::write(path, &bytes, fail_after)
    }

    /// Loads `model` from the tensors named `prefix.` + its `state_dict` names, strictly:
    /// every tensor of the model must be there with its dims and a float dtype (cast when it
    /// differs), and every key under `prefix` (every key of the file, for an empty prefix,
    /// except optimizer parts) must belong to the model. On error the model is unchanged.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let mut ck = rtx::io::Checkpoint::new();
    /// ck.add_model("", &Linear::<2, 3>::new(Device::Cpu, 0))?;
    /// let e = ck.load_model("", &mut Linear::<2, 4>::new(Device::Cpu, 0)).unwrap_err();
    /// assert!(e.to_string().contains("`weight` is float32 [3, 2] in the file but float32 [4, 2] in the model"));
    /// # Ok::<(), rtx::Error>(())
    /// ```
    pub fn load_model<M: crate::nn::Module + ?Sized>(
        &self,
        prefix: &str,
        model: &mut M,
    ) -> Result<()> {
        let prefix = prefix.trim_end_matches('.');
        // The entries are found by a function that is not generic over the model, so it is
        // compiled once, not in every crate for every model type.
        let stored = self.stored();
        let available = self.model_keys(prefix, &stored);
        state_dict::import(prefix, model, &stored, available).map_err(|m| error(&self.file, m))
    }

    /// Every entry, as [`state_dict::import`] reads it, by its key.
    fn stored(&self) -> BTreeMap<String, Stored<'_>> {
        self.entries
            .iter()
            .map(|(k, e)| {
                let s = Stored {
                    dtype: e.dtype,
                    dims: &e.dims,
                    bytes: &self.data[e.bytes.clone()],
                    file_key: k,
                };
                (k.clone(), s)
            })
            .collect()
    }

    /// The keys of `stored` that a model loaded from under `prefix` must use up: those under
    /// the prefix that no optimizer part owns.
    fn model_keys<'s>(
        &self,
        prefix: &str,
        stored: &'s BTreeMap<String, Stored<'_>>,
    ) -> BTreeSet<&'s String> {
        let owned_by_optimizers: BTreeSet<String> = self
            .optimizers
            .iter()
            .flat_map(|(p, part)| part.tensors.iter().chain(&part.scalars).map(|n| key(p, n)))
            .collect();
        let under = format!("{prefix}.");
        stored
            .keys()
            .filter(|k| prefix.is_empty() || k.starts_with(&under))
            .filter(|k| !owned_by_optimizers.contains(*k))
            .collect()
    }

    /// Loads an optimizer's state from the part saved under `prefix` (see
    /// [`Checkpoint::add_optimizer`]); the optimizer must have been built with the same
    /// hyper-parameters, which are not stored (the learning rate is).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let mut ck = rtx::io::Checkpoint::new();
    /// ck.add_optimizer("optim", &Sgd::new(0.25).momentum(0.9))?;
    /// let mut opt = Sgd::new(1.0).momentum(0.9);
    /// ck.load_optimizer("optim", &mut opt)?;
    /// assert_eq!(opt.lr(), 0.25);
    /// assert!(ck.load_optimizer("other", &mut opt).is_err());
    /// # Ok::<(), rtx::Error>(())
    /// ```
    pub fn load_optimizer<O: Optimizer>(&self, prefix: &str, opt: &mut O) -> Result<()> {
        // A shell: reading the state is not generic over the optimizer (compiled once).
        let state = self.optimizer_state(prefix)?;
        opt.try_load_state(state)
            .map_err(|e| self.optimizer_error(prefix, e))
    }

    /// The error of an optimizer that refused the state saved under `prefix`.
    fn optimizer_error(&self, prefix: &str, e: crate::Error) -> crate::Error {
        let prefix = prefix.trim_end_matches('.');
        error(&self.file, format!("optimizer `{prefix}`: {e}"))
    }

    /// The optimizer state saved under `prefix`, checked and decoded.
    fn optimizer_state(&self, prefix: &str) -> Result<OptimState> {
        let prefix = prefix.trim_end_matches('.');
        let Some(part) = self.optimizers.get(prefix) else {
            let parts: Vec<&String> = self.optimizers.keys().collect();
            return Err(error(
                &self.file,
                format!(
                    "holds no optimizer under the prefix `{prefix}` (optimizer parts: {parts:?})"
                ),
            ));
        };
        let mut state = OptimState::default();
        for name in &part.tensors {
            let (entry, dtype) = self.part_entry(prefix, name)?;
            let full = key(prefix, name);
            if !dtype.is_some_and(DType::is_float) {
                return Err(error(
                    &self.file,
                    format!(
                        "optimizer state `{full}` is {}, not a float type",
                        codec::name(entry.dtype)
                    ),
                ));
            }
            let values = codec::decode_f64(entry.dtype, &self.data[entry.bytes.clone()]);
            let (Some(dtype), Some(values)) = (dtype, values) else {
                return Err(error(&self.file, format!("cannot decode `{full}`")));
            };
            let dims = entry.dims.clone();
            state.tensors.insert(
                name.clone(),
                StateTensor {
                    dtype,
                    dims,
                    values,
                },
            );
        }
        for name in &part.scalars {
            let (entry, _) = self.part_entry(prefix, name)?;
            let bytes = &self.data[entry.bytes.clone()];
            let value = match codec::decode_f64(entry.dtype, bytes).as_deref() {
                Some(&[v]) if entry.dtype == Dtype::F64 && entry.dims.is_empty() => v,
                _ => {
                    return Err(error(
                        &self.file,
                        format!(
                            "optimizer scalar `{}` is {} {}, not a 0-d float64",
                            key(prefix, name),
                            codec::name(entry.dtype),
                            dims_str(&entry.dims)
                        ),
                    ));
                }
            };
            state.scalars.insert(name.clone(), value);
        }
        Ok(state)
    }

    /// The entry of an optimizer part's tensor, and its rtx dtype if rtx has one.
    fn part_entry(&self, prefix: &str, name: &str) -> Result<(&Entry, Option<DType>)> {
        let full = key(prefix, name);
        match self.entries.get(&full) {
            Some(e) => Ok((e, codec::from_st(e.dtype))),
            None => Err(error(
                &self.file,
                format!("the optimizer part `{prefix}` lists `{full}`, which the file lacks"),
            )),
        }
    }

    /// The tensor `name` as a `Tensor<S, E>` on `device`: bit for bit when the file's dtype
    /// is `E`, cast when both are float types; its dims must fit `S`.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let mut ck = rtx::io::Checkpoint::new();
    /// ck.add_tensor("x", &Tensor::<Rank2<2, 3>>::ones((Const, Const), Device::Cpu))?;
    /// let x: Tensor<(usize, Const<3>), f64> = ck.tensor("x", Device::Cpu)?;
    /// assert_eq!(x.dims(), &[2, 3]);
    /// assert!(ck.tensor::<Rank2<3, 3>, f32>("x", Device::Cpu).is_err());
    /// # Ok::<(), rtx::Error>(())
    /// ```
    pub fn tensor<S: Shape, E: Element>(&self, name: &str, device: Device) -> Result<Tensor<S, E>> {
        let Some(entry) = self.entries.get(name) else {
            return Err(error(&self.file, format!("has no tensor `{name}`")));
        };
        let file_dtype = codec::from_st(entry.dtype);
        let castable = file_dtype.is_some_and(DType::is_float) && E::DTYPE.is_float();
        if file_dtype != Some(E::DTYPE) && !castable {
            return Err(error(
                &self.file,
                format!(
                    "`{name}` is {} in the file, not {}",
                    codec::name(entry.dtype),
                    E::DTYPE
                ),
            ));
        }
        let Some(shape) = S::from_dims(&entry.dims) else {
            return Err(error(
                &self.file,
                format!(
                    "`{name}` is {} in the file, which does not fit the shape `{}`",
                    dims_str(&entry.dims),
                    short_type_name(std::any::type_name::<S>())
                ),
            ));
        };
        let values = codec::decode_as::<E>(entry.dtype, &self.data[entry.bytes.clone()])
            .ok_or_else(|| {
                error(
                    &self.file,
                    format!("`{name}` holds a bool that is not 0 or 1"),
                )
            })?;
        Tensor::try_from_vec(values, shape, device)
    }
}

impl Checkpoint {
    /// The tensor `name` on `device` in the file's own element type and dims, bit for bit:
    /// what a graph loaded without its model type takes its parameters from.
    pub(crate) fn dyn_tensor(&self, name: &str, device: Device) -> Result<crate::ir::DynTensor> {
        fn typed<E: Element>(
            ck: &Checkpoint,
            name: &str,
            device: Device,
        ) -> Result<crate::ir::DynTensor> {
            let t: Tensor<(usize,), E> = ck.tensor_flat(name, device)?;
            let dims = ck.dims(name).unwrap_or_default().to_vec();
            Ok(crate::ir::DynTensor::of(&t).with_layout(rtx_backends::Layout::contiguous(&dims)))
        }
        let Some(entry) = self.entries.get(name) else {
            return Err(error(&self.file, format!("has no tensor `{name}`")));
        };
        match codec::from_st(entry.dtype) {
            Some(DType::F32) => typed::<f32>(self, name, device),
            Some(DType::F64) => typed::<f64>(self, name, device),
            Some(DType::F16) => typed::<half::f16>(self, name, device),
            Some(DType::BF16) => typed::<half::bf16>(self, name, device),
            Some(DType::I32) => typed::<i32>(self, name, device),
            Some(DType::I64) => typed::<i64>(self, name, device),
            Some(DType::U8) => typed::<u8>(self, name, device),
            Some(DType::Bool) => typed::<bool>(self, name, device),
            None => Err(error(
                &self.file,
                format!(
                    "`{name}` is {}, which rtx has no element type for",
                    codec::name(entry.dtype)
                ),
            )),
        }
    }

    /// The tensor `name` flattened to `[numel]` in element type `E` (the file's, or a float
    /// cast), for [`Checkpoint::dyn_tensor`].
    fn tensor_flat<E: Element>(&self, name: &str, device: Device) -> Result<Tensor<(usize,), E>> {
        let Some(entry) = self.entries.get(name) else {
            return Err(error(&self.file, format!("has no tensor `{name}`")));
        };
        let values = codec::decode_as::<E>(entry.dtype, &self.data[entry.bytes.clone()])
            .ok_or_else(|| {
                error(
                    &self.file,
                    format!("`{name}` holds a bool that is not 0 or 1"),
                )
            })?;
        let n = values.len();
        Tensor::try_from_vec(values, (n,), device)
    }
}

/// The metadata value of an optimizer part: a JSON object of two name lists.
fn render_part(part: &OptimizerPart) -> String {
    serde_json::json!({ "tensors": part.tensors, "scalars": part.scalars }).to_string()
}

/// Reads [`render_part`]'s output back.
fn parse_part(file: &Path, key: &str, value: &str) -> Result<OptimizerPart> {
    let bad = || {
        error(
            file,
            format!("the metadata `{key}` is not an optimizer part list: {value}"),
        )
    };
    let json: serde_json::Value = serde_json::from_str(value).map_err(|_| bad())?;
    let names = |field: &str| -> Result<Vec<String>> {
        let list = json.get(field).and_then(|v| v.as_array()).ok_or_else(bad)?;
        list.iter()
            .map(|n| n.as_str().map(str::to_string).ok_or_else(bad))
            .collect()
    };
    Ok(OptimizerPart {
        tensors: names("tensors")?,
        scalars: names("scalars")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prelude::*;

    #[test]
    fn a_save_failing_part_way_keeps_the_previous_checkpoint() {
        let dir = std::env::temp_dir().join(format!("rtx-ck-fail-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("model.safetensors");
        let old = Linear::<4, 3>::new(Device::Cpu, 1);
        old.save(&path).unwrap();
        let before = std::fs::read(&path).unwrap();
        let mut ck = Checkpoint::new();
        ck.add_model("", &Linear::<4, 3>::new(Device::Cpu, 2))
            .unwrap();
        let total = {
            ck.save(dir.join("probe.safetensors")).unwrap();
            std::fs::read(dir.join("probe.safetensors")).unwrap().len()
        };
        std::fs::remove_file(dir.join("probe.safetensors")).unwrap();
        for n in [0, 8, total / 2, total - 1] {
            let e = ck.save_failing_after(&path, Some(n)).unwrap_err();
            assert!(e.to_string().contains("model.safetensors"), "{e}");
            assert_eq!(
                std::fs::read(&path).unwrap(),
                before,
                "failed after {n} bytes"
            );
            let mut loaded = Linear::<4, 3>::new(Device::Cpu, 3);
            loaded.load(&path).unwrap();
            assert_eq!(loaded.weight.to_vec(), old.weight.to_vec());
            let files: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
            assert_eq!(files.len(), 1, "a temporary file was left behind");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn reserved_metadata_and_taken_names_are_refused() {
        let mut ck = Checkpoint::new();
        ck.add_model("m", &Linear::<2, 2>::new(Device::Cpu, 0))
            .unwrap();
        let e = ck
            .add_model("m", &Linear::<2, 2>::new(Device::Cpu, 0))
            .unwrap_err();
        assert!(e.to_string().contains("`m.weight` is taken twice"), "{e}");
        assert_eq!(ck.names().count(), 2);
        ck.set_metadata("rtx.optimizer.x", "{}");
        let path = std::env::temp_dir().join(format!("rtx-ck-meta-{}", std::process::id()));
        let e = ck.save(&path).unwrap_err();
        assert!(e.to_string().contains("reserved"), "{e}");
        assert!(!path.exists());
    }
}
