//! Autograd, tier 1: a tape recorded at run time.
//!
//! A tensor that needs a gradient carries a `Node`: a parameter gets a leaf node from
//! [`Tensor::requires_grad`], and every op on such a tensor gives its output a node holding the
//! op's backward rule and its inputs' nodes. [`Tensor::backward`] walks the graph once, in
//! reverse topological order, and returns [`Gradients`] keyed by node, read back with the
//! parameter's own shape type. Tensors that need no gradient carry no node, and ops on them
//! record nothing, so inference pays nothing for autograd.
//!
//! Backward rules run ops, and ops can fail on a device (out of memory, above all): every rule
//! returns `Result`, and [`Tensor::try_backward`] hands the first error back instead of
//! panicking.
//!
//! Invariant: a backward rule returns one gradient per input, each with exactly that input's
//! shape and element type (rules reduce broadcast dims themselves), so accumulation is a plain
//! add of equal layouts.

pub(crate) mod index;
pub(crate) mod reduce;
pub(crate) mod rules;
pub(crate) mod vjp;

use crate::error::Result;

/// `$body` with the type name `$f` bound to the float type that the element type `$e` is. Each
/// branch is an `if const`, so when the code is instantiated rustc compiles the one branch that
/// `$e` takes and none of the others (a `match` on `E::DTYPE` compiled all four, in every
/// crate that instantiates it). Panics for a non-float `$e`: the tape records floats only.
macro_rules! with_float {
    ($e:ty, $f:ident => $body:expr) => {
        if const { matches!(<$e as rtx_kernels::Element>::DTYPE, rtx_kernels::DType::F32) } {
            type $f = f32;
            $body
        } else if const { matches!(<$e as rtx_kernels::Element>::DTYPE, rtx_kernels::DType::F64) } {
            type $f = f64;
            $body
        } else if const { matches!(<$e as rtx_kernels::Element>::DTYPE, rtx_kernels::DType::F16) } {
            type $f = rtx_kernels::f16;
            $body
        } else if const {
            matches!(
                <$e as rtx_kernels::Element>::DTYPE,
                rtx_kernels::DType::BF16
            )
        } {
            type $f = rtx_kernels::bf16;
            $body
        } else {
            unreachable!("only float tensors carry gradient history")
        }
    };
}
use crate::shape::{Dim, InsertAxis, ReduceAxis, Shape};
use crate::tensor::Replaced;
use crate::tensor::Tensor;
use rtx_backends::{Layout, Storage};
use rtx_kernels::{Element, Float, Num};
use std::any::Any;
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
pub(crate) use with_float;

/// A gradient with its type erased; it is always a `Tensor<S, E>` of the node's own type.
pub(crate) type Erased = Arc<dyn Any + Send + Sync>;

/// An op's backward rule: the output's gradient and one flag per input (whether that input's
/// gradient is wanted) in, one gradient per input out (`None` for inputs not wanted), or the
/// device error of an op the rule ran. The flags come with the gradient rather than being
/// fixed when the op records, so the static backward, which learns what it needs only when
/// it runs, can call the same rule (see [`vjp`]).
pub(crate) type Backward =
    Box<dyn Fn(&Erased, &[bool]) -> Result<Vec<Option<Erased>>> + Send + Sync>;

/// What an observed backward ([`Tensor::try_backward_observed`]) calls with each leaf's node id
/// and final gradient.
pub(crate) type Ready<'a> = &'a mut dyn FnMut(u64, &Erased) -> Result<()>;

/// Adds two gradients of one node's type.
type Accumulate = fn(&Erased, &Erased) -> Result<Erased>;

/// One vertex of the recorded graph.
pub(crate) struct Node {
    id: u64,
    /// The nodes of the op's inputs, in the order the backward rule returns gradients
    /// (`None` for inputs that need no gradient).
    inputs: Vec<Option<Arc<Node>>>,
    /// `None` for a leaf (a parameter).
    backward: Option<Backward>,
    /// Adds two gradients of this node's type.
    accumulate: Accumulate,
}

impl Node {
    /// The node's identity, the key of its gradient in [`Gradients`].
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The sum of two gradients of this node's type.
    pub(crate) fn add_grads(&self, a: &Erased, b: &Erased) -> Result<Erased> {
        no_grad(|| (self.accumulate)(a, b))
    }

    fn new(
        inputs: Vec<Option<Arc<Node>>>,
        backward: Option<Backward>,
        accumulate: Accumulate,
    ) -> Arc<Node> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Arc::new(Node {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            inputs,
            backward,
            accumulate,
        })
    }
}

impl Drop for Node {
    // Long chains (an RNN over thousands of steps) would recurse once per node when the last
    // handle drops; unlink iteratively instead.
    fn drop(&mut self) {
        let mut stack: Vec<Arc<Node>> = self.inputs.drain(..).flatten().collect();
        while let Some(node) = stack.pop() {
            if let Ok(mut owned) = Arc::try_unwrap(node) {
                stack.extend(owned.inputs.drain(..).flatten());
            }
        }
    }
}

thread_local! {
    static GRAD_ENABLED: Cell<bool> = const { Cell::new(true) };
}

/// Runs `f` without recording: ops inside produce tensors with no gradient history (PyTorch's
/// `torch.no_grad()`), as evaluation loops and optimizer updates want.
///
/// ```
/// # use rtx::prelude::*;
/// let w: Tensor<Rank1<2>> = Tensor::ones((Const,), Device::Cpu).requires_grad();
/// let y = rtx::no_grad(|| w.exp());
/// assert!(!y.tracks_grad());
/// ```
pub fn no_grad<R>(f: impl FnOnce() -> R) -> R {
    // The thread-local work is in the guard's functions, which are not generic: only this
    // shell is compiled per closure.
    let _restore = GradMode::enter(false);
    f()
}

/// Runs `f` with recording on whatever the caller's mode: the static backward records one op
/// on leaves of its own to reach that op's rule ([`vjp`]), inside a compiled forward that
/// otherwise runs under [`no_grad`].
pub(crate) fn recording<R>(f: impl FnOnce() -> R) -> R {
    let _restore = GradMode::enter(true);
    f()
}

/// Recording switched on or off while it lives; the previous state comes back when it drops
/// (also on a panic).
struct GradMode(bool);

impl GradMode {
    /// Switches recording on or off.
    fn enter(enabled: bool) -> GradMode {
        GradMode(GRAD_ENABLED.with(|g| g.replace(enabled)))
    }
}

impl Drop for GradMode {
    fn drop(&mut self) {
        GRAD_ENABLED.with(|g| g.set(self.0));
    }
}

/// Whether ops record right now (false inside [`no_grad`]).
pub fn is_grad_enabled() -> bool {
    GRAD_ENABLED.with(|g| g.get())
}

/// Wraps a gradient for the tape.
pub(crate) fn erase<S: Shape, E: Element>(t: Tensor<S, E>) -> Option<Erased> {
    Some(Arc::new(t))
}

fn accumulate<S: Shape, E: Num>(a: &Erased, b: &Erased) -> Result<Erased> {
    let a = a.downcast_ref::<Tensor<S, E>>().expect("gradient type");
    let b = b.downcast_ref::<Tensor<S, E>>().expect("gradient type");
    // The add is a function of the element type alone (compiled once, not once per shape).
    let sum = add_storage(a.storage(), a.layout(), b.storage(), b.layout())?;
    Ok(Arc::new(Tensor::from_storage(sum, a.shape())))
}

/// The sum of two gradients of equal dims, as dense storage.
fn add_storage<E: Num>(
    a: &Storage<E>,
    al: &Layout,
    b: &Storage<E>,
    bl: &Layout,
) -> Result<Storage<E>> {
    debug_assert_eq!(al.dims(), bl.dims());
    Ok(a.binary::<rtx_kernels::op::markers::Add>(al, b, bl)?)
}

/// The gradient `g` of a node of type `Tensor<S, E>`, as that type.
pub(crate) fn grad_as<S: Shape, E: Element>(g: &Erased) -> &Tensor<S, E> {
    g.downcast_ref().expect("gradient type")
}

/// The accumulator for gradients of element type `E`, chosen at run time: ops generic over
/// any `Element` record too, but only float tensors ever carry gradient history.
fn accumulator<S: Shape, E: Element>() -> Accumulate {
    with_float!(E, F => accumulate::<S, F>)
}

/// `t` viewed as its concrete float type `F` (which must be `E`).
fn as_float<S: Shape, E: Element, F: Element>(t: &Tensor<S, E>) -> &Tensor<S, F> {
    (t as &dyn Any).downcast_ref().expect("element type")
}

/// A tensor of concrete float type `F` given back as `E` (which must be `F`).
fn from_float<S: Shape, F: Element, E: Element>(t: Tensor<S, F>) -> Tensor<S, E> {
    *(Box::new(t) as Box<dyn Any>)
        .downcast()
        .expect("element type")
}

/// The gradient of `narrow`: `g` placed at `start..` along axis `I` of zeros shaped like the
/// input.
pub(crate) fn narrow_back<const I: usize, S, D, E>(
    g: &Tensor<Replaced<S, I, D>, E>,
    orig: S,
    start: usize,
) -> Result<Tensor<S, E>>
where
    S: ReduceAxis<I>,
    D: Dim,
    E: Element,
    <S as ReduceAxis<I>>::Reduced: InsertAxis<I, D>,
{
    fn place<const I: usize, S, D, F: Num>(
        g: &Tensor<Replaced<S, I, D>, F>,
        orig: S,
        start: usize,
    ) -> Result<Tensor<S, F>>
    where
        S: ReduceAxis<I>,
        D: Dim,
        <S as ReduceAxis<I>>::Reduced: InsertAxis<I, D>,
    {
        let s =
            crate::rules::views::narrow_back((g.storage(), g.layout()), &orig.dims(), I, start)?;
        Ok(Tensor::from_storage(s, orig))
    }
    Ok(with_float!(E, F => from_float(place::<I, S, D, F>(as_float(g), orig, start)?)))
}

/// Sums a gradient over the dims its input was broadcast along: leading dims the input lacks
/// and dims where the input has size 1. Works for any element type the tape can meet (floats).
pub(crate) fn sum_to<S: Shape, T: Shape, E: Element>(
    g: &Tensor<S, E>,
    target: T,
) -> Result<Tensor<T, E>> {
    // A shell: the sums need only the dims (compiled once per element type).
    let summed = sum_to_storage(g.storage(), g.layout(), &target.dims())?;
    Ok(Tensor::from_storage(summed, target))
}

/// [`sum_to`] on storage seen through `layout`: dense storage of `target`'s dims.
pub(crate) fn sum_to_storage<E: Element>(
    g: &Storage<E>,
    layout: &Layout,
    target: &[usize],
) -> Result<Storage<E>> {
    Ok(with_float!(E, F => {
        let g: &Storage<F> = (g as &dyn Any).downcast_ref().expect("element type");
        let summed = crate::tensor::sum_to_num(g, layout, target)?;
        *(Box::new(summed) as Box<dyn Any>).downcast::<Storage<E>>().expect("element type")
    }))
}

/// Whether an op with these input nodes must record.
pub(crate) fn must_record(inputs: &[Option<&Arc<Node>>]) -> bool {
    is_grad_enabled() && inputs.iter().any(|n| n.is_some())
}

impl<S: Shape, E: Float> Tensor<S, E> {
    /// This tensor as a leaf of the graph: ops on it record, and [`Tensor::backward`] returns
    /// its gradient. (PyTorch's `requires_grad_()`.)
    pub fn requires_grad(self) -> Self {
        self.with_node(Some(Node::new(Vec::new(), None, accumulate::<S, E>)))
    }
}

impl<S: Shape, E: Element> Tensor<S, E> {
    /// Gives an op's output its node: `inputs` are the op's inputs' nodes, `rule` maps the
    /// output's gradient to one gradient per input, or to the device error of an op it ran
    /// (which [`Tensor::try_backward`] returns). Call only when [`must_record`] holds.
    pub(crate) fn record(
        self,
        inputs: Vec<Option<Arc<Node>>>,
        rule: impl Fn(&Tensor<S, E>) -> Result<Vec<Option<Erased>>> + Send + Sync + 'static,
    ) -> Self {
        // Only the boxing is compiled per rule; the node is made once per shape. A gradient
        // the rule computes that is not wanted is dropped by the walk.
        self.record_boxed(
            inputs,
            Box::new(move |g: &Erased, _: &[bool]| rule(grad_as::<S, E>(g))),
        )
    }

    /// [`Tensor::record`] for a rule that skips the gradients not wanted: it gets one flag
    /// per input with the output's gradient. Ops with several inputs whose gradients cost a
    /// kernel each (a product: a second product as large as the forward) record this way.
    pub(crate) fn record_needs(
        self,
        inputs: Vec<Option<Arc<Node>>>,
        rule: impl Fn(&Tensor<S, E>, &[bool]) -> Result<Vec<Option<Erased>>> + Send + Sync + 'static,
    ) -> Self {
        self.record_boxed(
            inputs,
            Box::new(move |g: &Erased, need: &[bool]| rule(grad_as::<S, E>(g), need)),
        )
    }

    /// This tensor, detached from any history, as a leaf of its own when its element type
    /// takes gradients (floats); other types stay without a node, as on the tape.
    pub(crate) fn fresh_leaf(&self) -> Self {
        if !E::DTYPE.is_float() {
            return self.detach();
        }
        let leaf = Node::new(Vec::new(), None, accumulator::<S, E>());
        self.clone().with_node(Some(leaf))
    }

    /// [`Tensor::record`] with the rule boxed.
    pub(crate) fn record_boxed(self, inputs: Vec<Option<Arc<Node>>>, backward: Backward) -> Self {
        self.with_node(Some(Node::new(
            inputs,
            Some(backward),
            accumulator::<S, E>(),
        )))
    }
}

/// A backward rule on the parts of the output's gradient (its storage and layout), without
/// the shape type: rules built by code compiled once per element type (kernels).
pub(crate) type PartsRule<E> =
    Box<dyn Fn(&Storage<E>, &Layout) -> Result<Vec<Option<Erased>>> + Send + Sync>;

impl<S: Shape, E: Element> Tensor<S, E> {
    /// [`Tensor::record`] with a rule on the gradient's parts; one instance per shape, not
    /// one per rule.
    pub(crate) fn record_parts(self, inputs: Vec<Option<Arc<Node>>>, rule: PartsRule<E>) -> Self {
        self.record(inputs, move |g| rule(g.storage(), g.layout()))
    }
}

impl<S: Shape, E: Element> Tensor<S, E> {
    /// Whether this tensor carries gradient history (it is a parameter or was computed from
    /// one while recording).
    pub fn tracks_grad(&self) -> bool {
        self.node().is_some()
    }

    /// Gives this tensor fresh dense storage of its dims (loaded or moved values), keeping
    /// whether it tracks gradients: a tensor that did becomes a fresh leaf.
    pub(crate) fn set_storage(&mut self, storage: Storage<E>)
    where
        E: Float,
    {
        let new = Tensor::from_storage(storage, self.shape());
        *self = if self.tracks_grad() {
            new.requires_grad()
        } else {
            new
        };
    }

    /// The same values without gradient history (PyTorch's `detach()`).
    pub fn detach(&self) -> Self {
        self.clone().with_node(None)
    }
}

/// The gradients of one [`Tensor::backward`] call (or of a static backward,
/// [`crate::compile`]), read back with each parameter's own type.
#[derive(Default)]
pub struct Gradients {
    by_node: HashMap<u64, Erased>,
    /// Told of each gradient as it is added, with the sum so far: how DDP learns, during a
    /// static backward (which has no tape to watch), that a parameter's gradient is complete.
    observer: Option<Observe>,
}

/// What a [`Gradients`] tells of each addition: the node's id and its gradient so far.
pub(crate) type Observe = Box<dyn FnMut(u64, &Erased) + Send>;

impl Gradients {
    /// No gradients yet; a static backward adds them with [`Gradients::add`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `grad` to the gradient of `param`. A parameter that does not track gradients
    /// (frozen, or never given [`Tensor::requires_grad`]) gets none, as with the tape.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let w: Tensor<Rank1<2>> = Tensor::ones((Const,), Device::Cpu).requires_grad();
    /// let mut grads = rtx::Gradients::new();
    /// grads.add(&w, Tensor::from_array([1.0, 2.0], Device::Cpu));
    /// grads.add(&w, Tensor::from_array([1.0, 2.0], Device::Cpu));
    /// assert_eq!(grads.get(&w).unwrap().to_vec(), vec![2.0, 4.0]);
    /// ```
    pub fn add<S: Shape, E: Float>(&mut self, param: &Tensor<S, E>, grad: Tensor<S, E>) {
        if let Some(node) = param.node() {
            self.add_erased(node, Arc::new(grad.detach()));
        }
    }

    /// [`Gradients::add`] without the types (compiled once, not once per parameter shape).
    pub(crate) fn add_erased(&mut self, node: &Node, grad: Erased) {
        let merged = match self.by_node.remove(&node.id) {
            Some(prev) => crate::error::ok(no_grad(|| (node.accumulate)(&prev, &grad))),
            None => grad,
        };
        if let Some(observe) = &mut self.observer {
            observe(node.id, &merged);
        }
        self.by_node.insert(node.id, merged);
    }

    /// No gradients yet, with `observe` told of every later addition (see the field).
    pub(crate) fn observed(observe: Observe) -> Self {
        Gradients {
            by_node: HashMap::new(),
            observer: Some(observe),
        }
    }

    /// Stops telling the observer (dropping it, and what it holds).
    pub(crate) fn unobserve(&mut self) {
        self.observer = None;
    }

    /// The gradient of `param`, shaped like it; `None` when the loss does not depend on it.
    pub fn get<S: Shape, E: Float>(&self, param: &Tensor<S, E>) -> Option<Tensor<S, E>> {
        let g = self.get_erased(param.node()?)?;
        g.downcast_ref::<Tensor<S, E>>().cloned()
    }

    /// The gradient of the tensor with tape node `node`, its type erased.
    pub(crate) fn get_erased(&self, node: &Node) -> Option<&Erased> {
        self.by_node.get(&node.id)
    }

    /// Sets the gradient of the tensor with tape node id `id` (DDP writes back the averaged
    /// gradients by node, its type erased; it must be the node's own tensor type).
    pub(crate) fn set_erased(&mut self, id: u64, grad: Erased) {
        self.by_node.insert(id, grad);
    }

    /// Replaces the gradient of `param` (gradient clipping scales gradients in place); does
    /// nothing when it has none.
    pub(crate) fn replace<S: Shape, E: Float>(&mut self, param: &Tensor<S, E>, grad: Tensor<S, E>) {
        if let Some(slot) = param.node().and_then(|n| self.by_node.get_mut(&n.id)) {
            *slot = Arc::new(grad);
        }
    }

    /// The number of parameters that received a gradient.
    pub fn len(&self) -> usize {
        self.by_node.len()
    }

    /// Whether no parameter received a gradient.
    pub fn is_empty(&self) -> bool {
        self.by_node.is_empty()
    }
}

impl<E: Float> Tensor<(), E> {
    /// Back-propagates from this scalar (a loss) and returns the gradients of every parameter
    /// it depends on. The graph is walked once, in reverse topological order; gradients of a
    /// tensor used several times accumulate.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let w: Tensor<Rank1<3>> = Tensor::from_array([1.0, 2.0, 3.0], Device::Cpu).requires_grad();
    /// let loss = (&w * &w).sum_all(); // d/dw sum(w²) = 2w
    /// let grads = loss.backward();
    /// assert_eq!(grads.get(&w).unwrap().to_vec(), vec![2.0, 4.0, 6.0]);
    /// ```
    ///
    /// # Panics
    /// When an op of the backward pass fails on the device, most often by running out of
    /// memory (see [`Tensor::try_backward`]).
    #[track_caller]
    pub fn backward(&self) -> Gradients {
        crate::error::ok(self.try_backward())
    }

    /// [`Tensor::backward`], returning the first device error of the backward pass (an
    /// out-of-memory, above all) instead of panicking. On an error no gradient is returned,
    /// and nothing else changed: the backward pass only reads the graph (which lives on
    /// while the loss does, and is freed with it, as usual) and never touches the parameters,
    /// so the caller can retry: call `try_backward` again once memory is free, or drop the
    /// loss and run a smaller batch.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// /// The gradients of a loss over the first `n` rows of `x`.
    /// fn grads(
    ///     w: &Tensor<Rank1<2>>,
    ///     x: &Tensor<(usize, Const<2>)>,
    ///     n: usize,
    /// ) -> rtx::Result<rtx::Gradients> {
    ///     let batch = x.try_narrow::<0, usize>(0, n)?;
    ///     batch.try_matmul(w)?.sum_all().try_backward()
    /// }
    ///
    /// let w: Tensor<Rank1<2>> = Tensor::from_array([1.0, -1.0], Device::Cpu).requires_grad();
    /// let x: Tensor<(usize, Const<2>)> =
    ///     Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], (2, Const), Device::Cpu);
    /// let g = match grads(&w, &x, 2) {
    ///     Ok(g) => g,
    ///     // Out of memory on a GPU: nothing changed, so try again with half the batch.
    ///     Err(_) => grads(&w, &x, 1)?,
    /// };
    /// assert_eq!(g.get(&w).unwrap().to_vec(), vec![4.0, 6.0]); // the column sums of x
    /// # Ok::<(), rtx::Error>(())
    /// ```
    pub fn try_backward(&self) -> Result<Gradients> {
        self.try_backward_observed(None)
    }

    /// [`Tensor::try_backward`] that tells `ready` each leaf's gradient (a parameter's) as soon
    /// as it is final: once every node of the graph that consumes the leaf has run its rule,
    /// rather than when the walk reaches the leaf itself (which depth-first order can leave to
    /// the very end). A node whose inputs it alone consumes (a parameter's transpose) runs as
    /// soon as its own gradient is final, for the same reason; that changes no result. DDP all-reduces a bucket of gradients from here while the rest of the
    /// backward runs. `ready` gets the leaf's node id and its gradient, at most once per leaf;
    /// leaves that get no gradient are never reported. The gradients returned and the order
    /// in which they are computed are exactly [`Tensor::try_backward`]'s: only the reporting is
    /// added, and an error from `ready` stops the backward.
    pub(crate) fn try_backward_observed(&self, ready: Option<Ready<'_>>) -> Result<Gradients> {
        let mut by_node = HashMap::new();
        let Some(root) = self.node().cloned() else {
            return Ok(Gradients {
                by_node,
                observer: None,
            });
        };
        let order = inputs_first(&root);
        let mut observer = ready.map(|ready| Observer::new(&order, ready));
        no_grad(|| -> Result<()> {
            let mut pending: HashMap<u64, Erased> = HashMap::new();
            pending.insert(root.id, Arc::new(self.try_ones_like()?));
            let mut work: Vec<Arc<Node>> = Vec::new();
            for node in order.iter().rev() {
                if observer
                    .as_ref()
                    .is_some_and(|o| o.early.contains(&node.id))
                {
                    continue;
                }
                work.push(node.clone());
                // Nodes the observer lets run ahead of their turn are pushed here too.
                while let Some(n) = work.pop() {
                    run_node(&n, &mut pending, &mut by_node, observer.as_mut(), &mut work)?;
                }
            }
            Ok(())
        })?;
        Ok(Gradients {
            by_node,
            observer: None,
        })
    }
}

/// The nodes `root` depends on, itself included, each after all of its inputs (an iterative
/// depth-first search); a backward walks them in reverse.
pub(crate) fn inputs_first(root: &Arc<Node>) -> Vec<Arc<Node>> {
    let mut order: Vec<Arc<Node>> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut stack: Vec<(Arc<Node>, bool)> = vec![(root.clone(), false)];
    while let Some((node, expanded)) = stack.pop() {
        if expanded {
            order.push(node);
            continue;
        }
        if !seen.insert(node.id) {
            continue;
        }
        stack.push((node.clone(), true));
        for input in node.inputs.iter().flatten() {
            if !seen.contains(&input.id) {
                stack.push((input.clone(), false));
            }
        }
    }
    order
}

/// What an observed backward keeps to report leaf gradients early: per node, how many
/// consumers it has in the graph and how many have not run yet.
struct Observer<'a> {
    total: HashMap<u64, usize>,
    left: HashMap<u64, usize>,
    /// Nodes that ran ahead of their turn in the walk.
    early: std::collections::HashSet<u64>,
    ready: Ready<'a>,
}

impl<'a> Observer<'a> {
    fn new(order: &[Arc<Node>], ready: Ready<'a>) -> Self {
        let mut total: HashMap<u64, usize> = HashMap::new();
        for node in order {
            for input in node.inputs.iter().flatten() {
                *total.entry(input.id).or_default() += 1;
            }
        }
        Observer {
            left: total.clone(),
            total,
            early: Default::default(),
            ready,
        }
    }

    /// Whether `node` (all of whose consumers have run) may run ahead of its turn without
    /// changing any result: each of its inputs has it as its only consumer, so the order in
    /// which gradients are added up anywhere stays the walk's. A parameter's transpose
    /// (`w.t()` in a linear layer) is such a node, and running it early is what makes the
    /// parameter's gradient final before the rest of the backward.
    fn may_run_early(&self, node: &Node) -> bool {
        node.backward.is_some()
            && node
                .inputs
                .iter()
                .flatten()
                .all(|i| self.total.get(&i.id) == Some(&1))
    }
}

/// Runs one node of the backward walk: a leaf's gradient is kept, any other node's rule adds
/// its inputs' gradients to `pending`. With an observer, counts the node as run for each
/// input, reports leaves whose last consumer it was, and queues on `work` the inputs that may
/// run ahead of their turn.
fn run_node(
    node: &Arc<Node>,
    pending: &mut HashMap<u64, Erased>,
    by_node: &mut HashMap<u64, Erased>,
    mut observer: Option<&mut Observer<'_>>,
    work: &mut Vec<Arc<Node>>,
) -> Result<()> {
    let g = pending.remove(&node.id);
    match (&node.backward, g) {
        (None, Some(g)) => {
            // A leaf no node consumes (the loss itself) is reported at its turn.
            if let Some(o) = observer.as_mut()
                && !o.total.contains_key(&node.id)
            {
                (o.ready)(node.id, &g)?;
            }
            by_node.insert(node.id, g);
        }
        (Some(rule), Some(g)) => {
            // On the tape every input with a node wants its gradient.
            let need: Vec<bool> = node.inputs.iter().map(Option::is_some).collect();
            for (input, grad) in node.inputs.iter().zip(rule(&g, &need)?) {
                let (Some(input), Some(grad)) = (input, grad) else {
                    continue;
                };
                let merged = match pending.remove(&input.id) {
                    Some(prev) => (input.accumulate)(&prev, &grad)?,
                    None => grad,
                };
                pending.insert(input.id, merged);
            }
        }
        // No gradient reached the node: nothing to run, but it still counts as run below.
        (_, None) => {}
    }
    let Some(o) = observer else {
        return Ok(());
    };
    for input in node.inputs.iter().flatten() {
        let Some(left) = o.left.get_mut(&input.id) else {
            continue;
        };
        *left -= 1;
        if *left > 0 {
            continue;
        }
        if input.backward.is_none() {
            if let Some(g) = pending.get(&input.id) {
                (o.ready)(input.id, g)?;
            }
        } else if o.may_run_early(input) && o.early.insert(input.id) {
            work.push(input.clone());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;
    use crate::shape::Const;
    use rtx_backends::Device;
    use std::sync::atomic::AtomicBool;

    /// The error an op inside a backward rule reports: a GPU's out-of-memory, which the CPU
    /// cannot give.
    fn injected() -> Error {
        Error::Backend(rtx_backends::BackendError::OutOfMemory {
            device: Device::Cuda(0),
            requested: 1 << 20,
            free: 0,
            total: 1 << 30,
            allocated: 1 << 30,
            cached: 0,
        })
    }

    /// `x` passed through a node whose backward rule fails while `fail` is set and passes the
    /// gradient through otherwise.
    fn fallible(x: &Tensor<(Const<3>,)>, fail: Arc<AtomicBool>) -> Tensor<(Const<3>,)> {
        x.clone()
            .record(vec![x.node().cloned()], move |g: &Tensor<(Const<3>,)>| {
                if fail.load(Ordering::Relaxed) {
                    return Err(injected());
                }
                Ok(vec![erase(g.clone())])
            })
    }

    /// loss = sum(exp(w) * fallible(w)) + sum(w): `w` gets gradient through three paths, one
    /// of them through the fallible node, so the failure happens with work before and after it.
    fn loss(w: &Tensor<(Const<3>,)>, fail: Arc<AtomicBool>) -> Tensor<()> {
        (&w.exp() * &fallible(w, fail)).sum_all() + w.sum_all()
    }

    fn param() -> Tensor<(Const<3>,)> {
        Tensor::from_array([0.5, -1.0, 2.0], Device::Cpu).requires_grad()
    }

    #[test]
    fn an_error_in_a_rule_is_returned_and_the_graph_can_be_walked_again() {
        let w = param();
        let fail = Arc::new(AtomicBool::new(true));
        let loss = loss(&w, fail.clone());
        let before = w.to_vec();
        match loss.try_backward() {
            Err(e) => assert_eq!(e, injected()),
            Ok(g) => panic!("a failing rule gave {} gradients", g.len()),
        }
        assert_eq!(
            w.to_vec(),
            before,
            "a failed backward changed the parameter"
        );
        // The failure left the graph as it was: once the op succeeds, the same loss gives the
        // gradients of a backward that never failed, d/dw = w e^w + e^w + 1.
        fail.store(false, Ordering::Relaxed);
        let got = match loss.try_backward() {
            Ok(g) => g.get(&w).map(|t| t.to_vec()),
            Err(e) => panic!("the retry failed: {e}"),
        };
        let fresh = param();
        let want = self::loss(&fresh, Arc::new(AtomicBool::new(false)))
            .backward()
            .get(&fresh)
            .map(|t| t.to_vec());
        assert_eq!(got, want);
        let got = got.unwrap_or_default();
        assert_eq!(got.len(), 3);
        for (g, x) in got.iter().zip(before) {
            let exact = (x as f64 + 1.0) * (x as f64).exp() + 1.0;
            assert!(
                (*g as f64 - exact).abs() < 1e-5 * exact.abs(),
                "{g} vs {exact}"
            );
        }
    }

    #[test]
    fn an_observed_backward_reports_each_parameter_once_last_layer_first_with_equal_bits() {
        let x: Tensor<(Const<4>, Const<3>)> = Tensor::randn((Const, Const), 1, Device::Cpu);
        let w1: Tensor<(Const<5>, Const<3>)> =
            Tensor::randn((Const, Const), 2, Device::Cpu).requires_grad();
        let w2: Tensor<(Const<2>, Const<5>)> =
            Tensor::randn((Const, Const), 3, Device::Cpu).requires_grad();
        // An identity node after the first layer that counts how often its rule has run: the
        // first layer's backward starts there.
        let runs = Arc::new(AtomicU64::new(0));
        let counter = runs.clone();
        let h0 = x.matmul(&w1.t());
        let h0 = h0.clone().record(
            vec![h0.node().cloned()],
            move |g: &Tensor<(Const<4>, Const<5>)>| {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok(vec![erase(g.clone())])
            },
        );
        let h = h0.tanh();
        // `h` is used twice, so its gradient is a sum whose order must not change.
        let loss = (h.matmul(&w2.t()).sum_all() + h.sum_all()) * 0.5;
        let plain = loss.backward();
        runs.store(0, Ordering::SeqCst);
        let mut seen = Vec::new();
        let observed = loss
            .try_backward_observed(Some(&mut |id, g| {
                // The second layer's weight is final before the first layer's backward starts:
                // what lets DDP send it while the rest of the backward runs.
                seen.push((id, g.clone(), runs.load(Ordering::SeqCst)));
                Ok(())
            }))
            .unwrap();
        assert_eq!(
            seen.iter().map(|s| s.2).collect::<Vec<_>>(),
            [0, 1],
            "rules of the first layer run when each weight was reported"
        );
        let id = |w: u64| seen.iter().position(|(i, _, _)| *i == w);
        let (n1, n2) = (w1.node().unwrap().id(), w2.node().unwrap().id());
        assert_eq!(seen.len(), 2, "each parameter reported once");
        // w2's gradient is final before w1's work starts: it is reported first.
        assert_eq!((id(n2), id(n1)), (Some(0), Some(1)));
        let bits = |g: Option<Vec<f32>>| g.unwrap().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(observed.get(&w1).map(|t| t.to_vec())),
            bits(plain.get(&w1).map(|t| t.to_vec()))
        );
        assert_eq!(
            bits(observed.get(&w2).map(|t| t.to_vec())),
            bits(plain.get(&w2).map(|t| t.to_vec()))
        );
        let reported = grad_as::<(Const<2>, Const<5>), f32>(&seen[0].1).to_vec();
        assert_eq!(
            bits(Some(reported)),
            bits(plain.get(&w2).map(|t| t.to_vec()))
        );
    }

    #[test]
    #[should_panic(expected = "out of memory: tried to allocate 1.00 MiB")]
    fn backward_panics_with_the_rules_error() {
        let w = param();
        let _ = loss(&w, Arc::new(AtomicBool::new(true))).backward();
    }
}
