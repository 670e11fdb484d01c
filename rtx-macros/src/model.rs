//! `#[model]` on a struct: emits `impl Module` and `impl Init`, one fully qualified call per
//! field. Every feature beyond traversal and construction (counting, summaries, freezing,
//! moving, saving) lives in the library, written once against `Module`; this file only
//! decides how each field is visited and built.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Attribute, Data, DeriveInput, Expr, Fields, Item};

/// How a field takes part in its model.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Implements `Module` (a tensor, a layer, an array or `Vec` of them).
    Module,
    /// A tensor saved with the model but not trained.
    Buffer,
    /// Not part of the model.
    Skip,
}

/// Entry point: dispatches on the item `#[model]` is attached to.
pub fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let item: Item = match syn::parse2(item) {
        Ok(item) => item,
        Err(e) => return e.to_compile_error(),
    };
    let result = match item {
        Item::Struct(s) => {
            if !attr.is_empty() {
                Err(syn::Error::new(
                    attr.span(),
                    "`#[model]` on a struct takes no arguments",
                ))
            } else {
                expand_struct(s.into())
            }
        }
        Item::Impl(imp) => return crate::forward::expand(attr, imp),
        Item::Enum(e) => Err(syn::Error::new(
            e.enum_token.span,
            "`#[model]` needs a struct with named fields, not an enum: its field names become \
             the parameter names (`fc1.weight`)",
        )),
        Item::Union(u) => Err(syn::Error::new(
            u.union_token.span,
            "`#[model]` needs a struct with named fields, not a union",
        )),
        other => Err(syn::Error::new(
            other.span(),
            "`#[model]` goes on a struct with named fields",
        )),
    };
    result.unwrap_or_else(syn::Error::into_compile_error)
}

/// The struct, with `#[buffer]`/`#[skip]` removed from its fields, followed by its `Module`
/// impl.
fn expand_struct(mut input: DeriveInput) -> syn::Result<TokenStream> {
    let Data::Struct(data) = &mut input.data else {
        return Err(syn::Error::new(Span::call_site(), "expected a struct"));
    };
    let fields = match &mut data.fields {
        Fields::Named(named) => named.named.iter_mut().collect::<Vec<_>>(),
        Fields::Unit => Vec::new(),
        Fields::Unnamed(unnamed) => {
            return Err(syn::Error::new(
                unnamed.span(),
                "`#[model]` needs named fields, not a tuple struct: the field names become \
                 the parameter names (`fc1.weight`)",
            ));
        }
    };

    let mut errors: Option<syn::Error> = None;
    let mut visit = Vec::new();
    let mut visit_mut = Vec::new();
    let mut training = Vec::new();
    let mut build = Vec::new();
    // Fields whose type involves a type parameter are built only where that type has `Init`
    // (`impl<M: Module> Init for Wrapper<M> where M: Init`); bounds on concrete types are left
    // out, as stable Rust rejects a where-clause that is false for every instantiation.
    let mut init_bounds = Vec::new();
    let type_params: Vec<String> = input
        .generics
        .type_params()
        .map(|p| p.ident.to_string())
        .collect();
    for field in fields {
        let init = match take_init(&mut field.attrs) {
            Ok(init) => init,
            Err(e) => {
                match &mut errors {
                    Some(all) => all.combine(e),
                    None => errors = Some(e),
                }
                None
            }
        };
        let role = match take_role(&mut field.attrs) {
            Ok(role) => role,
            Err(e) => {
                match &mut errors {
                    Some(all) => all.combine(e),
                    None => errors = Some(e),
                }
                continue;
            }
        };
        let Some(ident) = &field.ident else { continue };
        // A field compiled out by `#[cfg]` must be compiled out of the traversal too.
        let cfgs: Vec<&Attribute> = field
            .attrs
            .iter()
            .filter(|a| a.path().is_ident("cfg"))
            .collect();
        // Spanned at the field's type, so "not a Module" points at the offending field.
        let span = field.ty.span();
        let name = ident.to_string();
        let ty = &field.ty;
        let prefix = if role == Role::Skip {
            String::new()
        } else {
            format!("{name}.")
        };
        // The expression of `#[init(..)]` sees `device`, `seed` and this field's `prefix`;
        // without one, a skipped field is `Default` and any other is built by `Init`.
        let value = match (init, role) {
            (Some(expr), _) => quote_spanned! {expr.span()=> {
                let prefix: &str = &::std::format!("{}{}", __prefix, #prefix);
                let _ = prefix;
                #expr
            }},
            (None, Role::Skip) => quote_spanned! {span=>
                <#ty as ::core::default::Default>::default()
            },
            (None, _) => {
                if mentions_any(ty, &type_params) {
                    init_bounds.push(quote_spanned! {span=> #ty: ::rtx::__private::Init });
                }
                quote_spanned! {span=>
                    <#ty as ::rtx::__private::Init>::init_named(
                        device, seed, &::std::format!("{}{}", __prefix, #prefix))
                }
            }
        };
        build.push(quote! { #(#cfgs)* #ident: #value, });
        match role {
            Role::Skip => {}
            Role::Module => {
                let prefix = format!("{name}.");
                visit.push(quote_spanned! {span=>
                    #(#cfgs)*
                    ::rtx::__private::Module::visit(
                        &self.#ident, &::std::format!("{}{}", prefix, #prefix), v);
                });
                visit_mut.push(quote_spanned! {span=>
                    #(#cfgs)*
                    ::rtx::__private::Module::visit_mut(
                        &mut self.#ident, &::std::format!("{}{}", prefix, #prefix), v);
                });
                training.push(quote_spanned! {span=>
                    #(#cfgs)*
                    ::rtx::__private::Module::set_training(&mut self.#ident, training);
                });
            }
            Role::Buffer => {
                visit.push(quote_spanned! {span=>
                    #(#cfgs)*
                    ::rtx::__private::Visitor::visit(
                        v, &::std::format!("{}{}", prefix, #name), &self.#ident,
                        ::rtx::__private::TensorKind::Buffer);
                });
                visit_mut.push(quote_spanned! {span=>
                    #(#cfgs)*
                    ::rtx::__private::VisitorMut::visit_mut(
                        v, &::std::format!("{}{}", prefix, #name), &mut self.#ident,
                        ::rtx::__private::TensorKind::Buffer);
                });
            }
        }
    }
    if let Some(e) = errors {
        return Err(e);
    }

    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let mut init_where = where_clause
        .cloned()
        .unwrap_or_else(|| syn::parse_quote!(where));
    for bound in init_bounds {
        init_where.predicates.push(syn::parse_quote!(#bound));
    }
    Ok(quote! {
        #input

        impl #impl_generics ::rtx::__private::Module for #ident #ty_generics #where_clause {
            fn visit<__V: ::rtx::__private::Visitor>(&self, prefix: &str, v: &mut __V) {
                ::rtx::__private::Visitor::enter(v, prefix, ::core::any::type_name::<Self>());
                #(#visit)*
                ::rtx::__private::Visitor::leave(v, prefix);
            }
            fn visit_mut<__V: ::rtx::__private::VisitorMut>(&mut self, prefix: &str, v: &mut __V) {
                #(#visit_mut)*
            }
            fn set_training(&mut self, training: bool) {
                let _ = training;
                #(#training)*
            }
        }

        impl #impl_generics ::rtx::__private::Init for #ident #ty_generics #init_where {
            #[allow(unused_variables)]
            fn init_named(
                device: &::rtx::__private::Device,
                seed: u64,
                __prefix: &str,
            ) -> Self {
                #ident { #(#build)* }
            }
        }
    })
}

/// Whether the type's tokens name any of the type parameters.
fn mentions_any(ty: &syn::Type, params: &[String]) -> bool {
    fn walk(tokens: TokenStream, params: &[String]) -> bool {
        tokens.into_iter().any(|t| match t {
            proc_macro2::TokenTree::Ident(i) => params.iter().any(|p| i == p),
            proc_macro2::TokenTree::Group(g) => walk(g.stream(), params),
            _ => false,
        })
    }
    !params.is_empty() && walk(quote!(#ty), params)
}

/// Removes a field's `#[init(expr)]`, returning the expression.
fn take_init(attrs: &mut Vec<Attribute>) -> syn::Result<Option<Expr>> {
    let mut found: syn::Result<Option<Expr>> = Ok(None);
    attrs.retain(|attr| {
        if !attr.path().is_ident("init") {
            return true;
        }
        found = match (&found, attr.parse_args::<Expr>()) {
            (Err(_), _) => return false,
            (Ok(None), Ok(expr)) => Ok(Some(expr)),
            (Ok(Some(_)), _) => Err(syn::Error::new(
                attr.span(),
                "a field can have only one `#[init(..)]`",
            )),
            (_, Err(e)) => Err(syn::Error::new(
                e.span(),
                "`#[init(..)]` takes the expression that builds the field, e.g. \
                 `#[init(Dropout::new(0.1, seed))]`; `device`, `seed` and `prefix` are in scope",
            )),
        };
        false
    });
    found
}

/// Removes this macro's field attributes and says what the field is. Other attributes
/// (`#[doc]`, `#[cfg]`, other macros' helpers) stay; a misspelt one is reported by rustc as
/// an unknown attribute at its own span.
fn take_role(attrs: &mut Vec<Attribute>) -> syn::Result<Role> {
    let mut role: Option<(Role, &'static str)> = None;
    let mut result = Ok(());
    attrs.retain(|attr| {
        let found = if attr.path().is_ident("buffer") {
            (Role::Buffer, "buffer")
        } else if attr.path().is_ident("skip") {
            (Role::Skip, "skip")
        } else if attr.path().is_ident("module") || attr.path().is_ident("param") {
            result = Err(syn::Error::new(
                attr.span(),
                "unknown field attribute: a field is visited as a module or parameter by \
                 default; the field attributes of `#[model]` are `#[buffer]` and `#[skip]`",
            ));
            return false;
        } else {
            return true;
        };
        if let Err(e) = attr.meta.require_path_only() {
            let msg = format!("`#[{}]` takes no arguments", found.1);
            result = Err(syn::Error::new(e.span(), msg));
        } else if let Some((_, first)) = role {
            let msg = format!("a field cannot be both `#[{first}]` and `#[{}]`", found.1);
            result = Err(syn::Error::new(attr.span(), msg));
        }
        role = Some(found);
        false
    });
    result.map(|()| role.map_or(Role::Module, |(r, _)| r))
}
