"""Sums an `ncu --csv --page raw --metrics gpu__time_duration.sum` log by kernel name into a
table of the kernels that took the most GPU time, with launch counts and shares, for reading
where a profiled step goes (benches/gpt_step's `--phases-only` profiles one step).

Usage: python3 benches/ncu_table.py NCU_CSV [ROWS] [--last N]

`--last N` keeps only the last N launches (say the final decode steps of a run whose prefill
came first).
"""
import csv
import sys
from collections import defaultdict

METRIC = "gpu__time_duration.sum"
TO_US = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}


def main():
    args = sys.argv[1:]
    last = None
    if "--last" in args:
        i = args.index("--last")
        last = int(args[i + 1])
        del args[i : i + 2]
    path = args[0]
    rows = int(args[1]) if len(args) > 1 else 40
    with open(path, newline="") as f:
        # ncu prints its own notices around the CSV; its lines are the quoted ones.
        reader = csv.DictReader(l for l in f if l.startswith('"'))
        records = list(reader)
    # The raw page's first row under the header holds the units.
    scale = TO_US[records[0][METRIC]]
    total, count = defaultdict(float), defaultdict(int)
    launches = records[1:]
    if last is not None:
        launches = launches[-last:]
    for r in launches:
        name = r["Kernel Name"][:110]
        total[name] += float(r[METRIC].replace(",", "")) * scale
        count[name] += 1
    all_us = sum(total.values())
    print(f"{sum(count.values())} launches, {all_us / 1e3:.3f} ms of kernel time in all")
    print(f"{'us':>10} {'share':>6} {'n':>5}  kernel")
    for name, t in sorted(total.items(), key=lambda kv: -kv[1])[:rows]:
        print(f"{t:10.1f} {100 * t / all_us:5.1f}% {count[name]:5d}  {name}")


if __name__ == "__main__":
    main()
