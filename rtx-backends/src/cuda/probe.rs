//! Finding the CUDA libraries before touching them. cudarc's dynamic loading panics when a
//! library or one of its symbols is missing; every first use here goes through [`guard`], which
//! checks the library is present and turns any panic into [`BackendError::CudaUnavailable`], so
//! a machine without CUDA gets an error, never a crash.

use crate::{BackendError, Result};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::OnceLock;

/// A CUDA library rtx loads at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lib {
    /// `libcuda`, the driver.
    Driver,
    /// `libnvrtc`, the run-time compiler.
    Nvrtc,
    /// `libcublas`.
    Cublas,
    /// `libcublasLt`.
    CublasLt,
}

impl Lib {
    fn name(self) -> &'static str {
        match self {
            Lib::Driver => "libcuda (the NVIDIA driver)",
            Lib::Nvrtc => "libnvrtc (CUDA's run-time compiler)",
            Lib::Cublas => "libcublas",
            Lib::CublasLt => "libcublasLt",
        }
    }

    fn present(self) -> bool {
        // SAFETY: these only try to open the library by its usual names (no symbol is called).
        unsafe {
            match self {
                Lib::Driver => cudarc::driver::sys::is_culib_present(),
                Lib::Nvrtc => cudarc::nvrtc::sys::is_culib_present(),
                Lib::Cublas => cudarc::cublas::sys::is_culib_present(),
                Lib::CublasLt => cudarc::cublaslt::sys::is_culib_present(),
            }
        }
    }
}

/// Whether `lib` can be used, checked once per process: the library opens and `first` (its
/// first real call) runs without panicking and returns `Ok`.
pub(crate) fn require(lib: Lib) -> Result<()> {
    static DRIVER: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    static NVRTC: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    static CUBLAS: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    static CUBLASLT: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    let cell = match lib {
        Lib::Driver => &DRIVER,
        Lib::Nvrtc => &NVRTC,
        Lib::Cublas => &CUBLAS,
        Lib::CublasLt => &CUBLASLT,
    };
    let r = cell.get_or_init(|| {
        if !lib.present() {
            return Err(format!(
                "{} was not found (looked for it by its usual names on the library path)",
                lib.name()
            ));
        }
        let first = guard(lib.name(), || match lib {
            Lib::Driver => cudarc::driver::result::init().map_err(|e| format!("cuInit: {e:?}")),
            Lib::Nvrtc => {
                let (mut major, mut minor) = (0, 0);
                // SAFETY: two out-pointers to live integers.
                unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) }
                    .result()
                    .map_err(|e| format!("nvrtcVersion: {e:?}"))
            }
            // SAFETY: these open the library (present, checked above); handles come later.
            Lib::Cublas => {
                unsafe { cudarc::cublas::sys::culib() };
                Ok(())
            }
            Lib::CublasLt => {
                unsafe { cudarc::cublaslt::sys::culib() };
                Ok(())
            }
        });
        match first {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(format!("{}: {e}", lib.name())),
            Err(e) => Err(e.to_string()),
        }
    });
    r.clone()
        .map_err(|msg| BackendError::CudaUnavailable { msg })
}

/// Runs `f`, turning a panic (cudarc's answer to a missing library or symbol) into an error that
/// names `what`.
pub(crate) fn guard<T>(what: &str, f: impl FnOnce() -> T) -> Result<T> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| {
        let why = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "unknown panic".into());
        BackendError::CudaUnavailable {
            msg: format!("{what}: {why}"),
        }
    })
}
