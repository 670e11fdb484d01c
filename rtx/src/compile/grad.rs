//! Static gradients of tensor methods through the tape's own rules: [`vjp1`] (and its forms
//! for two, three and any number of inputs) runs a tensor method once, on its inputs made
//! fresh leaves, with recording on, and returns the output with a backward that runs exactly
//! the rule that method recorded. `#[model]` emits `vjp1(&x, &|x| x.softmax::<1>())` for a
//! user's `x.softmax::<1>()`, so every tensor method a forward calls has the one gradient
//! the tape gives it, written once, where the method is.
//!
//! A backward takes the output's gradient and one `need` flag per input, and returns the
//! gradients asked for: a bare `Option` for one input, a tuple of them for two or three, a
//! `Vec` for a slice. Each rule is told which gradients are wanted, so a product computes no
//! gradient for data that needs none. Only float tensors get gradients (as on the tape, where
//! only they carry history); for other element types, and for an op that passes no gradient
//! (a cast to integers), the gradient is `None`.
//!
//! What recording adds to an op is host work (a leaf node per input, the op's node and its
//! boxed rule); the kernels are the unrecorded op's and, in the backward, the rule's, which
//! are the tape's. The output is handed back without history, so nothing outside the op
//! records.
//!
//! Invariant: a static gradient is the tape's for the same method, bit for bit, because it is
//! computed by the same rule (`crate::autograd::vjp`).

use crate::autograd::vjp::Recorded;
use crate::autograd::{Erased, recording};
use crate::error::{Result, ok};
use crate::shape::Shape;
use crate::tensor::Tensor;
use rtx_kernels::Element;
use std::sync::Arc;

/// The gradients `rec` gives for the output gradient `dy`, those asked for by `need`.
/// Panics with the device's error when a rule fails, as the static backward does.
fn pull<T: Shape, U: Element>(
    rec: &Recorded,
    dy: &Tensor<T, U>,
    need: &[bool],
) -> Vec<Option<Erased>> {
    ok(rec.pull(Arc::new(dy.detach()), need))
}

/// A gradient from [`pull`] as its input's tensor type (a rule returns exactly that type);
/// `None` where none was computed.
fn typed<S: Shape, E: Element>(g: &Option<Erased>) -> Option<Tensor<S, E>> {
    g.as_ref()
        .and_then(|g| g.downcast_ref::<Tensor<S, E>>().cloned())
}

/// `f` applied to `x` with its backward: the rule `f`'s op records on the tape, run on the
/// output's gradient (see the module docs). `f` is one tensor method in `#[model]`'s code;
/// a composition works too (its rules run in the tape's order).
///
/// ```
/// use rtx::prelude::*;
/// use rtx::compile::grad::vjp1;
///
/// let x: Tensor<Rank2<2, 2>> = Tensor::from_array([[1.0, 2.0], [3.0, 4.0]], Device::Cpu);
/// let (y, backward) = vjp1(&x, &|x| x.sum::<1>());
/// assert_eq!(y.to_vec(), vec![3.0, 7.0]);
/// let dx = backward(&Tensor::from_array([1.0, 10.0], Device::Cpu), [true]).unwrap();
/// assert_eq!(dx.to_vec(), vec![1.0, 1.0, 10.0, 10.0]);
/// ```
///
/// # Panics
/// As `f` does; its backward, when the device fails.
#[allow(clippy::type_complexity)]
pub fn vjp1<S: Shape, E: Element, T: Shape, U: Element>(
    x: &Tensor<S, E>,
    f: &dyn Fn(&Tensor<S, E>) -> Tensor<T, U>,
) -> (
    Tensor<T, U>,
    impl FnOnce(&Tensor<T, U>, [bool; 1]) -> Option<Tensor<S, E>> + use<S, E, T, U>,
) {
    ok(try_vjp1(x, &|x| Ok(f(x))))
}

/// [`vjp1`] for a fallible `f` (a `try_` method): its error, when it fails.
#[allow(clippy::type_complexity)]
pub fn try_vjp1<S: Shape, E: Element, T: Shape, U: Element>(
    x: &Tensor<S, E>,
    f: &dyn Fn(&Tensor<S, E>) -> Result<Tensor<T, U>>,
) -> Result<(
    Tensor<T, U>,
    impl FnOnce(&Tensor<T, U>, [bool; 1]) -> Option<Tensor<S, E>> + use<S, E, T, U>,
)> {
    let x = x.fresh_leaf();
    let y = recording(|| f(&x))?;
    let rec = Recorded::new(&y, &[x.node()]);
    let backward = move |dy: &Tensor<T, U>, need: [bool; 1]| typed(&pull(&rec, dy, &need)[0]);
    Ok((y.detach(), backward))
}

/// [`vjp1`] for a method of two tensors (`a.matmul(&b)`); the backward returns both
/// gradients.
///
/// ```
/// use rtx::prelude::*;
/// use rtx::compile::grad::vjp2;
/// let a: Tensor<Rank2<1, 2>> = Tensor::from_array([[1.0, 2.0]], Device::Cpu);
/// let b: Tensor<Rank2<2, 1>> = Tensor::from_array([[3.0], [4.0]], Device::Cpu);
/// let (y, backward) = vjp2(&a, &b, &|a, b| a.matmul(b));
/// assert_eq!(y.to_vec(), vec![11.0]);
/// let (da, db) = backward(&y.ones_like(), [false, true]);
/// assert!(da.is_none()); // not asked for, so not computed
/// assert_eq!(db.unwrap().to_vec(), vec![1.0, 2.0]);
/// ```
///
/// # Panics
/// As `f` does; its backward, when the device fails.
#[allow(clippy::type_complexity)]
pub fn vjp2<A: Shape, EA: Element, B: Shape, EB: Element, T: Shape, U: Element>(
    a: &Tensor<A, EA>,
    b: &Tensor<B, EB>,
    f: &dyn Fn(&Tensor<A, EA>, &Tensor<B, EB>) -> Tensor<T, U>,
) -> (
    Tensor<T, U>,
    impl FnOnce(&Tensor<T, U>, [bool; 2]) -> (Option<Tensor<A, EA>>, Option<Tensor<B, EB>>)
    + use<A, EA, B, EB, T, U>,
) {
    ok(try_vjp2(a, b, &|a, b| Ok(f(a, b))))
}

/// [`vjp2`] for a fallible `f`: its error, when it fails.
#[allow(clippy::type_complexity)]
pub fn try_vjp2<A: Shape, EA: Element, B: Shape, EB: Element, T: Shape, U: Element>(
    a: &Tensor<A, EA>,
    b: &Tensor<B, EB>,
    f: &dyn Fn(&Tensor<A, EA>, &Tensor<B, EB>) -> Result<Tensor<T, U>>,
) -> Result<(
    Tensor<T, U>,
    impl FnOnce(&Tensor<T, U>, [bool; 2]) -> (Option<Tensor<A, EA>>, Option<Tensor<B, EB>>)
    + use<A, EA, B, EB, T, U>,
)> {
    let (a, b) = (a.fresh_leaf(), b.fresh_leaf());
    let y = recording(|| f(&a, &b))?;
    let rec = Recorded::new(&y, &[a.node(), b.node()]);
    let backward = move |dy: &Tensor<T, U>, need: [bool; 2]| {
        let g = pull(&rec, dy, &need);
        (typed(&g[0]), typed(&g[1]))
    };
    Ok((y.detach(), backward))
}

/// [`vjp1`] for a method of three tensors (`x.where_cond(&cond, &other)`); the backward
/// returns the three gradients.
///
/// # Panics
/// As `f` does; its backward, when the device fails.
#[allow(clippy::type_complexity)]
pub fn vjp3<
    A: Shape,
    EA: Element,
    B: Shape,
    EB: Element,
    C: Shape,
    EC: Element,
    T: Shape,
    U: Element,
>(
    a: &Tensor<A, EA>,
    b: &Tensor<B, EB>,
    c: &Tensor<C, EC>,
    f: &dyn Fn(&Tensor<A, EA>, &Tensor<B, EB>, &Tensor<C, EC>) -> Tensor<T, U>,
) -> (
    Tensor<T, U>,
    impl FnOnce(
        &Tensor<T, U>,
        [bool; 3],
    ) -> (
        Option<Tensor<A, EA>>,
        Option<Tensor<B, EB>>,
        Option<Tensor<C, EC>>,
    ) + use<A, EA, B, EB, C, EC, T, U>,
) {
    let (a, b, c) = (a.fresh_leaf(), b.fresh_leaf(), c.fresh_leaf());
    let y = recording(|| f(&a, &b, &c));
    let rec = Recorded::new(&y, &[a.node(), b.node(), c.node()]);
    let backward = move |dy: &Tensor<T, U>, need: [bool; 3]| {
        let g = pull(&rec, dy, &need);
        (typed(&g[0]), typed(&g[1]), typed(&g[2]))
    };
    (y.detach(), backward)
}

/// [`vjp1`] for a function of any number of tensors of one type (`Tensor::cat`,
/// `Tensor::stack`); the backward takes one flag per input and returns one entry per input.
///
/// ```
/// use rtx::prelude::*;
/// use rtx::compile::grad::vjp_n;
/// let a: Tensor<(usize,)> = Tensor::from_vec(vec![1.0, 2.0], (2,), Device::Cpu);
/// let b: Tensor<(usize,)> = Tensor::from_vec(vec![3.0], (1,), Device::Cpu);
/// let (c, backward) = vjp_n(&[&a, &b], &|xs| Tensor::cat::<0, Const<3>>(xs));
/// assert_eq!(c.to_vec(), vec![1.0, 2.0, 3.0]);
/// let d = backward(&c, &[true, true]);
/// assert_eq!(d[1].as_ref().unwrap().to_vec(), vec![3.0]);
/// ```
///
/// # Panics
/// As `f` does; its backward, when the device fails.
#[allow(clippy::type_complexity)]
pub fn vjp_n<S: Shape, E: Element, T: Shape, U: Element>(
    xs: &[&Tensor<S, E>],
    f: &dyn Fn(&[&Tensor<S, E>]) -> Tensor<T, U>,
) -> (
    Tensor<T, U>,
    impl FnOnce(&Tensor<T, U>, &[bool]) -> Vec<Option<Tensor<S, E>>> + use<S, E, T, U>,
) {
    let leaves: Vec<Tensor<S, E>> = xs.iter().map(|x| x.fresh_leaf()).collect();
    let refs: Vec<&Tensor<S, E>> = leaves.iter().collect();
    let y = recording(|| f(&refs));
    let nodes: Vec<_> = leaves.iter().map(|x| x.node()).collect();
    let rec = Recorded::new(&y, &nodes);
    let n = leaves.len();
    let backward = move |dy: &Tensor<T, U>, need: &[bool]| {
        // A missing flag asks for nothing.
        let need: Vec<bool> = (0..n)
            .map(|k| need.get(k).copied().unwrap_or(false))
            .collect();
        pull(&rec, dy, &need).iter().map(typed).collect()
    };
    (y.detach(), backward)
}
