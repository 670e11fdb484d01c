//! Opening NCCL and reaching its functions, without cudarc's loader.
//!
//! cudarc's `nccl::sys` opens the library on first call by names that never include
//! `libnccl.so.2` (the name NCCL's packages install) and panics when none opens; its safe
//! `Comm` has no non-blocking init and unwraps in `Drop`. So rtx opens NCCL itself, trying
//! `libnccl.so.2` first and then `libnccl.so` (or `RTX_NCCL_LIBRARY` when set), once per process,
//! and keeps typed pointers to the few functions it calls. cudarc's `nccl::sys` still provides the
//! C types (`ncclComm_t`, `ncclUniqueId`, `ncclConfig_t` for NCCL 2.28); results, data types and
//! operations cross as plain integers, because a Rust enum given a value a newer NCCL added would
//! be undefined behaviour.

use crate::{BackendError, Result};
use cudarc::nccl::sys::{ncclComm_t, ncclConfig_t, ncclUniqueId};
use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::OnceLock;

/// `ncclSuccess`.
pub(crate) const SUCCESS: c_int = 0;
/// `ncclInProgress`: a non-blocking call has not finished yet.
pub(crate) const IN_PROGRESS: c_int = 7;

/// A raw CUDA stream, as NCCL takes it.
pub(crate) type Stream = *mut c_void;

/// `ncclCommInitRankConfig(comm*, nranks, id, rank, config*)`.
pub(crate) type InitFn =
    unsafe extern "C" fn(*mut ncclComm_t, c_int, ncclUniqueId, c_int, *mut ncclConfig_t) -> c_int;
/// `ncclAllReduce` and `ncclReduceScatter`: (send, recv, count, type, op, comm, stream).
pub(crate) type ReduceFn = unsafe extern "C" fn(
    *const c_void,
    *mut c_void,
    usize,
    c_int,
    c_int,
    ncclComm_t,
    Stream,
) -> c_int;
/// `ncclBroadcast`: (send, recv, count, type, root, comm, stream).
pub(crate) type BroadcastFn = ReduceFn;
/// `ncclAllGather`: (send, recv, send count, type, comm, stream).
pub(crate) type GatherFn =
    unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, ncclComm_t, Stream) -> c_int;

/// The NCCL functions rtx calls, resolved from the opened library.
pub(crate) struct Nccl {
    /// Keeps the library mapped while the pointers below are in use (for the whole process).
    _lib: libloading::Library,
    /// The file name that opened.
    pub name: String,
    pub get_version: unsafe extern "C" fn(*mut c_int) -> c_int,
    pub get_unique_id: unsafe extern "C" fn(*mut ncclUniqueId) -> c_int,
    pub comm_init_rank_config: InitFn,
    pub comm_get_async_error: unsafe extern "C" fn(ncclComm_t, *mut c_int) -> c_int,
    pub comm_abort: unsafe extern "C" fn(ncclComm_t) -> c_int,
    pub comm_finalize: unsafe extern "C" fn(ncclComm_t) -> c_int,
    pub comm_destroy: unsafe extern "C" fn(ncclComm_t) -> c_int,
    pub get_error_string: unsafe extern "C" fn(c_int) -> *const c_char,
    pub get_last_error: unsafe extern "C" fn(ncclComm_t) -> *const c_char,
    pub all_reduce: ReduceFn,
    pub broadcast: BroadcastFn,
    pub all_gather: GatherFn,
    pub reduce_scatter: ReduceFn,
}

/// The library names tried, in order: the override, then the versioned name NCCL's packages
/// install, then the development symlink.
fn candidates() -> Vec<String> {
    let mut names = Vec::new();
    if let Ok(path) = std::env::var("RTX_NCCL_LIBRARY")
        && !path.is_empty()
    {
        names.push(path);
    }
    names.extend(["libnccl.so.2".to_string(), "libnccl.so".to_string()]);
    names
}

/// NCCL, opened once per process, or why it cannot be used (naming the names tried or the
/// missing symbol).
pub(crate) fn nccl() -> Result<&'static Nccl> {
    static LIB: OnceLock<std::result::Result<Nccl, String>> = OnceLock::new();
    LIB.get_or_init(open)
        .as_ref()
        .map_err(|msg| BackendError::CudaUnavailable { msg: msg.clone() })
}

/// Whether NCCL can be opened here.
pub fn nccl_available() -> bool {
    nccl().is_ok()
}

/// NCCL's version as (major, minor, patch), e.g. (2, 28, 3).
///
/// # Errors
/// [`BackendError::CudaUnavailable`] when the library cannot be opened.
///
/// ```
/// if let Ok((major, minor, _)) = rtx_backends::cuda::nccl_version() {
///     assert!(major >= 2, "NCCL {major}.{minor}");
/// }
/// ```
pub fn nccl_version() -> Result<(u32, u32, u32)> {
    let lib = nccl()?;
    let mut v: c_int = 0;
    // SAFETY: one out-pointer to a live integer.
    let r = unsafe { (lib.get_version)(&mut v) };
    check(lib, r, "ncclGetVersion")?;
    // NCCL_VERSION(X,Y,Z) is X*10000 + Y*100 + Z since 2.9.
    let v = v.max(0) as u32;
    Ok((v / 10000, v / 100 % 100, v % 100))
}

fn open() -> std::result::Result<Nccl, String> {
    let names = candidates();
    let mut tried = Vec::new();
    for name in &names {
        // SAFETY: opening a shared library runs its initialisers; NCCL's are plain C++ statics.
        match unsafe { libloading::Library::new(name) } {
            Ok(lib) => return resolve(lib, name).map_err(|e| format!("NCCL ({name}): {e}")),
            Err(e) => tried.push(format!("{name}: {e}")),
        }
    }
    Err(format!(
        "NCCL was not found (tried {}; set RTX_NCCL_LIBRARY to its path)",
        tried.join("; ")
    ))
}

/// Looks up every function rtx calls; a missing one names it (an NCCL older than 2.14 lacks
/// non-blocking communicators).
fn resolve(lib: libloading::Library, name: &str) -> std::result::Result<Nccl, String> {
    macro_rules! sym {
        ($s:literal) => {
            // SAFETY: the symbol is NCCL's C function of that name, whose signature the
            // field's type restates from nccl.h (2.28).
            *unsafe { lib.get(concat!($s, "\0").as_bytes()) }
                .map_err(|e| format!("missing {}: {e}", $s))?
        };
    }
    Ok(Nccl {
        name: name.to_string(),
        get_version: sym!("ncclGetVersion"),
        get_unique_id: sym!("ncclGetUniqueId"),
        comm_init_rank_config: sym!("ncclCommInitRankConfig"),
        comm_get_async_error: sym!("ncclCommGetAsyncError"),
        comm_abort: sym!("ncclCommAbort"),
        comm_finalize: sym!("ncclCommFinalize"),
        comm_destroy: sym!("ncclCommDestroy"),
        get_error_string: sym!("ncclGetErrorString"),
        get_last_error: sym!("ncclGetLastError"),
        all_reduce: sym!("ncclAllReduce"),
        broadcast: sym!("ncclBroadcast"),
        all_gather: sym!("ncclAllGather"),
        reduce_scatter: sym!("ncclReduceScatter"),
        _lib: lib,
    })
}

/// NCCL's text for result code `r`.
pub(crate) fn error_string(lib: &Nccl, r: c_int) -> String {
    // SAFETY: NCCL returns a pointer to a static string for any code.
    let p = unsafe { (lib.get_error_string)(r) };
    if p.is_null() {
        return format!("NCCL error {r}");
    }
    // SAFETY: non-null, NUL-terminated, static.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// NCCL's last detailed message (for `comm`, or the thread's when null).
pub(crate) fn last_error(lib: &Nccl, comm: ncclComm_t) -> String {
    // SAFETY: `comm` is a live communicator or null, both accepted.
    let p = unsafe { (lib.get_last_error)(comm) };
    if p.is_null() {
        return String::new();
    }
    // SAFETY: non-null, NUL-terminated, owned by NCCL until its next call on this thread.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// `Ok` for success or in-progress, else an error naming `call` and NCCL's text.
pub(crate) fn check(lib: &Nccl, r: c_int, call: &'static str) -> Result<()> {
    if r == SUCCESS || r == IN_PROGRESS {
        return Ok(());
    }
    Err(BackendError::CudaUnavailable {
        msg: format!("{call} failed: {}", error_string(lib, r)),
    })
}
