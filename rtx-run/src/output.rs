//! `--prefix-output`: each rank's stdout and stderr copied line by line, behind `[rank N] `.
//!
//! One thread per stream writes whole lines through the launcher's locked stream, so lines of
//! different ranks never interleave inside a line. Bytes are copied as they are (no UTF-8
//! check), and a last line without a newline gets one.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread;
use std::time::Duration;

/// Which of the launcher's streams a rank's stream goes to.
#[derive(Debug, Clone, Copy)]
pub enum Stream {
    /// The launcher's stdout.
    Stdout,
    /// The launcher's stderr.
    Stderr,
}

/// The copying threads; each holds a sender that is dropped when its stream ends.
pub struct Copiers {
    done_tx: Option<Sender<()>>,
    done_rx: Receiver<()>,
}

impl Copiers {
    /// No threads yet.
    pub fn new() -> Copiers {
        let (done_tx, done_rx) = mpsc::channel();
        Copiers {
            done_tx: Some(done_tx),
            done_rx,
        }
    }

    /// Copies `from` to `to` line by line behind `[rank {rank}] ` on a thread of its own.
    pub fn spawn(&mut self, rank: u64, from: impl Read + Send + 'static, to: Stream) {
        let done = self.done_tx.clone().expect("spawn before finish");
        thread::spawn(move || {
            // A closed launcher stream (a reader that went away) ends the copy quietly: the
            // rank's own exit status still decides the job's.
            let _ = copy_lines(&format!("[rank {rank}] "), from, to);
            drop(done);
        });
    }

    /// Waits until every stream has ended, or `limit` has passed: a rank's child that outlives
    /// it can hold its pipe open forever, and must not keep the launcher from exiting.
    pub fn finish(mut self, limit: Duration) {
        self.done_tx = None;
        // Nothing is ever sent: the call returns when the last sender is dropped, or at `limit`.
        let _ = self.done_rx.recv_timeout(limit);
    }
}

impl Default for Copiers {
    fn default() -> Self {
        Copiers::new()
    }
}

/// Writes each line of `from` to `to` behind `prefix`.
fn copy_lines(prefix: &str, from: impl Read, to: Stream) -> io::Result<()> {
    let mut from = BufReader::new(from);
    let mut line = prefix.as_bytes().to_vec();
    loop {
        line.truncate(prefix.len());
        if from.read_until(b'\n', &mut line)? == 0 {
            return Ok(());
        }
        if line.last() != Some(&b'\n') {
            line.push(b'\n');
        }
        match to {
            Stream::Stdout => io::stdout().lock().write_all(&line)?,
            Stream::Stderr => io::stderr().lock().write_all(&line)?,
        }
    }
}
