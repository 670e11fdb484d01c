//! The parser's calls and paths: method calls (math on `T` and `f64`, integer methods, reads
//! of layout parameters), calls to the SIMT intrinsics, and the constants of `T`.

use super::typing::{coerce, is_untyped_int, unify};
use super::{Mode, Parser, Var, unsupported};
use crate::kernel::ir::*;
use syn::spanned::Spanned;
use syn::{Error, Result};

impl Parser {
    pub(super) fn path(&self, p: &syn::ExprPath) -> Result<Expr> {
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
                Var::Local { .. } => Err(Error::new(
                    span,
                    format!("local array `{id}` can only be indexed: `{id}[k]`"),
                )),
                Var::Const { value, ty } => Ok(Expr::new(ExprKind::Int(value, false), ty, span)),
                Var::Table { .. } => Err(super::table::row_error(id)),
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
                "LOWEST" => Some(FConst::Lowest),
                "HIGHEST" => Some(FConst::Highest),
                _ => None,
            };
            if let Some(c) = c {
                let float_only = matches!(c, FConst::Inf | FConst::NegInf | FConst::Nan);
                let needs = match self.elem {
                    ElemKind::Float => None,
                    ElemKind::Num if float_only => Some("Float"),
                    ElemKind::Num => None,
                    ElemKind::Element => Some(if float_only { "Float" } else { "Num" }),
                };
                if let Some(needs) = needs {
                    return Err(Error::new(
                        span,
                        format!(
                            "`{}::{}` needs `{0}: {needs}` (this kernel is over `{0}: {}`){}",
                            self.generic,
                            segs[1],
                            self.elem.bound(),
                            if float_only && self.elem == ElemKind::Num {
                                "; `T::LOWEST` and `T::HIGHEST` are the identities of max and min"
                            } else {
                                ""
                            }
                        ),
                    ));
                }
                return Ok(Expr::new(ExprKind::Const(c), Ty::Elem, span));
            }
        }
        Err(unsupported(
            span,
            "paths to items other than `T::INFINITY`, `T::NEG_INFINITY`, `T::NAN`, `T::LOWEST` \
             and `T::HIGHEST`",
        ))
    }

    pub(super) fn method(&mut self, m: &syn::ExprMethodCall) -> Result<Expr> {
        let span = m.span();
        let name = m.method.to_string();
        if let Some(&(_, f, on, arity)) = LAYOUT_FNS.iter().find(|(n, ..)| *n == name) {
            return self.layout_read(m, f, on, arity);
        }
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
        if f.is_int_op() {
            return self.int_method(m, f, recv);
        }
        let int_ok = matches!(f, MathFn::Max | MathFn::Min) && recv.ty.is_int();
        let elem_ok = match self.elem {
            ElemKind::Float => true,
            ElemKind::Num => matches!(f, MathFn::Max | MathFn::Min | MathFn::Abs),
            ElemKind::Element => false,
        };
        if recv.ty == Ty::Elem && !elem_ok {
            return Err(Error::new(
                m.method.span(),
                format!(
                    "`{name}` needs `{}: Float` (this kernel is over `{0}: {}`, which includes \
                     integer types)",
                    self.generic,
                    self.elem.bound()
                ),
            ));
        }
        if !matches!(recv.ty, Ty::Elem | Ty::F64) && !int_ok {
            return Err(Error::new(
                m.receiver.span(),
                format!(
                    "`{name}` is a method of `{}` and `f64` values, not of `{}`",
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

    /// `a.wrapping_add(b)` and the other integer methods: both sides one integer type.
    fn int_method(&mut self, m: &syn::ExprMethodCall, f: MathFn, recv: Expr) -> Result<Expr> {
        let name = f.name();
        let mut a = recv;
        let mut b = self.expr(&m.args[0])?;
        if !a.ty.is_int() && !is_untyped_int(&a) {
            return Err(Error::new(
                m.method.span(),
                format!(
                    "`{name}` is a method of integers (`u32`, `u64`, `usize`, `i32`, `i64`), not \
                     of `{}`",
                    if a.ty == Ty::Elem {
                        self.generic.to_string()
                    } else {
                        a.ty.name().to_string()
                    }
                ),
            ));
        }
        let ty = unify(&mut a, &mut b, m.span())?;
        if !ty.is_int() {
            return Err(Error::new(
                m.args[0].span(),
                format!("`{name}` takes an integer of the receiver's type"),
            ));
        }
        if is_untyped_int(&a) && is_untyped_int(&b) {
            return Err(Error::new(
                m.span(),
                format!("give the integers of `{name}` a type: `1u32.{name}(2)`"),
            ));
        }
        if f == MathFn::MulHi && !matches!(ty, Ty::U32 | Ty::U64) {
            return Err(Error::new(
                m.method.span(),
                format!(
                    "`mul_hi` is defined on `u32` and `u64`, not on `{}`",
                    ty.name()
                ),
            ));
        }
        Ok(Expr::new(ExprKind::Math(f, vec![a, b]), ty, m.span()))
    }

    /// `shape.rank()`, `shape.dim(d)`, `strides.offset()`, `strides.stride(d)`.
    fn layout_read(
        &mut self,
        m: &syn::ExprMethodCall,
        f: LayoutFn,
        on: Ty,
        arity: usize,
    ) -> Result<Expr> {
        let name = m.method.to_string();
        let recv = self.expr(&m.receiver)?;
        if recv.ty != on {
            return Err(Error::new(
                m.receiver.span(),
                format!(
                    "`{name}` reads a `{}` parameter, not a `{}`",
                    on.name(),
                    recv.ty.name()
                ),
            ));
        }
        if m.args.len() != arity {
            return Err(Error::new(
                m.span(),
                format!("`{name}` takes {arity} argument(s)"),
            ));
        }
        let dim = match m.args.first() {
            Some(a) => Some(Box::new(coerce(self.expr(a)?, Ty::Usize)?)),
            None => None,
        };
        Ok(Expr::new(
            ExprKind::Layout(f, Box::new(recv), dim),
            Ty::Usize,
            m.span(),
        ))
    }

    /// A call of another kernel function, `gelu(x)` or `path::to::gelu(x)`. In an
    /// elementwise or reduce kernel the callee is an elementwise kernel over `T` whose
    /// parameters are all `T`: its arguments are `T` values and so is its result. In a SIMT
    /// kernel or a device function it may also be a device function: arguments are values,
    /// buffer parameters by name (`x`), and shared or local arrays by reference (`&mut red`,
    /// `&v`); the result is `T` unless the context asks for another type. Whether the callee
    /// exists and takes these arguments is rustc's to check, on the native call the macro
    /// emits at the same span.
    fn kernel_call(&mut self, p: &syn::ExprPath, c: &syn::ExprCall) -> Result<Expr> {
        let span = c.span();
        if p.qself.is_some()
            || p.path
                .segments
                .iter()
                .any(|s| !matches!(s.arguments, syn::PathArguments::None))
        {
            return Err(Error::new(
                p.span(),
                "call a kernel function by its path alone: the element type is the caller's `T`",
            ));
        }
        if self.mode == Mode::Simt {
            let mut args = Vec::new();
            for a in &c.args {
                args.push(self.call_arg(a)?);
            }
            return Ok(Expr::new(
                ExprKind::Call(Call {
                    path: p.path.clone(),
                    grad: None,
                    args,
                    open: true,
                }),
                Ty::Elem,
                span,
            ));
        }
        if self.elem != ElemKind::Float {
            return Err(Error::new(
                span,
                format!(
                    "calls of kernel functions need `{}: Float` (this kernel is over `{0}: {}`)",
                    self.generic,
                    self.elem.bound()
                ),
            ));
        }
        let mut args = Vec::new();
        for a in &c.args {
            let e = self.expr(a)?;
            args.push(coerce(e, Ty::Elem).map_err(|_| {
                Error::new(
                    a.span(),
                    "the arguments of a kernel function are values of the element type `T`",
                )
            })?);
        }
        if args.is_empty() {
            return Err(Error::new(
                span,
                "a kernel function takes at least one `T` argument",
            ));
        }
        Ok(Expr::new(
            ExprKind::Call(Call {
                path: p.path.clone(),
                grad: None,
                args,
                open: false,
            }),
            Ty::Elem,
            span,
        ))
    }

    /// An argument of a call in a SIMT kernel or a device function: a buffer parameter by
    /// name, a shared or local array by reference, or a value.
    fn call_arg(&mut self, a: &syn::Expr) -> Result<Expr> {
        let span = a.span();
        let (named, by_ref) = match super::strip_parens(a) {
            syn::Expr::Reference(r) => match super::strip_parens(&r.expr) {
                syn::Expr::Path(p) if p.path.get_ident().is_some() => {
                    (p.path.get_ident().cloned(), Some(r.mutability.is_some()))
                }
                _ => {
                    return Err(Error::new(
                        span,
                        "a reference passed to a device function names a shared or local array \
                         as a whole: `&mut red`, `&v`",
                    ));
                }
            },
            syn::Expr::Path(p) if p.qself.is_none() => (p.path.get_ident().cloned(), None),
            _ => (None, None),
        };
        let Some(id) = named else {
            let e = self.expr(a)?;
            if !e.ty.is_value() && e.ty != Ty::Shape && e.ty != Ty::Strides {
                return Err(Error::new(span, "this argument has no value"));
            }
            return Ok(e);
        };
        let var = self.lookup(&id)?;
        let arg = |buf: Buf, m: bool| {
            Ok(Expr::new(
                ExprKind::BufArg(id.clone(), buf, m),
                Ty::Unit,
                span,
            ))
        };
        match (var, by_ref) {
            (Var::Buf { kind, .. }, None) if kind != Buf::Shared => arg(kind, false),
            (
                Var::Buf {
                    kind: Buf::Shared, ..
                },
                Some(_),
            ) => arg(Buf::Shared, false),
            (Var::Buf { .. }, Some(_)) => Err(Error::new(
                span,
                format!("pass the buffer `{id}` as it is: `{id}`, without `&`"),
            )),
            (Var::Buf { .. }, None) => Err(Error::new(
                span,
                format!("pass the shared array `{id}` by reference: `&mut {id}`"),
            )),
            (Var::Local { mutable, .. }, Some(m)) => {
                if m && !mutable {
                    return Err(Error::new(
                        span,
                        format!("cannot pass `{id}` as `&mut`: declare it `let mut {id}`"),
                    ));
                }
                arg(Buf::Local, m)
            }
            (Var::Local { .. }, None) => Err(Error::new(
                span,
                format!("pass the local array `{id}` by reference: `&mut {id}` or `&{id}`"),
            )),
            (Var::Table { .. }, _) => Err(Error::new(
                span,
                "buffer tables are not passed to device functions; pass the values of a row",
            )),
            (Var::Scalar { .. } | Var::Const { .. }, Some(_)) => Err(Error::new(
                span,
                format!("pass the value `{id}` as it is, without `&`"),
            )),
            (Var::Scalar { .. } | Var::Const { .. }, None) => self.expr(a),
        }
    }

    pub(super) fn call(&mut self, c: &syn::ExprCall) -> Result<Expr> {
        let span = c.span();
        let syn::Expr::Path(p) = &*c.func else {
            return Err(unsupported(span, "calling this expression"));
        };
        if let Some(id) = p.path.get_ident()
            && let name = id.to_string()
            && super::tensor::NAMES.contains(&name.as_str())
        {
            return self.tensor_intrinsic(&name, c);
        }
        let intrinsic = p.path.get_ident().map(|id| id.to_string()).filter(|n| {
            INDEX_INTRINSICS.iter().any(|(i, _)| i == n)
                || matches!(
                    n.as_str(),
                    "lane_id"
                        | "sync_threads"
                        | "thread_fence"
                        | "grid_sync"
                        | "warp_shuffle_down"
                        | "warp_shuffle_xor"
                        | "atomic_add"
                )
        });
        let Some(name) = intrinsic else {
            return self.kernel_call(p, c);
        };
        let index = INDEX_INTRINSICS.iter().find(|(n, _)| *n == name);
        let (intr, nargs) = match name.as_str() {
            _ if index.is_some() => {
                let (n, cuda) = index.copied().unwrap_or(("", ""));
                (Intrinsic::Index(n, cuda), 0)
            }
            "lane_id" => (Intrinsic::LaneId, 0),
            "sync_threads" => (Intrinsic::SyncThreads, 0),
            "thread_fence" => (Intrinsic::ThreadFence, 0),
            "grid_sync" => (Intrinsic::GridSync, 0),
            "warp_shuffle_down" => (Intrinsic::ShuffleDown, 2),
            "warp_shuffle_xor" => (Intrinsic::ShuffleXor, 2),
            "atomic_add" => {
                return Err(Error::new(
                    span,
                    "`atomic_add(&mut buf[i], v)` is a statement: end it with `;`",
                ));
            }
            _ => return Err(unsupported(span, &format!("calls to `{name}`"))),
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
            Intrinsic::GridSync => {
                self.uses_sync = true;
                self.uses_grid_sync = true;
                self.crosses_blocks = true;
                Ty::Unit
            }
            Intrinsic::ThreadFence => {
                self.crosses_blocks = true;
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
                if !v.ty.is_value() || v.ty == Ty::Bool {
                    return Err(Error::new(
                        v.span,
                        "warp shuffles move `T` and integer values",
                    ));
                }
                let off = coerce(args.remove(0), Ty::U32)?;
                args = vec![v, off];
                args[0].ty
            }
            // The tensor-core intrinsics are parsed by `tensor_intrinsic` above.
            _ => Ty::Unit,
        };
        Ok(Expr::new(ExprKind::Intrinsic(intr, args), ty, span))
    }
}

/// The layout reads: (method, what it reads, the type it is a method of, argument count).
const LAYOUT_FNS: &[(&str, LayoutFn, Ty, usize)] = &[
    ("rank", LayoutFn::Rank, Ty::Shape, 0),
    ("dim", LayoutFn::Dim, Ty::Shape, 1),
    ("offset", LayoutFn::Offset, Ty::Strides, 0),
    ("stride", LayoutFn::Stride, Ty::Strides, 1),
];

/// `thread_idx_x()` and friends, with the CUDA expression each becomes.
const INDEX_INTRINSICS: &[(&str, &str)] = &[
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
