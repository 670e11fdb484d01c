//! Graphviz (DOT) export of a [`Graph`]: one box per node labelled with its op, shape and
//! element type; graph inputs, parameters, constants and views drawn each in their own
//! style; the nodes of each fused kernel grouped in a `subgraph cluster_*`, so the fusion
//! plan is visible; the outputs marked.
//!
//! Invariant: the text is a valid DOT graph whatever the names hold (every string is quoted
//! and escaped), and node `k` is the DOT node `n{k}`.

use super::summary::op_text;
use super::validate::shape_str;
use super::{Graph, IrOp, Node, dtype_name};
use std::fmt::Write;

/// A DOT string literal.
fn quoted(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\n' => q.push_str("\\n"),
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

/// The node's declaration: its label and the style of its kind.
fn declaration(i: usize, n: &Node) -> String {
    let label = format!(
        "%{i} {}\n{} {}",
        op_text(n),
        shape_str(&n.shape),
        dtype_name(n.dtype)
    );
    let style = match n.op {
        IrOp::Input(_) => r##"shape=invhouse, style=filled, fillcolor="#cfe2ff""##,
        IrOp::Param(_) => r##"shape=box, style="filled,rounded", fillcolor="#fff3cd""##,
        IrOp::Constant(_) => r##"shape=ellipse, style=filled, fillcolor="#e9ecef""##,
        IrOp::Permute(_) | IrOp::Reshape | IrOp::Expand | IrOp::Narrow { .. } => {
            "shape=box, style=dashed"
        }
        IrOp::Size { .. } => "shape=ellipse, style=dashed",
        IrOp::Op(_) => "shape=box",
        IrOp::Composite(_) => "shape=box, peripheries=2",
    };
    format!("n{i} [label={}, {style}];", quoted(&label))
}

impl Graph {
    /// The graph in Graphviz's DOT language (render with `dot -Tsvg`).
    ///
    /// ```
    /// # use rtx::ir::Builder;
    /// # use rtx::op::UnaryOp;
    /// # use rtx::shape::Const;
    /// let mut b = Builder::new("M");
    /// let x = b.input::<(Const<3>,), f32>("x");
    /// let y = b.kernel("fused_0", |b| {
    ///     let y = b.unary(x, UnaryOp::Exp);
    ///     b.unary(y, UnaryOp::Log1p)
    /// });
    /// b.output(y);
    /// let dot = b.finish().to_dot();
    /// assert!(dot.starts_with("digraph \"M\" {"));
    /// assert!(dot.contains("subgraph \"cluster_fused_0\" {"));
    /// assert!(dot.contains("n1 -> n2;"));
    /// ```
    pub fn to_dot(&self) -> String {
        let mut s = String::new();
        // `write!` to a `String` cannot fail.
        let _ = writeln!(s, "digraph {} {{", quoted(&self.name));
        s.push_str("  rankdir=TB;\n");
        s.push_str("  node [fontname=\"monospace\", fontsize=10];\n");
        let mut kernels: Vec<&str> = Vec::new();
        for n in &self.nodes {
            if let Some(k) = n.kernel.as_deref()
                && !kernels.contains(&k)
            {
                kernels.push(k);
            }
        }
        for (i, n) in self.nodes.iter().enumerate() {
            if n.kernel.is_none() {
                let _ = writeln!(s, "  {}", declaration(i, n));
            }
        }
        for k in kernels {
            let _ = writeln!(s, "  subgraph {} {{", quoted(&format!("cluster_{k}")));
            let _ = writeln!(s, "    label={};", quoted(&format!("kernel {k}")));
            s.push_str("    style=\"dashed,rounded\";\n    color=\"#6c757d\";\n");
            for (i, n) in self.nodes.iter().enumerate() {
                if n.kernel.as_deref() == Some(k) {
                    let _ = writeln!(s, "    {}", declaration(i, n));
                }
            }
            s.push_str("  }\n");
        }
        for (i, n) in self.nodes.iter().enumerate() {
            for j in &n.inputs {
                let _ = writeln!(s, "  n{j} -> n{i};");
            }
        }
        for (k, o) in self.outputs.iter().enumerate() {
            let _ = writeln!(s, "  out{k} [label=\"output {k}\", shape=plaintext];");
            let _ = writeln!(s, "  n{o} -> out{k};");
        }
        s.push_str("}\n");
        s
    }
}
