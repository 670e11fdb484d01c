"""rtx against PyTorch on one GPU, in one run: runs the rtx side (`benches/gpu_ops.rs`, built
with `tools/gpu-build --bench gpu_ops` into `.gpu/bin/gpu_ops`), which writes its
timings as JSON, then times the same ops in PyTorch eager the same way (CUDA events, median of
the runs after warm-up, random inputs), and prints one Markdown table with the ratios.

Usage, from the repository root on the GPU machine:

    python3 benches/gpu_ops_torch.py                  # runs .gpu/bin/gpu_ops, then PyTorch
    python3 benches/gpu_ops_torch.py --rtx PATH       # another rtx binary
    python3 benches/gpu_ops_torch.py --rtx-json FILE  # rtx timings saved by `gpu_ops --json FILE`
    python3 benches/gpu_ops_torch.py --reps 30 --out table.md

Ratios are times, rtx / PyTorch: below 1 means rtx is faster. The elementwise rows also give
GB/s (4 bytes read and 4 written per element) as a fraction of the device-to-device copy
bandwidth measured in the same run by the same library, and the GEMM rows rtx's time against
cuBLAS called directly (`cublasGemmEx`, no tensor layer).
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile

A, B = 1.5, -0.25
N = 1 << 28


def fail(msg):
    print(f"gpu_ops_torch: {msg}", file=sys.stderr)
    sys.exit(1)


def run_rtx(binary, reps):
    """The rtx rows, by running the bench binary with --json."""
    if not os.path.isfile(binary):
        fail(f"{binary} does not exist: build it on the development machine with "
             "`tools/gpu-build --bench gpu_ops` (from the repository root) and bring "
             ".gpu/ here, or pass --rtx PATH / --rtx-json FILE")
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "rtx.json")
        cmd = [binary, "--json", out, "--reps", str(reps)]
        print("$ " + " ".join(cmd), flush=True)
        r = subprocess.run(cmd)
        if not os.path.isfile(out):
            fail(f"{binary} exited with status {r.returncode} and wrote no JSON to {out}")
        with open(out) as f:
            rtx = json.load(f)
        # The binary saves its JSON after every row: a run that died still shows its rows.
        if r.returncode != 0 or not rtx.get("complete", True):
            print(f"gpu_ops_torch: WARNING: {binary} exited with status {r.returncode} before "
                  "finishing; the table shows the rows it measured", file=sys.stderr)
        return rtx


def median_ms(torch, fn, reps, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    ms = []
    for _ in range(reps):
        start.record()
        out = fn()
        end.record()
        end.synchronize()
        del out
        ms.append(start.elapsed_time(end))
    ms.sort()
    return ms[len(ms) // 2]


def torch_rows(reps):
    """PyTorch's timings, keyed by the rtx row ids."""
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        fail(f"PyTorch is not importable: {e}")
    if not torch.cuda.is_available():
        fail("torch.cuda.is_available() is False: no GPU for PyTorch")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    g = torch.Generator(device="cuda").manual_seed(0)

    def rand(shape, lo, hi, dtype=torch.float32):
        return (torch.rand(shape, generator=g, device="cuda") * (hi - lo) + lo).to(dtype)

    rows = {}

    def row(rid, fn, bytes_=None, flop=None, r=reps):
        try:
            ms = median_ms(torch, fn, r)
            v = {"ms": ms}
            if bytes_:
                v["gbs"] = bytes_ / (ms * 1e-3) / 1e9
            if flop:
                v["tflops"] = flop / (ms * 1e-3) / 1e12
        except Exception as e:  # a failed row is reported, the others still run
            v = {"error": f"{type(e).__name__}: {e}"}
        rows[rid] = v
        shown = ", ".join(f"{k} {x:.3f}" if isinstance(x, float) else f"{k} {x}" for k, x in v.items())
        print(f"torch {rid:16} {shown}", flush=True)

    x = rand((N,), -3.0, 3.0)
    row("copy", lambda: x.clone(), 8 * N)
    row("gelu_affine", lambda: F.gelu(x * A + B, approximate="tanh"), 8 * N)
    row("gelu_chain", lambda: F.gelu(x * A + B, approximate="tanh"), 8 * N)
    row("sum_all", lambda: x.sum(), 4 * N)
    del x
    side = 8192
    m = rand((side, side), -4.0, 4.0)
    row("softmax", lambda: torch.softmax(m, dim=-1), 8 * side * side)
    row("sum_axis0", lambda: m.sum(dim=0), 4 * side * side)
    row("sum_axis1", lambda: m.sum(dim=1), 4 * side * side)
    del m
    d, r = 4096, 8192
    xl = rand((r, d), -3.0, 3.0)
    w, b = rand((d,), 0.5, 1.5), rand((d,), -0.5, 0.5)
    row("layer_norm", lambda: F.layer_norm(xl, (d,), w, b, 1e-5), 8 * r * d)
    del xl, w, b
    for n in (4096, 8192):
        for name, dtype in (("f32", torch.float32), ("bf16", torch.bfloat16)):
            a, bm = rand((n, n), -1.0, 1.0, dtype), rand((n, n), -1.0, 1.0, dtype)
            row(f"gemm_{n}_{name}", lambda: torch.matmul(a, bm), flop=2.0 * n ** 3,
                r=min(reps, 20) if n > 4096 else reps)
            del a, bm
        torch.cuda.empty_cache()
    info = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(0),
    }
    return info, rows


def fmt_ms(v):
    if v is None:
        return "—"
    if "error" in v:
        return "error"
    ms = v.get("ms")
    if ms is None:
        return "—"
    s = f"{ms:.3f} ms"
    if "gbs" in v:
        s += f" ({v['gbs']:.0f} GB/s)"
    if "tflops" in v:
        s += f" ({v['tflops']:.1f} TFLOP/s)"
    return s


def table(rtx, info, torch_by_id):
    rtx_by_id = {r["id"]: r for r in rtx.get("rows", [])}
    copy_r = rtx_by_id.get("copy", {}).get("ms")
    copy_t = torch_by_id.get("copy", {}).get("ms")
    lines = [
        "| op | size | rtx | PyTorch | rtx / PyTorch | notes |",
        "|---|---|---|---|---|---|",
    ]
    errors = []
    for r in rtx.get("rows", []):
        rid = r["id"]
        if rid.startswith("cublas_"):
            continue
        t = torch_by_id.get(rid)
        ratio = "—"
        if t and "ms" in t and "ms" in r:
            ratio = f"{r['ms'] / t['ms']:.2f}"
        notes = []
        if rid == "model_gelu" and "ms" in r:
            t = torch_by_id.get("gelu_chain")
            if t and "ms" in t:
                ratio = f"{r['ms'] / t['ms']:.2f}"
            notes.append(f"{r.get('launches', '?')} launch(es); at "
                         f"{100 * r.get('of_kernel', 0):.1f}% of the #[kernel]'s bandwidth; "
                         "PyTorch column: its eager chain")
        if rid in ("gelu_affine", "gelu_chain", "model_gelu") and "ms" in r:
            if copy_r:
                notes.append(f"rtx at {100 * copy_r / r['ms']:.1f}% of its copy bandwidth")
            if copy_t and t and "ms" in t:
                notes.append(f"PyTorch at {100 * copy_t / t['ms']:.1f}% of its copy bandwidth")
        if rid.startswith("gemm_"):
            c = rtx_by_id.get("cublas_" + rid[len("gemm_"):], {})
            if "ms" in c and "ms" in r:
                notes.append(f"cuBLAS direct {fmt_ms(c)}: rtx at {100 * c['ms'] / r['ms']:.1f}% of it")
            elif "error" in c:
                notes.append("cuBLAS direct: error")
                errors.append(f"cublas_{rid[5:]}: {c['error']}")
        if rid.startswith("nvrtc_"):
            notes.append("host clock, to the GPU finishing")
        if "error" in r:
            errors.append(f"rtx {rid}: {r['error']}")
        if t and "error" in t:
            errors.append(f"PyTorch {rid}: {t['error']}")
        lines.append(f"| {r['op']} | {r['size']} | {fmt_ms(r)} | {fmt_ms(t)} | {ratio} | {'; '.join(notes)} |")
    head = [
        f"### {datetime.date.today().isoformat()}, {rtx.get('gpu') or info['gpu']} "
        f"(NVRTC {rtx.get('nvrtc')}), PyTorch {info['torch']} (CUDA {info['cuda']})",
        "",
        f"Median of {rtx.get('reps')} runs after 3 warm-ups, CUDA events, random inputs.",
        "",
    ]
    tail = ["", "Errors:", ""] + [f"- {e}" for e in errors] if errors else []
    return "\n".join(head + lines + tail) + "\n"


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rtx", default=os.path.join(here, "..", ".gpu", "bin", "gpu_ops"),
                   help="the rtx bench binary (default .gpu/bin/gpu_ops)")
    p.add_argument("--rtx-json", help="rtx timings from an earlier `gpu_ops --json FILE`")
    p.add_argument("--reps", type=int, default=30, help="timed runs per row (default 30)")
    p.add_argument("--out", help="also write the Markdown table to this file")
    a = p.parse_args()
    if a.reps < 1:
        fail("--reps must be at least 1")
    if a.rtx_json:
        with open(a.rtx_json) as f:
            rtx = json.load(f)
    else:
        rtx = run_rtx(os.path.normpath(a.rtx), a.reps)
    if rtx.get("error"):
        fail(f"the rtx side reports: {rtx['error']}")
    info, rows = torch_rows(a.reps)
    md = table(rtx, info, rows)
    print()
    print(md)
    if a.out:
        with open(a.out, "w") as f:
            f.write(md)


if __name__ == "__main__":
    main()
