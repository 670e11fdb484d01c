//! The device error: what a backend reports when it cannot run an op. `rtx::Error` wraps it.

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
}

/// Backend results.
pub type Result<T> = std::result::Result<T, BackendError>;
