//! Collation: items stacked into a batch whose leading dimension has the batch's dim type.
//!
//! Invariant: every batch tensor is built by one allocation, filled by copying each item's
//! elements in order, never by a chain of tensor ops; an item whose run-time shape differs
//! from the first item's is an error naming both shapes.

use crate::Tensor;
use crate::error::{Error, Result};
use crate::shape::{Dim, PrependDim, Shape, describe};
use rtx_backends::{Device, Storage};
use rtx_kernels::{Element, bf16, f16};

/// Items that can be gathered into a batch with a leading batch dimension `B`.
///
/// Collation goes through a buffer so that a batch is built in one pass with one allocation
/// per batch tensor: [`Collate::buffer`] sizes it from the first item, [`Collate::push`]
/// appends each item, [`Collate::finish`] makes the batch. [`Collate::collate`] does all three.
/// A struct of collatable fields can implement it by delegating to a tuple of its fields.
///
/// ```
/// use rtx::prelude::*;
/// let items: Vec<(Tensor<Rank1<3>>, i64)> = vec![
///     (Tensor::from_array([1.0, 2.0, 3.0], Device::Cpu), 7),
///     (Tensor::from_array([4.0, 5.0, 6.0], Device::Cpu), 9),
/// ];
/// let (x, y) = Collate::collate(items, Const::<2>, Device::Cpu).unwrap();
/// let x: Tensor<(Const<2>, Const<3>)> = x;
/// assert_eq!(x.to_vec(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
/// assert_eq!(y.to_vec(), vec![7, 9]);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be collated into a batch",
    label = "items must implement `Collate`",
    note = "tensors of rank 0 to 5, scalars (f32, f64, f16, bf16, i32, i64, u8, bool) and \
            pairs and triples of those collate; implement `Collate` for other item types"
)]
pub trait Collate: Sized + Send + 'static {
    /// A batch of `B` items.
    type Batch<B: Dim>: Send;
    /// What items are gathered into before the batch is made.
    type Buffer: Send;
    /// An empty buffer for `capacity` items, shaped after `first` (which is not yet in it).
    fn buffer(first: &Self, capacity: usize) -> Self::Buffer;
    /// Appends this item, or errors when its run-time shape differs from the buffer's.
    fn push(self, buf: &mut Self::Buffer) -> Result<()>;
    /// The batch of the items pushed, on `device`; errors unless `batch.size()` items were.
    fn finish<B: Dim>(buf: Self::Buffer, batch: B, device: Device) -> Result<Self::Batch<B>>;
    /// A finished batch moved to `device` (the data loader's workers make batches on the host
    /// and the thread that takes them moves them, so no upload races a captured step).
    fn to_device<B: Dim>(batch: Self::Batch<B>, device: Device) -> Result<Self::Batch<B>>;

    /// Stacks `items` into one batch of size `batch` on `device`; an error names the shapes
    /// when items differ, or the counts when there are not `batch.size()` items (an empty
    /// batch cannot be built, since the items' run-time shape is unknown).
    fn collate<B: Dim>(
        items: impl IntoIterator<Item = Self>,
        batch: B,
        device: Device,
    ) -> Result<Self::Batch<B>> {
        let mut items = items.into_iter();
        let Some(first) = items.next() else {
            return Err(Error::BadArgument {
                op: "collate",
                msg: format!("no items for a batch of {}", batch.size()),
            });
        };
        let mut buf = Self::buffer(&first, batch.size());
        first.push(&mut buf)?;
        for item in items {
            item.push(&mut buf)?;
        }
        Self::finish(buf, batch, device)
    }
}

/// The elements of tensor items gathered for one batch, and the items' shape.
#[derive(Debug)]
pub struct TensorBuffer<S: Shape, E: Element> {
    shape: S,
    count: usize,
    data: Vec<E>,
}

fn count_error(count: usize, batch: usize) -> Error {
    Error::BadArgument {
        op: "collate",
        msg: format!("{count} items pushed for a batch of {batch}"),
    }
}

/// What the blanket [`Collate`] impl for tensors sees of a tensor item.
mod tensor_item {
    use crate::Tensor;
    use crate::shape::Shape;
    use rtx_kernels::Element;

    /// A tensor, seen through its shape and element types; only `Tensor` implements it.
    // Sealed (in a private module) so that no other type takes the tensor impl of `Collate`.
    // It repeats `Collate`'s message because a non-tensor item that fits no other impl (a
    // `String`) fails here, below the blanket impl, and rustc reports it with this trait's.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot be collated into a batch",
        label = "items must implement `Collate`",
        note = "tensors of rank 0 to 5, scalars (f32, f64, f16, bf16, i32, i64, u8, bool) and \
                pairs and triples of those collate; implement `Collate` for other item types"
    )]
    pub trait TensorItem: Sized + Send + 'static {
        /// The tensor's shape.
        type Shape: Shape;
        /// The tensor's element type.
        type Elem: Element;
        /// The tensor itself.
        fn as_tensor(&self) -> &Tensor<Self::Shape, Self::Elem>;
    }

    // `do_not_recommend`: rustc would otherwise offer this impl to a non-tensor item.
    #[diagnostic::do_not_recommend]
    impl<S: Shape, E: Element> TensorItem for Tensor<S, E> {
        type Shape = S;
        type Elem = E;
        #[inline]
        fn as_tensor(&self) -> &Self {
            self
        }
    }
}

use tensor_item::TensorItem;

/// A tensor item stacks along a new leading axis: `[S...]` items make a `[B, S...]` batch.
// A blanket impl over the sealed `TensorItem` rather than `impl Collate for Tensor<S, E>`, and
// `do_not_recommend` on every other impl, keep a rank-6 sample's error short: under the
// `PrependDim` message rustc lists the `Collate` impls that could have applied, quoting an
// impl for `Tensor<S, E>` in full, but it never lists a blanket impl or a `do_not_recommend`
// one. The cost: a pair or triple holding a rank-6 tensor reports `Collate`'s message for the
// tuple rather than the shape's, since the blanket impl is a second candidate for tuples.
impl<T: TensorItem> Collate for T
where
    T::Shape: PrependDim,
{
    type Batch<B: Dim> = Tensor<<T::Shape as PrependDim>::Prepended<B>, T::Elem>;
    type Buffer = TensorBuffer<T::Shape, T::Elem>;

    fn buffer(first: &Self, capacity: usize) -> Self::Buffer {
        let first = first.as_tensor();
        TensorBuffer {
            shape: first.shape(),
            count: 0,
            data: Vec::with_capacity(capacity * first.numel()),
        }
    }

    fn push(self, buf: &mut Self::Buffer) -> Result<()> {
        let item = self.as_tensor();
        // Static shapes always agree, so only shapes with run-time dims pay for the check.
        if <T::Shape as Shape>::STATIC_NUMEL.is_none() && item.dims() != &*buf.shape.dims() {
            return Err(Error::ShapeMismatch {
                op: "collate",
                lhs: describe(&buf.shape),
                rhs: describe(&item.shape()),
                rule: "every item of a batch must have the same shape",
            });
        }
        item.storage().extend_host(item.layout(), &mut buf.data)?;
        buf.count += 1;
        Ok(())
    }

    fn finish<B: Dim>(buf: Self::Buffer, batch: B, device: Device) -> Result<Self::Batch<B>> {
        if buf.count != batch.size() {
            return Err(count_error(buf.count, batch.size()));
        }
        let storage = Storage::from_vec(buf.data, device)?;
        Ok(Tensor::from_storage(storage, buf.shape.prepend(batch)))
    }

    fn to_device<B: Dim>(batch: Self::Batch<B>, device: Device) -> Result<Self::Batch<B>> {
        batch.try_to_device(device)
    }
}

macro_rules! scalar_collate {
    ($($t:ty),*) => {$(
        /// A scalar item (a label, a target) becomes a vector: `B` items make a `[B]` tensor.
        // `do_not_recommend`, like the tuple impls: see the tensor impl.
        #[diagnostic::do_not_recommend]
        impl Collate for $t {
            type Batch<B: Dim> = Tensor<(B,), $t>;
            type Buffer = Vec<$t>;
            fn buffer(_first: &Self, capacity: usize) -> Vec<$t> {
                Vec::with_capacity(capacity)
            }
            fn push(self, buf: &mut Vec<$t>) -> Result<()> {
                buf.push(self);
                Ok(())
            }
            fn finish<B: Dim>(buf: Vec<$t>, batch: B, device: Device) -> Result<Tensor<(B,), $t>> {
                if buf.len() != batch.size() {
                    return Err(count_error(buf.len(), batch.size()));
                }
                Ok(Tensor::from_storage(Storage::from_vec(buf, device)?, (batch,)))
            }
            fn to_device<B: Dim>(batch: Tensor<(B,), $t>, device: Device) -> Result<Tensor<(B,), $t>> {
                batch.try_to_device(device)
            }
        }
    )*};
}

scalar_collate!(f32, f64, f16, bf16, i32, i64, u8, bool);

/// A pair collates field by field: `(image, label)` items make `(images, labels)`.
// `do_not_recommend`: see the tensor impl.
#[diagnostic::do_not_recommend]
impl<T0: Collate, T1: Collate> Collate for (T0, T1) {
    type Batch<B: Dim> = (T0::Batch<B>, T1::Batch<B>);
    type Buffer = (T0::Buffer, T1::Buffer);
    fn buffer(first: &Self, capacity: usize) -> Self::Buffer {
        (
            T0::buffer(&first.0, capacity),
            T1::buffer(&first.1, capacity),
        )
    }
    fn push(self, buf: &mut Self::Buffer) -> Result<()> {
        self.0.push(&mut buf.0)?;
        self.1.push(&mut buf.1)
    }
    fn finish<B: Dim>(buf: Self::Buffer, batch: B, device: Device) -> Result<Self::Batch<B>> {
        Ok((
            T0::finish(buf.0, batch, device)?,
            T1::finish(buf.1, batch, device)?,
        ))
    }
    fn to_device<B: Dim>(batch: Self::Batch<B>, device: Device) -> Result<Self::Batch<B>> {
        Ok((
            T0::to_device(batch.0, device)?,
            T1::to_device(batch.1, device)?,
        ))
    }
}

/// A triple collates field by field.
// `do_not_recommend`: see the tensor impl.
#[diagnostic::do_not_recommend]
impl<T0: Collate, T1: Collate, T2: Collate> Collate for (T0, T1, T2) {
    type Batch<B: Dim> = (T0::Batch<B>, T1::Batch<B>, T2::Batch<B>);
    type Buffer = (T0::Buffer, T1::Buffer, T2::Buffer);
    fn buffer(first: &Self, capacity: usize) -> Self::Buffer {
        (
            T0::buffer(&first.0, capacity),
            T1::buffer(&first.1, capacity),
            T2::buffer(&first.2, capacity),
        )
    }
    fn push(self, buf: &mut Self::Buffer) -> Result<()> {
        self.0.push(&mut buf.0)?;
        self.1.push(&mut buf.1)?;
        self.2.push(&mut buf.2)
    }
    fn finish<B: Dim>(buf: Self::Buffer, batch: B, device: Device) -> Result<Self::Batch<B>> {
        Ok((
            T0::finish(buf.0, batch, device)?,
            T1::finish(buf.1, batch, device)?,
            T2::finish(buf.2, batch, device)?,
        ))
    }
    fn to_device<B: Dim>(batch: Self::Batch<B>, device: Device) -> Result<Self::Batch<B>> {
        Ok((
            T0::to_device(batch.0, device)?,
            T1::to_device(batch.1, device)?,
            T2::to_device(batch.2, device)?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prelude::*;

    #[test]
    fn stacks_views_in_logical_order() {
        // A transposed (non-contiguous) item must be copied in logical order.
        let a: Tensor<Rank2<2, 3>, i32> = Tensor::from_array([[1, 2, 3], [4, 5, 6]], Device::Cpu);
        let items = vec![a.t(), a.t()];
        let b = Collate::collate(items, 2usize, Device::Cpu).unwrap();
        assert_eq!(b.dims(), &[2, 3, 2]);
        assert_eq!(
            b.to_vec(),
            [[1, 4, 2, 5, 3, 6], [1, 4, 2, 5, 3, 6]].concat()
        );
    }

    #[test]
    fn ragged_run_time_shapes_are_an_error() {
        let items: Vec<Tensor<(usize,)>> = vec![Tensor::zeros((2,), Device::Cpu), {
            Tensor::zeros((3,), Device::Cpu)
        }];
        let err = Collate::collate(items, 2usize, Device::Cpu).unwrap_err();
        assert_eq!(
            err.to_string(),
            "collate: shape mismatch: [2] vs [3]: every item of a batch must have the same shape"
        );
    }

    #[test]
    fn wrong_counts_are_an_error() {
        let err = Collate::collate(vec![1i64, 2, 3], Const::<4>, Device::Cpu).unwrap_err();
        assert_eq!(err.to_string(), "collate: 3 items pushed for a batch of 4");
        let err = Collate::collate(Vec::<u8>::new(), 0usize, Device::Cpu).unwrap_err();
        assert_eq!(err.to_string(), "collate: no items for a batch of 0");
    }

    #[test]
    fn triples_and_scalars_of_every_type() {
        let items = vec![(1.5f64, true, bf16::from_f32(2.0)), (2.5, false, bf16::ONE)];
        let (a, b, c) = Collate::collate(items, Const::<2>, Device::Cpu).unwrap();
        assert_eq!(a.to_vec(), vec![1.5, 2.5]);
        assert_eq!(b.to_vec(), vec![true, false]);
        assert_eq!(c.to_vec(), vec![bf16::from_f32(2.0), bf16::ONE]);
        let s: Tensor<(Const<3>,), u8> = Collate::collate([3u8, 1, 2], Const, Device::Cpu).unwrap();
        assert_eq!(s.to_vec(), vec![3, 1, 2]);
    }

    #[test]
    fn scalar_tensors_become_vectors() {
        let items: Vec<Tensor<Rank0>> = (0..3)
            .map(|i| Tensor::from_array(i as f32, Device::Cpu))
            .collect();
        let b: Tensor<(usize,)> = Collate::collate(items, 3usize, Device::Cpu).unwrap();
        assert_eq!(b.to_vec(), vec![0.0, 1.0, 2.0]);
    }
}
