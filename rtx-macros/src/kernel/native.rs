//! Emits the native Rust of a kernel body from the IR: `T` values computed in `T::Acc`
//! through `FloatMath` (in `KernelElem::Compute` through `KernelScalar`/`KernelNum` for
//! kernels over `T: Num` or `T: Element`, whose integers wrap), buffers read as slices (or the
//! block emulation's wrappers in SIMT kernels), intrinsics as calls on the emulated thread
//! `__rtx_t`.
//!
//! Invariant: the emitted code has the IR's meaning, statement for statement; spans point at
//! the user's tokens so rustc's own errors land on the kernel source.

use super::ir::*;
use proc_macro2::{Literal, TokenStream};
use quote::{quote, quote_spanned};
use syn::Ident;

/// Paths and names the emitted code needs.
pub struct NativeCx {
    /// Path of the rtx-kernels crate (`crate` inside it, `::rtx::__private::rtx_kernels`
    /// outside).
    pub krate: TokenStream,
    /// The element type parameter.
    pub t: Ident,
    /// Its bound as the user wrote it (`Float`), for the native function's signature.
    pub bound: TokenStream,
    /// Which element types that bound stands for.
    pub elem: ElemKind,
    /// Whether the code runs on an emulated thread (`__rtx_t` in scope): SIMT kernels and
    /// device functions, whose calls hand the thread on to the callee's `call`.
    pub simt: bool,
}

impl NativeCx {
    /// The compute type of `T`.
    pub fn acc(&self) -> TokenStream {
        let (k, t) = (&self.krate, &self.t);
        match self.elem {
            ElemKind::Float => quote!(<#t as #k::Float>::Acc),
            _ => quote!(<#t as #k::kernel::KernelElem>::Compute),
        }
    }

    /// The trait holding literals and conversions of the compute type.
    fn scalar_trait(&self) -> TokenStream {
        let k = &self.krate;
        match self.elem {
            ElemKind::Float => quote!(#k::FloatMath),
            _ => quote!(#k::kernel::KernelScalar),
        }
    }

    pub fn ty(&self, ty: Ty) -> TokenStream {
        let k = &self.krate;
        match ty {
            Ty::Elem => self.acc(),
            Ty::F64 => quote!(f64),
            Ty::Usize => quote!(usize),
            Ty::I32 => quote!(i32),
            Ty::U32 => quote!(u32),
            Ty::I64 => quote!(i64),
            Ty::U64 => quote!(u64),
            Ty::Bool => quote!(bool),
            Ty::Shape => quote!(#k::kernel::KernelShape),
            Ty::Strides => quote!(#k::kernel::KernelStrides),
            Ty::TensorMap => quote!(#k::kernel::TensorMap),
            Ty::Unit => quote!(()),
        }
    }

    /// `T` storage to compute type.
    pub fn widen(&self, e: TokenStream) -> TokenStream {
        let k = &self.krate;
        match self.elem {
            ElemKind::Float => quote!(#k::Float::to_acc(#e)),
            _ => quote!(#k::kernel::KernelElem::to_compute(#e)),
        }
    }

    /// Compute type to `T` storage.
    pub fn narrow(&self, e: TokenStream) -> TokenStream {
        let k = &self.krate;
        match self.elem {
            ElemKind::Float => quote!(#k::Float::from_acc(#e)),
            _ => quote!(#k::kernel::KernelElem::from_compute(#e)),
        }
    }

    /// A float literal in the compute type.
    pub fn float(&self, v: f64) -> TokenStream {
        let (acc, tr) = (self.acc(), self.scalar_trait());
        let lit = Literal::f64_suffixed(v);
        quote!(<#acc as #tr>::c(#lit))
    }

    /// A binary operator on values of type `ty`: arithmetic on `T` goes through `KernelNum`
    /// (wrapping, division by zero giving 0) unless `T` is a float type.
    pub(super) fn bin(&self, op: BinOp, ty: Ty, a: TokenStream, b: TokenStream) -> TokenStream {
        let k = &self.krate;
        if ty == Ty::Elem && self.elem != ElemKind::Float {
            let f = match op {
                BinOp::Add => quote!(add),
                BinOp::Sub => quote!(sub),
                BinOp::Mul => quote!(mul),
                BinOp::Div => quote!(div),
                _ => return bin_tokens(op, a, b),
            };
            return quote!(#k::kernel::KernelNum::#f(#a, #b));
        }
        bin_tokens(op, a, b)
    }

    pub fn block(&self, b: &Block) -> TokenStream {
        let stmts = b.stmts.iter().map(|s| self.stmt(s));
        let tail = b.tail.as_ref().map(|t| self.expr(t));
        quote!({ #(#stmts)* #tail })
    }

    pub(super) fn load(
        &self,
        buf: &impl quote::ToTokens,
        kind: Buf,
        elem: Ty,
        index: TokenStream,
    ) -> TokenStream {
        let raw = match kind {
            Buf::In | Buf::AccIn => {
                let kr = &self.krate;
                quote!(#kr::kernel::block::Read::read(#buf, #index))
            }
            Buf::Out | Buf::AccOut => quote!(#buf.load(#index)),
            Buf::Shared => return quote!(#buf.get(#index)),
            Buf::Local => return quote!(#buf[#index]),
        };
        if kind.converts(elem) {
            self.widen(raw)
        } else {
            raw
        }
    }

    pub(super) fn store(
        &self,
        buf: &impl quote::ToTokens,
        kind: Buf,
        elem: Ty,
        index: TokenStream,
        v: TokenStream,
    ) -> TokenStream {
        match kind {
            Buf::Shared => quote!(#buf.set(#index, #v);),
            Buf::Local => quote!(#buf[#index] = #v;),
            _ => {
                let v = if kind.converts(elem) {
                    self.narrow(v)
                } else {
                    v
                };
                quote!(#buf.store(#index, #v);)
            }
        }
    }

    /// `buf[i] = v as T` with `v` an `f64` or `i64`, into a global `T` buffer: the value
    /// converted once, straight to `T` (`Element::from_f64` / `from_i64`), rather than to the
    /// compute type and then to `T`.
    pub(super) fn rounding_store(
        &self,
        kind: Buf,
        elem: Ty,
        op: Option<BinOp>,
        value: &Expr,
    ) -> Option<TokenStream> {
        let inner = direct_store(kind, elem, op, value)?;
        let (k, t) = (&self.krate, &self.t);
        let x = self.expr(inner);
        Some(if inner.ty == Ty::F64 {
            quote!(<#t as #k::Element>::from_f64(#x))
        } else {
            quote!(<#t as #k::Element>::from_i64(#x))
        })
    }

    pub fn stmt(&self, s: &Stmt) -> TokenStream {
        match s {
            Stmt::Let {
                name,
                mutable,
                ty,
                init,
            } => {
                let m = mutable.then(|| quote!(mut));
                let ty = self.ty(*ty);
                match init {
                    Some(e) => {
                        let e = self.expr(e);
                        quote!(let #m #name: #ty = #e;)
                    }
                    None => quote!(let #m #name: #ty;),
                }
            }
            Stmt::LocalArray {
                name,
                mutable,
                elem,
                len,
                init,
            } => self.local_array(name, *mutable, *elem, *len, init),
            Stmt::Assign { place, op, value } => {
                let v = self.expr(value);
                match place {
                    Place::TableIndex(table, kind, row, index) => {
                        self.table_assign(table, *kind, row, index, *op, value, v)
                    }
                    Place::Var(name) => match op {
                        None => quote!(#name = #v;),
                        Some(op) => {
                            let combined = self.bin(*op, value.ty, quote!(#name), v);
                            quote!(#name = #combined;)
                        }
                    },
                    Place::Index(buf, kind, elem, index) => {
                        let i = self.expr(index);
                        if let Some(direct) = self.rounding_store(*kind, *elem, *op, value) {
                            return quote!({ let __rtx_i: usize = #i; #buf.store(__rtx_i, #direct); });
                        }
                        let new = match op {
                            None => v,
                            Some(op) => self.bin(
                                *op,
                                *elem,
                                self.load(buf, *kind, *elem, quote!(__rtx_i)),
                                v,
                            ),
                        };
                        let store = self.store(buf, *kind, *elem, quote!(__rtx_i), new);
                        quote!({ let __rtx_i: usize = #i; #store })
                    }
                }
            }
            Stmt::AtomicAdd {
                buf,
                kind,
                ty,
                index,
                value,
                old,
            } => {
                let (i, v) = (self.expr(index), self.expr(value));
                let stored =
                    matches!(kind, Buf::Shared | Buf::AccOut | Buf::AccIn) || *ty != Ty::Elem;
                let add = if stored {
                    quote!(|__rtx_o| __rtx_o + __rtx_v)
                } else {
                    let w = self.widen(quote!(__rtx_o));
                    let n = self.narrow(quote!(#w + __rtx_v));
                    quote!(|__rtx_o| #n)
                };
                let update = quote!({ let __rtx_i: usize = #i; let __rtx_v = #v; #buf.update(__rtx_i, #add) });
                match old {
                    None => quote!(#update;),
                    // A `T` element of a tensor buffer is read back in the compute type.
                    Some(name) if !stored => {
                        let w = self.widen(quote!(__rtx_o));
                        quote!(let #name = { let __rtx_o = #update; #w };)
                    }
                    Some(name) => quote!(let #name = #update;),
                }
            }
            Stmt::Expr(e) => {
                let e = self.expr(e);
                quote!(#e;)
            }
            Stmt::For {
                var,
                ty,
                start,
                end,
                step,
                body,
            } => {
                let (s, e, b) = (self.expr(start), self.expr(end), self.block(body));
                let _ = ty;
                match step {
                    None => quote!(for #var in #s..#e #b),
                    Some(st) => {
                        let st = self.expr(st);
                        quote!(for #var in (#s..#e).step_by(#st) #b)
                    }
                }
            }
            Stmt::While { cond, body } => {
                let (c, b) = (self.expr(cond), self.block(body));
                quote!(while #c #b)
            }
            Stmt::Loop(body) => {
                let b = self.block(body);
                quote!(loop #b)
            }
            Stmt::Break => quote!(break;),
            Stmt::Continue => quote!(continue;),
            Stmt::Return => quote!(return;),
        }
    }

    /// A per-thread array: a Rust array of the compute type, so an index out of bounds
    /// panics as Rust's does.
    fn local_array(
        &self,
        name: &Ident,
        mutable: bool,
        elem: Ty,
        len: usize,
        init: &Expr,
    ) -> TokenStream {
        let m = mutable.then(|| quote!(mut));
        let (ty, n, v) = (
            self.ty(elem),
            Literal::usize_unsuffixed(len),
            self.expr(init),
        );
        quote!(let #m #name: [#ty; #n] = [#v; #n];)
    }

    pub fn expr(&self, e: &Expr) -> TokenStream {
        let span = e.span;
        let k = &self.krate;
        let acc = self.acc();
        match &e.kind {
            ExprKind::Float(v) if e.ty == Ty::F64 => {
                let lit = Literal::f64_suffixed(*v);
                quote_spanned!(span=> #lit)
            }
            ExprKind::Float(v) => self.float(*v),
            ExprKind::Int(v, _) => {
                let lit = match e.ty {
                    Ty::I32 => Literal::i32_suffixed(*v as i32),
                    Ty::U32 => Literal::u32_suffixed(*v as u32),
                    Ty::I64 => Literal::i64_suffixed(*v as i64),
                    Ty::U64 => Literal::u64_suffixed(*v),
                    _ => Literal::usize_suffixed(*v as usize),
                };
                quote_spanned!(span=> #lit)
            }
            ExprKind::Bool(b) => quote!(#b),
            ExprKind::Const(c) => {
                let tr = self.scalar_trait();
                match (c, self.elem) {
                    (FConst::Lowest, ElemKind::Float) => {
                        quote!(<#acc as #tr>::c(f64::NEG_INFINITY))
                    }
                    (FConst::Highest, ElemKind::Float) => quote!(<#acc as #tr>::c(f64::INFINITY)),
                    (FConst::Lowest, _) => quote!(<#acc as #tr>::LOWEST),
                    (FConst::Highest, _) => quote!(<#acc as #tr>::HIGHEST),
                    (FConst::Inf, _) => quote!(<#acc as #tr>::c(f64::INFINITY)),
                    (FConst::NegInf, _) => quote!(<#acc as #tr>::c(f64::NEG_INFINITY)),
                    (FConst::Nan, _) => quote!(<#acc as #tr>::c(f64::NAN)),
                }
            }
            ExprKind::Var(id) => quote!(#id),
            ExprKind::Unary(UnOp::Neg, a) if a.ty == Ty::Elem && self.elem != ElemKind::Float => {
                let a = self.expr(a);
                quote_spanned!(span=> #k::kernel::KernelNum::neg(#a))
            }
            ExprKind::Unary(UnOp::Neg, a) => {
                let a = self.expr(a);
                quote_spanned!(span=> (-#a))
            }
            ExprKind::Unary(UnOp::Not, a) => {
                let a = self.expr(a);
                quote_spanned!(span=> (!#a))
            }
            ExprKind::Binary(op, a, b) => self.bin(*op, a.ty, self.expr(a), self.expr(b)),
            ExprKind::Math(f, args) => {
                let a: Vec<TokenStream> = args.iter().map(|x| self.expr(x)).collect();
                let x = &a[0];
                if args[0].ty.is_int() {
                    let y = &a[1];
                    return match f {
                        MathFn::Max => quote!(::core::cmp::Ord::max(#x, #y)),
                        MathFn::WrappingAdd => quote!((#x).wrapping_add(#y)),
                        MathFn::WrappingSub => quote!((#x).wrapping_sub(#y)),
                        MathFn::WrappingMul => quote!((#x).wrapping_mul(#y)),
                        MathFn::MulHi if args[0].ty == Ty::U32 => {
                            quote!(((((#x) as u64) * ((#y) as u64)) >> 32u32) as u32)
                        }
                        MathFn::MulHi => {
                            quote!(((((#x) as u128) * ((#y) as u128)) >> 64u32) as u64)
                        }
                        _ => quote!(::core::cmp::Ord::min(#x, #y)),
                    };
                }
                if args[0].ty == Ty::Elem && self.elem != ElemKind::Float {
                    let y = a.get(1);
                    return match f {
                        MathFn::Max => quote_spanned!(span=> #k::kernel::KernelNum::max(#x, #y)),
                        MathFn::Min => quote_spanned!(span=> #k::kernel::KernelNum::min(#x, #y)),
                        _ => quote_spanned!(span=> #k::kernel::KernelNum::abs(#x)),
                    };
                }
                let fm = if args[0].ty == Ty::F64 {
                    quote!(<f64 as #k::FloatMath>)
                } else {
                    quote!(<#acc as #k::FloatMath>)
                };
                match f {
                    MathFn::Exp => quote_spanned!(span=> #fm::exp(#x)),
                    MathFn::Exp2 => quote_spanned!(span=> #fm::exp2(#x)),
                    MathFn::Ln => quote_spanned!(span=> #fm::ln(#x)),
                    MathFn::Ln1p => quote_spanned!(span=> #fm::ln_1p(#x)),
                    MathFn::Sqrt => quote_spanned!(span=> #fm::sqrt(#x)),
                    MathFn::Sin => quote_spanned!(span=> #fm::sin(#x)),
                    MathFn::Cos => quote_spanned!(span=> #fm::cos(#x)),
                    MathFn::Tanh => quote_spanned!(span=> #fm::tanh(#x)),
                    MathFn::Erf => quote_spanned!(span=> #fm::erf(#x)),
                    MathFn::Abs => quote_spanned!(span=> #fm::abs(#x)),
                    MathFn::Recip if args[0].ty == Ty::F64 => quote_spanned!(span=> (1.0f64 / #x)),
                    MathFn::Recip => {
                        let one = self.float(1.0);
                        quote_spanned!(span=> (#one / #x))
                    }
                    MathFn::Max => {
                        let y = &a[1];
                        quote_spanned!(span=> #fm::max(#x, #y))
                    }
                    MathFn::Min => {
                        let y = &a[1];
                        quote_spanned!(span=> #fm::min(#x, #y))
                    }
                    MathFn::Powf => {
                        let y = &a[1];
                        quote_spanned!(span=> #fm::powf(#x, #y))
                    }
                    MathFn::Powi => {
                        let y = &a[1];
                        quote_spanned!(span=> #k::kernel::rt::powi(#x, #y))
                    }
                    MathFn::MulAdd => {
                        let (y, z) = (&a[1], &a[2]);
                        quote_spanned!(span=> #fm::mul_add(#x, #y, #z))
                    }
                    // Integer methods have integer receivers, handled above.
                    MathFn::WrappingAdd
                    | MathFn::WrappingSub
                    | MathFn::WrappingMul
                    | MathFn::MulHi => quote!(#x),
                }
            }
            ExprKind::Intrinsic(intr, args) => {
                let a: Vec<TokenStream> = args.iter().map(|x| self.expr(x)).collect();
                match intr {
                    Intrinsic::Index(name, _) => {
                        let m = Ident::new(name, span);
                        quote!(__rtx_t.#m())
                    }
                    Intrinsic::LaneId => quote!(__rtx_t.lane_id()),
                    Intrinsic::SyncThreads => quote!(__rtx_t.sync_threads()),
                    Intrinsic::GridSync => quote!(__rtx_t.grid_sync()),
                    Intrinsic::ThreadFence => {
                        quote!(::core::sync::atomic::fence(
                            ::core::sync::atomic::Ordering::SeqCst
                        ))
                    }
                    Intrinsic::ShuffleDown => {
                        let (v, o) = (&a[0], &a[1]);
                        quote!(__rtx_t.shuffle_down(#v, #o))
                    }
                    Intrinsic::ShuffleXor => {
                        let (v, o) = (&a[0], &a[1]);
                        quote!(__rtx_t.shuffle_xor(#v, #o))
                    }
                    Intrinsic::CpAsync => quote_spanned!(span=> __rtx_t.cp_async(#(#a),*)),
                    Intrinsic::CpAsyncCommit => quote!(__rtx_t.cp_async_commit()),
                    Intrinsic::CpAsyncWait(n) => {
                        let n = Literal::usize_unsuffixed(*n as usize);
                        quote!(__rtx_t.cp_async_wait(#n))
                    }
                    Intrinsic::Ldmatrix(count, trans) => {
                        let count = Literal::usize_unsuffixed(usize::from(*count));
                        quote_spanned!(span=> __rtx_t.ldmatrix(#count, #trans, #(#a),*))
                    }
                    Intrinsic::Mma => {
                        let t = &self.t;
                        quote_spanned!(span=> __rtx_t.mma_m16n8k16::<#t>(#(#a),*))
                    }
                    Intrinsic::Pack2 => {
                        let (t, lo, hi) = (&self.t, &a[0], &a[1]);
                        quote_spanned!(span=> #k::kernel::tensor_core::pack2::<#t>(#lo, #hi))
                    }
                    Intrinsic::Store2 => {
                        let t = &self.t;
                        quote_spanned!(span=> #k::kernel::tensor_core::store2::<#t>(#(#a),*))
                    }
                    Intrinsic::Wgmma(n) => {
                        let (t, n) = (&self.t, Literal::usize_unsuffixed(usize::from(*n)));
                        quote_spanned!(span=> __rtx_t.wgmma::<#t, _, _>(#n, #(#a),*))
                    }
                    Intrinsic::WgmmaRs(n) => {
                        let (t, n) = (&self.t, Literal::usize_unsuffixed(usize::from(*n)));
                        quote_spanned!(span=> __rtx_t.wgmma_rs::<#t, _>(#n, #(#a),*))
                    }
                    Intrinsic::MbarrierInit => {
                        quote_spanned!(span=> __rtx_t.mbarrier_init(#(#a),*))
                    }
                    Intrinsic::MbarrierArrive => {
                        quote_spanned!(span=> __rtx_t.mbarrier_arrive(#(#a),*))
                    }
                    Intrinsic::MbarrierArriveExpectTx => {
                        quote_spanned!(span=> __rtx_t.mbarrier_arrive_expect_tx(#(#a),*))
                    }
                    Intrinsic::MbarrierWait => {
                        quote_spanned!(span=> __rtx_t.mbarrier_wait(#(#a),*))
                    }
                    Intrinsic::TmaLoad2d => {
                        let t = &self.t;
                        quote_spanned!(span=> __rtx_t.tma_load_2d::<#t, _, _>(#(#a),*))
                    }
                    // Natively a `wgmma` completes when it is issued, and shared memory has
                    // one view: the fences and the wait have nothing to do.
                    Intrinsic::WgmmaFence
                    | Intrinsic::WgmmaCommit
                    | Intrinsic::WgmmaWait(_)
                    | Intrinsic::FenceProxyAsync => quote!(()),
                }
            }
            ExprKind::Call(c) if self.simt && c.grad.is_none() => {
                let (path, t) = (&c.path, &self.t);
                let a = c.args.iter().map(|x| match &x.kind {
                    // An integer literal takes its type from the callee's parameter.
                    ExprKind::Int(v, true) => {
                        let lit = Literal::u64_unsuffixed(*v);
                        quote_spanned!(x.span=> #lit)
                    }
                    _ => self.expr(x),
                });
                let call = quote_spanned!(span=> #path::call::<#t>(__rtx_t, #(#a),*));
                // The type the caller's code was checked against is the callee's, or rustc
                // says where it is not.
                if e.ty == Ty::Unit {
                    quote_spanned!(span=> { let () = #call; })
                } else {
                    let ty = self.ty(e.ty);
                    quote_spanned!(span=> ::core::convert::identity::<#ty>(#call))
                }
            }
            ExprKind::BufArg(name, kind, mutable) => match kind {
                Buf::In | Buf::AccIn => quote_spanned!(span=> #name),
                Buf::Local if *mutable => quote_spanned!(span=> &mut #name),
                _ => quote_spanned!(span=> &#name),
            },
            ExprKind::Call(c) => {
                let (path, t) = (&c.path, &self.t);
                let a: Vec<TokenStream> = c.args.iter().map(|x| self.expr(x)).collect();
                let f = match c.grad {
                    None => quote_spanned!(span=> scalar),
                    Some(i) => {
                        let d = Ident::new(&format!("d{i}"), span);
                        quote_spanned!(span=> #d)
                    }
                };
                quote_spanned!(span=> #path::#f::<#t>(#(#a),*))
            }
            ExprKind::Layout(f, recv, dim) => {
                let r = self.expr(recv);
                let d = dim.as_ref().map(|d| self.expr(d));
                match f {
                    LayoutFn::Rank => quote!(((#r).rank as usize)),
                    LayoutFn::Dim => quote!(((#r).dims[#d] as usize)),
                    LayoutFn::Offset => quote!(((#r).offset as usize)),
                    LayoutFn::Stride => quote!(((#r).strides[#d] as usize)),
                }
            }
            ExprKind::Load(buf, kind, elem, index) => {
                let i = self.expr(index);
                self.load(buf, *kind, *elem, i)
            }
            ExprKind::TableLoad(table, kind, row, index) => {
                self.table_load(table, *kind, row, index)
            }
            ExprKind::Cast(inner) => {
                let x = self.expr(inner);
                let float = self.elem == ElemKind::Float;
                match (inner.ty, e.ty) {
                    (from, to) if from == to => x,
                    (Ty::Elem, Ty::F64) if float => quote!(#k::FloatMath::to_f64(#x)),
                    (Ty::Elem, Ty::F64) => quote!(#k::kernel::KernelScalar::to_f64(#x)),
                    (Ty::Elem, to) if float => {
                        let to = self.ty(to);
                        quote!((#k::FloatMath::to_f64(#x) as #to))
                    }
                    (Ty::Elem, to) => {
                        let to = self.ty(to);
                        quote!((#k::kernel::KernelScalar::to_i64(#x) as #to))
                    }
                    (Ty::F64, Ty::Elem) if float => quote!(<#acc as #k::FloatMath>::c(#x)),
                    (Ty::F64, Ty::Elem) => quote!(<#acc as #k::kernel::KernelScalar>::from_f64(#x)),
                    (_, Ty::Elem) if float => quote!(<#acc as #k::FloatMath>::c((#x) as f64)),
                    (_, Ty::Elem) => {
                        quote!(<#acc as #k::kernel::KernelScalar>::from_i64((#x) as i64))
                    }
                    (_, to) => {
                        let to = self.ty(to);
                        quote!(((#x) as #to))
                    }
                }
            }
            ExprKind::If(c, a, b) => {
                let (c, a) = (self.expr(c), self.block(a));
                if b.stmts.is_empty() && b.tail.is_none() {
                    quote!(if #c #a)
                } else {
                    let b = self.block(b);
                    quote!(if #c #a else #b)
                }
            }
            ExprKind::Block(b) => self.block(b),
        }
    }
}

/// The `f64` or `i64` value a store converts straight to `T`, when the statement is
/// `buf[i] = v as T` into a global `T` buffer (see `NativeCx::rounding_store`).
pub fn direct_store(kind: Buf, elem: Ty, op: Option<BinOp>, value: &Expr) -> Option<&Expr> {
    match &value.kind {
        // Only buffers holding `T` in storage type: compute-type buffers (`T::Acc`, shared and
        // local arrays) take the value as the compute type.
        ExprKind::Cast(inner)
            if kind.converts(elem) && op.is_none() && matches!(inner.ty, Ty::F64 | Ty::I64) =>
        {
            Some(inner)
        }
        _ => None,
    }
}

fn bin_tokens(op: BinOp, a: TokenStream, b: TokenStream) -> TokenStream {
    match op {
        BinOp::Add => quote!((#a + #b)),
        BinOp::Sub => quote!((#a - #b)),
        BinOp::Mul => quote!((#a * #b)),
        BinOp::Div => quote!((#a / #b)),
        BinOp::Rem => quote!((#a % #b)),
        BinOp::BitAnd => quote!((#a & #b)),
        BinOp::BitOr => quote!((#a | #b)),
        BinOp::BitXor => quote!((#a ^ #b)),
        BinOp::Shl => quote!((#a << #b)),
        BinOp::Shr => quote!((#a >> #b)),
        BinOp::Eq => quote!((#a == #b)),
        BinOp::Ne => quote!((#a != #b)),
        BinOp::Lt => quote!((#a < #b)),
        BinOp::Le => quote!((#a <= #b)),
        BinOp::Gt => quote!((#a > #b)),
        BinOp::Ge => quote!((#a >= #b)),
        BinOp::And => quote!((#a && #b)),
        BinOp::Or => quote!((#a || #b)),
    }
}
