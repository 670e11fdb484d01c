//! The device error: what a backend reports when it cannot run an op. `rtx::Error` wraps it.
//!
//! Every variant names what failed and the numbers involved (the op, the devices, the bytes, the
//! kernel and its compiler log), so a message read alone says what to change.

use crate::Device;

/// A failure inside a backend.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum BackendError {
    /// An op's arguments did not fit (out-of-range index, wrong length, ...).
    #[error("{op}: {msg}")]
    BadArgument {
        /// The op's name.
        op: &'static str,
        /// What was wrong, with the numbers involved.
        msg: String,
    },
    /// Two operands live on different devices.
    #[error(
        "{op}: operands are on different devices ({lhs} and {rhs}); move one with `.to_device()`"
    )]
    DeviceMismatch {
        /// The op's name.
        op: &'static str,
        /// The first operand's device.
        lhs: Device,
        /// The second operand's device.
        rhs: Device,
    },
    /// The op exists, but not yet on this device.
    #[error(
        "`{op}` has no kernel on {device} yet; move the tensor to the CPU with \
         `.to_device(Device::Cpu)`"
    )]
    NoKernel {
        /// The op's name.
        op: &'static str,
        /// The device the operand lives on.
        device: Device,
    },
    /// The CUDA runtime cannot be used: no driver library, no GPU, or a library too old.
    #[error("CUDA is unavailable: {msg}")]
    CudaUnavailable {
        /// Why, naming the library or the device.
        msg: String,
    },
    /// A CUDA driver or library call failed.
    #[error("{device}: {call} failed: {msg}")]
    Cuda {
        /// The device the call ran on.
        device: Device,
        /// The call, e.g. `cuMemcpyDtoH` or `cublasGemmStridedBatchedEx`.
        call: &'static str,
        /// The library's error name and text.
        msg: String,
    },
    /// A device allocation did not fit.
    #[error(
        "{device}: out of memory: tried to allocate {} ({requested} bytes) with {} free of {} \
         (rtx holds {} in live tensors and {} cached; `empty_cache` returns the cache)",
        human_bytes(*requested), human_bytes(*free), human_bytes(*total),
        human_bytes(*allocated), human_bytes(*cached)
    )]
    OutOfMemory {
        /// The device.
        device: Device,
        /// The bytes asked for.
        requested: usize,
        /// The bytes free on the device (cuMemGetInfo) when the allocation failed.
        free: usize,
        /// The device's total memory.
        total: usize,
        /// The bytes rtx's allocator had handed out.
        allocated: usize,
        /// The bytes rtx's allocator held in its cache (after trying to return them).
        cached: usize,
    },
    /// NVRTC rejected a kernel's source.
    #[error("compiling CUDA kernel `{kernel}` for {arch} failed:\n{log}")]
    Compile {
        /// The kernel's function name.
        kernel: String,
        /// The target architecture, e.g. `sm_90`.
        arch: String,
        /// NVRTC's log.
        log: String,
    },
}

/// Backend results.
pub type Result<T> = std::result::Result<T, BackendError>;

/// `bytes` in the largest binary unit that keeps it at or above 1 (`1.50 GiB`).
pub fn human_bytes(bytes: usize) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_bytes_picks_the_unit() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1536), "1.50 KiB");
        assert_eq!(human_bytes(1 << 50), "1.00 PiB");
    }

    #[test]
    fn out_of_memory_names_the_numbers() {
        let e = BackendError::OutOfMemory {
            device: Device::Cuda(0),
            requested: 1 << 50,
            free: 3 << 30,
            total: 4 << 30,
            allocated: 0,
            cached: 0,
        };
        let s = e.to_string();
        assert!(s.contains("cuda:0") && s.contains("1.00 PiB") && s.contains("3.00 GiB free"));
        assert!(s.contains(&(1usize << 50).to_string()), "{s}");
    }
}
