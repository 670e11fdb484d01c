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

use super::Matrix;
use rtx::kernel::{Arg, LaunchConfig};
use rtx::prelude::*;

/// Threads per block of the one-thread-per-element kernels.
const THREADS: usize = 256;

/// The positions the attention kernel scores per pass, held in shared memory; longer
/// contexts take several passes, joined by an online softmax.
const CHUNK: usize = 1024;

/// The rotary turn and the cache write of a step's projected rows `qkv` (`[rows, (heads +
/// 2 kv_heads) * 2 half]`: the query heads, then the key heads, then the value heads, as
/// [`crate::llama::LlamaBlock::qkv`] stacks them), in one launch. Row `r` belongs to
/// sequence `seq[r]` at position `pos[r]`. Each adjacent pair `(2i, 2i + 1)` of a query or
/// key head is turned by the angle of pair `i` at that position (`cos[pos[r] * half + i]`,
/// `sin[...]`; llama.cpp's row order, see the module docs of [`crate::llama`]): query pairs
/// in place, key pairs into `keys`; value pairs are copied into `values` as they are. The
/// turn is `(a c - b s, a s + b c)` with the first product fused into each (`mul_add`), as
/// llama.cpp's compiled C computes it. The
/// caches are `[batch, kv_heads, max_len, 2 half]`. One thread per head of a row (`heads_all
/// = rows * (heads + 2 kv_heads)` of them), walking its `half` pairs: a step has few rows,
/// and on the CPU, where launches are emulated thread by thread, a thread per pair cost a
/// sixth of a prefill.
#[rtx::kernel]
fn rope_store_rows<T: Float>(
    qkv: &mut [T],
    keys: &mut [T],
    values: &mut [T],
    cos: &[T],
    sin: &[T],
    seq: &[T],
    pos: &[T],
    heads_all: usize,
    heads: usize,
    kv_heads: usize,
    half: usize,
    max_len: usize,
) {
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    if i < heads_all {
        let row_heads = heads + 2 * kv_heads;
        let r = i / row_heads;
        let head = i % row_heads;
        let p = pos[r] as usize;
        let from = i * 2 * half;
        if head < heads {
            for k in 0..half {
                let a = qkv[from + 2 * k];
                let b = qkv[from + 2 * k + 1];
                let c = cos[p * half + k];
                let s = sin[p * half + k];
                qkv[from + 2 * k] = a.mul_add(c, -(b * s));
                qkv[from + 2 * k + 1] = a.mul_add(s, b * c);
            }
        } else if head < heads + kv_heads {
            let to = ((seq[r] as usize * kv_heads + head - heads) * max_len + p) * 2 * half;
            for k in 0..half {
                let a = qkv[from + 2 * k];
                let b = qkv[from + 2 * k + 1];
                let c = cos[p * half + k];
                let s = sin[p * half + k];
                keys[to + 2 * k] = a.mul_add(c, -(b * s));
                keys[to + 2 * k + 1] = a.mul_add(s, b * c);
            }
        } else {
            let vh = head - heads - kv_heads;
            let to = ((seq[r] as usize * kv_heads + vh) * max_len + p) * 2 * half;
            for k in 0..2 * half {
                values[to + k] = qkv[from + k];
            }
        }
    }
}

/// `silu(gate) * up`, SwiGLU's product: one launch over the two halves of the stacked
/// feed-forward projection where the composition takes two, with the same rounding (the
/// `silu` of the op, then one product, in the element type).
#[rtx::kernel(elementwise)]
fn silu_mul<T: Float>(gate: T, up: T) -> T {
    rtx::kernels::silu(gate) * up
}

/// The residual add and the next RMS norm of a block, row by row: `sum = x + y`, and `out =
/// sum / sqrt(mean(sum²) + eps) * weight` over each row of `cols` values. One block per row,
/// a block size that is a multiple of 32; each thread walks the elements `tid + k * block`.
#[rtx::kernel]
fn add_rms_norm_rows<T: Float>(
    x: &[T],
    y: &[T],
    weight: &[T],
    sum: &mut [T],
    out: &mut [T],
    cols: usize,
    eps: T,
) {
    #[shared]
    let red: [T; 32];
    let base = block_idx_x() * cols;
    let tid = thread_idx_x();
    let nt = block_dim_x();
    let mut squares = 0.0;
    let mut j = tid;
    while j < cols {
        let s = x[base + j] + y[base + j];
        sum[base + j] = s;
        squares += s * s;
        j += nt;
    }
    let total = rtx::kernels::block_sum(squares, &mut red);
    let rstd = 1.0 / (total / (cols as T) + eps).sqrt();
    let mut j = tid;
    while j < cols {
        out[base + j] = sum[base + j] * rstd * weight[j];
        j += nt;
    }
}

/// Attention of single-token rows over the cache: block `r * heads + h` takes query head `h`
/// of row `r` (`q`, rows of `q_stride` elements whose first `heads * head_dim` are the query
/// heads), which belongs to sequence `seq[r]` at
/// position `pos[r]`, and attends over that sequence's cached keys and values at positions
/// `0..=pos[r]` of key-value head `h / group` (`keys` and `values`, `[batch, kv_heads,
/// max_len, head_dim]`, this step's own key already written), writing `out`, `[rows, heads *
/// head_dim]`.
///
/// Thread `j` scores positions `j, j + threads, ..` of a chunk of [`CHUNK`] into shared
/// memory; the block's maximum and sum are taken from shared memory in thread order, so every
/// thread holds the same values and the result does not depend on the other rows or on how
/// many there are; thread `d < head_dim` then accumulates output dim `d`. Chunks are joined
/// by rescaling with the running maximum (an online softmax). Needs `head_dim <= threads`.
#[rtx::kernel]
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
    const CHUNK: usize = 1024;
    #[shared]
    let qs: [T; 1024];
    #[shared]
    let sc: [T; 1024];
    #[shared]
    let red: [T; 1024];
    let tid = thread_idx_x();
    let nt = block_dim_x();
    let r = block_idx_x() / heads;
    let h = block_idx_x() % heads;
    let len = pos[r] as usize + 1;
    let kv = (seq[r] as usize * kv_heads + h / group) * max_len * head_dim;
    let qrow = r * q_stride + h * head_dim;
    let orow = (r * heads + h) * head_dim;
    let mut d = tid;
    while d < head_dim {
        qs[d] = q[qrow + d];
        d += nt;
    }
    sync_threads();
    let mut m_run = T::NEG_INFINITY;
    let mut l_run = 0.0;
    let mut acc = 0.0;
    let mut start = 0;
    while start < len {
        let n = (len - start).min(CHUNK);
        // Scores of this chunk, and this thread's maximum.
        let mut m_mine = T::NEG_INFINITY;
        let mut j = tid;
        while j < n {
            let row = kv + (start + j) * head_dim;
            let mut dot = 0.0;
            for e in 0..head_dim {
                dot += qs[e] * keys[row + e];
            }
            let s = dot * scale;
            sc[j] = s;
            m_mine = m_mine.max(s);
            j += nt;
        }
        red[tid] = m_mine;
        sync_threads();
        let mut m_chunk = T::NEG_INFINITY;
        for w in 0..nt {
            m_chunk = m_chunk.max(red[w]);
        }
        sync_threads();
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
        red[tid] = l_mine;
        sync_threads();
        let mut l_chunk = 0.0;
        for w in 0..nt {
            l_chunk += red[w];
        }
        l_run = l_run * corr + l_chunk;
        if tid < head_dim {
            let mut a = 0.0;
            for j in 0..n {
                a += sc[j] * values[kv + (start + j) * head_dim + tid];
            }
            acc = acc * corr + a;
        }
        m_run = m_new;
        // The next chunk overwrites `sc` and `red`.
        sync_threads();
        start += CHUNK;
    }
    if tid < head_dim {
        out[orow + tid] = acc / l_run;
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
/// 2]` tables `cos` and `sin`: the queries in place, the keys into `keys`; the values go to
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
    let [_, kv_heads, max_len, head_dim] = keys.dims()[..] else {
        unreachable!("a rank-4 cache")
    };
    let half = cos.dims()[1];
    debug_assert_eq!(head_dim, 2 * half);
    debug_assert_eq!(qkv.dims()[1], (heads + 2 * kv_heads) * head_dim);
    let heads_all = qkv.dims()[0] * (heads + 2 * kv_heads);
    let mut args = [
        Arg::output(qkv),
        Arg::output(keys),
        Arg::output(values),
        Arg::input(cos),
        Arg::input(sin),
        Arg::input(seq),
        Arg::input(pos),
        Arg::usize(heads_all),
        Arg::usize(heads),
        Arg::usize(kv_heads),
        Arg::usize(half),
        Arg::usize(max_len),
    ];
    // SAFETY: thread `i < heads_all` touches head `i`'s `2 half` elements of `qkv`, reads row
    // `i / (heads + 2 kv_heads) < rows` of `seq` and `pos`, reads the tables at a position
    // the caller checked lies inside them, and writes one key or value head inside the caches
    // at the sequence and position the caller checked are below their batch and `max_len`.
    unsafe { rtx::kernel::launch(rope_store_rows::Op, elements(heads_all), &mut args) }
}

/// `silu(gate) * up` of the stacked feed-forward projection `gate_up` (`[rows, 2 ff]`: the
/// gate's `ff` columns, then the up projection's), `[rows, ff]`.
pub(super) fn swiglu(gate_up: &Tensor<(usize, usize)>) -> Result<Tensor<(usize, usize)>> {
    let ff = gate_up.dims()[1] / 2;
    let gate = gate_up.narrow::<1, usize>(0, ff);
    let up = gate_up.narrow::<1, usize>(ff, ff);
    rtx::kernel::try_map2(silu_mul::Op, &gate, &up, &[])
}

/// `x + y` (`[rows, cols]` each) and its RMS norm with `weight` (`[cols]`) in one launch:
/// `(sum, normed)`.
pub(super) fn add_rms_norm(
    x: &Matrix,
    y: &Matrix,
    weight: &Tensor<(usize,)>,
    eps: f64,
) -> Result<(Matrix, Matrix)> {
    let [rows, cols] = x.dims()[..] else {
        unreachable!("a matrix")
    };
    if y.dims() != x.dims() || weight.dims() != [cols] {
        return Err(Error::ShapeMismatch {
            op: "Llama add_rms_norm",
            lhs: format!("{:?} + {:?}", x.dims(), y.dims()),
            rhs: format!("{:?}", weight.dims()),
            rule: "x and y have the same dims, and the weight is as long as their rows",
        });
    }
    let mut sum: Matrix = Tensor::empty((rows, cols), x.device());
    let mut out: Matrix = Tensor::empty((rows, cols), x.device());
    if rows == 0 {
        return Ok((sum, out));
    }
    let threads = cols.next_multiple_of(32).clamp(32, 1024);
    let mut args = [
        Arg::input(x),
        Arg::input(y),
        Arg::input(weight),
        Arg::output(&mut sum),
        Arg::output(&mut out),
        Arg::usize(cols),
        Arg::elem(eps as f32),
    ];
    // SAFETY: block `r < rows` reads and writes the `cols` elements of row `r` of the four
    // `[rows, cols]` matrices, and the `cols` of the weight.
    let config = LaunchConfig::new(rows as u32, threads as u32);
    unsafe { rtx::kernel::launch(add_rms_norm_rows::Op, config, &mut args)? };
    Ok((sum, out))
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
    let [_, kv_heads, max_len, head_dim] = keys.dims()[..] else {
        unreachable!("a rank-4 cache")
    };
    let [rows, q_stride] = q.dims()[..] else {
        unreachable!("a matrix")
    };
    debug_assert!(q_stride >= heads * head_dim);
    let mut out: Tensor<(usize, usize)> = Tensor::empty((rows, heads * head_dim), q.device());
    // Enough threads for one head's dims, in whole warps: on a GPU at least 128, so 4 warps
    // share the scoring of long contexts; on the CPU's emulation, where every thread is a
    // coroutine switched at each barrier, no more than the dims need.
    let least = if matches!(q.device(), Device::Cpu) {
        32
    } else {
        128
    };
    let threads = head_dim.next_multiple_of(32).max(least);
    if head_dim > CHUNK || threads > 1024 {
        return Err(Error::BadArgument {
            op: "Llama attention",
            msg: format!("a head width of {head_dim}: the cached attention holds at most 1024"),
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
    // its head of row `r` of `out`; shared indices stay below `CHUNK`, `head_dim` and the
    // block's threads, all at most 1024.
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
