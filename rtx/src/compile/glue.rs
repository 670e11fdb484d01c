//! What the code `#[model]` generates calls besides the public pieces: accumulating a
//! gradient slot, building IR for a sub-model call, an argument or a parameter, the
//! per-type IR cache, and the self-check a `#[model(check)]` test runs.
//!
//! Not for direct use: the names and signatures follow the generated code.

use super::StaticForward;
use crate::ir::{Builder, Graph, IrArgs, IrValue, Value};
use crate::shape::Shape;
use crate::tensor::Tensor;
use rtx_kernels::{DType, Element};
use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Adds a gradient into a slot: the first fills it, later ones add.
pub fn acc<S: Shape, E: Element>(slot: &mut Option<Tensor<S, E>>, g: Option<Tensor<S, E>>) {
    let Some(g) = g else { return };
    *slot = Some(match slot.take() {
        None => g,
        Some(prev) => add(&prev, &g),
    });
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
    match E::DTYPE {
        DType::F32 => typed::<S, f32, E>(a, b),
        DType::F64 => typed::<S, f64, E>(a, b),
        DType::F16 => typed::<S, rtx_kernels::f16, E>(a, b),
        DType::BF16 => typed::<S, rtx_kernels::bf16, E>(a, b),
        other => unreachable!("a gradient of {other:?}: only float tensors take gradients"),
    }
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
pub fn emit_call<M, V>(m: &M, b: &mut Builder, args: V) -> <M::Output as IrValue>::Value
where
    V: ValueArgs,
    M: StaticForward<V::Args>,
{
    m.emit_ir(b, args)
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

/// The IR of the tensor methods a compiled forward calls, by the methods' own names.
pub trait IrMethods {}
