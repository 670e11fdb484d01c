//! The GPU side of fused attention (`rtx-backends/src/storage/attention.rs`): the `#[kernel]`
//! FlashAttention-2-style forward and its three backward kernels
//! (`rtx_kernels::kernels::flash_attn_*`), launched in f16 or bf16 on operands at any
//! [`AttentionLayout`]'s strides (dense `[batch heads, t, d]` buffers, or heads read in place
//! from a fused projection's output).
//!
//! Invariant: nothing here is generic, so this launch code is compiled once, in this crate;
//! the buffers arrive as device addresses of each operand's first element, with their element
//! type, and the layout was checked by the caller.

use super::kernels::{Arg, launch_entry};
use super::launch::{DevicePtr, LaunchConfig};
use crate::{AttentionDims, AttentionLayout, BackendError, Device, HeadStrides, Result};
use rtx_kernels::DType;
use rtx_kernels::kernel::{KernelSource, LaunchConfig as Grid, Variant};
use rtx_kernels::kernels::{
    FlashWgmmaPlan, flash_attn_bwd_dkdv, flash_attn_bwd_dkdv_launch, flash_attn_bwd_dkdv_wgmma,
    flash_attn_bwd_dkdv_wgmma_launch, flash_attn_bwd_dq, flash_attn_bwd_dq_launch,
    flash_attn_bwd_dq_rows, flash_attn_bwd_dq_wgmma, flash_attn_bwd_dq_wgmma_launch,
    flash_attn_bwd_rowdot, flash_attn_bwd_rowdot_launch, flash_attn_fwd, flash_attn_fwd_wgmma,
    flash_attn_launch, flash_attn_strides, flash_attn_wgmma_takes,
};

/// One group's strides as the kernels take them.
fn strides(s: &HeadStrides) -> Arg {
    Arg::Strides(flash_attn_strides([s.batch, s.head, s.row]))
}

/// The kernels' shared trailing arguments: the q, k and o groups' strides, `batch`, `heads`,
/// `t_q`, `t_k`, `d`, scale, causal, and `padded` (0: no key-length buffer).
fn tail(dims: &AttentionDims, layout: &AttentionLayout) -> [Arg; 11] {
    [
        strides(&layout.q),
        strides(&layout.k),
        strides(&layout.o),
        Arg::U64(dims.batch as u64),
        Arg::U64(dims.heads as u64),
        Arg::U64(dims.t_q as u64),
        Arg::U64(dims.t_k as u64),
        Arg::U64(dims.d as u64),
        Arg::F64(dims.scale),
        Arg::U32(u32::from(dims.causal)),
        Arg::U32(0),
    ]
}

/// Launches `source`'s `dtype` entry over the grid of one of the kernels' `*_launch` helpers.
///
/// # Safety
/// As [`launch_entry`]'s: every address in `args` is valid for what the kernel reads and
/// writes given the sizes in `args`.
unsafe fn launch(
    ordinal: usize,
    source: &'static KernelSource,
    dtype: DType,
    grid: Grid,
    args: &[Arg],
) -> Result<()> {
    // SAFETY: the caller's.
    unsafe { launch_sized(ordinal, source, dtype, grid, 0, args) }
}

/// [`launch`] with `shared` bytes of the kernel's dynamic shared memory (0: all of it).
///
/// # Safety
/// As [`launch`]'s, and the kernel uses no more shared memory than `shared` with these
/// arguments.
unsafe fn launch_sized(
    ordinal: usize,
    source: &'static KernelSource,
    dtype: DType,
    grid: Grid,
    shared: u32,
    args: &[Arg],
) -> Result<()> {
    // One entry per element type (the kernels are generic over `T` alone).
    let entry = source
        .entries
        .iter()
        .find(|e| e.dtype == dtype && e.variant == Variant::Simt)
        .ok_or(BackendError::NoKernel {
            op: source.name,
            device: Device::Cuda(ordinal),
        })?;
    let config = LaunchConfig {
        grid: (grid.grid.x, grid.grid.y, grid.grid.z),
        block: (grid.block.x, grid.block.y, grid.block.z),
        shared_mem: shared,
    };
    // SAFETY: the caller's.
    unsafe { launch_entry(ordinal, source, entry, config, args) }
}

/// `o = softmax(scale q kᵀ, masked) v` and each query row's log-sum-exp `lse` (f32), in one
/// launch on GPU `ordinal`: on Hopper (compute capability 9.0) the `wgmma` kernel, elsewhere
/// the `mma.sync` one (see benches/README.md: with an entry per head dim, `wgmma` measured as
/// fast or faster at both head dims).
///
/// # Safety
/// `q`, `k`, `v` and `o` are the addresses of those operands' first elements of `dtype`, and
/// every element `layout` places them at (`o` through `layout.o`) lies in its buffer; `lse`
/// holds `batch heads t_q` f32s; all on that GPU, 16-byte aligned, for as long as the launch
/// runs.
pub(crate) unsafe fn forward(
    ordinal: usize,
    dtype: DType,
    [q, k, v, o, lse]: [DevicePtr; 5],
    dims: &AttentionDims,
    layout: &AttentionLayout,
) -> Result<()> {
    let mut args = vec![
        Arg::Ptr(q),
        Arg::Ptr(k),
        Arg::Ptr(v),
        Arg::Ptr(o),
        Arg::Ptr(lse),
        // `key_len`, never read without `padded`: any address.
        Arg::Ptr(q),
    ];
    args.extend(tail(dims, layout));
    let hopper = super::gpu::gpu(ordinal)?.cc == (9, 0);
    if hopper && flash_attn_wgmma_takes(dims.d) {
        let plan = FlashWgmmaPlan::for_keys(dims.t_k, dims.d);
        let grid = plan.launch(dims.batch, dims.heads, dims.t_q);
        args.extend([
            Arg::U64(u64::from(plan.warpgroups)),
            Arg::U64(plan.stages as u64),
        ]);
        let (kernel, shared) = (&flash_attn_fwd_wgmma::KERNEL, plan.shared_bytes(dims.d));
        // SAFETY: as below; the same arguments, and the plan's shared memory is what the
        // kernel uses with its warpgroups and stages.
        return unsafe { launch_sized(ordinal, kernel, dtype, grid, shared, &args) };
    }
    let grid = flash_attn_launch(dims.batch, dims.heads, dims.t_q);
    // SAFETY: the caller's promise covers the extents the arguments name.
    unsafe { launch(ordinal, &flash_attn_fwd::KERNEL, dtype, grid, &args) }
}

/// The gradients `dq`, `dk`, `dv` of the forward's inputs for the upstream gradient `dout` of
/// its output `o`, from its `lse`: three launches on GPU `ordinal`, using `delta`
/// (`batch heads t_q` f32s) as scratch. On Hopper the dK/dV and dQ kernels are the `wgmma`
/// ones where they measured faster (see [`wgmma_backward`]).
///
/// # Safety
/// Every address is an operand's first element (of `dtype`, or f32 for `lse` and `delta`),
/// and every element `layout` places it at lies in its buffer: q and dq through `layout.q`,
/// k, v, dk and dv through `layout.k`, o and dout through `layout.o`; no two gradients' elements
/// overlap; all on that GPU, 16-byte aligned, for as long as the launches run.
pub(crate) unsafe fn backward(
    ordinal: usize,
    dtype: DType,
    [q, k, v, o, lse, dout]: [DevicePtr; 6],
    [dq, dk, dv, delta]: [DevicePtr; 4],
    dims: &AttentionDims,
    layout: &AttentionLayout,
) -> Result<()> {
    let rowdot = [
        Arg::Ptr(o),
        Arg::Ptr(dout),
        Arg::Ptr(delta),
        strides(&layout.o),
        Arg::U64(dims.batch as u64),
        Arg::U64(dims.heads as u64),
        Arg::U64(dims.t_q as u64),
        Arg::U64(dims.d as u64),
    ];
    let shared = [q, k, v, dout, lse, delta].map(Arg::Ptr);
    let mut dkdv = shared.to_vec();
    dkdv.extend([Arg::Ptr(dk), Arg::Ptr(dv), Arg::Ptr(q)]);
    dkdv.extend(tail(dims, layout));
    let mut dqa = shared.to_vec();
    dqa.extend([Arg::Ptr(dq), Arg::Ptr(q)]);
    dqa.extend(tail(dims, layout));
    // SAFETY: the caller's promise covers the extents the arguments name; `delta` is written
    // by the first launch before the others read it (one stream).
    unsafe {
        let grid = flash_attn_bwd_rowdot_launch(dims.batch, dims.heads, dims.t_q);
        launch(
            ordinal,
            &flash_attn_bwd_rowdot::KERNEL,
            dtype,
            grid,
            &rowdot,
        )?;
        if wgmma_backward(super::gpu::gpu(ordinal)?.cc, dims) {
            let grid = flash_attn_bwd_dkdv_wgmma_launch(dims.batch, dims.heads, dims.t_k);
            launch(
                ordinal,
                &flash_attn_bwd_dkdv_wgmma::KERNEL,
                dtype,
                grid,
                &dkdv,
            )?;
            let grid = flash_attn_bwd_dq_wgmma_launch(dims.batch, dims.heads, dims.t_q);
            return launch(ordinal, &flash_attn_bwd_dq_wgmma::KERNEL, dtype, grid, &dqa);
        }
        let grid = flash_attn_bwd_dkdv_launch(dims.batch, dims.heads, dims.t_k);
        launch(ordinal, &flash_attn_bwd_dkdv::KERNEL, dtype, grid, &dkdv)?;
        let rows = flash_attn_bwd_dq_rows(dims.d, dims.t_k);
        let grid = flash_attn_bwd_dq_launch(dims.batch, dims.heads, dims.t_q, rows);
        dqa.push(Arg::U64(rows as u64));
        launch(ordinal, &flash_attn_bwd_dq::KERNEL, dtype, grid, &dqa)
    }
}

/// Whether the backward's dK/dV and dQ run on the `wgmma` kernels: on Hopper (compute
/// capability 9.0), at head dim 128 past 256 keys, and at head dim 64 past 2048. On an H200
/// (benches/README.md, 2026-12-06 23:07; batch 32 x 8 heads, causal bf16) the `wgmma` backward
/// took 14% less time than the `mma.sync` one at d 128 and 1024 keys, 28% less at 4096, and
/// 5% more at 256; at d 64 7% less at 4096 keys, the same at 1024, 5% more at 256.
fn wgmma_backward(cc: (u32, u32), dims: &AttentionDims) -> bool {
    cc == (9, 0) && ((dims.d == 128 && dims.t_k > 256) || (dims.d == 64 && dims.t_k > 2048))
}
