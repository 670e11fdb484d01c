#!/usr/bin/env bash
# gpu_check.sh: what to build here and run on the H200 to check the tensor-core work of
# branch `tensor-cores` (issue 22, part 1). Nothing here needs a GPU to build.
#
# 1. On the development machine, from the repository root (this worktree):
#      tools/gpu-build --test devices --bench tc_gemm
#    (../shared/tools/gpu-build is the same script). This leaves .gpu/bin/devices and
#    .gpu/bin/tc_gemm (release, stripped).
# 2. Copy .gpu/ to the GPU machine (the repository root there) and run this script there:
#      bash gpu_check.sh
#
# What it runs:
# - the GPU-vs-CPU test of the new intrinsics and of the GEMM: `tensor_core_kernels_match_the_cpu`
#   in tests/devices/tensor_cores.rs. One warp's cp_async + ldmatrix_x4 / ldmatrix_x2_trans +
#   mma_m16n8k16 (`warp_mma`), then `rtx::kernels::matmul_tc` at 130x136x72 (ragged M and N),
#   33x40x9 (unaligned K: the plain-load path) and 256x128x512, in bf16 and f16. Inputs are
#   multiples of 1/8, so every device must give the exact product rounded once: the GPU is held
#   to the plain product exactly, and to the CPU's emulation of the same kernel. It prints
#   "skipped: no CUDA device" where there is no GPU (then it proves nothing).
# - the bench: matmul_tc at 4096^3 bf16 against cuBLAS (a.matmul(&b), which goes to cuBLASLt),
#   5 warm-ups, median of 50 runs by CUDA events, after checking the result against cuBLAS
#   (relative Frobenius distance below 1e-2). It prints both TFLOP/s and the fraction of
#   cuBLAS (target: at least 50%). For cuBLAS called directly, `.gpu/bin/gpu_ops --only
#   cublas_4096_bf16` (build it with --bench gpu_ops) gives the same ceiling.
set -euo pipefail
cd "$(dirname "$0")"
.gpu/bin/devices --test-threads=1 --nocapture tensor_core
.gpu/bin/tc_gemm --n 4096 --reps 50
# The first launch compiles the kernel with NVRTC; a compile error names the PTX line. If the
# kernel is slower than hoped, useful knobs in rtx-kernels/src/kernels/tensor_gemm.rs are
# STAGES (3, with IN_FLIGHT = STAGES - 2 and the shared arrays STAGES * 2048 words; 3 stages
# fill the 48 KiB of static shared memory) and the warp tile; then
#   ncu --set full -k regex:matmul_tc .gpu/bin/tc_gemm --n 4096 --reps 3
