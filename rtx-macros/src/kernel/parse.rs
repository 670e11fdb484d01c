//! Parses and type-checks a `#[kernel]` function into the IR, rejecting everything outside
//! the subset with a `syn::Error` at the offending span that says what is supported.
//!
//! Invariant: parsing never panics; every rejected construct becomes an error, and every
//! accepted expression has a type the code generators can rely on.

mod calls;
mod local;
mod table;
mod tensor;
mod typing;

use typing::{
    bin_op, check_arith, compound_op, int_operand, is_untyped_float, lit, retype, retype_float,
    unify,
};
pub use typing::{coerce, is_untyped_int};

use super::ir::*;
use proc_macro2::Span;
use std::collections::HashMap;
use syn::spanned::Spanned;
use syn::{Error, Ident, Result};

/// What the body may use.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Elementwise and reduce kernels: a scalar function of scalars.
    Scalar,
    /// General SIMT kernels: buffers, intrinsics, shared memory, loops, `return`.
    Simt,
}

const SUPPORTED: &str = "kernels accept literals, parameters and `let` bindings, arithmetic, \
comparisons and `&&`/`||`, math methods (`x.exp()`, `exp2`, `ln`, `ln_1p`, `sqrt`, `sin`, `cos`, \
`tanh`, `erf`, `abs`, `recip`, `a.max(b)`, `min`, `powi`, `powf`, `a.mul_add(b, c)`), integer methods \
(`a.wrapping_add(b)`, `wrapping_sub`, `wrapping_mul`, `mul_hi`), `as` casts between `T`, \
`f64`, `usize`, `i32`, `u32`, `i64` and `u64`, `T::INFINITY`/`T::NEG_INFINITY`/`T::NAN`/\
`T::LOWEST`/`T::HIGHEST`, `if`/`else`, blocks, loops (`for i in a..b`, \
`(a..b).step_by(s)`, `while`, `loop`) and, in SIMT kernels, indexing buffers, `return;`, \
`KernelShape`/`KernelStrides` parameters (`s.rank()`, `s.dim(d)`, `st.offset()`, \
`st.stride(d)`), per-thread arrays (`let mut v = [x; N];`, `v[k]`, with `N` a literal or a \
`const N: usize = 32;` of the kernel) and the intrinsics (`thread_idx_x()`, `block_idx_x()`, `block_dim_x()`, \
`grid_dim_x()` and their `_y`/`_z` forms, `lane_id()`, `sync_threads()`, \
`warp_shuffle_down(v, offset)`, `warp_shuffle_xor(v, mask)`, `atomic_add(&mut buf[i], v)` (or `let old = \
atomic_add(..);` for the value before the add), `thread_fence()`, `grid_sync()`, and on \
the tensor cores `cp_async`, `cp_async_commit`, `cp_async_wait`, `ldmatrix_x4` and its `_x1`/`_x2`/\
`_trans` forms, `mma_m16n8k16`, `pack2`, `store2`, and on Hopper `wgmma_m64n{64,128,256}k16`, \
`wgmma_rs_m64n{64,128,256}k16`, `wgmma_fence`, `wgmma_commit`, `wgmma_wait`, `fence_proxy_async`); \
kernels over `T: Float` may call elementwise kernel functions whose parameters are all `T` \
(`gelu(x)`, `super::softplus(y)`), and SIMT kernels may call device functions \
(`#[kernel(device)]`), handing them values, buffers (`x`), shared arrays (`&mut red`) and local \
arrays (`&mut v`)";

fn unsupported(span: Span, what: &str) -> Error {
    Error::new(
        span,
        format!("`#[kernel]` does not support {what}: {SUPPORTED}"),
    )
}

#[derive(Clone, Copy)]
enum Var {
    Scalar {
        ty: Ty,
        mutable: bool,
    },
    Buf {
        kind: Buf,
        elem: Ty,
    },
    /// A per-thread array (`let mut v = [x; 32];`).
    Local {
        elem: Ty,
        mutable: bool,
    },
    /// An integer `const` of the kernel body.
    Const {
        value: u64,
        ty: Ty,
    },
    /// A buffer table parameter (`parse/table.rs`), with the kind of its rows.
    Table {
        row: Buf,
    },
}

/// The parser's state: scopes of names, and what the body turned out to use.
pub struct Parser {
    mode: Mode,
    generic: Ident,
    elem: ElemKind,
    scopes: Vec<HashMap<String, Var>>,
    pub shared: Vec<Shared>,
    pub uses_sync: bool,
    /// Whether the body calls `grid_sync` (the blocks then run together).
    pub uses_grid_sync: bool,
    /// Whether the body uses `atomic_add`, `thread_fence` or `grid_sync`, through which a
    /// block can see another's writes during the launch.
    pub crosses_blocks: bool,
    /// Whether the body uses a tensor-core intrinsic (`tensor.rs`).
    pub tensor_core: bool,
    /// Whether the body uses `wgmma` (`tensor.rs`).
    pub wgmma: bool,
    loops: usize,
    /// `Some(return type)` while parsing a device function (`#[kernel(device)]`).
    pub device: Option<Ty>,
}

impl Parser {
    pub fn new(mode: Mode, generic: Ident, elem: ElemKind) -> Self {
        Parser {
            mode,
            generic,
            elem,
            scopes: vec![HashMap::new()],
            shared: Vec::new(),
            uses_sync: false,
            uses_grid_sync: false,
            crosses_blocks: false,
            tensor_core: false,
            wgmma: false,
            loops: 0,
            device: None,
        }
    }

    /// Declares a name in the innermost scope.
    pub fn declare_scalar(&mut self, name: &Ident, ty: Ty, mutable: bool) -> Result<()> {
        self.declare(name, Var::Scalar { ty, mutable })
    }

    fn declare_buf(&mut self, name: &Ident, kind: Buf, elem: Ty) -> Result<()> {
        self.declare(name, Var::Buf { kind, elem })
    }

    fn declare(&mut self, name: &Ident, var: Var) -> Result<()> {
        check_name(name)?;
        if let Some(scope) = self.scopes.last_mut() {
            scope.insert(name.to_string(), var);
        }
        Ok(())
    }

    fn lookup(&self, name: &Ident) -> Result<Var> {
        let key = name.to_string();
        self.scopes
            .iter()
            .rev()
            .find_map(|s| s.get(&key).copied())
            .ok_or_else(|| {
                Error::new(
                    name.span(),
                    format!(
                        "unknown name `{name}`: a kernel can use its parameters and its own \
                         `let` bindings, not other items"
                    ),
                )
            })
    }

    /// A scalar type: `T` (the element type parameter), `f64`, `usize`, `i32`, `u32`, `i64`,
    /// `u64`, `bool`.
    pub fn scalar_ty(&self, ty: &syn::Type) -> Result<Ty> {
        if let syn::Type::Path(p) = ty
            && p.qself.is_none()
            && let Some(id) = p.path.get_ident()
        {
            if *id == self.generic {
                return Ok(Ty::Elem);
            }
            match id.to_string().as_str() {
                "f64" => return Ok(Ty::F64),
                "usize" => return Ok(Ty::Usize),
                "i32" => return Ok(Ty::I32),
                "u32" => return Ok(Ty::U32),
                "i64" => return Ok(Ty::I64),
                "u64" => return Ok(Ty::U64),
                "bool" => return Ok(Ty::Bool),
                "f32" | "f16" | "bf16" => {
                    return Err(Error::new(
                        id.span(),
                        format!(
                            "`{id}` in a kernel: write the element type parameter `{}` instead; \
                             the kernel is instantiated for f32, f64, f16 and bf16 and computes \
                             in f32 (f64 for f64); `f64` is the one concrete float type",
                            self.generic
                        ),
                    ));
                }
                _ => {}
            }
        }
        Err(Error::new(
            ty.span(),
            format!(
                "unsupported type in a kernel: scalars are `{}` (the element type), `f64`, \
                 `usize`, `i32`, `u32`, `i64`, `u64` and `bool`",
                self.generic
            ),
        ))
    }

    /// A parameter type: a scalar, or (SIMT only) `&[E]` / `&mut [E]`, `KernelShape` and
    /// `KernelStrides`, or (device functions only) an array `&mut [E; N]` / `&[E; N]`.
    pub fn param_ty(&self, ty: &syn::Type) -> Result<ParamTy> {
        if let syn::Type::Reference(r) = ty
            && let syn::Type::Array(arr) = &*r.elem
        {
            if self.device.is_none() {
                return Err(Error::new(
                    ty.span(),
                    "arrays are passed to device functions (`#[kernel(device)]`); a kernel takes \
                     buffers as slices: `&[T]` to read, `&mut [T]` to write",
                ));
            }
            if r.lifetime.is_some() {
                return Err(Error::new(ty.span(), "array parameters take no lifetime"));
            }
            let elem = self.scalar_ty(&arr.elem)?;
            let len = match &arr.len {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Int(i),
                    ..
                }) if matches!(i.suffix(), "" | "usize") => i.base10_parse::<usize>()?,
                other => {
                    return Err(Error::new(
                        other.span(),
                        "the length of an array parameter is an integer literal: `&mut [T; 32]`",
                    ));
                }
            };
            if len == 0 {
                return Err(Error::new(arr.len.span(), "an array length is at least 1"));
            }
            return Ok(ParamTy::Array {
                elem,
                len,
                mutable: r.mutability.is_some(),
                shared: false,
            });
        }
        if let syn::Type::Path(p) = ty
            && p.qself.is_none()
            && let Some(last) = p.path.segments.last()
            && (last.ident == "KernelShape" || last.ident == "KernelStrides")
        {
            if self.mode != Mode::Simt {
                return Err(Error::new(
                    ty.span(),
                    "`KernelShape` and `KernelStrides` parameters belong to SIMT kernels",
                ));
            }
            return Ok(ParamTy::Scalar(if last.ident == "KernelShape" {
                Ty::Shape
            } else {
                Ty::Strides
            }));
        }
        if let syn::Type::Path(p) = ty
            && p.qself.is_none()
            && let Some(last) = p.path.segments.last()
            && last.ident == "TensorMap"
        {
            if self.mode != Mode::Simt {
                return Err(Error::new(
                    ty.span(),
                    "`TensorMap` parameters belong to SIMT kernels",
                ));
            }
            return Ok(ParamTy::Scalar(Ty::TensorMap));
        }
        if let Some(t) = self.table_param_ty(ty)? {
            return Ok(t);
        }
        if let syn::Type::Reference(r) = ty {
            let syn::Type::Slice(s) = &*r.elem else {
                return Err(Error::new(
                    ty.span(),
                    "kernel buffers are slices: `&[T]` to read, `&mut [T]` to write",
                ));
            };
            if self.mode != Mode::Simt {
                return Err(Error::new(
                    ty.span(),
                    "elementwise and reduce kernels take scalars (`x: T`); buffers are for \
                     SIMT kernels (`#[kernel]` without a kind)",
                ));
            }
            if r.lifetime.is_some() {
                return Err(Error::new(ty.span(), "kernel buffers take no lifetime"));
            }
            if self.is_acc_path(&s.elem) {
                return Ok(ParamTy::Slice {
                    elem: Ty::Elem,
                    mutable: r.mutability.is_some(),
                    acc: true,
                });
            }
            let elem = self.scalar_ty(&s.elem)?;
            if elem == Ty::Bool {
                return Err(Error::new(
                    s.elem.span(),
                    "buffers of `bool` are not supported",
                ));
            }
            return Ok(ParamTy::Slice {
                elem,
                mutable: r.mutability.is_some(),
                acc: false,
            });
        }
        Ok(ParamTy::Scalar(self.scalar_ty(ty)?))
    }

    /// Whether `ty` is `T::Acc`, the compute type of the element type parameter (a buffer of
    /// it holds values that need no widening: row statistics of f16 data kept in f32).
    fn is_acc_path(&self, ty: &syn::Type) -> bool {
        matches!(ty, syn::Type::Path(p) if p.qself.is_none()
            && p.path.segments.len() == 2
            && p.path.segments[0].ident == self.generic
            && p.path.segments[1].ident == "Acc"
            && p.path.segments.iter().all(|s| s.arguments.is_none()))
    }

    /// Declares a parameter.
    pub fn declare_param(&mut self, p: &Param) -> Result<()> {
        match p.ty {
            ParamTy::Scalar(ty) => self.declare_scalar(&p.name, ty, false),
            ParamTy::Slice { elem, mutable, acc } => {
                let kind = match (mutable, acc) {
                    (false, false) => Buf::In,
                    (true, false) => Buf::Out,
                    (false, true) => Buf::AccIn,
                    (true, true) => Buf::AccOut,
                };
                self.declare_buf(&p.name, kind, elem)
            }
            ParamTy::Table { mutable, acc } => {
                self.declare_table(&p.name, Buf::table_row(mutable, acc))
            }
            ParamTy::Array {
                elem, shared: true, ..
            } => self.declare_buf(&p.name, Buf::Shared, elem),
            ParamTy::Array { elem, mutable, .. } => {
                self.declare(&p.name, Var::Local { elem, mutable })
            }
        }
    }

    /// A function body or a block expression, in a new scope.
    pub fn block(&mut self, b: &syn::Block) -> Result<Block> {
        self.scopes.push(HashMap::new());
        let out = self.block_inner(b);
        self.scopes.pop();
        out
    }

    fn block_inner(&mut self, b: &syn::Block) -> Result<Block> {
        let mut out = Block::default();
        let n = b.stmts.len();
        for (i, stmt) in b.stmts.iter().enumerate() {
            match stmt {
                syn::Stmt::Local(local) => {
                    if let Some(s) = self.local(local)? {
                        out.stmts.push(s);
                    }
                }
                syn::Stmt::Expr(e, semi) => {
                    if i + 1 == n && semi.is_none() {
                        let e = self.stmt_expr(e)?;
                        match e {
                            Stmt::Expr(e) if e.ty != Ty::Unit => out.tail = Some(Box::new(e)),
                            other => out.stmts.push(other),
                        }
                    } else {
                        let mut s = self.stmt_expr(e)?;
                        // A call as a statement: its value, if any, is not used.
                        if let Stmt::Expr(e) = &mut s
                            && let ExprKind::Call(c) = &mut e.kind
                            && c.open
                        {
                            c.open = false;
                            e.ty = Ty::Unit;
                        }
                        out.stmts.push(s);
                    }
                }
                syn::Stmt::Item(syn::Item::Const(c)) => self.const_item(c)?,
                syn::Stmt::Item(item) => {
                    return Err(unsupported(
                        item.span(),
                        "items (fn, struct, use, ...) inside a kernel",
                    ));
                }
                syn::Stmt::Macro(m) => {
                    return Err(unsupported(m.span(), "macros inside a kernel"));
                }
            }
        }
        Ok(out)
    }

    fn local(&mut self, local: &syn::Local) -> Result<Option<Stmt>> {
        let shared = local.attrs.iter().any(|a| a.path().is_ident("shared"));
        for a in &local.attrs {
            if !a.path().is_ident("shared") {
                return Err(Error::new(
                    a.span(),
                    "the only attribute on a kernel `let` is `#[shared]`",
                ));
            }
        }
        let (pat, ty) = match &local.pat {
            syn::Pat::Type(pt) => (&*pt.pat, Some(&*pt.ty)),
            other => (other, None),
        };
        let syn::Pat::Ident(pi) = pat else {
            return Err(unsupported(
                pat.span(),
                "patterns other than a plain name in `let`",
            ));
        };
        if pi.by_ref.is_some() || pi.subpat.is_some() {
            return Err(unsupported(pat.span(), "`ref` and `@` patterns"));
        }
        let name = pi.ident.clone();
        if shared {
            return self.shared_decl(local, &name, ty).map(|()| None);
        }
        let repeat = local
            .init
            .as_ref()
            .is_some_and(|i| matches!(strip_parens(&i.expr), syn::Expr::Repeat(_)));
        if repeat || matches!(ty, Some(syn::Type::Array(_))) {
            return self
                .local_array(local, &name, pi.mutability.is_some(), ty)
                .map(Some);
        }
        if let Some(init) = &local.init
            && let Some((_, diverge)) = &init.diverge
        {
            return Err(unsupported(diverge.span(), "`let ... else`"));
        }
        // `let old = atomic_add(&mut buf[i], v);`: the element's value before the add.
        if let Some(init) = &local.init
            && let syn::Expr::Call(c) = strip_parens(&init.expr)
            && is_call_to(c, "atomic_add")
        {
            let Stmt::AtomicAdd {
                buf,
                kind,
                ty: elem,
                index,
                value,
                ..
            } = self.atomic_add(c)?
            else {
                unreachable!("atomic_add parses to an atomic add")
            };
            if let Some(t) = ty
                && self.scalar_ty(t)? != elem
            {
                return Err(Error::new(
                    t.span(),
                    format!(
                        "atomic_add gives the element's old value, a `{}`",
                        elem.name()
                    ),
                ));
            }
            self.declare_scalar(&name, elem, pi.mutability.is_some())?;
            return Ok(Some(Stmt::AtomicAdd {
                buf,
                kind,
                ty: elem,
                index,
                value,
                old: Some(name),
            }));
        }
        let declared = ty.map(|t| self.scalar_ty(t)).transpose()?;
        let init = match &local.init {
            Some(init) => Some(self.expr(&init.expr)?),
            None => None,
        };
        let (ty, init) = match (declared, init) {
            (Some(ty), Some(e)) => (ty, Some(coerce(e, ty)?)),
            (Some(ty), None) => (ty, None),
            (None, Some(e)) => {
                if e.ty == Ty::Unit {
                    return Err(Error::new(e.span, "this `let` binds a value of type `()`"));
                }
                let ty = e.ty;
                (ty, Some(coerce(e, ty)?))
            }
            (None, None) => {
                return Err(Error::new(
                    name.span(),
                    format!("`let {name};` needs a type in a kernel: `let {name}: T;`"),
                ));
            }
        };
        self.declare_scalar(&name, ty, pi.mutability.is_some())?;
        Ok(Some(Stmt::Let {
            name,
            mutable: pi.mutability.is_some(),
            ty,
            init,
        }))
    }

    fn shared_decl(
        &mut self,
        local: &syn::Local,
        name: &Ident,
        ty: Option<&syn::Type>,
    ) -> Result<()> {
        if self.mode != Mode::Simt {
            return Err(Error::new(
                local.span(),
                "`#[shared]` arrays belong to SIMT kernels",
            ));
        }
        if self.device.is_some() {
            return Err(Error::new(
                local.span(),
                format!(
                    "a device function declares no shared array: the kernel does, and passes \
                     it as a parameter (`#[shared] {name}: &mut [T; 32]`, called with `&mut {name}`)"
                ),
            ));
        }
        if self.scopes.len() != 2 {
            return Err(Error::new(
                local.span(),
                "`#[shared]` arrays are declared at the top level of the kernel body (they \
                 exist once per block, like CUDA's `__shared__`)",
            ));
        }
        if local.init.is_some() {
            return Err(Error::new(
                local.span(),
                "a `#[shared]` array has no initializer: its contents are undefined until \
                 threads write them",
            ));
        }
        let Some(syn::Type::Array(arr)) = ty else {
            return Err(Error::new(
                local.span(),
                format!("declare a shared array as `#[shared] let {name}: [T; 256];`"),
            ));
        };
        let elem = self.scalar_ty(&arr.elem)?;
        if elem == Ty::Bool {
            return Err(Error::new(
                arr.elem.span(),
                "shared arrays of `bool` are not supported",
            ));
        }
        let len = self.const_len(&arr.len)?;
        self.declare_buf(name, Buf::Shared, elem)?;
        self.shared.push(Shared {
            name: name.clone(),
            elem,
            len,
        });
        Ok(())
    }

    /// An expression in statement position: assignments, loops and the intrinsics that are
    /// statements are only accepted here.
    fn stmt_expr(&mut self, e: &syn::Expr) -> Result<Stmt> {
        match e {
            syn::Expr::Assign(a) => {
                let (place, ty) = self.place(&a.left)?;
                let value = coerce(self.expr(&a.right)?, ty)?;
                Ok(Stmt::Assign {
                    place,
                    op: None,
                    value,
                })
            }
            syn::Expr::Binary(b) if compound_op(&b.op).is_some() => {
                let op = compound_op(&b.op).unwrap_or(BinOp::Add);
                let (place, ty) = self.place(&b.left)?;
                let value = self.expr(&b.right)?;
                let value = if matches!(op, BinOp::Shl | BinOp::Shr) {
                    int_operand(value, op)?
                } else {
                    check_arith(op, ty, self.elem, b.op.span())?;
                    coerce(value, ty)?
                };
                Ok(Stmt::Assign {
                    place,
                    op: Some(op),
                    value,
                })
            }
            syn::Expr::ForLoop(f) => self.for_loop(f),
            syn::Expr::While(w) => {
                if w.label.is_some() {
                    return Err(unsupported(w.span(), "loop labels"));
                }
                if let syn::Expr::Let(l) = &*w.cond {
                    return Err(unsupported(l.span(), "`while let`"));
                }
                let cond = coerce(self.expr(&w.cond)?, Ty::Bool)?;
                self.loops += 1;
                let body = self.block(&w.body);
                self.loops -= 1;
                Ok(Stmt::While { cond, body: body? })
            }
            syn::Expr::Loop(l) => {
                if l.label.is_some() {
                    return Err(unsupported(l.span(), "loop labels"));
                }
                self.loops += 1;
                let body = self.block(&l.body);
                self.loops -= 1;
                Ok(Stmt::Loop(body?))
            }
            syn::Expr::Break(b) => {
                if b.label.is_some() || b.expr.is_some() {
                    return Err(unsupported(b.span(), "`break` with a label or a value"));
                }
                if self.loops == 0 {
                    return Err(Error::new(b.span(), "`break` outside a loop"));
                }
                Ok(Stmt::Break)
            }
            syn::Expr::Continue(c) => {
                if c.label.is_some() {
                    return Err(unsupported(c.span(), "loop labels"));
                }
                if self.loops == 0 {
                    return Err(Error::new(c.span(), "`continue` outside a loop"));
                }
                Ok(Stmt::Continue)
            }
            syn::Expr::Return(r) => {
                if self.mode != Mode::Simt {
                    return Err(Error::new(
                        r.span(),
                        "`return` is not supported in elementwise and reduce kernels: the \
                         value is the body's final expression",
                    ));
                }
                if let Some(ret) = self.device.filter(|t| *t != Ty::Unit) {
                    return Err(Error::new(
                        r.span(),
                        format!(
                            "a device function returning `{}` gives its value as the body's final \
                             expression; `return;` belongs to SIMT kernels and device functions \
                             returning nothing",
                            ret.name()
                        ),
                    ));
                }
                if let Some(v) = &r.expr {
                    return Err(Error::new(
                        v.span(),
                        "a SIMT kernel returns nothing: `return;`",
                    ));
                }
                Ok(Stmt::Return)
            }
            syn::Expr::Call(c) if is_call_to(c, "atomic_add") => self.atomic_add(c),
            other => Ok(Stmt::Expr(self.expr(other)?)),
        }
    }

    fn for_loop(&mut self, f: &syn::ExprForLoop) -> Result<Stmt> {
        if f.label.is_some() {
            return Err(unsupported(f.span(), "loop labels"));
        }
        let syn::Pat::Ident(pi) = &*f.pat else {
            return Err(unsupported(
                f.pat.span(),
                "patterns other than a name in `for`",
            ));
        };
        if pi.mutability.is_some() || pi.by_ref.is_some() || pi.subpat.is_some() {
            return Err(unsupported(f.pat.span(), "a `mut`/`ref` loop variable"));
        }
        let (range, step) = match &*f.expr {
            syn::Expr::MethodCall(m) if m.method == "step_by" && m.args.len() == 1 => {
                let step = coerce(self.expr(&m.args[0])?, Ty::Usize)?;
                (strip_parens(&m.receiver), Some(step))
            }
            other => (other, None),
        };
        let syn::Expr::Range(r) = range else {
            return Err(unsupported(
                f.expr.span(),
                "`for` over anything but a range `a..b` or `(a..b).step_by(s)`",
            ));
        };
        let (Some(start), Some(end), syn::RangeLimits::HalfOpen(_)) = (&r.start, &r.end, &r.limits)
        else {
            return Err(unsupported(r.span(), "ranges other than `a..b`"));
        };
        let (mut start, mut end) = (self.expr(start)?, self.expr(end)?);
        let ty = unify(&mut start, &mut end, r.span())?;
        if !ty.is_int() {
            return Err(Error::new(r.span(), "a `for` range is over integers"));
        }
        let ty = if is_untyped_int(&start) && is_untyped_int(&end) {
            Ty::Usize
        } else {
            ty
        };
        let (start, end) = (coerce(start, ty)?, coerce(end, ty)?);
        self.scopes.push(HashMap::new());
        self.loops += 1;
        let body = self
            .declare_scalar(&pi.ident, ty, false)
            .and_then(|()| self.block(&f.body));
        self.loops -= 1;
        self.scopes.pop();
        Ok(Stmt::For {
            var: pi.ident.clone(),
            ty,
            start,
            end,
            step,
            body: body?,
        })
    }

    fn atomic_add(&mut self, c: &syn::ExprCall) -> Result<Stmt> {
        self.need_simt(c.span(), "atomic_add")?;
        self.crosses_blocks = true;
        let usage = "use it as `atomic_add(&mut buf[i], v);`";
        if c.args.len() != 2 {
            return Err(Error::new(
                c.span(),
                format!("atomic_add takes two arguments: {usage}"),
            ));
        }
        let syn::Expr::Reference(r) = &c.args[0] else {
            return Err(Error::new(c.args[0].span(), usage));
        };
        if r.mutability.is_none() {
            return Err(Error::new(r.span(), usage));
        }
        let (place, ty) = self.place(&r.expr)?;
        let Place::Index(buf, kind, _, index) = place else {
            return Err(Error::new(
                r.expr.span(),
                format!("atomic_add updates a buffer element: {usage}"),
            ));
        };
        if kind == Buf::Local {
            return Err(Error::new(
                r.expr.span(),
                "a local array belongs to one thread: update it with `v[k] += x;`, not atomic_add",
            ));
        }
        if ty == Ty::Bool {
            return Err(Error::new(
                r.span(),
                "atomic_add on `bool` is not supported",
            ));
        }
        let value = coerce(self.expr(&c.args[1])?, ty)?;
        Ok(Stmt::AtomicAdd {
            buf,
            kind,
            ty,
            index,
            value,
            old: None,
        })
    }

    fn place(&mut self, e: &syn::Expr) -> Result<(Place, Ty)> {
        match strip_parens(e) {
            syn::Expr::Path(p) if p.path.get_ident().is_some() => {
                let id = p
                    .path
                    .get_ident()
                    .cloned()
                    .unwrap_or_else(|| Ident::new("_", p.span()));
                match self.lookup(&id)? {
                    Var::Scalar { ty, mutable: true } => Ok((Place::Var(id), ty)),
                    Var::Scalar { .. } => Err(Error::new(
                        id.span(),
                        format!("cannot assign twice to `{id}`: declare it with `let mut {id}`"),
                    )),
                    Var::Buf { .. } | Var::Local { .. } => Err(Error::new(
                        id.span(),
                        format!("assign to an element of `{id}`: `{id}[i] = ...`"),
                    )),
                    Var::Const { .. } => Err(Error::new(
                        id.span(),
                        format!("cannot assign to the constant `{id}`"),
                    )),
                    Var::Table { .. } => Err(table::row_error(&id)),
                }
            }
            syn::Expr::Index(ix) => {
                if let Some(place) = self.table_place(ix)? {
                    return Ok(place);
                }
                let (buf, kind, elem) = self.buffer(&ix.expr)?;
                if let Ok(Var::Local { mutable: false, .. }) = self.lookup(&buf) {
                    return Err(Error::new(
                        ix.expr.span(),
                        format!(
                            "cannot assign to an element of `{buf}`: declare it `let mut {buf}`"
                        ),
                    ));
                }
                if matches!(kind, Buf::In | Buf::AccIn) {
                    return Err(Error::new(
                        ix.expr.span(),
                        format!(
                            "`{buf}` is read-only (`&[_]`): declare it `&mut [_]` to write to it"
                        ),
                    ));
                }
                let index = coerce(self.expr(&ix.index)?, Ty::Usize)?;
                Ok((Place::Index(buf, kind, elem, index), elem))
            }
            other => Err(unsupported(other.span(), "assigning to this expression")),
        }
    }

    fn buffer(&self, e: &syn::Expr) -> Result<(Ident, Buf, Ty)> {
        if let syn::Expr::Path(p) = strip_parens(e)
            && let Some(id) = p.path.get_ident()
        {
            return match self.lookup(id)? {
                Var::Buf { kind, elem } => Ok((id.clone(), kind, elem)),
                Var::Local { elem, .. } => Ok((id.clone(), Buf::Local, elem)),
                Var::Scalar { .. } | Var::Const { .. } => Err(Error::new(
                    id.span(),
                    format!("`{id}` is a scalar, not a buffer"),
                )),
                Var::Table { .. } => Err(table::row_error(id)),
            };
        }
        Err(unsupported(
            e.span(),
            "indexing anything but a buffer parameter, a shared array or a local array",
        ))
    }

    fn need_simt(&self, span: Span, what: &str) -> Result<()> {
        if self.mode != Mode::Simt {
            return Err(Error::new(
                span,
                format!(
                    "`{what}` belongs to SIMT kernels (`#[kernel]` without a kind), not to elementwise or reduce kernels"
                ),
            ));
        }
        Ok(())
    }

    /// An expression with a value.
    pub fn expr(&mut self, e: &syn::Expr) -> Result<Expr> {
        let span = e.span();
        match e {
            syn::Expr::Lit(l) => lit(&l.lit),
            syn::Expr::Paren(p) => self.expr(&p.expr),
            syn::Expr::Group(g) => self.expr(&g.expr),
            syn::Expr::Path(p) => self.path(p),
            syn::Expr::Unary(u) => {
                let inner = self.expr(&u.expr)?;
                match u.op {
                    syn::UnOp::Neg(_) => {
                        if inner.ty == Ty::Elem && self.elem == ElemKind::Element {
                            return Err(Error::new(
                                span,
                                format!(
                                    "cannot negate a `{}`: arithmetic on the element type needs \
                                     `{0}: Num` (this kernel is over `{0}: Element`)",
                                    self.generic
                                ),
                            ));
                        }
                        if !(inner.ty.is_signed() || is_untyped_int(&inner)) {
                            return Err(Error::new(
                                span,
                                format!("cannot negate a `{}`", inner.ty.name()),
                            ));
                        }
                        Ok(Expr::new(
                            ExprKind::Unary(UnOp::Neg, Box::new(inner.clone())),
                            inner.ty,
                            span,
                        ))
                    }
                    syn::UnOp::Not(_) => {
                        if !(inner.ty == Ty::Bool || inner.ty.is_int()) {
                            return Err(Error::new(
                                span,
                                format!("cannot apply `!` to a `{}`", inner.ty.name()),
                            ));
                        }
                        let ty = inner.ty;
                        Ok(Expr::new(
                            ExprKind::Unary(UnOp::Not, Box::new(inner)),
                            ty,
                            span,
                        ))
                    }
                    _ => Err(unsupported(span, "dereferencing")),
                }
            }
            syn::Expr::Binary(b) => {
                let Some(op) = bin_op(&b.op) else {
                    return Err(Error::new(
                        b.op.span(),
                        "compound assignment is a statement: end it with `;`",
                    ));
                };
                let mut l = self.expr(&b.left)?;
                let mut r = self.expr(&b.right)?;
                if matches!(op, BinOp::And | BinOp::Or) {
                    let (l, r) = (coerce(l, Ty::Bool)?, coerce(r, Ty::Bool)?);
                    return Ok(Expr::new(
                        ExprKind::Binary(op, Box::new(l), Box::new(r)),
                        Ty::Bool,
                        span,
                    ));
                }
                if matches!(op, BinOp::Shl | BinOp::Shr) {
                    if !l.ty.is_int() {
                        return Err(Error::new(span, "shifts are on integers"));
                    }
                    let r = int_operand(r, op)?;
                    let ty = l.ty;
                    return Ok(Expr::new(
                        ExprKind::Binary(op, Box::new(l), Box::new(r)),
                        ty,
                        span,
                    ));
                }
                let ty = unify(&mut l, &mut r, b.op.span())?;
                if !ty.is_value() {
                    return Err(Error::new(
                        span,
                        format!("`{}` values take no operators", ty.name()),
                    ));
                }
                let out_ty = if op.is_cmp() {
                    Ty::Bool
                } else {
                    check_arith(op, ty, self.elem, b.op.span())?;
                    ty
                };
                Ok(Expr::new(
                    ExprKind::Binary(op, Box::new(l), Box::new(r)),
                    out_ty,
                    span,
                ))
            }
            syn::Expr::MethodCall(m) => self.method(m),
            syn::Expr::Call(c) => self.call(c),
            syn::Expr::Index(ix) => {
                if let Some(load) = self.table_load(ix)? {
                    return Ok(load);
                }
                let (buf, kind, elem) = self.buffer(&ix.expr)?;
                let index = coerce(self.expr(&ix.index)?, Ty::Usize)?;
                Ok(Expr::new(
                    ExprKind::Load(buf, kind, elem, Box::new(index)),
                    elem,
                    span,
                ))
            }
            syn::Expr::Cast(c) => {
                let to = self.scalar_ty(&c.ty)?;
                let mut from = self.expr(&c.expr)?;
                if matches!(&from.kind, ExprKind::Call(k) if k.open) {
                    return Err(Error::new(
                        c.expr.span(),
                        "a call's type is `T` unless its context says otherwise: name its value \
                         with a type before converting it (`let w: u32 = f(..);`, then `w as u64`)",
                    ));
                }
                if to == Ty::F64 && is_untyped_float(&from) {
                    retype_float(&mut from);
                    return Ok(from);
                }
                let ok = match (from.ty, to) {
                    (f, _) if !f.is_value() => false,
                    (_, Ty::Bool) => false,
                    (Ty::Bool, t) => t.is_int(),
                    _ => true,
                };
                if !ok {
                    return Err(Error::new(
                        span,
                        format!("cannot cast `{}` to `{}`", from.ty.name(), to.name()),
                    ));
                }
                let from = if is_untyped_int(&from) {
                    coerce(from, Ty::I64)?
                } else {
                    from
                };
                Ok(Expr::new(ExprKind::Cast(Box::new(from)), to, span))
            }
            syn::Expr::If(i) => self.if_expr(i),
            syn::Expr::Block(b) => {
                if b.label.is_some() {
                    return Err(unsupported(span, "labeled blocks"));
                }
                let block = self.block(&b.block)?;
                let ty = block.tail.as_ref().map_or(Ty::Unit, |t| t.ty);
                Ok(Expr::new(ExprKind::Block(block), ty, span))
            }
            syn::Expr::Closure(_) => Err(unsupported(span, "closures")),
            syn::Expr::Unsafe(_) => Err(unsupported(span, "`unsafe` blocks")),
            syn::Expr::Macro(_) => Err(unsupported(span, "macros")),
            syn::Expr::Reference(_) => Err(unsupported(
                span,
                "references (except `&mut buf[i]` in `atomic_add`)",
            )),
            syn::Expr::Return(_) => Err(unsupported(
                span,
                "`return` in this position (only `return;` as a statement of a SIMT kernel)",
            )),
            syn::Expr::Assign(_)
            | syn::Expr::ForLoop(_)
            | syn::Expr::While(_)
            | syn::Expr::Loop(_) => Err(unsupported(span, "this statement in expression position")),
            syn::Expr::Field(_) => Err(unsupported(span, "field access")),
            syn::Expr::Tuple(_) | syn::Expr::Array(_) | syn::Expr::Struct(_) => {
                Err(unsupported(span, "tuples, arrays and structs as values"))
            }
            syn::Expr::Match(_) => Err(unsupported(span, "`match` (use `if`/`else`)")),
            _ => Err(unsupported(span, "this expression")),
        }
    }

    fn if_expr(&mut self, i: &syn::ExprIf) -> Result<Expr> {
        let span = i.if_token.span;
        if let syn::Expr::Let(l) = &*i.cond {
            return Err(unsupported(l.span(), "`if let`"));
        }
        let cond = coerce(self.expr(&i.cond)?, Ty::Bool)?;
        let mut then = self.block(&i.then_branch)?;
        let mut els = match &i.else_branch {
            None => Block::default(),
            Some((_, e)) => match &**e {
                syn::Expr::Block(b) => self.block(&b.block)?,
                other => {
                    let e = self.expr(other)?;
                    if e.ty == Ty::Unit {
                        Block {
                            stmts: vec![Stmt::Expr(e)],
                            tail: None,
                        }
                    } else {
                        Block {
                            stmts: vec![],
                            tail: Some(Box::new(e)),
                        }
                    }
                }
            },
        };
        let ty = match (then.tail.as_deref_mut(), els.tail.as_deref_mut()) {
            (None, None) => Ty::Unit,
            (Some(a), Some(b)) => unify(a, b, span)?,
            (Some(t), None) | (None, Some(t)) => {
                return Err(Error::new(
                    t.span,
                    "an `if` with a value needs both branches to end in a value of the same type",
                ));
            }
        };
        if let (Some(a), Some(b)) = (then.tail.as_deref_mut(), els.tail.as_deref_mut())
            && is_untyped_int(a)
            && is_untyped_int(b)
        {
            retype(a, Ty::Usize);
            retype(b, Ty::Usize);
        }
        Ok(Expr::new(ExprKind::If(Box::new(cond), then, els), ty, span))
    }
}

fn check_name(name: &Ident) -> Result<()> {
    if name.to_string().starts_with("__rtx") {
        return Err(Error::new(
            name.span(),
            "names starting with `__rtx` are reserved for generated code",
        ));
    }
    Ok(())
}

fn is_call_to(c: &syn::ExprCall, name: &str) -> bool {
    matches!(&*c.func, syn::Expr::Path(p) if p.path.is_ident(name))
}

fn strip_parens(e: &syn::Expr) -> &syn::Expr {
    match e {
        syn::Expr::Paren(p) => strip_parens(&p.expr),
        syn::Expr::Group(g) => strip_parens(&g.expr),
        other => other,
    }
}
