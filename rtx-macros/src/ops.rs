//! The op registry: every unary elementwise op of rtx, by name, in one list. Its formula is
//! the `#[kernel(elementwise)]` function of the same name in `rtx_kernels::kernels`, and its
//! derivative is what `#[kernel]` derives from that formula unless `rtx/src/autograd/rules.rs`
//! gives a rule of its own.
//!
//! Everything that needs the list reads it from here: `unary_op_registry!()` writes
//! `rtx_kernels::UnaryOp` (the enum, its names, kernels and marker types),
//! `unary_op_methods!()` writes the `Tensor` methods, and `#[model]` fuses exactly these
//! methods into its kernels, calling the same kernel functions. Adding an op is a kernel
//! function and a line here (see "Adding an op" in ARCHITECTURE.md).

use proc_macro2::TokenStream;
use quote::{format_ident, quote};

/// One unary op.
pub struct Unary {
    /// The `Tensor` method, the kernel function and the name errors and the IR print.
    pub name: &'static str,
    /// One sentence for the enum variant and the method.
    pub doc: &'static str,
    /// Defined on every signed type, integers too (`neg`, `abs`): the formula is the kernel
    /// language's own `-x` or `x.abs()`, and the `Tensor` method is written by hand because it
    /// is not float-only.
    pub signed: bool,
}

const fn op(name: &'static str, doc: &'static str) -> Unary {
    Unary {
        name,
        doc,
        signed: false,
    }
}

/// The unary ops, in the order of `UnaryOp::ALL`.
pub const UNARY: &[Unary] = &[
    Unary {
        name: "neg",
        doc: "-x, elementwise.",
        signed: true,
    },
    Unary {
        name: "abs",
        doc: "|x|, elementwise.",
        signed: true,
    },
    op("exp", "e^x, elementwise."),
    op("log", "ln x, elementwise."),
    op("log1p", "ln(1 + x), elementwise, accurate near 0."),
    op("sqrt", "The square root, elementwise."),
    op("rsqrt", "1 / sqrt(x), elementwise."),
    op("recip", "1 / x, elementwise."),
    op("sin", "sin x, elementwise."),
    op("cos", "cos x, elementwise."),
    op("tanh", "tanh x, elementwise."),
    op("erf", "The error function, elementwise."),
    op("relu", "max(x, 0), elementwise; NaN stays NaN."),
    op("sigmoid", "1 / (1 + e^-x), elementwise."),
    op(
        "gelu",
        "GELU in its exact form, x * Φ(x) (PyTorch's `approximate='none'`).",
    ),
    op(
        "gelu_tanh",
        "GELU in its tanh form (PyTorch's `approximate='tanh'`).",
    ),
    op(
        "silu",
        "x * sigmoid(x), elementwise (SiLU, also called swish).",
    ),
    op(
        "softplus",
        "ln(1 + e^x), elementwise; x itself above 20, as PyTorch's default threshold.",
    ),
    op(
        "hardswish",
        "x * relu6(x + 3) / 6, elementwise (PyTorch's `hardswish`).",
    ),
    op(
        "mish",
        "x * tanh(softplus(x)), elementwise (PyTorch's `mish`).",
    ),
];

/// The formula of a signed op (`neg`, `abs`), which is the kernel language's own syntax and,
/// over a `FloatMath` value, Rust's too: the marker's function and `#[model]`'s fused kernels
/// both write it from here.
pub fn signed_formula(name: &str, x: &TokenStream) -> Option<TokenStream> {
    match name {
        "neg" => Some(quote!((-#x))),
        "abs" => Some(quote!(#x.abs())),
        _ => None,
    }
}

/// `gelu_tanh` as `GeluTanh`.
pub fn camel(s: &str) -> String {
    s.split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// `rtx_kernels::UnaryOp` and its marker types, for `rtx-kernels/src/op.rs`.
pub fn registry() -> TokenStream {
    let n = UNARY.len();
    let variants: Vec<syn::Ident> = UNARY
        .iter()
        .map(|u| format_ident!("{}", camel(u.name)))
        .collect();
    let kernels: Vec<syn::Ident> = UNARY.iter().map(|u| format_ident!("{}", u.name)).collect();
    let names: Vec<&str> = UNARY.iter().map(|u| u.name).collect();
    let docs: Vec<&str> = UNARY.iter().map(|u| u.doc).collect();
    let markers = UNARY
        .iter()
        .zip(&variants)
        .zip(&kernels)
        .map(|((u, v), k)| {
            let apply = signed_formula(u.name, &quote!(x))
                .unwrap_or_else(|| quote!(crate::kernels::#k::scalar::<E>(x)));
            let doc = format!("`{}` as a marker type: {}", u.name, u.doc);
            quote! {
                #[doc = #doc]
                #[derive(Clone, Copy, Debug, Default)]
                pub struct #v;
                impl UnaryOpT for #v {
                    const OP: UnaryOp = UnaryOp::#v;
                    type Kernel = crate::kernels::#k::Op;
                    #[inline(always)]
                    fn apply<E: crate::Float>(x: E::Acc) -> E::Acc {
                        #apply
                    }
                }
            }
        });
    quote! {
        /// Elementwise functions of one argument. The list is the op registry in
        /// `rtx-macros/src/ops.rs`; each op's formula is the kernel of the same name in
        /// [`kernels`](crate::kernels).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum UnaryOp {
            #(#[doc = #docs] #variants,)*
        }

        impl UnaryOp {
            /// Every unary op, in registry order.
            pub const ALL: [UnaryOp; #n] = [#(UnaryOp::#variants),*];

            /// The op's name: its `Tensor` method and its kernel (`gelu_tanh`).
            pub fn name(self) -> &'static str {
                match self {
                    #(UnaryOp::#variants => #names,)*
                }
            }

            /// The elementwise kernel that computes the op, in every element type it has.
            pub fn kernel(self) -> &'static crate::kernel::KernelSource {
                match self {
                    #(UnaryOp::#variants => &crate::kernels::#kernels::KERNEL,)*
                }
            }

            /// Calls `v.visit::<M>()` with the op's marker type `M`: how code that holds an op
            /// as a value reaches the code generic over its marker.
            pub fn visit<V: UnaryVisitor>(self, v: V) -> V::Out {
                match self {
                    #(UnaryOp::#variants => v.visit::<markers::#variants>(),)*
                }
            }
        }

        /// The unary marker types, re-exported by [`markers`].
        pub mod unary_markers {
            use super::{UnaryOp, UnaryOpT};
            #[allow(unused_imports)]
            use crate::FloatMath;
            #(#markers)*
        }
    }
}

/// The float-only `Tensor` methods of the unary ops, for an
/// `impl<S: Shape, E: Element> Tensor<S, E>` block in `rtx/src/tensor/elementwise.rs`.
pub fn methods() -> TokenStream {
    let methods = UNARY.iter().filter(|u| !u.signed).map(|u| {
        let name = format_ident!("{}", u.name);
        let v = format_ident!("{}", camel(u.name));
        let doc = u.doc;
        quote! {
            #[doc = #doc]
            pub fn #name(&self) -> Self
            where
                E: ::rtx_kernels::Float,
            {
                self.unary::<::rtx_kernels::op::markers::#v>()
            }
        }
    });
    quote!(#(#methods)*)
}
