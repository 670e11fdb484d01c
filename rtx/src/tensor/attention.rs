//! Scaled dot-product attention over `[B, H, T, Dh]` heads, with an optional key-padding
//! mask: `softmax(q kᵀ · scale) v` (PyTorch's `F.scaled_dot_product_attention` with a boolean
//! mask over the keys).
//!
//! Attention is a composition (two batched products and a softmax), and that composition is
//! its definition: it runs on GPUs, in half precision and whenever gradients are recorded.
//! On the CPU in f32 and f64 without a tape it runs in one pass per batch element
//! (`rtx-backends/src/cpu/attention.rs`), held to the composition by the tests below.

use crate::autograd;
use crate::error::{Error, Result, ok};
use crate::shape::{Dim, describe};
use crate::tensor::Tensor;
use rtx_backends::Layout;
use rtx_kernels::{DType, Float};

impl<B: Dim, H: Dim, T: Dim, Dh: Dim, E: Float> Tensor<(B, H, T, Dh), E> {
    /// Attention of these queries over the keys `k` and values `v` (`[B, H, S, Dh]`):
    /// `softmax(q kᵀ · scale) v`, where keys that `key_padding` (`[B, S]`) marks true get no
    /// weight. `scale` is usually `1 / sqrt(Dh)`.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let q: Tensor<(usize, usize, usize, usize)> = Tensor::randn((2, 3, 4, 8), 0, Device::Cpu);
    /// let k: Tensor<(usize, usize, usize, usize)> = Tensor::randn((2, 3, 5, 8), 1, Device::Cpu);
    /// let pad = Tensor::from_vec(vec![false, false, false, true, true, false, false, false, false, false], (2usize, 5usize), Device::Cpu);
    /// let y = q.attention(&k, &k, Some(&pad), 8f64.sqrt().recip());
    /// assert_eq!(y.dims(), &[2, 3, 4, 8]);
    /// ```
    ///
    /// # Panics
    /// When a run-time size of `k`, `v` or the mask does not fit (see
    /// [`Tensor::try_attention`]).
    #[track_caller]
    pub fn attention<S: Dim>(
        &self,
        k: &Tensor<(B, H, S, Dh), E>,
        v: &Tensor<(B, H, S, Dh), E>,
        key_padding: Option<&Tensor<(B, S), bool>>,
        scale: f64,
    ) -> Self {
        ok(self.try_attention(k, v, key_padding, scale))
    }

    /// [`Tensor::attention`], returning an error naming the shapes when they do not fit.
    pub fn try_attention<S: Dim>(
        &self,
        k: &Tensor<(B, H, S, Dh), E>,
        v: &Tensor<(B, H, S, Dh), E>,
        key_padding: Option<&Tensor<(B, S), bool>>,
        scale: f64,
    ) -> Result<Self> {
        let (q_dims, k_dims) = (self.dims(), k.dims());
        let (b, h, t, dh) = (q_dims[0], q_dims[1], q_dims[2], q_dims[3]);
        let s = k_dims[2];
        let mismatch = |what: String, rule| Error::ShapeMismatch {
            op: "attention",
            lhs: describe(&self.shape()),
            rhs: what,
            rule,
        };
        if k_dims[0] != b || k_dims[1] != h || k_dims[3] != dh || v.dims() != k_dims {
            return Err(mismatch(
                format!("k {} and v {}", describe(&k.shape()), describe(&v.shape())),
                "keys and values must be [B, H, S, Dh] with the queries' B, H and Dh",
            ));
        }
        if let Some(m) = key_padding
            && m.dims() != [b, s]
        {
            return Err(mismatch(
                format!("key padding {}", describe(&m.shape())),
                "the key-padding mask must be [B, S]",
            ));
        }
        let recording = autograd::must_record(&[self.node(), k.node(), v.node()]);
        let one_pass =
            !self.device().is_cuda() && matches!(E::DTYPE, DType::F32 | DType::F64) && !recording;
        if one_pass {
            let out = self.storage().attention_cpu(
                self.layout(),
                (k.storage(), k.layout()),
                (v.storage(), v.layout()),
                key_padding.map(|m| (m.storage(), m.layout())),
                scale,
            )?;
            // The storage is [B, T, H, Dh]; seen as [B, H, T, Dh] it needs no copy.
            let layout = Layout::new(&[b, h, t, dh], &[t * h * dh, dh, h * dh, 1], 0);
            return Ok(Tensor::from_storage_layout(out, layout, self.shape()));
        }
        let q = self.try_reshape((b, h, t, dh))?;
        let k = k.try_reshape((b, h, s, dh))?;
        let v = v.try_reshape((b, h, s, dh))?;
        // Scaling the queries touches T x Dh values per head rather than T x S scores.
        let mut scores = (q * E::from_f64(scale)).try_matmul(&k.transpose::<2, 3>())?;
        if let Some(m) = key_padding {
            let m = m.try_reshape((b, 1usize, 1usize, s))?;
            scores = scores.try_masked_fill(
                &m.try_broadcast_to((b, h, t, s))?,
                E::from_f64(f64::NEG_INFINITY),
            )?;
        }
        let y = scores.softmax::<3>().try_matmul(&v)?;
        y.try_reshape(self.shape())
    }
}

#[cfg(test)]
mod tests {
    use crate::prelude::*;

    type Heads<E> = Tensor<(usize, usize, usize, usize), E>;

    /// The one-pass CPU attention against the composition it stands for (forced by asking
    /// for gradients), with and without padding, in f32 and f64.
    #[test]
    fn one_pass_attention_is_the_composition() {
        let (b, h, t, s, dh) = (3usize, 2usize, 5usize, 7usize, 4usize);
        let pad: Vec<bool> = (0..b * s).map(|i| i % s >= s - i / s).collect();
        let pad = Tensor::from_vec(pad, (b, s), Device::Cpu);
        for mask in [None, Some(&pad)] {
            let q: Heads<f64> = Tensor::randn((b, h, t, dh), 1, Device::Cpu);
            let k: Heads<f64> = Tensor::randn((b, h, s, dh), 2, Device::Cpu);
            let v: Heads<f64> = Tensor::randn((b, h, s, dh), 3, Device::Cpu);
            let fast = q.attention(&k, &v, mask, 0.5).to_vec();
            let slow = q
                .clone()
                .requires_grad()
                .attention(&k, &v, mask, 0.5)
                .to_vec();
            for (f, s) in fast.iter().zip(&slow) {
                assert!((f - s).abs() < 1e-12, "{f} vs {s}");
            }
            let q32: Heads<f32> = q.cast();
            let (k32, v32): (Heads<f32>, Heads<f32>) = (k.cast(), v.cast());
            let fast = q32.attention(&k32, &v32, mask, 0.5).to_vec();
            for (f, s) in fast.iter().zip(&slow) {
                assert!((f64::from(*f) - s).abs() < 1e-5, "{f} vs {s}");
            }
        }
    }

    #[test]
    fn shapes_that_do_not_fit_are_named() {
        let q: Heads<f32> = Tensor::zeros((2, 2, 3, 4), Device::Cpu);
        let k: Heads<f32> = Tensor::zeros((2, 2, 5, 3), Device::Cpu);
        let e = q.try_attention(&k, &k, None, 1.0).unwrap_err().to_string();
        assert!(e.contains("k [2, 2, 5, 3]"), "{e}");
        let k: Heads<f32> = Tensor::zeros((2, 2, 5, 4), Device::Cpu);
        let pad: Tensor<(usize, usize), bool> = Tensor::full((2, 4), false, Device::Cpu);
        let e = q
            .try_attention(&k, &k, Some(&pad), 1.0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("key padding [2, 4]"), "{e}");
    }
}
