//! Backend entry point for (batched) matrix products: the `gemm` crate on the CPU, cuBLAS on a
//! GPU.

use super::erased::{AnyRef, AnyStorage, ForNum};
use super::{BackendBuffer, Storage, on_host, same_device};
use crate::backend::Gemm;
use crate::cpu::elementwise::update_in_place;
use crate::{BackendError, Layout, Result};
use rtx_kernels::op::{ReduceOp, UnaryOp, UnaryOpT, UnaryVisitor};
use rtx_kernels::{Element, Float, Num};

impl<E: Element> Storage<E> {
    /// The batched matrix product of `self` viewed by `l` (`[batch.., M, K]`) and `rhs` viewed
    /// by `rl` (`[batch.., K, N]`), as fresh dense `[batch.., M, N]` storage. Both layouts have
    /// the same rank (at least 2) and the same batch sizes; a broadcast batch dim has stride 0.
    /// Any strides are accepted: matrices with a unit row or column stride are read in place.
    pub fn matmul(&self, l: &Layout, rhs: &Self, rl: &Layout) -> Result<Self>
    where
        E: Num,
    {
        Ok(matmul_any((AnyRef::of(self), l), (AnyRef::of(rhs), rl), None)?.into_typed())
    }

    /// [`Storage::matmul`] on one element type and a built-in device.
    fn matmul_body(&self, l: &Layout, rhs: &Self, rl: &Layout) -> Result<Self>
    where
        E: Num,
    {
        same_device("matmul", self, rhs)?;
        check_shapes(l, rl)?;
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

    /// The product of an unbatched `[M, K]` by `[K, N]` (as [`Storage::matmul`]) with `bias`
    /// (`[N]`, viewed by `bl`) added to every row: a Linear's forward. A GPU adds it in the
    /// product's epilogue where cuBLASLt allows it, sparing a pass over the output.
    pub fn matmul_bias(
        &self,
        l: &Layout,
        rhs: &Self,
        rl: &Layout,
        bias: &Self,
        bl: &Layout,
    ) -> Result<Self>
    where
        E: Num,
    {
        let (a, b, c) = (AnyRef::of(self), AnyRef::of(rhs), AnyRef::of(bias));
        Ok(matmul_any((a, l), (b, rl), Some((c, bl)))?.into_typed())
    }

    /// [`Storage::matmul_bias`] on one element type and a built-in device.
    fn matmul_bias_body(
        &self,
        l: &Layout,
        rhs: &Self,
        rl: &Layout,
        bias: &Self,
        bl: &Layout,
    ) -> Result<Self>
    where
        E: Num,
    {
        let n = rl.dims().last().copied().unwrap_or(0);
        if l.rank() != 2 || bl.dims() != [n] {
            return Err(BackendError::BadArgument {
                op: "matmul with bias",
                msg: format!(
                    "layouts {:?} and {:?} with bias {:?} are not [M, K], [K, N] and [N]",
                    l.dims(),
                    rl.dims(),
                    bl.dims()
                ),
            });
        }
        same_device("matmul", self, bias)?;
        let product = match (self, rhs, bias) {
            (Storage::Cuda(a), Storage::Cuda(b), Storage::Cuda(c)) if bl.is_contiguous() => {
                same_device("matmul", self, rhs)?;
                check_shapes(l, rl)?;
                let at = (c, bl.offset());
                match crate::cuda::matmul_bias((a, l), (b, rl), at, super::cuda_dense)? {
                    (out, true) => return Ok(Storage::Cuda(out)),
                    (out, false) => Storage::Cuda(out),
                }
            }
            (Storage::Cpu(a), Storage::Cpu(b), Storage::Cpu(c)) => {
                same_device("matmul", self, rhs)?;
                check_shapes(l, rl)?;
                crate::dispatch::cpu();
                return Ok(Storage::Cpu(crate::cpu::matmul::matmul_bias(
                    a, l, b, rl, c, bl,
                )));
            }
            _ => self.matmul_body(l, rhs, rl)?,
        };
        let dims = [l.dims()[0], n];
        let rows = bl
            .broadcast_to(&dims)
            .ok_or_else(|| BackendError::BadArgument {
                op: "matmul with bias",
                msg: format!("bias {:?} does not broadcast to {dims:?}", bl.dims()),
            })?;
        product.binary::<rtx_kernels::op::markers::Add>(&Layout::contiguous(&dims), bias, &rows)
    }

    /// [`Storage::matmul_bias`] followed by the elementwise `act`: a Linear and its activation,
    /// with the bits of the two ops run one after the other. The CPU applies `act` to each
    /// block of output rows as soon as its product is done, while the block is in cache (one
    /// pass over the output instead of two, and no second output to allocate); other devices
    /// run the two ops.
    pub fn matmul_bias_act(
        &self,
        l: &Layout,
        rhs: &Self,
        rl: &Layout,
        bias: &Self,
        bl: &Layout,
        act: UnaryOp,
    ) -> Result<Self>
    where
        E: Float,
    {
        let n = rl.dims().last().copied().unwrap_or(0);
        if let (Storage::Cpu(a), Storage::Cpu(b), Storage::Cpu(c)) = (self, rhs, bias)
            && l.rank() == 2
            && bl.dims() == [n]
        {
            check_shapes(l, rl)?;
            crate::dispatch::cpu();
            /// The fused CPU product, generic over the activation's marker.
            struct Fused<'a, E> {
                a: (&'a [E], &'a Layout),
                b: (&'a [E], &'a Layout),
                bias: (&'a [E], &'a Layout),
            }
            impl<E: Float> UnaryVisitor for Fused<'_, E> {
                type Out = Vec<E>;
                fn visit<O: UnaryOpT>(self) -> Vec<E> {
                    let f = super::elementwise::unary_fn::<E, O>;
                    crate::cpu::matmul::matmul_bias_then(
                        self.a.0,
                        self.a.1,
                        self.b.0,
                        self.b.1,
                        self.bias.0,
                        self.bias.1,
                        &|rows| update_in_place(rows, &f),
                    )
                }
            }
            return Ok(Storage::Cpu(act.visit(Fused {
                a: (a, l),
                b: (b, rl),
                bias: (c, bl),
            })));
        }
        let y = self.matmul_bias(l, rhs, rl, bias, bl)?;
        /// The activation of the product, generic over its marker.
        struct Then<'a, E: Element>(&'a Storage<E>, Layout);
        impl<E: Float> UnaryVisitor for Then<'_, E> {
            type Out = Result<Storage<E>>;
            fn visit<O: UnaryOpT>(self) -> Self::Out {
                self.0.unary::<O>(&self.1)
            }
        }
        act.visit(Then(&y, Layout::contiguous(&[l.dims()[0], n])))
    }

    /// The product of an unbatched `[M, K]` by `[K, N]` (as [`Storage::matmul`]) and the sums
    /// of `self`'s rows over K (`[M]`): a Linear's weight gradient `Gᵀ X` with its bias
    /// gradient, the sums of `G` down its rows. A GPU writes the sums in the product's
    /// epilogue where cuBLASLt allows it, sparing a pass over `G`; elsewhere they are a sum.
    pub fn matmul_row_sums(&self, l: &Layout, rhs: &Self, rl: &Layout) -> Result<(Self, Self)>
    where
        E: Num,
    {
        if l.rank() != 2 {
            return Err(BackendError::BadArgument {
                op: "matmul with row sums",
                msg: format!("layout {:?} is not one [M, K] matrix", l.dims()),
            });
        }
        let product = match (self, rhs) {
            (Storage::Cuda(a), Storage::Cuda(b)) => {
                same_device("matmul", self, rhs)?;
                check_shapes(l, rl)?;
                match crate::cuda::matmul_row_sums((a, l), (b, rl), super::cuda_dense)? {
                    (out, Some(sums)) => return Ok((Storage::Cuda(out), Storage::Cuda(sums))),
                    (out, None) => Storage::Cuda(out),
                }
            }
            _ => self.matmul(l, rhs, rl)?,
        };
        // A Linear's Gᵀ is a transposed dense matrix: its rows are the dense matrix's
        // columns, summed down (the reduction's fast, contiguous path) rather than across.
        let t = l.transpose(0, 1);
        let sums = if t.is_contiguous() {
            self.reduce(&t, 0, ReduceOp::Sum)?
        } else {
            self.reduce(l, 1, ReduceOp::Sum)?
        };
        Ok((product, sums))
    }
}

/// A storage operand and its layout.
type Operand<'a> = (AnyRef<'a>, &'a Layout);

/// The (batched) product with an optional bias epilogue, the element type erased: compiled
/// once, here. A registered backend runs it through its `gemm` or on host copies.
pub(crate) fn matmul_any(a: Operand, b: Operand, bias: Option<Operand>) -> Result<AnyStorage> {
    check_shapes(a.1, b.1)?;
    // On the stack: this runs for every product, and most run on a built-in device.
    let (two, three);
    let args: &[AnyRef] = match bias {
        Some(c) => {
            three = [a.0, b.0, c.0];
            &three
        }
        None => {
            two = [a.0, b.0];
            &two
        }
    };
    let native = |at: &BackendBuffer| {
        let (lhs, rhs) = (a.0.on_backend()?, b.0.on_backend()?);
        let bias = match bias {
            Some((c, l)) => Some((c.on_backend()?, l)),
            None => None,
        };
        at.backend.gemm(&Gemm {
            lhs: &lhs.buffer,
            lhs_layout: a.1,
            rhs: &rhs.buffer,
            rhs_layout: b.1,
            bias: bias.as_ref().map(|(c, l)| (&c.buffer, *l)),
        })
    };
    let on_copies = |h: &[AnyRef]| matmul_any((h[0], a.1), (h[1], b.1), bias.map(|c| (h[2], c.1)));
    if let Some(out) = on_host("matmul", args, &native, &on_copies) {
        return out;
    }
    struct Body<'a>(&'a Layout, Operand<'a>, Option<Operand<'a>>);
    impl ForNum for Body<'_> {
        type Out = Result<AnyStorage>;
        fn run<N: Num>(self, s: &Storage<N>) -> Self::Out {
            let (l, (rhs, rl)) = (self.0, self.1);
            let rhs = rhs.typed::<N>("matmul")?;
            match self.2 {
                None => s.matmul_body(l, rhs, rl),
                Some((c, bl)) => s.matmul_bias_body(l, rhs, rl, c.typed::<N>("matmul")?, bl),
            }
            .map(AnyStorage::from_typed)
        }
    }
    a.0.nums("matmul", Body(a.1, b, bias))
}

/// Checks that `l` and `rl` are `[batch.., M, K]` and `[batch.., K, N]`.
fn check_shapes(l: &Layout, rl: &Layout) -> Result<()> {
    let (da, db) = (l.dims(), rl.dims());
    let r = da.len();
    if r < 2 || db.len() != r || da[..r - 2] != db[..r - 2] || da[r - 1] != db[r - 2] {
        return Err(BackendError::BadArgument {
            op: "matmul",
            msg: format!("layouts {da:?} and {db:?} are not [batch.., M, K] and [batch.., K, N]"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Device;

    #[test]
    fn a_bias_is_added_to_every_row_and_a_wrong_length_refused() {
        let x = Storage::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], Device::Cpu).unwrap();
        let w = Storage::from_vec(vec![1.0f32, 0.0, 0.0, 1.0], Device::Cpu).unwrap();
        let b = Storage::from_vec(vec![10.0f32, 20.0], Device::Cpu).unwrap();
        let l = Layout::contiguous(&[2, 2]);
        let y = x
            .matmul_bias(&l, &w, &l, &b, &Layout::contiguous(&[2]))
            .unwrap();
        assert_eq!(y.to_vec(&l), vec![11.0, 22.0, 13.0, 24.0]);
        let err = x.matmul_bias(&l, &w, &l, &b, &Layout::contiguous(&[1]));
        assert!(err.unwrap_err().to_string().contains("[1]"));
    }

    #[test]
    fn row_sums_are_the_sums_of_a_transposed_gradient_down_its_rows() {
        // G is [3, 2] (rows of a batch, outputs); Gᵀ X with X [3, 1] and G's column sums.
        let g = Storage::from_vec(vec![1.0f32, 10.0, 2.0, 20.0, 3.0, 30.0], Device::Cpu).unwrap();
        let x = Storage::from_vec(vec![1.0f32, 1.0, 2.0], Device::Cpu).unwrap();
        let lgt = Layout::contiguous(&[3, 2]).transpose(0, 1);
        let lx = Layout::contiguous(&[3, 1]);
        let (w, b) = g.matmul_row_sums(&lgt, &x, &lx).unwrap();
        assert_eq!(w.to_vec(&Layout::contiguous(&[2, 1])), vec![9.0, 90.0]);
        assert_eq!(b.to_vec(&Layout::contiguous(&[2])), vec![6.0, 60.0]);
        let batched = Layout::contiguous(&[1, 3, 2]);
        assert!(g.matmul_row_sums(&batched, &x, &lx).is_err());
    }
}
