//! The structural check of a [`Graph`]: what the loader runs on every file, and what every
//! graph the typed builder makes passes.
//!
//! Each node is checked against its op's rule: how many inputs it reads (all earlier nodes),
//! which attributes it takes, and how its element type and shape follow from its inputs'.
//! Dims are compared leniently where the types are: `"?"` (a plain `usize` dim) agrees with
//! any dim, as `usize` does with any dim type; sizes must be equal and names must be equal.

use super::{Composite, Dim, Graph, IrOp, Node, dtype_name, static_numel};
use crate::error::{Error, Result};
use rtx_backends::MAX_RANK;
use rtx_kernels::DType;
use rtx_kernels::op::{Op, ReduceOp, UnaryOp};
use std::collections::HashMap;

type Check = std::result::Result<(), String>;

impl Graph {
    /// Checks that every node reads only earlier nodes, has the attributes its op takes, and
    /// has the element type and shape its op gives its inputs; that outputs name nodes; and
    /// that no input or parameter name appears twice. The error names the node and what is
    /// wrong.
    ///
    /// ```
    /// # use rtx::ir::{Builder, Dim};
    /// # use rtx::op::UnaryOp;
    /// # use rtx::shape::Const;
    /// let mut b = Builder::new("M");
    /// let x = b.input::<(Const<3>,), f32>("x");
    /// let y = b.unary(x, UnaryOp::Exp);
    /// b.output(y);
    /// let mut g = b.finish();
    /// assert!(g.validate().is_ok());
    /// g.nodes[1].shape = vec![Dim::Static(4)];
    /// assert_eq!(
    ///     g.validate().unwrap_err().to_string(),
    ///     "IR graph `M`: node 1 (exp): shape [4] is not its input's shape [3]"
    /// );
    /// ```
    pub fn validate(&self) -> Result<()> {
        self.check().map_err(|msg| Error::Ir {
            origin: format!("IR graph `{}`", self.name),
            msg,
        })
    }

    /// [`Graph::validate`]'s check, its error a message without the graph's origin.
    pub(super) fn check(&self) -> Check {
        let mut names: HashMap<(&str, &str), usize> = HashMap::new();
        for (i, n) in self.nodes.iter().enumerate() {
            let at = format!("node {i} ({})", n.op.name());
            check_node(self, i, n).map_err(|e| format!("{at}: {e}"))?;
            if let IrOp::Input(name) | IrOp::Param(name) = &n.op
                && let Some(first) = names.insert((n.op.name(), name), i)
            {
                return Err(format!(
                    "{at}: the {} \"{name}\" is already node {first}",
                    n.op.name()
                ));
            }
        }
        for (k, &o) in self.outputs.iter().enumerate() {
            if o >= self.nodes.len() {
                return Err(format!(
                    "output {k} is node {o}, but the graph has {} nodes",
                    self.nodes.len()
                ));
            }
        }
        Ok(())
    }
}

/// `[B, 784]`.
pub(super) fn shape_str(shape: &[Dim]) -> String {
    let dims: Vec<String> = shape.iter().map(Dim::to_string).collect();
    format!("[{}]", dims.join(", "))
}

/// Whether two dims can be the same dim (see the module docs).
fn agree(a: &Dim, b: &Dim) -> bool {
    match (a, b) {
        (Dim::Sym(s), _) | (_, Dim::Sym(s)) if s == "?" => true,
        _ => a == b,
    }
}

fn same_shape(a: &[Dim], b: &[Dim]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| agree(x, y))
}

/// The broadcast of two shapes by the typed rule: the shorter equals the longer's trailing
/// dims, and the result is the longer (the left one at equal ranks).
fn broadcast<'a>(a: &'a [Dim], b: &'a [Dim]) -> Option<&'a [Dim]> {
    let (big, small) = if a.len() >= b.len() { (a, b) } else { (b, a) };
    same_shape(&big[big.len() - small.len()..], small).then_some(big)
}

/// The shape of a matrix product, by `MatmulShapes`' rule, or why there is none.
fn matmul_shape(a: &[Dim], b: &[Dim]) -> std::result::Result<Vec<Dim>, String> {
    let pair = format!("{} and {}", shape_str(a), shape_str(b));
    let inner_ok = |k: &Dim, k2: &Dim| {
        if agree(k, k2) {
            Ok(())
        } else {
            Err(format!("the inner dims of {pair} differ ({k} vs {k2})"))
        }
    };
    match (a.len(), b.len()) {
        (1, 2) => {
            inner_ok(&a[0], &b[0])?;
            Ok(vec![b[1].clone()])
        }
        (2, 1) => {
            inner_ok(&a[1], &b[0])?;
            Ok(vec![a[0].clone()])
        }
        (ra, rb) if (2..=4).contains(&ra) && (2..=4).contains(&rb) => {
            inner_ok(&a[ra - 1], &b[rb - 2])?;
            let (ba, bb) = (&a[..ra - 2], &b[..rb - 2]);
            if !ba.is_empty() && !bb.is_empty() && !same_shape(ba, bb) {
                return Err(format!("the batch dims of {pair} differ"));
            }
            let mut out = if ba.len() >= bb.len() { ba } else { bb }.to_vec();
            out.extend([a[ra - 2].clone(), b[rb - 1].clone()]);
            Ok(out)
        }
        _ => Err(format!("no matmul rule for {pair}")),
    }
}

/// The rule of one node.
fn check_node(g: &Graph, i: usize, n: &Node) -> Check {
    if let Some(&j) = n.inputs.iter().find(|&&j| j >= i) {
        return Err(format!("reads %{j}, which is not an earlier node"));
    }
    if n.shape.len() > MAX_RANK {
        return Err(format!("rank {} is more than {MAX_RANK}", n.shape.len()));
    }
    if n.shape.iter().any(|d| *d == Dim::Sym(String::new())) {
        return Err("a run-time dim has an empty name".into());
    }
    let ins: Vec<&Node> = n.inputs.iter().map(|&j| &g.nodes[j]).collect();
    let arity = |k: usize| {
        if ins.len() == k {
            Ok(())
        } else {
            Err(format!("reads {} inputs, not {k}", ins.len()))
        }
    };
    let op = match &n.op {
        IrOp::Op(op) => *op,
        other => {
            if !n.attrs.is_empty() {
                return Err("takes no attributes (axis, keepdim, conv, pool)".into());
            }
            return check_ir_only(other, n, &ins, arity);
        }
    };
    check_attrs(op, n)?;
    let x = ins.first().copied();
    match op {
        Op::Unary(u) => {
            arity(1)?;
            let signed = matches!(u, UnaryOp::Neg | UnaryOp::Abs)
                && !matches!(n.dtype, DType::U8 | DType::Bool);
            if !n.dtype.is_float() && !signed {
                return Err(format!("is not defined for {}", dtype_name(n.dtype)));
            }
            same_as_input(n, ins[0])
        }
        Op::Binary(_) | Op::Cmp(_) => {
            arity(2)?;
            if ins[0].dtype != ins[1].dtype {
                return Err(format!(
                    "its inputs are {} and {}; element types never mix",
                    dtype_name(ins[0].dtype),
                    dtype_name(ins[1].dtype)
                ));
            }
            if matches!(op, Op::Binary(_)) && ins[0].dtype == DType::Bool {
                return Err("is not defined for bool".into());
            }
            let out_dtype = if matches!(op, Op::Cmp(_)) {
                DType::Bool
            } else {
                ins[0].dtype
            };
            dtype_is(n, out_dtype)?;
            let out = broadcast(&ins[0].shape, &ins[1].shape).ok_or_else(|| {
                format!(
                    "shapes {} and {} do not broadcast",
                    shape_str(&ins[0].shape),
                    shape_str(&ins[1].shape)
                )
            })?;
            shape_is(n, out)
        }
        Op::Where => {
            arity(3)?;
            let (cond, a, b) = (ins[0], ins[1], ins[2]);
            if cond.dtype != DType::Bool {
                return Err(format!(
                    "its condition %{} is {}, not bool",
                    n.inputs[0],
                    dtype_name(cond.dtype)
                ));
            }
            dtype_is(n, a.dtype)?;
            dtype_is(n, b.dtype)?;
            shape_is(n, &a.shape)?;
            for side in [cond, b] {
                if broadcast(&side.shape, &a.shape).is_none_or(|s| !same_shape(s, &a.shape)) {
                    return Err(format!(
                        "{} does not broadcast to {}",
                        shape_str(&side.shape),
                        shape_str(&a.shape)
                    ));
                }
            }
            Ok(())
        }
        Op::Reduce(r) => {
            arity(1)?;
            let x = ins[0];
            let axis = axis_in(n, x)?;
            let mut out = x.shape.clone();
            if n.attrs.keepdim {
                out[axis] = Dim::Static(1);
            } else {
                out.remove(axis);
            }
            let arg = matches!(r, ReduceOp::ArgMax | ReduceOp::ArgMin);
            dtype_is(n, if arg { DType::I64 } else { x.dtype })?;
            shape_is(n, &out)
        }
        Op::Cast => {
            arity(1)?;
            shape_is(n, &ins[0].shape)
        }
        Op::Copy => {
            arity(1)?;
            same_as_input(n, ins[0])
        }
        Op::MatMul => {
            arity(2)?;
            dtype_is(n, ins[0].dtype)?;
            dtype_is(n, ins[1].dtype)?;
            shape_is(n, &matmul_shape(&ins[0].shape, &ins[1].shape)?)
        }
        Op::Conv => {
            if !(2..=3).contains(&ins.len()) {
                return Err(format!(
                    "reads {} inputs, not 2 or 3 (input, weight, bias)",
                    ins.len()
                ));
            }
            let c = n.attrs.conv.ok_or("needs conv geometry")?;
            if c.stride == 0 || c.dilation == 0 || c.groups == 0 {
                return Err(format!(
                    "stride, dilation and groups must be at least 1 ({c:?})"
                ));
            }
            for w in &ins {
                dtype_is(n, w.dtype)?;
            }
            let (x, w) = (ins[0], ins[1]);
            if !(3..=4).contains(&x.shape.len()) || w.shape.len() != x.shape.len() {
                return Err(format!(
                    "input {} and weight {} are not a 1-d or 2-d convolution's",
                    shape_str(&x.shape),
                    shape_str(&w.shape)
                ));
            }
            rank_is(n, x.shape.len())
        }
        Op::Pool(_) => {
            arity(1)?;
            let p = n.attrs.pool.ok_or("needs a pooling window")?;
            if p.kernel == 0 || p.stride == 0 {
                return Err(format!("kernel and stride must be at least 1 ({p:?})"));
            }
            dtype_is(n, ins[0].dtype)?;
            rank_is(n, ins[0].shape.len())
        }
        Op::IndexSelect | Op::Gather | Op::Scatter(_) => {
            arity(if matches!(op, Op::Scatter(_)) { 3 } else { 2 })?;
            let (x, index) = (ins[0], ins[1]);
            axis_in(n, x)?;
            if index.dtype != DType::I64 {
                return Err(format!(
                    "its index %{} is {}, not i64",
                    n.inputs[1],
                    dtype_name(index.dtype)
                ));
            }
            dtype_is(n, x.dtype)?;
            match op {
                Op::IndexSelect if index.shape.len() != 1 => Err(format!(
                    "its index {} is not a vector",
                    shape_str(&index.shape)
                )),
                Op::IndexSelect => rank_is(n, x.shape.len()),
                Op::Gather => shape_is(n, &index.shape),
                _ => {
                    dtype_is(n, ins[2].dtype)?;
                    shape_is(n, &x.shape)
                }
            }
        }
        Op::Concat => {
            let Some(first) = x else {
                return Err("reads no inputs".into());
            };
            let axis = axis_in(n, first)?;
            for t in &ins {
                dtype_is(n, t.dtype)?;
                let agrees = t.shape.len() == first.shape.len()
                    && (0..t.shape.len()).all(|k| k == axis || agree(&t.shape[k], &first.shape[k]));
                if !agrees {
                    return Err(format!(
                        "{} and {} do not agree outside axis {axis}",
                        shape_str(&first.shape),
                        shape_str(&t.shape)
                    ));
                }
            }
            rank_is(n, first.shape.len())
        }
        // Random draws read their scalar parameters and seed as inputs, in any number.
        Op::Random(_) => Ok(()),
    }
}

/// The attributes each primitive op takes: an axis for reductions and axis ops, `keepdim`
/// for reductions only, geometry for convolutions and pooling.
fn check_attrs(op: Op, n: &Node) -> Check {
    let wants_axis = matches!(
        op,
        Op::Reduce(_) | Op::Concat | Op::IndexSelect | Op::Gather | Op::Scatter(_)
    );
    let a = &n.attrs;
    match (wants_axis, a.axis) {
        (true, None) => return Err("needs an axis".into()),
        (false, Some(_)) => return Err("takes no axis".into()),
        _ => {}
    }
    if a.keepdim && !matches!(op, Op::Reduce(_)) {
        return Err("takes no keepdim; only reductions do".into());
    }
    if a.conv.is_some() && op != Op::Conv {
        return Err("takes no conv geometry".into());
    }
    if a.pool.is_some() && !matches!(op, Op::Pool(_)) {
        return Err("takes no pooling window".into());
    }
    Ok(())
}

/// The rules of the nodes that are not primitive ops.
fn check_ir_only(op: &IrOp, n: &Node, ins: &[&Node], arity: impl Fn(usize) -> Check) -> Check {
    match op {
        IrOp::Input(name) | IrOp::Param(name) => {
            arity(0)?;
            if name.is_empty() {
                return Err("has an empty name".into());
            }
            Ok(())
        }
        IrOp::Constant(_) => {
            arity(0)?;
            rank_is(n, 0)
        }
        IrOp::Op(_) => Ok(()),
        IrOp::Permute(perm) => {
            arity(1)?;
            let x = ins[0];
            let mut seen = vec![false; x.shape.len()];
            for &p in perm {
                match seen.get_mut(p) {
                    Some(s) if !*s => *s = true,
                    _ => {
                        return Err(format!(
                            "{perm:?} is not a permutation of the {} axes of {}",
                            x.shape.len(),
                            shape_str(&x.shape)
                        ));
                    }
                }
            }
            if perm.len() != x.shape.len() {
                return Err(format!(
                    "{perm:?} is not a permutation of the {} axes of {}",
                    x.shape.len(),
                    shape_str(&x.shape)
                ));
            }
            dtype_is(n, x.dtype)?;
            let out: Vec<Dim> = perm.iter().map(|&p| x.shape[p].clone()).collect();
            shape_is(n, &out)
        }
        IrOp::Reshape => {
            arity(1)?;
            dtype_is(n, ins[0].dtype)?;
            match (static_numel(&ins[0].shape), static_numel(&n.shape)) {
                (Some(a), Some(b)) if a != b => Err(format!(
                    "{} ({a} elements) cannot become {} ({b} elements)",
                    shape_str(&ins[0].shape),
                    shape_str(&n.shape)
                )),
                _ => Ok(()),
            }
        }
        IrOp::Expand => {
            arity(1)?;
            let x = ins[0];
            dtype_is(n, x.dtype)?;
            let lead = n.shape.len().checked_sub(x.shape.len());
            let fits = lead.is_some_and(|lead| {
                x.shape
                    .iter()
                    .zip(&n.shape[lead..])
                    .all(|(s, t)| *s == Dim::Static(1) || agree(s, t))
            });
            if fits {
                Ok(())
            } else {
                Err(format!(
                    "{} does not broadcast to {}",
                    shape_str(&x.shape),
                    shape_str(&n.shape)
                ))
            }
        }
        IrOp::Narrow { axis, start } => {
            arity(1)?;
            let x = ins[0];
            dtype_is(n, x.dtype)?;
            rank_is(n, x.shape.len())?;
            if *axis >= x.shape.len() {
                return Err(format!(
                    "axis {axis} is out of range for {}",
                    shape_str(&x.shape)
                ));
            }
            let mut expect = x.shape.clone();
            expect[*axis] = n.shape[*axis].clone();
            shape_is(n, &expect)?;
            match (&x.shape[*axis], &n.shape[*axis]) {
                (Dim::Static(size), Dim::Static(len)) if start + len > *size => Err(format!(
                    "range {start}..{} is out of bounds for axis {axis} of size {size}",
                    start + len
                )),
                _ => Ok(()),
            }
        }
        IrOp::Size { axis } => {
            arity(1)?;
            if *axis >= ins[0].shape.len() {
                return Err(format!(
                    "axis {axis} is out of range for {}",
                    shape_str(&ins[0].shape)
                ));
            }
            rank_is(n, 0)
        }
        IrOp::Composite(c) => check_composite(*c, n, ins),
    }
}

/// The rules of the composite ops: float operands of one element type (cross entropy's
/// targets aside, `i64`), and the shapes the layers they stand for give.
fn check_composite(c: Composite, n: &Node, ins: &[&Node]) -> Check {
    let Some(x) = ins.first() else {
        return Err("reads no inputs".into());
    };
    if !x.dtype.is_float() {
        return Err(format!("is not defined for {}", dtype_name(x.dtype)));
    }
    let is_loss = matches!(c, Composite::CrossEntropy { .. });
    for (k, t) in ins.iter().enumerate() {
        if is_loss && k == 1 {
            if t.dtype != DType::I64 {
                return Err(format!(
                    "its targets %{} are {}, not i64 class indices",
                    n.inputs[1],
                    dtype_name(t.dtype)
                ));
            }
        } else {
            dtype_is(n, t.dtype)?;
        }
    }
    let inputs_between = |lo: usize, hi: usize, what: &str| {
        if (lo..=hi).contains(&ins.len()) {
            Ok(())
        } else {
            Err(format!("reads {} inputs, not {what}", ins.len()))
        }
    };
    // A norm's or a Linear's `[D]` parameter must be as long as the axis it scales.
    let vector_of = |k: usize, len: &Dim, what: &str| {
        let p = &ins[k].shape;
        if p.len() == 1 && agree(&p[0], len) {
            Ok(())
        } else {
            Err(format!(
                "its {what} %{} is {}, not [{len}]",
                n.inputs[k],
                shape_str(p)
            ))
        }
    };
    match c {
        Composite::Softmax { axis } | Composite::LogSoftmax { axis } => {
            inputs_between(1, 1, "1")?;
            axis_below(axis, x)?;
            same_as_input(n, x)
        }
        Composite::Mean { axis, keepdim } => {
            inputs_between(1, 1, "1")?;
            axis_below(axis, x)?;
            let mut out = x.shape.clone();
            if keepdim {
                out[axis] = Dim::Static(1);
            } else {
                out.remove(axis);
            }
            shape_is(n, &out)
        }
        Composite::LayerNorm { eps } | Composite::RmsNorm { eps } => {
            let most = if matches!(c, Composite::LayerNorm { .. }) {
                3
            } else {
                2
            };
            inputs_between(1, most, &format!("1 to {most} (input, weight, bias)"))?;
            if !(eps.is_finite() && eps >= 0.0) {
                return Err(format!("eps {eps} is not a finite number from 0"));
            }
            let last = x
                .shape
                .last()
                .ok_or("normalizes a scalar, which has no last axis")?;
            for (k, what) in [(1, "weight"), (2, "bias")] {
                if k < ins.len() {
                    vector_of(k, last, what)?;
                }
            }
            same_as_input(n, x)
        }
        Composite::Linear => {
            inputs_between(2, 3, "2 or 3 (input, weight, bias)")?;
            let w = &ins[1].shape;
            let fits = w.len() == 2 && x.shape.last().is_some_and(|i| agree(i, &w[1]));
            if !fits {
                return Err(format!(
                    "input {} and weight {} are not a Linear's [.., I] and [O, I]",
                    shape_str(&x.shape),
                    shape_str(w)
                ));
            }
            if ins.len() == 3 {
                vector_of(2, &w[0], "bias")?;
            }
            let mut out = x.shape.clone();
            *out.last_mut()
                .unwrap_or_else(|| unreachable!("checked above")) = w[0].clone();
            shape_is(n, &out)
        }
        Composite::CausalAttention { heads } => {
            inputs_between(1, 1, "1")?;
            if heads == 0 || x.shape.len() != 3 {
                return Err(format!(
                    "reads {} with {heads} heads, not a projection [B, T, 3D] with at least one head",
                    shape_str(&x.shape)
                ));
            }
            rank_is(n, 3)?;
            if let (Dim::Static(w3), Dim::Static(w)) = (&x.shape[2], &n.shape[2])
                && (*w3 != 3 * w || w % heads != 0)
            {
                return Err(format!(
                    "the projection's width {w3} is not 3 x {w}, or {w} is not split into \
                     {heads} heads"
                ));
            }
            let expect = [x.shape[0].clone(), x.shape[1].clone(), n.shape[2].clone()];
            shape_is(n, &expect)
        }
        Composite::CrossEntropy {
            label_smoothing, ..
        } => {
            inputs_between(2, 2, "2 (logits, targets)")?;
            let t = &ins[1].shape;
            if x.shape.len() != 2 || t.len() != 1 || !agree(&x.shape[0], &t[0]) {
                return Err(format!(
                    "logits {} and targets {} are not [B, C] and [B]",
                    shape_str(&x.shape),
                    shape_str(t)
                ));
            }
            if !(0.0..=1.0).contains(&label_smoothing) {
                return Err(format!(
                    "label_smoothing {label_smoothing} is not in [0, 1]"
                ));
            }
            rank_is(n, 0)
        }
    }
}

fn axis_below(axis: usize, x: &Node) -> Check {
    if axis < x.shape.len() {
        Ok(())
    } else {
        Err(format!(
            "axis {axis} is out of range for {}",
            shape_str(&x.shape)
        ))
    }
}

fn axis_in(n: &Node, x: &Node) -> std::result::Result<usize, String> {
    let axis = n.attrs.axis.ok_or("needs an axis")?;
    if axis >= x.shape.len() {
        return Err(format!(
            "axis {axis} is out of range for {}",
            shape_str(&x.shape)
        ));
    }
    Ok(axis)
}

fn dtype_is(n: &Node, dtype: DType) -> Check {
    if n.dtype == dtype {
        Ok(())
    } else {
        Err(format!(
            "its element type is {}, not {}",
            dtype_name(n.dtype),
            dtype_name(dtype)
        ))
    }
}

fn shape_is(n: &Node, shape: &[Dim]) -> Check {
    if same_shape(&n.shape, shape) {
        Ok(())
    } else {
        Err(format!(
            "shape {} is not {}, the shape its op gives",
            shape_str(&n.shape),
            shape_str(shape)
        ))
    }
}

fn rank_is(n: &Node, rank: usize) -> Check {
    if n.shape.len() == rank {
        Ok(())
    } else {
        Err(format!(
            "shape {} is not of rank {rank}",
            shape_str(&n.shape)
        ))
    }
}

fn same_as_input(n: &Node, x: &Node) -> Check {
    dtype_is(n, x.dtype)?;
    if same_shape(&n.shape, &x.shape) {
        Ok(())
    } else {
        Err(format!(
            "shape {} is not its input's shape {}",
            shape_str(&n.shape),
            shape_str(&x.shape)
        ))
    }
}
