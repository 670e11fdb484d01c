//! Starting the ranks and watching them until the job ends.
//!
//! Each rank is the leader of its own session, hence of its own process group, so a signal
//! sent to the group reaches the rank and whatever it started (`cargo run` and the program it
//! runs, `sh -c` and its children). A group is signalled only while its leader is unreaped:
//! until then its id cannot belong to anyone else. When a rank exits, what it left running in
//! its group is SIGKILLed before the rank is reaped. Ranks left running on any way out of
//! [`run`], an error or a panic included, are SIGKILLed and reaped by `Job`'s `Drop`, and a
//! rank dies with the launcher even when the launcher is SIGKILLed (`PR_SET_PDEATHSIG`).

use std::io;
use std::mem::MaybeUninit;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::ptr;
use std::time::{Duration, Instant};

use libc::c_int;

use crate::cli::Config;
use crate::output::{Copiers, Stream};
use crate::signals::{self, Signals};

/// The longest wait between two looks at the ranks. SIGCHLD normally wakes the loop at once;
/// this bounds the delay should a wake-up ever be missed.
const POLL: Duration = Duration::from_millis(500);

/// How long prefixed output may still be copied after the last rank has exited.
const OUTPUT_DRAIN: Duration = Duration::from_secs(1);

/// Runs the job described by `config` and returns the launcher's exit code: 0 when every rank
/// exited 0, else the first failing rank's code (128 + N for a rank killed by signal N), else
/// 128 + N when the launcher itself was sent signal N.
///
/// Call it before starting any thread: it blocks the signals it waits for (see
/// [`Signals::block`]), and leaves them blocked, as it is meant for a process that exits with
/// the code it returns.
pub fn run(config: &Config) -> io::Result<i32> {
    let signals = Signals::block()?;
    let mut copiers = Copiers::new();
    let mut job = Job { ranks: Vec::new() };
    // The first failing rank's exit code: it becomes the launcher's.
    let mut code = start_all(config, &mut job, &mut copiers);
    let mut received = None;
    let mut kill_at = None;
    let mut killed = false;
    loop {
        for (rank, status) in job.reap()? {
            let Some(failed) = exit_code(status) else {
                continue;
            };
            let stopping = code.is_some() || received.is_some();
            if code.is_none() {
                code = Some(failed);
            }
            let others = if stopping || job.all_done() {
                ""
            } else {
                "; stopping the other ranks"
            };
            eprintln!("rtx-run: rank {rank} {}{others}", describe(status));
        }
        if job.all_done() {
            break;
        }
        if kill_at.is_none() && (code.is_some() || received.is_some()) {
            // A forwarded signal has asked the ranks to stop already.
            if received.is_none() {
                job.signal_live(libc::SIGTERM);
            }
            kill_at = Some(Instant::now() + config.grace);
        }
        let mut timeout = POLL;
        if let Some(at) = kill_at.filter(|_| !killed) {
            let left = at.saturating_duration_since(Instant::now());
            if left.is_zero() {
                eprintln!(
                    "rtx-run: rank(s) {} still running {:?} after being told to stop; \
                     sending SIGKILL",
                    job.live()
                        .map(|r| r.rank.to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                    config.grace
                );
                job.signal_live(libc::SIGKILL);
                killed = true;
            } else {
                timeout = timeout.min(left);
            }
        }
        match signals.wait(timeout)? {
            None | Some(libc::SIGCHLD) => {}
            Some(signo) => {
                eprintln!(
                    "rtx-run: received {}; forwarding it to the ranks",
                    signals::describe(signo)
                );
                job.signal_live(signo);
                if received.is_none() {
                    received = Some(signo);
                }
            }
        }
    }
    copiers.finish(OUTPUT_DRAIN);
    Ok(code.or(received.map(|signo| 128 + signo)).unwrap_or(0))
}

/// Starts this node's ranks into `job`, stopping at the first that cannot be started; then it
/// names the program and returns the shell's code for it.
fn start_all(config: &Config, job: &mut Job, copiers: &mut Copiers) -> Option<i32> {
    for local in 0..config.nproc_per_node {
        match spawn(config, local, copiers) {
            Ok(rank) => job.ranks.push(rank),
            Err(e) => {
                eprintln!(
                    "rtx-run: cannot start `{}` for rank {}: {e}",
                    config.program.to_string_lossy(),
                    config.rank(local)
                );
                // 127: not found; 126: found but not runnable.
                return Some(match e.kind() {
                    io::ErrorKind::NotFound => 127,
                    _ => 126,
                });
            }
        }
    }
    None
}

/// One started rank.
struct Rank {
    /// Its global rank.
    rank: u64,
    child: Child,
    /// Its exit status, once reaped.
    status: Option<ExitStatus>,
}

/// The started ranks; dropping it kills and reaps those still running.
struct Job {
    ranks: Vec<Rank>,
}

impl Job {
    /// The ranks not yet reaped.
    fn live(&self) -> impl Iterator<Item = &Rank> {
        self.ranks.iter().filter(|r| r.status.is_none())
    }

    /// Whether every started rank has been reaped.
    fn all_done(&self) -> bool {
        self.live().next().is_none()
    }

    /// Reaps the ranks that have exited since the last call, returning their statuses. What
    /// such a rank left running in its process group is SIGKILLed first, while the unreaped
    /// rank still holds the group's id.
    fn reap(&mut self) -> io::Result<Vec<(u64, ExitStatus)>> {
        let mut exited = Vec::new();
        for rank in self.ranks.iter_mut().filter(|r| r.status.is_none()) {
            let pid = rank.child.id();
            if has_exited(pid)? {
                // SAFETY: a plain system call; the group's id is still this rank's (see above).
                unsafe { libc::killpg(pid as libc::pid_t, libc::SIGKILL) };
                let status = rank.child.wait()?;
                rank.status = Some(status);
                exited.push((rank.rank, status));
            }
        }
        Ok(exited)
    }

    /// Sends `signo` to the process group of every rank not yet reaped.
    fn signal_live(&self, signo: c_int) {
        for rank in self.live() {
            let pgid = rank.child.id() as libc::pid_t;
            // SAFETY: a plain system call. The group's leader is unreaped, so the id is still
            // this rank's. An error (ESRCH: the group has just exited) needs no action.
            unsafe { libc::killpg(pgid, signo) };
        }
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        self.signal_live(libc::SIGKILL);
        for rank in self.ranks.iter_mut().filter(|r| r.status.is_none()) {
            rank.status = rank.child.wait().ok();
        }
    }
}

/// Whether the child `pid` has exited, leaving it unreaped (`WNOWAIT`).
fn has_exited(pid: u32) -> io::Result<bool> {
    // SAFETY: all zeros is a valid siginfo_t, and waitid writes only into it.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let options = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
    // SAFETY: as above; `pid` is our own child.
    while unsafe { libc::waitid(libc::P_PID, pid, &mut info, options) } == -1 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    // With WNOHANG, waitid leaves si_pid 0 while the child runs.
    // SAFETY: si_pid reads the field waitid fills for every child state.
    Ok(unsafe { info.si_pid() } != 0)
}

/// Starts this node's `local` rank with its environment, in a session of its own.
fn spawn(config: &Config, local: u32, copiers: &mut Copiers) -> io::Result<Rank> {
    let rank = config.rank(local);
    let mut command = Command::new(&config.program);
    command.args(&config.args).envs(config.rank_env(local));
    if config.prefix_output {
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
    }
    let launcher = std::process::id() as libc::pid_t;
    // SAFETY: `in_child` makes only async-signal-safe system calls and allocates nothing, as
    // code between fork and exec in a process with threads must.
    unsafe { command.pre_exec(move || in_child(launcher)) };
    let mut child = command.spawn()?;
    if let Some(out) = child.stdout.take() {
        copiers.spawn(rank, out, Stream::Stdout);
    }
    if let Some(err) = child.stderr.take() {
        copiers.spawn(rank, err, Stream::Stderr);
    }
    Ok(Rank {
        rank,
        child,
        status: None,
    })
}

/// Runs in the forked rank before exec: a session of its own, death with the launcher, and
/// no blocked signals.
fn in_child(launcher: libc::pid_t) -> io::Result<()> {
    let check = |rc: c_int| match rc {
        -1 => Err(io::Error::last_os_error()),
        _ => Ok(()),
    };
    // SAFETY: system calls on this process only, with valid arguments.
    unsafe {
        // A new session makes the rank lead a new process group, and takes it off the
        // terminal: Ctrl-C reaches the launcher alone, which forwards it once to each rank.
        check(libc::setsid())?;
        // The kernel SIGKILLs the rank when the thread that forked it ends, here the
        // launcher's main thread, which lives until the launcher exits. The value is passed
        // as the unsigned long the kernel reads from the variadic call.
        check(libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
        ))?;
        // The launcher may have died before the line above: then nothing would kill us.
        if libc::getppid() != launcher {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        // The launcher blocks the signals it waits for. std clears the mask of a child too;
        // doing it here keeps the ranks' signals from depending on that.
        let mut empty = MaybeUninit::<libc::sigset_t>::uninit();
        check(libc::sigemptyset(empty.as_mut_ptr()))?;
        match libc::pthread_sigmask(libc::SIG_SETMASK, empty.as_ptr(), ptr::null_mut()) {
            0 => Ok(()),
            rc => Err(io::Error::from_raw_os_error(rc)),
        }
    }
}

/// The launcher's exit code for a rank that ended with `status`; `None` for success.
fn exit_code(status: ExitStatus) -> Option<i32> {
    match (status.code(), status.signal()) {
        (Some(0), _) => None,
        (Some(code), _) => Some(code),
        (None, Some(signo)) => Some(128 + signo),
        // Neither exited nor killed: waitpid without WUNTRACED reports nothing else.
        (None, None) => Some(1),
    }
}

/// "exited with code 3" or "was killed by signal 9 (SIGKILL)".
fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with code {code}"),
        (None, Some(signo)) => format!("was killed by {}", signals::describe(signo)),
        (None, None) => format!("ended with status {status}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_shell() {
        // Raw wait statuses: the exit code sits in the second byte, a signal in the first.
        assert_eq!(exit_code(ExitStatus::from_raw(0)), None);
        assert_eq!(exit_code(ExitStatus::from_raw(3 << 8)), Some(3));
        assert_eq!(exit_code(ExitStatus::from_raw(libc::SIGKILL)), Some(137));
        assert_eq!(describe(ExitStatus::from_raw(3 << 8)), "exited with code 3");
        assert_eq!(
            describe(ExitStatus::from_raw(libc::SIGKILL)),
            "was killed by signal 9 (SIGKILL)"
        );
    }
}
