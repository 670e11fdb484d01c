//! Optimizer state: the per-parameter tensors and counters an optimizer keeps between steps,
//! and their export as [`OptimState`] for checkpoints.
//!
//! Names follow PyTorch's `state_dict()`: `state.<param name>.exp_avg`,
//! `state.<param name>.exp_avg_sq`, `state.<param name>.max_exp_avg_sq`,
//! `state.<param name>.momentum_buffer` (tensors) and `state.<param name>.step` (a scalar), plus
//! the scalar `lr`. Values are exported as `f64`, which holds every float element type exactly,
//! so export followed by import restores the state bit for bit.

use crate::error::{Result, bail};
use crate::shape::Dims;
use rtx_backends::{Device, Layout, Storage};
use rtx_kernels::{DType, Element, Float};
use std::any::Any;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// One exported state tensor: its element type, dims and values in row-major order.
#[derive(Clone, Debug, PartialEq)]
pub struct StateTensor {
    /// The element type the optimizer keeps it in (the parameter's).
    pub dtype: DType,
    /// The dims, as the parameter's.
    pub dims: Vec<usize>,
    /// The values, widened to `f64` (exact for every float type).
    pub values: Vec<f64>,
}

/// An optimizer's exported state: named tensors and named scalars (see the module docs for
/// the names).
///
/// ```
/// # use rtx::prelude::*;
/// let w: Tensor<Rank1<2>> = Tensor::from_array([1.0, 2.0], Device::Cpu).requires_grad();
/// let mut model = w;
/// let grads = (&model * &model).sum_all().backward();
/// let mut opt = Adam::new(0.1);
/// opt.step(&mut model, &grads);
/// let state = opt.state_dict();
/// assert_eq!(state.scalars["state.step"], 1.0);
/// assert_eq!(state.tensors["state.exp_avg"].dims, vec![2]);
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OptimState {
    /// State tensors by name (`state.<param>.exp_avg`, ...).
    pub tensors: BTreeMap<String, StateTensor>,
    /// Scalars by name (`state.<param>.step`, `lr`).
    pub scalars: BTreeMap<String, f64>,
}

/// A live state tensor: dense storage of the parameter's element type and its dims. It holds
/// no shape type, so the state code is compiled once per element type, not once per shape.
struct Dense<E> {
    storage: Arc<Storage<E>>,
    dims: Dims,
}

/// A live state tensor of any float type, exportable without knowing it.
trait Live: Send + Sync {
    fn export(&self) -> StateTensor;
    fn as_any(&self) -> &dyn Any;
}

impl<E: Float> Live for Dense<E> {
    fn export(&self) -> StateTensor {
        let values = self.storage.to_vec(&Layout::contiguous(&self.dims));
        StateTensor {
            dtype: E::DTYPE,
            dims: self.dims.to_vec(),
            values: values.into_iter().map(Element::to_f64).collect(),
        }
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A state tensor: live (typed at the last step) or imported and not yet used.
enum Slot {
    Live(Box<dyn Live>),
    Loaded(StateTensor),
}

/// The state of one optimizer: tensors and scalars by their exported names.
#[derive(Default)]
pub(crate) struct Store {
    tensors: BTreeMap<String, Slot>,
    scalars: BTreeMap<String, f64>,
}

/// What a failed GPU step goes back to: the scalars (step counts) and which state tensors
/// existed. Tensor values need no copy: a GPU step changes them only in its final launches.
pub(crate) struct Mark {
    scalars: BTreeMap<String, f64>,
    keys: BTreeSet<String>,
}

/// The exported name of a parameter's state entry.
pub(crate) fn key(param: &str, entry: &str) -> String {
    if param.is_empty() {
        format!("state.{entry}")
    } else {
        format!("state.{param}.{entry}")
    }
}

impl Store {
    /// The state tensor `key` (dense, of `dims`) for a parameter of dims `dims` on `device`,
    /// or `None` when there is none yet. Imported state is checked against the parameter's
    /// dims and element type here, the first time the parameter is seen.
    pub(crate) fn tensor<E: Float>(
        &self,
        op: &'static str,
        key: &str,
        dims: &[usize],
        device: Device,
    ) -> Result<Option<Arc<Storage<E>>>> {
        match self.tensors.get(key) {
            None => Ok(None),
            Some(Slot::Live(t)) => match t.as_any().downcast_ref::<Dense<E>>() {
                Some(t) if *t.dims == *dims => Ok(Some(t.storage.clone())),
                _ => bail!(
                    op,
                    "state `{key}` was kept for a {} tensor of dims {:?}, but the parameter is a {} tensor of dims {:?}",
                    t.export().dtype,
                    t.export().dims,
                    E::DTYPE,
                    dims
                ),
            },
            Some(Slot::Loaded(s)) => {
                if s.dtype != E::DTYPE || s.dims != dims {
                    bail!(
                        op,
                        "loaded state `{key}` is a {} tensor of dims {:?}, but the parameter is a {} tensor of dims {:?}",
                        s.dtype,
                        s.dims,
                        E::DTYPE,
                        dims
                    );
                }
                let numel: usize = dims.iter().product();
                if s.values.len() != numel {
                    bail!(
                        op,
                        "loaded state `{key}` holds {} values for dims {:?}",
                        s.values.len(),
                        s.dims
                    );
                }
                let data = s.values.iter().map(|&x| E::from_f64(x)).collect();
                Ok(Some(Arc::new(Storage::from_vec(data, device)?)))
            }
        }
    }

    /// Drops the stored handle of `key`, so that a tensor read from it with [`Store::tensor`]
    /// becomes the only handle to its storage and can be updated in place (then stored again
    /// with [`Store::set_tensor`]).
    pub(crate) fn release(&mut self, key: &str) {
        self.tensors.remove(key);
    }

    /// Stores a state tensor: dense storage of `dims` (fresh from a backend update).
    pub(crate) fn set_tensor<E: Float>(
        &mut self,
        key: String,
        storage: Arc<Storage<E>>,
        dims: &[usize],
    ) {
        debug_assert_eq!(storage.len(), dims.iter().product::<usize>());
        let dims = Dims::new(dims);
        self.tensors
            .insert(key, Slot::Live(Box::new(Dense { storage, dims })));
    }

    /// A scalar by name.
    pub(crate) fn scalar(&self, key: &str) -> Option<f64> {
        self.scalars.get(key).copied()
    }

    /// Sets a scalar.
    pub(crate) fn set_scalar(&mut self, key: String, v: f64) {
        self.scalars.insert(key, v);
    }

    /// The step counts and state names now, to [`Store::rollback`] to.
    pub(crate) fn mark(&self) -> Mark {
        Mark {
            scalars: self.scalars.clone(),
            keys: self.tensors.keys().cloned().collect(),
        }
    }

    /// Back to `mark`: its scalars, and no state tensor that was created after it.
    pub(crate) fn rollback(&mut self, mark: Mark) {
        self.scalars = mark.scalars;
        self.tensors.retain(|k, _| mark.keys.contains(k));
    }

    /// Everything, exported; `lr` is added as the scalar `lr`.
    pub(crate) fn export(&self, lr: f64) -> OptimState {
        let tensors = self
            .tensors
            .iter()
            .map(|(k, s)| {
                let t = match s {
                    Slot::Live(t) => t.export(),
                    Slot::Loaded(t) => t.clone(),
                };
                (k.clone(), t)
            })
            .collect();
        let mut scalars = self.scalars.clone();
        scalars.insert("lr".to_string(), lr);
        OptimState { tensors, scalars }
    }

    /// Replaces everything with imported state; returns the imported `lr`, if any.
    pub(crate) fn import(&mut self, op: &'static str, state: OptimState) -> Result<Option<f64>> {
        for (k, t) in &state.tensors {
            if !t.dtype.is_float() {
                bail!(
                    op,
                    "state `{k}` has element type {}, not a float type",
                    t.dtype
                );
            }
            if t.values.len() != t.dims.iter().product::<usize>() {
                bail!(
                    op,
                    "state `{k}` holds {} values for dims {:?}",
                    t.values.len(),
                    t.dims
                );
            }
        }
        let OptimState {
            tensors,
            mut scalars,
        } = state;
        let lr = scalars.remove("lr");
        self.tensors = tensors
            .into_iter()
            .map(|(k, t)| (k, Slot::Loaded(t)))
            .collect();
        self.scalars = scalars;
        Ok(lr)
    }
}

/// Fresh dense zeros of `dims` on `device` (a state tensor's initial value).
pub(crate) fn zeros<E: Float>(dims: &[usize], device: Device) -> Result<Arc<Storage<E>>> {
    let numel = dims.iter().product();
    Ok(Arc::new(Storage::from_vec(vec![E::ZERO; numel], device)?))
}
