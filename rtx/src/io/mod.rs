//! Checkpoints: models, optimizer state and metadata in [safetensors] files that PyTorch reads
//! and writes, saved atomically and read with every byte checked; and [`Gguf`], llama.cpp's
//! files of pretrained (often quantized) weights, read the same way.
//!
//! ```
//! use rtx::prelude::*;
//!
//! # fn main() -> rtx::Result<()> {
//! let path = std::env::temp_dir().join(format!("rtx-doc-io-{}.safetensors", std::process::id()));
//! let model = Linear::<4, 2>::new(Device::Cpu, 0);
//! model.save(&path)?; // the same file as `safetensors.torch.save_file(model.state_dict(), path)`
//! let mut copy = Linear::<4, 2>::new(Device::Cpu, 1);
//! copy.load(&path)?;
//! assert_eq!(copy.weight.to_vec(), model.weight.to_vec());
//! # std::fs::remove_file(&path).ok();
//! # Ok(())
//! # }
//! ```
//!
//! **File format.** A safetensors file: an 8-byte little-endian header length, a JSON header
//! mapping each tensor's name to its `dtype` (`F32`, `F64`, `F16`, `BF16`, `I64`, ...),
//! `shape` and `data_offsets`, an optional `__metadata__` object of strings, then the raw
//! little-endian bytes of every tensor, back to back. [`ModelExt::save`](crate::nn::ModelExt)
//! writes only the model's tensors and no metadata, so its file is what PyTorch's
//! `safetensors.torch.save_file(model.state_dict(), path)` writes for the twin model, and
//! `safetensors.torch.load_file` + `load_state_dict(..., strict=True)` reads it back.
//! A [`Checkpoint`] holds several parts in one file, each under a prefix (`model.fc.weight`,
//! `optim.state.fc.weight.exp_avg`, `optim.lr`); an empty prefix means none. An optimizer
//! part stores its [`OptimState`](crate::optim::OptimState): state tensors in their own dtype
//! and scalars (learning rate, step counts) as 0-d `F64` tensors, with the list of its names in
//! the metadata key `rtx.optimizer.<prefix>`, so loading it is exact and strict.
//!
//! **Naming contract.** Keys are the dotted names of [`Module::visit`](crate::nn::Module),
//! which follow PyTorch's `state_dict()`: a `#[model]` field `encoder` holding a `Linear`
//! gives `encoder.weight` and `encoder.bias`, array and `Vec` elements are numbered
//! (`blocks.3.attn.qkv.weight`), and every layer keeps PyTorch's layout (`Linear.weight` is
//! `[out, in]`, `Conv2d.weight` is `[out, in/groups, k, k]`, attention's fused `qkv` is an
//! `nn.Linear(D, 3D)`). A PyTorch module with the same attribute names in the same nesting
//! has the same keys; `tests/fixtures/torch_twins.py` is the executable statement of this.
//!
//! **Batch counts.** PyTorch's `BatchNorm` keeps `num_batches_tracked` as an `int64` scalar;
//! rtx keeps it as a float scalar of the layer's dtype, since modules visit float tensors
//! only. A 0-d buffer with that name is therefore written as `I64` (so the file matches
//! PyTorch's, dtype included) and read from any integer or float dtype. rtx's `BatchNorm`
//! uses a fixed momentum, so the count never changes its output; loading it anyway keeps a
//! round trip exact. As in PyTorch (whose `BatchNorm` fills in a count missing from a state
//! dict), a count missing from the file keeps the model's value, and a count in the file that
//! the model does not keep (a hand-written norm layer) is skipped rather than unexpected.
//!
//! **Loading is strict**, as PyTorch's `load_state_dict(strict=True)`: a tensor of the model
//! missing from the file, a key of the file the model does not have, a wrong shape or a
//! non-float dtype is an error naming the file, the key and both shapes and dtypes (batch
//! counts aside, see above); all the problems are reported at once, and the model is left
//! unchanged. Parameters that tracked gradients still do after loading, as fresh leaves;
//! frozen ones stay frozen.
//!
//! **Dtype casts.** A float tensor of another float dtype is cast on load, as PyTorch's
//! `load_state_dict` copies into the existing parameter with a cast: an `F64` file loads into
//! an `f32` model, each value rounded once to nearest-even. The same dtype is copied bit for
//! bit, so save followed by load restores a model exactly in every float type. Integer
//! dtypes load only into batch counts.
//!
//! **Atomic writes.** Saving writes to a temporary file in the target's directory, syncs it to
//! disk, renames it over the target and syncs the directory. A crash or error at any point
//! leaves the previous file complete (and at worst a hidden `.NAME.tmp-*` file beside it, which
//! an error removes); no reader ever sees a half-written checkpoint.
//!
//! **Reading never trusts the file.** The header length, the JSON, each tensor's dtype, shape
//! and offsets, and that the tensors tile the data exactly are all checked before any value is
//! read; a truncated or corrupt file is an [`Error::Checkpoint`](crate::Error) naming the file
//! and, where known, the tensor, never a panic and never wrong numbers.
//!
//! **Other people's checkpoints.** [`HfCheckpoint`] opens a Hugging Face checkpoint (one
//! `model.safetensors`, or the shards a `model.safetensors.index.json` lists), memory-mapped
//! and validated shard by shard, and loads it into a model through a [`KeyMap`] that renames
//! the checkpoint's keys to the model's (and leaves out the ones the model has no use for).
//! Loading is as strict as above; errors name both the model's and the file's key.
//!
//! [safetensors]: https://huggingface.co/docs/safetensors

pub(crate) mod atomic;
mod checkpoint;
mod codec;
mod gguf;
mod hf;
mod key_map;
mod safetensors;
mod state_dict;

pub use checkpoint::Checkpoint;
pub use gguf::{Gguf, GgufTensorInfo, GgufValue};
pub use hf::HfCheckpoint;
pub use key_map::KeyMap;
