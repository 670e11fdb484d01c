//! Compile-time checks for dimension arithmetic (specify and verify). Each runs in an inline
//! `const` block when an op is monomorphized, so a wrong static size fails `cargo build` with
//! the numbers in the message; sizes that are only known at run time pass here and are checked
//! when the op runs. (These do not fire under `cargo check` or rust-analyzer.)
//!
//! Every check is `#[track_caller]`: rustc leaves such frames out of a const-evaluation
//! error, so the error shows the `const { .. }` line of the op the user called, and its
//! "encountered while instantiating" note the user's call, instead of a stack of rtx frames.
//! The `const` block therefore sits in every method a user calls (the plain form and its
//! `try_` twin alike), never only in a helper the method calls.

use super::Shape;
use const_panic::concat_panic;

/// Reshape: the element counts must agree when both are static.
#[track_caller]
pub const fn reshape<S: Shape, T: Shape>() {
    if let (Some(a), Some(b)) = (S::STATIC_NUMEL, T::STATIC_NUMEL)
        && a != b
    {
        concat_panic!(
            "reshape: ",
            a,
            " elements cannot become ",
            b,
            " (the element counts must be equal)"
        );
    }
}

/// Flatten of axes `START..=END`: the ranks must fit and the merged size must match.
#[track_caller]
pub const fn flatten<S: Shape, T: Shape, const START: usize, const END: usize>() {
    if START > END || END >= S::RANK {
        concat_panic!(
            "flatten: axes ",
            START,
            "..=",
            END,
            " are not a range of a rank-",
            S::RANK,
            " tensor"
        );
    }
    if T::RANK != S::RANK - (END - START) {
        concat_panic!(
            "flatten: flattening axes ",
            START,
            "..=",
            END,
            " of a rank-",
            S::RANK,
            " tensor gives rank ",
            S::RANK - (END - START),
            ", not ",
            T::RANK
        );
    }
    let mut merged = Some(1usize);
    let mut i = START;
    while i <= END {
        merged = match (merged, S::STATIC_DIMS[i]) {
            (Some(m), Some(d)) => Some(m * d),
            _ => None,
        };
        i += 1;
    }
    if let (Some(m), Some(t)) = (merged, T::STATIC_DIMS[START])
        && m != t
    {
        concat_panic!(
            "flatten: ",
            m,
            " elements of the merged axes cannot become ",
            t,
            " (the merged axis holds their product)"
        );
    }
}

/// Permute: every axis exactly once.
#[track_caller]
pub const fn permutation(perm: &[usize]) {
    let mut seen = [false; 8];
    let mut i = 0;
    while i < perm.len() {
        if seen[perm[i]] {
            concat_panic!(
                "permute: axis ",
                perm[i],
                " appears twice; a permutation names each axis once"
            );
        }
        seen[perm[i]] = true;
        i += 1;
    }
}

/// Broadcast of `S` to `T`: trailing dims equal or 1 where both are static.
#[track_caller]
pub const fn broadcast<S: Shape, T: Shape>() {
    if S::RANK > T::RANK {
        concat_panic!(
            "broadcast_to: a rank-",
            S::RANK,
            " tensor cannot broadcast to rank ",
            T::RANK
        );
    }
    let lead = T::RANK - S::RANK;
    let mut i = 0;
    while i < S::RANK {
        if let (Some(s), Some(t)) = (S::STATIC_DIMS[i], T::STATIC_DIMS[i + lead])
            && s != t
            && s != 1
        {
            concat_panic!(
                "broadcast_to: dimension ",
                s,
                " cannot broadcast to ",
                t,
                ": only size-1 dims expand"
            );
        }
        i += 1;
    }
}

/// Squeeze: the axis must have size 1 when static.
#[track_caller]
pub const fn squeeze<S: Shape, const I: usize>() {
    if let Some(d) = S::STATIC_DIMS[I]
        && d != 1
    {
        concat_panic!(
            "squeeze: axis ",
            I,
            " has size ",
            d,
            ", not 1 (only a size-1 axis can be removed)"
        );
    }
}

/// A norm over the last axis (`op` is `layer_norm` or `rms_norm`): a static last dim must be
/// the norm's width `D`.
#[track_caller]
pub const fn last_dim<S: Shape, const D: usize>(op: &str) {
    if S::RANK == 0 {
        concat_panic!({}: op, ": a scalar has no last axis to normalize (the width is ", D, ")");
    }
    if let Some(d) = S::STATIC_DIMS[S::RANK - 1]
        && d != D
    {
        concat_panic!(
            {}: op, ": the last axis has size ", d, ", not the norm's width ", D,
            " (they must be equal)"
        );
    }
}

/// A batch norm over axis 1: the input has rank 2 or more, and a static axis 1 is `C`.
#[track_caller]
pub const fn channels<S: Shape, const C: usize>() {
    if S::RANK < 2 {
        concat_panic!(
            "batch_norm: a rank-",
            S::RANK,
            " input has no channel axis (axis 1)"
        );
    }
    if let Some(c) = S::STATIC_DIMS[1]
        && c != C
    {
        concat_panic!(
            "batch_norm: axis 1 has ",
            c,
            " channels, not the norm's ",
            C,
            " (they must be equal)"
        );
    }
}
