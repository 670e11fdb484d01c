//! The fused attention written with `#[kernel]` (`rtx::kernels::flash_attn_fwd`: FlashAttention-2's
//! loop on mma.sync, online softmax, one log-sum-exp per row; and its backward,
//! `flash_attn_bwd_rowdot`, `flash_attn_bwd_dkdv` and `flash_attn_bwd_dq`) against rtx's unfused
//! composition of the same attention, on one GPU, in `[b, h, t, d]` layout.
//!
//! Sizes: bf16, batch 32 x 8 heads, causal, head dims 64 and 128, sequences 256, 1024 and 4096;
//! f16 at d 128, t 1024; and two bf16 sizes at d 64, t 1024 for the other masks: no mask at all,
//! and causal with key padding (`key_len` t/2 for the odd batch elements, t for the others).
//! `--quick` keeps t 1024 only (causal d 64 and d 128, f16, no mask, padded); `--seq 256`
//! keeps one sequence length and only the causal bf16 rows (d 64 and d 128).
//!
//! Each size is first checked against the composition computed in f32 from the same
//! half-precision inputs: the forward's `o` (largest `|o - ref|` over the largest `|v|`, fail
//! above 2e-2) and `lse` (against the f32 scores' logsumexp, fail above 1e-3); then, for a
//! seeded random upstream gradient `do`, the backward's `dq`, `dk` and `dv` against the
//! gradients rtx's autograd gives the f32 composition for the loss `sum(o * do)` (largest
//! `|g - ref|` over the largest `|ref|`, fail above 2e-2 in bf16, 1e-2 in f16). The reference
//! runs a few batch elements at a time to bound its memory.
//!
//! Then it times, in the inputs' own type: the fused forward (one launch); the fused
//! forward+backward (the forward, then rowdot, dkdv and dq: four launches); the unfused forward;
//! and the unfused forward+backward through rtx's autograd (the forward, `sum(o * do)` and
//! `try_backward`, which also pays the product and sum, a pass over `[b, h, t, d]`). Times are
//! the median per call of `--reps` calls (default 30) queued back to back after 5 warm-ups, each
//! bracketed by CUDA events on rtx's stream, behind a head start of GPU work (products of
//! 4096 x 4096 for about a millisecond a call) so that the host has queued them all before the
//! GPU reaches them: the intervals are GPU time even where a call's host side is the longer. TFLOP/s count as FlashAttention does: a forward is
//! `4 b h t^2 d`, halved for the causal mask (the padded size is counted as unpadded causal);
//! forward+backward is 3.5 times the forward (the backward 2.5 times).
//! `benches/flash_attention_torch.py` times PyTorch on the same sizes.
//!
//! On a GPU of compute capability 9.0, the forward on Hopper's warpgroup products
//! (`flash_attn_fwd_wgmma`, head dims 64 and 128) is timed beside it, alone, followed by the
//! same backward, and followed by the backward on warpgroup products
//! (`flash_attn_bwd_dkdv_wgmma` and `flash_attn_bwd_dq_wgmma`); that last pair is checked the
//! same way.
//!
//! Build with `tools/gpu-build --bench flash_attention`; run as
//! `.gpu/bin/flash_attention [--quick] [--reps 30] [--batch 32] [--heads 8]`. Without a GPU it
//! prints a notice and exits 0; a failed check exits 1 after the table.
//!
//! The kernels are launched through the backend's entry launch (`rtx_backends::cuda::launch_entry`
//! with device pointers of `CudaStorage` buffers holding the rtx tensors' values):
//! `rtx::kernel::launch` takes tensors of one element type and no `&[u32]` buffer or `f64`
//! scalar, and these kernels have f32 `lse` and `delta` beside their half-precision tensors, a
//! `&[u32]` `key_len` and an `f64` scale.

use rtx::kernel::KernelSource;
use rtx::kernels::{
    FlashWgmmaPlan, flash_attn_bwd_dkdv, flash_attn_bwd_dkdv_launch, flash_attn_bwd_dkdv_wgmma,
    flash_attn_bwd_dkdv_wgmma_launch, flash_attn_bwd_dq, flash_attn_bwd_dq_launch,
    flash_attn_bwd_dq_rows, flash_attn_bwd_dq_wgmma, flash_attn_bwd_dq_wgmma_launch,
    flash_attn_bwd_rowdot, flash_attn_bwd_rowdot_launch, flash_attn_dense_strides, flash_attn_fwd,
    flash_attn_fwd_wgmma, flash_attn_launch, flash_attn_wgmma_takes,
};
use rtx::prelude::*;
use rtx_backends::cuda::{self, Arg, CudaStorage, Event, LaunchConfig};
use std::result::Result;

type Heads<E> = Tensor<(usize, usize, usize, usize), E>;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// The command line.
struct Opts {
    quick: bool,
    /// `--seq t`: the causal bf16 rows at this length alone (0: every length).
    seq: usize,
    reps: usize,
    batch: usize,
    heads: usize,
}

fn arg(name: &str, default: usize) -> usize {
    std::env::args()
        .skip_while(|a| a != name)
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn options() -> Opts {
    Opts {
        quick: std::env::args().any(|a| a == "--quick"),
        seq: arg("--seq", 0),
        reps: arg("--reps", 30).max(1),
        batch: arg("--batch", 32).max(1),
        heads: arg("--heads", 8).max(1),
    }
}

/// Queues about `ms` milliseconds of GPU work (bf16 products of 4096 x 4096 through cuBLAS,
/// results dropped) ahead of the timed calls.
///
/// Why: a call's host side (argument packing, the driver's launch) can take longer than a
/// small kernel, and then back-to-back events would time the host. With the GPU busy first,
/// the host queues every timed call before the GPU reaches them, so each interval is GPU time.
fn head_start(ms: f64) -> Result<(), String> {
    let dev = Device::Cuda(0);
    let a: Tensor<(usize, usize), bf16> = Tensor::try_randn((4096, 4096), 7, dev).map_err(err)?;
    // 2 * 4096^3 FLOPs at under 800 TFLOP/s (an H200's dense bf16 peak is about 990).
    let per_product_ms = 2.0 * 4096f64.powi(3) / 800e12 * 1e3;
    for _ in 0..(ms / per_product_ms).ceil() as usize {
        drop(a.try_matmul(&a).map_err(err)?);
    }
    Ok(())
}

/// Median milliseconds per call of `f`: `warmup` calls, then `reps` calls queued back to back
/// behind a head start of GPU work (`head_start`), with an event recorded between each two,
/// so an interval is one call's GPU time, without the launch gaps a synchronize after each
/// call would add and without the host's time.
fn median_ms(
    warmup: usize,
    reps: usize,
    mut f: impl FnMut() -> Result<(), String>,
) -> Result<f64, String> {
    for _ in 0..warmup {
        f()?;
    }
    cuda::synchronize(0).map_err(err)?;
    let events = (0..=reps)
        .map(|_| Event::new(0).map_err(err))
        .collect::<Result<Vec<_>, _>>()?;
    // A millisecond of host time per call covers even the unfused backward's many launches.
    head_start(reps as f64)?;
    events[0].record().map_err(err)?;
    for e in &events[1..] {
        f()?;
        e.record().map_err(err)?;
    }
    events[reps].synchronize().map_err(err)?;
    let mut ms = events
        .windows(2)
        .map(|w| w[0].elapsed_ms(&w[1]).map(f64::from).map_err(err))
        .collect::<Result<Vec<_>, _>>()?;
    ms.sort_by(f64::total_cmp);
    Ok(ms[ms.len() / 2])
}

/// The larger of `a` and `b`, NaN when either is (`f64::max` would drop it, and a NaN must
/// fail the check).
fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

/// The largest of `|a - b|` over pairs, NaN when any pair has one; equal values count 0 (two
/// -inf log-sum-exps agree).
fn max_abs_diff(a: impl Iterator<Item = f64>, b: impl Iterator<Item = f64>) -> f64 {
    a.zip(b).fold(0.0, |m, (x, y)| {
        nan_max(m, if x == y { 0.0 } else { (x - y).abs() })
    })
}

/// The largest `|x|`, NaN when any is.
fn max_abs(x: impl Iterator<Item = f64>) -> f64 {
    x.fold(0.0, |m, v| nan_max(m, v.abs()))
}

/// FlashAttention's count of the backward's FLOPs over the forward's.
const BWD_OVER_FWD: f64 = 2.5;

/// One attention problem: self-attention of `b x h` heads of `t` rows of `d`, causal or not,
/// with or without key padding (`key_len` t/2 for the odd batch elements).
#[derive(Clone, Copy)]
struct Size {
    b: usize,
    h: usize,
    t: usize,
    d: usize,
    causal: bool,
    padded: bool,
}

impl Size {
    /// Forward FLOPs as FlashAttention counts them: two `t x t x d` products per head (2 FLOPs
    /// a multiply-add), halved for the causal mask (padding is not discounted).
    fn fwd_flops(self) -> f64 {
        let full = 4.0 * (self.b * self.h) as f64 * (self.t as f64).powi(2) * self.d as f64;
        if self.causal { full / 2.0 } else { full }
    }

    /// Forward+backward FLOPs: the forward's and 2.5 times it for the backward.
    fn fwd_bwd_flops(self) -> f64 {
        self.fwd_flops() * (1.0 + BWD_OVER_FWD)
    }

    fn scale(self) -> f64 {
        1.0 / (self.d as f64).sqrt()
    }

    /// The valid keys of batch element `b` (all of its heads).
    fn key_len(self, b: usize) -> usize {
        if self.padded && b % 2 == 1 {
            self.t / 2
        } else {
            self.t
        }
    }

    /// The mask's name in the table.
    fn mask_name(self) -> &'static str {
        match (self.causal, self.padded) {
            (true, false) => "causal",
            (true, true) => "causal + pad",
            (false, false) => "none",
            (false, true) => "pad",
        }
    }
}

/// The composition's mask: true where a score is dropped (filled with -inf).
enum Mask {
    /// No mask.
    None,
    /// The causal `t x t` mask, broadcast over batch and heads, as `nn::CausalSelfAttention`
    /// builds it.
    Causal(Tensor<(usize, usize), bool>),
    /// One `t x t` mask per head: key padding, and the causal mask when there is one.
    Full(Heads<bool>),
}

impl Mask {
    /// The mask of batch elements `b0..b0 + n` of `size`.
    fn new(size: Size, b0: usize, n: usize) -> Result<Self, String> {
        let Size { h, t, .. } = size;
        let dev = Device::Cuda(0);
        Ok(if size.padded {
            let mut m = Vec::with_capacity(n * h * t * t);
            for b in b0..b0 + n {
                let len = size.key_len(b);
                for _ in 0..h {
                    for i in 0..t {
                        m.extend((0..t).map(|j| j >= len || (size.causal && j > i)));
                    }
                }
            }
            Mask::Full(Tensor::try_from_vec(m, (n, h, t, t), dev).map_err(err)?)
        } else if size.causal {
            Mask::Causal(Tensor::<(usize, usize), bool>::full((t, t), true, dev).triu(1))
        } else {
            Mask::None
        })
    }

    /// `scores` with the masked ones set to `value` (recorded for autograd as `masked_fill`).
    fn fill<E: Float>(&self, scores: Heads<E>, value: E) -> Result<Heads<E>, String> {
        match self {
            Mask::None => Ok(scores),
            Mask::Causal(m) => scores.try_masked_fill(m, value).map_err(err),
            Mask::Full(m) => scores.try_masked_fill(m, value).map_err(err),
        }
    }
}

/// Queues `source`'s `E` entry (a SIMT kernel has one per element type, f16 and bf16 here) on
/// rtx's stream, over the grid of one of the kernels' `*_launch` helpers.
///
/// # Safety
/// The pointers in `args` must be valid for what the kernel reads and writes given the other
/// arguments (`launch_entry` checks the arguments' kinds, not their extents).
unsafe fn launch<E: Float>(
    source: &'static KernelSource,
    c: rtx::kernel::LaunchConfig,
    args: &[Arg],
) -> Result<(), String> {
    // SAFETY: the caller's.
    unsafe { launch_sized::<E>(source, c, 0, args) }
}

/// [`launch`] with `shared` bytes of the kernel's dynamic shared memory (0: all of it).
///
/// # Safety
/// As [`launch`]'s, and the kernel uses no more than `shared` bytes with these arguments.
unsafe fn launch_sized<E: Float>(
    source: &'static KernelSource,
    c: rtx::kernel::LaunchConfig,
    shared: u32,
    args: &[Arg],
) -> Result<(), String> {
    let entry = source
        .entries
        .iter()
        .find(|e| e.dtype == E::DTYPE)
        .ok_or_else(|| format!("{} has no {:?} entry", source.name, E::DTYPE))?;
    let config = LaunchConfig {
        grid: (c.grid.x, c.grid.y, c.grid.z),
        block: (c.block.x, c.block.y, c.block.z),
        shared_mem: shared,
    };
    // SAFETY: the caller's.
    unsafe { cuda::launch_entry(0, source, entry, config, args) }.map_err(err)
}

/// The fused kernels' device buffers, ready to launch.
struct Fused<E> {
    size: Size,
    q: CudaStorage<E>,
    k: CudaStorage<E>,
    v: CudaStorage<E>,
    o: CudaStorage<E>,
    lse: CudaStorage<f32>,
    /// The upstream gradient of `o`.
    dout: CudaStorage<E>,
    delta: CudaStorage<f32>,
    dq: CudaStorage<E>,
    dk: CudaStorage<E>,
    dv: CudaStorage<E>,
    /// `b h` valid key counts (u32 values; held as i32, the same bytes for counts below 2^31).
    key_len: CudaStorage<i32>,
}

impl<E: Float> Fused<E> {
    /// Copies of the inputs and NaN-filled outputs (an element the kernels leave unwritten
    /// then fails the check).
    fn new(
        size: Size,
        (q, k, v, dout): (&Heads<E>, &Heads<E>, &Heads<E>, &Heads<E>),
    ) -> Result<Self, String> {
        let up = |x: &Heads<E>| CudaStorage::from_slice(0, &x.to_vec()).map_err(err);
        let (rows, n) = (size.b * size.h * size.t, size.b * size.h * size.t * size.d);
        let nan = || CudaStorage::filled(0, n, E::from_f64(f64::NAN)).map_err(err);
        let lens: Vec<i32> = (0..size.b * size.h)
            .map(|r| size.key_len(r / size.h) as i32)
            .collect();
        Ok(Fused {
            size,
            q: up(q)?,
            k: up(k)?,
            v: up(v)?,
            o: nan()?,
            lse: CudaStorage::filled(0, rows, f32::NAN).map_err(err)?,
            dout: up(dout)?,
            delta: CudaStorage::filled(0, rows, f32::NAN).map_err(err)?,
            dq: nan()?,
            dk: nan()?,
            dv: nan()?,
            key_len: CudaStorage::from_slice(0, &lens).map_err(err)?,
        })
    }

    /// The launches' shared tail: the q, k and o groups' strides (all dense `[b h, t, d]`),
    /// `batch`, `heads`, `t_q`, `t_k`, `d`, scale, causal, padded.
    fn dims(&self) -> [Arg; 11] {
        let Size { b, h, t, d, .. } = self.size;
        let dense = Arg::Strides(flash_attn_dense_strides(h, t, d));
        [
            dense,
            dense,
            dense,
            Arg::U64(b as u64),
            Arg::U64(h as u64),
            Arg::U64(t as u64),
            Arg::U64(t as u64),
            Arg::U64(d as u64),
            Arg::F64(self.size.scale()),
            Arg::U32(u32::from(self.size.causal)),
            Arg::U32(u32::from(self.size.padded)),
        ]
    }

    /// The forward kernels' arguments: q, k, v, o, lse, key_len, then [`Fused::dims`].
    fn forward_args(&self) -> Vec<Arg> {
        let mut args = vec![
            Arg::Ptr(self.q.device_ptr()),
            Arg::Ptr(self.k.device_ptr()),
            Arg::Ptr(self.v.device_ptr()),
            Arg::Ptr(self.o.device_ptr()),
            Arg::Ptr(self.lse.device_ptr()),
            Arg::Ptr(self.key_len.device_ptr()),
        ];
        args.extend(self.dims());
        args
    }

    /// One launch of `flash_attn_fwd`: `o` and `lse`.
    fn forward(&self) -> Result<(), String> {
        let Size { b, h, t, .. } = self.size;
        let args = self.forward_args();
        // SAFETY: q, k, v and o hold `b h t d` elements, lse `b h t` and key_len `b h`, the
        // extents the kernel is told (its grid covers `b h` rows of `t` queries, each reading
        // `t` keys).
        unsafe { launch::<E>(&flash_attn_fwd::KERNEL, flash_attn_launch(b, h, t), &args) }
    }

    /// One launch of `flash_attn_fwd_wgmma` (compute capability 9.0, d 64 or 128) in the plan
    /// the backend takes for these keys: the same `o` and `lse`.
    fn forward_wgmma(&self) -> Result<(), String> {
        let Size { t, d, .. } = self.size;
        self.forward_wgmma_in(FlashWgmmaPlan::for_keys(t, d))
    }

    /// One launch of `flash_attn_fwd_wgmma` in `plan`.
    fn forward_wgmma_in(&self, plan: FlashWgmmaPlan) -> Result<(), String> {
        let Size { b, h, t, d, .. } = self.size;
        let mut args = self.forward_args();
        args.extend([
            Arg::U64(u64::from(plan.warpgroups)),
            Arg::U64(plan.stages as u64),
        ]);
        let (grid, shared) = (plan.launch(b, h, t), plan.shared_bytes(d));
        // SAFETY: as `forward`'s; the grid covers the same rows, and the plan's shared memory
        // is what the kernel uses in it.
        unsafe { launch_sized::<E>(&flash_attn_fwd_wgmma::KERNEL, grid, shared, &args) }
    }

    /// The three backward launches, in order: `delta = rowsum(do o)`, then `dk` and `dv`, then
    /// `dq`, from the forward's `o` and `lse`.
    fn backward(&self) -> Result<(), String> {
        self.backward_with(false)
    }

    /// The backward with dK, dV and dQ by the `wgmma` kernels when `wgmma` is set.
    fn backward_with(&self, wgmma: bool) -> Result<(), String> {
        let Size { b, h, t, d, .. } = self.size;
        let rowdot = [
            Arg::Ptr(self.o.device_ptr()),
            Arg::Ptr(self.dout.device_ptr()),
            Arg::Ptr(self.delta.device_ptr()),
            Arg::Strides(flash_attn_dense_strides(h, t, d)),
            Arg::U64(b as u64),
            Arg::U64(h as u64),
            Arg::U64(t as u64),
            Arg::U64(d as u64),
        ];
        let mut dkdv = vec![
            Arg::Ptr(self.q.device_ptr()),
            Arg::Ptr(self.k.device_ptr()),
            Arg::Ptr(self.v.device_ptr()),
            Arg::Ptr(self.dout.device_ptr()),
            Arg::Ptr(self.lse.device_ptr()),
            Arg::Ptr(self.delta.device_ptr()),
            Arg::Ptr(self.dk.device_ptr()),
            Arg::Ptr(self.dv.device_ptr()),
            Arg::Ptr(self.key_len.device_ptr()),
        ];
        dkdv.extend(self.dims());
        let mut dq = vec![
            Arg::Ptr(self.q.device_ptr()),
            Arg::Ptr(self.k.device_ptr()),
            Arg::Ptr(self.v.device_ptr()),
            Arg::Ptr(self.dout.device_ptr()),
            Arg::Ptr(self.lse.device_ptr()),
            Arg::Ptr(self.delta.device_ptr()),
            Arg::Ptr(self.dq.device_ptr()),
            Arg::Ptr(self.key_len.device_ptr()),
        ];
        dq.extend(self.dims());
        // SAFETY: q, k, v, o, do, dq, dk and dv hold `b h t d` elements, lse and delta `b h t`,
        // key_len `b h`: the extents the kernels are told (rowdot covers `b h t` rows of `d`;
        // dkdv and dq cover `b h` rows of `t` keys or queries, each reading `t` of the other).
        unsafe {
            launch::<E>(
                &flash_attn_bwd_rowdot::KERNEL,
                flash_attn_bwd_rowdot_launch(b, h, t),
                &rowdot,
            )?;
            if wgmma {
                launch::<E>(
                    &flash_attn_bwd_dkdv_wgmma::KERNEL,
                    flash_attn_bwd_dkdv_wgmma_launch(b, h, t),
                    &dkdv,
                )?;
            } else {
                launch::<E>(
                    &flash_attn_bwd_dkdv::KERNEL,
                    flash_attn_bwd_dkdv_launch(b, h, t),
                    &dkdv,
                )?;
            }
            if wgmma {
                launch::<E>(
                    &flash_attn_bwd_dq_wgmma::KERNEL,
                    flash_attn_bwd_dq_wgmma_launch(b, h, t),
                    &dq,
                )
            } else {
                let rows = flash_attn_bwd_dq_rows(self.size.d, t);
                dq.push(Arg::U64(rows as u64));
                launch::<E>(
                    &flash_attn_bwd_dq::KERNEL,
                    flash_attn_bwd_dq_launch(b, h, t, rows),
                    &dq,
                )
            }
        }
    }
}

/// How far the fused kernels are from the f32 composition.
#[derive(Clone, Copy, Default)]
struct Errors {
    /// The largest `|o - ref|` over the largest `|v|`.
    o: f64,
    /// The largest `|lse - ref|`.
    lse: f64,
    /// For each of dq, dk and dv: the largest `|g - ref|` over the largest `|ref|`.
    grads: [f64; 3],
}

/// What one size measured.
struct Row {
    dtype: DType,
    size: Size,
    errors: Errors,
    fused_fwd_ms: f64,
    unfused_fwd_ms: f64,
    fused_fwd_bwd_ms: f64,
    unfused_fwd_bwd_ms: f64,
    /// The `wgmma` kernels where they run: the errors with the `wgmma` forward and dK/dV
    /// kernels, the forward's time alone, followed by the backward, and followed by the
    /// backward with the `wgmma` dK/dV.
    wgmma: Option<(Errors, f64, f64, f64)>,
}

const O_TOL: f64 = 2e-2;
const LSE_TOL: f64 = 1e-3;

/// The limit on a gradient's error: 2e-2 in bf16, 1e-2 in f16 (three more bits of mantissa).
fn grad_tol(dtype: DType) -> f64 {
    if dtype == DType::F16 { 1e-2 } else { 2e-2 }
}

impl Row {
    fn ok(&self) -> bool {
        let e = &self.errors;
        let wgmma_ok = self.wgmma.as_ref().is_none_or(|(w, ..)| {
            w.o <= O_TOL && w.lse <= LSE_TOL && w.grads.iter().all(|&g| g <= grad_tol(self.dtype))
        });
        wgmma_ok
            && e.o <= O_TOL
            && e.lse <= LSE_TOL
            && e.grads.iter().all(|&g| g <= grad_tol(self.dtype))
    }
}

/// The kernels' `o`, `lse`, `dq`, `dk` and `dv` against the composition in f32 from the same
/// inputs, its gradients from rtx's autograd for the loss `sum(o * do)`. The reference runs a
/// few batch elements at a time so its f32 scores stay near 2 GiB (the graph keeps a few
/// tensors that size alive until the backward).
fn check<E: Float>(
    size: Size,
    (q, k, v, dout): (&Heads<E>, &Heads<E>, &Heads<E>, &Heads<E>),
    fused: &Fused<E>,
) -> Result<Errors, String> {
    let Size { b, h, t, d, .. } = size;
    let o = fused.o.to_host().map_err(err)?;
    let lse = fused.lse.to_host().map_err(err)?;
    let grads = [
        fused.dq.to_host().map_err(err)?,
        fused.dk.to_host().map_err(err)?,
        fused.dv.to_host().map_err(err)?,
    ];
    let v_max = max_abs(v.to_vec().iter().map(|x| x.to_f64()));
    let per_batch = h * t * t * std::mem::size_of::<f32>();
    let chunk = ((2usize << 30) / per_batch).clamp(1, b);
    let (mut o_err, mut lse_err) = (0.0f64, 0.0f64);
    let (mut g_err, mut g_max) = ([0.0f64; 3], [0.0f64; 3]);
    for b0 in (0..b).step_by(chunk) {
        let n = chunk.min(b - b0);
        let mask = Mask::new(size, b0, n)?;
        let f32_of = |x: &Heads<E>| x.slice::<0>(b0..b0 + n).cast::<f32>();
        let (q32, k32, v32) = (
            f32_of(q).requires_grad(),
            f32_of(k).requires_grad(),
            f32_of(v).requires_grad(),
        );
        let do32 = f32_of(dout);
        let scores = q32.try_matmul(&k32.transpose::<2, 3>()).map_err(err)? * size.scale() as f32;
        let scores = mask.fill(scores, f32::NEG_INFINITY)?;
        let lse_ref = rtx::no_grad(|| scores.logsumexp::<3>()).to_vec();
        let y = scores.softmax::<3>().try_matmul(&v32).map_err(err)?;
        let o_ref = y.to_vec();
        let loss = (&y * &do32).sum_all();
        drop((scores, y, do32));
        let ref_grads = loss.try_backward().map_err(err)?;
        drop(loss);
        let (rows, elems) = (
            b0 * h * t..(b0 + n) * h * t,
            b0 * h * t * d..(b0 + n) * h * t * d,
        );
        let de = max_abs_diff(
            o[elems.clone()].iter().map(|x| x.to_f64()),
            o_ref.iter().map(|&x| f64::from(x)),
        );
        let dl = max_abs_diff(
            lse[rows].iter().map(|&x| f64::from(x)),
            lse_ref.iter().map(|&x| f64::from(x)),
        );
        o_err = nan_max(o_err, de);
        lse_err = nan_max(lse_err, dl);
        for (i, leaf) in [&q32, &k32, &v32].into_iter().enumerate() {
            let want = ref_grads
                .get(leaf)
                .ok_or("the composition gave no gradient")?
                .to_vec();
            let got = grads[i][elems.clone()].iter().map(|x| x.to_f64());
            g_err[i] = nan_max(
                g_err[i],
                max_abs_diff(got, want.iter().map(|&x| f64::from(x))),
            );
            g_max[i] = nan_max(g_max[i], max_abs(want.iter().map(|&x| f64::from(x))));
        }
    }
    Ok(Errors {
        o: o_err / v_max,
        lse: lse_err,
        grads: [0, 1, 2].map(|i| g_err[i] / g_max[i]),
    })
}

/// rtx's unfused composition in `E`, as `nn::CausalSelfAttention` spells it: the scaled
/// queries times the keys, the masked scores filled with -inf, softmax, times the values.
fn unfused<E: Float>(
    size: Size,
    mask: &Mask,
    (q, k, v): (&Heads<E>, &Heads<E>, &Heads<E>),
) -> Result<Heads<E>, String> {
    let scores = (q * E::from_f64(size.scale()))
        .try_matmul(&k.transpose::<2, 3>())
        .map_err(err)?;
    mask.fill(scores, E::from_f64(f64::NEG_INFINITY))?
        .softmax::<3>()
        .try_matmul(v)
        .map_err(err)
}

/// The unfused forward (the mask is built once, outside the timing).
fn time_unfused_fwd<E: Float>(
    reps: usize,
    size: Size,
    qkv: (&Heads<E>, &Heads<E>, &Heads<E>),
) -> Result<f64, String> {
    let mask = Mask::new(size, 0, size.b)?;
    median_ms(5, reps, || unfused(size, &mask, qkv).map(drop))
}

/// The unfused forward+backward through rtx's autograd: `q`, `k` and `v` as leaves, the
/// forward, then the gradients of `sum(o * do)`.
fn time_unfused_fwd_bwd<E: Float>(
    reps: usize,
    size: Size,
    (q, k, v, dout): (&Heads<E>, &Heads<E>, &Heads<E>, &Heads<E>),
) -> Result<f64, String> {
    let mask = Mask::new(size, 0, size.b)?;
    let (q, k, v) = (
        q.clone().requires_grad(),
        k.clone().requires_grad(),
        v.clone().requires_grad(),
    );
    median_ms(5, reps, || {
        let y = unfused(size, &mask, (&q, &k, &v))?;
        let grads = (&y * dout).sum_all().try_backward().map_err(err)?;
        drop(grads);
        Ok(())
    })
}

/// Checks and times one size in `E`.
fn measure<E: Float>(opts: &Opts, size: Size, seed: u64) -> Result<Row, String> {
    let dev = Device::Cuda(0);
    let shape = (size.b, size.h, size.t, size.d);
    let q: Heads<E> = Tensor::try_randn(shape, seed, dev).map_err(err)?;
    let k: Heads<E> = Tensor::try_randn(shape, seed + 1, dev).map_err(err)?;
    let v: Heads<E> = Tensor::try_randn(shape, seed + 2, dev).map_err(err)?;
    let dout: Heads<E> = Tensor::try_randn(shape, seed + 3, dev).map_err(err)?;
    let inputs = (&q, &k, &v, &dout);
    let fused = Fused::new(size, inputs)?;
    fused.forward()?;
    fused.backward()?;
    let errors = check(size, inputs, &fused)?;
    let hopper = cuda::gpu_info(0).map_err(err)?.compute_capability == (9, 0);
    let wgmma = if hopper && flash_attn_wgmma_takes(size.d) {
        fused.forward_wgmma()?;
        fused.backward_with(true)?;
        let e = check(size, inputs, &fused)?;
        let fwd = median_ms(5, opts.reps, || fused.forward_wgmma())?;
        let fwd_bwd = median_ms(5, opts.reps, || {
            fused.forward_wgmma()?;
            fused.backward()
        })?;
        let all_wgmma = median_ms(5, opts.reps, || {
            fused.forward_wgmma()?;
            fused.backward_with(true)
        })?;
        // Every plan, so the choice by length can be checked against them.
        let mut plans = Vec::new();
        for (warpgroups, stages) in [(2, 2), (1, 2), (1, 1)] {
            let plan = FlashWgmmaPlan { warpgroups, stages };
            let ms = median_ms(5, opts.reps, || fused.forward_wgmma_in(plan))?;
            plans.push(format!(
                "{warpgroups} warpgroups x {stages} stages {ms:.3} ms"
            ));
        }
        println!("  wgmma fwd plans: {}", plans.join(", "));
        Some((e, fwd, fwd_bwd, all_wgmma))
    } else {
        None
    };
    cuda::empty_cache(0).map_err(err)?;
    let row = Row {
        dtype: E::DTYPE,
        size,
        errors,
        fused_fwd_ms: median_ms(5, opts.reps, || fused.forward())?,
        unfused_fwd_ms: time_unfused_fwd(opts.reps, size, (&q, &k, &v))?,
        fused_fwd_bwd_ms: median_ms(5, opts.reps, || {
            fused.forward()?;
            fused.backward()
        })?,
        unfused_fwd_bwd_ms: time_unfused_fwd_bwd(opts.reps, size, inputs)?,
        wgmma,
    };
    let fwd = |ms: f64| size.fwd_flops() / (ms * 1e-3) / 1e12;
    let fwd_bwd = |ms: f64| size.fwd_bwd_flops() / (ms * 1e-3) / 1e12;
    let [dq, dk, dv] = errors.grads;
    println!(
        "{:?} d {} t {} {}: o err {:.2e}, lse err {:.2e}, dq err {dq:.2e}, dk err {dk:.2e}, \
         dv err {dv:.2e}{}; fwd: fused {:.3} ms ({:.1} TFLOP/s), unfused {:.3} ms ({:.1} \
         TFLOP/s); fwd+bwd: fused {:.3} ms ({:.1} TFLOP/s), unfused {:.3} ms ({:.1} TFLOP/s)",
        row.dtype,
        size.d,
        size.t,
        size.mask_name(),
        errors.o,
        errors.lse,
        if row.ok() { "" } else { " FAIL" },
        row.fused_fwd_ms,
        fwd(row.fused_fwd_ms),
        row.unfused_fwd_ms,
        fwd(row.unfused_fwd_ms),
        row.fused_fwd_bwd_ms,
        fwd_bwd(row.fused_fwd_bwd_ms),
        row.unfused_fwd_bwd_ms,
        fwd_bwd(row.unfused_fwd_bwd_ms),
    );
    if let Some((e, f, fb, fw)) = &row.wgmma {
        let [dq, dk, dv] = e.grads;
        println!(
            "  wgmma: o err {:.2e}, lse err {:.2e}, dq err {dq:.2e}, dk err {dk:.2e}, dv err \
             {dv:.2e}; fwd {f:.3} ms ({:.1} TFLOP/s), fwd+bwd {fb:.3} ms ({:.1} TFLOP/s), with \
             the wgmma backward {fw:.3} ms ({:.1} TFLOP/s)",
            e.o,
            e.lse,
            fwd(*f),
            fwd_bwd(*fb),
            fwd_bwd(*fw)
        );
    }
    Ok(row)
}

fn print_table(rows: &[Row]) {
    println!();
    println!(
        "| dtype | mask | b x h | d | t | fused fwd | unfused fwd | unfused / fused | fused \
         fwd+bwd | unfused fwd+bwd | unfused / fused | o err / max abs v | lse err | dq err | \
         dk err | dv err |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        let s = r.size;
        let cell = |ms: f64, flops: f64| format!("{ms:.3} ms ({:.1} TFLOP/s)", flops / ms / 1e9);
        let mark = |e: f64, tol: f64| format!("{e:.2e}{}", if e <= tol { "" } else { " FAIL" });
        let e = &r.errors;
        let g = grad_tol(r.dtype);
        println!(
            "| {:?} | {} | {} x {} | {} | {} | {} | {} | {:.2} | {} | {} | {:.2} | {} | {} | {} | \
             {} | {} |",
            r.dtype,
            s.mask_name(),
            s.b,
            s.h,
            s.d,
            s.t,
            cell(r.fused_fwd_ms, s.fwd_flops()),
            cell(r.unfused_fwd_ms, s.fwd_flops()),
            r.unfused_fwd_ms / r.fused_fwd_ms,
            cell(r.fused_fwd_bwd_ms, s.fwd_bwd_flops()),
            cell(r.unfused_fwd_bwd_ms, s.fwd_bwd_flops()),
            r.unfused_fwd_bwd_ms / r.fused_fwd_bwd_ms,
            mark(e.o, O_TOL),
            mark(e.lse, LSE_TOL),
            mark(e.grads[0], g),
            mark(e.grads[1], g),
            mark(e.grads[2], g),
        );
    }
}

fn run() -> Result<bool, String> {
    let opts = options();
    // The f32 reference must be exact f32, whatever the default becomes.
    cuda::set_allow_tf32(false);
    let info = cuda::gpu_info(0).map_err(err)?;
    println!(
        "flash_attention: {} (compute capability {:?}), batch {} x {} heads, median of {} calls",
        info.name, info.compute_capability, opts.batch, opts.heads, opts.reps
    );
    let ts: &[usize] = if opts.seq > 0 {
        std::slice::from_ref(&opts.seq)
    } else if opts.quick {
        &[1024]
    } else {
        &[256, 1024, 4096]
    };
    let size = |t, d, causal, padded| Size {
        b: opts.batch,
        h: opts.heads,
        t,
        d,
        causal,
        padded,
    };
    let mut rows = Vec::new();
    let mut seed = 0;
    let next = |rows: &mut Vec<Row>, row: Row| -> Result<(), String> {
        rows.push(row);
        // Each size's buffers are gone; hand their cached blocks back before the next one.
        cuda::empty_cache(0).map_err(err)
    };
    for d in [64, 128] {
        for &t in ts {
            next(
                &mut rows,
                measure::<bf16>(&opts, size(t, d, true, false), seed)?,
            )?;
            seed += 10;
        }
    }
    if opts.seq > 0 {
        print_table(&rows);
        return Ok(rows.iter().all(Row::ok));
    }
    next(
        &mut rows,
        measure::<f16>(&opts, size(1024, 128, true, false), 100)?,
    )?;
    next(
        &mut rows,
        measure::<bf16>(&opts, size(1024, 64, false, false), 200)?,
    )?;
    next(
        &mut rows,
        measure::<bf16>(&opts, size(1024, 64, true, true), 300)?,
    )?;
    print_table(&rows);
    Ok(rows.iter().all(Row::ok))
}

fn main() {
    if !cuda::is_available() {
        println!("flash_attention: skipped: no CUDA device");
        return;
    }
    match run() {
        Ok(true) => {}
        Ok(false) => {
            eprintln!(
                "flash_attention: FAIL: the fused kernels differ from the composition (o above \
                 {O_TOL:.0e} of max |v|, lse above {LSE_TOL:.0e}, or a gradient above {:.0e} \
                 (bf16) / {:.0e} (f16) of its max)",
                grad_tol(DType::BF16),
                grad_tol(DType::F16)
            );
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("flash_attention: {e}");
            std::process::exit(1);
        }
    }
}
