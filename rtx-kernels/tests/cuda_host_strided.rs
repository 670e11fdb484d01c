//! The strided elementwise entries' generated CUDA, run on the host (see `host_run`) against a
//! plain offset walk: views and broadcasts the vector path takes (16-byte vectors, bool masks
//! beside them, a broadcast value repeated) and ones it must leave to the per-element loop
//! (an odd innermost size, an offset off the vector grid, a transposed input).
//! Skipped with a notice where no C++ compiler exists.

// Each test binary uses a part of the shared harness.
#[allow(dead_code)]
mod host_run;

use host_run::{HostArg, bytes, from_bytes, run};
use rtx_kernels::kernel::{KernelShape, KernelSource, KernelStrides, LaunchConfig, Variant};
use rtx_kernels::kernels::{add, copy, select};
use rtx_kernels::{DType, Element, bf16};

const LAUNCH: LaunchConfig = LaunchConfig {
    grid: rtx_kernels::kernel::block::Dim3 { x: 3, y: 1, z: 1 },
    block: rtx_kernels::kernel::block::Dim3 { x: 32, y: 1, z: 1 },
};

/// A view for a launch: offset and strides, in elements.
#[derive(Clone)]
struct View {
    offset: usize,
    strides: Vec<isize>,
}

impl View {
    fn dense(dims: &[usize]) -> View {
        let mut strides = vec![0isize; dims.len()];
        let mut s = 1isize;
        for d in (0..dims.len()).rev() {
            strides[d] = s;
            s *= dims[d] as isize;
        }
        View { offset: 0, strides }
    }
    fn arg(&self) -> HostArg {
        HostArg::Strides(KernelStrides::new(self.offset, &self.strides).unwrap())
    }
    /// The element offsets of every output position, row-major over `dims`.
    fn offsets(&self, dims: &[usize]) -> Vec<usize> {
        let n: usize = dims.iter().product();
        (0..n)
            .map(|mut i| {
                let mut o = self.offset as isize;
                for d in (0..dims.len()).rev() {
                    o += (i % dims[d]) as isize * self.strides[d];
                    i /= dims[d];
                }
                o as usize
            })
            .collect()
    }
}

fn strided(k: &'static KernelSource, dt: DType) -> &'static rtx_kernels::kernel::KernelEntry {
    k.entry(dt, Variant::Strided)
        .unwrap_or_else(|| panic!("{} has no {dt:?} strided entry", k.name))
}

/// `select(mask, a, b)` with a mask broadcast over the leading dims, as attention's causal
/// mask is, against the offset walk.
fn select_case<E: Element + PartialEq + std::fmt::Debug>(
    dims: &[usize],
    mask: &View,
    a: &View,
    b: &View,
    len: usize,
) -> Option<()> {
    let cond: Vec<bool> = (0..len).map(|i| (i * 7 + i / 3) % 5 < 2).collect();
    let av: Vec<E> = (0..len).map(|i| E::from_f64(i as f64 * 0.5)).collect();
    let bv: Vec<E> = (0..len).map(|i| E::from_f64(-(i as f64))).collect();
    let n: usize = dims.iter().product();
    let (mo, ao, bo) = (mask.offsets(dims), a.offsets(dims), b.offsets(dims));
    let want: Vec<E> = (0..n)
        .map(|i| if cond[mo[i]] { av[ao[i]] } else { bv[bo[i]] })
        .collect();
    let got = run(
        &select::KERNEL,
        strided(&select::KERNEL, E::DTYPE),
        LAUNCH,
        &[
            HostArg::Buf(bytes(&cond)),
            mask.arg(),
            HostArg::Buf(bytes(&av)),
            a.arg(),
            HostArg::Buf(bytes(&bv)),
            b.arg(),
            HostArg::Buf(bytes(&vec![E::default(); n])),
            HostArg::Shape(KernelShape::new(dims).unwrap()),
            HostArg::I(n as u64),
        ],
    )?;
    assert_eq!(
        from_bytes::<E>(&got[3]),
        want,
        "select {:?} {dims:?}",
        E::DTYPE
    );
    Some(())
}

/// `a + b` and `copy(a)` through views, against the offset walk.
fn add_copy_case<E: Element + PartialEq + std::fmt::Debug + std::ops::Add<Output = E>>(
    dims: &[usize],
    a: &View,
    b: &View,
    len: usize,
) -> Option<()> {
    let av: Vec<E> = (0..len).map(|i| E::from_f64((i % 97) as f64)).collect();
    let bv: Vec<E> = (0..len)
        .map(|i| E::from_f64((i % 13) as f64 * 0.25))
        .collect();
    let n: usize = dims.iter().product();
    let (ao, bo) = (a.offsets(dims), b.offsets(dims));
    let sum: Vec<E> = (0..n).map(|i| av[ao[i]] + bv[bo[i]]).collect();
    let shape = HostArg::Shape(KernelShape::new(dims).unwrap());
    let got = run(
        &add::KERNEL,
        strided(&add::KERNEL, E::DTYPE),
        LAUNCH,
        &[
            HostArg::Buf(bytes(&av)),
            a.arg(),
            HostArg::Buf(bytes(&bv)),
            b.arg(),
            HostArg::Buf(bytes(&vec![E::default(); n])),
            HostArg::Shape(KernelShape::new(dims).unwrap()),
            HostArg::I(n as u64),
        ],
    )?;
    assert_eq!(from_bytes::<E>(&got[2]), sum, "add {:?} {dims:?}", E::DTYPE);
    let got = run(
        &copy::KERNEL,
        strided(&copy::KERNEL, E::DTYPE),
        LAUNCH,
        &[
            HostArg::Buf(bytes(&av)),
            a.arg(),
            HostArg::Buf(bytes(&vec![E::default(); n])),
            shape,
            HostArg::I(n as u64),
        ],
    )?;
    let want: Vec<E> = ao.iter().map(|&o| av[o]).collect();
    assert_eq!(
        from_bytes::<E>(&got[1]),
        want,
        "copy {:?} {dims:?}",
        E::DTYPE
    );
    Some(())
}

fn cases<E: Element + PartialEq + std::fmt::Debug + std::ops::Add<Output = E>>() -> Option<()> {
    // Scores [B*H, T*T] with a causal-style mask broadcast over the batch (vector path).
    let dims = [6, 64];
    let mask = View {
        offset: 0,
        strides: vec![0, 1],
    };
    select_case::<E>(
        &dims,
        &mask,
        &View::dense(&dims),
        &View::dense(&dims),
        6 * 64,
    )?;
    // A bias row broadcast over rows (vector path), and a value broadcast along rows.
    let bias = View {
        offset: 0,
        strides: vec![0, 1],
    };
    add_copy_case::<E>(&[5, 32], &View::dense(&[5, 32]), &bias, 5 * 32)?;
    let column = View {
        offset: 3,
        strides: vec![1, 0],
    };
    add_copy_case::<E>(&[5, 32], &View::dense(&[5, 32]), &column, 5 * 32)?;
    // Heads read out of a fused [B, T, 3, H, hd] projection: [B, H, T, hd], hd = 16.
    let (b, t, h, hd) = (2, 3, 4, 16);
    let heads = View {
        offset: h * hd,
        strides: vec![
            (t * 3 * h * hd) as isize,
            hd as isize,
            (3 * h * hd) as isize,
            1,
        ],
    };
    add_copy_case::<E>(
        &[b, h, t, hd],
        &heads,
        &View::dense(&[b, h, t, hd]),
        b * t * 3 * h * hd,
    )?;
    // Left to the per-element loop: an odd innermost size, an offset off the vector grid, a
    // transposed input.
    add_copy_case::<E>(&[4, 7], &View::dense(&[4, 7]), &View::dense(&[4, 7]), 28)?;
    let shifted = View {
        offset: 1,
        strides: vec![32, 1],
    };
    add_copy_case::<E>(&[3, 16], &shifted, &View::dense(&[3, 16]), 3 * 32)?;
    let transposed = View {
        offset: 0,
        strides: vec![1, 16],
    };
    add_copy_case::<E>(&[16, 16], &transposed, &View::dense(&[16, 16]), 256)?;
    select_case::<E>(&[16, 16], &mask, &transposed, &View::dense(&[16, 16]), 256)
}

#[test]
fn strided_entries_match_an_offset_walk_on_and_off_the_vector_path() {
    // `None`: no C++ compiler here (the harness printed a notice).
    let _ = cases::<f32>().and(cases::<bf16>()).and(cases::<f64>());
}
