//! The device a tensor lives on: a run-time value, not a type parameter, so model types stay
//! about shapes and element types.

use std::fmt;

/// Where a tensor's storage lives and where its ops run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Device {
    /// Host memory; ops run on all cores through rayon.
    #[default]
    Cpu,
}

impl Device {
    /// The fastest device available. Until the CUDA backend lands this is always the CPU.
    pub fn best() -> Device {
        Device::Cpu
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
        }
    }
}
