//! The backward of a fused elementwise chain, as its derivative kernels compute it.
//!
//! `#[kernel]` differentiates a chain in forward mode (`rtx-macros/src/kernel/grad.rs`): for
//! each input, every step's tangent is built from its operands' tangents, a unary op's
//! through the op's own derived kernel, and the input's gradient is `grad * tangent`,
//! computed in the compute type and rounded once, then summed over the dims the input was
//! broadcast along. Here the same rules run node by node on the chain's values (which the
//! forward kept in the compute type), with the same zero and one shortcuts, so each step is
//! the same arithmetic on the same values as the fused derivative kernel's.
//!
//! Invariant: a chain is one kernel group of elementwise nodes with one output (its last
//! node); nodes outside it read only that output.

use super::super::prim::{broadcast_dims, op_node};
use super::super::value::DynTensor;
use super::super::{cast, compute_type, exec_error, floats};
use super::Reverse;
use crate::error::Result;
use crate::ir::{Graph, IrOp, NodeId};
use rtx_backends::Storage;
use rtx_kernels::kernel::Elementwise;
use rtx_kernels::op::{BinaryOp, CmpOp, Op, UnaryOp};
use rtx_kernels::{DType, Element, Float, UnaryOpT, UnaryVisitor};
use std::rc::Rc;

/// Whether node `n` is an elementwise op a chain's kernel computes.
fn elementwise(op: &IrOp) -> bool {
    matches!(op, IrOp::Op(Op::Unary(_) | Op::Binary(_)))
}

/// For each node of a fused chain, the chain's nodes in order: the elementwise nodes of one
/// kernel label joined by their edges (a kernel used twice, as by two blocks, is two
/// chains); an elementwise node outside any kernel is a chain of its own.
pub(super) fn groups(g: &Graph) -> Vec<Option<Rc<Vec<NodeId>>>> {
    let n = g.nodes.len();
    let mut root: Vec<NodeId> = (0..n).collect();
    fn find(root: &mut [NodeId], i: NodeId) -> NodeId {
        let mut r = i;
        while root[r] != r {
            r = root[r];
        }
        root[i] = r;
        r
    }
    for (i, node) in g.nodes.iter().enumerate() {
        if !elementwise(&node.op) || node.kernel.is_none() {
            continue;
        }
        for &j in &node.inputs {
            let other = &g.nodes[j];
            if elementwise(&other.op) && other.kernel == node.kernel {
                let (a, b) = (find(&mut root, i), find(&mut root, j));
                root[a.max(b)] = a.min(b);
            }
        }
    }
    let mut members: Vec<Vec<NodeId>> = vec![Vec::new(); n];
    for i in 0..n {
        if elementwise(&g.nodes[i].op) {
            let r = find(&mut root, i);
            members[r].push(i);
        }
    }
    let mut out = vec![None; n];
    for m in members.into_iter().filter(|m| !m.is_empty()) {
        let m = Rc::new(m);
        for &i in m.iter() {
            out[i] = Some(m.clone());
        }
    }
    out
}

/// A tangent: zero, one, or a value (in the chain's compute type), as the derivation keeps
/// it, so a zero or a one never becomes arithmetic the kernel does not do.
#[derive(Clone)]
enum D {
    Zero,
    One,
    T(DynTensor),
}

/// The gradients of the chain `nodes`' inputs from its output's gradient `g`.
pub(super) fn backward(
    r: &Reverse<'_, '_>,
    nodes: &[NodeId],
    g: &DynTensor,
) -> Result<Vec<(NodeId, DynTensor)>> {
    let graph = r.run.graph();
    let out = *nodes
        .last()
        .unwrap_or_else(|| unreachable!("a chain has nodes"));
    for &k in &nodes[..nodes.len() - 1] {
        let outside = graph.outputs.contains(&k)
            || graph
                .nodes
                .iter()
                .enumerate()
                .any(|(i, n)| !nodes.contains(&i) && n.inputs.contains(&k));
        if outside {
            return Err(exec_error(format!(
                "node {k} of the chain ending at node {out} is read outside the chain, which \
                 the backward does not differentiate (a chain has one output)"
            )));
        }
    }
    let n_out = &graph.nodes[out];
    let ct = match n_out.kernel {
        Some(_) => compute_type(n_out.dtype),
        None => n_out.dtype,
    };
    let mut inputs: Vec<NodeId> = Vec::new();
    for &k in nodes {
        for &j in &graph.nodes[k].inputs {
            // A deferred bias's gradient is its `linear` node's to give.
            let ins = &graph.nodes[k].inputs;
            let deferred = ins.len() == 2 && ins[1] == j && r.deferred.get(&ins[0]) == Some(&j);
            if !nodes.contains(&j) && r.needs[j] && !deferred && !inputs.contains(&j) {
                inputs.push(j);
            }
        }
    }
    let cx = Cx { r, nodes, ct };
    let mut out_grads = Vec::new();
    for j in inputs {
        let t = cx.tangent(j)?;
        let prod = op_node(
            Op::Binary(BinaryOp::Mul),
            &Default::default(),
            &[cast(g, ct)?, cx.expr(t)?],
            ct,
        )?;
        let full = cast(&prod, n_out.dtype)?;
        let want = r.run.read_rounded(j)?;
        out_grads.push((j, sum_to(&full, want.dims())?));
    }
    Ok(out_grads)
}

/// `g` summed over the dims it has beyond `dims` (as the fused backward sums each input's
/// gradient): dense.
fn sum_to(g: &DynTensor, dims: &[usize]) -> Result<DynTensor> {
    floats!(g.dtype(), "a chain's gradient", E => {
        let s = crate::autograd::sum_to_storage(g.storage::<E>()?, g.layout(), dims)?;
        Ok(DynTensor::dense(s, dims))
    })
}

/// One chain's forward-mode derivation.
struct Cx<'a, 'r, 'g> {
    r: &'a Reverse<'r, 'g>,
    nodes: &'a [NodeId],
    /// The type the chain computes in.
    ct: DType,
}

impl Cx<'_, '_, '_> {
    /// The tangent of the chain's output with respect to its input `j`.
    fn tangent(&self, j: NodeId) -> Result<D> {
        let graph = self.r.run.graph();
        let mut ds: Vec<(NodeId, D)> = Vec::new();
        for &k in self.nodes {
            let n = &graph.nodes[k];
            let d_of = |o: NodeId| -> D {
                if o == j {
                    return D::One;
                }
                ds.iter()
                    .find(|(i, _)| *i == o)
                    .map_or(D::Zero, |(_, d)| d.clone())
            };
            let ins: Vec<D> = n.inputs.iter().map(|&o| d_of(o)).collect();
            let vals = |m: usize| self.r.run.read(k, n.inputs[m]);
            let d = match n.op {
                IrOp::Op(Op::Binary(b)) => self.binary(b, &ins, vals(0)?, vals(1)?)?,
                IrOp::Op(Op::Unary(u)) => self.unary(u, ins[0].clone(), vals(0)?)?,
                _ => unreachable!("a chain holds elementwise nodes"),
            };
            ds.push((k, d));
        }
        Ok(ds.pop().map_or(D::Zero, |(_, d)| d))
    }

    /// A binary step's tangent from its operands' `ds` and values `a` and `b`.
    fn binary(&self, op: BinaryOp, ds: &[D], a: DynTensor, b: DynTensor) -> Result<D> {
        let (da, db) = (ds[0].clone(), ds[1].clone());
        Ok(match op {
            BinaryOp::Add => self.add(da, db)?,
            BinaryOp::Sub => {
                let ndb = self.neg(db)?;
                self.add(da, ndb)?
            }
            BinaryOp::Mul => {
                let (l, r) = (self.scale(da, &b)?, self.scale(db, &a)?);
                self.add(l, r)?
            }
            BinaryOp::Div => match (da, db) {
                (D::Zero, D::Zero) => D::Zero,
                (da, D::Zero) => D::T(self.bin(BinaryOp::Div, self.expr(da)?, b)?),
                (da, db) => {
                    // (da * b - a * db) / (b * b)
                    let (l, r) = (self.scale(da, &b)?, self.scale(db, &a)?);
                    let num = self.add(l, self.neg(r)?)?;
                    let bb = self.bin(BinaryOp::Mul, b.clone(), b)?;
                    D::T(self.bin(BinaryOp::Div, self.expr(num)?, bb)?)
                }
            },
            BinaryOp::Max | BinaryOp::Min => match (da, db) {
                (D::Zero, D::Zero) => D::Zero,
                // Ties go to the first operand.
                (da, db) => {
                    let c = if op == BinaryOp::Max {
                        CmpOp::Ge
                    } else {
                        CmpOp::Le
                    };
                    let cond = op_node(Op::Cmp(c), &Default::default(), &[a, b], DType::Bool)?;
                    D::T(self.select(cond, self.expr(da)?, self.expr(db)?)?)
                }
            },
            // `#[kernel]`'s rule for `powf`: `da * (b * a^(b - 1)) + db * (a^b * ln a)`, the
            // power recomputed as the derivative kernel recomputes it.
            BinaryOp::Pow => {
                let from_a = if matches!(da, D::Zero) {
                    D::Zero
                } else {
                    let less = self.bin(BinaryOp::Sub, b.clone(), self.scalar(1.0)?)?;
                    let power = self.bin(BinaryOp::Pow, a.clone(), less)?;
                    self.scale(da, &self.bin(BinaryOp::Mul, b.clone(), power)?)?
                };
                let from_b = if matches!(db, D::Zero) {
                    D::Zero
                } else {
                    let y = self.bin(BinaryOp::Pow, a.clone(), b)?;
                    let ln = op_node(Op::Unary(UnaryOp::Log), &Default::default(), &[a], self.ct)?;
                    self.scale(db, &self.bin(BinaryOp::Mul, y, ln)?)?
                };
                self.add(from_a, from_b)?
            }
        })
    }

    /// A unary step's tangent from its operand's `da` and value `x`: `-da` for `neg`,
    /// `sign(x) da` for `abs` (0 at 0), and for every other op its derived kernel on `x`
    /// and `da`, as a fused chain calls it.
    fn unary(&self, op: UnaryOp, da: D, x: DynTensor) -> Result<D> {
        if matches!(da, D::Zero) {
            return Ok(D::Zero);
        }
        Ok(match op {
            UnaryOp::Neg => self.neg(da)?,
            UnaryOp::Abs => {
                let zero = self.scalar(0.0)?;
                let gt = Op::Cmp(CmpOp::Gt);
                let lt = Op::Cmp(CmpOp::Lt);
                let pos = op_node(
                    gt,
                    &Default::default(),
                    &[x.clone(), zero.clone()],
                    DType::Bool,
                )?;
                let negs = op_node(lt, &Default::default(), &[x, zero.clone()], DType::Bool)?;
                let nda = self.expr(self.neg(da.clone())?)?;
                let inner = self.select(negs, nda, zero)?;
                D::T(self.select(pos, self.expr(da)?, inner)?)
            }
            _ => D::T(derived(op, &x, &self.expr(da)?)?),
        })
    }

    /// `a + b` with a zero dropped.
    fn add(&self, a: D, b: D) -> Result<D> {
        Ok(match (a, b) {
            (D::Zero, x) | (x, D::Zero) => x,
            (a, b) => D::T(self.bin(BinaryOp::Add, self.expr(a)?, self.expr(b)?)?),
        })
    }

    /// `-d`: a one becomes the value -1.
    fn neg(&self, d: D) -> Result<D> {
        Ok(match d {
            D::Zero => D::Zero,
            D::One => D::T(self.scalar(-1.0)?),
            D::T(t) => D::T(op_node(
                Op::Unary(UnaryOp::Neg),
                &Default::default(),
                &[t],
                self.ct,
            )?),
        })
    }

    /// `d * e` for a tangent `d` and a value `e`: a one gives `e` itself.
    fn scale(&self, d: D, e: &DynTensor) -> Result<D> {
        Ok(match d {
            D::Zero => D::Zero,
            D::One => D::T(e.clone()),
            D::T(t) => D::T(self.bin(BinaryOp::Mul, t, e.clone())?),
        })
    }

    /// A tangent as a value: a zero or a one becomes that scalar.
    fn expr(&self, d: D) -> Result<DynTensor> {
        match d {
            D::Zero => self.scalar(0.0),
            D::One => self.scalar(1.0),
            D::T(t) => Ok(t),
        }
    }

    /// `a op b` in the compute type, broadcast.
    fn bin(&self, op: BinaryOp, a: DynTensor, b: DynTensor) -> Result<DynTensor> {
        op_node(Op::Binary(op), &Default::default(), &[a, b], self.ct)
    }

    /// `if cond { a } else { b }` elementwise, all three broadcast together.
    fn select(&self, cond: DynTensor, a: DynTensor, b: DynTensor) -> Result<DynTensor> {
        let dims = broadcast_dims(&broadcast_dims(cond.dims(), a.dims())?, b.dims())?;
        let l = a.layout().broadcast_to(&dims).ok_or_else(|| {
            exec_error(format!("dims {:?} do not broadcast to {dims:?}", a.dims()))
        })?;
        op_node(
            Op::Where,
            &Default::default(),
            &[cond, a.with_layout(l), b],
            self.ct,
        )
    }

    /// The scalar `v` in the compute type, on the run's device.
    fn scalar(&self, v: f64) -> Result<DynTensor> {
        let device = self.r.run.device()?;
        floats!(self.ct, "a tangent", E => {
            Ok(DynTensor::dense(Storage::<E>::full(E::from_f64(v), 1, device)?, &[]))
        })
    }
}

/// `da * d op(x) / dx` by the derivative kernel `#[kernel]` derived from the op's formula
/// (the one a fused chain calls for the op), `x` and `da` broadcast together.
fn derived(op: UnaryOp, x: &DynTensor, da: &DynTensor) -> Result<DynTensor> {
    struct Grad<'a, E: Float>(
        (&'a Storage<E>, &'a rtx_backends::Layout),
        (&'a Storage<E>, &'a rtx_backends::Layout),
    );
    impl<E: Float> UnaryVisitor for Grad<'_, E> {
        type Out = Result<Storage<E>>;
        fn visit<O: UnaryOpT>(self) -> Self::Out {
            let Some(src) = <O::Kernel as Elementwise<1>>::GRADS[0] else {
                return Err(exec_error(format!(
                    "`#[kernel]` derived no derivative of {}",
                    O::OP.name()
                )));
            };
            let f = <O::Kernel as Elementwise<1>>::scalar_grad::<E>(0, &[]);
            Ok(Storage::map_kernel_grad::<1>(
                src,
                &[self.0, self.1],
                &[],
                f,
            )?)
        }
    }
    let dims = broadcast_dims(x.dims(), da.dims())?;
    let seen = |t: &DynTensor| {
        t.layout()
            .broadcast_to(&dims)
            .ok_or_else(|| exec_error(format!("dims {:?} do not broadcast to {dims:?}", t.dims())))
    };
    let (lx, ld) = (seen(x)?, seen(da)?);
    floats!(x.dtype(), op.name(), E => {
        let s = op.visit(Grad::<E>((x.storage::<E>()?, &lx), (da.storage::<E>()?, &ld)))?;
        Ok(DynTensor::dense(s, &dims))
    })
}
