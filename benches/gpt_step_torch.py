"""PyTorch's side of benches/gpt_step (rtx), on the same GPU in the same call: a training step
of a GPT-style decoder (6 pre-norm causal blocks, d_model 512, 8 heads, sequence 256, batch
32, vocabulary 8192, GELU in its tanh form, untied head, cross-entropy over the 8192 tokens)
in bf16 autocast with AdamW (lr 3e-4, PyTorch's defaults otherwise), run three ways: eager,
torch.compile (the model compiled, default mode), and the whole step captured in one CUDA
graph (capturable AdamW, torch.cuda.graph). Attention is F.scaled_dot_product_attention with
is_causal=True, as nanoGPT writes it (flash attention on this GPU).

Usage: python3 benches/gpt_step_torch.py [--rtx-json FILE] [--out FILE] [--profile]
--profile prints instead where the GPU time of an eager and of a compiled step goes
(torch.profiler, kernels by total time), for setting beside rtx's kernel profile.
Each figure is the median over 10 blocks of 10 consecutive steps, host clock after
torch.cuda.synchronize(), per step; with --rtx-json the rtx figure joins the table.
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, SEQ, D, HEADS, LAYERS, VOCAB = 32, 256, 512, 8, 6, 8192


def per_step_ms(fn, warmup=5, blocks=10, steps=10):
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


def data():
    # The same token stream as the rtx bench: id i is (i * 2654435761) mod 8192.
    stream = (torch.arange(BATCH * SEQ + 1, dtype=torch.int64) * 2654435761) % VOCAB
    ids = stream[:-1].view(BATCH, SEQ).cuda()
    nxt = stream[1:].cuda()
    pos = torch.arange(SEQ, device="cuda")
    return ids, pos, nxt


def model():
    torch.manual_seed(0)
    return Gpt().cuda()


def step_fn(m, opt, ids, pos, nxt, cache=True):
    def step():
        opt.zero_grad(set_to_none=False)
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=cache):
            loss = F.cross_entropy(m(ids, pos), nxt)
        loss.backward()
        opt.step()
        return loss
    return step


def graphed(ids, pos, nxt):
    m = model()
    opt = torch.optim.AdamW(m.parameters(), lr=3e-4, capturable=True)
    step = step_fn(m, opt, ids, pos, nxt, cache=False)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step()
    return g.replay


def profile(ids, pos, nxt):
    from torch.profiler import ProfilerActivity, profile as prof

    for name, compiled in [("eager", False), ("torch.compile", True)]:
        m = model()
        opt = torch.optim.AdamW(m.parameters(), lr=3e-4)
        step = step_fn(torch.compile(m) if compiled else m, opt, ids, pos, nxt)
        for _ in range(5):
            step()
        torch.cuda.synchronize()
        with prof(activities=[ProfilerActivity.CUDA]) as p:
            for _ in range(5):
                step()
            torch.cuda.synchronize()
        print(f"== {name}: GPU time of 5 steps, kernels by total time")
        print(p.key_averages().table(sort_by="cuda_time_total", row_limit=30, max_name_column_width=90))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rtx-json")
    ap.add_argument("--out")
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    ids, pos, nxt = data()
    if a.profile:
        profile(ids, pos, nxt)
        return
    rows = {}

    m = model()
    opt = torch.optim.AdamW(m.parameters(), lr=3e-4)
    rows["PyTorch eager"] = per_step_ms(step_fn(m, opt, ids, pos, nxt))
    loss0 = step_fn(m, opt, ids, pos, nxt)().item()

    m = model()
    cm = torch.compile(m)
    opt = torch.optim.AdamW(m.parameters(), lr=3e-4)
    t = time.perf_counter()
    step_fn(cm, opt, ids, pos, nxt)()
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - t
    rows["torch.compile"] = per_step_ms(step_fn(cm, opt, ids, pos, nxt))

    rows["PyTorch CUDA graph"] = per_step_ms(graphed(ids, pos, nxt))

    rtx = None
    if a.rtx_json:
        with open(a.rtx_json) as f:
            rtx = json.load(f)
        rows["rtx MixedStep (captured)"] = rtx["bf16_captured"]

    compiled = rows["torch.compile"]
    lines = [
        f"GPT 6x512, 8 heads, seq {SEQ}, batch {BATCH}, vocab {VOCAB}, bf16 autocast, AdamW, "
        f"on {torch.cuda.get_device_name()} (PyTorch {torch.__version__}; torch.compile's first "
        f"step took {compile_s:.0f} s; PyTorch eager loss after the timed steps {loss0:.3f})",
        "",
        "| step | ms | vs torch.compile |",
        "|---|---|---|",
    ]
    for name, ms in rows.items():
        lines.append(f"| {name} | {ms:.3f} | {ms / compiled:.2f} |")
    if rtx:
        lines.append("")
        lines.append(
            f"rtx: {rtx['launches']} launches a step, {rtx['params']} parameters, "
            f"{rtx['tflop_per_step']:.2f} TFLOP a step, loss {rtx['first_loss']:.3f} -> "
            f"{rtx['last_loss']:.3f}"
        )
    text = "\n".join(lines)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
