//! `#[kernel(elementwise)]`: the scalar function itself, a module of the same name with the
//! kernel's descriptor and its contiguous and strided slice maps, and CUDA entry points per
//! element type (a contiguous path with 16-byte vector loads and a strided/broadcast path).
//!
//! Invariant: the native maps and the CUDA entries take their arguments in the same order:
//! every parameter in declaration order (inputs as buffers, `#[uniform]` ones as scalars),
//! then `out`, then the shape (strided only) and `n` (CUDA only).

use super::call;
use super::cuda::{self, cty};
use super::ir::{KernelFn, ParamTy, Ty};
use super::native::NativeCx;
use super::{PTy, acc_of, check_reserved, dtypes, entries_tokens, params_tokens};
use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::{Error, ItemFn, Result};

/// The user's elementwise kernel; `grads` names, per tensor input in order, its derived
/// derivative kernel (`None` where none was derived).
pub fn emit(
    cx: &NativeCx,
    item: &ItemFn,
    k: &KernelFn,
    grads: &[Option<syn::Ident>],
    exports: TokenStream,
) -> Result<TokenStream> {
    let attrs = super::kept_attrs(item);
    emit_kernel(cx, &item.vis, quote!(#(#attrs)*), k, None, grads, exports)
}

/// A derived `<name>_grad_<input>` kernel.
pub fn emit_grad(
    cx: &NativeCx,
    item: &ItemFn,
    g: &KernelFn,
    base: &syn::Ident,
    wrt: &syn::Ident,
) -> Result<TokenStream> {
    let doc = format!(
        "`grad * d {base} / d {wrt}`: the derivative of [`{base}`] with respect to `{wrt}`, \
         derived by `#[kernel]`; takes `{base}`'s arguments and the upstream gradient."
    );
    let exports = call::module_items(cx, g, &[]);
    emit_kernel(
        cx,
        &item.vis,
        quote!(#[doc = #doc]),
        g,
        Some(base),
        &[],
        exports,
    )
}

fn emit_kernel(
    cx: &NativeCx,
    vis: &syn::Visibility,
    attrs: TokenStream,
    k: &KernelFn,
    grad_of: Option<&syn::Ident>,
    grads: &[Option<syn::Ident>],
    exports: TokenStream,
) -> Result<TokenStream> {
    check_reserved(&k.params, &["out", "shape"])?;
    for p in &k.params {
        match p.ty {
            ParamTy::Scalar(Ty::Elem) => {}
            // A `bool` input is a mask buffer (for `where` and the like); a uniform `bool`
            // would be a branch the caller can take on the host.
            ParamTy::Scalar(Ty::Bool) if !p.uniform => {}
            ParamTy::Scalar(Ty::Bool) => {
                return Err(Error::new(
                    p.name.span(),
                    "`#[uniform]` parameters cannot be `bool`: branch on the host instead",
                ));
            }
            ParamTy::Scalar(_) if p.uniform => {}
            _ => {
                return Err(Error::new(
                    p.name.span(),
                    "elementwise inputs have the element type `T`; mark other scalars `#[uniform]`",
                ));
            }
        }
    }
    if !k.params.iter().any(|p| !p.uniform) {
        return Err(Error::new(
            k.name.span(),
            "an elementwise kernel needs at least one input that is not `#[uniform]`",
        ));
    }
    let kr = &cx.krate;
    let bound = &cx.bound;
    let (name, t) = (&k.name, &k.generic);
    let name_s = name.to_string();
    let params = super::native_params(cx, &k.params);
    let widen = super::widen_params(cx, &k.params);
    // A callable kernel's body is written once, as its module's `scalar`, and called here.
    let body = if call::callable(k) {
        let names = k.params.iter().map(|p| &p.name);
        quote!(#name::scalar::<#t>(#(#names),*))
    } else {
        cx.block(&k.body)
    };
    // A predicate returns its `bool` as is; a `T` result is rounded to the storage type.
    let (ret, ret_ty) = if k.ret == Ty::Bool {
        (body, quote!(bool))
    } else {
        (cx.narrow(body), quote!(#t))
    };
    let in_ty = |p: &super::ir::Param| {
        if p.ty == ParamTy::Scalar(Ty::Bool) {
            quote!(bool)
        } else {
            quote!(#t)
        }
    };
    let allow = grad_of.map(|_| quote!(#[allow(unused_variables)]));

    // Slice helpers.
    let inputs: Vec<_> = k
        .params
        .iter()
        .filter(|p| !p.uniform)
        .map(|p| &p.name)
        .collect();
    let call_args_contig = k.params.iter().map(|p| {
        let n = &p.name;
        if p.uniform {
            quote!(#n)
        } else {
            quote!(#n[__rtx_i])
        }
    });
    let len_checks = inputs.iter().map(|n| {
        let s = n.to_string();
        quote!(#kr::kernel::rt::check_len(#name_s, #s, #n.len(), out.len())?;)
    });
    let map_params = k.params.iter().map(|p| {
        let n = &p.name;
        if p.uniform {
            let ty = match p.ty {
                ParamTy::Scalar(Ty::Elem) => quote!(#t),
                ParamTy::Scalar(s) => cx.ty(s),
                _ => quote!(()),
            };
            quote!(#n: #ty)
        } else {
            let e = in_ty(p);
            quote!(#n: &[#e])
        }
    });
    let strided_params = k.params.iter().map(|p| {
        let n = &p.name;
        if p.uniform {
            let ty = match p.ty {
                ParamTy::Scalar(Ty::Elem) => quote!(#t),
                ParamTy::Scalar(s) => cx.ty(s),
                _ => quote!(()),
            };
            quote!(#n: #ty)
        } else {
            let st = format_ident!("{}_strides", n);
            let e = in_ty(p);
            quote!(#n: &[#e], #st: &#kr::kernel::KernelStrides)
        }
    });
    let offs: Vec<_> = (0..inputs.len())
        .map(|i| format_ident!("__rtx_o{}", i))
        .collect();
    let strided_inputs = inputs.iter().map(|n| {
        let s = n.to_string();
        let st = format_ident!("{}_strides", n);
        quote!((#s, #n.len(), #st))
    });
    let mut oi = 0;
    let call_args_strided = k.params.iter().map(|p| {
        let n = &p.name;
        if p.uniform {
            quote!(#n)
        } else {
            let o = &offs[oi];
            oi += 1;
            quote!(#n[#o])
        }
    });

    let (source, contig_params, strided_params_desc) = cuda_source(k);
    let source = call::source_tokens(kr, &source, &k.body);
    let contig_desc = params_tokens(kr, &contig_params);
    let strided_desc = params_tokens(kr, &strided_params_desc);
    let out_dt = (k.ret == Ty::Bool).then_some("Bool");
    let mut entries = entries_tokens(
        kr,
        k.elem,
        "Contiguous",
        &contig_desc,
        |s| format!("{name_s}_contig_{s}"),
        out_dt,
        &[],
    );
    entries.extend(entries_tokens(
        kr,
        k.elem,
        "Strided",
        &strided_desc,
        |s| format!("{name_s}_strided_{s}"),
        out_dt,
        &[],
    ));
    let n_inputs = inputs.len();
    let elem_bound = quote::format_ident!("{}", k.elem.bound());
    let mod_doc = format!(
        "The `{name_s}` elementwise kernel, generated by `#[kernel]`: its descriptor \
         (CUDA source and entry points) and slice maps over the scalar function [`{name_s}`]({name_s}())."
    );
    let map_doc = format!(
        "Applies [`{name_s}`]({name_s}()) to contiguous slices of equal length, into `out`."
    );
    let strided_doc = format!(
        "Applies [`{name_s}`]({name_s}()) over a contiguous `out` of `shape`, reading each input at \
         its own offset and strides (a zero stride broadcasts)."
    );
    let marker = marker(cx, k, grads);

    Ok(quote! {
        #attrs
        #allow
        #[allow(unused_parens, unused_mut, clippy::all)]
        #vis fn #name<#t: #bound>(#(#params),*) -> #ret_ty {
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
                kind: #kr::kernel::KernelKind::Elementwise { inputs: #n_inputs, vectors: true },
                source: #source,
                entries: &[#(#entries),*],
            };

            #[doc = #map_doc]
            pub fn map<#t: #kr::#elem_bound>(#(#map_params,)* out: &mut [#ret_ty]) -> ::core::result::Result<(), #kr::kernel::LaunchError> {
                #(#len_checks)*
                for (__rtx_i, __rtx_out) in out.iter_mut().enumerate() {
                    *__rtx_out = super::#name::<#t>(#(#call_args_contig),*);
                }
                Ok(())
            }

            #[doc = #strided_doc]
            pub fn map_strided<#t: #kr::#elem_bound>(#(#strided_params,)* out: &mut [#ret_ty], shape: &#kr::kernel::KernelShape) -> ::core::result::Result<(), #kr::kernel::LaunchError> {
                let __rtx_n = out.len();
                #kr::kernel::rt::for_each_strided(#name_s, shape, [#(#strided_inputs),*], __rtx_n, |__rtx_i, [#(#offs),*]| {
                    out[__rtx_i] = super::#name::<#t>(#(#call_args_strided),*);
                })
            }

            #marker

            #exports
        }
    })
}

/// The marker type `Op` implementing `Elementwise<N>`, for kernels whose inputs and result
/// all have the element type (masks, predicates and casts get none): how `rtx::kernel`
/// applies the kernel to tensors. Emitted inside the kernel's module.
fn marker(cx: &NativeCx, k: &KernelFn, grads: &[Option<syn::Ident>]) -> TokenStream {
    let elem_only = k.ret == Ty::Elem
        && k.out_generic.is_none()
        && k.params
            .iter()
            .all(|p| p.uniform || p.ty == ParamTy::Scalar(Ty::Elem));
    if !elem_only {
        return TokenStream::new();
    }
    let kr = &cx.krate;
    let (name, t) = (&k.name, &k.generic);
    let n_inputs = k.params.iter().filter(|p| !p.uniform).count();
    // Uniforms arrive as f64 and are converted once per call, before the element loop.
    let binds: Vec<TokenStream> = k
        .params
        .iter()
        .filter(|p| p.uniform)
        .enumerate()
        .map(|(i, p)| {
            let n = &p.name;
            match p.ty {
                ParamTy::Scalar(Ty::Elem) => {
                    quote!(let #n: #t = #kr::kernel::rt::uniform_elem::<#t>(__rtx_uniforms, #i);)
                }
                ParamTy::Scalar(s) => {
                    let ty = cx.ty(s);
                    quote!(let #n: #ty = #kr::kernel::rt::uniform_f64(__rtx_uniforms, #i) as #ty;)
                }
                ParamTy::Slice { .. } | ParamTy::Table { .. } | ParamTy::Array { .. } => {
                    TokenStream::new()
                }
            }
        })
        .collect();
    let mut next = 0usize;
    let args: Vec<TokenStream> = k
        .params
        .iter()
        .map(|p| {
            let n = &p.name;
            if p.uniform {
                quote!(#n)
            } else {
                let i = next;
                next += 1;
                quote!(__rtx_xs[#i])
            }
        })
        .collect();
    let grad_consts = (0..n_inputs).map(|i| match grads.get(i) {
        Some(Some(g)) => quote!(::core::option::Option::Some(&super::#g::KERNEL)),
        _ => quote!(::core::option::Option::None),
    });
    let grad_arms = grads.iter().enumerate().filter_map(|(i, g)| {
        let g = g.as_ref()?;
        Some(quote!(#i => super::#g::<#t>(#(#args,)* __rtx_xs[#n_inputs]),))
    });
    let doc = format!(
        "`{name}` as a marker type: apply it to tensors with `rtx::kernel::map` (one input), \
         `map2` or `map3`, on the CPU or a GPU."
    );
    quote! {
        #[doc = #doc]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct Op;

        #[allow(unused_variables, clippy::all)]
        impl #kr::kernel::Elementwise<#n_inputs> for Op {
            const KERNEL: &'static #kr::kernel::KernelSource = &KERNEL;
            const GRADS: [::core::option::Option<&'static #kr::kernel::KernelSource>; #n_inputs] =
                [#(#grad_consts),*];

            fn scalar<#t: #kr::Float>(
                __rtx_uniforms: &[f64],
            ) -> impl Fn(&[#t]) -> #t + Copy + Send + Sync + 'static {
                #(#binds)*
                move |__rtx_xs: &[#t]| -> #t { super::#name::<#t>(#(#args),*) }
            }

            fn scalar_grad<#t: #kr::Float>(
                __rtx_wrt: usize,
                __rtx_uniforms: &[f64],
            ) -> impl Fn(&[#t]) -> #t + Copy + Send + Sync + 'static {
                #(#binds)*
                move |__rtx_xs: &[#t]| -> #t {
                    match __rtx_wrt {
                        #(#grad_arms)*
                        _ => <#t as #kr::Float>::NAN,
                    }
                }
            }
        }
    }
}

/// The CUDA source and the argument lists of the contiguous and strided entries.
/// Named argument descriptions of one entry.
type ParamList = Vec<(String, PTy)>;

fn cuda_source(k: &KernelFn) -> (String, ParamList, ParamList) {
    let name = k.name.to_string();
    let mut src = format!("\n// `{name}`: elementwise kernel generated by #[kernel] from Rust.\n");
    // The scalar body, in the compute type A.
    let (body, cnames, uses_num) = call::body_function(k);
    src.push_str(&body);
    // `bool` buffers (masks in, predicates out) are read and written as they are; `T` ones
    // are widened to the compute type and narrowed back.
    let is_bool = |p: &super::ir::Param| p.ty == ParamTy::Scalar(Ty::Bool);
    let ptr_c = |p: &super::ir::Param| {
        if is_bool(p) {
            "const bool*"
        } else {
            "const S*"
        }
    };
    let ptr_ty = |p: &super::ir::Param| if is_bool(p) { Ty::Bool } else { Ty::Elem };
    let (out_c, out_ty) = if k.ret == Ty::Bool {
        ("bool* rtx_out", Ty::Bool)
    } else {
        ("S* rtx_out", Ty::Elem)
    };
    let narrow = |e: String| {
        if k.ret == Ty::Bool {
            e
        } else {
            format!("rtx_elem<S>::narrow({e})")
        }
    };
    // Vector loads assume one element size across buffers.
    let vectorize = k.ret == Ty::Elem && !k.params.iter().any(is_bool);

    let is_in = |p: &super::ir::Param| !p.uniform;
    let uniform_ty = |t: Ty| {
        if t == Ty::Elem {
            "typename rtx_elem<S>::acc".to_string()
        } else {
            cty(t).to_string()
        }
    };
    let call = |arg: &dyn Fn(&str) -> String| -> String {
        k.params
            .iter()
            .zip(&cnames)
            .map(|(p, c)| {
                if is_in(p) && !is_bool(p) {
                    format!("rtx_elem<S>::widen({})", arg(c))
                } else if is_in(p) {
                    arg(c)
                } else {
                    c.clone()
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    };

    // Contiguous path.
    let mut sig = Vec::new();
    let mut desc = Vec::new();
    for (p, c) in k.params.iter().zip(&cnames) {
        if let ParamTy::Scalar(t) = p.ty {
            if is_in(p) {
                sig.push(format!("{} {c}", ptr_c(p)));
                desc.push((p.name.to_string(), PTy::Ptr(ptr_ty(p), false)));
            } else {
                sig.push(format!("{} {c}", uniform_ty(t)));
                desc.push((p.name.to_string(), PTy::Value(t)));
            }
        }
    }
    sig.push(out_c.into());
    sig.push("unsigned long long rtx_n".into());
    desc.push(("out".into(), PTy::Ptr(out_ty, true)));
    desc.push(("n".into(), PTy::Value(Ty::Usize)));
    let aligned: Vec<String> = k
        .params
        .iter()
        .zip(&cnames)
        .filter(|(p, _)| is_in(p))
        .map(|(_, c)| format!("rtx_aligned16({c})"))
        .chain(std::iter::once("rtx_aligned16(rtx_out)".to_string()))
        .collect();
    let vec_loads: String = k
        .params
        .iter()
        .zip(&cnames)
        .filter(|(p, _)| is_in(p))
        .map(|(_, c)| format!("    const rtx_vec<S> rtx_v_{c} = rtx_load_vec({c}, rtx_v);\n"))
        .collect();
    let vec_call = call(&|c| format!("rtx_v_{c}.v[rtx_k]"));
    let scalar_call = call(&|c| format!("{c}[rtx_i]"));
    if !vectorize {
        let value = narrow(format!("{name}_body<A>({scalar_call})"));
        src.push_str(&format!(
            "template <typename S>\n__device__ __forceinline__ void {name}_contig({sig}) {{\n\
             \x20 typedef typename rtx_elem<S>::acc A;\n\
             \x20 const unsigned long long rtx_step = (unsigned long long)gridDim.x * blockDim.x;\n\
             \x20 for (unsigned long long rtx_i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; rtx_i < rtx_n; rtx_i += rtx_step) {{\n\
             \x20   rtx_out[rtx_i] = {value};\n\
             \x20 }}\n\
             }}\n\n",
            sig = sig.join(", "),
        ));
    } else {
        src.push_str(&format!(
        "template <typename S>\n__device__ __forceinline__ void {name}_contig({sig}) {{\n\
         \x20 typedef typename rtx_elem<S>::acc A;\n\
         \x20 const unsigned long long rtx_start = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;\n\
         \x20 const unsigned long long rtx_step = (unsigned long long)gridDim.x * blockDim.x;\n\
         \x20 const unsigned long long rtx_w = 16 / sizeof(S);\n\
         \x20 // 16-byte vector loads when every buffer is 16-byte aligned, then a scalar tail.\n\
         \x20 const bool rtx_aligned = {aligned};\n\
         \x20 const unsigned long long rtx_nv = rtx_aligned ? rtx_n / rtx_w : 0ull;\n\
         \x20 for (unsigned long long rtx_v = rtx_start; rtx_v < rtx_nv; rtx_v += rtx_step) {{\n\
         {vec_loads}\
         \x20   rtx_vec<S> rtx_o;\n\
         #pragma unroll\n\
         \x20   for (unsigned int rtx_k = 0; rtx_k < 16 / sizeof(S); ++rtx_k) {{\n\
         \x20     rtx_o.v[rtx_k] = rtx_elem<S>::narrow({name}_body<A>({vec_call}));\n\
         \x20   }}\n\
         \x20   rtx_store_vec(rtx_out, rtx_v, rtx_o);\n\
         \x20 }}\n\
         \x20 for (unsigned long long rtx_i = rtx_nv * rtx_w + rtx_start; rtx_i < rtx_n; rtx_i += rtx_step) {{\n\
         \x20   rtx_out[rtx_i] = rtx_elem<S>::narrow({name}_body<A>({scalar_call}));\n\
         \x20 }}\n\
         }}\n\n",
        sig = sig.join(", "),
        aligned = aligned.join(" && "),
    ));
    }

    // Strided path.
    let mut ssig = Vec::new();
    let mut sdesc = Vec::new();
    for (p, c) in k.params.iter().zip(&cnames) {
        if let ParamTy::Scalar(t) = p.ty {
            if is_in(p) {
                ssig.push(format!("{} {c}", ptr_c(p)));
                ssig.push(format!("rtx_strides rtx_st_{c}"));
                sdesc.push((p.name.to_string(), PTy::Ptr(ptr_ty(p), false)));
                sdesc.push((format!("{}_strides", p.name), PTy::Strides));
            } else {
                ssig.push(format!("{} {c}", uniform_ty(t)));
                sdesc.push((p.name.to_string(), PTy::Value(t)));
            }
        }
    }
    ssig.push(out_c.into());
    ssig.push("rtx_shape rtx_dims".into());
    ssig.push("unsigned long long rtx_n".into());
    sdesc.push(("out".into(), PTy::Ptr(out_ty, true)));
    sdesc.push(("shape".into(), PTy::Shape));
    sdesc.push(("n".into(), PTy::Value(Ty::Usize)));
    // Inputs with their buffer's element type in C (`S`, or `bool` for a mask).
    let ins: Vec<(&String, &str)> = k
        .params
        .iter()
        .zip(&cnames)
        .filter(|(p, _)| is_in(p))
        .map(|(p, c)| (c, if is_bool(p) { "bool" } else { "S" }))
        .collect();
    let out_t = if k.ret == Ty::Bool { "bool" } else { "S" };
    let offs_init: String = ins
        .iter()
        .map(|(c, _)| format!("    long long rtx_o_{c} = rtx_st_{c}.offset;\n"))
        .collect();
    let offs_step: String = ins
        .iter()
        .map(|(c, _)| format!("      rtx_o_{c} += (long long)rtx_c * rtx_st_{c}.strides[rtx_d];\n"))
        .collect();
    // In a vector launch (decided by the host, which knows every layout and address) bit
    // `i` of `rtx_dims.vectors` says input `i` is read as vectors, else as one value repeated.
    let vec_loads: String = ins
        .iter()
        .enumerate()
        .map(|(i, (c, t))| {
            format!(
                "    const rtx_pack<{t}, rtx_w> rtx_p_{c} = (rtx_dims.vectors >> {i}) & 1u ? rtx_load_pack<{t}, rtx_w>({c} + rtx_o_{c}) : rtx_splat_pack<{t}, rtx_w>({c}[rtx_o_{c}]);\n"
            )
        })
        .collect();
    let vec_value = narrow(format!(
        "{name}_body<A>({})",
        call(&|c| format!("rtx_p_{c}.v[rtx_k]"))
    ));
    let strided_call = call(&|c| format!("{c}[rtx_o_{c}]"));
    let strided_value = narrow(format!("{name}_body<A>({strided_call})"));
    src.push_str(&format!(
        "template <typename S>\n__device__ __forceinline__ void {name}_strided({sig}) {{\n\
         \x20 typedef typename rtx_elem<S>::acc A;\n\
         \x20 const unsigned long long rtx_start = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;\n\
         \x20 const unsigned long long rtx_step = (unsigned long long)gridDim.x * blockDim.x;\n\
         \x20 // A vector launch: 16 bytes of S (masks: as many bools) share one index computation,\n\
         \x20 // which is most of a strided element's cost; the shape counts vectors innermost.\n\
         \x20 const unsigned int rtx_w = 16 / sizeof(S);\n\
         \x20 const bool rtx_vok = (rtx_dims.vectors & 0x80000000u) != 0u;\n\
         \x20 for (unsigned long long rtx_v = rtx_start; rtx_vok && rtx_v < rtx_n / rtx_w; rtx_v += rtx_step) {{\n\
         \x20   unsigned long long rtx_rem = rtx_v;\n\
         {offs_init}\
         {coords}\
         {vec_loads}\
         \x20   rtx_pack<{out_t}, rtx_w> rtx_r;\n\
         \x20   #pragma unroll\n\
         \x20   for (unsigned int rtx_k = 0; rtx_k < rtx_w; ++rtx_k) {{\n\
         \x20     rtx_r.v[rtx_k] = {vec_value};\n\
         \x20   }}\n\
         \x20   rtx_store_pack<{out_t}, rtx_w>(rtx_out + rtx_v * rtx_w, rtx_r);\n\
         \x20 }}\n\
         \x20 for (unsigned long long rtx_i = rtx_start; !rtx_vok && rtx_i < rtx_n; rtx_i += rtx_step) {{\n\
         \x20   unsigned long long rtx_rem = rtx_i;\n\
         {offs_init}\
         {coords}\
         \x20   rtx_out[rtx_i] = {strided_value};\n\
         \x20 }}\n\
         }}\n\n",
        sig = ssig.join(", "),
        coords = strided_coords(&offs_step),
    ));

    // extern "C" entries.
    for &(suffix, s, _) in dtypes(k.elem) {
        let a = acc_of(s);
        for (variant, sig) in [("contig", &sig), ("strided", &ssig)] {
            let concrete: Vec<String> = sig
                .iter()
                .map(|p| {
                    p.replace("typename rtx_elem<S>::acc", a)
                        .replace("S*", &format!("{s}*"))
                })
                .collect();
            let args: Vec<&str> = sig
                .iter()
                .map(|p| p.rsplit(' ').next().unwrap_or(""))
                .collect();
            src.push_str(&format!(
                "extern \"C\" __global__ void {name}_{variant}_{suffix}({}) {{\n  RTX_ENTRY();\n  {name}_{variant}<{s}>({});\n}}\n",
                concrete.join(", "),
                args.join(", ")
            ));
        }
    }
    (cuda::preludes(uses_num) + &src, desc, sdesc)
}

/// The CUDA loop of a strided entry that turns the linear index `rtx_rem` into each input's
/// element offset, with `offs_step` adding coordinate `rtx_c` of dim `rtx_d`, innermost dim
/// first. The loop runs over the ABI's fixed 6 dims and is unrolled, so every index into the
/// `rtx_shape`/`rtx_strides` arguments is a constant: an index known only at run time makes
/// the compiler copy those structs into per-thread local memory, which cost an order of
/// magnitude in bandwidth (each thread handles about one element). 64-bit division is slow on
/// GPUs (emulated), so it divides in 32 bits whenever the values fit, and the outermost
/// coordinate needs no division at all (the index is below the element count).
pub(super) fn strided_coords(offs_step: &str) -> String {
    format!(
        "    const int rtx_rank = (int)rtx_dims.rank;\n\
         \x20   #pragma unroll\n\
         \x20   for (int rtx_d = 5; rtx_d >= 0; --rtx_d) {{\n\
         \x20     if (rtx_d >= rtx_rank) continue;\n\
         \x20     unsigned long long rtx_c = rtx_rem;\n\
         \x20     if (rtx_d > 0) {{\n\
         \x20       const unsigned long long rtx_dim = rtx_dims.dims[rtx_d];\n\
         \x20       if ((rtx_rem | rtx_dim) < 4294967296ull) {{\n\
         \x20         const unsigned int rtx_q = (unsigned int)rtx_rem / (unsigned int)rtx_dim;\n\
         \x20         rtx_c = rtx_rem - (unsigned long long)rtx_q * rtx_dim;\n\
         \x20         rtx_rem = rtx_q;\n\
         \x20       }} else {{\n\
         \x20         rtx_c = rtx_rem % rtx_dim;\n\
         \x20         rtx_rem /= rtx_dim;\n\
         \x20       }}\n\
         \x20     }}\n\
         {offs_step}\
         \x20   }}\n"
    )
}
