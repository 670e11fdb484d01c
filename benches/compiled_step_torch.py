"""PyTorch's side of benches/compiled_step.rs, on the same GPU in the same call: a training
step of the MLP 784-2048-2048-10 (GELU in its tanh form, cross-entropy, Adam lr 1e-3) at
batch 512, in f32 (no TF32) and in bf16 autocast, run four ways: eager, torch.compile, the
whole step captured in one CUDA graph (capturable Adam, torch.cuda.graph), and its 8 GEMMs
alone (3 forward, 3 weight gradients, 2 input gradients) captured in a CUDA graph.

Usage: python3 benches/compiled_step_torch.py [--rtx-json FILE] [--out FILE]
Each figure is the median over 15 blocks of 20 consecutive steps, host clock after
torch.cuda.synchronize(), per step; with --rtx-json the rtx figures join the table.
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, IN, HID, OUT = 512, 784, 2048, 10


def per_step_ms(fn, warmup=10, blocks=15, steps=20):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(blocks):
        t = time.perf_counter()
        for _ in range(steps):
            fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t) * 1e3 / steps)
    return statistics.median(times)


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(IN, HID), nn.GELU(approximate="tanh"),
        nn.Linear(HID, HID), nn.GELU(approximate="tanh"),
        nn.Linear(HID, OUT),
    ).cuda()


def data():
    g = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn(BATCH, IN, device="cuda", generator=g)
    y = torch.randint(0, OUT, (BATCH,), device="cuda", generator=g)
    return x, y


def step_fn(model, opt, x, y, bf16):
    def step():
        opt.zero_grad(set_to_none=False)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def eager(bf16):
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    return per_step_ms(step_fn(model, opt, *data(), bf16))


def compiled(bf16):
    model = torch.compile(mlp())
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    return per_step_ms(step_fn(model, opt, *data(), bf16), warmup=20)


def graphed(bf16):
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, capturable=True)
    x, y = data()
    step = step_fn(model, opt, x, y, bf16)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=False)
    with torch.cuda.graph(g):
        step()
    return per_step_ms(g.replay)


def gemms_alone(bf16):
    dt = torch.bfloat16 if bf16 else torch.float32
    r = lambda *s: torch.randn(*s, device="cuda", dtype=dt)
    x, w1, w2, w3 = r(BATCH, IN), r(HID, IN), r(HID, HID), r(OUT, HID)
    h1, h2, d3, d2, d1 = r(BATCH, HID), r(BATCH, HID), r(BATCH, OUT), r(BATCH, HID), r(BATCH, HID)

    def gemms():
        x @ w1.t(); h1 @ w2.t(); h2 @ w3.t()          # forward
        d3.t() @ h2; d2.t() @ h1; d1.t() @ x          # weight gradients
        d3 @ w3; d2 @ w2                              # input gradients (none for x)

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            gemms()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        gemms()
    return per_step_ms(g.replay)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rtx-json", help="rtx's figures, from `compiled_step --json FILE`")
    p.add_argument("--out", help="also write the Markdown table here")
    a = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    rows = {}
    for bf16 in (False, True):
        name = "bf16" if bf16 else "f32"
        for how, fn in (("eager", eager), ("compile", compiled), ("graph", graphed),
                        ("gemms", gemms_alone)):
            try:
                rows[(name, how)] = fn(bf16)
            except Exception as e:  # a failure of one row must not hide the others
                rows[(name, how)] = None
                print(f"{name} {how}: {type(e).__name__}: {e}")
    rtx = {}
    if a.rtx_json:
        with open(a.rtx_json) as f:
            rtx = json.load(f)
    lines = [
        f"GPU {torch.cuda.get_device_name()}, PyTorch {torch.__version__} (CUDA {torch.version.cuda})",
        "",
        "| step | PyTorch eager | torch.compile | PyTorch CUDA graph | 8 GEMMs alone | rtx | rtx / graph | rtx / GEMMs |",
        "|---|---|---|---|---|---|---|---|",
    ]
    fmt = lambda v: "—" if v is None else f"{v:.3f} ms"
    for name in ("f32", "bf16"):
        for label, key in (("captured", f"{name}_captured"), ("static, uncaptured", f"{name}_static"),
                           ("tape (eager)", f"{name}_tape")):
            r = rtx.get(key)
            g, k = rows[(name, "graph")], rows[(name, "gemms")]
            ratio = lambda d: "—" if r is None or d is None else f"{r / d:.2f}"
            lines.append(
                f"| {name}, rtx {label} | {fmt(rows[(name, 'eager')])} | {fmt(rows[(name, 'compile')])} | "
                f"{fmt(g)} | {fmt(k)} | {fmt(r)} | {ratio(g)} | {ratio(k)} |")
    md = "\n".join(lines) + "\n"
    print(md)
    print(json.dumps({f"{k[0]}_{k[1]}": v for k, v in rows.items()}))
    if a.out:
        with open(a.out, "w") as f:
            f.write(md)


if __name__ == "__main__":
    main()
