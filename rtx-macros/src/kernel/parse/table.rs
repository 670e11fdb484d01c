//! The parser's buffer tables: SIMT parameters `name: &[&[T]]` (read) and
//! `name: &[&mut [T]]` (written), one launch's view of many `T` buffers of different lengths,
//! and their element accesses `name[row][index]`; `&[&[T::Acc]]` and `&[&mut [T::Acc]]` are
//! tables of compute-type buffers (f32 rows beside f16 ones: a multi-tensor cast).
//!
//! Invariant: a table is only ever indexed twice, row then element, and holds `T` or
//! `T::Acc` elements; anything else (a bare table, a single index, other element types) is an
//! error naming the table.

use super::typing::coerce;
use super::{Mode, Parser, Var, strip_parens};
use crate::kernel::ir::*;
use syn::spanned::Spanned;
use syn::{Error, Ident, Result};

/// The error for a table used other than as `table[row][index]`.
pub(super) fn row_error(id: &Ident) -> Error {
    Error::new(
        id.span(),
        format!("`{id}` is a table of buffers: index a row, then an element (`{id}[t][i]`)"),
    )
}

impl Parser {
    /// `Some` table type when `ty` is `&[&[T]]` or `&[&mut [T]]` (or their `T::Acc` forms).
    pub(super) fn table_param_ty(&self, ty: &syn::Type) -> Result<Option<ParamTy>> {
        let syn::Type::Reference(outer) = ty else {
            return Ok(None);
        };
        let syn::Type::Slice(rows) = &*outer.elem else {
            return Ok(None);
        };
        let syn::Type::Reference(inner) = &*rows.elem else {
            return Ok(None);
        };
        let usage = "a table of buffers is `&[&[T]]` (read) or `&[&mut [T]]` (written), or the \
                     same of `T::Acc`";
        let syn::Type::Slice(row) = &*inner.elem else {
            return Err(Error::new(ty.span(), usage));
        };
        if self.mode != Mode::Simt {
            return Err(Error::new(
                ty.span(),
                "tables of buffers belong to SIMT kernels (`#[kernel]` without a kind)",
            ));
        }
        if outer.mutability.is_some() || outer.lifetime.is_some() || inner.lifetime.is_some() {
            return Err(Error::new(ty.span(), usage));
        }
        let acc = self.is_acc_path(&row.elem);
        if !acc && self.scalar_ty(&row.elem)? != Ty::Elem {
            return Err(Error::new(
                row.elem.span(),
                format!(
                    "a table holds buffers of the element type `{0}` or of its compute type \
                     `{0}::Acc`",
                    self.generic
                ),
            ));
        }
        Ok(Some(ParamTy::Table {
            mutable: inner.mutability.is_some(),
            acc,
        }))
    }

    /// Declares a table parameter whose rows are of kind `row`.
    pub(super) fn declare_table(&mut self, name: &Ident, row: Buf) -> Result<()> {
        super::check_name(name)?;
        if let Some(scope) = self.scopes.last_mut() {
            scope.insert(name.to_string(), Var::Table { row });
        }
        Ok(())
    }

    /// The table, the kind of its rows, and the row and element index of `table[row][index]`,
    /// or `None` when `ix` is not an element of a table.
    fn table_index(&mut self, ix: &syn::ExprIndex) -> Result<Option<(Ident, Buf, Expr, Expr)>> {
        let syn::Expr::Index(outer) = strip_parens(&ix.expr) else {
            return Ok(None);
        };
        let syn::Expr::Path(p) = strip_parens(&outer.expr) else {
            return Ok(None);
        };
        let Some(id) = p.path.get_ident() else {
            return Ok(None);
        };
        let Var::Table { row: kind } = self.lookup(id)? else {
            return Ok(None);
        };
        let row = coerce(self.expr(&outer.index)?, Ty::Usize)?;
        let index = coerce(self.expr(&ix.index)?, Ty::Usize)?;
        Ok(Some((id.clone(), kind, row, index)))
    }

    /// `table[row][index]` read, if `ix` is one.
    pub(super) fn table_load(&mut self, ix: &syn::ExprIndex) -> Result<Option<Expr>> {
        let span = ix.span();
        Ok(self.table_index(ix)?.map(|(id, kind, row, index)| {
            Expr::new(
                ExprKind::TableLoad(id, kind, Box::new(row), Box::new(index)),
                Ty::Elem,
                span,
            )
        }))
    }

    /// `table[row][index]` as an assignment target, if `ix` is one.
    pub(super) fn table_place(&mut self, ix: &syn::ExprIndex) -> Result<Option<(Place, Ty)>> {
        match self.table_index(ix)? {
            None => Ok(None),
            Some((id, kind @ (Buf::Out | Buf::AccOut), row, index)) => {
                Ok(Some((Place::TableIndex(id, kind, row, index), Ty::Elem)))
            }
            Some((id, ..)) => Err(Error::new(
                id.span(),
                format!("`{id}` is a read-only table (`&[&[T]]`): declare it `&[&mut [T]]`"),
            )),
        }
    }
}
