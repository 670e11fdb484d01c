//! The shape-annotated summary of a [`Graph`] (its `Display`): one line per node with its
//! op, inputs, shape, element type, scope and kernel, then the totals: node and primitive-op
//! counts, the op histogram and the parameters' sizes.
//!
//! Invariant: line `k + 1` of the summary is node `k` (after the one header line), so a node
//! index in an error can be looked up in the summary directly.

use super::validate::shape_str;
use super::{Composite, Graph, IrOp, Node, dtype_name, static_numel};
use std::fmt;

/// `sum[axis=1, keepdim]`, `permute[1, 0]`, `input x`, `constant 0.5`: the op with its
/// parameters, without its inputs.
pub(super) fn op_text(n: &Node) -> String {
    let a = &n.attrs;
    let mut params: Vec<String> = Vec::new();
    match &n.op {
        IrOp::Input(name) | IrOp::Param(name) => return format!("{} {name}", n.op.name()),
        IrOp::Constant(v) => return format!("constant {v:?}"),
        IrOp::Permute(p) => params.extend(p.iter().map(usize::to_string)),
        IrOp::Narrow { axis, start } => {
            params.extend([format!("axis={axis}"), format!("start={start}")])
        }
        IrOp::Size { axis } => params.push(format!("axis={axis}")),
        IrOp::Composite(c) => match *c {
            Composite::Softmax { axis } | Composite::LogSoftmax { axis } => {
                params.push(format!("axis={axis}"))
            }
            Composite::Mean { axis, keepdim } => {
                params.push(format!("axis={axis}"));
                if keepdim {
                    params.push("keepdim".into());
                }
            }
            Composite::LayerNorm { eps } | Composite::RmsNorm { eps } => {
                params.push(format!("eps={eps:?}"))
            }
            Composite::CausalAttention { heads } => params.push(format!("heads={heads}")),
            Composite::CrossEntropy {
                ignore_index,
                label_smoothing,
            } => {
                if let Some(i) = ignore_index {
                    params.push(format!("ignore_index={i}"));
                }
                params.push(format!("label_smoothing={label_smoothing:?}"));
            }
            Composite::Linear => {}
        },
        IrOp::Op(_) | IrOp::Reshape | IrOp::Expand => {}
    }
    if let Some(axis) = a.axis {
        params.push(format!("axis={axis}"));
    }
    if a.keepdim {
        params.push("keepdim".into());
    }
    if let Some(c) = a.conv {
        params.push(format!(
            "stride={}, padding={}, dilation={}, groups={}",
            c.stride, c.padding, c.dilation, c.groups
        ));
    }
    if let Some(p) = a.pool {
        params.push(format!(
            "kernel={}, stride={}, padding={}",
            p.kernel, p.stride, p.padding
        ));
    }
    if params.is_empty() {
        n.op.name().to_string()
    } else {
        format!("{}[{}]", n.op.name(), params.join(", "))
    }
}

/// The summary's columns for node `i`: `%i = op(inputs)`, `: shape dtype`, scope, kernel.
fn columns(i: usize, n: &Node) -> [String; 4] {
    let mut lhs = format!("%{i} = {}", op_text(n));
    if !n.inputs.is_empty() {
        let ins: Vec<String> = n.inputs.iter().map(|j| format!("%{j}")).collect();
        lhs.push_str(&format!("({})", ins.join(", ")));
    }
    let ty = format!(": {} {}", shape_str(&n.shape), dtype_name(n.dtype));
    let kernel = n
        .kernel
        .as_ref()
        .map_or(String::new(), |k| format!("[kernel {k}]"));
    [lhs, ty, n.scope.clone(), kernel]
}

impl fmt::Display for Graph {
    /// The summary: a header, one aligned line per node, the outputs, then the totals.
    ///
    /// ```
    /// # use rtx::ir::Builder;
    /// # use rtx::op::UnaryOp;
    /// # use rtx::shape::{Const, Dyn};
    /// let mut b = Builder::new("M");
    /// let x = b.input::<(Dyn<'B'>, Const<3>), f32>("x");
    /// let w = b.scope("fc", |b| b.param::<(Const<3>, Const<2>), f32>("weight"));
    /// let y = b.scope("fc", |b| b.kernel("k0", |b| {
    ///     let y = b.matmul(x, w);
    ///     b.unary(y, UnaryOp::Relu)
    /// }));
    /// b.output(y);
    /// let text = b.finish().to_string();
    /// assert_eq!(text.lines().nth(3).unwrap(), "%2 = matmul(%0, %1)  : [B, 2] f32   fc   [kernel k0]");
    /// assert!(text.contains("ops: matmul 1, relu 1"));
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "graph {}", self.name)?;
        let rows: Vec<[String; 4]> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| columns(i, n))
            .collect();
        let mut width = [0usize; 4];
        for row in &rows {
            for (w, col) in width.iter_mut().zip(row) {
                *w = (*w).max(col.chars().count());
            }
        }
        for row in &rows {
            let mut line = String::new();
            for (k, (col, w)) in row.iter().zip(width).enumerate() {
                if w == 0 {
                    continue;
                }
                line.push_str(["", " ", "   ", "   "][k]);
                line.push_str(col);
                line.extend(std::iter::repeat_n(' ', w - col.chars().count()));
            }
            writeln!(f, "{}", line.trim_end())?;
        }
        let outs: Vec<String> = self.outputs.iter().map(|o| format!("%{o}")).collect();
        writeln!(f, "outputs: {}", outs.join(", "))?;
        self.totals(f)
    }
}

impl Graph {
    /// The totals lines of the summary.
    fn totals(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = |p: fn(&IrOp) -> bool| self.nodes.iter().filter(|n| p(&n.op)).count();
        let inputs = count(|op| matches!(op, IrOp::Input(_)));
        let params = count(|op| matches!(op, IrOp::Param(_)));
        let constants = count(|op| matches!(op, IrOp::Constant(_)));
        let views = count(|op| {
            matches!(
                op,
                IrOp::Permute(_) | IrOp::Reshape | IrOp::Expand | IrOp::Narrow { .. }
            )
        });
        let sizes = count(|op| matches!(op, IrOp::Size { .. }));
        let mut kinds = vec![
            plural(inputs, "input"),
            plural(params, "param"),
            plural(constants, "constant"),
            plural(views, "view"),
        ];
        if sizes > 0 {
            kinds.push(plural(sizes, "size"));
        }
        kinds.push(plural(self.op_count(), "primitive op"));
        writeln!(f, "nodes: {} ({})", self.nodes.len(), kinds.join(", "))?;
        let mut hist: Vec<(&str, usize)> = self.op_histogram().into_iter().collect();
        hist.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let hist: Vec<String> = hist.iter().map(|(op, k)| format!("{op} {k}")).collect();
        writeln!(f, "ops: {}", hist.join(", "))?;
        let shapes: Vec<Option<usize>> = self
            .nodes
            .iter()
            .filter(|n| matches!(n.op, IrOp::Param(_)))
            .map(|n| static_numel(&n.shape))
            .collect();
        let elements: usize = shapes.iter().flatten().sum();
        let dynamic = shapes.iter().filter(|s| s.is_none()).count();
        let tensors = plural(shapes.len(), "tensor");
        write!(f, "params: {tensors}, {}", plural(elements, "element"))?;
        if dynamic > 0 {
            write!(f, " (and {dynamic} with run-time dims)")?;
        }
        writeln!(f)
    }
}

/// `1 input`, `2 inputs`.
fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("{n} {noun}")
    } else {
        format!("{n} {noun}s")
    }
}
