//! Native runtime for elementwise and reduction kernels: the loops, length checks and strided
//! index arithmetic that `#[kernel]`'s generated native code calls. Hidden from the docs:
//! users call the generated functions, which check their arguments here and return
//! [`LaunchError`] rather than panicking.
//!
//! Invariant: the native strided walk and the CUDA strided entry read the same elements: the
//! output is contiguous in row-major order, and input element `offset + sum(idx[d] *
//! strides[d])` feeds output index `idx`.

use super::{KernelShape, KernelStrides, LaunchError};
use crate::{Float, FloatMath};

/// `x` to an integer power by repeated squaring (CUDA's `rtx_powi` does the same steps).
#[inline]
pub fn powi<A: FloatMath>(x: A, n: i32) -> A {
    let mut base = x;
    let mut e = n.unsigned_abs();
    let mut acc = A::c(1.0);
    while e > 0 {
        if e & 1 == 1 {
            acc = acc * base;
        }
        base = base * base;
        e >>= 1;
    }
    if n < 0 { A::c(1.0) / acc } else { acc }
}

/// Uniform `i` of an elementwise marker's list, rounded to `T` (NaN when the caller gave too
/// few, which `rtx::kernel` checks beforehand).
#[inline]
pub fn uniform_elem<T: Float>(uniforms: &[f64], i: usize) -> T {
    T::from_f64(uniform_f64(uniforms, i))
}

/// Uniform `i` of an elementwise marker's list as given (NaN when missing).
#[inline]
pub fn uniform_f64(uniforms: &[f64], i: usize) -> f64 {
    uniforms.get(i).copied().unwrap_or(f64::NAN)
}

/// Checks that a buffer holds exactly `n` elements.
pub fn check_len(kernel: &str, what: &str, len: usize, n: usize) -> Result<(), LaunchError> {
    if len != n {
        return Err(LaunchError::new(format!(
            "kernel `{kernel}`: `{what}` has {len} elements, expected {n} (the length of `out`)"
        )));
    }
    Ok(())
}

/// Walks a contiguous output of `shape` and calls `f(out_index, input_offsets)`, after
/// checking that every input offset stays inside its buffer.
pub fn for_each_strided<const K: usize>(
    kernel: &str,
    shape: &KernelShape,
    inputs: [(&str, usize, &KernelStrides); K],
    out_len: usize,
    mut f: impl FnMut(usize, [usize; K]),
) -> Result<(), LaunchError> {
    if shape.rank as usize > super::MAX_RANK {
        return Err(LaunchError::new(format!(
            "kernel `{kernel}`: shape rank {} exceeds {}",
            shape.rank,
            super::MAX_RANK
        )));
    }
    let dims: Vec<usize> = shape.dims().iter().map(|&d| d as usize).collect();
    let n: usize = dims.iter().product();
    if n != out_len {
        return Err(LaunchError::new(format!(
            "kernel `{kernel}`: `out` has {out_len} elements but the shape {dims:?} has {n}"
        )));
    }
    if n == 0 {
        return Ok(());
    }
    for (name, len, st) in &inputs {
        let (mut lo, mut hi) = (st.offset, st.offset);
        for (d, &size) in dims.iter().enumerate() {
            let span = (size as i64 - 1) * st.strides[d];
            if span < 0 { lo += span } else { hi += span }
        }
        if lo < 0 || hi >= *len as i64 {
            return Err(LaunchError::new(format!(
                "kernel `{kernel}`: input `{name}` with offset {} and strides {:?} reaches \
                 elements {lo}..={hi} over shape {dims:?}, but holds {len}",
                st.offset,
                &st.strides[..dims.len()]
            )));
        }
    }
    let mut idx = vec![0usize; dims.len()];
    let mut offs: [i64; K] = std::array::from_fn(|k| inputs[k].2.offset);
    for i in 0..n {
        f(i, offs.map(|o| o as usize));
        // Odometer step: bump the last dim, carrying into earlier ones.
        for d in (0..dims.len()).rev() {
            idx[d] += 1;
            for (k, o) in offs.iter_mut().enumerate() {
                *o += inputs[k].2.strides[d];
            }
            if idx[d] < dims[d] {
                break;
            }
            for (k, o) in offs.iter_mut().enumerate() {
                *o -= inputs[k].2.strides[d] * dims[d] as i64;
            }
            idx[d] = 0;
        }
    }
    Ok(())
}

/// The scalar pieces of a reduction over elements `E`, in the compute type `A`.
pub struct ReduceFns<E, A> {
    /// The value of an empty reduction.
    pub identity: A,
    /// Applied to every element before combining.
    pub map: fn(A) -> A,
    /// Associative combine.
    pub combine: fn(A, A) -> A,
    /// Applied to the result with the axis length: `finish(acc, n)`.
    pub finish: fn(A, A) -> A,
    /// An element in the compute type.
    pub load: fn(E) -> A,
    /// A result back in the element type.
    pub store: fn(A) -> E,
    /// The axis length in the compute type.
    pub count: fn(usize) -> A,
}

/// Reduces `x`, seen as `[outer, axis, inner]` row-major, along `axis` into `out`
/// (`[outer, inner]`), combining each output's elements in index order.
pub fn reduce<E: Copy, A: Copy>(
    kernel: &str,
    x: &[E],
    (outer, axis, inner): (usize, usize, usize),
    out: &mut [E],
    fns: &ReduceFns<E, A>,
) -> Result<(), LaunchError> {
    let n_in = outer.checked_mul(axis).and_then(|v| v.checked_mul(inner));
    if n_in != Some(x.len()) {
        return Err(LaunchError::new(format!(
            "kernel `{kernel}`: `x` has {} elements, not outer*axis*inner = {outer}*{axis}*{inner}",
            x.len()
        )));
    }
    check_len(kernel, "out (outer*inner)", out.len(), outer * inner)?;
    let n = (fns.count)(axis);
    for o in 0..outer {
        for i in 0..inner {
            let mut acc = fns.identity;
            for k in 0..axis {
                let v = (fns.load)(x[(o * axis + k) * inner + i]);
                acc = (fns.combine)(acc, (fns.map)(v));
            }
            out[o * inner + i] = (fns.store)((fns.finish)(acc, n));
        }
    }
    Ok(())
}

/// Reduces a contiguous tensor of `shape` along `axis`; returns the values and the output
/// shape (the axis kept with size 1 when `keepdim`, dropped otherwise).
pub fn reduce_axis<E: Copy + Default, A: Copy>(
    kernel: &str,
    x: &[E],
    shape: &[usize],
    axis: usize,
    keepdim: bool,
    fns: &ReduceFns<E, A>,
) -> Result<(Vec<E>, Vec<usize>), LaunchError> {
    if axis >= shape.len() {
        return Err(LaunchError::new(format!(
            "kernel `{kernel}`: axis {axis} is out of range for shape {shape:?}"
        )));
    }
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis + 1..].iter().product();
    let mut out = vec![E::default(); outer * inner];
    reduce(kernel, x, (outer, shape[axis], inner), &mut out, fns)?;
    let mut out_shape = shape.to_vec();
    if keepdim {
        out_shape[axis] = 1;
    } else {
        out_shape.remove(axis);
    }
    Ok((out, out_shape))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn powi_matches_repeated_products() {
        assert_eq!(powi(3.0f64, 5), 243.0);
        assert_eq!(powi(2.0f64, -2), 0.25);
        assert_eq!(powi(7.0f64, 0), 1.0);
    }

    #[test]
    fn strided_walk_broadcasts_and_checks_bounds() {
        let shape = KernelShape::new(&[2, 3]).unwrap();
        let row = KernelStrides::new(0, &[0, 1]).unwrap();
        let col = KernelStrides::new(0, &[1, 0]).unwrap();
        let mut seen = vec![];
        for_each_strided("t", &shape, [("r", 3, &row), ("c", 2, &col)], 6, |i, o| {
            seen.push((i, o))
        })
        .unwrap();
        assert_eq!(seen[4], (4, [1, 1]));
        assert_eq!(seen[5], (5, [2, 1]));
        let err = for_each_strided("t", &shape, [("r", 2, &row)], 6, |_, _| ()).unwrap_err();
        assert!(err.message().contains("holds 2"), "{err}");
    }
}
