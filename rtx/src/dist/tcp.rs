//! The CPU backend: collectives over TCP connections between every pair of ranks, the role Gloo
//! plays for PyTorch.
//!
//! Setup: each rank listens on an ephemeral port of the interface it reaches the store
//! through, publishes the address in the store, connects to every lower rank and accepts every
//! higher one (a hello names the connecting rank and its world size).
//!
//! The algorithms exchange directly between ranks, in `world_size - 1` steps where rank `r`
//! sends to `r + s` while receiving from `r - s` (mod the world size), the send on a scoped
//! thread so that no pair of ranks can block each other. `all_reduce` is a reduce-scatter then
//! an all-gather: each rank owns one of `world_size` chunks, receives every rank's copy of it,
//! reduces them in rank order and sends the result to all; every rank sends and receives about
//! `2 (world_size - 1) / world_size` times the buffer, as in a ring, and the result is the same
//! on every rank bit for bit because only the owner reduces each chunk. `broadcast` is a
//! scatter from the root then the same all-gather, so the root sends about twice the buffer,
//! not `world_size - 1` copies of it.
//!
//! Every message is a frame: the collective's code and sequence number, the payload length,
//! the payload. A frame that does not match what this rank expects (another collective, another
//! size) is an error naming the sender. Sockets have read and write timeouts of the group's
//! timeout; a timeout, a closed connection or a reset is handed to `fault.rs`, which finds the
//! rank to blame, and the group stays broken afterwards (every later call returns the error).

use super::collectives::Collectives;
use super::fault::{Seen, blame, note_failed};
use super::store::{Store, secs};
use super::wire::{get_u64, is_disconnect, is_timeout, put_u64};
use crate::error::{Error, Result};
use rtx_backends::cpu::ranks::{ReduceOp, reduce};
use rtx_kernels::DType;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Marks a hello from an rtx rank (a stray connection to the port is refused).
const MAGIC: u64 = 0x7274_785f_6469_7374; // "rtx_dist"

/// The CPU backend of one rank: a connection to every other rank.
pub(crate) struct Tcp {
    rank: usize,
    world: usize,
    /// `peers[q]` is the connection to rank `q`; `None` for this rank.
    peers: Vec<Option<TcpStream>>,
    store: Arc<Store>,
    prefix: String,
    timeout: Duration,
    /// The number of collectives started, which every frame carries.
    seq: u64,
    /// The error that broke the group, returned by every later call.
    broken: Option<Error>,
}

/// The collectives, as codes in frames and names in messages.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    AllReduce = 1,
    Broadcast = 2,
    AllGather = 3,
    ReduceScatter = 4,
    Barrier = 5,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::AllReduce => "all_reduce",
            Kind::Broadcast => "broadcast",
            Kind::AllGather => "all_gather",
            Kind::ReduceScatter => "reduce_scatter",
            Kind::Barrier => "barrier",
        }
    }

    fn from_code(c: u64) -> Option<Kind> {
        [
            Kind::AllReduce,
            Kind::Broadcast,
            Kind::AllGather,
            Kind::ReduceScatter,
            Kind::Barrier,
        ]
        .into_iter()
        .find(|k| *k as u64 == c)
    }
}

/// Why one send or receive failed, before blame is assigned.
enum Fault {
    /// The socket to `peer` failed (timeout, close, reset, or another I/O error).
    Io {
        peer: usize,
        sending: bool,
        err: io::Error,
    },
    /// `peer` sent a frame this rank did not expect.
    Mismatch { peer: usize, msg: String },
}

impl Tcp {
    /// Connects rank `rank` of `world` to every other rank, finding them through `store`.
    pub(crate) fn connect(
        rank: usize,
        world: usize,
        store: Arc<Store>,
        prefix: &str,
        timeout: Duration,
    ) -> Result<Tcp> {
        let fail = |rank_at_fault: Option<usize>, msg: String| Error::Dist {
            rank: rank_at_fault,
            msg: format!("rank {rank}: connecting the group: {msg}"),
        };
        let ip = store.local_ip()?;
        let listener = TcpListener::bind(SocketAddr::new(ip, 0))
            .map_err(|e| fail(Some(rank), format!("cannot listen on {ip}: {e}")))?;
        let addr = listener
            .local_addr()
            .map_err(|e| fail(Some(rank), e.to_string()))?;
        store.set(
            &format!("{prefix}/addr/{rank}"),
            addr.to_string().as_bytes(),
        )?;

        let mut peers: Vec<Option<TcpStream>> = (0..world).map(|_| None).collect();
        for (q, slot) in peers.iter_mut().enumerate().take(rank) {
            let text = store.get(&format!("{prefix}/addr/{q}")).map_err(|e| {
                fail(
                    Some(q),
                    format!("rank {q} never published its address: {e}"),
                )
            })?;
            let text = String::from_utf8_lossy(&text).into_owned();
            let at: SocketAddr = text.parse().map_err(|_| {
                fail(
                    Some(q),
                    format!("rank {q} published a bad address {text:?}"),
                )
            })?;
            let mut s = TcpStream::connect_timeout(&at, timeout)
                .map_err(|e| fail(Some(q), format!("cannot connect to rank {q} at {at}: {e}")))?;
            s.set_write_timeout(Some(timeout))
                .and_then(|()| {
                    put_u64(&mut s, MAGIC)?;
                    put_u64(&mut s, rank as u64)?;
                    put_u64(&mut s, world as u64)
                })
                .map_err(|e| fail(Some(q), format!("cannot greet rank {q} at {at}: {e}")))?;
            *slot = Some(s);
        }

        // Accept the higher ranks until all are in or the timeout passes.
        let deadline = Instant::now() + timeout;
        listener
            .set_nonblocking(true)
            .map_err(|e| fail(Some(rank), e.to_string()))?;
        while peers.iter().skip(rank + 1).any(Option::is_none) {
            match listener.accept() {
                Ok((mut s, from)) => {
                    let hello = s
                        .set_nonblocking(false)
                        .and_then(|()| s.set_read_timeout(Some(timeout)))
                        .and_then(|()| Ok((get_u64(&mut s)?, get_u64(&mut s)?, get_u64(&mut s)?)));
                    let Ok((MAGIC, q, their_world)) = hello else {
                        continue; // not an rtx rank, or one that gave up: ignore it
                    };
                    let q = q as usize;
                    if their_world as usize != world {
                        return Err(fail(
                            Some(q),
                            format!(
                                "rank {q} (at {from}) has WORLD_SIZE={their_world}, this rank \
                                 has {world}"
                            ),
                        ));
                    }
                    if q <= rank || q >= world || peers[q].is_some() {
                        return Err(fail(
                            Some(q),
                            format!(
                                "a second or unexpected rank {q} connected from {from} (RANK \
                                 set twice?)"
                            ),
                        ));
                    }
                    peers[q] = Some(s);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        let missing: Vec<String> = (rank + 1..world)
                            .filter(|&q| peers[q].is_none())
                            .map(|q| q.to_string())
                            .collect();
                        let who = match missing.len() {
                            1 => "rank",
                            _ => "ranks",
                        };
                        return Err(fail(
                            missing.first().and_then(|q| q.parse().ok()),
                            format!(
                                "{who} {} did not connect within {} (RTX_DIST_TIMEOUT): not \
                                 started, or started with another MASTER_ADDR or MASTER_PORT?",
                                missing.join(", "),
                                secs(timeout)
                            ),
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(e) => return Err(fail(Some(rank), format!("accepting connections: {e}"))),
            }
        }
        for s in peers.iter().flatten() {
            s.set_nodelay(true)
                .and_then(|()| s.set_read_timeout(Some(timeout)))
                .and_then(|()| s.set_write_timeout(Some(timeout)))
                .map_err(|e| fail(Some(rank), e.to_string()))?;
        }
        Ok(Tcp {
            rank,
            world,
            peers,
            store,
            prefix: prefix.to_string(),
            timeout,
            seq: 0,
            broken: None,
        })
    }

    /// Runs one collective: numbers it, refuses to run on a broken group, and turns a fault
    /// into the error that names the rank to blame (breaking the group).
    fn run(
        &mut self,
        kind: Kind,
        body: impl FnOnce(&Self, u64) -> std::result::Result<(), Fault>,
    ) -> Result<()> {
        if let Some(e) = &self.broken {
            return Err(e.clone());
        }
        self.seq += 1;
        let seq = self.seq;
        match body(self, seq) {
            Ok(()) => Ok(()),
            Err(fault) => {
                let e = self.blame(kind, seq, fault);
                self.broken = Some(e.clone());
                Err(e)
            }
        }
    }

    /// The error for a fault in collective `seq`; notes it in the store and closes every
    /// connection so that the other ranks learn at once.
    fn blame(&self, kind: Kind, seq: u64, fault: Fault) -> Error {
        let me = self.rank;
        let what = format!("{} #{seq}", kind.name());
        let err = match fault {
            Fault::Mismatch { peer, msg } => Error::Dist {
                rank: Some(peer),
                msg: format!("rank {me}: {what}: {msg}"),
            },
            Fault::Io { peer, sending, err } => {
                let dir = if sending {
                    "sending to"
                } else {
                    "receiving from"
                };
                let (seen, why) = if is_timeout(&err) {
                    let why = format!(
                        "rank {peer} did not answer within {} (RTX_DIST_TIMEOUT): it hangs or \
                         is far behind",
                        secs(self.timeout)
                    );
                    (Seen::Silent, why)
                } else if is_disconnect(&err) {
                    let why = format!("rank {peer} closed its connection (it exited or crashed)");
                    (Seen::Closed, why)
                } else {
                    (Seen::Closed, format!("{dir} rank {peer} failed: {err}"))
                };
                let direct = format!("rank {me}: {what}: {why}");
                // A quarter of the timeout lets ranks that timed out together leave notes.
                let grace = (self.timeout / 4).max(Duration::from_millis(20));
                blame(
                    &self.store,
                    &self.prefix,
                    (me, peer),
                    &what,
                    seen,
                    direct,
                    grace,
                )
            }
        };
        if let Error::Dist {
            rank: Some(origin),
            msg,
        } = &err
        {
            note_failed(&self.store, &self.prefix, me, *origin, msg);
        }
        for s in self.peers.iter().flatten() {
            let _ = s.shutdown(Shutdown::Both);
        }
        err
    }

    fn peer(&self, q: usize) -> &TcpStream {
        self.peers[q]
            .as_ref()
            .expect("a connection to every other rank")
    }

    /// Sends one frame to rank `to`.
    fn send(&self, to: usize, kind: Kind, seq: u64, data: &[u8]) -> std::result::Result<(), Fault> {
        let mut s = self.peer(to);
        let mut header = [0u8; 24];
        header[..8].copy_from_slice(&(kind as u64).to_le_bytes());
        header[8..16].copy_from_slice(&seq.to_le_bytes());
        header[16..].copy_from_slice(&(data.len() as u64).to_le_bytes());
        s.write_all(&header)
            .and_then(|()| s.write_all(data))
            .map_err(|err| Fault::Io {
                peer: to,
                sending: true,
                err,
            })
    }

    /// Receives one frame from rank `from` into `out`, which must be exactly its size.
    fn recv(
        &self,
        from: usize,
        kind: Kind,
        seq: u64,
        out: &mut [u8],
    ) -> std::result::Result<(), Fault> {
        let mut s = self.peer(from);
        let io = |err| Fault::Io {
            peer: from,
            sending: false,
            err,
        };
        let (code, their_seq, len) = read_header(s).map_err(io)?;
        let theirs = Kind::from_code(code).map_or("an unknown message", Kind::name);
        if (code, their_seq) != (kind as u64, seq) {
            return Err(Fault::Mismatch {
                peer: from,
                msg: format!(
                    "rank {from} is in {theirs} #{their_seq}: every rank must call the same \
                     collectives in the same order"
                ),
            });
        }
        if len != out.len() as u64 {
            return Err(Fault::Mismatch {
                peer: from,
                msg: format!(
                    "rank {from} sent {len} bytes where this rank expects {}: every rank must \
                     pass tensors of the same size and element type",
                    out.len()
                ),
            });
        }
        s.read_exact(out).map_err(io)
    }

    /// Sends `send` to `to` while receiving into `recv` from `from` (the send on its own
    /// thread, so that ranks sending to each other cannot deadlock on full socket buffers).
    fn send_recv(
        &self,
        (kind, seq): (Kind, u64),
        (to, send): (usize, &[u8]),
        (from, recv): (usize, &mut [u8]),
    ) -> std::result::Result<(), Fault> {
        std::thread::scope(|scope| {
            let sender = scope.spawn(|| self.send(to, kind, seq, send));
            let received = self.recv(from, kind, seq, recv);
            let sent = sender.join().expect("the send thread does not panic");
            received.and(sent)
        })
    }

    /// Sends this rank's chunk of `data` to every rank and receives theirs in place: after it,
    /// every rank holds every rank's chunk.
    fn gather_chunks(
        &self,
        tag: (Kind, u64),
        data: &mut [u8],
        ranges: &[Range<usize>],
    ) -> std::result::Result<(), Fault> {
        for s in 1..self.world {
            let (to, from) = self.partners(s);
            let (send, recv) = split(data, ranges[self.rank].clone(), ranges[from].clone());
            self.send_recv(tag, (to, send), (from, recv))?;
        }
        Ok(())
    }

    /// The ranks rank `r` sends to and receives from at step `s` of a direct exchange.
    fn partners(&self, s: usize) -> (usize, usize) {
        (
            (self.rank + s) % self.world,
            (self.rank + self.world - s) % self.world,
        )
    }
}

/// A frame's header: the collective's code, its sequence number, the payload's length.
fn read_header(mut s: &TcpStream) -> io::Result<(u64, u64, u64)> {
    Ok((get_u64(&mut s)?, get_u64(&mut s)?, get_u64(&mut s)?))
}

/// `n` bytes of `size`-byte elements split into `world` chunks of whole elements, the first
/// `elements % world` chunks one element longer.
fn chunks(n: usize, size: usize, world: usize) -> Vec<Range<usize>> {
    let elems = n / size;
    let (base, extra) = (elems / world, elems % world);
    let mut start = 0;
    (0..world)
        .map(|q| {
            let len = (base + usize::from(q < extra)) * size;
            start += len;
            start - len..start
        })
        .collect()
}

/// The disjoint ranges `a` (read) and `b` (written) of one buffer.
fn split(data: &mut [u8], a: Range<usize>, b: Range<usize>) -> (&[u8], &mut [u8]) {
    if a.end <= b.start {
        let (lo, hi) = data.split_at_mut(b.start);
        (&lo[a], &mut hi[..b.end - b.start])
    } else {
        let (lo, hi) = data.split_at_mut(a.start);
        (&hi[..a.end - a.start], &mut lo[b])
    }
}

impl Collectives for Tcp {
    fn name(&self) -> &'static str {
        "tcp"
    }

    fn all_reduce(&mut self, data: &mut [u8], dtype: DType, op: ReduceOp) -> Result<()> {
        let world = self.world;
        if world == 1 {
            let copy = data.to_vec();
            reduce(&[copy.as_slice()], data, dtype, op);
            return Ok(());
        }
        self.run(Kind::AllReduce, |me, seq| {
            let tag = (Kind::AllReduce, seq);
            let ranges = chunks(data.len(), dtype.size_in_bytes(), world);
            let mine = ranges[me.rank].clone();
            let len = mine.len();
            // Every rank's copy of this rank's chunk, in rank order.
            let mut stage = vec![0u8; world * len];
            stage[me.rank * len..][..len].copy_from_slice(&data[mine.clone()]);
            for s in 1..world {
                let (to, from) = me.partners(s);
                let recv = &mut stage[from * len..][..len];
                me.send_recv(tag, (to, &data[ranges[to].clone()]), (from, recv))?;
            }
            if len > 0 {
                let parts: Vec<&[u8]> = stage.chunks_exact(len).collect();
                reduce(&parts, &mut data[mine], dtype, op);
            }
            me.gather_chunks(tag, data, &ranges)
        })
    }

    fn broadcast(&mut self, data: &mut [u8], root: usize) -> Result<()> {
        if self.world == 1 {
            return Ok(());
        }
        self.run(Kind::Broadcast, |me, seq| {
            let tag = (Kind::Broadcast, seq);
            let ranges = chunks(data.len(), 1, me.world);
            if me.rank == root {
                for q in (0..me.world).filter(|&q| q != root) {
                    me.send(q, Kind::Broadcast, seq, &data[ranges[q].clone()])?;
                }
            } else {
                me.recv(
                    root,
                    Kind::Broadcast,
                    seq,
                    &mut data[ranges[me.rank].clone()],
                )?;
            }
            me.gather_chunks(tag, data, &ranges)
        })
    }

    fn all_gather(&mut self, input: &[u8], out: &mut [u8]) -> Result<()> {
        let len = input.len();
        out[self.rank * len..][..len].copy_from_slice(input);
        if self.world == 1 {
            return Ok(());
        }
        self.run(Kind::AllGather, |me, seq| {
            for s in 1..me.world {
                let (to, from) = me.partners(s);
                let recv = &mut out[from * len..][..len];
                me.send_recv((Kind::AllGather, seq), (to, input), (from, recv))?;
            }
            Ok(())
        })
    }

    fn reduce_scatter(
        &mut self,
        input: &[u8],
        out: &mut [u8],
        dtype: DType,
        op: ReduceOp,
    ) -> Result<()> {
        let len = out.len();
        let world = self.world;
        let block = |q: usize| q * len..(q + 1) * len;
        let mut stage = vec![0u8; world * len];
        stage[block(self.rank)].copy_from_slice(&input[block(self.rank)]);
        if world > 1 {
            self.run(Kind::ReduceScatter, |me, seq| {
                for s in 1..world {
                    let (to, from) = me.partners(s);
                    let recv = &mut stage[block(from)];
                    me.send_recv(
                        (Kind::ReduceScatter, seq),
                        (to, &input[block(to)]),
                        (from, recv),
                    )?;
                }
                Ok(())
            })?;
        }
        if len > 0 {
            let parts: Vec<&[u8]> = stage.chunks_exact(len).collect();
            reduce(&parts, out, dtype, op);
        }
        Ok(())
    }

    fn barrier(&mut self) -> Result<()> {
        if self.world == 1 {
            return Ok(());
        }
        self.run(Kind::Barrier, |me, seq| {
            for s in 1..me.world {
                let (to, from) = me.partners(s);
                me.send_recv((Kind::Barrier, seq), (to, &[]), (from, &mut []))?;
            }
            Ok(())
        })
    }
}

/// Unblocks the other ranks at once when this rank's group goes away.
impl Drop for Tcp {
    fn drop(&mut self) {
        for s in self.peers.iter().flatten() {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_buffer_in_whole_elements() {
        let c = chunks(7 * 4, 4, 3);
        assert_eq!(c, vec![0..12, 12..20, 20..28]);
        let c = chunks(2 * 8, 8, 4);
        assert_eq!(c, vec![0..8, 8..16, 16..16, 16..16]);
    }

    #[test]
    fn split_gives_disjoint_ranges_either_way() {
        let mut d: Vec<u8> = (0..10).collect();
        let (a, b) = split(&mut d, 0..3, 5..7);
        assert_eq!(a, [0, 1, 2]);
        b.copy_from_slice(&[9, 9]);
        let (a, b) = split(&mut d, 6..8, 1..2);
        assert_eq!((a, b.len()), (&[9, 7][..], 1));
    }
}
