//! Convolution and pooling settings as types, and their shape rules.
//!
//! Settings are const generics of unit structs, so they are part of the op's type:
//! `x.conv2d(&w, Conv::<2, 1>)` is stride 2, padding 1 (dilation 1 by default), the same on
//! both spatial axes. The plain convolution is `Conv::<1>` (a bare `Conv` leaves the const
//! parameters to inference, which has nothing to infer them from).
//!
//! Output sizes are *specify and verify*: the caller's type states them, and when the input,
//! kernel and output sizes are all static an inline `const` check compares them with
//! PyTorch's formula `(H + 2P - D(KH - 1) - 1) / S + 1` when the op is monomorphized (a full
//! `cargo build`; `cargo check` and rust-analyzer do not run it). Run-time sizes are checked
//! when the op runs.
//!
//! The checks are `#[track_caller]`, so rustc's error shows the op's `const` line and the
//! user's call rather than these frames (see [`super::checks`]).
//!
//! Channels: a plain [`Conv`] requires the weight's input channels to be the input's
//! channels through the [`ChannelsAgree`] rule, so a mismatch of static or named dims is a
//! compile error. A grouped convolution ([`GroupedConv`]) has weights of `C / G` input
//! channels, a quotient the type system cannot state, so it is verified by `const` checks
//! where static and at run time otherwise. Grouped convolutions have their own settings type
//! because Rust cannot give `GROUPS = 1` a different impl from other group counts.

use super::rules::ChannelsAgree;
use super::{Dim, Shape};
use const_panic::concat_panic;

/// Settings of an ungrouped convolution: stride, padding (zeros on both sides) and dilation,
/// the same along every spatial axis.
///
/// ```
/// # use rtx::prelude::*;
/// let x: Tensor<Rank4<1, 3, 28, 28>> = Tensor::ones((Const, Const, Const, Const), Device::Cpu);
/// let w: Tensor<Rank4<8, 3, 3, 3>> = Tensor::ones((Const, Const, Const, Const), Device::Cpu);
/// let y: Tensor<Rank4<1, 8, 14, 14>> = x.conv2d(&w, Conv::<2, 1>);
/// # let _ = y;
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Conv<const STRIDE: usize = 1, const PADDING: usize = 0, const DILATION: usize = 1>;

/// Settings of a grouped convolution: input and output channels split into `GROUPS`
/// independent convolutions (`GROUPS` = channels gives a depthwise convolution).
///
/// ```
/// # use rtx::prelude::*;
/// // Depthwise: 4 channels, 4 groups, weight [4, 1, 3, 3].
/// let x: Tensor<Rank4<1, 4, 8, 8>> = Tensor::ones((Const, Const, Const, Const), Device::Cpu);
/// let w: Tensor<Rank4<4, 1, 3, 3>> = Tensor::ones((Const, Const, Const, Const), Device::Cpu);
/// let y: Tensor<Rank4<1, 4, 8, 8>> = x.conv2d(&w, GroupedConv::<4, 1, 1>);
/// assert_eq!(y.to_vec()[9], 9.0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct GroupedConv<
    const GROUPS: usize,
    const STRIDE: usize = 1,
    const PADDING: usize = 0,
    const DILATION: usize = 1,
>;

/// Settings of a 2-d pooling window: kernel size, stride and padding, the same along both
/// spatial axes. PyTorch's default stride is the kernel size; Rust const defaults cannot
/// refer to another parameter, so the stride is always written: `Pool::<2, 2>`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Pool<const KERNEL: usize, const STRIDE: usize, const PADDING: usize = 0>;

/// Convolution settings: stride, padding, dilation and groups, and which channel rule holds.
#[diagnostic::on_unimplemented(
    message = "`{Self}` are not convolution settings",
    label = "expected `Conv::<STRIDE, PADDING, DILATION>` or `GroupedConv::<GROUPS, ...>`"
)]
pub trait ConvSettings: Copy + Send + Sync + 'static {
    /// The step between windows.
    const STRIDE: usize;
    /// Zeros added on both sides.
    const PADDING: usize;
    /// The step between kernel taps.
    const DILATION: usize;
    /// The number of channel groups.
    const GROUPS: usize;
    /// Stride, padding, dilation and groups, in that order (what [`conv`] takes).
    const SETTINGS: (usize, usize, usize, usize) =
        (Self::STRIDE, Self::PADDING, Self::DILATION, Self::GROUPS);
    /// The channel rule: [`Ungrouped`] (equal channels) or [`Grouped`] (checked by value).
    type Groups;
}

/// The channel rule of a plain convolution: the weight's input channels are the input's.
#[derive(Clone, Copy, Debug)]
pub struct Ungrouped;

/// The channel rule of a grouped convolution, verified by `const` checks and at run time.
#[derive(Clone, Copy, Debug)]
pub struct Grouped;

/// Convolution settings that accept input channels `C` and weight channels `CG`.
///
/// One blanket impl over [`ConvSettings`], whose only condition is the channel rule: a wrong
/// channel count then reads as the failing [`ChannelsAgree`] rule naming both dims, and rustc
/// has no list of settings impls to quote under it.
pub trait ConvOptions<C: Dim, CG: Dim>: ConvSettings {}

impl<T: ConvSettings, C: Dim, CG: Dim> ConvOptions<C, CG> for T where C: ChannelsAgree<CG, T::Groups>
{}

impl<const S: usize, const P: usize, const D: usize> ConvSettings for Conv<S, P, D> {
    const STRIDE: usize = S;
    const PADDING: usize = P;
    const DILATION: usize = D;
    const GROUPS: usize = 1;
    type Groups = Ungrouped;
}

impl<const G: usize, const S: usize, const P: usize, const D: usize> ConvSettings
    for GroupedConv<G, S, P, D>
{
    const STRIDE: usize = S;
    const PADDING: usize = P;
    const DILATION: usize = D;
    const GROUPS: usize = G;
    type Groups = Grouped;
}

/// Checks a convolution's settings, channels and output sizes where they are static.
/// `X`, `W` and `Y` are the input `[N, C, spatial..]`, weight `[O, C/G, kernel..]` and output
/// `[N, O, out..]` shapes; the last `SPATIAL` axes are spatial.
#[track_caller]
pub const fn conv<X: Shape, W: Shape, Y: Shape>(
    op: &str,
    spatial: usize,
    (stride, padding, dilation, groups): (usize, usize, usize, usize),
) {
    if stride == 0 || dilation == 0 || groups == 0 {
        concat_panic!(
            {}: op, ": stride ", stride, ", dilation ", dilation, " and groups ", groups,
            " must all be at least 1"
        );
    }
    if let (Some(c), Some(cg)) = (X::STATIC_DIMS[1], W::STATIC_DIMS[1])
        && c != cg * groups
    {
        concat_panic!(
            {}: op, ": the input has ", c, " channels but the weight takes ", cg, " per group x ",
            groups, " groups = ", cg * groups
        );
    }
    if let Some(c) = X::STATIC_DIMS[1]
        && c % groups != 0
    {
        concat_panic!({}: op, ": ", groups, " groups do not divide the ", c, " input channels");
    }
    if let Some(o) = W::STATIC_DIMS[0]
        && o % groups != 0
    {
        concat_panic!({}: op, ": ", groups, " groups do not divide the ", o, " output channels");
    }
    let names: [&str; 2] = if spatial == 1 {
        ["length", ""]
    } else {
        ["height", "width"]
    };
    let mut a = 0;
    while a < spatial {
        let i = X::RANK - spatial + a;
        out_size(
            op,
            names[a],
            (X::STATIC_DIMS[i], W::STATIC_DIMS[i], Y::STATIC_DIMS[i]),
            (stride, padding, dilation),
        );
        a += 1;
    }
}

/// Checks a pooling window and the output sizes of a `[.., H, W]` input where static.
#[track_caller]
pub const fn pool<X: Shape, Y: Shape>(op: &str, (kernel, stride, padding): (usize, usize, usize)) {
    if kernel == 0 || stride == 0 {
        concat_panic!({}: op, ": kernel ", kernel, " and stride ", stride, " must be at least 1");
    }
    if 2 * padding > kernel {
        concat_panic!({}: op, ": padding ", padding, " is more than half the kernel size ", kernel);
    }
    let names: [&str; 2] = ["height", "width"];
    let mut a = 0;
    while a < 2 {
        let i = X::RANK - 2 + a;
        out_size(
            op,
            names[a],
            (X::STATIC_DIMS[i], Some(kernel), Y::STATIC_DIMS[i]),
            (stride, padding, 1),
        );
        a += 1;
    }
}

/// One spatial axis: the dilated kernel must fit the padded input, and a static output size
/// must be PyTorch's `(I + 2P - D(K - 1) - 1) / S + 1`.
#[track_caller]
const fn out_size(
    op: &str,
    axis: &str,
    (input, kernel, output): (Option<usize>, Option<usize>, Option<usize>),
    (s, p, d): (usize, usize, usize),
) {
    let (Some(i), Some(k)) = (input, kernel) else {
        return;
    };
    if k == 0 || d * (k - 1) + 1 > i + 2 * p {
        concat_panic!(
            {}: op, ": the kernel ", {}: axis, " ", k, " (dilation ", d, ") does not fit the input ",
            {}: axis, " ", i, " with padding ", p
        );
    }
    let want = (i + 2 * p - d * (k - 1) - 1) / s + 1;
    if let Some(o) = output
        && o != want
    {
        concat_panic!(
            {}: op, ": output ", {}: axis, " ", o, " does not match (", i, " + 2*", p, " - ", d, "*(",
            k, "-1) - 1)/", s, " + 1 = ", want
        );
    }
}
