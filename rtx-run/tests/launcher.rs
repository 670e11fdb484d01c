//! The built `rtx-run` against small `sh -c` ranks: their environment, failures, signals to
//! the launcher, output prefixes and bad command lines.
//!
//! Ranks write what they saw, and their pids, into a temporary directory passed as `$1`; a
//! pid file is written to a temporary name and renamed, so a reader never sees it half
//! written. The launcher's stdout and stderr go to files, not pipes, so a rank that outlived
//! it could not make a test hang on reading them.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus};
use std::thread::sleep;
use std::time::{Duration, Instant};

const RTX_RUN: &str = env!("CARGO_BIN_EXE_rtx-run");

/// Writes the rank's pid to `$1/pid.$RANK` (an `exec` later keeps the pid).
const WRITE_PID: &str = r#"echo $$ > "$1/tmp.$RANK" && mv "$1/tmp.$RANK" "$1/pid.$RANK""#;

/// A finished launch.
struct Finished {
    status: ExitStatus,
    elapsed: Duration,
    stdout: String,
    stderr: String,
}

/// Starts `rtx-run ARGS... -- sh -c SCRIPT sh DIR` with its output in files in `dir`.
fn start(dir: &Path, args: &[&str], script: &str) -> (Child, Instant) {
    let mut command = Command::new(RTX_RUN);
    command.args(args);
    if !script.is_empty() {
        command.args(["--", "sh", "-c", script, "sh"]).arg(dir);
    }
    // A test run in the background of a shell without job control inherits SIGINT ignored,
    // and rtx-run rightly leaves an ignored signal alone; the SIGINT test needs it default.
    // SAFETY: signal() is async-signal-safe, as code between fork and exec must be.
    unsafe {
        command.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        })
    };
    let started = Instant::now();
    let child = command
        .stdout(fs::File::create(dir.join("launcher.out")).unwrap())
        .stderr(fs::File::create(dir.join("launcher.err")).unwrap())
        .spawn()
        .unwrap();
    (child, started)
}

/// Waits for the launcher at most `limit` (killing it and failing after that).
fn finish(dir: &Path, mut child: Child, started: Instant, limit: Duration) -> Finished {
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > limit {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("rtx-run was still running after {limit:?}");
        }
        sleep(Duration::from_millis(10));
    };
    let read = |name: &str| fs::read_to_string(dir.join(name)).unwrap();
    Finished {
        status,
        elapsed: started.elapsed(),
        stdout: read("launcher.out"),
        stderr: read("launcher.err"),
    }
}

/// Runs the launcher to the end, for at most 10 s.
fn launch(dir: &Path, args: &[&str], script: &str) -> Finished {
    let (child, started) = start(dir, args, script);
    finish(dir, child, started, Duration::from_secs(10))
}

/// Waits until `$1/pid.R` exists for each rank `R` in `ranks`, and returns the pids.
fn pids(dir: &Path, ranks: &[u32]) -> Vec<libc::pid_t> {
    let deadline = Instant::now() + Duration::from_secs(5);
    ranks
        .iter()
        .map(|rank| {
            loop {
                if let Ok(text) = fs::read_to_string(dir.join(format!("pid.{rank}"))) {
                    break text.trim().parse().unwrap();
                }
                assert!(Instant::now() < deadline, "rank {rank} wrote no pid");
                sleep(Duration::from_millis(10));
            }
        })
        .collect()
}

/// Asserts that none of `pids` is a live process, giving a reaped one 2 s to disappear.
fn assert_gone(pids: &[libc::pid_t]) {
    let deadline = Instant::now() + Duration::from_secs(2);
    for &pid in pids {
        // SAFETY: signal 0 only checks that the process exists.
        while unsafe { libc::kill(pid, 0) } == 0 {
            assert!(
                Instant::now() < deadline,
                "rank process {pid} survived rtx-run"
            );
            sleep(Duration::from_millis(10));
        }
    }
}

/// A script in which rank `failing` runs `fail` once every other rank of `n` has written its
/// pid, and the others write their pid and run `rest`.
fn one_fails(n: u32, failing: u32, fail: &str, rest: &str) -> String {
    let others: Vec<String> = (0..n)
        .filter(|&r| r != failing)
        .map(|r| format!(r#"[ ! -e "$1/pid.{r}" ]"#))
        .collect();
    format!(
        r#"if [ "$RANK" = {failing} ]; then
             while {}; do sleep 0.02; done
             {fail}
           fi
           {WRITE_PID}
           {rest}"#,
        others.join(" || ")
    )
}

#[test]
fn every_rank_gets_torchruns_environment_and_success_is_exit_0() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"echo "$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $GROUP_RANK $MASTER_ADDR $MASTER_PORT" > "$1/env.$LOCAL_RANK""#;
    let run = launch(dir.path(), &["--nproc-per-node", "3"], script);
    assert!(run.status.success(), "{}", run.stderr);
    let env = |l: u32| fs::read_to_string(dir.path().join(format!("env.{l}"))).unwrap();
    // One port, picked by the launcher and given to every rank.
    let port: u16 = env(0).split_whitespace().last().unwrap().parse().unwrap();
    assert_ne!(port, 0);
    for l in 0..3 {
        assert_eq!(env(l), format!("{l} 3 {l} 3 0 127.0.0.1 {port}\n"));
    }
}

#[test]
fn ranks_of_a_later_node_come_after_the_earlier_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"echo "$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $GROUP_RANK $MASTER_ADDR $MASTER_PORT" > "$1/env.$LOCAL_RANK""#;
    let args = [
        "--nproc-per-node",
        "2",
        "--nnodes",
        "3",
        "--node-rank",
        "2",
        "--master-addr",
        "10.1.2.3",
        "--master-port",
        "29511",
    ];
    let run = launch(dir.path(), &args, script);
    assert!(run.status.success(), "{}", run.stderr);
    for l in 0..2 {
        let seen = fs::read_to_string(dir.path().join(format!("env.{l}"))).unwrap();
        assert_eq!(seen, format!("{} 6 {l} 2 2 10.1.2.3 29511\n", 4 + l));
    }
}

#[test]
fn a_failing_rank_stops_the_others_and_its_code_is_returned() {
    let dir = tempfile::tempdir().unwrap();
    let script = one_fails(3, 2, "exit 3", "exec sleep 60");
    let (child, started) = start(dir.path(), &["--nproc-per-node", "3"], &script);
    let sleepers = pids(dir.path(), &[0, 1]);
    let run = finish(dir.path(), child, started, Duration::from_secs(10));
    assert_eq!(run.status.code(), Some(3), "{}", run.stderr);
    assert!(
        run.stderr.contains("rank 2 exited with code 3"),
        "{}",
        run.stderr
    );
    // The sleepers die on SIGTERM: no waiting for the 5 s grace period.
    assert!(run.elapsed < Duration::from_secs(4), "{:?}", run.elapsed);
    assert_gone(&sleepers);
}

#[test]
fn a_rank_killed_by_a_signal_gives_128_plus_the_signal() {
    let dir = tempfile::tempdir().unwrap();
    let script = one_fails(2, 1, "kill -9 $$", "exec sleep 60");
    let (child, started) = start(dir.path(), &["--nproc-per-node", "2"], &script);
    let sleeper = pids(dir.path(), &[0]);
    let run = finish(dir.path(), child, started, Duration::from_secs(10));
    assert_eq!(run.status.code(), Some(128 + 9), "{}", run.stderr);
    assert!(
        run.stderr.contains("rank 1 was killed by signal 9"),
        "{}",
        run.stderr
    );
    assert_gone(&sleeper);
}

#[test]
fn processes_a_rank_started_are_stopped_with_it() {
    let dir = tempfile::tempdir().unwrap();
    // Rank 0's sleep is its child, not the rank itself: it is reached through the rank's
    // process group. Its pid goes into the pid file in place of the shell's.
    let rest = r#"sleep 60 & echo $! > "$1/child.tmp" && mv "$1/child.tmp" "$1/child"; wait"#;
    let script = one_fails(
        2,
        1,
        r#"while [ ! -e "$1/child" ]; do sleep 0.02; done; exit 5"#,
        rest,
    );
    let (child, started) = start(dir.path(), &["--nproc-per-node", "2"], &script);
    let shell = pids(dir.path(), &[0]);
    let run = finish(dir.path(), child, started, Duration::from_secs(10));
    assert_eq!(run.status.code(), Some(5), "{}", run.stderr);
    let grandchild: libc::pid_t = fs::read_to_string(dir.path().join("child"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_gone(&[shell[0], grandchild]);
}

#[test]
fn what_a_rank_leaves_running_ends_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let script =
        r#"sleep 60 & echo $! > "$1/child.tmp.$RANK" && mv "$1/child.tmp.$RANK" "$1/child.$RANK""#;
    let run = launch(dir.path(), &["--nproc-per-node", "2"], script);
    assert!(run.status.success(), "{}", run.stderr);
    let leftovers: Vec<libc::pid_t> = (0..2)
        .map(|r| {
            let text = fs::read_to_string(dir.path().join(format!("child.{r}"))).unwrap();
            text.trim().parse().unwrap()
        })
        .collect();
    assert_gone(&leftovers);
}

#[test]
fn ranks_die_with_a_launcher_that_is_sigkilled() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!("{WRITE_PID}; exec sleep 60");
    let (mut child, _) = start(dir.path(), &["--nproc-per-node", "2"], &script);
    let ranks = pids(dir.path(), &[0, 1]);
    // SIGKILL leaves the launcher no chance to clean up: the kernel's PR_SET_PDEATHSIG must.
    child.kill().unwrap();
    child.wait().unwrap();
    assert_gone(&ranks);
}

#[test]
fn a_rank_that_ignores_sigterm_is_killed_after_the_grace_period() {
    let dir = tempfile::tempdir().unwrap();
    // `trap '' TERM` makes the shell ignore SIGTERM, and `exec` keeps that for sleep. It
    // comes first: rank 1 fails as soon as rank 0 has written its pid.
    let script = format!(
        "trap '' TERM\n{}",
        one_fails(2, 1, "exit 1", "exec sleep 60")
    );
    let args = ["--nproc-per-node", "2", "--grace-seconds", "1"];
    let (child, started) = start(dir.path(), &args, &script);
    let stubborn = pids(dir.path(), &[0]);
    let run = finish(dir.path(), child, started, Duration::from_secs(10));
    assert_eq!(run.status.code(), Some(1), "{}", run.stderr);
    assert!(run.elapsed >= Duration::from_secs(1), "{:?}", run.elapsed);
    assert!(run.elapsed < Duration::from_secs(5), "{:?}", run.elapsed);
    assert!(
        run.stderr.contains("rank(s) 0 still running"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("sending SIGKILL"), "{}", run.stderr);
    assert_gone(&stubborn);
}

#[test]
fn sigterm_to_the_launcher_reaches_every_rank() {
    let dir = tempfile::tempdir().unwrap();
    // `wait` returns when a trapped signal arrives; a foreground sleep would delay the trap.
    let script = format!(
        r#"trap 'echo stopped > "$1/term.$RANK"; exit 7' TERM
           {WRITE_PID}
           sleep 60 & wait"#
    );
    let (child, started) = start(dir.path(), &["--nproc-per-node", "2"], &script);
    let ranks = pids(dir.path(), &[0, 1]);
    // SAFETY: a plain system call to our own child.
    assert_eq!(
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) },
        0
    );
    let run = finish(dir.path(), child, started, Duration::from_secs(10));
    assert!(
        run.stderr.contains("received signal 15 (SIGTERM)"),
        "{}",
        run.stderr
    );
    for rank in 0..2 {
        assert!(
            dir.path().join(format!("term.{rank}")).exists(),
            "{}",
            run.stderr
        );
    }
    // The ranks' own exit code wins over the signal's.
    assert_eq!(run.status.code(), Some(7), "{}", run.stderr);
    assert_gone(&ranks);
}

#[test]
fn sigint_to_the_launcher_stops_ranks_that_do_not_catch_it() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!("{WRITE_PID}; exec sleep 60");
    let (child, started) = start(dir.path(), &["--nproc-per-node", "2"], &script);
    let ranks = pids(dir.path(), &[0, 1]);
    // SAFETY: a plain system call to our own child.
    assert_eq!(
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) },
        0
    );
    let run = finish(dir.path(), child, started, Duration::from_secs(10));
    assert_eq!(run.status.code(), Some(128 + 2), "{}", run.stderr);
    assert!(
        run.stderr.contains("was killed by signal 2 (SIGINT)"),
        "{}",
        run.stderr
    );
    assert!(run.elapsed < Duration::from_secs(4), "{:?}", run.elapsed);
    assert_gone(&ranks);
}

#[test]
fn a_signal_ignored_when_the_launcher_starts_stays_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!("{WRITE_PID}; exec sleep 60");
    // As under `nohup`: the shell ignores SIGHUP, and `exec` hands that on to rtx-run.
    let started = Instant::now();
    let child = Command::new("sh")
        .args(["-c", r#"trap '' HUP; exec "$0" "$@""#, RTX_RUN])
        .args(["--nproc-per-node", "2", "--", "sh", "-c", &script, "sh"])
        .arg(dir.path())
        .stdout(fs::File::create(dir.path().join("launcher.out")).unwrap())
        .stderr(fs::File::create(dir.path().join("launcher.err")).unwrap())
        .spawn()
        .unwrap();
    let ranks = pids(dir.path(), &[0, 1]);
    let launcher = child.id() as libc::pid_t;
    // SAFETY: plain system calls to our own child and its children.
    unsafe {
        assert_eq!(libc::kill(launcher, libc::SIGHUP), 0);
        sleep(Duration::from_millis(300));
        for &pid in &ranks {
            assert_eq!(
                libc::kill(pid, 0),
                0,
                "rank {pid} ended on an ignored SIGHUP"
            );
        }
        assert_eq!(libc::kill(launcher, libc::SIGTERM), 0);
    }
    let run = finish(dir.path(), child, started, Duration::from_secs(10));
    assert_eq!(run.status.code(), Some(128 + 15), "{}", run.stderr);
    assert!(!run.stderr.contains("SIGHUP"), "{}", run.stderr);
    assert_gone(&ranks);
}

#[test]
fn prefixed_output_names_the_rank_on_every_line() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"echo "out $RANK"; echo "err $RANK" >&2; printf 'no newline'"#;
    let run = launch(
        dir.path(),
        &["--nproc-per-node", "2", "--prefix-output"],
        script,
    );
    assert!(run.status.success(), "{}", run.stderr);
    for rank in 0..2 {
        assert!(
            run.stdout.contains(&format!("[rank {rank}] out {rank}\n")),
            "{}",
            run.stdout
        );
        assert!(
            run.stdout.contains(&format!("[rank {rank}] no newline\n")),
            "{}",
            run.stdout
        );
        assert!(
            run.stderr.contains(&format!("[rank {rank}] err {rank}\n")),
            "{}",
            run.stderr
        );
    }
}

#[test]
fn a_program_that_cannot_start_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["--nproc-per-node", "2", "--", "/nonexistent/rtx-run-rank"];
    let run = launch(dir.path(), &args, "");
    assert_eq!(run.status.code(), Some(127), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("cannot start `/nonexistent/rtx-run-rank` for rank 0"),
        "{}",
        run.stderr
    );
}

#[test]
fn bad_arguments_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[&str], &str); 4] = [
        (
            &[
                "--nnodes",
                "2",
                "--node-rank",
                "2",
                "--master-port",
                "29500",
                "--",
                "true",
            ],
            "--node-rank 2 is out of range: with --nnodes 2 the node ranks are 0 to 1",
        ),
        (
            &["--nnodes", "2", "--node-rank", "1", "--", "true"],
            "--master-port is required with --nnodes 2",
        ),
        (&["--nproc-per-node", "2"], "<PROGRAM>"),
        (
            &["--nproc-per-node", "0", "--", "true"],
            "--nproc-per-node <N>",
        ),
    ];
    for (args, expected) in cases {
        let run = launch(dir.path(), args, "");
        // clap's code for a bad command line.
        assert_eq!(run.status.code(), Some(2), "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(expected), "{args:?}: {}", run.stderr);
    }
}
