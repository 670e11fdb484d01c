//! Backend entry points for convolution and 2-d pooling (the GPU side in
//! `rtx-backends/src/cuda/ops_conv.rs`).

use super::erased::{AnyRef, AnyStorage, ForFloat};
use super::{Storage, host_only, same_device};
use crate::cuda::ops_conv as gpu;
use crate::{BackendError, Layout, Result};
use crate::{Conv2dParams, Pool2dParams};
use rtx_kernels::op::PoolOp;
use rtx_kernels::{Element, Float};

fn bad(op: &'static str, msg: String) -> BackendError {
    BackendError::BadArgument { op, msg }
}

impl<E: Element> Storage<E> {
    /// The 2-d convolution of `self` viewed by `l` (`[N, C, H, W]`) with the weight `w`
    /// (`[O, C/G, KH, KW]`) and an optional bias (`[O]`), as fresh dense `[N, O, HO, WO]`
    /// storage (sizes from [`Conv2dParams::output_size`]). 1-d convolutions pass height 1.
    pub fn conv2d(
        &self,
        l: &Layout,
        w: &Self,
        wl: &Layout,
        bias: Option<(&Self, &Layout)>,
        p: &Conv2dParams,
    ) -> Result<Self>
    where
        E: Float,
    {
        let bias = bias.map(|(b, bl)| (AnyRef::of(b), bl));
        let (x, w) = ((AnyRef::of(self), l), (AnyRef::of(w), wl));
        Ok(conv_any(Call::Conv2d { x, w, bias, p })?.into_typed())
    }

    /// Max or average pooling of `self` viewed by `l` (`[N, C, H, W]`) as fresh dense
    /// `[N, C, HO, WO]` storage (sizes from [`Pool2dParams::output_size`]). Padding may be at
    /// most half the window, as in PyTorch.
    pub fn pool2d(&self, l: &Layout, op: PoolOp, p: &Pool2dParams) -> Result<Self>
    where
        E: Float,
    {
        let x = (AnyRef::of(self), l);
        Ok(conv_any(Call::Pool { x, op, p })?.into_typed())
    }

    /// The gradient of [`Storage::conv2d`] with respect to its input: `self` viewed by `gl` is
    /// the output gradient (`[N, O, HO, WO]`), `w` the weight; the result is fresh dense
    /// storage of `x_dims` (`[N, C, H, W]`). Deterministic: a fixed order of accumulation.
    pub fn conv2d_backward_input(
        &self,
        gl: &Layout,
        w: &Self,
        wl: &Layout,
        x_dims: [usize; 4],
        p: &Conv2dParams,
    ) -> Result<Self>
    where
        E: Float,
    {
        let (g, w) = ((AnyRef::of(self), gl), (AnyRef::of(w), wl));
        Ok(conv_any(Call::BackwardInput { g, w, x_dims, p })?.into_typed())
    }

    /// The gradient of [`Storage::conv2d`] with respect to its weight: `self` viewed by `gl`
    /// is the output gradient (`[N, O, HO, WO]`), `x` the input; the result is fresh dense
    /// storage of `w_dims` (`[O, C/G, KH, KW]`). Deterministic: images accumulate in order.
    pub fn conv2d_backward_weight(
        &self,
        gl: &Layout,
        x: &Self,
        xl: &Layout,
        w_dims: [usize; 4],
        p: &Conv2dParams,
    ) -> Result<Self>
    where
        E: Float,
    {
        let (g, x) = ((AnyRef::of(self), gl), (AnyRef::of(x), xl));
        Ok(conv_any(Call::BackwardWeight { g, x, w_dims, p })?.into_typed())
    }

    /// The gradient of [`Storage::pool2d`] with respect to its input `x` (viewed by `xl`):
    /// `self` viewed by `gl` is the output gradient; the result is fresh dense storage shaped
    /// like the input. Max pooling routes each window's gradient to its first maximum.
    pub fn pool2d_backward(
        &self,
        gl: &Layout,
        x: &Self,
        xl: &Layout,
        op: PoolOp,
        p: &Pool2dParams,
    ) -> Result<Self>
    where
        E: Float,
    {
        let (g, x) = ((AnyRef::of(self), gl), (AnyRef::of(x), xl));
        Ok(conv_any(Call::PoolBackward { g, x, op, p })?.into_typed())
    }
}

// The entry points with the element type erased: not generic, so compiled once, here (see
// `erased.rs`).

/// A storage operand and its layout.
type Operand<'a> = (AnyRef<'a>, &'a Layout);

/// One call of a convolution or pooling op, its storages erased.
#[derive(Clone, Copy)]
enum Call<'a> {
    /// [`Storage::conv2d`].
    Conv2d {
        x: Operand<'a>,
        w: Operand<'a>,
        bias: Option<Operand<'a>>,
        p: &'a Conv2dParams,
    },
    /// [`Storage::pool2d`].
    Pool {
        x: Operand<'a>,
        op: PoolOp,
        p: &'a Pool2dParams,
    },
    /// [`Storage::conv2d_backward_input`].
    BackwardInput {
        g: Operand<'a>,
        w: Operand<'a>,
        x_dims: [usize; 4],
        p: &'a Conv2dParams,
    },
    /// [`Storage::conv2d_backward_weight`].
    BackwardWeight {
        g: Operand<'a>,
        x: Operand<'a>,
        w_dims: [usize; 4],
        p: &'a Conv2dParams,
    },
    /// [`Storage::pool2d_backward`].
    PoolBackward {
        g: Operand<'a>,
        x: Operand<'a>,
        op: PoolOp,
        p: &'a Pool2dParams,
    },
}

impl<'a> Call<'a> {
    /// The op's name, as its errors give it.
    fn name(&self) -> &'static str {
        match self {
            Call::Conv2d { .. } => "conv2d",
            Call::Pool { op, .. } => rtx_kernels::Op::Pool(*op).name(),
            Call::BackwardInput { .. } => "conv2d_backward_input",
            Call::BackwardWeight { .. } => "conv2d_backward_weight",
            Call::PoolBackward { .. } => "pool2d_backward",
        }
    }

    /// The storage operands, the first deciding the element type.
    fn args(&self) -> Vec<AnyRef<'a>> {
        match *self {
            Call::Conv2d { x, w, bias, .. } => {
                let mut args = vec![x.0, w.0];
                args.extend(bias.map(|b| b.0));
                args
            }
            Call::Pool { x, .. } => vec![x.0],
            Call::BackwardInput { g, w, .. } => vec![g.0, w.0],
            Call::BackwardWeight { g, x, .. } | Call::PoolBackward { g, x, .. } => vec![g.0, x.0],
        }
    }

    /// The same call on the storages `h`, given in the order of [`Call::args`]: how the host
    /// copies of a registered backend's operands are run.
    fn on<'b>(self, h: &[AnyRef<'b>]) -> Call<'b>
    where
        'a: 'b,
    {
        match self {
            Call::Conv2d { x, w, bias, p } => Call::Conv2d {
                x: (h[0], x.1),
                w: (h[1], w.1),
                bias: bias.map(|b| (h[2], b.1)),
                p,
            },
            Call::Pool { x, op, p } => Call::Pool {
                x: (h[0], x.1),
                op,
                p,
            },
            Call::BackwardInput { g, w, x_dims, p } => Call::BackwardInput {
                g: (h[0], g.1),
                w: (h[1], w.1),
                x_dims,
                p,
            },
            Call::BackwardWeight { g, x, w_dims, p } => Call::BackwardWeight {
                g: (h[0], g.1),
                x: (h[1], x.1),
                w_dims,
                p,
            },
            Call::PoolBackward { g, x, op, p } => Call::PoolBackward {
                g: (h[0], g.1),
                x: (h[1], x.1),
                op,
                p,
            },
        }
    }
}

/// A convolution or pooling op of any float type, erased: compiled once, here. A registered
/// backend runs it on host copies.
fn conv_any(c: Call) -> Result<AnyStorage> {
    let args = c.args();
    if let Some(out) = host_only(c.name(), &args, &|h| conv_any(c.on(h))) {
        return out;
    }
    /// The body, run on the concrete element type.
    struct Body<'a>(Call<'a>);
    impl ForFloat for Body<'_> {
        type Out = Result<AnyStorage>;
        fn run<F: Float>(self, s: &Storage<F>) -> Self::Out {
            let name = self.0.name();
            match self.0 {
                Call::Conv2d { x, w, bias, p } => {
                    let bias = match bias {
                        Some((b, bl)) => Some((b.typed::<F>(name)?, bl)),
                        None => None,
                    };
                    s.conv2d_body(x.1, w.0.typed(name)?, w.1, bias, p)
                }
                Call::Pool { x, op, p } => s.pool2d_body(x.1, op, p),
                Call::BackwardInput { g, w, x_dims, p } => {
                    s.conv2d_backward_input_body(g.1, w.0.typed(name)?, w.1, x_dims, p)
                }
                Call::BackwardWeight { g, x, w_dims, p } => {
                    s.conv2d_backward_weight_body(g.1, x.0.typed(name)?, x.1, w_dims, p)
                }
                Call::PoolBackward { g, x, op, p } => {
                    s.pool2d_backward_body(g.1, x.0.typed(name)?, x.1, op, p)
                }
            }
            .map(AnyStorage::from_typed)
        }
    }
    args[0].floats(c.name(), Body(c))
}

impl<E: Element> Storage<E> {
    /// The body of [`Storage::conv2d`] for one element type and a built-in device.
    fn conv2d_body(
        &self,
        l: &Layout,
        w: &Self,
        wl: &Layout,
        bias: Option<(&Self, &Layout)>,
        p: &Conv2dParams,
    ) -> Result<Self>
    where
        E: Float,
    {
        same_device("conv2d", self, w)?;
        if let Some((b, _)) = bias {
            same_device("conv2d", self, b)?;
        }
        let (xd, wd) = (l.dims(), wl.dims());
        if xd.len() != 4 || wd.len() != 4 {
            return Err(bad(
                "conv2d",
                format!("input {xd:?} and weight {wd:?} must be rank 4"),
            ));
        }
        let g = p.groups;
        if g == 0 || xd[1] != wd[1] * g || wd[0] % g != 0 {
            return Err(bad(
                "conv2d",
                format!("input {xd:?} and weight {wd:?} do not fit {g} groups"),
            ));
        }
        if p.output_size(0, xd[2], wd[2]).is_none() || p.output_size(1, xd[3], wd[3]).is_none() {
            return Err(bad(
                "conv2d",
                format!("weight {wd:?} does not fit input {xd:?} with {p:?}"),
            ));
        }
        if let Some((_, bl)) = bias
            && bl.dims() != [wd[0]]
        {
            return Err(bad(
                "conv2d",
                format!("bias {:?} does not match weight {wd:?}", bl.dims()),
            ));
        }
        let cuda_bias = bias.and_then(|(b, bl)| match b {
            Storage::Cuda(b) => Some((b, bl)),
            Storage::Cpu(_) | Storage::Backend(_) => None,
        });
        // On the CPU the bias is host storage too (checked above); on a GPU it is unused here.
        let bias = bias.and_then(|(b, bl)| Some((b.as_cpu_slice()?, bl)));
        crate::dispatch::on_cpu(self.device());
        match (self, w) {
            (Storage::Cpu(x), Storage::Cpu(w)) => Ok(Storage::Cpu(crate::cpu::conv::conv2d(
                (x, l),
                (w, wl),
                bias,
                p,
            ))),
            (Storage::Cuda(x), Storage::Cuda(w)) => {
                Ok(Storage::Cuda(gpu::conv2d((x, l), (w, wl), cuda_bias, p)?))
            }
            _ => Err(super::no_kernel("conv2d", self.device())),
        }
    }

    /// The body of [`Storage::pool2d`] for one element type and a built-in device.
    fn pool2d_body(&self, l: &Layout, op: PoolOp, p: &Pool2dParams) -> Result<Self>
    where
        E: Float,
    {
        let name = rtx_kernels::Op::Pool(op).name();
        let d = l.dims();
        if d.len() != 4 {
            return Err(bad(name, format!("input {d:?} must be rank 4")));
        }
        if (0..2).any(|a| 2 * p.padding[a] > p.kernel[a] || p.output_size(a, d[2 + a]).is_none()) {
            return Err(bad(name, format!("{p:?} does not fit input {d:?}")));
        }
        crate::dispatch::on_cpu(self.device());
        match self {
            Storage::Cpu(x) => Ok(Storage::Cpu(crate::cpu::conv::pool2d(x, l, op, p))),
            Storage::Cuda(x) => Ok(Storage::Cuda(gpu::pool2d(x, l, op, p)?)),
            Storage::Backend(_) => unreachable!("{}", super::ROUTED),
        }
    }

    /// The body of [`Storage::conv2d_backward_input`] for one element type and a built-in
    /// device.
    fn conv2d_backward_input_body(
        &self,
        gl: &Layout,
        w: &Self,
        wl: &Layout,
        x_dims: [usize; 4],
        p: &Conv2dParams,
    ) -> Result<Self>
    where
        E: Float,
    {
        same_device("conv2d_backward_input", self, w)?;
        check_grad("conv2d_backward_input", gl, &x_dims, wl.dims(), p)?;
        crate::dispatch::on_cpu(self.device());
        match (self, w) {
            (Storage::Cpu(g), Storage::Cpu(w)) => Ok(Storage::Cpu(
                crate::cpu::conv::conv2d_backward_input((g, gl), (w, wl), x_dims, p),
            )),
            (Storage::Cuda(g), Storage::Cuda(w)) => Ok(Storage::Cuda(gpu::conv2d_backward_input(
                (g, gl),
                (w, wl),
                x_dims,
                p,
            )?)),
            _ => Err(super::no_kernel("conv2d_backward_input", self.device())),
        }
    }

    /// The body of [`Storage::conv2d_backward_weight`] for one element type and a built-in
    /// device.
    fn conv2d_backward_weight_body(
        &self,
        gl: &Layout,
        x: &Self,
        xl: &Layout,
        w_dims: [usize; 4],
        p: &Conv2dParams,
    ) -> Result<Self>
    where
        E: Float,
    {
        same_device("conv2d_backward_weight", self, x)?;
        check_grad("conv2d_backward_weight", gl, xl.dims(), &w_dims, p)?;
        crate::dispatch::on_cpu(self.device());
        match (self, x) {
            (Storage::Cpu(g), Storage::Cpu(x)) => Ok(Storage::Cpu(
                crate::cpu::conv::conv2d_backward_weight((g, gl), (x, xl), w_dims, p),
            )),
            (Storage::Cuda(g), Storage::Cuda(x)) => Ok(Storage::Cuda(gpu::conv2d_backward_weight(
                (g, gl),
                (x, xl),
                w_dims,
                p,
            )?)),
            _ => Err(super::no_kernel("conv2d_backward_weight", self.device())),
        }
    }

    /// The body of [`Storage::pool2d_backward`] for one element type and a built-in device.
    fn pool2d_backward_body(
        &self,
        gl: &Layout,
        x: &Self,
        xl: &Layout,
        op: PoolOp,
        p: &Pool2dParams,
    ) -> Result<Self>
    where
        E: Float,
    {
        let name = "pool2d_backward";
        same_device(name, self, x)?;
        let d = xl.dims();
        let out = (d.len() == 4)
            .then(|| Some([d[0], d[1], p.output_size(0, d[2])?, p.output_size(1, d[3])?]))
            .flatten();
        if out.is_none_or(|o| gl.dims() != o) {
            return Err(bad(
                name,
                format!(
                    "gradient {:?} does not fit input {d:?} with {p:?}",
                    gl.dims()
                ),
            ));
        }
        crate::dispatch::on_cpu(self.device());
        match (self, x) {
            (Storage::Cpu(g), Storage::Cpu(x)) => Ok(Storage::Cpu(
                crate::cpu::conv::pool2d_backward((g, gl), (x, xl), op, p),
            )),
            (Storage::Cuda(g), Storage::Cuda(x)) => Ok(Storage::Cuda(gpu::pool2d_backward(
                (g, gl),
                (x, xl),
                op,
                p,
            )?)),
            _ => Err(super::no_kernel("pool2d_backward", self.device())),
        }
    }
}

/// Checks that a convolution's output gradient fits its input and weight sizes.
fn check_grad(
    op: &'static str,
    gl: &Layout,
    xd: &[usize],
    wd: &[usize],
    p: &Conv2dParams,
) -> Result<()> {
    let g = p.groups;
    let fits = xd.len() == 4
        && wd.len() == 4
        && g > 0
        && xd[1] == wd[1] * g
        && wd[0].is_multiple_of(g)
        && p.output_size(0, xd[2], wd[2]).is_some_and(|ho| {
            p.output_size(1, xd[3], wd[3])
                .is_some_and(|wo| gl.dims() == [xd[0], wd[0], ho, wo])
        });
    if fits {
        Ok(())
    } else {
        Err(bad(
            op,
            format!(
                "gradient {:?} does not fit input {xd:?} and weight {wd:?} with {p:?}",
                gl.dims()
            ),
        ))
    }
}
