//! Literals, operators and the typing rules of the kernel subset: how integer and float
//! literals take their type from context, which operators each type has, and the conversions
//! `coerce` and `unify` apply.

use super::unsupported;
use crate::kernel::ir::*;
use proc_macro2::Span;
use syn::{Error, Result};

pub(super) fn lit(l: &syn::Lit) -> Result<Expr> {
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
                "u64" => (Ty::U64, false),
                other => {
                    return Err(Error::new(
                        span,
                        format!(
                            "integer suffix `{other}` is not supported (usize, i32, u32, i64, u64)"
                        ),
                    ));
                }
            };
            Ok(Expr::new(ExprKind::Int(v, untyped), ty, span))
        }
        syn::Lit::Bool(b) => Ok(Expr::new(ExprKind::Bool(b.value), Ty::Bool, span)),
        _ => Err(unsupported(span, "this literal")),
    }
}

pub(super) fn bin_op(op: &syn::BinOp) -> Option<BinOp> {
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

pub(super) fn compound_op(op: &syn::BinOp) -> Option<BinOp> {
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

pub(super) fn check_arith(op: BinOp, ty: Ty, elem: ElemKind, span: Span) -> Result<()> {
    if ty == Ty::Elem && elem == ElemKind::Element && !matches!(op, BinOp::And | BinOp::Or) {
        return Err(Error::new(
            span,
            format!(
                "`{}` on the element type needs `T: Num` (this kernel is over `T: Element`, \
                 which includes `bool`)",
                op.symbol()
            ),
        ));
    }
    let ok = match op {
        BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div => {
            matches!(ty, Ty::Elem | Ty::F64) || ty.is_int()
        }
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

pub(super) fn int_operand(e: Expr, op: BinOp) -> Result<Expr> {
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

/// Whether `e` is a float literal (possibly negated) not yet given the type `f64`.
/// Arithmetic of such literals (`1.0 / 16_777_216.0`) counts as one.
pub fn is_untyped_float(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Float(_) => e.ty == Ty::Elem,
        ExprKind::Unary(UnOp::Neg, inner) => is_untyped_float(inner),
        ExprKind::Binary(BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div, a, b) => {
            is_untyped_float(a) && is_untyped_float(b)
        }
        _ => false,
    }
}

/// Gives a float literal (or arithmetic of literals) the type `f64`.
pub(super) fn retype_float(e: &mut Expr) {
    e.ty = Ty::F64;
    match &mut e.kind {
        ExprKind::Unary(UnOp::Neg, inner) => retype_float(inner),
        ExprKind::Binary(_, a, b) => {
            retype_float(a);
            retype_float(b);
        }
        _ => {}
    }
}

pub(super) fn retype(e: &mut Expr, ty: Ty) {
    e.ty = ty;
    match &mut e.kind {
        ExprKind::Int(_, untyped) => *untyped = false,
        ExprKind::Unary(UnOp::Neg, inner) => retype(inner, ty),
        _ => {}
    }
}

/// Gives an open call (see `Call::open`) the type of the other operand `y`, when that has one.
fn close_call(x: &mut Expr, y: &Expr) {
    let y_open = matches!(&y.kind, ExprKind::Call(d) if d.open);
    if let ExprKind::Call(c) = &mut x.kind
        && c.open
        && !y_open
        && y.ty.is_value()
        && !is_untyped_int(y)
        && !is_untyped_float(y)
    {
        c.open = false;
        x.ty = y.ty;
    }
}

/// Gives two operands one type, typing an integer literal by the other side.
pub(super) fn unify(a: &mut Expr, b: &mut Expr, span: Span) -> Result<Ty> {
    // A call whose type is open takes the other side's (rustc checks it on the callee).
    close_call(a, b);
    close_call(b, a);
    if is_untyped_int(a) && b.ty.is_int() && !is_untyped_int(b) {
        retype(a, b.ty);
    } else if is_untyped_int(b) && a.ty.is_int() && !is_untyped_int(a) {
        retype(b, a.ty);
    } else if is_untyped_float(a) && b.ty == Ty::F64 {
        retype_float(a);
    } else if is_untyped_float(b) && a.ty == Ty::F64 {
        retype_float(b);
    }
    if a.ty == b.ty {
        return Ok(a.ty);
    }
    let floaty = |t: Ty| matches!(t, Ty::Elem | Ty::F64);
    let hint = if (floaty(a.ty) && is_untyped_int(b)) || (floaty(b.ty) && is_untyped_int(a)) {
        ": write a float literal such as `2.0`"
    } else if a.ty == Ty::F64 || b.ty == Ty::F64 {
        ": convert with `as f64` (or `as T`)"
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
    if let ExprKind::Call(c) = &mut e.kind
        && c.open
        && ty != Ty::Unit
    {
        // The context decides the type of a call to a device function; rustc checks it
        // against the callee's signature.
        c.open = false;
        e.ty = ty;
        return Ok(e);
    }
    if is_untyped_int(&e) && ty.is_int() {
        retype(&mut e, ty);
        return Ok(e);
    }
    if is_untyped_float(&e) && ty == Ty::F64 {
        retype_float(&mut e);
        return Ok(e);
    }
    if e.ty == ty {
        return Ok(e);
    }
    let hint = if matches!(ty, Ty::Elem | Ty::F64) && is_untyped_int(&e) {
        ": write a float literal such as `1.0`"
    } else {
        ""
    };
    Err(Error::new(
        e.span,
        format!("expected `{}`, found `{}`{hint}", ty.name(), e.ty.name()),
    ))
}
