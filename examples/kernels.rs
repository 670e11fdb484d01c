//! Writing kernels in Rust: an elementwise kernel and the gradient `#[kernel]` derives for it,
//! a reduction, and a SIMT kernel with shared memory, each run on the CPU and, when
//! `Device::best()` finds a GPU, on the GPU too; the two results must agree. The book's
//! "Writing kernels in Rust" chapter shows this file.
//!
//! Run with `cargo run --release --example kernels` (`--release` is optional: the tensors
//! are small).

use rtx::kernel::{Arg, LaunchConfig};
use rtx::prelude::*;

// ANCHOR: elementwise
/// `gelu_tanh(a * x + b)`: a scale, a shift and GELU's tanh form in one pass over memory.
#[rtx::kernel(elementwise)]
pub fn gelu_affine<T: Float>(x: T, #[uniform] a: T, #[uniform] b: T) -> T {
    let z = a * x + b;
    let inner = 0.7978845608028654 * (z + 0.044715 * z * z * z);
    0.5 * z * (1.0 + inner.tanh())
}
// ANCHOR_END: elementwise

// ANCHOR: call
/// `gelu_affine` again, as a call of rtx's own `gelu_tanh` kernel: the formula stays in one
/// place, and the derivative `#[kernel]` derives goes through the call into `gelu_tanh`'s.
#[rtx::kernel(elementwise)]
pub fn gelu_affine_call<T: Float>(x: T, #[uniform] a: T, #[uniform] b: T) -> T {
    rtx::kernels::gelu_tanh(a * x + b)
}
// ANCHOR_END: call

// ANCHOR: reduce
/// The root mean square along an axis: `sqrt(mean(x²))`.
#[rtx::kernel(reduce(identity = 0.0, map = |x| x * x, finish = |acc, n| (acc / n).sqrt()))]
pub fn rms<T: Float>(acc: T, x: T) -> T {
    acc + x
}
// ANCHOR_END: reduce

// ANCHOR: simt
/// Transposes a `rows x cols` row-major matrix into `out` (`cols x rows`) through 32 x 32
/// tiles in shared memory, so that a warp both reads and writes 32 neighbouring elements.
/// Launch one block of 32 x 8 threads per tile: each thread moves 4 elements.
#[rtx::kernel]
pub fn transpose<T: Float>(x: &[T], out: &mut [T], rows: usize, cols: usize) {
    // 32 rows of 33: the spare column puts the elements of a tile column in different banks.
    #[shared]
    let tile: [T; 1056];
    let col0 = block_idx_x() * 32;
    let row0 = block_idx_y() * 32;
    let tx = thread_idx_x();
    let ty = thread_idx_y();
    for k in (0..32).step_by(8) {
        let r = row0 + ty + k;
        let c = col0 + tx;
        if r < rows && c < cols {
            tile[(ty + k) * 33 + tx] = x[r * cols + c];
        }
    }
    sync_threads();
    for k in (0..32).step_by(8) {
        let r = col0 + ty + k;
        let c = row0 + tx;
        if r < cols && c < rows {
            out[r * rows + c] = tile[tx * 33 + ty + k];
        }
    }
}
// ANCHOR_END: simt

/// A matrix of 40 x 72 values in [-2, 2): not a multiple of the 32 x 32 tile either way.
type Matrix = Rank2<40, 72>;

/// Reproducible values in [-2, 2).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            let r = (s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as f32 / (1u64 << 24) as f32;
            4.0 * r - 2.0
        })
        .collect()
}

/// Named results of one device, to compare across devices.
type Results = Vec<(&'static str, Vec<f32>)>;

fn missing(what: &str) -> rtx::Error {
    rtx::Error::BadArgument {
        op: "kernels example",
        msg: format!("{what} is missing"),
    }
}

/// The elementwise kernel, forward and backward, beside the same math from built-in ops.
fn elementwise(device: Device, out: &mut Results) -> rtx::Result<()> {
    let data = values(40 * 72, 1);
    // ANCHOR: map
    let x: Tensor<Matrix> = Tensor::from_vec(data, (Const, Const), device).requires_grad();
    let y = x.map(gelu_affine::Op, &[1.5, -0.25]); // a = 1.5, b = -0.25
    let grads = y.sum_all().backward(); // through `gelu_affine_grad_x`, derived by #[kernel]
    let dx = grads.get(&x).ok_or_else(|| missing("the gradient of x"))?;
    // ANCHOR_END: map

    // ANCHOR: builtin
    let x2 = x.detach().requires_grad();
    let y2 = (&x2 * 1.5 - 0.25).gelu_tanh(); // three kernels instead of one
    let dx2 = y2
        .sum_all()
        .backward()
        .get(&x2)
        .ok_or_else(|| missing("dx2"))?;
    // ANCHOR_END: builtin
    check("gelu_affine vs built-in ops", &y.to_vec(), &y2.to_vec())?;
    check("its gradient vs built-in ops", &dx.to_vec(), &dx2.to_vec())?;

    let x3 = x.detach().requires_grad();
    let y3 = x3.map(gelu_affine_call::Op, &[1.5, -0.25]);
    let dx3 = y3
        .sum_all()
        .backward()
        .get(&x3)
        .ok_or_else(|| missing("dx3"))?;
    check("gelu_affine through a call", &y3.to_vec(), &y.to_vec())?;
    check("its gradient through a call", &dx3.to_vec(), &dx.to_vec())?;
    out.push(("gelu_affine", y.to_vec()));
    out.push(("d gelu_affine / dx", dx.to_vec()));
    Ok(())
}

/// The reduce kernel along both axes, beside the built-in mean and square root.
fn reduction(device: Device, out: &mut Results) -> rtx::Result<()> {
    let m: Tensor<Matrix> = Tensor::from_vec(values(40 * 72, 2), (Const, Const), device);
    // ANCHOR: reduce_with
    let rows: Tensor<Rank1<40>> = m.reduce_with::<1>(rms::Op);
    let cols: Tensor<Rank1<72>> = m.t().reduce_with::<1>(rms::Op); // a strided view works too
    // ANCHOR_END: reduce_with
    let squares = &m * &m;
    check(
        "rms of rows vs built-in ops",
        &rows.to_vec(),
        &squares.mean::<1>().sqrt().to_vec(),
    )?;
    check(
        "rms of columns vs built-in ops",
        &cols.to_vec(),
        &squares.mean::<0>().sqrt().to_vec(),
    )?;
    out.push(("rms of rows", rows.to_vec()));
    out.push(("rms of columns", cols.to_vec()));
    Ok(())
}

/// The SIMT transpose, beside a built-in transposed copy.
fn simt(device: Device, out: &mut Results) -> rtx::Result<()> {
    let m: Tensor<Matrix> = Tensor::from_vec(values(40 * 72, 3), (Const, Const), device);
    // ANCHOR: launch
    let (rows, cols) = (40, 72);
    let mut t: Tensor<Rank2<72, 40>> = Tensor::zeros((Const, Const), device);
    let tiles = ((cols as u32).div_ceil(32), (rows as u32).div_ceil(32));
    let config = LaunchConfig::new(tiles, (32, 8));
    let mut args = [
        Arg::input(&m),
        Arg::output(&mut t),
        Arg::usize(rows),
        Arg::usize(cols),
    ];
    // SAFETY: every index the kernel touches is checked against `rows` and `cols`, the sizes
    // of both tensors (and the CPU run checks every access).
    unsafe { rtx::kernel::launch(transpose::Op, config, &mut args)? };
    // ANCHOR_END: launch
    check(
        "transpose vs a transposed copy",
        &t.to_vec(),
        &m.t().contiguous().to_vec(),
    )?;
    out.push(("transpose", t.to_vec()));
    Ok(())
}

/// Fails unless `got` and `want` agree to f32 rounding: within 1e-4 relative, or 1e-5 absolute
/// near zero (the GPU's tanh and fused multiply-adds round differently from the CPU's, and a
/// few rounding steps differ between one kernel and three).
fn check(what: &str, got: &[f32], want: &[f32]) -> rtx::Result<()> {
    let worst = got
        .iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs() / (0.1 + w.abs()))
        .fold(0.0f32, f32::max);
    if got.len() != want.len() || worst.is_nan() || worst > 1e-4 {
        return Err(rtx::Error::BadArgument {
            op: "kernels example",
            msg: format!(
                "{what}: results differ (relative error {worst:e}, {} vs {} elements)",
                got.len(),
                want.len()
            ),
        });
    }
    Ok(())
}

fn run(device: Device) -> rtx::Result<Results> {
    let mut out = Results::new();
    elementwise(device, &mut out)?;
    reduction(device, &mut out)?;
    simt(device, &mut out)?;
    Ok(out)
}

fn main() -> rtx::Result<()> {
    // The derived derivative is a plain function too: d/dx gelu_tanh(1.5 x - 0.25) at x = 0.5.
    println!(
        "gelu_affine(0.5) = {:.6}, its derivative there = {:.6}",
        gelu_affine(0.5f32, 1.5, -0.25),
        gelu_affine_grad_x(0.5f32, 1.5, -0.25, 1.0)
    );
    let cpu = run(Device::Cpu)?;
    let gpu = match Device::best() {
        Device::Cpu => None,
        d => Some((d, run(d)?)),
    };
    for (i, (name, c)) in cpu.iter().enumerate() {
        let head = |v: &[f32]| -> String {
            let shown: Vec<String> = v.iter().take(4).map(|x| format!("{x:.5}")).collect();
            format!("[{}, ...] ({} values)", shown.join(", "), v.len())
        };
        println!("{name}:\n  cpu:     {}", head(c));
        if let Some((d, g)) = &gpu {
            let (_, gv) = &g[i];
            println!("  {d}: {}", head(gv));
            check(&format!("{name} on {d} vs the CPU"), gv, c)?;
        }
    }
    match gpu {
        Some((d, _)) => println!("every result on {d} agrees with the CPU"),
        None => println!("no GPU found: the kernels ran on the CPU only"),
    }
    Ok(())
}
