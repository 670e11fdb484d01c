//! Kernels that call kernels: what a kernel function exports so other kernels can call it,
//! and how a caller's CUDA source takes in the device functions it calls.
//!
//! A *callable* kernel is an elementwise kernel over `T: Float` whose parameters are all `T`
//! and whose result is `T`. Its module gets:
//! - `scalar::<T>(..)`: the body in the compute type (`T::Acc` in, `T::Acc` out), which native
//!   callers call, so values stay in the compute type across the call as they do in CUDA;
//! - `d<i>::<T>(.., tangent)`: `tangent * d body / d arg_i`, through the derived
//!   `<name>_grad_<param>` kernel, for every argument a derivative was derived for;
//! - `DEVICE`: the CUDA text of `<name>_body` and the `<name>_d<i>` wrappers, behind an include
//!   guard and after the `DEVICE` text of what they call in turn.
//!
//! A caller's `KERNEL.source` is its prelude, then its callees' `DEVICE` texts, then its own
//! code, joined when the crate compiles (`const_format::concatcp!`). The include guards make a
//! function reached along two paths appear once.
//!
//! Invariant: the text of a callable's body is written by the same code as the `_body`
//! function of its own kernel, so a call computes exactly what the kernel computes.

use super::cuda::{self, Writer, cty};
use super::ir::{ElemKind, KernelFn, ParamTy, Ty, callees};
use super::native::NativeCx;
use proc_macro2::TokenStream;
use quote::{format_ident, quote};

/// Whether other kernels can call `k`: elementwise over `T: Float`, every parameter a `T`,
/// returning `T`.
pub fn callable(k: &KernelFn) -> bool {
    k.elem == ElemKind::Float
        && k.ret == Ty::Elem
        && k.out_generic.is_none()
        && k.params.iter().all(|p| p.ty == ParamTy::Scalar(Ty::Elem))
}

/// The device function `template <typename A> A <name>_body(..)` of an elementwise kernel,
/// the C names of its parameters, and whether it needs the second prelude.
pub fn body_function(k: &KernelFn) -> (String, Vec<String>, bool) {
    let name = k.name.to_string();
    let mut w = Writer::for_kernel(1, k.elem);
    let cnames: Vec<String> = k
        .params
        .iter()
        .map(|p| w.declare(&p.name.to_string()))
        .collect();
    let body_params: Vec<String> = k
        .params
        .iter()
        .zip(&cnames)
        .map(|(p, c)| match p.ty {
            ParamTy::Scalar(t) => format!("{} {c}", cty(t)),
            ParamTy::Slice { .. } | ParamTy::Table { .. } | ParamTy::Array { .. } => String::new(),
        })
        .collect();
    let tail = w.block_body(&k.body).unwrap_or_default();
    w.line(&format!("return {tail};"));
    let ret_c = if k.ret == Ty::Bool { "bool" } else { "A" };
    let text = format!(
        "template <typename A>\n__device__ __forceinline__ {ret_c} {name}_body({}) {{\n{}}}\n\n",
        body_params.join(", "),
        w.out
    );
    (text, cnames, w.uses_num)
}

/// A kernel's `source` field: the generated text, with the `DEVICE` texts of the kernel
/// functions its body calls spliced in after the prelude (paths resolve in the kernel's
/// module, which imports its parent's names).
pub fn source_tokens(kr: &TokenStream, source: &str, body: &super::ir::Block) -> TokenStream {
    let deps = callees(body);
    if deps.is_empty() {
        return quote!(#source);
    }
    let split = [cuda::preludes(true), cuda::preludes(false)]
        .iter()
        .find(|p| source.starts_with(p.as_str()))
        .map_or(0, |p| p.len());
    let (prelude, own) = source.split_at(split);
    quote!(#kr::__const_format::concatcp!(#prelude, #(#deps::DEVICE,)* #own))
}

/// The items a callable kernel's module exports to callers: `scalar`, a `d<i>` per derived
/// derivative (`grads` pairs the argument's index with its derivative kernel) and `DEVICE`.
pub fn module_items(cx: &NativeCx, k: &KernelFn, grads: &[(usize, &KernelFn)]) -> TokenStream {
    if !callable(k) {
        return TokenStream::new();
    }
    let kr = &cx.krate;
    let t = &cx.t;
    let acc = quote!(<#t as #kr::Float>::Acc);
    let names: Vec<&syn::Ident> = k.params.iter().map(|p| &p.name).collect();
    let body = cx.block(&k.body);
    let scalar_doc = format!(
        "[`{0}`](super::{0}()) in the compute type: how other kernels call it natively.",
        k.name
    );
    let mut items = quote! {
        #[doc = #scalar_doc]
        #[inline(always)]
        #[allow(unused_parens, unused_mut, unused_variables, clippy::all)]
        pub fn scalar<#t: #kr::Float>(#(#names: #acc),*) -> #acc #body

        /// [`scalar`](self::scalar()) as SIMT kernels and device functions call every kernel
        /// function, on their emulated thread (which it does not need).
        #[inline(always)]
        pub fn call<#t: #kr::Float>(
            _: &#kr::kernel::block::ThreadCtx<'_>,
            #(#names: #acc),*
        ) -> #acc {
            scalar::<#t>(#(#names),*)
        }

        /// Whether calling it synchronizes threads: never, for an elementwise function.
        pub const USES_SYNC: bool = false;

        /// Whether calling it synchronizes the grid: never, for an elementwise function.
        pub const USES_GRID_SYNC: bool = false;

        /// Whether calling it lets blocks see each other's writes: never, for an
        /// elementwise function.
        pub const CROSSES_BLOCKS: bool = false;
    };
    let name = k.name.to_string();
    let slots: Vec<syn::Ident> = (0..k.params.len())
        .map(|i| format_ident!("p{}", i))
        .collect();
    let c_params: Vec<String> = (0..k.params.len()).map(|i| format!("A p{i}")).collect();
    let c_args: Vec<String> = (0..k.params.len()).map(|i| format!("p{i}")).collect();
    let mut wrappers = String::new();
    let mut grad_deps = Vec::new();
    for (i, g) in grads {
        let d = format_ident!("d{}", i);
        let g_name = &g.name;
        let doc = format!(
            "`tangent * d {name} / d {}`, through [`{g_name}`](super::{g_name}()): how other \
             kernels differentiate through a call.",
            k.params[*i].name
        );
        items.extend(quote! {
            #[doc = #doc]
            #[inline(always)]
            pub fn #d<#t: #kr::Float>(#(#slots: #acc,)* tangent: #acc) -> #acc {
                #g_name::scalar::<#t>(#(#slots,)* tangent)
            }
        });
        wrappers.push_str(&format!(
            "template <typename A>\n__device__ __forceinline__ A {name}_d{i}({}, A tangent) {{\n  return {g_name}_body<A>({}, tangent);\n}}\n\n",
            c_params.join(", "),
            c_args.join(", ")
        ));
        grad_deps.push(g_name.clone());
    }
    let (body_text, _, num) = body_function(k);
    let guard = format!("RTX_FN_{name}");
    let prelude_num = if num { cuda::PRELUDE_NUM } else { "" };
    let own = format!(
        "#ifndef {guard}\n#define {guard}\n{prelude_num}{body_text}{wrappers}#endif // {guard}\n"
    );
    let deps = callees(&k.body);
    let device = if deps.is_empty() && grad_deps.is_empty() {
        quote!(#own)
    } else {
        quote!(#kr::__const_format::concatcp!(#(#deps::DEVICE,)* #(#grad_deps::DEVICE,)* #own))
    };
    let device_doc = format!(
        "The CUDA device function `{name}_body` (and its derivatives' `{name}_d<i>`) with \
         those it calls: what a calling kernel's source includes."
    );
    items.extend(quote! {
        #[doc = #device_doc]
        pub const DEVICE: &str = #device;
    });
    items
}
