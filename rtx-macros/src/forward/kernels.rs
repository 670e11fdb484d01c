//! The fused kernels: each chain of the plan becomes an `#[kernel(elementwise)]` function
//! over `T: Float` whose body computes the chain's steps one `let` at a time, with the
//! chain's tensors as inputs, its constants as uniforms and its literals inline; a unary op is
//! a call of the op's kernel function in `rtx_kernels::kernels`. A chain
//! whose input comes from a deferred sub-model call also gets a variant that adds that
//! call's bias first. `#[kernel]` then derives the derivative kernels the static backward
//! runs.

use super::parse::{Bin, ElemOp, Forward, Kind, Operand};
use super::plan::Chain;
use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::Ident;

/// The kernel function for `chain`, named `name`; `with_bias` adds a bias input right after
/// the deferred input and adds it to that input first.
pub fn kernel_fn(f: &Forward, chain: &Chain, name: &Ident, with_bias: bool) -> TokenStream {
    let mut params = Vec::new();
    let mut body = Vec::new();
    let mut local: Vec<(String, TokenStream)> = Vec::new();
    for (k, op) in chain.inputs.iter().enumerate() {
        let p = format_ident!("in{}", k);
        if with_bias && chain.deferred == Some(k) {
            let raw = format_ident!("in{}_raw", k);
            let bias = format_ident!("in{}_bias", k);
            params.push(quote!(#raw: T));
            params.push(quote!(#bias: T));
            body.push(quote!(let #p = #raw + #bias;));
        } else {
            params.push(quote!(#p: T));
        }
        local.push((key(op), quote!(#p)));
    }
    for (k, path) in chain.uniforms.iter().enumerate() {
        let u = format_ident!("u{}", k);
        params.push(quote!(#[uniform] #u: T));
        local.push((format!("const {}", quote!(#path)), quote!(#u)));
    }
    let lookup = |op: &Operand, local: &[(String, TokenStream)]| -> TokenStream {
        match op {
            Operand::Lit(v) => {
                let lit = proc_macro2::Literal::f64_unsuffixed(v.abs());
                if *v < 0.0 {
                    quote!((-#lit))
                } else {
                    quote!(#lit)
                }
            }
            Operand::Const(p) => {
                let k = format!("const {}", quote!(#p));
                local
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, t)| t.clone())
                    .unwrap_or_default()
            }
            other => {
                let k = key(other);
                local
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, t)| t.clone())
                    .unwrap_or_default()
            }
        }
    };
    for (j, &s) in chain.steps.iter().enumerate() {
        let step = &f.steps[s];
        let Kind::Elem { op, args } = &step.kind else {
            continue;
        };
        let t = format_ident!("s{}", j);
        let a: Vec<TokenStream> = args.iter().map(|x| lookup(x, &local)).collect();
        body.push(elem(&t, op, &a));
        local.push((step.target.to_string(), quote!(#t)));
    }
    let last = format_ident!("s{}", chain.steps.len() - 1);
    quote! {
        #[doc(hidden)]
        #[allow(clippy::all)]
        fn #name<T: ::rtx::Float>(#(#params),*) -> T {
            #(#body)*
            #last
        }
    }
}

/// A chain input's key: its variable's name, or `self.field`.
fn key(op: &Operand) -> String {
    match op {
        Operand::Var(v) => v.to_string(),
        Operand::Field(_, n) => format!("self.{n}"),
        _ => String::new(),
    }
}

/// `let t = op(a..);` in the kernel language; unary ops call rtx's own kernels, so the fused
/// result computes the eager op's formula.
fn elem(t: &Ident, op: &ElemOp, a: &[TokenStream]) -> TokenStream {
    let x = a.first().cloned().unwrap_or_default();
    match op {
        ElemOp::Binary(b) => {
            let y = a.get(1).cloned().unwrap_or_default();
            match b {
                Bin::Add => quote!(let #t = #x + #y;),
                Bin::Sub => quote!(let #t = #x - #y;),
                Bin::Mul => quote!(let #t = #x * #y;),
                Bin::Div => quote!(let #t = #x / #y;),
                Bin::Max => quote!(let #t = #x.max(#y);),
                Bin::Min => quote!(let #t = #x.min(#y);),
            }
        }
        // A unary op is a call of its kernel function, the op's one formula; `neg` and `abs`
        // are the kernel language's own `-x` and `x.abs()`.
        ElemOp::Unary(u) => match crate::ops::signed_formula(u, &x) {
            Some(f) => quote!(let #t = #f;),
            None => {
                let f = format_ident!("{}", u);
                quote!(let #t = ::rtx::__private::rtx_kernels::kernels::#f(#x);)
            }
        },
    }
}
