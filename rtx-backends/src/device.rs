//! The device a tensor lives on: a run-time value, not a type parameter, so model types stay
//! about shapes and element types.

use std::fmt;
use std::sync::OnceLock;

/// Where a tensor's storage lives and where its ops run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Device {
    /// Host memory; ops run on all cores through rayon.
    #[default]
    Cpu,
    /// The NVIDIA GPU of this ordinal (as CUDA numbers them), through the CUDA driver.
    Cuda(usize),
}

impl Device {
    /// The fastest device that works here: the first CUDA GPU when the CUDA libraries load and a
    /// GPU answers, otherwise the CPU. The first call that falls back prints why to stderr, once.
    ///
    /// ```
    /// # use rtx_backends::Device;
    /// let d = Device::best();
    /// assert!(matches!(d, Device::Cpu | Device::Cuda(0)));
    /// ```
    pub fn best() -> Device {
        static BEST: OnceLock<Device> = OnceLock::new();
        *BEST.get_or_init(|| match crate::cuda::first_usable_gpu() {
            Ok(d) => d,
            Err(why) => {
                eprintln!("rtx: using the CPU: {why}");
                Device::Cpu
            }
        })
    }

    /// Whether this is a CUDA device.
    ///
    /// ```
    /// # use rtx_backends::Device;
    /// assert!(Device::Cuda(1).is_cuda() && !Device::Cpu.is_cuda());
    /// ```
    pub fn is_cuda(self) -> bool {
        matches!(self, Device::Cuda(_))
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}
