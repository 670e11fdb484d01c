//! Emits CUDA C++ for a kernel body from the IR. Rust's block expressions, `if` values and
//! shadowing have no C++ twin, so the writer hoists them: an `if` with statements becomes a
//! temporary assigned in each branch, and every shadowing `let` gets a fresh C++ name.
//!
//! Invariant: the text needs only the prelude (`prelude.cu`, included in every kernel's
//! source; `prelude_num.cu` after it when [`Writer::uses_num`] is set) and the template
//! parameters `S` (storage type) and `A` (compute type) in scope.

use super::ir::*;
use std::collections::{HashMap, HashSet};

/// The prelude every generated source starts with.
pub const PRELUDE: &str = include_str!("prelude.cu");

/// The second prelude, for integer element types, exact conversions and wrapping
/// arithmetic: included by kernels over `T: Num` or `T: Element`, cast kernels, and kernels
/// that store `f64` or `i64` values into `T` buffers.
pub const PRELUDE_NUM: &str = include_str!("prelude_num.cu");

/// The tensor-core prelude: the inline PTX of the tensor-core intrinsics, for kernels that use
/// them ([`Writer::uses_mma`]).
pub const PRELUDE_MMA: &str = include_str!("prelude_mma.cu");

/// The preludes a source needs, with a trailing newline.
pub fn preludes(num: bool) -> String {
    let mut s = String::from(PRELUDE);
    if num {
        s.push_str(PRELUDE_NUM);
    }
    s
}

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
        Ty::F64 => "double",
        Ty::Usize | Ty::U64 => "unsigned long long",
        Ty::I32 => "int",
        Ty::U32 => "unsigned int",
        Ty::I64 => "long long",
        Ty::Bool => "bool",
        Ty::Shape => "rtx_shape",
        Ty::Strides => "rtx_strides",
        Ty::TensorMap => "rtx_tensor_map",
        Ty::Unit => "void",
    }
}

/// The unsigned type of the same width as a signed integer type, for wrapping arithmetic.
fn unsigned_of(ty: Ty) -> Option<&'static str> {
    match ty {
        Ty::I32 => Some("unsigned int"),
        Ty::I64 => Some("unsigned long long"),
        _ => None,
    }
}

/// The value of an `f64` expression made only of literals and `+ - * /` (and negation),
/// computed with one rounding per operation as the device computes it.
fn fold_f64(e: &Expr) -> Option<f64> {
    match &e.kind {
        ExprKind::Float(v) => Some(*v),
        ExprKind::Unary(UnOp::Neg, a) => fold_f64(a).map(|v| -v),
        ExprKind::Binary(op, a, b) => {
            let (a, b) = (fold_f64(a)?, fold_f64(b)?);
            let v = match op {
                BinOp::Add => a + b,
                BinOp::Sub => a - b,
                BinOp::Mul => a * b,
                BinOp::Div => a / b,
                _ => return None,
            };
            v.is_finite().then_some(v)
        }
        _ => None,
    }
}

/// The most iterations of a constant-range loop that the CUDA code asks to unroll.
const MAX_UNROLL: u64 = 256;

/// Whether a range's bounds are integer literals (or kernel constants, which the parser
/// turns into literals) at most [`MAX_UNROLL`] apart.
fn const_range(start: &Expr, end: &Expr) -> bool {
    match (&start.kind, &end.kind) {
        (ExprKind::Int(s, _), ExprKind::Int(e, _)) => e.saturating_sub(*s) <= MAX_UNROLL,
        _ => false,
    }
}

/// Writes C++ statements with indentation and maps Rust names to unique C++ names.
pub struct Writer {
    pub out: String,
    /// Which element types `A` may be: arithmetic on `T` goes through the wrapping helpers of
    /// `prelude_num.cu` unless they are all floats.
    pub elem: ElemKind,
    /// Whether the text uses `prelude_num.cu`.
    pub uses_num: bool,
    /// Whether the text uses `prelude_mma.cu` (the tensor-core intrinsics).
    pub uses_mma: bool,
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
            elem: ElemKind::Float,
            uses_num: false,
            uses_mma: false,
            indent,
            tmp: 0,
            scopes: vec![HashMap::new()],
            used: HashSet::new(),
        }
    }

    /// A writer for a kernel over `T: <elem>` (its sources include `prelude_num.cu` unless
    /// `elem` is `Float`).
    pub fn for_kernel(indent: usize, elem: ElemKind) -> Self {
        let mut w = Writer::new(indent);
        w.elem = elem;
        w.uses_num = elem != ElemKind::Float;
        w
    }

    /// A binary operator on C++ operands of IR type `ty`: arithmetic on `T` over integer
    /// types goes through the wrapping helpers.
    pub(super) fn bin(&mut self, op: BinOp, ty: Ty, a: &str, b: &str) -> String {
        if ty == Ty::F64 {
            // `f64` arithmetic rounds every operation, never fusing a multiply and an add, so
            // it is bitwise the CPU's (NVRTC fuses by default).
            let f = match op {
                BinOp::Add => Some("__dadd_rn"),
                BinOp::Sub => Some("__dsub_rn"),
                BinOp::Mul => Some("__dmul_rn"),
                BinOp::Div => Some("__ddiv_rn"),
                _ => None,
            };
            if let Some(f) = f {
                return format!("{f}({a}, {b})");
            }
        }
        if ty == Ty::Elem && self.elem != ElemKind::Float {
            let f = match op {
                BinOp::Add => Some("rtx_add"),
                BinOp::Sub => Some("rtx_sub"),
                BinOp::Mul => Some("rtx_mul"),
                BinOp::Div => Some("rtx_div"),
                _ => None,
            };
            if let Some(f) = f {
                self.uses_num = true;
                return format!("{f}({a}, {b})");
            }
        }
        format!("({a} {} {b})", op.symbol())
    }

    /// Whether compound assignments on values of `ty` go through [`Writer::bin`] rather than
    /// C++'s `op=` (`f64`, and `T` when it may be an integer type).
    fn routes(&self, ty: Ty) -> bool {
        ty == Ty::F64 || (ty == Ty::Elem && self.elem != ElemKind::Float)
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

    pub(super) fn fresh(&mut self) -> String {
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

    pub(super) fn load(&self, buf: &str, kind: Buf, elem: Ty, index: &str) -> String {
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
            Stmt::LocalArray {
                name,
                elem,
                len,
                init,
                ..
            } => self.local_array(&name.to_string(), *elem, *len, init),
            Stmt::Assign { place, op, value } => {
                if let Place::TableIndex(table, kind, row, index) = place {
                    self.table_assign(table, *kind, row, index, *op, value);
                    return;
                }
                if let Place::Index(buf, kind, elem, index) = place
                    && let Some(inner) = super::native::direct_store(*kind, *elem, *op, value)
                {
                    // `buf[i] = v as T` of an f64 or i64: converted once, straight to `S`.
                    let v = self.expr(inner);
                    let b = self.name(&buf.to_string());
                    let i = self.expr(index);
                    let f = if inner.ty == Ty::F64 {
                        "rtx_from_f64"
                    } else {
                        "rtx_from_i64"
                    };
                    self.uses_num = true;
                    self.line(&format!("{b}[{i}] = {f}<S>({v});"));
                    return;
                }
                let v = self.expr(value);
                match place {
                    Place::Var(name) => {
                        let c = self.name(&name.to_string());
                        match op {
                            None => self.line(&format!("{c} = {v};")),
                            Some(op) if self.routes(value.ty) => {
                                let new = self.bin(*op, value.ty, &c, &v);
                                self.line(&format!("{c} = {new};"));
                            }
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
                                Some(op) => {
                                    let old = self.load(&b, *kind, *elem, &t);
                                    self.bin(*op, *elem, &old, &v)
                                }
                            };
                            self.line(&format!("{b}[{t}] = rtx_elem<S>::narrow({new});"));
                        } else if let Some(op) = op
                            && self.routes(*elem)
                        {
                            let t = self.fresh();
                            self.line(&format!("const unsigned long long {t} = {i};"));
                            let new = self.bin(*op, *elem, &format!("{b}[{t}]"), &v);
                            self.line(&format!("{b}[{t}] = {new};"));
                        } else {
                            let op = op.map_or("", |o| o.symbol());
                            self.line(&format!("{b}[{i}] {op}= {v};"));
                        }
                    }
                    // Written by `table_assign` above.
                    Place::TableIndex(..) => {}
                }
            }
            Stmt::AtomicAdd {
                buf,
                index,
                value,
                ty,
                old,
                ..
            } => {
                let b = self.name(&buf.to_string());
                let i = self.expr(index);
                let v = self.expr(value);
                match old {
                    None => self.line(&format!("rtx_atomic_add(&{b}[{i}], {v});")),
                    Some(name) => {
                        let n = self.declare(&name.to_string());
                        let t = cty(*ty);
                        self.line(&format!("{t} {n} = rtx_atomic_add(&{b}[{i}], {v});"));
                    }
                }
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
                step: None,
                body,
            } if const_range(start, end) => {
                self.unrolled_for(&var.to_string(), *ty, start, end, body)
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

    /// A per-thread array: a C++ local array of the compute type, filled in an unrolled loop.
    /// Indexes are not checked (the native version's are); when they are constants after
    /// unrolling, the compiler keeps the array in registers.
    fn local_array(&mut self, name: &str, elem: Ty, len: usize, init: &Expr) {
        let v = self.expr(init);
        let t = self.fresh();
        self.line(&format!("const {} {t} = {v};", cty(elem)));
        let c = self.declare(name);
        let i = self.fresh();
        self.line(&format!("{} {c}[{len}];", cty(elem)));
        self.line("#pragma unroll");
        self.line(&format!(
            "for (int {i} = 0; {i} < {len}; ++{i}) {c}[{i}] = {t};"
        ));
    }

    /// `for k in a..b` with literal bounds: unrolled, so that a local array indexed by `k`
    /// is indexed by constants and stays in registers.
    fn unrolled_for(&mut self, var: &str, ty: Ty, start: &Expr, end: &Expr, body: &Block) {
        let (s, e) = (self.expr(start), self.expr(end));
        self.line("#pragma unroll");
        self.scopes.push(HashMap::new());
        let c = self.declare(var);
        let head = format!("for ({} {c} = {s}; {c} < {e}; {c} += 1) ", cty(ty));
        self.braced(&head, body);
        self.scopes.pop();
    }

    /// Lowers an expression, writing any statements it needs first; returns its C++ text
    /// (empty for a `()` expression that was written as statements).
    pub fn expr(&mut self, e: &Expr) -> String {
        match &e.kind {
            ExprKind::Float(v) if e.ty == Ty::F64 => format!("{v:?}"),
            ExprKind::Float(v) => format!("A({v:?})"),
            ExprKind::Int(v, _) => match e.ty {
                Ty::I32 => format!("{v}"),
                Ty::U32 => format!("{v}u"),
                Ty::I64 => format!("{v}ll"),
                _ => format!("{v}ull"),
            },
            ExprKind::Bool(b) => format!("{b}"),
            // A buffer or array handed to a device function whole.
            ExprKind::BufArg(name, ..) => self.name(&name.to_string()),
            ExprKind::Call(c) => {
                let args: Vec<String> = c.args.iter().map(|a| self.expr(a)).collect();
                let f = match c.grad {
                    None => format!("{}_body", c.name()),
                    Some(i) => format!("{}_d{i}", c.name()),
                };
                format!("{f}<A>({})", args.join(", "))
            }
            ExprKind::Const(FConst::Inf) => "rtx_inf<A>()".into(),
            ExprKind::Const(FConst::NegInf) => "(-rtx_inf<A>())".into(),
            ExprKind::Const(FConst::Nan) => "rtx_nan<A>()".into(),
            ExprKind::Const(c @ (FConst::Lowest | FConst::Highest)) => {
                let low = *c == FConst::Lowest;
                if self.elem == ElemKind::Float {
                    if low {
                        "(-rtx_inf<A>())"
                    } else {
                        "rtx_inf<A>()"
                    }
                    .into()
                } else {
                    self.uses_num = true;
                    if low {
                        "rtx_lowest<A>()"
                    } else {
                        "rtx_highest<A>()"
                    }
                    .into()
                }
            }
            ExprKind::Var(id) => self.name(&id.to_string()),
            ExprKind::Unary(op, a) => {
                let neg_num = a.ty == Ty::Elem && self.elem != ElemKind::Float;
                let a = self.expr(a);
                match op {
                    UnOp::Neg if neg_num => {
                        self.uses_num = true;
                        format!("rtx_neg({a})")
                    }
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
            ExprKind::Binary(..) if e.ty == Ty::F64 && fold_f64(e).is_some() => {
                // Arithmetic of `f64` literals, folded exactly as the device would compute it.
                format!("{:?}", fold_f64(e).unwrap_or_default())
            }
            ExprKind::Binary(op, a, b) => {
                let ty = a.ty;
                let a = self.expr(a);
                let b = self.expr(b);
                self.bin(*op, ty, &a, &b)
            }
            ExprKind::Math(f, args) => {
                let ty = args[0].ty;
                let a: Vec<String> = args.iter().map(|x| self.expr(x)).collect();
                match f {
                    MathFn::Recip if ty == Ty::F64 => format!("(1.0 / {})", a[0]),
                    MathFn::Recip => format!("(A(1.0) / {})", a[0]),
                    MathFn::MulHi if ty == Ty::U32 => format!("__umulhi({}, {})", a[0], a[1]),
                    MathFn::MulHi => format!("__umul64hi({}, {})", a[0], a[1]),
                    MathFn::WrappingAdd | MathFn::WrappingSub | MathFn::WrappingMul => {
                        let op = match f {
                            MathFn::WrappingAdd => "+",
                            MathFn::WrappingSub => "-",
                            _ => "*",
                        };
                        // Unsigned arithmetic wraps in C++; signed overflow is undefined, so
                        // signed operands go through their unsigned twin.
                        match unsigned_of(ty) {
                            Some(u) => {
                                format!("(({})(({u})({}) {op} ({u})({})))", cty(ty), a[0], a[1])
                            }
                            None => format!("(({})({} {op} {}))", cty(ty), a[0], a[1]),
                        }
                    }
                    MathFn::Abs if ty == Ty::Elem && self.elem != ElemKind::Float => {
                        self.uses_num = true;
                        format!("rtx_abs({})", a[0])
                    }
                    _ => format!("rtx_{}({})", f.name(), a.join(", ")),
                }
            }
            ExprKind::Intrinsic(intr, args) => {
                let a: Vec<String> = args.iter().map(|x| self.expr(x)).collect();
                match intr {
                    Intrinsic::Index(_, cuda) => format!("((unsigned long long){cuda})"),
                    Intrinsic::LaneId => "((unsigned long long)(rtx_linear_tid() & 31u))".into(),
                    Intrinsic::SyncThreads => "__syncthreads()".into(),
                    Intrinsic::ThreadFence => "rtx_thread_fence()".into(),
                    Intrinsic::GridSync => "rtx_grid_sync()".into(),
                    Intrinsic::ShuffleDown => format!("rtx_shfl_down({}, {})", a[0], a[1]),
                    Intrinsic::ShuffleXor => format!("rtx_shfl_xor({}, {})", a[0], a[1]),
                    _ => {
                        self.uses_mma = true;
                        tensor_call(*intr, &a)
                    }
                }
            }
            ExprKind::Layout(f, recv, dim) => {
                let r = self.expr(recv);
                let d = dim.as_ref().map(|d| self.expr(d)).unwrap_or_default();
                match f {
                    LayoutFn::Rank => format!("((unsigned long long)({r}).rank)"),
                    LayoutFn::Dim => format!("(({r}).dims[{d}])"),
                    LayoutFn::Offset => format!("((unsigned long long)({r}).offset)"),
                    LayoutFn::Stride => format!("((unsigned long long)({r}).strides[{d}])"),
                }
            }
            ExprKind::Load(buf, kind, elem, index) => {
                let b = self.name(&buf.to_string());
                let i = self.expr(index);
                self.load(&b, *kind, *elem, &i)
            }
            ExprKind::TableLoad(table, kind, row, index) => {
                self.table_load(table, *kind, row, index)
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

/// `wgmma_m64n{n}k16`: one `wgmma.mma_async` on descriptors of the two shared tiles at the
/// addresses `sa` and `sb` (both K-major), as [`wgmma_statement`] writes it.
fn wgmma_call(n: u16, a: &[String], sa: &str, sb: &str) -> String {
    let decls = format!(
        "const unsigned long long rtx_da = rtx_wgmma_desc({sa}), rtx_db = rtx_wgmma_desc({sb});"
    );
    wgmma_statement(n, a, &decls, &["\"l\"(rtx_da)".to_string()], "1, 1, 0, 0")
}

/// `wgmma_rs_m64n{n}k16`: one `wgmma.mma_async` with A from the four registers
/// `a[2][a[3]..]` and B from the N-major shared tile at address `sb`, its 64-column panels
/// `a[6]` words apart (the descriptor's leading byte offset; `imm-trans-b` 1).
fn wgmma_rs_call(n: u16, a: &[String], sb: &str) -> String {
    let decls = format!(
        "const unsigned long long rtx_db = rtx_wgmma_desc_mn({sb}, 4u * (unsigned int)({}));",
        a[6]
    );
    let regs: Vec<String> = (0..4)
        .map(|i| format!("\"r\"({}[({}) + {i}ull])", a[2], a[3]))
        .collect();
    wgmma_statement(n, a, &decls, &regs, "1, 1, 1")
}

/// The statement of one `wgmma.mma_async` of width `n`: `decls` (which define the B
/// descriptor `rtx_db`), then the instruction accumulating into `n / 2` registers of the
/// accumulator named in `a[0]` from index `a[1]` (one asm operand each, so the array stays in
/// registers), A given by the asm inputs `a_ins` (one descriptor, or four registers), and the
/// immediates after the scale predicate. Both element types' texts are written, since PTX
/// names the type in the instruction, and a compile-time constant picks one. The statement is
/// written out here rather than in the prelude, where each width would need a function of up
/// to 130 parameters.
fn wgmma_statement(n: u16, a: &[String], decls: &str, a_ins: &[String], imms: &str) -> String {
    let regs = usize::from(n / 2);
    let list: Vec<String> = (0..regs).map(|i| format!("%{i}")).collect();
    let outs: Vec<String> = (0..regs)
        .map(|i| format!("\"+f\"({}[({}) + {i}ull])", a[0], a[1]))
        .collect();
    let a_ops: Vec<String> = (0..a_ins.len()).map(|i| format!("%{}", regs + i)).collect();
    let a_op = match a_ops.as_slice() {
        [one] => one.clone(),
        many => format!("{{{}}}", many.join(", ")),
    };
    let (db, s) = (regs + a_ins.len(), regs + a_ins.len() + 1);
    let asm = |t: &str| {
        format!(
            "asm volatile(\"{{ .reg .pred p; setp.ne.b32 p, %{s}, 0; \
             wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{t}.{t} {{{list}}}, {a_op}, %{db}, p, {imms}; }}\\n\" \
             : {outs} : {ins}, \"l\"(rtx_db), \"r\"(1) : \"memory\");",
            list = list.join(", "),
            outs = outs.join(", "),
            ins = a_ins.join(", "),
        )
    };
    format!(
        "{{ {decls} if (rtx_is_bf16<S>::value) {{ {} }} else {{ {} }} }}",
        asm("bf16"),
        asm("f16")
    )
}

/// The CUDA call of a tensor-core intrinsic (`prelude_mma.cu`), from its arguments' C++
/// text: arrays by name, then indices. A fragment's registers are named one by one
/// (`f[at + 0ull]`), so once the loops around it are unrolled they are constants and the
/// fragment stays in registers.
fn tensor_call(intr: Intrinsic, a: &[String]) -> String {
    // The shared-window address of word `word` of a tile.
    let smem =
        |tile: &str, word: &str| format!("(rtx_smem_addr({tile}) + 4u * (unsigned int)({word}))");
    // The shared-window address of barrier `i` of a `u64` array.
    let bar = |bars: &str, i: &str| format!("(rtx_smem_addr({bars}) + 8u * (unsigned int)({i}))");
    let regs = |f: &str, at: &str, n: usize| -> Vec<String> {
        (0..n).map(|i| format!("{f}[({at}) + {i}ull]")).collect()
    };
    match intr {
        Intrinsic::CpAsync => format!(
            "rtx_cp_async16<S>({}, rtx_global_addr({}), {}, {})",
            smem(&a[0], &a[1]),
            a[2],
            a[3],
            a[4]
        ),
        Intrinsic::CpAsyncCommit => "rtx_cp_async_commit()".into(),
        Intrinsic::CpAsyncWait(n) => format!("rtx_cp_async_wait<{n}>()"),
        Intrinsic::Ldmatrix(count, trans) => {
            let t = if trans { "_trans" } else { "" };
            let mut args = regs(&a[0], &a[1], usize::from(count));
            args.push(smem(&a[2], &a[3]));
            format!("rtx_ldmatrix_x{count}{t}({})", args.join(", "))
        }
        Intrinsic::Mma => {
            let mut args = regs(&a[0], &a[1], 4);
            args.extend(regs(&a[2], &a[3], 4));
            args.extend(regs(&a[4], &a[5], 2));
            format!("rtx_mma<S>::m16n8k16({})", args.join(", "))
        }
        Intrinsic::Pack2 => format!("rtx_pack2<S>({}, {})", a[0], a[1]),
        Intrinsic::Store2 => format!("rtx_store2<S>({} + ({}), {}, {})", a[0], a[1], a[2], a[3]),
        Intrinsic::Wgmma(n) => wgmma_call(n, a, &smem(&a[2], &a[3]), &smem(&a[4], &a[5])),
        Intrinsic::WgmmaRs(n) => wgmma_rs_call(n, a, &smem(&a[4], &a[5])),
        Intrinsic::WgmmaFence => "rtx_wgmma_fence()".into(),
        Intrinsic::WgmmaCommit => "rtx_wgmma_commit()".into(),
        Intrinsic::WgmmaWait(n) => format!("rtx_wgmma_wait<{n}>({})", a[0]),
        Intrinsic::FenceProxyAsync => "rtx_fence_proxy_async()".into(),
        Intrinsic::MbarrierInit => format!(
            "rtx_mbarrier_init({}, (unsigned int)({}))",
            bar(&a[0], &a[1]),
            a[2]
        ),
        Intrinsic::MbarrierArrive => format!("rtx_mbarrier_arrive({})", bar(&a[0], &a[1])),
        Intrinsic::MbarrierArriveExpectTx => format!(
            "rtx_mbarrier_arrive_expect_tx({}, (unsigned int)({}))",
            bar(&a[0], &a[1]),
            a[2]
        ),
        Intrinsic::MbarrierWait => format!(
            "rtx_mbarrier_wait({}, (unsigned int)({}))",
            bar(&a[0], &a[1]),
            a[2]
        ),
        // The source buffer is named for the native emulation; on the GPU the map holds its
        // address.
        Intrinsic::TmaLoad2d => format!(
            "rtx_tma_load_2d({}, &({}), (int)({}), (int)({}), {})",
            smem(&a[0], &a[1]),
            a[3],
            a[4],
            a[5],
            bar(&a[6], &a[7])
        ),
        // The other intrinsics are written by `Writer::expr`.
        _ => String::new(),
    }
}
