//! What the fused attention tests (`flash_attention.rs`, `flash_attention_bwd.rs`,
//! `flash_attention_strided.rs`) share: an attention problem and reproducible 16-bit inputs.

use rtx_kernels::Float;
use rtx_kernels::kernel::KernelStrides;
use rtx_kernels::kernels::flash_attn_dense_strides;

/// One attention problem, over dense `[bh, t, d]` buffers (run as one batch element of `bh`
/// heads).
#[derive(Clone, Debug)]
pub struct Case {
    pub bh: usize,
    pub t_q: usize,
    pub t_k: usize,
    pub d: usize,
    pub causal: bool,
    /// Valid keys per `bh` row, when padded.
    pub key_len: Option<Vec<u32>>,
}

/// A problem without key padding.
pub fn case(bh: usize, t_q: usize, t_k: usize, d: usize, causal: bool) -> Case {
    Case {
        bh,
        t_q,
        t_k,
        d,
        causal,
        key_len: None,
    }
}

/// A problem whose `bh` rows have `lens` valid keys each.
pub fn padded(bh: usize, t_q: usize, t_k: usize, d: usize, causal: bool, lens: &[u32]) -> Case {
    Case {
        key_len: Some(lens.to_vec()),
        ..case(bh, t_q, t_k, d, causal)
    }
}

/// Reproducible values in `[-amp, amp)` rounded to `T`, with their exact values.
pub fn input<T: Float>(len: usize, seed: u64, amp: f64) -> (Vec<T>, Vec<f64>) {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let vals: Vec<T> = (0..len)
        .map(|_| {
            // xorshift64*
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            let r = (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64;
            T::from_f64(amp * (2.0 * r - 1.0))
        })
        .collect();
    let exact = vals.iter().map(|v| v.to_f64()).collect();
    (vals, exact)
}

impl Case {
    /// The kernels' strides of this case's dense buffers of `t` rows.
    pub fn strides(&self, t: usize) -> KernelStrides {
        flash_attn_dense_strides(self.bh, t, self.d)
    }
}
