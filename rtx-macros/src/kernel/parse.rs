//! Parses and type-checks a `#[kernel]` function into the IR, rejecting everything outside
//! the subset with a `syn::Error` at the offending span that says what is supported.
//!
//! Invariant: parsing never panics; every rejected construct becomes an error, and every
//! accepted expression has a type the code generators can rely on.

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
comparisons and `&&`/`||`, math methods (`x.exp()`, `ln`, `ln_1p`, `sqrt`, `sin`, `cos`, \
`tanh`, `erf`, `abs`, `recip`, `a.max(b)`, `min`, `powi`, `powf`), `as` casts between `T`, \
`usize`, `i32`, `u32` and `i64`, `T::INFINITY`/`T::NEG_INFINITY`/`T::NAN`, `if`/`else`, \
blocks, loops (`for i in a..b`, `(a..b).step_by(s)`, `while`, `loop`) and, in SIMT kernels, \
indexing buffers, `return;` and the intrinsics (`thread_idx_x()`, `block_idx_x()`, \
`block_dim_x()`, `grid_dim_x()` and their `_y`/`_z` forms, `lane_id()`, `sync_threads()`, \
`warp_shuffle_down(v, offset)`, `warp_shuffle_xor(v, mask)`, `atomic_add(&mut buf[i], v)`)";

fn unsupported(span: Span, what: &str) -> Error {
    Error::new(
        span,
        format!("`#[kernel]` does not support {what}: {SUPPORTED}"),
    )
}

#[derive(Clone, Copy)]
enum Var {
    Scalar { ty: Ty, mutable: bool },
    Buf { kind: Buf, elem: Ty },
}

/// The parser's state: scopes of names, and what the body turned out to use.
pub struct Parser {
    mode: Mode,
    generic: Ident,
    scopes: Vec<HashMap<String, Var>>,
    pub shared: Vec<Shared>,
    pub uses_sync: bool,
    loops: usize,
}

impl Parser {
    pub fn new(mode: Mode, generic: Ident) -> Self {
        Parser {
            mode,
            generic,
            scopes: vec![HashMap::new()],
            shared: Vec::new(),
            uses_sync: false,
            loops: 0,
        }
    }

    /// Declares a name in the innermost scope.
    pub fn declare_scalar(&mut self, name: &Ident, ty: Ty, mutable: bool) -> Result<()> {
        check_name(name)?;
        if let Some(scope) = self.scopes.last_mut() {
            scope.insert(name.to_string(), Var::Scalar { ty, mutable });
        }
        Ok(())
    }

    fn declare_buf(&mut self, name: &Ident, kind: Buf, elem: Ty) -> Result<()> {
        check_name(name)?;
        if let Some(scope) = self.scopes.last_mut() {
            scope.insert(name.to_string(), Var::Buf { kind, elem });
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

    /// A scalar type: `T` (the element type parameter), `usize`, `i32`, `u32`, `i64`, `bool`.
    pub fn scalar_ty(&self, ty: &syn::Type) -> Result<Ty> {
        if let syn::Type::Path(p) = ty
            && p.qself.is_none()
            && let Some(id) = p.path.get_ident()
        {
            if *id == self.generic {
                return Ok(Ty::Elem);
            }
            match id.to_string().as_str() {
                "usize" => return Ok(Ty::Usize),
                "i32" => return Ok(Ty::I32),
                "u32" => return Ok(Ty::U32),
                "i64" => return Ok(Ty::I64),
                "bool" => return Ok(Ty::Bool),
                "f32" | "f64" | "f16" | "bf16" => {
                    return Err(Error::new(
                        id.span(),
                        format!(
                            "`{id}` in a kernel: write the element type parameter `{}` instead; \
                             the kernel is instantiated for f32, f64, f16 and bf16 and computes \
                             in f32 (f64 for f64)",
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
                "unsupported type in a kernel: scalars are `{}` (the element type), `usize`, \
                 `i32`, `u32`, `i64` and `bool`",
                self.generic
            ),
        ))
    }

    /// A parameter type: a scalar, or (SIMT only) `&[E]` / `&mut [E]`.
    pub fn param_ty(&self, ty: &syn::Type) -> Result<ParamTy> {
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
                        out.stmts.push(self.stmt_expr(e)?);
                    }
                }
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
        if let Some(init) = &local.init
            && let Some((_, diverge)) = &init.diverge
        {
            return Err(unsupported(diverge.span(), "`let ... else`"));
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
        let len = match &arr.len {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Int(i),
                ..
            }) => i.base10_parse::<usize>()?,
            other => {
                return Err(Error::new(
                    other.span(),
                    "the length of a shared array is an integer literal",
                ));
            }
        };
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
                    check_arith(op, ty, b.op.span())?;
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
                    Var::Buf { .. } => Err(Error::new(
                        id.span(),
                        format!("assign to an element of `{id}`: `{id}[i] = ...`"),
                    )),
                }
            }
            syn::Expr::Index(ix) => {
                let (buf, kind, elem) = self.buffer(&ix.expr)?;
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
                Var::Scalar { .. } => Err(Error::new(
                    id.span(),
                    format!("`{id}` is a scalar, not a buffer"),
                )),
            };
        }
        Err(unsupported(
            e.span(),
            "indexing anything but a buffer parameter or shared array",
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
                let out_ty = if op.is_cmp() {
                    if ty == Ty::Unit {
                        return Err(Error::new(span, "cannot compare `()`"));
                    }
                    Ty::Bool
                } else {
                    check_arith(op, ty, b.op.span())?;
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
                let from = self.expr(&c.expr)?;
                let ok = match (from.ty, to) {
                    (Ty::Unit, _) | (_, Ty::Bool) => false,
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

    fn path(&self, p: &syn::ExprPath) -> Result<Expr> {
        let span = p.span();
        if p.qself.is_none()
            && let Some(id) = p.path.get_ident()
        {
            return match self.lookup(id)? {
                Var::Scalar { ty, .. } => Ok(Expr::var(id.clone(), ty)),
                Var::Buf { .. } => Err(Error::new(
                    span,
                    format!("buffer `{id}` can only be indexed: `{id}[i]`"),
                )),
            };
        }
        let segs: Vec<String> = p
            .path
            .segments
            .iter()
            .map(|s| s.ident.to_string())
            .collect();
        if p.qself.is_none() && segs.len() == 2 && self.generic == segs[0] {
            let c = match segs[1].as_str() {
                "INFINITY" => Some(FConst::Inf),
                "NEG_INFINITY" => Some(FConst::NegInf),
                "NAN" => Some(FConst::Nan),
                _ => None,
            };
            if let Some(c) = c {
                return Ok(Expr::new(ExprKind::Const(c), Ty::Elem, span));
            }
        }
        Err(unsupported(
            span,
            "paths to items other than `T::INFINITY`, `T::NEG_INFINITY` and `T::NAN`",
        ))
    }

    fn method(&mut self, m: &syn::ExprMethodCall) -> Result<Expr> {
        let span = m.span();
        let name = m.method.to_string();
        let Some(&(_, f, arity)) = MathFn::ALL.iter().find(|(n, _, _)| *n == name) else {
            return Err(unsupported(
                m.method.span(),
                &format!("the method `{name}`"),
            ));
        };
        if m.turbofish.is_some() {
            return Err(unsupported(span, "turbofish on a method"));
        }
        if m.args.len() != arity {
            return Err(Error::new(
                span,
                format!("`{name}` takes {arity} argument(s)"),
            ));
        }
        let recv = self.expr(&m.receiver)?;
        let int_ok = matches!(f, MathFn::Max | MathFn::Min) && recv.ty.is_int();
        if recv.ty != Ty::Elem && !int_ok {
            return Err(Error::new(
                m.receiver.span(),
                format!(
                    "`{name}` is a method of `{}` values, not of `{}`",
                    self.generic,
                    recv.ty.name()
                ),
            ));
        }
        let mut args = vec![recv];
        for a in &m.args {
            let e = self.expr(a)?;
            let want = if f == MathFn::Powi {
                Ty::I32
            } else {
                args[0].ty
            };
            args.push(coerce(e, want)?);
        }
        let ty = args[0].ty;
        Ok(Expr::new(ExprKind::Math(f, args), ty, span))
    }

    fn call(&mut self, c: &syn::ExprCall) -> Result<Expr> {
        let span = c.span();
        let syn::Expr::Path(p) = &*c.func else {
            return Err(unsupported(span, "calling this expression"));
        };
        let Some(id) = p.path.get_ident() else {
            return Err(unsupported(
                span,
                "calls to functions other than the SIMT intrinsics",
            ));
        };
        let name = id.to_string();
        let index = INDEX_INTRINSICS.iter().find(|(n, _)| *n == name);
        let (intr, nargs) = match name.as_str() {
            _ if index.is_some() => {
                let (n, cuda) = index.copied().unwrap_or(("", ""));
                (Intrinsic::Index(n, cuda), 0)
            }
            "lane_id" => (Intrinsic::LaneId, 0),
            "sync_threads" => (Intrinsic::SyncThreads, 0),
            "warp_shuffle_down" => (Intrinsic::ShuffleDown, 2),
            "warp_shuffle_xor" => (Intrinsic::ShuffleXor, 2),
            "atomic_add" => {
                return Err(Error::new(
                    span,
                    "`atomic_add(&mut buf[i], v)` is a statement: end it with `;`",
                ));
            }
            _ => {
                let hint = if self.mode == Mode::Scalar {
                    " (math is written as methods: `x.exp()`)"
                } else {
                    ""
                };
                return Err(unsupported(span, &format!("calls to `{name}`{hint}")));
            }
        };
        self.need_simt(span, &name)?;
        if c.args.len() != nargs {
            return Err(Error::new(
                span,
                format!("`{name}` takes {nargs} argument(s)"),
            ));
        }
        let mut args = Vec::new();
        for a in &c.args {
            args.push(self.expr(a)?);
        }
        let ty = match intr {
            Intrinsic::Index(..) | Intrinsic::LaneId => Ty::Usize,
            Intrinsic::SyncThreads => {
                self.uses_sync = true;
                Ty::Unit
            }
            Intrinsic::ShuffleDown | Intrinsic::ShuffleXor => {
                self.uses_sync = true;
                let v = args.remove(0);
                let v = if is_untyped_int(&v) {
                    coerce(v, Ty::Usize)?
                } else {
                    v
                };
                if matches!(v.ty, Ty::Unit | Ty::Bool) {
                    return Err(Error::new(
                        v.span,
                        "warp shuffles move `T` and integer values",
                    ));
                }
                let off = coerce(args.remove(0), Ty::U32)?;
                args = vec![v, off];
                args[0].ty
            }
        };
        Ok(Expr::new(ExprKind::Intrinsic(intr, args), ty, span))
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

/// `thread_idx_x()` and friends, with the CUDA expression each becomes.
pub const INDEX_INTRINSICS: &[(&str, &str)] = &[
    ("thread_idx_x", "threadIdx.x"),
    ("thread_idx_y", "threadIdx.y"),
    ("thread_idx_z", "threadIdx.z"),
    ("block_idx_x", "blockIdx.x"),
    ("block_idx_y", "blockIdx.y"),
    ("block_idx_z", "blockIdx.z"),
    ("block_dim_x", "blockDim.x"),
    ("block_dim_y", "blockDim.y"),
    ("block_dim_z", "blockDim.z"),
    ("grid_dim_x", "gridDim.x"),
    ("grid_dim_y", "gridDim.y"),
    ("grid_dim_z", "gridDim.z"),
];

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

fn lit(l: &syn::Lit) -> Result<Expr> {
    let span = l.span();
    match l {
        syn::Lit::Float(f) => {
            if !f.suffix().is_empty() {
                return Err(Error::new(
                    span,
                    "float literals in a kernel take no suffix: they have the kernel's compute type",
                ));
            }
            Ok(Expr::float(f.base10_parse::<f64>()?, span))
        }
        syn::Lit::Int(i) => {
            let v = i.base10_parse::<u64>()?;
            let (ty, untyped) = match i.suffix() {
                "" => (Ty::Usize, true),
                "usize" => (Ty::Usize, false),
                "i32" => (Ty::I32, false),
                "u32" => (Ty::U32, false),
                "i64" => (Ty::I64, false),
                other => {
                    return Err(Error::new(
                        span,
                        format!("integer suffix `{other}` is not supported (usize, i32, u32, i64)"),
                    ));
                }
            };
            Ok(Expr::new(ExprKind::Int(v, untyped), ty, span))
        }
        syn::Lit::Bool(b) => Ok(Expr::new(ExprKind::Bool(b.value), Ty::Bool, span)),
        _ => Err(unsupported(span, "this literal")),
    }
}

fn bin_op(op: &syn::BinOp) -> Option<BinOp> {
    use syn::BinOp as B;
    Some(match op {
        B::Add(_) => BinOp::Add,
        B::Sub(_) => BinOp::Sub,
        B::Mul(_) => BinOp::Mul,
        B::Div(_) => BinOp::Div,
        B::Rem(_) => BinOp::Rem,
        B::BitAnd(_) => BinOp::BitAnd,
        B::BitOr(_) => BinOp::BitOr,
        B::BitXor(_) => BinOp::BitXor,
        B::Shl(_) => BinOp::Shl,
        B::Shr(_) => BinOp::Shr,
        B::Eq(_) => BinOp::Eq,
        B::Ne(_) => BinOp::Ne,
        B::Lt(_) => BinOp::Lt,
        B::Le(_) => BinOp::Le,
        B::Gt(_) => BinOp::Gt,
        B::Ge(_) => BinOp::Ge,
        B::And(_) => BinOp::And,
        B::Or(_) => BinOp::Or,
        _ => return None,
    })
}

fn compound_op(op: &syn::BinOp) -> Option<BinOp> {
    use syn::BinOp as B;
    Some(match op {
        B::AddAssign(_) => BinOp::Add,
        B::SubAssign(_) => BinOp::Sub,
        B::MulAssign(_) => BinOp::Mul,
        B::DivAssign(_) => BinOp::Div,
        B::RemAssign(_) => BinOp::Rem,
        B::BitAndAssign(_) => BinOp::BitAnd,
        B::BitOrAssign(_) => BinOp::BitOr,
        B::BitXorAssign(_) => BinOp::BitXor,
        B::ShlAssign(_) => BinOp::Shl,
        B::ShrAssign(_) => BinOp::Shr,
        _ => return None,
    })
}

fn check_arith(op: BinOp, ty: Ty, span: Span) -> Result<()> {
    let ok = match op {
        BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div => ty == Ty::Elem || ty.is_int(),
        BinOp::Rem => ty.is_int(),
        BinOp::BitAnd | BinOp::BitOr | BinOp::BitXor => ty.is_int() || ty == Ty::Bool,
        _ => true,
    };
    if !ok {
        return Err(Error::new(
            span,
            format!(
                "`{}` is not supported on `{}` in a kernel",
                op.symbol(),
                ty.name()
            ),
        ));
    }
    Ok(())
}

fn int_operand(e: Expr, op: BinOp) -> Result<Expr> {
    let e = if is_untyped_int(&e) {
        coerce(e, Ty::U32)?
    } else {
        e
    };
    if !e.ty.is_int() {
        return Err(Error::new(
            e.span,
            format!("the right side of `{}` is an integer", op.symbol()),
        ));
    }
    Ok(e)
}

/// Whether `e` is an integer literal (possibly negated) whose type context decides.
pub fn is_untyped_int(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Int(_, untyped) => *untyped,
        ExprKind::Unary(UnOp::Neg, inner) => is_untyped_int(inner),
        _ => false,
    }
}

fn retype(e: &mut Expr, ty: Ty) {
    e.ty = ty;
    match &mut e.kind {
        ExprKind::Int(_, untyped) => *untyped = false,
        ExprKind::Unary(UnOp::Neg, inner) => retype(inner, ty),
        _ => {}
    }
}

/// Gives two operands one type, typing an integer literal by the other side.
fn unify(a: &mut Expr, b: &mut Expr, span: Span) -> Result<Ty> {
    if is_untyped_int(a) && b.ty.is_int() && !is_untyped_int(b) {
        retype(a, b.ty);
    } else if is_untyped_int(b) && a.ty.is_int() && !is_untyped_int(a) {
        retype(b, a.ty);
    }
    if a.ty == b.ty {
        return Ok(a.ty);
    }
    let hint = if (a.ty == Ty::Elem && is_untyped_int(b)) || (b.ty == Ty::Elem && is_untyped_int(a))
    {
        ": write a float literal such as `2.0`"
    } else if a.ty == Ty::Elem || b.ty == Ty::Elem {
        ": convert with `as T` (or `as usize`)"
    } else {
        ": convert one side with `as`"
    };
    Err(Error::new(
        span,
        format!(
            "mismatched types in a kernel: `{}` and `{}`{hint}",
            a.ty.name(),
            b.ty.name()
        ),
    ))
}

/// `e` as a value of type `ty` (typing an integer literal), or an error at `e`.
pub fn coerce(mut e: Expr, ty: Ty) -> Result<Expr> {
    if is_untyped_int(&e) && ty.is_int() {
        retype(&mut e, ty);
        return Ok(e);
    }
    if e.ty == ty {
        return Ok(e);
    }
    let hint = if ty == Ty::Elem && is_untyped_int(&e) {
        ": write a float literal such as `1.0`"
    } else {
        ""
    };
    Err(Error::new(
        e.span,
        format!("expected `{}`, found `{}`{hint}", ty.name(), e.ty.name()),
    ))
}
