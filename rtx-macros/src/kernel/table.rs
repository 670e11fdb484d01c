//! Buffer tables in SIMT kernels: a parameter `name: &[&[T]]` (read) or `name: &[&mut [T]]`
//! (written) addresses many `T` buffers of different lengths in one launch, element
//! `name[row][index]` (multi-tensor updates: one launch for every parameter of a model).
//! `&[&[T::Acc]]` and `&[&mut [T::Acc]]` are tables of compute-type buffers (f32 rows for
//! f16, bf16 and f32 kernels, f64 rows for f64), as `&[T::Acc]` is a compute-type buffer.
//!
//! Natively a read table is `&[&[T]]` and a written one `&mut [&mut [T]]` (each row wrapped
//! for the emulated threads as a `&mut [T]` parameter is); in CUDA a table is a device array
//! of row pointers, `const S* const*` or `S* const*` (`A` for the compute type in place of
//! `S`), which the launcher uploads. Row lengths are not part of the table: a kernel takes
//! them as another parameter when it needs them.
//!
//! Tables are not declared `__restrict__`, though no kernel writes one: with it, a
//! multi-tensor Adam ran 20% faster on an H200 (47 against 59 us over 5.8 M f32 parameters),
//! because the compiler then keeps the rows' addresses in registers across stores, but it also
//! fused a multiply into an add differently from the per-tensor kernel, and the two no longer
//! agreed to the bit (`tests/devices/optim.rs`). Getting that speed back needs both kernels
//! to compute in one order the compiler cannot change.
//!
//! Invariant: a row behaves exactly as a `&[T]` / `&mut [T]` (or `&[T::Acc]` /
//! `&mut [T::Acc]`) parameter does (widening loads and narrowing stores for `T` rows only,
//! `buf[i] = v as T` converted once into a `T` row), so per-buffer and table kernels agree to
//! the bit.

use super::cuda::Writer;
use super::ir::{BinOp, Buf, Expr, Param, ParamTy, Ty};
use super::native::{NativeCx, direct_store};
use proc_macro2::TokenStream;
use quote::quote;
use syn::Ident;

impl NativeCx {
    /// `table[row][index]`, widened to the compute type (rows of kind `kind`).
    pub fn table_load(&self, table: &Ident, kind: Buf, row: &Expr, index: &Expr) -> TokenStream {
        let (r, i) = (self.expr(row), self.expr(index));
        self.load(&quote!(#table[#r]), kind, Ty::Elem, i)
    }

    /// `table[row][index] (op)= value` into rows of kind `kind`; `v` is `value` already
    /// emitted.
    #[allow(clippy::too_many_arguments)]
    pub fn table_assign(
        &self,
        table: &Ident,
        kind: Buf,
        row: &Expr,
        index: &Expr,
        op: Option<BinOp>,
        value: &Expr,
        v: TokenStream,
    ) -> TokenStream {
        let (r, i) = (self.expr(row), self.expr(index));
        let buf = quote!(#table[__rtx_r]);
        if let Some(direct) = self.rounding_store(kind, Ty::Elem, op, value) {
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
                self.load(&buf, kind, Ty::Elem, quote!(__rtx_i)),
                v,
            ),
        };
        let store = self.store(&buf, kind, Ty::Elem, quote!(__rtx_i), new);
        quote!({ let __rtx_r: usize = #r; let __rtx_i: usize = #i; #store })
    }
}

impl Writer {
    /// `table[row][index]`, widened to the compute type (rows of kind `kind`).
    pub fn table_load(&mut self, table: &Ident, kind: Buf, row: &Expr, index: &Expr) -> String {
        let b = self.name(&table.to_string());
        let r = self.expr(row);
        let i = self.expr(index);
        self.load(&format!("{b}[{r}]"), kind, Ty::Elem, &i)
    }

    /// `table[row][index] (op)= value;` into rows of kind `kind`.
    pub fn table_assign(
        &mut self,
        table: &Ident,
        kind: Buf,
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
        if let Some(inner) = direct_store(kind, Ty::Elem, op, value) {
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
                let old = self.load(&format!("{b}[{tr}]"), kind, Ty::Elem, &ti);
                self.bin(op, Ty::Elem, &old, &v)
            }
        };
        if kind.converts(Ty::Elem) {
            self.line(&format!("{at} = rtx_elem<S>::narrow({new});"));
        } else {
            self.line(&format!("{at} = {new};"));
        }
    }
}

/// The CUDA parameter declaration of a table named `c` whose rows are of kind `row`.
pub fn cuda_param(row: Buf, c: &str) -> String {
    match row {
        Buf::Out => format!("S* const* {c}"),
        Buf::AccIn => format!("const A* const* {c}"),
        Buf::AccOut => format!("A* const* {c}"),
        _ => format!("const S* const* {c}"),
    }
}

/// The native parameter type of a table of `T` rows (of `T::Acc` rows, `acc`).
pub fn native_param(cx: &NativeCx, mutable: bool, acc: bool) -> TokenStream {
    let t = &cx.t;
    let e = if acc { cx.acc() } else { quote!(#t) };
    if mutable {
        quote!(&mut [&mut [#e]])
    } else {
        quote!(&[&[#e]])
    }
}

/// For each written table, its rows wrapped for the emulated threads (`GlobalMut`), under
/// the parameter's own name.
pub fn wrap_rows(krate: &TokenStream, kernel: &str, params: &[Param]) -> Vec<TokenStream> {
    params
        .iter()
        .filter_map(|p| match p.ty {
            ParamTy::Table { mutable: true, acc } => Some((p, acc)),
            _ => None,
        })
        .map(|(p, acc)| {
            let n = &p.name;
            let s = n.to_string();
            let ctor = if acc { quote!(new_acc) } else { quote!(new) };
            quote! {
                let #n = #n
                    .iter_mut()
                    .map(|__rtx_row| #krate::kernel::block::GlobalMut::#ctor(#kernel, #s, &mut **__rtx_row))
                    .collect::<::core::result::Result<::std::vec::Vec<_>, _>>()?;
            }
        })
        .collect()
}
