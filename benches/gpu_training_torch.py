"""PyTorch's side of benches/gpu_training.rs, on the same GPU in the same call: the MNIST MLP
784-256-10 and LeNet-style CNN training steps at batch 128 with Adam (lr 1e-3), one Adam
update over 100 parameter tensors of mixed sizes (25 Linear 512x512 and 25 Linear 1024->64,
weights and biases) with the default (foreach) and the fused implementation, counting the
kernels each launches, and the reserved bytes over 10,000 MLP steps.

Usage: python3 benches/gpu_training_torch.py
Times are host wall clock after torch.cuda.synchronize(), medians after a warm-up, as rtx's.
"""
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from training_torch import Lenet, Mlp


def time_ms(fn, warmup, repeats):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def kernels_launched(fn):
    """The number of GPU kernels and memory operations one call of `fn` runs."""
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def step_fn(model, x, y, **adam):
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, **adam)

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()

    return step


def main():
    dev = torch.device("cuda")
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
    torch.manual_seed(0)
    x = torch.rand(128, 1, 28, 28, device=dev)
    y = torch.tensor([(i * 7) % 10 for i in range(128)], device=dev)

    for name, model, warmup, repeats in [("mlp", Mlp(), 20, 300), ("cnn", Lenet(), 10, 200)]:
        step = step_fn(model.to(dev), x, y)
        step()
        print(f"{name} step kernels: {kernels_launched(step)}")
        print(f"{name}_step_b128_ms {time_ms(step, warmup, repeats):.4f}")

    layers = [nn.Linear(512, 512) for _ in range(25)] + [nn.Linear(1024, 64) for _ in range(25)]
    params = [p for l in layers for p in l.to(dev).parameters()]
    for p in params:
        p.grad = torch.ones_like(p)
    count = sum(p.numel() for p in params)
    for variant, kwargs in [("foreach", {"foreach": True}), ("fused", {"fused": True})]:
        opt = torch.optim.Adam(params, lr=1e-3, **kwargs)
        opt.step()
        launched = kernels_launched(opt.step)
        print(f"adam {variant} over {len(params)} tensors ({count} elements): {launched} kernels")
        print(f"adam_100_tensors_{variant}_ms {time_ms(opt.step, 10, 100):.4f}")

    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    model = Mlp().to(dev)
    step = step_fn(model, x, y)
    start = time.perf_counter()
    trace = []
    for i in range(1, 10_001):
        step()
        if i == 10 or i % 1000 == 0:
            torch.cuda.synchronize()
            trace.append((i, torch.cuda.memory_reserved(), torch.cuda.memory_allocated(),
                          torch.cuda.max_memory_reserved()))
    secs = time.perf_counter() - start
    print(f"memory trace over 10000 mlp steps ({secs:.2f} s):")
    print("step reserved_bytes allocated_bytes peak_reserved_bytes")
    for row in trace:
        print(*row)


if __name__ == "__main__":
    main()
