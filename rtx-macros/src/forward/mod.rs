//! `#[model]` on the `impl` that holds `forward`: compiles a flat forward into fused kernels,
//! a static backward and the code that builds its IR, all as an impl of
//! `rtx::compile::StaticForward` (autograd tier 2, ARCHITECTURE.md).
//!
//! The macro sees tokens, not types. It reads the forward into single-op steps
//! ([`parse`]), decides from their syntax which elementwise steps share a kernel and which
//! sub-model leaves its bias to that kernel ([`plan`]), writes those kernels as
//! `#[kernel(elementwise)]` functions ([`kernels`]), and emits the three methods that run the
//! steps ([`emit`]). Everything it emits is generic code that rustc type-checks against the
//! forward's own signature: shapes and element types are never the macro's business. A
//! forward generic over dims (`fn forward<B: Dim>(&self, x: &Tensor<(B, ..)>)`) gives one
//! `StaticForward` impl generic over them too, so run-time and static sizes alike reach the
//! fused kernels and the static backward, which read sizes from their tensors.
//!
//! `#[model(eager)]` keeps the impl as written (the forward runs eagerly, with the tape).
//! `#[model(check)]` also emits a test comparing the compiled forward and backward with the
//! eager forward and the tape on random inputs.

mod emit;
mod kernels;
mod parse;
mod plan;

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::spanned::Spanned;
use syn::{Error, ItemImpl, Result};

/// The options of `#[model(..)]` on an impl.
struct Options {
    eager: bool,
    check: bool,
}

fn options(attr: TokenStream) -> Result<Options> {
    let mut o = Options {
        eager: false,
        check: false,
    };
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident("eager") {
            o.eager = true;
        } else if meta.path.is_ident("check") {
            o.check = true;
        } else {
            return Err(meta.error(
                "unknown `#[model]` option on an impl: expected `eager` (keep the forward \
                 eager) or `check` (emit a test of the compiled forward against the eager one)",
            ));
        }
        Ok(())
    });
    syn::parse::Parser::parse2(parser, attr)?;
    Ok(o)
}

/// Entry point for an impl block.
pub fn expand(attr: TokenStream, imp: ItemImpl) -> TokenStream {
    match expand_impl(attr, &imp) {
        Ok(ts) => ts,
        // Keep the impl, so its methods still exist and no further errors cascade.
        Err(e) => {
            let err = e.to_compile_error();
            quote!(#err #imp)
        }
    }
}

fn expand_impl(attr: TokenStream, imp: &ItemImpl) -> Result<TokenStream> {
    let opts = options(attr)?;
    if opts.eager {
        return Ok(quote!(#imp));
    }
    if let Some((_, path, _)) = &imp.trait_ {
        return Err(Error::new(
            path.span(),
            "`#[model]` goes on the inherent impl that holds `fn forward`, not on a trait impl",
        ));
    }
    let forward = imp
        .items
        .iter()
        .find_map(|it| match it {
            syn::ImplItem::Fn(f) if f.sig.ident == "forward" => Some(f),
            _ => None,
        })
        .ok_or_else(|| {
            Error::new(
                imp.impl_token.span,
                "`#[model]` on an impl compiles its `fn forward`, and this impl has none",
            )
        })?;
    let f = parse::forward(forward)?;
    let plan = plan::plan(&f);
    let self_ty = &imp.self_ty;
    let base = type_name(self_ty);
    let mut kernel_items = Vec::new();
    let mut names = Vec::new();
    for (c, chain) in plan.chains.iter().enumerate() {
        let k = format_ident!("__rtx_{}_fused_{}", base, c);
        kernel_items.push(kernel(kernels::kernel_fn(&f, chain, &k, false))?);
        let kb = match chain.deferred {
            Some(_) => {
                let kb = format_ident!("__rtx_{}_fused_{}_bias", base, c);
                kernel_items.push(kernel(kernels::kernel_fn(&f, chain, &kb, true))?);
                Some(kb)
            }
            None => None,
        };
        names.push((k, kb));
    }
    let cx = emit::Cx {
        f: &f,
        plan: &plan,
        kernels: names,
    };
    let fused = emit::fused_body(&cx);
    let train = emit::train_body(&cx);
    let ir = emit::ir_body(&cx);

    let arg_tys: Vec<&syn::Type> = f.args.iter().map(|a| &a.ty).collect();
    let users: Vec<&syn::Ident> = f.args.iter().map(|a| &a.user).collect();
    let ssa: Vec<&syn::Ident> = f.args.iter().map(|a| &a.name).collect();
    let user_names: Vec<String> = users.iter().map(|u| u.to_string()).collect();
    let ret = &f.ret;
    let args_ty = quote!((#(#arg_tys,)*));

    // A forward generic over dims (`fn forward<B: Dim>`) is one trait impl for every `B`:
    // the impl's parameters and the forward's together. The inherent methods keep the
    // forward's own parameters, so a call infers them from its arguments as `forward` does.
    let all = merged(&imp.generics, &f.generics);
    let (impl_generics, _, where_clause) = all.split_for_impl();
    let (own_impl_generics, _, own_where) = imp.generics.split_for_impl();
    let fwd_params = &f.generics.params;
    let fwd_generics = if fwd_params.is_empty() {
        quote!()
    } else {
        quote!(<#fwd_params>)
    };
    let fwd_where: Vec<&syn::WherePredicate> = f
        .generics
        .where_clause
        .iter()
        .flat_map(|w| w.predicates.iter())
        .collect();
    // The inherent methods' where clause: the impl's, then the forward's.
    let own_preds: Vec<&syn::WherePredicate> = own_where
        .iter()
        .flat_map(|w| w.predicates.iter())
        .chain(fwd_where.iter().copied())
        .collect();
    let method_where = quote!(where #(#own_preds,)*);
    // The IR is built once per model type, and for a generic forward once per instance.
    let ir_key = if fwd_params.is_empty() {
        quote!(Self)
    } else {
        quote!((Self, #args_ty))
    };
    let check = if opts.check {
        check_test(&base, self_ty, &arg_tys, &imp.generics, &f.generics)?
    } else {
        quote!()
    };
    // The eager forward is the source of the compiled one, so it counts as used even where
    // only the compiled forward is called.
    let mut imp = imp.clone();
    for it in &mut imp.items {
        if let syn::ImplItem::Fn(func) = it
            && func.sig.ident == "forward"
        {
            func.attrs.push(syn::parse_quote!(#[allow(dead_code)]));
        }
    }
    Ok(quote! {
        #imp

        #(#kernel_items)*

        impl #impl_generics ::rtx::compile::StaticForward<#args_ty> for #self_ty #where_clause {
            type Output = #ret;
            type ArgGrads = (#(Option<#arg_tys>,)*);

            fn forward_fused(&self, (#(#users,)*): #args_ty) -> #ret {
                #(let #ssa: #arg_tys = #users;)*
                #fused
            }

            fn forward_train(
                &self,
                (#(#users,)*): #args_ty,
            ) -> (
                #ret,
                impl FnOnce(#ret, &mut ::rtx::Gradients, bool) -> Self::ArgGrads,
            ) {
                #(let #ssa: #arg_tys = #users;)*
                #train
            }

            fn emit_ir(
                &self,
                __rtx_b: &mut ::rtx::ir::Builder,
                (#(#users,)*): <#args_ty as ::rtx::ir::IrArgs>::Values,
            ) -> <#ret as ::rtx::ir::IrValue>::Value {
                #(let #ssa = #users;)*
                #ir
            }
        }

        impl #own_impl_generics #self_ty #own_where {
            /// The forward with fused kernels (what `#[model]` compiled from `forward`).
            #[allow(dead_code)]
            pub fn forward_fused #fwd_generics (&self, #(#users: &#arg_tys),*) -> #ret
            #method_where
            {
                ::rtx::compile::StaticForward::forward_fused(self, (#(#users.clone(),)*))
            }

            /// The forward for training with its static backward (no tape): the output, and
            /// the backward from the output's gradient to the arguments' gradients, adding
            /// the parameters' gradients to a `Gradients`.
            #[allow(dead_code)]
            pub fn forward_train #fwd_generics (
                &self,
                #(#users: &#arg_tys),*
            ) -> (
                #ret,
                impl FnOnce(#ret, &mut ::rtx::Gradients, bool) -> (#(Option<#arg_tys>,)*) + '_,
            )
            #method_where
            {
                ::rtx::compile::StaticForward::forward_train(self, (#(#users.clone(),)*))
            }

            /// The forward's IR, built once per model type (for a forward generic over dims,
            /// once per instance: name its parameters, `m.ir::<usize>()`).
            #[allow(dead_code)]
            pub fn ir #fwd_generics (&self) -> ::std::sync::Arc<::rtx::ir::Graph>
            where
                Self: 'static,
                #(#own_preds,)*
            {
                ::rtx::compile::glue::ir_cached::<#ir_key>(|| {
                    let mut __rtx_b = ::rtx::ir::Builder::new(&::rtx::compile::glue::type_label::<Self>());
                    #(let #users = ::rtx::compile::glue::ir_input::<#arg_tys>(&mut __rtx_b, #user_names);)*
                    let __rtx_y = <Self as ::rtx::compile::StaticForward<(#(#arg_tys,)*)>>::emit_ir(
                        self,
                        &mut __rtx_b,
                        (#(#users,)*),
                    );
                    __rtx_b.output(__rtx_y);
                    __rtx_b.finish()
                })
            }
        }

        #check
    })
}

/// The impl's generic parameters followed by the forward's, and both where clauses.
fn merged(imp: &syn::Generics, fwd: &syn::Generics) -> syn::Generics {
    let mut all = imp.clone();
    // Lifetimes first, as Rust requires; the forward has none (the parser refuses them).
    all.params.extend(fwd.params.iter().cloned());
    if let Some(w) = &fwd.where_clause {
        all.make_where_clause()
            .predicates
            .extend(w.predicates.iter().cloned());
    }
    all
}

/// Runs `#[kernel(elementwise)]` on a generated kernel function.
fn kernel(item: TokenStream) -> Result<TokenStream> {
    let f: syn::ItemFn = syn::parse2(item)?;
    crate::kernel::expand_item(quote!(elementwise), f)
}

/// The model type's name in snake case, for the generated kernels' names.
fn type_name(ty: &syn::Type) -> String {
    let name = match ty {
        syn::Type::Path(p) => p
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default(),
        _ => String::from("model"),
    };
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// `#[model(check)]`: a test that builds the model from a seed, runs the compiled and the
/// eager forward on random inputs and compares them, then compares the static backward's
/// gradients with the tape's. An impl generic over the element type is checked in f64; a
/// forward generic over dims, with those dims `usize`, at two run-time sizes (3 and 5), so
/// one compiled forward is held to the eager one at two batch sizes.
fn check_test(
    base: &str,
    self_ty: &syn::Type,
    arg_tys: &[&syn::Type],
    generics: &syn::Generics,
    fwd: &syn::Generics,
) -> Result<TokenStream> {
    let name = format_ident!("__rtx_check_{}", base);
    let idx: Vec<u64> = (0..arg_tys.len() as u64).collect();
    let vars: Vec<syn::Ident> = (0..arg_tys.len())
        .map(|k| format_ident!("a{}", k))
        .collect();
    let mut fill = Vec::new();
    let params = generics
        .params
        .iter()
        .map(|p| (p, quote!(f64)))
        .chain(fwd.params.iter().map(|p| (p, quote!(usize))));
    for (p, with) in params {
        match p {
            syn::GenericParam::Type(_) => fill.push(with),
            syn::GenericParam::Lifetime(_) => {}
            syn::GenericParam::Const(c) => {
                return Err(Error::new(
                    c.span(),
                    "`#[model(check)]` checks an impl generic over its element type and a \
                     forward generic over dims only: fix this const parameter, or check a \
                     concrete instance by hand",
                ));
            }
        }
    }
    let all = merged(generics, fwd);
    let (impl_generics, _, where_clause) = all.split_for_impl();
    let sizes = if fwd.params.is_empty() {
        quote!([3usize])
    } else {
        quote!([3usize, 5])
    };
    Ok(quote! {
        #[cfg(test)]
        #[test]
        fn #name() {
            fn check #impl_generics () #where_clause {
                for __rtx_size in #sizes {
                    #(let #vars: #arg_tys = ::rtx::compile::glue::check_input_sized(#idx, __rtx_size);)*
                    ::rtx::compile::glue::check_model::<#self_ty, _, _, _>(
                        (#(::core::clone::Clone::clone(&#vars),)*),
                        |m: &#self_ty| m.forward(#(&#vars),*),
                    );
                }
            }
            check::<#(#fill),*>();
        }
    })
}
