#!/usr/bin/env bash
# Packs llama.cpp's source, trimmed to what a CUDA build of llama-bench and llama-batched-bench
# needs, into .gpu/llama_cpp.tar.xz, so it travels to the GPU machine (which reaches no
# registry) and builds there with benches/llama_cpp_cuda.sh.
#
# The source is the one vendored by llama-cpp-python 0.3.36, the version the CPU anchor
# (benches/llama_cpp_cpu.py) pins, so the CPU and GPU anchors are the same llama.cpp.
# usage (from the project root): benches/llama_cpp_cuda_pack.sh [path to the sdist .tar.gz]
set -euo pipefail
root=$(git rev-parse --show-toplevel)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sdist=${1:-}
if [ -z "$sdist" ]; then
  # Straight from PyPI's index: `pip download --no-binary` would build cmake from source
  # just to read the package's metadata.
  url=$(curl -fsSL https://pypi.org/simple/llama-cpp-python/ \
    | grep -o 'https://[^"#]*/llama_cpp_python-0\.3\.36\.tar\.gz' | head -1)
  sdist=$work/llama_cpp_python-0.3.36.tar.gz
  curl -fsSL -o "$sdist" "$url"
fi
tar xzf "$sdist" -C "$work" llama_cpp_python-0.3.36/vendor/llama.cpp
src=$work/llama_cpp_python-0.3.36/vendor/llama.cpp
# Keep the build files, the library, ggml's CPU and CUDA backends, common and the two tools.
rm -rf "$src"/{models,docs,tests,examples,pocs,app,media,scripts,conversion,gguf-py,benches,requirements,.devops,.github,ci,skills}
find "$src/tools" -mindepth 1 -maxdepth 1 -type d ! -name llama-bench ! -name batched-bench -exec rm -rf {} +
find "$src/ggml/src" -mindepth 1 -maxdepth 1 -type d ! -name ggml-cpu ! -name ggml-cuda -exec rm -rf {} +
cat > "$src/tools/CMakeLists.txt" <<'CM'
# Trimmed by rtx's benches/llama_cpp_cuda_pack.sh: only the two benchmarks.
find_package(Threads REQUIRED)
llama_add_compile_flags()
add_subdirectory(batched-bench)
add_subdirectory(llama-bench)
CM
mkdir -p "$root/.gpu"
tar cJf "$root/.gpu/llama_cpp.tar.xz" -C "$src/.." llama.cpp
du -h "$root/.gpu/llama_cpp.tar.xz"
