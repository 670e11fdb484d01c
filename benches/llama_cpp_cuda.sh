#!/usr/bin/env bash
# The llama.cpp CUDA anchor for benches/llama_decode: builds llama.cpp (packed by
# benches/llama_cpp_cuda_pack.sh into .gpu/llama_cpp.tar.xz) with CUDA for sm_90 on the GPU
# machine, then times a GGUF file with llama-bench (batch 1: a 512-token prefill, and 64
# decode steps after 0 and 64 tokens of context, flash attention off and on) and
# llama-batched-bench (64 decode steps after a 64-token prompt, 1 and 32 sequences), all
# layers on the GPU.
#
# usage (on the GPU machine, from the project root):
#   benches/llama_cpp_cuda.sh build LOGDIR          # about what its log says, on 16 cores
#   benches/llama_cpp_cuda.sh bench MODEL.gguf LOGDIR
# The tables go to LOGDIR/llama_cpp_bench.md and LOGDIR/llama_cpp_batched.log.
set -euo pipefail
build=${LLAMA_CPP_BUILD:-/tmp/llama_cpp_build}
src=$build/llama.cpp
bin=$src/build/bin
case $1 in
build)
  logs=$2
  mkdir -p "$build" "$logs"
  tar xJf .gpu/llama_cpp.tar.xz -C "$build"
  # NCCL's headers are not on the GPU machine, and one GPU needs none.
  cmake -S "$src" -B "$src/build" -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_NCCL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_OPENSSL=OFF > "$logs/llama_cpp_cmake.log" 2>&1
  start=$(date +%s)
  cmake --build "$src/build" -j "$(nproc)" --target llama-bench llama-batched-bench \
    > "$logs/llama_cpp_build.log" 2>&1
  echo "llama.cpp built in $(($(date +%s) - start)) s"
  ;;
bench)
  model=$2
  logs=$3
  "$bin/llama-bench" -m "$model" -ngl 99 -fa 0,1 -p 512 -n 64 -d 0,64 -r 5 -o md \
    > "$logs/llama_cpp_bench.md" 2> "$logs/llama_cpp_bench.err"
  "$bin/llama-batched-bench" -m "$model" -ngl 99 -fa on -c 8192 -b 2048 -ub 512 \
    -npp 64 -ntg 64 -npl 1,32 > "$logs/llama_cpp_batched.log" 2>&1
  ;;
*)
  echo "usage: $0 build LOGDIR | bench MODEL.gguf LOGDIR" >&2
  exit 2
  ;;
esac
