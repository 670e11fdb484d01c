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
        // Only the operands that need a gradient get one: the first layer's input costs a
        // product as large as the forward's otherwise.
        let (need_a, need_b) = (self.node().is_some(), rhs.node().is_some());
        let inputs = vec![self.node().cloned(), rhs.node().cloned()];
        Ok(out.record(inputs, move |g| {
            let (da, db) = saved.grads(g, need_a, need_b)?;
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
        let plan = self.plan(rhs)?;
        let (la, lb) = (&plan.la, &plan.lb);
        let out = match bias {
            Some((bs, bl)) if la.rank() == 2 => {
                self.storage().matmul_bias(la, rhs.storage(), lb, bs, bl)?
            }
            Some((bs, bl)) => {
                let product = self.storage().matmul(la, rhs.storage(), lb)?;
                let mut dims = plan.batch.clone();
                dims.extend([plan.rows, plan.cols]);
                let rows = bl.broadcast_to(&dims).ok_or_else(|| Error::ShapeMismatch {
                    op: "matmul",
                    lhs: describe(&self.shape()),
                    rhs: describe(&rhs.shape()),
                    rule: "a bias must be as long as the product's last dimension",
                })?;
                product.binary::<Add>(&Layout::contiguous(&dims), bs, &rows)?
            }
            None => self.storage().matmul(la, rhs.storage(), lb)?,
        };
        let out = Tensor::from_storage(out, plan.shape);
        let (a_batched, b_batched) = (plan.a_batched, plan.b_batched);
        let batch = &plan.batch[..];
        let (la, lb) = (plan.la, plan.lb);
        let mut full = batch.to_vec();
        full.extend([plan.rows, plan.cols]);
        let saved = MatmulGrad {
            // An operand that is a transposed view (`w.t()` in `Linear`) gets its gradient in
            // the same memory order, computed as the transposed product: the gradient then
            // reaches the transpose's own backward as a transposed view, and leaves it dense,
            // so no strided copy is needed anywhere downstream (the optimizer reads it as is).
            a_t: transposed_operand(self.layout(), a_batched, full_rank(batch)),
            b_t: transposed_operand(rhs.layout(), b_batched, full_rank(batch)),
            x: self.detach(),
            w: rhs.detach(),
            la,
            lb,
            full,
            a_batched,
            b_batched,
        };
        Ok((out, saved))
    }
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

impl<S: Shape, E: Element> Tensor<S, E> {
    /// The layouts and output shape of `self · rhs`, or an error naming both shapes.
    fn plan<R: Shape>(&self, rhs: &Tensor<R, E>) -> Result<Plan<<S as MatmulShapes<R>>::Output>>
    where
        S: MatmulShapes<R>,
    {
        let mismatch = |rule| Error::ShapeMismatch {
            op: "matmul",
            lhs: describe(&self.shape()),
            rhs: describe(&rhs.shape()),
            rule,
        };
        // A stack of matrices times one matrix runs as one taller product when the stack's
        // rows are evenly spaced across its batch dims (a dense `[B, T, K]` into a Linear):
        // one GEMM instead of B, and the matrix's gradient needs no sum over the batch.
        let folded = (R::RANK == 2)
            .then(|| fold_rows(self.dims(), self.strides()))
            .flatten();
        let a = match &folded {
            Some((dims, strides)) => Stack::new(dims, strides, true),
            None => Stack::new(self.dims(), self.strides(), true),
        };
        let b = Stack::new(rhs.dims(), rhs.strides(), false);
        if a.cols != b.rows {
            return Err(mismatch("the inner dimensions of a matmul must agree"));
        }
        if !a.batch.is_empty() && !b.batch.is_empty() && a.batch != b.batch {
            return Err(mismatch(
                "the batch dimensions of a batched matmul must agree",
            ));
        }
        let batch = if a.batch.is_empty() { b.batch } else { a.batch };
        let la = a.layout(batch, self.layout().offset());
        let lb = b.layout(batch, rhs.layout().offset());

        // The product is dense [batch.., M, N]; a vector operand's axis is dropped. A folded
        // stack's rows are its own leading dims.
        let mut dims = batch.to_vec();
        if folded.is_some() {
            dims.extend_from_slice(&self.dims()[..S::RANK - 1]);
        } else if S::RANK > 1 {
            dims.push(a.rows);
        }
        if R::RANK > 1 {
            dims.push(b.cols);
        }
        let shape = <S as MatmulShapes<R>>::Output::from_dims(&dims)
            .ok_or_else(|| mismatch("the batch dimensions of a batched matmul must agree"))?;
        Ok(Plan {
            la,
            lb,
            batch: batch.to_vec(),
            rows: a.rows,
            cols: b.cols,
            a_batched: !a.batch.is_empty(),
            b_batched: !b.batch.is_empty(),
            shape,
        })
    }
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

/// What the backward of one product needs: its operands, the layouts the product ran in,
/// and whether each operand's gradient is computed transposed.
pub(crate) struct MatmulGrad<S: Shape, R: Shape, E: Element> {
    x: Tensor<S, E>,
    w: Tensor<R, E>,
    la: Layout,
    lb: Layout,
    /// The product's sizes, `[batch.., M, N]`.
    full: Vec<usize>,
    a_t: bool,
    b_t: bool,
    a_batched: bool,
    b_batched: bool,
}

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
        let sums = match sums {
            Some(s) => s,
            None => {
                let g = g.try_contiguous()?;
                let n = self.full[self.full.len() - 1];
                let rows = g.numel() / n.max(1);
                let l = Layout::contiguous(&[rows, n]).with_offset(g.layout().offset());
                g.storage().reduce(&l, 0, ReduceOp::Sum)?
            }
        };
        Ok((da, db, Some(Tensor::from_storage(sums, shape))))
    }

    /// The gradients asked for and, with `sums`, `g`'s column sums when they came with B's.
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
        let (x, w, full) = (&self.x, &self.w, &self.full);
        let (la, lb) = (&self.la, &self.lb);
        let g = g.try_contiguous()?;
        let r = full.len();
        let lg = Layout::contiguous(full).with_offset(g.layout().offset());
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
            let s = w.storage().matmul(lb, g.storage(), &lgt)?;
            Some(transposed_grad(s, x.layout(), x.shape()))
        } else {
            let s = g
                .storage()
                .matmul(&lg, w.storage(), &lb.transpose(r - 2, r - 1))?;
            let s = collapse(s, self.a_batched, x.numel())?;
            Some(Tensor::from_storage(s, x.shape()))
        };
        let mut col_sums = None;
        let db = if !need_b {
            None
        } else if self.b_t {
            // dBᵀ = Gᵀ A, dense [batch.., N, K], seen as [batch.., K, N].
            let s = if sums && r == 2 {
                let (s, c) = g.storage().matmul_row_sums(&lgt, x.storage(), la)?;
                col_sums = Some(c);
                s
            } else {
                g.storage().matmul(&lgt, x.storage(), la)?
            };
            Some(transposed_grad(s, w.layout(), w.shape()))
        } else {
            let s = x
                .storage()
                .matmul(&la.transpose(r - 2, r - 1), g.storage(), &lg)?;
            let s = collapse(s, self.b_batched, w.numel())?;
            Some(Tensor::from_storage(s, w.shape()))
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

/// A gradient computed transposed (dense over `layout`'s last two axes swapped), viewed back
/// with the operand's own axis order.
fn transposed_grad<S: Shape, E: Element>(s: Storage<E>, layout: &Layout, shape: S) -> Tensor<S, E> {
    let r = layout.rank();
    let swapped = layout.transpose(r - 2, r - 1);
    let l = Layout::contiguous(swapped.dims()).transpose(r - 2, r - 1);
    Tensor::from_storage_layout(s, l, shape)
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
