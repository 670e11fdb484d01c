//! Convolutions (`conv1d`, `conv2d`, with or without bias) and 2-d pooling (`max_pool2d`,
//! `avg_pool2d`) over `[N, C, ..]` tensors.
//!
//! Settings are types ([`Conv`], [`GroupedConv`], [`Pool`]); output sizes are stated by the
//! caller's type and verified (see [`crate::shape::conv`]). Bias: use `conv2d_bias` /
//! `conv1d_bias`, which add a `[O]` bias inside the convolution (one rounding for f16 and
//! bf16); implicit broadcasting cannot add a `[O]` bias to `[N, O, H, W]` because it only
//! matches trailing dims.

use super::Tensor;
use crate::autograd;
use crate::error::{Result, bail, ok};
use crate::rules;
use crate::shape::conv::{ConvOptions, conv as check_conv, pool};
use crate::shape::{Dim, Shape, describe};
use rtx_backends::{Conv2dParams, Pool2dParams};
use rtx_backends::{Layout, Storage};
use rtx_kernels::op::PoolOp;
use rtx_kernels::{Element, Float};

pub use crate::shape::conv::{Conv, GroupedConv, Pool};

/// One operand of a convolution, lifted to 4-d, with its description for messages.
struct ConvInput<'a, E> {
    storage: &'a Storage<E>,
    layout: Layout,
    desc: String,
}

impl<'a, E: Float> ConvInput<'a, E> {
    fn new<S: Shape>(t: &'a Tensor<S, E>) -> Self {
        let l = t.layout();
        // A 1-d operand [N, C, L] becomes [N, C, 1, L]; the new axis has size 1, so any
        // stride will do.
        let layout = if S::RANK == 3 {
            let (d, s) = (l.dims(), l.strides());
            Layout::new(&[d[0], d[1], 1, d[2]], &[s[0], s[1], 0, s[2]], l.offset())
        } else {
            *l
        };
        ConvInput {
            storage: t.storage(),
            layout,
            desc: describe(&t.shape()),
        }
    }
}

/// The const check of a convolution's sizes, named after its rank: short enough that each
/// method's `const` block stays on the one line rustc quotes in the error.
#[track_caller]
pub(crate) const fn conv_check<X: Shape, W: Shape, Y: Shape>(
    settings: (usize, usize, usize, usize),
) {
    let op = if X::RANK == 3 { "conv1d" } else { "conv2d" };
    check_conv::<X, W, Y>(op, X::RANK - 2, settings);
}

/// The settings of a convolution over `spatial` axes (a 1-d one runs as height 1).
fn conv_params<C: Dim, CG: Dim, O: ConvOptions<C, CG>>(spatial: usize) -> Conv2dParams {
    let lift = |v: usize, one: usize| if spatial == 1 { [one, v] } else { [v, v] };
    Conv2dParams {
        stride: lift(O::STRIDE, 1),
        padding: lift(O::PADDING, 0),
        dilation: lift(O::DILATION, 1),
        groups: O::GROUPS,
    }
}

/// Checks run-time sizes, runs the convolution and returns it with the result shape `Y`.
fn run_conv<E: Float, Y: Shape>(
    op: &'static str,
    x: ConvInput<'_, E>,
    w: ConvInput<'_, E>,
    bias: Option<ConvInput<'_, E>>,
    p: &Conv2dParams,
    spatial: usize,
) -> Result<(Storage<E>, Y)> {
    // Both operands were lifted to 4-d by `ConvInput::new`.
    let (xd, wdims) = (x.layout.dims(), w.layout.dims());
    let (n, c, h, wd) = (xd[0], xd[1], xd[2], xd[3]);
    let (o, cg, kh, kw) = (wdims[0], wdims[1], wdims[2], wdims[3]);
    let (xs, ws, g) = (&x.desc, &w.desc, p.groups);
    if c != cg * g {
        if g == 1 {
            bail!(
                op,
                "input {xs} has {c} channels, but weight {ws} expects {cg}"
            );
        }
        bail!(
            op,
            "input {xs} has {c} channels, but weight {ws} takes {cg} per group x {g} groups = {}",
            cg * g
        );
    }
    if o % g != 0 {
        bail!(
            op,
            "{g} groups do not divide the {o} output channels of weight {ws}"
        );
    }
    let axes = [("height", h, kh), ("width", wd, kw)];
    let mut out = [n, o, 0, 0];
    for (a, &(name, input, kernel)) in axes.iter().enumerate() {
        let name = if spatial == 1 { "length" } else { name };
        match p.output_size(a, input, kernel) {
            Some(size) => out[2 + a] = size,
            None => bail!(
                op,
                "the kernel {name} {kernel} (dilation {}) does not fit the input {name} {input} with padding {} (input {xs}, weight {ws})",
                p.dilation[a],
                p.padding[a]
            ),
        }
    }
    if let Some(b) = &bias
        && b.layout.dims() != [o]
    {
        bail!(
            op,
            "bias {} does not match the {o} output channels of weight {ws}",
            b.desc
        );
    }
    let out_dims = if spatial == 1 {
        vec![n, o, out[3]]
    } else {
        out.to_vec()
    };
    let Some(shape) = Y::from_dims(&out_dims) else {
        bail!(
            op,
            "input {xs} with weight {ws} gives output {out_dims:?}, which does not fit the result type"
        );
    };
    let bias = bias.as_ref().map(|b| (b.storage, &b.layout));
    let storage = x.storage.conv2d(&x.layout, w.storage, &w.layout, bias, p)?;
    Ok((storage, shape))
}

/// Checks run-time sizes, runs the pooling and returns it with the result shape `Y`.
fn run_pool<E: Float, Y: Shape>(
    op: PoolOp,
    x: ConvInput<'_, E>,
    p: &Pool2dParams,
    batched: bool,
) -> Result<(Storage<E>, Y)> {
    let name = match op {
        PoolOp::Max => "max_pool2d",
        PoolOp::Avg => "avg_pool2d",
    };
    let d = x.layout.dims();
    let mut out = [d[0], d[1], 0, 0];
    for (a, axis) in ["height", "width"].into_iter().enumerate() {
        match p.output_size(a, d[2 + a]) {
            Some(size) => out[2 + a] = size,
            None => bail!(
                name,
                "the window {axis} {} does not fit the input {axis} {} with padding {} (input {})",
                p.kernel[a],
                d[2 + a],
                p.padding[a],
                x.desc
            ),
        }
    }
    let out_dims = if batched {
        out.to_vec()
    } else {
        out[1..].to_vec()
    };
    let Some(shape) = Y::from_dims(&out_dims) else {
        bail!(
            name,
            "input {} gives output {out_dims:?}, which does not fit the result type",
            x.desc
        );
    };
    Ok((x.storage.pool2d(&x.layout, op, p)?, shape))
}

fn pool_params<const K: usize, const S: usize, const P: usize>() -> Pool2dParams {
    Pool2dParams {
        kernel: [K, K],
        stride: [S, S],
        padding: [P, P],
    }
}

/// `l` with a size-1 axis inserted at `at` when it has rank 3 (a 1-d convolution's operand
/// lifted to height 1 at axis 2, an unbatched pooling operand to a batch of one at axis 0).
fn lift(l: &Layout, at: usize) -> Layout {
    if l.dims().len() != 3 {
        return *l;
    }
    let (mut dims, mut strides) = (l.dims().to_vec(), l.strides().to_vec());
    dims.insert(at, 1);
    strides.insert(at, 0);
    Layout::new(&dims, &strides, l.offset())
}

/// Gives a convolution's output its backward rule, when recording: the input gradient is the
/// transposed convolution of the output gradient (col2im of `Wᵀ G`), the weight gradient
/// `G im2colᵀ` summed over images, and the bias gradient the sum of `G` over images and
/// positions.
fn track_conv<SX: Shape, SW: Shape, SB: Shape, SY: Shape, E: Float>(
    out: Tensor<SY, E>,
    x: &Tensor<SX, E>,
    w: &Tensor<SW, E>,
    bias: Option<&Tensor<SB, E>>,
    p: Conv2dParams,
) -> Tensor<SY, E> {
    let b_node = bias.and_then(|b| b.node());
    if !autograd::must_record(&[x.node(), w.node(), b_node]) {
        return out;
    }
    let (need_x, need_w) = (x.node().is_some(), w.node().is_some());
    let b_shape = bias.filter(|b| b.node().is_some()).map(|b| b.shape());
    let inputs = vec![x.node().cloned(), w.node().cloned(), b_node.cloned()];
    let (x, w) = (x.detach(), w.detach());
    out.record(inputs, move |g| {
        // A 1-d operand is seen as a 2-d one of height 1, as the forward saw it.
        let (lg, lx, lw) = (
            lift(g.layout(), 2),
            lift(x.layout(), 2),
            lift(w.layout(), 2),
        );
        let need = [need_x, need_w, b_shape.is_some()];
        let (dx, dw, db) = rules::conv::conv2d_back(
            (g.storage(), &lg),
            (x.storage(), &lx),
            (w.storage(), &lw),
            &p,
            need,
        )?;
        Ok(vec![
            dx.and_then(|s| autograd::erase(Tensor::from_storage(s, x.shape()))),
            dw.and_then(|s| autograd::erase(Tensor::from_storage(s, w.shape()))),
            db.zip(b_shape)
                .and_then(|(s, shape)| autograd::erase(Tensor::<SB, E>::from_storage(s, shape))),
        ])
    })
}

/// Gives a pooling's output its backward rule, when recording (see
/// [`Storage::pool2d_backward`]).
fn track_pool<SX: Shape, SY: Shape, E: Float>(
    out: Tensor<SY, E>,
    x: &Tensor<SX, E>,
    op: PoolOp,
    p: Pool2dParams,
) -> Tensor<SY, E> {
    if !autograd::must_record(&[x.node()]) {
        return out;
    }
    let inputs = vec![x.node().cloned()];
    let x = x.detach();
    out.record(inputs, move |g| {
        let (lg, lx) = (lift(g.layout(), 0), lift(x.layout(), 0));
        let s = rules::conv::pool2d_back((g.storage(), &lg), (x.storage(), &lx), op, &p)?;
        Ok(vec![autograd::erase(Tensor::from_storage(s, x.shape()))])
    })
}

impl<N: Dim, C: Dim, H: Dim, W: Dim, E: Element> Tensor<(N, C, H, W), E> {
    /// The 2-d convolution (cross-correlation, as PyTorch's `conv2d`) of a `[N, C, H, W]`
    /// input with a `[O, C/G, KH, KW]` weight, giving `[N, O, HO, WO]`; the output sizes
    /// come from the result type and are verified where static (see [`crate::shape::conv`]).
    ///
    /// # Panics
    /// When run-time sizes do not fit (see [`Tensor::try_conv2d`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<(Dyn<'N'>, Const<1>, Const<28>, Const<28>)> =
    ///     Tensor::ones((Dyn(2), Const, Const, Const), Device::Cpu);
    /// let w: Tensor<Rank4<6, 1, 5, 5>> = Tensor::ones((Const, Const, Const, Const), Device::Cpu);
    /// let y: Tensor<(Dyn<'N'>, Const<6>, Const<24>, Const<24>)> = x.conv2d(&w, Conv::<1>);
    /// assert_eq!(y.to_vec()[0], 25.0);
    /// ```
    ///
    /// A wrong static output size fails the build (the message reads "conv2d: output height
    /// 14 does not match (28 + 2*0 - 1*(5-1) - 1)/1 + 1 = 24"):
    ///
    /// ```compile_fail,E0080
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank4<1, 1, 28, 28>> = Tensor::ones((Const, Const, Const, Const), Device::Cpu);
    /// let w: Tensor<Rank4<6, 1, 5, 5>> = Tensor::ones((Const, Const, Const, Const), Device::Cpu);
    /// let y: Tensor<Rank4<1, 6, 14, 14>> = x.conv2d(&w, Conv::<1>);
    /// ```
    #[track_caller]
    pub fn conv2d<O: Dim, CG: Dim, KH: Dim, KW: Dim, HO: Dim, WO: Dim, Opt: ConvOptions<C, CG>>(
        &self,
        weight: &Tensor<(O, CG, KH, KW), E>,
        opts: Opt,
    ) -> Tensor<(N, O, HO, WO), E>
    where
        E: Float,
    {
        const { conv_check::<(N, C, H, W), (O, CG, KH, KW), (N, O, HO, WO)>(Opt::SETTINGS) };
        ok(self.conv2d_run(weight, None, opts))
    }

    /// [`Tensor::conv2d`], returning an error naming the shapes when run-time sizes do not fit.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<(usize, usize, usize, usize)> = Tensor::zeros((1, 3, 8, 8), Device::Cpu);
    /// let w: Tensor<(usize, usize, usize, usize)> = Tensor::zeros((4, 2, 3, 3), Device::Cpu);
    /// let err = x.try_conv2d::<_, _, _, _, usize, usize, _>(&w, Conv::<1>).err().unwrap();
    /// assert_eq!(err.to_string(), "conv2d: input [1, 3, 8, 8] has 3 channels, but weight [4, 2, 3, 3] expects 2");
    /// ```
    pub fn try_conv2d<
        O: Dim,
        CG: Dim,
        KH: Dim,
        KW: Dim,
        HO: Dim,
        WO: Dim,
        Opt: ConvOptions<C, CG>,
    >(
        &self,
        weight: &Tensor<(O, CG, KH, KW), E>,
        opts: Opt,
    ) -> Result<Tensor<(N, O, HO, WO), E>>
    where
        E: Float,
    {
        const { conv_check::<(N, C, H, W), (O, CG, KH, KW), (N, O, HO, WO)>(Opt::SETTINGS) };
        self.conv2d_run(weight, None, opts)
    }

    /// [`Tensor::conv2d`] plus a per-output-channel bias `[O]`, added inside the convolution.
    ///
    /// # Panics
    /// When run-time sizes do not fit (see [`Tensor::try_conv2d_bias`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank4<1, 2, 3, 3>> = Tensor::ones((Const, Const, Const, Const), Device::Cpu);
    /// let w: Tensor<Rank4<2, 2, 3, 3>> = Tensor::ones((Const, Const, Const, Const), Device::Cpu);
    /// let b: Tensor<Rank1<2>> = Tensor::from_array([0.5, -0.5], Device::Cpu);
    /// let y: Tensor<Rank4<1, 2, 3, 3>> = x.conv2d_bias(&w, &b, Conv::<1, 1>);
    /// assert_eq!(y.to_vec()[4], 18.5); // the centre sees all 2 x 3 x 3 ones
    /// ```
    #[track_caller]
    pub fn conv2d_bias<
        O: Dim,
        CG: Dim,
        KH: Dim,
        KW: Dim,
        HO: Dim,
        WO: Dim,
        Opt: ConvOptions<C, CG>,
    >(
        &self,
        weight: &Tensor<(O, CG, KH, KW), E>,
        bias: &Tensor<(O,), E>,
        opts: Opt,
    ) -> Tensor<(N, O, HO, WO), E>
    where
        E: Float,
    {
        const { conv_check::<(N, C, H, W), (O, CG, KH, KW), (N, O, HO, WO)>(Opt::SETTINGS) };
        ok(self.conv2d_run(weight, Some(bias), opts))
    }

    /// [`Tensor::conv2d_bias`], returning an error naming the shapes when run-time sizes do
    /// not fit.
    pub fn try_conv2d_bias<
        O: Dim,
        CG: Dim,
        KH: Dim,
        KW: Dim,
        HO: Dim,
        WO: Dim,
        Opt: ConvOptions<C, CG>,
    >(
        &self,
        weight: &Tensor<(O, CG, KH, KW), E>,
        bias: &Tensor<(O,), E>,
        opts: Opt,
    ) -> Result<Tensor<(N, O, HO, WO), E>>
    where
        E: Float,
    {
        const { conv_check::<(N, C, H, W), (O, CG, KH, KW), (N, O, HO, WO)>(Opt::SETTINGS) };
        self.conv2d_run(weight, Some(bias), opts)
    }

    /// Max pooling over `KERNEL x KERNEL` windows, `[N, C, H, W] -> [N, C, HO, WO]` (output
    /// sizes from the result type, verified). Padding never wins (it acts as -inf); NaN does.
    ///
    /// # Panics
    /// When run-time sizes do not fit (see [`Tensor::try_max_pool2d`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank4<1, 1, 2, 4>> =
    ///     Tensor::from_array([[[[1.0, 5.0, 2.0, 0.0], [3.0, 4.0, 7.0, 6.0]]]], Device::Cpu);
    /// let y: Tensor<Rank4<1, 1, 1, 2>> = x.max_pool2d(Pool::<2, 2>);
    /// assert_eq!(y.to_vec(), vec![5.0, 7.0]);
    /// ```
    #[track_caller]
    pub fn max_pool2d<HO: Dim, WO: Dim, const K: usize, const S: usize, const P: usize>(
        &self,
        window: Pool<K, S, P>,
    ) -> Tensor<(N, C, HO, WO), E>
    where
        E: Float,
    {
        const { pool::<(N, C, H, W), (N, C, HO, WO)>("max_pool2d", (K, S, P)) };
        ok(self.pool2d_run(PoolOp::Max, window))
    }

    /// [`Tensor::max_pool2d`], returning an error naming the shape when run-time sizes do not
    /// fit.
    pub fn try_max_pool2d<HO: Dim, WO: Dim, const K: usize, const S: usize, const P: usize>(
        &self,
        window: Pool<K, S, P>,
    ) -> Result<Tensor<(N, C, HO, WO), E>>
    where
        E: Float,
    {
        const { pool::<(N, C, H, W), (N, C, HO, WO)>("max_pool2d", (K, S, P)) };
        self.pool2d_run(PoolOp::Max, window)
    }

    /// Average pooling over `KERNEL x KERNEL` windows, `[N, C, H, W] -> [N, C, HO, WO]`;
    /// padding counts as zeros in the average (PyTorch's default `count_include_pad=True`).
    ///
    /// # Panics
    /// When run-time sizes do not fit (see [`Tensor::try_avg_pool2d`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank4<1, 1, 2, 2>> = Tensor::from_array([[[[1.0, 2.0], [3.0, 6.0]]]], Device::Cpu);
    /// let y: Tensor<Rank4<1, 1, 1, 1>> = x.avg_pool2d(Pool::<2, 2>);
    /// assert_eq!(y.to_vec(), vec![3.0]);
    /// ```
    #[track_caller]
    pub fn avg_pool2d<HO: Dim, WO: Dim, const K: usize, const S: usize, const P: usize>(
        &self,
        window: Pool<K, S, P>,
    ) -> Tensor<(N, C, HO, WO), E>
    where
        E: Float,
    {
        const { pool::<(N, C, H, W), (N, C, HO, WO)>("avg_pool2d", (K, S, P)) };
        ok(self.pool2d_run(PoolOp::Avg, window))
    }

    /// [`Tensor::avg_pool2d`], returning an error naming the shape when run-time sizes do not
    /// fit.
    pub fn try_avg_pool2d<HO: Dim, WO: Dim, const K: usize, const S: usize, const P: usize>(
        &self,
        window: Pool<K, S, P>,
    ) -> Result<Tensor<(N, C, HO, WO), E>>
    where
        E: Float,
    {
        const { pool::<(N, C, H, W), (N, C, HO, WO)>("avg_pool2d", (K, S, P)) };
        self.pool2d_run(PoolOp::Avg, window)
    }

    /// The body of `conv2d`, `conv2d_bias`, their `try_` twins and [`crate::nn::Conv2d`],
    /// after their const checks: run-time size checks, the convolution and its tape entry.
    pub(crate) fn conv2d_run<O: Dim, CG: Dim, KH: Dim, KW: Dim, HO: Dim, WO: Dim, Opt>(
        &self,
        weight: &Tensor<(O, CG, KH, KW), E>,
        bias: Option<&Tensor<(O,), E>>,
        _opts: Opt,
    ) -> Result<Tensor<(N, O, HO, WO), E>>
    where
        E: Float,
        Opt: ConvOptions<C, CG>,
    {
        let p = conv_params::<C, CG, Opt>(2);
        let (x, w, b) = (
            ConvInput::new(self),
            ConvInput::new(weight),
            bias.map(ConvInput::new),
        );
        let (s, shape) = run_conv("conv2d", x, w, b, &p, 2)?;
        Ok(track_conv(
            Tensor::from_storage(s, shape),
            self,
            weight,
            bias,
            p,
        ))
    }

    /// The body of the pooling methods and layers after their const checks.
    pub(crate) fn pool2d_run<HO: Dim, WO: Dim, const K: usize, const S: usize, const P: usize>(
        &self,
        op: PoolOp,
        _window: Pool<K, S, P>,
    ) -> Result<Tensor<(N, C, HO, WO), E>>
    where
        E: Float,
    {
        let p = pool_params::<K, S, P>();
        let (s, shape) = run_pool(op, ConvInput::new(self), &p, true)?;
        Ok(track_pool(Tensor::from_storage(s, shape), self, op, p))
    }
}

impl<N: Dim, C: Dim, L: Dim, E: Element> Tensor<(N, C, L), E> {
    /// The 1-d convolution of a `[N, C, L]` input with a `[O, C/G, K]` weight, giving
    /// `[N, O, LO]` (output length from the result type, verified where static).
    ///
    /// # Panics
    /// When run-time sizes do not fit (see [`Tensor::try_conv1d`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank3<1, 1, 5>> = Tensor::from_array([[[1.0, 2.0, 3.0, 4.0, 5.0]]], Device::Cpu);
    /// let w: Tensor<Rank3<1, 1, 2>> = Tensor::from_array([[[1.0, -1.0]]], Device::Cpu);
    /// let y: Tensor<Rank3<1, 1, 2>> = x.conv1d(&w, Conv::<2>);
    /// assert_eq!(y.to_vec(), vec![-1.0, -1.0]);
    /// ```
    #[track_caller]
    pub fn conv1d<O: Dim, CG: Dim, K: Dim, LO: Dim, Opt: ConvOptions<C, CG>>(
        &self,
        weight: &Tensor<(O, CG, K), E>,
        opts: Opt,
    ) -> Tensor<(N, O, LO), E>
    where
        E: Float,
    {
        const { conv_check::<(N, C, L), (O, CG, K), (N, O, LO)>(Opt::SETTINGS) };
        ok(self.conv1d_run(weight, None, opts))
    }

    /// [`Tensor::conv1d`], returning an error naming the shapes when run-time sizes do not fit.
    pub fn try_conv1d<O: Dim, CG: Dim, K: Dim, LO: Dim, Opt: ConvOptions<C, CG>>(
        &self,
        weight: &Tensor<(O, CG, K), E>,
        opts: Opt,
    ) -> Result<Tensor<(N, O, LO), E>>
    where
        E: Float,
    {
        const { conv_check::<(N, C, L), (O, CG, K), (N, O, LO)>(Opt::SETTINGS) };
        self.conv1d_run(weight, None, opts)
    }

    /// [`Tensor::conv1d`] plus a per-output-channel bias `[O]`, added inside the convolution.
    ///
    /// # Panics
    /// When run-time sizes do not fit (see [`Tensor::try_conv1d_bias`]).
    #[track_caller]
    pub fn conv1d_bias<O: Dim, CG: Dim, K: Dim, LO: Dim, Opt: ConvOptions<C, CG>>(
        &self,
        weight: &Tensor<(O, CG, K), E>,
        bias: &Tensor<(O,), E>,
        opts: Opt,
    ) -> Tensor<(N, O, LO), E>
    where
        E: Float,
    {
        const { conv_check::<(N, C, L), (O, CG, K), (N, O, LO)>(Opt::SETTINGS) };
        ok(self.conv1d_run(weight, Some(bias), opts))
    }

    /// [`Tensor::conv1d_bias`], returning an error naming the shapes when run-time sizes do
    /// not fit.
    pub fn try_conv1d_bias<O: Dim, CG: Dim, K: Dim, LO: Dim, Opt: ConvOptions<C, CG>>(
        &self,
        weight: &Tensor<(O, CG, K), E>,
        bias: &Tensor<(O,), E>,
        opts: Opt,
    ) -> Result<Tensor<(N, O, LO), E>>
    where
        E: Float,
    {
        const { conv_check::<(N, C, L), (O, CG, K), (N, O, LO)>(Opt::SETTINGS) };
        self.conv1d_run(weight, Some(bias), opts)
    }

    /// Max pooling of an unbatched `[C, H, W]` tensor: see the `[N, C, H, W]` form.
    ///
    /// # Panics
    /// When run-time sizes do not fit.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let x: Tensor<Rank3<1, 2, 2>> = Tensor::from_array([[[1.0, 5.0], [3.0, 4.0]]], Device::Cpu);
    /// let y: Tensor<Rank3<1, 1, 1>> = x.max_pool2d(Pool::<2, 2>);
    /// assert_eq!(y.to_vec(), vec![5.0]);
    /// ```
    #[track_caller]
    pub fn max_pool2d<HO: Dim, WO: Dim, const K: usize, const S: usize, const P: usize>(
        &self,
        window: Pool<K, S, P>,
    ) -> Tensor<(N, HO, WO), E>
    where
        E: Float,
    {
        const { pool::<(N, C, L), (N, HO, WO)>("max_pool2d", (K, S, P)) };
        ok(self.pool2d_run(PoolOp::Max, window))
    }

    /// Max pooling of an unbatched `[C, H, W]` tensor, returning run-time size errors.
    pub fn try_max_pool2d<HO: Dim, WO: Dim, const K: usize, const S: usize, const P: usize>(
        &self,
        window: Pool<K, S, P>,
    ) -> Result<Tensor<(N, HO, WO), E>>
    where
        E: Float,
    {
        const { pool::<(N, C, L), (N, HO, WO)>("max_pool2d", (K, S, P)) };
        self.pool2d_run(PoolOp::Max, window)
    }

    /// Average pooling of an unbatched `[C, H, W]` tensor: see the `[N, C, H, W]` form.
    ///
    /// # Panics
    /// When run-time sizes do not fit.
    #[track_caller]
    pub fn avg_pool2d<HO: Dim, WO: Dim, const K: usize, const S: usize, const P: usize>(
        &self,
        window: Pool<K, S, P>,
    ) -> Tensor<(N, HO, WO), E>
    where
        E: Float,
    {
        const { pool::<(N, C, L), (N, HO, WO)>("avg_pool2d", (K, S, P)) };
        ok(self.pool2d_run(PoolOp::Avg, window))
    }

    /// Average pooling of an unbatched `[C, H, W]` tensor, returning run-time size errors.
    pub fn try_avg_pool2d<HO: Dim, WO: Dim, const K: usize, const S: usize, const P: usize>(
        &self,
        window: Pool<K, S, P>,
    ) -> Result<Tensor<(N, HO, WO), E>>
    where
        E: Float,
    {
        const { pool::<(N, C, L), (N, HO, WO)>("avg_pool2d", (K, S, P)) };
        self.pool2d_run(PoolOp::Avg, window)
    }

    /// The body of `conv1d`, `conv1d_bias`, their `try_` twins and [`crate::nn::Conv1d`],
    /// after their const checks.
    pub(crate) fn conv1d_run<O: Dim, CG: Dim, K: Dim, LO: Dim, Opt: ConvOptions<C, CG>>(
        &self,
        weight: &Tensor<(O, CG, K), E>,
        bias: Option<&Tensor<(O,), E>>,
        _opts: Opt,
    ) -> Result<Tensor<(N, O, LO), E>>
    where
        E: Float,
    {
        let p = conv_params::<C, CG, Opt>(1);
        let (x, w, b) = (
            ConvInput::new(self),
            ConvInput::new(weight),
            bias.map(ConvInput::new),
        );
        let (s, shape) = run_conv("conv1d", x, w, b, &p, 1)?;
        Ok(track_conv(
            Tensor::from_storage(s, shape),
            self,
            weight,
            bias,
            p,
        ))
    }

    /// The body of the unbatched pooling methods after their const checks.
    fn pool2d_run<HO: Dim, WO: Dim, const K: usize, const S: usize, const P: usize>(
        &self,
        op: PoolOp,
        _window: Pool<K, S, P>,
    ) -> Result<Tensor<(N, HO, WO), E>>
    where
        E: Float,
    {
        let p = pool_params::<K, S, P>();
        let (s, shape) = run_pool(op, self.unbatched_operand(), &p, false)?;
        Ok(track_pool(Tensor::from_storage(s, shape), self, op, p))
    }

    /// A `[C, H, W]` tensor as a batch of one `[1, C, H, W]`.
    fn unbatched_operand(&self) -> ConvInput<'_, E>
    where
        E: Float,
    {
        let l = self.layout();
        let mut strides = vec![0];
        strides.extend_from_slice(l.strides());
        let mut dims = vec![1];
        dims.extend_from_slice(l.dims());
        ConvInput {
            storage: self.storage(),
            layout: Layout::new(&dims, &strides, l.offset()),
            desc: describe(&self.shape()),
        }
    }
}
