"""What a chain of dependent kernel launches costs inside one CUDA graph, with no work in
them: the floor under a decoding step made of many small launches (a Llama step at batch 1
is 30 blocks of five launches and the head, about 150).

Captures N launches of a one-element in-place add (each depends on the one before, as a
decoding step's do) into a CUDA graph, replays it after a warm-up, and reports the median
replay time over repeats, per graph and per launch, for several N. Then the same with
kernels that each read a few hundred kilobytes (a 576 x 576 f32 matrix-vector product),
closer to a decoding step's products (two `torch.mv` a step, each reading the other's
output: cuBLAS's gemv, one kernel a product).

Usage (on the GPU machine): python3 benches/graph_launch_floor.py [--reps 50]
"""
import argparse
import statistics

import torch


def replay_ms(graph, reps):
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def capture(step, n):
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            for _ in range(n):
                step()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(n):
            step()
    return graph


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--reps", type=int, default=50)
    a = p.parse_args()
    if not torch.cuda.is_available():
        print("graph_launch_floor: skipped: no CUDA device")
        return
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    x = torch.ones(1, device="cuda")
    w = torch.randn(576, 576, device="cuda")
    v = torch.randn(576, device="cuda")
    u = torch.empty(576, device="cuda")

    def two_products():
        torch.mv(w, v, out=u)
        torch.mv(w, u, out=v)

    cases = [
        ("empty add, 1 element", lambda: x.add_(1.0), 1),
        ("f32 matvec 576 x 576", two_products, 2),
    ]
    print("| launches | kernel | graph ms | us a launch |")
    print("|---|---|---|---|")
    for name, step, per_step in cases:
        for n in (10, 150, 600):
            g = capture(step, n // per_step)
            replay_ms(g, 5)
            ms = replay_ms(g, a.reps)
            kernels = n // per_step * per_step
            print(f"| {kernels} | {name} | {ms:.4f} | {1e3 * ms / kernels:.2f} |")


if __name__ == "__main__":
    main()
