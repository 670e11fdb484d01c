//! The tensor-core intrinsics of SIMT kernels: `cp_async`, `cp_async_commit`,
//! `cp_async_wait`, the `ldmatrix_x{1,2,4}[_trans]` loads, `mma_m16n8k16` and `pack2`, and
//! Hopper's warpgroup products `wgmma_m64n{64,128,256}k16` (both operands in shared tiles)
//! and `wgmma_rs_m64n{64,128,256}k16` (A from registers, B N-major), with `wgmma_fence`,
//! `wgmma_commit`, `wgmma_wait` and `fence_proxy_async`; and Hopper's tensor memory
//! accelerator: `tma_load_2d` (a box of a `TensorMap` parameter's view into a tile) with the
//! shared-memory barriers that count its bytes, `mbarrier_init`, `mbarrier_arrive`,
//! `mbarrier_arrive_expect_tx` and `mbarrier_wait` (barriers are `#[shared]` arrays of `u64`).
//!
//! Tiles are `#[shared]` arrays of `u32` words, each holding two 16-bit elements (the layout
//! `ldmatrix` reads and `cp_async` writes); fragments are per-thread arrays (`u32` words for
//! A and B, `T` values, f32, for the accumulator), addressed by a first index so one array
//! holds several fragments. What PTX requires of the operands (f16 or bf16 elements, 16-byte
//! aligned rows, a constant wait count) is checked here where the macro can see it, natively
//! where it cannot.
//!
//! Invariant: every intrinsic sets `tensor_core` (the kernel is instantiated for f16 and bf16
//! only), and the warp-wide ones set `uses_sync` (natively they exchange through the warp).

use super::typing::coerce;
use super::{Parser, Var};
use crate::kernel::ir::*;
use syn::spanned::Spanned;
use syn::{Error, Result};

/// The names of the tensor-core intrinsics.
pub(super) const NAMES: &[&str] = &[
    "cp_async",
    "cp_async_commit",
    "cp_async_wait",
    "ldmatrix_x1",
    "ldmatrix_x2",
    "ldmatrix_x4",
    "ldmatrix_x1_trans",
    "ldmatrix_x2_trans",
    "ldmatrix_x4_trans",
    "mma_m16n8k16",
    "pack2",
    "store2",
    "wgmma_m64n64k16",
    "wgmma_m64n128k16",
    "wgmma_m64n256k16",
    "wgmma_rs_m64n64k16",
    "wgmma_rs_m64n128k16",
    "wgmma_rs_m64n256k16",
    "wgmma_fence",
    "wgmma_commit",
    "wgmma_wait",
    "fence_proxy_async",
    "mbarrier_init",
    "mbarrier_arrive",
    "mbarrier_arrive_expect_tx",
    "mbarrier_wait",
    "tma_load_2d",
];

/// What an array argument must be.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Want {
    /// A `#[shared]` array of `u32` words.
    Tile,
    /// A `#[shared]` array of `u64` barriers.
    Barrier,
    /// A `&[T]` buffer parameter.
    Source,
    /// A `&mut [T]` buffer parameter.
    Dest,
    /// A per-thread array of this type, written (`&mut v`) or read (`&v`).
    Local(Ty, bool),
}

impl Parser {
    /// A call of a tensor-core intrinsic `name`.
    pub(super) fn tensor_intrinsic(&mut self, name: &str, c: &syn::ExprCall) -> Result<Expr> {
        let span = c.span();
        self.need_simt(span, name)?;
        if self.device.is_some() {
            return Err(Error::new(
                span,
                format!(
                    "`{name}` belongs to SIMT kernels, not to device functions (yet): their \
                     CUDA text does not know the element type's storage"
                ),
            ));
        }
        if self.elem != ElemKind::Float {
            return Err(Error::new(
                span,
                format!(
                    "`{name}` needs `{}: Float`: kernels on the tensor cores are instantiated \
                     for f16 and bf16",
                    self.generic
                ),
            ));
        }
        let arity = match name {
            "cp_async" => 5,
            "cp_async_commit" => 0,
            "cp_async_wait" => 1,
            "mma_m16n8k16" => 6,
            "pack2" => 2,
            "store2" => 4,
            "wgmma_fence" | "wgmma_commit" | "fence_proxy_async" => 0,
            "wgmma_wait" => 2,
            n if n.starts_with("wgmma_m64") => 6,
            n if n.starts_with("wgmma_rs_m64") => 7,
            "mbarrier_arrive" => 2,
            "mbarrier_init" | "mbarrier_arrive_expect_tx" | "mbarrier_wait" => 3,
            "tma_load_2d" => 8,
            _ => 4,
        };
        if c.args.len() != arity {
            return Err(Error::new(
                span,
                format!("`{name}` takes {arity} argument(s): {}", usage(name)),
            ));
        }
        self.tensor_core = true;
        let a: Vec<&syn::Expr> = c.args.iter().collect();
        let (intr, args, ty) = match name {
            "cp_async" => {
                let args = vec![
                    self.array_arg(a[0], Want::Tile, name)?,
                    self.index_arg(a[1])?,
                    self.array_arg(a[2], Want::Source, name)?,
                    self.index_arg(a[3])?,
                    self.index_arg(a[4])?,
                ];
                (Intrinsic::CpAsync, args, Ty::Unit)
            }
            "cp_async_commit" => (Intrinsic::CpAsyncCommit, vec![], Ty::Unit),
            "cp_async_wait" => {
                let n = self.wait_count(a[0], name)?;
                (Intrinsic::CpAsyncWait(n), vec![], Ty::Unit)
            }
            "mma_m16n8k16" => {
                self.uses_sync = true;
                let args = vec![
                    self.array_arg(a[0], Want::Local(Ty::Elem, true), name)?,
                    self.index_arg(a[1])?,
                    self.array_arg(a[2], Want::Local(Ty::U32, false), name)?,
                    self.index_arg(a[3])?,
                    self.array_arg(a[4], Want::Local(Ty::U32, false), name)?,
                    self.index_arg(a[5])?,
                ];
                (Intrinsic::Mma, args, Ty::Unit)
            }
            "pack2" => {
                let lo = coerce(self.expr(a[0])?, Ty::Elem)?;
                let hi = coerce(self.expr(a[1])?, Ty::Elem)?;
                (Intrinsic::Pack2, vec![lo, hi], Ty::U32)
            }
            "store2" => {
                let args = vec![
                    self.array_arg(a[0], Want::Dest, name)?,
                    self.index_arg(a[1])?,
                    coerce(self.expr(a[2])?, Ty::Elem)?,
                    coerce(self.expr(a[3])?, Ty::Elem)?,
                ];
                (Intrinsic::Store2, args, Ty::Unit)
            }
            "wgmma_fence" => {
                self.wgmma = true;
                (Intrinsic::WgmmaFence, vec![], Ty::Unit)
            }
            "wgmma_commit" => {
                self.wgmma = true;
                (Intrinsic::WgmmaCommit, vec![], Ty::Unit)
            }
            "fence_proxy_async" => (Intrinsic::FenceProxyAsync, vec![], Ty::Unit),
            n if n.starts_with("mbarrier_") => {
                // Natively the threads run together, so a wait can let the others arrive;
                // on the GPU the barriers' shared arrays start on 1024-byte boundaries like
                // `wgmma`'s tiles.
                self.uses_sync = true;
                self.wgmma = true;
                let mut args = vec![
                    self.array_arg(a[0], Want::Barrier, name)?,
                    self.index_arg(a[1])?,
                ];
                if n != "mbarrier_arrive" {
                    args.push(self.index_arg(a[2])?);
                }
                let intr = match n {
                    "mbarrier_init" => Intrinsic::MbarrierInit,
                    "mbarrier_arrive" => Intrinsic::MbarrierArrive,
                    "mbarrier_arrive_expect_tx" => Intrinsic::MbarrierArriveExpectTx,
                    _ => Intrinsic::MbarrierWait,
                };
                (intr, args, Ty::Unit)
            }
            "tma_load_2d" => {
                self.uses_sync = true;
                self.wgmma = true;
                let args = vec![
                    self.array_arg(a[0], Want::Tile, name)?,
                    self.index_arg(a[1])?,
                    self.array_arg(a[2], Want::Source, name)?,
                    self.map_arg(a[3], name)?,
                    self.index_arg(a[4])?,
                    self.index_arg(a[5])?,
                    self.array_arg(a[6], Want::Barrier, name)?,
                    self.index_arg(a[7])?,
                ];
                (Intrinsic::TmaLoad2d, args, Ty::Unit)
            }
            "wgmma_wait" => {
                self.wgmma = true;
                let n = self.wait_count(a[0], name)?;
                let acc = self.array_arg(a[1], Want::Local(Ty::Elem, true), name)?;
                (Intrinsic::WgmmaWait(n), vec![acc], Ty::Unit)
            }
            n if n.starts_with("wgmma_m64") => {
                self.wgmma = true;
                let cols = n["wgmma_m64n".len()..n.len() - "k16".len()]
                    .parse()
                    .expect("a name of NAMES");
                let args = vec![
                    self.array_arg(a[0], Want::Local(Ty::Elem, true), name)?,
                    self.index_arg(a[1])?,
                    self.array_arg(a[2], Want::Tile, name)?,
                    self.index_arg(a[3])?,
                    self.array_arg(a[4], Want::Tile, name)?,
                    self.index_arg(a[5])?,
                ];
                (Intrinsic::Wgmma(cols), args, Ty::Unit)
            }
            n if n.starts_with("wgmma_rs_m64") => {
                self.wgmma = true;
                let cols = n["wgmma_rs_m64n".len()..n.len() - "k16".len()]
                    .parse()
                    .expect("a name of NAMES");
                let args = vec![
                    self.array_arg(a[0], Want::Local(Ty::Elem, true), name)?,
                    self.index_arg(a[1])?,
                    self.array_arg(a[2], Want::Local(Ty::U32, false), name)?,
                    self.index_arg(a[3])?,
                    self.array_arg(a[4], Want::Tile, name)?,
                    self.index_arg(a[5])?,
                    self.index_arg(a[6])?,
                ];
                (Intrinsic::WgmmaRs(cols), args, Ty::Unit)
            }
            _ => {
                self.uses_sync = true;
                let count = match &name["ldmatrix_x".len()..][..1] {
                    "1" => 1,
                    "2" => 2,
                    _ => 4,
                };
                let args = vec![
                    self.array_arg(a[0], Want::Local(Ty::U32, true), name)?,
                    self.index_arg(a[1])?,
                    self.array_arg(a[2], Want::Tile, name)?,
                    self.index_arg(a[3])?,
                ];
                let trans = name.ends_with("_trans");
                (Intrinsic::Ldmatrix(count, trans), args, Ty::Unit)
            }
        };
        Ok(Expr::new(ExprKind::Intrinsic(intr, args), ty, span))
    }

    fn index_arg(&mut self, a: &syn::Expr) -> Result<Expr> {
        coerce(self.expr(a)?, Ty::Usize)
    }

    /// A `TensorMap` parameter, by name.
    fn map_arg(&mut self, a: &syn::Expr, intr: &str) -> Result<Expr> {
        let bad = || {
            Error::new(
                a.span(),
                format!(
                    "this argument of `{intr}` is a `TensorMap` parameter, by name ({})",
                    usage(intr)
                ),
            )
        };
        let syn::Expr::Path(p) = super::strip_parens(a) else {
            return Err(bad());
        };
        let Some(id) = p.path.get_ident() else {
            return Err(bad());
        };
        match self.lookup(id)? {
            Var::Scalar {
                ty: Ty::TensorMap, ..
            } => Ok(Expr::var(id.clone(), Ty::TensorMap)),
            _ => Err(bad()),
        }
    }

    /// The group count of `cp_async_wait` or `wgmma_wait`: PTX takes it as an immediate, so
    /// it is an integer literal or a kernel `const`.
    fn wait_count(&self, a: &syn::Expr, intr: &str) -> Result<u32> {
        let v = match super::strip_parens(a) {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Int(i),
                ..
            }) => i.base10_parse::<u64>()?,
            syn::Expr::Path(p) if p.path.get_ident().is_some() => {
                match p.path.get_ident().map(|id| self.lookup(id)).transpose()? {
                    Some(Var::Const { value, .. }) => value,
                    _ => u64::MAX,
                }
            }
            _ => u64::MAX,
        };
        u32::try_from(v).ok().filter(|v| *v <= 7).ok_or_else(|| {
            Error::new(
                a.span(),
                format!(
                    "`{intr}` takes the number of newest groups left pending as an integer \
                     literal or a kernel `const`, 0 to 7 (PTX takes it as an immediate)"
                ),
            )
        })
    }

    /// A shared tile, a source buffer or a fragment, named as a whole (`&mut tile`, `x`,
    /// `&mut acc`, `&a`).
    fn array_arg(&mut self, a: &syn::Expr, want: Want, intr: &str) -> Result<Expr> {
        let span = a.span();
        let (id, by_ref) = match super::strip_parens(a) {
            syn::Expr::Reference(r) => match super::strip_parens(&r.expr) {
                syn::Expr::Path(p) => (p.path.get_ident().cloned(), Some(r.mutability.is_some())),
                _ => (None, None),
            },
            syn::Expr::Path(p) => (p.path.get_ident().cloned(), None),
            _ => (None, None),
        };
        let what = match want {
            Want::Tile => {
                "a `#[shared]` array of `u32` words, by reference: `&mut tile`".to_string()
            }
            Want::Barrier => {
                "a `#[shared]` array of `u64` barriers, by reference: `&mut bar`".to_string()
            }
            Want::Source => format!("a `&[{}]` buffer parameter, by name: `x`", self.generic),
            Want::Dest => format!("a `&mut [{}]` buffer parameter, by name: `o`", self.generic),
            Want::Local(ty, m) => format!(
                "a per-thread array of `{}`, by reference: `{}v`",
                if ty == Ty::Elem {
                    self.generic.to_string()
                } else {
                    ty.name().to_string()
                },
                if m { "&mut " } else { "&" }
            ),
        };
        let bad = || {
            Error::new(
                span,
                format!("this argument of `{intr}` is {what} ({})", usage(intr)),
            )
        };
        let Some(id) = id else { return Err(bad()) };
        let var = self.lookup(&id)?;
        let (kind, mutable) = match (want, var, by_ref) {
            (
                Want::Tile,
                Var::Buf {
                    kind: Buf::Shared,
                    elem: Ty::U32,
                },
                Some(_),
            ) => (Buf::Shared, false),
            (
                Want::Barrier,
                Var::Buf {
                    kind: Buf::Shared,
                    elem: Ty::U64,
                },
                Some(_),
            ) => (Buf::Shared, false),
            (
                Want::Source,
                Var::Buf {
                    kind: Buf::In,
                    elem: Ty::Elem,
                },
                None,
            ) => (Buf::In, false),
            (
                Want::Dest,
                Var::Buf {
                    kind: Buf::Out,
                    elem: Ty::Elem,
                },
                None,
            ) => (Buf::Out, true),
            (Want::Local(ty, m), Var::Local { elem, mutable }, Some(r))
                if elem == ty && r == m && (mutable || !m) =>
            {
                (Buf::Local, m)
            }
            (Want::Local(_, true), Var::Local { mutable: false, .. }, Some(true)) => {
                return Err(Error::new(
                    span,
                    format!("`{intr}` writes `{id}`: declare it `let mut {id}`"),
                ));
            }
            _ => return Err(bad()),
        };
        Ok(Expr::new(
            ExprKind::BufArg(id, kind, mutable),
            Ty::Unit,
            span,
        ))
    }
}

/// How an intrinsic is called, for its error messages.
fn usage(name: &str) -> &'static str {
    match name {
        "cp_async" => {
            "`cp_async(&mut tile, word, x, index, n)` copies `x[index..index + n]` (n \
                       at most 8) into words `word..word + 4` of the `u32` tile"
        }
        "cp_async_commit" => "`cp_async_commit()`",
        "cp_async_wait" => "`cp_async_wait(1)`",
        "mma_m16n8k16" => {
            "`mma_m16n8k16(&mut acc, ci, &a, ai, &b, bi)` adds A B to `acc[ci..ci + \
                           4]`, A in `a[ai..ai + 4]`, B in `b[bi..bi + 2]`"
        }
        "pack2" => "`pack2(lo, hi)` packs two `T` values into a `u32`",
        "store2" => {
            "`store2(o, i, lo, hi)` writes `o[i] = lo` and `o[i + 1] = hi` as one 32-bit \
             store; `i` must be even"
        }
        "wgmma_fence" => "`wgmma_fence()`",
        "wgmma_commit" => "`wgmma_commit()`",
        "fence_proxy_async" => "`fence_proxy_async()`",
        "mbarrier_init" => {
            "`mbarrier_init(&mut bar, i, count)` sets barrier `bar[i]` to complete a phase \
             after `count` arrivals"
        }
        "mbarrier_arrive" => "`mbarrier_arrive(&mut bar, i)`",
        "mbarrier_arrive_expect_tx" => {
            "`mbarrier_arrive_expect_tx(&mut bar, i, bytes)` arrives at `bar[i]`, whose phase \
             then also waits for `bytes` bytes of copies"
        }
        "mbarrier_wait" => {
            "`mbarrier_wait(&mut bar, i, parity)` waits until the phase of parity `parity` \
             (0 or 1) of `bar[i]` has completed"
        }
        "tma_load_2d" => {
            "`tma_load_2d(&mut tile, word, x, map, col, row, &mut bar, i)` copies the box of \
             `map`'s view of buffer `x` at (`row`, `col`) into `tile` from word `word` on, in \
             the 128-byte swizzle, counting its bytes on barrier `bar[i]`"
        }
        "wgmma_wait" => {
            "`wgmma_wait(n, &mut acc)` waits until at most `n` groups of `wgmma`s are \
             pending; `acc` is ready after it"
        }
        n if n.starts_with("wgmma_m64") => {
            "`wgmma_m64n128k16(&mut acc, ci, &ta, a_word, &tb, b_word)` adds A B^T to \
             `acc[ci..ci + n / 2]`, A (64 x 16) and B (n x 16) K-major in 128-byte-swizzled \
             `u32` tiles from words `a_word` and `b_word`"
        }
        n if n.starts_with("wgmma_rs_m64") => {
            "`wgmma_rs_m64n128k16(&mut acc, ci, &a, ai, &tb, b_word, b_panel)` adds A B to \
             `acc[ci..ci + n / 2]`, A (64 x 16) in `a[ai..ai + 4]` of each thread, B (16 x n) \
             N-major in a 128-byte-swizzled `u32` tile from word `b_word`, its 64-column \
             panels `b_panel` words apart"
        }
        _ => {
            "`ldmatrix_x4(&mut frag, at, &tile, word)` loads into `frag[at..at + 4]`, this \
              lane giving the first word of one 16-byte row of `tile`"
        }
    }
}

#[cfg(test)]
mod tests {
    use quote::quote;

    /// The expansion of `#[kernel(<attr>)]` on `item`, as text.
    fn expand(attr: proc_macro2::TokenStream, item: proc_macro2::TokenStream) -> String {
        crate::kernel::expand(attr, item).to_string()
    }

    #[test]
    fn a_tensor_core_kernel_is_half_only_and_includes_the_ptx() {
        let out = expand(
            quote!(crate = crate),
            quote! {
                pub fn k<T: Float>(x: &[T], y: &mut [T]) {
                    #[shared]
                    let t: [u32; 64];
                    cp_async(&mut t, 0, x, 0, 8);
                    cp_async_commit();
                    cp_async_wait(0);
                    let mut f = [0u32; 4];
                    ldmatrix_x4(&mut f, 0, &t, thread_idx_x() % 16 * 4);
                    let mut acc = [0.0; 4];
                    mma_m16n8k16(&mut acc, 0, &f, 0, &f, 2);
                    y[0] = acc[0];
                }
            },
        );
        assert!(!out.contains("compile_error"), "{out}");
        assert!(out.contains("half_only"), "{out}");
        assert!(out.contains("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"));
        assert!(out.contains("k_bf16") && out.contains("k_f16") && !out.contains("k_f32"));
        assert!(out.contains("__attribute__((aligned(16)))"));
    }

    #[test]
    fn misuse_is_an_error_at_the_call() {
        for (body, message) in [
            (
                quote! { #[shared] let t: [T; 64]; cp_async(&mut t, 0, x, 0, 8); },
                "a `#[shared]` array of `u32` words",
            ),
            (
                quote! { let n = 1; cp_async_wait(n); },
                "integer literal or a kernel `const`",
            ),
            (
                quote! { let f = [0u32; 4]; #[shared] let t: [u32; 64]; ldmatrix_x4(&mut f, 0, &t, 0); },
                "declare it `let mut f`",
            ),
            (
                quote! { let mut acc = [0u32; 4]; let a = [0u32; 4]; mma_m16n8k16(&mut acc, 0, &a, 0, &a, 0); },
                "a per-thread array of `T`",
            ),
            (quote! { cp_async_commit(1); }, "takes 0 argument(s)"),
            (
                quote! { let mut acc = [T::NAN; 64]; let f = [0u32; 8]; wgmma_m64n128k16(&mut acc, 0, &f, 0, &f, 0); },
                "a `#[shared]` array of `u32` words",
            ),
            (
                quote! { let mut acc = [T::NAN; 64]; let n = 1; wgmma_wait(n, &mut acc); },
                "`wgmma_wait` takes the number of newest groups",
            ),
            (quote! { wgmma_commit(0); }, "takes 0 argument(s)"),
            (
                quote! { let mut acc = [T::NAN; 64]; let f = [0u32; 4]; #[shared] let t: [u32; 2048]; wgmma_rs_m64n128k16(&mut acc, 0, &f, 0, &t, 0); },
                "takes 7 argument(s)",
            ),
            (
                quote! { let mut acc = [T::NAN; 64]; let f = [0u32; 4]; wgmma_rs_m64n128k16(&mut acc, 0, &f, 0, &f, 0, 4096); },
                "a `#[shared]` array of `u32` words",
            ),
        ] {
            let out = expand(
                quote!(crate = crate),
                quote! { pub fn k<T: Float>(x: &[T], y: &mut [T]) { #body } },
            );
            assert!(out.contains(message), "expected `{message}` in {out}");
        }
        let out = expand(
            quote!(device, crate = crate),
            quote! { pub fn d<T: Float>(v: T) -> T { cp_async_commit(); v } },
        );
        assert!(out.contains("not to device functions"), "{out}");
        let out = expand(
            quote!(crate = crate),
            quote! { pub fn k<T: Num>(y: &mut [T]) { cp_async_commit(); } },
        );
        assert!(out.contains("needs `T: Float`"), "{out}");
    }
}
