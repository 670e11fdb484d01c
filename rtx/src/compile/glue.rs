//! What the code `#[model]` generates calls besides the public pieces: accumulating a
//! gradient slot, building IR for a sub-model call, an argument or a parameter, the
//! per-type IR cache, and the self-check a `#[model(check)]` test runs.
//!
//! Not for direct use: the names and signatures follow the generated code.

use super::StaticForward;
use crate::ir::{Builder, Graph, IrArgs, IrValue, Value};
use crate::shape::{PermuteAxes, ReduceAxis, Shape, SwapAxes};
use crate::tensor::Tensor;
use crate::tensor::{MatmulShapes, Reduced};
use rtx_kernels::{DType, Element};
use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, OnceLock};

/// Adds a gradient into a slot: the first fills it, later ones add. A sub-model's `()`
/// for an argument that takes no gradient (indices) adds nothing.
pub fn acc<T, G: Give<T>>(slot: &mut Option<T>, g: G) {
    g.give(slot)
}

/// A gradient (or its absence) that can go into a slot of type `Option<T>`.
pub trait Give<T> {
    /// Adds itself into `slot`.
    fn give(self, slot: &mut Option<T>);
}

impl<S: Shape, E: Element> Give<Tensor<S, E>> for Option<Tensor<S, E>> {
    fn give(self, slot: &mut Option<Tensor<S, E>>) {
        let Some(g) = self else { return };
        *slot = Some(match slot.take() {
            None => g,
            Some(prev) => add(&prev, &g),
        });
    }
}

impl<T> Give<T> for () {
    fn give(self, _: &mut Option<T>) {}
}

/// `a + b` for a float element type chosen at run time (gradients are always floats).
fn add<S: Shape, E: Element>(a: &Tensor<S, E>, b: &Tensor<S, E>) -> Tensor<S, E> {
    fn typed<S: Shape, F: rtx_kernels::Float, E: Element>(
        a: &Tensor<S, E>,
        b: &Tensor<S, E>,
    ) -> Tensor<S, E> {
        let a = (a as &dyn Any).downcast_ref::<Tensor<S, F>>();
        let b = (b as &dyn Any).downcast_ref::<Tensor<S, F>>();
        match (a, b) {
            (Some(a), Some(b)) => {
                let sum: Box<dyn Any> = Box::new(crate::no_grad(|| {
                    a.same::<rtx_kernels::op::markers::Add>(b)
                }));
                match sum.downcast::<Tensor<S, E>>() {
                    Ok(t) => *t,
                    Err(_) => unreachable!("F is E"),
                }
            }
            _ => unreachable!("F is E"),
        }
    }
    crate::autograd::with_float!(E, F => typed::<S, F, E>(a, b))
}

/// The gradient a loop over sub-models carries back to the previous sub-model.
///
/// # Panics
/// When a sub-model's static backward gave no gradient for its carried argument although it
/// was asked for one (a `StaticForward` impl that ignores its `need_args`).
#[track_caller]
pub fn carried<S: Shape, E: Element>(d: Option<Tensor<S, E>>) -> Tensor<S, E> {
    d.unwrap_or_else(|| {
        panic!("a sub-model's static backward returned no gradient for the value its loop carries")
    })
}

/// Argument values in a graph, mapped back to the argument types of the forward they feed.
pub trait ValueArgs: Sized {
    /// The forward's argument tuple.
    type Args: IrArgs<Values = Self>;
}

impl<A: Shape, EA: Element> ValueArgs for (Value<A, EA>,) {
    type Args = (Tensor<A, EA>,);
}

impl<A: Shape, EA: Element, B: Shape, EB: Element> ValueArgs for (Value<A, EA>, Value<B, EB>) {
    type Args = (Tensor<A, EA>, Tensor<B, EB>);
}

impl<A: Shape, EA: Element, B: Shape, EB: Element, C: Shape, EC: Element> ValueArgs
    for (Value<A, EA>, Value<B, EB>, Value<C, EC>)
{
    type Args = (Tensor<A, EA>, Tensor<B, EB>, Tensor<C, EC>);
}

/// A sub-model call's nodes: the sub-model's `emit_ir` for the arguments' types.
pub fn emit_call<M, V, O>(m: &M, b: &mut Builder, args: V) -> <M::Output as IrValue>::Value
where
    V: ValueArgs,
    M: StaticForward<V::Args, O>,
{
    m.emit_ir(b, args)
}

/// A deferred sub-model call's nodes (`StaticForward::emit_ir_deferred`): its output before
/// the bias, and the bias the fused chain after it adds.
pub fn emit_call_deferred<M, V, O>(
    m: &M,
    b: &mut Builder,
    args: V,
) -> super::DeferredIr<<M::Output as IrValue>::Value>
where
    V: ValueArgs,
    M: StaticForward<V::Args, O>,
{
    m.emit_ir_deferred(b, args)
}

/// The first node of a fused chain that takes a deferred call's output: the bias added,
/// inside the chain's kernel as the kernel's bias variant adds it, or the output itself when
/// the call left no bias.
pub fn ir_add_bias<S: Shape, E: Element>(
    b: &mut Builder,
    d: super::DeferredIr<Value<S, E>>,
) -> Value<S, E> {
    match d.bias {
        Some(bias) => {
            let add =
                crate::ir::IrOp::Op(rtx_kernels::op::Op::Binary(rtx_kernels::op::BinaryOp::Add));
            b.node::<S, E>(add, &[d.value.id(), bias])
        }
        None => d.value,
    }
}

/// A forward argument's type as a graph input.
pub trait IrInput: IrValue {
    /// Adds the input `name`.
    fn input(b: &mut Builder, name: &str) -> Self::Value;
}

impl<S: Shape, E: Element> IrInput for Tensor<S, E> {
    fn input(b: &mut Builder, name: &str) -> Value<S, E> {
        b.input::<S, E>(name)
    }
}

/// An argument of the forward as a graph input.
pub fn ir_input<T: IrInput>(b: &mut Builder, name: &str) -> T::Value {
    T::input(b, name)
}

/// A parameter used directly in a forward (`self.scale`), named under the current scope.
pub fn ir_param<S: Shape, E: Element>(
    b: &mut Builder,
    _p: &Tensor<S, E>,
    name: &str,
) -> Value<S, E> {
    b.param::<S, E>(name)
}

/// The graph of the model type `M`, built by `build` the first time it is asked for.
pub fn ir_cached<M: 'static>(build: impl FnOnce() -> Graph) -> Arc<Graph> {
    static CACHE: OnceLock<Mutex<HashMap<TypeId, Arc<Graph>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let key = TypeId::of::<M>();
    if let Some(g) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return g.clone();
    }
    // Built outside the lock: a model's graph builds its sub-models' graphs too.
    let g = Arc::new(build());
    cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(key)
        .or_insert(g)
        .clone()
}

/// The IR of the tensor methods a compiled forward calls, by the methods' own names and
/// with their own generic parameters (a turbofish carries over), on the value the tensor
/// method is called on. The element type and shape are the trait's parameters, so they are
/// inferred.
pub trait IrMethods<S: Shape, E: Element>: Sized {
    /// `a.matmul(&b)`.
    fn matmul<R: Shape>(
        self,
        b: &mut Builder,
        rhs: Value<R, E>,
    ) -> Value<<S as MatmulShapes<R>>::Output, E>
    where
        E: rtx_kernels::Num,
        S: MatmulShapes<R>;
    /// `x.t()`.
    fn t(self, b: &mut Builder) -> Value<<S as SwapAxes<0, 1>>::Output, E>
    where
        S: SwapAxes<0, 1>;
    /// `x.transpose::<A, B>()`.
    fn transpose<const A: usize, const B: usize>(
        self,
        b: &mut Builder,
    ) -> Value<<S as SwapAxes<A, B>>::Output, E>
    where
        S: SwapAxes<A, B>;
    /// `x.permute::<P>()`.
    fn permute<P>(self, b: &mut Builder) -> Value<<S as PermuteAxes<P>>::Output, E>
    where
        S: PermuteAxes<P>;
    /// `x.reshape(shape)`.
    fn reshape<T: Shape>(self, b: &mut Builder, shape: T) -> Value<T, E>;
    /// `x.broadcast_to(shape)`.
    fn broadcast_to<T: Shape>(self, b: &mut Builder, shape: T) -> Value<T, E>;
    /// `x.contiguous()`: the same value (a layout change only).
    fn contiguous(self, b: &mut Builder) -> Value<S, E>;
    /// `x.softmax::<I>()`.
    fn softmax<const I: usize>(self, b: &mut Builder) -> Value<S, E>
    where
        E: rtx_kernels::Float,
        S: ReduceAxis<I>;
    /// `x.log_softmax::<I>()`.
    fn log_softmax<const I: usize>(self, b: &mut Builder) -> Value<S, E>
    where
        E: rtx_kernels::Float,
        S: ReduceAxis<I>;
    /// `x.sum::<I>()`.
    fn sum<const I: usize>(self, b: &mut Builder) -> Value<Reduced<S, I>, E>
    where
        E: rtx_kernels::Num,
        S: ReduceAxis<I>;
    /// `x.mean::<I>()`.
    fn mean<const I: usize>(self, b: &mut Builder) -> Value<Reduced<S, I>, E>
    where
        E: rtx_kernels::Float,
        S: ReduceAxis<I>;
    /// `x.masked_fill(&mask, value)`: a `where` over the mask.
    fn masked_fill<C: Shape>(self, b: &mut Builder, mask: Value<C, bool>, value: E) -> Value<S, E>;
    /// `x.cast::<U>()`.
    fn cast<U: Element>(self, b: &mut Builder) -> Value<S, U>;
}

impl<S: Shape, E: Element> IrMethods<S, E> for Value<S, E> {
    fn matmul<R: Shape>(
        self,
        b: &mut Builder,
        rhs: Value<R, E>,
    ) -> Value<<S as MatmulShapes<R>>::Output, E>
    where
        E: rtx_kernels::Num,
        S: MatmulShapes<R>,
    {
        b.matmul(self, rhs)
    }
    fn t(self, b: &mut Builder) -> Value<<S as SwapAxes<0, 1>>::Output, E>
    where
        S: SwapAxes<0, 1>,
    {
        b.transpose::<0, 1, S, E>(self)
    }
    fn transpose<const A: usize, const B: usize>(
        self,
        b: &mut Builder,
    ) -> Value<<S as SwapAxes<A, B>>::Output, E>
    where
        S: SwapAxes<A, B>,
    {
        b.transpose::<A, B, S, E>(self)
    }
    fn permute<P>(self, b: &mut Builder) -> Value<<S as PermuteAxes<P>>::Output, E>
    where
        S: PermuteAxes<P>,
    {
        b.permute::<P, S, E>(self)
    }
    fn reshape<T: Shape>(self, b: &mut Builder, _shape: T) -> Value<T, E> {
        b.reshape::<T, S, E>(self)
    }
    fn broadcast_to<T: Shape>(self, b: &mut Builder, _shape: T) -> Value<T, E> {
        b.broadcast_to::<T, S, E>(self)
    }
    fn contiguous(self, _b: &mut Builder) -> Value<S, E> {
        self
    }
    fn softmax<const I: usize>(self, b: &mut Builder) -> Value<S, E>
    where
        E: rtx_kernels::Float,
        S: ReduceAxis<I>,
    {
        b.softmax::<I, S, E>(self)
    }
    fn log_softmax<const I: usize>(self, b: &mut Builder) -> Value<S, E>
    where
        E: rtx_kernels::Float,
        S: ReduceAxis<I>,
    {
        b.log_softmax::<I, S, E>(self)
    }
    fn sum<const I: usize>(self, b: &mut Builder) -> Value<Reduced<S, I>, E>
    where
        E: rtx_kernels::Num,
        S: ReduceAxis<I>,
    {
        b.reduce::<I, S, E>(self, rtx_kernels::op::ReduceOp::Sum)
    }
    fn mean<const I: usize>(self, b: &mut Builder) -> Value<Reduced<S, I>, E>
    where
        E: rtx_kernels::Float,
        S: ReduceAxis<I>,
    {
        b.mean::<I, S, E>(self)
    }
    fn masked_fill<C: Shape>(self, b: &mut Builder, mask: Value<C, bool>, value: E) -> Value<S, E> {
        // `mask ? value : x`, in the `[cond, then, else]` order of a `where` node.
        let v = b.constant::<E>(value.to_f64());
        let op = crate::ir::IrOp::Op(rtx_kernels::op::Op::Where);
        b.node::<S, E>(op, &[mask.id(), v.id(), self.id()])
    }
    fn cast<U: Element>(self, b: &mut Builder) -> Value<S, U> {
        b.cast::<U, S, E>(self)
    }
}

/// What a generated step's operand is as a tensor of the eager forward: a tensor itself, a
/// deferred call's output, or an IR value.
pub trait AsEager {
    /// The tensor type.
    type Tensor;
}

impl<S: Shape, E: Element> AsEager for Tensor<S, E> {
    type Tensor = Tensor<S, E>;
}

impl<T> AsEager for super::Deferred<T> {
    type Tensor = T;
}

impl<S: Shape, E: Element> AsEager for Value<S, E> {
    type Tensor = Tensor<S, E>;
}

/// A tensor of `v`'s eager type, for the closures `#[model]` generates only to be
/// type-checked (they restate the user's sub-model calls, so a wrong width is reported once,
/// at the user's line) and never calls.
///
/// # Panics
/// Always: nothing calls it.
pub fn eager_of<T: AsEager>(_v: &T) -> T::Tensor {
    unreachable!("only in closures that are type-checked and never called")
}

/// The output type of the user's own sub-model call, restated in a closure that is never
/// called (`#[model]`'s witness of the eager forward's types).
pub fn witness<O, W: FnOnce() -> O>(_call: &W) -> PhantomData<O> {
    PhantomData
}

/// Ties the output type of the user's own call, restated in a closure never called, to the
/// generated call's output `out` (a tensor, a `Deferred` or an IR value), so the closure's
/// types are inferred as the eager forward's are.
pub fn same_output<T: AsEager, W: FnOnce() -> T::Tensor>(_call: &W, _out: &T) {}

/// A sub-model's `forward_train` with its output typed `O`, the output of the user's own call
/// (from [`witness`]): the backward then takes an `O`.
#[allow(clippy::type_complexity)]
pub fn train_call<M, A, X, O>(
    m: &M,
    args: A,
    _witness: PhantomData<O>,
) -> (
    O,
    impl FnOnce(O, &mut super::Gradients, bool) -> M::ArgGrads,
)
where
    M: StaticForward<A, X, Output = O>,
    A: IrArgs,
    O: IrValue,
{
    let (y, backward) = m.forward_train(args);
    (y, move |dy: O, g: &mut super::Gradients, need: bool| {
        backward(dy, g, need)
    })
}

/// [`train_call`] that may leave the sub-model's bias add to the caller
/// (`StaticForward::forward_train_deferred`).
#[allow(clippy::type_complexity)]
pub fn train_call_deferred<M, A, X, O>(
    m: &M,
    args: A,
    _witness: PhantomData<O>,
) -> (
    super::Deferred<O>,
    impl FnOnce(O, &mut super::Gradients, bool) -> M::ArgGrads,
)
where
    M: StaticForward<A, X, Output = O>,
    A: IrArgs,
    O: IrValue,
{
    let (y, backward) = m.forward_train_deferred(args);
    (y, move |dy: O, g: &mut super::Gradients, need: bool| {
        backward(dy, g, need)
    })
}

/// A random argument for a `#[model(check)]` test: normal floats, or zeros for integer and
/// boolean arguments (a valid index for any embedding), with every run-time dim 3.
pub fn check_input<T: CheckInput>(seed: u64) -> T {
    T::random(seed, 3)
}

/// [`check_input`] with every run-time dim `size`.
pub fn check_input_sized<T: CheckInput>(seed: u64, size: usize) -> T {
    T::random(seed, size)
}

/// What [`check_input`] can make.
pub trait CheckInput {
    /// A random value from `seed`, with every run-time dim `size`.
    fn random(seed: u64, size: usize) -> Self;
}

impl<S: Shape, E: Element> CheckInput for Tensor<S, E> {
    fn random(seed: u64, size: usize) -> Self {
        let dims: Vec<usize> = (0..S::RANK)
            .map(|i| S::STATIC_DIMS[i].unwrap_or(size))
            .collect();
        let shape = S::from_dims(&dims).unwrap_or_else(|| unreachable!("static dims fit"));
        let cpu = crate::Device::Cpu;
        if E::DTYPE.is_float() {
            Tensor::<S, f64>::randn(shape, seed, cpu).cast::<E>()
        } else {
            Tensor::<S, f64>::zeros(shape, cpu).cast::<E>()
        }
    }
}

/// The tolerance a check allows for an element type: relative to the values' size.
fn tolerance(d: DType) -> f64 {
    match d {
        DType::F64 => 1e-9,
        DType::F32 => 1e-4,
        _ => 2e-2,
    }
}

/// Asserts two tensors' values agree within the element type's tolerance.
#[track_caller]
fn assert_close<S: Shape, E: Element>(what: &str, got: &Tensor<S, E>, want: &Tensor<S, E>) {
    let (g, w) = (got.cast::<f64>().to_vec(), want.cast::<f64>().to_vec());
    assert_eq!(got.dims(), want.dims(), "{what}: shapes differ");
    let tol = tolerance(E::DTYPE);
    let scale = w.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!(
            (a - b).abs() <= tol * scale,
            "{what}: element {i} is {a} compiled and {b} eager (tolerance {tol} x {scale})"
        );
    }
}

/// The `#[model(check)]` test body: the compiled forward against `eager`, then the static
/// backward's gradients (arguments and every parameter) against the tape's, for the loss
/// `sum(y * r)` with a random `r`.
#[track_caller]
pub fn check_model<M, Args, S, E>(args: Args, eager: impl Fn(&M) -> Tensor<S, E>)
where
    M: crate::nn::Init + crate::nn::Module + StaticForward<Args, Output = Tensor<S, E>>,
    Args: Clone + IrArgs,
    S: crate::shape::rules::BroadcastShapes<S, Output = S>,
    E: rtx_kernels::Float,
{
    let mut m = M::init(&crate::Device::Cpu, 7);
    let fused = m.forward_fused(args.clone());
    let want = eager(&m);
    assert_close("forward", &fused, &want);

    m.track_gradients();
    // The output's run-time dims are the eager output's.
    let r: Tensor<S, E> = Tensor::<S, f64>::randn(want.shape(), 99, crate::Device::Cpu).cast();
    let tape = (&eager(&m) * &r).sum_all().backward();
    let (_, backward) = m.forward_train(args);
    let mut grads = super::Gradients::new();
    let _ = backward(r, &mut grads, false);
    struct Compare<'a> {
        tape: &'a super::Gradients,
        grads: &'a super::Gradients,
    }
    impl crate::nn::Visitor for Compare<'_> {
        fn visit<S2: Shape, E2: rtx_kernels::Float>(
            &mut self,
            name: &str,
            t: &Tensor<S2, E2>,
            kind: crate::nn::TensorKind,
        ) {
            if kind != crate::nn::TensorKind::Parameter {
                return;
            }
            match (self.grads.get(t), self.tape.get(t)) {
                (Some(g), Some(w)) => assert_close(&format!("gradient of {name}"), &g, &w),
                (None, None) => {}
                (g, w) => panic!(
                    "gradient of {name}: the static backward {} one, the tape {}",
                    if g.is_some() { "gives" } else { "gives no" },
                    if w.is_some() { "does" } else { "does not" },
                ),
            }
        }
    }
    m.visit(
        "",
        &mut Compare {
            tape: &tape,
            grads: &grads,
        },
    );
}

/// The type's name without module paths (`Mlp<f32>`), for a graph's name.
pub fn type_label<T: ?Sized>() -> String {
    crate::nn::model::short_type_name(std::any::type_name::<T>())
}
