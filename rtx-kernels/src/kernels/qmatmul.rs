//! Products of activations with ggml-quantized weights (`Q8_0`, `Q4_1`) on a GPU that never
//! dequantize the weight into memory: [`qmatmul_ggml()`] decodes each weight block in
//! registers as it multiplies it, with the formulas of
//! [`dequantize_ggml()`](super::dequantize_ggml()), so a product equals the dequantized
//! weight's up to the order of the f32 sums.
//!
//! Invariant: a warp computes whole outputs and reduces them with a butterfly, so no output
//! depends on another warp, and the order of each sum is fixed by the launch shape alone.

use super::{ggml_f16, ggml_i8, silu, warp_sum_xor};
use crate::Float;
use rtx_macros::kernel;

/// Threads per block of [`qmatmul_ggml()`]: 4 warps, one weight row each.
pub const QMATMUL_THREADS: u32 = 128;
/// Rows of activations each warp of [`qmatmul_ggml()`] multiplies by its weight row: the weight
/// block decoded once serves all of them (a decoding step has 1, a prefill many).
pub const QMATMUL_ROWS: usize = 8;
/// `out[r * n + c] = Σ_j x[r * k + j] · W[c, j]` for the quantized weight `W` `[n, k]` in `w`
/// (ggml blocks of 32 values as little-endian words, GGUF type `kind`: 8 for `Q8_0`, 3 for
/// `Q4_1`, no other) and activations `x` `[m, k]`, `k` a multiple of 32: a Linear's `x · Wᵀ`;
/// with `add` 1, plus `res[r * n + c]` (a residual `[m, n]`; `res` is not read otherwise). The
/// rows are taken as `input` says, as [`qmatvec_ggml()`] takes them: as they are
/// ([`QINPUT_ROWS`]) or RMS-normed with the weight `g` and `eps` ([`QINPUT_RMS_NORM`]); with
/// `glu` 1 the weight is `[2 n, k]`, gate rows then up rows, and output `c` is
/// `silu(x · gate_c) * (x · up_c)` (SwiGLU, [`swiglu_rows()`](super::swiglu_rows())'s formula
/// on the two sums), so a batched decoding step's norm and SwiGLU are not launches of their
/// own. Launch exactly [`QMATMUL_THREADS`] threads per block (the staging's steps assume it)
/// on a grid of `ceil(n / 4) x ceil(m / 8)` blocks.
///
/// Warp `w` of block `(bx, by)` takes weight row `c = 4 bx + w` and activation rows
/// `8 by ..`; each step the warp takes 8 blocks of 32 values, lane `l` decoding the 8 values
/// `8 (l % 4) ..` of block `l / 4` and multiplying them with the same 8 of each activation
/// row, and the lanes' sums meet at the end. The step's 256 values of each activation row
/// are first staged in shared memory by the whole block (loads of 128 contiguous bytes a
/// warp), one padding slot after each 32, so the lanes' reads, 8 values apart, fall in
/// distinct banks: read from global memory, those reads bound the vocabulary's product by
/// the L1 cache's throughput (an H100: 80% busy, DRAM 14%). The staging applies the norm's
/// weight while each thread sums the squares of the values it stages; the block adds those
/// up per row (in a fixed order) and scales the finished sums. With `glu` a warp decodes its
/// gate row's and up row's blocks together, so SwiGLU is computed once per output (taking
/// SwiGLU of the input instead, every block recomputed it for its rows: a batch of 32 decoded
/// 42% slower on an H100). An entry for each `input` and `glu`, so the plain product keeps
/// the registers of a kernel without the others' (the vocabulary's product runs many blocks).
///
/// ```
/// use rtx_kernels::{kernels::{qmatmul_ggml, QINPUT_ROWS}, kernel::LaunchConfig};
/// // One Q8_0 block of scale 0.5 (f16 0x3800) and values 0, 1, ..., 31, as words.
/// let mut bytes = vec![0x00, 0x38];
/// bytes.extend(0..32u8);
/// bytes.resize(36, 0);
/// let w: Vec<i32> = bytes.chunks(4).map(|c| i32::from_le_bytes(c.try_into().unwrap())).collect();
/// let x = vec![1.0f32; 32];
/// let mut out = vec![0.0f32; 1];
/// let launch = LaunchConfig::new((1, 1), 128);
/// qmatmul_ggml(launch, &w, &x, &[], &mut out, 1, 1, 32, 8, 0, &[], QINPUT_ROWS, 0.0, 0).unwrap();
/// assert_eq!(out[0], 0.5 * (0..32).sum::<i32>() as f32);
/// ```
#[kernel(crate = crate, specialize(input = 0, 1), specialize(glu = 0, 1))]
#[allow(clippy::too_many_arguments)]
pub fn qmatmul_ggml<T: Float>(
    w: &[i32],
    x: &[T],
    res: &[T],
    out: &mut [T],
    m: usize,
    n: usize,
    k: usize,
    kind: u32,
    add: u32,
    g: &[T],
    input: u32,
    eps: T,
    glu: u32,
) {
    #[shared]
    let xs: [T; 2112];
    #[shared]
    let red: [T; 32];
    let lane = lane_id();
    let tid = thread_idx_x();
    let nt = block_dim_x();
    let col = block_idx_x() * (nt / 32) + tid / 32;
    // A warp past the last weight row still stages activations: every thread reaches every
    // barrier.
    let active = col < n;
    let r0 = block_idx_y() * 8;
    let rows = (m - r0).min(8);
    let blocks = k / 32;
    let bytes = if kind == 8 { 34 } else { 20 };
    let quarter = lane % 4;
    let mut acc = [0.0; 8];
    let mut acc_up = [0.0; 8];
    let mut squares = [0.0; 8];
    let mut v = [0.0; 8];
    let mut vu = [0.0; 8];
    let mut b0 = 0;
    while b0 < blocks {
        let width = (blocks - b0).min(8) * 32;
        // Values `32 b0 ..` of each row (fewer at a row's end), value `t` of row `r` at
        // `264 r + t + t / 32`: value `i = tid + 128 q` of the step is row `q / 2`'s value
        // `i % 256`, unrolled, so each thread's loads are in flight together (a loop issued
        // them one at a time, and the products of 32 rows waited on it: an H100 took 47 µs
        // for the down projection's product where this takes 26). Up to 4 rows take
        // `qmatvec_ggml` instead, so the rows past a short tile's last cost little.
        for q in 0..16 {
            let t = (tid + 128 * q) % 256;
            if q / 2 < rows && t < width {
                let j = b0 * 32 + t;
                let mut xv = x[(r0 + q / 2) * k + j];
                if input == 1 {
                    squares[q / 2] += xv * xv;
                    xv *= g[j];
                }
                xs[(q / 2) * 264 + t + t / 32] = xv;
            }
        }
        sync_threads();
        let b = b0 + lane / 4;
        if active && b < blocks {
            let base = (col * blocks + b) * bytes;
            let mut q = [0.0; 8];
            let d = ggml_octet(w, base, quarter, kind, &mut q);
            let mn = ggml_min(w[base / 4] as u32, kind);
            for e in 0..8 {
                v[e] = d * q[e] + mn;
            }
            if glu == 1 {
                // The same block of the up row, `n` rows on.
                let up = ((n + col) * blocks + b) * bytes;
                let du = ggml_octet(w, up, quarter, kind, &mut q);
                let mu = ggml_min(w[up / 4] as u32, kind);
                for e in 0..8 {
                    vu[e] = du * q[e] + mu;
                }
            }
            // The lane's values are `t0 ..= t0 + 7` of the step, `t0 = 8 lane`.
            let at = 8 * lane + lane / 4;
            for r in 0..8 {
                if r < rows {
                    for e in 0..8 {
                        let xv = xs[r * 264 + at + e];
                        acc[r] += v[e] * xv;
                        if glu == 1 {
                            acc_up[r] += vu[e] * xv;
                        }
                    }
                }
            }
        }
        // The next step restages `xs`.
        sync_threads();
        b0 += 8;
    }
    // The norm's scale of each row: every warp's squares, added in warp order.
    let mut scale = [1.0; 8];
    if input == 1 {
        for r in 0..8 {
            let s = warp_sum_xor(squares[r]);
            if lane == 0 {
                red[(tid / 32) * 8 + r] = s;
            }
        }
        sync_threads();
        for r in 0..8 {
            let mut total = 0.0;
            for wi in 0..4 {
                total += red[wi * 8 + r];
            }
            scale[r] = 1.0 / (total / (k as T) + eps).sqrt();
        }
    }
    if active {
        for r in 0..8 {
            let mut s = warp_sum_xor(acc[r]);
            if input == 1 {
                s *= scale[r];
            }
            if glu == 1 {
                let mut u = warp_sum_xor(acc_up[r]);
                if input == 1 {
                    u *= scale[r];
                }
                s = silu(s) * u;
            }
            if lane == 0 && r < rows {
                let at = (r0 + r) * n + col;
                if add == 1 {
                    out[at] = s + res[at];
                } else {
                    out[at] = s;
                }
            }
        }
    }
}

/// The scale of the ggml block at byte `base` of `w` (GGUF type `kind`: 8 for `Q8_0`, else
/// `Q4_1`), and in `q` the integers of its values `8 sub ..= 8 sub + 7` (`sub` in `0..4`):
/// `Q8_0`'s -128..=127, `Q4_1`'s 0..=15. A value is `scale · q + minimum` ([`ggml_min()`]).
/// [`ggml_octet_load()`] then [`ggml_octet_decode()`]; every quantized product kernel decodes
/// its blocks with these.
#[kernel(device, crate = crate)]
pub fn ggml_octet<T: Float>(w: &[i32], base: usize, sub: usize, kind: u32, q: &mut [T; 8]) -> T {
    let mut words = [0u32; 16];
    ggml_octet_load(w, base, sub, kind, &mut words, 0);
    ggml_octet_decode(&words, 0, base, sub, kind, &mut q)
}

/// The words [`ggml_octet_decode()`] reads for values `8 sub ..` of the block at byte `base`,
/// into `words[at..at + 4]`: the block's first word (its scale, and `Q4_1`'s minimum), then the
/// two or three words holding the 8 values' bytes. Loads only, and no branch between them, so a
/// caller that loads several blocks before decoding any has all their loads in flight at once.
#[kernel(device, crate = crate)]
pub fn ggml_octet_load<T: Float>(
    w: &[i32],
    base: usize,
    sub: usize,
    kind: u32,
    words: &mut [u32; 16],
    at: usize,
) {
    words[at] = w[base / 4] as u32;
    if kind == 8 {
        // Values `8 sub ..` are the bytes from `o`, an even offset: two words, or three when
        // `o` falls mid-word (the third still inside the buffer, which holds the block's last
        // bytes in it).
        let o = base + 2 + sub * 8;
        words[at + 1] = w[o / 4] as u32;
        words[at + 2] = w[o / 4 + 1] as u32;
        words[at + 3] = 0;
        if o % 4 != 0 {
            words[at + 3] = w[o / 4 + 2] as u32;
        }
    } else {
        // Q4_1's blocks are whole words: the scale and minimum, then 16 bytes whose low halves
        // are values 0..16 and high halves 16..32.
        let o = base / 4 + 1 + (sub % 2) * 2;
        words[at + 1] = w[o] as u32;
        words[at + 2] = w[o + 1] as u32;
    }
}

/// The scale, and the integers `q`, of values `8 sub ..` of the block at byte `base` from the
/// words [`ggml_octet_load()`] put at `words[at..]`: the formulas of `ggml_q8_0` and
/// `ggml_q4_q5`, with the decoding a lane's 8 values share (the scale, the words) done once.
#[kernel(device, crate = crate)]
pub fn ggml_octet_decode<T: Float>(
    words: &[u32; 16],
    at: usize,
    base: usize,
    sub: usize,
    kind: u32,
    q: &mut [T; 8],
) -> T {
    let head = words[at];
    let mut d = 0.0;
    if kind == 8 {
        d = ggml_f16((head >> ((base % 4) * 8)) & 65535);
        let mut lo = words[at + 1];
        let mut hi = words[at + 2];
        if (base + 2 + sub * 8) % 4 != 0 {
            lo = (words[at + 1] >> 16) | (words[at + 2] << 16);
            hi = (words[at + 2] >> 16) | (words[at + 3] << 16);
        }
        for e in 0..4 {
            let a: i32 = ggml_i8((lo >> (8 * e)) & 255);
            let c: i32 = ggml_i8((hi >> (8 * e)) & 255);
            q[e] = a as T;
            q[e + 4] = c as T;
        }
    } else {
        d = ggml_f16(head & 65535);
        let lo = words[at + 1];
        let hi = words[at + 2];
        let shift = (sub / 2) * 4;
        for e in 0..4 {
            q[e] = ((lo >> (8 * e + shift)) & 15) as T;
            q[e + 4] = ((hi >> (8 * e + shift)) & 15) as T;
        }
    }
    d
}

/// The minimum of the ggml block whose first word is `head`: `Q4_1`'s, 0 for `Q8_0` (`kind`
/// 8), beside [`ggml_octet()`]'s scale.
#[kernel(device, crate = crate)]
pub fn ggml_min<T: Float>(head: u32, kind: u32) -> T {
    let mut mn = 0.0;
    if kind != 8 {
        mn = ggml_f16(head >> 16);
    }
    mn
}

/// Rows of activations [`qmatvec_ggml()`] takes at most: the few of a decoding step.
pub const QMATVEC_ROWS: usize = 4;

/// Rows [`qmatvec_ggml()`] multiplies as they are (its `input` 0).
pub const QINPUT_ROWS: u32 = 0;
/// Rows [`qmatvec_ggml()`] RMS-norms first (its `input` 1).
pub const QINPUT_RMS_NORM: u32 = 1;

/// `out = x · Wᵀ` as [`qmatmul_ggml()`] computes it (bit for bit with `input` 0 and `add` 0)
/// for at most [`QMATVEC_ROWS`] rows of activations (decoding a few sequences), with a
/// decoding block's neighbours joined to it. `input` says what the rows are:
/// - [`QINPUT_ROWS`]: `x` `[m, k]` as it is;
/// - [`QINPUT_RMS_NORM`]: `x` `[m, k]` RMS-normed with the weight `g` (`[k]`) and `eps`,
///   `x / sqrt(mean(x²) + eps) * g` (a warp sees its whole row, so it sums the squares as it
///   multiplies and scales its finished sums).
///
/// With `glu` 1 the weight is `[2 n, k]`, a gated feed-forward's gate rows then its up rows,
/// and output `c` is SwiGLU of the two products, `silu(x · gate_c) * (x · up_c)`
/// ([`swiglu_rows()`](super::swiglu_rows())'s formula on the sums `glu` 0 gives for rows `c`
/// and `n + c`): the warp decodes both rows' blocks together. With `add` 1 the residual `res`
/// (`[m, n]`) is added to the output. A warp per output, any multiple of 32 threads a block on
/// a grid of `ceil(n / (threads / 32))` blocks.
///
/// A decoding step's products are bound by latency, not bandwidth (an H200 reads all of
/// SmolLM2-135M's weights in about 30 µs a step). So this kernel has no shared memory and no
/// barrier: each lane decodes 8 values of a block, as `qmatmul_ggml`'s lanes do, four steps
/// of 8 blocks unrolled, reading the activations from global memory (the L1 cache serves a
/// block's warps). Past a row's last block a lane decodes the last block again and adds
/// nothing, so no load waits on a branch and the compiler issues the four steps' loads
/// together: a product waits on memory about once per 1024 values of K, where `qmatmul_ggml`
/// waits on its staging's barriers twice per 256. One row has an entry of its own for each
/// type, `input` and `glu` (those constant, so the branches on them fold away). SwiGLU joined
/// to the down product's input instead cost every warp the `silu` of a whole row (the down
/// product took 10.5 µs of a decoding block on an H100, the `o` product 4.5).
#[kernel(
    crate = crate,
    specialize(m = 1),
    specialize(kind = 8, 3),
    specialize(input = 0, 1),
    specialize(glu = 0, 1)
)]
#[allow(clippy::too_many_arguments)]
pub fn qmatvec_ggml<T: Float>(
    w: &[i32],
    x: &[T],
    res: &[T],
    out: &mut [T],
    m: usize,
    n: usize,
    k: usize,
    kind: u32,
    add: u32,
    g: &[T],
    input: u32,
    eps: T,
    glu: u32,
) {
    let col = block_idx_x() * (block_dim_x() / 32) + thread_idx_x() / 32;
    // The whole warp shares `col`, so a warp past the last row leaves whole (there is no
    // barrier to reach).
    if col < n {
        qmatvec_out(w, x, res, out, m, n, k, kind, add, g, input, eps, glu, col);
    }
}

/// [`qmatvec_ggml()`]'s output `col` (`col < n`) for each of the `m` rows, computed by the
/// calling warp: the sums of [`qmatvec_lanes()`], then the norm's scale, SwiGLU and the
/// residual as that kernel applies them, written by lane 0. Every lane of the warp must call
/// it with the same arguments; a kernel that takes several products in one launch (a Llama
/// decoding block) calls it a warp per output.
#[kernel(device, crate = crate)]
#[allow(clippy::too_many_arguments)]
pub fn qmatvec_out<T: Float>(
    w: &[i32],
    x: &[T],
    res: &[T],
    out: &mut [T],
    m: usize,
    n: usize,
    k: usize,
    kind: u32,
    add: u32,
    g: &[T],
    input: u32,
    eps: T,
    glu: u32,
    col: usize,
) {
    let lane = lane_id();
    let mut acc = [0.0; 4];
    let mut acc_up = [0.0; 4];
    let mut squares = [0.0; 4];
    // With `glu`, the up row `n` rows on.
    qmatvec_lanes(
        w,
        x,
        g,
        m,
        k,
        kind,
        input,
        col,
        glu,
        n + col,
        &mut acc,
        &mut acc_up,
        &mut squares,
    );
    for r in 0..4 {
        if r < m {
            let mut sum = warp_sum_xor(acc[r]);
            let mut scale = 1.0;
            if input == 1 {
                let total = warp_sum_xor(squares[r]);
                scale = 1.0 / (total / (k as T) + eps).sqrt();
                sum *= scale;
            }
            if glu == 1 {
                let mut up = warp_sum_xor(acc_up[r]);
                if input == 1 {
                    up *= scale;
                }
                sum = silu(sum) * up;
            }
            if add == 1 {
                sum += res[r * n + col];
            }
            if lane == 0 {
                out[r * n + col] = sum;
            }
        }
    }
}

/// A warp's share of [`qmatvec_ggml()`]'s products for weight row `col`, before its lanes
/// meet: for each of the `m` rows (at most 4) of `x` (`[m, k]`), lane `l`'s partial sum of the
/// row times row `col` of the weight in `acc[r]` (times the norm's weight `g` with `input` 1,
/// whose squares of the row's values go to `squares[r]`: the caller scales by them), and with
/// `pair` 1 the same for weight row `other` in `acc_other[r]`, the two rows' blocks decoded
/// together. Adding each array's lanes with [`warp_sum_xor()`] gives `qmatvec_ggml`'s sums;
/// kernels that finish the sums their own way (a rotary turn of each pair) call this.
/// Every lane of the warp must call it with the same arguments.
#[kernel(device, crate = crate)]
#[allow(clippy::too_many_arguments)]
pub fn qmatvec_lanes<T: Float>(
    w: &[i32],
    x: &[T],
    g: &[T],
    m: usize,
    k: usize,
    kind: u32,
    input: u32,
    col: usize,
    pair: u32,
    other: usize,
    acc: &mut [T; 4],
    acc_other: &mut [T; 4],
    squares: &mut [T; 4],
) {
    let lane = lane_id();
    let blocks = k / 32;
    let bytes = if kind == 8 { 34 } else { 20 };
    let quarter = lane % 4;
    let mut words = [0u32; 16];
    let mut words_up = [0u32; 16];
    let mut xs = [0.0; 32];
    let mut gs = [0.0; 32];
    let mut q = [0.0; 8];
    let mut qu = [0.0; 8];
    let mut b0 = 0;
    while b0 < blocks {
        // The loads of four steps first: each lane's block `b0 + 8 s + lane / 4` (past
        // the row's last block, the last again, so no load waits on a branch), and for
        // one row its 8 activations (and their norm weights).
        for s in 0..4 {
            let bb = (b0 + 8 * s + lane / 4).min(blocks - 1);
            let base = (col * blocks + bb) * bytes;
            ggml_octet_load(w, base, quarter, kind, &mut words, 4 * s);
            if pair == 1 {
                let up = (other * blocks + bb) * bytes;
                ggml_octet_load(w, up, quarter, kind, &mut words_up, 4 * s);
            }
            if m == 1 {
                for e in 0..8 {
                    let j = bb * 32 + quarter * 8 + e;
                    xs[8 * s + e] = x[j];
                    if input == 1 {
                        gs[8 * s + e] = g[j];
                    }
                }
            }
        }
        for s in 0..4 {
            let b = b0 + 8 * s + lane / 4;
            let bb = b.min(blocks - 1);
            let base = (col * blocks + bb) * bytes;
            let d = ggml_octet_decode(&words, 4 * s, base, quarter, kind, &mut q);
            let mn = ggml_min(words[4 * s], kind);
            let mut du = 0.0;
            let mut mu = 0.0;
            if pair == 1 {
                let up = (other * blocks + bb) * bytes;
                du = ggml_octet_decode(&words_up, 4 * s, up, quarter, kind, &mut qu);
                mu = ggml_min(words_up[4 * s], kind);
            }
            // Blocks past the row's end add nothing.
            if b < blocks {
                for r in 0..4 {
                    if r < m {
                        for e in 0..8 {
                            let j = bb * 32 + quarter * 8 + e;
                            let mut xv = 0.0;
                            let mut gv = 0.0;
                            if m == 1 {
                                xv = xs[8 * s + e];
                                gv = gs[8 * s + e];
                            } else {
                                xv = x[r * k + j];
                                if input == 1 {
                                    gv = g[j];
                                }
                            }
                            if input == 1 {
                                squares[r] += xv * xv;
                                xv *= gv;
                            }
                            acc[r] += (d * q[e] + mn) * xv;
                            if pair == 1 {
                                acc_other[r] += (du * qu[e] + mu) * xv;
                            }
                        }
                    }
                }
            }
        }
        b0 += 32;
    }
}

/// Weight rows each warp of [`qmatvec_ggml_wide()`] multiplies by the one activation row.
pub const QMATVEC_WIDE_ROWS: usize = 4;

/// `out = x · Wᵀ` for one activation row `x` (`[k]`) and a weight `W` `[n, k]` of many short
/// rows (a vocabulary's head), with [`qmatvec_ggml()`]'s arguments less `m` and `glu`, and
/// its outputs bit for bit: `input` takes the row as it is or RMS-normed with `g` and `eps`,
/// `add` adds `res` (`[n]`). Warp `w` takes weight rows `4 w .. 4 w + 3`
/// ([`QMATVEC_WIDE_ROWS`]) on a grid of `ceil(n / (4 · threads / 32))` blocks of any multiple
/// of 32 threads.
///
/// Why a kernel of its own: every row of the head multiplies the same activations, and
/// `qmatvec_ggml`'s warp per row loaded them (and the norm's weight) again for each: 64
/// scattered loads a lane for a 612-byte row kept SmolLM2's head (49152 rows of 576) bound by
/// the L1 cache's throughput (82% busy on an H100, 81.7 µs, DRAM 1%). Here a lane loads its
/// 8 activations of a step once for the warp's four rows, normed once, and their four rows'
/// weight words together, two steps of 8 blocks at a time; a step past the row's end is
/// skipped by the whole warp (a short row, 18 blocks, has 3 live steps of 8, where
/// `qmatvec_ggml`'s 4-step chunk decodes 4). Each row's sums are added in `qmatvec_ggml`'s
/// order, so the outputs agree to the bit. The head took 36.9 µs a launch so (an H100), and
/// SmolLM2's decoding step 0.815 → 0.770 ms.
#[kernel(crate = crate, specialize(kind = 8, 3), specialize(input = 0, 1))]
#[allow(clippy::too_many_arguments)]
pub fn qmatvec_ggml_wide<T: Float>(
    w: &[i32],
    x: &[T],
    res: &[T],
    out: &mut [T],
    n: usize,
    k: usize,
    kind: u32,
    add: u32,
    g: &[T],
    input: u32,
    eps: T,
) {
    let lane = lane_id();
    let first = (block_idx_x() * (block_dim_x() / 32) + thread_idx_x() / 32) * 4;
    // The whole warp shares `first`, so a warp past the last row leaves whole.
    if first < n {
        let blocks = k / 32;
        let bytes = if kind == 8 { 34 } else { 20 };
        let quarter = lane % 4;
        let mut acc = [0.0; 4];
        let mut squares = 0.0;
        // The weight words of the two steps: 4 a row, rows in order.
        let mut words0 = [0u32; 16];
        let mut words1 = [0u32; 16];
        let mut xs = [0.0; 16];
        let mut gs = [0.0; 16];
        let mut q = [0.0; 8];
        let mut b0 = 0;
        while b0 < blocks {
            // The loads of both steps first (a row past `n` reads the last row again and
            // writes nothing; a block past the row's end, the last block again).
            for s in 0..2 {
                if b0 + 8 * s < blocks {
                    let bb = (b0 + 8 * s + lane / 4).min(blocks - 1);
                    for c in 0..4 {
                        let base = ((first + c).min(n - 1) * blocks + bb) * bytes;
                        if s == 0 {
                            ggml_octet_load(w, base, quarter, kind, &mut words0, 4 * c);
                        } else {
                            ggml_octet_load(w, base, quarter, kind, &mut words1, 4 * c);
                        }
                    }
                    for e in 0..8 {
                        let j = bb * 32 + quarter * 8 + e;
                        xs[8 * s + e] = x[j];
                        if input == 1 {
                            gs[8 * s + e] = g[j];
                        }
                    }
                }
            }
            for s in 0..2 {
                if b0 + 8 * s < blocks {
                    let b = b0 + 8 * s + lane / 4;
                    let bb = b.min(blocks - 1);
                    // The lane's 8 activations, normed as `qmatvec_ggml` norms them.
                    let mut xv = [0.0; 8];
                    for e in 0..8 {
                        xv[e] = xs[8 * s + e];
                        if input == 1 && b < blocks {
                            squares += xv[e] * xv[e];
                        }
                        if input == 1 {
                            xv[e] *= gs[8 * s + e];
                        }
                    }
                    for c in 0..4 {
                        let base = ((first + c).min(n - 1) * blocks + bb) * bytes;
                        let mut d = 0.0;
                        let mut mn = 0.0;
                        if s == 0 {
                            d = ggml_octet_decode(&words0, 4 * c, base, quarter, kind, &mut q);
                            mn = ggml_min(words0[4 * c], kind);
                        } else {
                            d = ggml_octet_decode(&words1, 4 * c, base, quarter, kind, &mut q);
                            mn = ggml_min(words1[4 * c], kind);
                        }
                        // Blocks past the row's end add nothing.
                        if b < blocks {
                            for e in 0..8 {
                                acc[c] += (d * q[e] + mn) * xv[e];
                            }
                        }
                    }
                }
            }
            b0 += 16;
        }
        let mut scale = 1.0;
        if input == 1 {
            let total = warp_sum_xor(squares);
            scale = 1.0 / (total / (k as T) + eps).sqrt();
        }
        for c in 0..4 {
            let mut sum = warp_sum_xor(acc[c]);
            if input == 1 {
                sum *= scale;
            }
            if add == 1 && first + c < n {
                sum += res[first + c];
            }
            if lane == 0 && first + c < n {
                out[first + c] = sum;
            }
        }
    }
}
