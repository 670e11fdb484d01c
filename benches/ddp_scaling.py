"""Data-parallel training on N GPUs of one host: rtx's DDP (benches/ddp_step.rs, one process per
GPU under rtx-run, NCCL) beside PyTorch's DistributedDataParallel under torchrun, eager and with
the DDP model torch.compile'd, on the same models and per-rank batches:

- gpt: the GPT bench step (benches/gpt_step: 6 pre-norm blocks, d_model 512, 8 heads, sequence
  256, vocabulary 8192, untied head), 32 sequences per rank, bf16 autocast (rtx: MixedStep with
  f32 master weights), AdamW lr 3e-4.
- gpt-f32: the same model in f32 (rtx: TrainStep, all-reduces inside its CUDA graph).
- mlp: the compiled-step MLP 784-2048-2048-10 (GELU tanh, cross-entropy), 512 rows per rank,
  f32 (no TF32), Adam lr 1e-3 (rtx: TrainStep, all-reduces inside its CUDA graph).

Both sides use 25 MiB gradient buckets (PyTorch's default bucket_cap_mb, rtx's default), each
rank its own data. For each world size (1 and N by default) and model it reports the time per
step (median over blocks of consecutive steps, host clock after a device synchronize, rank 0),
the throughput of the whole group (samples/s, and tokens/s for the GPT), the scaling efficiency
(throughput on n GPUs over n times that on 1 GPU) and every rank's peak memory (the caching
allocator's peak allocated and reserved bytes: PyTorch's max_memory_allocated/reserved, rtx's
memory_stats). It prints a short table last and writes everything to --json.

The GPU machine needs no Rust: build the rtx side first with
  tools/gpu-build --bench ddp_step --bin rtx-run -p rtx-workspace -p rtx-run
(which leaves .gpu/bin/ddp_step and .gpu/bin/rtx-run), copy .gpu/ along, then run
  python3 benches/ddp_scaling.py --gpus N
Internally the same file is each PyTorch rank (torchrun ... ddp_scaling.py --worker ...).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODELS = ("gpt", "gpt-f32", "mlp")
SEQS, SEQ, D, HEADS, LAYERS, VOCAB = 32, 256, 512, 8, 6, 8192
ROWS, IN, HID, OUT = 512, 784, 2048, 10


# ---------------------------------------------------------------- PyTorch rank (under torchrun)

def worker(a):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(D)
            self.qkv = nn.Linear(D, 3 * D)
            self.proj = nn.Linear(D, D)
            self.ln2 = nn.LayerNorm(D)
            self.fc1 = nn.Linear(D, 4 * D)
            self.fc2 = nn.Linear(4 * D, D)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(D, dim=2)
            heads = lambda z: z.view(b, t, HEADS, D // HEADS).transpose(1, 2)
            y = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, D))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(VOCAB, D)
            self.wpe = nn.Embedding(SEQ, D)
            self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
            self.ln_f = nn.LayerNorm(D)
            self.head = nn.Linear(D, VOCAB)

        def forward(self, ids, pos):
            x = self.wte(ids) + self.wpe(pos)
            for b in self.blocks:
                x = b(x)
            return self.head(self.ln_f(x)).view(-1, VOCAB)

    torch.manual_seed(0)
    dev = torch.device("cuda", local)
    if a.model == "mlp":
        model = nn.Sequential(
            nn.Linear(IN, HID), nn.GELU(approximate="tanh"),
            nn.Linear(HID, HID), nn.GELU(approximate="tanh"),
            nn.Linear(HID, OUT),
        ).to(dev)
        g = torch.Generator(device=dev).manual_seed(1 + rank)
        x = torch.randn(ROWS, IN, device=dev, generator=g)
        y = (torch.arange(ROWS, device=dev) * 7 + rank) % OUT
        inputs, target, samples, per_sample = (x,), y, ROWS, 1
        opt_of = lambda p: torch.optim.Adam(p, lr=1e-3)
        bf16 = False
    else:
        model = Gpt().to(dev)
        n = SEQS * SEQ
        # The rtx bench's stream: rank r's token i is ((r * n + i) * 2654435761) mod 8192.
        stream = ((torch.arange(n + 1, dtype=torch.int64) + rank * n) * 2654435761) % VOCAB
        ids = stream[:-1].view(SEQS, SEQ).to(dev)
        nxt = stream[1:].to(dev)
        pos = torch.arange(SEQ, device=dev)
        inputs, target, samples, per_sample = (ids, pos), nxt, SEQS, SEQ
        opt_of = lambda p: torch.optim.AdamW(p, lr=3e-4)
        bf16 = a.model == "gpt"

    ddp = DDP(model, device_ids=[local], bucket_cap_mb=25)
    run = torch.compile(ddp) if a.mode == "compile" else ddp
    opt = opt_of(ddp.parameters())

    def step():
        opt.zero_grad(set_to_none=False)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            loss = F.cross_entropy(run(*inputs), target)
        loss.backward()
        opt.step()
        return loss

    t0 = time.perf_counter()
    first = step().item()
    torch.cuda.synchronize()
    first_s = time.perf_counter() - t0
    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    blocks = []
    for _ in range(a.blocks):
        t = time.perf_counter()
        for _ in range(a.steps):
            loss = step()
        torch.cuda.synchronize()
        blocks.append((time.perf_counter() - t) * 1e3 / a.steps)
    ms = statistics.median(blocks)
    peaks = [None] * world
    mib = 1 << 20
    dist.all_gather_object(peaks, (torch.cuda.max_memory_allocated() / mib,
                                   torch.cuda.max_memory_reserved() / mib))
    if rank == 0:
        out = {
            "framework": "pytorch",
            "mode": a.mode,
            "model": a.model,
            "world_size": world,
            "backend": "nccl",
            "ms_per_step": ms,
            "blocks_ms": blocks,
            "samples_per_rank": samples,
            "samples_per_s": samples * world / (ms / 1e3),
            "tokens_per_s": samples * per_sample * world / (ms / 1e3),
            "params": sum(p.numel() for p in model.parameters()),
            "first_loss": first,
            "last_loss": loss.item(),
            "first_step_s": first_s,
            "peak_allocated_mib": [p[0] for p in peaks],
            "peak_reserved_mib": [p[1] for p in peaks],
            "device": torch.cuda.get_device_name(),
            "torch": torch.__version__,
        }
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)
    dist.barrier()
    dist.destroy_process_group()


# ---------------------------------------------------------------- the driver

def run_one(cmd, json_path, timeout, log):
    """Runs one configuration's ranks; returns rank 0's JSON, or an error entry."""
    print("$ " + " ".join(cmd), flush=True)
    t = time.perf_counter()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout, cwd=ROOT)
        out, rc = p.stdout, p.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        rc = "timeout"
    log.write(f"$ {' '.join(cmd)}\n{out}\n")
    tail = "\n".join(out.strip().splitlines()[-8:])
    if rc != 0 or not os.path.exists(json_path):
        print(f"  failed ({rc}) after {time.perf_counter() - t:.0f} s:\n{tail}", flush=True)
        return {"error": f"exit {rc}", "output_tail": tail}
    with open(json_path) as f:
        r = json.load(f)
    print(f"  {r['ms_per_step']:.3f} ms per step, {r['samples_per_s']:.0f} samples/s "
          f"({time.perf_counter() - t:.0f} s)", flush=True)
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--mode", default="eager", help=argparse.SUPPRESS)
    ap.add_argument("--model", default="gpt", help=argparse.SUPPRESS)
    ap.add_argument("--gpus", type=int, help="GPUs to scale to (default: every GPU here)")
    ap.add_argument("--sizes", help="world sizes to run, comma-separated (default: 1 and --gpus)")
    ap.add_argument("--models", default="gpt,mlp", help="of gpt, gpt-f32, mlp (default gpt,mlp)")
    ap.add_argument("--rtx-run", default=os.path.join(ROOT, ".gpu/bin/rtx-run"))
    ap.add_argument("--rtx-bench", default=os.path.join(ROOT, ".gpu/bin/ddp_step"))
    ap.add_argument("--no-rtx", action="store_true", help="PyTorch only")
    ap.add_argument("--no-torch", action="store_true", help="rtx only")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--blocks", type=int, default=10)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--timeout", type=int, default=900, help="seconds per configuration")
    ap.add_argument("--json", default="ddp_scaling.json", help="where the results go")
    ap.add_argument("--log", default="ddp_scaling.log", help="every run's full output")
    ap.add_argument("--out", help="also write the table here")
    a = ap.parse_args()
    if a.worker:
        worker(a)
        return

    gpus = a.gpus
    if not gpus:
        import torch  # only the driver's GPU count; each rank imports its own

        gpus = torch.cuda.device_count()
    if gpus < 1:
        sys.exit("ddp_scaling: no CUDA GPU here")
    sizes = sorted({int(s) for s in a.sizes.split(",")} if a.sizes else {1, gpus})
    models = [m.strip() for m in a.models.split(",") if m.strip()]
    for m in models:
        if m not in MODELS:
            sys.exit(f"ddp_scaling: unknown model {m}: expected one of {', '.join(MODELS)}")
    if not a.no_rtx:
        for path in (a.rtx_run, a.rtx_bench):
            if not os.access(path, os.X_OK):
                sys.exit(f"ddp_scaling: {path} is missing: run `tools/gpu-build --bench ddp_step "
                         f"--bin rtx-run -p rtx-workspace -p rtx-run` where Rust is, and bring .gpu/ here (or pass --no-rtx)")
    timing = ["--warmup", str(a.warmup), "--blocks", str(a.blocks), "--steps", str(a.steps)]
    modes = [] if a.no_torch else (["eager"] if a.no_compile else ["eager", "compile"])

    results = []
    tmp = tempfile.mkdtemp(prefix="ddp_scaling.")
    with open(a.log, "w") as log:
        for n in sizes:
            for m in models:
                configs = []
                if not a.no_rtx:
                    j = os.path.join(tmp, f"rtx-{m}-{n}.json")
                    configs.append(("rtx", "ddp", j, [a.rtx_run, "--nproc-per-node", str(n), "--",
                                                       a.rtx_bench, "--model", m, "--json", j] + timing))
                for mode in modes:
                    j = os.path.join(tmp, f"torch-{mode}-{m}-{n}.json")
                    configs.append(("pytorch", mode, j, [
                        sys.executable, "-m", "torch.distributed.run", "--standalone",
                        "--nproc-per-node", str(n), os.path.abspath(__file__), "--worker",
                        "--mode", mode, "--model", m, "--json", j] + timing))
                for framework, mode, j, cmd in configs:
                    r = run_one(cmd, j, a.timeout, log)
                    r.update({"framework": framework, "mode": mode, "model": m, "world_size": n})
                    results.append(r)

    # Scaling efficiency: throughput on n GPUs over n times the same configuration's on 1.
    one = {(r["framework"], r["mode"], r["model"]): r["samples_per_s"]
           for r in results if r["world_size"] == 1 and "error" not in r}
    for r in results:
        base = one.get((r["framework"], r["mode"], r["model"]))
        if "error" not in r and base:
            r["scaling_efficiency"] = r["samples_per_s"] / (r["world_size"] * base)

    device = next((r["device"] for r in results if r.get("device")), "?")
    with open(a.json, "w") as f:
        json.dump({"device": device, "gpus": gpus, "sizes": sizes, "results": results}, f, indent=2)

    name = {("rtx", "ddp"): "rtx DDP (captured step)", ("pytorch", "eager"): "PyTorch DDP eager",
            ("pytorch", "compile"): "PyTorch DDP torch.compile"}
    lines = [f"DDP on {device}, world sizes {sizes} (per-rank batch fixed; GPT: 32 x 256 tokens, "
             f"MLP: 512 rows); full results in {a.json}", "",
             "| model | configuration | GPUs | ms/step | samples/s | tokens/s | scaling | peak MiB/rank (alloc/reserved) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        label = name.get((r["framework"], r["mode"]), f"{r['framework']} {r['mode']}")
        if "error" in r:
            lines.append(f"| {r['model']} | {label} | {r['world_size']} | failed: {r['error']} | | | | |")
            continue
        eff = r.get("scaling_efficiency")
        peak = f"{max(r['peak_allocated_mib']):.0f}/{max(r['peak_reserved_mib']):.0f}"
        tokens = f"{r['tokens_per_s']:.0f}" if r["model"] != "mlp" else "-"
        lines.append(f"| {r['model']} | {label} | {r['world_size']} | {r['ms_per_step']:.3f} | "
                     f"{r['samples_per_s']:.0f} | {tokens} | {'-' if eff is None else f'{eff:.2f}'} | {peak} |")
    text = "\n".join(lines)
    print()
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
