//! The serialized form of a [`Graph`] (described field by field in the `ir` module docs):
//! writing it, one node per line with a fixed key order so files diff well, and reading it
//! back with every field checked.
//!
//! Invariant: `Graph::from_json(&g.to_json()) == Ok(g)` for every graph that passes
//! [`Graph::validate`]; the reader accepts nothing the writer could not have written.

use super::{
    Attrs, Composite, ConvAttrs, Dim, Graph, IrOp, Node, PoolAttrs, dtype_from_name, dtype_name,
};
use crate::error::{Error, Result};
use crate::io::atomic;
use rtx_kernels::op::{BinaryOp, CmpOp, Op, PoolOp, RandomOp, ReduceOp, ScatterOp, UnaryOp};
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use std::path::Path;

/// The `"format"` field of every serialized graph.
pub const FORMAT: &str = "rtx-ir";

/// The newest format version this rtx writes and reads (it reads every older one too).
pub const VERSION: u64 = 3;

/// A node as the file spells it; field order here is the key order in the file.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeRepr {
    op: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    value: Option<Json>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    perm: Option<Vec<usize>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    axis: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    start: Option<usize>,
    #[serde(default, skip_serializing_if = "is_false")]
    keepdim: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    conv: Option<ConvAttrs>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pool: Option<PoolAttrs>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    eps: Option<Json>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    heads: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ignore_index: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    label_smoothing: Option<Json>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    inputs: Vec<usize>,
    dtype: String,
    shape: Vec<Json>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    scope: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kernel: Option<String>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Graph {
    /// The graph in the serialized form (see the module docs): JSON, one node per line.
    ///
    /// ```
    /// # use rtx::ir::Builder;
    /// # use rtx::op::UnaryOp;
    /// # use rtx::shape::{Const, Dyn};
    /// let mut b = Builder::new("M");
    /// let x = b.input::<(Dyn<'B'>, Const<3>), f32>("x");
    /// let y = b.unary(x, UnaryOp::Exp);
    /// b.output(y);
    /// let json = b.finish().to_json();
    /// assert!(json.contains(r#"{"op": "exp", "inputs": [0], "dtype": "f32", "shape": ["B", 3]}"#));
    /// ```
    pub fn to_json(&self) -> String {
        let mut s = String::new();
        s.push_str("{\n");
        s.push_str(&format!("  \"format\": {},\n", spaced(&FORMAT)));
        s.push_str(&format!("  \"version\": {VERSION},\n"));
        s.push_str(&format!("  \"name\": {},\n", spaced(&self.name)));
        s.push_str("  \"nodes\": [\n");
        for (i, n) in self.nodes.iter().enumerate() {
            let comma = if i + 1 < self.nodes.len() { "," } else { "" };
            s.push_str(&format!("    {}{comma}\n", spaced(&repr(n))));
        }
        s.push_str("  ],\n");
        s.push_str(&format!("  \"outputs\": {}\n", spaced(&self.outputs)));
        s.push_str("}\n");
        s
    }

    /// Reads a graph from its serialized form, checking everything [`Graph::validate`] does.
    ///
    /// ```
    /// use rtx::ir::Graph;
    /// let text = r#"{"format": "rtx-ir", "version": 9, "name": "M", "nodes": [], "outputs": []}"#;
    /// let err = Graph::from_json(text).unwrap_err().to_string();
    /// assert_eq!(err, "IR JSON text: version 9 is newer than this rtx reads (versions 1 to 3); \
    ///                  a newer rtx wrote it");
    /// ```
    pub fn from_json(text: &str) -> Result<Graph> {
        parse(text).map_err(|msg| Error::Ir {
            origin: "IR JSON text".into(),
            msg,
        })
    }

    /// Writes the serialized form to `path`, atomically: the file holds either its previous
    /// content or the whole graph.
    ///
    /// ```
    /// # use rtx::ir::{Builder, Graph};
    /// # use rtx::shape::Const;
    /// let mut b = Builder::new("M");
    /// let x = b.input::<(Const<3>,), f32>("x");
    /// b.output(x);
    /// let g = b.finish();
    /// let path = std::env::temp_dir().join(format!("rtx-ir-doc-{}.json", std::process::id()));
    /// g.save(&path)?;
    /// assert_eq!(Graph::load(&path)?, g);
    /// # std::fs::remove_file(&path).unwrap();
    /// # Ok::<(), rtx::Error>(())
    /// ```
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        atomic::write(path.as_ref(), self.to_json().as_bytes(), None)
    }

    /// Reads a graph saved by [`Graph::save`]; an error names the file, the node and what is
    /// wrong.
    pub fn load(path: impl AsRef<Path>) -> Result<Graph> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| atomic::io_error(path, "cannot read the IR graph", &e))?;
        parse(&text).map_err(|msg| Error::Ir {
            origin: format!("IR file {}", path.display()),
            msg,
        })
    }
}

/// JSON with a space after each `:` and `,`, on one line.
fn spaced<T: Serialize + ?Sized>(v: &T) -> String {
    struct Spaced;
    impl serde_json::ser::Formatter for Spaced {
        fn begin_array_value<W: ?Sized + std::io::Write>(
            &mut self,
            w: &mut W,
            first: bool,
        ) -> std::io::Result<()> {
            if first { Ok(()) } else { w.write_all(b", ") }
        }
        fn begin_object_key<W: ?Sized + std::io::Write>(
            &mut self,
            w: &mut W,
            first: bool,
        ) -> std::io::Result<()> {
            if first { Ok(()) } else { w.write_all(b", ") }
        }
        fn begin_object_value<W: ?Sized + std::io::Write>(
            &mut self,
            w: &mut W,
        ) -> std::io::Result<()> {
            w.write_all(b": ")
        }
    }
    let mut buf = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, Spaced);
    if let Err(e) = v.serialize(&mut ser) {
        // Strings, integers, finite numbers and plain structs: nothing here can fail.
        unreachable!("serializing IR JSON cannot fail: {e}");
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// A constant as JSON: a number, or a string for the values JSON numbers cannot spell.
fn const_json(v: f64) -> Json {
    match serde_json::Number::from_f64(v) {
        Some(n) => Json::Number(n),
        None if v.is_nan() => Json::String("nan".into()),
        None if v > 0.0 => Json::String("inf".into()),
        None => Json::String("-inf".into()),
    }
}

fn repr(n: &Node) -> NodeRepr {
    let mut r = NodeRepr {
        op: n.op.name().into(),
        name: None,
        value: None,
        perm: None,
        axis: n.attrs.axis,
        start: None,
        keepdim: n.attrs.keepdim,
        conv: n.attrs.conv,
        pool: n.attrs.pool,
        eps: None,
        heads: None,
        ignore_index: None,
        label_smoothing: None,
        inputs: n.inputs.clone(),
        dtype: dtype_name(n.dtype).into(),
        shape: n
            .shape
            .iter()
            .map(|d| match d {
                Dim::Static(k) => Json::from(*k),
                Dim::Sym(s) => Json::from(s.as_str()),
            })
            .collect(),
        scope: n.scope.clone(),
        kernel: n.kernel.clone(),
    };
    match &n.op {
        IrOp::Input(name) | IrOp::Param(name) => r.name = Some(name.clone()),
        IrOp::Constant(v) => r.value = Some(const_json(*v)),
        IrOp::Permute(p) => r.perm = Some(p.clone()),
        IrOp::Narrow { axis, start } => (r.axis, r.start) = (Some(*axis), Some(*start)),
        IrOp::Size { axis } => r.axis = Some(*axis),
        IrOp::Composite(c) => match *c {
            Composite::Softmax { axis } | Composite::LogSoftmax { axis } => r.axis = Some(axis),
            Composite::Mean { axis, keepdim } => (r.axis, r.keepdim) = (Some(axis), keepdim),
            Composite::LayerNorm { eps } | Composite::RmsNorm { eps } => {
                r.eps = Some(const_json(eps))
            }
            Composite::CausalAttention { heads } => r.heads = Some(heads),
            Composite::CrossEntropy {
                ignore_index,
                label_smoothing,
            } => {
                r.ignore_index = ignore_index;
                r.label_smoothing = Some(const_json(label_smoothing));
            }
            Composite::Linear => {}
        },
        IrOp::Op(_) | IrOp::Reshape | IrOp::Expand => {}
    }
    r
}

/// Every primitive op, to read [`Op::name`]'s names back.
pub(super) fn all_ops() -> Vec<Op> {
    let mut ops: Vec<Op> = UnaryOp::ALL.into_iter().map(Op::Unary).collect();
    ops.extend(BinaryOp::ALL.into_iter().map(Op::Binary));
    use CmpOp::*;
    ops.extend([Eq, Ne, Lt, Le, Gt, Ge].map(Op::Cmp));
    ops.push(Op::Where);
    use ReduceOp::*;
    ops.extend([Sum, Prod, Max, Min, ArgMax, ArgMin].map(Op::Reduce));
    ops.extend([Op::Cast, Op::Copy, Op::MatMul, Op::Conv]);
    ops.extend([PoolOp::Max, PoolOp::Avg].map(Op::Pool));
    ops.extend([Op::IndexSelect, Op::Gather]);
    ops.extend([ScatterOp::Set, ScatterOp::Add].map(Op::Scatter));
    ops.push(Op::Concat);
    use RandomOp::*;
    ops.extend([Uniform, Normal, Bernoulli].map(Op::Random));
    ops
}

/// Fails to compile when the op enum gains a variant that [`all_ops`] does not list (the
/// unary and binary ops are listed through their `ALL` arrays).
const _: fn(Op) = |op| match op {
    Op::Unary(_) | Op::Binary(_) | Op::Where | Op::Cast | Op::Copy | Op::MatMul => {}
    Op::Cmp(CmpOp::Eq | CmpOp::Ne | CmpOp::Lt | CmpOp::Le | CmpOp::Gt | CmpOp::Ge) => {}
    Op::Reduce(
        ReduceOp::Sum
        | ReduceOp::Prod
        | ReduceOp::Max
        | ReduceOp::Min
        | ReduceOp::ArgMax
        | ReduceOp::ArgMin,
    ) => {}
    Op::Conv | Op::IndexSelect | Op::Gather | Op::Concat => {}
    Op::Pool(PoolOp::Max | PoolOp::Avg) => {}
    Op::Scatter(ScatterOp::Set | ScatterOp::Add) => {}
    Op::Random(RandomOp::Uniform | RandomOp::Normal | RandomOp::Bernoulli) => {}
};

/// The names of the ops that are neither primitives nor composites.
const IR_ONLY: [&str; 8] = [
    "input", "param", "constant", "permute", "reshape", "expand", "narrow", "size",
];

/// The primitive op named `name`.
pub(super) fn op_from_name(name: &str) -> Option<Op> {
    all_ops().into_iter().find(|op| op.name() == name)
}

/// Reads the serialized form; an error is a message naming the node and the problem.
fn parse(text: &str) -> std::result::Result<Graph, String> {
    let top: Json = serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
    let Json::Object(top) = top else {
        return Err("the top level is not a JSON object".into());
    };
    match top.get("format") {
        Some(Json::String(f)) if f == FORMAT => {}
        Some(other) => return Err(format!("format is {other}, not \"{FORMAT}\"")),
        None => return Err(format!("no \"format\" field: not an {FORMAT} graph")),
    }
    let version = match top.get("version") {
        Some(v) => v
            .as_u64()
            .ok_or_else(|| format!("version {v} is not a positive integer"))?,
        None => return Err("no \"version\" field".into()),
    };
    if version > VERSION {
        return Err(format!(
            "version {version} is newer than this rtx reads (versions 1 to {VERSION}); a newer \
             rtx wrote it"
        ));
    }
    if version == 0 {
        return Err("version 0 does not exist; versions start at 1".into());
    }
    if let Some(k) = top
        .keys()
        .find(|k| !["format", "version", "name", "nodes", "outputs"].contains(&k.as_str()))
    {
        return Err(format!(
            "unknown field \"{k}\" (a graph has format, version, name, nodes and outputs)"
        ));
    }
    let name = match top.get("name") {
        Some(Json::String(s)) => s.clone(),
        _ => return Err("\"name\" is missing or not a string".into()),
    };
    let Some(Json::Array(nodes)) = top.get("nodes") else {
        return Err("\"nodes\" is missing or not an array".into());
    };
    let nodes = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| node(i, n, version))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let outputs = match top.get("outputs") {
        Some(o) => Vec::<usize>::deserialize(o)
            .map_err(|e| format!("\"outputs\" is not a list of node indices: {e}"))?,
        None => return Err("no \"outputs\" field".into()),
    };
    let graph = Graph {
        name,
        nodes,
        outputs,
    };
    graph.check()?;
    Ok(graph)
}

/// Node `i` from its JSON object.
fn node(i: usize, json: &Json, version: u64) -> std::result::Result<Node, String> {
    let r = NodeRepr::deserialize(json).map_err(|e| format!("node {i}: {e}"))?;
    let at = format!("node {i} ({})", r.op);
    let dtype = dtype_from_name(&r.dtype).ok_or_else(|| {
        format!(
            "{at}: unknown dtype \"{}\" (element types are f32, f64, f16, bf16, i32, i64, u8 \
             and bool)",
            r.dtype
        )
    })?;
    let shape = r
        .shape
        .iter()
        .enumerate()
        .map(|(k, d)| {
            let size = d.as_u64().and_then(|n| usize::try_from(n).ok());
            match (size, d) {
                (Some(n), _) => Ok(Dim::Static(n)),
                (None, Json::String(s)) if !s.is_empty() => Ok(Dim::Sym(s.clone())),
                _ => Err(format!(
                    "{at}: shape entry {k} is {d}: a dim is a size (an integer from 0) or a \
                     run-time dim's name (a non-empty string)"
                )),
            }
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    // Which optional fields the op takes; the attributes of primitive ops are checked op by
    // op when the whole graph is validated.
    let given: Vec<&str> = [
        ("name", r.name.is_some()),
        ("value", r.value.is_some()),
        ("perm", r.perm.is_some()),
        ("axis", r.axis.is_some()),
        ("start", r.start.is_some()),
        ("keepdim", r.keepdim),
        ("conv", r.conv.is_some()),
        ("pool", r.pool.is_some()),
        ("eps", r.eps.is_some()),
        ("heads", r.heads.is_some()),
        ("ignore_index", r.ignore_index.is_some()),
        ("label_smoothing", r.label_smoothing.is_some()),
    ]
    .into_iter()
    .filter_map(|(f, present)| present.then_some(f))
    .collect();
    let takes: &[&str] = match r.op.as_str() {
        "input" | "param" => &["name"],
        "constant" => &["value"],
        "permute" => &["perm"],
        "reshape" | "expand" => &[],
        "narrow" => &["axis", "start"],
        "size" => &["axis"],
        "softmax" | "log_softmax" => &["axis"],
        "mean" => &["axis", "keepdim"],
        "layer_norm" | "rms_norm" => &["eps"],
        "linear" => &[],
        "causal_attention" => &["heads"],
        "cross_entropy" => &["ignore_index", "label_smoothing"],
        _ => &["axis", "keepdim", "conv", "pool"],
    };
    if version < 3 && r.op == "cross_entropy" {
        return Err(format!(
            "{at}: cross_entropy came with version 3; this file says version {version}"
        ));
    }
    if version < 2 && Composite::NAMES.contains(&r.op.as_str()) {
        return Err(format!(
            "{at}: composite ops such as {} came with version 2; this file says version \
             {version}",
            r.op
        ));
    }
    if let Some(f) = given.iter().find(|f| !takes.contains(f)) {
        return Err(format!(
            "{at}: the field \"{f}\" does not apply to {}",
            r.op
        ));
    }
    let need = |field: &str| format!("{at}: needs the field \"{field}\"");
    let op = match r.op.as_str() {
        "input" => IrOp::Input(r.name.clone().ok_or_else(|| need("name"))?),
        "param" => IrOp::Param(r.name.clone().ok_or_else(|| need("name"))?),
        "constant" => IrOp::Constant(constant(
            &at,
            r.value.as_ref().ok_or_else(|| need("value"))?,
        )?),
        "permute" => IrOp::Permute(r.perm.clone().ok_or_else(|| need("perm"))?),
        "reshape" => IrOp::Reshape,
        "expand" => IrOp::Expand,
        "narrow" => IrOp::Narrow {
            axis: r.axis.ok_or_else(|| need("axis"))?,
            start: r.start.ok_or_else(|| need("start"))?,
        },
        "size" => IrOp::Size {
            axis: r.axis.ok_or_else(|| need("axis"))?,
        },
        "softmax" => IrOp::Composite(Composite::Softmax {
            axis: r.axis.ok_or_else(|| need("axis"))?,
        }),
        "log_softmax" => IrOp::Composite(Composite::LogSoftmax {
            axis: r.axis.ok_or_else(|| need("axis"))?,
        }),
        "mean" => IrOp::Composite(Composite::Mean {
            axis: r.axis.ok_or_else(|| need("axis"))?,
            keepdim: r.keepdim,
        }),
        "layer_norm" => IrOp::Composite(Composite::LayerNorm {
            eps: constant(&at, r.eps.as_ref().ok_or_else(|| need("eps"))?)?,
        }),
        "rms_norm" => IrOp::Composite(Composite::RmsNorm {
            eps: constant(&at, r.eps.as_ref().ok_or_else(|| need("eps"))?)?,
        }),
        "linear" => IrOp::Composite(Composite::Linear),
        "causal_attention" => IrOp::Composite(Composite::CausalAttention {
            heads: r.heads.ok_or_else(|| need("heads"))?,
        }),
        "cross_entropy" => IrOp::Composite(Composite::CrossEntropy {
            ignore_index: r.ignore_index,
            label_smoothing: constant(
                &at,
                r.label_smoothing
                    .as_ref()
                    .ok_or_else(|| need("label_smoothing"))?,
            )?,
        }),
        other => IrOp::Op(op_from_name(other).ok_or_else(|| {
            format!(
                "{at}: unknown op \"{other}\" (not a primitive op of this rtx, nor one of {}, {})",
                IR_ONLY.join(", "),
                Composite::NAMES.join(", ")
            )
        })?),
    };
    let attrs = match op {
        IrOp::Op(_) => Attrs {
            axis: r.axis,
            keepdim: r.keepdim,
            conv: r.conv,
            pool: r.pool,
        },
        _ => Attrs::default(),
    };
    Ok(Node {
        op,
        attrs,
        inputs: r.inputs,
        dtype,
        shape,
        scope: r.scope,
        kernel: r.kernel,
    })
}

/// A constant's value: a number, or `"inf"`, `"-inf"` or `"nan"`.
fn constant(at: &str, v: &Json) -> std::result::Result<f64, String> {
    match v {
        Json::Number(n) => n.as_f64(),
        Json::String(s) if s == "inf" => Some(f64::INFINITY),
        Json::String(s) if s == "-inf" => Some(f64::NEG_INFINITY),
        Json::String(s) if s == "nan" => Some(f64::NAN),
        _ => None,
    }
    .ok_or_else(|| format!("{at}: value {v} is not a number, \"inf\", \"-inf\" or \"nan\""))
}
