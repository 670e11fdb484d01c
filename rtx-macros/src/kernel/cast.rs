//! `#[kernel(elementwise)]` with a second type parameter, `fn f<T: Float, U: Float>(x: T) -> U`
//! (either bound may be `Num` or `Element` too): the body computes in `T`'s compute type, its
//! value is rounded to `T` and then converted to `U` exactly as `Element::cast` does (between
//! integer types through i64, otherwise through f64), natively and on the GPU alike. One
//! CUDA entry per (input, output) type pair and variant: `<name>_contig_<t>_to_<u>` and
//! `<name>_strided_<t>_to_<u>`, with no vector loads (the two element sizes differ).
//!
//! Invariant: native maps and CUDA entries take arguments in the elementwise order (every
//! parameter in declaration order, then `out`, then the shape for strided entries and `n`).

use super::cuda::{self, Writer, cty};
use super::elementwise::strided_coords;
use super::ir::{KernelFn, ParamTy, Ty};
use super::native::NativeCx;
use super::{PTy, acc_of, check_reserved, dtypes, params_tokens};
use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::{Error, ItemFn, Result};

/// The native function, its module, and the CUDA entries of a cast-like kernel.
pub fn emit(cx: &NativeCx, item: &ItemFn, k: &KernelFn) -> Result<TokenStream> {
    check_reserved(&k.params, &["out", "shape"])?;
    for p in &k.params {
        match p.ty {
            ParamTy::Scalar(Ty::Elem) => {}
            ParamTy::Scalar(t) if p.uniform && t != Ty::Bool => {}
            _ => {
                return Err(Error::new(
                    p.name.span(),
                    "a kernel with an output type reads `T` inputs (and `#[uniform]` scalars)",
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
    let Some((u, u_elem)) = &k.out_generic else {
        return Err(Error::new(k.name.span(), "no output type parameter"));
    };
    let u_bound = item
        .sig
        .generics
        .params
        .iter()
        .filter_map(|p| match p {
            syn::GenericParam::Type(t) if t.ident == *u => {
                let b = &t.bounds;
                Some(quote!(#b))
            }
            _ => None,
        })
        .next()
        .unwrap_or_default();
    let attrs = super::kept_attrs(item);
    let vis = &item.vis;
    let kr = &cx.krate;
    let bound = &cx.bound;
    let (name, t) = (&k.name, &k.generic);
    let name_s = name.to_string();
    let params = super::native_params(cx, &k.params);
    let widen = super::widen_params(cx, &k.params);
    let body = cx.block(&k.body);
    let inputs: Vec<_> = k
        .params
        .iter()
        .filter(|p| !p.uniform)
        .map(|p| &p.name)
        .collect();
    let scalar_ty = |p: &super::ir::Param| match p.ty {
        ParamTy::Scalar(Ty::Elem) => quote!(#t),
        ParamTy::Scalar(s) => cx.ty(s),
        _ => quote!(()),
    };
    let map_params = k.params.iter().map(|p| {
        let n = &p.name;
        if p.uniform {
            let ty = scalar_ty(p);
            quote!(#n: #ty)
        } else {
            quote!(#n: &[#t])
        }
    });
    let strided_params = k.params.iter().map(|p| {
        let n = &p.name;
        if p.uniform {
            let ty = scalar_ty(p);
            quote!(#n: #ty)
        } else {
            let st = format_ident!("{}_strides", n);
            quote!(#n: &[#t], #st: &#kr::kernel::KernelStrides)
        }
    });
    let call_contig = k.params.iter().map(|p| {
        let n = &p.name;
        if p.uniform {
            quote!(#n)
        } else {
            quote!(#n[__rtx_i])
        }
    });
    let offs: Vec<_> = (0..inputs.len())
        .map(|i| format_ident!("__rtx_o{}", i))
        .collect();
    let mut oi = 0;
    let call_strided: Vec<_> = k
        .params
        .iter()
        .map(|p| {
            let n = &p.name;
            if p.uniform {
                quote!(#n)
            } else {
                let o = &offs[oi];
                oi += 1;
                quote!(#n[#o])
            }
        })
        .collect();
    let len_checks = inputs.iter().map(|n| {
        let s = n.to_string();
        quote!(#kr::kernel::rt::check_len(#name_s, #s, #n.len(), out.len())?;)
    });
    let strided_inputs = inputs.iter().map(|n| {
        let s = n.to_string();
        let st = format_ident!("{}_strides", n);
        quote!((#s, #n.len(), #st))
    });

    let (source, contig_desc, strided_desc) = cuda_source(k, *u_elem);
    let contig_desc = params_tokens(kr, &contig_desc);
    let strided_desc = params_tokens(kr, &strided_desc);
    let mut entries = Vec::new();
    for (variant, vname, desc) in [
        ("contig", "Contiguous", &contig_desc),
        ("strided", "Strided", &strided_desc),
    ] {
        let v = format_ident!("{}", vname);
        for &(s, _, sdt) in dtypes(k.elem) {
            for &(d, _, ddt) in dtypes(*u_elem) {
                let sym = format!("{name_s}_{variant}_{s}_to_{d}");
                let (sdt, ddt) = (format_ident!("{}", sdt), format_ident!("{}", ddt));
                entries.push(quote!(#kr::kernel::KernelEntry {
                    symbol: #sym,
                    dtype: #kr::DType::#sdt,
                    out_dtype: #kr::DType::#ddt,
                    variant: #kr::kernel::Variant::#v,
                    params: #desc,
                    default_block: 256,
                    specialized: &[],
                }));
            }
        }
    }
    let n_inputs = inputs.len();
    let t_bound = format_ident!("{}", k.elem.bound());
    let u_bound_trait = format_ident!("{}", u_elem.bound());
    let narrowed = cx.narrow(body);
    let mod_doc = format!(
        "The `{name_s}` elementwise kernel from one element type to another, generated by \
         `#[kernel]`: its descriptor and slice maps over [`{name_s}`]({name_s}())."
    );
    Ok(quote! {
        #(#attrs)*
        #[allow(unused_parens, unused_mut, clippy::all)]
        #vis fn #name<#t: #bound, #u: #u_bound>(#(#params),*) -> #u {
            #(#widen)*
            let __rtx_v: #t = #narrowed;
            #kr::Element::cast::<#u>(__rtx_v)
        }

        #[doc = #mod_doc]
        #[allow(clippy::all)]
        #vis mod #name {
            /// The kernel's CUDA source and entry points, one per (input, output) type pair.
            pub static KERNEL: #kr::kernel::KernelSource = #kr::kernel::KernelSource {
                name: #name_s,
                kind: #kr::kernel::KernelKind::Elementwise { inputs: #n_inputs, vectors: false },
                source: #source,
                entries: &[#(#entries),*],
            };

            /// Applies the kernel to contiguous slices of equal length, into `out`.
            pub fn map<#t: #kr::#t_bound, #u: #kr::#u_bound_trait>(#(#map_params,)* out: &mut [#u]) -> ::core::result::Result<(), #kr::kernel::LaunchError> {
                #(#len_checks)*
                for (__rtx_i, __rtx_out) in out.iter_mut().enumerate() {
                    *__rtx_out = super::#name::<#t, #u>(#(#call_contig),*);
                }
                Ok(())
            }

            /// Applies the kernel over a contiguous `out` of `shape`, reading each input at
            /// its own offset and strides (a zero stride broadcasts).
            pub fn map_strided<#t: #kr::#t_bound, #u: #kr::#u_bound_trait>(#(#strided_params,)* out: &mut [#u], shape: &#kr::kernel::KernelShape) -> ::core::result::Result<(), #kr::kernel::LaunchError> {
                let __rtx_n = out.len();
                #kr::kernel::rt::for_each_strided(#name_s, shape, [#(#strided_inputs),*], __rtx_n, |__rtx_i, [#(#offs),*]| {
                    out[__rtx_i] = super::#name::<#t, #u>(#(#call_strided),*);
                })
            }
        }
    })
}

/// Named argument descriptions of one entry.
type ParamList = Vec<(String, PTy)>;

fn cuda_source(k: &KernelFn, u_elem: super::ir::ElemKind) -> (String, ParamList, ParamList) {
    let name = k.name.to_string();
    let mut src = cuda::preludes(true);
    src.push_str(&format!(
        "\n// `{name}`: elementwise kernel between element types, generated by #[kernel] from Rust.\n"
    ));
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
        .filter_map(|(p, c)| match p.ty {
            ParamTy::Scalar(t) => Some(format!("{} {c}", cty(t))),
            ParamTy::Slice { .. } | ParamTy::Table { .. } | ParamTy::Array { .. } => None,
        })
        .collect();
    let tail = w.block_body(&k.body).unwrap_or_default();
    w.line(&format!("return {tail};"));
    src.push_str(&format!(
        "template <typename A>\n__device__ __forceinline__ A {name}_body({}) {{\n{}}}\n\n",
        body_params.join(", "),
        w.out
    ));
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
                if p.uniform {
                    c.clone()
                } else {
                    format!("rtx_elem<S>::widen({})", arg(c))
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    // Rounded to `S`, then converted to `D` as `Element::cast` does.
    let store = |args: String| {
        format!(
            "rtx_cast<S, D>(rtx_elem<S>::narrow({name}_body<typename rtx_elem<S>::acc>({args})))"
        )
    };
    let (mut sig, mut desc, mut ssig, mut sdesc) = (vec![], vec![], vec![], vec![]);
    for (p, c) in k.params.iter().zip(&cnames) {
        let ParamTy::Scalar(t) = p.ty else { continue };
        if p.uniform {
            sig.push(format!("{} {c}", uniform_ty(t)));
            ssig.push(format!("{} {c}", uniform_ty(t)));
            desc.push((p.name.to_string(), PTy::Value(t)));
            sdesc.push((p.name.to_string(), PTy::Value(t)));
        } else {
            sig.push(format!("const S* {c}"));
            ssig.push(format!("const S* {c}"));
            ssig.push(format!("rtx_strides rtx_st_{c}"));
            desc.push((p.name.to_string(), PTy::Ptr(Ty::Elem, false)));
            sdesc.push((p.name.to_string(), PTy::Ptr(Ty::Elem, false)));
            sdesc.push((format!("{}_strides", p.name), PTy::Strides));
        }
    }
    sig.extend([
        "D* rtx_out".to_string(),
        "unsigned long long rtx_n".to_string(),
    ]);
    ssig.extend([
        "D* rtx_out".to_string(),
        "rtx_shape rtx_dims".to_string(),
        "unsigned long long rtx_n".to_string(),
    ]);
    desc.push(("out".into(), PTy::OutPtr));
    desc.push(("n".into(), PTy::Value(Ty::Usize)));
    sdesc.push(("out".into(), PTy::OutPtr));
    sdesc.push(("shape".into(), PTy::Shape));
    sdesc.push(("n".into(), PTy::Value(Ty::Usize)));
    let contig_value = store(call(&|c| format!("{c}[rtx_i]")));
    src.push_str(&format!(
        "template <typename S, typename D>\n__device__ __forceinline__ void {name}_contig({sig}) {{\n\
         \x20 const unsigned long long rtx_step = (unsigned long long)gridDim.x * blockDim.x;\n\
         \x20 for (unsigned long long rtx_i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; rtx_i < rtx_n; rtx_i += rtx_step) {{\n\
         \x20   rtx_out[rtx_i] = {contig_value};\n\
         \x20 }}\n\
         }}\n\n",
        sig = sig.join(", "),
    ));
    let ins: Vec<&String> = k
        .params
        .iter()
        .zip(&cnames)
        .filter(|(p, _)| !p.uniform)
        .map(|(_, c)| c)
        .collect();
    let offs_init: String = ins
        .iter()
        .map(|c| format!("    long long rtx_o_{c} = rtx_st_{c}.offset;\n"))
        .collect();
    let offs_step: String = ins
        .iter()
        .map(|c| format!("      rtx_o_{c} += (long long)rtx_c * rtx_st_{c}.strides[rtx_d];\n"))
        .collect();
    let strided_value = store(call(&|c| format!("{c}[rtx_o_{c}]")));
    src.push_str(&format!(
        "template <typename S, typename D>\n__device__ __forceinline__ void {name}_strided({sig}) {{\n\
         \x20 const unsigned long long rtx_step = (unsigned long long)gridDim.x * blockDim.x;\n\
         \x20 for (unsigned long long rtx_i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; rtx_i < rtx_n; rtx_i += rtx_step) {{\n\
         \x20   unsigned long long rtx_rem = rtx_i;\n\
         {offs_init}\
         {coords}\
         \x20   rtx_out[rtx_i] = {strided_value};\n\
         \x20 }}\n\
         }}\n\n",
        sig = ssig.join(", "),
        coords = strided_coords(&offs_step),
    ));
    for &(s_suffix, s, _) in dtypes(k.elem) {
        for &(d_suffix, d, _) in dtypes(u_elem) {
            for (variant, sig) in [("contig", &sig), ("strided", &ssig)] {
                let concrete: Vec<String> = sig
                    .iter()
                    .map(|p| {
                        p.replace("typename rtx_elem<S>::acc", acc_of(s))
                            .replace("const S*", &format!("const {s}*"))
                            .replace("D*", &format!("{d}*"))
                    })
                    .collect();
                let args: Vec<&str> = sig
                    .iter()
                    .map(|p| p.rsplit(' ').next().unwrap_or(""))
                    .collect();
                src.push_str(&format!(
                    "extern \"C\" __global__ void {name}_{variant}_{s_suffix}_to_{d_suffix}({}) {{\n  RTX_ENTRY();\n  {name}_{variant}<{s}, {d}>({});\n}}\n",
                    concrete.join(", "),
                    args.join(", ")
                ));
            }
        }
    }
    (src, desc, sdesc)
}
