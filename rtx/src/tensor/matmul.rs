//! Matrix products: `a.matmul(&b)` for vectors, matrices and batches of matrices, with the
//! shapes checked by [`MatmulShapes`] when compiling and run-time dims checked when it runs.
//!
//! Transposed and other strided views are multiplied in place (no copy) whenever each matrix
//! has a unit row or column stride; broadcast batch dims are never materialized.

use super::Tensor;
use crate::autograd;
use crate::error::{Error, Result, ok};
use crate::shape::{Shape, describe};
use rtx_backends::{Layout, Storage};
use rtx_kernels::op::markers::Add;
use rtx_kernels::op::{ReduceOp, UnaryOp};
use rtx_kernels::{Element, Float, Num};

/// The shape rule of matmul, re-exported so generic code can state it with the prelude alone.
pub use crate::shape::matmul::MatmulShapes;

/// One operand seen as a stack of matrices: batch sizes and strides, then rows and columns.
struct Stack<'a> {
    batch: &'a [usize],
    batch_strides: &'a [usize],
    rows: usize,
    cols: usize,
    rs: usize,
    cs: usize,
}

impl<'a> Stack<'a> {
    /// A vector is a one-row matrix on the left (`as_row`) and a one-column one on the right.
    fn new(dims: &'a [usize], strides: &'a [usize], as_row: bool) -> Self {
        match dims.len() {
            1 if as_row => Stack {
                batch: &[],
                batch_strides: &[],
                rows: 1,
                cols: dims[0],
                rs: 0,
                cs: strides[0],
            },
            1 => Stack {
                batch: &[],
                batch_strides: &[],
                rows: dims[0],
                cols: 1,
                rs: strides[0],
                cs: 0,
            },
            r => Stack {
                batch: &dims[..r - 2],
                batch_strides: &strides[..r - 2],
                rows: dims[r - 2],
                cols: dims[r - 1],
                rs: strides[r - 2],
                cs: strides[r - 1],
            },
        }
    }

    /// The layout of this stack over `batch` (its own batch dims, or stride-0 repeats when it
    /// has none).
    fn layout(&self, batch: &[usize], offset: usize) -> Layout {
        let mut dims = batch.to_vec();
        let mut strides = if self.batch.is_empty() {
            vec![0; batch.len()]
        } else {
            self.batch_strides.to_vec()
        };
        dims.extend([self.rows, self.cols]);
        strides.extend([self.rs, self.cs]);
        Layout::new(&dims, &strides, offset)
    }
}

impl<S: Shape, E: Element> Tensor<S, E> {
    /// The matrix product, as PyTorch's `matmul`: `[M, K] x [K, N] -> [M, N]`, a vector on
    /// either side, and batches (`[B, M, K] x [B, K, N]`, or batch dims on one side only,
    /// which broadcast). Shapes are checked when compiling; see [`MatmulShapes`].
    ///
    /// # Panics
    /// When run-time dims disagree (see [`Tensor::try_matmul`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let a: Tensor<Rank2<2, 3>> = Tensor::from_array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], Device::Cpu);
    /// let b: Tensor<Rank2<3, 1>> = Tensor::from_array([[1.0], [0.0], [-1.0]], Device::Cpu);
    /// assert_eq!(a.matmul(&b).to_vec(), vec![-2.0, -2.0]);
    /// // A transposed view is multiplied in place: [3, 2] x [2, 3] -> [3, 3].
    /// let g: Tensor<Rank2<3, 3>> = a.t().matmul(&a);
    /// assert_eq!(g.to_vec()[0], 17.0);
    /// // Batches broadcast: [B, 2, 3] x [3, 1] -> [B, 2, 1].
    /// let x: Tensor<(Dyn<'B'>, Const<2>, Const<3>)> = Tensor::ones((Dyn(4), Const, Const), Device::Cpu);
    /// assert_eq!(x.matmul(&b).dims(), &[4, 2, 1]);
    /// ```
    #[track_caller]
    pub fn matmul<R: Shape>(&self, rhs: &Tensor<R, E>) -> Tensor<<S as MatmulShapes<R>>::Output, E>
    where
        E: Num,
        S: MatmulShapes<R>,
    {
        ok(self.try_matmul(rhs))
    }

    /// [`Tensor::matmul`], returning an error naming both shapes when run-time dims disagree.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let a: Tensor<(usize, usize), i32> = Tensor::zeros((2, 3), Device::Cpu);
    /// let b: Tensor<(usize, usize), i32> = Tensor::zeros((4, 5), Device::Cpu);
    /// let err = a.try_matmul(&b).err().unwrap();
    /// assert_eq!(
    ///     err.to_string(),
    ///     "matmul: shape mismatch: [2, 3] vs [4, 5]: the inner dimensions of a matmul must agree"
    /// );
    /// ```
    pub fn try_matmul<R: Shape>(
        &self,
        rhs: &Tensor<R, E>,
    ) -> Result<Tensor<<S as MatmulShapes<R>>::Output, E>>
    where
        E: Num,
        S: MatmulShapes<R>,
    {
        let (out, saved) = self.matmul_saving(rhs)?;
        if !autograd::must_record(&[self.node(), rhs.node()]) {
            return Ok(out);
        }
        // Only the operands whose gradient is wanted get one: the first layer's input costs a
        // product as large as the forward's otherwise.
        let inputs = vec![self.node().cloned(), rhs.node().cloned()];
        Ok(out.record_needs(inputs, move |g, need| {
            let (da, db) = saved.grads(g, need[0], need[1])?;
            Ok(vec![
                da.and_then(autograd::erase),
                db.and_then(autograd::erase),
            ])
        }))
    }

    /// `self · rhs` with `bias`, a vector as long as the product's last dim, added to every
    /// row, recorded as one node: a Linear's forward. On a GPU the bias is added by the
    /// product's epilogue, and in the backward its gradient comes with `rhs`'s product (see
    /// [`MatmulGrad::grads_with_bias`]).
    pub(crate) fn try_matmul_bias<R: Shape, V: Shape>(
        &self,
        rhs: &Tensor<R, E>,
        bias: &Tensor<V, E>,
    ) -> Result<Tensor<<S as MatmulShapes<R>>::Output, E>>
    where
        E: Num,
        S: MatmulShapes<R>,
    {
        let (out, saved) = self.matmul_saving_bias(rhs, Some((bias.storage(), bias.layout())))?;
        if !autograd::must_record(&[self.node(), rhs.node(), bias.node()]) {
            return Ok(out);
        }
        let need = [self.node(), rhs.node(), bias.node()].map(|n| n.is_some());
        let inputs = vec![
            self.node().cloned(),
            rhs.node().cloned(),
            bias.node().cloned(),
        ];
        let bias_shape = need[2].then(|| bias.shape());
        Ok(out.record(inputs, move |g| {
            let (da, db, dbias) = saved.grads_with_bias(g, need[0], need[1], bias_shape)?;
            Ok(vec![
                da.and_then(autograd::erase),
                db.and_then(autograd::erase),
                dbias.and_then(autograd::erase),
            ])
        }))
    }

    /// `act(self · rhs + bias)`: a Linear and its activation. Without a tape to record, a
    /// product that runs as one matrix applies `act` as the backend's epilogue (on the CPU,
    /// to each block of rows while it is in cache), with the bits of the two ops run in turn;
    /// otherwise it is those two ops, each recorded.
    pub(crate) fn try_matmul_bias_act<R: Shape, V: Shape>(
        &self,
        rhs: &Tensor<R, E>,
        bias: &Tensor<V, E>,
        act: UnaryOp,
    ) -> Result<Tensor<<S as MatmulShapes<R>>::Output, E>>
    where
        E: Float,
        S: MatmulShapes<R>,
    {
        if !autograd::must_record(&[self.node(), rhs.node(), bias.node()]) {
            let plan = self.plan(rhs)?;
            if plan.la.rank() == 2 {
                let out = self.storage().matmul_bias_act(
                    &plan.la,
                    rhs.storage(),
                    &plan.lb,
                    bias.storage(),
                    bias.layout(),
                    act,
                )?;
                return Ok(Tensor::from_storage(out, plan.shape));
            }
        }
        self.try_matmul_bias(rhs, bias)?.try_unary_op(act)
    }

    /// The product without recording, and what its backward needs.
    #[allow(clippy::type_complexity)]
    pub(crate) fn matmul_saving<R: Shape>(
        &self,
        rhs: &Tensor<R, E>,
    ) -> Result<(
        Tensor<<S as MatmulShapes<R>>::Output, E>,
        MatmulGrad<S, R, E>,
    )>
    where
        E: Num,
        S: MatmulShapes<R>,
    {
        self.matmul_saving_bias(rhs, None)
    }

    /// [`Tensor::matmul_saving`] with `bias`, a vector as long as the product's last dim,
    /// added to every row (a Linear's forward; the bias gets no gradient here). When the
    /// product runs as one matrix, a GPU adds the bias in the product's epilogue.
    #[allow(clippy::type_complexity)]
    pub(crate) fn matmul_saving_bias<R: Shape>(
        &self,
        rhs: &Tensor<R, E>,
        bias: Option<(&Storage<E>, &Layout)>,
    ) -> Result<(
        Tensor<<S as MatmulShapes<R>>::Output, E>,
        MatmulGrad<S, R, E>,
    )>
    where
        E: Num,
        S: MatmulShapes<R>,
    {
        // A shell: the product and what its backward keeps are functions of the element
        // type alone; only the shapes' checks and the typed results are compiled per shape.
        let plan = self.plan(rhs)?;
        let out = product(self.storage(), rhs.storage(), &plan.parts(), bias)
            .map_err(|e| e.unwrap_or_else(|| self.mismatch(rhs, BIAS_RULE)))?;
        let out = Tensor::from_storage(out, plan.shape);
        let saved = MatmulGrad {
            raw: GradPlan::new(plan.parts(), self.layout(), rhs.layout()),
            x: self.detach(),
            w: rhs.detach(),
        };
        Ok((out, saved))
    }

    /// The error of a product of `self` and `rhs` that breaks `rule`, naming both shapes.
    fn mismatch<R: Shape>(&self, rhs: &Tensor<R, E>, rule: &'static str) -> Error {
        Error::ShapeMismatch {
            op: "matmul",
            lhs: describe(&self.shape()),
            rhs: describe(&rhs.shape()),
            rule,
        }
    }
}

/// `a · b`, with `bias` added to every row when given, from the operands' storages and
/// layouts alone: planned and run exactly as [`Tensor::matmul_saving_bias`] plans and runs a
/// product (the same folding of a stack into one matrix, the same bias epilogue), for the IR
/// executor, whose values have no shape type. Returns the dense product and its dims.
pub(crate) fn matmul_layouts<E: Num>(
    a: (&Storage<E>, &Layout),
    b: (&Storage<E>, &Layout),
    bias: Option<(&Storage<E>, &Layout)>,
) -> Result<(Storage<E>, Vec<usize>)> {
    let mismatch = |rule| Error::ShapeMismatch {
        op: "matmul",
        lhs: format!("{:?}", a.1.dims()),
        rhs: format!("{:?}", b.1.dims()),
        rule,
    };
    let (plan, dims) = plan_layouts(a.1, b.1).map_err(mismatch)?;
    let out = product(a.0, b.0, &plan.parts(), bias)
        .map_err(|e| e.unwrap_or_else(|| mismatch(BIAS_RULE)))?;
    Ok((out, dims))
}

/// The gradients of a product `a · b` (with a bias added to every row when `bias`), from the
/// operands' storages and layouts and the product's gradient `g`: the layout-level form of
/// [`MatmulGrad`], for the IR's backward. The product is planned again from the layouts, as
/// [`matmul_layouts`] planned it, and its gradients are [`MatmulGrad`]'s own computation
/// (`GradPlan`), so both backwards launch the same products and get the same bits.
///
/// Returns each gradient asked for in `need` (`[a, b]`) as storage and the layout to see it
/// through (the operand's dims), and with `bias`, the bias's gradient `[N]`.
#[allow(clippy::type_complexity)]
pub(crate) fn matmul_layouts_grads<E: Num>(
    a: (&Storage<E>, &Layout),
    b: (&Storage<E>, &Layout),
    g: (&Storage<E>, &Layout),
    [need_a, need_b]: [bool; 2],
    bias: bool,
) -> Result<(
    Option<(Storage<E>, Layout)>,
    Option<(Storage<E>, Layout)>,
    Option<Storage<E>>,
)> {
    let (plan, _) = plan_layouts(a.1, b.1).map_err(|rule| Error::ShapeMismatch {
        op: "matmul",
        lhs: format!("{:?}", a.1.dims()),
        rhs: format!("{:?}", b.1.dims()),
        rule,
    })?;
    let raw = GradPlan::new(plan.parts(), a.1, b.1);
    raw.grads_and_sums(a, b, g, [need_a, need_b, bias])
}

/// The rule a bias that does not fit breaks.
const BIAS_RULE: &str = "a bias must be as long as the product's last dimension";

/// The rule broken when the batch dims do not agree (or do not fit the output's shape type).
const BATCH_RULE: &str = "the batch dimensions of a batched matmul must agree";

/// The product of `a` and `b` as planned, with `bias` added to every row when given; the
/// error is `None` when the bias does not fit (the caller names the shapes).
fn product<E: Num>(
    a: &Storage<E>,
    b: &Storage<E>,
    plan: &PlanParts<'_>,
    bias: Option<(&Storage<E>, &Layout)>,
) -> std::result::Result<Storage<E>, Option<Error>> {
    let (la, lb) = (plan.la, plan.lb);
    let product = match bias {
        Some((bs, bl)) if la.rank() == 2 => a.matmul_bias(la, b, lb, bs, bl),
        Some((bs, bl)) => {
            let product = a.matmul(la, b, lb).map_err(|e| Some(e.into()))?;
            let mut dims = plan.batch.to_vec();
            dims.extend([plan.rows, plan.cols]);
            let rows = bl.broadcast_to(&dims).ok_or(None)?;
            product.binary::<Add>(&Layout::contiguous(&dims), bs, &rows)
        }
        None => a.matmul(la, b, lb),
    };
    product.map_err(|e| Some(e.into()))
}

/// How a product runs: the layouts handed to the backend and the output's shape.
struct Plan<O> {
    /// `self` as `[batch.., M, K]`, a stack folded into one matrix where its rows allow.
    la: Layout,
    /// `rhs` as `[batch.., K, N]`.
    lb: Layout,
    /// The batch sizes shared by both.
    batch: Vec<usize>,
    /// M and N.
    rows: usize,
    cols: usize,
    a_batched: bool,
    b_batched: bool,
    /// The product's shape.
    shape: O,
}

/// The parts of a [`Plan`] that do not depend on its shape type.
struct PlanParts<'a> {
    la: &'a Layout,
    lb: &'a Layout,
    batch: &'a [usize],
    rows: usize,
    cols: usize,
    a_batched: bool,
    b_batched: bool,
}

impl<O> Plan<O> {
    /// The plan without its shape.
    fn parts(&self) -> PlanParts<'_> {
        PlanParts {
            la: &self.la,
            lb: &self.lb,
            batch: &self.batch,
            rows: self.rows,
            cols: self.cols,
            a_batched: self.a_batched,
            b_batched: self.b_batched,
        }
    }
}

impl<S: Shape, E: Element> Tensor<S, E> {
    /// The layouts and output shape of `self · rhs`, or an error naming both shapes.
    fn plan<R: Shape>(&self, rhs: &Tensor<R, E>) -> Result<Plan<<S as MatmulShapes<R>>::Output>>
    where
        S: MatmulShapes<R>,
    {
        // A shell: the planning needs only the layouts (compiled once, not per shape).
        let (plan, dims) =
            plan_layouts(self.layout(), rhs.layout()).map_err(|rule| self.mismatch(rhs, rule))?;
        let shape = <S as MatmulShapes<R>>::Output::from_dims(&dims)
            .ok_or_else(|| self.mismatch(rhs, BATCH_RULE))?;
        Ok(Plan {
            la: plan.la,
            lb: plan.lb,
            batch: plan.batch,
            rows: plan.rows,
            cols: plan.cols,
            a_batched: plan.a_batched,
            b_batched: plan.b_batched,
            shape,
        })
    }
}

/// [`Tensor::plan`] on the operands' layouts `a` and `b` (their ranks are the shapes'): the
/// plan and the product's dims, or the rule the operands break.
fn plan_layouts(
    a: &Layout,
    b: &Layout,
) -> std::result::Result<(Plan<()>, Vec<usize>), &'static str> {
    // A stack of matrices times one matrix runs as one taller product when the stack's
    // rows are evenly spaced across its batch dims (a dense `[B, T, K]` into a Linear):
    // one GEMM instead of B, and the matrix's gradient needs no sum over the batch.
    let folded = (b.rank() == 2)
        .then(|| fold_rows(a.dims(), a.strides()))
        .flatten();
    let sa = match &folded {
        Some((dims, strides)) => Stack::new(dims, strides, true),
        None => Stack::new(a.dims(), a.strides(), true),
    };
    let sb = Stack::new(b.dims(), b.strides(), false);
    if sa.cols != sb.rows {
        return Err("the inner dimensions of a matmul must agree");
    }
    if !sa.batch.is_empty() && !sb.batch.is_empty() && sa.batch != sb.batch {
        return Err(BATCH_RULE);
    }
    let batch = if sa.batch.is_empty() {
        sb.batch
    } else {
        sa.batch
    };
    let la = sa.layout(batch, a.offset());
    let lb = sb.layout(batch, b.offset());

    // The product is dense [batch.., M, N]; a vector operand's axis is dropped. A folded
    // stack's rows are its own leading dims.
    let mut dims = batch.to_vec();
    if folded.is_some() {
        dims.extend_from_slice(&a.dims()[..a.rank() - 1]);
    } else if a.rank() > 1 {
        dims.push(sa.rows);
    }
    if b.rank() > 1 {
        dims.push(sb.cols);
    }
    let plan = Plan {
        la,
        lb,
        batch: batch.to_vec(),
        rows: sa.rows,
        cols: sb.cols,
        a_batched: !sa.batch.is_empty(),
        b_batched: !sb.batch.is_empty(),
        shape: (),
    };
    Ok((plan, dims))
}

/// A stack `[batch.., M, K]` seen as one `[batch.. * M, K]` matrix, when its rows are evenly
/// spaced across the batch dims (each batch stride is the next dim's stride times its size);
/// `None` for a plain matrix or a vector, or when the rows are not evenly spaced.
fn fold_rows(dims: &[usize], strides: &[usize]) -> Option<([usize; 2], [usize; 2])> {
    let r = dims.len();
    if r <= 2 {
        return None;
    }
    let even = (0..r - 2).all(|i| dims[i] == 1 || strides[i] == strides[i + 1] * dims[i + 1]);
    let rows = dims[..r - 1].iter().product();
    even.then_some(([rows, dims[r - 1]], [strides[r - 2], strides[r - 1]]))
}

/// What the backward of one product needs: its operands, and how the product ran.
pub(crate) struct MatmulGrad<S: Shape, R: Shape, E: Element> {
    x: Tensor<S, E>,
    w: Tensor<R, E>,
    raw: GradPlan,
}

/// How a product ran, as its backward needs it: the layouts, and whether each operand's
/// gradient is computed transposed.
struct GradPlan {
    la: Layout,
    lb: Layout,
    /// The product's sizes, `[batch.., M, N]`.
    full: Vec<usize>,
    a_t: bool,
    b_t: bool,
    a_batched: bool,
    b_batched: bool,
}

/// A gradient's storage and the layout it is seen through.
type Viewed<E> = (Storage<E>, Layout);

impl<S: Shape, R: Shape, E: Num> MatmulGrad<S, R, E> {
    /// The operands' gradients from the product's gradient `g`, for those asked for.
    ///
    /// In the `[batch.., M, K] x [batch.., K, N]` form the product ran in: `dA = G Bᵀ` and
    /// `dB = Aᵀ G`, summed over batch dims an operand was broadcast along.
    #[allow(clippy::type_complexity)]
    pub(crate) fn grads<O: Shape>(
        &self,
        g: &Tensor<O, E>,
        need_a: bool,
        need_b: bool,
    ) -> Result<(Option<Tensor<S, E>>, Option<Tensor<R, E>>)> {
        let (da, db, _) = self.grads_sums(g, need_a, need_b, false)?;
        Ok((da, db))
    }

    /// [`MatmulGrad::grads`], and, when `bias` gives the shape of a bias added to the product
    /// (a vector as long as its last dim), that bias's gradient: `g` summed down its rows.
    /// When B's gradient is one transposed product (`dBᵀ = Gᵀ A`, a Linear's weight), the
    /// sums come out of that product's epilogue on a GPU.
    #[allow(clippy::type_complexity)]
    pub(crate) fn grads_with_bias<O: Shape, V: Shape>(
        &self,
        g: &Tensor<O, E>,
        need_a: bool,
        need_b: bool,
        bias: Option<V>,
    ) -> Result<(
        Option<Tensor<S, E>>,
        Option<Tensor<R, E>>,
        Option<Tensor<V, E>>,
    )> {
        let Some(shape) = bias else {
            let (da, db) = self.grads(g, need_a, need_b)?;
            return Ok((da, db, None));
        };
        let (da, db, sums) = self.grads_sums(g, need_a, need_b, true)?;
        let sums = sums.unwrap_or_else(|| unreachable!("asked for, the sums come"));
        Ok((da, db, Some(Tensor::from_storage(sums, shape))))
    }

    /// The gradients asked for and, with `sums`, `g`'s column sums (see
    /// `GradPlan::grads_and_sums`).
    #[allow(clippy::type_complexity)]
    fn grads_sums<O: Shape>(
        &self,
        g: &Tensor<O, E>,
        need_a: bool,
        need_b: bool,
        sums: bool,
    ) -> Result<(
        Option<Tensor<S, E>>,
        Option<Tensor<R, E>>,
        Option<Storage<E>>,
    )> {
        // A shell over [`GradPlan::grads`], which is compiled once per element type.
        let (x, w) = (&self.x, &self.w);
        let (da, db, col_sums) = self.raw.grads_and_sums(
            (x.storage(), x.layout()),
            (w.storage(), w.layout()),
            (g.storage(), g.layout()),
            [need_a, need_b, sums],
        )?;
        let da = da.map(|(s, l)| Tensor::from_storage_layout(s, l, x.shape()));
        let db = db.map(|(s, l)| Tensor::from_storage_layout(s, l, w.shape()));
        Ok((da, db, col_sums))
    }
}

impl GradPlan {
    /// What the backward of a product planned as `plan`, of operands laid out as `a` and `b`,
    /// needs.
    fn new(plan: PlanParts<'_>, a: &Layout, b: &Layout) -> GradPlan {
        let mut full = plan.batch.to_vec();
        full.extend([plan.rows, plan.cols]);
        let rank = full_rank(plan.batch);
        GradPlan {
            // An operand that is a transposed view (`w.t()` in `Linear`) gets its gradient in
            // the same memory order, computed as the transposed product: the gradient then
            // reaches the transpose's own backward as a transposed view, and leaves it dense,
            // so no strided copy is needed anywhere downstream (the optimizer reads it as is).
            a_t: transposed_operand(a, plan.a_batched, rank),
            b_t: transposed_operand(b, plan.b_batched, rank),
            la: *plan.la,
            lb: *plan.lb,
            full,
            a_batched: plan.a_batched,
            b_batched: plan.b_batched,
        }
    }

    /// [`GradPlan::grads`], with `g`'s column sums (a bias's gradient) whenever `sums` asks
    /// for them: out of B's product where it gives them, else summed down `g`'s rows.
    #[allow(clippy::type_complexity)]
    fn grads_and_sums<E: Num>(
        &self,
        x: (&Storage<E>, &Layout),
        w: (&Storage<E>, &Layout),
        g: (&Storage<E>, &Layout),
        need: [bool; 3],
    ) -> Result<(Option<Viewed<E>>, Option<Viewed<E>>, Option<Storage<E>>)> {
        let (da, db, sums) = self.grads(x, w, g, need)?;
        let sums = match (need[2], sums) {
            (true, None) => Some(self.bias_sums(g.0, g.1)?),
            (_, sums) => sums,
        };
        Ok((da, db, sums))
    }

    /// The product's gradient `g` summed down its rows (a bias's gradient).
    fn bias_sums<E: Num>(&self, g: &Storage<E>, gl: &Layout) -> Result<Storage<E>> {
        let dense;
        let (g, gl) = match gl.is_contiguous() {
            true => (g, *gl),
            false => {
                dense = g.contiguous(gl)?;
                (&dense, Layout::contiguous(gl.dims()))
            }
        };
        let n = self.full[self.full.len() - 1];
        let rows = gl.numel() / n.max(1);
        let l = Layout::contiguous(&[rows, n]).with_offset(gl.offset());
        Ok(g.reduce(&l, 0, ReduceOp::Sum)?)
    }

    /// The gradients of the operands `x` and `w` from the product's gradient `g`, each as
    /// storage and the layout to see it through (the operand's dims): `need` says which are
    /// asked for and whether `g`'s column sums should come with B's when they can.
    #[allow(clippy::type_complexity)]
    fn grads<E: Num>(
        &self,
        x: (&Storage<E>, &Layout),
        w: (&Storage<E>, &Layout),
        g: (&Storage<E>, &Layout),
        [need_a, need_b, sums]: [bool; 3],
    ) -> Result<(Option<Viewed<E>>, Option<Viewed<E>>, Option<Storage<E>>)> {
        let (full, la, lb) = (&self.full, &self.la, &self.lb);
        let dense;
        let (gs, gl) = match g.1.is_contiguous() {
            true => (g.0, *g.1),
            false => {
                dense = g.0.contiguous(g.1)?;
                (&dense, Layout::contiguous(g.1.dims()))
            }
        };
        let r = full.len();
        let lg = Layout::contiguous(full).with_offset(gl.offset());
        let lgt = lg.transpose(r - 2, r - 1);
        let batch_numel: usize = full[..r - 2].iter().product();
        let collapse = |grad: Storage<E>, batched: bool, numel: usize| -> Result<Storage<E>> {
            if batched || r == 2 {
                return Ok(grad);
            }
            let l = Layout::contiguous(&[batch_numel, numel]);
            Ok(grad.reduce(&l, 0, ReduceOp::Sum)?)
        };
        let da = if !need_a {
            None
        } else if self.a_t {
            // dAᵀ = B Gᵀ, dense [batch.., K, M], seen as [batch.., M, K].
            let s = w.0.matmul(lb, gs, &lgt)?;
            Some((s, transposed_layout(x.1)))
        } else {
            let s = gs.matmul(&lg, w.0, &lb.transpose(r - 2, r - 1))?;
            let s = collapse(s, self.a_batched, x.1.numel())?;
            Some((s, Layout::contiguous(x.1.dims())))
        };
        let mut col_sums = None;
        let db = if !need_b {
            None
        } else if self.b_t {
            // dBᵀ = Gᵀ A, dense [batch.., N, K], seen as [batch.., K, N].
            let s = if sums && r == 2 {
                let (s, c) = gs.matmul_row_sums(&lgt, x.0, la)?;
                col_sums = Some(c);
                s
            } else {
                gs.matmul(&lgt, x.0, la)?
            };
            Some((s, transposed_layout(w.1)))
        } else {
            let s = x.0.matmul(&la.transpose(r - 2, r - 1), gs, &lg)?;
            let s = collapse(s, self.b_batched, w.1.numel())?;
            Some((s, Layout::contiguous(w.1.dims())))
        };
        Ok((da, db, col_sums))
    }
}

/// The rank of the product's stacks: the batch dims and the two matrix dims.
fn full_rank(batch: &[usize]) -> usize {
    batch.len() + 2
}

/// Whether an operand with layout `l` is a transposed dense matrix (or stack of them) whose
/// gradient can be computed transposed: it holds every batch dim of the product itself (no
/// broadcast to sum over) and its last two axes, swapped, are dense row-major.
fn transposed_operand(l: &Layout, batched: bool, rank: usize) -> bool {
    let r = l.rank();
    r >= 2
        && (batched || r == 2)
        && r == rank
        && !l.is_contiguous()
        && l.transpose(r - 2, r - 1).is_contiguous()
}

/// The layout of a gradient computed transposed (dense over `layout`'s last two axes
/// swapped), seen back in the operand's own axis order.
fn transposed_layout(layout: &Layout) -> Layout {
    let r = layout.rank();
    let swapped = layout.transpose(r - 2, r - 1);
    Layout::contiguous(swapped.dims()).transpose(r - 2, r - 1)
}

#[cfg(test)]
mod tests {
    use crate::prelude::*;

    #[test]
    fn vectors_and_matrices() {
        let v: Tensor<Rank1<2>, i64> = Tensor::from_array([1, 2], Device::Cpu);
        let m: Tensor<Rank2<2, 3>, i64> = Tensor::from_array([[1, 2, 3], [4, 5, 6]], Device::Cpu);
        assert_eq!(v.matmul(&m).to_vec(), vec![9, 12, 15]);
        let w: Tensor<Rank1<3>, i64> = Tensor::from_array([1, 0, -1], Device::Cpu);
        assert_eq!(m.matmul(&w).to_vec(), vec![-2, -2]);
    }

    #[test]
    fn a_transposed_weight_gets_its_gradient_dense() {
        // y = x wᵀ as in Linear: dw = gᵀ x arrives dense, with the weight's own layout.
        let x: Tensor<Rank2<2, 3>> =
            Tensor::from_array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], Device::Cpu).requires_grad();
        let w: Tensor<Rank2<4, 3>> = Tensor::from_vec(
            (0..12).map(|i| i as f32 - 5.0).collect(),
            (Const, Const),
            Device::Cpu,
        )
        .requires_grad();
        let scale: Tensor<Rank2<2, 4>> = Tensor::from_vec(
            (0..8).map(|i| (i % 3) as f32 + 1.0).collect(),
            (Const, Const),
            Device::Cpu,
        );
        let grads = (x.matmul(&w.t()) * &scale).sum_all().backward();
        let (gx, gw) = (grads.get(&x).unwrap(), grads.get(&w).unwrap());
        assert!(gw.is_contiguous());
        // dw[o][i] = sum_b scale[b][o] x[b][i]; dx[b][i] = sum_o scale[b][o] w[o][i].
        let (xs, ws, ss) = (x.to_vec(), w.to_vec(), scale.to_vec());
        let want_w: Vec<f32> = (0..12)
            .map(|k| (0..2).map(|b| ss[b * 4 + k / 3] * xs[b * 3 + k % 3]).sum())
            .collect();
        let want_x: Vec<f32> = (0..6)
            .map(|k| (0..4).map(|o| ss[k / 3 * 4 + o] * ws[o * 3 + k % 3]).sum())
            .collect();
        assert_eq!(gw.to_vec(), want_w);
        assert_eq!(gx.to_vec(), want_x);
    }

    #[test]
    fn batch_mismatch_names_both_shapes() {
        let a: Tensor<(usize, Const<2>, Const<3>)> = Tensor::zeros((2, Const, Const), Device::Cpu);
        let b: Tensor<(usize, Const<3>, Const<2>)> = Tensor::zeros((3, Const, Const), Device::Cpu);
        assert_eq!(
            a.try_matmul(&b).err().unwrap().to_string(),
            "matmul: shape mismatch: [2, 2, 3] vs [3, 3, 2]: the batch dimensions of a batched matmul must agree"
        );
    }
}
