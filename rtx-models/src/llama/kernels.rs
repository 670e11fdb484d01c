//! The kernels of a Llama step that the tensor ops do not cover: rotary embeddings joined
//! with the key-value cache write, attention of single-token rows over the cache, SwiGLU's
//! product, and the embedding lookup of a captured step. Decoding is bound by launches (a
//! step of a small model is hundreds of short kernels), so each does in one launch what ops
//! would do in several. Each reads the rows' positions (and sequences, and token ids)
//! from device buffers rather than launch arguments, so a captured decode step replays for
//! every position: the host refills the buffers in place between replays.
//!
//! Those buffers are f32, like the activations: [`rtx::kernel::launch`] takes buffers of one
//! element type, and f32 holds every integer below 2^24 exactly (positions and token ids are
//! far below). The kernels convert with `as usize`.
//!
//! A decoding block can also run in one cooperative launch ([`decode_block`], asked for with
//! `RTX_LLAMA_ONE_LAUNCH=1`): the block's kernels as phases of one, separated by `grid_sync`.

use rtx::kernel::{Arg, LaunchConfig};
use rtx::prelude::*;
use rtx::quant::{GgmlType, QTensor};

/// Threads per block of the one-thread-per-element kernels.
const THREADS: usize = 256;

/// The rotary turn and the cache write of a step's projected rows `qkv` (`[rows, (heads +
/// 2 kv_heads) * 2 half]`: the query heads, then the key heads, then the value heads, as
/// [`crate::llama::LlamaBlock::qkv`] stacks them), in one launch. Row `r` belongs to
/// sequence `seq[r]` at position `pos[r]`. Each adjacent pair `(2i, 2i + 1)` of a query or
/// key head is turned by the angle of pair `i` at that position (`cos[pos[r] * half + i]`,
/// `sin[...]`; llama.cpp's row order, see the module docs of [`crate::llama`]): query pairs
/// and key pairs in place, key pairs also into `keys` (only the query columns of `qkv` are
/// read afterwards); value pairs are copied into `values` as they are. The
/// turn is `(a c - b s, a s + b c)` with the first product fused into each (`mul_add`), as
/// llama.cpp's compiled C computes it. The
/// caches are `[batch, kv_heads, max_len, 2 half]`. `split` threads per head of a row
/// (`threads_all = rows * (heads + 2 kv_heads) * split`), each walking `half / split` pairs:
/// on a GPU a thread per pair (a thread walking a head's 32 pairs took 11 µs of a decoding
/// step's 100 µs block on an H100), on the CPU a thread per head (the emulation runs threads
/// one by one, and a thread per pair cost a sixth of a prefill).
#[rtx::kernel]
fn rope_store_rows<T: Float>(
    qkv: &mut [T],
    keys: &mut [T],
    values: &mut [T],
    cos: &[T],
    sin: &[T],
    seq: &[T],
    pos: &[T],
    threads_all: usize,
    heads: usize,
    kv_heads: usize,
    half: usize,
    max_len: usize,
    split: usize,
) {
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    if i < threads_all {
        let row_heads = heads + 2 * kv_heads;
        let hi = i / split;
        let per = half / split;
        let first = (i % split) * per;
        let r = hi / row_heads;
        let head = hi % row_heads;
        let p = pos[r] as usize;
        let from = hi * 2 * half;
        if head < heads + kv_heads {
            // A key head is turned in place too (nothing reads it there again), then stored.
            let is_key = head >= heads;
            let to = if is_key {
                ((seq[r] as usize * kv_heads + head - heads) * max_len + p) * 2 * half
            } else {
                0
            };
            for k in first..first + per {
                let a = qkv[from + 2 * k];
                let b = qkv[from + 2 * k + 1];
                let c = cos[p * half + k];
                let s = sin[p * half + k];
                let x = a.mul_add(c, -(b * s));
                let y = a.mul_add(s, b * c);
                qkv[from + 2 * k] = x;
                qkv[from + 2 * k + 1] = y;
                if is_key {
                    keys[to + 2 * k] = x;
                    keys[to + 2 * k + 1] = y;
                }
            }
        } else {
            let vh = head - heads - kv_heads;
            let to = ((seq[r] as usize * kv_heads + vh) * max_len + p) * 2 * half;
            for k in 2 * first..2 * (first + per) {
                values[to + k] = qkv[from + k];
            }
        }
    }
}

/// The `qkv` product of a decoding step's rows with [`rope_store_rows`] as its output, in one
/// launch: for the quantized weight `w` (`[n, k]`, GGUF type `kind`, `n = (heads + 2
/// kv_heads) * 2 half`) and the `m <= 4` rows of `x` (`[m, k]`, RMS-normed with `g` and
/// `eps` with `input` 1), warp `p` takes the pair of outputs `2 p, 2 p + 1`
/// (`rtx::kernels::qmatvec_lanes` decodes both weight rows' blocks together), and writes
/// them as `rope_store_rows` would have left them after the plain product: a query or key
/// pair turned by its angle at the row's position (a key pair also into `keys`), a value pair
/// as it is (and into `values`). The same sums and the same turn, so `qkv` and the caches
/// are bit for bit those of `qmatvec_ggml` then `rope_store_rows`.
///
/// Why: the rotary turn and cache write were a launch of their own, 3 µs a block of a
/// decoding step on an H100 with almost nothing to do; here the row's position and angles are
/// loaded before the weights' blocks, so they arrive with them.
#[rtx::kernel(specialize(m = 1), specialize(kind = 8, 3), specialize(input = 0, 1))]
#[allow(clippy::too_many_arguments)]
fn qkv_rope_store_rows<T: Float>(
    w: &[i32],
    x: &[T],
    g: &[T],
    qkv: &mut [T],
    keys: &mut [T],
    values: &mut [T],
    cos: &[T],
    sin: &[T],
    seq: &[T],
    pos: &[T],
    m: usize,
    k: usize,
    kind: u32,
    input: u32,
    eps: T,
    heads: usize,
    kv_heads: usize,
    half: usize,
    max_len: usize,
) {
    let p = block_idx_x() * (block_dim_x() / 32) + thread_idx_x() / 32;
    // The whole warp shares `p`, so a warp past the last pair leaves whole.
    if 2 * p < (heads + 2 * kv_heads) * 2 * half {
        qkv_rope_pair(
            w, x, g, qkv, keys, values, cos, sin, seq, pos, m, k, kind, input, eps, heads,
            kv_heads, half, max_len, p,
        );
    }
}

/// [`qkv_rope_store_rows`]'s pair `p` (outputs `2 p, 2 p + 1`, `2 p` below the row's width),
/// computed by the calling warp; every lane must call it with the same arguments. A decoding
/// block in one launch ([`decode_block`]) calls it a warp per pair.
#[rtx::kernel(device)]
#[allow(clippy::too_many_arguments)]
fn qkv_rope_pair<T: Float>(
    w: &[i32],
    x: &[T],
    g: &[T],
    qkv: &mut [T],
    keys: &mut [T],
    values: &mut [T],
    cos: &[T],
    sin: &[T],
    seq: &[T],
    pos: &[T],
    m: usize,
    k: usize,
    kind: u32,
    input: u32,
    eps: T,
    heads: usize,
    kv_heads: usize,
    half: usize,
    max_len: usize,
    p: usize,
) {
    let lane = lane_id();
    let n = (heads + 2 * kv_heads) * 2 * half;
    let head = p / half;
    let i = p % half;
    let turned = head < heads + kv_heads;
    let mut cs = [0.0; 4];
    let mut sn = [0.0; 4];
    if turned {
        for r in 0..4 {
            if r < m {
                let at = pos[r] as usize * half + i;
                cs[r] = cos[at];
                sn[r] = sin[at];
            }
        }
    }
    let mut acc = [0.0; 4];
    let mut acc_b = [0.0; 4];
    let mut squares = [0.0; 4];
    rtx::kernels::qmatvec_lanes(
        w,
        x,
        g,
        m,
        k,
        kind,
        input,
        2 * p,
        1,
        2 * p + 1,
        &mut acc,
        &mut acc_b,
        &mut squares,
    );
    for r in 0..4 {
        if r < m {
            let mut a = rtx::kernels::warp_sum_xor(acc[r]);
            let mut b = rtx::kernels::warp_sum_xor(acc_b[r]);
            if input == 1 {
                let total = rtx::kernels::warp_sum_xor(squares[r]);
                let scale = 1.0 / (total / (k as T) + eps).sqrt();
                a *= scale;
                b *= scale;
            }
            if lane == 0 {
                let at = r * n + 2 * p;
                let slot = seq[r] as usize * kv_heads;
                let place = pos[r] as usize;
                if turned {
                    let xr = a.mul_add(cs[r], -(b * sn[r]));
                    let yr = a.mul_add(sn[r], b * cs[r]);
                    qkv[at] = xr;
                    qkv[at + 1] = yr;
                    if head >= heads {
                        let to = ((slot + head - heads) * max_len + place) * 2 * half + 2 * i;
                        keys[to] = xr;
                        keys[to + 1] = yr;
                    }
                } else {
                    qkv[at] = a;
                    qkv[at + 1] = b;
                    let vh = head - heads - kv_heads;
                    let to = ((slot + vh) * max_len + place) * 2 * half + 2 * i;
                    values[to] = a;
                    values[to + 1] = b;
                }
            }
        }
    }
}

/// Attention of single-token rows over the cache: block `r * heads + h` takes query head `h`
/// of row `r` (`q`, rows of `q_stride` elements whose first `heads * head_dim` are the query
/// heads), which belongs to sequence `seq[r]` at position `pos[r]`, and attends over that
/// sequence's cached keys and values at positions `0..=pos[r]` of key-value head `h / group`
/// (`keys` and `values`, `[batch, kv_heads, max_len, head_dim]`, this step's own key already
/// written), writing `out`, `[rows, heads * head_dim]`.
///
/// Positions go in chunks of 1024 (their scores held in shared memory), joined by rescaling with the running maximum (an
/// online softmax). In a chunk, each group of 8 lanes scores one position at a time (lane
/// `i` of the group takes dims `i, i + 8, ..`, and a butterfly joins them, so a position's
/// loads are in flight together), into shared memory; the block's maximum and sum are
/// butterflies and a fixed order over the warps, the same in every thread; then warp `w`
/// accumulates positions `w, w + warps, ..` for dims `lane + 32 i` (`i < 4`), and the warps'
/// sums meet in warp order at the end. A decoding step is bound by latency, so the query is
/// read straight into registers and each warp's first four value rows are loaded before the
/// scores: the query's, keys' and values' loads are in flight together. Every order is fixed by the launch shape, so a row's
/// result depends neither on the other rows nor on how many there are. Needs `head_dim <=
/// 128` and whole warps. Blocks of up to 1024 threads: the registers a thread may take are
/// bounded for that (64), so every launch [`attend`] makes fits a multiprocessor.
#[rtx::kernel(launch_bounds(1024, 1))]
fn cached_attention<T: Float>(
    q: &[T],
    keys: &[T],
    values: &[T],
    seq: &[T],
    pos: &[T],
    out: &mut [T],
    q_stride: usize,
    heads: usize,
    group: usize,
    kv_heads: usize,
    head_dim: usize,
    max_len: usize,
    scale: T,
) {
    #[shared]
    let sc: [T; 1024];
    #[shared]
    let part: [T; 4096];
    #[shared]
    let red: [T; 32];
    attend_head(
        q,
        keys,
        values,
        seq,
        pos,
        out,
        q_stride,
        heads,
        group,
        kv_heads,
        head_dim,
        max_len,
        scale,
        block_idx_x(),
        &mut sc,
        &mut part,
        &mut red,
    );
}

/// [`cached_attention`]'s block `b` (query head `b % heads` of row `b / heads`), computed by
/// the calling block with its shared arrays `sc`, `part` and `red`; every thread must call
/// it. A decoding block in one launch ([`decode_block`]) calls it a block per head.
#[rtx::kernel(device)]
#[allow(clippy::too_many_arguments)]
fn attend_head<T: Float>(
    q: &[T],
    keys: &[T],
    values: &[T],
    seq: &[T],
    pos: &[T],
    out: &mut [T],
    q_stride: usize,
    heads: usize,
    group: usize,
    kv_heads: usize,
    head_dim: usize,
    max_len: usize,
    scale: T,
    b: usize,
    #[shared] sc: &mut [T; 1024],
    #[shared] part: &mut [T; 4096],
    #[shared] red: &mut [T; 32],
) {
    const CHUNK: usize = 1024;
    let tid = thread_idx_x();
    let nt = block_dim_x();
    let lane = lane_id();
    let warp = tid / 32;
    let warps = nt / 32;
    let r = b / heads;
    let h = b % heads;
    let len = pos[r] as usize + 1;
    let kv = (seq[r] as usize * kv_heads + h / group) * max_len * head_dim;
    let qrow = r * q_stride + h * head_dim;
    let orow = (r * heads + h) * head_dim;
    let g = tid / 8;
    let sub = tid % 8;
    // This lane's query values, `sub + 8 t`, read straight into registers: their loads are in
    // flight with the first keys' and values' (a shared copy would cost a barrier between).
    let mut qv = [0.0; 16];
    for t in 0..16 {
        let e = sub + 8 * t;
        if e < head_dim {
            qv[t] = q[qrow + e];
        }
    }
    let groups = nt / 8;
    let mut m_run = T::NEG_INFINITY;
    let mut l_run = 0.0;
    let mut acc = [0.0; 4];
    let mut start = 0;
    while start < len {
        let n = (len - start).min(CHUNK);
        // The values of this warp's first four positions (`warp + warps p`), loaded before
        // the scores so that they arrive while the softmax is worked out.
        let mut vv = [0.0; 16];
        for p in 0..4 {
            let j = warp + warps * p;
            if j < n {
                let row = kv + (start + j) * head_dim;
                for i in 0..4 {
                    let d = lane + 32 * i;
                    if d < head_dim {
                        vv[4 * p + i] = values[row + d];
                    }
                }
            }
        }
        // Scores of this chunk, and this thread's maximum. Every lane runs every round, so
        // the butterflies see whole warps.
        let mut m_mine = T::NEG_INFINITY;
        let mut round = 0;
        while round < n {
            let j = round + g;
            let mut dot = 0.0;
            if j < n {
                let row = kv + (start + j) * head_dim;
                // A constant trip count, so the loads are unrolled and in flight together.
                for t in 0..16 {
                    let e = sub + 8 * t;
                    if e < head_dim {
                        dot += qv[t] * keys[row + e];
                    }
                }
            }
            dot += warp_shuffle_xor(dot, 4);
            dot += warp_shuffle_xor(dot, 2);
            dot += warp_shuffle_xor(dot, 1);
            if j < n {
                let s = dot * scale;
                if sub == 0 {
                    sc[j] = s;
                }
                m_mine = m_mine.max(s);
            }
            round += groups;
        }
        let m_chunk = rtx::kernels::block_max(m_mine, &mut red);
        let m_new = m_run.max(m_chunk);
        // exp(-inf) = 0 on the first chunk, when nothing is accumulated yet.
        let corr = (m_run - m_new).exp();
        let mut l_mine = 0.0;
        let mut j = tid;
        while j < n {
            let e = (sc[j] - m_new).exp();
            sc[j] = e;
            l_mine += e;
            j += nt;
        }
        l_run = l_run * corr + rtx::kernels::block_sum(l_mine, &mut red);
        // `block_sum` synchronized after the exponentials were written.
        let mut a = [0.0; 4];
        for p in 0..4 {
            let j = warp + warps * p;
            if j < n {
                for i in 0..4 {
                    a[i] += sc[j] * vv[4 * p + i];
                }
            }
        }
        let mut j = warp + warps * 4;
        while j < n {
            let p = sc[j];
            let row = kv + (start + j) * head_dim;
            for i in 0..4 {
                let d = lane + 32 * i;
                if d < head_dim {
                    a[i] += p * values[row + d];
                }
            }
            j += warps;
        }
        for i in 0..4 {
            acc[i] = acc[i] * corr + a[i];
        }
        m_run = m_new;
        // The next chunk overwrites `sc` and `red`.
        sync_threads();
        start += CHUNK;
    }
    for i in 0..4 {
        let d = lane + 32 * i;
        if d < head_dim {
            part[warp * head_dim + d] = acc[i];
        }
    }
    sync_threads();
    let mut d = tid;
    while d < head_dim {
        let mut total = 0.0;
        for w in 0..warps {
            total += part[w * head_dim + d];
        }
        out[orow + d] = total / l_run;
        d += nt;
    }
}

/// A decoding block for `m <= 4` single-token rows in one cooperative launch: the five
/// launches of the block's decoding path ([`qkv_rope_store_rows`], [`cached_attention`], and
/// `rtx::kernels::qmatvec_ggml` for the `o`, gate-and-up and down products) as five phases
/// separated by `grid_sync`, each phase's outputs spread over the grid's warps (a warp per pair
/// or output) or blocks (a block per head), as the kernels it replaces spread them over
/// theirs, with the same device functions, so every value is bit for bit theirs. `x` is the
/// residual stream `[m, d]`; the weights are `[(heads + 2 kv_heads) 2 half, d]`, `[d, heads
/// 2 half]`, `[2 ff, d]` (gate rows, then up rows) and `[d, ff]`, all of GGUF type `kind`;
/// `qkv`, `attn` (`[m, heads 2 half]`), `mid` (`[m, d]`, the stream after attention) and
/// `hidden` (`[m, ff]`) are the phases' outputs, `out` (`[m, d]`) the stream after the block.
///
/// Why: a decoding step at batch 1 is bound by latency, about 5 µs a launch for little work
/// (150 launches a step for SmolLM2), and a grid barrier costs 1.2 µs on an H100. Measured,
/// though, the phases took as long as the kernels they replace (34 µs a block, 23.5 for the
/// five launches in a captured step), so it is not the default; its use would be phases that
/// load their weights before the barrier they wait at.
#[rtx::kernel(specialize(m = 1), specialize(kind = 8, 3), launch_bounds(512, 1))]
#[allow(clippy::too_many_arguments)]
fn decode_block<T: Float>(
    w_qkv: &[i32],
    w_o: &[i32],
    w_gate_up: &[i32],
    w_down: &[i32],
    attn_norm: &[T],
    ffn_norm: &[T],
    x: &[T],
    qkv: &mut [T],
    keys: &mut [T],
    values: &mut [T],
    cos: &[T],
    sin: &[T],
    seq: &[T],
    pos: &[T],
    attn: &mut [T],
    mid: &mut [T],
    hidden: &mut [T],
    out: &mut [T],
    m: usize,
    d: usize,
    ff: usize,
    kind: u32,
    eps: T,
    heads: usize,
    kv_heads: usize,
    half: usize,
    max_len: usize,
    scale: T,
) {
    #[shared]
    let sc: [T; 1024];
    #[shared]
    let part: [T; 4096];
    #[shared]
    let red: [T; 32];
    let warps = block_dim_x() / 32;
    let all = grid_dim_x() * warps;
    let first = block_idx_x() * warps + thread_idx_x() / 32;
    let hd = 2 * half;
    let width = (heads + 2 * kv_heads) * hd;
    // Every loop's bound is the same for a whole warp (or, for heads, a whole block), as the
    // device functions' shuffles and barriers need; every thread reaches every `grid_sync`.
    let mut p = first;
    while 2 * p < width {
        qkv_rope_pair(
            w_qkv, x, attn_norm, qkv, keys, values, cos, sin, seq, pos, m, d, kind, 1, eps, heads,
            kv_heads, half, max_len, p,
        );
        p += all;
    }
    grid_sync();
    let mut b = block_idx_x();
    while b < m * heads {
        attend_head(
            qkv,
            keys,
            values,
            seq,
            pos,
            attn,
            width,
            heads,
            heads / kv_heads,
            kv_heads,
            hd,
            max_len,
            scale,
            b,
            &mut sc,
            &mut part,
            &mut red,
        );
        b += grid_dim_x();
    }
    grid_sync();
    // The norm's weight stands in, unread, where a product has no norm.
    let mut c_o = first;
    while c_o < d {
        rtx::kernels::qmatvec_out(
            w_o,
            attn,
            x,
            mid,
            m,
            d,
            heads * hd,
            kind,
            1,
            ffn_norm,
            0,
            eps,
            0,
            c_o,
        );
        c_o += all;
    }
    grid_sync();
    let mut c_gu = first;
    while c_gu < ff {
        rtx::kernels::qmatvec_out(
            w_gate_up, mid, mid, hidden, m, ff, d, kind, 0, ffn_norm, 1, eps, 1, c_gu,
        );
        c_gu += all;
    }
    grid_sync();
    let mut c_down = first;
    while c_down < d {
        rtx::kernels::qmatvec_out(
            w_down, hidden, mid, out, m, d, ff, kind, 1, ffn_norm, 0, eps, 0, c_down,
        );
        c_down += all;
    }
}

/// `out[r] = table[ids[r]]`: rows of the `[vocab, dim]` table for the token ids of a
/// captured step, read from a device buffer. One thread per element.
#[rtx::kernel]
fn embed_rows<T: Float>(table: &[T], ids: &[T], out: &mut [T], n: usize, dim: usize) {
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    if i < n {
        out[i] = table[(ids[i / dim] as usize) * dim + i % dim];
    }
}

/// `dst[i] = src[i]` for `i < n`: refills a buffer a captured graph reads, in place.
#[rtx::kernel]
fn copy_in_place<T: Float>(src: &[T], dst: &mut [T], n: usize) {
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    if i < n {
        dst[i] = src[i];
    }
}

/// A grid of `n` threads in blocks of [`THREADS`] (at least one block).
fn elements(n: usize) -> LaunchConfig {
    LaunchConfig::new(n.div_ceil(THREADS).max(1) as u32, THREADS as u32)
}

/// Turns the query and key heads of the projected rows `qkv` (`[rows, (heads + 2 kv_heads) *
/// head_dim]`) by each row's position in `pos` (`[rows]`), with the `[positions, head_dim /
/// 2]` tables `cos` and `sin`: the queries and keys in place, the keys also into `keys`; the values go to
/// `values` (caches `[batch, kv_heads, max_len, head_dim]`), each row at its sequence `seq`
/// and position. The caller has checked every sequence and position against the caches and
/// the tables.
#[allow(clippy::too_many_arguments)]
pub(super) fn rope_store(
    qkv: &mut Tensor<(usize, usize)>,
    keys: &mut Tensor<(usize, usize, usize, usize)>,
    values: &mut Tensor<(usize, usize, usize, usize)>,
    cos: &Tensor<(usize, usize)>,
    sin: &Tensor<(usize, usize)>,
    seq: &Tensor<(usize,)>,
    pos: &Tensor<(usize,)>,
    heads: usize,
) -> Result<()> {
    let half = cos.dims()[1];
    let split = if qkv.device().is_cuda() { half } else { 1 };
    rope_store_split(qkv, keys, values, cos, sin, seq, pos, heads, split)
}

/// [`rope_store`] with `split` threads per head (a divisor of `head_dim / 2`).
#[allow(clippy::too_many_arguments)]
pub(super) fn rope_store_split(
    qkv: &mut Tensor<(usize, usize)>,
    keys: &mut Tensor<(usize, usize, usize, usize)>,
    values: &mut Tensor<(usize, usize, usize, usize)>,
    cos: &Tensor<(usize, usize)>,
    sin: &Tensor<(usize, usize)>,
    seq: &Tensor<(usize,)>,
    pos: &Tensor<(usize,)>,
    heads: usize,
    split: usize,
) -> Result<()> {
    let [_, kv_heads, max_len, head_dim] = keys.dims()[..] else {
        unreachable!("a rank-4 cache")
    };
    let half = cos.dims()[1];
    debug_assert_eq!(head_dim, 2 * half);
    debug_assert_eq!(qkv.dims()[1], (heads + 2 * kv_heads) * head_dim);
    debug_assert!(split > 0 && half.is_multiple_of(split));
    let threads_all = qkv.dims()[0] * (heads + 2 * kv_heads) * split;
    let mut args = [
        Arg::output(qkv),
        Arg::output(keys),
        Arg::output(values),
        Arg::input(cos),
        Arg::input(sin),
        Arg::input(seq),
        Arg::input(pos),
        Arg::usize(threads_all),
        Arg::usize(heads),
        Arg::usize(kv_heads),
        Arg::usize(half),
        Arg::usize(max_len),
        Arg::usize(split),
    ];
    // SAFETY: thread `i < threads_all` touches `2 half / split` elements of head `i / split`
    // of `qkv` (`split` divides `half`), reads row `i / split / (heads + 2 kv_heads) < rows`
    // of `seq` and `pos`, reads the tables at a position the caller checked lies inside them,
    // and writes inside one key or value head of the caches at the sequence and position the
    // caller checked are below their batch and `max_len`.
    unsafe { rtx::kernel::launch(rope_store_rows::Op, elements(threads_all), &mut args) }
}

/// Rows a decoding step may have for [`qkv_rope_store`] (its kernel's sums are
/// `qmatvec_ggml`'s, for at most 4 rows).
pub(super) const QKV_ROPE_ROWS: usize = rtx::kernels::QMATVEC_ROWS;

/// The stacked `qkv` product of the rows `x` (`[rows, k]`, at most [`QKV_ROPE_ROWS`],
/// RMS-normed with `norm`'s weight and epsilon when given) with the quantized weight `w`
/// (`Q8_0` or `Q4_1`, `[(heads + 2 kv_heads) * head_dim, k]`), and the rotary turn and cache
/// write of [`rope_store`] on it, in one launch: the `[rows, (heads + 2 kv_heads) *
/// head_dim]` rows `rope_store` leaves. The caller has checked the weight's type and dims,
/// and every sequence and position against the caches and the tables.
#[allow(clippy::too_many_arguments)]
pub(super) fn qkv_rope_store(
    w: &rtx::quant::QTensor,
    x: &Tensor<(usize, usize)>,
    norm: Option<(&Tensor<(usize,)>, f64)>,
    keys: &mut Tensor<(usize, usize, usize, usize)>,
    values: &mut Tensor<(usize, usize, usize, usize)>,
    cos: &Tensor<(usize, usize)>,
    sin: &Tensor<(usize, usize)>,
    seq: &Tensor<(usize,)>,
    pos: &Tensor<(usize,)>,
    heads: usize,
) -> Result<Tensor<(usize, usize)>> {
    let [_, kv_heads, max_len, head_dim] = keys.dims()[..] else {
        unreachable!("a rank-4 cache")
    };
    let (m, k) = (x.dims()[0], x.dims()[1]);
    let n = w.dims()[0];
    let half = cos.dims()[1];
    debug_assert!(m <= QKV_ROPE_ROWS && head_dim == 2 * half);
    debug_assert_eq!(n, (heads + 2 * kv_heads) * head_dim);
    debug_assert_eq!(w.dims()[1], k);
    let mut qkv: Tensor<(usize, usize)> = Tensor::empty((m, n), x.device());
    // Without a norm its weight is never read: the angles stand in for it.
    let (g, input, eps) = match norm {
        Some((g, eps)) => (Arg::input(g), rtx::kernels::QINPUT_RMS_NORM, eps),
        None => (Arg::input(cos), rtx::kernels::QINPUT_ROWS, 0.0),
    };
    let kind = w.ggml_type().id();
    let mut args = [
        Arg::words(w.words()),
        Arg::input(x),
        g,
        Arg::output(&mut qkv),
        Arg::output(keys),
        Arg::output(values),
        Arg::input(cos),
        Arg::input(sin),
        Arg::input(seq),
        Arg::input(pos),
        Arg::usize(m),
        Arg::usize(k),
        Arg::u32(kind),
        Arg::u32(input),
        Arg::elem(eps as f32),
        Arg::usize(heads),
        Arg::usize(kv_heads),
        Arg::usize(half),
        Arg::usize(max_len),
    ];
    let warps = 4;
    let config = LaunchConfig::new((n / 2).div_ceil(warps).max(1) as u32, 32 * warps as u32);
    // SAFETY: warp `p < n / 2` reads weight rows `2 p` and `2 p + 1` (the caller checked the
    // weight is `[n, k]` of its type, so `words` holds their blocks), `m * k` rows of `x`, `k`
    // norm weights (or, unread, the rows), the tables at each row's position and the row's
    // sequence and position (checked by the caller to lie inside the tables and caches), and
    // writes `qkv` `[m, n]` and inside one key or value head of each cache.
    unsafe { rtx::kernel::launch(qkv_rope_store_rows::Op, config, &mut args)? };
    Ok(qkv)
}

/// The weights and norms of a block's decoding path in one launch ([`decode_block_fused`]).
pub(super) struct BlockWeights<'a> {
    pub qkv: &'a QTensor,
    pub o: &'a QTensor,
    pub gate_up: &'a QTensor,
    pub down: &'a QTensor,
    pub attn_norm: &'a Tensor<(usize,)>,
    pub ffn_norm: &'a Tensor<(usize,)>,
    pub eps: f64,
    pub heads: usize,
}

impl BlockWeights<'_> {
    /// Whether [`decode_block_fused`] takes these weights: the four of one type (`Q8_0` or
    /// `Q4_1`, the kernel's entries), a head no wider than 128.
    pub(super) fn fit(&self, head_dim: usize) -> bool {
        let kind = self.qkv.ggml_type();
        head_dim <= 128
            && matches!(kind, GgmlType::Q8_0 | GgmlType::Q4_1)
            && [self.o, self.gate_up, self.down]
                .iter()
                .all(|w| w.ggml_type() == kind)
    }
}

/// Threads per block of [`decode_block`]: 16 warps, one block a multiprocessor.
const BLOCK_THREADS: u32 = 512;

/// A decoding block over the residual stream `x` (`[rows, d]`, at most 4 rows, weights that
/// [`BlockWeights::fit`] takes) in one cooperative launch of [`decode_block`], giving the stream after it: the
/// values of the five-launch path, bit for bit, with the keys and values written into the
/// caches alike. On a GPU the grid is one block a multiprocessor; in the CPU's emulation (for
/// tests), `blocks` of 64 threads. The caller has checked the weights' dims and every sequence
/// and position against the caches and the tables.
#[allow(clippy::too_many_arguments)]
pub(super) fn decode_block_fused(
    w: &BlockWeights<'_>,
    x: &Tensor<(usize, usize)>,
    keys: &mut Tensor<(usize, usize, usize, usize)>,
    values: &mut Tensor<(usize, usize, usize, usize)>,
    cos: &Tensor<(usize, usize)>,
    sin: &Tensor<(usize, usize)>,
    seq: &Tensor<(usize,)>,
    pos: &Tensor<(usize,)>,
    cpu_blocks: u32,
) -> Result<Tensor<(usize, usize)>> {
    let [_, kv_heads, max_len, head_dim] = keys.dims()[..] else {
        unreachable!("a rank-4 cache")
    };
    let (m, d) = (x.dims()[0], x.dims()[1]);
    let ff = w.down.dims()[1];
    let half = cos.dims()[1];
    let heads = w.heads;
    debug_assert!(m <= QKV_ROPE_ROWS && w.fit(head_dim) && head_dim == 2 * half);
    debug_assert_eq!(w.qkv.dims(), [(heads + 2 * kv_heads) * head_dim, d]);
    debug_assert_eq!(w.o.dims(), [d, heads * head_dim]);
    debug_assert_eq!(w.gate_up.dims(), [2 * ff, d]);
    let device = x.device();
    let width = (heads + 2 * kv_heads) * head_dim;
    let mut qkv: Tensor<(usize, usize)> = Tensor::empty((m, width), device);
    let mut attn: Tensor<(usize, usize)> = Tensor::empty((m, heads * head_dim), device);
    let mut mid: Tensor<(usize, usize)> = Tensor::empty((m, d), device);
    let mut hidden: Tensor<(usize, usize)> = Tensor::empty((m, ff), device);
    let mut out: Tensor<(usize, usize)> = Tensor::empty((m, d), device);
    let config = match device {
        Device::Cuda(ordinal) => {
            LaunchConfig::new(rtx::cuda::multiprocessors(ordinal)? as u32, BLOCK_THREADS)
        }
        _ => LaunchConfig::new(cpu_blocks, 64),
    };
    let mut args = [
        Arg::words(w.qkv.words()),
        Arg::words(w.o.words()),
        Arg::words(w.gate_up.words()),
        Arg::words(w.down.words()),
        Arg::input(w.attn_norm),
        Arg::input(w.ffn_norm),
        Arg::input(x),
        Arg::output(&mut qkv),
        Arg::output(keys),
        Arg::output(values),
        Arg::input(cos),
        Arg::input(sin),
        Arg::input(seq),
        Arg::input(pos),
        Arg::output(&mut attn),
        Arg::output(&mut mid),
        Arg::output(&mut hidden),
        Arg::output(&mut out),
        Arg::usize(m),
        Arg::usize(d),
        Arg::usize(ff),
        Arg::u32(w.qkv.ggml_type().id()),
        Arg::elem(w.eps as f32),
        Arg::usize(heads),
        Arg::usize(kv_heads),
        Arg::usize(half),
        Arg::usize(max_len),
        Arg::elem(1.0 / (head_dim as f32).sqrt()),
    ];
    // SAFETY: each phase reads and writes what the kernel it stands for does (see
    // `qkv_rope_store`, `attend_threads` and `QTensor::matmul_t_joined`'s decoding product):
    // weight rows below each weight's dims (checked by the caller), `m` rows of `x`, `qkv`,
    // `attn`, `mid` and `hidden` of the widths allocated here, the norms' `d` weights, the
    // tables and caches at the rows' sequences and positions (checked by the caller); shared
    // indices as in `attend_threads` (`head_dim <= 128`, at most 16 warps).
    unsafe { rtx::kernel::launch(decode_block::Op, config, &mut args)? };
    Ok(out)
}

/// `silu(gate) * up` of the stacked feed-forward projection `gate_up` (`[rows, 2 ff]`: the
/// gate's `ff` columns, then the up projection's), `[rows, ff]`: one launch of
/// `rtx::kernels::swiglu_rows`, the values a decoding product joined to SwiGLU computes.
pub(super) fn swiglu(gate_up: &Tensor<(usize, usize)>) -> Result<Tensor<(usize, usize)>> {
    let (rows, ff) = (gate_up.dims()[0], gate_up.dims()[1] / 2);
    let gate_up = gate_up.contiguous();
    let mut out: Tensor<(usize, usize)> = Tensor::try_full((rows, ff), 0.0, gate_up.device())?;
    let mut args = [
        Arg::input(&gate_up),
        Arg::output(&mut out),
        Arg::usize(rows),
        Arg::usize(ff),
    ];
    // SAFETY: the grid-stride loop reads the `rows * 2 ff` values of the contiguous `gate_up`
    // and writes the `rows * ff` of `out`.
    unsafe {
        rtx::kernel::launch(
            rtx::kernels::swiglu_rows::Op,
            elements(rows * ff),
            &mut args,
        )?
    };
    Ok(out)
}

/// The attention of the single-token rows of `q` over the cache: `q` is `[rows, width]`,
/// whose first `heads * head_dim` columns are the query heads (the rest, the stacked keys
/// and values, are not read); row `r` is sequence `seq[r]` at position `pos[r]` and sees
/// positions `0..=pos[r]`, whose keys and values are already written. `[rows, heads *
/// head_dim]`.
pub(super) fn attend(
    q: &Tensor<(usize, usize)>,
    keys: &Tensor<(usize, usize, usize, usize)>,
    values: &Tensor<(usize, usize, usize, usize)>,
    seq: &Tensor<(usize,)>,
    pos: &Tensor<(usize,)>,
    heads: usize,
) -> Result<Tensor<(usize, usize)>> {
    // On a GPU with few blocks (a decoding step at batch 1 has 9), 32 warps, which share the
    // scoring (128 positions a round) and the weighted sum of the values (blocks of 8 warps
    // spent 13 µs here on an H100, most of it waiting on loads one round after another);
    // with a block for every multiprocessor or more, 8 warps. On the CPU's emulation, where
    // every thread is a coroutine switched at each barrier, one.
    let blocks = q.dims()[0] * heads;
    let threads = match (q.device().is_cuda(), blocks >= 128) {
        (false, _) => 32,
        (true, false) => 1024,
        (true, true) => 256,
    };
    attend_threads(q, keys, values, seq, pos, heads, threads)
}

/// [`attend`] with blocks of `threads` (a multiple of 32, at most 1024).
pub(super) fn attend_threads(
    q: &Tensor<(usize, usize)>,
    keys: &Tensor<(usize, usize, usize, usize)>,
    values: &Tensor<(usize, usize, usize, usize)>,
    seq: &Tensor<(usize,)>,
    pos: &Tensor<(usize,)>,
    heads: usize,
    threads: usize,
) -> Result<Tensor<(usize, usize)>> {
    let [_, kv_heads, max_len, head_dim] = keys.dims()[..] else {
        unreachable!("a rank-4 cache")
    };
    let [rows, q_stride] = q.dims()[..] else {
        unreachable!("a matrix")
    };
    debug_assert!(q_stride >= heads * head_dim);
    debug_assert!(threads.is_multiple_of(32) && (32..=1024).contains(&threads));
    let mut out: Tensor<(usize, usize)> = Tensor::empty((rows, heads * head_dim), q.device());
    if head_dim > 128 {
        return Err(Error::BadArgument {
            op: "Llama attention",
            msg: format!("a head width of {head_dim}: the cached attention holds at most 128"),
        });
    }
    let config = LaunchConfig::new((rows * heads) as u32, threads as u32);
    let mut args = [
        Arg::input(q),
        Arg::input(keys),
        Arg::input(values),
        Arg::input(seq),
        Arg::input(pos),
        Arg::output(&mut out),
        Arg::usize(q_stride),
        Arg::usize(heads),
        Arg::usize(heads / kv_heads),
        Arg::usize(kv_heads),
        Arg::usize(head_dim),
        Arg::usize(max_len),
        Arg::elem(1.0 / (head_dim as f32).sqrt()),
    ];
    // SAFETY: block `r heads + h` reads the query heads of row `r < rows` of `q` (`heads *
    // head_dim <= q_stride`), row `r` of `seq` and `pos`, the cache
    // at the sequence and positions `..= pos[r]` the caller checked lie inside it, and writes
    // its head of row `r` of `out`; shared indices stay below `CHUNK` (scores), 128 (the
    // query, `head_dim <= 128`) and `warps * head_dim <= 32 * 128` (the warps' sums).
    unsafe { rtx::kernel::launch(cached_attention::Op, config, &mut args)? };
    Ok(out)
}

/// The rows of `table` (`[vocab, dim]`) for the token ids in `ids` (`[rows]`), which the
/// caller has checked are below `vocab`.
pub(super) fn embed(
    table: &Tensor<(usize, usize)>,
    ids: &Tensor<(usize,)>,
) -> Result<Tensor<(usize, usize)>> {
    let dim = table.dims()[1];
    let rows = ids.dims()[0];
    let mut out: Tensor<(usize, usize)> = Tensor::empty((rows, dim), table.device());
    let n = rows * dim;
    let mut args = [
        Arg::input(table),
        Arg::input(ids),
        Arg::output(&mut out),
        Arg::usize(n),
        Arg::usize(dim),
    ];
    // SAFETY: thread `i < n` writes `out[i]` and reads row `ids[i / dim] < vocab` of the
    // table, as the caller checked.
    unsafe { rtx::kernel::launch(embed_rows::Op, elements(n), &mut args)? };
    Ok(out)
}

/// Overwrites `dst` with `src`'s elements (the same count), keeping `dst`'s buffer: `dst`
/// must be a whole tensor no other tensor shares, or the kernel writes a copy.
pub(super) fn copy_into<S: Shape>(src: &Tensor<S>, dst: &mut Tensor<S>) -> Result<()> {
    let n = src.numel();
    if dst.numel() != n {
        return Err(Error::BadArgument {
            op: "copy_into",
            msg: format!("{n} values into a buffer of {}", dst.numel()),
        });
    }
    let mut args = [Arg::input(src), Arg::output(dst), Arg::usize(n)];
    // SAFETY: thread `i < n` reads `src[i]` and writes `dst[i]`, both of `n` elements.
    unsafe { rtx::kernel::launch(copy_in_place::Op, elements(n), &mut args) }
}
