//! `MaxPool2d` and `AvgPool2d`: parameter-free pooling layers over `[N, C, H, W]`, their window
//! given by const generics (kernel `K`, stride `S`, padding `P`).

use super::init::Init;
use super::module::{Module, Visitor, VisitorMut};
use crate::error::ok;
use crate::shape::Dim;
use crate::shape::conv::pool;
use crate::tensor::{Pool, Tensor};
use rtx_backends::Device;
use rtx_kernels::Float;
use rtx_kernels::op::PoolOp;

/// Max pooling over `K x K` windows with stride `S` and padding `P` (PyTorch's
/// `nn.MaxPool2d(K, S, P)`).
///
/// ```
/// # use rtx::prelude::*;
/// let x: Tensor<Rank4<1, 1, 2, 4>> =
///     Tensor::from_array([[[[1.0, 5.0, 2.0, 0.0], [3.0, 4.0, 7.0, 6.0]]]], Device::Cpu);
/// let y: Tensor<Rank4<1, 1, 1, 2>> = MaxPool2d::<2, 2>.forward(&x);
/// assert_eq!(y.to_vec(), vec![5.0, 7.0]);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct MaxPool2d<const K: usize, const S: usize, const P: usize = 0>;

impl<const K: usize, const S: usize, const P: usize> MaxPool2d<K, S, P> {
    /// The largest element of each window, `[N, C, H, W] -> [N, C, HO, WO]`.
    ///
    /// # Panics
    /// When run-time sizes do not fit (see [`Tensor::try_max_pool2d`]).
    #[track_caller]
    pub fn forward<N: Dim, C: Dim, H: Dim, W: Dim, HO: Dim, WO: Dim, E: Float>(
        &self,
        x: &Tensor<(N, C, H, W), E>,
    ) -> Tensor<(N, C, HO, WO), E> {
        const { pool::<(N, C, H, W), (N, C, HO, WO)>("max_pool2d", (K, S, P)) };
        ok(x.pool2d_run(PoolOp::Max, Pool::<K, S, P>))
    }
}

/// Average pooling over `K x K` windows with stride `S` and padding `P`, padding counted as
/// zeros (PyTorch's `nn.AvgPool2d(K, S, P)`).
///
/// ```
/// # use rtx::prelude::*;
/// let x: Tensor<Rank4<1, 1, 2, 2>> = Tensor::from_array([[[[1.0, 2.0], [3.0, 6.0]]]], Device::Cpu);
/// let y: Tensor<Rank4<1, 1, 1, 1>> = AvgPool2d::<2, 2>.forward(&x);
/// assert_eq!(y.to_vec(), vec![3.0]);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct AvgPool2d<const K: usize, const S: usize, const P: usize = 0>;

impl<const K: usize, const S: usize, const P: usize> AvgPool2d<K, S, P> {
    /// The mean of each window, `[N, C, H, W] -> [N, C, HO, WO]`.
    ///
    /// # Panics
    /// When run-time sizes do not fit (see [`Tensor::try_avg_pool2d`]).
    #[track_caller]
    pub fn forward<N: Dim, C: Dim, H: Dim, W: Dim, HO: Dim, WO: Dim, E: Float>(
        &self,
        x: &Tensor<(N, C, H, W), E>,
    ) -> Tensor<(N, C, HO, WO), E> {
        const { pool::<(N, C, H, W), (N, C, HO, WO)>("avg_pool2d", (K, S, P)) };
        ok(x.pool2d_run(PoolOp::Avg, Pool::<K, S, P>))
    }
}

impl<const K: usize, const S: usize, const P: usize> Init for MaxPool2d<K, S, P> {
    fn init_named(_device: &Device, _seed: u64, _prefix: &str) -> Self {
        MaxPool2d
    }
}

impl<const K: usize, const S: usize, const P: usize> Init for AvgPool2d<K, S, P> {
    fn init_named(_device: &Device, _seed: u64, _prefix: &str) -> Self {
        AvgPool2d
    }
}

impl<const K: usize, const S: usize, const P: usize> Module for MaxPool2d<K, S, P> {
    fn visit<V: Visitor>(&self, prefix: &str, v: &mut V) {
        v.enter(prefix, std::any::type_name::<Self>());
        v.leave(prefix);
    }
    fn visit_mut<V: VisitorMut>(&mut self, _: &str, _: &mut V) {}
}

impl<const K: usize, const S: usize, const P: usize> Module for AvgPool2d<K, S, P> {
    fn visit<V: Visitor>(&self, prefix: &str, v: &mut V) {
        v.enter(prefix, std::any::type_name::<Self>());
        v.leave(prefix);
    }
    fn visit_mut<V: VisitorMut>(&mut self, _: &str, _: &mut V) {}
}
