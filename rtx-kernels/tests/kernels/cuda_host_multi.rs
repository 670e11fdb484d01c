//! The generated CUDA C of the multi-tensor kernels (`adam_multi`, `sgd_multi`, `scale_multi`:
//! tables of buffers, threads independent of each other) run on the host (see `host_run`) and
//! held to their native twins bit for bit, in every float type: tensors of mixed sizes (an
//! empty one included) split into several chunks, fewer blocks than chunks, and a gradient
//! broadcast from one value. Scalars are rounded to `T` first, so that the native twins (which
//! take `T`) and the entries (which take the compute type) see the same values. Skipped with a
//! notice where no C++ compiler exists.

use crate::host_run::{HostArg, bytes, from_bytes, run};
use rtx_kernels::kernel::{KernelSource, LaunchConfig, Variant};
use rtx_kernels::kernels::{adam_multi, scale_multi, sgd_multi};
use rtx_kernels::{DType, Float, bf16, f16};

const LENS: [usize; 5] = [1, 33, 2053, 0, 700];
const CHUNK: usize = 512;
const BROADCAST: usize = 4;
const LAUNCH: LaunchConfig = LaunchConfig {
    grid: rtx_kernels::kernel::block::Dim3 { x: 3, y: 1, z: 1 },
    block: rtx_kernels::kernel::block::Dim3 { x: 32, y: 1, z: 1 },
};

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

/// Reproducible values in [lo, hi), one vector per tensor (the broadcast one holds its one
/// value).
fn tensors<E: Float>(seed: u64, lo: f64, hi: f64, broadcast: bool) -> Vec<Vec<E>> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        (s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    };
    LENS.iter()
        .enumerate()
        .map(|(t, &n)| {
            let n = if broadcast && t == BROADCAST { 1 } else { n };
            (0..n)
                .map(|_| E::from_f64(lo + (hi - lo) * next()))
                .collect()
        })
        .collect()
}

fn gsteps() -> Vec<usize> {
    (0..LENS.len()).map(|t| (t != BROADCAST) as usize).collect()
}

fn table<E: Float>(v: &[Vec<E>]) -> HostArg {
    HostArg::Table(v.iter().map(|r| bytes(r)).collect())
}

fn usizes(v: &[usize]) -> HostArg {
    HostArg::Buf(bytes(&v.iter().map(|&x| x as u64).collect::<Vec<_>>()))
}

/// The rows of the table that starts at buffer `at` of a host run's outputs.
fn rows_at<E: Float>(out: &[Vec<u8>], at: usize) -> Vec<Vec<E>> {
    out[at..at + LENS.len()]
        .iter()
        .map(|b| from_bytes(b))
        .collect()
}

fn entry(k: &'static KernelSource, dt: DType) -> &'static rtx_kernels::kernel::KernelEntry {
    k.entry(dt, Variant::Simt)
        .unwrap_or_else(|| panic!("{} has no {dt:?} entry", k.name))
}

/// One Adam step (from non-zero state, AMSGrad on) natively and on the host.
fn adam<E: Float>(decoupled: bool, l2: bool) -> Option<()> {
    let (mut p, g) = (
        tensors::<E>(1, -1.0, 1.0, false),
        tensors::<E>(2, -2.0, 2.0, true),
    );
    let (mut m, mut v) = (
        tensors::<E>(3, -0.5, 0.5, false),
        tensors::<E>(4, 0.0, 0.5, false),
    );
    let mut x = tensors::<E>(5, 0.0, 0.5, false);
    let (p0, m0, v0, x0) = (p.clone(), m.clone(), v.clone(), x.clone());
    let (rows, starts) = chunks();
    let e = |x: f64| E::from_f64(x);
    // decay, l2, w1, beta2, w2, bc2_sqrt, neg_step, eps
    let sc = [
        if decoupled { 0.995 } else { 1.0 },
        if l2 { 0.1 } else { 0.0 },
        0.1,
        0.999,
        0.001,
        (1.0f64 - 0.999f64.powi(3)).sqrt(),
        -0.05 / (1.0 - 0.9f64.powi(3)),
        1e-8,
    ];
    let flags = [decoupled as u32, l2 as u32, 1, 1];
    let mut pm: Vec<&mut [E]> = p.iter_mut().map(|r| &mut r[..]).collect();
    let mut mm: Vec<&mut [E]> = m.iter_mut().map(|r| &mut r[..]).collect();
    let mut vm: Vec<&mut [E]> = v.iter_mut().map(|r| &mut r[..]).collect();
    let mut xm: Vec<&mut [E]> = x.iter_mut().map(|r| &mut r[..]).collect();
    let gr: Vec<&[E]> = g.iter().map(|r| &r[..]).collect();
    adam_multi(
        LAUNCH,
        &mut pm,
        &gr,
        &gsteps(),
        &mut mm,
        &mut vm,
        &mut xm,
        &rows,
        &starts,
        &LENS,
        rows.len(),
        CHUNK,
        e(sc[0]),
        e(sc[1]),
        e(sc[2]),
        e(sc[3]),
        e(sc[4]),
        e(sc[5]),
        e(sc[6]),
        e(sc[7]),
        flags[0],
        flags[1],
        flags[2],
        flags[3],
    )
    .unwrap();
    let mut args = vec![
        table(&p0),
        table(&g),
        usizes(&gsteps()),
        table(&m0),
        table(&v0),
        table(&x0),
        usizes(&rows),
        usizes(&starts),
        usizes(&LENS),
        HostArg::I(rows.len() as u64),
        HostArg::I(CHUNK as u64),
    ];
    args.extend(sc.iter().map(|&s| HostArg::F(e(s).to_f64())));
    args.extend(flags.iter().map(|&f| HostArg::I(f as u64)));
    let k = &adam_multi::KERNEL;
    let out = run(k, entry(k, E::DTYPE), LAUNCH, &args)?;
    let n = LENS.len();
    let what = format!("adam_multi {:?} decoupled {decoupled} l2 {l2}", E::DTYPE);
    assert_eq!(rows_at::<E>(&out, 0), p, "{what}: parameters");
    assert_eq!(rows_at::<E>(&out, 2 * n + 1), m, "{what}: exp_avg");
    assert_eq!(rows_at::<E>(&out, 3 * n + 1), v, "{what}: exp_avg_sq");
    assert_eq!(rows_at::<E>(&out, 4 * n + 1), x, "{what}: max_exp_avg_sq");
    Some(())
}

/// One SGD step (momentum buffers not new) natively and on the host.
fn sgd<E: Float>(nesterov: bool) -> Option<()> {
    let (mut p, g) = (
        tensors::<E>(6, -1.0, 1.0, false),
        tensors::<E>(7, -2.0, 2.0, true),
    );
    let mut b = tensors::<E>(8, -0.5, 0.5, false);
    let (p0, b0) = (p.clone(), b.clone());
    let (rows, starts) = chunks();
    let e = |x: f64| E::from_f64(x);
    // neg_lr, momentum, damp, weight_decay
    let sc = [-0.1, 0.9, if nesterov { 1.0 } else { 0.8 }, 0.01];
    let flags = [1u32, 1, 0, nesterov as u32];
    let mut pm: Vec<&mut [E]> = p.iter_mut().map(|r| &mut r[..]).collect();
    let mut bm: Vec<&mut [E]> = b.iter_mut().map(|r| &mut r[..]).collect();
    let gr: Vec<&[E]> = g.iter().map(|r| &r[..]).collect();
    sgd_multi(
        LAUNCH,
        &mut pm,
        &gr,
        &gsteps(),
        &mut bm,
        &rows,
        &starts,
        &LENS,
        rows.len(),
        CHUNK,
        e(sc[0]),
        e(sc[1]),
        e(sc[2]),
        e(sc[3]),
        flags[0],
        flags[1],
        flags[2],
        flags[3],
    )
    .unwrap();
    let mut args = vec![
        table(&p0),
        table(&g),
        usizes(&gsteps()),
        table(&b0),
        usizes(&rows),
        usizes(&starts),
        usizes(&LENS),
        HostArg::I(rows.len() as u64),
        HostArg::I(CHUNK as u64),
    ];
    args.extend(sc.iter().map(|&s| HostArg::F(e(s).to_f64())));
    args.extend(flags.iter().map(|&f| HostArg::I(f as u64)));
    let k = &sgd_multi::KERNEL;
    let out = run(k, entry(k, E::DTYPE), LAUNCH, &args)?;
    let n = LENS.len();
    let what = format!("sgd_multi {:?} nesterov {nesterov}", E::DTYPE);
    assert_eq!(rows_at::<E>(&out, 0), p, "{what}: parameters");
    assert_eq!(rows_at::<E>(&out, 2 * n + 1), b, "{what}: momentum buffers");
    Some(())
}

/// Clipping's scale (coefficient below 1, and not) natively and on the host.
fn scale<E: Float>(coef: f64) -> Option<()> {
    let g = tensors::<E>(9, -2.0, 2.0, true);
    let mut out: Vec<Vec<E>> = LENS.iter().map(|&n| vec![E::from_f64(0.0); n]).collect();
    let out0 = out.clone();
    let (rows, starts) = chunks();
    let k2 = [0.0, coef];
    let mut om: Vec<&mut [E]> = out.iter_mut().map(|r| &mut r[..]).collect();
    let gr: Vec<&[E]> = g.iter().map(|r| &r[..]).collect();
    scale_multi(
        LAUNCH,
        &gr,
        &gsteps(),
        &mut om,
        &rows,
        &starts,
        &LENS,
        rows.len(),
        CHUNK,
        &k2,
    )
    .unwrap();
    let args = [
        table(&g),
        usizes(&gsteps()),
        table(&out0),
        usizes(&rows),
        usizes(&starts),
        usizes(&LENS),
        HostArg::I(rows.len() as u64),
        HostArg::I(CHUNK as u64),
        HostArg::Buf(bytes(&k2)),
    ];
    let k = &scale_multi::KERNEL;
    let got = run(k, entry(k, E::DTYPE), LAUNCH, &args)?;
    let n = LENS.len();
    assert_eq!(
        rows_at::<E>(&got, n + 1),
        out,
        "scale_multi {:?} coef {coef}",
        E::DTYPE
    );
    Some(())
}

fn all<E: Float>() -> Option<()> {
    adam::<E>(false, true)?;
    adam::<E>(true, false)?;
    sgd::<E>(false)?;
    sgd::<E>(true)?;
    scale::<E>(0.37)?;
    scale::<E>(1.5)
}

#[test]
fn multi_tensor_kernels_run_the_same_on_the_host() {
    let _ = all::<f32>()
        .and_then(|_| all::<f64>())
        .and_then(|_| all::<f16>())
        .and_then(|_| all::<bf16>());
}
