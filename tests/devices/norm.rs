//! Layer norm and RMS norm on every device, forward and backward (gradients of `Σ y * r` for
//! the input, the weight and the bias), with rows that do not fill a warp, rows a warp holds
//! (the warp-per-row kernels, up to 1024 values), rows wider than that (a block per row),
//! rows longer than a block holds in registers, and a non-contiguous input. On a GPU
//! the layers run the fused kernels; on the CPU they run their composition of primitive ops,
//! which is what the fused kernels are held to.
//!
//! The fused kernels compute f16 and bf16 in f32 and round once (as PyTorch's do), while the
//! composition in f16 rounds after every op; so for those two types the CPU reference is the
//! composition run in f32 on the same values, rounded to the type.

use super::*;

/// Outputs of both norms on `rows x D` values in `F`, each rounded to `E`.
fn norm_outputs<const D: usize, F: Float, E: Float>(
    dev: Device,
    rows: usize,
    (x, r, w, b): (&[E], &[E], &[E], &[E]),
) -> Outputs {
    let cast = |v: &[E]| {
        v.iter()
            .map(|a| F::from_f64(a.to_f64()))
            .collect::<Vec<F>>()
    };
    let round =
        |v: Vec<f64>| -> Vec<f64> { v.into_iter().map(|a| E::from_f64(a).to_f64()).collect() };
    // Stored as [D, rows] and viewed transposed.
    let xt: Tensor<(Const<D>, usize), F> = Tensor::from_vec(cast(x), (Const, rows), dev);
    let x = xt.t().requires_grad();
    let r: Tensor<(usize, Const<D>), F> = Tensor::from_vec(cast(r), (rows, Const), dev);
    let weight: Tensor<(Const<D>,), F> = Tensor::from_vec(cast(w), (Const,), dev).requires_grad();
    let bias: Tensor<(Const<D>,), F> = Tensor::from_vec(cast(b), (Const,), dev).requires_grad();
    let ln = LayerNorm {
        weight: weight.clone(),
        bias: bias.clone(),
        eps: 1e-5,
    };
    let rms = RMSNorm {
        weight: weight.clone(),
        eps: Some(1e-6),
    };
    let mut out = Outputs::new();
    for (name, y) in [
        ("layer_norm", ln.forward(&x)),
        ("rms_norm", rms.forward(&x)),
    ] {
        let g = (&y * &r).sum_all().backward();
        let grad = |t: Option<Tensor<(usize, Const<D>), F>>| t.map(|t| round(f64s(&t)));
        out.push((format!("{name} D={D}"), round(f64s(&y))));
        let dx = grad(g.get(&x)).unwrap_or_else(|| panic!("{name}: no dx"));
        out.push((format!("{name} D={D} dx"), dx));
        let dw = g.get(&weight).map(|t| round(f64s(&t)));
        out.push((format!("{name} D={D} dweight"), dw.unwrap_or_default()));
        if name == "layer_norm" {
            let db = g.get(&bias).map(|t| round(f64s(&t)));
            out.push((format!("{name} D={D} dbias"), db.unwrap_or_default()));
        }
    }
    out
}

fn norm_rows_of<const D: usize, E: Float>(dev: Device, rows: usize, seed: u64) -> Outputs {
    // An offset mean: centering must not lose it.
    let x = values::<E>(rows * D, seed, 1.0, 3.0);
    let r = values::<E>(rows * D, seed + 1, -1.0, 1.0);
    norm_inputs_of::<D, E>(dev, rows, seed, x, r)
}

/// [`norm_rows_of`] for many rows: the outputs and input gradients on its random inputs, and
/// the weight's and bias's gradients (sums over all the rows) on inputs that make those sums
/// well conditioned. Each column keeps its place in every row (a per-column level plus small
/// noise), so a column's normalized values share a sign down the rows, and the output
/// gradient `r` is positive: the sums have no cancellation, and the f32 tolerance measures the
/// kernels rather than the summation order (with signed terms, two correct orders of 150 f32
/// terms can differ by more). Those inputs are not used for the input gradient, whose
/// per-row sums they make cancel instead.
fn norm_many_rows_of<const D: usize, E: Float>(dev: Device, rows: usize, seed: u64) -> Outputs {
    let per_row = |name: &str| !(name.ends_with("dweight") || name.ends_with("dbias"));
    let mut out = norm_rows_of::<D, E>(dev, rows, seed);
    out.retain(|(name, _)| per_row(name));
    let level = values::<E>(D, seed, 1.0, 3.0);
    let noise = values::<E>(rows * D, seed + 4, -0.05, 0.05);
    // `x` is stored as [D, rows] (see `norm_outputs`): column `i / rows`.
    let x = (0..rows * D)
        .map(|i| E::from_f64(level[i / rows].to_f64() + noise[i].to_f64()))
        .collect();
    let r = values::<E>(rows * D, seed + 1, 0.5, 1.5);
    let mut sums = norm_inputs_of::<D, E>(dev, rows, seed, x, r);
    sums.retain(|(name, _)| !per_row(name));
    out.extend(sums);
    out
}

fn norm_inputs_of<const D: usize, E: Float>(
    dev: Device,
    rows: usize,
    seed: u64,
    x: Vec<E>,
    r: Vec<E>,
) -> Outputs {
    let w = values::<E>(D, seed + 2, 0.5, 1.5);
    let b = values::<E>(D, seed + 3, -0.5, 0.5);
    let half = matches!(E::DTYPE, DType::F16 | DType::BF16);
    if dev == Device::Cpu && half {
        norm_outputs::<D, f32, E>(dev, rows, (&x, &r, &w, &b))
    } else {
        norm_outputs::<D, E, E>(dev, rows, (&x, &r, &w, &b))
    }
}

fn norm_case<E: Float>() {
    on_every_device::<E>("norm", |dev| {
        // Rows of at most 1024 take a warp each (four a block), longer ones a block each.
        let mut out = norm_rows_of::<20, E>(dev, 9, 30);
        // GPT's width; 150 rows: a partly filled last block of warps, and parameter
        // gradients over chunks of 64 rows (batches of 16) with a shorter last one.
        out.extend(norm_many_rows_of::<512, E>(dev, 150, 35));
        out.extend(norm_rows_of::<1000, E>(dev, 5, 40));
        // The longest row a warp holds in registers (32 values a lane).
        out.extend(norm_rows_of::<1024, E>(dev, 3, 45));
        out.extend(norm_rows_of::<2500, E>(dev, 3, 50));
        // Longer than a block holds in registers (256 threads of 32 values): read in chunks.
        out.extend(norm_rows_of::<8229, E>(dev, 2, 60));
        out
    });
}

#[test]
fn layer_norm_and_rms_norm_match_the_composition() {
    every_float!(norm_case);
}
