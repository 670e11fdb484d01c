//! The device-neutral settings of ops that take more than sizes: convolution and pooling
//! windows, fused attention's sizes and operand layout, and the per-step scalars of the
//! optimizers. Every backend
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

/// The sizes and options of one fused attention (`Storage::flash_attention`): `batch x heads`
/// rows of `t_q` queries over `t_k` keys, head dim `d`, scores scaled by `scale`, and the
/// causal mask (query `i` sees keys `j <= i + t_k - t_q`) when `causal`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionDims {
    /// Batch elements.
    pub batch: usize,
    /// Heads per batch element.
    pub heads: usize,
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

impl AttentionDims {
    /// Batch times heads: the rows of the log-sum-exp `[batch heads, t_q]`.
    pub fn rows(&self) -> usize {
        self.batch * self.heads
    }
}

/// Where one group of fused attention's operands lies, each seen as `[batch, heads, t, d]`:
/// element `c` of row `i` of head `h` of batch element `n` is at
/// `offset + n batch + h head + i row + c` of its buffer (strides in elements; the head dim is
/// contiguous, and the offset is the operand's own, [`AttentionLayout::offsets`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HeadStrides {
    /// The step between batch elements.
    pub batch: usize,
    /// The step between heads.
    pub head: usize,
    /// The step between rows (queries or keys) of one head.
    pub row: usize,
}

impl HeadStrides {
    /// Dense `[batch, heads, t, d]` buffers, that is `[batch heads, t, d]`.
    ///
    /// ```
    /// # use rtx_backends::HeadStrides;
    /// let s = HeadStrides::dense(8, 256, 64);
    /// assert_eq!((s.batch, s.head, s.row), (8 * 256 * 64, 256 * 64, 64));
    /// ```
    pub fn dense(heads: usize, t: usize, d: usize) -> Self {
        HeadStrides {
            batch: heads * t * d,
            head: t * d,
            row: d,
        }
    }

    /// Heads side by side in rows of `width` elements, `t` rows per batch element: the
    /// `[batch, t, width]` output of a projection, whose columns `h d..(h + 1) d` (past the
    /// operand's offset) are head `h`.
    ///
    /// ```
    /// # use rtx_backends::HeadStrides;
    /// // Queries, keys or values in a fused [batch, 256, 3 * 512] projection, heads of 64.
    /// let s = HeadStrides::tokens(256, 1536, 64);
    /// assert_eq!((s.batch, s.head, s.row), (256 * 1536, 64, 1536));
    /// ```
    pub fn tokens(t: usize, width: usize, d: usize) -> Self {
        HeadStrides {
            batch: t * width,
            head: d,
            row: width,
        }
    }

    /// The `(size, stride)` of each axis of `[batch, heads, t, d]` seen through these strides.
    pub(crate) fn axes(&self, dims: &AttentionDims, t: usize) -> [(usize, usize); 4] {
        [
            (dims.batch, self.batch),
            (dims.heads, self.head),
            (t, self.row),
            (dims.d, 1),
        ]
    }

    /// Whether an operand of `t` rows seen through these strides from offset 0 fills a buffer
    /// of `batch heads t d` elements exactly, each element once: what an output written
    /// through them needs, so that no element of its buffer is left unwritten.
    ///
    /// ```
    /// # use rtx_backends::{AttentionDims, HeadStrides};
    /// let dims = AttentionDims { batch: 2, heads: 8, t_q: 256, t_k: 256, d: 64, scale: 0.125, causal: true };
    /// assert!(HeadStrides::tokens(256, 512, 64).fills(&dims, 256));
    /// // Every third head's worth of a fused projection leaves gaps.
    /// assert!(!HeadStrides::tokens(256, 1536, 64).fills(&dims, 256));
    /// ```
    pub fn fills(&self, dims: &AttentionDims, t: usize) -> bool {
        tiles(&self.axes(dims, t), dims.rows() * t * dims.d)
    }
}

/// Whether the places `sum(i_a stride_a)` over `i_a < size_a` cover `0..len` exactly once: true
/// exactly when the axes longer than 1, in increasing stride order, have the strides of a dense
/// row-major layout (each the product of the sizes below it) and the sizes multiply to `len`.
pub(crate) fn tiles(axes: &[(usize, usize)], len: usize) -> bool {
    if axes.iter().any(|&(size, _)| size == 0) {
        return len == 0;
    }
    let mut long: Vec<(usize, usize)> = axes.iter().copied().filter(|a| a.0 > 1).collect();
    long.sort_by_key(|&(_, stride)| stride);
    let mut next = 1;
    for (size, stride) in long {
        if stride != next {
            return false;
        }
        next *= size;
    }
    next == len
}

/// Where fused attention's operands lie in their buffers (`Storage::flash_attention`): the
/// strides of three groups, each shared by the operands read or written alike, and the offsets
/// of q, k and v. The forward writes `o` through `o`'s strides into a new buffer, which they
/// must fill ([`HeadStrides::fills`]); the backward reads `o` and its gradient through them
/// too, and writes dq through `q`'s strides and dk, dv through `k`'s: when `packed`, into one
/// new buffer like the one q, k and v share, each at its input's offset (a fused projection's
/// gradient); otherwise each into a new buffer of its own from offset 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AttentionLayout {
    /// The queries' strides, and their gradient's.
    pub q: HeadStrides,
    /// The keys' and values' strides, and their gradients'.
    pub k: HeadStrides,
    /// The output's strides, and its gradient's (which starts at offset 0).
    pub o: HeadStrides,
    /// The element offsets of q, k and v in their buffers (and of their gradients, when
    /// `packed`).
    pub offsets: [usize; 3],
    /// Whether q, k and v are one buffer whose gradient is one buffer too.
    pub packed: bool,
}

impl AttentionLayout {
    /// Dense `[batch heads, t, d]` buffers for every operand, each gradient a buffer of its
    /// own.
    pub fn dense(dims: &AttentionDims) -> Self {
        let q = HeadStrides::dense(dims.heads, dims.t_q, dims.d);
        AttentionLayout {
            q,
            k: HeadStrides::dense(dims.heads, dims.t_k, dims.d),
            o: q,
            offsets: [0; 3],
            packed: false,
        }
    }

    /// Self-attention over a fused projection's output `[batch, t, 3 heads d]` (q in columns
    /// `0..heads d`, k in the next `heads d`, v in the last), read in place, with the output
    /// written as `[batch, t, heads d]` (the heads side by side, ready for the output
    /// projection) and the gradients of q, k and v as one `[batch, t, 3 heads d]` buffer.
    ///
    /// ```
    /// # use rtx_backends::{AttentionDims, AttentionLayout};
    /// let dims = AttentionDims { batch: 2, heads: 8, t_q: 256, t_k: 256, d: 64, scale: 0.125, causal: true };
    /// let l = AttentionLayout::qkv(&dims);
    /// assert_eq!((l.q.row, l.o.row, l.offsets), (1536, 512, [0, 512, 1024]));
    /// ```
    pub fn qkv(dims: &AttentionDims) -> Self {
        let w = dims.heads * dims.d;
        let s = HeadStrides::tokens(dims.t_q, 3 * w, dims.d);
        AttentionLayout {
            q: s,
            k: s,
            o: HeadStrides::tokens(dims.t_q, w, dims.d),
            offsets: [0, w, 2 * w],
            packed: true,
        }
    }

    /// Why the fused kernels cannot take operands in this layout, if they cannot: a stride or
    /// offset that is not a multiple of 8 elements (the kernels copy 16-byte chunks), an
    /// output that its strides do not fill exactly ([`HeadStrides::fills`]), or, when
    /// `packed`, gradients that do not fill one buffer of `3 batch heads t d` elements together
    /// (q at offset 0, k at some `w` with q's strides, v at `2 w`, and `t_q == t_k`).
    ///
    /// ```
    /// # use rtx_backends::{AttentionDims, AttentionLayout, HeadStrides};
    /// let dims = AttentionDims { batch: 2, heads: 8, t_q: 256, t_k: 256, d: 64, scale: 0.125, causal: true };
    /// assert!(AttentionLayout::qkv(&dims).check(&dims).is_ok());
    /// let mut odd = AttentionLayout::dense(&dims);
    /// odd.offsets[1] = 4;
    /// assert!(odd.check(&dims).unwrap_err().contains("multiples of 8"));
    /// ```
    pub fn check(&self, dims: &AttentionDims) -> Result<(), String> {
        let groups = [("q", &self.q), ("k", &self.k), ("o", &self.o)];
        for (name, s) in groups {
            if [s.batch, s.head, s.row].iter().any(|x| x % 8 != 0) {
                return Err(format!(
                    "{name}'s strides {:?} are not multiples of 8 elements (the kernels copy \
                     16-byte chunks)",
                    [s.batch, s.head, s.row]
                ));
            }
        }
        if self.offsets.iter().any(|x| x % 8 != 0) {
            return Err(format!(
                "the offsets of q, k and v {:?} are not multiples of 8 elements (the kernels \
                 copy 16-byte chunks)",
                self.offsets
            ));
        }
        let shape = |t: usize| format!("[{}, {}, {t}, {}]", dims.batch, dims.heads, dims.d);
        let strides = |s: &HeadStrides| format!("[{}, {}, {}, 1]", s.batch, s.head, s.row);
        if !self.o.fills(dims, dims.t_q) {
            return Err(format!(
                "the output {} through strides {} would not fill its buffer exactly",
                shape(dims.t_q),
                strides(&self.o)
            ));
        }
        if self.packed {
            let w = self.offsets[1];
            let mut axes = self.q.axes(dims, dims.t_q).to_vec();
            axes.push((3, w));
            let fills = dims.t_q == dims.t_k
                && self.q == self.k
                && self.offsets == [0, w, 2 * w]
                && tiles(&axes, 3 * dims.rows() * dims.t_q * dims.d);
            if !fills {
                return Err(format!(
                    "packed gradients of q {} and k, v {} through strides {} and {} at offsets \
                     {:?} would not fill one buffer exactly",
                    shape(dims.t_q),
                    shape(dims.t_k),
                    strides(&self.q),
                    strides(&self.k),
                    self.offsets
                ));
            }
        } else {
            for (name, s, t) in [("q", &self.q, dims.t_q), ("k and v", &self.k, dims.t_k)] {
                if !s.fills(dims, t) {
                    return Err(format!(
                        "the gradients of {name} {} through strides {} would not fill their \
                         buffers exactly",
                        shape(t),
                        strides(s)
                    ));
                }
            }
        }
        Ok(())
    }
}
