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
    /// The device of a backend registered at run time, by its registration number (see
    /// [`register_backend`](crate::register_backend)).
    Backend(usize),
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
            Device::Backend(n) => match crate::backend::registered_name(*n) {
                Some(name) => write!(f, "{name}:{n}"),
                None => write!(f, "backend:{n}"),
            },
        }
    }
}

impl std::str::FromStr for Device {
    type Err = crate::BackendError;

    /// Reads the forms [`Display`](fmt::Display) writes (`cpu`, `cuda:1`, a registered
    /// backend's `name:n`), plus `cuda` for `cuda:0`, as command-line flags want.
    ///
    /// ```
    /// # use rtx_backends::Device;
    /// assert_eq!("cuda:1".parse::<Device>().unwrap(), Device::Cuda(1));
    /// assert_eq!("cpu".parse::<Device>().unwrap(), Device::Cpu);
    /// assert!("gpu".parse::<Device>().unwrap_err().to_string().contains("`cuda:N`"));
    /// ```
    fn from_str(s: &str) -> Result<Device, Self::Err> {
        let bad = || crate::BackendError::BadArgument {
            op: "Device::from_str",
            msg: format!("`{s}` is not a device: write `cpu`, `cuda` or `cuda:N`"),
        };
        match s.trim() {
            "cpu" => Ok(Device::Cpu),
            "cuda" => Ok(Device::Cuda(0)),
            other => match other.rsplit_once(':') {
                Some(("cuda", n)) => n.parse().ok().map(Device::Cuda),
                Some((name, n)) => n
                    .parse()
                    .ok()
                    .filter(|&n| crate::backend::registered_name(n).as_deref() == Some(name))
                    .map(Device::Backend),
                None => None,
            }
            .ok_or_else(bad),
        }
    }
}
