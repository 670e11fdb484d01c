//! Buffer tables in SIMT kernels: a parameter `name: &[&[T]]` (read) or `name: &[&mut [T]]`
//! (written) addresses many `T` buffers of different lengths in one launch, element
//! `name[row][index]` (multi-tensor updates: one launch for every parameter of a model).
//!
//! Natively a read table is `&[&[T]]` and a written one `&mut [&mut [T]]` (each row wrapped
//! for the emulated threads as a `&mut [T]` parameter is); in CUDA a table is a device array
//! of row pointers, `const S* const*` or `S* const*`, which the launcher uploads. Row lengths
//! are not part of the table: a kernel takes them as another parameter when it needs them.
//!
//! Invariant: a row behaves exactly as a `&[T]` / `&mut [T]` parameter does (widening loads,
//! narrowing stores, `buf[i] = v as T` converted once), so per-buffer and table kernels agree
//! to the bit.

use super::cuda::Writer;
use super::ir::{BinOp, Buf, Expr, Param, ParamTy, Ty};
use super::native::{NativeCx, direct_store};
use proc_macro2::TokenStream;
use quote::quote;
use syn::Ident;

/// The row buffer kind of a table: rows of a written table are `&mut [T]`, else `&[T]`.
fn row_kind(mutable: bool) -> Buf {
    if mutable { Buf::Out } else { Buf::In }
}

impl NativeCx {
    /// `table[row][index]`, widened to the compute type.
    pub fn table_load(
        &self,
        table: &Ident,
        mutable: bool,
        row: &Expr,
        index: &Expr,
    ) -> TokenStream {
        let (r, i) = (self.expr(row), self.expr(index));
        self.load(&quote!(#table[#r]), row_kind(mutable), Ty::Elem, i)
    }

    /// `table[row][index] (op)= value`; `v` is `value` already emitted.
    pub fn table_assign(
        &self,
        table: &Ident,
        row: &Expr,
        index: &Expr,
        op: Option<BinOp>,
        value: &Expr,
        v: TokenStream,
    ) -> TokenStream {
        let (r, i) = (self.expr(row), self.expr(index));
        let buf = quote!(#table[__rtx_r]);
        if let Some(direct) = self.rounding_store(Buf::Out, Ty::Elem, op, value) {
            return quote!({
                let __rtx_r: usize = #r;
                let __rtx_i: usize = #i;
                #buf.store(__rtx_i, #direct);
            });
        }
        let new = match op {
            None => v,
            Some(op) => self.bin(
                op,
                Ty::Elem,
                self.load(&buf, Buf::Out, Ty::Elem, quote!(__rtx_i)),
                v,
            ),
        };
        let store = self.store(&buf, Buf::Out, Ty::Elem, quote!(__rtx_i), new);
        quote!({ let __rtx_r: usize = #r; let __rtx_i: usize = #i; #store })
    }
}

impl Writer {
    /// `table[row][index]`, widened to the compute type.
    pub fn table_load(&mut self, table: &Ident, mutable: bool, row: &Expr, index: &Expr) -> String {
        let b = self.name(&table.to_string());
        let r = self.expr(row);
        let i = self.expr(index);
        self.load(&format!("{b}[{r}]"), row_kind(mutable), Ty::Elem, &i)
    }

    /// `table[row][index] (op)= value;`.
    pub fn table_assign(
        &mut self,
        table: &Ident,
        row: &Expr,
        index: &Expr,
        op: Option<BinOp>,
        value: &Expr,
    ) {
        let b = self.name(&table.to_string());
        let r = self.expr(row);
        let i = self.expr(index);
        let (tr, ti) = (self.fresh(), self.fresh());
        self.line(&format!("const unsigned long long {tr} = {r};"));
        self.line(&format!("const unsigned long long {ti} = {i};"));
        let at = format!("{b}[{tr}][{ti}]");
        if let Some(inner) = direct_store(Buf::Out, Ty::Elem, op, value) {
            // `t[r][i] = v as T` of an f64 or i64: converted once, straight to `S`.
            let v = self.expr(inner);
            let f = if inner.ty == Ty::F64 {
                "rtx_from_f64"
            } else {
                "rtx_from_i64"
            };
            self.uses_num = true;
            self.line(&format!("{at} = {f}<S>({v});"));
            return;
        }
        let v = self.expr(value);
        let new = match op {
            None => v,
            Some(op) => {
                let old = self.load(&format!("{b}[{tr}]"), Buf::Out, Ty::Elem, &ti);
                self.bin(op, Ty::Elem, &old, &v)
            }
        };
        self.line(&format!("{at} = rtx_elem<S>::narrow({new});"));
    }
}

/// The CUDA parameter declaration of a table named `c`.
pub fn cuda_param(mutable: bool, c: &str) -> String {
    if mutable {
        format!("S* const* {c}")
    } else {
        format!("const S* const* {c}")
    }
}

/// The native parameter type of a table of `T` rows.
pub fn native_param(t: &Ident, mutable: bool) -> TokenStream {
    if mutable {
        quote!(&mut [&mut [#t]])
    } else {
        quote!(&[&[#t]])
    }
}

/// For each written table, its rows wrapped for the emulated threads (`GlobalMut`), under
/// the parameter's own name.
pub fn wrap_rows(krate: &TokenStream, kernel: &str, params: &[Param]) -> Vec<TokenStream> {
    params
        .iter()
        .filter(|p| p.ty == ParamTy::Table { mutable: true })
        .map(|p| {
            let n = &p.name;
            let s = n.to_string();
            quote! {
                let #n = #n
                    .iter_mut()
                    .map(|__rtx_row| #krate::kernel::block::GlobalMut::new(#kernel, #s, &mut **__rtx_row))
                    .collect::<::core::result::Result<::std::vec::Vec<_>, _>>()?;
            }
        })
        .collect()
}
