//! The Llama step's kernels on the CPU emulation, against host computations of what each
//! must write: rotary turns, cache writes at each row's sequence and position, the cached
//! attention (across its chunk boundary, with grouped heads), and the embedding lookup.

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

#[test]
fn rope_turns_each_rows_pairs_by_its_own_position() {
    let (rows, heads, half) = (2, 2, 2);
    let x0 = values(rows * heads * 2 * half, 1);
    let (cos_v, sin_v) = (values(5 * half, 2), values(5 * half, 3));
    let mut x: Tensor<(usize, usize)> =
        Tensor::from_vec(x0.clone(), (rows, heads * 2 * half), Device::Cpu);
    let cos = Tensor::from_vec(cos_v.clone(), (5, half), Device::Cpu);
    let sin = Tensor::from_vec(sin_v.clone(), (5, half), Device::Cpu);
    let pos = [3usize, 0];
    kernels::rope(&mut x, &cos, &sin, &vector(vec![3.0, 0.0]), heads).unwrap();
    let got = x.to_vec();
    for r in 0..rows {
        for h in 0..heads {
            for i in 0..half {
                let at = (r * heads + h) * 2 * half + 2 * i;
                let (a, b) = (x0[at], x0[at + 1]);
                let (c, s) = (cos_v[pos[r] * half + i], sin_v[pos[r] * half + i]);
                assert_eq!(got[at], a * c - b * s, "row {r} head {h} pair {i}");
                assert_eq!(got[at + 1], a * s + b * c, "row {r} head {h} pair {i}");
            }
        }
    }
}

#[test]
fn the_cache_write_puts_each_row_at_its_sequence_and_position() {
    let (batch, heads, max_len, hd) = (2, 2, 4, 3);
    let src_v = values(2 * heads * hd, 4);
    let src: Tensor<(usize, usize)> = Tensor::from_vec(src_v.clone(), (2, heads * hd), Device::Cpu);
    let mut cache = Tensor::zeros((batch, heads, max_len, hd), Device::Cpu);
    let (seq, pos) = ([1usize, 0], [2usize, 3]);
    kernels::write_rows(
        &mut cache,
        &src,
        &vector(vec![1.0, 0.0]),
        &vector(vec![2.0, 3.0]),
    )
    .unwrap();
    let got = cache.to_vec();
    let mut want = vec![0f32; got.len()];
    for r in 0..2 {
        for h in 0..heads {
            for d in 0..hd {
                want[((seq[r] * heads + h) * max_len + pos[r]) * hd + d] =
                    src_v[(r * heads + h) * hd + d];
            }
        }
    }
    assert_eq!(got, want);
}

#[test]
fn cached_attention_is_each_rows_softmax_over_its_own_sequence() {
    // Two query heads per key-value head; a row past the kernel's 1024-position chunk, so
    // the online softmax joins two chunks.
    let (batch, kv_heads, max_len, hd, heads) = (2, 2, 1100, 8, 4);
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
    let q: Tensor<(usize, usize)> =
        Tensor::from_vec(q_v.clone(), (rows.len(), heads * hd), Device::Cpu);
    let seq = vector(rows.iter().map(|r| r.0 as f32).collect());
    let pos = vector(rows.iter().map(|r| r.1 as f32).collect());
    let got = kernels::attend(&q, &keys, &vals, &seq, &pos, heads)
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
                    "row {r} (sequence {s}, position {p}) head {h} dim {d}: {g} against {want}"
                );
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
