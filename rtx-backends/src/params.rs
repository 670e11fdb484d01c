//! The device-neutral settings of ops that take more than sizes: convolution and pooling
//! windows, fused attention's sizes, and the per-step scalars of the optimizers. Every backend
//! reads them; they belong to none.

/// The settings of a 2-d convolution, per spatial axis `[height, width]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Conv2dParams {
    /// The step between windows.
    pub stride: [usize; 2],
    /// Zeros added on both sides.
    pub padding: [usize; 2],
    /// The step between kernel taps.
    pub dilation: [usize; 2],
    /// Channel groups: input and output channels split into this many independent convolutions.
    pub groups: usize,
}

impl Conv2dParams {
    /// The output size along axis `axis` (0 = height, 1 = width) for an input of `input` and
    /// a kernel of `kernel`, or `None` when the dilated kernel is larger than the padded input
    /// (or a stride or dilation is 0).
    pub fn output_size(&self, axis: usize, input: usize, kernel: usize) -> Option<usize> {
        out_size(
            input,
            kernel,
            self.stride[axis],
            self.padding[axis],
            self.dilation[axis],
        )
    }
}

/// `(input + 2 padding - dilation (kernel - 1) - 1) / stride + 1`, PyTorch's formula.
pub(crate) fn out_size(
    input: usize,
    kernel: usize,
    stride: usize,
    padding: usize,
    dilation: usize,
) -> Option<usize> {
    if stride == 0 || dilation == 0 || kernel == 0 {
        return None;
    }
    let span = dilation * (kernel - 1) + 1;
    let padded = input + 2 * padding;
    (padded >= span).then(|| (padded - span) / stride + 1)
}

/// The settings of a 2-d pooling window, per spatial axis `[height, width]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pool2dParams {
    /// The window size.
    pub kernel: [usize; 2],
    /// The step between windows.
    pub stride: [usize; 2],
    /// Padding on both sides (max pool treats it as -inf, average pool as zeros it counts).
    pub padding: [usize; 2],
}

impl Pool2dParams {
    /// The output size along axis `axis` (0 = height, 1 = width), or `None` when the window is
    /// larger than the padded input (or the stride or kernel is 0).
    pub fn output_size(&self, axis: usize, input: usize) -> Option<usize> {
        if self.kernel[axis] == 0 {
            return None;
        }
        out_size(
            input,
            self.kernel[axis],
            self.stride[axis],
            self.padding[axis],
            1,
        )
    }

    /// Whether windows tile the input without overlap and without padding.
    pub(crate) fn disjoint(&self) -> bool {
        self.kernel == self.stride && self.padding == [0, 0]
    }
}

/// The per-step scalars of an Adam or AdamW update, computed by the caller in `f64` exactly as
/// PyTorch computes them in Python.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamScalars {
    /// `1 - lr * weight_decay` for decoupled decay (AdamW), else 1 (no multiply).
    pub decay: f64,
    /// L2 weight decay added to the gradient (Adam), else 0.
    pub l2: f64,
    /// `beta1`.
    pub beta1: f64,
    /// `beta2`.
    pub beta2: f64,
    /// `sqrt(1 - beta2^step)`.
    pub bias_correction2_sqrt: f64,
    /// `-lr / (1 - beta1^step)`.
    pub neg_step_size: f64,
    /// `eps`.
    pub eps: f64,
}

/// The per-step scalars of an SGD update.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SgdScalars {
    /// The learning rate.
    pub lr: f64,
    /// Momentum factor (0: plain SGD, and no buffer).
    pub momentum: f64,
    /// Dampening of the gradient added to the momentum buffer.
    pub dampening: f64,
    /// L2 weight decay added to the gradient.
    pub weight_decay: f64,
    /// Nesterov momentum.
    pub nesterov: bool,
    /// Whether the momentum buffer is new: it becomes the gradient itself (PyTorch's first
    /// step).
    pub first: bool,
}

/// The sizes and options of one fused attention (`Storage::flash_attention`): `bh` (batch x
/// heads) rows of `t_q` queries over `t_k` keys, head dim `d`, scores scaled by `scale`, and
/// the causal mask (query `i` sees keys `j <= i + t_k - t_q`) when `causal`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionDims {
    /// Batch times heads.
    pub bh: usize,
    /// Queries per row.
    pub t_q: usize,
    /// Keys (and values) per row.
    pub t_k: usize,
    /// Head dim: a multiple of 16 up to 128.
    pub d: usize,
    /// The scores' scale, usually `1 / sqrt(d)`.
    pub scale: f64,
    /// Whether the causal mask applies.
    pub causal: bool,
}
