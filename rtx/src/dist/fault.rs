//! Which rank is to blame when a collective fails, so every surviving rank names the same one.
//!
//! A rank only sees its direct peer fail: the socket to rank 2 times out, but rank 2 may itself
//! be stuck waiting for rank 1, which hung. So a rank that fails writes what it knows to the
//! store, and a rank that sees a peer fail follows those notes to the rank at the end:
//!
//! - On a timeout waiting for `q`, a rank first notes `waiting q`, then follows `q`'s note,
//!   and the note of the rank `q` waits for, and so on, for at most the grace period (a
//!   quarter of the timeout, so all ranks whose timeouts fire together can leave their notes).
//!   The first rank in the chain that left no note is the one that hung.
//! - When `q` closed its connection, `q` either left a `failed` note first (it failed because
//!   of someone else, and the note names them) or died without one and is to blame itself.
//!   Notes are written before a rank closes its sockets, so no waiting is needed.
//!
//! Every rank then notes `failed origin message` and closes its connections, so ranks further
//! along fail at once instead of waiting out their own timeouts. A store that is gone means
//! rank 0, which serves it, is gone.

use super::store::Store;
use crate::error::Error;
use std::time::{Duration, Instant};

/// A rank's note in the store.
#[derive(Debug, PartialEq)]
enum Note {
    /// The rank is alive and timed out waiting for this rank.
    Waiting(usize),
    /// The rank gave up; `origin` is the rank it blames, `msg` its error message.
    Failed { origin: usize, msg: String },
}

/// The store key of `rank`'s note.
fn key(prefix: &str, rank: usize) -> String {
    format!("{prefix}/fault/{rank}")
}

fn encode(note: &Note) -> Vec<u8> {
    match note {
        Note::Waiting(q) => format!("waiting {q}").into_bytes(),
        Note::Failed { origin, msg } => format!("failed {origin} {msg}").into_bytes(),
    }
}

fn decode(bytes: &[u8]) -> Option<Note> {
    let text = String::from_utf8_lossy(bytes);
    let mut words = text.splitn(3, ' ');
    match (words.next()?, words.next()?.parse().ok()?) {
        ("waiting", q) => Some(Note::Waiting(q)),
        ("failed", origin) => Some(Note::Failed {
            origin,
            msg: words.next().unwrap_or("").to_string(),
        }),
        _ => None,
    }
}

/// Notes that `me` timed out waiting for `peer` (best effort: a store that is gone is what the
/// resolution reports).
pub(crate) fn note_waiting(store: &Store, prefix: &str, me: usize, peer: usize) {
    let _ = store.set(&key(prefix, me), &encode(&Note::Waiting(peer)));
}

/// Notes that `me` failed because of `origin`, with its message.
pub(crate) fn note_failed(store: &Store, prefix: &str, me: usize, origin: usize, msg: &str) {
    let note = Note::Failed {
        origin,
        msg: msg.to_string(),
    };
    let _ = store.set(&key(prefix, me), &encode(&note));
}

/// How a peer failed, as this rank saw it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Seen {
    /// No answer within the timeout.
    Silent,
    /// The connection closed or reset.
    Closed,
}

/// The error for `me`, whose collective `what` failed on `peer` as `seen` with `direct`
/// describing it, after following the notes in the store (waiting up to `grace` for notes of
/// ranks that time out at about the same moment).
pub(crate) fn blame(
    store: &Store,
    prefix: &str,
    (me, peer): (usize, usize),
    what: &str,
    seen: Seen,
    direct: String,
    grace: Duration,
) -> Error {
    let deadline = Instant::now()
        + match seen {
            Seen::Silent => grace,
            Seen::Closed => Duration::ZERO,
        };
    if let Seen::Silent = seen {
        note_waiting(store, prefix, me, peer);
    }
    let mut path = vec![me];
    let mut at = peer;
    loop {
        if path.contains(&at) {
            path.push(at);
            let cycle: Vec<String> = path.iter().map(|r| r.to_string()).collect();
            return Error::Dist {
                rank: Some(peer),
                msg: format!(
                    "{direct}; ranks wait on each other in a cycle ({}): do all ranks call the \
                     same collectives in the same order?",
                    cycle.join(" -> ")
                ),
            };
        }
        path.push(at);
        let wait = deadline.saturating_duration_since(Instant::now());
        let note = match store.get_within(&key(prefix, at), wait) {
            Ok(bytes) => decode(&bytes),
            Err(Error::Dist { rank: None, .. }) => None,
            Err(e) => {
                return Error::Dist {
                    rank: Some(0),
                    msg: format!(
                        "{direct}; the store, served by rank 0, is unreachable too, so rank 0 \
                         is probably gone ({e})"
                    ),
                };
            }
        };
        match note {
            Some(Note::Waiting(next)) => at = next,
            Some(Note::Failed { origin, msg }) => {
                return Error::Dist {
                    rank: Some(origin),
                    msg: format!("rank {me}: {what} failed because of rank {origin}: {msg}"),
                };
            }
            // `at` left no note: it died or hung, and is the one to blame.
            None if at == peer => {
                return Error::Dist {
                    rank: Some(peer),
                    msg: direct,
                };
            }
            None => {
                let chain: Vec<String> = path[1..].iter().map(|r| format!("rank {r}")).collect();
                return Error::Dist {
                    rank: Some(at),
                    msg: format!(
                        "rank {me}: {what} failed because rank {at} does not answer: rank {me} \
                         waits on {} ({direct})",
                        chain.join(", which waits on ")
                    ),
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_round_trip() {
        for n in [
            Note::Waiting(3),
            Note::Failed {
                origin: 1,
                msg: "rank 2: rank 1 closed its connection".into(),
            },
        ] {
            assert_eq!(decode(&encode(&n)), Some(n));
        }
        assert_eq!(decode(b"garbage"), None);
    }

    #[test]
    fn the_chain_of_waiting_ranks_ends_at_the_silent_one() {
        let server = super::super::StoreServer::bind("127.0.0.1", 0).unwrap();
        let store = Store::connect(&server.addr().to_string(), Duration::from_secs(5)).unwrap();
        // Rank 0 timed out on 2, which waits on 3, which waits on 1, which left nothing.
        note_waiting(&store, "t", 2, 3);
        note_waiting(&store, "t", 3, 1);
        let grace = Duration::from_millis(50);
        let e = blame(
            &store,
            "t",
            (0, 2),
            "all_reduce #1",
            Seen::Silent,
            "direct".into(),
            grace,
        );
        assert!(matches!(e, Error::Dist { rank: Some(1), .. }), "{e:?}");
        let chain = "rank 0 waits on rank 2, which waits on rank 3, which waits on rank 1";
        assert!(e.to_string().contains(chain), "{e}");
        // A rank that failed first names the origin for the ranks that see it close.
        note_failed(&store, "t", 3, 1, "rank 3: rank 1 closed its connection");
        let e = blame(
            &store,
            "t",
            (0, 3),
            "barrier #2",
            Seen::Closed,
            "direct".into(),
            grace,
        );
        assert!(matches!(e, Error::Dist { rank: Some(1), .. }), "{e:?}");
        assert!(
            e.to_string()
                .contains("because of rank 1: rank 3: rank 1 closed"),
            "{e}"
        );
        // Two ranks waiting on each other are a cycle, not a hang of either.
        note_waiting(&store, "u", 1, 0);
        let e = blame(
            &store,
            "u",
            (0, 1),
            "broadcast #1",
            Seen::Silent,
            "direct".into(),
            grace,
        );
        assert!(e.to_string().contains("cycle (0 -> 1 -> 0)"), "{e}");
    }
}
