//! The device trait: what a backend provides (memory, copies, kernel launches, matrix products
//! and capture) over type-erased buffers and element-type tags, and the registry that makes a
//! new backend a [`Device`] without a change anywhere in `rtx`.
//!
//! A backend implements [`Backend`] and is registered once ([`register_backend`]); the returned
//! `Device::Backend(n)` then works wherever a device does: `Tensor::to_device`, every op, the
//! tape and the optimizers. A backend needs only the memory primitives ([`Backend::upload`],
//! [`Backend::download`], [`Backend::copy`]); every op it does not run natively (its
//! [`Backend::launch`] or [`Backend::gemm`] answers `None`) runs on host copies of its operands
//! and the result is uploaded back, so a new backend is correct from its first day and fast
//! where it chooses to be. The two built-in backends implement the trait too
//! (`storage/builtin.rs`: [`backend`](crate::storage::backend)`(Device::Cpu)`,
//! `backend(Device::Cuda(n))`); `Storage` keeps typed arms for them, so their hot paths never
//! box a buffer. This file knows nothing of storage: the storage layer sits above it.

use crate::{BackendError, Device, Layout, Result};
use rtx_kernels::op::{BinaryOp, UnaryOp};
use rtx_kernels::{DType, Element};
use std::any::Any;
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, RwLock};

/// A backend's buffer: elements of one type in its device's memory, behind a handle that only
/// the backend that made it reads. Buffers are shared between views; ops make new ones.
#[derive(Clone)]
pub struct Buffer {
    dtype: DType,
    len: usize,
    handle: Arc<dyn Any + Send + Sync>,
}

impl Buffer {
    /// A buffer of `len` elements of `dtype` held by `handle`, the backend's own type.
    pub fn new<H: Any + Send + Sync>(dtype: DType, len: usize, handle: H) -> Self {
        Buffer {
            dtype,
            len,
            handle: Arc::new(handle),
        }
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The backend's handle, when it is of type `H`.
    pub fn handle<H: Any>(&self) -> Option<&H> {
        self.handle.downcast_ref()
    }
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Buffer({} x {})", self.len, self.dtype.name())
    }
}

/// A kernel a backend may run natively: the op, its buffers and their layouts. The output is a
/// new dense buffer of the layouts' dims (an elementwise op's layouts are already broadcast to
/// one shape, a broadcast dim having stride 0).
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum Kernel<'a> {
    /// A float unary op (`exp`, `tanh`, ...) of the same element type out.
    Unary {
        /// The op.
        op: UnaryOp,
        /// The input.
        x: &'a Buffer,
        /// Its layout.
        layout: &'a Layout,
    },
    /// A numeric binary op of two operands of one element type.
    Binary {
        /// The op.
        op: BinaryOp,
        /// The left operand.
        lhs: &'a Buffer,
        /// Its layout.
        lhs_layout: &'a Layout,
        /// The right operand.
        rhs: &'a Buffer,
        /// Its layout, of the same dims.
        rhs_layout: &'a Layout,
    },
}

/// A (batched) matrix product for [`Backend::gemm`]: `lhs` viewed as `[batch.., M, K]` times
/// `rhs` viewed as `[batch.., K, N]` (a broadcast batch dim has stride 0), plus `bias` (`[N]`)
/// on every row when given: the epilogue of a Linear layer. The output is a new dense
/// `[batch.., M, N]` buffer.
#[derive(Clone, Copy, Debug)]
pub struct Gemm<'a> {
    /// The left matrices.
    pub lhs: &'a Buffer,
    /// Their layout.
    pub lhs_layout: &'a Layout,
    /// The right matrices.
    pub rhs: &'a Buffer,
    /// Their layout.
    pub rhs_layout: &'a Layout,
    /// The bias added to every output row, and its layout.
    pub bias: Option<(&'a Buffer, &'a Layout)>,
}

/// A captured sequence of work that can be run again (a CUDA graph on a GPU).
pub trait Captured: Send {
    /// Runs the captured work again, on the buffers it was captured with.
    fn replay(&self) -> Result<()>;
}

/// What a device's backend provides. Element data crosses the trait as the native bytes of its
/// element type (`dtype.size()` bytes an element; `bool` as one byte, 0 or 1).
///
/// Only the memory primitives are required. The other methods have defaults: no native
/// kernels (ops run on host copies), no capture, and a synchronous device.
pub trait Backend: Send + Sync + 'static {
    /// A short lowercase name, e.g. `cpu` or `mirror`: how the device prints.
    fn name(&self) -> String;

    /// A new buffer holding `bytes`, the elements of `dtype` in native byte order.
    fn upload(&self, dtype: DType, bytes: &[u8]) -> Result<Buffer>;

    /// The native bytes of elements `range` of `buf`.
    fn download(&self, buf: &Buffer, range: Range<usize>) -> Result<Vec<u8>>;

    /// Overwrites `dst` with elements `range` of `src`, in place (both buffers of this backend,
    /// of one element type, `dst` of `range.len()` elements; the caller checks): how a captured
    /// step's fixed inputs get new values.
    fn copy(&self, src: &Buffer, range: Range<usize>, dst: &Buffer) -> Result<()>;

    /// A buffer of `len` copies of the element whose bytes are `value`. The default uploads
    /// them.
    fn fill(&self, dtype: DType, value: &[u8], len: usize) -> Result<Buffer> {
        self.upload(dtype, &value.repeat(len))
    }

    /// Waits for the work queued so far. The default has nothing to wait for.
    fn synchronize(&self) -> Result<()> {
        Ok(())
    }

    /// Runs `kernel` natively: `None` when this backend has no kernel for it (or for its
    /// element type), and the op then runs on host copies of the operands.
    fn launch(&self, kernel: &Kernel<'_>) -> Option<Result<Buffer>> {
        let _ = kernel;
        None
    }

    /// Runs a matrix product natively, its epilogue included: `None` to run it on host copies.
    fn gemm(&self, gemm: &Gemm<'_>) -> Option<Result<Buffer>> {
        let _ = gemm;
        None
    }

    /// Starts recording the work queued on this device instead of running it.
    fn begin_capture(&self) -> Result<()> {
        Err(no_capture(&self.name()))
    }

    /// Stops recording and returns what was recorded.
    fn end_capture(&self) -> Result<Box<dyn Captured>> {
        Err(no_capture(&self.name()))
    }
}

/// The error of a backend asked to capture work it cannot.
pub(crate) fn no_capture(name: &str) -> BackendError {
    BackendError::BadArgument {
        op: "capture",
        msg: format!("the `{name}` backend cannot capture work"),
    }
}

/// The backends registered at run time, by the number in `Device::Backend(n)`.
fn registry() -> &'static RwLock<Vec<Arc<dyn Backend>>> {
    static REGISTRY: RwLock<Vec<Arc<dyn Backend>>> = RwLock::new(Vec::new());
    &REGISTRY
}

/// Registers a backend and returns the device that reaches it. Registering the same backend
/// twice makes two devices.
///
/// ```
/// # use rtx_backends::{Backend, Buffer, Device, Result, register_backend};
/// # use rtx_kernels::DType;
/// # use std::ops::Range;
/// # struct Null;
/// # impl Backend for Null {
/// #     fn name(&self) -> String { "null".into() }
/// #     fn upload(&self, dtype: DType, bytes: &[u8]) -> Result<Buffer> { todo!() }
/// #     fn download(&self, buf: &Buffer, range: Range<usize>) -> Result<Vec<u8>> { todo!() }
/// #     fn copy(&self, s: &Buffer, r: Range<usize>, d: &Buffer) -> Result<()> { todo!() }
/// # }
/// let device = register_backend(std::sync::Arc::new(Null));
/// assert!(matches!(device, Device::Backend(_)));
/// assert!(device.to_string().starts_with("null:"));
/// ```
pub fn register_backend(backend: Arc<dyn Backend>) -> Device {
    let mut all = registry().write().unwrap_or_else(|p| p.into_inner());
    all.push(backend);
    Device::Backend(all.len() - 1)
}
/// Registered backend `n`, or an error naming how many there are.
pub(crate) fn registered(n: usize) -> Result<Arc<dyn Backend>> {
    let all = registry().read().unwrap_or_else(|p| p.into_inner());
    all.get(n)
        .cloned()
        .ok_or_else(|| BackendError::BadArgument {
            op: "device",
            msg: format!(
                "backend device {n} was never registered ({} backends are)",
                all.len()
            ),
        })
}

/// The name of registered backend `n`, for printing a device.
pub(crate) fn registered_name(n: usize) -> Option<String> {
    registered(n).ok().map(|b| b.name())
}

/// The native bytes of a host slice.
pub fn bytes_of<E: Element>(data: &[E]) -> &[u8] {
    // SAFETY: every `Element` is plain data with no padding (floats, integers, bool and the
    // `half` types), so its bytes may be read; the length is the slice's size in bytes.
    unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), std::mem::size_of_val(data)) }
}

/// Elements of type `E` from their native bytes: an error naming `op` when the byte count is
/// not a whole number of elements or a `bool` byte is neither 0 nor 1.
pub fn vec_from_bytes<E: Element>(op: &'static str, bytes: &[u8]) -> Result<Vec<E>> {
    let size = std::mem::size_of::<E>();
    let bad = |msg: String| BackendError::BadArgument { op, msg };
    if !bytes.len().is_multiple_of(size) {
        return Err(bad(format!(
            "{} bytes are not a whole number of {} elements ({size} bytes each)",
            bytes.len(),
            E::DTYPE.name()
        )));
    }
    if E::DTYPE == DType::Bool && bytes.iter().any(|&b| b > 1) {
        return Err(bad("a bool byte is neither 0 nor 1".into()));
    }
    let n = bytes.len() / size;
    let mut out = Vec::<E>::with_capacity(n);
    // SAFETY: `out` has room for `n` elements, i.e. `bytes.len()` bytes; every bit pattern is
    // a valid element of the plain-data `Element` types (bool's checked above), so the
    // elements are initialised once the bytes are copied.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), out.as_mut_ptr().cast::<u8>(), bytes.len());
        out.set_len(n);
    }
    Ok(out)
}
