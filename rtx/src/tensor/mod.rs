//! `Tensor<S, E>`: a cheap handle to shared storage plus a layout. The shape type `S` and the
//! element type `E` are checked by the compiler; the sizes of run-time dims are checked when
//! ops run.
//!
//! Invariant: `layout.dims()` always equals `shape.dims()`, and the layout stays inside the
//! storage. Views share storage and copy nothing; ops allocate fresh contiguous storage.

pub(crate) mod attention;
mod conv;
mod create;
mod display;
mod elementwise;
mod index;
mod join;
pub(crate) mod kernel;
mod matmul;
mod random;
mod range;
mod reduce;
mod view;

pub(crate) use conv::conv_check;
pub use conv::*;
pub use elementwise::Operand;
pub(crate) use elementwise::sum_to_num;
pub use matmul::*;
pub use random::*;
pub use reduce::*;
pub use view::Replaced;

use crate::autograd::Node;
use crate::error::Result;
use crate::shape::Shape;
use rtx_backends::{Device, Layout, Storage};
use rtx_kernels::{DType, Element};
use std::sync::Arc;

/// An n-dimensional array whose shape type `S` and element type `E` are known to the compiler.
///
/// ```
/// use rtx::prelude::*;
/// let x: Tensor<Rank2<2, 3>> = Tensor::from_array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], Device::Cpu);
/// let y = x.exp() + 1.0;
/// assert_eq!(y.dims(), &[2, 3]);
/// ```
pub struct Tensor<S: Shape, E: Element = f32> {
    storage: Arc<Storage<E>>,
    layout: Layout,
    shape: S,
    /// Gradient history: `Some` for parameters and for what was computed from them while
    /// recording (see `autograd.rs`).
    node: Option<Arc<Node>>,
}

impl<S: Shape, E: Element> Clone for Tensor<S, E> {
    fn clone(&self) -> Self {
        Tensor {
            storage: self.storage.clone(),
            layout: self.layout,
            shape: self.shape,
            node: self.node.clone(),
        }
    }
}

impl<S: Shape, E: Element> Tensor<S, E> {
    /// Wraps fresh contiguous storage holding `shape.numel()` elements.
    pub(crate) fn from_storage(storage: Storage<E>, shape: S) -> Self {
        debug_assert_eq!(storage.len(), shape.numel());
        Tensor {
            layout: Layout::contiguous(&shape.dims()),
            storage: Arc::new(storage),
            shape,
            node: None,
        }
    }

    /// Wraps fresh storage seen through `layout` (a permutation of a dense layout, which a
    /// backward rule uses to hand a gradient over in its input's memory order).
    pub(crate) fn from_storage_layout(storage: Storage<E>, layout: Layout, shape: S) -> Self {
        debug_assert_eq!(layout.dims(), &*shape.dims());
        debug_assert!(layout.required_len() <= storage.len());
        Tensor {
            layout,
            storage: Arc::new(storage),
            shape,
            node: None,
        }
    }

    /// A view of shared storage: `storage` seen through `layout` (dims equal to `shape`'s,
    /// inside the storage), with no history. The IR executor's values become tensors so.
    pub(crate) fn from_arc_layout(storage: Arc<Storage<E>>, layout: Layout, shape: S) -> Self {
        debug_assert_eq!(layout.dims(), &*shape.dims());
        debug_assert!(layout.required_len() <= storage.len());
        Tensor {
            layout,
            storage,
            shape,
            node: None,
        }
    }

    /// The storage for writing in place: `Some` only when this handle is its sole owner (no
    /// view, clone or recorded graph shares it) and the layout is dense over all of it, so a
    /// write can change no other tensor's values.
    pub(crate) fn storage_mut(&mut self) -> Option<&mut Storage<E>> {
        let whole = self.layout.contiguous_range() == Some(0..self.storage.len());
        if whole {
            Arc::get_mut(&mut self.storage)
        } else {
            None
        }
    }

    /// The storage when this handle is its sole owner, whatever the layout (mixed precision
    /// takes a working tensor's buffer out for one multi-tensor cast and puts it back; the
    /// buffer is not a view's, so nothing else can see it while it is out).
    pub(crate) fn owned_storage_mut(&mut self) -> Option<&mut Storage<E>> {
        Arc::get_mut(&mut self.storage)
    }

    /// The storage handle and layout, for code that works on them without the shape type
    /// (compiled once per element type, not once per shape). The caller keeps the invariant:
    /// the layout keeps its dims and stays inside the storage.
    pub(crate) fn parts_mut(&mut self) -> (&mut Arc<Storage<E>>, &mut Layout) {
        (&mut self.storage, &mut self.layout)
    }

    /// The gradient-history node, if any.
    pub(crate) fn node(&self) -> Option<&Arc<Node>> {
        self.node.as_ref()
    }

    /// The same tensor with another gradient-history node.
    pub(crate) fn with_node(mut self, node: Option<Arc<Node>>) -> Self {
        self.node = node;
        self
    }

    /// A view of the same storage with another layout and shape, without gradient history
    /// (view ops record their own backward rule).
    pub(crate) fn view<S2: Shape>(&self, layout: Layout, shape: S2) -> Tensor<S2, E> {
        debug_assert_eq!(layout.dims(), &*shape.dims());
        Tensor {
            storage: self.storage.clone(),
            layout,
            shape,
            node: None,
        }
    }

    /// The storage this tensor views.
    pub(crate) fn storage(&self) -> &Storage<E> {
        &self.storage
    }

    /// Where the storage is (its handle's address): it changes exactly when the tensor is
    /// given a new buffer, which a captured CUDA graph must not see happen to a parameter.
    pub(crate) fn storage_place(&self) -> usize {
        Arc::as_ptr(&self.storage) as *const () as usize
    }

    /// Identifies the buffer this tensor views: tensors that share storage (views, clones)
    /// give the same value, and it changes when the tensor is given a buffer of its own (an
    /// in-place kernel write to a shared tensor copies it first). Code that keeps a captured
    /// CUDA graph, which reads and writes fixed addresses, checks it to see that its tensors
    /// stayed in place.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let a: Tensor<Rank2<2, 3>> = Tensor::zeros((Const, Const), Device::Cpu);
    /// let b = a.clone();
    /// assert_eq!(a.buffer_id(), b.buffer_id());
    /// assert_eq!(a.buffer_id(), a.t().buffer_id());
    /// assert_ne!(a.buffer_id(), a.t().contiguous().buffer_id());
    /// ```
    pub fn buffer_id(&self) -> usize {
        self.storage_place()
    }

    /// The shared storage handle itself.
    pub(crate) fn storage_arc(&self) -> &Arc<Storage<E>> {
        &self.storage
    }

    /// The layout over the storage.
    pub(crate) fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The shape value (its run-time sizes and its type).
    pub fn shape(&self) -> S {
        self.shape
    }

    /// The sizes, as PyTorch's `.shape` gives them.
    pub fn dims(&self) -> &[usize] {
        self.layout.dims()
    }

    /// The number of elements.
    pub fn numel(&self) -> usize {
        self.shape.numel()
    }

    /// The number of dimensions.
    pub fn rank(&self) -> usize {
        S::RANK
    }

    /// The element type's run-time tag.
    pub fn dtype(&self) -> DType {
        E::DTYPE
    }

    /// The device the storage lives on.
    pub fn device(&self) -> Device {
        self.storage.device()
    }

    /// The strides of the view, in elements.
    pub fn strides(&self) -> &[usize] {
        self.layout.strides()
    }

    /// Whether the elements are dense and row-major in storage.
    pub fn is_contiguous(&self) -> bool {
        self.layout.is_contiguous()
    }

    /// Whether two tensors view the same storage (a view shares; an op allocates).
    pub fn shares_storage_with<S2: Shape>(&self, other: &Tensor<S2, E>) -> bool {
        Arc::ptr_eq(&self.storage, &other.storage)
    }

    /// The elements of a tensor on the CPU, borrowed in logical row-major order without a
    /// copy; `None` on other devices, or for a strided view (a transpose, a narrowed inner
    /// dim), whose elements are not one run of memory (see [`Tensor::to_vec`]).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let t: Tensor<Rank2<2, 2>, i32> = Tensor::from_array([[1, 2], [3, 4]], Device::Cpu);
    /// assert_eq!(t.as_cpu_slice(), Some(&[1, 2, 3, 4][..]));
    /// assert_eq!(t.t().as_cpu_slice(), None);
    /// ```
    pub fn as_cpu_slice(&self) -> Option<&[E]> {
        let range = self.layout.contiguous_range()?;
        self.storage.as_cpu_slice().map(|s| &s[range])
    }

    /// The elements in logical row-major order, copied to the host.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let t: Tensor<Rank2<2, 2>, i32> = Tensor::from_array([[1, 2], [3, 4]], Device::Cpu);
    /// assert_eq!(t.t().to_vec(), vec![1, 3, 2, 4]);
    /// ```
    pub fn to_vec(&self) -> Vec<E> {
        self.storage.to_vec(&self.layout)
    }

    /// A dense row-major copy, or the tensor itself when it already is one.
    pub fn contiguous(&self) -> Tensor<S, E> {
        crate::error::ok(self.try_contiguous())
    }

    /// [`Tensor::contiguous`], returning device errors.
    pub fn try_contiguous(&self) -> Result<Tensor<S, E>> {
        if self.layout.is_contiguous() {
            return Ok(self.clone());
        }
        let out = Tensor::from_storage(self.storage.contiguous(&self.layout)?, self.shape);
        Ok(self.track_view(out, |g| Ok(g.clone())))
    }

    /// The tensor converted to another element type (floats to integers truncate toward zero).
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let t: Tensor<Rank1<3>> = Tensor::from_array([1.7, -2.5, 0.0], Device::Cpu);
    /// assert_eq!(t.cast::<i32>().to_vec(), vec![1, -2, 0]);
    /// assert_eq!(t.cast::<bool>().to_vec(), vec![true, true, false]);
    /// ```
    pub fn cast<U: Element>(&self) -> Tensor<S, U> {
        crate::error::ok(self.try_cast())
    }

    /// [`Tensor::cast`], returning device errors.
    pub fn try_cast<U: Element>(&self) -> Result<Tensor<S, U>> {
        let out = Tensor::from_storage(self.storage.cast::<U>(&self.layout)?, self.shape);
        // Only a float-to-float cast passes gradients on.
        if !U::DTYPE.is_float() || !crate::autograd::must_record(&[self.node()]) {
            return Ok(out);
        }
        Ok(out.record(vec![self.node().cloned()], |g| {
            Ok(vec![crate::autograd::erase(g.try_cast::<E>()?)])
        }))
    }

    /// A copy on another device.
    pub fn to_device(&self, device: Device) -> Tensor<S, E> {
        crate::error::ok(self.try_to_device(device))
    }

    /// [`Tensor::to_device`], returning device errors.
    pub fn try_to_device(&self, device: Device) -> Result<Tensor<S, E>> {
        Ok(Tensor::from_storage(
            self.storage.to_device(&self.layout, device)?,
            self.shape,
        ))
    }
}

impl<E: Element> Tensor<(), E> {
    /// The value of a scalar tensor.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let t: Tensor<Rank1<3>> = Tensor::from_array([1.0, 2.0, 3.0], Device::Cpu);
    /// assert_eq!(t.sum_all().item(), 6.0);
    /// ```
    pub fn item(&self) -> E {
        self.to_vec()[0]
    }
}
