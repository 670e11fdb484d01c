//! Emits CUDA C++ for a kernel body from the IR. Rust's block expressions, `if` values and
//! shadowing have no C++ twin, so the writer hoists them: an `if` with statements becomes a
//! temporary assigned in each branch, and every shadowing `let` gets a fresh C++ name.
//!
//! Invariant: the text needs only the prelude (`prelude.cu`, included in every kernel's
//! source) and the template parameters `S` (storage type) and `A` (compute type) in scope.

use super::ir::*;
use std::collections::{HashMap, HashSet};

/// The prelude every generated source starts with.
pub const PRELUDE: &str = include_str!("prelude.cu");

/// C++ keywords and names the generated code uses, which a Rust name must not take.
const RESERVED: &[&str] = &[
    "A",
    "S",
    "alignas",
    "alignof",
    "asm",
    "auto",
    "bool",
    "case",
    "catch",
    "char",
    "class",
    "const",
    "constexpr",
    "default",
    "delete",
    "do",
    "double",
    "explicit",
    "export",
    "extern",
    "float",
    "friend",
    "goto",
    "inline",
    "int",
    "long",
    "namespace",
    "new",
    "operator",
    "private",
    "protected",
    "public",
    "register",
    "short",
    "signed",
    "sizeof",
    "static",
    "switch",
    "template",
    "this",
    "throw",
    "try",
    "typedef",
    "typeid",
    "typename",
    "union",
    "unsigned",
    "using",
    "virtual",
    "void",
    "volatile",
    "threadIdx",
    "blockIdx",
    "blockDim",
    "gridDim",
    "warpSize",
    "and",
    "or",
    "not",
    "xor",
    "bitand",
    "bitor",
    "compl",
    "noexcept",
    "nullptr",
    "mutable",
    "decltype",
    "char16_t",
    "char32_t",
    "wchar_t",
    "static_assert",
    "thread_local",
    "const_cast",
    "dynamic_cast",
    "reinterpret_cast",
    "static_cast",
    "struct",
    "enum",
    "if",
    "else",
    "for",
    "while",
    "return",
    "break",
    "continue",
    "true",
    "false",
];

pub fn cty(ty: Ty) -> &'static str {
    match ty {
        Ty::Elem => "A",
        Ty::Usize => "unsigned long long",
        Ty::I32 => "int",
        Ty::U32 => "unsigned int",
        Ty::I64 => "long long",
        Ty::Bool => "bool",
        Ty::Unit => "void",
    }
}

/// Writes C++ statements with indentation and maps Rust names to unique C++ names.
pub struct Writer {
    pub out: String,
    indent: usize,
    tmp: usize,
    scopes: Vec<HashMap<String, String>>,
    used: HashSet<String>,
}

impl Writer {
    /// A writer whose text starts at `indent` levels.
    pub fn new(indent: usize) -> Self {
        Writer {
            out: String::new(),
            indent,
            tmp: 0,
            scopes: vec![HashMap::new()],
            used: HashSet::new(),
        }
    }

    /// Declares a Rust name (a parameter, a `let`, a loop variable) and returns its C++ name.
    pub fn declare(&mut self, name: &str) -> String {
        // Generated Rust names (`__rtx_d_x`) drop their underscores, as C++ reserves `__`;
        // the uniqueness loop below keeps them apart from any user name.
        let base = match name.strip_prefix("__rtx_d_") {
            Some(rest) => format!("rtx_d_{rest}"),
            None if RESERVED.contains(&name) || name.starts_with("rtx_") => format!("{name}_"),
            None => name.to_string(),
        };
        let mut cname = base.clone();
        let mut k = 1;
        while self.used.contains(&cname) {
            cname = format!("{base}_{k}");
            k += 1;
        }
        self.used.insert(cname.clone());
        if let Some(s) = self.scopes.last_mut() {
            s.insert(name.to_string(), cname.clone());
        }
        cname
    }

    /// The C++ name of a Rust name in scope.
    pub fn name(&self, name: &str) -> String {
        self.scopes
            .iter()
            .rev()
            .find_map(|s| s.get(name).cloned())
            .unwrap_or_else(|| name.to_string())
    }

    fn fresh(&mut self) -> String {
        loop {
            let t = format!("rtx_t{}", self.tmp);
            self.tmp += 1;
            if !self.used.contains(&t) {
                self.used.insert(t.clone());
                return t;
            }
        }
    }

    pub fn line(&mut self, s: &str) {
        for _ in 0..self.indent {
            self.out.push_str("  ");
        }
        self.out.push_str(s);
        self.out.push('\n');
    }

    /// Runs `f` one level deeper in a new scope, returning what it wrote separately.
    fn capture<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> (String, R) {
        let saved = std::mem::take(&mut self.out);
        self.indent += 1;
        self.scopes.push(HashMap::new());
        let r = f(self);
        self.scopes.pop();
        self.indent -= 1;
        let inner = std::mem::replace(&mut self.out, saved);
        (inner, r)
    }

    /// Emits a block's statements in the current scope and returns its tail value, if any.
    pub fn block_body(&mut self, b: &Block) -> Option<String> {
        for s in &b.stmts {
            self.stmt(s);
        }
        b.tail.as_ref().map(|t| self.expr(t))
    }

    fn braced(&mut self, head: &str, b: &Block) {
        let (inner, tail) = self.capture(|w| w.block_body(b));
        self.line(&format!("{head}{{"));
        self.out.push_str(&inner);
        if let Some(t) = tail.filter(|t| !t.is_empty()) {
            self.indent += 1;
            self.line(&format!("{t};"));
            self.indent -= 1;
        }
        self.line("}");
    }

    fn load(&self, buf: &str, kind: Buf, elem: Ty, index: &str) -> String {
        if kind.converts(elem) {
            format!("rtx_elem<S>::widen({buf}[{index}])")
        } else {
            format!("{buf}[{index}]")
        }
    }

    pub fn stmt(&mut self, s: &Stmt) {
        match s {
            Stmt::Let { name, ty, init, .. } => {
                let init = init.as_ref().map(|e| self.expr(e));
                let c = self.declare(&name.to_string());
                match init {
                    Some(v) => self.line(&format!("{} {c} = {v};", cty(*ty))),
                    None => self.line(&format!("{} {c};", cty(*ty))),
                }
            }
            Stmt::Assign { place, op, value } => {
                let v = self.expr(value);
                match place {
                    Place::Var(name) => {
                        let c = self.name(&name.to_string());
                        match op {
                            None => self.line(&format!("{c} = {v};")),
                            Some(op) => self.line(&format!("{c} {}= {v};", op.symbol())),
                        }
                    }
                    Place::Index(buf, kind, elem, index) => {
                        let b = self.name(&buf.to_string());
                        let i = self.expr(index);
                        if kind.converts(*elem) {
                            let t = self.fresh();
                            self.line(&format!("const unsigned long long {t} = {i};"));
                            let new = match op {
                                None => v,
                                Some(op) => format!(
                                    "({} {} {v})",
                                    self.load(&b, *kind, *elem, &t),
                                    op.symbol()
                                ),
                            };
                            self.line(&format!("{b}[{t}] = rtx_elem<S>::narrow({new});"));
                        } else {
                            let op = op.map_or("", |o| o.symbol());
                            self.line(&format!("{b}[{i}] {op}= {v};"));
                        }
                    }
                }
            }
            Stmt::AtomicAdd {
                buf, index, value, ..
            } => {
                let b = self.name(&buf.to_string());
                let i = self.expr(index);
                let v = self.expr(value);
                self.line(&format!("rtx_atomic_add(&{b}[{i}], {v});"));
            }
            Stmt::Expr(e) => {
                let v = self.expr(e);
                if !v.is_empty() {
                    self.line(&format!("{v};"));
                }
            }
            Stmt::For {
                var,
                ty,
                start,
                end,
                step,
                body,
            } => {
                let s = self.expr(start);
                let e = self.expr(end);
                let st = step.as_ref().map(|x| self.expr(x));
                let t_end = self.fresh();
                self.line("{");
                self.indent += 1;
                self.line(&format!("const {} {t_end} = {e};", cty(*ty)));
                let inc = match st {
                    Some(st) => {
                        let t_step = self.fresh();
                        self.line(&format!("const unsigned long long {t_step} = {st};"));
                        format!("+= {t_step}")
                    }
                    None => "+= 1".to_string(),
                };
                self.scopes.push(HashMap::new());
                let c = self.declare(&var.to_string());
                let head = format!("for ({} {c} = {s}; {c} < {t_end}; {c} {inc}) ", cty(*ty));
                self.braced(&head, body);
                self.scopes.pop();
                self.indent -= 1;
                self.line("}");
            }
            Stmt::While { cond, body } => {
                let (pre, c) = self.capture(|w| w.expr(cond));
                if pre.is_empty() {
                    self.braced(&format!("while ({c}) "), body);
                } else {
                    self.line("while (true) {");
                    self.out.push_str(&pre);
                    self.indent += 1;
                    self.line(&format!("if (!({c})) break;"));
                    self.braced("", body);
                    self.indent -= 1;
                    self.line("}");
                }
            }
            Stmt::Loop(body) => self.braced("while (true) ", body),
            Stmt::Break => self.line("break;"),
            Stmt::Continue => self.line("continue;"),
            Stmt::Return => self.line("return;"),
        }
    }

    /// Lowers an expression, writing any statements it needs first; returns its C++ text
    /// (empty for a `()` expression that was written as statements).
    pub fn expr(&mut self, e: &Expr) -> String {
        match &e.kind {
            ExprKind::Float(v) => format!("A({v:?})"),
            ExprKind::Int(v, _) => match e.ty {
                Ty::I32 => format!("{v}"),
                Ty::U32 => format!("{v}u"),
                Ty::I64 => format!("{v}ll"),
                _ => format!("{v}ull"),
            },
            ExprKind::Bool(b) => format!("{b}"),
            ExprKind::Const(FConst::Inf) => "rtx_inf<A>()".into(),
            ExprKind::Const(FConst::NegInf) => "(-rtx_inf<A>())".into(),
            ExprKind::Const(FConst::Nan) => "rtx_nan<A>()".into(),
            ExprKind::Var(id) => self.name(&id.to_string()),
            ExprKind::Unary(op, a) => {
                let a = self.expr(a);
                match op {
                    UnOp::Neg => format!("(-{a})"),
                    UnOp::Not if e.ty == Ty::Bool => format!("(!{a})"),
                    UnOp::Not => format!("(~{a})"),
                }
            }
            ExprKind::Binary(op @ (BinOp::And | BinOp::Or), a, b) => {
                let a = self.expr(a);
                let (pre, b) = self.capture(|w| w.expr(b));
                if pre.is_empty() {
                    return format!("({a} {} {b})", op.symbol());
                }
                let t = self.fresh();
                self.line(&format!("bool {t} = {a};"));
                let test = if *op == BinOp::And {
                    t.clone()
                } else {
                    format!("!{t}")
                };
                self.line(&format!("if ({test}) {{"));
                self.out.push_str(&pre);
                self.indent += 1;
                self.line(&format!("{t} = {b};"));
                self.indent -= 1;
                self.line("}");
                t
            }
            ExprKind::Binary(op, a, b) => {
                let a = self.expr(a);
                let b = self.expr(b);
                format!("({a} {} {b})", op.symbol())
            }
            ExprKind::Math(f, args) => {
                let a: Vec<String> = args.iter().map(|x| self.expr(x)).collect();
                match f {
                    MathFn::Recip => format!("(A(1.0) / {})", a[0]),
                    _ => format!("rtx_{}({})", f.name(), a.join(", ")),
                }
            }
            ExprKind::Intrinsic(intr, args) => {
                let a: Vec<String> = args.iter().map(|x| self.expr(x)).collect();
                match intr {
                    Intrinsic::Index(_, cuda) => format!("((unsigned long long){cuda})"),
                    Intrinsic::LaneId => "((unsigned long long)(rtx_linear_tid() & 31u))".into(),
                    Intrinsic::SyncThreads => "__syncthreads()".into(),
                    Intrinsic::ShuffleDown => format!("rtx_shfl_down({}, {})", a[0], a[1]),
                    Intrinsic::ShuffleXor => format!("rtx_shfl_xor({}, {})", a[0], a[1]),
                }
            }
            ExprKind::Load(buf, kind, elem, index) => {
                let b = self.name(&buf.to_string());
                let i = self.expr(index);
                self.load(&b, *kind, *elem, &i)
            }
            ExprKind::Cast(inner) => {
                let x = self.expr(inner);
                if inner.ty == e.ty {
                    x
                } else {
                    format!("(({})({x}))", cty(e.ty))
                }
            }
            ExprKind::If(c, a, b) => {
                let c = self.expr(c);
                let (pa, ta) = self.capture(|w| w.block_body(a));
                let (pb, tb) = self.capture(|w| w.block_body(b));
                if e.ty != Ty::Unit
                    && pa.is_empty()
                    && pb.is_empty()
                    && let (Some(ta), Some(tb)) = (&ta, &tb)
                {
                    return format!("({c} ? {ta} : {tb})");
                }
                let t = (e.ty != Ty::Unit).then(|| self.fresh());
                if let Some(t) = &t {
                    self.line(&format!("{} {t};", cty(e.ty)));
                }
                self.line(&format!("if ({c}) {{"));
                self.branch(pa, ta, t.as_deref());
                if !(pb.is_empty() && tb.is_none()) {
                    self.line("} else {");
                    self.branch(pb, tb, t.as_deref());
                }
                self.line("}");
                t.unwrap_or_default()
            }
            ExprKind::Block(b) => {
                let (pre, tail) = self.capture(|w| w.block_body(b));
                if pre.is_empty() {
                    return tail.unwrap_or_default();
                }
                let t = (e.ty != Ty::Unit).then(|| self.fresh());
                if let Some(t) = &t {
                    self.line(&format!("{} {t};", cty(e.ty)));
                }
                self.line("{");
                self.branch(pre, tail, t.as_deref());
                self.line("}");
                t.unwrap_or_default()
            }
        }
    }

    fn branch(&mut self, pre: String, tail: Option<String>, target: Option<&str>) {
        self.out.push_str(&pre);
        self.indent += 1;
        match (tail, target) {
            (Some(v), Some(t)) => self.line(&format!("{t} = {v};")),
            (Some(v), None) if !v.is_empty() => self.line(&format!("{v};")),
            _ => {}
        }
        self.indent -= 1;
    }
}
