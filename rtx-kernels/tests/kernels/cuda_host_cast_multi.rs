//! The multi-tensor casts (`cast_from_acc_multi`, `cast_to_acc_multi`): natively held to
//! `Element::cast` bit for bit (the single-tensor cast's conversion), with and without a
//! scale, over every float bit pattern class (zeros, subnormals, ties, overflow to infinity,
//! NaN); and their generated CUDA C run on the host (see `host_run`) held to the native twins
//! bit for bit. A NaN must stay a NaN, its payload aside: Rust leaves the payload of `as`
//! conversions unspecified, and the CUDA prelude's f16 NaN is canonical (as the single-tensor
//! cast's is). Tensors of mixed sizes (an empty one included) split into several
//! chunks, with fewer blocks than chunks. Skipped with a notice where no C++ compiler exists.

use crate::host_run::{HostArg, bytes, from_bytes, run};
use rtx_kernels::kernel::{KernelSource, LaunchConfig, Variant};
use rtx_kernels::kernels::{cast_from_acc_multi, cast_to_acc_multi};
use rtx_kernels::{DType, Element, Float, bf16, f16};

const LENS: [usize; 5] = [1, 33, 2053, 0, 700];
const CHUNK: usize = 512;
const LAUNCH: LaunchConfig = LaunchConfig {
    grid: rtx_kernels::kernel::block::Dim3 { x: 3, y: 1, z: 1 },
    block: rtx_kernels::kernel::block::Dim3 { x: 32, y: 1, z: 1 },
};
/// The scale of the scaled runs: a power of two, as a loss scale is, and one that is not.
const SCALES: [f32; 2] = [1.0 / 65536.0, 0.3];

fn chunks() -> (Vec<usize>, Vec<usize>) {
    let (mut rows, mut starts) = (Vec::new(), Vec::new());
    for (t, &n) in LENS.iter().enumerate() {
        for s in (0..n).step_by(CHUNK) {
            rows.push(t);
            starts.push(s);
        }
    }
    (rows, starts)
}

/// Reproducible 64-bit words.
fn words(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    move || {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        s.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// f32 values that exercise a conversion to 16 bits: the edge cases first (zeros, ties to
/// even, a tie broken only by the last f32 bits, the f16 overflow edge and its subnormals,
/// f32 subnormals, infinities, NaN), then random bit patterns of every class.
fn f32_rows(seed: u64) -> Vec<Vec<f32>> {
    let edges = [
        0.0,
        -0.0,
        1.0 + 1.0 / 256.0,
        1.0 + 3.0 / 256.0,
        f32::from_bits(0x3f80_8001),
        65504.0,
        65519.0,
        65520.0,
        -1e9,
        6.0e-8,
        2.9e-8,
        3.0e-5,
        f32::from_bits(1),
        f32::MIN_POSITIVE,
        f32::MAX,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
    ];
    let mut next = words(seed);
    let mut k = 0;
    LENS.iter()
        .map(|&n| {
            (0..n)
                .map(|_| {
                    k += 1;
                    match edges.get(k - 1) {
                        Some(&e) => e,
                        None => f32::from_bits((next() >> 32) as u32),
                    }
                })
                .collect()
        })
        .collect()
}

/// Random `T` values from 16- or 32-bit patterns (`bits` makes one).
fn t_rows<T: Float>(seed: u64, bits: impl Fn(u64) -> T) -> Vec<Vec<T>> {
    let mut next = words(seed);
    LENS.iter()
        .map(|&n| (0..n).map(|_| bits(next())).collect())
        .collect()
}

fn table<E: Copy>(v: &[Vec<E>]) -> HostArg {
    HostArg::Table(v.iter().map(|r| bytes(r)).collect())
}

fn usizes(v: &[usize]) -> HostArg {
    HostArg::Buf(bytes(&v.iter().map(|&x| x as u64).collect::<Vec<_>>()))
}

fn entry(k: &'static KernelSource, dt: DType) -> &'static rtx_kernels::kernel::KernelEntry {
    k.entry(dt, Variant::Simt)
        .unwrap_or_else(|| panic!("{} has no {dt:?} entry", k.name))
}

/// Whether `a` and `b` have the same bits, or are both NaN.
fn same<E: Element>(a: E, b: E) -> bool {
    bytes(&[a]) == bytes(&[b]) || (a.to_f64().is_nan() && b.to_f64().is_nan())
}

#[track_caller]
fn check<E: Element>(what: &str, got: &[Vec<E>], want: &[Vec<E>]) {
    assert_eq!(got.len(), want.len(), "{what}: rows");
    for (t, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.len(), w.len(), "{what}: row {t} length");
        for (i, (&g, &w)) in g.iter().zip(w).enumerate() {
            assert!(same(g, w), "{what}: row {t} element {i}: {g:?}, want {w:?}");
        }
    }
}

/// f32 master values into `T`, unscaled and scaled: native against `Element::cast`, then the
/// CUDA source on the host against native.
fn from_acc<T: Float<Acc = f32>>() -> Option<()> {
    let src = f32_rows(1);
    let (rows, starts) = chunks();
    for scale in [None, Some(SCALES[0]), Some(SCALES[1])] {
        let what = format!("cast_from_acc_multi {:?} scale {scale:?}", T::DTYPE);
        let want: Vec<Vec<T>> = src
            .iter()
            .map(|r| {
                r.iter()
                    .map(|&x| (x * scale.unwrap_or(1.0)).cast())
                    .collect()
            })
            .collect();
        let mut out: Vec<Vec<T>> = LENS.iter().map(|&n| vec![T::default(); n]).collect();
        let out0 = out.clone();
        let sc = scale.map_or(vec![], |s| vec![s]);
        let mut om: Vec<&mut [T]> = out.iter_mut().map(|r| &mut r[..]).collect();
        let sr: Vec<&[f32]> = src.iter().map(|r| &r[..]).collect();
        cast_from_acc_multi::<T>(
            LAUNCH,
            &sr,
            &mut om,
            &rows,
            &starts,
            &LENS,
            rows.len(),
            CHUNK,
            &sc,
            scale.is_some() as u32,
        )
        .unwrap();
        check(&what, &out, &want);
        let args = [
            table(&src),
            table(&out0),
            usizes(&rows),
            usizes(&starts),
            usizes(&LENS),
            HostArg::I(rows.len() as u64),
            HostArg::I(CHUNK as u64),
            HostArg::Buf(bytes(&[scale.unwrap_or(0.0)])),
            HostArg::I(scale.is_some() as u64),
        ];
        let k = &cast_from_acc_multi::KERNEL;
        let got = run(k, entry(k, T::DTYPE), LAUNCH, &args)?;
        let n = LENS.len();
        let host: Vec<Vec<T>> = got[n..2 * n].iter().map(|b| from_bytes(b)).collect();
        check(&format!("{what} on the host"), &host, &out);
    }
    Some(())
}

/// `T` working values into f32, unscaled and scaled, as [`from_acc`] checks them.
fn to_acc<T: Float<Acc = f32>>(bits: impl Fn(u64) -> T) -> Option<()> {
    let src = t_rows::<T>(2, bits);
    let (rows, starts) = chunks();
    for scale in [None, Some(SCALES[0]), Some(SCALES[1])] {
        let what = format!("cast_to_acc_multi {:?} scale {scale:?}", T::DTYPE);
        let want: Vec<Vec<f32>> = src
            .iter()
            .map(|r| {
                r.iter()
                    .map(|&x| x.cast::<f32>() * scale.unwrap_or(1.0))
                    .collect()
            })
            .collect();
        let mut out: Vec<Vec<f32>> = LENS.iter().map(|&n| vec![0.0; n]).collect();
        let out0 = out.clone();
        let sc = scale.map_or(vec![], |s| vec![s]);
        let mut om: Vec<&mut [f32]> = out.iter_mut().map(|r| &mut r[..]).collect();
        let sr: Vec<&[T]> = src.iter().map(|r| &r[..]).collect();
        cast_to_acc_multi::<T>(
            LAUNCH,
            &sr,
            &mut om,
            &rows,
            &starts,
            &LENS,
            rows.len(),
            CHUNK,
            &sc,
            scale.is_some() as u32,
        )
        .unwrap();
        check(&what, &out, &want);
        let args = [
            table(&src),
            table(&out0),
            usizes(&rows),
            usizes(&starts),
            usizes(&LENS),
            HostArg::I(rows.len() as u64),
            HostArg::I(CHUNK as u64),
            HostArg::Buf(bytes(&[scale.unwrap_or(0.0)])),
            HostArg::I(scale.is_some() as u64),
        ];
        let k = &cast_to_acc_multi::KERNEL;
        let got = run(k, entry(k, T::DTYPE), LAUNCH, &args)?;
        let n = LENS.len();
        let host: Vec<Vec<f32>> = got[n..2 * n].iter().map(|b| from_bytes(b)).collect();
        check(&format!("{what} on the host"), &host, &out);
    }
    Some(())
}

#[test]
fn multi_tensor_casts_match_element_cast_natively_and_on_the_host() {
    let _ = from_acc::<bf16>()
        .and_then(|_| from_acc::<f16>())
        .and_then(|_| from_acc::<f32>())
        .and_then(|_| to_acc::<bf16>(|w| bf16::from_bits((w >> 48) as u16)))
        .and_then(|_| to_acc::<f16>(|w| f16::from_bits((w >> 48) as u16)))
        .and_then(|_| to_acc::<f32>(|w| f32::from_bits((w >> 32) as u32)));
}

#[test]
fn the_f64_route_keeps_element_cast_rounding_to_bf16() {
    // 1 + 2^-8 + 2^-23 lies just above a tie; `Element::cast` (through f64, whose bf16
    // conversion reads the high word only) rounds it to even, down, and so must the kernel:
    // it converts through f64, not with the f32 rounding of `Float::from_acc`.
    let x = f32::from_bits(0x3f80_8001);
    let mut out = vec![bf16::ZERO];
    cast_from_acc_multi::<bf16>(
        LaunchConfig::new(1, 32),
        &[&[x]],
        &mut [&mut out],
        &[0],
        &[0],
        &[1],
        1,
        CHUNK,
        &[],
        0,
    )
    .unwrap();
    assert_eq!(out[0].to_bits(), x.cast::<bf16>().to_bits());
    assert_eq!(out[0].to_bits(), 0x3f80);
}
