"""PyTorch's side of benches/flash_attention.rs: F.scaled_dot_product_attention on the same
sizes ([b, h, t, d], batch 32 x 8 heads, causal bf16 at head dims 64 and 128 and sequences 256,
1024 and 4096, causal f16 at d 128, t 1024, and bf16 without a mask at d 64, t 1024), with the
flash backend forced and the cuDNN backend beside it (a backend that cannot run a size is
reported as unavailable), forward and forward+backward (the gradients of q, k and v for a
random upstream gradient). The Rust bench's key-padded size has no row here: SDPA takes
padding only as an attn_mask, which its flash backend refuses.

The table's columns match the Rust bench's timings: fwd and fwd+bwd, each as ms and TFLOP/s.

Times are the median per call of --reps calls (default 30) queued back to back after 5
warm-ups, with a CUDA event recorded between each two calls, behind a head start of GPU work
(about a millisecond a call) so that every interval is GPU time, as the Rust bench times rtx.
TFLOP/s count FlashAttention's way (benchmarks/benchmark_flash_attention.py): the forward is
4 b h t^2 d, halved for the causal mask; the backward 2.5 times that, so forward+backward is
3.5 times the forward.

Run on the GPU machine, from the repository root, in the same call as the Rust bench:

    python3 benches/flash_attention_torch.py [--quick | --seq T] [--reps 30] [--batch 32] [--heads 8]
"""
import argparse
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = [("flash", SDPBackend.FLASH_ATTENTION), ("cuDNN", SDPBackend.CUDNN_ATTENTION)]
# The backward's FLOPs over the forward's, as FlashAttention counts them.
BWD_OVER_FWD = 2.5


def head_start(ms):
    """Queues about `ms` milliseconds of GPU work (bf16 products of 4096 x 4096) ahead of the
    timed calls, so the host has queued them all before the GPU reaches them (as the rtx
    bench does): a call whose host side outlasts its kernels is then timed by its GPU time."""
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    per_product_ms = 2.0 * 4096 ** 3 / 800e12 * 1e3
    for _ in range(int(-(-ms // per_product_ms))):
        a @ a


def median_ms(fn, reps, warmup=5):
    """Median milliseconds per call of `fn` over `reps` calls queued back to back behind a
    head start of GPU work: each interval between two events is one call's GPU time."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    events = [torch.cuda.Event(enable_timing=True) for _ in range(reps + 1)]
    head_start(float(reps))
    events[0].record()
    for e in events[1:]:
        fn()
        e.record()
    events[-1].synchronize()
    ms = sorted(a.elapsed_time(b) for a, b in zip(events, events[1:]))
    return ms[len(ms) // 2]


def fwd_flops(b, h, t, d, causal):
    """Forward FLOPs: two t x t x d products per head, halved by a causal mask."""
    return 4.0 * b * h * t * t * d / (2 if causal else 1)


def inputs(b, h, t, d, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.randn(b, h, t, d, generator=g, device="cuda", dtype=dtype) for _ in range(3)]


def time_fwd(backend, q, k, v, causal, reps):
    """The forward alone, without recording gradients."""
    def call():
        with torch.no_grad():
            F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    with sdpa_kernel(backend):
        return median_ms(call, reps)


def time_fwd_bwd(backend, q, k, v, causal, reps):
    """Forward, then the gradients of q, k and v for a fixed random upstream gradient."""
    q, k, v = (x.detach().requires_grad_() for x in (q, k, v))
    do = torch.randn_like(q)

    def call():
        o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        torch.autograd.grad(o, (q, k, v), do)
    with sdpa_kernel(backend):
        return median_ms(call, reps)


def cell(ms, flops):
    if ms is None:
        return "unavailable"
    return f"{ms:.3f} ms ({flops / ms / 1e9:.1f} TFLOP/s)"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="t 1024 only")
    p.add_argument("--seq", type=int, default=0,
                   help="the causal bf16 rows at this length alone, as the rtx bench's --seq")
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--heads", type=int, default=8)
    a = p.parse_args()
    if not torch.cuda.is_available():
        print("flash_attention_torch: skipped: no CUDA device")
        return
    print(f"flash_attention_torch: torch {torch.__version__}, cuDNN "
          f"{torch.backends.cudnn.version()}, {torch.cuda.get_device_name(0)}, batch "
          f"{a.batch} x {a.heads} heads, median of {a.reps} calls")
    b, h = a.batch, a.heads
    ts = [a.seq] if a.seq else [1024] if a.quick else [256, 1024, 4096]
    sizes = [(torch.bfloat16, d, t, True) for d in (64, 128) for t in ts]
    if not a.seq:
        sizes += [(torch.float16, 128, 1024, True), (torch.bfloat16, 64, 1024, False)]
    names = {torch.bfloat16: "BF16", torch.float16: "F16"}
    rows, unavailable = [], {}
    for seed, (dtype, d, t, causal) in enumerate(sizes):
        q, k, v = inputs(b, h, t, d, dtype, seed)
        f = fwd_flops(b, h, t, d, causal)
        flops = {"fwd": f, "fwd+bwd": f * (1 + BWD_OVER_FWD)}
        times = {}
        for name, backend in BACKENDS:
            for kind, timer in (("fwd", time_fwd), ("fwd+bwd", time_fwd_bwd)):
                try:
                    times[name, kind] = timer(backend, q, k, v, causal, a.reps)
                except RuntimeError as e:
                    # SDPA raises when the forced backend cannot run these inputs here.
                    times[name, kind] = None
                    unavailable.setdefault(name, (str(e).strip().splitlines() or [repr(e)])[0])
        line = ", ".join(f"{n} {kind} {cell(times[n, kind], flops[kind])}"
                         for n, _ in BACKENDS for kind in flops)
        mask = "causal" if causal else "none"
        print(f"{names[dtype]} d {d} t {t} {mask}: {line}", flush=True)
        rows.append((names[dtype], mask, d, t, flops, times))
        del q, k, v
        torch.cuda.empty_cache()
    for name, why in unavailable.items():
        print(f"flash_attention_torch: {name} unavailable for some sizes: {why}", file=sys.stderr)
    print()
    print("| dtype | mask | b x h | d | t | flash fwd | cuDNN fwd | flash fwd+bwd | "
          "cuDNN fwd+bwd |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, mask, d, t, flops, times in rows:
        cells = " | ".join(cell(times[n, kind], flops[kind])
                           for kind in flops for n, _ in BACKENDS)
        print(f"| {name} | {mask} | {b} x {h} | {d} | {t} | {cells} |")


if __name__ == "__main__":
    main()
