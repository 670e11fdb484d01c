//! The one launch point: every kernel launch, graph replay and library call (cuBLAS) on a
//! GPU goes through [`submit`], which binds the GPU's context, counts the dispatch and names
//! the call in any error. Launches are queued on the GPU's stream and not waited for. Making
//! a kernel ready to launch ([`load_kernel`]) and forgetting the loaded ones are here too:
//! they are the launch's first step, for GPU `ordinal`.

use super::context::lock;
use super::gpu::{Gpu, gpu};
use super::kernel::{Kernel, KernelOrigin, function};
use crate::Result;
use cudarc::driver::{DriverError, sys};
use half::{bf16, f16};
use rtx_kernels::kernel::{KernelShape, KernelStrides};
use std::ffi::c_void;
use std::sync::OnceLock;

/// Runs one dispatch `f` on `g`: binds the context, counts it, and returns its result.
pub(crate) fn submit<T>(g: &Gpu, f: impl FnOnce(&Gpu) -> Result<T>) -> Result<T> {
    g.bind()?;
    crate::dispatch::count(g.device());
    f(g)
}

/// [`submit`] of one driver call, whose error is named `call`.
pub(crate) fn submit_driver<T>(
    g: &Gpu,
    call: &'static str,
    f: impl FnOnce(&Gpu) -> std::result::Result<T, DriverError>,
) -> Result<T> {
    submit(g, |g| f(g).map_err(|e| g.err(call, e)))
}

/// A kernel launch's grid, block and dynamic shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks in x, y, z.
    pub grid: (u32, u32, u32),
    /// Threads per block in x, y, z.
    pub block: (u32, u32, u32),
    /// Dynamic shared memory per block, in bytes: 0 for what the kernel declares; for a
    /// kernel whose shared arrays are dynamic, at most that, when its arguments make it use
    /// only a prefix of them (a smaller block takes less, so more blocks share a
    /// multiprocessor).
    pub shared_mem: u32,
}

impl LaunchConfig {
    /// One thread per element of `n`, in blocks of `block` threads (a 1-d grid).
    ///
    /// ```
    /// # use rtx_backends::cuda::LaunchConfig;
    /// let c = LaunchConfig::for_elements(1000, 256);
    /// assert_eq!((c.grid.0, c.block.0), (4, 256));
    /// ```
    pub fn for_elements(n: usize, block: u32) -> LaunchConfig {
        let blocks = n.div_ceil(block.max(1) as usize).max(1);
        LaunchConfig {
            grid: (blocks.min(u32::MAX as usize) as u32, 1, 1),
            block: (block, 1, 1),
            shared_mem: 0,
        }
    }
}

/// A value a kernel takes by value: a scalar, a device pointer, or one of the kernel ABI's
/// `#[repr(C)]` layout structs.
pub trait KernelArg: sealed::Sealed {
    /// Appends the argument's bytes as 64-bit words, little-endian (a scalar fills the low
    /// bytes of one word; a struct its `#[repr(C)]` bytes, whose size is a multiple of 8).
    fn push_words(&self, words: &mut Vec<u64>);
}

pub(super) mod sealed {
    pub trait Sealed {}
}

/// A device address, as a kernel's pointer parameter takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DevicePtr(pub u64);

macro_rules! scalar_arg {
    ($($t:ty => |$x:ident| $e:expr),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl KernelArg for $t {
            fn push_words(&self, words: &mut Vec<u64>) {
                let $x = *self;
                words.push($e);
            }
        }
    )*};
}

scalar_arg! {
    f32 => |x| x.to_bits() as u64,
    f64 => |x| x.to_bits(),
    f16 => |x| x.to_bits() as u64,
    bf16 => |x| x.to_bits() as u64,
    i32 => |x| x as u32 as u64,
    i64 => |x| x as u64,
    u32 => |x| x as u64,
    u64 => |x| x,
    u8 => |x| x as u64,
    bool => |x| x as u64,
    DevicePtr => |x| x.0,
}

impl sealed::Sealed for KernelShape {}
impl KernelArg for KernelShape {
    fn push_words(&self, words: &mut Vec<u64>) {
        words.push(self.rank as u64 | ((self.vectors as u64) << 32));
        words.extend_from_slice(&self.dims);
    }
}

impl sealed::Sealed for KernelStrides {}
impl KernelArg for KernelStrides {
    fn push_words(&self, words: &mut Vec<u64>) {
        words.push(self.offset as u64);
        words.extend(self.strides.iter().map(|&s| s as u64));
    }
}

/// The arguments of one launch, in the kernel's parameter order.
///
/// ```
/// # use rtx_backends::cuda::{DevicePtr, LaunchArgs};
/// let mut a = LaunchArgs::new();
/// a.push(DevicePtr(0x1000)).push(3u32).push(0.5f32);
/// assert_eq!(a.len(), 3);
/// ```
#[derive(Clone, Debug, Default)]
pub struct LaunchArgs {
    /// Every argument's words, back to back (8-byte aligned, as every kernel argument is).
    words: Vec<u64>,
    /// Where each argument starts in `words`.
    starts: Vec<usize>,
}

impl LaunchArgs {
    /// No arguments yet.
    pub fn new() -> LaunchArgs {
        LaunchArgs::default()
    }

    /// Appends one argument.
    pub fn push<A: KernelArg>(&mut self, a: A) -> &mut LaunchArgs {
        self.starts.push(self.words.len());
        a.push_words(&mut self.words);
        self
    }

    /// The number of arguments.
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }
}

/// Launches `kernel` on GPU `ordinal`'s stream (compiling or loading it on first use), and
/// counts one dispatch. Returns once the launch is queued; errors of the kernel's own run
/// surface at the next synchronizing call.
///
/// # Safety
/// `args` must match the kernel's parameters in number, order and type (each slot is read as
/// the parameter's type, from its low bytes), and every pointer must be valid for what the
/// kernel reads and writes.
pub unsafe fn launch(
    ordinal: usize,
    kernel: &Kernel,
    config: LaunchConfig,
    args: &LaunchArgs,
) -> Result<()> {
    let g = gpu(ordinal)?;
    let (f, _) = function(&g, &g.kernels, kernel)?;
    let mut words = args.words.clone();
    let base = words.as_mut_ptr();
    let mut params: Vec<*mut c_void> = args
        .starts
        .iter()
        // SAFETY: every start indexes into `words` (or one past its end only for an argument
        // of no bytes, which the driver never reads).
        .map(|&i| unsafe { base.add(i) } as *mut c_void)
        .collect();
    // A kernel whose shared arrays are dynamic takes them at every launch, or the prefix of
    // them the launch asks for.
    let shared = match (config.shared_mem, kernel.dynamic_shared) {
        (0, declared) => declared,
        (asked, 0) => asked,
        (asked, declared) if asked <= declared => asked,
        (asked, declared) => {
            return Err(crate::BackendError::BadArgument {
                op: "launch",
                msg: format!(
                    "kernel `{}` declares {declared} bytes of shared memory; a launch asked \
                     for {asked}",
                    kernel.name
                ),
            });
        }
    };
    // A cooperative launch when the blocks wait for each other; else, not inside a capture,
    // an early one: in a graph the programmatic edges measured slower than plain ones
    // (benches/README.md, "early launch"), while on a stream they hide launch time.
    let attribute = if kernel.cooperative {
        let fits = resident_blocks(&g, f, config.block, shared)?;
        let (x, y, z) = config.grid;
        let blocks = x as usize * y as usize * z as usize;
        if blocks > fits {
            return Err(crate::BackendError::BadArgument {
                op: "launch",
                msg: format!(
                    "kernel `{}` synchronizes its grid (grid_sync), so all its blocks must be \
                     resident at once: a grid of {blocks} blocks of {:?} threads ({shared} bytes \
                     of dynamic shared memory) is more than the {fits} this GPU holds",
                    kernel.name, config.block
                ),
            });
        }
        Some(Attribute::Cooperative)
    } else if kernel.waits_for_previous_grid
        && g.cc >= (9, 0)
        && !g.capturing()
        && early_launch_enabled()
    {
        Some(Attribute::Early)
    } else {
        None
    };
    if let Some(attribute) = attribute {
        return submit_driver(&g, "cuLaunchKernelEx", |g| {
            // SAFETY: as below; a cooperative grid fits at once (checked above, and again by
            // the driver), and an early one waits for the previous grid before it touches
            // memory, which is what the early launch requires.
            unsafe {
                launch_with(
                    f,
                    config,
                    shared,
                    g.stream.cu_stream(),
                    &mut params,
                    attribute,
                )
            }
        });
    }
    submit_driver(&g, "cuLaunchKernel", |g| {
        // SAFETY: the caller vouches for the arguments; `params` points into `words`, which
        // outlives the call (the driver copies arguments before returning).
        unsafe {
            cudarc::driver::result::launch_kernel(
                f,
                config.grid,
                config.block,
                shared,
                g.stream.cu_stream(),
                &mut params,
            )
        }
    })
}

/// Whether kernels that wait for the previous grid are launched early (on by default;
/// `RTX_CUDA_EARLY_LAUNCH=0` turns it off, to measure what it gains).
fn early_launch_enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("RTX_CUDA_EARLY_LAUNCH").map_or(true, |v| v != "0"))
}

/// How [`launch_with`] launches a function beyond `cuLaunchKernel`.
enum Attribute {
    /// Programmatic stream serialization (Hopper's programmatic dependent launch): the driver
    /// may start the function once every block of the grid before it in the stream has
    /// started (or signalled with `griddepcontrol.launch_dependents`), instead of once that
    /// grid has finished, so the launch and the blocks' start overlap its tail. After anything
    /// but a kernel it is an ordinary launch. [`launch`] uses it outside graph captures only.
    Early,
    /// A cooperative launch: every block resident at once (the driver refuses a grid that
    /// does not fit), so that blocks may wait for each other.
    Cooperative,
}

/// The blocks of `block` threads and `shared` bytes of dynamic shared memory that fit the
/// GPU at once for `f`: its multiprocessors times the blocks each holds.
fn resident_blocks(
    g: &Gpu,
    f: sys::CUfunction,
    block: (u32, u32, u32),
    shared: u32,
) -> Result<usize> {
    let threads = (block.0 * block.1 * block.2) as i32;
    let mut per_sm = 0i32;
    // SAFETY: `f` is a loaded function of this context (bound by `gpu`), `per_sm` a valid
    // out-pointer.
    unsafe {
        sys::cuOccupancyMaxActiveBlocksPerMultiprocessor(&mut per_sm, f, threads, shared as usize)
            .result()
            .map_err(|e| g.err("cuOccupancyMaxActiveBlocksPerMultiprocessor", e))?;
    }
    Ok(per_sm.max(0) as usize * g.multiprocessors)
}

/// Launches `f` as `attribute` says.
///
/// # Safety
/// As `cuLaunchKernel`; for [`Attribute::Early`], `f` must execute `griddepcontrol.wait`
/// before it reads or writes memory that earlier work in the stream touches.
unsafe fn launch_with(
    f: sys::CUfunction,
    config: LaunchConfig,
    shared: u32,
    stream: sys::CUstream,
    params: &mut [*mut c_void],
    attribute: Attribute,
) -> std::result::Result<(), DriverError> {
    // SAFETY: a zeroed attribute is a valid plain-data value; the id and value are set below.
    let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
    match attribute {
        Attribute::Early => {
            attr.id =
                sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
            attr.value.programmaticStreamSerializationAllowed = 1;
        }
        Attribute::Cooperative => {
            attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
            attr.value.cooperative = 1;
        }
    }
    let cfg = sys::CUlaunchConfig {
        gridDimX: config.grid.0,
        gridDimY: config.grid.1,
        gridDimZ: config.grid.2,
        blockDimX: config.block.0,
        blockDimY: config.block.1,
        blockDimZ: config.block.2,
        sharedMemBytes: shared,
        hStream: stream,
        attrs: &mut attr,
        numAttrs: 1,
    };
    // SAFETY: the caller vouches for `f`, `params` and the early start; `cfg` and `attr`
    // outlive the call, which copies them.
    unsafe { sys::cuLaunchKernelEx(&cfg, f, params.as_mut_ptr(), std::ptr::null_mut()).result() }
}

/// Makes `k` ready to launch on GPU `ordinal` (compiling it or reading the disk cache) and
/// says where it came from; [`launch`] does this itself on first use.
pub fn load_kernel(ordinal: usize, k: &Kernel) -> Result<KernelOrigin> {
    let g = gpu(ordinal)?;
    function(&g, &g.kernels, k).map(|(_, origin)| origin)
}

/// Forgets every kernel loaded on GPU `ordinal`, so the next use reads the disk cache again
/// (for tests of the cache, and to free module memory).
pub fn forget_loaded_kernels(ordinal: usize) -> Result<()> {
    let g = gpu(ordinal)?;
    g.synchronize()?;
    lock(&g.kernels).clear();
    Ok(())
}
