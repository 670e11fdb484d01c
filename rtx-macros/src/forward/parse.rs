//! Reads a flat `forward` body into steps: every `let` and the tail become a sequence of
//! single-op steps (nested expressions get temporaries), each with its own name, so later
//! passes see one op per step and no shadowing.
//!
//! The subset: `let name = expr;` (with an optional type), then a tail expression. In an
//! expression: a forward argument or earlier `let` by name, `self.field` (a parameter),
//! float or integer literals, `SCREAMING_CASE` constants, `&`, parentheses, `+ - * /` and
//! unary `-`, the unary ops of the registry (`crate::ops::UNARY`) and `maximum`/`minimum`, a sub-model call
//! `self.field.forward(args)`, and any other tensor method (`x.matmul(&w)`,
//! `x.softmax::<1>()`). Anything else is an error at its span naming `#[model(eager)]`.
//!
//! The forward may be generic over dims (`fn forward<B: Dim>`): its parameters are kept for
//! the emitter, which makes the compiled forward one impl for every instance, and each must
//! appear in an argument's type, where a call infers it from.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};
use std::collections::HashMap;
use syn::spanned::Spanned;
use syn::visit_mut::VisitMut;
use syn::{Error, Expr, Ident, Result};

/// An operand of a step.
#[derive(Clone)]
pub enum Operand {
    /// A tensor computed by an earlier step, or a forward argument.
    Var(Ident),
    /// A parameter: `self.a.b`, with its dotted name.
    Field(TokenStream, String),
    /// A number, computed in the element type.
    Lit(f64),
    /// A constant path, passed to a kernel as a uniform.
    Const(syn::Path),
}

/// The elementwise binary operators.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Bin {
    Add,
    Sub,
    Mul,
    Div,
    Max,
    Min,
}

/// An elementwise op.
#[derive(Clone)]
pub enum ElemOp {
    /// A unary op of the registry, by name.
    Unary(&'static str),
    /// `a op b`.
    Binary(Bin),
}

/// An argument of a tensor method that is not fused: a tensor, or anything else, passed as
/// written.
#[derive(Clone)]
pub enum MethodArg {
    Tensor(Operand),
    Other(Expr),
}

/// What a step computes.
#[derive(Clone)]
pub enum Kind {
    /// An elementwise op, a candidate for fusion.
    Elem { op: ElemOp, args: Vec<Operand> },
    /// A sub-model's forward: `self.field.forward(args)`; or, with `each` set, a loop
    /// over an array (or `Vec`) of sub-models, `for m in &self.field { x = m.forward(..); }`,
    /// where each sub-model's output becomes argument `each` of the next.
    Call {
        callee: TokenStream,
        scope: String,
        args: Vec<Operand>,
        each: Option<usize>,
        /// The user's `forward` token: the generated call is spanned by it.
        method: Ident,
    },
    /// Any other tensor method.
    Method {
        name: Ident,
        turbofish: Option<TokenStream>,
        recv: Operand,
        args: Vec<MethodArg>,
    },
}

/// One step: `let target = op(operands);`.
#[derive(Clone)]
pub struct Step {
    pub target: Ident,
    pub kind: Kind,
    /// The type the user wrote on the `let`, if any.
    pub ty: Option<syn::Type>,
    pub span: Span,
}

/// A forward argument: its internal name, the name the user gave it, and its tensor type
/// (without the reference).
pub struct Arg {
    pub name: Ident,
    pub user: Ident,
    pub ty: syn::Type,
}

/// The parsed forward.
pub struct Forward {
    /// The forward's own generic parameters (`<B: Dim>`), each named in an argument's type.
    pub generics: syn::Generics,
    pub args: Vec<Arg>,
    pub ret: syn::Type,
    pub steps: Vec<Step>,
    /// The value the forward returns.
    pub output: Ident,
}

/// The error for syntax outside the subset.
pub fn outside(span: Span, what: &str) -> Error {
    Error::new(
        span,
        format!(
            "{what} is outside the subset `#[model]` compiles (a flat forward: one `let` per \
             step over tensor ops, sub-model calls `self.field.forward(..)` and elementwise \
             math); write `#[model(eager)]` on the impl to keep this forward eager, with the \
             tape for gradients"
        ),
    )
}

/// Parses `fn forward(&self, x: &Tensor<..>, ..) -> Tensor<..> { .. }`.
pub fn forward(f: &syn::ImplItemFn) -> Result<Forward> {
    let sig = &f.sig;
    if let Some(l) = sig.generics.lifetimes().next() {
        return Err(outside(l.span(), "a lifetime parameter on `forward`"));
    }
    let mut inputs = sig.inputs.iter();
    match inputs.next() {
        Some(syn::FnArg::Receiver(r)) if r.reference.is_some() && r.mutability.is_none() => {}
        _ => return Err(outside(sig.span(), "a `forward` without `&self`")),
    }
    let mut p = Parser::default();
    let mut args = Vec::new();
    for a in inputs {
        let syn::FnArg::Typed(pt) = a else {
            return Err(outside(a.span(), "this argument"));
        };
        let syn::Pat::Ident(pi) = &*pt.pat else {
            return Err(outside(pt.pat.span(), "a pattern argument"));
        };
        let syn::Type::Reference(r) = &*pt.ty else {
            return Err(outside(
                pt.ty.span(),
                "an argument not taken by reference (`x: &Tensor<..>`)",
            ));
        };
        let name = pi.ident.clone();
        let ssa = p.bind(&name);
        args.push(Arg {
            name: ssa,
            user: name,
            ty: (*r.elem).clone(),
        });
    }
    for p in &sig.generics.params {
        check_generic_in_args(p, &args)?;
    }
    let ret = match &sig.output {
        syn::ReturnType::Type(_, t) => (**t).clone(),
        syn::ReturnType::Default => return Err(outside(sig.span(), "a `forward` returning `()`")),
    };
    let stmts = &f.block.stmts;
    let Some((last, lets)) = stmts.split_last() else {
        return Err(outside(f.block.span(), "an empty `forward`"));
    };
    for s in lets {
        if let syn::Stmt::Expr(Expr::ForLoop(l), _) = s {
            p.for_loop(l)?;
            continue;
        }
        let syn::Stmt::Local(local) = s else {
            return Err(outside(s.span(), "a statement other than `let`"));
        };
        let (name, ty) = match &local.pat {
            // `let mut x` is allowed for the value a loop over sub-models carries.
            syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                (pi.ident.clone(), None)
            }
            syn::Pat::Type(pt) => match &*pt.pat {
                syn::Pat::Ident(pi) => (pi.ident.clone(), Some((*pt.ty).clone())),
                other => return Err(outside(other.span(), "this pattern")),
            },
            other => return Err(outside(other.span(), "this pattern")),
        };
        let Some(init) = &local.init else {
            return Err(outside(local.span(), "a `let` without a value"));
        };
        if init.diverge.is_some() {
            return Err(outside(local.span(), "`let .. else`"));
        }
        let value = p.lower_root(&init.expr)?;
        let target = p.bind(&name);
        p.finish_let(target, value, ty, init.expr.span());
    }
    let syn::Stmt::Expr(tail, None) = last else {
        return Err(outside(
            last.span(),
            "a `forward` that does not end in its result",
        ));
    };
    let value = p.lower_root(tail)?;
    let out = format_ident!("__rtx_out");
    p.finish_let(out.clone(), value, None, tail.span());
    Ok(Forward {
        generics: sig.generics.clone(),
        args,
        ret,
        steps: p.steps,
        output: out,
    })
}

/// An error unless the forward's generic parameter `p` appears in an argument's type: the
/// compiled forward is an impl for the arguments' types, so a parameter they do not name
/// could not be inferred from a call (rustc's E0207 on generated code).
fn check_generic_in_args(p: &syn::GenericParam, args: &[Arg]) -> Result<()> {
    let name = match p {
        syn::GenericParam::Type(t) => &t.ident,
        syn::GenericParam::Const(c) => &c.ident,
        syn::GenericParam::Lifetime(l) => return Err(outside(l.span(), "a lifetime parameter")),
    };
    fn names(ts: TokenStream, name: &Ident) -> bool {
        ts.into_iter().any(|t| match t {
            proc_macro2::TokenTree::Ident(i) => i == *name,
            proc_macro2::TokenTree::Group(g) => names(g.stream(), name),
            _ => false,
        })
    }
    if args.iter().any(|a| {
        let ty = &a.ty;
        names(quote!(#ty), name)
    }) {
        return Ok(());
    }
    Err(Error::new(
        name.span(),
        format!(
            "`{name}` must appear in the type of an argument of `forward`: the compiled forward \
             learns its generic parameters from its arguments (a dim derived from them, such \
             as a token count `B * T`, is a run-time `usize` computed in the body)"
        ),
    ))
}

/// The lowering state: the steps so far and the current name of each user variable.
#[derive(Default)]
struct Parser {
    steps: Vec<Step>,
    names: HashMap<String, Ident>,
    fresh: usize,
}

/// What an expression lowered to: an operand, or a step not yet given its target.
enum Lowered {
    Operand(Operand),
    Step(Kind, Span),
}

impl Parser {
    /// `for m in &self.field { x = m.forward(args); }`: one step that runs every sub-model
    /// of the field in turn, carrying `x`. The arguments are names or fields, so nothing
    /// inside the loop needs a step of its own.
    fn for_loop(&mut self, l: &syn::ExprForLoop) -> Result<()> {
        let syn::Pat::Ident(var) = &*l.pat else {
            return Err(outside(l.pat.span(), "this loop pattern"));
        };
        let over = match &*l.expr {
            Expr::Reference(r) => &*r.expr,
            other => other,
        };
        let Expr::Field(field_expr) = over else {
            return Err(outside(
                l.expr.span(),
                "a loop over something other than `&self.field`",
            ));
        };
        let Operand::Field(callee, scope) = field(field_expr)? else {
            unreachable!("field() returns fields")
        };
        let [syn::Stmt::Expr(Expr::Assign(assign), Some(_))] = l.body.stmts.as_slice() else {
            return Err(outside(
                l.body.span(),
                "a loop body other than one `x = m.forward(..);`",
            ));
        };
        let Expr::Path(lhs) = &*assign.left else {
            return Err(outside(assign.left.span(), "this assignment target"));
        };
        let Some(carried) = lhs.path.get_ident().cloned() else {
            return Err(outside(lhs.span(), "this assignment target"));
        };
        let Some(before) = self.names.get(&carried.to_string()).cloned() else {
            return Err(Error::new(
                carried.span(),
                format!("`{carried}` must be an earlier `let mut` the loop carries"),
            ));
        };
        let Expr::MethodCall(m) = &*assign.right else {
            return Err(outside(
                assign.right.span(),
                "a loop body other than `x = m.forward(..)`",
            ));
        };
        let on_var = matches!(&*m.receiver, Expr::Path(p) if p.path.is_ident(&var.ident));
        if m.method != "forward" || !on_var {
            return Err(outside(
                m.span(),
                &format!(
                    "a loop body other than `{carried} = {}.forward(..)`",
                    var.ident
                ),
            ));
        }
        let mut args = Vec::new();
        for a in &m.args {
            let plain = match a {
                Expr::Reference(r) => &*r.expr,
                other => other,
            };
            match self.lower(plain)? {
                Lowered::Operand(op) if is_tensor(&op) => args.push(op),
                _ => {
                    return Err(outside(
                        a.span(),
                        "a loop argument other than a name or a field",
                    ));
                }
            }
        }
        let each = args
            .iter()
            .position(|op| matches!(op, Operand::Var(v) if *v == before))
            .ok_or_else(|| {
                Error::new(
                    m.args.span(),
                    format!("the loop must pass the value it carries, `{carried}`"),
                )
            })?;
        let target = self.bind(&carried);
        self.steps.push(Step {
            target,
            kind: Kind::Call {
                callee,
                scope,
                args,
                each: Some(each),
                method: m.method.clone(),
            },
            ty: None,
            span: l.span(),
        });
        Ok(())
    }

    /// A new internal name for the user variable `name`.
    fn bind(&mut self, name: &Ident) -> Ident {
        self.fresh += 1;
        let ssa = format_ident!("__rtx_{}_{}", name, self.fresh, span = name.span());
        self.names.insert(name.to_string(), ssa.clone());
        ssa
    }

    /// Ends a `let`: the lowered value becomes the step `target`.
    fn finish_let(&mut self, target: Ident, value: Lowered, ty: Option<syn::Type>, span: Span) {
        let kind = match value {
            Lowered::Step(kind, _) => kind,
            // `let y = x;` (a rename) is an identity step: `x * 1` keeps it simple and fuses.
            Lowered::Operand(op) => Kind::Elem {
                op: ElemOp::Binary(Bin::Mul),
                args: vec![op, Operand::Lit(1.0)],
            },
        };
        self.steps.push(Step {
            target,
            kind,
            ty,
            span,
        });
    }

    /// Lowers the value of a `let`: the outermost op stays unnamed for the `let` to name.
    fn lower_root(&mut self, e: &Expr) -> Result<Lowered> {
        self.lower(e)
    }

    /// Lowers `e` to an operand, naming it with a temporary step when it is an op.
    fn operand(&mut self, e: &Expr) -> Result<Operand> {
        match self.lower(e)? {
            Lowered::Operand(op) => Ok(op),
            Lowered::Step(kind, span) => {
                self.fresh += 1;
                let target = format_ident!("__rtx_t_{}", self.fresh);
                self.steps.push(Step {
                    target: target.clone(),
                    kind,
                    ty: None,
                    span,
                });
                Ok(Operand::Var(target))
            }
        }
    }

    fn lower(&mut self, e: &Expr) -> Result<Lowered> {
        let span = e.span();
        match e {
            Expr::Paren(p) => self.lower(&p.expr),
            Expr::Group(g) => self.lower(&g.expr),
            Expr::Reference(r) if r.mutability.is_none() => self.lower(&r.expr),
            Expr::Lit(l) => Ok(Lowered::Operand(Operand::Lit(literal(&l.lit)?))),
            Expr::Path(p) => Ok(Lowered::Operand(self.path(p)?)),
            Expr::Field(f) => Ok(Lowered::Operand(field(f)?)),
            Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => {
                if let Expr::Lit(l) = &*u.expr {
                    return Ok(Lowered::Operand(Operand::Lit(-literal(&l.lit)?)));
                }
                let x = self.operand(&u.expr)?;
                Ok(Lowered::Step(
                    Kind::Elem {
                        op: ElemOp::Unary("neg"),
                        args: vec![x],
                    },
                    span,
                ))
            }
            Expr::Binary(b) => {
                let op = match b.op {
                    syn::BinOp::Add(_) => Bin::Add,
                    syn::BinOp::Sub(_) => Bin::Sub,
                    syn::BinOp::Mul(_) => Bin::Mul,
                    syn::BinOp::Div(_) => Bin::Div,
                    _ => return Err(outside(b.op.span(), "this operator")),
                };
                let l = self.operand(&b.left)?;
                let r = self.operand(&b.right)?;
                if !is_tensor(&l) && !is_tensor(&r) {
                    return Err(outside(span, "arithmetic on two scalars"));
                }
                Ok(Lowered::Step(
                    Kind::Elem {
                        op: ElemOp::Binary(op),
                        args: vec![l, r],
                    },
                    span,
                ))
            }
            Expr::MethodCall(m) => self.method(m),
            _ => Err(outside(span, "this expression")),
        }
    }

    fn path(&self, p: &syn::ExprPath) -> Result<Operand> {
        if let Some(id) = p.path.get_ident() {
            let s = id.to_string();
            if let Some(ssa) = self.names.get(&s) {
                return Ok(Operand::Var(ssa.clone()));
            }
            if !is_const_name(&s) {
                return Err(Error::new(
                    id.span(),
                    format!(
                        "`{id}` is not a forward argument or an earlier `let` (a constant is \
                         written in SCREAMING_CASE)"
                    ),
                ));
            }
        }
        let last = p.path.segments.last().map(|s| s.ident.to_string());
        if p.qself.is_none() && last.as_deref().is_some_and(is_const_name) {
            return Ok(Operand::Const(p.path.clone()));
        }
        Err(outside(p.span(), "this path"))
    }

    fn method(&mut self, m: &syn::ExprMethodCall) -> Result<Lowered> {
        let span = m.span();
        let name = m.method.to_string();
        if name == "forward" {
            let (callee, scope) = match &*m.receiver {
                Expr::Field(f) => match field(f)? {
                    Operand::Field(tokens, dotted) => (tokens, dotted),
                    _ => unreachable!("field() returns fields"),
                },
                other => {
                    return Err(outside(
                        other.span(),
                        "a `forward` call on something other than `self.field`",
                    ));
                }
            };
            let args = m
                .args
                .iter()
                .map(|a| self.operand(a))
                .collect::<Result<Vec<_>>>()?;
            if let Some(bad) = args.iter().zip(&m.args).find(|(op, _)| !is_tensor(op)) {
                return Err(outside(
                    bad.1.span(),
                    "a sub-model argument that is not a tensor",
                ));
            }
            return Ok(Lowered::Step(
                Kind::Call {
                    callee,
                    scope,
                    args,
                    each: None,
                    method: m.method.clone(),
                },
                span,
            ));
        }
        if let Some(u) = crate::ops::UNARY
            .iter()
            .map(|u| u.name)
            .find(|&u| u == name)
            && m.args.is_empty()
            && m.turbofish.is_none()
        {
            let x = self.operand(&m.receiver)?;
            return Ok(Lowered::Step(
                Kind::Elem {
                    op: ElemOp::Unary(u),
                    args: vec![x],
                },
                span,
            ));
        }
        if (name == "maximum" || name == "minimum") && m.args.len() == 1 {
            let a = self.operand(&m.receiver)?;
            let b = self.operand(&m.args[0])?;
            let op = if name == "maximum" {
                Bin::Max
            } else {
                Bin::Min
            };
            return Ok(Lowered::Step(
                Kind::Elem {
                    op: ElemOp::Binary(op),
                    args: vec![a, b],
                },
                span,
            ));
        }
        let recv = self.operand(&m.receiver)?;
        if !is_tensor(&recv) {
            return Err(outside(m.receiver.span(), "a method on a scalar"));
        }
        let mut args = Vec::new();
        for a in &m.args {
            if looks_like_tensor(a, &self.names) {
                args.push(MethodArg::Tensor(self.operand(a)?));
            } else {
                // Passed as written, with the forward's names renamed as the steps are
                // (`x.dim::<0>()` reads the current `x`).
                let mut e = a.clone();
                Rename(&self.names).visit_expr_mut(&mut e);
                args.push(MethodArg::Other(e));
            }
        }
        let turbofish = m.turbofish.as_ref().map(|t| quote!(#t));
        Ok(Lowered::Step(
            Kind::Method {
                name: m.method.clone(),
                turbofish,
                recv,
                args,
            },
            span,
        ))
    }
}

/// Renames the forward's variables inside an expression passed as written.
struct Rename<'a>(&'a HashMap<String, Ident>);

impl VisitMut for Rename<'_> {
    fn visit_expr_path_mut(&mut self, p: &mut syn::ExprPath) {
        if p.qself.is_none()
            && let Some(id) = p.path.get_ident()
            && let Some(ssa) = self.0.get(&id.to_string())
        {
            p.path = syn::Path::from(ssa.clone());
        }
    }
}

/// Whether an operand is a tensor (not a number or constant).
pub fn is_tensor(op: &Operand) -> bool {
    matches!(op, Operand::Var(_) | Operand::Field(..))
}

/// Whether a method argument is a tensor expression: a known variable, a `self` field, or
/// an expression over them.
fn looks_like_tensor(e: &Expr, names: &HashMap<String, Ident>) -> bool {
    match e {
        Expr::Reference(r) => looks_like_tensor(&r.expr, names),
        Expr::Paren(p) => looks_like_tensor(&p.expr, names),
        Expr::Path(p) => p
            .path
            .get_ident()
            .is_some_and(|id| names.contains_key(&id.to_string())),
        Expr::Field(f) => {
            matches!(&*f.base, Expr::Path(p) if p.path.is_ident("self"))
                || looks_like_tensor(&f.base, names)
        }
        Expr::MethodCall(m) => looks_like_tensor(&m.receiver, names),
        Expr::Binary(b) => looks_like_tensor(&b.left, names) || looks_like_tensor(&b.right, names),
        _ => false,
    }
}

/// `self.a.b` as tokens and its dotted name `a.b`.
fn field(f: &syn::ExprField) -> Result<Operand> {
    let mut names = Vec::new();
    let mut cur: &Expr = &Expr::Field(f.clone());
    loop {
        match cur {
            Expr::Field(inner) => {
                match &inner.member {
                    syn::Member::Named(id) => names.push(id.to_string()),
                    syn::Member::Unnamed(i) => names.push(i.index.to_string()),
                }
                cur = &inner.base;
            }
            Expr::Path(p) if p.path.is_ident("self") => break,
            other => {
                return Err(outside(
                    other.span(),
                    "a field of something other than `self`",
                ));
            }
        }
    }
    names.reverse();
    Ok(Operand::Field(quote!(#f), names.join(".")))
}

/// A float or integer literal's value.
fn literal(l: &syn::Lit) -> Result<f64> {
    match l {
        syn::Lit::Float(f) => f.base10_parse::<f64>(),
        syn::Lit::Int(i) => i.base10_parse::<i64>().map(|v| v as f64),
        other => Err(outside(other.span(), "this literal")),
    }
}

/// `SCREAMING_CASE`, the spelling of a constant.
fn is_const_name(s: &str) -> bool {
    s.chars().any(|c| c.is_ascii_uppercase())
        && s.chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}
