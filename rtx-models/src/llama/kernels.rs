//! The SIMT kernels of a Llama step that the tensor ops do not cover: rotary embeddings, the
//! key-value cache write, attention of single-token rows over the cache, and the embedding
//! lookup of a captured step. Each reads the rows' positions (and sequences, and token ids)
//! from device buffers rather than launch arguments, so a captured decode step replays for
//! every position: the host refills the buffers in place between replays.
//!
//! Those buffers are f32, like the activations: [`rtx::kernel::launch`] takes buffers of one
//! element type, and f32 holds every integer below 2^24 exactly (positions and token ids are
//! far below). The kernels convert with `as usize`.

use rtx::kernel::{Arg, LaunchConfig};
use rtx::prelude::*;

/// Threads per block of the one-thread-per-element kernels.
const THREADS: usize = 256;

/// The positions the attention kernel scores per pass, held in shared memory; longer
/// contexts take several passes, joined by an online softmax.
const CHUNK: usize = 1024;

/// Turns the adjacent pairs `(2i, 2i + 1)` of every head of row `r` of `x` (`[rows, heads *
/// 2 * half]`) by the angle of pair `i` at position `pos[r]`, whose cosine and sine are
/// `cos[pos[r] * half + i]` and `sin[...]`: llama.cpp's row order (see the module docs of
/// [`crate::llama`]). One thread per pair, in place.
#[rtx::kernel]
fn rope_rows<T: Float>(
    x: &mut [T],
    cos: &[T],
    sin: &[T],
    pos: &[T],
    pairs: usize,
    heads: usize,
    half: usize,
) {
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    if i < pairs {
        let r = i / (heads * half);
        let k = i % half;
        let p = pos[r] as usize;
        let c = cos[p * half + k];
        let s = sin[p * half + k];
        let a = x[2 * i];
        let b = x[2 * i + 1];
        x[2 * i] = a * c - b * s;
        x[2 * i + 1] = a * s + b * c;
    }
}

/// Writes the rows `src` (`[rows, heads * head_dim]`) into the cache `dst` (`[batch, heads,
/// max_len, head_dim]`): row `r` goes to sequence `seq[r]` at position `pos[r]`. One thread
/// per element; the one in-place write of a step.
#[rtx::kernel]
fn kv_write_rows<T: Float>(
    src: &[T],
    dst: &mut [T],
    seq: &[T],
    pos: &[T],
    n: usize,
    heads: usize,
    head_dim: usize,
    max_len: usize,
) {
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    if i < n {
        let row = heads * head_dim;
        let r = i / row;
        let h = i % row / head_dim;
        let d = i % head_dim;
        let s = seq[r] as usize;
        let p = pos[r] as usize;
        dst[((s * heads + h) * max_len + p) * head_dim + d] = src[i];
    }
}

/// Attention of single-token rows over the cache: block `r * heads + h` takes query head `h`
/// of row `r` (`q`, `[rows, heads * head_dim]`), which belongs to sequence `seq[r]` at
/// position `pos[r]`, and attends over that sequence's cached keys and values at positions
/// `0..=pos[r]` of key-value head `h / group` (`keys` and `values`, `[batch, kv_heads,
/// max_len, head_dim]`, this step's own key already written), writing `out`, laid out as `q`.
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
    let qrow = (r * heads + h) * head_dim;
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
        out[qrow + tid] = acc / l_run;
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

/// Rotates `x` (`[rows, heads * head_dim]`) in place by each row's position in `pos`
/// (`[rows]`), with the `[positions, head_dim / 2]` tables `cos` and `sin`. The caller has
/// checked every position against the tables.
pub(super) fn rope(
    x: &mut Tensor<(usize, usize)>,
    cos: &Tensor<(usize, usize)>,
    sin: &Tensor<(usize, usize)>,
    pos: &Tensor<(usize,)>,
    heads: usize,
) -> Result<()> {
    let half = cos.dims()[1];
    let pairs = x.numel() / 2;
    debug_assert_eq!(x.dims()[1], heads * 2 * half);
    let mut args = [
        Arg::output(x),
        Arg::input(cos),
        Arg::input(sin),
        Arg::input(pos),
        Arg::usize(pairs),
        Arg::usize(heads),
        Arg::usize(half),
    ];
    // SAFETY: thread `i < pairs` touches elements `2i` and `2i + 1` of `x`, reads row `i /
    // (heads half) < rows` of `pos`, and reads the tables at a position the caller checked
    // lies inside them.
    unsafe { rtx::kernel::launch(rope_rows::Op, elements(pairs), &mut args) }
}

/// Writes the rows `src` (`[rows, heads * head_dim]`) into `cache` (`[batch, heads, max_len,
/// head_dim]`) at each row's sequence `seq` and position `pos`. The caller has checked both
/// against the cache's sizes.
pub(super) fn write_rows(
    cache: &mut Tensor<(usize, usize, usize, usize)>,
    src: &Tensor<(usize, usize)>,
    seq: &Tensor<(usize,)>,
    pos: &Tensor<(usize,)>,
) -> Result<()> {
    let [_, heads, max_len, head_dim] = cache.dims()[..] else {
        unreachable!("a rank-4 cache")
    };
    let n = src.numel();
    let mut args = [
        Arg::input(src),
        Arg::output(cache),
        Arg::input(seq),
        Arg::input(pos),
        Arg::usize(n),
        Arg::usize(heads),
        Arg::usize(head_dim),
        Arg::usize(max_len),
    ];
    // SAFETY: thread `i < n` reads `src[i]` and the entries of its row `i / (heads head_dim)`
    // in `seq` and `pos`, and writes inside the cache at a sequence and position the caller
    // checked are below its batch and `max_len`.
    unsafe { rtx::kernel::launch(kv_write_rows::Op, elements(n), &mut args) }
}

/// The attention of the single-token rows `q` (`[rows, heads * head_dim]`) over the cache:
/// row `r` is sequence `seq[r]` at position `pos[r]` and sees positions `0..=pos[r]`, whose
/// keys and values are already written. `[rows, heads * head_dim]`.
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
    let rows = q.dims()[0];
    let mut out: Tensor<(usize, usize)> = Tensor::zeros(q.shape(), q.device());
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
        Arg::usize(heads),
        Arg::usize(heads / kv_heads),
        Arg::usize(kv_heads),
        Arg::usize(head_dim),
        Arg::usize(max_len),
        Arg::elem(1.0 / (head_dim as f32).sqrt()),
    ];
    // SAFETY: block `r heads + h` reads row `r < rows` of `q`, `seq` and `pos`, the cache
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
    let mut out: Tensor<(usize, usize)> = Tensor::zeros((rows, dim), table.device());
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
