//! The Llama step's kernels on the CPU emulation, against host computations of what each
//! must write: rotary turns with the cache writes at each row's sequence and position, the
//! SwiGLU product, the cached attention (across its chunk boundary, with grouped heads, from
//! rows wider than the query heads), the residual add joined with RMS norm, and the embedding
//! lookup.

use super::kernels;
use rtx::prelude::*;

/// A fixed stream of values in [-1, 1).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

fn vector(v: Vec<f32>) -> Tensor<(usize,)> {
    let n = v.len();
    Tensor::from_vec(v, (n,), Device::Cpu)
}

/// A thread per head (the CPU's launch) and a thread per pair (a GPU's) give the same turn.
#[test]
fn rope_store_turns_queries_and_keys_in_place_and_writes_keys_and_values_at_each_rows_place() {
    for split in [1, 2] {
        rope_store_case(split);
    }
}

fn rope_store_case(split: usize) {
    // Two rows of 2 query heads and 1 key-value head of 4 dims (2 pairs), in a cache of 2
    // sequences of 5 positions.
    let (rows, heads, kv_heads, half, batch, max_len) = (2, 2, 1, 2, 2, 5);
    let hd = 2 * half;
    let width = (heads + 2 * kv_heads) * hd;
    let x0 = values(rows * width, 1);
    let (cos_v, sin_v) = (values(max_len * half, 2), values(max_len * half, 3));
    let mut qkv: Tensor<(usize, usize)> = Tensor::from_vec(x0.clone(), (rows, width), Device::Cpu);
    let cos = Tensor::from_vec(cos_v.clone(), (max_len, half), Device::Cpu);
    let sin = Tensor::from_vec(sin_v.clone(), (max_len, half), Device::Cpu);
    let shape = (batch, kv_heads, max_len, hd);
    let (mut keys, mut vals) = (
        Tensor::zeros(shape, Device::Cpu),
        Tensor::zeros(shape, Device::Cpu),
    );
    let (seq, pos) = ([1usize, 0], [3usize, 4]);
    kernels::rope_store_split(
        &mut qkv,
        &mut keys,
        &mut vals,
        &cos,
        &sin,
        &vector(vec![1.0, 0.0]),
        &vector(vec![3.0, 4.0]),
        heads,
        split,
    )
    .unwrap();
    let (got_q, got_k, got_v) = (qkv.to_vec(), keys.to_vec(), vals.to_vec());
    let (mut want_k, mut want_v) = (vec![0f32; got_k.len()], vec![0f32; got_v.len()]);
    for r in 0..rows {
        let turn = |at: usize, i: usize| {
            let (a, b) = (x0[at], x0[at + 1]);
            let (c, s) = (cos_v[pos[r] * half + i], sin_v[pos[r] * half + i]);
            // The first product of each fused, as llama.cpp's compiled C does.
            (a.mul_add(c, -(b * s)), a.mul_add(s, b * c))
        };
        let cached = |h: usize, i: usize| ((seq[r] * kv_heads + h) * max_len + pos[r]) * hd + 2 * i;
        for h in 0..heads + 2 * kv_heads {
            for i in 0..half {
                let at = r * width + h * hd + 2 * i;
                if h < heads {
                    let (a, b) = turn(at, i);
                    assert_eq!(
                        (got_q[at], got_q[at + 1]),
                        (a, b),
                        "split {split}: row {r} head {h} pair {i}"
                    );
                } else if h < heads + kv_heads {
                    let (a, b) = turn(at, i);
                    assert_eq!(
                        (got_q[at], got_q[at + 1]),
                        (a, b),
                        "split {split}: row {r} key head {h}"
                    );
                    let to = cached(h - heads, i);
                    (want_k[to], want_k[to + 1]) = (a, b);
                } else {
                    let to = cached(h - heads - kv_heads, i);
                    (want_v[to], want_v[to + 1]) = (x0[at], x0[at + 1]);
                }
            }
        }
    }
    assert_eq!(got_k, want_k, "keys, split {split}");
    assert_eq!(got_v, want_v, "values, split {split}");
}

/// Random finite blocks of a `[n, k]` weight of type `ty` (`Q8_0` or `Q4_1`): small f16
/// scales (and minimums), random integers.
fn weight(ty: rtx::quant::GgmlType, n: usize, k: usize, seed: u64) -> rtx::quant::QTensor {
    use rtx::quant::{GgmlType, QTensor};
    let bytes_per = ty.type_size();
    let noise = values(n * k / 32 * bytes_per, seed);
    let mut bytes = Vec::with_capacity(noise.len());
    for (i, v) in noise.iter().enumerate() {
        let at = i % bytes_per;
        // f16 0.0625 + a little (0x2c00..0x2cff) as the scale, and -0.5 .. for Q4_1's minimum.
        bytes.push(match (ty, at) {
            (_, 0) => ((v + 1.0) * 127.0) as u8,
            (_, 1) => 0x2c,
            (GgmlType::Q4_1, 2) => ((v + 1.0) * 127.0) as u8,
            (GgmlType::Q4_1, 3) => 0xb8,
            _ => ((v + 1.0) * 127.9) as u8,
        });
    }
    QTensor::from_bytes(&bytes, &[n, k], ty, Device::Cpu).unwrap()
}

/// The joined `qkv` product and rotary turn (`qkv_rope_store`) leaves `qkv` and both caches
/// bit for bit as `qmatvec_ggml` then `rope_store_rows` do, for both weight types, one and
/// three rows, plain and RMS-normed.
#[test]
fn qkv_rope_store_is_the_product_then_the_turn_bit_for_bit() {
    use rtx::kernel::LaunchConfig;
    use rtx::quant::GgmlType;
    let (heads, kv_heads, half, batch, max_len, k) = (2, 1, 4, 2, 5, 96);
    let hd = 2 * half;
    let n = (heads + 2 * kv_heads) * hd;
    let eps = 1e-5;
    let cos = Tensor::from_vec(values(max_len * half, 2), (max_len, half), Device::Cpu);
    let sin = Tensor::from_vec(values(max_len * half, 3), (max_len, half), Device::Cpu);
    let g = vector(values(k, 4).iter().map(|v| v + 1.5).collect());
    for ty in [GgmlType::Q8_0, GgmlType::Q4_1] {
        let w = weight(ty, n, k, 5 + ty.id() as u64);
        let words: Vec<i32> = w.words().to_vec();
        for m in [1, 3] {
            let xv = values(m * k, 6 + m as u64);
            let x: Tensor<(usize, usize)> = Tensor::from_vec(xv.clone(), (m, k), Device::Cpu);
            let seq = vector([1.0, 0.0, 1.0][..m].to_vec());
            let pos = vector([3.0, 4.0, 0.0][..m].to_vec());
            for norm in [None, Some((&g, eps))] {
                let (input, gv) = match norm {
                    Some(_) => (rtx::kernels::QINPUT_RMS_NORM, g.to_vec()),
                    None => (rtx::kernels::QINPUT_ROWS, Vec::new()),
                };
                let mut product = vec![f32::NAN; m * n];
                rtx::kernels::qmatvec_ggml(
                    LaunchConfig::new(n.div_ceil(4) as u32, 128),
                    &words,
                    &xv,
                    &[],
                    &mut product,
                    m,
                    n,
                    k,
                    ty.id(),
                    0,
                    &gv,
                    input,
                    eps as f32,
                    0,
                )
                .unwrap();
                let shape = (batch, kv_heads, max_len, hd);
                let mut want = Tensor::from_vec(product, (m, n), Device::Cpu);
                let (mut want_k, mut want_v) = (
                    Tensor::zeros(shape, Device::Cpu),
                    Tensor::zeros(shape, Device::Cpu),
                );
                kernels::rope_store_split(
                    &mut want,
                    &mut want_k,
                    &mut want_v,
                    &cos,
                    &sin,
                    &seq,
                    &pos,
                    heads,
                    1,
                )
                .unwrap();
                let (mut keys, mut vals) = (
                    Tensor::zeros(shape, Device::Cpu),
                    Tensor::zeros(shape, Device::Cpu),
                );
                let got = kernels::qkv_rope_store(
                    &w, &x, norm, &mut keys, &mut vals, &cos, &sin, &seq, &pos, heads,
                )
                .unwrap();
                let what = format!("{ty}, {m} rows, norm {}", norm.is_some());
                assert_eq!(got.to_vec(), want.to_vec(), "qkv, {what}");
                assert_eq!(keys.to_vec(), want_k.to_vec(), "keys, {what}");
                assert_eq!(vals.to_vec(), want_v.to_vec(), "values, {what}");
                assert!(
                    keys.to_vec().iter().any(|&v| v != 0.0),
                    "keys written, {what}"
                );
            }
        }
    }
}

#[test]
fn swiglu_is_the_composition_over_the_stacked_halves() {
    let (rows, ff) = (3, 5);
    let gate_up: Tensor<(usize, usize)> =
        Tensor::from_vec(values(rows * 2 * ff, 9), (rows, 2 * ff), Device::Cpu);
    let gate = gate_up.narrow::<1, usize>(0, ff);
    let up = gate_up.narrow::<1, usize>(ff, ff);
    let want = (gate.silu() * up).to_vec();
    assert_eq!(kernels::swiglu(&gate_up).unwrap().to_vec(), want);
}

/// Head widths below a warp and over two warps' lanes (each lane then sums three dims).
#[test]
fn cached_attention_is_each_rows_softmax_over_its_own_sequence() {
    for hd in [8, 72] {
        cached_attention_case(hd);
    }
}

fn cached_attention_case(hd: usize) {
    // Two query heads per key-value head; a row past the kernel's 1024-position chunk, so
    // the online softmax joins two chunks.
    let (batch, kv_heads, max_len, heads) = (2, 2, 1100, 4);
    let group = heads / kv_heads;
    let n = batch * kv_heads * max_len * hd;
    let (k_v, v_v) = (values(n, 5), values(n, 6));
    let rows = [(1usize, 1099usize), (0, 0), (1, 5)];
    let q_v: Vec<f32> = values(rows.len() * heads * hd, 7)
        .iter()
        .map(|x| 4.0 * x)
        .collect();
    let shape = (batch, kv_heads, max_len, hd);
    let keys = Tensor::from_vec(k_v.clone(), shape, Device::Cpu);
    let vals = Tensor::from_vec(v_v.clone(), shape, Device::Cpu);
    // Each row of `q` is followed by 3 columns the kernel must not read, as the stacked
    // keys and values follow the query heads in a step's projections.
    let extra = 3;
    let padded: Vec<f32> = q_v
        .chunks(heads * hd)
        .flat_map(|row| row.iter().copied().chain([f32::NAN; 3]))
        .collect();
    let q: Tensor<(usize, usize)> =
        Tensor::from_vec(padded, (rows.len(), heads * hd + extra), Device::Cpu);
    let seq = vector(rows.iter().map(|r| r.0 as f32).collect());
    let pos = vector(rows.iter().map(|r| r.1 as f32).collect());
    // One warp (the CPU's launch), eight, and 32 (a GPU's).
    for threads in [32, 256, 1024] {
        let got = kernels::attend_threads(&q, &keys, &vals, &seq, &pos, heads, threads)
            .unwrap()
            .to_vec();
        let scale = 1.0 / (hd as f64).sqrt();
        for (r, &(s, p)) in rows.iter().enumerate() {
            for h in 0..heads {
                let base = (s * kv_heads + h / group) * max_len * hd;
                let qrow = &q_v[(r * heads + h) * hd..][..hd];
                let scores: Vec<f64> = (0..=p)
                    .map(|j| {
                        let k = &k_v[base + j * hd..][..hd];
                        qrow.iter()
                            .zip(k)
                            .map(|(a, b)| f64::from(a * b))
                            .sum::<f64>()
                            * scale
                    })
                    .collect();
                let m = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let w: Vec<f64> = scores.iter().map(|x| (x - m).exp()).collect();
                let total: f64 = w.iter().sum();
                for d in 0..hd {
                    let want: f64 = (0..=p)
                        .map(|j| w[j] * f64::from(v_v[base + j * hd + d]))
                        .sum::<f64>()
                        / total;
                    let g = f64::from(got[(r * heads + h) * hd + d]);
                    assert!(
                        (g - want).abs() < 1e-5,
                        "{threads} threads, head width {hd}: row {r} (sequence {s}, position {p}) head {h} dim \
                     {d}: {g} against {want}"
                    );
                }
            }
        }
    }
}

#[test]
fn the_embedding_lookup_reads_the_rows_of_the_ids() {
    let table_v = values(5 * 3, 8);
    let table = Tensor::from_vec(table_v.clone(), (5, 3), Device::Cpu);
    let got = kernels::embed(&table, &vector(vec![4.0, 0.0, 4.0]))
        .unwrap()
        .to_vec();
    let want: Vec<f32> = [4, 0, 4]
        .iter()
        .flat_map(|&r| table_v[r * 3..r * 3 + 3].to_vec())
        .collect();
    assert_eq!(got, want);
    let mut dst = vector(vec![0.0; 3]);
    let before = dst.buffer_id();
    kernels::copy_into(&vector(vec![1.0, 2.0, 3.0]), &mut dst).unwrap();
    assert_eq!(dst.to_vec(), vec![1.0, 2.0, 3.0]);
    assert_eq!(dst.buffer_id(), before, "the copy keeps the buffer");
}

/// A decoding block in one cooperative launch (`decode_block_fused`) gives the stream after
/// the block and both caches bit for bit as its five launches do (`qkv_rope_store`,
/// `attend_threads` with the same block size, and `qmatvec_ggml` for the `o`, gate-and-up and
/// down products), for both weight types and one and three rows, on a grid of 3 blocks, so
/// every phase's loop takes several turns (heads too, reusing the shared arrays).
#[test]
fn a_decoding_block_in_one_launch_is_its_five_launches_bit_for_bit() {
    use rtx::kernel::LaunchConfig;
    use rtx::quant::GgmlType;
    let (heads, kv_heads, half, batch, max_len, d, ff) = (4, 2, 4, 2, 6, 64, 64);
    let hd = 2 * half;
    let width = (heads + 2 * kv_heads) * hd;
    let eps = 1e-5;
    let cos = Tensor::from_vec(values(max_len * half, 2), (max_len, half), Device::Cpu);
    let sin = Tensor::from_vec(values(max_len * half, 3), (max_len, half), Device::Cpu);
    let attn_norm = vector(values(d, 4).iter().map(|v| v + 1.5).collect());
    let ffn_norm = vector(values(d, 5).iter().map(|v| v + 1.25).collect());
    let shape = (batch, kv_heads, max_len, hd);
    let cache = |seed| {
        Tensor::from_vec(
            values(shape.0 * shape.1 * shape.2 * shape.3, seed),
            shape,
            Device::Cpu,
        )
    };
    for ty in [GgmlType::Q8_0, GgmlType::Q4_1] {
        let s = 10 * ty.id() as u64;
        let (w_qkv, w_o) = (
            weight(ty, width, d, s + 1),
            weight(ty, d, heads * hd, s + 2),
        );
        let (w_gu, w_down) = (weight(ty, 2 * ff, d, s + 3), weight(ty, d, ff, s + 4));
        let w = kernels::BlockWeights {
            qkv: &w_qkv,
            o: &w_o,
            gate_up: &w_gu,
            down: &w_down,
            attn_norm: &attn_norm,
            ffn_norm: &ffn_norm,
            eps,
            heads,
        };
        assert!(w.fit(hd));
        for m in [1, 3] {
            let xv = values(m * d, 6 + m as u64);
            let x: Tensor<(usize, usize)> = Tensor::from_vec(xv.clone(), (m, d), Device::Cpu);
            let seq = vector([1.0, 0.0, 1.0][..m].to_vec());
            let pos = vector([3.0, 5.0, 0.0][..m].to_vec());
            // The five launches.
            let (mut want_k, mut want_v) = (cache(7), cache(8));
            let qkv = kernels::qkv_rope_store(
                &w_qkv,
                &x,
                Some((&attn_norm, eps)),
                &mut want_k,
                &mut want_v,
                &cos,
                &sin,
                &seq,
                &pos,
                heads,
            )
            .unwrap();
            let attn = kernels::attend_threads(&qkv, &want_k, &want_v, &seq, &pos, heads, 64)
                .unwrap()
                .to_vec();
            let product = |w: &rtx::quant::QTensor,
                           x: &[f32],
                           res: &[f32],
                           n: usize,
                           k: usize,
                           g: &[f32],
                           glu| {
                let mut out = vec![f32::NAN; m * n];
                let input = if g.is_empty() { 0 } else { 1 };
                rtx::kernels::qmatvec_ggml(
                    LaunchConfig::new(n.div_ceil(4) as u32, 128),
                    &w.words().to_vec(),
                    x,
                    res,
                    &mut out,
                    m,
                    n,
                    k,
                    ty.id(),
                    u32::from(!res.is_empty()),
                    g,
                    input,
                    eps as f32,
                    glu,
                )
                .unwrap();
                out
            };
            let mid = product(&w_o, &attn, &xv, d, heads * hd, &[], 0);
            let hidden = product(&w_gu, &mid, &[], ff, d, &ffn_norm.to_vec(), 1);
            let want = product(&w_down, &hidden, &mid, d, ff, &[], 0);
            // One launch.
            let (mut keys, mut vals) = (cache(7), cache(8));
            let got = kernels::decode_block_fused(
                &w, &x, &mut keys, &mut vals, &cos, &sin, &seq, &pos, 3,
            )
            .unwrap();
            let what = format!("{ty}, {m} rows");
            assert_eq!(got.to_vec(), want, "the stream after the block, {what}");
            assert_eq!(keys.to_vec(), want_k.to_vec(), "keys, {what}");
            assert_eq!(vals.to_vec(), want_v.to_vec(), "values, {what}");
        }
    }
}
