"""Everything issue 24 asks of one multi-GPU machine, in one run (standard library only):

1. scaling: benches/ddp_scaling.py --gpus N on every model (rtx DDP beside PyTorch DDP eager and
   compiled, at 1 and N GPUs); skipped with --device cpu.
2. equivalence, per model (mlp, gpt-f32) and optimizer (the benchmark's Adam; SGD, which sees a
   wrongly scaled gradient that Adam hides): benches/ddp_check trains S steps (default 50) of a
   fixed seeded data set and global batch G on 1 rank and on N ranks (each rank G/N items a
   step, its DistributedSampler share), then `ddp_check compare` holds the N-rank parameters and
   losses to the 1-rank ones: max |dparam| / max |param| and max |dloss| / max |loss| within
   the tolerance (1e-3 Adam, 1e-4 SGD: f32 rounding in another summation order, carried over the
   steps, measured at most 4e-5 on the CPU; benches/ddp_check/compare.rs), equal parameters on
   every rank, and a falling loss.
3. faults: rank K (N-1, then 0, which serves the rendezvous store) of an N-rank ddp_check run
   SIGKILLs itself after step M (default 3), while the others are in the next step; rtx-run must
   exit within 60 s of the kill with a failing code and a line naming rank K and its signal.
   Twice per rank: the others going on into their next step's collectives (over TCP they see the
   closed connection; in NCCL they may wait until rtx-run stops them), and stalled for good
   (only rtx-run can end them).

It prints one short table last and writes everything to --json. Each rank runs on GPU
LOCAL_RANK over NCCL (--device cuda, the default) or on the CPU over TCP (--device cpu, for a
machine without GPUs; --size small is then the default).

Build where Rust is, and bring .gpu/ to the GPU machine:
  tools/gpu-build --bench ddp_check --bench ddp_step --bin rtx-run -p rtx-workspace -p rtx-run
then run there
  python3 benches/ddp_multi_gpu.py --gpus 2     (or --gpus 8)
On a machine without GPUs, with the same binaries (ranks on the CPU over TCP, small sizes):
  python3 benches/ddp_multi_gpu.py --device cpu --gpus 2
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FAULT_LIMIT_S = 60.0
# How the failing rank ends (ddp_check's --fail-how), and how rtx-run must then name it.
DEATHS = {"kill": "SIGKILLs itself", "abort": "aborts", "exit": "exits with code 3"}
SIGNALS = {"kill": "was killed by signal 9 (SIGKILL)", "abort": "was killed by signal 6 (SIGABRT)",
           "exit": "exited with code 3"}


def run(cmd, log, timeout):
    """Runs `cmd` from the repository root; returns (exit code or "timeout", output, seconds,
    the clock when it ended)."""
    print("$ " + " ".join(cmd), flush=True)
    t = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    try:
        out, _ = p.communicate(timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        # rtx-run's ranks die with it (PR_SET_PDEATHSIG).
        p.kill()
        out, _ = p.communicate()
        rc = "timeout"
    ended = time.time()
    secs = time.perf_counter() - t
    log.write(f"$ {' '.join(cmd)}\n{out}\n[exit {rc} after {secs:.1f} s]\n\n")
    log.flush()
    return rc, out, secs, ended


def tail(out, n=6):
    return "\n".join(out.strip().splitlines()[-n:])


def scaling(a, log, work):
    """ddp_scaling.py on every model; one row per model with rtx's and PyTorch's efficiency."""
    j = os.path.join(work, "ddp_scaling.json")
    cmd = [sys.executable, os.path.join(HERE, "ddp_scaling.py"), "--gpus", str(a.gpus),
           "--models", "gpt,gpt-f32,mlp", "--json", j, "--log", os.path.join(work, "ddp_scaling.log"),
           "--out", os.path.join(work, "ddp_scaling.md"),
           "--rtx-run", a.rtx_run, "--rtx-bench", os.path.join(a.bin_dir, "ddp_step")]
    cmd += a.scaling_args.split()
    rc, out, secs, _ = run(cmd, log, a.scaling_timeout)
    if rc != 0 or not os.path.exists(j):
        return [{"check": "scaling", "what": "gpt, gpt-f32, mlp", "pass": False,
                 "figures": f"ddp_scaling.py failed ({rc}): {tail(out, 3)}"}], None
    with open(j) as f:
        data = json.load(f)
    rows = []
    for m in ("gpt", "gpt-f32", "mlp"):
        mine = [r for r in data["results"] if r["model"] == m]
        failed = [f"{r['framework']} {r['mode']} on {r['world_size']}" for r in mine if "error" in r]
        figs = ", ".join(f"{r['framework']} {r['mode']} {r['ms_per_step']:.2f} ms "
                         f"({r.get('scaling_efficiency', float('nan')):.0%})"
                         for r in mine if r["world_size"] == a.gpus and "error" not in r)
        rows.append({"check": "scaling", "what": f"{m}: ms/step on {a.gpus} GPUs (efficiency)",
                     "pass": bool(mine) and not failed,
                     "figures": figs + (f"; failed: {', '.join(failed)}" if failed else "")})
    return rows, data


def equivalence(a, model, optim, log, work):
    """1 rank against N on `model` trained by `optim`, and the comparison's verdict."""
    common = ["train", "--model", model, "--optim", optim, "--device", a.device, "--size", a.size,
              "--steps", str(a.steps)]
    if a.global_batch:
        common += ["--global-batch", str(a.global_batch)]
    files, runs = {}, {}
    for n in (1, a.gpus):
        files[n] = os.path.join(work, f"{model}-{optim}-w{n}.safetensors")
        js = os.path.join(work, f"{model}-{optim}-w{n}.json")
        cmd = [a.rtx_run, "--nproc-per-node", str(n), "--", a.ddp_check] + common + \
              ["--out", files[n], "--json", js]
        rc, out, secs, _ = run(cmd, log, a.timeout)
        if rc != 0 or not os.path.exists(files[n]):
            return {"check": "equivalence", "what": f"{model}, {optim}: {n} rank(s)", "pass": False,
                    "figures": f"the run failed ({rc}): {tail(out, 3)}"}
        with open(js) as f:
            runs[n] = json.load(f)
        runs[n]["wall_s"] = secs
    verdict = os.path.join(work, f"{model}-{optim}-verdict.json")
    cmd = [a.ddp_check, "compare", files[1], files[a.gpus], "--json", verdict]
    if a.tol:
        cmd += ["--tol", str(a.tol)]
    rc, out, _, _ = run(cmd, log, 300)
    print("  " + out.strip().replace("\n", "\n  "), flush=True)
    if not os.path.exists(verdict):
        return {"check": "equivalence", "what": f"{model}, {optim}: compare", "pass": False,
                "figures": f"compare failed ({rc}): {tail(out, 3)}"}
    with open(verdict) as f:
        v = json.load(f)
    g = runs[1]["global_batch"]
    return {"check": "equivalence", "pass": v["pass"] and rc == 0,
            "what": f"{model} ({a.size}), {optim}, {a.steps} steps, G={g}: 1 vs {a.gpus} ranks",
            "figures": f"dparam {v['rel_params']:.1e}, dloss {v['rel_losses']:.1e} "
                       f"(tol {v['tolerance']:.0e}); loss {v['first_loss']:.3f} -> "
                       f"{v['last_loss']:.3f}; bits {'identical' if v['identical'] else 'differ'}",
            "verdict": v, "runs": runs}


def fault(a, k, stall, log):
    """Rank k dies after step M of an N-rank run: how long rtx-run takes to end, and what it
    says."""
    others = "stalled" if stall else "in their next step's collectives"
    what = f"rank {k} of {a.gpus} {DEATHS[a.fail_how]} after step {a.fail_after}, the others {others}"
    # More steps than the failing rank lives, so a rank that does not die ends the run anyway.
    cmd = [a.rtx_run, "--nproc-per-node", str(a.gpus), "--", a.ddp_check, "train", "--model",
           "mlp", "--device", a.device, "--size", a.size, "--steps", str(a.fail_after + 20),
           "--fail-rank", str(k), "--fail-after", str(a.fail_after), "--fail-how", a.fail_how]
    if stall:
        cmd.append("--stall-others")
    rc, out, secs, ended = run(cmd, log, a.timeout)
    m = re.search(rf"ddp_check: rank {k} .* at unix time ([0-9.]+)", out)
    launcher = [l for l in out.splitlines() if l.startswith("rtx-run:")]
    named = f"rtx-run: rank {k} {SIGNALS[a.fail_how]}"
    # The line naming rank k, then how the others ended, counted ("1 x signal 15 (SIGTERM)").
    first = next((l for l in launcher if l.startswith(named)), None)
    ends = {}
    for l in launcher:
        e = re.match(r"rtx-run: rank (\d+) (?:was killed by|exited with) (.*)", l)
        if e and int(e.group(1)) != k:
            ends[e.group(2)] = ends.get(e.group(2), 0) + 1
    others = ", ".join(f"{n} x {how}" for how, n in ends.items()) or "none reported"
    row = {"check": "fault", "what": what, "launcher_exit": rc, "launcher_lines": launcher,
           "run_s": secs}
    if not m:
        row.update(pass_=False, figures=f"rank {k} never reported dying ({rc}): {tail(out, 3)}")
    else:
        after = ended - float(m.group(1))
        ok = rc not in (0, "timeout") and after <= FAULT_LIMIT_S and first is not None
        row.update(pass_=ok, kill_to_exit_s=after,
                   figures=f"rtx-run exited {after:.3f} s after rank {k} died (limit "
                           f"{FAULT_LIMIT_S:.0f} s), code {rc}: \"{first or 'no line names rank ' + str(k)}\"; "
                           f"the others: {others}")
    row["pass"] = row.pop("pass_")
    return row


def device_name(a):
    if a.device == "cpu":
        try:
            with open("/proc/cpuinfo") as f:
                model = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
            return f"{model} ({os.cpu_count()} CPUs)"
        except (OSError, StopIteration):
            return "CPU"
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True).stdout.split("\n")
        return f"{a.gpus} x {out[0].strip()}"
    except OSError:
        return f"{a.gpus} GPUs"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", type=int, required=True, help="ranks (GPUs) to check, N >= 2")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--size", choices=("full", "small"),
                    help="model sizes (default: full on cuda, small on cpu)")
    ap.add_argument("--models", default="mlp,gpt-f32", help="equivalence models")
    ap.add_argument("--optims", default="adam,sgd",
                    help="equivalence optimizers: adam (the benchmark's), sgd (sees a wrongly "
                         "scaled gradient, which Adam hides)")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--global-batch", type=int, help="items per step (default: the model's)")
    ap.add_argument("--tol", type=float, help="equivalence tolerance (default: the model's)")
    ap.add_argument("--fault-ranks", help="the ranks that die, one run each (default N-1 and 0, "
                                          "which serves the rendezvous store)")
    ap.add_argument("--fail-after", type=int, default=3)
    ap.add_argument("--fail-how", choices=sorted(SIGNALS), default="kill")
    ap.add_argument("--skip-scaling", action="store_true")
    ap.add_argument("--scaling-args", default="", help="extra arguments for ddp_scaling.py")
    ap.add_argument("--scaling-timeout", type=int, default=7200)
    ap.add_argument("--timeout", type=int, default=900, help="seconds per run")
    ap.add_argument("--bin-dir", default=os.path.join(ROOT, ".gpu/bin"))
    ap.add_argument("--json", default="ddp_multi_gpu.json")
    ap.add_argument("--log", default="ddp_multi_gpu.log", help="every run's full output")
    a = ap.parse_args()
    if a.gpus < 2:
        sys.exit("ddp_multi_gpu: --gpus must be at least 2")
    a.size = a.size or ("full" if a.device == "cuda" else "small")
    fault_ranks = [int(k) for k in a.fault_ranks.split(",")] if a.fault_ranks else [a.gpus - 1, 0]
    if any(not 0 <= k < a.gpus for k in fault_ranks):
        sys.exit(f"ddp_multi_gpu: --fault-ranks {a.fault_ranks}: ranks run from 0 to {a.gpus - 1}")
    a.bin_dir = os.path.abspath(a.bin_dir)
    a.rtx_run = os.path.join(a.bin_dir, "rtx-run")
    a.ddp_check = os.path.join(a.bin_dir, "ddp_check")
    needed = [a.rtx_run, a.ddp_check]
    if a.device == "cuda" and not a.skip_scaling:
        needed.append(os.path.join(a.bin_dir, "ddp_step"))
    for path in needed:
        if not os.access(path, os.X_OK):
            sys.exit(f"ddp_multi_gpu: {path} is missing: run `tools/gpu-build --bench ddp_check "
                     f"--bench ddp_step --bin rtx-run -p rtx-workspace -p rtx-run` where Rust is")
    work = tempfile.mkdtemp(prefix="ddp_multi_gpu.")
    rows, scaling_data = [], None
    started = time.perf_counter()
    with open(a.log, "w") as log:
        if a.device == "cpu" or a.skip_scaling:
            why = "no GPUs (--device cpu)" if a.device == "cpu" else "--skip-scaling"
            rows.append({"check": "scaling", "what": "gpt, gpt-f32, mlp", "pass": None,
                         "figures": f"skipped: {why}"})
        else:
            got, scaling_data = scaling(a, log, work)
            rows += got
        for m in [m.strip() for m in a.models.split(",") if m.strip()]:
            for o in [o.strip() for o in a.optims.split(",") if o.strip()]:
                rows.append(equivalence(a, m, o, log, work))
        for k in fault_ranks:
            for stall in (False, True):
                rows.append(fault(a, k, stall, log))

    dev = device_name(a)
    ok = all(r["pass"] is not False for r in rows)
    with open(a.json, "w") as f:
        json.dump({"device": dev, "ranks_on": a.device, "gpus": a.gpus, "size": a.size,
                   "steps": a.steps, "pass": ok, "rows": rows, "scaling": scaling_data,
                   "work_dir": work}, f, indent=2)
    mark = {True: "PASS", False: "FAIL", None: "-"}
    lines = [f"DDP checks on {dev}, {a.gpus} ranks "
             f"({'GPUs over NCCL' if a.device == 'cuda' else 'CPU processes over TCP'}), "
             f"{time.perf_counter() - started:.0f} s; full results in {a.json}, output in {a.log}",
             "", "| check | what | result | figures |", "|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['check']} | {r['what']} | {mark[r['pass']]} | {r['figures']} |")
    print()
    print("\n".join(lines))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
