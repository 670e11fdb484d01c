#!/usr/bin/env python3
"""Two builds of rtx side by side on one GPU: did a change cost speed?

Runs the GPU benches of build A and build B alternately (A, B, A, B, ...) in one sitting, so
clock and thermal drift fall on both, and prints for each timing the best of each build's
runs and the ratio B / A (below 1 means B is faster).

    tools/gpu-build --bench gpu_ops --bench compiled_step --bench gpt_step   # build B here
    # put build A's executables (same names) in .gpu/old/, then on the GPU machine:
    python3 benches/ab_builds.py .gpu/old .gpu/bin --rounds 3 --out ab.md

Timings read from each bench's --json file: gpu_ops rows (`ms`), compiled_step's MLP steps
(`f32_captured`, `bf16_captured`, ...) and gpt_step's captured step (`bf16_captured`).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile


def flatten(prefix, value, out):
    """Numeric leaves of a bench's JSON that are times in milliseconds."""
    if isinstance(value, dict):
        for k, v in value.items():
            flatten(f"{prefix}.{k}" if prefix else k, v, out)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        out[prefix] = float(value)


def timings(bench, report):
    """The times of one run, by name."""
    out = {}
    if bench == "gpu_ops":
        for row in report.get("rows", []):
            if isinstance(row.get("ms"), (int, float)):
                out[f"gpu_ops {row['id']}"] = float(row["ms"])
    elif bench == "compiled_step":
        for k in ("f32_tape", "f32_static", "f32_captured", "bf16_captured"):
            if isinstance(report.get(k), (int, float)):
                out[f"mlp {k}"] = float(report[k])
    elif bench == "gpt_step":
        if isinstance(report.get("bf16_captured"), (int, float)):
            out["gpt bf16_captured"] = float(report["bf16_captured"])
        leaves = {}
        flatten("", report.get("uncaptured_phases_ms", {}), leaves)
        for k, v in leaves.items():
            out[f"gpt uncaptured {k}"] = v
    return out


def run(bin_dir, bench, log):
    """Runs one bench binary with --json and returns its report."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    exe = os.path.join(bin_dir, bench)
    proc = subprocess.run([exe, "--json", path], capture_output=True, text=True)
    log.write(f"== {exe}\n{proc.stdout}{proc.stderr}\n")
    if proc.returncode != 0:
        raise SystemExit(f"{exe} failed ({proc.returncode}); see the log")
    with open(path) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a", help="directory of build A's bench executables (the baseline)")
    ap.add_argument("b", help="directory of build B's bench executables (the change)")
    ap.add_argument("--benches", default="gpu_ops,compiled_step,gpt_step")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", help="also write the table to this file")
    ap.add_argument("--log", default="ab_builds.log")
    args = ap.parse_args()
    best = {}
    with open(args.log, "w") as log:
        for r in range(args.rounds):
            for bench in args.benches.split(","):
                for side, d in (("A", args.a), ("B", args.b)):
                    print(f"round {r + 1}: {bench} ({side})", file=sys.stderr, flush=True)
                    for name, ms in timings(bench, run(d, bench, log)).items():
                        key = (name, side)
                        best[key] = min(best.get(key, float("inf")), ms)
            # The table so far, after every round, so a run cut short still reports.
            report(best, r + 1, args.out)


def report(best, rounds, out):
    names = sorted({n for n, _ in best})
    lines = [
        f"| timing (best of {rounds} runs, ms) | A | B | B / A |",
        "|---|---|---|---|",
    ]
    for n in names:
        a, b = best.get((n, "A")), best.get((n, "B"))
        if a and b:
            lines.append(f"| {n} | {a:.4f} | {b:.4f} | {b / a:.3f} |")
        else:
            lines.append(f"| {n} | {a} | {b} | - |")
    table = "\n".join(lines)
    print(table, flush=True)
    if out:
        with open(out, "w") as f:
            f.write(table + "\n")


if __name__ == "__main__":
    main()
