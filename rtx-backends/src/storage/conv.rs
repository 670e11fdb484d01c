//! Backend entry points for convolution and 2-d pooling.

use super::{Storage, same_device};
use crate::cpu::conv::{Conv2dParams, Pool2dParams};
use crate::{BackendError, Layout, Result};
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
        let bias = bias.map(|(b, bl)| (b.as_cpu_slice(), bl));
        match (self, w) {
            (Storage::Cpu(x), Storage::Cpu(w)) => Ok(Storage::Cpu(crate::cpu::conv::conv2d(
                (x, l),
                (w, wl),
                bias,
                p,
            ))),
        }
    }

    /// Max or average pooling of `self` viewed by `l` (`[N, C, H, W]`) as fresh dense
    /// `[N, C, HO, WO]` storage (sizes from [`Pool2dParams::output_size`]). Padding may be at
    /// most half the window, as in PyTorch.
    pub fn pool2d(&self, l: &Layout, op: PoolOp, p: &Pool2dParams) -> Result<Self>
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
        match self {
            Storage::Cpu(x) => Ok(Storage::Cpu(crate::cpu::conv::pool2d(x, l, op, p))),
        }
    }
}
