//! The one error type, and the policy on panics.
//!
//! Policy: what the type system proves cannot fail at run time. What it cannot prove (run-time
//! dims, arguments such as indices, IO, device memory) is reported as [`Error`], naming the op,
//! the shapes or the file. Every fallible op has a `try_` form returning `Result`; the plain form
//! panics with the same message, and its docs say so under "Panics". Shape errors panic in the
//! plain form for the same reason slice indexing does: they are bugs in the calling program,
//! and a `?` on every arithmetic line would bury the model code.
//!
//! The backward pass runs ops too, so it can fail on a device (out of memory, above all):
//! [`Tensor::try_backward`](crate::tensor::Tensor::try_backward) returns that error, and
//! [`Tensor::backward`](crate::tensor::Tensor::backward) panics with it.

use rtx_backends::BackendError;
use std::path::PathBuf;

/// Everything that can go wrong in rtx at run time.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum Error {
    /// Two shapes that the op requires to agree do not.
    #[error("{op}: shape mismatch: {lhs} vs {rhs}: {rule}")]
    ShapeMismatch {
        /// The op's name.
        op: &'static str,
        /// The first shape.
        lhs: String,
        /// The second shape.
        rhs: String,
        /// The rule broken.
        rule: &'static str,
    },
    /// An argument was out of range or inconsistent.
    #[error("{op}: {msg}")]
    BadArgument {
        /// The op's name.
        op: &'static str,
        /// What was wrong, with the numbers involved.
        msg: String,
    },
    /// A data file (a data set, its cache or its download) could not be fetched, read or parsed.
    #[error("{path}: {msg}")]
    Data {
        /// The file involved (or the command, for a failed download).
        path: String,
        /// What was wrong and, where it helps, what to do about it.
        msg: String,
    },
    /// A file could not be read or written (the OS error, as text, with the file named).
    #[error("{}: {msg}", file.display())]
    Io {
        /// The file involved.
        file: PathBuf,
        /// The kind of the underlying `std::io::Error`.
        kind: std::io::ErrorKind,
        /// What was being done, and the OS error.
        msg: String,
    },
    /// A checkpoint file is malformed, or does not fit the model or optimizer loading it.
    #[error("checkpoint {}: {msg}", file.display())]
    Checkpoint {
        /// The checkpoint file.
        file: PathBuf,
        /// What is wrong, naming the tensor, shapes and dtypes involved.
        msg: String,
    },
    /// A GGUF file is malformed, or lacks a metadata key or tensor asked for.
    #[error("GGUF file {}: {msg}", file.display())]
    Gguf {
        /// The GGUF file.
        file: PathBuf,
        /// What is wrong, naming the field: the metadata key, or the tensor.
        msg: String,
    },
    /// An IR graph, or its serialized form, is malformed or of a version this rtx cannot read.
    #[error("{origin}: {msg}")]
    Ir {
        /// Where the graph came from: "IR file PATH", "IR JSON text", or "IR graph `NAME`"
        /// for [`crate::ir::Graph::validate`].
        origin: String,
        /// What is wrong, naming the node (`node 3 (matmul): ...`).
        msg: String,
    },
    /// Distributed training failed: a bad environment, an unreachable store or peer, or a rank
    /// that died, hung or disagreed about a collective (see [`crate::dist`]).
    #[error("{msg}")]
    Dist {
        /// The rank the failure is about (the one that died, hung or sent something unexpected,
        /// or the rank being set up), when one is known.
        rank: Option<usize>,
        /// What went wrong, naming this rank, the peer, and the environment variable, address or
        /// timeout involved.
        msg: String,
    },
    /// The backend could not run the op.
    #[error(transparent)]
    Backend(#[from] BackendError),
}

/// Results of rtx operations.
pub type Result<T> = std::result::Result<T, Error>;

/// Returns a [`Error::BadArgument`] from the current function.
macro_rules! bail {
    ($op:expr, $($fmt:tt)*) => {
        return Err($crate::Error::BadArgument { op: $op, msg: format!($($fmt)*) })
    };
}
pub(crate) use bail;

/// Unwraps a result in a plain (panicking) op, with the error's message.
#[track_caller]
pub(crate) fn ok<T>(r: Result<T>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => fail(e),
    }
}

/// The panic of [`ok`]; not generic, so the formatting is compiled once, not once per `T`.
#[cold]
#[track_caller]
fn fail(e: Error) -> ! {
    panic!("{e}")
}

/// The message of a caught panic (its `String` or `&str` payload), for errors that report a
/// panic raised inside work being captured.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("a panic without a message")
}
