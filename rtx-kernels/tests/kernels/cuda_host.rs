//! The generated CUDA C of kernels whose threads are independent, run on the host (see
//! `host_run`) and held to the native twins: bit for bit for data movement, Philox draws,
//! casts and integer arithmetic; within a few ulps for normal draws (whose `ln` differs).
//! Skipped with a notice where no C++ compiler exists.

use crate::host_run::{HostArg, bytes, from_bytes, run};
use rtx_kernels::kernel::{KernelShape, KernelSource, KernelStrides, LaunchConfig, Variant};
use rtx_kernels::kernels::*;
use rtx_kernels::{DType, Element, Float, Num, Philox, bf16, f16};

fn simt(k: &'static KernelSource, dt: DType) -> &'static rtx_kernels::kernel::KernelEntry {
    k.entry(dt, Variant::Simt)
        .unwrap_or_else(|| panic!("{} has no {dt:?} entry", k.name))
}

/// Runs `k`'s SIMT entry for `E` on the host; `None` without a compiler.
fn host(
    k: &'static KernelSource,
    dt: DType,
    launch: LaunchConfig,
    args: &[HostArg],
) -> Option<Vec<Vec<u8>>> {
    run(k, simt(k, dt), launch, args)
}

const LAUNCH: LaunchConfig = LaunchConfig {
    grid: rtx_kernels::kernel::block::Dim3 { x: 3, y: 1, z: 1 },
    block: rtx_kernels::kernel::block::Dim3 { x: 32, y: 1, z: 1 },
};

fn uniform<E: Float>(n: usize, seed: u64, low: f64, high: f64) -> Option<()> {
    let wide = (E::DTYPE == DType::F64) as u32;
    let high_e = E::from_f64(high);
    let below = E::from_f64(high_e.to_f64() * (1.0 - 1e-3));
    let mut native = vec![E::default(); n];
    random_uniform(
        LAUNCH,
        &mut native,
        n,
        seed,
        wide,
        low,
        high - low,
        high_e.to_f64(),
        below,
    )
    .unwrap();
    let got = host(
        &random_uniform::KERNEL,
        E::DTYPE,
        LAUNCH,
        &[
            HostArg::Buf(bytes(&vec![E::default(); n])),
            HostArg::I(n as u64),
            HostArg::I(seed),
            HostArg::I(wide as u64),
            HostArg::F(low),
            HostArg::F(high - low),
            HostArg::F(high_e.to_f64()),
            HostArg::F(below.to_f64()),
        ],
    )?;
    assert_eq!(got[0], bytes(&native), "uniform {:?} seed {seed}", E::DTYPE);
    Some(())
}

fn normal<E: Float>(n: usize, seed: u64) -> Option<()> {
    let wide = (E::DTYPE == DType::F64) as u32;
    let mut native = vec![E::default(); n];
    random_normal(LAUNCH, &mut native, n, seed, wide, 0.25, 3.0).unwrap();
    let got = host(
        &random_normal::KERNEL,
        E::DTYPE,
        LAUNCH,
        &[
            HostArg::Buf(bytes(&vec![E::default(); n])),
            HostArg::I(n as u64),
            HostArg::I(seed),
            HostArg::I(wide as u64),
            HostArg::F(0.25),
            HostArg::F(3.0),
        ],
    )?;
    let got: Vec<E> = from_bytes(&got[0]);
    let ulp = match E::DTYPE {
        DType::F64 => 1e-15,
        DType::F32 => 1e-6,
        DType::F16 => 1e-3,
        _ => 8e-3,
    };
    for (i, (g, w)) in got.iter().zip(&native).enumerate() {
        let (g, w) = (g.to_f64(), w.to_f64());
        assert!(
            (g - w).abs() <= 4.0 * ulp * w.abs().max(1.0),
            "normal {:?} seed {seed} at {i}: {g} vs {w}",
            E::DTYPE
        );
    }
    Some(())
}

fn bernoulli<E: Element>(n: usize, seed: u64, p: f64) -> Option<()> {
    let t = Philox::bernoulli_threshold(p);
    let mut native = vec![E::default(); n];
    random_bernoulli(LAUNCH, &mut native, n, seed, t).unwrap();
    let got = host(
        &random_bernoulli::KERNEL,
        E::DTYPE,
        LAUNCH,
        &[
            HostArg::Buf(bytes(&vec![E::default(); n])),
            HostArg::I(n as u64),
            HostArg::I(seed),
            HostArg::I(t),
        ],
    )?;
    assert_eq!(got[0], bytes(&native), "bernoulli {:?}", E::DTYPE);
    Some(())
}

fn randint<E: Num>(n: usize, seed: u64, low: i64, range: u64) -> Option<()> {
    let mut native = vec![E::default(); n];
    random_int(LAUNCH, &mut native, n, seed, low, range).unwrap();
    let got = host(
        &random_int::KERNEL,
        E::DTYPE,
        LAUNCH,
        &[
            HostArg::Buf(bytes(&vec![E::default(); n])),
            HostArg::I(n as u64),
            HostArg::I(seed),
            HostArg::I(low as u64),
            HostArg::I(range),
        ],
    )?;
    assert_eq!(got[0], bytes(&native), "randint {:?}", E::DTYPE);
    Some(())
}

#[test]
fn philox_kernels_run_the_same_on_the_host() {
    for seed in [0, 0x1234_5678_9abc_def0] {
        let ran = uniform::<f32>(999, seed, -2.0, 3.0)
            .and(uniform::<f64>(501, seed, -1.0, 1e-3))
            .and(uniform::<f16>(333, seed, 0.0, 1.0))
            .and(uniform::<bf16>(2049, seed, 0.0, 1.0))
            .and(uniform::<bf16>(300, seed, -3.3, 17.1))
            .and(normal::<f32>(401, seed))
            .and(normal::<f64>(203, seed))
            .and(normal::<bf16>(99, seed))
            .and(bernoulli::<f32>(101, seed, 0.3))
            .and(bernoulli::<bool>(77, seed, 0.5))
            .and(bernoulli::<u8>(64, seed, 1.0))
            .and(randint::<i64>(301, seed, -5, 10))
            .and(randint::<i64>(64, seed, i64::MIN, 0))
            .and(randint::<i32>(65, seed, -1000, 1 << 20))
            .and(randint::<u8>(66, seed, 0, 256))
            .and(randint::<f32>(67, seed, -(1 << 40), 1 << 41))
            .and(randint::<bf16>(68, seed, -300, 600));
        if ran.is_none() {
            return;
        }
    }
}

fn strides(offset: usize, s: &[usize]) -> KernelStrides {
    let s: Vec<isize> = s.iter().map(|&v| v as isize).collect();
    KernelStrides::new(offset, &s).unwrap()
}

fn movement<E: Element>(conv: impl Fn(u64) -> E) -> Option<()> {
    let x: Vec<E> = (0..62u64).map(|v| conv(v * 7 % 61)).collect();
    // gather along 1: x viewed [5, 4, 3] transposed, index [4, 6, 2] broadcast on the last.
    let xs = strides(2, &[1, 5, 20]);
    let idx: Vec<i64> = (0..30).map(|i| (i * 5 % 4) as i64).collect();
    let is = strides(1, &[6, 1, 0]);
    let shape = KernelShape::new(&[4, 6, 2]).unwrap();
    let n = 48;
    let mut native = vec![E::default(); n];
    gather_strided(LAUNCH, &x, xs, &idx, is, &mut native, shape, 1, n).unwrap();
    let got = host(
        &gather_strided::KERNEL,
        E::DTYPE,
        LAUNCH,
        &[
            HostArg::Buf(bytes(&x)),
            HostArg::Strides(xs),
            HostArg::Buf(bytes(&idx)),
            HostArg::Strides(is),
            HostArg::Buf(bytes(&vec![E::default(); n])),
            HostArg::Shape(shape),
            HostArg::I(1),
            HostArg::I(n as u64),
        ],
    )?;
    assert_eq!(got[2], bytes(&native), "gather {:?}", E::DTYPE);

    // scatter into a dense [4, 5, 3] along 1 from an index [3, 7, 2] with repeats.
    let dst: Vec<E> = (0..60u64).map(|v| conv(v % 11)).collect();
    let os = strides(0, &[15, 3, 1]);
    let idx: Vec<i64> = (0..42).map(|i| (i * 3 % 5) as i64).collect();
    let is = strides(0, &[1, 6, 3]);
    let src: Vec<E> = (0..130u64).map(|v| conv(v * 13 % 17)).collect();
    let ss = strides(1, &[40, 5, 2]);
    let shape = KernelShape::new(&[3, 7, 2]).unwrap();
    let lines = 6;
    let mut native = dst.clone();
    scatter_lines(LAUNCH, &mut native, os, &idx, is, &src, ss, shape, 1, lines).unwrap();
    let got = host(
        &scatter_lines::KERNEL,
        E::DTYPE,
        LAUNCH,
        &[
            HostArg::Buf(bytes(&dst)),
            HostArg::Strides(os),
            HostArg::Buf(bytes(&idx)),
            HostArg::Strides(is),
            HostArg::Buf(bytes(&src)),
            HostArg::Strides(ss),
            HostArg::Shape(shape),
            HostArg::I(1),
            HostArg::I(lines as u64),
        ],
    )?;
    assert_eq!(got[0], bytes(&native), "scatter {:?}", E::DTYPE);

    // concat: a transposed [2, 3, 3] part into slot 2.. of a [2, 5, 3] output.
    let part: Vec<E> = (0..18u64).map(&conv).collect();
    let ps = strides(0, &[1, 2, 6]);
    let shape = KernelShape::new(&[2, 3, 3]).unwrap();
    let out0: Vec<E> = (0..30u64).map(|v| conv(v + 40)).collect();
    let mut native = out0.clone();
    concat_into(LAUNCH, &part, ps, &mut native, shape, 1, 2, 5, 18).unwrap();
    let got = host(
        &concat_into::KERNEL,
        E::DTYPE,
        LAUNCH,
        &[
            HostArg::Buf(bytes(&part)),
            HostArg::Strides(ps),
            HostArg::Buf(bytes(&out0)),
            HostArg::Shape(shape),
            HostArg::I(1),
            HostArg::I(2),
            HostArg::I(5),
            HostArg::I(18),
        ],
    )?;
    assert_eq!(got[1], bytes(&native), "concat {:?}", E::DTYPE);

    // triangle of a batch of two transposed 3 x 4 matrices.
    let xs = strides(0, &[12, 1, 3]);
    let shape = KernelShape::new(&[2, 3, 4]).unwrap();
    for (k, upper) in [(-1i64, 0u32), (2, 1), (0, 0)] {
        let mut native = vec![E::default(); 24];
        triangle(LAUNCH, &x, xs, &mut native, shape, k, upper, 24).unwrap();
        let got = host(
            &triangle::KERNEL,
            E::DTYPE,
            LAUNCH,
            &[
                HostArg::Buf(bytes(&x)),
                HostArg::Strides(xs),
                HostArg::Buf(bytes(&[E::default(); 24])),
                HostArg::Shape(shape),
                HostArg::I(k as u64),
                HostArg::I(upper as u64),
                HostArg::I(24),
            ],
        )?;
        assert_eq!(got[1], bytes(&native), "triangle {:?} k {k}", E::DTYPE);
    }
    Some(())
}

fn scatter_add<E: Num>(conv: impl Fn(u64) -> E) -> Option<()> {
    let dst: Vec<E> = (0..60u64).map(|v| conv(v % 11)).collect();
    let os = strides(0, &[15, 3, 1]);
    let idx: Vec<i64> = (0..42).map(|i| (i * 3 % 5) as i64).collect();
    let is = strides(0, &[1, 6, 3]);
    let src: Vec<E> = (0..130u64).map(|v| conv(v * 13 % 17)).collect();
    let ss = strides(1, &[40, 5, 2]);
    let shape = KernelShape::new(&[3, 7, 2]).unwrap();
    let mut native = dst.clone();
    scatter_add_lines(
        LAUNCH,
        &mut native,
        os,
        &idx,
        is,
        &src,
        ss,
        shape,
        1,
        6,
        5,
        3,
    )
    .unwrap();
    let got = host(
        &scatter_add_lines::KERNEL,
        E::DTYPE,
        LAUNCH,
        &[
            HostArg::Buf(bytes(&dst)),
            HostArg::Strides(os),
            HostArg::Buf(bytes(&idx)),
            HostArg::Strides(is),
            HostArg::Buf(bytes(&src)),
            HostArg::Strides(ss),
            HostArg::Shape(shape),
            HostArg::I(1),
            HostArg::I(6),
            HostArg::I(5),
            HostArg::I(3),
        ],
    )?;
    assert_eq!(got[0], bytes(&native), "scatter_add {:?}", E::DTYPE);
    Some(())
}

#[test]
fn data_movement_kernels_run_the_same_on_the_host() {
    let ran = movement(|v| v as f32 * 0.5 - 3.0)
        .and(movement(|v| f16::from_f64(v as f64 / 7.0)))
        .and(movement(|v| v as i64 - 9))
        .and(movement(|v| v as u8))
        .and(movement(|v| v % 3 == 1))
        .and(scatter_add(|v| 1.0f32 / (1.0 + v as f32) + v as f32 * 1e3))
        .and(scatter_add(|v| bf16::from_f64(v as f64 * 0.37)))
        .and(scatter_add(|v| (v * 1_000_000_007) as i32))
        .and(scatter_add(|v| (v * 37) as u8));
    let _ = ran;
}

/// Special values of every element type, as f64 (each rounds to itself in its type or is
/// clamped by the cast under test).
const SPECIAL: [f64; 16] = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    2.5,
    -2.5,
    255.0,
    256.7,
    -129.9,
    65504.0,
    1e10,
    -3e9,
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    9.5e18,
];

fn elementwise_entry(
    k: &'static KernelSource,
    from: DType,
    to: DType,
    v: Variant,
) -> &'static rtx_kernels::kernel::KernelEntry {
    k.entry_to(from, to, v)
        .unwrap_or_else(|| panic!("{} has no {from:?} -> {to:?} {v:?} entry", k.name))
}

fn cast_to<S: Element, D: Element>(xs: &[S]) -> Option<()> {
    let mut native = vec![D::default(); xs.len()];
    cast::map(xs, &mut native).unwrap();
    let e = elementwise_entry(&cast::KERNEL, S::DTYPE, D::DTYPE, Variant::Contiguous);
    let got = run(
        &cast::KERNEL,
        e,
        LAUNCH,
        &[
            HostArg::Buf(bytes(xs)),
            HostArg::Buf(bytes(&native)),
            HostArg::I(xs.len() as u64),
        ],
    )?;
    assert_eq!(
        got[1],
        bytes(&native),
        "cast {:?} -> {:?}",
        S::DTYPE,
        D::DTYPE
    );
    // The native kernel is `Element::cast`.
    let want: Vec<D> = xs.iter().map(|x| x.cast::<D>()).collect();
    assert_eq!(
        bytes(&native),
        bytes(&want),
        "native cast {:?} -> {:?}",
        S::DTYPE,
        D::DTYPE
    );
    Some(())
}

fn cast_from<S: Element>() -> Option<()> {
    let xs: Vec<S> = SPECIAL.iter().map(|&v| S::from_f64(v)).collect();
    cast_to::<S, f32>(&xs)?;
    cast_to::<S, f64>(&xs)?;
    cast_to::<S, f16>(&xs)?;
    cast_to::<S, bf16>(&xs)?;
    cast_to::<S, i32>(&xs)?;
    cast_to::<S, i64>(&xs)?;
    cast_to::<S, u8>(&xs)?;
    cast_to::<S, bool>(&xs)
}

#[test]
fn casts_between_every_pair_of_types_run_the_same_on_the_host() {
    // f64 values that round differently to bf16 through f32 and straight from f64, and
    // integers past 2^53 and 2^24.
    let wide = [
        1.0 + 2f64.powi(-8) + 2f64.powi(-40),
        3.0000001,
        (1u64 << 54) as f64 + 2.0,
    ];
    let _ = cast_to::<f64, bf16>(&wide)
        .and(cast_to::<i64, f32>(&[
            (1 << 40) + 1,
            i64::MAX,
            i64::MIN,
            (1 << 25) - 1,
        ]))
        .and(cast_to::<i64, bf16>(&[(1 << 40) + 1, 1 << 62, -257]))
        .and(cast_from::<f32>())
        .and(cast_from::<f64>())
        .and(cast_from::<f16>())
        .and(cast_from::<bf16>())
        .and(cast_from::<i32>())
        .and(cast_from::<i64>())
        .and(cast_from::<u8>())
        .and(cast_from::<bool>());
}

/// A native two-input slice map (`add::map::<E>` and the like).
type BinaryMap<E, O> = fn(&[E], &[E], &mut [O]) -> Result<(), rtx_kernels::kernel::LaunchError>;

/// A two-input elementwise kernel over `E` on the host (contiguous and strided entries)
/// against its native map.
fn binary_host<E: Element, O: Element>(
    k: &'static KernelSource,
    a: &[E],
    b: &[E],
    native: BinaryMap<E, O>,
) -> Option<()> {
    let n = a.len();
    let mut want = vec![O::default(); n];
    native(a, b, &mut want).unwrap();
    let e = elementwise_entry(k, E::DTYPE, O::DTYPE, Variant::Contiguous);
    let got = run(
        k,
        e,
        LAUNCH,
        &[
            HostArg::Buf(bytes(a)),
            HostArg::Buf(bytes(b)),
            HostArg::Buf(bytes(&want)),
            HostArg::I(n as u64),
        ],
    )?;
    assert_eq!(got[2], bytes(&want), "{} {:?} contiguous", k.name, E::DTYPE);
    // Strided: `b` read backwards through a negative-free layout (reversed copy, stride 1).
    let shape = KernelShape::new(&[n]).unwrap();
    let st = KernelStrides::new(0, &[1]).unwrap();
    let e = elementwise_entry(k, E::DTYPE, O::DTYPE, Variant::Strided);
    let got = run(
        k,
        e,
        LAUNCH,
        &[
            HostArg::Buf(bytes(a)),
            HostArg::Strides(st),
            HostArg::Buf(bytes(b)),
            HostArg::Strides(st),
            HostArg::Buf(bytes(&want)),
            HostArg::Shape(shape),
            HostArg::I(n as u64),
        ],
    )?;
    assert_eq!(got[2], bytes(&want), "{} {:?} strided", k.name, E::DTYPE);
    Some(())
}

fn integer_arithmetic<E: Num>(a: &[E], b: &[E]) -> Option<()> {
    binary_host(&add::KERNEL, a, b, add::map::<E>)?;
    binary_host(&sub::KERNEL, a, b, sub::map::<E>)?;
    binary_host(&mul::KERNEL, a, b, mul::map::<E>)?;
    binary_host(&div::KERNEL, a, b, div::map::<E>)?;
    binary_host(&maximum::KERNEL, a, b, maximum::map::<E>)?;
    binary_host(&minimum::KERNEL, a, b, minimum::map::<E>)?;
    binary_host(&lt::KERNEL, a, b, lt::map::<E>)?;
    binary_host(&eq::KERNEL, a, b, eq::map::<E>)
}

#[test]
fn integer_elementwise_kernels_run_the_same_on_the_host() {
    // Overflow, division by zero and MIN / -1, on the vector path and its scalar tail.
    let a32 = [
        i32::MAX,
        i32::MIN,
        -7,
        7,
        0,
        123_456,
        i32::MIN,
        5,
        -1,
        3,
        9,
        1 << 30,
        -2,
        4,
        8,
        100,
        77,
    ];
    let b32 = [
        1,
        -1,
        2,
        -2,
        0,
        0,
        -1,
        5,
        0,
        -3,
        4,
        4,
        i32::MAX,
        3,
        -8,
        7,
        0,
    ];
    let a64: Vec<i64> = a32.iter().map(|&v| (v as i64) << 32 | 5).collect();
    let mut b64: Vec<i64> = b32.iter().map(|&v| v as i64).collect();
    b64[6] = -1;
    let a8: Vec<u8> = a32.iter().map(|&v| v as u8).collect();
    let b8: Vec<u8> = b32.iter().map(|&v| v as u8).collect();
    let bools: Vec<bool> = a32.iter().map(|&v| v > 0).collect();
    let bools2: Vec<bool> = b32.iter().map(|&v| v >= 0).collect();
    let mut a64_min = a64.clone();
    a64_min[6] = i64::MIN;
    let _ = integer_arithmetic(&a32, &b32)
        .and(integer_arithmetic(&a64_min, &b64))
        .and(integer_arithmetic(&a8, &b8))
        .and(binary_host(&le::KERNEL, &bools, &bools2, le::map::<bool>))
        .and(binary_host(&ne::KERNEL, &bools, &bools2, ne::map::<bool>))
        .and(unary_host(&neg::KERNEL, &a32, neg::map::<i32>))
        .and(unary_host(&abs::KERNEL, &a64_min, abs::map::<i64>))
        .and(unary_host(&copy::KERNEL, &bools, copy::map::<bool>));
}

fn unary_host<E: Element>(
    k: &'static KernelSource,
    a: &[E],
    native: fn(&[E], &mut [E]) -> Result<(), rtx_kernels::kernel::LaunchError>,
) -> Option<()> {
    let mut want = vec![E::default(); a.len()];
    native(a, &mut want).unwrap();
    let e = elementwise_entry(k, E::DTYPE, E::DTYPE, Variant::Contiguous);
    let got = run(
        k,
        e,
        LAUNCH,
        &[
            HostArg::Buf(bytes(a)),
            HostArg::Buf(bytes(&want)),
            HostArg::I(a.len() as u64),
        ],
    )?;
    assert_eq!(got[1], bytes(&want), "{} {:?}", k.name, E::DTYPE);
    Some(())
}
