"""PyTorch's side of rtx-backends/benches/cuda_gemm.rs: torch.matmul of 4096x4096 operands,
timed with CUDA events (median of 30 after 5 warm-ups), printed in the same format.

Run in the same session as the Rust bench, on the same GPU: python3 benches/cuda_gemm_torch.py
"""
import torch


def data(n, seed, dtype):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return (torch.rand(n, n, generator=g, device="cuda") * 2 - 1).to(dtype)


def time(n, dtype, reps=30):
    a, b = data(n, 1, dtype), data(n, 2, dtype)
    for _ in range(5):
        torch.matmul(a, b)
    torch.cuda.synchronize()
    ms = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        c = torch.matmul(a, b)
        end.record()
        end.synchronize()
        del c
        ms.append(start.elapsed_time(end))
    ms.sort()
    return ms[reps // 2]


def main():
    n = 4096
    flop = 2.0 * n ** 3
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
    for name, tf32, dtype in [("f32", False, torch.float32), ("f32 tf32", True, torch.float32),
                              ("bf16", False, torch.bfloat16)]:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        ms = time(n, dtype)
        print(f"torch gemm {n} {name:9}: {ms:8.3f} ms  {flop / ms / 1e9:7.1f} TFLOP/s")
    torch.backends.cuda.matmul.allow_tf32 = False
    print(f"torch matmul 64 f32: {small(64, 2000):.2f} us per call (host wall clock)")


def small(n, calls):
    """Microseconds per n^3 f32 product over back-to-back calls, host clock to GPU done."""
    import time as clock
    a = data(n, 3, torch.float32)
    for _ in range(10):
        torch.matmul(a, a)
    torch.cuda.synchronize()
    t = clock.perf_counter()
    for _ in range(calls):
        torch.matmul(a, a)
    torch.cuda.synchronize()
    return (clock.perf_counter() - t) * 1e6 / calls


if __name__ == "__main__":
    main()
