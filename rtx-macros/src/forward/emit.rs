//! The code for one planned forward: the fused forward, the forward for training with its
//! static backward, and the IR builder, as the three methods of an
//! `rtx::compile::StaticForward` impl.
//!
//! Every step of the forward is one statement here, in the same order, with the same
//! internal names, so a reader of `cargo expand` output can follow it against the source.
//! The backward visits the steps in reverse: each step's gradient slot (`g__name`), once
//! filled, goes through that step's backward closure (`b__name`) into its inputs' slots, or
//! into [`Gradients`] for parameters.

use super::parse::is_tensor;
use super::parse::{Bin, ElemOp, Forward, Kind, MethodArg, Operand};
use super::plan::{Chain, Plan, reads};
use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::Ident;

/// What the emitters share: the parsed forward, its plan and the kernels' names.
pub struct Cx<'a> {
    pub f: &'a Forward,
    pub plan: &'a Plan,
    /// For each chain: its kernel, and its bias variant when it takes a deferred input.
    pub kernels: Vec<(Ident, Option<Ident>)>,
}

/// The name of a value's backward (`b`), need flag (`n`) or gradient slot (`g`):
/// `__rtx_h_2` gives `__rtx_g_h_2`.
fn aux(kind: &str, v: &Ident) -> Ident {
    let s = v.to_string();
    let base = s.strip_prefix("__rtx_").unwrap_or(&s);
    format_ident!("__rtx_{}_{}", kind, base, span = v.span())
}

/// `&x` for a tensor operand (a deferred call's output is its value before the bias).
fn tensor_ref(cx: &Cx, op: &Operand) -> TokenStream {
    match op {
        Operand::Var(v) if is_deferred_var(cx, v) => quote!(&#v.value),
        Operand::Var(v) => quote!(&#v),
        Operand::Field(t, _) => quote!(&#t),
        Operand::Lit(v) => {
            let lit = proc_macro2::Literal::f64_unsuffixed(*v);
            quote!(#lit)
        }
        Operand::Const(p) => quote!(#p),
    }
}

fn is_deferred_var(cx: &Cx, v: &Ident) -> bool {
    cx.plan
        .deferred_calls
        .iter()
        .any(|&s| cx.f.steps[s].target == *v)
}

/// The uniforms of a chain: `&[A as f64, ..]`.
fn uniforms(chain: &Chain) -> TokenStream {
    let u = &chain.uniforms;
    quote!(&[#((#u) as f64),*])
}

/// The fused function of an arity: `fusedN` or `fusedN_train`.
fn fused_fn(n: usize, train: bool) -> TokenStream {
    let name = if train {
        format_ident!("fused{}_train", n)
    } else {
        format_ident!("fused{}", n)
    };
    quote!(::rtx::compile::fused::#name)
}

/// The arguments of a chain's kernel, and with the bias variant, the bias after the
/// deferred input.
fn chain_args(cx: &Cx, chain: &Chain, bias: Option<TokenStream>) -> Vec<TokenStream> {
    let mut out = Vec::new();
    for (k, op) in chain.inputs.iter().enumerate() {
        out.push(tensor_ref(cx, op));
        if chain.deferred == Some(k)
            && let Some(b) = &bias
        {
            out.push(b.clone());
        }
    }
    out
}

/// The user's type on a `let`, restated after the step so inference sees it (for a deferred
/// call, on its value before the bias).
fn annotate(cx: &Cx, i: usize) -> TokenStream {
    let s = &cx.f.steps[i];
    let t = &s.target;
    match &s.ty {
        Some(ty) if cx.plan.deferred_calls.contains(&i) => quote!(let _: &#ty = &#t.value;),
        Some(ty) => quote!(let #t: #ty = #t;),
        None => quote!(),
    }
}

/// Whether step `i` is computed on its own (not inside a chain, or a chain's root).
fn materialized(cx: &Cx, i: usize) -> bool {
    match cx.plan.chain_of.get(&i) {
        Some(&c) => cx.plan.chains[c].root() == i,
        None => true,
    }
}

/// The body of `forward_fused`: each step run for inference.
pub fn fused_body(cx: &Cx) -> TokenStream {
    let mut out = Vec::new();
    for (i, s) in cx.f.steps.iter().enumerate() {
        if !materialized(cx, i) {
            continue;
        }
        let t = &s.target;
        let sp = s.span;
        let stmt = match (&s.kind, cx.plan.chain_of.get(&i)) {
            (Kind::Elem { .. }, Some(&c)) => {
                let chain = &cx.plan.chains[c];
                let (k, kb) = &cx.kernels[c];
                let u = uniforms(chain);
                let n = chain.inputs.len();
                let plain = fused_fn(n, false);
                let args = chain_args(cx, chain, None);
                match (chain.deferred, kb) {
                    (Some(d), Some(kb)) => {
                        let Operand::Var(v) = &chain.inputs[d] else {
                            unreachable!("a deferred input is a variable")
                        };
                        let with = fused_fn(n + 1, false);
                        let bargs = chain_args(cx, chain, Some(quote!(__rtx_bias)));
                        quote_spanned! {sp=>
                            let #t = match &#v.bias {
                                Some(__rtx_bias) => #with(#kb::Op, #(#bargs,)* #u),
                                None => #plain(#k::Op, #(#args,)* #u),
                            };
                        }
                    }
                    _ => quote_spanned!(sp=> let #t = #plain(#k::Op, #(#args,)* #u);),
                }
            }
            (
                Kind::Call {
                    callee,
                    args,
                    each: Some(k),
                    ..
                },
                _,
            ) => {
                let start = tensor_ref(cx, &args[*k]);
                let a = loop_args(cx, args, *k);
                quote_spanned! {sp=>
                    let #t = {
                        let mut __rtx_cur = ::core::clone::Clone::clone(#start);
                        for __rtx_m in ::core::iter::IntoIterator::into_iter(&#callee) {
                            __rtx_cur = ::rtx::compile::StaticForward::forward_fused(
                                __rtx_m,
                                (#(#a,)*),
                            );
                        }
                        __rtx_cur
                    };
                }
            }
            (
                Kind::Call {
                    callee,
                    args,
                    method: user,
                    ..
                },
                _,
            ) => {
                let a: Vec<TokenStream> = args
                    .iter()
                    .map(|o| {
                        let r = tensor_ref(cx, o);
                        quote!(::core::clone::Clone::clone(#r))
                    })
                    .collect();
                let method = if cx.plan.deferred_calls.contains(&i) {
                    quote!(forward_fused_deferred)
                } else {
                    quote!(forward_fused)
                };
                let refs: Vec<TokenStream> = args.iter().map(|o| tensor_ref(cx, o)).collect();
                let w = eager_witness(callee, user, &refs);
                let msp = user.span();
                quote_spanned! {msp=>
                    let __rtx_w = #w;
                    let #t = ::rtx::compile::StaticForward::#method(&#callee, (#(#a,)*));
                    ::rtx::compile::glue::same_output(&__rtx_w, &#t);
                }
            }
            (
                Kind::Method {
                    name,
                    turbofish,
                    recv,
                    args,
                },
                _,
            ) => {
                let r = tensor_ref(cx, recv);
                let a = method_args(cx, args);
                quote_spanned!(sp=> let #t = (#r).#name #turbofish (#(#a),*);)
            }
            (Kind::Elem { .. }, None) => unreachable!("every elementwise step is in a chain"),
        };
        out.push(stmt);
        out.push(annotate(cx, i));
    }
    let o = &cx.f.output;
    quote!(#(#out)* #o)
}

/// A closure, never called, that makes the user's own call of a sub-model (`self.fc.forward(&h)`)
/// beside the generated one, on the same types and with the user's `forward` token: when the
/// user's call does not type-check (a layer of the wrong width), rustc reports the same error
/// for it as for the eager forward, which it then shows once, and leaves out the generated
/// call's error at the same place for the same unmet bound. So one mistake is one error, at
/// the user's line. `args` are references to tensors, `Deferred`s or IR values.
fn eager_witness(callee: &TokenStream, method: &Ident, args: &[TokenStream]) -> TokenStream {
    let names: Vec<Ident> = (0..args.len())
        .map(|k| format_ident!("__rtx_w{}", k))
        .collect();
    quote_spanned! {method.span()=>
        || {
            #(let #names = ::rtx::compile::glue::eager_of(#args);)*
            (#callee).#method(#(&#names),*)
        }
    }
}

/// The arguments of each call in a loop over sub-models: the carried value, moved, at `k`.
fn loop_args(cx: &Cx, args: &[Operand], k: usize) -> Vec<TokenStream> {
    args.iter()
        .enumerate()
        .map(|(j, o)| {
            if j == k {
                quote!(__rtx_cur)
            } else {
                let r = tensor_ref(cx, o);
                quote!(::core::clone::Clone::clone(#r))
            }
        })
        .collect()
}

fn method_args(cx: &Cx, args: &[MethodArg]) -> Vec<TokenStream> {
    args.iter()
        .map(|a| match a {
            MethodArg::Tensor(op) => tensor_ref(cx, op),
            MethodArg::Other(e) => quote!(#e),
        })
        .collect()
}

/// The body of `forward_train`: each step run with its backward kept, then the backward.
pub fn train_body(cx: &Cx) -> TokenStream {
    let mut fwd = Vec::new();
    let mut backs: Vec<Ident> = Vec::new();
    for (i, s) in cx.f.steps.iter().enumerate() {
        if !materialized(cx, i) {
            continue;
        }
        let t = &s.target;
        let b = aux("b", t);
        backs.push(b.clone());
        let sp = s.span;
        let stmt = match (&s.kind, cx.plan.chain_of.get(&i)) {
            (Kind::Elem { .. }, Some(&c)) => {
                let chain = &cx.plan.chains[c];
                let (k, kb) = &cx.kernels[c];
                let u = uniforms(chain);
                let n = chain.inputs.len();
                let plain = fused_fn(n, true);
                let args = chain_args(cx, chain, None);
                match (chain.deferred, kb) {
                    (Some(d), Some(kb)) => {
                        let Operand::Var(v) = &chain.inputs[d] else {
                            unreachable!("a deferred input is a variable")
                        };
                        let with = fused_fn(n + 1, true);
                        let bargs = chain_args(cx, chain, Some(quote!(__rtx_bias)));
                        quote_spanned! {sp=>
                            let (#t, #b) = match &#v.bias {
                                Some(__rtx_bias) => {
                                    let (y, b) = #with(#kb::Op, #(#bargs,)* #u);
                                    (y, Ok(b))
                                }
                                None => {
                                    let (y, b) = #plain(#k::Op, #(#args,)* #u);
                                    (y, Err(b))
                                }
                            };
                        }
                    }
                    _ => quote_spanned!(sp=> let (#t, #b) = #plain(#k::Op, #(#args,)* #u);),
                }
            }
            (
                Kind::Call {
                    callee,
                    args,
                    each: Some(k),
                    ..
                },
                _,
            ) => {
                let start = tensor_ref(cx, &args[*k]);
                let a = loop_args(cx, args, *k);
                quote_spanned! {sp=>
                    let (#t, #b) = {
                        let mut __rtx_cur = ::core::clone::Clone::clone(#start);
                        let mut __rtx_backs = ::std::vec::Vec::new();
                        for __rtx_m in ::core::iter::IntoIterator::into_iter(&#callee) {
                            let (y, b) = ::rtx::compile::StaticForward::forward_train(
                                __rtx_m,
                                (#(#a,)*),
                            );
                            __rtx_backs.push(b);
                            __rtx_cur = y;
                        }
                        (__rtx_cur, __rtx_backs)
                    };
                }
            }
            (
                Kind::Call {
                    callee,
                    args,
                    method: user,
                    ..
                },
                _,
            ) => {
                let a: Vec<TokenStream> = args
                    .iter()
                    .map(|o| {
                        let r = tensor_ref(cx, o);
                        quote!(::core::clone::Clone::clone(#r))
                    })
                    .collect();
                let method = if cx.plan.deferred_calls.contains(&i) {
                    quote!(train_call_deferred)
                } else {
                    quote!(train_call)
                };
                let refs: Vec<TokenStream> = args.iter().map(|o| tensor_ref(cx, o)).collect();
                let w = eager_witness(callee, user, &refs);
                let msp = user.span();
                // The backward is typed by the user's call's output (the witness's), so a
                // sub-model that does not take these arguments leaves no closure whose
                // signature rustc cannot work out (E0618 at the attribute).
                quote_spanned! {msp=>
                    let __rtx_w = #w;
                    let (#t, #b) = ::rtx::compile::glue::#method(
                        &#callee,
                        (#(#a,)*),
                        ::rtx::compile::glue::witness(&__rtx_w),
                    );
                    ::rtx::compile::glue::same_output(&__rtx_w, &#t);
                }
            }
            (
                Kind::Method {
                    name,
                    turbofish,
                    recv,
                    args,
                },
                _,
            ) => {
                // The method runs once on its tensor operands made leaves, inside a closure
                // over them, and its backward is the rule it records (`compile::grad`): the
                // receiver is the closure's first parameter, each tensor argument the next.
                let mut ins = vec![tensor_ref(cx, recv)];
                let mut params = vec![format_ident!("__rtx_x0", span = sp)];
                let mut a = Vec::new();
                for arg in args {
                    match arg {
                        MethodArg::Tensor(op) => {
                            let p = format_ident!("__rtx_x{}", params.len(), span = sp);
                            ins.push(tensor_ref(cx, op));
                            a.push(quote!(#p));
                            params.push(p);
                        }
                        MethodArg::Other(e) => a.push(quote!(#e)),
                    }
                }
                let vjp = match ins.len() {
                    1 => quote!(vjp1),
                    2 => quote!(vjp2),
                    3 => quote!(vjp3),
                    _ => {
                        return syn::Error::new(
                            sp,
                            "a tensor method of more than three tensors is not supported in a compiled forward",
                        )
                        .to_compile_error();
                    }
                };
                let recv_p = &params[0];
                quote_spanned! {sp=>
                    let (#t, #b) = ::rtx::compile::grad::#vjp(
                        #(#ins,)*
                        &|#(#params),*| #recv_p.#name #turbofish (#(#a),*),
                    );
                }
            }
            (Kind::Elem { .. }, None) => unreachable!("every elementwise step is in a chain"),
        };
        fwd.push(stmt);
        fwd.push(annotate(cx, i));
    }
    let backward = backward_closure(cx);
    let o = &cx.f.output;
    quote! {
        ::rtx::no_grad(move || {
            #(#fwd)*
            (#o, #backward)
        })
    }
}

/// Whether a value needs a gradient, as an expression evaluated in the backward: forward
/// arguments when the caller asks for them, sub-model outputs always, everything else when
/// one of its inputs does.
fn need_of(op: &Operand) -> TokenStream {
    match op {
        Operand::Var(v) => {
            let n = aux("n", v);
            quote!(#n)
        }
        Operand::Field(t, _) => quote!(#t.tracks_grad()),
        _ => quote!(false),
    }
}

/// Where an input's gradient goes: its variable's slot, or the parameter's entry.
fn give(op: &Operand, d: &Ident) -> TokenStream {
    match op {
        Operand::Var(v) => {
            let g = aux("g", v);
            quote!(::rtx::compile::glue::acc(&mut #g, #d);)
        }
        Operand::Field(t, _) => quote!(if let Some(g) = #d { __rtx_grads.add(&#t, g); }),
        _ => quote!(let _ = #d;),
    }
}

fn backward_closure(cx: &Cx) -> TokenStream {
    let f = cx.f;
    // The need flags, in forward order.
    let mut needs = Vec::new();
    for a in &f.args {
        let n = aux("n", &a.name);
        needs.push(quote!(let #n = __rtx_need_args;));
    }
    for (i, s) in f.steps.iter().enumerate() {
        if !materialized(cx, i) {
            continue;
        }
        let n = aux("n", &s.target);
        let inputs: Vec<Operand> = match (&s.kind, cx.plan.chain_of.get(&i)) {
            (Kind::Call { .. }, _) => {
                needs.push(quote!(let #n = true;));
                continue;
            }
            (Kind::Elem { .. }, Some(&c)) => cx.plan.chains[c].inputs.clone(),
            _ => reads(s).into_iter().cloned().collect(),
        };
        let parts: Vec<TokenStream> = inputs.iter().map(need_of).collect();
        needs.push(quote!(let #n = false #(|| #parts)*;));
    }
    // The slots: typed for arguments, inferred for the rest; only for values read later.
    let mut slots = Vec::new();
    for a in &f.args {
        let g = aux("g", &a.name);
        let ty = &a.ty;
        slots.push(quote!(let mut #g: Option<#ty> = None;));
    }
    for (i, s) in f.steps.iter().enumerate() {
        let used = cx
            .plan
            .uses
            .get(&s.target.to_string())
            .copied()
            .unwrap_or(0)
            > 0;
        if materialized(cx, i) && used {
            let g = aux("g", &s.target);
            slots.push(quote!(let mut #g = None;));
        }
    }
    let out_slot = aux("g", &f.output);
    // The steps in reverse.
    let mut rev = Vec::new();
    for (i, s) in f.steps.iter().enumerate().rev() {
        if !materialized(cx, i) {
            continue;
        }
        let t = &s.target;
        let g = aux("g", t);
        let b = aux("b", t);
        let used = cx.plan.uses.get(&t.to_string()).copied().unwrap_or(0) > 0;
        if !used {
            rev.push(quote!(drop(#b);));
            continue;
        }
        let body = match (&s.kind, cx.plan.chain_of.get(&i)) {
            (Kind::Elem { .. }, Some(&c)) => {
                let chain = &cx.plan.chains[c];
                let ds: Vec<Ident> = (0..chain.inputs.len())
                    .map(|k| format_ident!("d{}", k))
                    .collect();
                let ns: Vec<TokenStream> = chain.inputs.iter().map(need_of).collect();
                let gives: Vec<TokenStream> = chain
                    .inputs
                    .iter()
                    .zip(&ds)
                    .map(|(o, d)| give(o, d))
                    .collect();
                match (chain.deferred, &cx.kernels[c].1) {
                    (Some(dk), Some(_)) => {
                        // The bias variant returns one more gradient, the bias's, which the
                        // deferred call's backward sums itself from its output's gradient.
                        let mut bds = Vec::new();
                        let mut bns = Vec::new();
                        for (k, (d, n)) in ds.iter().zip(&ns).enumerate() {
                            bds.push(quote!(#d));
                            bns.push(n.clone());
                            if k == dk {
                                bds.push(quote!(_));
                                bns.push(quote!(false));
                            }
                        }
                        quote! {
                            match #b {
                                Ok(b) => {
                                    let (#(#bds,)*) = b(&d, [#(#bns),*]);
                                    #(#gives)*
                                }
                                Err(b) => {
                                    let (#(#ds,)*) = b(&d, [#(#ns),*]);
                                    #(#gives)*
                                }
                            }
                        }
                    }
                    _ => quote! {
                        let (#(#ds,)*) = #b(&d, [#(#ns),*]);
                        #(#gives)*
                    },
                }
            }
            (
                Kind::Call {
                    args,
                    each: Some(k),
                    ..
                },
                _,
            ) => {
                // Each sub-model's backward, last first, carrying the gradient of the value
                // the loop carries; the other arguments' gradients add up over the loop.
                let ds: Vec<Ident> = (0..args.len()).map(|k| format_ident!("d{}", k)).collect();
                let dk = &ds[*k];
                let gives: Vec<TokenStream> = args
                    .iter()
                    .zip(&ds)
                    .enumerate()
                    .filter(|(j, _)| j != k)
                    .map(|(_, (o, d))| give(o, d))
                    .collect();
                let carried = give(&args[*k], &format_ident!("__rtx_dc"));
                quote! {
                    let mut __rtx_d = d;
                    for b in #b.into_iter().rev() {
                        let (#(#ds,)*) = b(__rtx_d, __rtx_grads, true);
                        #(#gives)*
                        __rtx_d = ::rtx::compile::glue::carried(#dk);
                    }
                    let __rtx_dc = Some(__rtx_d);
                    #carried
                }
            }
            (Kind::Call { args, .. }, _) => {
                let ds: Vec<Ident> = (0..args.len()).map(|k| format_ident!("d{}", k)).collect();
                let ns: Vec<TokenStream> = args.iter().map(need_of).collect();
                let gives: Vec<TokenStream> =
                    args.iter().zip(&ds).map(|(o, d)| give(o, d)).collect();
                quote! {
                    let (#(#ds,)*) = #b(d, __rtx_grads, false #(|| #ns)*);
                    #(#gives)*
                }
            }
            (Kind::Method { .. }, _) => {
                let ins: Vec<Operand> = reads(s).into_iter().cloned().collect();
                let ds: Vec<Ident> = (0..ins.len()).map(|k| format_ident!("d{}", k)).collect();
                let ns: Vec<TokenStream> = ins.iter().map(need_of).collect();
                let gives: Vec<TokenStream> =
                    ins.iter().zip(&ds).map(|(o, d)| give(o, d)).collect();
                // A one-input method's backward returns its gradient, not a 1-tuple.
                let pat = match ds.as_slice() {
                    [d0] => quote!(#d0),
                    _ => quote!((#(#ds,)*)),
                };
                quote! {
                    let #pat = #b(&d, [#(#ns),*]);
                    #(#gives)*
                }
            }
            (Kind::Elem { .. }, None) => unreachable!("every elementwise step is in a chain"),
        };
        rev.push(quote! {
            if let Some(d) = #g.take() {
                #body
            } else {
                drop(#b);
            }
        });
    }
    let arg_slots: Vec<Ident> = f.args.iter().map(|a| aux("g", &a.name)).collect();
    quote! {
        move |__rtx_dy, __rtx_grads: &mut ::rtx::Gradients, __rtx_need_args: bool| {
            #(#needs)*
            #(#slots)*
            #out_slot = Some(__rtx_dy);
            #(#rev)*
            (#(#arg_slots.filter(|_| __rtx_need_args),)*)
        }
    }
}

/// The body of `emit_ir`: each step as IR nodes, elementwise chains inside their kernel's
/// group, sub-model calls inside their field's scope.
pub fn ir_body(cx: &Cx) -> TokenStream {
    let mut out = Vec::new();
    let value = |op: &Operand| -> TokenStream {
        match op {
            Operand::Var(v) => quote!(#v),
            Operand::Field(t, name) => {
                quote!(::rtx::compile::glue::ir_param(__rtx_b, &#t, #name))
            }
            _ => quote!(compile_error!("a scalar where a tensor was expected")),
        }
    };
    let mut chain_stmts: Vec<Vec<TokenStream>> = vec![Vec::new(); cx.plan.chains.len()];
    for (i, s) in cx.f.steps.iter().enumerate() {
        let t = &s.target;
        match (&s.kind, cx.plan.chain_of.get(&i)) {
            (Kind::Elem { op, args }, Some(&c)) => {
                // Operands first: a parameter's node is added before the op that reads it.
                let binds: Vec<TokenStream> = args
                    .iter()
                    .enumerate()
                    .filter(|(_, o)| is_tensor(o))
                    .map(|(j, o)| {
                        let a = format_ident!("__rtx_a{}", j);
                        let v = value(o);
                        quote!(let #a = #v;)
                    })
                    .collect();
                let node = ir_elem(op, args);
                chain_stmts[c].push(quote!(let #t = { #(#binds)* #node };));
                if cx.plan.chains[c].root() == i {
                    let chain = &cx.plan.chains[c];
                    let name = cx.kernels[c].0.to_string();
                    let stmts = std::mem::take(&mut chain_stmts[c]);
                    // The deferred call's bias is added first, inside the kernel, as the
                    // kernel's bias variant adds it.
                    let bias = match chain.deferred.map(|d| &chain.inputs[d]) {
                        Some(Operand::Var(v)) => {
                            quote!(let #v = ::rtx::compile::glue::ir_add_bias(__rtx_b, #v);)
                        }
                        _ => quote!(),
                    };
                    out.push(quote! {
                        let #t = __rtx_b.kernel(#name, |__rtx_b| { #bias #(#stmts)* #t });
                    });
                }
            }
            (
                Kind::Call {
                    callee,
                    scope,
                    args,
                    each: Some(k),
                    ..
                },
                _,
            ) => {
                let start = value(&args[*k]);
                let a: Vec<TokenStream> = args
                    .iter()
                    .enumerate()
                    .map(|(j, o)| if j == *k { quote!(__rtx_cur) } else { value(o) })
                    .collect();
                out.push(quote! {
                    let #t = {
                        let mut __rtx_cur = #start;
                        for (__rtx_i, __rtx_m) in ::core::iter::IntoIterator::into_iter(&#callee).enumerate() {
                            let __rtx_scope = format!("{}.{}", #scope, __rtx_i);
                            __rtx_cur = __rtx_b.scope(&__rtx_scope, |__rtx_b| {
                                ::rtx::compile::glue::emit_call(__rtx_m, __rtx_b, (#(#a,)*))
                            });
                        }
                        __rtx_cur
                    };
                });
            }
            (
                Kind::Call {
                    callee,
                    scope,
                    args,
                    each: None,
                    method,
                },
                _,
            ) => {
                let a: Vec<TokenStream> = args.iter().map(&value).collect();
                let refs: Vec<TokenStream> = args
                    .iter()
                    .map(|o| match o {
                        Operand::Var(v) => quote!(&#v),
                        Operand::Field(t, _) => quote!(&#t),
                        _ => quote!(compile_error!("a scalar where a tensor was expected")),
                    })
                    .collect();
                let w = eager_witness(callee, method, &refs);
                let msp = method.span();
                let (emit, value) = if cx.plan.deferred_calls.contains(&i) {
                    (quote!(emit_call_deferred), quote!(&#t.value))
                } else {
                    (quote!(emit_call), quote!(&#t))
                };
                out.push(quote_spanned! {msp=>
                    let __rtx_w = #w;
                    let #t = __rtx_b.scope(#scope, |__rtx_b| {
                        ::rtx::compile::glue::#emit(&#callee, __rtx_b, (#(#a,)*))
                    });
                    ::rtx::compile::glue::same_output(&__rtx_w, #value);
                });
            }
            (
                Kind::Method {
                    name,
                    turbofish,
                    recv,
                    args,
                },
                _,
            ) => {
                let r = value(recv);
                let a: Vec<TokenStream> = args
                    .iter()
                    .map(|m| match m {
                        MethodArg::Tensor(op) => value(op),
                        MethodArg::Other(e) => quote!(#e),
                    })
                    .collect();
                out.push(quote! {
                    let #t = ::rtx::compile::glue::IrMethods::#name #turbofish (#r, __rtx_b, #(#a),*);
                });
            }
            (Kind::Elem { .. }, None) => unreachable!("every elementwise step is in a chain"),
        }
        if materialized(cx, i) {
            out.push(annotate_ir(cx, i));
        }
    }
    let o = &cx.f.output;
    quote!(#(#out)* #o)
}

/// The user's type on a `let`, as the IR value's type (for a deferred call, on its value
/// before the bias).
fn annotate_ir(cx: &Cx, i: usize) -> TokenStream {
    let s = &cx.f.steps[i];
    let t = &s.target;
    match &s.ty {
        Some(ty) if cx.plan.deferred_calls.contains(&i) => {
            quote!(let _: &<#ty as ::rtx::ir::IrValue>::Value = &#t.value;)
        }
        Some(ty) => quote!(let #t: <#ty as ::rtx::ir::IrValue>::Value = #t;),
        None => quote!(),
    }
}

/// One elementwise step as an IR node, its tensor operands bound as `__rtx_a{index}`.
fn ir_elem(op: &ElemOp, args: &[Operand]) -> TokenStream {
    let value = |o: &Operand| {
        let j = args.iter().position(|a| std::ptr::eq(a, o)).unwrap_or(0);
        let a = format_ident!("__rtx_a{}", j);
        quote!(#a)
    };
    match op {
        ElemOp::Unary(u) => {
            let variant = format_ident!("{}", crate::ops::camel(u));
            let x = value(&args[0]);
            quote!(__rtx_b.unary(#x, ::rtx::op::UnaryOp::#variant))
        }
        ElemOp::Binary(b) => {
            let variant = format_ident!(
                "{}",
                match b {
                    Bin::Add => "Add",
                    Bin::Sub => "Sub",
                    Bin::Mul => "Mul",
                    Bin::Div => "Div",
                    Bin::Max => "Max",
                    Bin::Min => "Min",
                }
            );
            let op = quote!(::rtx::op::BinaryOp::#variant);
            let scalar = |o: &Operand| match o {
                Operand::Lit(v) => {
                    let lit = proc_macro2::Literal::f64_unsuffixed(*v);
                    Some(quote!(#lit))
                }
                Operand::Const(p) => Some(quote!((#p) as f64)),
                _ => None,
            };
            match (scalar(&args[0]), scalar(&args[1])) {
                (Some(c), None) => {
                    let x = value(&args[1]);
                    quote!(__rtx_b.binary_scalar(#x, #c, #op, true))
                }
                (None, Some(c)) => {
                    let x = value(&args[0]);
                    quote!(__rtx_b.binary_scalar(#x, #c, #op, false))
                }
                _ => {
                    let (a, b) = (value(&args[0]), value(&args[1]));
                    quote!(__rtx_b.binary(#a, #b, #op))
                }
            }
        }
    }
}
