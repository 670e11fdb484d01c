"""PyTorch's side of benches/cpu.rs: the same ops, shapes and thread count, timed the same way
(median of many runs after a warm-up). Prints one line per benchmark in milliseconds."""
import statistics
import sys
import time

import torch

threads = int(sys.argv[1]) if len(sys.argv) > 1 else torch.get_num_threads()
torch.set_num_threads(threads)


def bench(name, fn, repeats=30):
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    ms = statistics.median(times) * 1e3
    print(f"{name}\t{ms:.3f} ms")
    return ms


torch.manual_seed(0)
a = torch.randn(1024, 1024)
b = torch.randn(1024, 1024)
ms = bench("matmul_f32 1024x1024x1024", lambda: a @ b)
print(f"  {2 * 1024**3 / ms / 1e6:.1f} GFLOP/s")

x = torch.randn(1 << 24)
f = torch.nn.functional.gelu
bench("elementwise_f32 gelu_tanh(x*1.5+0.5) 2^24", lambda: f(x * 1.5 + 0.5, approximate="tanh"))
bench("elementwise_f32 copy 2^24", lambda: x.clone())
print(f"torch {torch.__version__}, {threads} threads")
