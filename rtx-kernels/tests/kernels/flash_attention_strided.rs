//! The fused attention kernels (`kernels::flash_attn_*`) on operands read and written through
//! strides, as a transformer's attention lays them out: q, k and v in place in a fused
//! projection's `[batch, t, 3 heads d]` output (q at column 0, k at `heads d`, v at
//! `2 heads d`), or, with fewer or more queries than keys, q in a `[batch, t_q, heads d]`
//! buffer and k, v in a `[batch, t_k, 2 heads d]` one; `o` and its gradient as
//! `[batch, t_q, heads d]`; and dq, dk, dv written at their inputs' places in buffers like the
//! inputs'. Each result is held bit for bit to the same kernels on dense `[batch heads, t, d]`
//! copies, which `flash_attention.rs` and `flash_attention_bwd.rs` hold to f64 references: the
//! arithmetic is the same, only the addresses differ, so any difference is an indexing bug. The
//! outputs start as NaN, so an element left unwritten shows; together the gradients must cover
//! their buffers exactly once (no element written twice, none outside its place).
//!
//! Both forward and all three backward kernels, causal or not, with key padding, over partial
//! tiles of queries and keys, several heads and batch elements, and head dims 64, 80 and 128.

use half::{bf16, f16};
use rtx_kernels::Float;
use rtx_kernels::kernel::KernelStrides;
use rtx_kernels::kernels::{
    flash_attn_bwd_dkdv, flash_attn_bwd_dkdv_launch, flash_attn_bwd_dq, flash_attn_bwd_dq_launch,
    flash_attn_bwd_dq_rows, flash_attn_bwd_rowdot, flash_attn_bwd_rowdot_launch,
    flash_attn_dense_strides, flash_attn_fwd, flash_attn_launch, flash_attn_strides,
};

use crate::flash_common::input;

/// One problem: sizes, masks, and whether q, k and v share one projection buffer (only when
/// `t_q == t_k`).
#[derive(Clone, Debug)]
struct Strided {
    batch: usize,
    heads: usize,
    t_q: usize,
    t_k: usize,
    d: usize,
    causal: bool,
    /// Valid keys per `batch heads` row, when padded.
    key_len: Option<Vec<u32>>,
    /// q, k, v in one `[batch, t, 3 heads d]` buffer; otherwise q in its own and k, v in a
    /// `[batch, t_k, 2 heads d]` one.
    packed: bool,
}

/// Where a problem's operands lie: per group, its buffer's length and strides, and each
/// operand's offset in its buffer.
struct Places {
    q_len: usize,
    kv_len: usize,
    qs: [usize; 3],
    ks: [usize; 3],
    os: [usize; 3],
    /// Offsets of q (and dq), k (and dk), v (and dv).
    off: [usize; 3],
}

impl Strided {
    fn places(&self) -> Places {
        let (b, w) = (self.batch, self.heads * self.d);
        let os = [self.t_q * w, self.d, w];
        if self.packed {
            assert_eq!(self.t_q, self.t_k, "a packed projection has one sequence");
            let row = 3 * w;
            let s = [self.t_q * row, self.d, row];
            let len = b * self.t_q * row;
            Places {
                q_len: len,
                kv_len: len,
                qs: s,
                ks: s,
                os,
                off: [0, w, 2 * w],
            }
        } else {
            let row = 2 * w;
            Places {
                q_len: b * self.t_q * w,
                kv_len: b * self.t_k * row,
                qs: os,
                ks: [self.t_k * row, self.d, row],
                os,
                off: [0, 0, w],
            }
        }
    }
}

/// The dense `[batch heads, t, d]` copy of the operand at `off` with strides `s` in `buf`.
fn gather<T: Float>(buf: &[T], off: usize, s: [usize; 3], c: &Strided, t: usize) -> Vec<T> {
    let mut out = Vec::with_capacity(c.batch * c.heads * t * c.d);
    for n in 0..c.batch {
        for h in 0..c.heads {
            for i in 0..t {
                let at = off + n * s[0] + h * s[1] + i * s[2];
                out.extend_from_slice(&buf[at..at + c.d]);
            }
        }
    }
    out
}

/// The four kernels' inputs in one layout, with the strides of the q, k and o groups.
struct Run<'a, T: Float<Acc = f32>> {
    q: &'a [T],
    k: &'a [T],
    v: &'a [T],
    dout: &'a [T],
    strides: [KernelStrides; 3],
}

/// What the kernels wrote: `o`, `lse`, `delta`, `dq`, `dk`, `dv`.
struct Outputs<T> {
    o: Vec<T>,
    lse: Vec<f32>,
    delta: Vec<f32>,
    grads: [Vec<T>; 3],
}

impl<T: Float<Acc = f32>> Run<'_, T> {
    /// Runs the forward and the backward of `c` with outputs of `o_len` elements (`o`) and
    /// `g_len` (each gradient's buffer), each gradient written at offset `g_off[i]` of its own
    /// buffer, every output starting as NaN.
    fn run(&self, c: &Strided, o_len: usize, g_len: [usize; 3], g_off: [usize; 3]) -> Outputs<T> {
        let (b, h, t_q, t_k, d) = (c.batch, c.heads, c.t_q, c.t_k, c.d);
        let scale = 1.0 / (d as f64).sqrt();
        let nan = |n: usize| vec![T::from_f64(f64::NAN); n];
        let lens = c.key_len.clone().unwrap_or_default();
        let (causal, padded) = (u32::from(c.causal), u32::from(c.key_len.is_some()));
        let [qs, ks, os] = self.strides;
        let mut o = nan(o_len);
        let mut lse = vec![f32::NAN; b * h * t_q];
        flash_attn_fwd(
            flash_attn_launch(b, h, t_q),
            self.q,
            self.k,
            self.v,
            &mut o,
            &mut lse,
            &lens,
            qs,
            ks,
            os,
            b,
            h,
            t_q,
            t_k,
            d,
            scale,
            causal,
            padded,
        )
        .unwrap();
        let mut delta = vec![f32::NAN; b * h * t_q];
        let launch = flash_attn_bwd_rowdot_launch(b, h, t_q);
        flash_attn_bwd_rowdot(launch, &o, self.dout, &mut delta, os, b, h, t_q, d).unwrap();
        let mut grads = g_len.map(nan);
        let [dq, dk, dv] = &mut grads;
        flash_attn_bwd_dkdv(
            flash_attn_bwd_dkdv_launch(b, h, t_k),
            self.q,
            self.k,
            self.v,
            self.dout,
            &lse,
            &delta,
            &mut dk[g_off[1]..],
            &mut dv[g_off[2]..],
            &lens,
            qs,
            ks,
            os,
            b,
            h,
            t_q,
            t_k,
            d,
            scale,
            causal,
            padded,
        )
        .unwrap();
        let rows = flash_attn_bwd_dq_rows(d, t_k);
        flash_attn_bwd_dq(
            flash_attn_bwd_dq_launch(b, h, t_q, rows),
            self.q,
            self.k,
            self.v,
            self.dout,
            &lse,
            &delta,
            &mut dq[g_off[0]..],
            &lens,
            qs,
            ks,
            os,
            b,
            h,
            t_q,
            t_k,
            d,
            scale,
            causal,
            padded,
            rows,
        )
        .unwrap();
        Outputs {
            o,
            lse,
            delta,
            grads,
        }
    }
}

/// Asserts `got` and `want` hold the same bits (as f64s, which f16 and bf16 widen to exactly).
fn same<T: Float>(what: &str, got: &[T], want: &[T]) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let (g, w) = (g.to_f64(), w.to_f64());
        assert!(
            g.to_bits() == w.to_bits(),
            "{what}[{i}] is {g} through the strides, {w} dense"
        );
    }
}

/// Asserts that each element of a buffer the `parts` share was written by exactly one of them
/// (the others left NaN there).
fn tiled<T: Float>(what: &str, parts: &[&Vec<T>]) {
    for i in 0..parts[0].len() {
        let written = parts.iter().filter(|p| !p[i].to_f64().is_nan()).count();
        assert_eq!(
            written, 1,
            "{what}: element {i} written by {written} outputs"
        );
    }
}

/// Runs `c` in `T` through its strided places and through dense copies, and compares.
fn check<T: Float<Acc = f32>>(c: &Strided, seed: u64) {
    let what = format!("{:?} {c:?}", T::DTYPE);
    let p = c.places();
    let (b, h, t_q, t_k, d) = (c.batch, c.heads, c.t_q, c.t_k, c.d);
    let (xq, _) = input::<T>(p.q_len, seed, 2.0);
    let xkv = if c.packed {
        xq.clone()
    } else {
        input::<T>(p.kv_len, seed + 1, 2.0).0
    };
    let o_len = b * t_q * h * d;
    let (dout, _) = input::<T>(o_len, seed + 2, 1.0);
    let strided = Run {
        q: &xq[p.off[0]..],
        k: &xkv[p.off[1]..],
        v: &xkv[p.off[2]..],
        dout: &dout,
        strides: [p.qs, p.ks, p.os].map(flash_attn_strides),
    };
    let got = strided.run(c, o_len, [p.q_len, p.kv_len, p.kv_len], p.off);

    let (qd, kd) = (
        gather(&xq, p.off[0], p.qs, c, t_q),
        gather(&xkv, p.off[1], p.ks, c, t_k),
    );
    let vd = gather(&xkv, p.off[2], p.ks, c, t_k);
    let dd = gather(&dout, 0, p.os, c, t_q);
    let (sq, sk) = (
        flash_attn_dense_strides(h, t_q, d),
        flash_attn_dense_strides(h, t_k, d),
    );
    let dense = Run {
        q: &qd,
        k: &kd,
        v: &vd,
        dout: &dd,
        strides: [sq, sk, sq],
    };
    let (nq, nk) = (b * h * t_q * d, b * h * t_k * d);
    let want = dense.run(c, nq, [nq, nk, nk], [0; 3]);

    tiled(&format!("{what}: o"), &[&got.o]);
    same(
        &format!("{what}: o"),
        &gather(&got.o, 0, p.os, c, t_q),
        &want.o,
    );
    same(&format!("{what}: lse"), &got.lse, &want.lse);
    same(&format!("{what}: delta"), &got.delta, &want.delta);
    let [gq, gk, gv] = &got.grads;
    if c.packed {
        tiled(&format!("{what}: dq, dk, dv"), &[gq, gk, gv]);
    } else {
        tiled(&format!("{what}: dq"), &[gq]);
        tiled(&format!("{what}: dk, dv"), &[gk, gv]);
    }
    let ts = [t_q, t_k, t_k];
    let gs = [p.qs, p.ks, p.ks];
    for (i, name) in ["dq", "dk", "dv"].iter().enumerate() {
        let g = gather(&got.grads[i], p.off[i], gs[i], c, ts[i]);
        same(&format!("{what}: {name}"), &g, &want.grads[i]);
    }
}

/// A problem over a fused projection (`t` queries and keys).
fn packed(batch: usize, heads: usize, t: usize, d: usize, causal: bool) -> Strided {
    Strided {
        batch,
        heads,
        t_q: t,
        t_k: t,
        d,
        causal,
        key_len: None,
        packed: true,
    }
}

/// A problem with q and the keys and values in separate buffers.
fn cross(batch: usize, heads: usize, t_q: usize, t_k: usize, d: usize, causal: bool) -> Strided {
    Strided {
        t_q,
        t_k,
        packed: false,
        ..packed(batch, heads, t_q, d, causal)
    }
}

#[test]
fn strided_self_attention_is_the_dense_attention_bit_for_bit() {
    // Partial query blocks and key tiles; several heads and batch elements; both head dims
    // the kernels are built for and one between.
    check::<bf16>(&packed(2, 2, 70, 64, true), 1000);
    check::<f16>(&packed(1, 2, 130, 128, false), 1010);
    check::<bf16>(&packed(3, 2, 17, 80, true), 1020);
    check::<f16>(&packed(1, 1, 1, 64, true), 1030);
}

#[test]
fn strided_cross_attention_is_the_dense_attention_bit_for_bit() {
    // Fewer queries than keys, more queries than keys (a causal query block with no key).
    check::<f16>(&cross(2, 2, 17, 100, 64, true), 1100);
    check::<bf16>(&cross(1, 3, 100, 33, 128, false), 1110);
    check::<bf16>(&cross(2, 1, 100, 17, 64, true), 1120);
}

#[test]
fn strided_key_padding_is_the_dense_attention_bit_for_bit() {
    // Per-row lengths indexed by batch element and head: a partial tile, none, past t_k.
    let c = Strided {
        key_len: Some(vec![65, 40, 0, 70]),
        ..packed(2, 2, 65, 64, true)
    };
    check::<bf16>(&c, 1200);
    let c = Strided {
        key_len: Some(vec![33, 10, 1]),
        ..cross(1, 3, 40, 33, 80, false)
    };
    check::<f16>(&c, 1210);
}
