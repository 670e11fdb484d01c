//! The tensor side of [`crate::kernel`]: a user's `#[kernel]` applied to tensors. An
//! elementwise kernel broadcasts its inputs and records a backward through the kernels that
//! `#[kernel]` derived; a reduce kernel reduces a typed axis; a SIMT kernel writes an output
//! tensor in place.
//!
//! Invariant: a tensor a kernel writes in place is dense and held alone (it is copied first
//! when a view or another handle shares its storage), so no other tensor ever sees the write.

use super::Tensor;
use super::reduce::Reduced;
use crate::autograd::{self, Erased, Node, PartsRule};
use crate::error::{Error, Result, bail, ok};
use crate::shape::{ReduceAxis, Shape, describe};
use rtx_backends::storage::writable_in_place;
use rtx_backends::{Device, Layout, Storage};
use rtx_kernels::kernel::{
    Elementwise, KernelSource, ParamType, Reduce, ScalarType, elementwise_inputs,
    elementwise_uniforms,
};
use rtx_kernels::{Element, Float};
use std::sync::Arc;

/// Maps the gradient of a kernel's output (dense storage of the output's sizes) to one
/// input's gradient (summing broadcast dims).
type ToInput<E> = Box<dyn Fn(Storage<E>) -> Result<Option<Erased>> + Send + Sync>;

/// One input of an elementwise kernel, its shape type erased: its storage, its layout
/// broadcast to the output's sizes, its gradient history, and how to give a gradient back.
pub(crate) struct KernelInput<E: Float> {
    storage: Arc<Storage<E>>,
    layout: Layout,
    node: Option<Arc<Node>>,
    to_input: ToInput<E>,
}

impl<S: Shape, E: Float> Tensor<S, E> {
    /// This tensor as an input of a kernel, read through `layout` (its own layout broadcast
    /// to the output's sizes).
    pub(crate) fn kernel_input(&self, layout: Layout) -> KernelInput<E> {
        let shape = self.shape;
        let out = Layout::contiguous(layout.dims());
        KernelInput {
            storage: self.storage.clone(),
            layout,
            node: self.node.clone(),
            to_input: Box::new(move |g| {
                let summed = autograd::sum_to_storage(&g, &out, &shape.dims())?;
                Ok(autograd::erase(Tensor::from_storage(summed, shape)))
            }),
        }
    }
}

/// A kernel's CPU/GPU run over inputs (storage and layout each) with its uniforms.
type RunFn<E> = fn(&[(&Storage<E>, &Layout)], &[f64]) -> Result<Storage<E>>;

/// A derivative kernel's run: its source, the input it differentiates by, then as [`RunFn`]
/// (the inputs followed by the output's gradient).
type GradFn<E> =
    fn(&'static KernelSource, usize, &[(&Storage<E>, &Layout)], &[f64]) -> Result<Storage<E>>;

/// An elementwise kernel with its marker type erased: its sources, and its runs as function
/// pointers. Only those two small functions are compiled per kernel; the code around them
/// (checks, operands, recording, the backward) is compiled once per element type.
pub(crate) struct ErasedKernel<E> {
    /// The kernel's source.
    pub src: &'static KernelSource,
    /// The derivative kernel of each input, where `#[kernel]` derived one.
    pub grads: &'static [Option<&'static KernelSource>],
    /// The kernel itself.
    pub forward: RunFn<E>,
    /// A derivative kernel.
    pub grad: GradFn<E>,
}

impl<E> Clone for ErasedKernel<E> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<E> Copy for ErasedKernel<E> {}

/// The kernel `K` with `N` inputs on elements `E`, erased.
pub(crate) fn erase_kernel<K: Elementwise<N>, const N: usize, E: Float>() -> ErasedKernel<E> {
    ErasedKernel {
        src: K::KERNEL,
        grads: const { &K::GRADS },
        forward: forward::<K, N, E>,
        grad: grad::<K, N, E>,
    }
}

/// [`RunFn`] of the kernel `K`: its native function on the CPU (the block loop compiled for
/// this kernel alone), its CUDA entry on a GPU.
fn forward<K: Elementwise<N>, const N: usize, E: Float>(
    ins: &[(&Storage<E>, &Layout)],
    uniforms: &[f64],
) -> Result<Storage<E>> {
    Ok(Storage::map_kernel::<N>(
        K::KERNEL,
        ins,
        uniforms,
        K::scalar::<E>(uniforms),
    )?)
}

/// [`GradFn`] of the kernel `K`.
fn grad<K: Elementwise<N>, const N: usize, E: Float>(
    src: &'static KernelSource,
    wrt: usize,
    ins: &[(&Storage<E>, &Layout)],
    uniforms: &[f64],
) -> Result<Storage<E>> {
    let f = K::scalar_grad::<E>(wrt, uniforms);
    Ok(Storage::map_kernel_grad::<N>(src, ins, uniforms, f)?)
}

/// The output sizes of inputs broadcast together (the longest shape; every other must equal
/// its trailing dims), and each input's layout broadcast to them.
pub(crate) fn broadcast_all(
    op: &'static str,
    inputs: &[(&Layout, String)],
) -> Result<(Vec<usize>, Vec<Layout>)> {
    let big = inputs
        .iter()
        .map(|(l, _)| l.dims())
        .max_by_key(|d| d.len())
        .unwrap_or(&[])
        .to_vec();
    let mut layouts = Vec::with_capacity(inputs.len());
    for (l, shape) in inputs {
        let fits = big.ends_with(l.dims());
        match l.broadcast_to(&big).filter(|_| fits) {
            Some(b) => layouts.push(b),
            None => {
                return Err(Error::ShapeMismatch {
                    op,
                    lhs: shape.clone(),
                    rhs: format!("{big:?}"),
                    rule: "trailing dimensions must be equal (expand size-1 dims explicitly with \
                           broadcast_to)",
                });
            }
        }
    }
    Ok((big, layouts))
}

/// How a uniform's type reads in messages.
fn type_name(ty: ParamType) -> &'static str {
    match ty {
        ParamType::Value(ScalarType::U64) => "usize",
        ParamType::Value(ScalarType::I64) => "i64",
        ParamType::Value(ScalarType::U32) => "u32",
        ParamType::Value(ScalarType::I32) => "i32",
        _ => "T",
    }
}

/// Checks the uniforms given to an elementwise kernel: one per `#[uniform]` parameter, and
/// integral and in range for integer ones.
pub(crate) fn check_uniforms(src: &'static KernelSource, uniforms: &[f64]) -> Result<()> {
    let params = elementwise_uniforms(src);
    if params.len() != uniforms.len() {
        let list: Vec<String> = params
            .iter()
            .map(|p| format!("{}: {}", p.name, type_name(p.ty)))
            .collect();
        bail!(
            src.name,
            "the kernel takes {} uniform(s) ({}), {} given",
            params.len(),
            list.join(", "),
            uniforms.len()
        );
    }
    for (p, &v) in params.iter().zip(uniforms) {
        let range = match p.ty {
            ParamType::Value(ScalarType::U64) => Some((0.0, u64::MAX as f64)),
            ParamType::Value(ScalarType::I64) => Some((i64::MIN as f64, i64::MAX as f64)),
            ParamType::Value(ScalarType::U32) => Some((0.0, u32::MAX as f64)),
            ParamType::Value(ScalarType::I32) => Some((i32::MIN as f64, i32::MAX as f64)),
            _ => None,
        };
        if let Some((lo, hi)) = range
            && (v.fract() != 0.0 || !(lo..=hi).contains(&v))
        {
            bail!(
                src.name,
                "uniform `{}` is a `{}`, and {v} is not one",
                p.name,
                type_name(p.ty)
            );
        }
    }
    Ok(())
}

/// Applies the elementwise kernel `K` to `inputs` (already broadcast to the shape `out`), and
/// records a backward through its derived kernels when an input records gradients.
pub(crate) fn apply_elementwise<K, const N: usize, O, E>(
    inputs: Vec<KernelInput<E>>,
    out: O,
    uniforms: &[f64],
) -> Result<Tensor<O, E>>
where
    K: Elementwise<N>,
    O: Shape,
    E: Float,
{
    // A shell: the work is one function of the element type (ARCHITECTURE.md, "Build time").
    let (storage, backward) = run_elementwise(erase_kernel::<K, N, E>(), inputs, uniforms)?;
    let result = Tensor::from_storage(storage, out);
    Ok(match backward {
        Some((nodes, rule)) => result.record_parts(nodes, rule),
        None => result,
    })
}

/// The work of [`apply_elementwise`]: the output's storage and, when an input records
/// gradients, the inputs' nodes and the backward rule to record.
#[allow(clippy::type_complexity)]
fn run_elementwise<E: Float>(
    k: ErasedKernel<E>,
    inputs: Vec<KernelInput<E>>,
    uniforms: &[f64],
) -> Result<(Storage<E>, Option<(Vec<Option<Arc<Node>>>, PartsRule<E>)>)> {
    check_uniforms(k.src, uniforms)?;
    let ins: Vec<(&Storage<E>, &Layout)> =
        inputs.iter().map(|i| (&*i.storage, &i.layout)).collect();
    let storage = (k.forward)(&ins, uniforms)?;
    let nodes: Vec<Option<&Arc<Node>>> = inputs.iter().map(|i| i.node.as_ref()).collect();
    if !autograd::must_record(&nodes) {
        return Ok((storage, None));
    }
    let names = elementwise_inputs(k.src);
    for (i, input) in inputs.iter().enumerate() {
        if input.node.is_some() && k.grads[i].is_none() {
            bail!(
                k.src.name,
                "input `{}` records gradients, but `#[kernel]` derived no derivative with \
                 respect to it (bodies with loops or assignments get none): detach it, or \
                 apply the kernel under `rtx::no_grad`",
                names.get(i).copied().unwrap_or("?")
            );
        }
    }
    let node_list: Vec<Option<Arc<Node>>> = inputs.iter().map(|i| i.node.clone()).collect();
    let uniforms = uniforms.to_vec();
    let saved = inputs;
    let rule: PartsRule<E> = Box::new(move |g: &Storage<E>, gl: &Layout| {
        let mut grads = Vec::with_capacity(saved.len());
        for (i, input) in saved.iter().enumerate() {
            let (Some(src), Some(_)) = (k.grads[i], &input.node) else {
                grads.push(None);
                continue;
            };
            let mut ins: Vec<(&Storage<E>, &Layout)> =
                saved.iter().map(|s| (&*s.storage, &s.layout)).collect();
            ins.push((g, gl));
            let st = (k.grad)(src, i, &ins, &uniforms)?;
            grads.push((input.to_input)(st)?);
        }
        Ok(grads)
    });
    Ok((storage, Some((node_list, rule))))
}

impl<S: Shape, E: Float> Tensor<S, E> {
    /// Applies a one-input elementwise `#[kernel]` (its marker `name::Op`), with its
    /// `#[uniform]` values in order: the kernel's native function on the CPU, its CUDA entry
    /// on a GPU. Records a backward through the derivative `#[kernel]` derived.
    ///
    /// ```
    /// use rtx::prelude::*;
    ///
    /// #[rtx::kernel(elementwise)]
    /// fn scale_shift<T: Float>(x: T, #[uniform] a: T, #[uniform] b: T) -> T {
    ///     a * x + b
    /// }
    ///
    /// fn main() {
    ///     let x: Tensor<Rank1<3>> = Tensor::from_array([1.0, 2.0, 3.0], Device::Cpu);
    ///     assert_eq!(x.map(scale_shift::Op, &[2.0, 1.0]).to_vec(), vec![3.0, 5.0, 7.0]);
    /// }
    /// ```
    ///
    /// # Panics
    /// When the number of uniforms is wrong or a device fails (see [`Tensor::try_map`]).
    #[track_caller]
    pub fn map<K: Elementwise<1>>(&self, kernel: K, uniforms: &[f64]) -> Self {
        ok(self.try_map(kernel, uniforms))
    }

    /// [`Tensor::map`], returning an error naming the kernel when the uniforms do not fit
    /// its `#[uniform]` parameters, the kernel has no entry for the element type, or the
    /// device fails.
    ///
    /// ```
    /// use rtx::prelude::*;
    ///
    /// #[rtx::kernel(elementwise)]
    /// fn leaky<T: Float>(x: T, #[uniform] slope: T) -> T {
    ///     if x > 0.0 { x } else { slope * x }
    /// }
    ///
    /// fn main() {
    ///     let x: Tensor<Rank1<2>> = Tensor::from_array([1.0, -1.0], Device::Cpu);
    ///     let err = x.try_map(leaky::Op, &[]).err().unwrap();
    ///     assert_eq!(err.to_string(), "leaky: the kernel takes 1 uniform(s) (slope: T), 0 given");
    /// }
    /// ```
    pub fn try_map<K: Elementwise<1>>(&self, kernel: K, uniforms: &[f64]) -> Result<Self> {
        let _ = kernel;
        apply_elementwise::<K, 1, S, E>(vec![self.kernel_input(self.layout)], self.shape, uniforms)
    }

    /// Reduces axis `I` with a `#[kernel(reduce(..))]` (its marker `name::Op`): the kernel's
    /// native reduction on the CPU, its CUDA entry on a GPU. Such kernels have no derivative,
    /// so a tensor that records gradients is an error (detach it, or use `rtx::no_grad`).
    ///
    /// ```
    /// use rtx::prelude::*;
    ///
    /// #[rtx::kernel(reduce(identity = 0.0, map = |x| x * x))]
    /// fn sum_sq<T: Float>(acc: T, x: T) -> T {
    ///     acc + x
    /// }
    ///
    /// fn main() {
    ///     let x: Tensor<Rank2<2, 2>> = Tensor::from_array([[1.0, 2.0], [3.0, 4.0]], Device::Cpu);
    ///     assert_eq!(x.reduce_with::<1>(sum_sq::Op).to_vec(), vec![5.0, 25.0]);
    /// }
    /// ```
    ///
    /// # Panics
    /// When [`Tensor::try_reduce_with`] fails.
    #[track_caller]
    pub fn reduce_with<const I: usize>(&self, kernel: impl Reduce) -> Tensor<Reduced<S, I>, E>
    where
        S: ReduceAxis<I>,
    {
        ok(self.try_reduce_with::<I>(kernel))
    }

    /// [`Tensor::reduce_with`], returning device errors and the error for a tensor that
    /// records gradients.
    pub fn try_reduce_with<const I: usize>(
        &self,
        kernel: impl Reduce,
    ) -> Result<Tensor<Reduced<S, I>, E>>
    where
        S: ReduceAxis<I>,
    {
        go::<_, I, S, E>(kernel, self)
    }
}

/// [`Tensor::try_reduce_with`] with the kernel's marker type named.
fn go<K: Reduce, const I: usize, S: ReduceAxis<I>, E: Float>(
    _kernel: K,
    x: &Tensor<S, E>,
) -> Result<Tensor<Reduced<S, I>, E>> {
    if autograd::must_record(&[x.node()]) {
        bail!(
            K::KERNEL.name,
            "the input {} records gradients, but reduce kernels have no derivative: detach it, \
             or reduce under `rtx::no_grad`",
            describe(&x.shape())
        );
    }
    let storage = x
        .storage()
        .reduce_kernel(x.layout(), I, K::KERNEL, K::run::<E>)?;
    let mut dims = x.dims().to_vec();
    dims.remove(I);
    let shape = Reduced::<S, I>::from_dims(&dims).ok_or_else(|| Error::BadArgument {
        op: K::KERNEL.name,
        msg: format!("the reduced sizes {dims:?} do not fit the reduced shape type"),
    })?;
    Ok(Tensor::from_storage(storage, shape))
}

/// A tensor a SIMT kernel writes, its shape type erased.
pub(crate) trait KernelOutput<E: Element>: Send {
    /// The device the tensor lives on.
    fn device(&self) -> Device;
    /// The storage, dense and held alone (copied first when a view or another handle shares
    /// it), ready for a kernel to write in place; an error when the tensor records gradients.
    fn writable(&mut self, kernel: &'static str) -> Result<&mut Storage<E>>;
}

impl<S: Shape, E: Element> KernelOutput<E> for Tensor<S, E> {
    fn device(&self) -> Device {
        self.storage.device()
    }

    fn writable(&mut self, kernel: &'static str) -> Result<&mut Storage<E>> {
        if self.node.is_some() {
            bail!(
                kernel,
                "the output {} records gradients, and a kernel writing it in place would hide \
                 the write from the tape: write into a tensor without history (`.detach()`)",
                describe(&self.shape)
            );
        }
        let dense = self.layout.is_contiguous()
            && self.layout.offset() == 0
            && self.storage.len() == self.layout.numel();
        let alone = Arc::get_mut(&mut self.storage).is_some_and(|s| writable_in_place(s));
        if !(dense && alone) {
            // `contiguous` always makes fresh storage, which this tensor then holds alone.
            let copy = self.storage.contiguous(&self.layout)?;
            self.storage = Arc::new(copy);
            self.layout = Layout::contiguous(self.layout.dims());
        }
        Arc::get_mut(&mut self.storage).ok_or_else(|| Error::BadArgument {
            op: kernel,
            msg: "the output tensor's storage is still shared after a copy".into(),
        })
    }
}
