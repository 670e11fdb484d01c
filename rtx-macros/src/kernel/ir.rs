//! The typed kernel IR: the subset of Rust `#[kernel]` accepts, after parsing and type
//! checking. Both code generators (native Rust and CUDA C) and the differentiator read it, so
//! they agree on what a kernel means.
//!
//! Invariant: every expression carries its type; `Ty::Elem` values are in the compute type
//! (`T::Acc` natively, `float`/`double` in CUDA); loads from `T` buffers widen and stores
//! narrow.

use proc_macro2::Span;
use syn::Ident;

/// A scalar type of the subset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    /// The element type parameter `T`, held in its compute type.
    Elem,
    /// `f64`, whatever `T` is: for work that needs double precision in every instantiation.
    F64,
    Usize,
    I32,
    U32,
    I64,
    U64,
    Bool,
    /// A `KernelShape` parameter of a SIMT kernel (read through `.rank()` and `.dim(d)`).
    Shape,
    /// A `KernelStrides` parameter of a SIMT kernel (read through `.offset()` and
    /// `.stride(d)`).
    Strides,
    /// A `TensorMap` parameter of a SIMT kernel: a 2-D view of a buffer that
    /// `tma_load_2d` copies boxes of (`parse/tensor.rs`).
    TensorMap,
    /// The value of a statement-like expression (`if` without `else`, `sync_threads()`).
    Unit,
}

impl Ty {
    pub fn is_int(self) -> bool {
        matches!(self, Ty::Usize | Ty::I32 | Ty::U32 | Ty::I64 | Ty::U64)
    }

    pub fn is_signed(self) -> bool {
        matches!(self, Ty::Elem | Ty::F64 | Ty::I32 | Ty::I64)
    }

    /// Whether values of the type are plain numbers, bools or `T` (not layouts, not `()`).
    pub fn is_value(self) -> bool {
        !matches!(self, Ty::Shape | Ty::Strides | Ty::TensorMap | Ty::Unit)
    }

    /// How the type reads in messages.
    pub fn name(self) -> &'static str {
        match self {
            Ty::Elem => "T",
            Ty::F64 => "f64",
            Ty::Usize => "usize",
            Ty::I32 => "i32",
            Ty::U32 => "u32",
            Ty::I64 => "i64",
            Ty::U64 => "u64",
            Ty::Bool => "bool",
            Ty::Shape => "KernelShape",
            Ty::Strides => "KernelStrides",
            Ty::TensorMap => "TensorMap",
            Ty::Unit => "()",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnOp {
    Neg,
    Not,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    BitAnd,
    BitOr,
    BitXor,
    Shl,
    Shr,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
}

impl BinOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::BitAnd => "&",
            BinOp::BitOr => "|",
            BinOp::BitXor => "^",
            BinOp::Shl => "<<",
            BinOp::Shr => ">>",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::And => "&&",
            BinOp::Or => "||",
        }
    }

    pub fn is_cmp(self) -> bool {
        matches!(
            self,
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge
        )
    }
}

/// Math on `T` (and `max`/`min` on integers), written as methods: `x.exp()`, `a.max(b)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MathFn {
    Exp,
    Exp2,
    Ln,
    Ln1p,
    Sqrt,
    Sin,
    Cos,
    Tanh,
    Erf,
    Abs,
    Recip,
    Max,
    Min,
    Powi,
    Powf,
    /// `a.mul_add(b, c)`: `a * b + c` rounded once (a fused multiply-add).
    MulAdd,
    /// Integer arithmetic modulo 2^bits, on every integer type.
    WrappingAdd,
    WrappingSub,
    WrappingMul,
    /// The high half of the full product of two `u32` or two `u64` values.
    MulHi,
}

impl MathFn {
    pub const ALL: &'static [(&'static str, MathFn, usize)] = &[
        ("exp", MathFn::Exp, 0),
        ("exp2", MathFn::Exp2, 0),
        ("ln", MathFn::Ln, 0),
        ("ln_1p", MathFn::Ln1p, 0),
        ("sqrt", MathFn::Sqrt, 0),
        ("sin", MathFn::Sin, 0),
        ("cos", MathFn::Cos, 0),
        ("tanh", MathFn::Tanh, 0),
        ("erf", MathFn::Erf, 0),
        ("abs", MathFn::Abs, 0),
        ("recip", MathFn::Recip, 0),
        ("max", MathFn::Max, 1),
        ("min", MathFn::Min, 1),
        ("powi", MathFn::Powi, 1),
        ("powf", MathFn::Powf, 1),
        ("mul_add", MathFn::MulAdd, 2),
        ("wrapping_add", MathFn::WrappingAdd, 1),
        ("wrapping_sub", MathFn::WrappingSub, 1),
        ("wrapping_mul", MathFn::WrappingMul, 1),
        ("mul_hi", MathFn::MulHi, 1),
    ];

    pub fn name(self) -> &'static str {
        MathFn::ALL
            .iter()
            .find(|(_, f, _)| *f == self)
            .map_or("?", |(n, _, _)| n)
    }
}

impl MathFn {
    /// Whether the method is integer arithmetic (not float math).
    pub fn is_int_op(self) -> bool {
        matches!(
            self,
            MathFn::WrappingAdd | MathFn::WrappingSub | MathFn::WrappingMul | MathFn::MulHi
        )
    }
}

/// Reads of a `KernelShape` or `KernelStrides` parameter, written as methods.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutFn {
    /// `shape.rank()`.
    Rank,
    /// `shape.dim(d)`.
    Dim,
    /// `strides.offset()`.
    Offset,
    /// `strides.stride(d)`.
    Stride,
}

/// SIMT intrinsics, written as free function calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Intrinsic {
    /// `thread_idx_x()` and friends: (name, CUDA expression).
    Index(&'static str, &'static str),
    LaneId,
    SyncThreads,
    /// `__threadfence()`: this thread's writes reach every block before its later ones.
    ThreadFence,
    /// `grid_sync()`: every thread of every block of the grid waits for all the others (a
    /// cooperative launch's grid barrier).
    GridSync,
    ShuffleDown,
    ShuffleXor,
    /// The tensor-core intrinsics (`parse/tensor.rs`; natively `kernel/tensor_core.rs` of
    /// rtx-kernels): `cp_async(&mut tile, word, x, index, n)`.
    CpAsync,
    /// `cp_async_commit()`.
    CpAsyncCommit,
    /// `cp_async_wait(n)`, with `n` a constant.
    CpAsyncWait(u32),
    /// `ldmatrix_x{count}[_trans](&mut frag, at, &tile, word)`.
    Ldmatrix(u8, bool),
    /// `mma_m16n8k16(&mut acc, ci, &a, ai, &b, bi)`.
    Mma,
    /// `pack2(lo, hi)`: two `T` values as one `u32` of two 16-bit elements.
    Pack2,
    /// `store2(o, i, lo, hi)`: `o[i] = lo; o[i + 1] = hi` as one 32-bit store (`i` even), the
    /// way an accumulator fragment's pairs leave a tensor-core kernel.
    Store2,
    /// Hopper's warpgroup product `wgmma_m64n{n}k16(&mut acc, ci, &ta, a_word, &tb,
    /// b_word)`, both operands K-major in 128-byte-swizzled shared tiles.
    Wgmma(u16),
    /// `wgmma_rs_m64n{n}k16(&mut acc, ci, &a, ai, &tb, b_word, b_panel)`: A (64 x 16) from
    /// each thread's registers in the `mma` A fragment layout of its warp's 16 rows, B (16 x
    /// n) N-major in a 128-byte-swizzled shared tile whose 64-column panels are `b_panel`
    /// words apart.
    WgmmaRs(u16),
    /// `wgmma_fence()`: orders earlier register writes before the next `wgmma`.
    WgmmaFence,
    /// `wgmma_commit()`: closes the group of `wgmma`s issued since the last commit.
    WgmmaCommit,
    /// `wgmma_wait(n, &mut acc)`: waits until at most `n` groups are pending; `acc` is
    /// ready after it.
    WgmmaWait(u32),
    /// `fence_proxy_async()`: makes this thread's shared-memory writes visible to `wgmma`.
    FenceProxyAsync,
    /// `mbarrier_init(&mut bar, i, count)`: barrier `i` of a `#[shared]` `u64` array, whose
    /// phases complete after `count` arrivals and the bytes they announce.
    MbarrierInit,
    /// `mbarrier_arrive(&mut bar, i)`.
    MbarrierArrive,
    /// `mbarrier_arrive_expect_tx(&mut bar, i, bytes)`.
    MbarrierArriveExpectTx,
    /// `mbarrier_wait(&mut bar, i, parity)`: waits for the phase of that parity.
    MbarrierWait,
    /// `tma_load_2d(&mut tile, word, x, map, col, row, &mut bar, i)`: a box of `map`'s view
    /// of `x` into the tile, counted by barrier `i`.
    TmaLoad2d,
}

/// Constants of `T`: `T::INFINITY`, `T::NEG_INFINITY`, `T::NAN` (float kernels), and
/// `T::LOWEST`, `T::HIGHEST` (the identities of max and min: infinities for floats, the
/// integer range for integers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FConst {
    Inf,
    NegInf,
    Nan,
    Lowest,
    Highest,
}

/// Where an indexed buffer lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Buf {
    /// A `&[E]` parameter.
    In,
    /// A `&mut [E]` parameter.
    Out,
    /// A `#[shared]` array of the block (holding compute-type values for `T`).
    Shared,
    /// A `&[T::Acc]` parameter: compute-type values, read as they are.
    AccIn,
    /// A `&mut [T::Acc]` parameter: compute-type values, written as they are.
    AccOut,
    /// A per-thread array (`let mut v = [x; 32];`), holding compute-type values for `T`.
    Local,
}

impl Buf {
    /// The kind of the rows of a buffer table: `&mut` rows are written, `acc` rows hold the
    /// compute type.
    pub fn table_row(mutable: bool, acc: bool) -> Self {
        match (mutable, acc) {
            (false, false) => Buf::In,
            (true, false) => Buf::Out,
            (false, true) => Buf::AccIn,
            (true, true) => Buf::AccOut,
        }
    }

    /// Whether `T` elements of this buffer are held in storage type, so reads widen to the
    /// compute type and writes narrow back.
    pub fn converts(self, elem: Ty) -> bool {
        elem == Ty::Elem && matches!(self, Buf::In | Buf::Out)
    }
}

#[derive(Clone, Debug)]
pub struct Expr {
    pub kind: ExprKind,
    pub ty: Ty,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub enum ExprKind {
    Float(f64),
    /// An integer literal; `untyped` until context (or a suffix) fixed its type.
    Int(u64, bool),
    Bool(bool),
    Const(FConst),
    Var(Ident),
    Unary(UnOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    Math(MathFn, Vec<Expr>),
    Intrinsic(Intrinsic, Vec<Expr>),
    /// A read of a layout value (a `KernelShape` or `KernelStrides`), with the dim, if any.
    Layout(LayoutFn, Box<Expr>, Option<Box<Expr>>),
    Load(Ident, Buf, Ty, Box<Expr>),
    /// `table[row][index]`: an element of one buffer of a buffer table (`&[&[T]]`,
    /// `&[&mut [T]]` or their `T::Acc` forms, see `table.rs`), a `T` value; the `Buf` is the
    /// kind of the table's rows (`In`, `Out`, `AccIn` or `AccOut`).
    TableLoad(Ident, Buf, Box<Expr>, Box<Expr>),
    Cast(Box<Expr>),
    /// A call of another kernel function (an elementwise kernel over `T`, or a device
    /// function), see [`Call`].
    Call(Call),
    /// A buffer, shared array or per-thread array handed to a device function as a whole
    /// (`x`, `&mut red`, `&v`): only ever an argument of a [`Call`], of type `Ty::Unit`. The
    /// `bool` is whether it is passed `&mut` (local arrays; buffers and shared arrays pass as
    /// they are declared).
    BufArg(Ident, Buf, bool),
    If(Box<Expr>, Block, Block),
    Block(Block),
}

impl Expr {
    pub fn new(kind: ExprKind, ty: Ty, span: Span) -> Self {
        Expr { kind, ty, span }
    }

    pub fn float(v: f64, span: Span) -> Self {
        Expr::new(ExprKind::Float(v), Ty::Elem, span)
    }

    pub fn var(name: Ident, ty: Ty) -> Self {
        let span = name.span();
        Expr::new(ExprKind::Var(name), ty, span)
    }

    pub fn bin(op: BinOp, a: Expr, b: Expr) -> Self {
        let ty = if op.is_cmp() { Ty::Bool } else { a.ty };
        let span = a.span;
        Expr::new(ExprKind::Binary(op, Box::new(a), Box::new(b)), ty, span)
    }

    pub fn math(f: MathFn, args: Vec<Expr>) -> Self {
        let span = args[0].span;
        Expr::new(ExprKind::Math(f, args), Ty::Elem, span)
    }

    pub fn neg(a: Expr) -> Self {
        let (ty, span) = (a.ty, a.span);
        Expr::new(ExprKind::Unary(UnOp::Neg, Box::new(a)), ty, span)
    }
}

#[derive(Clone, Debug, Default)]
pub struct Block {
    pub stmts: Vec<Stmt>,
    pub tail: Option<Box<Expr>>,
}

#[derive(Clone, Debug)]
pub enum Place {
    Var(Ident),
    Index(Ident, Buf, Ty, Expr),
    /// `table[row][index]` of a writable buffer table whose rows are of kind `Buf` (`Out` or
    /// `AccOut`).
    TableIndex(Ident, Buf, Expr, Expr),
}

#[derive(Clone, Debug)]
pub enum Stmt {
    Let {
        name: Ident,
        mutable: bool,
        ty: Ty,
        init: Option<Expr>,
    },
    /// `let [mut] name = [init; len];`: a per-thread array of `len` copies of `init`.
    LocalArray {
        name: Ident,
        mutable: bool,
        elem: Ty,
        len: usize,
        init: Expr,
    },
    Assign {
        place: Place,
        op: Option<BinOp>,
        value: Expr,
    },
    /// `atomic_add(&mut buf[index], value);`, or `let old = atomic_add(..);` binding the
    /// element's value before the add.
    AtomicAdd {
        buf: Ident,
        kind: Buf,
        ty: Ty,
        index: Expr,
        value: Expr,
        old: Option<Ident>,
    },
    Expr(Expr),
    For {
        var: Ident,
        ty: Ty,
        start: Expr,
        end: Expr,
        step: Option<Expr>,
        body: Block,
    },
    While {
        cond: Expr,
        body: Block,
    },
    Loop(Block),
    Break,
    Continue,
    Return,
}

/// A kernel parameter.
#[derive(Clone, Debug)]
pub struct Param {
    pub name: Ident,
    pub ty: ParamTy,
    /// `#[uniform]` on an elementwise kernel: one value for all elements.
    pub uniform: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamTy {
    Scalar(Ty),
    /// `&[E]` / `&mut [E]`; `acc` for `&[T::Acc]`, a buffer of the compute type (`elem` is
    /// then `Ty::Elem`).
    Slice {
        elem: Ty,
        mutable: bool,
        acc: bool,
    },
    /// A table of `T` buffers, `&[&[T]]` or `&[&mut [T]]` (SIMT kernels; see `table.rs`);
    /// `acc` for `&[&[T::Acc]]` / `&[&mut [T::Acc]]`, buffers of the compute type.
    Table {
        mutable: bool,
        acc: bool,
    },
    /// An array of a device function's caller, `&mut [E; N]` / `&[E; N]` (a per-thread array)
    /// or `#[shared] name: &mut [E; N]` (a shared array of the block); see `device.rs`.
    Array {
        elem: Ty,
        len: usize,
        mutable: bool,
        shared: bool,
    },
}

/// A `#[shared] let name: [E; len];` declaration, hoisted to the block.
#[derive(Clone, Debug)]
pub struct Shared {
    pub name: Ident,
    pub elem: Ty,
    pub len: usize,
}

/// Which element types a kernel is instantiated for, from its type parameter's bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElemKind {
    /// `T: Float`: f32, f64, f16 and bf16, computed in f32 (f64 for f64).
    Float,
    /// `T: Num`: the float types and i32, i64 and u8 (integers compute in their own type,
    /// wrapping).
    Num,
    /// `T: Element`: every element type, `bool` included; `T` values are only moved and
    /// compared.
    Element,
}

impl ElemKind {
    /// The trait name the user writes.
    pub fn bound(self) -> &'static str {
        match self {
            ElemKind::Float => "Float",
            ElemKind::Num => "Num",
            ElemKind::Element => "Element",
        }
    }
}

/// A call of another kernel function: `gelu(x)`, `super::softplus(y)`, `block_max(m, &mut
/// red)`. In CUDA it calls the callee's device function `<name>_body<A>` (or `<name>_d<i>`),
/// whose source the callee's `DEVICE` constant carries. Natively, an elementwise or reduce
/// kernel calls the callee module's `scalar` (or `d<i>`), and a SIMT kernel or a device
/// function calls its `call`, handing on the thread context: every callable module exports
/// `call` (see `call.rs` and `device.rs`), so the caller needs to know nothing of the callee.
#[derive(Clone)]
pub struct Call {
    /// The callee as the user wrote it; it resolves in the user's scope.
    pub path: syn::Path,
    /// `Some(i)`: the callee's derivative with respect to its argument `i`, times the extra
    /// last argument (the tangent), as its derived `<name>_grad_<param>` kernel computes it.
    pub grad: Option<usize>,
    pub args: Vec<Expr>,
    /// Whether the call's type is still open: a call in a SIMT kernel or a device function
    /// is `T` unless its context asks for another type (`let t: bool = f(..)`, `if f(..)`, a
    /// statement `f(..);`), which rustc then checks against the callee's signature.
    pub open: bool,
}

impl std::fmt::Debug for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("name", &self.name())
            .field("grad", &self.grad)
            .field("args", &self.args)
            .field("open", &self.open)
            .finish()
    }
}

impl Call {
    /// The callee's name: the last segment of its path.
    pub fn name(&self) -> String {
        self.path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default()
    }
}

/// The callees of a block, each once (by path), in the order first called.
pub fn callees(b: &Block) -> Vec<syn::Path> {
    fn walk_block(b: &Block, out: &mut Vec<syn::Path>) {
        for s in &b.stmts {
            match s {
                Stmt::Let { init, .. } => init.iter().for_each(|e| walk(e, out)),
                Stmt::LocalArray { init, .. } => walk(init, out),
                Stmt::Assign { place, value, .. } => {
                    match place {
                        Place::Var(_) => {}
                        Place::Index(_, _, _, i) => walk(i, out),
                        Place::TableIndex(_, _, r, i) => {
                            walk(r, out);
                            walk(i, out);
                        }
                    }
                    walk(value, out);
                }
                Stmt::AtomicAdd { index, value, .. } => {
                    walk(index, out);
                    walk(value, out);
                }
                Stmt::Expr(e) => walk(e, out),
                Stmt::For {
                    start,
                    end,
                    step,
                    body,
                    ..
                } => {
                    walk(start, out);
                    walk(end, out);
                    step.iter().for_each(|e| walk(e, out));
                    walk_block(body, out);
                }
                Stmt::While { cond, body } => {
                    walk(cond, out);
                    walk_block(body, out);
                }
                Stmt::Loop(body) => walk_block(body, out),
                Stmt::Break | Stmt::Continue | Stmt::Return => {}
            }
        }
        if let Some(t) = &b.tail {
            walk(t, out);
        }
    }
    fn walk(e: &Expr, out: &mut Vec<syn::Path>) {
        match &e.kind {
            ExprKind::Call(c) => {
                let p = &c.path;
                let key = quote::quote!(#p).to_string();
                if !out.iter().any(|q| quote::quote!(#q).to_string() == key) {
                    out.push(c.path.clone());
                }
                c.args.iter().for_each(|a| walk(a, out));
            }
            ExprKind::Unary(_, a) | ExprKind::Cast(a) => walk(a, out),
            ExprKind::Binary(_, a, b) => {
                walk(a, out);
                walk(b, out);
            }
            ExprKind::Math(_, args) | ExprKind::Intrinsic(_, args) => {
                args.iter().for_each(|a| walk(a, out))
            }
            ExprKind::Layout(_, a, d) => {
                walk(a, out);
                d.iter().for_each(|d| walk(d, out));
            }
            ExprKind::Load(_, _, _, i) => walk(i, out),
            ExprKind::TableLoad(_, _, r, i) => {
                walk(r, out);
                walk(i, out);
            }
            ExprKind::If(c, a, b) => {
                walk(c, out);
                walk_block(a, out);
                walk_block(b, out);
            }
            ExprKind::Block(b) => walk_block(b, out),
            ExprKind::Float(_)
            | ExprKind::Int(..)
            | ExprKind::Bool(_)
            | ExprKind::Const(_)
            | ExprKind::Var(_)
            | ExprKind::BufArg(..) => {}
        }
    }
    let mut out = Vec::new();
    walk_block(b, &mut out);
    out
}

/// A parsed kernel function.
#[derive(Clone, Debug)]
pub struct KernelFn {
    pub name: Ident,
    pub generic: Ident,
    /// The bound on `generic`, which decides the element types.
    pub elem: ElemKind,
    pub params: Vec<Param>,
    pub body: Block,
    /// What the scalar function returns: `T`, or `bool` for elementwise predicates.
    pub ret: Ty,
    /// The output type parameter `U` of a cast-like elementwise kernel (`-> U`), with the
    /// element types its bound stands for.
    pub out_generic: Option<(Ident, ElemKind)>,
    pub shared: Vec<Shared>,
    pub uses_sync: bool,
    /// Whether the body calls `grid_sync` itself (see [`Intrinsic::GridSync`]).
    pub uses_grid_sync: bool,
    /// Whether the body itself uses `atomic_add`, `thread_fence` or `grid_sync`: a block may
    /// then see another's writes during the launch, so the emulation does not run its blocks
    /// in parallel.
    pub crosses_blocks: bool,
    /// Whether the body uses the tensor-core intrinsics: the kernel then exists for f16 and
    /// bf16 only.
    pub tensor_core: bool,
    /// Whether the body uses `wgmma`: its shared arrays then start on 1024-byte boundaries
    /// (the 128-byte swizzle is a function of the address) and it needs Hopper (`sm_90a`).
    pub wgmma: bool,
    /// `specialize(param = v1, v2, ..)` of a SIMT kernel: integer parameters whose listed
    /// values get their own inlined copy of the CUDA body, with the value a constant.
    pub specialize: Vec<(Ident, Vec<u64>)>,
    /// `launch_bounds(threads, blocks)` of a SIMT kernel, and any `launch_bounds(threads,
    /// blocks, param = value, ..)` for the specialized entries of those values: see
    /// [`LaunchBounds`].
    pub launch_bounds: Vec<LaunchBounds>,
}

/// One `launch_bounds(threads, blocks)` of a SIMT kernel: blocks of the entries it covers have
/// at most `threads` threads (a larger launch is an error on every device), and the compiler
/// keeps their registers low enough for `blocks` of them to share an SM (CUDA's
/// `__launch_bounds__`).
///
/// Without `when` it covers every entry; with `when` (`param = value` pairs, each a value of
/// the kernel's `specialize`) only the specialized entries with those values, and there it
/// takes precedence over the unconditioned one. Why per entry: the entries of one body can
/// differ in block size and registers (a block of one warpgroup or two), and a bound right for
/// one spills or wastes occupancy in another.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchBounds {
    /// The most threads a block has.
    pub threads: u32,
    /// Blocks an SM must hold at once.
    pub blocks: u32,
    /// The specialized values the bounds are for; empty for every entry.
    pub when: Vec<(Ident, u64)>,
}

impl LaunchBounds {
    /// The bounds of the entry with `values` (`(parameter, value)` of a specialized entry;
    /// empty for the general entry): the first conditioned bounds whose values all match,
    /// else the unconditioned ones.
    pub fn for_entry<'a>(
        bounds: &'a [LaunchBounds],
        values: &[(String, u64)],
    ) -> Option<&'a LaunchBounds> {
        let holds = |b: &&LaunchBounds| {
            !b.when.is_empty()
                && b.when
                    .iter()
                    .all(|(name, v)| values.iter().any(|(n, x)| *name == *n && x == v))
        };
        bounds
            .iter()
            .find(holds)
            .or_else(|| bounds.iter().find(|b| b.when.is_empty()))
    }
}
