//! The IR executor: [`Graph::run`] computes a graph's outputs from its inputs and parameters
//! on whatever device they live on, each node by the very function the compiled forward
//! calls for it, so the result is bitwise the compiled forward's (the training forward that
//! the static backward differentiates).
//!
//! Fused elementwise chains are the graph's [`Node::kernel`] annotation. A chain's kernel
//! computes in its element type's compute type (`f32` for `f16` and `bf16`) and rounds once,
//! at its output; the executor does the same: the nodes of one kernel read each other in the
//! compute type, and a value leaving its kernel is rounded to its element type. Each node of
//! a chain runs its op's own elementwise kernel, whose scalar function is the one the fused
//! kernel calls, so the values are the fused kernel's.
//!
//! Invariant: a node's value is computed after its inputs' and checked against the node's
//! shape: static dims must match, and every named run-time dim (`B`) has one size across the
//! graph. Every error names the node, its op, and what does not fit.

mod backward;
mod composite;
mod prim;
mod value;

pub use backward::Backward;
pub use value::{DynTensor, Params};

pub(crate) use value::exec_error;

use super::{Dim, Graph, IrOp, Node, NodeId, dtype_name};
use crate::error::{Error, Result};
use rtx_backends::{Device, Storage};
use rtx_kernels::{DType, Element};
use std::any::Any;
use std::collections::HashMap;

/// `$body` with `$e` the element type of the dtype `$d`, for float types; any other type is
/// an error naming `$what`.
macro_rules! floats {
    ($d:expr, $what:expr, $e:ident => $body:expr) => {
        match $d {
            rtx_kernels::DType::F32 => {
                type $e = f32;
                $body
            }
            rtx_kernels::DType::F64 => {
                type $e = f64;
                $body
            }
            rtx_kernels::DType::F16 => {
                type $e = rtx_kernels::f16;
                $body
            }
            rtx_kernels::DType::BF16 => {
                type $e = rtx_kernels::bf16;
                $body
            }
            other => Err($crate::ir::exec::exec_error(format!(
                "{} is not defined for {other}",
                $what
            ))),
        }
    };
}

/// [`floats!`] for every numeric type (all but `bool`).
macro_rules! nums {
    ($d:expr, $what:expr, $e:ident => $body:expr) => {
        match $d {
            rtx_kernels::DType::I32 => {
                type $e = i32;
                $body
            }
            rtx_kernels::DType::I64 => {
                type $e = i64;
                $body
            }
            rtx_kernels::DType::U8 => {
                type $e = u8;
                $body
            }
            other => $crate::ir::exec::floats!(other, $what, $e => $body),
        }
    };
}

/// [`floats!`] for every element type.
macro_rules! elements {
    ($d:expr, $what:expr, $e:ident => $body:expr) => {
        match $d {
            rtx_kernels::DType::Bool => {
                type $e = bool;
                $body
            }
            other => $crate::ir::exec::nums!(other, $what, $e => $body),
        }
    };
}

pub(crate) use {elements, floats, nums};

/// The type a fused kernel computes an element type in: `f32` for the half types.
fn compute_type(d: DType) -> DType {
    match d {
        DType::F16 | DType::BF16 => DType::F32,
        other => other,
    }
}

/// `x` converted to element type `to` (the same tensor when it already is).
fn cast(x: &DynTensor, to: DType) -> Result<DynTensor> {
    if x.dtype() == to {
        return Ok(x.clone());
    }
    elements!(x.dtype(), "cast", E => {
        let s = x.storage::<E>()?;
        elements!(to, "cast", U => Ok(DynTensor::dense(s.cast::<U>(x.layout())?, x.dims())))
    })
}

impl Graph {
    /// Runs the graph: `inputs` by the names of its `input` nodes, `params` by its
    /// parameters' dotted names, all on one device, where the outputs are computed. Each node
    /// runs the function the compiled forward runs for it (the fused norm, the product with
    /// its bias epilogue, the softmax kernel, fused or composed attention), and each fused
    /// chain computes in its kernel's compute type, so the outputs are bitwise the compiled
    /// forward's on the same device.
    ///
    /// An error names the node and what is wrong: a missing input or parameter, an element
    /// type or dims that do not fit the node, an op the executor does not run.
    ///
    /// ```
    /// use rtx::ir::{Builder, DynTensor, Params};
    /// use rtx::prelude::*;
    /// let mut b = Builder::new("Head");
    /// let x = b.input::<(Dyn<'B'>, Const<3>), f32>("x");
    /// let w = b.param::<(Const<2>, Const<3>), f32>("weight");
    /// let y = b.linear::<(Dyn<'B'>, Const<2>), _, _, _>(x, w, None);
    /// let p = b.softmax::<1, _, _>(y);
    /// b.output(p);
    /// let g = b.finish();
    ///
    /// let mut fc = Linear::<3, 2>::new(Device::Cpu, 0);
    /// fc.bias = None;
    /// let x: Tensor<(Dyn<'B'>, Const<3>)> = Tensor::ones((Dyn(4), Const), Device::Cpu);
    /// let out = g.run(&[("x", DynTensor::of(&x))], &Params::of_model(&fc))?;
    /// let want = fc.forward(&x).softmax::<1>();
    /// assert_eq!(out[0].to_tensor::<(Dyn<'B'>, Const<2>), f32>()?.to_vec(), want.to_vec());
    /// # Ok::<(), rtx::Error>(())
    /// ```
    pub fn run(&self, inputs: &[(&str, DynTensor)], params: &Params) -> Result<Vec<DynTensor>> {
        self.forward(inputs, params)?.outputs()
    }

    /// Runs every node in order, keeping every value and what each node's backward needs.
    fn forward(&self, inputs: &[(&str, DynTensor)], params: &Params) -> Result<Run<'_>> {
        let mut run = Run::new(self);
        // Every value is computed where the given tensors live (constants too, which may come
        // before the first input).
        run.device = inputs
            .first()
            .map(|(_, t)| t.device())
            .or_else(|| params.map.values().next().map(DynTensor::device));
        for i in 0..self.nodes.len() {
            let v = run.eval(i, inputs, params).map_err(|e| run.at(i, e))?;
            run.set(i, v).map_err(|e| run.at(i, e))?;
        }
        Ok(run)
    }
}

/// One run of a graph: the values computed so far and the sizes of its named dims.
pub(crate) struct Run<'g> {
    graph: &'g Graph,
    /// Each node's value: in its element type, or in the compute type inside a kernel.
    vals: Vec<Option<DynTensor>>,
    /// The sizes of the named run-time dims seen so far.
    sizes: HashMap<String, usize>,
    /// The device of the first input or parameter; every other must be on it.
    device: Option<Device>,
    /// What a composite node's backward needs beyond its inputs and output (a norm's
    /// statistics, attention's backward), as its forward left it.
    saved: Vec<Option<Box<dyn Any>>>,
}

impl<'g> Run<'g> {
    pub(crate) fn new(graph: &'g Graph) -> Run<'g> {
        Run {
            graph,
            vals: vec![None; graph.nodes.len()],
            sizes: HashMap::new(),
            device: None,
            saved: (0..graph.nodes.len()).map(|_| None).collect(),
        }
    }

    /// The graph's outputs, each rounded to its element type.
    fn outputs(&self) -> Result<Vec<DynTensor>> {
        let outs = self.graph.outputs.iter();
        outs.map(|&o| self.read_rounded(o)).collect()
    }

    /// `e` with node `i` named in it.
    pub(crate) fn at(&self, i: NodeId, e: Error) -> Error {
        let n = &self.graph.nodes[i];
        let msg = match e {
            Error::Ir { origin, msg } if origin == "IR executor" => msg,
            other => other.to_string(),
        };
        Error::Ir {
            origin: format!("running IR graph `{}`", self.graph.name),
            msg: format!("node {i} ({}): {msg}", n.op.name()),
        }
    }

    /// Whether node `i` computes in its kernel's compute type rather than its element type.
    fn in_compute(&self, i: NodeId) -> bool {
        let n = &self.graph.nodes[i];
        n.kernel.is_some() && compute_type(n.dtype) != n.dtype
    }

    /// Node `j`'s value rounded to its element type (as a value leaving a kernel is).
    pub(crate) fn read_rounded(&self, j: NodeId) -> Result<DynTensor> {
        let v = self.vals[j]
            .as_ref()
            .unwrap_or_else(|| unreachable!("nodes run in order"));
        cast(v, self.graph.nodes[j].dtype)
    }

    /// Node `j`'s value as node `i` reads it: raw within one kernel; otherwise rounded to its
    /// element type, then widened to the compute type when `i` is inside a kernel.
    pub(crate) fn read(&self, i: NodeId, j: NodeId) -> Result<DynTensor> {
        let (ni, nj) = (&self.graph.nodes[i], &self.graph.nodes[j]);
        if ni.kernel.is_some() && ni.kernel == nj.kernel {
            return Ok(self.vals[j]
                .clone()
                .unwrap_or_else(|| unreachable!("nodes run in order")));
        }
        let v = self.read_rounded(j)?;
        if ni.kernel.is_some() {
            cast(&v, compute_type(nj.dtype))
        } else {
            Ok(v)
        }
    }

    /// The device the run computes on.
    pub(crate) fn device(&self) -> Result<Device> {
        self.device.ok_or_else(|| {
            exec_error("the graph reads no input or parameter, so no device is known".into())
        })
    }

    /// Records node `i`'s value after checking its element type and dims against the node.
    fn set(&mut self, i: NodeId, v: DynTensor) -> Result<()> {
        let n = &self.graph.nodes[i];
        let want = if self.in_compute(i) {
            compute_type(n.dtype)
        } else {
            n.dtype
        };
        if v.dtype() != want {
            return Err(exec_error(format!(
                "gave {} where the node is {}",
                v.dtype(),
                dtype_name(want)
            )));
        }
        self.bind(n, v.dims())?;
        self.vals[i] = Some(v);
        Ok(())
    }

    /// Checks computed `dims` against `n`'s shape and learns the sizes of its named dims.
    fn bind(&mut self, n: &Node, dims: &[usize]) -> Result<()> {
        let mismatch = || {
            exec_error(format!(
                "dims {dims:?} do not fit its shape {}",
                super::validate::shape_str(&n.shape)
            ))
        };
        if dims.len() != n.shape.len() {
            return Err(mismatch());
        }
        for (d, &size) in n.shape.iter().zip(dims) {
            match d {
                Dim::Static(k) if *k != size => return Err(mismatch()),
                Dim::Sym(name) if name != "?" => match self.sizes.get(name) {
                    Some(&known) if known != size => {
                        return Err(exec_error(format!(
                            "dims {dims:?}: the run-time dim {name} is {size} here and {known} \
                             earlier"
                        )));
                    }
                    Some(_) => {}
                    None => {
                        self.sizes.insert(name.clone(), size);
                    }
                },
                _ => {}
            }
        }
        Ok(())
    }

    /// `n`'s shape with every dim it can size: static ones, and named ones already seen.
    pub(crate) fn resolve(&self, n: &Node) -> Vec<Option<usize>> {
        n.shape
            .iter()
            .map(|d| match d {
                Dim::Static(k) => Some(*k),
                Dim::Sym(name) => self.sizes.get(name).copied(),
            })
            .collect()
    }

    /// Runs node `i`.
    fn eval(
        &mut self,
        i: NodeId,
        inputs: &[(&str, DynTensor)],
        params: &Params,
    ) -> Result<DynTensor> {
        let n = &self.graph.nodes[i];
        match &n.op {
            IrOp::Input(name) => {
                let t = inputs.iter().find(|(k, _)| k == name).map(|(_, t)| t);
                let t = t.ok_or_else(|| {
                    let given: Vec<&str> = inputs.iter().map(|(k, _)| *k).collect();
                    exec_error(format!("no input `{name}` was given (given: {given:?})"))
                })?;
                self.on_device(t, "input", name)?;
                Ok(t.clone())
            }
            IrOp::Param(name) => {
                let t = params.get(name).ok_or_else(|| {
                    exec_error(format!(
                        "the parameter `{name}` ({} {}) is missing",
                        super::validate::shape_str(&n.shape),
                        dtype_name(n.dtype)
                    ))
                })?;
                self.on_device(t, "parameter", name)?;
                Ok(t.clone())
            }
            IrOp::Constant(v) => {
                let dtype = if n.kernel.is_some() {
                    compute_type(n.dtype)
                } else {
                    n.dtype
                };
                let device = self.device()?;
                elements!(dtype, "a constant", E => {
                    let s = Storage::<E>::full(E::from_f64(*v), 1, device)?;
                    Ok(DynTensor::dense(s, &[]))
                })
            }
            IrOp::Composite(c) => {
                let ins = self.inputs_of(i)?;
                let (y, saved) = composite::run(*c, &ins)?;
                self.saved[i] = saved;
                Ok(y)
            }
            _ => {
                let ins = self.inputs_of(i)?;
                prim::run(self, i, &ins)
            }
        }
    }

    /// Node `i`'s inputs as it reads them.
    fn inputs_of(&self, i: NodeId) -> Result<Vec<DynTensor>> {
        self.graph.nodes[i]
            .inputs
            .iter()
            .map(|&j| self.read(i, j))
            .collect()
    }

    /// Checks that a given tensor is on the run's device (the first one given sets it).
    fn on_device(&mut self, t: &DynTensor, what: &str, name: &str) -> Result<()> {
        match self.device {
            None => {
                self.device = Some(t.device());
                Ok(())
            }
            Some(d) if d == t.device() => Ok(()),
            Some(d) => Err(exec_error(format!(
                "the {what} `{name}` is on {:?}, the graph's other tensors on {d:?}",
                t.device()
            ))),
        }
    }

    /// The graph being run.
    pub(crate) fn graph(&self) -> &'g Graph {
        self.graph
    }
}
