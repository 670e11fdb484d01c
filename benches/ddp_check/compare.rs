//! The equivalence verdict: two result files of `train::save` (a run on one device and one on
//! `W` ranks) compared parameter by parameter and loss by loss.
//!
//! The measure is the largest absolute difference over all parameters relative to the largest
//! absolute parameter (and likewise for the per-step losses), so one figure covers a model
//! whatever its scale. The two runs compute the same sums in a different order (a rank sums its
//! `G / W` rows, then the ranks' means are averaged, against one sum over `G` rows), so they
//! differ by f32 rounding, which the steps carry forward, and Adam magnifies where a gradient
//! is near zero (its update divides by the gradient's running scale).
//!
//! Measured on the CPU (small sizes, 50 steps, seeds 0-2, 2 and 4 ranks against 1): rounding
//! alone gave at most 4e-5 with Adam (MLP; GPT 1.1e-5) and 2e-7 with SGD; deliberate bugs gave
//! 2.5e-2 to 1e-1 (one rank a batch behind) and, for gradients summed over the ranks instead of
//! averaged, 0.48 with SGD but only 6.7e-4 with Adam, which divides the scale away: SGD is the
//! run that sees a wrongly scaled gradient. The tolerances sit between: 1e-3 for Adam and 1e-4
//! for SGD, leaving room for a GPU's other summation orders.

use rtx::io::Checkpoint;
use rtx::prelude::*;
use std::path::Path;

/// The settings both runs must share for a comparison to mean anything.
const SAME: [&str; 7] = [
    "model",
    "optim",
    "size",
    "steps",
    "global_batch",
    "batches_per_epoch",
    "seed",
];

/// The default tolerance of the relative parameter and loss differences (see the module
/// docs for the measurements behind it).
pub fn default_tolerance(optim: &str) -> f64 {
    match optim {
        "sgd" => 1e-4,
        _ => 1e-3,
    }
}

/// How far the two runs are apart, and whether that is within the tolerance.
#[derive(Debug)]
pub struct Verdict {
    /// The model both runs trained.
    pub model: String,
    /// Their optimizer (`adam` or `sgd`).
    pub optim: String,
    /// The reference's world size and the other's.
    pub worlds: (usize, usize),
    /// Steps each trained.
    pub steps: usize,
    /// max |Δ parameter| / max |parameter of the reference|.
    pub rel_params: f64,
    /// max |Δ parameter|.
    pub max_abs_diff: f64,
    /// max |parameter of the reference|.
    pub max_abs_param: f64,
    /// The tensor with the largest difference relative to its own largest value, and that.
    pub worst_tensor: (String, f64),
    /// max |Δ loss| / max |loss of the reference|, over the steps.
    pub rel_losses: f64,
    /// The reference's loss at the first step.
    pub first_loss: f64,
    /// The reference's loss at the last step.
    pub last_loss: f64,
    /// Whether the parameters are equal bit for bit.
    pub identical: bool,
    /// Whether the ranks of each run ended equal (recorded by the runs).
    pub ranks_agree: bool,
    /// The largest relative difference allowed, for parameters and losses alike.
    pub tolerance: f64,
}

impl Verdict {
    /// Within the tolerance, with equal ranks, and trained (the loss fell: a run that never
    /// updated its parameters would otherwise match another such run).
    pub fn pass(&self) -> bool {
        self.rel_params <= self.tolerance
            && self.rel_losses <= self.tolerance
            && self.ranks_agree
            && self.last_loss < self.first_loss
    }

    /// One line for people.
    pub fn summary(&self) -> String {
        format!(
            "{} with {}: {} vs {} rank(s), {} steps: max |dparam| / max |param| = {:.3e} ({:.3e} / \
             {:.3e}; worst tensor {} at {:.3e} of its own max), max |dloss| / max |loss| = \
             {:.3e}, loss {:.4} -> {:.4}, identical bits: {}, ranks agree: {}; tolerance \
             {:.0e}: {}",
            self.model,
            self.optim,
            self.worlds.0,
            self.worlds.1,
            self.steps,
            self.rel_params,
            self.max_abs_diff,
            self.max_abs_param,
            self.worst_tensor.0,
            self.worst_tensor.1,
            self.rel_losses,
            self.first_loss,
            self.last_loss,
            self.identical,
            self.ranks_agree,
            self.tolerance,
            if self.pass() { "PASS" } else { "FAIL" }
        )
    }

    /// The verdict as JSON, for the driver.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "model": self.model,
            "optim": self.optim,
            "reference_world_size": self.worlds.0,
            "world_size": self.worlds.1,
            "steps": self.steps,
            "rel_params": self.rel_params,
            "max_abs_diff": self.max_abs_diff,
            "max_abs_param": self.max_abs_param,
            "worst_tensor": self.worst_tensor.0,
            "worst_tensor_rel": self.worst_tensor.1,
            "rel_losses": self.rel_losses,
            "first_loss": self.first_loss,
            "last_loss": self.last_loss,
            "identical": self.identical,
            "ranks_agree": self.ranks_agree,
            "tolerance": self.tolerance,
            "pass": self.pass(),
        })
    }
}

/// A comparison that cannot be made: the files disagree on what they are.
fn mismatch(msg: String) -> rtx::Error {
    rtx::Error::BadArgument { op: "compare", msg }
}

/// Any tensor of the file as f64 values, whatever its rank (up to 4 dims).
fn values(ck: &Checkpoint, name: &str) -> rtx::Result<Vec<f64>> {
    let dev = Device::Cpu;
    Ok(match ck.dims(name).map_or(0, <[usize]>::len) {
        0 => ck.tensor::<(), f64>(name, dev)?.to_vec(),
        1 => ck.tensor::<(usize,), f64>(name, dev)?.to_vec(),
        2 => ck.tensor::<(usize, usize), f64>(name, dev)?.to_vec(),
        3 => ck.tensor::<(usize, usize, usize), f64>(name, dev)?.to_vec(),
        4 => ck
            .tensor::<(usize, usize, usize, usize), f64>(name, dev)?
            .to_vec(),
        n => {
            return Err(mismatch(format!(
                "`{name}` has {n} dims; at most 4 are read"
            )));
        }
    })
}

fn meta<'a>(ck: &'a Checkpoint, key: &str) -> rtx::Result<&'a str> {
    ck.metadata(key).ok_or_else(|| {
        mismatch(format!(
            "{} has no `{key}` metadata: not a ddp_check result",
            ck.path().display()
        ))
    })
}

fn number(ck: &Checkpoint, key: &str) -> rtx::Result<usize> {
    meta(ck, key)?
        .parse()
        .map_err(|_| mismatch(format!("{}: `{key}` is not a number", ck.path().display())))
}

/// Compares `other` against `reference` (usually the one-device run), with `tolerance` or the
/// model's default.
pub fn compare(reference: &Path, other: &Path, tolerance: Option<f64>) -> rtx::Result<Verdict> {
    let (a, b) = (Checkpoint::open(reference)?, Checkpoint::open(other)?);
    for key in SAME {
        let (x, y) = (meta(&a, key)?, meta(&b, key)?);
        if x != y {
            return Err(mismatch(format!(
                "the runs differ in `{key}`: {x} in {} but {y} in {}",
                reference.display(),
                other.display()
            )));
        }
    }
    let names: Vec<&str> = a.names().filter(|n| n.starts_with("model.")).collect();
    let others: Vec<&str> = b.names().filter(|n| n.starts_with("model.")).collect();
    if names != others {
        return Err(mismatch(format!(
            "the runs hold different parameters: {names:?} against {others:?}"
        )));
    }
    let (mut max_abs_diff, mut max_abs_param) = (0.0f64, 0.0f64);
    let mut worst = (String::new(), -1.0);
    let mut identical = true;
    for name in names {
        let (x, y) = (values(&a, name)?, values(&b, name)?);
        if x.len() != y.len() {
            return Err(mismatch(format!(
                "`{name}` has {} values against {}",
                x.len(),
                y.len()
            )));
        }
        let diff = x
            .iter()
            .zip(&y)
            .map(|(p, q)| (p - q).abs())
            .fold(0.0, f64::max);
        let scale = x.iter().map(|p| p.abs()).fold(0.0, f64::max);
        identical &= x.iter().zip(&y).all(|(p, q)| p.to_bits() == q.to_bits());
        let rel = if scale > 0.0 { diff / scale } else { diff };
        if rel > worst.1 {
            worst = (name.trim_start_matches("model.").to_string(), rel);
        }
        max_abs_diff = max_abs_diff.max(diff);
        max_abs_param = max_abs_param.max(scale);
    }
    let (la, lb) = (values(&a, "losses")?, values(&b, "losses")?);
    let loss_diff = la
        .iter()
        .zip(&lb)
        .map(|(p, q)| (p - q).abs())
        .fold(0.0, f64::max);
    let loss_scale = la.iter().map(|p| p.abs()).fold(0.0, f64::max);
    let model = meta(&a, "model")?.to_string();
    let agree = |ck: &Checkpoint| meta(ck, "ranks_agree").map(|v| v == "true");
    Ok(Verdict {
        tolerance: tolerance.unwrap_or(default_tolerance(meta(&a, "optim")?)),
        model,
        optim: meta(&a, "optim")?.to_string(),
        worlds: (number(&a, "world_size")?, number(&b, "world_size")?),
        steps: number(&a, "steps")?,
        rel_params: max_abs_diff / max_abs_param.max(f64::MIN_POSITIVE),
        max_abs_diff,
        max_abs_param,
        worst_tensor: worst,
        rel_losses: loss_diff / loss_scale.max(f64::MIN_POSITIVE),
        first_loss: la.first().copied().unwrap_or(f64::NAN),
        last_loss: la.last().copied().unwrap_or(f64::NAN),
        identical,
        ranks_agree: agree(&a)? && agree(&b)?,
    })
}
