//! Backend entry point for (batched) matrix products: the `gemm` crate on the CPU, cuBLAS on a
//! GPU.

use super::{Storage, same_device};
use crate::{BackendError, Layout, Result};
use rtx_kernels::{Element, Num};

impl<E: Element> Storage<E> {
    /// The batched matrix product of `self` viewed by `l` (`[batch.., M, K]`) and `rhs` viewed
    /// by `rl` (`[batch.., K, N]`), as fresh dense `[batch.., M, N]` storage. Both layouts have
    /// the same rank (at least 2) and the same batch sizes; a broadcast batch dim has stride 0.
    /// Any strides are accepted: matrices with a unit row or column stride are read in place.
    pub fn matmul(&self, l: &Layout, rhs: &Self, rl: &Layout) -> Result<Self>
    where
        E: Num,
    {
        same_device("matmul", self, rhs)?;
        let (da, db) = (l.dims(), rl.dims());
        let r = da.len();
        if r < 2 || db.len() != r || da[..r - 2] != db[..r - 2] || da[r - 1] != db[r - 2] {
            return Err(BackendError::BadArgument {
                op: "matmul",
                msg: format!(
                    "layouts {da:?} and {db:?} are not [batch.., M, K] and [batch.., K, N]"
                ),
            });
        }
        match (self, rhs) {
            (Storage::Cpu(a), Storage::Cpu(b)) => {
                crate::dispatch::cpu();
                Ok(Storage::Cpu(crate::cpu::matmul::matmul(a, l, b, rl)))
            }
            (Storage::Cuda(a), Storage::Cuda(b)) => Ok(Storage::Cuda(crate::cuda::matmul(
                (a, l),
                (b, rl),
                super::cuda_dense,
            )?)),
            _ => Err(super::no_kernel("matmul", self.device())),
        }
    }
}
