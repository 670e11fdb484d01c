//! Per-thread local arrays and the integer constants that size them: `const N: usize = 32;`
//! inside a kernel body, and `let mut v = [x; N];` (or `[x; 32]`) indexed as `v[k]`.
//!
//! Invariant: an array's length is known when the macro expands (a literal or a kernel
//! `const`), so the CUDA declaration is a fixed-size local array and a loop over a constant
//! range of its indices can be unrolled into register accesses.

use super::typing::{coerce, is_untyped_int};
use super::{Mode, Parser, Var, unsupported};
use crate::kernel::ir::*;
use syn::spanned::Spanned;
use syn::{Error, Ident, Result};

const LEN_RULE: &str = "an array length is an integer literal or a `const` declared in the \
kernel (`const N: usize = 32;`), as the CUDA declaration needs it when the kernel is generated";

impl Parser {
    /// `const NAME: ty = literal;` in a kernel body: an integer constant, usable as a value
    /// and as an array length.
    pub(super) fn const_item(&mut self, c: &syn::ItemConst) -> Result<()> {
        if !c.attrs.is_empty() || !matches!(c.vis, syn::Visibility::Inherited) {
            return Err(unsupported(
                c.span(),
                "attributes or visibility on a kernel `const`",
            ));
        }
        if !c.generics.params.is_empty() {
            return Err(unsupported(c.generics.span(), "generic constants"));
        }
        let ty = self.scalar_ty(&c.ty)?;
        if !ty.is_int() {
            return Err(Error::new(
                c.ty.span(),
                "a kernel `const` is an integer (`usize`, `i32`, `u32`, `i64` or `u64`)",
            ));
        }
        let syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(lit),
            ..
        }) = &*c.expr
        else {
            return Err(Error::new(
                c.expr.span(),
                "a kernel `const` is an integer literal",
            ));
        };
        let value = lit.base10_parse::<u64>()?;
        let fits = match ty {
            Ty::I32 => i32::try_from(value).is_ok(),
            Ty::U32 => u32::try_from(value).is_ok(),
            Ty::I64 => i64::try_from(value).is_ok(),
            _ => true,
        };
        if !fits {
            return Err(Error::new(
                lit.span(),
                format!("{value} does not fit in `{}`", ty.name()),
            ));
        }
        self.declare(&c.ident, Var::Const { value, ty })
    }

    /// The value of an array length: an integer literal or a kernel `const`.
    pub(super) fn const_len(&self, e: &syn::Expr) -> Result<usize> {
        let value = match super::strip_parens(e) {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Int(i),
                ..
            }) if matches!(i.suffix(), "" | "usize") => i.base10_parse::<u64>()?,
            syn::Expr::Path(p) if p.path.get_ident().is_some() => {
                let id = p.path.get_ident().cloned();
                match id.map(|id| self.lookup(&id)).transpose()? {
                    Some(Var::Const {
                        value,
                        ty: Ty::Usize,
                    }) => value,
                    _ => return Err(Error::new(e.span(), LEN_RULE)),
                }
            }
            _ => return Err(Error::new(e.span(), LEN_RULE)),
        };
        match usize::try_from(value) {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(Error::new(e.span(), "an array length is at least 1")),
        }
    }

    /// `let [mut] name[: [E; N]] = [init; N];`: a per-thread array of a SIMT kernel.
    pub(super) fn local_array(
        &mut self,
        local: &syn::Local,
        name: &Ident,
        mutable: bool,
        ty: Option<&syn::Type>,
    ) -> Result<Stmt> {
        let usage = format!("declare a local array as `let mut {name} = [T::NEG_INFINITY; 32];`");
        if self.mode != Mode::Simt {
            return Err(Error::new(
                local.span(),
                "local arrays belong to SIMT kernels (`#[kernel]` without a kind)",
            ));
        }
        let Some(init) = &local.init else {
            return Err(Error::new(
                local.span(),
                format!("a local array needs its initial value: {usage}"),
            ));
        };
        if let Some((_, diverge)) = &init.diverge {
            return Err(unsupported(diverge.span(), "`let ... else`"));
        }
        let syn::Expr::Repeat(rep) = super::strip_parens(&init.expr) else {
            return Err(unsupported(
                init.expr.span(),
                &format!("array values other than a repeat expression `[x; N]` ({usage})"),
            ));
        };
        let len = self.const_len(&rep.len)?;
        let value = self.expr(&rep.expr)?;
        let (elem, value) = match ty {
            Some(syn::Type::Array(arr)) => {
                let elem = self.scalar_ty(&arr.elem)?;
                if self.const_len(&arr.len)? != len {
                    return Err(Error::new(
                        arr.len.span(),
                        format!("the declared length differs from the initializer's {len}"),
                    ));
                }
                (elem, coerce(value, elem)?)
            }
            Some(other) => {
                return Err(Error::new(
                    other.span(),
                    format!("a local array's type is `[E; N]`: {usage}"),
                ));
            }
            None if is_untyped_int(&value) => (Ty::Usize, coerce(value, Ty::Usize)?),
            None => (value.ty, value),
        };
        if !elem.is_value() {
            return Err(Error::new(
                value.span,
                format!("local arrays of `{}` are not supported", elem.name()),
            ));
        }
        self.declare(name, Var::Local { elem, mutable })?;
        Ok(Stmt::LocalArray {
            name: name.clone(),
            mutable,
            elem,
            len,
            init: value,
        })
    }
}
