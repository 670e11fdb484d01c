//! A model's tensors to and from checkpoint entries, by their PyTorch `state_dict` names.
//!
//! Loading is strict and all-or-nothing: every problem (missing keys, unexpected keys, wrong
//! shapes, non-float dtypes) is found in a dry run and reported together, before any tensor of
//! the model is replaced. Parameters that tracked gradients still do afterwards, as new leaves.
//! The one leniency is PyTorch's own: a batch-norm batch count missing from the file keeps the
//! model's value, and one the model lacks is skipped.

use super::codec;
use super::safetensors::dims_str;
use crate::nn::{Module, TensorKind, Visitor, VisitorMut};
use crate::shape::{Shape, describe};
use crate::tensor::Tensor;
use ::safetensors::Dtype;
use rtx_backends::{Device, Storage};
use rtx_kernels::{DType, Float};
use std::collections::{BTreeMap, BTreeSet};

/// One tensor as [`import`] reads it: its dtype, dims and bytes, and the key it has in the
/// file, which differs from the model's name when a [`KeyMap`](super::KeyMap) renamed it.
pub(crate) struct Stored<'a> {
    pub dtype: Dtype,
    pub dims: &'a [usize],
    pub bytes: &'a [u8],
    pub file_key: &'a str,
}

impl Stored<'_> {
    /// `` `name` `` and, when the file calls it something else, `` (`file.key` in the file) ``.
    fn named(&self, name: &str) -> String {
        if self.file_key == name {
            format!("`{name}`")
        } else {
            format!("`{name}` (`{}` in the file)", self.file_key)
        }
    }
}

/// One tensor ready to store: its name, dtype, dims and bytes.
pub(crate) struct Owned {
    pub name: String,
    pub dtype: Dtype,
    pub dims: Vec<usize>,
    pub bytes: Vec<u8>,
}

/// `prefix` + `.` + `name`, or `name` alone for an empty prefix.
pub(crate) fn key(prefix: &str, name: &str) -> String {
    match prefix.trim_end_matches('.') {
        "" => name.to_string(),
        p => format!("{p}.{name}"),
    }
}

/// Whether `name` is a batch-norm batch count, which PyTorch keeps as an `int64` scalar and
/// rtx as a float scalar (modules visit float tensors only).
fn is_batch_count(name: &str, kind: TensorKind, dims: &[usize]) -> bool {
    kind == TensorKind::Buffer && dims.is_empty() && is_count_name(name)
}

/// Whether a key names a batch count (`num_batches_tracked`, alone or as a last component).
fn is_count_name(name: &str) -> bool {
    name == "num_batches_tracked" || name.ends_with(".num_batches_tracked")
}

/// Every tensor of `model`, named under `prefix`, as stored bytes: in its own dtype, except
/// batch counts, which are stored as `int64` as PyTorch stores them.
pub(crate) fn export<M: Module + ?Sized>(prefix: &str, model: &M) -> Result<Vec<Owned>, String> {
    struct Export<'a> {
        prefix: &'a str,
        out: Vec<Owned>,
        error: Option<String>,
    }
    impl Visitor for Export<'_> {
        fn visit<S: Shape, E: Float>(&mut self, name: &str, t: &Tensor<S, E>, kind: TensorKind) {
            // A shell: the body needs only the values and dims (compiled once per element
            // type, not once per parameter shape).
            self.push(name, t.to_vec(), t.dims(), kind);
        }
    }
    impl Export<'_> {
        /// Adds the tensor `name` holding `values` of `dims`.
        fn push<E: Float>(&mut self, name: &str, values: Vec<E>, dims: &[usize], kind: TensorKind) {
            let name = key(self.prefix, name);
            let dims = dims.to_vec();
            let owned = if is_batch_count(&name, kind, &dims) {
                let v = values.first().map_or(0.0, |x| x.to_f64());
                if !(v.fract() == 0.0 && v.abs() < 2f64.powi(63)) {
                    self.error.get_or_insert(format!(
                        "`{name}` holds {v}, which is not a whole batch count"
                    ));
                    return;
                }
                let bytes = codec::encode_f64(DType::I64, &[v]);
                Owned {
                    name,
                    dtype: Dtype::I64,
                    dims,
                    bytes,
                }
            } else {
                let bytes = codec::encode(values);
                let dtype = codec::to_st(E::DTYPE);
                Owned {
                    name,
                    dtype,
                    dims,
                    bytes,
                }
            };
            self.out.push(owned);
        }
    }
    let mut e = Export {
        prefix,
        out: Vec::new(),
        error: None,
    };
    model.visit("", &mut e);
    match e.error {
        Some(msg) => Err(msg),
        None => Ok(e.out),
    }
}

/// Sets every tensor of `model` from `entries` (keyed by the model's names, under `prefix`),
/// strictly: `available` is the set of keys the model must use up. Returns the problems
/// found, or nothing when the model has been loaded.
pub(crate) fn import<M: Module + ?Sized>(
    prefix: &str,
    model: &mut M,
    entries: &BTreeMap<String, Stored>,
    available: BTreeSet<&String>,
) -> Result<(), String> {
    let mut check = Import {
        prefix,
        entries,
        apply: false,
        seen: BTreeSet::new(),
        missing: Vec::new(),
        problems: Vec::new(),
    };
    model.visit_mut("", &mut check);
    check.report(available)?;
    let mut apply = Import {
        apply: true,
        problems: Vec::new(),
        ..check
    };
    model.visit_mut("", &mut apply);
    match apply.problems.first() {
        Some(p) => Err(p.clone()),
        None => Ok(()),
    }
}

impl Import<'_> {
    /// After the dry run: every problem found (missing keys, keys of `available` the model
    /// did not use, and the checks' problems), or nothing when the model can be loaded. Not
    /// generic over the model, so it is compiled once.
    fn report(&self, available: BTreeSet<&String>) -> Result<(), String> {
        // PyTorch's BatchNorm fills in a missing count and rtx layers may not keep one, so a
        // count the model does not have is skipped rather than unexpected.
        let entries = self.entries;
        let unexpected: Vec<String> = available
            .into_iter()
            .filter(|k| !self.seen.contains(*k))
            .filter(|k| !(is_count_name(k) && entries.get(*k).is_some_and(|e| e.dims.is_empty())))
            .map(|k| entries[k].file_key.to_string())
            .collect();
        let mut report = Vec::new();
        if !self.missing.is_empty() {
            report.push(format!("missing keys: {}", list(&self.missing)));
        }
        if !unexpected.is_empty() {
            report.push(format!("unexpected keys: {}", list(&unexpected)));
        }
        report.extend(self.problems.iter().cloned());
        if !report.is_empty() {
            return Err(format!("does not fit the model: {}", report.join("; ")));
        }
        Ok(())
    }
}

/// Names as `` `a`, `b` ``, the first 20 only.
fn list(names: &[String]) -> String {
    let mut s: Vec<String> = names.iter().take(20).map(|n| format!("`{n}`")).collect();
    if names.len() > 20 {
        s.push(format!("and {} more", names.len() - 20));
    }
    s.join(", ")
}

/// Checks each tensor against its entry and, when `apply`, replaces it.
struct Import<'a> {
    prefix: &'a str,
    entries: &'a BTreeMap<String, Stored<'a>>,
    apply: bool,
    seen: BTreeSet<String>,
    missing: Vec<String>,
    problems: Vec<String>,
}

impl VisitorMut for Import<'_> {
    fn visit_mut<S: Shape, E: Float>(
        &mut self,
        name: &str,
        t: &mut Tensor<S, E>,
        kind: TensorKind,
    ) {
        // Only the shape's description and the new tensor need `S`: the checks and the
        // decoding are one function of `E`, compiled once however many parameter shapes a
        // model has (ARCHITECTURE.md, "Build time").
        let shape = describe(&t.shape());
        if let Some(storage) = self.load::<E>(name, t.dims(), kind, shape, t.device()) {
            t.set_storage(storage);
        }
    }
}

impl Import<'_> {
    /// [`Import::decode`] for the tensor `name` of `dims` (described as `shape`), then the
    /// values as fresh storage on `device`; a problem is recorded instead when they do not
    /// fill `dims` or the device fails.
    fn load<E: Float>(
        &mut self,
        name: &str,
        dims: &[usize],
        kind: TensorKind,
        shape: String,
        device: Device,
    ) -> Option<Storage<E>> {
        let here = format!("{} {shape}", E::DTYPE);
        let (named, values) = self.decode::<E>(name, dims, kind, &here)?;
        let numel: usize = dims.iter().product();
        let stored = match values.len() == numel {
            true => Storage::from_vec(values, device)
                .map_err(|e| format!("{named}: {}", crate::Error::from(e))),
            false => Err(format!(
                "{named}: from_vec: {} elements given for shape {dims:?}, which holds {numel}",
                values.len()
            )),
        };
        stored.map_err(|p| self.problems.push(p)).ok()
    }
}

impl Import<'_> {
    /// Checks the entry for the parameter `name` (of `dims`, described as `here`) against
    /// the model and decodes its values as `E` when the import applies: the entry's full name
    /// and the values, or `None` (a missing entry, a problem recorded, or only checking).
    fn decode<E: Float>(
        &mut self,
        name: &str,
        dims: &[usize],
        kind: TensorKind,
        here: &str,
    ) -> Option<(String, Vec<E>)> {
        let name = key(self.prefix, name);
        let Some(entry) = self.entries.get(&name) else {
            // A count missing from the file keeps its value, as PyTorch's BatchNorm does for
            // state dicts without one.
            if !is_batch_count(&name, kind, dims) {
                self.missing.push(name);
            }
            return None;
        };
        let file_dtype = codec::name(entry.dtype);
        let named = entry.named(&name);
        let fits_dtype = match codec::from_st(entry.dtype) {
            Some(d) if d.is_float() => true,
            Some(DType::I64 | DType::I32 | DType::U8) => is_batch_count(&name, kind, dims),
            _ => false,
        };
        if !fits_dtype {
            self.problems.push(format!(
                "{named} is {file_dtype} in the file, not a float type, but {here} in the model"
            ));
        } else if entry.dims != dims {
            self.problems.push(format!(
                "{named} is {file_dtype} {} in the file but {here} in the model",
                dims_str(entry.dims)
            ));
        }
        self.seen.insert(name.clone());
        if !self.apply {
            return None;
        }
        match codec::decode_as::<E>(entry.dtype, entry.bytes) {
            Some(values) => Some((named, values)),
            None => {
                self.problems
                    .push(format!("{named}: cannot decode its {file_dtype} bytes"));
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_join_with_one_dot() {
        assert_eq!(key("", "fc.weight"), "fc.weight");
        assert_eq!(key("model", "fc.weight"), "model.fc.weight");
        assert_eq!(key("model.", "fc.weight"), "model.fc.weight");
    }

    #[test]
    fn only_scalar_buffers_named_so_are_batch_counts() {
        let b = TensorKind::Buffer;
        assert!(is_batch_count("bn.num_batches_tracked", b, &[]));
        assert!(is_batch_count("num_batches_tracked", b, &[]));
        assert!(!is_batch_count(
            "bn.num_batches_tracked",
            TensorKind::Parameter,
            &[]
        ));
        assert!(!is_batch_count("bn.num_batches_tracked", b, &[1]));
        assert!(!is_batch_count("bn.my_num_batches_tracked", b, &[]));
    }
}
