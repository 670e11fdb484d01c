//! `#[kernel]`: one Rust function becomes native Rust and self-contained CUDA C source.
//!
//! The pipeline: `mod.rs` reads the attribute and the signature, `parse.rs` type-checks the
//! body into the IR (`ir.rs`), and each kind (`elementwise.rs`, `reduce.rs`, `simt.rs`) emits
//! its native items through `native.rs` and its CUDA entry points through `cuda.rs`;
//! `grad.rs` derives elementwise derivative kernels. Kernels call kernel functions
//! (`call.rs`) and the device functions SIMT code shares (`device.rs`). The user-facing documentation is on the
//! `kernel` attribute in `lib.rs`.
//!
//! Invariant: the macro never panics; everything it rejects is a `syn::Error` at the span of
//! the offending tokens.

mod call;
mod cast;
mod cuda;
mod device;
mod elementwise;
mod grad;
mod ir;
mod native;
mod parse;
mod reduce;
mod simt;
mod table;

use ir::{ElemKind, KernelFn, Param, ParamTy, Ty};
use parse::{Mode, Parser, coerce};
use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::spanned::Spanned;
use syn::{Error, Ident, ItemFn, Result};

/// Which kind the attribute asked for.
enum Kind {
    Simt,
    /// A device function: code SIMT kernels call, not a kernel of its own.
    Device,
    Elementwise,
    Reduce(Box<reduce::ReduceArgs>),
}

/// Whether to derive elementwise derivative kernels.
#[derive(Clone, Copy, PartialEq, Eq)]
enum GradOpt {
    /// Where the body is differentiable.
    Auto,
    /// Always; an error where the body is not differentiable.
    Required,
    /// Never.
    Off,
}

struct Args {
    kind: Kind,
    krate: TokenStream,
    grad: GradOpt,
    /// `specialize(d = 64, 128)`: see [`ir::KernelFn::specialize`].
    specialize: Vec<(Ident, Vec<u64>)>,
    /// `launch_bounds(256, 2)` and `launch_bounds(128, 3, d = 64)`: see
    /// [`ir::LaunchBounds`].
    launch_bounds: Vec<ir::LaunchBounds>,
}

/// The element types kernels are instantiated for: (suffix, CUDA storage type, DType). A
/// `T: Float` kernel takes the first four, `T: Num` the first seven, `T: Element` all.
const ALL_DTYPES: [(&str, &str, &str); 8] = [
    ("f32", "float", "F32"),
    ("f64", "double", "F64"),
    ("f16", "rtx_f16", "F16"),
    ("bf16", "rtx_bf16", "BF16"),
    ("i32", "int", "I32"),
    ("i64", "long long", "I64"),
    ("u8", "unsigned char", "U8"),
    ("bool", "bool", "Bool"),
];

/// The element types a kernel over `T: <elem>` is instantiated for.
fn dtypes(elem: ElemKind) -> &'static [(&'static str, &'static str, &'static str)] {
    match elem {
        ElemKind::Float => &ALL_DTYPES[..4],
        ElemKind::Num => &ALL_DTYPES[..7],
        ElemKind::Element => &ALL_DTYPES[..],
    }
}

/// The CUDA compute type of a storage type: `float` for the 16-bit floats, the type itself
/// otherwise.
fn acc_of(storage: &str) -> &'static str {
    ALL_DTYPES
        .iter()
        .map(|&(_, s, _)| s)
        .find(|&s| s == storage && !s.starts_with("rtx_"))
        .unwrap_or("float")
}

/// Entry point of the attribute.
pub fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let item: ItemFn = match syn::parse2(item) {
        Ok(item) => item,
        Err(e) => {
            return Error::new(e.span(), "`#[kernel]` goes on a function").to_compile_error();
        }
    };
    match expand_fn(attr, item) {
        Ok(ts) => ts,
        Err(e) => e.to_compile_error(),
    }
}

/// [`expand`] on a function another macro generated (`#[model]`'s fused kernels).
pub fn expand_item(attr: TokenStream, item: ItemFn) -> Result<TokenStream> {
    expand_fn(attr, item)
}

fn expand_fn(attr: TokenStream, item: ItemFn) -> Result<TokenStream> {
    let args = parse_args(attr)?;
    let mode = match args.kind {
        Kind::Simt | Kind::Device => Mode::Simt,
        _ => Mode::Scalar,
    };
    let device = matches!(args.kind, Kind::Device);
    let (mut k, parser) = parse_kernel(&item, mode, device)?;
    for (name, _) in &args.specialize {
        let integer = k
            .params
            .iter()
            .any(|p| p.name == *name && matches!(p.ty, ParamTy::Scalar(t) if t.is_int()));
        if !integer {
            return Err(Error::new(
                name.span(),
                format!(
                    "`specialize({name} = ..)` names no integer parameter of `{}`: it takes \
                     a `usize`, `u32`, `u64`, `i32` or `i64` parameter of the kernel",
                    k.name
                ),
            ));
        }
    }
    k.specialize = args.specialize.clone();
    // Bounds for specialized entries must name values those entries have.
    for b in &args.launch_bounds {
        for (name, v) in &b.when {
            let listed = args
                .specialize
                .iter()
                .any(|(n, values)| n == name && values.contains(v));
            if !listed {
                return Err(Error::new(
                    name.span(),
                    format!(
                        "`launch_bounds({}, {}, {name} = {v})` names no specialized entry of \
                         `{}`: `{name} = {v}` must be one of the values of a \
                         `specialize({name} = ..)`",
                        b.threads, b.blocks, k.name
                    ),
                ));
            }
        }
    }
    k.launch_bounds = args.launch_bounds;
    let cx = native::NativeCx {
        krate: args.krate.clone(),
        t: k.generic.clone(),
        bound: element_bound(&item.sig),
        elem: k.elem,
        simt: matches!(args.kind, Kind::Simt | Kind::Device),
    };
    match &args.kind {
        Kind::Elementwise if k.out_generic.is_some() => cast::emit(&cx, &item, &k),
        _ if k.out_generic.is_some() => Err(Error::new(
            item.sig.generics.span(),
            "only elementwise kernels take a second type parameter (the output type)",
        )),
        Kind::Elementwise => {
            // Derived first, so the kernel's marker can name its derivative kernels.
            let mut derived = Vec::new();
            if args.grad != GradOpt::Off {
                for p in k.params.iter().filter(|p| !p.uniform) {
                    match grad::derive(&k, &p.name) {
                        Some(g) => derived.push((p.name.clone(), Some(g))),
                        None if args.grad == GradOpt::Required => {
                            return Err(Error::new(
                                k.name.span(),
                                format!(
                                    "`#[kernel(elementwise, grad)]`: `{}` is not differentiable \
                                     with respect to `{}`: derivatives are derived for bodies of \
                                     `let` bindings, `if`/`else`, arithmetic and the math methods, \
                                     without loops or assignments",
                                    k.name, p.name
                                ),
                            ));
                        }
                        None => derived.push((p.name.clone(), None)),
                    }
                }
            }
            let names: Vec<Option<Ident>> = derived
                .iter()
                .map(|(_, g)| g.as_ref().map(|g| g.name.clone()))
                .collect();
            let by_index: Vec<(usize, &ir::KernelFn)> = derived
                .iter()
                .filter_map(|(wrt, g)| {
                    let i = k.params.iter().position(|p| p.name == *wrt)?;
                    Some((i, g.as_ref()?))
                })
                .collect();
            let exports = call::module_items(&cx, &k, &by_index);
            let mut out = elementwise::emit(&cx, &item, &k, &names, exports)?;
            for (wrt, g) in &derived {
                if let Some(g) = g {
                    out.extend(elementwise::emit_grad(&cx, &item, g, &k.name, wrt)?);
                }
            }
            Ok(out)
        }
        Kind::Reduce(r) => reduce::emit(&cx, &item, &k, r),
        Kind::Simt => simt::emit(&cx, &item, &k, &parser),
        Kind::Device => device::emit(&cx, &item, &k),
    }
}

fn parse_args(attr: TokenStream) -> Result<Args> {
    let mut kind = None;
    let mut krate = None;
    let mut grad = GradOpt::Auto;
    let mut specialize = Vec::new();
    let mut launch_bounds: Vec<ir::LaunchBounds> = Vec::new();
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident("elementwise") {
            kind = Some(Kind::Elementwise);
        } else if meta.path.is_ident("simt") {
            kind = Some(Kind::Simt);
        } else if meta.path.is_ident("device") {
            kind = Some(Kind::Device);
        } else if meta.path.is_ident("reduce") {
            kind = Some(Kind::Reduce(Box::new(reduce::ReduceArgs::parse(&meta)?)));
        } else if meta.path.is_ident("crate") {
            let v = meta.value()?;
            let path: syn::Path = if v.peek(syn::LitStr) {
                v.parse::<syn::LitStr>()?.parse()?
            } else {
                v.parse()?
            };
            krate = Some(quote!(#path));
        } else if meta.path.is_ident("grad") {
            grad = GradOpt::Required;
        } else if meta.path.is_ident("no_grad") {
            grad = GradOpt::Off;
        } else if meta.path.is_ident("specialize") {
            // specialize(name = 64, 128): one parameter and its values.
            let inner;
            syn::parenthesized!(inner in meta.input);
            let name: Ident = inner.parse()?;
            inner.parse::<syn::Token![=]>()?;
            let values =
                syn::punctuated::Punctuated::<syn::LitInt, syn::Token![,]>::parse_separated_nonempty(
                    &inner,
                )?;
            let values = values
                .iter()
                .map(|v| v.base10_parse::<u64>())
                .collect::<Result<Vec<_>>>()?;
            specialize.push((name, values));
        } else if meta.path.is_ident("launch_bounds") {
            // launch_bounds(threads, blocks[, param = value, ..]): the most threads a block
            // has, how many blocks an SM must hold at once, and which specialized entries
            // the bounds are for (all when none is named).
            let inner;
            syn::parenthesized!(inner in meta.input);
            let threads: syn::LitInt = inner.parse()?;
            inner.parse::<syn::Token![,]>()?;
            let blocks: syn::LitInt = inner.parse()?;
            let (t, b) = (
                threads.base10_parse::<u32>()?,
                blocks.base10_parse::<u32>()?,
            );
            if !(1..=1024).contains(&t) || b == 0 {
                return Err(Error::new(
                    threads.span(),
                    "`launch_bounds(threads, blocks)` takes 1 to 1024 threads and at least one block",
                ));
            }
            let mut when = Vec::new();
            while inner.parse::<Option<syn::Token![,]>>()?.is_some() && !inner.is_empty() {
                let name: Ident = inner.parse()?;
                inner.parse::<syn::Token![=]>()?;
                let v: syn::LitInt = inner.parse()?;
                when.push((name, v.base10_parse::<u64>()?));
            }
            if launch_bounds
                .iter()
                .any(|x: &ir::LaunchBounds| x.when == when)
            {
                return Err(Error::new(
                    threads.span(),
                    "a second `launch_bounds(..)` for the same entries: give each set of \
                     specialized values (or none, for every entry) one",
                ));
            }
            launch_bounds.push(ir::LaunchBounds {
                threads: t,
                blocks: b,
                when,
            });
        } else {
            return Err(meta.error(
                "unknown `#[kernel]` argument: expected `elementwise`, `reduce(identity = ..)`, \
                 `simt`, `device`, `grad`, `no_grad`, `specialize(param = v1, v2)`, \
                 `launch_bounds(threads, blocks[, param = value])` or `crate = path`",
            ));
        }
        Ok(())
    });
    syn::parse::Parser::parse2(parser, attr)?;
    let kind = kind.unwrap_or(Kind::Simt);
    if grad != GradOpt::Auto && !matches!(kind, Kind::Elementwise) {
        return Err(Error::new(
            proc_macro2::Span::call_site(),
            "`grad`/`no_grad` apply to elementwise kernels only",
        ));
    }
    if !launch_bounds.is_empty() && !matches!(kind, Kind::Simt) {
        return Err(Error::new(
            proc_macro2::Span::call_site(),
            "`launch_bounds(..)` applies to SIMT kernels only",
        ));
    }
    if !specialize.is_empty() && !matches!(kind, Kind::Simt) {
        return Err(Error::new(
            proc_macro2::Span::call_site(),
            "`specialize(..)` applies to SIMT kernels only",
        ));
    }
    Ok(Args {
        kind,
        krate: krate.unwrap_or_else(|| quote!(::rtx::__private::rtx_kernels)),
        grad,
        specialize,
        launch_bounds,
    })
}

/// Checks the signature and parses the body (`device`: of a device function).
fn parse_kernel(item: &ItemFn, mode: Mode, device: bool) -> Result<(KernelFn, Parser)> {
    let sig = &item.sig;
    if let Some(c) = &sig.constness {
        return Err(Error::new(c.span, "a kernel cannot be `const`"));
    }
    if let Some(a) = &sig.asyncness {
        return Err(Error::new(a.span, "a kernel cannot be `async`"));
    }
    if let Some(u) = &sig.unsafety {
        return Err(Error::new(u.span, "a kernel cannot be `unsafe`"));
    }
    if let Some(abi) = &sig.abi {
        return Err(Error::new(
            abi.span(),
            "a kernel has no `extern` ABI: the macro generates the `extern \"C\"` entry points",
        ));
    }
    if let Some(v) = &sig.variadic {
        return Err(Error::new(v.span(), "a kernel cannot be variadic"));
    }
    if let Some(w) = &sig.generics.where_clause {
        return Err(Error::new(
            w.span(),
            "a kernel takes no `where` clause: write `<T: Float>`",
        ));
    }
    let (generic, elem, out_generic) = element_param(sig)?;
    let mut parser = Parser::new(mode, generic.clone(), elem);
    if device {
        parser.device = Some(Ty::Unit);
    }
    let mut params = Vec::new();
    for input in &sig.inputs {
        let syn::FnArg::Typed(pt) = input else {
            return Err(Error::new(
                input.span(),
                "a kernel is a free function: no `self`",
            ));
        };
        let syn::Pat::Ident(pi) = &*pt.pat else {
            return Err(Error::new(
                pt.pat.span(),
                "kernel parameters are plain names",
            ));
        };
        if pi.by_ref.is_some() || pi.subpat.is_some() || pi.mutability.is_some() {
            return Err(Error::new(
                pt.pat.span(),
                "kernel parameters are plain names (no `mut`, `ref`)",
            ));
        }
        let mut uniform = false;
        let mut shared = false;
        for a in &pt.attrs {
            if a.path().is_ident("uniform") && mode == Mode::Scalar {
                uniform = true;
            } else if a.path().is_ident("shared") && device {
                shared = true;
            } else {
                return Err(Error::new(
                    a.span(),
                    "the parameter attributes are `#[uniform]`, on elementwise and reduce kernels, \
                     and `#[shared]`, on an array parameter of a device function",
                ));
            }
        }
        let mut ty = parser.param_ty(&pt.ty)?;
        match &mut ty {
            ParamTy::Array {
                shared: s, elem, ..
            } if shared => {
                if *elem == Ty::Bool {
                    return Err(Error::new(
                        pt.ty.span(),
                        "shared arrays of `bool` are not supported",
                    ));
                }
                *s = true;
            }
            ParamTy::Table { .. } if device => {
                return Err(Error::new(
                    pt.ty.span(),
                    "device functions take no buffer tables: the kernel passes them the values \
                     of a row",
                ));
            }
            _ if shared => {
                return Err(Error::new(
                    pt.ty.span(),
                    "a `#[shared]` parameter is an array: `#[shared] red: &mut [T; 32]`",
                ));
            }
            _ => {}
        }
        let p = Param {
            name: pi.ident.clone(),
            ty,
            uniform,
        };
        parser.declare_param(&p)?;
        params.push(p);
    }
    let ret = match (&sig.output, &out_generic) {
        (syn::ReturnType::Default, _) => Ty::Unit,
        // The body computes in `T`'s compute type; the result is converted to `U` on store.
        (syn::ReturnType::Type(_, t), Some((u, _, _))) if matches!(&**t, syn::Type::Path(p) if p.path.is_ident(u)) => {
            Ty::Elem
        }
        (syn::ReturnType::Type(_, t), Some((u, _, _))) => {
            return Err(Error::new(
                t.span(),
                format!("the second type parameter is the output type: return `{u}`"),
            ));
        }
        (syn::ReturnType::Type(_, t), None) => parser.scalar_ty(t)?,
    };
    match (mode, ret) {
        _ if device => {
            if !(ret.is_value() || ret == Ty::Unit) {
                return Err(Error::new(
                    sig.output.span(),
                    "a device function returns a scalar (`T`, `f64`, an integer or `bool`) or \
                     nothing",
                ));
            }
            parser.device = Some(ret);
        }
        (Mode::Simt, Ty::Unit) | (Mode::Scalar, Ty::Elem | Ty::Bool) => {}
        (Mode::Simt, _) => {
            return Err(Error::new(
                sig.output.span(),
                "a SIMT kernel returns nothing: it writes its `&mut [T]` buffers",
            ));
        }
        (Mode::Scalar, _) => {
            return Err(Error::new(
                sig.output.span(),
                format!(
                    "an elementwise or reduce kernel returns the element type: `-> {generic}` \
                     (an elementwise predicate may return `bool`)"
                ),
            ));
        }
    }
    let mut body = parser.block(&item.block)?;
    if device && ret != Ty::Unit {
        let Some(tail) = body.tail.take() else {
            return Err(Error::new(
                item.block.span(),
                format!(
                    "the body must end in a `{}` value (its last expression, without `;`)",
                    if ret == Ty::Elem {
                        generic.to_string()
                    } else {
                        ret.name().to_string()
                    }
                ),
            ));
        };
        body.tail = Some(Box::new(coerce(*tail, ret)?));
    }
    if mode == Mode::Scalar && body.tail.as_ref().is_none_or(|t| t.ty != ret) {
        return Err(Error::new(
            item.block.span(),
            format!(
                "the body must end in a `{}` value (its last expression, without `;`)",
                if ret == Ty::Bool {
                    "bool".to_string()
                } else {
                    generic.to_string()
                }
            ),
        ));
    }
    let k = KernelFn {
        name: sig.ident.clone(),
        generic,
        elem,
        params,
        body,
        ret,
        out_generic: out_generic.map(|(u, _, e)| (u, e)),
        shared: parser.shared.clone(),
        uses_sync: parser.uses_sync,
        uses_grid_sync: parser.uses_grid_sync,
        crosses_blocks: parser.crosses_blocks,
        tensor_core: parser.tensor_core,
        wgmma: parser.wgmma,
        specialize: vec![],
        launch_bounds: vec![],
    };
    Ok((k, parser))
}

/// The output type parameter of a cast-like kernel: its name, its bound as written, and the
/// element types that bound stands for.
type OutParam = (Ident, TokenStream, ElemKind);

/// The element type parameter `T: Float` (or `Num`, or `Element`), and the output type
/// `U: Float` of a cast-like elementwise kernel when there is a second one.
fn element_param(sig: &syn::Signature) -> Result<(Ident, ElemKind, Option<OutParam>)> {
    let g = &sig.generics;
    let mut found: Option<(Ident, ElemKind)> = None;
    let mut out = None;
    for p in &g.params {
        match p {
            syn::GenericParam::Type(t) if found.is_none() || out.is_none() => {
                let kind = match t.bounds.first() {
                    Some(syn::TypeParamBound::Trait(tb)) if t.bounds.len() == 1 => {
                        match tb.path.segments.last().map(|s| s.ident.to_string()) {
                            Some(n) if n == "Float" => Some(ElemKind::Float),
                            Some(n) if n == "Num" => Some(ElemKind::Num),
                            Some(n) if n == "Element" => Some(ElemKind::Element),
                            _ => None,
                        }
                    }
                    _ => None,
                };
                let Some(kind) = kind.filter(|_| t.default.is_none()) else {
                    return Err(Error::new(
                        t.span(),
                        format!(
                            "the element type parameter is declared `{}: Float` (f32, f64, f16, \
                             bf16), `{0}: Num` (and i32, i64, u8) or `{0}: Element` (and bool)",
                            t.ident
                        ),
                    ));
                };
                if found.is_none() {
                    found = Some((t.ident.clone(), kind));
                } else {
                    let b = &t.bounds;
                    out = Some((t.ident.clone(), quote!(#b), kind));
                }
            }
            other => {
                return Err(Error::new(
                    other.span(),
                    "a kernel has one generic parameter, the element type `T: Float` (an \
                     elementwise kernel may add its output type `U: Float`)",
                ));
            }
        }
    }
    found.map(|(t, k)| (t, k, out)).ok_or_else(|| {
        Error::new(
            sig.ident.span(),
            "a kernel is generic over its element type: `fn name<T: Float>(...)`; it is \
             instantiated for f32, f64, f16 and bf16 (`T: Num` adds i32, i64 and u8, \
             `T: Element` adds bool)",
        )
    })
}

/// The user's bound on the element type (`Float`, `rtx::Float`), kept on the native function.
fn element_bound(sig: &syn::Signature) -> TokenStream {
    for p in &sig.generics.params {
        if let syn::GenericParam::Type(t) = p {
            let b = &t.bounds;
            return quote!(#b);
        }
    }
    TokenStream::new()
}

/// How an argument of a CUDA entry point is described.
enum PTy {
    Ptr(Ty, bool),
    /// A buffer of the compute type (`&[T::Acc]`), and whether it is written.
    AccPtr(bool),
    /// The output buffer of a kernel with an output type parameter.
    OutPtr,
    Value(Ty),
    Shape,
    Strides,
    TensorMap,
    /// A table of `T` buffers, whether its rows are written, and whether they hold the
    /// compute type (`T::Acc`).
    Table(bool, bool),
}

fn scalar_type(k: &TokenStream, ty: Ty, value: bool) -> TokenStream {
    let v = match ty {
        Ty::Elem if value => quote!(Acc),
        Ty::Elem => quote!(Elem),
        Ty::F64 => quote!(F64),
        Ty::Usize | Ty::U64 => quote!(U64),
        Ty::I32 => quote!(I32),
        Ty::U32 => quote!(U32),
        Ty::I64 => quote!(I64),
        // Layout structs are described by `PTy::Shape`/`PTy::Strides`, never as scalars.
        Ty::Bool | Ty::Unit | Ty::Shape | Ty::Strides | Ty::TensorMap => quote!(Bool),
    };
    quote!(#k::kernel::ScalarType::#v)
}

/// `&[KernelParam { .. }, ..]` for an entry's argument list.
fn params_tokens(k: &TokenStream, params: &[(String, PTy)]) -> TokenStream {
    let items = params.iter().map(|(name, p)| {
        let ty = match p {
            PTy::Ptr(elem, mutable) => {
                let e = scalar_type(k, *elem, false);
                quote!(#k::kernel::ParamType::Ptr { elem: #e, mutable: #mutable })
            }
            PTy::AccPtr(mutable) => {
                quote!(#k::kernel::ParamType::Ptr { elem: #k::kernel::ScalarType::Acc, mutable: #mutable })
            }
            PTy::Value(t) => {
                let s = scalar_type(k, *t, true);
                quote!(#k::kernel::ParamType::Value(#s))
            }
            PTy::OutPtr => quote!(#k::kernel::ParamType::Ptr {
                elem: #k::kernel::ScalarType::Out,
                mutable: true,
            }),
            PTy::Shape => quote!(#k::kernel::ParamType::Shape),
            PTy::Table(mutable, acc) => {
                let e = if *acc { quote!(Acc) } else { quote!(Elem) };
                quote!(#k::kernel::ParamType::Table {
                    elem: #k::kernel::ScalarType::#e,
                    mutable: #mutable,
                })
            }
            PTy::Strides => quote!(#k::kernel::ParamType::Strides),
            PTy::TensorMap => quote!(#k::kernel::ParamType::TensorMap),
        };
        quote!(#k::kernel::KernelParam { name: #name, ty: #ty })
    });
    quote!(&[#(#items),*])
}

/// One `KernelEntry` per element type of `elem` for a variant: `symbol(suffix)` names the
/// symbol. Each `(tag, values)` of `specialized` is an entry of the same code with the values
/// fixed (`(argument index, value)`), named `{symbol}__{tag}`.
fn entries_tokens(
    k: &TokenStream,
    elem: ElemKind,
    variant: &str,
    params: &TokenStream,
    symbol: impl Fn(&str) -> String,
    out: Option<&str>,
    specialized: &[(String, Vec<(usize, u64)>)],
) -> Vec<TokenStream> {
    let variant = format_ident!("{}", variant);
    dtypes(elem)
        .iter()
        .map(|(suffix, _, dt)| {
            let sym = symbol(suffix);
            let out = format_ident!("{}", out.unwrap_or(dt));
            let dt = format_ident!("{}", dt);
            let special = specialized.iter().map(|(tag, values)| {
                let sym = format!("{sym}__{tag}");
                let values = values.iter().map(|(i, v)| quote!((#i, #v)));
                quote!(#k::kernel::SpecializedEntry { symbol: #sym, values: &[#(#values),*] })
            });
            quote!(#k::kernel::KernelEntry {
                symbol: #sym,
                dtype: #k::DType::#dt,
                out_dtype: #k::DType::#out,
                variant: #k::kernel::Variant::#variant,
                params: #params,
                default_block: 256,
                specialized: &[#(#special),*],
            })
        })
        .collect()
}

/// The attributes of the user's function worth keeping on the native one (docs, cfgs, lint
/// levels).
fn kept_attrs(item: &ItemFn) -> Vec<&syn::Attribute> {
    item.attrs.iter().collect()
}

/// The native signature's parameter list: `T` for `Ty::Elem`, `&[T]` for buffers.
fn native_params(cx: &native::NativeCx, params: &[Param]) -> Vec<TokenStream> {
    let t = &cx.t;
    params
        .iter()
        .map(|p| {
            let name = &p.name;
            let ty = match p.ty {
                ParamTy::Scalar(Ty::Elem) => quote!(#t),
                ParamTy::Scalar(s) => cx.ty(s),
                ParamTy::Table { mutable, acc } => table::native_param(cx, mutable, acc),
                // Only device functions take arrays (`device.rs` writes their parameters).
                ParamTy::Array { .. } => quote!(()),
                ParamTy::Slice { elem, mutable, acc } => {
                    let e = if acc {
                        cx.acc()
                    } else if elem == Ty::Elem {
                        quote!(#t)
                    } else {
                        cx.ty(elem)
                    };
                    if mutable {
                        quote!(&mut [#e])
                    } else {
                        quote!(&[#e])
                    }
                }
            };
            quote!(#name: #ty)
        })
        .collect()
}

/// `let x: T::Acc = to_acc(x);` for every `T` scalar parameter.
fn widen_params(cx: &native::NativeCx, params: &[Param]) -> Vec<TokenStream> {
    let acc = cx.acc();
    params
        .iter()
        .filter(|p| p.ty == ParamTy::Scalar(Ty::Elem))
        .map(|p| {
            let name = &p.name;
            let w = cx.widen(quote!(#name));
            quote!(let #name: #acc = #w;)
        })
        .collect()
}

/// Rejects parameter names the generated helpers use themselves.
fn check_reserved(params: &[Param], reserved: &[&str]) -> Result<()> {
    for p in params {
        let n = p.name.to_string();
        if reserved.contains(&n.as_str())
            || params.iter().any(|q| n == format!("{}_strides", q.name))
        {
            return Err(Error::new(
                p.name.span(),
                format!("`{n}` names an argument of the generated helpers; rename this parameter"),
            ));
        }
    }
    Ok(())
}
