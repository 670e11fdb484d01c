//! The strided elementwise entries' generated CUDA, run on the host (see `host_run`) against a
//! plain offset walk, both as element launches and, where the layouts allow, as vector
//! launches (`KernelShape::vectors`: 16-byte vectors, bool masks beside them, a broadcast
//! value repeated), described here as the CUDA backend describes them. Cases the vector
//! launch cannot take (an odd innermost size, an offset off the vector grid, a transposed
//! input) run as element launches only. Skipped with a notice where no C++ compiler exists.

// Each test binary uses a part of the shared harness.

use crate::host_run::{HostArg, bytes, from_bytes, run};
use rtx_kernels::kernel::{
    KernelShape, KernelSource, KernelStrides, LaunchConfig, VECTOR_LAUNCH, Variant,
};
use rtx_kernels::kernels::{add, copy, select};
use rtx_kernels::{Element, bf16};

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
    fn arg(&self) -> KernelStrides {
        KernelStrides::new(self.offset, &self.strides).unwrap()
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

/// The launches to try for `views` over `dims`, each as a shape and the views' strides: the
/// element launch, and the vector launch of `w` elements per vector when every view steps by
/// 1 or 0 innermost (by 1: starting on a vector boundary) and the innermost size is a
/// multiple of `w`.
fn launches(dims: &[usize], views: &[&View], w: usize) -> Vec<(KernelShape, Vec<KernelStrides>)> {
    let plain = KernelShape::new(dims).unwrap();
    let mut out = vec![(plain, views.iter().map(|v| v.arg()).collect())];
    let inner = dims.len() - 1;
    let fits = dims[inner].is_multiple_of(w)
        && views.iter().all(|v| match v.strides[inner] {
            0 => true,
            1 => {
                v.offset.is_multiple_of(w)
                    && v.strides[..inner].iter().all(|&s| s % w as isize == 0)
            }
            _ => false,
        });
    if fits {
        let mut shape = plain;
        shape.dims[inner] /= w as u64;
        shape.vectors = VECTOR_LAUNCH;
        let args = views
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let mut strides = v.strides.clone();
                if strides[inner] == 1 {
                    strides[inner] = w as isize;
                    shape.vectors |= 1 << i;
                }
                KernelStrides::new(v.offset, &strides).unwrap()
            })
            .collect();
        out.push((shape, args));
    }
    out
}

/// Runs the strided entry of `k` for `E` once per launch of `views` over `dims`, with
/// `bufs[i]` read through `views[i]`, and checks the output against `want`. Returns how many
/// launches ran (`None` without a compiler).
fn check<E: Element + PartialEq + std::fmt::Debug>(
    k: &'static KernelSource,
    dims: &[usize],
    bufs: &[Vec<u8>],
    views: &[&View],
    want: &[E],
) -> Option<usize> {
    let entry = k
        .entry(E::DTYPE, Variant::Strided)
        .unwrap_or_else(|| panic!("{} has no {:?} strided entry", k.name, E::DTYPE));
    let w = 16 / std::mem::size_of::<E>();
    let runs = launches(dims, views, w);
    for (shape, strides) in &runs {
        let mut args: Vec<HostArg> = bufs
            .iter()
            .zip(strides)
            .flat_map(|(b, s)| [HostArg::Buf(b.clone()), HostArg::Strides(*s)])
            .collect();
        args.push(HostArg::Buf(bytes(&vec![E::default(); want.len()])));
        args.push(HostArg::Shape(*shape));
        args.push(HostArg::I(want.len() as u64));
        let got = run(k, entry, LAUNCH, &args)?;
        assert_eq!(
            from_bytes::<E>(&got[bufs.len()]),
            want,
            "{} {:?} {dims:?} vectors {:#x}",
            k.name,
            E::DTYPE,
            shape.vectors
        );
    }
    Some(runs.len())
}

/// `select(mask, a, b)` with a mask broadcast over the leading dims, as attention's causal
/// mask is, against the offset walk.
fn select_case<E: Element + PartialEq + std::fmt::Debug>(
    dims: &[usize],
    mask: &View,
    a: &View,
    b: &View,
    len: usize,
) -> Option<usize> {
    let cond: Vec<bool> = (0..len).map(|i| (i * 7 + i / 3) % 5 < 2).collect();
    let av: Vec<E> = (0..len).map(|i| E::from_f64(i as f64 * 0.5)).collect();
    let bv: Vec<E> = (0..len).map(|i| E::from_f64(-(i as f64))).collect();
    let n: usize = dims.iter().product();
    let (mo, ao, bo) = (mask.offsets(dims), a.offsets(dims), b.offsets(dims));
    let want: Vec<E> = (0..n)
        .map(|i| if cond[mo[i]] { av[ao[i]] } else { bv[bo[i]] })
        .collect();
    let bufs = [bytes(&cond), bytes(&av), bytes(&bv)];
    check(&select::KERNEL, dims, &bufs, &[mask, a, b], &want)
}

/// `a + b` and `copy(a)` through views, against the offset walk.
fn add_copy_case<E: Element + PartialEq + std::fmt::Debug + std::ops::Add<Output = E>>(
    dims: &[usize],
    a: &View,
    b: &View,
    len: usize,
) -> Option<usize> {
    let av: Vec<E> = (0..len).map(|i| E::from_f64((i % 97) as f64)).collect();
    let bv: Vec<E> = (0..len)
        .map(|i| E::from_f64((i % 13) as f64 * 0.25))
        .collect();
    let n: usize = dims.iter().product();
    let (ao, bo) = (a.offsets(dims), b.offsets(dims));
    let sum: Vec<E> = (0..n).map(|i| av[ao[i]] + bv[bo[i]]).collect();
    let copied: Vec<E> = ao.iter().map(|&o| av[o]).collect();
    let added = check(&add::KERNEL, dims, &[bytes(&av), bytes(&bv)], &[a, b], &sum)?;
    let copies = check(&copy::KERNEL, dims, &[bytes(&av)], &[a], &copied)?;
    assert_eq!(added, copies);
    Some(added)
}

/// Every case for `E`: the count of launches each ran is 2 where the vector launch applies.
fn cases<E: Element + PartialEq + std::fmt::Debug + std::ops::Add<Output = E>>() -> Option<()> {
    let dense = |dims: &[usize]| View::dense(dims);
    let view = |offset: usize, strides: &[isize]| View {
        offset,
        strides: strides.to_vec(),
    };
    // Scores [B*H, T*T] with a causal-style mask broadcast over the batch.
    let (scores, mask) = (dense(&[6, 64]), view(0, &[0, 1]));
    assert_eq!(
        select_case::<E>(&[6, 64], &mask, &scores, &scores, 6 * 64)?,
        2
    );
    // A bias row broadcast over rows, and a value broadcast along rows.
    let x = dense(&[5, 32]);
    assert_eq!(add_copy_case::<E>(&[5, 32], &x, &view(0, &[0, 1]), 160)?, 2);
    assert_eq!(add_copy_case::<E>(&[5, 32], &x, &view(3, &[1, 0]), 160)?, 2);
    // Heads read out of a fused [B, T, 3, H, hd] projection as [B, H, T, hd], hd = 16.
    let (b, t, h, hd) = (2, 3, 4, 16);
    let heads = view(
        h * hd,
        &[
            (t * 3 * h * hd) as isize,
            hd as isize,
            (3 * h * hd) as isize,
            1,
        ],
    );
    let out = dense(&[b, h, t, hd]);
    assert_eq!(
        add_copy_case::<E>(&[b, h, t, hd], &heads, &out, b * t * 3 * h * hd)?,
        2
    );
    // Element launches only: an odd innermost size, an offset off the vector grid, a
    // transposed input.
    assert_eq!(
        add_copy_case::<E>(&[4, 7], &dense(&[4, 7]), &dense(&[4, 7]), 28)?,
        1
    );
    let shifted = view(1, &[32, 1]);
    assert_eq!(
        add_copy_case::<E>(&[3, 16], &shifted, &dense(&[3, 16]), 96)?,
        1
    );
    let (transposed, square) = (view(0, &[1, 16]), dense(&[16, 16]));
    assert_eq!(add_copy_case::<E>(&[16, 16], &transposed, &square, 256)?, 1);
    assert_eq!(
        select_case::<E>(&[16, 16], &mask, &transposed, &square, 256)?,
        1
    );
    Some(())
}

#[test]
fn strided_entries_match_an_offset_walk_on_and_off_the_vector_path() {
    // `None`: no C++ compiler here (the harness printed a notice).
    let _ = cases::<f32>().and(cases::<bf16>()).and(cases::<f64>());
}
