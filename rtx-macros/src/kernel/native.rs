//! Emits the native Rust of a kernel body from the IR: `T` values computed in `T::Acc`
//! through `FloatMath`, buffers read as slices (or the block emulation's wrappers in SIMT
//! kernels), intrinsics as calls on the emulated thread `__rtx_t`.
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
}

impl NativeCx {
    /// The compute type of `T`.
    pub fn acc(&self) -> TokenStream {
        let (k, t) = (&self.krate, &self.t);
        quote!(<#t as #k::Float>::Acc)
    }

    pub fn ty(&self, ty: Ty) -> TokenStream {
        match ty {
            Ty::Elem => self.acc(),
            Ty::Usize => quote!(usize),
            Ty::I32 => quote!(i32),
            Ty::U32 => quote!(u32),
            Ty::I64 => quote!(i64),
            Ty::Bool => quote!(bool),
            Ty::Unit => quote!(()),
        }
    }

    /// `T` storage to compute type.
    pub fn widen(&self, e: TokenStream) -> TokenStream {
        let k = &self.krate;
        quote!(#k::Float::to_acc(#e))
    }

    /// Compute type to `T` storage.
    pub fn narrow(&self, e: TokenStream) -> TokenStream {
        let k = &self.krate;
        quote!(#k::Float::from_acc(#e))
    }

    pub fn float(&self, v: f64) -> TokenStream {
        let (k, acc) = (&self.krate, self.acc());
        let lit = Literal::f64_suffixed(v);
        quote!(<#acc as #k::FloatMath>::c(#lit))
    }

    pub fn block(&self, b: &Block) -> TokenStream {
        let stmts = b.stmts.iter().map(|s| self.stmt(s));
        let tail = b.tail.as_ref().map(|t| self.expr(t));
        quote!({ #(#stmts)* #tail })
    }

    fn load(&self, buf: &Ident, kind: Buf, elem: Ty, index: TokenStream) -> TokenStream {
        let raw = match kind {
            Buf::In | Buf::AccIn => quote!(#buf[#index]),
            Buf::Out | Buf::AccOut => quote!(#buf.load(#index)),
            Buf::Shared => return quote!(#buf.get(#index)),
        };
        if kind.converts(elem) {
            self.widen(raw)
        } else {
            raw
        }
    }

    fn store(
        &self,
        buf: &Ident,
        kind: Buf,
        elem: Ty,
        index: TokenStream,
        v: TokenStream,
    ) -> TokenStream {
        match kind {
            Buf::Shared => quote!(#buf.set(#index, #v);),
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
            Stmt::Assign { place, op, value } => {
                let v = self.expr(value);
                match place {
                    Place::Var(name) => match op {
                        None => quote!(#name = #v;),
                        Some(op) => {
                            let combined = bin_tokens(*op, quote!(#name), v);
                            quote!(#name = #combined;)
                        }
                    },
                    Place::Index(buf, kind, elem, index) => {
                        let i = self.expr(index);
                        let new = match op {
                            None => v,
                            Some(op) => {
                                bin_tokens(*op, self.load(buf, *kind, *elem, quote!(__rtx_i)), v)
                            }
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
            } => {
                let (i, v) = (self.expr(index), self.expr(value));
                let add = match (kind, ty) {
                    (Buf::Shared | Buf::AccOut | Buf::AccIn, _) => {
                        quote!(|__rtx_o| __rtx_o + __rtx_v)
                    }
                    (_, Ty::Elem) => {
                        let w = self.widen(quote!(__rtx_o));
                        let n = self.narrow(quote!(#w + __rtx_v));
                        quote!(|__rtx_o| #n)
                    }
                    _ => quote!(|__rtx_o| __rtx_o + __rtx_v),
                };
                quote!({ let __rtx_i: usize = #i; let __rtx_v = #v; #buf.update(__rtx_i, #add); })
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

    pub fn expr(&self, e: &Expr) -> TokenStream {
        let span = e.span;
        let k = &self.krate;
        let acc = self.acc();
        match &e.kind {
            ExprKind::Float(v) => self.float(*v),
            ExprKind::Int(v, _) => {
                let lit = match e.ty {
                    Ty::I32 => Literal::i32_suffixed(*v as i32),
                    Ty::U32 => Literal::u32_suffixed(*v as u32),
                    Ty::I64 => Literal::i64_suffixed(*v as i64),
                    _ => Literal::usize_suffixed(*v as usize),
                };
                quote_spanned!(span=> #lit)
            }
            ExprKind::Bool(b) => quote!(#b),
            ExprKind::Const(c) => {
                let v = match c {
                    FConst::Inf => quote!(f64::INFINITY),
                    FConst::NegInf => quote!(f64::NEG_INFINITY),
                    FConst::Nan => quote!(f64::NAN),
                };
                quote!(<#acc as #k::FloatMath>::c(#v))
            }
            ExprKind::Var(id) => quote!(#id),
            ExprKind::Unary(UnOp::Neg, a) => {
                let a = self.expr(a);
                quote_spanned!(span=> (-#a))
            }
            ExprKind::Unary(UnOp::Not, a) => {
                let a = self.expr(a);
                quote_spanned!(span=> (!#a))
            }
            ExprKind::Binary(op, a, b) => bin_tokens(*op, self.expr(a), self.expr(b)),
            ExprKind::Math(f, args) => {
                let a: Vec<TokenStream> = args.iter().map(|x| self.expr(x)).collect();
                let x = &a[0];
                if args[0].ty != Ty::Elem {
                    let y = &a[1];
                    return match f {
                        MathFn::Max => quote!(::core::cmp::Ord::max(#x, #y)),
                        _ => quote!(::core::cmp::Ord::min(#x, #y)),
                    };
                }
                let fm = quote!(<#acc as #k::FloatMath>);
                match f {
                    MathFn::Exp => quote_spanned!(span=> #fm::exp(#x)),
                    MathFn::Ln => quote_spanned!(span=> #fm::ln(#x)),
                    MathFn::Ln1p => quote_spanned!(span=> #fm::ln_1p(#x)),
                    MathFn::Sqrt => quote_spanned!(span=> #fm::sqrt(#x)),
                    MathFn::Sin => quote_spanned!(span=> #fm::sin(#x)),
                    MathFn::Cos => quote_spanned!(span=> #fm::cos(#x)),
                    MathFn::Tanh => quote_spanned!(span=> #fm::tanh(#x)),
                    MathFn::Erf => quote_spanned!(span=> #fm::erf(#x)),
                    MathFn::Abs => quote_spanned!(span=> #fm::abs(#x)),
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
                    Intrinsic::ShuffleDown => {
                        let (v, o) = (&a[0], &a[1]);
                        quote!(__rtx_t.shuffle_down(#v, #o))
                    }
                    Intrinsic::ShuffleXor => {
                        let (v, o) = (&a[0], &a[1]);
                        quote!(__rtx_t.shuffle_xor(#v, #o))
                    }
                }
            }
            ExprKind::Load(buf, kind, elem, index) => {
                let i = self.expr(index);
                self.load(buf, *kind, *elem, i)
            }
            ExprKind::Cast(inner) => {
                let x = self.expr(inner);
                match (inner.ty, e.ty) {
                    (from, to) if from == to => x,
                    (Ty::Elem, to) => {
                        let to = self.ty(to);
                        quote!((#k::FloatMath::to_f64(#x) as #to))
                    }
                    (_, Ty::Elem) => quote!(<#acc as #k::FloatMath>::c((#x) as f64)),
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
