//! A small TCP key-value store, served by rank 0, through which the ranks find each other.
//!
//! Rank 0 runs a [`StoreServer`]; every rank (rank 0 included) talks to it through a
//! [`Store`]. Values are bytes, so the store can carry listening addresses now and NCCL's
//! unique id later. `get` and `wait` block on the server until the key is set or the timeout
//! passes, so a rank that starts early simply waits for the others; the server answers on its
//! own threads, so it keeps serving while rank 0's main thread computes.
//!
//! The protocol, one request then one reply at a time on a connection, every field
//! length-prefixed (see `wire.rs`): `SET key value -> OK`; `GET key wait_ms -> OK value |
//! TIMEOUT`; `ADD key delta -> OK new` (the counter is kept as decimal text, as PyTorch's
//! store does); `WAIT n key.. wait_ms -> OK | TIMEOUT missing-key`.

use super::wire::{
    get_bytes, get_u8, get_u64, is_disconnect, is_timeout, put_bytes, put_u8, put_u64,
};
use crate::error::{Error, Result};
use std::collections::HashMap;
use std::io::{self, BufReader, BufWriter, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const SET: u8 = 1;
const GET: u8 = 2;
const ADD: u8 = 3;
const WAIT: u8 = 4;
const OK: u8 = 0;
const TIMED_OUT: u8 = 1;
const FAILED: u8 = 2;

/// Keys and values are small (addresses, ids, counters); anything bigger is a foreign client.
const FIELD_LIMIT: u64 = 64 << 20;

/// The keys and values the server holds.
type Map = HashMap<String, Vec<u8>>;

/// The table the server's connection threads share, and the signal that a key was set.
#[derive(Default)]
struct Table {
    map: Mutex<Map>,
    changed: Condvar,
}

impl Table {
    fn lock(&self) -> MutexGuard<'_, Map> {
        // A connection thread that panicked cannot have left the map half-written: every
        // change is one `insert`.
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits until every key in `keys` is set or `wait` passes; returns the first missing key.
    fn wait_for<'k>(
        &self,
        keys: &'k [String],
        wait: Duration,
    ) -> (MutexGuard<'_, Map>, Option<&'k String>) {
        let deadline = Instant::now() + wait;
        let mut map = self.lock();
        loop {
            let missing = keys.iter().find(|k| !map.contains_key(*k));
            let now = Instant::now();
            match missing {
                None => return (map, None),
                Some(k) if now >= deadline => return (map, Some(k)),
                Some(_) => {
                    map = self
                        .changed
                        .wait_timeout(map, deadline - now)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
            }
        }
    }
}

/// The store's server: a listening socket and a thread per client connection. Dropping it
/// stops accepting; connections already open end when their clients disconnect.
///
/// ```
/// use rtx::dist::{Store, StoreServer};
/// use std::time::Duration;
/// let server = StoreServer::bind("127.0.0.1", 0).unwrap();
/// let store = Store::connect(&server.addr().to_string(), Duration::from_secs(5)).unwrap();
/// store.set("greeting", b"hello").unwrap();
/// assert_eq!(store.get("greeting").unwrap(), b"hello");
/// assert_eq!(store.add("count", 2).unwrap(), 2);
/// assert_eq!(store.add("count", 3).unwrap(), 5);
/// ```
pub struct StoreServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
    /// The number of client connections open now.
    open: Arc<AtomicUsize>,
    /// How long dropping the server waits for its clients to disconnect.
    linger: Duration,
}

impl StoreServer {
    /// Serves on `host:port` (port 0 picks a free one; [`StoreServer::addr`] tells which).
    ///
    /// # Errors
    /// [`Error::Dist`] naming the address when it does not resolve or cannot be bound (the
    /// port is taken, most often: another job, or a previous run still closing).
    pub fn bind(host: &str, port: u16) -> Result<StoreServer> {
        let fail = |e: &dyn std::fmt::Display| Error::Dist {
            rank: Some(0),
            msg: format!(
                "rank 0 cannot serve the store on {host}:{port} (MASTER_ADDR, MASTER_PORT): {e}"
            ),
        };
        let addrs: Vec<SocketAddr> = (host, port)
            .to_socket_addrs()
            .map_err(|e| fail(&e))?
            .collect();
        let listener = TcpListener::bind(&addrs[..]).map_err(|e| fail(&e))?;
        let addr = listener.local_addr().map_err(|e| fail(&e))?;
        let stop = Arc::new(AtomicBool::new(false));
        let table = Arc::new(Table::default());
        let stopping = stop.clone();
        let open = Arc::new(AtomicUsize::new(0));
        let counter = open.clone();
        let accept = std::thread::Builder::new()
            .name("rtx-dist-store".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if stopping.load(Ordering::Acquire) {
                        break;
                    }
                    let Ok(conn) = conn else { continue };
                    let table = table.clone();
                    let mine = counter.clone();
                    counter.fetch_add(1, Ordering::AcqRel);
                    // A client that misbehaves ends only its own connection.
                    let spawned = std::thread::Builder::new()
                        .name("rtx-dist-store-conn".into())
                        .spawn(move || {
                            let _ = serve(conn, &table);
                            mine.fetch_sub(1, Ordering::AcqRel);
                        });
                    if spawned.is_err() {
                        counter.fetch_sub(1, Ordering::AcqRel);
                    }
                }
            })
            .map_err(|e| fail(&e))?;
        Ok(StoreServer {
            addr,
            stop,
            accept: Some(accept),
            open,
            linger: Duration::ZERO,
        })
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Makes dropping the server wait up to `max` for every client to disconnect: after a
    /// failure the other ranks still read rank 0's store to find whom to blame, and rank 0's
    /// process exiting would take it from them.
    pub fn linger_on_drop(&mut self, max: Duration) {
        self.linger = max;
    }
}

impl Drop for StoreServer {
    fn drop(&mut self) {
        let deadline = Instant::now() + self.linger;
        while self.open.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
        self.stop.store(true, Ordering::Release);
        // `accept` blocks; one connection wakes it to see the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

/// Answers one client's requests until it disconnects.
fn serve(conn: TcpStream, table: &Table) -> io::Result<()> {
    conn.set_nodelay(true)?;
    let mut r = BufReader::new(conn.try_clone()?);
    let mut w = BufWriter::new(conn);
    loop {
        let op = match get_u8(&mut r) {
            Ok(op) => op,
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        };
        let key = String::from_utf8_lossy(&get_bytes(&mut r, FIELD_LIMIT)?).into_owned();
        match op {
            SET => {
                let value = get_bytes(&mut r, FIELD_LIMIT)?;
                table.lock().insert(key, value);
                table.changed.notify_all();
                put_u8(&mut w, OK)?;
            }
            GET => {
                let wait = Duration::from_millis(get_u64(&mut r)?);
                let keys = [key];
                let (map, missing) = table.wait_for(&keys, wait);
                match missing {
                    None => {
                        let value = map[&keys[0]].clone();
                        drop(map);
                        put_u8(&mut w, OK)?;
                        put_bytes(&mut w, &value)?;
                    }
                    Some(_) => put_u8(&mut w, TIMED_OUT)?,
                }
            }
            ADD => {
                let delta = get_u64(&mut r)? as i64;
                let mut map = table.lock();
                let old = match map.get(&key) {
                    None => Some(0),
                    Some(v) => String::from_utf8_lossy(v).parse::<i64>().ok(),
                };
                match old {
                    None => {
                        drop(map);
                        put_u8(&mut w, FAILED)?;
                        put_bytes(&mut w, b"the key holds a value that is not a counter")?;
                    }
                    Some(old) => {
                        let new = old.wrapping_add(delta);
                        map.insert(key, new.to_string().into_bytes());
                        drop(map);
                        table.changed.notify_all();
                        put_u8(&mut w, OK)?;
                        put_u64(&mut w, new as u64)?;
                    }
                }
            }
            WAIT => {
                let n = get_u64(&mut r)?;
                let mut keys = vec![key];
                for _ in 1..n {
                    keys.push(
                        String::from_utf8_lossy(&get_bytes(&mut r, FIELD_LIMIT)?).into_owned(),
                    );
                }
                let wait = Duration::from_millis(get_u64(&mut r)?);
                let (map, missing) = table.wait_for(&keys, wait);
                let missing = missing.cloned();
                drop(map);
                match missing {
                    None => put_u8(&mut w, OK)?,
                    Some(k) => {
                        put_u8(&mut w, TIMED_OUT)?;
                        put_bytes(&mut w, k.as_bytes())?;
                    }
                }
            }
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "unknown request",
                ));
            }
        }
        w.flush()?;
    }
}

/// A client of the store: one connection, one request at a time (callers on several threads
/// take turns). A [`ProcessGroup`](super::ProcessGroup) holds one.
///
/// ```
/// # let pg = rtx::dist::init_with(rtx::dist::InitOptions::new(0, 1, "127.0.0.1", 0))?;
/// let store = pg.store();
/// store.set("run/name", b"exp-7")?;
/// assert_eq!(store.get("run/name")?, b"exp-7");
/// assert_eq!(store.try_get("run/missing")?, None);
/// # Ok::<(), rtx::Error>(())
/// ```
pub struct Store {
    conn: Mutex<(BufReader<TcpStream>, BufWriter<TcpStream>)>,
    addr: String,
    timeout: Duration,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("addr", &self.addr)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl Store {
    /// Connects to the store at `addr` (`host:port`), retrying while it is not up yet (rank 0
    /// may start after the others) for at most `timeout`, which is also how long
    /// [`Store::get`] and [`Store::wait`] wait for keys.
    ///
    /// # Errors
    /// [`Error::Dist`] naming the address, the timeout and the last connection error.
    pub fn connect(addr: &str, timeout: Duration) -> Result<Store> {
        let deadline = Instant::now() + timeout;
        let mut pause = Duration::from_millis(5);
        let stream = loop {
            let tried = addr.to_socket_addrs().map(|mut all| {
                all.find_map(|sa| TcpStream::connect_timeout(&sa, Duration::from_millis(500)).ok())
            });
            let err = match tried {
                Ok(Some(s)) => break s,
                Ok(None) => "connection refused or timed out".to_string(),
                Err(e) => e.to_string(),
            };
            if Instant::now() + pause > deadline {
                return Err(Error::Dist {
                    rank: Some(0),
                    msg: format!(
                        "could not reach the store at {addr} (MASTER_ADDR:MASTER_PORT, served by \
                         rank 0) within {} (RTX_DIST_TIMEOUT): {err}",
                        secs(timeout)
                    ),
                });
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(200));
        };
        let io = |e: io::Error| Error::Dist {
            rank: Some(0),
            msg: format!("the store at {addr}: {e}"),
        };
        stream.set_nodelay(true).map_err(io)?;
        stream.set_write_timeout(Some(timeout)).map_err(io)?;
        let reader = BufReader::new(stream.try_clone().map_err(io)?);
        Ok(Store {
            conn: Mutex::new((reader, BufWriter::new(stream))),
            addr: addr.to_string(),
            timeout,
        })
    }

    /// The address of the server.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The local address of this client's connection: the interface through which this host
    /// reaches rank 0, and so one the other ranks can reach too.
    pub(crate) fn local_ip(&self) -> Result<std::net::IpAddr> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        conn.1
            .get_ref()
            .local_addr()
            .map(|a| a.ip())
            .map_err(|e| Error::Dist {
                rank: None,
                msg: format!("the store at {}: {e}", self.addr),
            })
    }

    /// Sets `key` to `value`, waking every rank waiting for it.
    pub fn set(&self, key: &str, value: &[u8]) -> Result<()> {
        self.request(
            (SET, "set"),
            key,
            Duration::ZERO,
            |w| put_bytes(w, value),
            |r, status| expect_ok(status, r),
        )
    }

    /// The value of `key`, waiting for it up to the store's timeout.
    ///
    /// # Errors
    /// [`Error::Dist`] naming the key and the timeout when no rank set it in time.
    pub fn get(&self, key: &str) -> Result<Vec<u8>> {
        self.get_within(key, self.timeout)
    }

    /// The value of `key` if some rank has set it, without waiting.
    pub fn try_get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        self.fetch(key, Duration::ZERO)
    }

    /// [`Store::get`] waiting at most `wait`.
    pub fn get_within(&self, key: &str, wait: Duration) -> Result<Vec<u8>> {
        self.fetch(key, wait)?
            .ok_or_else(|| self.missing(key, wait))
    }

    /// The value of `key`, or `None` when it is still unset after `wait`.
    fn fetch(&self, key: &str, wait: Duration) -> Result<Option<Vec<u8>>> {
        self.request(
            (GET, "get"),
            key,
            wait,
            |w| put_u64(w, millis(wait)),
            |r, status| match status {
                OK => Ok(Some(get_bytes(r, FIELD_LIMIT)?)),
                TIMED_OUT => Ok(None),
                s => Err(failed(s, r)),
            },
        )
    }

    /// Adds `delta` to the counter `key` (0 when unset) and returns its new value, atomically:
    /// a way to count ranks that reached a point.
    pub fn add(&self, key: &str, delta: i64) -> Result<i64> {
        self.request(
            (ADD, "add"),
            key,
            Duration::ZERO,
            |w| put_u64(w, delta as u64),
            |r, status| {
                expect_ok(status, r)?;
                Ok(get_u64(r)? as i64)
            },
        )
    }

    /// Waits until every key in `keys` is set, up to the store's timeout.
    ///
    /// # Errors
    /// [`Error::Dist`] naming a key still missing at the timeout.
    pub fn wait(&self, keys: &[&str]) -> Result<()> {
        let Some((first, rest)) = keys.split_first() else {
            return Ok(());
        };
        let wait = self.timeout;
        let missing = self.request(
            (WAIT, "wait"),
            first,
            wait,
            |w| {
                put_u64(w, keys.len() as u64)?;
                for k in rest {
                    put_bytes(w, k.as_bytes())?;
                }
                put_u64(w, millis(wait))
            },
            |r, status| match status {
                OK => Ok(None),
                TIMED_OUT => Ok(Some(
                    String::from_utf8_lossy(&get_bytes(r, FIELD_LIMIT)?).into_owned(),
                )),
                s => Err(failed(s, r)),
            },
        )?;
        match missing {
            None => Ok(()),
            Some(k) => Err(self.missing(&k, wait)),
        }
    }

    fn missing(&self, key: &str, wait: Duration) -> Error {
        Error::Dist {
            rank: None,
            msg: format!(
                "key {key:?} was not set in the store at {} within {} (RTX_DIST_TIMEOUT)",
                self.addr,
                secs(wait)
            ),
        }
    }

    /// Sends one request (op, key, then `body`) and reads its reply with `reply`, allowing the
    /// server `wait` plus the store's timeout to answer.
    fn request<T>(
        &self,
        (op, what): (u8, &str),
        key: &str,
        wait: Duration,
        body: impl FnOnce(&mut BufWriter<TcpStream>) -> io::Result<()>,
        reply: impl FnOnce(&mut BufReader<TcpStream>, u8) -> io::Result<T>,
    ) -> Result<T> {
        let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let (r, w) = &mut *conn;
        let result = (|| {
            r.get_ref().set_read_timeout(Some(wait + self.timeout))?;
            put_u8(w, op)?;
            put_bytes(w, key.as_bytes())?;
            body(w)?;
            w.flush()?;
            let status = get_u8(r)?;
            reply(r, status)
        })();
        if let Err(e) = &result
            && e.kind() != REFUSED
        {
            // A reply may be half read: later replies could not be matched to their requests,
            // so the connection is closed and later requests fail instead.
            let _ = w.get_ref().shutdown(std::net::Shutdown::Both);
        }
        result.map_err(|e| {
            let why = if is_disconnect(&e) {
                "the server closed the connection (rank 0 exited?)".to_string()
            } else if is_timeout(&e) {
                format!(
                    "no answer within {} (rank 0 hung?)",
                    secs(wait + self.timeout)
                )
            } else {
                e.to_string()
            };
            Error::Dist {
                rank: Some(0),
                msg: format!("store at {}: {what} {key:?}: {why}", self.addr),
            }
        })
    }
}

fn expect_ok(status: u8, r: &mut impl io::Read) -> io::Result<()> {
    match status {
        OK => Ok(()),
        s => Err(failed(s, r)),
    }
}

/// The kind of the error for a request the server refused (a whole reply, read to its end).
const REFUSED: io::ErrorKind = io::ErrorKind::InvalidInput;

/// The error for a reply that is not OK (the server's message when it sent one).
fn failed(status: u8, r: &mut impl io::Read) -> io::Error {
    if status != FAILED {
        let msg = format!("unexpected reply {status}");
        return io::Error::new(io::ErrorKind::InvalidData, msg);
    }
    match get_bytes(r, FIELD_LIMIT) {
        Ok(m) => io::Error::new(REFUSED, String::from_utf8_lossy(&m).into_owned()),
        Err(e) => e,
    }
}

fn millis(d: Duration) -> u64 {
    d.as_millis().min(u64::MAX as u128) as u64
}

/// A duration for messages: `2 s`, `0.5 s`.
pub(crate) fn secs(d: Duration) -> String {
    format!("{} s", d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (StoreServer, Store) {
        let server = StoreServer::bind("127.0.0.1", 0).unwrap();
        let store = Store::connect(&server.addr().to_string(), Duration::from_secs(5)).unwrap();
        (server, store)
    }

    #[test]
    fn get_waits_for_a_key_set_later_by_another_client() {
        let (server, store) = pair();
        let addr = server.addr().to_string();
        let setter = std::thread::spawn(move || {
            let other = Store::connect(&addr, Duration::from_secs(5)).unwrap();
            std::thread::sleep(Duration::from_millis(50));
            other.set("late", &[0, 255, 7]).unwrap();
        });
        let start = Instant::now();
        assert_eq!(store.get("late").unwrap(), [0, 255, 7]);
        assert!(start.elapsed() >= Duration::from_millis(40));
        setter.join().unwrap();
        store.wait(&["late"]).unwrap();
        assert_eq!(store.try_get("never").unwrap(), None);
    }

    #[test]
    fn missing_keys_time_out_with_their_name() {
        let (_server, store) = pair();
        let e = store
            .get_within("absent", Duration::from_millis(30))
            .unwrap_err();
        assert!(e.to_string().contains("\"absent\" was not set"), "{e}");
        store.set("here", b"x").unwrap();
        let short = Store::connect(store.addr(), Duration::from_millis(30)).unwrap();
        let e = short.wait(&["here", "gone"]).unwrap_err();
        assert!(e.to_string().contains("\"gone\""), "{e}");
    }

    #[test]
    fn add_counts_atomically_across_clients() {
        let (server, store) = pair();
        let addr = server.addr().to_string();
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let addr = addr.clone();
                std::thread::spawn(move || {
                    let s = Store::connect(&addr, Duration::from_secs(5)).unwrap();
                    for _ in 0..25 {
                        s.add("n", 1).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(store.add("n", 0).unwrap(), 100);
        assert_eq!(store.get("n").unwrap(), b"100");
        store.set("text", b"abc").unwrap();
        let e = store.add("text", 1).unwrap_err();
        assert!(e.to_string().contains("not a counter"), "{e}");
        // A refused request leaves the connection usable.
        assert_eq!(store.add("n", 1).unwrap(), 101);
    }

    #[test]
    fn a_store_that_goes_away_is_named() {
        let (server, store) = pair();
        drop(server);
        // The connection thread still serves the open connection; a new client cannot connect.
        let e = Store::connect(store.addr(), Duration::from_millis(100)).unwrap_err();
        assert!(e.to_string().contains("could not reach the store"), "{e}");
    }
}
