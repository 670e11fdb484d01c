//! `#[kernel(reduce(identity = .., map = |x| .., finish = |acc, n| ..))]` on a combine
//! function `fn name<T: Float>(acc: T, x: T) -> T`: the combine as a scalar function, a
//! module with the descriptor and native reductions over `(outer, axis, inner)`, and CUDA
//! entries per element type: a block per output with warp shuffles and shared memory, a warp
//! per output for short rows, coalesced column reductions (split over chunks of the axis in
//! two launches when there are few columns), and two stages for a few long rows.
//!
//! Invariant: for a given block size the CUDA reduction combines in one fixed order (each
//! thread strides over the axis, by 16-byte vectors along a contiguous aligned row, then a
//! shuffle tree, then the warps' partials), so results are the same run to run.

use super::cuda::{self, Writer, cty};
use super::ir::{Block, ElemKind, Expr, KernelFn, ParamTy, Ty};
use super::native::NativeCx;
use super::parse::{Mode, Parser, coerce};
use super::{PTy, dtypes, entries_tokens, params_tokens};
use proc_macro2::TokenStream;
use quote::quote;
use syn::meta::ParseNestedMeta;
use syn::spanned::Spanned;
use syn::{Error, Ident, ItemFn, Result};

/// The arguments inside `reduce(...)`.
pub struct ReduceArgs {
    identity: syn::Expr,
    map: Option<syn::ExprClosure>,
    finish: Option<syn::ExprClosure>,
}

impl ReduceArgs {
    pub fn parse(meta: &ParseNestedMeta) -> Result<Self> {
        let mut identity = None;
        let mut map = None;
        let mut finish = None;
        meta.parse_nested_meta(|m| {
            if m.path.is_ident("identity") {
                identity = Some(m.value()?.parse::<syn::Expr>()?);
            } else if m.path.is_ident("map") {
                map = Some(m.value()?.parse::<syn::ExprClosure>()?);
            } else if m.path.is_ident("finish") {
                finish = Some(m.value()?.parse::<syn::ExprClosure>()?);
            } else {
                return Err(m.error("`reduce(..)` takes `identity = value`, `map = |x| ..` and `finish = |acc, n| ..`"));
            }
            Ok(())
        })?;
        let identity = identity.ok_or_else(|| {
            meta.error("`reduce` needs its identity: `reduce(identity = 0.0)` (`T::NEG_INFINITY` for a max)")
        })?;
        Ok(ReduceArgs {
            identity,
            map,
            finish,
        })
    }
}

/// A closure argument as a small function: its parameter names and body.
struct Piece {
    params: Vec<Ident>,
    body: Block,
}

fn closure(
    generic: &Ident,
    elem: ElemKind,
    c: &syn::ExprClosure,
    names: &[&str],
    what: &str,
) -> Result<Piece> {
    if c.inputs.len() != names.len() {
        return Err(Error::new(
            c.span(),
            format!(
                "`{what}` takes {} argument(s): `|{}| ..`",
                names.len(),
                names.join(", ")
            ),
        ));
    }
    if c.asyncness.is_some()
        || c.movability.is_some()
        || c.capture.is_some()
        || c.lifetimes.is_some()
        || c.constness.is_some()
    {
        return Err(Error::new(
            c.span(),
            format!("`{what}` is a plain closure `|..| expr`"),
        ));
    }
    let mut p = Parser::new(Mode::Scalar, generic.clone(), elem);
    let mut params = Vec::new();
    for input in &c.inputs {
        let id = match input {
            syn::Pat::Ident(pi)
                if pi.by_ref.is_none() && pi.subpat.is_none() && pi.mutability.is_none() =>
            {
                pi.ident.clone()
            }
            syn::Pat::Type(pt) => {
                if p.scalar_ty(&pt.ty)? != Ty::Elem {
                    return Err(Error::new(
                        pt.ty.span(),
                        format!("`{what}`'s arguments are `{generic}` values"),
                    ));
                }
                match &*pt.pat {
                    syn::Pat::Ident(pi) => pi.ident.clone(),
                    other => {
                        return Err(Error::new(
                            other.span(),
                            "closure arguments are plain names",
                        ));
                    }
                }
            }
            other => {
                return Err(Error::new(
                    other.span(),
                    "closure arguments are plain names",
                ));
            }
        };
        p.declare_scalar(&id, Ty::Elem, false)?;
        params.push(id);
    }
    let body = p.expr(&c.body)?;
    let body = coerce(body, Ty::Elem)?;
    Ok(Piece {
        params,
        body: Block {
            stmts: vec![],
            tail: Some(Box::new(body)),
        },
    })
}

pub fn emit(cx: &NativeCx, item: &ItemFn, k: &KernelFn, r: &ReduceArgs) -> Result<TokenStream> {
    if k.params.len() != 2
        || k.ret != Ty::Elem
        || k.params
            .iter()
            .any(|p| p.ty != ParamTy::Scalar(Ty::Elem) || p.uniform)
    {
        return Err(Error::new(
            item.sig.inputs.span(),
            format!(
                "a reduce kernel is its combine function: `fn {}<{}: Float>(acc: {1}, x: {1}) -> {1}`",
                k.name, k.generic
            ),
        ));
    }
    if k.elem == ElemKind::Element {
        return Err(Error::new(
            item.sig.generics.span(),
            "a reduce kernel combines with arithmetic: its element type is `T: Float` or `T: Num`",
        ));
    }
    let g = &k.generic;
    let identity = {
        let mut p = Parser::new(Mode::Scalar, g.clone(), k.elem);
        coerce(p.expr(&r.identity)?, Ty::Elem)?
    };
    let map = match &r.map {
        Some(c) => closure(g, k.elem, c, &["x"], "map")?,
        None => {
            let x = Ident::new("x", proc_macro2::Span::call_site());
            Piece {
                params: vec![x.clone()],
                body: Block {
                    stmts: vec![],
                    tail: Some(Box::new(Expr::var(x, Ty::Elem))),
                },
            }
        }
    };
    let finish = match &r.finish {
        Some(c) => closure(g, k.elem, c, &["acc", "n"], "finish")?,
        None => {
            let acc = Ident::new("acc", proc_macro2::Span::call_site());
            let n = Ident::new("n", proc_macro2::Span::call_site());
            Piece {
                params: vec![acc.clone(), n],
                body: Block {
                    stmts: vec![],
                    tail: Some(Box::new(Expr::var(acc, Ty::Elem))),
                },
            }
        }
    };
    let combine = Piece {
        params: k.params.iter().map(|p| p.name.clone()).collect(),
        body: k.body.clone(),
    };

    let kr = &cx.krate;
    let bound = &cx.bound;
    let (name, vis) = (&k.name, &item.vis);
    let name_s = name.to_string();
    let attrs = super::kept_attrs(item);
    let params = super::native_params(cx, &k.params);
    let widen = super::widen_params(cx, &k.params);
    let acc = cx.acc();
    let ret = cx.narrow(cx.block(&k.body));
    let lambda = |p: &Piece| {
        let ps = &p.params;
        let b = cx.block(&p.body);
        quote!(|#(#ps: #acc),*| -> #acc #b)
    };
    let (l_map, l_combine, l_finish) = (lambda(&map), lambda(&combine), lambda(&finish));
    let ident = cx.expr(&identity);

    let source = cuda_source(k, &identity, &map, &combine, &finish);
    let source_tokens = super::call::source_tokens(kr, &source, &k.body);
    let desc = params_tokens(
        kr,
        &[
            ("x".into(), PTy::Ptr(Ty::Elem, false)),
            ("out".into(), PTy::Ptr(Ty::Elem, true)),
            ("outer".into(), PTy::Value(Ty::Usize)),
            ("axis".into(), PTy::Value(Ty::Usize)),
            ("inner".into(), PTy::Value(Ty::Usize)),
        ],
    );
    let mut entries = entries_tokens(
        kr,
        k.elem,
        "Reduce",
        &desc,
        |s| format!("{name_s}_{s}"),
        None,
        &[],
    );
    entries.extend(entries_tokens(
        kr,
        k.elem,
        "ReduceColumns",
        &desc,
        |s| format!("{name_s}_cols_{s}"),
        None,
        &[],
    ));
    entries.extend(entries_tokens(
        kr,
        k.elem,
        "ReduceRows",
        &desc,
        |s| format!("{name_s}_rows_{s}"),
        None,
        &[],
    ));
    // The two-stage paths keep their partial results in a float compute type (f32, or f64
    // for f64), so only float element types have them; integers take the one-launch paths.
    {
        let partial = params_tokens(
            kr,
            &[
                ("x".into(), PTy::Ptr(Ty::Elem, false)),
                ("partial".into(), PTy::AccPtr(true)),
                ("n".into(), PTy::Value(Ty::Usize)),
                ("chunk".into(), PTy::Value(Ty::Usize)),
            ],
        );
        entries.extend(entries_tokens(
            kr,
            ElemKind::Float,
            "ReducePartial",
            &partial,
            |s| format!("{name_s}_partial_{s}"),
            None,
            &[],
        ));
        let last = params_tokens(
            kr,
            &[
                ("partial".into(), PTy::AccPtr(false)),
                ("out".into(), PTy::Ptr(Ty::Elem, true)),
                ("parts".into(), PTy::Value(Ty::Usize)),
                ("n".into(), PTy::Value(Ty::Usize)),
            ],
        );
        entries.extend(entries_tokens(
            kr,
            ElemKind::Float,
            "ReduceFinal",
            &last,
            |s| format!("{name_s}_final_{s}"),
            None,
            &[],
        ));
        let cols_partial = params_tokens(
            kr,
            &[
                ("x".into(), PTy::Ptr(Ty::Elem, false)),
                ("partial".into(), PTy::AccPtr(true)),
                ("outer".into(), PTy::Value(Ty::Usize)),
                ("axis".into(), PTy::Value(Ty::Usize)),
                ("inner".into(), PTy::Value(Ty::Usize)),
                ("chunk".into(), PTy::Value(Ty::Usize)),
            ],
        );
        entries.extend(entries_tokens(
            kr,
            ElemKind::Float,
            "ReduceColumnsPartial",
            &cols_partial,
            |s| format!("{name_s}_cols_partial_{s}"),
            None,
            &[],
        ));
        let cols_final = params_tokens(
            kr,
            &[
                ("partial".into(), PTy::AccPtr(false)),
                ("out".into(), PTy::Ptr(Ty::Elem, true)),
                ("outer".into(), PTy::Value(Ty::Usize)),
                ("parts".into(), PTy::Value(Ty::Usize)),
                ("inner".into(), PTy::Value(Ty::Usize)),
                ("n".into(), PTy::Value(Ty::Usize)),
            ],
        );
        entries.extend(entries_tokens(
            kr,
            ElemKind::Float,
            "ReduceColumnsFinal",
            &cols_final,
            |s| format!("{name_s}_cols_final_{s}"),
            None,
            &[],
        ));
    }
    let elem_bound = quote::format_ident!("{}", k.elem.bound());
    let (load, store) = (cx.widen(quote!(x)), cx.narrow(quote!(a)));
    let count = {
        let tr = match k.elem {
            ElemKind::Float => quote!(#kr::FloatMath),
            _ => quote!(#kr::kernel::KernelScalar),
        };
        quote!(<#acc as #tr>::c(n as f64))
    };
    let mod_doc = format!(
        "The `{name_s}` reduction, generated by `#[kernel]`: its descriptor and native \
         reductions combining with [`{name_s}`]({name_s}())."
    );
    let marker_doc = format!(
        "`{name_s}` as a marker type: reduce a tensor's axis with it through \
         `Tensor::reduce_with`, on the CPU or a GPU."
    );

    Ok(quote! {
        #(#attrs)*
        #[allow(unused_parens, unused_mut, clippy::all)]
        #vis fn #name<#g: #bound>(#(#params),*) -> #g {
            #(#widen)*
            #ret
        }

        #[doc = #mod_doc]
        #[allow(clippy::all)]
        #vis mod #name {
            // Calls in the body name kernels as the user's scope does.
            #[allow(unused_imports)]
            use super::*;

            /// The kernel's CUDA source and entry points.
            pub static KERNEL: #kr::kernel::KernelSource = #kr::kernel::KernelSource {
                name: #name_s,
                kind: #kr::kernel::KernelKind::Reduce,
                source: #source_tokens,
                entries: &[#(#entries),*],
            };

            #[allow(unused_parens, unused_mut, clippy::all)]
            fn fns<#g: #kr::#elem_bound>() -> #kr::kernel::rt::ReduceFns<#g, #acc> {
                #kr::kernel::rt::ReduceFns {
                    identity: #ident,
                    map: #l_map,
                    combine: #l_combine,
                    finish: #l_finish,
                    load: |x: #g| #load,
                    store: |a: #acc| #store,
                    count: |n: usize| #count,
                }
            }

            /// Reduces `x`, seen as `[outer, axis, inner]` row-major, along the middle axis
            /// into `out` (`[outer, inner]`).
            pub fn reduce<#g: #kr::#elem_bound>(x: &[#g], outer: usize, axis: usize, inner: usize, out: &mut [#g]) -> ::core::result::Result<(), #kr::kernel::LaunchError> {
                #kr::kernel::rt::reduce(#name_s, x, (outer, axis, inner), out, &fns::<#g>())
            }

            /// Reduces a contiguous tensor of `shape` along `axis`; returns the values and the
            /// output shape (the axis kept with size 1 when `keepdim`).
            pub fn reduce_axis<#g: #kr::#elem_bound>(x: &[#g], shape: &[usize], axis: usize, keepdim: bool) -> ::core::result::Result<(::std::vec::Vec<#g>, ::std::vec::Vec<usize>), #kr::kernel::LaunchError> {
                #kr::kernel::rt::reduce_axis(#name_s, x, shape, axis, keepdim, &fns::<#g>())
            }
            #[doc = #marker_doc]
            #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
            pub struct Op;

            impl #kr::kernel::Reduce for Op {
                const KERNEL: &'static #kr::kernel::KernelSource = &KERNEL;

                fn run<#g: #kr::Float>(x: &[#g], outer: usize, axis: usize, inner: usize, out: &mut [#g]) -> ::core::result::Result<(), #kr::kernel::LaunchError> {
                    reduce::<#g>(x, outer, axis, inner, out)
                }
            }
        }
    })
}

fn device_fn(src: &mut String, elem: ElemKind, name: &str, p: &Piece) {
    let mut w = Writer::for_kernel(1, elem);
    let ps: Vec<String> = p
        .params
        .iter()
        .map(|x| format!("{} {}", cty(Ty::Elem), w.declare(&x.to_string())))
        .collect();
    let tail = w.block_body(&p.body).unwrap_or_default();
    w.line(&format!("return {tail};"));
    src.push_str(&format!(
        "template <typename A>\n__device__ __forceinline__ A {name}({}) {{\n{}}}\n\n",
        ps.join(", "),
        w.out
    ));
}

fn cuda_source(
    k: &KernelFn,
    identity: &Expr,
    map: &Piece,
    combine: &Piece,
    finish: &Piece,
) -> String {
    let name = k.name.to_string();
    let mut src = cuda::preludes(k.elem != ElemKind::Float);
    src.push_str(&format!(
        "\n// `{name}`: reduction generated by #[kernel] from Rust.\n"
    ));
    let ident = Piece {
        params: vec![],
        body: Block {
            stmts: vec![],
            tail: Some(Box::new(identity.clone())),
        },
    };
    device_fn(&mut src, k.elem, &format!("{name}_identity"), &ident);
    device_fn(&mut src, k.elem, &format!("{name}_map"), map);
    device_fn(&mut src, k.elem, &format!("{name}_combine"), combine);
    device_fn(&mut src, k.elem, &format!("{name}_finish"), finish);
    src.push_str(&format!(
        "// One block per output (grid-stride over outputs); blockDim.x is a multiple of 32, at most 1024.\n\
         template <typename S>\n\
         __device__ __forceinline__ void {name}_reduce(const S* x, S* rtx_out, unsigned long long outer, unsigned long long axis, unsigned long long inner) {{\n\
         \x20 typedef typename rtx_elem<S>::acc A;\n\
         \x20 __shared__ A rtx_part[32];\n\
         \x20 const unsigned int rtx_tid = threadIdx.x;\n\
         \x20 const unsigned int rtx_lane = rtx_tid & 31u;\n\
         \x20 const unsigned int rtx_warp = rtx_tid >> 5;\n\
         \x20 const unsigned int rtx_warps = (blockDim.x + 31u) >> 5;\n\
         \x20 const unsigned long long rtx_rows = outer * inner;\n\
         \x20 for (unsigned long long rtx_row = blockIdx.x; rtx_row < rtx_rows; rtx_row += gridDim.x) {{\n\
         \x20   const unsigned long long rtx_o = rtx_row / inner;\n\
         \x20   const unsigned long long rtx_i = rtx_row % inner;\n\
         \x20   const S* rtx_base = x + rtx_o * axis * inner + rtx_i;\n\
         \x20   A rtx_acc = {name}_identity<A>();\n\
         \x20   unsigned long long rtx_from = 0;\n\
         \x20   // A contiguous, 16-byte aligned row: 16-byte loads, several in flight per thread.\n\
         \x20   if (inner == 1ull && rtx_aligned16(rtx_base)) {{\n\
         \x20     const unsigned long long rtx_nv = axis / (16 / sizeof(S));\n\
         #pragma unroll 4\n\
         \x20     for (unsigned long long rtx_v = rtx_tid; rtx_v < rtx_nv; rtx_v += blockDim.x) {{\n\
         \x20       const rtx_vec<S> rtx_x = rtx_load_vec(rtx_base, rtx_v);\n\
         #pragma unroll\n\
         \x20       for (unsigned int rtx_j = 0; rtx_j < 16 / sizeof(S); ++rtx_j) {{\n\
         \x20         rtx_acc = {name}_combine<A>(rtx_acc, {name}_map<A>(rtx_elem<S>::widen(rtx_x.v[rtx_j])));\n\
         \x20       }}\n\
         \x20     }}\n\
         \x20     rtx_from = rtx_nv * (16 / sizeof(S));\n\
         \x20   }}\n\
         \x20   for (unsigned long long rtx_k = rtx_from + rtx_tid; rtx_k < axis; rtx_k += blockDim.x) {{\n\
         \x20     rtx_acc = {name}_combine<A>(rtx_acc, {name}_map<A>(rtx_elem<S>::widen(rtx_base[rtx_k * inner])));\n\
         \x20   }}\n\
         \x20   for (unsigned int rtx_off = 16u; rtx_off > 0u; rtx_off >>= 1) {{\n\
         \x20     rtx_acc = {name}_combine<A>(rtx_acc, rtx_shfl_down(rtx_acc, rtx_off));\n\
         \x20   }}\n\
         \x20   if (rtx_lane == 0u) rtx_part[rtx_warp] = rtx_acc;\n\
         \x20   __syncthreads();\n\
         \x20   if (rtx_warp == 0u) {{\n\
         \x20     rtx_acc = rtx_lane < rtx_warps ? rtx_part[rtx_lane] : {name}_identity<A>();\n\
         \x20     for (unsigned int rtx_off = 16u; rtx_off > 0u; rtx_off >>= 1) {{\n\
         \x20       rtx_acc = {name}_combine<A>(rtx_acc, rtx_shfl_down(rtx_acc, rtx_off));\n\
         \x20     }}\n\
         \x20     if (rtx_lane == 0u) rtx_out[rtx_row] = rtx_elem<S>::narrow({name}_finish<A>(rtx_acc, (A)axis));\n\
         \x20   }}\n\
         \x20   // rtx_part is reused by the next row.\n\
         \x20   __syncthreads();\n\
         \x20 }}\n\
         }}\n\n"
    ));
    src.push_str(&wide_paths(&name));
    for &(suffix, s, _) in dtypes(k.elem) {
        src.push_str(&format!(
            "extern \"C\" __global__ void {name}_{suffix}(const {s}* x, {s}* rtx_out, unsigned long long outer, unsigned long long axis, unsigned long long inner) {{\n  RTX_ENTRY();\n\
             \x20 {name}_reduce<{s}>(x, rtx_out, outer, axis, inner);\n}}\n\
             extern \"C\" __global__ void {name}_cols_{suffix}(const {s}* x, {s}* rtx_out, unsigned long long outer, unsigned long long axis, unsigned long long inner) {{\n  RTX_ENTRY();\n\
             \x20 {name}_cols<{s}, false>(x, rtx_out, 0, outer, axis, inner, axis);\n}}\n\
             extern \"C\" __global__ void {name}_rows_{suffix}(const {s}* x, {s}* rtx_out, unsigned long long outer, unsigned long long axis, unsigned long long inner) {{\n  RTX_ENTRY();\n\
             \x20 {name}_rows<{s}>(x, rtx_out, outer, axis, inner);\n}}\n"
        ));
        if !dtypes(ElemKind::Float).iter().any(|d| d.0 == suffix) {
            continue;
        }
        let a = super::acc_of(s);
        src.push_str(&format!(
            "extern \"C\" __global__ void {name}_partial_{suffix}(const {s}* x, {a}* rtx_part, unsigned long long n, unsigned long long chunk) {{\n  RTX_ENTRY();\n\
             \x20 {name}_partial<{s}>(x, rtx_part, n, chunk);\n}}\n\
             extern \"C\" __global__ void {name}_final_{suffix}(const {a}* rtx_part, {s}* rtx_out, unsigned long long parts, unsigned long long n) {{\n  RTX_ENTRY();\n\
             \x20 {name}_final<{s}>(rtx_part, rtx_out, parts, n);\n}}\n\
             extern \"C\" __global__ void {name}_cols_partial_{suffix}(const {s}* x, {a}* rtx_part, unsigned long long outer, unsigned long long axis, unsigned long long inner, unsigned long long chunk) {{\n  RTX_ENTRY();\n\
             \x20 {name}_cols<{s}, true>(x, 0, rtx_part, outer, axis, inner, chunk);\n}}\n\
             extern \"C\" __global__ void {name}_cols_final_{suffix}(const {a}* rtx_part, {s}* rtx_out, unsigned long long outer, unsigned long long parts, unsigned long long inner, unsigned long long n) {{\n  RTX_ENTRY();\n\
             \x20 {name}_cols_final<{s}>(rtx_part, rtx_out, outer, parts, inner, n);\n}}\n"
        ));
    }
    src
}

/// The memory-bound paths of a reduction: along a middle axis with the threads of a warp on
/// neighbouring elements of the contiguous inner dim (in one launch, or in two when few
/// column blocks would cover a long axis: partial results of fixed chunks of the axis, then a
/// thread per output combining them), a warp per output for short rows, and over long rows
/// in two stages (partial results in the compute type, then one block per row combining
/// them). Each combines in a fixed order for a given launch shape, so results are the same
/// run to run.
fn wide_paths(name: &str) -> String {
    format!(
        "// The block's `acc`s combined in a fixed order (shuffle tree, then the warps' results);\n\
         // the result is valid in thread 0. `rtx_warp` holds 32 values; the block size is a\n\
         // multiple of 32, at most 1024.\n\
         template <typename A>\n\
         __device__ __forceinline__ A {name}_block(A rtx_acc, A* rtx_warp) {{\n\
         \x20 const unsigned int rtx_lane = threadIdx.x & 31u;\n\
         \x20 const unsigned int rtx_w = threadIdx.x >> 5;\n\
         \x20 for (unsigned int rtx_off = 16u; rtx_off > 0u; rtx_off >>= 1) {{\n\
         \x20   rtx_acc = {name}_combine<A>(rtx_acc, rtx_shfl_down(rtx_acc, rtx_off));\n\
         \x20 }}\n\
         \x20 if (rtx_lane == 0u) rtx_warp[rtx_w] = rtx_acc;\n\
         \x20 __syncthreads();\n\
         \x20 if (rtx_w == 0u) {{\n\
         \x20   rtx_acc = rtx_lane < ((blockDim.x + 31u) >> 5) ? rtx_warp[rtx_lane] : {name}_identity<A>();\n\
         \x20   for (unsigned int rtx_off = 16u; rtx_off > 0u; rtx_off >>= 1) {{\n\
         \x20     rtx_acc = {name}_combine<A>(rtx_acc, rtx_shfl_down(rtx_acc, rtx_off));\n\
         \x20   }}\n\
         \x20 }}\n\
         \x20 return rtx_acc;\n\
         }}\n\n\
         // Along the middle axis with threads along `inner`: blockDim.x is 32 (neighbouring\n\
         // elements of `inner`), blockDim.y (at most 32) splits the axis; grid (ceil(inner / 32),\n\
         // up to `outer` with a grid-stride loop over it, chunks of the axis). Block z combines\n\
         // elements [z * chunk, (z + 1) * chunk) of the axis: without PART (one chunk, the whole\n\
         // axis) it writes the finished outputs; with PART its results in the compute type, to\n\
         // rtx_part[(o * gridDim.z + z) * inner + i], for `{name}_cols_final` to combine in order.\n\
         template <typename S, bool PART>\n\
         __device__ __forceinline__ void {name}_cols(const S* x, S* rtx_out, typename rtx_elem<S>::acc* rtx_part, unsigned long long outer, unsigned long long axis, unsigned long long inner, unsigned long long chunk) {{\n\
         \x20 typedef typename rtx_elem<S>::acc A;\n\
         \x20 __shared__ A rtx_cols[32][33];\n\
         \x20 const unsigned int rtx_tx = threadIdx.x;\n\
         \x20 const unsigned int rtx_ty = threadIdx.y;\n\
         \x20 const unsigned long long rtx_i = (unsigned long long)blockIdx.x * 32ull + rtx_tx;\n\
         \x20 const unsigned long long rtx_begin = (unsigned long long)blockIdx.z * chunk;\n\
         \x20 const unsigned long long rtx_end = rtx_begin + chunk < axis ? rtx_begin + chunk : axis;\n\
         \x20 for (unsigned long long rtx_o = blockIdx.y; rtx_o < outer; rtx_o += gridDim.y) {{\n\
         \x20   A rtx_acc = {name}_identity<A>();\n\
         \x20   if (rtx_i < inner) {{\n\
         \x20     const S* rtx_base = x + rtx_o * axis * inner + rtx_i;\n\
         \x20     // Eight loads in flight per thread (within 32 registers, so that two blocks of\n\
         \x20     // 1024 threads share an SM).\n\
         #pragma unroll 8\n\
         \x20     for (unsigned long long rtx_k = rtx_begin + rtx_ty; rtx_k < rtx_end; rtx_k += blockDim.y) {{\n\
         \x20       rtx_acc = {name}_combine<A>(rtx_acc, {name}_map<A>(rtx_elem<S>::widen(rtx_base[rtx_k * inner])));\n\
         \x20     }}\n\
         \x20   }}\n\
         \x20   rtx_cols[rtx_ty][rtx_tx] = rtx_acc;\n\
         \x20   __syncthreads();\n\
         \x20   if (rtx_ty == 0u && rtx_i < inner) {{\n\
         \x20     for (unsigned int rtx_j = 1u; rtx_j < blockDim.y; ++rtx_j) {{\n\
         \x20       rtx_acc = {name}_combine<A>(rtx_acc, rtx_cols[rtx_j][rtx_tx]);\n\
         \x20     }}\n\
         \x20     if (PART) {{\n\
         \x20       rtx_part[(rtx_o * gridDim.z + blockIdx.z) * inner + rtx_i] = rtx_acc;\n\
         \x20     }} else {{\n\
         \x20       rtx_out[rtx_o * inner + rtx_i] = rtx_elem<S>::narrow({name}_finish<A>(rtx_acc, (A)axis));\n\
         \x20     }}\n\
         \x20   }}\n\
         \x20   // rtx_cols is reused by the next `outer` index.\n\
         \x20   __syncthreads();\n\
         \x20 }}\n\
         }}\n\n\
         // Stage 2 of a split column reduction: output (o, i) combines its `parts` partial\n\
         // results in chunk order, then applies `finish` with the axis length `n`; a thread per\n\
         // output (grid-stride), neighbouring threads on neighbouring `i`.\n\
         template <typename S>\n\
         __device__ __forceinline__ void {name}_cols_final(const typename rtx_elem<S>::acc* rtx_part, S* rtx_out, unsigned long long outer, unsigned long long parts, unsigned long long inner, unsigned long long n) {{\n\
         \x20 typedef typename rtx_elem<S>::acc A;\n\
         \x20 const unsigned long long rtx_total = outer * inner;\n\
         \x20 const unsigned long long rtx_step = (unsigned long long)gridDim.x * blockDim.x;\n\
         \x20 for (unsigned long long rtx_j = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; rtx_j < rtx_total; rtx_j += rtx_step) {{\n\
         \x20   const unsigned long long rtx_o = rtx_j / inner;\n\
         \x20   const A* rtx_p = rtx_part + rtx_o * parts * inner + (rtx_j - rtx_o * inner);\n\
         \x20   A rtx_acc = {name}_identity<A>();\n\
         \x20   for (unsigned long long rtx_c = 0; rtx_c < parts; ++rtx_c) {{\n\
         \x20     rtx_acc = {name}_combine<A>(rtx_acc, rtx_p[rtx_c * inner]);\n\
         \x20   }}\n\
         \x20   rtx_out[rtx_j] = rtx_elem<S>::narrow({name}_finish<A>(rtx_acc, (A)n));\n\
         \x20 }}\n\
         }}\n\n\
         // A warp per output, for short rows: warp w of block b reduces outputs b * warps + w,\n\
         // stepping by the grid's warps (the same for all lanes of a warp, so the shuffles see\n\
         // the whole warp); 16-byte loads along a contiguous aligned row, then a shuffle tree.\n\
         // No shared memory or barriers, so many rows are in flight on each SM.\n\
         template <typename S>\n\
         __device__ __forceinline__ void {name}_rows(const S* x, S* rtx_out, unsigned long long outer, unsigned long long axis, unsigned long long inner) {{\n\
         \x20 typedef typename rtx_elem<S>::acc A;\n\
         \x20 const unsigned int rtx_lane = threadIdx.x & 31u;\n\
         \x20 const unsigned long long rtx_warps = blockDim.x >> 5;\n\
         \x20 const unsigned long long rtx_rows = outer * inner;\n\
         \x20 for (unsigned long long rtx_row = (unsigned long long)blockIdx.x * rtx_warps + (threadIdx.x >> 5); rtx_row < rtx_rows; rtx_row += (unsigned long long)gridDim.x * rtx_warps) {{\n\
         \x20   const unsigned long long rtx_o = rtx_row / inner;\n\
         \x20   const unsigned long long rtx_i = rtx_row % inner;\n\
         \x20   const S* rtx_base = x + rtx_o * axis * inner + rtx_i;\n\
         \x20   A rtx_acc = {name}_identity<A>();\n\
         \x20   unsigned long long rtx_from = 0;\n\
         \x20   if (inner == 1ull && rtx_aligned16(rtx_base)) {{\n\
         \x20     const unsigned long long rtx_nv = axis / (16 / sizeof(S));\n\
         #pragma unroll 4\n\
         \x20     for (unsigned long long rtx_v = rtx_lane; rtx_v < rtx_nv; rtx_v += 32ull) {{\n\
         \x20       const rtx_vec<S> rtx_x = rtx_load_vec(rtx_base, rtx_v);\n\
         #pragma unroll\n\
         \x20       for (unsigned int rtx_k = 0; rtx_k < 16 / sizeof(S); ++rtx_k) {{\n\
         \x20         rtx_acc = {name}_combine<A>(rtx_acc, {name}_map<A>(rtx_elem<S>::widen(rtx_x.v[rtx_k])));\n\
         \x20       }}\n\
         \x20     }}\n\
         \x20     rtx_from = rtx_nv * (16 / sizeof(S));\n\
         \x20   }}\n\
         \x20   for (unsigned long long rtx_k = rtx_from + rtx_lane; rtx_k < axis; rtx_k += 32ull) {{\n\
         \x20     rtx_acc = {name}_combine<A>(rtx_acc, {name}_map<A>(rtx_elem<S>::widen(rtx_base[rtx_k * inner])));\n\
         \x20   }}\n\
         \x20   for (unsigned int rtx_off = 16u; rtx_off > 0u; rtx_off >>= 1) {{\n\
         \x20     rtx_acc = {name}_combine<A>(rtx_acc, rtx_shfl_down(rtx_acc, rtx_off));\n\
         \x20   }}\n\
         \x20   if (rtx_lane == 0u) rtx_out[rtx_row] = rtx_elem<S>::narrow({name}_finish<A>(rtx_acc, (A)axis));\n\
         \x20 }}\n\
         }}\n\n\
         // Stage 1 over rows of `n` elements (row blockIdx.y): block b combines, after `map`,\n\
         // elements [b * chunk, (b + 1) * chunk) of its row into rtx_part[row * gridDim.x + b],\n\
         // in the compute type; 16-byte loads when the chunk is aligned (`chunk` is a multiple of\n\
         // 16 elements).\n\
         template <typename S>\n\
         __device__ __forceinline__ void {name}_partial(const S* x, typename rtx_elem<S>::acc* rtx_part, unsigned long long n, unsigned long long chunk) {{\n\
         \x20 typedef typename rtx_elem<S>::acc A;\n\
         \x20 __shared__ A rtx_warp[32];\n\
         \x20 const S* rtx_row = x + (unsigned long long)blockIdx.y * n;\n\
         \x20 const unsigned long long rtx_begin = (unsigned long long)blockIdx.x * chunk;\n\
         \x20 const unsigned long long rtx_end = rtx_begin + chunk < n ? rtx_begin + chunk : n;\n\
         \x20 A rtx_acc = {name}_identity<A>();\n\
         \x20 unsigned long long rtx_rest = rtx_begin;\n\
         \x20 if (rtx_begin < rtx_end && rtx_aligned16(rtx_row + rtx_begin)) {{\n\
         \x20   const unsigned long long rtx_w = 16 / sizeof(S);\n\
         \x20   const unsigned long long rtx_nv = (rtx_end - rtx_begin) / rtx_w;\n\
         #pragma unroll 4\n\
         \x20   for (unsigned long long rtx_v = threadIdx.x; rtx_v < rtx_nv; rtx_v += blockDim.x) {{\n\
         \x20     const rtx_vec<S> rtx_x = rtx_load_vec(rtx_row + rtx_begin, rtx_v);\n\
         #pragma unroll\n\
         \x20     for (unsigned int rtx_k = 0; rtx_k < 16 / sizeof(S); ++rtx_k) {{\n\
         \x20       rtx_acc = {name}_combine<A>(rtx_acc, {name}_map<A>(rtx_elem<S>::widen(rtx_x.v[rtx_k])));\n\
         \x20     }}\n\
         \x20   }}\n\
         \x20   rtx_rest = rtx_begin + rtx_nv * rtx_w;\n\
         \x20 }}\n\
         \x20 for (unsigned long long rtx_j = rtx_rest + threadIdx.x; rtx_j < rtx_end; rtx_j += blockDim.x) {{\n\
         \x20   rtx_acc = {name}_combine<A>(rtx_acc, {name}_map<A>(rtx_elem<S>::widen(rtx_row[rtx_j])));\n\
         \x20 }}\n\
         \x20 rtx_acc = {name}_block<A>(rtx_acc, rtx_warp);\n\
         \x20 if (threadIdx.x == 0u) rtx_part[(unsigned long long)blockIdx.y * gridDim.x + blockIdx.x] = rtx_acc;\n\
         }}\n\n\
         // Stage 2: block r combines the `parts` partial results of row r in order, then applies\n\
         // `finish` with the row length `n`.\n\
         template <typename S>\n\
         __device__ __forceinline__ void {name}_final(const typename rtx_elem<S>::acc* rtx_part, S* rtx_out, unsigned long long parts, unsigned long long n) {{\n\
         \x20 typedef typename rtx_elem<S>::acc A;\n\
         \x20 __shared__ A rtx_warp[32];\n\
         \x20 const A* rtx_row = rtx_part + (unsigned long long)blockIdx.x * parts;\n\
         \x20 A rtx_acc = {name}_identity<A>();\n\
         \x20 for (unsigned long long rtx_j = threadIdx.x; rtx_j < parts; rtx_j += blockDim.x) {{\n\
         \x20   rtx_acc = {name}_combine<A>(rtx_acc, rtx_row[rtx_j]);\n\
         \x20 }}\n\
         \x20 rtx_acc = {name}_block<A>(rtx_acc, rtx_warp);\n\
         \x20 if (threadIdx.x == 0u) rtx_out[blockIdx.x] = rtx_elem<S>::narrow({name}_finish<A>(rtx_acc, (A)n));\n\
         }}\n\n"
    )
}
