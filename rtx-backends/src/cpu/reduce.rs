//! Reductions along one axis of a strided layout (sum, prod, max, min, argmax, argmin, mean,
//! variance, logsumexp) and the row-wise softmax family, on the CPU.
//!
//! Every reduction is a `Fold`: a state per output element, stepped through the elements of
//! the axis. Three loops drive the folds:
//! - rows: the axis has stride 1, so each output reads one contiguous slice, folded by
//!   `Fold::block` with several accumulators that the compiler vectorizes;
//! - tiles: the axis is strided but neighbouring outputs are neighbours in memory (reducing
//!   axis 0 of a row-major matrix), so a tile of outputs advances together, one contiguous
//!   run per step of the axis;
//! - strided: anything else, one output at a time.
//!
//! Invariant (determinism): the work is split into fixed chunks of outputs, and an axis longer
//! than [`BLOCK`] is cut into fixed blocks whose states are combined left to right. Neither
//! split depends on the thread count, so results are bitwise the same on any number of threads
//! (the order of summation may depend on the layout, never on scheduling).
//!
//! Accumulators: f32 and f64 accumulate in their own type, f16 and bf16 in f32, integers in
//! their own type with wrapping (which gives the same bits as a wider accumulator truncated).

use super::CHUNK;
use super::elementwise::INLINE;
use super::{for_chunks_mut, parallel_map};
use crate::{BackendError, Layout, Result};
use half::{bf16, f16};
use rtx_kernels::op::ReduceOp;
use rtx_kernels::{DType, Element, Float, FloatMath, Num};
use std::any::Any;
use std::borrow::Cow;
use std::mem::MaybeUninit;

/// Axis elements one task folds at a time; longer axes are split into blocks of this size.
pub const BLOCK: usize = 1 << 14;
/// Independent accumulators in the contiguous inner loop (a multiple of every SIMD width).
const LANES: usize = 16;
/// Outputs that advance together along a strided axis in the tile loop.
const TILE: usize = 64;

/// A reduction as a fold over the elements of one axis.
trait Fold<E: Copy>: Sync {
    /// The running state of one output.
    type State: Copy + Send + Sync;
    /// What one output becomes.
    type Out: Send;
    /// The state before any element, for output `j` (in the reduced row-major order).
    fn init(&self, j: usize) -> Self::State;
    /// Folds element `x` at axis position `k`.
    fn step(&self, s: Self::State, x: E, k: usize) -> Self::State;
    /// Folds a contiguous run starting at axis position `k0` into `init`; overridden with a
    /// vectorizable loop where the op allows it.
    #[inline]
    fn block(&self, init: Self::State, xs: &[E], k0: usize) -> Self::State {
        let mut s = init;
        for (i, &x) in xs.iter().enumerate() {
            s = self.step(s, x, k0 + i);
        }
        s
    }
    /// Combines the states of two adjacent runs, the left one first.
    fn combine(&self, a: Self::State, b: Self::State) -> Self::State;
    /// The output of a final state.
    fn finish(&self, s: Self::State) -> Self::Out;
}

/// `op` over `xs` with [`LANES`] accumulators combined pairwise in a fixed order, then the tail.
#[inline(always)]
fn lanes<E: Copy, A: Copy>(xs: &[E], id: A, load: impl Fn(E) -> A, op: impl Fn(A, A) -> A) -> A {
    let mut acc = [id; LANES];
    let mut chunks = xs.chunks_exact(LANES);
    for c in &mut chunks {
        for i in 0..LANES {
            acc[i] = op(acc[i], load(c[i]));
        }
    }
    let mut w = LANES;
    while w > 1 {
        w /= 2;
        for i in 0..w {
            acc[i] = op(acc[i], acc[i + w]);
        }
    }
    let mut r = acc[0];
    for &x in chunks.remainder() {
        r = op(r, load(x));
    }
    r
}

/// The layout with `axis` removed: it walks the outputs' first elements.
fn without_axis(l: &Layout, axis: usize) -> Layout {
    let mut dims = l.dims().to_vec();
    let mut strides = l.strides().to_vec();
    dims.remove(axis);
    strides.remove(axis);
    Layout::new(&dims, &strides, l.offset())
}

/// The storage offset of logical element `j` of `l`.
fn offset_of(l: &Layout, j: usize) -> usize {
    l.offsets_from(j).next().unwrap_or(l.offset())
}

/// Fills a fresh vector of `n` elements in tasks of `per_task` elements; `fill(start, chunk)`
/// writes every slot of its chunk. Each output reads `reads` input elements: when all of them
/// together are few (at most [`INLINE`]), the whole vector is filled on the calling thread,
/// since waking a pool thread costs more than such a pass (the bias gradient of a Linear
/// layer, 128 x 256, took several times longer through the pool). Each output is computed the
/// same way either way, so only time changes.
fn build_in<U: Send>(
    n: usize,
    per_task: usize,
    reads: usize,
    fill: impl Fn(usize, &mut [MaybeUninit<U>]) + Sync,
) -> Vec<U> {
    let per_task = per_task.max(1);
    let mut out = Vec::with_capacity(n);
    let spare = &mut out.spare_capacity_mut()[..n];
    if n <= per_task || n.saturating_mul(reads.max(1)) <= INLINE {
        fill(0, spare);
    } else {
        for_chunks_mut(spare, per_task, &|c, chunk| fill(c * per_task, chunk));
    }
    // SAFETY: every `fill` below writes each slot of its chunk, and the chunks cover 0..n.
    unsafe { out.set_len(n) };
    out
}

/// Outputs per task so that one task folds about `CHUNK` elements.
fn outputs_per_task(k_len: usize) -> usize {
    (CHUNK / k_len.max(1)).max(1)
}

/// Runs fold `f` along `axis` of `l`: one output per element of the other axes, in row-major
/// order.
fn fold_axis<E: Copy + Sync, F: Fold<E>>(src: &[E], l: &Layout, axis: usize, f: &F) -> Vec<F::Out> {
    let k_len = l.dims()[axis];
    let stride = l.strides()[axis];
    let rl = without_axis(l, axis);
    let m = rl.numel();
    if m == 0 {
        return Vec::new();
    }
    if k_len == 0 {
        return build_in(m, CHUNK, 1, |start, out| {
            for (i, o) in out.iter_mut().enumerate() {
                o.write(f.finish(f.init(start + i)));
            }
        });
    }
    if stride == 1 || k_len == 1 {
        return fold_rows(src, &rl, k_len, f);
    }
    let r = rl.rank();
    if r > 0 && rl.strides()[r - 1] == 1 && rl.dims()[r - 1] > 1 {
        return fold_tiles(src, &rl, k_len, stride, f);
    }
    build_in(m, outputs_per_task(k_len), k_len, |start, out| {
        for ((i, o), base) in out.iter_mut().enumerate().zip(rl.offsets_from(start)) {
            let mut s = f.init(start + i);
            for k in 0..k_len {
                s = f.step(s, src[base + k * stride], k);
            }
            o.write(f.finish(s));
        }
    })
}

/// The fold of one contiguous row: blocks of [`BLOCK`] combined left to right.
fn fold_row<E: Copy, F: Fold<E>>(f: &F, row: &[E], j: usize) -> F::State {
    let mut blocks = row.chunks(BLOCK);
    let first = blocks.next().unwrap_or(&[]);
    let mut s = f.block(f.init(j), first, 0);
    for (b, xs) in blocks.enumerate() {
        s = f.combine(s, f.block(f.init(j), xs, (b + 1) * BLOCK));
    }
    s
}

/// Rows with stride 1. A long row is split into blocks folded in parallel and combined in
/// order, exactly as [`fold_row`] combines them, so both give the same bits.
fn fold_rows<E: Copy + Sync, F: Fold<E>>(
    src: &[E],
    rl: &Layout,
    k_len: usize,
    f: &F,
) -> Vec<F::Out> {
    let m = rl.numel();
    if k_len <= BLOCK {
        return build_in(m, outputs_per_task(k_len), k_len, |start, out| {
            for ((i, o), base) in out.iter_mut().enumerate().zip(rl.offsets_from(start)) {
                o.write(f.finish(fold_row(f, &src[base..base + k_len], start + i)));
            }
        });
    }
    let nb = k_len.div_ceil(BLOCK);
    let block = |item: usize| {
        let (j, b) = (item / nb, item % nb);
        let k0 = b * BLOCK;
        let base = offset_of(rl, j) + k0;
        let len = BLOCK.min(k_len - k0);
        f.block(f.init(j), &src[base..base + len], k0)
    };
    // The same blocks either way; a short total stays on the calling thread (see `build_in`).
    let states: Vec<F::State> = if m.saturating_mul(k_len) <= INLINE {
        (0..m * nb).map(block).collect()
    } else {
        parallel_map(m * nb, &block)
    };
    states
        .chunks(nb)
        .map(|s| f.finish(s[1..].iter().fold(s[0], |a, &b| f.combine(a, b))))
        .collect()
}

/// A strided axis whose neighbouring outputs are neighbours in memory: up to [`TILE`] outputs
/// step along the axis together, reading one contiguous run per axis position.
fn fold_tiles<E: Copy + Sync, F: Fold<E>>(
    src: &[E],
    rl: &Layout,
    k_len: usize,
    stride: usize,
    f: &F,
) -> Vec<F::Out> {
    let m = rl.numel();
    let inner = rl.dims()[rl.rank() - 1];
    let per_task = outputs_per_task(k_len).max(TILE);
    build_in(m, per_task, k_len, |start, out| {
        let mut states = Vec::with_capacity(TILE);
        let mut done = 0;
        while done < out.len() {
            let j = start + done;
            let run = (inner - j % inner).min(out.len() - done).min(TILE);
            let base = offset_of(rl, j);
            states.clear();
            states.extend((0..run).map(|t| f.init(j + t)));
            for k in 0..k_len {
                let xs = &src[base + k * stride..base + k * stride + run];
                for (s, &x) in states.iter_mut().zip(xs) {
                    *s = f.step(*s, x, k);
                }
            }
            for (o, &s) in out[done..done + run].iter_mut().zip(&states) {
                o.write(f.finish(s));
            }
            done += run;
        }
    })
}

/// An associative op with an identity, over the accumulator type.
trait Monoid: Sync {
    fn id<A: Num>() -> A;
    fn op<A: Num>(a: A, b: A) -> A;
}

macro_rules! monoid {
    ($(#[$doc:meta])* $name:ident, $id:ident, |$a:ident, $b:ident| $op:expr) => {
        $(#[$doc])*
        struct $name;
        impl Monoid for $name {
            #[inline(always)]
            fn id<A: Num>() -> A {
                A::$id
            }
            #[inline(always)]
            fn op<A: Num>($a: A, $b: A) -> A {
                $op
            }
        }
    };
}

monoid!(/// Sum (integers wrap).
    SumOp, ZERO, |a, b| a.add(b));
monoid!(/// Product (integers wrap).
    ProdOp, ONE, |a, b| a.mul(b));
monoid!(/// NaN-propagating maximum.
    MaxOp, LOWEST, |a, b| a.max_of(b));
monoid!(/// NaN-propagating minimum.
    MinOp, HIGHEST, |a, b| a.min_of(b));

/// Sum, product, max or min: elements widened by `load` to the accumulator, the result
/// narrowed back by `store`.
struct MonoidFold<L, S, O> {
    load: L,
    store: S,
    op: std::marker::PhantomData<O>,
}

impl<E: Copy + Send, A: Num, L, S, O> Fold<E> for MonoidFold<L, S, O>
where
    L: Fn(E) -> A + Sync,
    S: Fn(A) -> E + Sync,
    O: Monoid,
{
    type State = A;
    type Out = E;
    #[inline(always)]
    fn init(&self, _: usize) -> A {
        O::id()
    }
    #[inline(always)]
    fn step(&self, s: A, x: E, _: usize) -> A {
        O::op(s, (self.load)(x))
    }
    #[inline]
    fn block(&self, init: A, xs: &[E], _: usize) -> A {
        O::op(init, lanes(xs, O::id(), &self.load, O::op))
    }
    #[inline(always)]
    fn combine(&self, a: A, b: A) -> A {
        O::op(a, b)
    }
    #[inline(always)]
    fn finish(&self, s: A) -> E {
        (self.store)(s)
    }
}

/// Index of the first maximum (or minimum); NaN counts as the extreme both ways, as in
/// PyTorch, so the first NaN wins.
struct ArgFold<L> {
    load: L,
    max: bool,
}

impl<L> ArgFold<L> {
    /// Whether `x` replaces the current best `b` (ties keep the earlier index).
    #[inline(always)]
    fn beats<A: Num>(&self, x: A, b: A) -> bool {
        #[allow(clippy::eq_op)]
        let (x_nan, b_nan) = (x != x, b != b);
        if b_nan {
            return false;
        }
        x_nan || if self.max { x > b } else { x < b }
    }
}

impl<E: Copy, A: Num, L> Fold<E> for ArgFold<L>
where
    L: Fn(E) -> A + Sync,
{
    /// The best value so far and its index (-1 before any element).
    type State = (A, i64);
    type Out = i64;
    #[inline(always)]
    fn init(&self, _: usize) -> (A, i64) {
        (A::ZERO, -1)
    }
    #[inline(always)]
    fn step(&self, s: (A, i64), x: E, k: usize) -> (A, i64) {
        let x = (self.load)(x);
        if s.1 < 0 || self.beats(x, s.0) {
            (x, k as i64)
        } else {
            s
        }
    }
    /// Two passes: the extreme by vectorizable lanes, then the first position holding it.
    #[inline]
    fn block(&self, init: (A, i64), xs: &[E], k0: usize) -> (A, i64) {
        let m = if self.max {
            lanes(xs, A::LOWEST, &self.load, A::max_of)
        } else {
            lanes(xs, A::HIGHEST, &self.load, A::min_of)
        };
        #[allow(clippy::eq_op)]
        let m_nan = m != m;
        let found = xs.iter().position(|&x| {
            let v = (self.load)(x);
            #[allow(clippy::eq_op)]
            let v_nan = v != v;
            v == m || (m_nan && v_nan)
        });
        match found {
            Some(i) => <Self as Fold<E>>::combine(self, init, (m, (k0 + i) as i64)),
            None => init,
        }
    }
    #[inline(always)]
    fn combine(&self, a: (A, i64), b: (A, i64)) -> (A, i64) {
        if a.1 < 0 || (b.1 >= 0 && self.beats(b.0, a.0)) {
            b
        } else {
            a
        }
    }
    #[inline(always)]
    fn finish(&self, s: (A, i64)) -> i64 {
        s.1
    }
}

/// The sum of the axis in `E::Acc`, divided by the axis length (NaN for an empty axis).
struct MeanFold {
    k_len: usize,
}

impl<E: Float> Fold<E> for MeanFold {
    type State = E::Acc;
    type Out = E::Acc;
    #[inline(always)]
    fn init(&self, _: usize) -> E::Acc {
        E::Acc::c(0.0)
    }
    #[inline(always)]
    fn step(&self, s: E::Acc, x: E, _: usize) -> E::Acc {
        s + x.to_acc()
    }
    #[inline]
    fn block(&self, init: E::Acc, xs: &[E], _: usize) -> E::Acc {
        init + lanes(xs, E::Acc::c(0.0), E::to_acc, |a, b| a + b)
    }
    #[inline(always)]
    fn combine(&self, a: E::Acc, b: E::Acc) -> E::Acc {
        a + b
    }
    #[inline(always)]
    fn finish(&self, s: E::Acc) -> E::Acc {
        s / E::Acc::c(self.k_len as f64)
    }
}

/// The second pass of the variance: squared deviations from each output's mean, divided by
/// `k_len - correction`; the square root of that for `std`.
struct SqDevFold<'a, A> {
    means: &'a [A],
    divisor: A,
    sqrt: bool,
}

impl<E: Float> Fold<E> for SqDevFold<'_, E::Acc> {
    /// The output's mean and the running sum of squares.
    type State = (E::Acc, E::Acc);
    type Out = E;
    #[inline(always)]
    fn init(&self, j: usize) -> Self::State {
        (self.means[j], E::Acc::c(0.0))
    }
    #[inline(always)]
    fn step(&self, (mu, s): Self::State, x: E, _: usize) -> Self::State {
        let d = x.to_acc() - mu;
        (mu, s + d * d)
    }
    #[inline]
    fn block(&self, (mu, s): Self::State, xs: &[E], _: usize) -> Self::State {
        let sq = |x: E| {
            let d = x.to_acc() - mu;
            d * d
        };
        (mu, s + lanes(xs, E::Acc::c(0.0), sq, |a, b| a + b))
    }
    #[inline(always)]
    fn combine(&self, a: Self::State, b: Self::State) -> Self::State {
        (a.0, a.1 + b.1)
    }
    #[inline(always)]
    fn finish(&self, (_, s): Self::State) -> E {
        let v = s / self.divisor;
        E::from_acc(if self.sqrt { v.sqrt() } else { v })
    }
}

/// NaN-propagating maximum in a compute type.
#[inline(always)]
fn fmax<A: FloatMath>(a: A, b: A) -> A {
    #[allow(clippy::eq_op)]
    if a != a || a >= b { a } else { b }
}

/// The softmax statistics of each output: the maximum `m` and `s = Σ exp(x - m)`. Blocks take
/// two passes (max, then the sum); single steps rescale online.
struct LseFold;

impl<E: Float> Fold<E> for LseFold {
    type State = (E::Acc, E::Acc);
    type Out = (E::Acc, E::Acc);
    #[inline(always)]
    fn init(&self, _: usize) -> Self::State {
        (E::Acc::c(f64::NEG_INFINITY), E::Acc::c(0.0))
    }
    #[inline]
    fn step(&self, (m, s): Self::State, x: E, _: usize) -> Self::State {
        let x = x.to_acc();
        if x == E::Acc::c(f64::NEG_INFINITY) {
            (m, s)
        } else if x > m {
            (x, s * (m - x).exp() + E::Acc::c(1.0))
        } else {
            // NaN lands here and poisons the sum, so the result is NaN as it should be.
            (m, s + (x - m).exp())
        }
    }
    #[inline]
    fn block(&self, init: Self::State, xs: &[E], _: usize) -> Self::State {
        let m = lanes(xs, E::Acc::c(f64::NEG_INFINITY), E::to_acc, fmax);
        let s = if m == E::Acc::c(f64::NEG_INFINITY) {
            E::Acc::c(0.0)
        } else {
            let mut s = E::Acc::c(0.0);
            for &x in xs {
                s = s + (x.to_acc() - m).exp();
            }
            s
        };
        <Self as Fold<E>>::combine(self, init, (m, s))
    }
    #[inline]
    fn combine(&self, (ma, sa): Self::State, (mb, sb): Self::State) -> Self::State {
        let m = fmax(ma, mb);
        if m == E::Acc::c(f64::NEG_INFINITY) {
            return (m, E::Acc::c(0.0));
        }
        let scale = |mx: E::Acc, s: E::Acc| {
            if mx == E::Acc::c(f64::NEG_INFINITY) {
                E::Acc::c(0.0)
            } else {
                s * (mx - m).exp()
            }
        };
        (m, scale(ma, sa) + scale(mb, sb))
    }
    #[inline(always)]
    fn finish(&self, s: Self::State) -> Self::State {
        s
    }
}

/// `ln Σ exp(x)` from the statistics: `m` itself when it is infinite (so a row of -inf gives
/// -inf and a row holding +inf gives +inf), else `m + ln s`.
#[inline]
fn lse_of<A: FloatMath>((m, s): (A, A)) -> A {
    let inf = A::c(f64::INFINITY);
    if m == inf || m == -inf { m } else { m + s.ln() }
}

/// The error for an op that has no value on an empty axis.
pub(crate) fn empty_axis(op: ReduceOp, l: &Layout, axis: usize) -> BackendError {
    BackendError::BadArgument {
        op: rtx_kernels::Op::Reduce(op).name(),
        msg: format!("cannot reduce axis {axis} of size 0 (sizes {:?})", l.dims()),
    }
}

/// Widens a half-precision element to f32 with `half`'s direct conversions (the generic
/// `to_f64` takes a slow, branchy path); the type test folds away when compiled.
#[inline(always)]
fn half_to_f32<E: Element>(x: E) -> f32 {
    let any = &x as &dyn Any;
    if let Some(v) = any.downcast_ref::<bf16>() {
        v.to_f32()
    } else if let Some(v) = any.downcast_ref::<f16>() {
        v.to_f32()
    } else {
        x.to_f64() as f32
    }
}

/// Runs `$body` with `$load`/`$store` closures converting `E` to and from its accumulator
/// type: f32 for f16 and bf16, `E` itself otherwise.
macro_rules! with_acc {
    ($e:ty, |$load:ident, $store:ident| $body:expr) => {
        match <$e>::DTYPE {
            DType::F16 | DType::BF16 => {
                let $load = half_to_f32::<$e>;
                let $store = |a: f32| <$e>::from_f64(a as f64);
                $body
            }
            _ => {
                let $load = |x: $e| x;
                let $store = |a: $e| a;
                $body
            }
        }
    };
}

/// Sum, product, max or min along `axis`; the output is contiguous with the axis removed.
/// Max and min of an empty axis are errors; the arg ops go through [`arg_reduce`].
pub fn reduce<E: Num>(src: &[E], l: &Layout, axis: usize, op: ReduceOp) -> Result<Vec<E>> {
    fn run<E: Num, O: Monoid, A: Num>(
        src: &[E],
        l: &Layout,
        axis: usize,
        load: impl Fn(E) -> A + Sync,
        store: impl Fn(A) -> E + Sync,
    ) -> Vec<E> {
        let f = MonoidFold {
            load,
            store,
            op: std::marker::PhantomData::<O>,
        };
        fold_axis(src, l, axis, &f)
    }
    if matches!(
        op,
        ReduceOp::Max | ReduceOp::Min | ReduceOp::ArgMax | ReduceOp::ArgMin
    ) && l.dims()[axis] == 0
    {
        return Err(empty_axis(op, l, axis));
    }
    Ok(with_acc!(E, |load, store| match op {
        ReduceOp::Sum => run::<E, SumOp, _>(src, l, axis, load, store),
        ReduceOp::Prod => run::<E, ProdOp, _>(src, l, axis, load, store),
        ReduceOp::Max => run::<E, MaxOp, _>(src, l, axis, load, store),
        ReduceOp::Min => run::<E, MinOp, _>(src, l, axis, load, store),
        ReduceOp::ArgMax | ReduceOp::ArgMin => {
            return Err(BackendError::BadArgument {
                op: rtx_kernels::Op::Reduce(op).name(),
                msg: "gives indices, not values: call arg_reduce".into(),
            });
        }
    }))
}

/// Argmax or argmin along `axis`: the index of the first extreme (the first NaN, if any).
pub fn arg_reduce<E: Num>(src: &[E], l: &Layout, axis: usize, op: ReduceOp) -> Result<Vec<i64>> {
    let max = match op {
        ReduceOp::ArgMax => true,
        ReduceOp::ArgMin => false,
        _ => {
            return Err(BackendError::BadArgument {
                op: rtx_kernels::Op::Reduce(op).name(),
                msg: "gives values, not indices: call reduce".into(),
            });
        }
    };
    if l.dims()[axis] == 0 {
        return Err(empty_axis(op, l, axis));
    }
    Ok(with_acc!(E, |load, store| {
        let _ = store;
        fold_axis(src, l, axis, &ArgFold { load, max })
    }))
}

/// The mean along `axis`, summed in `E::Acc` (NaN for an empty axis, as in PyTorch).
pub fn mean<E: Float>(src: &[E], l: &Layout, axis: usize) -> Vec<E> {
    let means: Vec<E::Acc> = fold_axis(
        src,
        l,
        axis,
        &MeanFold {
            k_len: l.dims()[axis],
        },
    );
    means.into_iter().map(E::from_acc).collect()
}

/// The variance along `axis` with Bessel-style `correction` (1 = unbiased), or its square root:
/// two passes, the mean and then the squared deviations from it, both in `E::Acc`. An axis of
/// at most `correction` elements divides by zero, giving NaN or infinity as PyTorch does.
pub fn var<E: Float>(src: &[E], l: &Layout, axis: usize, correction: usize, sqrt: bool) -> Vec<E> {
    let k_len = l.dims()[axis];
    let means: Vec<E::Acc> = fold_axis(src, l, axis, &MeanFold { k_len });
    let divisor = E::Acc::c(k_len.saturating_sub(correction) as f64);
    fold_axis(
        src,
        l,
        axis,
        &SqDevFold {
            means: &means,
            divisor,
            sqrt,
        },
    )
}

/// `ln Σ exp(x)` along `axis`, shifted by the maximum so it cannot overflow; an empty axis or a
/// row of -inf gives -inf.
pub fn logsumexp<E: Float>(src: &[E], l: &Layout, axis: usize) -> Vec<E> {
    let stats: Vec<(E::Acc, E::Acc)> = fold_axis(src, l, axis, &LseFold);
    stats
        .into_iter()
        .map(|st| E::from_acc(lse_of(st)))
        .collect()
}

/// Softmax (`log == false`) or log-softmax along `axis`; the output is contiguous with the
/// input's sizes. The last axis of a layout with unit stride there takes one fused pass per
/// row; other axes compute each row's statistics first and then map every element.
pub fn softmax<E: Float>(src: &[E], l: &Layout, axis: usize, log: bool) -> Vec<E> {
    let k_len = l.dims()[axis];
    let n = l.numel();
    if n == 0 {
        return Vec::new();
    }
    if axis + 1 == l.rank() && (l.strides()[axis] == 1 || k_len == 1) {
        return softmax_rows(src, l, axis, log);
    }
    let stats: Vec<(E::Acc, E::Acc)> = fold_axis(src, l, axis, &LseFold);
    let inner: usize = l.dims()[axis + 1..].iter().product();
    super::elementwise::build(n, &|start, out| {
        for ((i, o), off) in out.iter_mut().enumerate().zip(l.offsets_from(start)) {
            let p = start + i;
            let (m, s) = stats[p / (k_len * inner) * inner + p % inner];
            o.write(E::from_acc(softmax_one(src[off].to_acc(), m, s, log)));
        }
    })
}

/// One softmax output from its input and its row's statistics.
#[inline(always)]
fn softmax_one<A: FloatMath>(x: A, m: A, s: A, log: bool) -> A {
    if log {
        (x - m) - s.ln()
    } else {
        (x - m).exp() / s
    }
}

/// The fused last-axis softmax: per row, the maximum, then `exp(x - m)` summed (and kept in
/// a scratch row in `E::Acc` for softmax, so the output is rounded once), then the
/// normalization.
fn softmax_rows<E: Float>(src: &[E], l: &Layout, axis: usize, log: bool) -> Vec<E> {
    let k_len = l.dims()[axis];
    let rl = without_axis(l, axis);
    let rows_per_task = outputs_per_task(k_len);
    let mut out: Vec<E> = Vec::with_capacity(l.numel());
    let spare = &mut out.spare_capacity_mut()[..l.numel()];
    for_chunks_mut(spare, rows_per_task * k_len, &|c, chunk| {
        let mut scratch: Vec<E::Acc> = Vec::with_capacity(k_len);
        for (dst, base) in chunk
            .chunks_mut(k_len)
            .zip(rl.offsets_from(c * rows_per_task))
        {
            let row = &src[base..base + k_len];
            let m = lanes(row, E::Acc::c(f64::NEG_INFINITY), E::to_acc, fmax);
            // The exponentials as one map over the row, which the compiler vectorizes
            // (a push per element would not be), then summed in order.
            scratch.clear();
            scratch.extend(row.iter().map(|&x| (x.to_acc() - m).exp()));
            let s = scratch.iter().fold(E::Acc::c(0.0), |s, &e| s + e);
            if log {
                let ls = s.ln();
                for (o, &x) in dst.iter_mut().zip(row) {
                    o.write(E::from_acc((x.to_acc() - m) - ls));
                }
            } else {
                let inv = E::Acc::c(1.0) / s;
                for (o, &e) in dst.iter_mut().zip(&scratch) {
                    o.write(E::from_acc(e * inv));
                }
            }
        }
    });
    // SAFETY: the chunks cover 0..numel and each row of each chunk writes all its slots.
    unsafe { out.set_len(l.numel()) };
    out
}

/// The elements of `l` as one contiguous slice: borrowed when they fill a dense range of the
/// storage in any axis order (order does not matter to a full sum or max), copied otherwise.
pub fn dense_elements<'a, E: Element>(src: &'a [E], l: &Layout) -> Cow<'a, [E]> {
    let mut axes: Vec<(usize, usize)> = l
        .dims()
        .iter()
        .zip(l.strides())
        .filter(|(d, _)| **d != 1)
        .map(|(&d, &s)| (s, d))
        .collect();
    axes.sort_unstable();
    let mut expected = 1;
    let dense = axes.iter().all(|&(s, d)| {
        let ok = s == expected;
        expected *= d;
        ok
    });
    if dense {
        Cow::Borrowed(&src[l.offset()..l.offset() + l.numel()])
    } else {
        Cow::Owned(super::elementwise::map(src, l, |x| x))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocked_rows_match_the_sequential_fold() {
        let n = 3 * BLOCK + 5;
        let data: Vec<f32> = (0..2 * n)
            .map(|i| ((i * 7919) % 1000) as f32 * 0.001 - 0.5)
            .collect();
        let l = Layout::contiguous(&[2, n]);
        let got = reduce(&data, &l, 1, ReduceOp::Sum).unwrap();
        let f = MonoidFold {
            load: |x: f32| x,
            store: |a: f32| a,
            op: std::marker::PhantomData::<SumOp>,
        };
        for (j, g) in got.iter().enumerate() {
            assert_eq!(*g, fold_row(&f, &data[j * n..(j + 1) * n], j));
        }
    }

    #[test]
    fn tiles_and_strided_paths_agree_with_rows() {
        let data: Vec<i64> = (0..6 * 70).map(|i| (i * 31 % 17) as i64 - 8).collect();
        let l = Layout::contiguous(&[6, 70]);
        let by_cols = reduce(&data, &l, 0, ReduceOp::Sum).unwrap();
        let t = l.transpose(0, 1);
        let by_rows_of_t = reduce(&data, &t, 1, ReduceOp::Sum).unwrap();
        assert_eq!(by_cols, by_rows_of_t);
        let want: Vec<i64> = (0..70)
            .map(|c| (0..6).map(|r| data[r * 70 + c]).sum())
            .collect();
        assert_eq!(by_cols, want);
        let arg = arg_reduce(&data, &l, 0, ReduceOp::ArgMax).unwrap();
        let arg_t = arg_reduce(&data, &t, 1, ReduceOp::ArgMax).unwrap();
        assert_eq!(arg, arg_t);
    }

    #[test]
    fn dense_permuted_layouts_are_borrowed() {
        let data = [1.0f32; 12];
        let l = Layout::contiguous(&[3, 4]).transpose(0, 1);
        assert!(matches!(dense_elements(&data, &l), Cow::Borrowed(_)));
        let narrowed = Layout::contiguous(&[3, 4]).narrow(1, 0, 2);
        assert!(matches!(dense_elements(&data, &narrowed), Cow::Owned(_)));
    }
}
