//! The launcher's signals, received synchronously: no handler ever runs.
//!
//! SIGCHLD and the signals forwarded to the ranks are blocked in the launcher and taken with
//! `sigtimedwait`, so the supervisor's loop sees a signal as a value between two steps rather
//! than as an interruption in the middle of one. The mask must be set before any thread
//! starts, since threads inherit it and a signal goes to any thread that does not block it.

use std::io;
use std::mem::MaybeUninit;
use std::ptr;
use std::time::Duration;

use libc::c_int;

/// The signals that stop the job: forwarded to every rank, as torchrun does.
pub const FORWARDED: [c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

/// The blocked set, owned by the thread that blocked it.
pub struct Signals {
    set: libc::sigset_t,
}

impl Signals {
    /// Blocks SIGCHLD and [`FORWARDED`] in the calling thread and in the threads it starts
    /// later. Call it before starting any thread.
    ///
    /// A forwarded signal that is ignored already (SIGHUP under `nohup`) is left alone: it
    /// stays ignored by the launcher and by the ranks, which inherit that.
    pub fn block() -> io::Result<Signals> {
        let mut handled = Vec::new();
        for signo in FORWARDED {
            if !ignored(signo)? {
                handled.push(signo);
            }
        }
        let set = signal_set(&handled)?;
        // SAFETY: `set` is an initialized signal set; the old mask is not asked for.
        let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, ptr::null_mut()) };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(Signals { set })
    }

    /// Waits at most `timeout` for one of the blocked signals and returns its number, or
    /// `None` when the time ran out first.
    pub fn wait(&self, timeout: Duration) -> io::Result<Option<c_int>> {
        let ts = libc::timespec {
            tv_sec: timeout.as_secs().try_into().unwrap_or(libc::time_t::MAX),
            // Below 10^9, so it fits a 32-bit `c_long` too.
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: `set` is initialized, a null siginfo pointer is allowed, `ts` is valid.
        let signo = unsafe { libc::sigtimedwait(&self.set, ptr::null_mut(), &ts) };
        if signo >= 0 {
            return Ok(Some(signo));
        }
        match io::Error::last_os_error() {
            // EINTR: woken without one of ours (after a stop and continue, for one); the
            // caller polls its children again either way.
            e if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EINTR)) => Ok(None),
            e => Err(e),
        }
    }
}

/// Whether `signo`'s disposition is to ignore it.
fn ignored(signo: c_int) -> io::Result<bool> {
    let mut current = MaybeUninit::<libc::sigaction>::uninit();
    // SAFETY: with a null new action, sigaction only writes the current one into `current`.
    unsafe {
        if libc::sigaction(signo, ptr::null(), current.as_mut_ptr()) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(current.assume_init().sa_sigaction == libc::SIG_IGN)
    }
}

/// A set of SIGCHLD and `signals`.
fn signal_set(signals: &[c_int]) -> io::Result<libc::sigset_t> {
    let mut set = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigemptyset initializes the set; sigaddset takes valid signal numbers.
    unsafe {
        if libc::sigemptyset(set.as_mut_ptr()) != 0 {
            return Err(io::Error::last_os_error());
        }
        for &signo in signals.iter().chain(&[libc::SIGCHLD]) {
            if libc::sigaddset(set.as_mut_ptr(), signo) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(set.assume_init())
    }
}

/// The conventional name of a signal, for messages (`SIGKILL`); `None` for uncommon ones.
pub fn name(signo: c_int) -> Option<&'static str> {
    Some(match signo {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        _ => return None,
    })
}

/// "signal 9 (SIGKILL)", or "signal 40" for a signal without a common name.
pub fn describe(signo: c_int) -> String {
    match name(signo) {
        Some(name) => format!("signal {signo} ({name})"),
        None => format!("signal {signo}"),
    }
}
