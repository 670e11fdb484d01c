//! The executor's values: [`DynTensor`], a tensor whose element type and dims are run-time
//! values (storage shared with the typed tensor it came from, never copied), and [`Params`],
//! a graph's parameters by their dotted names, taken from a model or read from a checkpoint.
//!
//! Invariant: a `DynTensor`'s storage is a `Storage<E>` of its `dtype`, and its layout stays
//! inside it, as a `Tensor`'s does.

use crate::error::{Error, Result};
use crate::io::Checkpoint;
use crate::nn::{Module, TensorKind, Visitor};
use crate::shape::Shape;
use crate::tensor::Tensor;
use rtx_backends::{Device, Layout, Storage};
use rtx_kernels::{DType, Element, Float};
use std::any::Any;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A tensor whose element type and dims are known only at run time: what [`Graph::run`]
/// reads and returns. Made from a typed tensor (sharing its storage) and turned back into
/// one with [`DynTensor::to_tensor`], which checks both.
///
/// [`Graph::run`]: crate::ir::Graph::run
///
/// ```
/// use rtx::ir::DynTensor;
/// use rtx::prelude::*;
/// let x: Tensor<Rank2<2, 3>> = Tensor::ones((Const, Const), Device::Cpu);
/// let d = DynTensor::of(&x);
/// assert_eq!((d.dims(), d.dtype()), (&[2, 3][..], rtx::DType::F32));
/// let back: Tensor<(usize, Const<3>)> = d.to_tensor().unwrap();
/// assert_eq!(back.to_vec(), x.to_vec());
/// assert!(d.to_tensor::<(usize, Const<4>), f32>().is_err());
/// ```
#[derive(Clone)]
pub struct DynTensor {
    /// A `Storage<E>` of element type `dtype`.
    storage: Arc<dyn Any + Send + Sync>,
    dtype: DType,
    device: Device,
    layout: Layout,
}

impl std::fmt::Debug for DynTensor {
    /// `DynTensor([2, 3] f32 on cpu)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DynTensor({:?} {} on {:?})",
            self.layout.dims(),
            self.dtype,
            self.device
        )
    }
}

impl DynTensor {
    /// `t` with its shape and element type as run-time values; the storage is shared.
    pub fn of<S: Shape, E: Element>(t: &Tensor<S, E>) -> DynTensor {
        DynTensor::from_arc(t.storage_arc().clone(), *t.layout())
    }

    /// The storage `s` seen through `layout`.
    pub(crate) fn from_arc<E: Element>(s: Arc<Storage<E>>, layout: Layout) -> DynTensor {
        DynTensor {
            device: s.device(),
            storage: s,
            dtype: E::DTYPE,
            layout,
        }
    }

    /// Fresh dense storage of sizes `dims`.
    pub(crate) fn dense<E: Element>(s: Storage<E>, dims: &[usize]) -> DynTensor {
        DynTensor::from_arc(Arc::new(s), Layout::contiguous(dims))
    }

    /// The sizes, outermost first.
    pub fn dims(&self) -> &[usize] {
        self.layout.dims()
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The device the storage lives on.
    pub fn device(&self) -> Device {
        self.device
    }

    /// How the storage is seen (sizes, strides, offset).
    pub(crate) fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The same storage seen through `layout` (a view: the caller keeps it inside).
    pub(crate) fn with_layout(&self, layout: Layout) -> DynTensor {
        DynTensor {
            layout,
            ..self.clone()
        }
    }

    /// The storage as `Storage<E>`, or an error naming both element types.
    pub(crate) fn storage<E: Element>(&self) -> Result<&Storage<E>> {
        self.storage
            .downcast_ref::<Storage<E>>()
            .ok_or_else(|| exec_error(format!("a {} tensor was read as {}", self.dtype, E::DTYPE)))
    }

    /// The storage handle as `Arc<Storage<E>>` (see [`DynTensor::storage`]).
    pub(crate) fn storage_arc<E: Element>(&self) -> Result<Arc<Storage<E>>> {
        self.storage
            .clone()
            .downcast::<Storage<E>>()
            .map_err(|_| exec_error(format!("a {} tensor was read as {}", self.dtype, E::DTYPE)))
    }

    /// The typed tensor of shape `S` and element type `E`, sharing the storage; an error when
    /// the element type differs or the dims do not fit `S`.
    pub fn to_tensor<S: Shape, E: Element>(&self) -> Result<Tensor<S, E>> {
        let storage = self.storage_arc::<E>()?;
        let shape = S::from_dims(self.dims()).ok_or_else(|| {
            exec_error(format!(
                "a tensor of dims {:?} does not fit the shape {}",
                self.dims(),
                crate::nn::model::short_type_name(std::any::type_name::<S>())
            ))
        })?;
        Ok(Tensor::from_arc_layout(storage, self.layout, shape))
    }

    /// The values as `f64`, in row-major order (for tests and display; every type converts).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        fn typed<E: Element>(t: &DynTensor) -> Vec<f64> {
            match t.storage::<E>() {
                Ok(s) => s
                    .to_vec(&t.layout)
                    .into_iter()
                    .map(|v| v.to_f64())
                    .collect(),
                Err(_) => unreachable!("the dtype tag is the storage's type"),
            }
        }
        match self.dtype {
            DType::F32 => typed::<f32>(self),
            DType::F64 => typed::<f64>(self),
            DType::F16 => typed::<rtx_kernels::f16>(self),
            DType::BF16 => typed::<rtx_kernels::bf16>(self),
            DType::I32 => typed::<i32>(self),
            DType::I64 => typed::<i64>(self),
            DType::U8 => typed::<u8>(self),
            DType::Bool => typed::<bool>(self),
        }
    }

    /// The raw bits of every element in row-major order, widened to `u64`: what bitwise
    /// comparisons between two runs compare (NaNs and signed zeros included).
    pub fn to_bits(&self) -> Vec<u64> {
        fn typed<E: Element>(t: &DynTensor, bits: fn(E) -> u64) -> Vec<u64> {
            match t.storage::<E>() {
                Ok(s) => s.to_vec(&t.layout).into_iter().map(bits).collect(),
                Err(_) => unreachable!("the dtype tag is the storage's type"),
            }
        }
        match self.dtype {
            DType::F32 => typed::<f32>(self, |v| v.to_bits().into()),
            DType::F64 => typed::<f64>(self, f64::to_bits),
            DType::F16 => typed::<rtx_kernels::f16>(self, |v| v.to_bits().into()),
            DType::BF16 => typed::<rtx_kernels::bf16>(self, |v| v.to_bits().into()),
            DType::I32 => typed::<i32>(self, |v| u64::from(v as u32)),
            DType::I64 => typed::<i64>(self, |v| v as u64),
            DType::U8 => typed::<u8>(self, u64::from),
            DType::Bool => typed::<bool>(self, u64::from),
        }
    }
}

/// A graph's parameters by their dotted names (`blocks.0.attn.qkv.weight`), as
/// [`Graph::run`](crate::ir::Graph::run) reads them.
///
/// ```
/// use rtx::ir::Params;
/// use rtx::prelude::*;
/// let fc = Linear::<3, 2>::new(Device::Cpu, 0);
/// let p = Params::of_model(&fc);
/// assert_eq!(p.names().collect::<Vec<_>>(), ["bias", "weight"]);
/// assert_eq!(p.get("weight").unwrap().dims(), &[2, 3]);
/// ```
#[derive(Clone, Debug, Default)]
pub struct Params {
    pub(super) map: BTreeMap<String, DynTensor>,
}

impl Params {
    /// No parameters.
    pub fn new() -> Params {
        Params::default()
    }

    /// Adds (or replaces) the parameter `name`.
    pub fn insert(&mut self, name: impl Into<String>, t: DynTensor) -> &mut Params {
        self.map.insert(name.into(), t);
        self
    }

    /// The parameter `name`, if present.
    pub fn get(&self, name: &str) -> Option<&DynTensor> {
        self.map.get(name)
    }

    /// The names, in sorted order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.map.keys().map(String::as_str)
    }

    /// Every parameter and buffer of `model` under the names [`Module::visit`] gives them
    /// (the names a checkpoint and a `#[model]`'s graph use), sharing their storage.
    pub fn of_model<M: Module + ?Sized>(model: &M) -> Params {
        struct Collect(Params);
        impl Visitor for Collect {
            fn visit<S: Shape, E: Float>(&mut self, name: &str, t: &Tensor<S, E>, _: TensorKind) {
                self.0.insert(name, DynTensor::of(t));
            }
        }
        let mut c = Collect(Params::new());
        model.visit("", &mut c);
        c.0
    }

    /// Every tensor of the checkpoint `ck` on `device`, bit for bit in the file's element type
    /// (no model type needed: names, element types and dims come from the file).
    pub fn from_checkpoint(ck: &Checkpoint, device: Device) -> Result<Params> {
        let mut p = Params::new();
        for name in ck.names() {
            let t = ck.dyn_tensor(name, device)?;
            p.insert(name, t);
        }
        Ok(p)
    }
}

/// An executor error outside any node (a value's type, a binding).
pub(crate) fn exec_error(msg: String) -> Error {
    Error::Ir {
        origin: "IR executor".into(),
        msg,
    }
}
