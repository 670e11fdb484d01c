//! Symbolic differentiation of elementwise kernels: forward mode over the IR, one derivative
//! kernel per `T` input. Every `let v = e;` gains a tangent `let __rtx_d_v = D(e);` written
//! *before* it (so a shadowing `let x = x * 2.0;` differentiates the old `x`), an `if`
//! differentiates branch by branch, and the result is `grad * D(body)`.
//!
//! Invariant: `derive` returns `None` rather than a wrong derivative: loops, assignments and
//! anything else without a rule make the kernel non-differentiable.

use super::ir::*;
use proc_macro2::Span;
use quote::format_ident;
use std::collections::HashMap;
use syn::Ident;

#[derive(Clone)]
enum D {
    Zero,
    One,
    E(Expr),
}

type Env = HashMap<String, D>;

fn f(v: f64, span: Span) -> Expr {
    Expr::float(v, span)
}

fn to_expr(d: D, span: Span) -> Expr {
    match d {
        D::Zero => f(0.0, span),
        D::One => f(1.0, span),
        D::E(e) => e,
    }
}

fn add(a: D, b: D, span: Span) -> D {
    match (a, b) {
        (D::Zero, x) | (x, D::Zero) => x,
        (a, b) => D::E(Expr::bin(BinOp::Add, to_expr(a, span), to_expr(b, span))),
    }
}

fn neg(a: D) -> D {
    match a {
        D::Zero => D::Zero,
        D::One => D::E(Expr::neg(f(1.0, Span::call_site()))),
        D::E(e) => D::E(Expr::neg(e)),
    }
}

/// `d * e` for a tangent `d` and a primal factor `e`.
fn scale(d: D, e: Expr) -> D {
    match d {
        D::Zero => D::Zero,
        D::One => D::E(e),
        D::E(x) => D::E(Expr::bin(BinOp::Mul, x, e)),
    }
}

fn is_zero(d: &D) -> bool {
    matches!(d, D::Zero)
}

/// The derivative kernel of `k` with respect to the input `wrt`: the same parameters plus
/// `grad` (the upstream gradient), returning `grad * d out / d wrt`.
pub fn derive(k: &KernelFn, wrt: &Ident) -> Option<KernelFn> {
    // Predicates and selections on `bool` inputs have no derivative worth a kernel.
    if k.ret != Ty::Elem
        || k.elem != ElemKind::Float
        || k.out_generic.is_some()
        || k.params.iter().any(|p| p.ty == ParamTy::Scalar(Ty::Bool))
    {
        return None;
    }
    let mut env = Env::new();
    for p in &k.params {
        if p.ty == ParamTy::Scalar(Ty::Elem) {
            let d = if p.name == *wrt { D::One } else { D::Zero };
            env.insert(p.name.to_string(), d);
        }
    }
    let (stmts, tail) = block(&k.body, &mut env)?;
    let span = wrt.span();
    let taken = |n: &str| k.params.iter().any(|p| p.name == n);
    let grad = if taken("grad") {
        format_ident!("grad_out")
    } else {
        format_ident!("grad")
    };
    if taken(&grad.to_string()) {
        return None;
    }
    let tail = Expr::bin(
        BinOp::Mul,
        Expr::var(grad.clone(), Ty::Elem),
        to_expr(tail, span),
    );
    let mut params = k.params.clone();
    params.push(Param {
        name: grad,
        ty: ParamTy::Scalar(Ty::Elem),
        uniform: false,
    });
    Some(KernelFn {
        name: format_ident!("{}_grad_{}", k.name, wrt),
        generic: k.generic.clone(),
        elem: k.elem,
        params,
        body: Block {
            stmts,
            tail: Some(Box::new(tail)),
        },
        ret: Ty::Elem,
        out_generic: None,
        specialize: vec![],
        launch_bounds: vec![],
        shared: vec![],
        uses_sync: false,
        uses_grid_sync: false,
        crosses_blocks: false,
        tensor_core: false,
        wgmma: false,
    })
}

/// A block's statements with tangents interleaved, and the tangent of its value.
fn block(b: &Block, env: &mut Env) -> Option<(Vec<Stmt>, D)> {
    let mut out = Vec::new();
    for s in &b.stmts {
        match s {
            Stmt::Let {
                name,
                ty,
                init: Some(e),
                ..
            } => {
                if *ty == Ty::Elem {
                    let d = expr(e, env)?;
                    let d = match d {
                        D::E(de) => {
                            let dn = format_ident!("__rtx_d_{}", name);
                            out.push(Stmt::Let {
                                name: dn.clone(),
                                mutable: false,
                                ty: Ty::Elem,
                                init: Some(de),
                            });
                            D::E(Expr::var(dn, Ty::Elem))
                        }
                        other => other,
                    };
                    out.push(s.clone());
                    env.insert(name.to_string(), d);
                } else {
                    out.push(s.clone());
                    env.remove(&name.to_string());
                }
            }
            Stmt::Expr(e) if e.ty == Ty::Unit && pure(e) => out.push(s.clone()),
            _ => return None,
        }
    }
    let d = match &b.tail {
        Some(t) if t.ty == Ty::Elem => expr(t, env)?,
        Some(_) => return None,
        None => D::Zero,
    };
    Some((out, d))
}

/// Whether a unit expression has no effects (a bare `if` over values).
fn pure(e: &Expr) -> bool {
    !matches!(e.kind, ExprKind::Intrinsic(..))
}

fn expr(e: &Expr, env: &Env) -> Option<D> {
    let span = e.span;
    if e.ty != Ty::Elem {
        return Some(D::Zero);
    }
    Some(match &e.kind {
        ExprKind::Float(_) | ExprKind::Const(_) | ExprKind::Int(..) | ExprKind::Bool(_) => D::Zero,
        ExprKind::Layout(..) => return None,
        ExprKind::Var(id) => env.get(&id.to_string()).cloned().unwrap_or(D::Zero),
        ExprKind::Unary(UnOp::Neg, a) => neg(expr(a, env)?),
        ExprKind::Unary(UnOp::Not, _) => return None,
        ExprKind::Binary(op, a, b) => {
            let (da, db) = (expr(a, env)?, expr(b, env)?);
            let (a, b) = ((**a).clone(), (**b).clone());
            match op {
                BinOp::Add => add(da, db, span),
                BinOp::Sub => add(da, neg(db), span),
                BinOp::Mul => add(scale(da, b), scale(db, a), span),
                BinOp::Div => {
                    if is_zero(&db) {
                        match da {
                            D::Zero => D::Zero,
                            da => D::E(Expr::bin(BinOp::Div, to_expr(da, span), b)),
                        }
                    } else {
                        // (da * b - a * db) / (b * b)
                        let num = add(scale(da, b.clone()), neg(scale(db, a)), span);
                        D::E(Expr::bin(
                            BinOp::Div,
                            to_expr(num, span),
                            Expr::bin(BinOp::Mul, b.clone(), b),
                        ))
                    }
                }
                _ => return None,
            }
        }
        ExprKind::Math(m, args) => {
            let a = args[0].clone();
            let da = expr(&a, env)?;
            let unary = |factor: Expr| scale(da.clone(), factor);
            match m {
                MathFn::Exp => unary(e.clone()),
                MathFn::Exp2 => unary(Expr::bin(
                    BinOp::Mul,
                    f(std::f64::consts::LN_2, span),
                    e.clone(),
                )),
                MathFn::Ln => div_by(da, a),
                MathFn::Ln1p => div_by(da, Expr::bin(BinOp::Add, f(1.0, span), a)),
                MathFn::Sqrt => div_by(da, Expr::bin(BinOp::Mul, f(2.0, span), e.clone())),
                MathFn::Sin => unary(Expr::math(MathFn::Cos, vec![a])),
                MathFn::Cos => neg(unary(Expr::math(MathFn::Sin, vec![a]))),
                MathFn::Tanh => unary(Expr::bin(
                    BinOp::Sub,
                    f(1.0, span),
                    Expr::bin(BinOp::Mul, e.clone(), e.clone()),
                )),
                MathFn::Erf => unary(Expr::bin(
                    BinOp::Mul,
                    f(std::f64::consts::FRAC_2_SQRT_PI, span),
                    Expr::math(
                        MathFn::Exp,
                        vec![Expr::neg(Expr::bin(BinOp::Mul, a.clone(), a))],
                    ),
                )),
                MathFn::Abs => {
                    // sign(a) * da, with sign(0) = 0 as in PyTorch.
                    let da = to_expr(da, span);
                    let zero = f(0.0, span);
                    let inner = if_expr(
                        Expr::bin(BinOp::Lt, a.clone(), zero.clone()),
                        Expr::neg(da.clone()),
                        zero.clone(),
                    );
                    D::E(if_expr(Expr::bin(BinOp::Gt, a, zero), da, inner))
                }
                MathFn::Recip => neg(div_by(da, Expr::bin(BinOp::Mul, a.clone(), a))),
                MathFn::Max | MathFn::Min => {
                    let b = args[1].clone();
                    let db = expr(&b, env)?;
                    if is_zero(&da) && is_zero(&db) {
                        return Some(D::Zero);
                    }
                    // Ties go to the first operand.
                    let op = if *m == MathFn::Max {
                        BinOp::Ge
                    } else {
                        BinOp::Le
                    };
                    D::E(if_expr(
                        Expr::bin(op, a, b),
                        to_expr(da, span),
                        to_expr(db, span),
                    ))
                }
                MathFn::Powi => {
                    let n = args[1].clone();
                    let n_minus_1 = Expr::bin(
                        BinOp::Sub,
                        n.clone(),
                        Expr::new(ExprKind::Int(1, false), Ty::I32, span),
                    );
                    let n_as_t = Expr::new(ExprKind::Cast(Box::new(n)), Ty::Elem, span);
                    unary(Expr::bin(
                        BinOp::Mul,
                        n_as_t,
                        Expr::math(MathFn::Powi, vec![a, n_minus_1]),
                    ))
                }
                MathFn::Powf => {
                    let b = args[1].clone();
                    let db = expr(&b, env)?;
                    let from_a = scale(
                        da,
                        Expr::bin(
                            BinOp::Mul,
                            b.clone(),
                            Expr::math(
                                MathFn::Powf,
                                vec![a.clone(), Expr::bin(BinOp::Sub, b, f(1.0, span))],
                            ),
                        ),
                    );
                    let from_b = scale(
                        db,
                        Expr::bin(BinOp::Mul, e.clone(), Expr::math(MathFn::Ln, vec![a])),
                    );
                    add(from_a, from_b, span)
                }
                MathFn::MulAdd => {
                    // d(a b + c) = b da + a db + dc.
                    let (b, c) = (args[1].clone(), args[2].clone());
                    let (db, dc) = (expr(&b, env)?, expr(&c, env)?);
                    let from_ab = add(scale(da, b), scale(db, a), span);
                    add(from_ab, dc, span)
                }
                // Integer methods never produce `T` values.
                MathFn::WrappingAdd | MathFn::WrappingSub | MathFn::WrappingMul | MathFn::MulHi => {
                    return None;
                }
            }
        }
        // Work through `f64` is not differentiated (its tangent would need `f64` too).
        ExprKind::Cast(inner) if inner.ty == Ty::F64 => return None,
        ExprKind::Cast(inner) => {
            if inner.ty == Ty::Elem {
                expr(inner, env)?
            } else {
                D::Zero
            }
        }
        ExprKind::If(c, a, b) => {
            let (sa, da) = block(a, &mut env.clone())?;
            let (sb, db) = block(b, &mut env.clone())?;
            if is_zero(&da) && is_zero(&db) {
                return Some(D::Zero);
            }
            let ba = Block {
                stmts: sa,
                tail: Some(Box::new(to_expr(da, span))),
            };
            let bb = Block {
                stmts: sb,
                tail: Some(Box::new(to_expr(db, span))),
            };
            D::E(Expr::new(ExprKind::If(c.clone(), ba, bb), Ty::Elem, span))
        }
        ExprKind::Block(b) => {
            let (s, d) = block(b, &mut env.clone())?;
            if s.is_empty() {
                d
            } else {
                let bl = Block {
                    stmts: s,
                    tail: Some(Box::new(to_expr(d, span))),
                };
                D::E(Expr::new(ExprKind::Block(bl), Ty::Elem, span))
            }
        }
        // The chain rule through a kernel function: the callee's derived `d<i>(args, da_i)` is
        // `da_i * d callee / d arg_i`, summed over the arguments that carry a tangent.
        ExprKind::Call(c) if c.grad.is_none() => {
            let mut d = D::Zero;
            for (i, a) in c.args.iter().enumerate() {
                let da = expr(a, env)?;
                if is_zero(&da) {
                    continue;
                }
                let mut args = c.args.clone();
                args.push(to_expr(da, span));
                let call = Call {
                    path: c.path.clone(),
                    grad: Some(i),
                    args,
                    open: false,
                };
                d = add(
                    d,
                    D::E(Expr::new(ExprKind::Call(call), Ty::Elem, span)),
                    span,
                );
            }
            d
        }
        // Second derivatives through calls are not derived.
        ExprKind::Call(_) => return None,
        ExprKind::Intrinsic(..)
        | ExprKind::Load(..)
        | ExprKind::TableLoad(..)
        | ExprKind::BufArg(..) => return None,
    })
}

fn div_by(d: D, e: Expr) -> D {
    match d {
        D::Zero => D::Zero,
        d => D::E(Expr::bin(BinOp::Div, to_expr(d, e.span), e)),
    }
}

fn if_expr(c: Expr, a: Expr, b: Expr) -> Expr {
    let span = c.span;
    Expr::new(
        ExprKind::If(
            Box::new(c),
            Block {
                stmts: vec![],
                tail: Some(Box::new(a)),
            },
            Block {
                stmts: vec![],
                tail: Some(Box::new(b)),
            },
        ),
        Ty::Elem,
        span,
    )
}
