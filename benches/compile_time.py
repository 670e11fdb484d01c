"""Build times of rtx as its users see them, in three modes.

`mnist` (issue 18): the MNIST example's code (`examples/mnist/main.rs` and `models.rs`)
copied into a scratch package outside the workspace that depends on rtx by path, with
Cargo's default release profile (workspace `[profile]` settings never reach users) and the
repository's Cargo.lock. Times a clean `cargo build --release` (the target directory
removed first, dependencies included) and the rebuild after editing the model (a constant
in `models.rs` changed, alternating between two values, so the crate recompiles for real).
Targets: rebuild <= 10 s, clean build <= 120 s.

    python3 benches/compile_time.py mnist [--repeats 5] [--clean-repeats 1] [--out FILE]

`tests` (issue 18): a fresh `cargo test --workspace` (compile-fail suite included) in a clean
clone of the repository's HEAD with its own empty target directory. Target: <= 10 minutes.

    python3 benches/compile_time.py tests [--out FILE]

`depth` (the default; issue 6): see below.

Compile time of a `#[model]` transformer against its depth (issue 6): times `cargo build`
of a binary holding a 6-block and a 24-block transformer, each written out block by block,
against an empty binary, and checks that the time beyond the empty one grows at most
linearly with the blocks: excess(24) / excess(6) <= 4.5 (linear would be 4).

Usage: python3 benches/compile_time.py [--repeats R] [--profile release|dev|both]
                                       [--dir DIR] [--out FILE] [--layers 6,24] [--ir]

It writes a scratch cargo package outside the repository's workspace (its own `[workspace]`,
`rtx = { path = "<repo>/rtx" }`, the repository's Cargo.lock and `[profile.*]` tables), in
DIR (default: $CARGO_TARGET_DIR/compile-time, else <repo>/target/compile-time), with three
binaries: `empty` (only touches rtx), `t6` and `t24`. Each transformer is a `#[model]` struct
with one field per block (`b0: Block<E>, b1: Block<E>, ...`) and a `#[model]` forward with one
`let` per block, so the macro's output grows with the depth; `Block` is the pre-norm
transformer block of tests/integration/compiled_models.rs (layer norm, causal self-attention, residual
adds, Linear + gelu_tanh + Linear MLP) at width 128 with 4 heads. Each `main` runs the model's
`forward_fused`, `forward_train` (and its backward) and `ir()` once on a CPU input of shape
[1, 64, 128], so everything is monomorphized and linked; the first build runs each binary
once to check that.

Measurement: the dependencies (rtx included) and the three binaries are built once untimed;
then, R times in turn (empty, t6, t24, empty, ...), the binary's source is touched and
`cargo build [--release] --bin X` timed (only that binary's crate recompiles, and wholly: the
scratch crate is not incremental in dev either). The figure per binary is the median wall
time; the CPU time of cargo and rustc is reported beside it, being less sensitive to other
builds on a shared machine. Exits 1 when the wall-time ratio exceeds 4.5 in any profile
measured. Note that in the scratch package rtx is a dependency, so the root manifest's
`[profile.dev.package."*"]` optimizes it in dev too (in the repository it is a member, at
opt-level 0). `--ir` also emits each binary's unoptimized LLVM IR once and counts it: all of
it, and the part in functions of the binary's own crate (what the macro's output becomes).
Standard library only.
"""

import argparse
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TARGET_RATIO = 4.5
D_MODEL, HEADS, HIDDEN, SEQ = 128, 4, 512, 64

BLOCK = f"""
type Seq<E> = Tensor<(Dyn<'B'>, Const<{SEQ}>, Const<{D_MODEL}>), E>;

/// A pre-norm transformer block: causal self-attention and an MLP, each added back.
#[model]
pub struct Block<E: Float> {{
    ln1: LayerNorm<{D_MODEL}, E>,
    attn: CausalSelfAttention<{D_MODEL}, {HEADS}, E>,
    ln2: LayerNorm<{D_MODEL}, E>,
    fc1: Linear<{D_MODEL}, {HIDDEN}, E>,
    fc2: Linear<{HIDDEN}, {D_MODEL}, E>,
}}

#[model]
impl<E: Float> Block<E> {{
    fn forward(&self, x: &Seq<E>) -> Seq<E> {{
        let h = self.ln1.forward(x);
        let a = self.attn.forward(&h);
        let x1 = x + &a;
        let h2 = self.ln2.forward(&x1);
        let f = self.fc1.forward(&h2);
        let f = f.gelu_tanh();
        let f = self.fc2.forward(&f);
        x1 + f
    }}
}}
"""

MAIN = """
fn main() {
    let device = Device::Cpu;
    let mut m = Transformer::<f32>::init(&device, 0);
    let x: Seq<f32> = Tensor::randn((Dyn(1), Const, Const), 1, device);
    let y = m.forward_fused(&x);
    m.track_gradients();
    let (y2, backward) = m.forward_train(&x);
    let mut grads = rtx::Gradients::new();
    let _ = backward(y2.ones_like(), &mut grads, false);
    let ir = m.ir();
    println!(
        "{} blocks: output sum {:.4}, IR {} nodes, {} primitive ops",
        LAYERS,
        y.sum_all().item(),
        ir.nodes.len(),
        ir.op_count()
    );
}
"""


def transformer_source(n: int) -> str:
    """A binary with an `n`-block transformer written out field by field."""
    fields = "\n".join(f"    b{i}: Block<E>," for i in range(n))
    # The argument is a reference, the later steps' inputs are owned: the first step borrows.
    steps = "\n".join(
        f"        let x = self.b{i}.forward({'x' if i == 0 else '&x'});" for i in range(n)
    )
    return (
        f"//! A {n}-block `#[model]` transformer, written out (generated by "
        "benches/compile_time.py).\n\nuse rtx::prelude::*;\n"
        + BLOCK
        + f"""
const LAYERS: usize = {n};

/// {n} transformer blocks, one field each.
#[model]
pub struct Transformer<E: Float> {{
{fields}
}}

#[model]
impl<E: Float> Transformer<E> {{
    fn forward(&self, x: &Seq<E>) -> Seq<E> {{
{steps}
        x
    }}
}}
"""
        + MAIN
    )


EMPTY = """//! The empty baseline: links rtx and touches it (generated by benches/compile_time.py).

fn main() {
    println!("{:?}", rtx::Device::best());
}
"""


def profile_tables(cargo_toml: str) -> str:
    """The `[profile.*]` tables of the repository's Cargo.toml, verbatim."""
    out, keep = [], False
    for line in cargo_toml.splitlines():
        header = re.match(r"\s*\[\[?([^\]]+)\]", line)
        if header:
            keep = header.group(1).strip().startswith("profile")
        if keep:
            out.append(line)
    return "\n".join(out) + "\n"


def write_package(pkg: Path, layers: list[int]) -> None:
    (pkg / "src" / "bin").mkdir(parents=True, exist_ok=True)
    root = (REPO / "Cargo.toml").read_text()
    manifest = (
        "# Generated by benches/compile_time.py: a package outside rtx's workspace.\n"
        "[package]\nname = \"rtx-compile-time\"\nversion = \"0.0.0\"\nedition = \"2024\"\n"
        "publish = false\n\n"
        "[workspace]\n\n"
        f"[dependencies]\nrtx = {{ path = {json.dumps(str(REPO / 'rtx'))} }}\n\n"
        + profile_tables(root)
        + "\n# The measured crate recompiles whole after a touch in both profiles (release is not\n"
        "# incremental; dev's incremental cache would reuse every object of an unchanged file).\n"
        "[profile.dev.package.rtx-compile-time]\nincremental = false\n"
    )
    write_if_changed(pkg / "Cargo.toml", manifest)
    lock = REPO / "Cargo.lock"
    if lock.exists() and not (pkg / "Cargo.lock").exists():
        # The repository's resolution, so the dependencies are the versions rtx is tested with.
        shutil.copy(lock, pkg / "Cargo.lock")
    sources = {"empty.rs": EMPTY}
    sources.update({f"t{n}.rs": transformer_source(n) for n in layers})
    for old in (pkg / "src" / "bin").glob("*.rs"):
        if old.name not in sources:
            old.unlink()  # a depth from an earlier run: `--bins` would build it too
    for name, text in sources.items():
        write_if_changed(pkg / "src" / "bin" / name, text)


def write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def cargo(pkg: Path, args: list[str], env: dict, capture=True) -> subprocess.CompletedProcess:
    r = subprocess.run(
        ["cargo", *args],
        cwd=pkg,
        env=env,
        stdout=subprocess.PIPE if capture else None,
        stderr=subprocess.PIPE if capture else None,
        text=True,
    )
    if r.returncode != 0:
        if capture:
            sys.stderr.write(r.stdout + r.stderr)
        sys.exit(f"`cargo {' '.join(args)}` failed in {pkg}")
    return r


def profile_flag(profile: str) -> list[str]:
    return ["--release"] if profile == "release" else []


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def measure(pkg: Path, env: dict, profile: str, bins: list[str], repeats: int) -> dict:
    """Wall and CPU seconds (cargo and rustc, user + system) of a `cargo build` of each
    binary after a touch: {bin: ([wall], [cpu])}."""
    times = {b: ([], []) for b in bins}
    for r in range(repeats):
        for b in bins:
            os.utime(pkg / "src" / "bin" / f"{b}.rs")
            t, c = time.perf_counter(), children_cpu()
            cargo(pkg, ["build", "--quiet", *profile_flag(profile), "--bin", b], env)
            wall, cpu = time.perf_counter() - t, children_cpu() - c
            times[b][0].append(wall)
            times[b][1].append(cpu)
            print(f"  {profile} {b} #{r + 1}: {wall:.2f} s wall, {cpu:.2f} s CPU", flush=True)
    return times


def ir_size(pkg: Path, env: dict, profile: str, b: str) -> tuple[int, int, int]:
    """Unoptimized LLVM IR of binary `b`: (functions, lines, lines in `b`'s own functions)."""
    deps = pkg / "target" / profile_dir(profile) / "deps"
    for old in deps.glob(f"{b}-*.ll"):
        old.unlink()
    os.utime(pkg / "src" / "bin" / f"{b}.rs")
    flags = ["--", "-C", "opt-level=0", "--emit=llvm-ir,link"]
    cargo(pkg, ["rustc", "--quiet", *profile_flag(profile), "--bin", b, *flags], env)
    (ll,) = deps.glob(f"{b}-*.ll")
    # Legacy mangling: `_ZN2t68...` for t6::..., `$LT$t6..` where a t6 type leads a path.
    own_re = re.compile(rf"_ZN{len(b)}{b}\d|\$LT\${b}\.\.")
    funcs = lines = own = 0
    in_own = None
    with ll.open(errors="replace") as f:
        for line in f:
            if line.startswith("define"):
                funcs += 1
                in_own = bool(own_re.search(line.split("(", 1)[0]))
            elif in_own is not None:
                if line.startswith("}"):
                    in_own = None
                else:
                    lines += 1
                    own += in_own
    ll.unlink()
    return funcs, lines, own


def profile_dir(profile: str) -> str:
    return "release" if profile == "release" else "debug"


def loadavg() -> str:
    try:
        return "/".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "?"


def machine_line() -> str:
    """The machine, the compiler and the load, for a results table."""
    rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores ({cpu}), {rustc}"


MNIST_EDIT = ("pub const MEAN: f32 = 0.1307;", "pub const MEAN: f32 = 0.1306;")


def write_mnist_package(pkg: Path) -> None:
    """The MNIST example as a user's own package: rtx by path, Cargo's default profiles."""
    (pkg / "src").mkdir(parents=True, exist_ok=True)
    root = (REPO / "Cargo.toml").read_text()
    versions = {}
    for dep in ("clap", "indicatif"):
        m = re.search(rf"^{dep} = (.+)$", root, re.M)
        if not m:
            sys.exit(f"no `{dep}` dependency in {REPO / 'Cargo.toml'}")
        versions[dep] = m.group(1)
    manifest = (
        "# Generated by benches/compile_time.py: the MNIST example as a user's package.\n"
        '[package]\nname = "mnist-user"\nversion = "0.0.0"\nedition = "2024"\npublish = false\n\n'
        "[workspace]\n\n"
        f"[dependencies]\nrtx = {{ path = {json.dumps(str(REPO / 'rtx'))} }}\n"
        + "".join(f"{k} = {v}\n" for k, v in versions.items())
    )
    write_if_changed(pkg / "Cargo.toml", manifest)
    if (REPO / "Cargo.lock").exists() and not (pkg / "Cargo.lock").exists():
        shutil.copy(REPO / "Cargo.lock", pkg / "Cargo.lock")
    for name in ("main.rs", "models.rs"):
        write_if_changed(pkg / "src" / name, (REPO / "examples" / "mnist" / name).read_text())
    if MNIST_EDIT[0] not in (pkg / "src" / "models.rs").read_text():
        sys.exit(f"examples/mnist/models.rs no longer has `{MNIST_EDIT[0]}` to edit")


def timed_build(pkg: Path, env: dict) -> tuple[float, float]:
    """Wall and CPU seconds of `cargo build --release` in `pkg`."""
    t, c = time.perf_counter(), children_cpu()
    cargo(pkg, ["build", "--quiet", "--release"], env)
    return time.perf_counter() - t, children_cpu() - c


def mnist_mode(a) -> int:
    pkg = (a.dir or Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target")) / "mnist-user").resolve()
    write_mnist_package(pkg)
    env = dict(os.environ)
    env["CARGO_TARGET_DIR"] = str(pkg / "target")
    env.pop("RUSTFLAGS", None)
    env.pop("CARGO_PROFILE_RELEASE_DEBUG", None)
    print("fetching the dependencies (untimed) ...", flush=True)
    cargo(pkg, ["fetch"], env)
    load_before = loadavg()
    clean = []
    for r in range(a.clean_repeats):
        shutil.rmtree(pkg / "target", ignore_errors=True)
        clean.append(timed_build(pkg, env))
        print(f"  clean build #{r + 1}: {clean[-1][0]:.1f} s wall, {clean[-1][1]:.1f} s CPU", flush=True)
    models = pkg / "src" / "models.rs"
    rebuild = []
    for r in range(a.repeats):
        text = models.read_text()
        old, new = MNIST_EDIT if MNIST_EDIT[0] in text else MNIST_EDIT[::-1]
        models.write_text(text.replace(old, new))
        rebuild.append(timed_build(pkg, env))
        print(f"  rebuild #{r + 1}: {rebuild[-1][0]:.2f} s wall, {rebuild[-1][1]:.2f} s CPU", flush=True)
    models.write_text(models.read_text().replace(MNIST_EDIT[1], MNIST_EDIT[0]))
    load_after = loadavg()
    med = lambda xs, k: statistics.median(x[k] for x in xs)
    rows = [
        ("release rebuild after editing the model", rebuild, 10.0),
        ("clean release build", clean, 120.0),
    ]
    lines = [
        f"Machine: {machine_line()}; load average (1/5/15 min) {load_before} before, "
        f"{load_after} after. Median of the runs; CPU is user + system of cargo and rustc.",
        "",
        "| build | runs | wall (median) | CPU (median) | target | all runs, wall s |",
        "|---|---|---|---|---|---|",
    ]
    failed = False
    for name, runs, target in rows:
        if not runs:
            continue
        wall = med(runs, 0)
        ok = wall <= target
        failed |= not ok
        lines.append(
            f"| {name} | {len(runs)} | {wall:.2f} s | {med(runs, 1):.2f} s | "
            f"<= {target:.0f} s: {'PASS' if ok else 'FAIL'} | "
            + ", ".join(f"{w:.1f}" for w, _ in runs)
            + " |"
        )
    table = "\n".join(lines) + "\n"
    print()
    print(table)
    if a.out:
        a.out.write_text(table)
    return 1 if failed else 0


def tests_mode(a) -> int:
    work = (a.dir or Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target")) / "fresh-tests").resolve()
    shutil.rmtree(work, ignore_errors=True)
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(REPO), str(work)], check=True)
    env = dict(os.environ)
    env["CARGO_TARGET_DIR"] = str(work / "target")
    env.pop("RUSTFLAGS", None)
    print("fetching the dependencies (untimed) ...", flush=True)
    cargo(work, ["fetch"], env)
    load_before = loadavg()
    t, c = time.perf_counter(), children_cpu()
    r = subprocess.run(["cargo", "test", "--workspace"], cwd=work, env=env)
    wall, cpu = time.perf_counter() - t, children_cpu() - c
    load_after = loadavg()
    ok = r.returncode == 0 and wall <= 600
    table = (
        f"Machine: {machine_line()}; load average (1/5/15 min) {load_before} before, "
        f"{load_after} after.\n\n"
        "| run | wall | CPU | tests | target |\n|---|---|---|---|---|\n"
        f"| fresh `cargo test --workspace` | {wall:.0f} s | {cpu:.0f} s | "
        f"{'pass' if r.returncode == 0 else 'FAIL'} | <= 600 s: {'PASS' if ok else 'FAIL'} |\n"
    )
    print()
    print(table)
    if a.out:
        a.out.write_text(table)
    return 0 if ok else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", nargs="?", choices=["depth", "mnist", "tests"], default="depth")
    ap.add_argument("--clean-repeats", type=int, default=1, help="clean builds (mnist; 1)")
    ap.add_argument("--repeats", type=int, default=3, help="timed builds per binary (3)")
    ap.add_argument(
        "--profile", choices=["release", "dev", "both"], default="release", help="(release)"
    )
    ap.add_argument("--dir", type=Path, help="the scratch package's directory")
    ap.add_argument("--out", type=Path, help="write the markdown table here")
    ap.add_argument("--layers", default="6,24", help="two depths, the second the deeper")
    ap.add_argument(
        "--ir",
        action="store_true",
        help="also count each binary's unoptimized LLVM IR (one more untimed build each)",
    )
    a = ap.parse_args()
    if a.mode == "mnist":
        return mnist_mode(a)
    if a.mode == "tests":
        return tests_mode(a)
    layers = [int(s) for s in a.layers.split(",")]
    if len(layers) != 2 or not 0 < layers[0] < layers[1]:
        sys.exit("--layers takes two depths, shallow first: 6,24")
    if a.repeats < 1:
        sys.exit("--repeats must be at least 1")
    base = a.dir or Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target")) / "compile-time"
    pkg = base.resolve()
    write_package(pkg, layers)
    env = dict(os.environ)
    env["CARGO_TARGET_DIR"] = str(pkg / "target")
    env.pop("RUSTFLAGS", None)
    bins = ["empty"] + [f"t{n}" for n in layers]
    profiles = ["release", "dev"] if a.profile == "both" else [a.profile]

    for p in profiles:
        print(f"warm-up: building rtx and the binaries ({p}), untimed ...", flush=True)
        cargo(pkg, ["build", *profile_flag(p), "--bins"], env, capture=False)
        for b in bins:
            r = cargo(pkg, ["run", "--quiet", *profile_flag(p), "--bin", b], env)
            print(f"  {b}: {r.stdout.strip()}")

    load_before = loadavg()
    results = {}
    for p in profiles:
        print(f"measuring ({p}, {a.repeats} repeats, interleaved) ...", flush=True)
        results[p] = measure(pkg, env, p, bins, a.repeats)
    load_after = loadavg()

    lines = [
        f"Machine: {machine_line()}; load average (1/5/15 min) {load_before} "
        f"before, {load_after} after. Median of {a.repeats} interleaved builds each; the "
        "target applies to wall time, CPU time (user + system of cargo and rustc) is less "
        "sensitive to other load.",
        "",
        "| profile | clock | empty | "
        + " | ".join(f"{n} blocks (excess over empty)" for n in layers)
        + f" | excess {layers[1]} / excess {layers[0]} | target |",
        "|---|---|---|---|---|---|---|",
    ]
    failed = False
    for p in profiles:
        for clock, k in (("wall", 0), ("CPU", 1)):
            med = {b: statistics.median(v[k]) for b, v in results[p].items()}
            e0 = med["empty"]
            ex = [med[f"t{n}"] - e0 for n in layers]
            ratio = ex[1] / ex[0] if ex[0] > 0 else float("inf")
            if k == 0:
                ok = ratio <= TARGET_RATIO
                failed |= not ok
                verdict = f"<= {TARGET_RATIO}: {'PASS' if ok else 'FAIL'}"
            else:
                verdict = "(not held to it)"
            cells = [f"{med[f't{n}']:.2f} s ({x:.2f} s)" for n, x in zip(layers, ex)]
            lines.append(
                f"| {p} | {clock} | {e0:.2f} s | "
                + " | ".join(cells)
                + f" | {ratio:.2f} | {verdict} |"
            )
    if a.ir:
        print("counting LLVM IR (unoptimized, untimed) ...", flush=True)
        lines += [
            "",
            "| binary | LLVM IR functions | LLVM IR lines | lines in the binary's own functions |",
            "|---|---|---|---|",
        ]
        for b in bins:
            funcs, total, own = ir_size(pkg, env, profiles[0], b)
            lines.append(f"| {b} | {funcs} | {total} | {own} |")
    lines.append("")
    lines.append(
        "All runs, wall / CPU seconds: "
        + "; ".join(
            f"{p} {b} " + ", ".join(f"{w:.1f}/{c:.1f}" for w, c in zip(*v))
            for p in profiles
            for b, v in results[p].items()
        )
    )
    table = "\n".join(lines) + "\n"
    print()
    print(table)
    if a.out:
        a.out.write_text(table)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
