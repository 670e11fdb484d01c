//! Printing tensors as PyTorch does: `Display` gives exactly what `print(t)` shows in PyTorch
//! with default print options, and `Debug` adds the shape, dtype and device.
//!
//! The rules follow `torch/_tensor_str.py`: one formatter for the whole tensor, built from the
//! printed values (the edges only, when summarized). Floats whose nonzero finite values are all
//! integral print as `1.`; otherwise with 4 decimals (`0.1235`); scientific notation
//! (`1.0000e+05`) takes over when the largest magnitude exceeds 1e8 or 1000 times the
//! smallest, or (for non-integral values) the smallest is below 1e-4. Every element is padded
//! to a common width. Tensors over 1000 elements keep 3 items at each edge of every dim, with
//! `...` between. Lines wrap at 80 columns. The dtype is named unless it is float32, int64 or
//! bool. A precision given to the formatter (`{:.2}`) replaces the default 4 decimals.
//!
//! Printing copies the viewed elements to the host once (as PyTorch's `.cpu()` would).

use super::Tensor;
use crate::shape::{Shape, describe};
use rtx_backends::Device;
use rtx_kernels::{DType, Element};
use std::fmt;

/// Values at each edge of a summarized dim (PyTorch's `edgeitems`).
const EDGE_ITEMS: usize = 3;
/// Element count above which a tensor is summarized (PyTorch's `threshold`).
const THRESHOLD: usize = 1000;
/// Characters per line (PyTorch's `linewidth`).
const LINE_WIDTH: usize = 80;
/// Decimals of floats (PyTorch's `precision`).
const PRECISION: usize = 4;

/// One element, widened without loss: floats to f64, integers to i64.
#[derive(Clone, Copy)]
enum Val {
    F(f64),
    I(i64),
    B(bool),
}

impl<S: Shape, E: Element> fmt::Display for Tensor<S, E> {
    /// PyTorch's `print(t)`.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let t: Tensor<Rank2<2, 2>> = Tensor::from_array([[1.0, 2.0], [3.0, 4.0]], Device::Cpu);
    /// assert_eq!(t.to_string(), "tensor([[1., 2.],\n        [3., 4.]])");
    /// let s: Tensor<Rank0, f64> = Tensor::from_array(0.123456, Device::Cpu);
    /// assert_eq!(s.to_string(), "tensor(0.1235, dtype=torch.float64)");
    /// assert_eq!(format!("{s:.2}"), "tensor(0.12, dtype=torch.float64)");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let vals: Vec<Val> = self
            .to_vec()
            .into_iter()
            .map(|x| match E::DTYPE {
                d if d.is_float() => Val::F(x.to_f64()),
                DType::Bool => Val::B(x.to_i64() != 0),
                _ => Val::I(x.to_i64()),
            })
            .collect();
        let precision = f.precision().unwrap_or(PRECISION);
        f.write_str(&render(
            self.dims(),
            &vals,
            E::DTYPE,
            self.device(),
            precision,
        ))
    }
}

impl<S: Shape, E: Element> fmt::Debug for Tensor<S, E> {
    /// The shape, dtype and device on one line, then the values as `Display` prints them.
    ///
    /// ```
    /// # use rtx::prelude::*;
    /// let t: Tensor<(Dyn<'B'>, Const<2>), i32> = Tensor::zeros((Dyn(1), Const), Device::Cpu);
    /// assert_eq!(format!("{t:?}"), "Tensor[B=1, 2] int32 cpu\ntensor([[0, 0]], dtype=torch.int32)");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Tensor{} {} {}\n{}",
            describe(&self.shape()),
            E::DTYPE,
            self.device(),
            self
        )
    }
}

/// The whole `tensor(...)` string of a row-major buffer of sizes `dims`.
fn render(dims: &[usize], vals: &[Val], dtype: DType, device: Device, precision: usize) -> String {
    const PREFIX: &str = "tensor(";
    let indent = PREFIX.len();
    let mut suffixes = Vec::new();
    if device != Device::Cpu {
        suffixes.push(format!("device='{device}'"));
    }
    let body = if vals.is_empty() {
        // As in NumPy, an empty tensor states its shape unless it is `(0,)`, and its dtype
        // unless it is the default float type, since no element shows it.
        if dims.len() != 1 {
            let parts: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
            suffixes.push(format!("size=({})", parts.join(", ")));
        }
        if dtype != DType::F32 {
            suffixes.push(format!("dtype=torch.{dtype}"));
        }
        "[]".to_string()
    } else {
        if !matches!(dtype, DType::F32 | DType::I64 | DType::Bool) {
            suffixes.push(format!("dtype=torch.{dtype}"));
        }
        let summarize = vals.len() > THRESHOLD;
        let formatter = if summarize {
            let mut shown = Vec::new();
            edges(vals, dims, &mut shown);
            ValueFormat::new(&shown, precision)
        } else {
            ValueFormat::new(vals, precision)
        };
        nested(vals, dims, indent, summarize, &formatter)
    };
    let mut out = format!("{PREFIX}{body}");
    // PyTorch's `_add_suffixes`, including its count of the last line's length.
    let mut last_line = match out.rfind('\n') {
        Some(p) => out.len() - p + 1,
        None => out.len() + 2,
    };
    for suffix in suffixes {
        if last_line + suffix.len() + 2 > LINE_WIDTH {
            out.push_str(&format!(",\n{}{suffix}", " ".repeat(indent)));
            last_line = indent + suffix.len();
        } else {
            out.push_str(&format!(", {suffix}"));
            last_line += suffix.len() + 2;
        }
    }
    out.push(')');
    out
}

/// The indices printed along a dim of size `n`: all, or the edges when summarizing.
fn shown_indices(n: usize, summarize: bool) -> (std::ops::Range<usize>, std::ops::Range<usize>) {
    if summarize && n > 2 * EDGE_ITEMS {
        (0..EDGE_ITEMS, n - EDGE_ITEMS..n)
    } else {
        (0..n, n..n)
    }
}

/// Collects the values a summarized print shows (PyTorch's `get_summarized_data`).
fn edges(vals: &[Val], dims: &[usize], out: &mut Vec<Val>) {
    let Some((&n, rest)) = dims.split_first() else {
        out.push(vals[0]);
        return;
    };
    let inner: usize = rest.iter().product();
    let (head, tail) = shown_indices(n, true);
    for i in head.chain(tail) {
        edges(&vals[i * inner..(i + 1) * inner], rest, out);
    }
}

/// The bracketed string of one sub-tensor (PyTorch's `_tensor_str_with_formatter`).
fn nested(vals: &[Val], dims: &[usize], indent: usize, summarize: bool, f: &ValueFormat) -> String {
    match dims.len() {
        0 => f.format(vals[0]),
        1 => row(vals, indent, summarize, f),
        rank => {
            let inner: usize = dims[1..].iter().product();
            let sub = |i: usize| {
                nested(
                    &vals[i * inner..(i + 1) * inner],
                    &dims[1..],
                    indent + 1,
                    summarize,
                    f,
                )
            };
            let (head, tail) = shown_indices(dims[0], summarize);
            let mut slices: Vec<String> = head.map(sub).collect();
            if !tail.is_empty() {
                slices.push("...".to_string());
                slices.extend(tail.map(sub));
            }
            let sep = format!(",{}{}", "\n".repeat(rank - 1), " ".repeat(indent + 1));
            format!("[{}]", slices.join(&sep))
        }
    }
}

/// One innermost row, wrapped at the line width (PyTorch's `_vector_str`).
fn row(vals: &[Val], indent: usize, summarize: bool, f: &ValueFormat) -> String {
    let per_line = (LINE_WIDTH.saturating_sub(indent) / (f.width + 2)).max(1);
    let (head, tail) = shown_indices(vals.len(), summarize);
    let mut items: Vec<String> = head.map(|i| f.format(vals[i])).collect();
    if !tail.is_empty() {
        items.push(" ...".to_string());
        items.extend(tail.map(|i| f.format(vals[i])));
    }
    let lines: Vec<String> = items.chunks(per_line).map(|c| c.join(", ")).collect();
    format!(
        "[{}]",
        lines.join(&format!(",\n{}", " ".repeat(indent + 1)))
    )
}

/// How every element of one tensor is written (PyTorch's `_Formatter`).
struct ValueFormat {
    /// Floats whose nonzero finite values are all integral: `1.`.
    int_mode: bool,
    /// Scientific notation: `1.0000e+05`.
    sci_mode: bool,
    /// Every element is right-aligned to this width.
    width: usize,
    precision: usize,
}

impl ValueFormat {
    fn new(vals: &[Val], precision: usize) -> Self {
        let mut f = ValueFormat {
            int_mode: true,
            sci_mode: false,
            width: 1,
            precision,
        };
        let finite: Vec<f64> = vals
            .iter()
            .filter_map(|v| match *v {
                Val::F(x) if x.is_finite() && x != 0.0 => Some(x),
                Val::F(_) => None,
                other => {
                    f.width = f.width.max(f.plain(other).len());
                    None
                }
            })
            .collect();
        if finite.is_empty() {
            return f;
        }
        let abs = finite.iter().map(|x| x.abs());
        let min = abs.clone().fold(f64::INFINITY, f64::min);
        let max = abs.fold(0.0, f64::max);
        f.int_mode = finite.iter().all(|x| x.ceil() == *x);
        let wide = max / min > 1000.0 || max > 1.0e8;
        f.sci_mode = wide || (!f.int_mode && min < 1.0e-4);
        f.width = finite
            .iter()
            .map(|&x| match (f.sci_mode, f.int_mode) {
                (true, _) => sci(x, precision).len(),
                (false, true) => fixed(x, 0).len() + 1,
                (false, false) => fixed(x, precision).len(),
            })
            .fold(f.width, usize::max);
        f
    }

    /// An element without padding.
    fn plain(&self, v: Val) -> String {
        match v {
            Val::I(i) => i.to_string(),
            Val::B(b) => if b { "True" } else { "False" }.to_string(),
            Val::F(x) if self.sci_mode => sci(x, self.precision),
            Val::F(x) if self.int_mode => {
                let s = fixed(x, 0);
                if x.is_finite() { s + "." } else { s }
            }
            Val::F(x) => fixed(x, self.precision),
        }
    }

    /// An element right-aligned to the common width.
    fn format(&self, v: Val) -> String {
        format!("{:>w$}", self.plain(v), w = self.width)
    }
}

/// Python's `f"{x:.{p}f}"`: Rust's rounding is the same (exact, ties to even), only NaN is
/// spelled differently.
fn fixed(x: f64, precision: usize) -> String {
    if x.is_nan() {
        "nan".to_string()
    } else {
        format!("{x:.precision$}")
    }
}

/// Python's `f"{x:.{p}e}"`: the exponent has a sign and at least two digits (`1.0000e+05`).
fn sci(x: f64, precision: usize) -> String {
    if !x.is_finite() {
        return fixed(x, precision);
    }
    let s = format!("{x:.precision$e}");
    match s.split_once('e') {
        Some((mantissa, exp)) => {
            let e: i32 = exp.parse().unwrap_or(0);
            let sign = if e < 0 { '-' } else { '+' };
            format!("{mantissa}e{sign}{:02}", e.abs())
        }
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use crate::prelude::*;

    const CPU: Device = Device::Cpu;

    fn vec1<E: Element>(v: Vec<E>) -> Tensor<(usize,), E> {
        let n = v.len();
        Tensor::from_vec(v, (n,), CPU)
    }

    #[test]
    fn floats_pick_integral_fixed_or_scientific() {
        assert_eq!(
            vec1(vec![0.1234567f32, 1.5]).to_string(),
            "tensor([0.1235, 1.5000])"
        );
        assert_eq!(
            vec1(vec![-1.5f32, 100.25]).to_string(),
            "tensor([ -1.5000, 100.2500])"
        );
        assert_eq!(
            vec1(vec![1e5f32, 1.5]).to_string(),
            "tensor([1.0000e+05, 1.5000e+00])"
        );
        assert_eq!(
            vec1(vec![1e-5f32, 1.0]).to_string(),
            "tensor([1.0000e-05, 1.0000e+00])"
        );
        assert_eq!(
            vec1(vec![1.0f32, 1e10]).to_string(),
            "tensor([1.0000e+00, 1.0000e+10])"
        );
        assert_eq!(
            vec1(vec![0.0f32, -0.0, 0.0]).to_string(),
            "tensor([0., -0., 0.])"
        );
        assert_eq!(
            vec1(vec![-2.0f32, 0.0, 10.0]).to_string(),
            "tensor([-2.,  0., 10.])"
        );
    }

    #[test]
    fn non_finite_values_keep_the_mode_of_the_rest() {
        let t = vec1(vec![1.0f32, f32::NAN, f32::INFINITY, f32::NEG_INFINITY]);
        assert_eq!(t.to_string(), "tensor([1., nan, inf, -inf])");
        assert_eq!(
            vec1(vec![0.5f32, f32::NAN]).to_string(),
            "tensor([0.5000,    nan])"
        );
        assert_eq!(vec1(vec![f32::NAN]).to_string(), "tensor([nan])");
    }

    #[test]
    fn integers_bools_and_scalars() {
        assert_eq!(
            vec1(vec![1i64, -20, 300]).to_string(),
            "tensor([  1, -20, 300])"
        );
        assert_eq!(
            vec1(vec![true, false]).to_string(),
            "tensor([ True, False])"
        );
        assert_eq!(
            Tensor::<Rank0>::from_array(3.5, CPU).to_string(),
            "tensor(3.5000)"
        );
        assert_eq!(
            Tensor::<Rank0>::from_array(3.0, CPU).to_string(),
            "tensor(3.)"
        );
        assert_eq!(
            Tensor::<Rank0, i64>::from_array(7, CPU).to_string(),
            "tensor(7)"
        );
        assert_eq!(
            Tensor::<Rank0, u8>::from_array(7, CPU).to_string(),
            "tensor(7, dtype=torch.uint8)"
        );
    }

    #[test]
    fn dtype_suffixes_and_their_line_break() {
        let h = vec1(vec![f16::from_f32(0.5), f16::from_f32(2.0)]);
        assert_eq!(
            h.to_string(),
            "tensor([0.5000, 2.0000], dtype=torch.float16)"
        );
        let b = vec1(vec![bf16::from_f32(1.0)]);
        assert_eq!(b.to_string(), "tensor([1.], dtype=torch.bfloat16)");
        let d = vec1(vec![
            0.4963f64, 0.7682, 0.0885, 0.1320, 0.3074, 0.6341, 0.4901, 0.8964, 0.4556,
        ]);
        assert_eq!(
            d.to_string(),
            "tensor([0.4963, 0.7682, 0.0885, 0.1320, 0.3074, 0.6341, 0.4901, 0.8964, 0.4556],\n       \
             dtype=torch.float64)"
        );
    }

    #[test]
    fn nested_dims_and_line_wrapping() {
        let t: Tensor<(usize,), i64> = Tensor::arange(8, CPU);
        let t = t.reshape((Const::<2>, Const::<2>, Const::<2>));
        assert_eq!(
            t.to_string(),
            "tensor([[[0, 1],\n         [2, 3]],\n\n        [[4, 5],\n         [6, 7]]])"
        );
        let r: Tensor<(usize,)> = Tensor::arange(30, CPU);
        assert_eq!(
            r.to_string(),
            "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n        \
             14., 15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27.,\n        \
             28., 29.])"
        );
        // Views print their logical order.
        let m: Tensor<Rank2<2, 3>, i32> = Tensor::from_array([[1, 2, 3], [4, 5, 6]], CPU);
        assert_eq!(
            m.t().to_string(),
            "tensor([[1, 4],\n        [2, 5],\n        [3, 6]], dtype=torch.int32)"
        );
    }

    #[test]
    fn large_tensors_are_summarized() {
        let t: Tensor<(usize,), i64> = Tensor::arange(2000, CPU);
        assert_eq!(
            t.to_string(),
            "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])"
        );
        let z: Tensor<(usize, usize)> = Tensor::zeros((100, 100), CPU);
        let row = "[0., 0., 0.,  ..., 0., 0., 0.]";
        let want = format!(
            "tensor([{row},\n        {row},\n        {row},\n        ...,\n        {row},\n        \
             {row},\n        {row}])"
        );
        assert_eq!(z.to_string(), want);
    }

    #[test]
    fn empty_tensors_state_size_and_dtype() {
        assert_eq!(vec1(Vec::<f32>::new()).to_string(), "tensor([])");
        assert_eq!(
            vec1(Vec::<i64>::new()).to_string(),
            "tensor([], dtype=torch.int64)"
        );
        let e: Tensor<(usize, usize)> = Tensor::zeros((0, 3), CPU);
        assert_eq!(e.to_string(), "tensor([], size=(0, 3))");
    }
}
