"""PyTorch's side of benches/training.rs: one training step (forward, cross-entropy, backward,
Adam lr 1e-3) at batch 128 of the MNIST MLP 784-256-10 and of the LeNet-5-style CNN, the same
architectures as examples/mnist/models.rs, on CPU with the same thread count as rtx (rayon's
default: every core). Also times one epoch (468 full batches) of each from tensors in memory.

Usage: python3 benches/training_torch.py [--threads N] [--epoch]
Prints median milliseconds per step over many repeats after a warm-up.
"""
import argparse
import os
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


# ANCHOR: mlp
class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 256)
        self.fc2 = nn.Linear(256, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x.flatten(1))))
# ANCHOR_END: mlp


class Lenet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 5, padding=2)
        self.conv2 = nn.Conv2d(16, 32, 5)
        self.fc1 = nn.Linear(800, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def time_step(model, x, y, repeats):
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()

    for _ in range(20):
        step()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def time_epoch(model, batches):
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    t = time.perf_counter()
    for x, y in batches:
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()
    return time.perf_counter() - t


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--epoch", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    x = torch.rand(128, 1, 28, 28)
    y = torch.arange(128) * 7 % 10
    print(f"torch {torch.__version__}, {args.threads} threads")
    for name, model, repeats in [("mlp_784_256_10_adam", Mlp(), 500), ("lenet5_adam", Lenet(), 100)]:
        print(f"{name}: {time_step(model, x, y, repeats):.3f} ms/step (median)")
    if args.epoch:
        batches = [(torch.rand(128, 1, 28, 28), torch.randint(0, 10, (128,))) for _ in range(468)]
        for name, model in [("mlp", Mlp()), ("lenet5", Lenet())]:
            print(f"{name}: {time_epoch(model, batches):.2f} s/epoch of 468 batches")


if __name__ == "__main__":
    main()
