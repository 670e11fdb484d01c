#!/usr/bin/env bash
# flash_attention_ab.sh: builds of the attention bench side by side with PyTorch's SDPA, in one
# sitting on one GPU, so a kernel change is timed beside the build before it and the anchor.
#
# Here, from the repository root: the device tests' build first (tools/gpu-build empties .gpu),
# then each revision's bench into .gpu/v/NAME/ (built in a worktree, so .gpu and the checkout
# stay as they are; target/ab holds their builds):
#   GPU_BUILD_XZ=1 tools/gpu-build --test devices
#   benches/flash_attention_ab.sh build new HEAD
#   benches/flash_attention_ab.sh build old REV
# There (from the repository root, .gpu carried):
#   bash benches/flash_attention_ab.sh new old
#
# What it runs, each log under $OUT (or ./ab-logs): the device tests `attention` of .gpu/bin
# (if there); every size of the first build, `flash_attention_torch.py`, every size of the
# other builds; then two rounds of the 256-key rows alone (`--seq 256`), builds and PyTorch
# alternated; then `ncu` (kernel durations) of the first build's 256-key launches. LIM (seconds,
# default 420) stops starting new runs past it, so one call of 600 s holds it all.
set -u
if [ "${1:-}" = build ]; then
  [ $# -eq 3 ] || { echo "usage: $0 build NAME REV"; exit 2; }
  root=$(git rev-parse --show-toplevel)
  wt=$(mktemp -d)
  git -C "$root" worktree add --quiet --detach "$wt" "$3" || exit 1
  (cd "$wt" && CARGO_TARGET_DIR="$root/target/ab" GPU_BUILD_XZ=1 tools/gpu-build --bench flash_attention)
  rc=$?
  mkdir -p "$root/.gpu/v/$2"
  [ $rc -eq 0 ] && cp "$wt/.gpu/xz/flash_attention.xz" "$root/.gpu/v/$2/"
  git -C "$root" worktree remove --force "$wt"
  exit $rc
fi
[ $# -ge 1 ] || { echo "usage: $0 BUILD [BUILD...]   (each .gpu/v/BUILD/flash_attention[.xz])"; exit 2; }
out=${OUT:-ab-logs}
mkdir -p "$out"
[ -f .gpu/unpack ] && bash .gpu/unpack
for v in "$@"; do
  f=.gpu/v/$v/flash_attention
  # The compressed build, where there is one, is the build (a binary beside it may be stale).
  [ -f "$f.xz" ] && python3 -c "
import lzma, os, sys
src, dst = sys.argv[1] + '.xz', sys.argv[1]
with lzma.open(src) as i, open(dst, 'wb') as o:
    o.write(i.read())
os.chmod(dst, 0o755)" "$f"
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
late() { [ "$(el)" -gt "${LIM:-420}" ]; }
if [ -x .gpu/bin/devices ]; then
  timeout 150 .gpu/bin/devices --test-threads=1 attention > "$out/devices_attention.log" 2>&1
  echo "devices attention rc=$? t=$(el)" | tee -a "$out/summary.txt"
  grep -E "test result|FAILED|panicked" "$out/devices_attention.log" | head -5
fi
bench() { # build, args, tag
  late && return
  timeout 150 ".gpu/v/$1/flash_attention" $2 > "$out/fa_$1_$3.log" 2>&1
  echo "rtx $1 $3 rc=$? t=$(el)" >> "$out/summary.txt"
}
torch() { # args, tag
  late && return
  timeout 120 python3 benches/flash_attention_torch.py $1 > "$out/torch_$2.log" 2>&1
  echo "torch $2 rc=$? t=$(el)" >> "$out/summary.txt"
}
first=$1
bench "$first" "" all
torch "" all
for v in "${@:2}"; do bench "$v" "" all; done
for round in 1 2; do
  for v in "$@"; do bench "$v" "--seq 256" "t256_$round"; done
  torch "--seq 256" "t256_$round"
done
if ! late && command -v ncu > /dev/null; then
  timeout 100 ncu --clock-control none --metrics gpu__time_duration.sum -k regex:flash_attn \
    --launch-count 40 ".gpu/v/$first/flash_attention" --seq 256 --reps 1 > "$out/ncu_t256.log" 2>&1
  echo "ncu rc=$? t=$(el)" >> "$out/summary.txt"
  # Median duration of each kernel's launches.
  python3 - "$out/ncu_t256.log" <<'PY'
import collections, re, sys
times, name = collections.defaultdict(list), None
for line in open(sys.argv[1], errors="replace"):
    if re.match(r"^\s+\S+.*\(\d+, \d+, \d+\)x\(\d+, \d+, \d+\)", line):
        name = line.strip().split(" (")[0]
    elif "gpu__time_duration.sum" in line and name:
        unit, value = line.split()[-2:]
        scale = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3}.get(unit, float("nan"))
        times[name].append(float(value.replace(",", "")) * scale)
for k, v in sorted(times.items(), key=lambda kv: -sum(kv[1])):
    print(f"{k[:64]:64s} {len(v):3d} launches, median {sorted(v)[len(v) // 2]:8.2f} us")
PY
fi
cat "$out/summary.txt"
for f in "$out"/fa_*.log "$out"/torch_*.log; do
  [ -f "$f" ] || continue
  echo "== $f"
  grep -E "^\|" "$f" | grep -v -- "---"
done
