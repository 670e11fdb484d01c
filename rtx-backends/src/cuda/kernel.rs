//! Kernels: CUDA C source compiled by NVRTC for the GPU's own architecture, cached on disk
//! (see [`super::disk_cache`]) and loaded once per GPU.
//!
//! rtx launches only kernels that `#[kernel]` generates; this module compiles whatever source
//! it is handed. The cache key covers the source, the architecture, the NVRTC version and the
//! options, since each of them changes the machine code (NVRTC fuses multiply-adds by default,
//! so `--fmad` is part of a kernel's identity). The name is not part of the key: one source
//! is compiled and loaded once per GPU as a module, and each of its functions (a generated
//! kernel has one per element type and variant) is looked up in that module.
//!
//! The functions here take the GPU's bare context and its loaded kernels; the per-ordinal
//! entry points (`load_kernel`, `forget_loaded_kernels`) sit beside the launch point.

use super::context::{Context, lock};
use super::disk_cache::{self, Format};
use super::probe::{Lib, guard, require};
use crate::{BackendError, Result};
use cudarc::driver::sys::{CUfunction, CUfunction_attribute};
use cudarc::driver::{CudaFunction, CudaModule};
use cudarc::nvrtc::{Ptx, result as nvrtc, sys as nvrtc_sys};
use std::collections::HashMap;
use std::ffi::CString;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

/// A CUDA kernel: its CUDA C source and the name of its `extern "C" __global__` function.
///
/// ```
/// # use rtx_backends::cuda::Kernel;
/// const NOTHING: Kernel = Kernel::new("nothing", "extern \"C\" __global__ void nothing() {}");
/// assert_eq!(NOTHING.name, "nothing");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Kernel {
    /// The `extern "C" __global__` function to launch.
    pub name: &'static str,
    /// The CUDA C source, with everything the function needs.
    pub source: &'static str,
    /// NVRTC options beyond the architecture, e.g. `--fmad=false` (part of the cache key).
    pub options: &'static [&'static str],
    /// Dynamic shared memory a launch may ask for past the default 48 KiB, in bytes (0: no
    /// more than the default); the function's limit is raised to it when it is loaded.
    pub dynamic_shared: u32,
    /// Whether the function starts by waiting for the grid before it in the stream (every
    /// `#[kernel]` entry does, with `griddepcontrol.wait`), so that on Hopper it may be
    /// launched before that grid has finished ([`super::launch`] says how).
    pub waits_for_previous_grid: bool,
    /// Whether the function's blocks wait for each other (`grid_sync`): it is launched
    /// cooperatively, every block resident at once, or the launch fails.
    pub cooperative: bool,
}

impl Kernel {
    /// A kernel with NVRTC's default options.
    pub const fn new(name: &'static str, source: &'static str) -> Kernel {
        Kernel {
            name,
            source,
            options: &[],
            dynamic_shared: 0,
            waits_for_previous_grid: false,
            cooperative: false,
        }
    }

    /// The same kernel, declared to wait for the previous grid before it touches memory
    /// (`griddepcontrol.wait` first thing in the function). Declaring it for a function that
    /// does not wait lets it read what the kernel before it has not finished writing.
    pub const fn waiting_for_previous_grid(self) -> Kernel {
        Kernel {
            waits_for_previous_grid: true,
            ..self
        }
    }

    /// The same kernel, launched cooperatively: all its blocks resident at once, so that they
    /// may wait for each other (`grid_sync`); a launch of more blocks than fit the GPU fails.
    pub const fn cooperative(self) -> Kernel {
        Kernel {
            cooperative: true,
            ..self
        }
    }

    /// The same kernel compiled with `options` (each one is part of the cache key).
    pub const fn with_options(self, options: &'static [&'static str]) -> Kernel {
        Kernel { options, ..self }
    }

    /// The same kernel launched with `bytes` of dynamic shared memory, which may pass 48 KiB.
    pub const fn with_dynamic_shared(self, bytes: u32) -> Kernel {
        Kernel {
            dynamic_shared: bytes,
            ..self
        }
    }
}

/// Where a kernel came from when it was made ready to launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelOrigin {
    /// Already loaded on this GPU in this process.
    Loaded,
    /// Read from the on-disk cache.
    DiskCache,
    /// Compiled by NVRTC: no cache entry existed.
    Compiled,
    /// Compiled by NVRTC because the cache entry was corrupt or would not load.
    Rebuilt,
}

/// The kernels loaded into one GPU's context.
#[derive(Default)]
pub(crate) struct LoadedKernels {
    /// Modules by cache key, with the functions looked up in each so far.
    map: HashMap<u128, (Arc<CudaModule>, HashMap<&'static str, CudaFunction>)>,
    /// Launch-time fast path: a kernel's `'static` strings never move, so their addresses
    /// identify it without hashing its source on every launch. Values are `CUfunction`s kept as
    /// integers (the functions live in `map`'s modules).
    by_addr: HashMap<[usize; 4], usize>,
}

impl LoadedKernels {
    /// Forgets every module and function, so the next use reads the disk cache again.
    pub(crate) fn clear(&mut self) {
        self.map.clear();
        self.by_addr.clear();
    }
}

fn addr(k: &Kernel) -> [usize; 4] {
    [
        k.name.as_ptr() as usize,
        k.source.as_ptr() as usize,
        k.source.len(),
        k.options.as_ptr() as usize ^ k.options.len().rotate_left(32),
    ]
}

/// NVRTC's version (major, minor).
pub fn nvrtc_version() -> Result<(i32, i32)> {
    require(Lib::Nvrtc)?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: two out-pointers to live integers.
    unsafe { nvrtc_sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|e| BackendError::CudaUnavailable {
            msg: format!("nvrtcVersion: {e:?}"),
        })?;
    Ok((major, minor))
}

/// The toolkit's include folder, when one exists: NVRTC finds no headers by itself, so a
/// kernel including `<cuda_fp16.h>` needs it named. Not part of the cache key (it moves with
/// the machine, and the headers are the toolkit's, which the NVRTC version already names).
fn include_dir() -> Option<PathBuf> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        ["CUDA_PATH", "CUDA_HOME"]
            .iter()
            .filter_map(std::env::var_os)
            .map(PathBuf::from)
            .chain([PathBuf::from("/usr/local/cuda")])
            .map(|p| p.join("include"))
            .find(|p| p.join("cuda_fp16.h").is_file())
    })
    .clone()
}

/// The architecture NVRTC compiles for: the GPU's own, `sm_XY`, with Hopper's
/// architecture-specific features on (`sm_90a`, which `wgmma` needs). Such code runs on
/// compute capability 9.0 alone, the GPU it is compiled for and loaded on.
pub(crate) fn arch(cx: &Context) -> String {
    match cx.cc {
        (9, 0) => "sm_90a".to_string(),
        (major, minor) => format!("sm_{major}{minor}"),
    }
}

/// The cache key of `k`'s source compiled for `arch` by NVRTC `version`.
fn key(k: &Kernel, arch: &str, version: (i32, i32)) -> u128 {
    let v = format!("{}.{}", version.0, version.1);
    let opts = k.options.join("\0");
    disk_cache::hash128(&[
        b"rtx-module-v2",
        k.source.as_bytes(),
        arch.as_bytes(),
        v.as_bytes(),
        opts.as_bytes(),
    ])
}

/// The launchable function of `k` on the GPU of `cx`, whose loaded kernels are `loaded`,
/// compiling or reading the disk cache on first use.
pub(crate) fn function(
    cx: &Context,
    loaded: &Mutex<LoadedKernels>,
    k: &Kernel,
) -> Result<(CUfunction, KernelOrigin)> {
    if let Some(&f) = lock(loaded).by_addr.get(&addr(k)) {
        return Ok((f as CUfunction, KernelOrigin::Loaded));
    }
    let arch = arch(cx);
    let version = nvrtc_version()?;
    let key = key(k, &arch, version);
    {
        let kernels = lock(loaded);
        let found = kernels.map.get(&key).map(|(m, _)| m.clone());
        if let Some(module) = found {
            drop(kernels);
            let f = function_in(cx, k, &module)?;
            return Ok(remember(loaded, k, key, (module, f), KernelOrigin::Loaded));
        }
    }
    if k.name.contains('\0') || k.source.contains('\0') {
        return Err(BackendError::BadArgument {
            op: "kernel",
            msg: format!("kernel `{}` has a NUL byte in its name or source", k.name),
        });
    }
    let path = disk_cache::kernel_cache_dir().map(|d| disk_cache::entry_path(&d, key));
    let mut origin = KernelOrigin::Compiled;
    if let Some(p) = &path {
        match disk_cache::read(p) {
            Some((format, bytes)) => match load(cx, k, format, bytes)
                .and_then(|m| function_in(cx, k, &m).map(|f| (m, f)))
            {
                Ok(module) => {
                    return Ok(remember(loaded, k, key, module, KernelOrigin::DiskCache));
                }
                Err(_) => origin = KernelOrigin::Rebuilt,
            },
            None if p.exists() => origin = KernelOrigin::Rebuilt,
            None => {}
        }
    }
    let (format, bytes) = compile(k, &arch)?;
    let module = load(cx, k, format, bytes.clone())?;
    let module = (module.clone(), function_in(cx, k, &module)?);
    if let Some(p) = &path {
        // A cache that cannot be written costs a recompile next run, nothing more.
        let _ = disk_cache::write(p, format, &bytes);
    }
    Ok(remember(loaded, k, key, module, origin))
}

fn remember(
    loaded: &Mutex<LoadedKernels>,
    k: &Kernel,
    key: u128,
    module: (Arc<CudaModule>, CudaFunction),
    origin: KernelOrigin,
) -> (CUfunction, KernelOrigin) {
    let (module, function) = module;
    let f = function.cu_function();
    let mut kernels = lock(loaded);
    let entry = kernels
        .map
        .entry(key)
        .or_insert_with(|| (module, HashMap::new()));
    entry.1.insert(k.name, function);
    kernels.by_addr.insert(addr(k), f as usize);
    (f, origin)
}

/// `k`'s function in a loaded module.
fn function_in(cx: &Context, k: &Kernel, module: &Arc<CudaModule>) -> Result<CudaFunction> {
    let f = module
        .load_function(k.name)
        .map_err(|e| cx.err("cuModuleGetFunction", e))?;
    // Past 48 KiB a function must opt in to the dynamic shared memory its launches ask for.
    if k.dynamic_shared > 48 * 1024 {
        f.set_attribute(
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            k.dynamic_shared as i32,
        )
        .map_err(|e| BackendError::Cuda {
            device: cx.device(),
            call: "cuFuncSetAttribute",
            msg: format!(
                "kernel `{}` needs {} bytes of shared memory a block: {e:?}",
                k.name, k.dynamic_shared
            ),
        })?;
    }
    Ok(f)
}

/// Loads compiled code into the context of `cx` as a module.
fn load(cx: &Context, k: &Kernel, format: Format, bytes: Vec<u8>) -> Result<Arc<CudaModule>> {
    let image = match format {
        Format::Cubin => Ptx::from_binary(bytes),
        Format::Ptx => {
            let text = String::from_utf8(bytes).map_err(|_| BackendError::Cuda {
                device: cx.device(),
                call: "cuModuleLoadData",
                msg: format!("the PTX of kernel `{}` is not text", k.name),
            })?;
            Ptx::from_src(text.trim_end_matches('\0').to_string())
        }
    };
    cx.ctx
        .load_module(image)
        .map_err(|e| cx.err("cuModuleLoadData", e))
}

/// Compiles `k` for `arch` with NVRTC: a cubin when NVRTC gives one, else PTX.
fn compile(k: &Kernel, arch: &str) -> Result<(Format, Vec<u8>)> {
    require(Lib::Nvrtc)?;
    let mut opts = vec![format!("--gpu-architecture={arch}")];
    if let Some(inc) = include_dir() {
        opts.push(format!("--include-path={}", inc.display()));
    }
    opts.extend(k.options.iter().map(|o| o.to_string()));
    guard("NVRTC", || compile_unguarded(k, arch, &opts))?
}

fn compile_unguarded(k: &Kernel, arch: &str, opts: &[String]) -> Result<(Format, Vec<u8>)> {
    let fail = |what: &str, e: nvrtc::NvrtcError| BackendError::Compile {
        kernel: k.name.to_string(),
        arch: arch.to_string(),
        log: format!("{what}: {e:?}"),
    };
    let src = CString::new(k.source).map_err(|_| {
        fail(
            "source",
            nvrtc::NvrtcError(nvrtc_sys::nvrtcResult::NVRTC_ERROR_INVALID_INPUT),
        )
    })?;
    let file = CString::new(format!("{}.cu", k.name)).map_err(|_| {
        fail(
            "name",
            nvrtc::NvrtcError(nvrtc_sys::nvrtcResult::NVRTC_ERROR_INVALID_INPUT),
        )
    })?;
    let prog =
        nvrtc::create_program(&src, Some(&file)).map_err(|e| fail("nvrtcCreateProgram", e))?;
    // SAFETY: `prog` is live until the destroy below, on every path.
    let out = unsafe {
        let compiled = nvrtc::compile_program(prog, opts);
        let log = nvrtc::get_program_log(prog)
            .map(|l| {
                let bytes: Vec<u8> = l.iter().map(|&c| c as u8).take_while(|&c| c != 0).collect();
                String::from_utf8_lossy(&bytes).into_owned()
            })
            .unwrap_or_default();
        match compiled {
            Err(e) => Err(BackendError::Compile {
                kernel: k.name.to_string(),
                arch: arch.to_string(),
                log: if log.trim().is_empty() {
                    format!("{e:?}")
                } else {
                    log
                },
            }),
            Ok(()) => cubin(prog)
                .map(|c| (Format::Cubin, c))
                .or_else(|| {
                    nvrtc::get_ptx(prog)
                        .ok()
                        .map(|p| (Format::Ptx, p.iter().map(|&c| c as u8).collect()))
                })
                .ok_or_else(|| BackendError::Compile {
                    kernel: k.name.to_string(),
                    arch: arch.to_string(),
                    log: "NVRTC produced neither a cubin nor PTX".into(),
                }),
        }
    };
    // SAFETY: created above and not yet destroyed.
    let _ = unsafe { nvrtc::destroy_program(prog) };
    out
}

/// The cubin of a compiled program, when NVRTC made one (it does for a real `sm_XY` target).
///
/// # Safety
/// `prog` must be a live, compiled program.
unsafe fn cubin(prog: nvrtc_sys::nvrtcProgram) -> Option<Vec<u8>> {
    let mut size = 0usize;
    // SAFETY: per the caller; `size` is a live out-pointer.
    unsafe { nvrtc_sys::nvrtcGetCUBINSize(prog, &mut size) }
        .result()
        .ok()?;
    if size == 0 {
        return None;
    }
    let mut buf = vec![0u8; size];
    // SAFETY: `buf` holds the `size` bytes NVRTC asked for.
    unsafe { nvrtc_sys::nvrtcGetCUBIN(prog, buf.as_mut_ptr().cast()) }
        .result()
        .ok()?;
    Some(buf)
}
