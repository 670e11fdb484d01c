//! Quantized tensors: [`QTensor`] holds the raw blocks of one of ggml's types ([`GgmlType`])
//! on a device, with its dims, and dequantizes them into a typed [`Tensor`] on that device.
//!
//! ```
//! use rtx::prelude::*;
//! use rtx::quant::{GgmlType, QTensor};
//!
//! # fn main() -> rtx::Result<()> {
//! // One Q8_0 block: an f16 scale of 0.5 (0x3800), then 32 signed bytes.
//! let mut block = vec![0x00, 0x38];
//! block.extend((0..32).map(|i| (i as i8 - 16) as u8));
//! let q = QTensor::from_bytes(&block, &[1, 32], GgmlType::Q8_0, Device::Cpu)?;
//! let w: Tensor<Rank2<1, 32>> = q.dequantize()?;
//! assert_eq!(w.to_vec()[..3], [-8.0, -7.5, -7.0]);
//! let w16: Tensor<(usize, Const<32>), f16> = q.dequantize()?; // rounded once from f32
//! assert_eq!(w16.dims(), &[1, 32]);
//! # Ok(())
//! # }
//! ```
//!
//! **Exactness.** Dequantization computes in f32 and is bit for bit `gguf.quants.dequantize`
//! of the `gguf` Python package (version 0.19.0), operation for operation, on the CPU and on
//! CUDA: every f16 scale is widened exactly, and the products that feed an addition are exact
//! in f32, so a fused multiply-add on the GPU cannot change a result. Another element type
//! is the f32 result rounded once. (NaN inputs give a NaN, though not necessarily with the
//! same payload bits.)
//!
//! **Layout.** A tensor's dims are row-major, outermost first; its last dim is the row, whose
//! elements are stored contiguously in blocks, so it must be a whole number of blocks. The raw
//! blocks are held as little-endian 32-bit words (padded with zero bytes to a multiple of 4),
//! which the dequantization kernel reads a word at a time.

pub(crate) mod types;

pub use types::GgmlType;

use crate::error::{Error, Result};
use crate::shape::Shape;
use crate::tensor::Tensor;
use rtx_backends::Device;
use rtx_kernels::Float;
use std::any::Any;

/// Quantized data of one ggml type on a device: raw blocks, dims and type.
#[derive(Clone, Debug)]
pub struct QTensor {
    /// The blocks' bytes as little-endian words, zero-padded to a multiple of 4 bytes.
    words: Tensor<(usize,), i32>,
    bytes: usize,
    dims: Vec<usize>,
    ty: GgmlType,
}

impl QTensor {
    /// A quantized tensor of `dims` (row-major) and type `ty` from its raw blocks, copied to
    /// `device`. An error when the last dim is not a whole number of blocks or `bytes` is not
    /// the size of `dims` in `ty`.
    pub fn from_bytes(
        bytes: &[u8],
        dims: &[usize],
        ty: GgmlType,
        device: Device,
    ) -> Result<QTensor> {
        let bad = |msg: String| {
            Err(Error::BadArgument {
                op: "QTensor::from_bytes",
                msg,
            })
        };
        let row = dims.last().copied().unwrap_or(1);
        if !row.is_multiple_of(ty.block_size()) {
            return bad(format!(
                "dims {dims:?}: rows of {row} elements are not a whole number of {ty} blocks of {}",
                ty.block_size()
            ));
        }
        let numel = dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        let Some(want) = numel.and_then(|n| ty.bytes_for(n)) else {
            return bad(format!("dims {dims:?} overflow the address space"));
        };
        if bytes.len() != want {
            return bad(format!(
                "{} bytes given, but {dims:?} of {ty} take {want}",
                bytes.len()
            ));
        }
        let words: Vec<i32> = bytes
            .chunks(4)
            .map(|c| {
                let mut w = [0u8; 4];
                w[..c.len()].copy_from_slice(c);
                i32::from_le_bytes(w)
            })
            .collect();
        let n = words.len();
        Ok(QTensor {
            words: Tensor::try_from_vec(words, (n,), device)?,
            bytes: want,
            dims: dims.to_vec(),
            ty,
        })
    }

    /// The blocks' bytes as little-endian words, zero-padded to a multiple of 4 bytes: what a
    /// `#[kernel]` decoding them takes as a `&[i32]` parameter ([`crate::kernel::Arg::words`]),
    /// with the formulas of `rtx::kernels::ggml_octet`.
    pub fn words(&self) -> &Tensor<(usize,), i32> {
        &self.words
    }

    /// The dims, row-major (outermost first).
    pub fn dims(&self) -> &[usize] {
        &self.dims
    }

    /// The number of elements.
    pub fn numel(&self) -> usize {
        self.dims.iter().product()
    }

    /// The ggml type of the blocks.
    pub fn ggml_type(&self) -> GgmlType {
        self.ty
    }

    /// The device holding the blocks.
    pub fn device(&self) -> Device {
        self.words.device()
    }

    /// The size of the blocks in bytes.
    pub fn size_bytes(&self) -> usize {
        self.bytes
    }

    /// The raw blocks, copied back to the host.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out: Vec<u8> = self
            .words
            .to_vec()
            .into_iter()
            .flat_map(i32::to_le_bytes)
            .collect();
        out.truncate(self.bytes);
        out
    }

    /// The same blocks on `device`.
    pub fn to_device(&self, device: Device) -> Result<QTensor> {
        Ok(QTensor {
            words: self.words.try_to_device(device)?,
            ..self.clone()
        })
    }

    /// The values as a tensor of shape `S` and element type `E` on the same device: computed in
    /// f32 as `gguf.quants.dequantize` does (module docs), then rounded once to `E`. An error
    /// names both shapes when `S` cannot hold the dims.
    pub fn dequantize<S: Shape, E: Float>(&self) -> Result<Tensor<S, E>> {
        let Some(shape) = S::from_dims(&self.dims) else {
            return Err(Error::ShapeMismatch {
                op: "QTensor::dequantize",
                lhs: format!("{:?} ({})", self.dims, self.ty),
                rhs: describe_type::<S>(),
                rule: "the shape asked for must have the quantized tensor's dims",
            });
        };
        let n = self.numel();
        let storage = self.words.storage().dequantize_ggml(
            self.ty.id(),
            self.ty.block_size(),
            self.ty.type_size(),
            n,
        )?;
        let values: Tensor<S, f32> = Tensor::from_storage(storage, shape);
        // f32 is returned as it is; another type is one rounding of it.
        let any: Box<dyn Any> = Box::new(values);
        match any.downcast::<Tensor<S, E>>() {
            Ok(t) => Ok(*t),
            Err(any) => match any.downcast::<Tensor<S, f32>>() {
                Ok(t) => t.try_cast::<E>(),
                Err(_) => Err(Error::BadArgument {
                    op: "QTensor::dequantize",
                    msg: "internal: the f32 result changed type".into(),
                }),
            },
        }
    }
}

impl QTensor {
    /// `x · selfᵀ` for this quantized weight `[N, K]` (a Linear's weight, ggml's layout) and
    /// f32 activations `x` `[M, K]`, as `[M, N]`, without dequantizing the weight: on the
    /// CPU each row of `x` is quantized to 8 bits per block of 32 on the fly (with llama.cpp's
    /// rounding: an f16 scale per block) and every block pair is one integer dot product, as
    /// llama.cpp does; on a GPU each weight block is
    /// decoded in registers and multiplied with the f32 activations. `Q8_0` and `Q4_1`
    /// weights; other types are an error (dequantize those).
    ///
    /// ```
    /// use rtx::prelude::*;
    /// use rtx::quant::{GgmlType, QTensor};
    ///
    /// # fn main() -> rtx::Result<()> {
    /// // A [1, 32] Q8_0 weight of 0.5 * (1, 1, ..., 1).
    /// let mut block = vec![0x00, 0x38];
    /// block.extend([1u8; 32]);
    /// let w = QTensor::from_bytes(&block, &[1, 32], GgmlType::Q8_0, Device::Cpu)?;
    /// // Activations of 127 quantize exactly (scale 1, values 127); others are rounded to 8
    /// // bits per block with an f16 scale, as llama.cpp rounds them (1.0 gives 15.999).
    /// let x: Tensor<(usize, usize)> = Tensor::try_from_vec(vec![127.0; 64], (2, 32), Device::Cpu)?;
    /// assert_eq!(w.matmul_t(&x)?.to_vec(), vec![2032.0, 2032.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn matmul_t(&self, x: &Tensor<(usize, usize), f32>) -> Result<Tensor<(usize, usize), f32>> {
        let (m, k) = (x.dims()[0], x.dims()[1]);
        let [n, wk] = self.dims[..] else {
            return Err(Error::BadArgument {
                op: "QTensor::matmul_t",
                msg: format!("the weight {:?} is not a matrix [N, K]", self.dims),
            });
        };
        if wk != k {
            return Err(Error::ShapeMismatch {
                op: "QTensor::matmul_t",
                lhs: format!("[{m}, {k}]"),
                rhs: format!("{:?} ({})", self.dims, self.ty),
                rule: "the activations' last dim must be the weight's K ([M, K] by [N, K])",
            });
        }
        let out = self
            .words
            .storage()
            .qmatmul(self.ty.id(), (n, k), x.storage(), x.layout())?;
        Ok(Tensor::from_storage(out, (m, n)))
    }
}

/// What [`QTensor::matmul_t_joined`] and [`QTensor::matmul_t_swiglu`] take the rows of their
/// activations as.
#[derive(Clone, Copy, Debug, Default)]
pub enum QInput<'a> {
    /// `[M, K]` as they are.
    #[default]
    Rows,
    /// `[M, K]` RMS-normed first, `x / sqrt(mean(x²) + eps) * weight` ([`crate::nn::rms_norm`]):
    /// the weight (`[K]`) and `eps`.
    RmsNorm(&'a Tensor<(usize,), f32>, f64),
}

impl QTensor {
    /// `input(x) · Wᵀ + residual`: [`QTensor::matmul_t`] with a decoding block's neighbours
    /// joined to it. `input` says what the rows are ([`QInput`]: as they are, or RMS-normed);
    /// `residual` (`[M, N]`), if given, is added to the product. On a GPU a product of up to
    /// 63 rows (a decoding step) is one launch with both joined, where the composition takes
    /// three; more rows (a prefill, on the tensor cores) take the norm's launch, then the
    /// product with the residual added in it. On the CPU they run in turn. No gradient is
    /// recorded (a quantized weight is for inference).
    ///
    /// # Errors
    /// As [`QTensor::matmul_t`]; and [`Error::ShapeMismatch`] when the norm's weight is not
    /// `[K]` or the residual not `[M, N]`.
    ///
    /// ```
    /// use rtx::prelude::*;
    /// use rtx::quant::{GgmlType, QInput, QTensor};
    ///
    /// # fn main() -> rtx::Result<()> {
    /// // A [1, 32] Q8_0 weight of 0.5 * (1, 1, ..., 1).
    /// let mut block = vec![0x00, 0x38];
    /// block.extend([1u8; 32]);
    /// let w = QTensor::from_bytes(&block, &[1, 32], GgmlType::Q8_0, Device::Cpu)?;
    /// // Rows of 2s: RMS-normed (weight 1) they are rows of 1s, whose product is 16.
    /// let x: Tensor<(usize, usize)> = Tensor::try_from_vec(vec![2.0; 64], (2, 32), Device::Cpu)?;
    /// let g: Tensor<(usize,)> = Tensor::try_from_vec(vec![1.0; 32], (32,), Device::Cpu)?;
    /// let r: Tensor<(usize, usize)> = Tensor::try_from_vec(vec![1.0, 2.0], (2, 1), Device::Cpu)?;
    /// let y = w.matmul_t_joined(&x, QInput::RmsNorm(&g, 0.0), Some(&r))?.to_vec();
    /// assert!((y[0] - 17.0).abs() < 0.1 && (y[1] - 18.0).abs() < 0.1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn matmul_t_joined(
        &self,
        x: &Tensor<(usize, usize), f32>,
        input: QInput<'_>,
        residual: Option<&Tensor<(usize, usize), f32>>,
    ) -> Result<Tensor<(usize, usize), f32>> {
        const OP: &str = "QTensor::matmul_t_joined";
        let (m, n) = self.check_joined(OP, x, input)?;
        if let Some(r) = residual
            && r.dims() != [m, n]
        {
            return Err(Error::ShapeMismatch {
                op: OP,
                lhs: format!("product [{m}, {n}]"),
                rhs: format!("residual {:?}", r.dims()),
                rule: "the residual is the product's shape ([M, N])",
            });
        }
        self.joined(x, input, false, residual.map(|r| (r.storage(), r.layout())))
    }

    /// SwiGLU of a gated feed-forward's two projections in one product: `self` is `[2 F, K]`,
    /// the gate's `F` rows then the up projection's, and the result `[M, F]` is
    /// `silu(x · gateᵀ) * (x · upᵀ)`, the rows of `x` taken as `input` says. On a GPU, up to
    /// 63 rows (a decoding step), one launch in which each output's two sums are taken
    /// together, where the composition takes three (a prefill on the tensor cores: the
    /// product, then SwiGLU's launch); on the CPU they run in turn. No gradient is recorded.
    ///
    /// # Errors
    /// As [`QTensor::matmul_t_joined`]; and [`Error::ShapeMismatch`] when the weight's rows
    /// are odd (not two halves).
    ///
    /// ```
    /// use rtx::prelude::*;
    /// use rtx::quant::{GgmlType, QInput, QTensor};
    ///
    /// # fn main() -> rtx::Result<()> {
    /// // Gate row 0.5 * (1, ..., 1) and up row 0.5 * (2, ..., 2), Q8_0.
    /// let mut bytes = vec![0x00, 0x38];
    /// bytes.extend([1u8; 32]);
    /// bytes.extend([0x00, 0x38]);
    /// bytes.extend([2u8; 32]);
    /// let w = QTensor::from_bytes(&bytes, &[2, 32], GgmlType::Q8_0, Device::Cpu)?;
    /// let x: Tensor<(usize, usize)> = Tensor::try_from_vec(vec![0.125; 32], (1, 32), Device::Cpu)?;
    /// // gate = 2, up = 4: silu(2) * 4.
    /// let y = w.matmul_t_swiglu(&x, QInput::Rows)?.to_vec();
    /// let want = 2.0 / (1.0 + (-2.0f32).exp()) * 4.0;
    /// assert!((y[0] - want).abs() < 1e-2); // the CPU quantizes x to 8 bits per 32 values
    /// # Ok(())
    /// # }
    /// ```
    pub fn matmul_t_swiglu(
        &self,
        x: &Tensor<(usize, usize), f32>,
        input: QInput<'_>,
    ) -> Result<Tensor<(usize, usize), f32>> {
        const OP: &str = "QTensor::matmul_t_swiglu";
        let (_, n) = self.check_joined(OP, x, input)?;
        if n % 2 != 0 {
            return Err(Error::ShapeMismatch {
                op: OP,
                lhs: format!("activations {:?}", x.dims()),
                rhs: format!("{:?} ({})", self.dims, self.ty),
                rule: "SwiGLU's weight is the gate's rows then the up projection's ([2 F, K])",
            });
        }
        self.joined(x, input, true, None)
    }

    /// The dims `[M, N]` of `x · selfᵀ`, or an error naming the weight, the activations or
    /// the norm's weight that do not fit.
    fn check_joined(
        &self,
        op: &'static str,
        x: &Tensor<(usize, usize), f32>,
        input: QInput<'_>,
    ) -> Result<(usize, usize)> {
        let (m, k) = (x.dims()[0], x.dims()[1]);
        let [n, wk] = self.dims[..] else {
            return Err(Error::BadArgument {
                op,
                msg: format!("the weight {:?} is not a matrix [N, K]", self.dims),
            });
        };
        if wk != k {
            return Err(Error::ShapeMismatch {
                op,
                lhs: format!("[{m}, {k}]"),
                rhs: format!("{:?} ({})", self.dims, self.ty),
                rule: "the activations' last dim must be the weight's K ([M, K] by [N, K])",
            });
        }
        if let QInput::RmsNorm(g, _) = input
            && g.dims() != [k]
        {
            return Err(Error::ShapeMismatch {
                op,
                lhs: format!("activations [{m}, {k}]"),
                rhs: format!("norm weight {:?}", g.dims()),
                rule: "the norm's weight is as long as a row of the activations ([K])",
            });
        }
        Ok((m, n))
    }

    /// The checked product with its neighbours: the backend's joined product.
    fn joined(
        &self,
        x: &Tensor<(usize, usize), f32>,
        input: QInput<'_>,
        swiglu: bool,
        residual: Option<(&rtx_backends::storage::Storage<f32>, &rtx_backends::Layout)>,
    ) -> Result<Tensor<(usize, usize), f32>> {
        use rtx_backends::storage::{QInput as Rows, QJoin};
        let (m, k) = (x.dims()[0], x.dims()[1]);
        let n = self.dims[0];
        let join = QJoin {
            input: match input {
                QInput::Rows => Rows::Rows,
                QInput::RmsNorm(g, eps) => Rows::RmsNorm(g.storage(), g.layout(), eps),
            },
            swiglu,
            residual,
        };
        let out = self.words.storage().qmatmul_joined(
            self.ty.id(),
            (n, k),
            x.storage(),
            x.layout(),
            join,
        )?;
        let cols = if swiglu { n / 2 } else { n };
        Ok(Tensor::from_storage(out, (m, cols)))
    }
}

/// A shape type as messages show it: static dims as numbers, named run-time dims by name,
/// other run-time dims as `_` (`[_, 4096]`).
fn describe_type<S: Shape>() -> String {
    let parts: Vec<String> = (0..S::RANK)
        .map(|i| match (S::STATIC_DIMS[i], S::NAMES[i]) {
            (Some(d), _) => d.to_string(),
            (None, Some(c)) => c.to_string(),
            (None, None) => "_".to_string(),
        })
        .collect();
    format!("[{}]", parts.join(", "))
}
