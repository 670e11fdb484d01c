//! Length-prefixed fields on a byte stream, shared by the store and the ranks' connections.
//!
//! Invariant: every integer is little-endian and fixed-width, and every byte string is preceded
//! by its length, so a reader never guesses where a field ends.

use std::io::{self, Read, Write};

/// Writes one byte.
pub(crate) fn put_u8(w: &mut impl Write, v: u8) -> io::Result<()> {
    w.write_all(&[v])
}

/// Writes a `u64`.
pub(crate) fn put_u64(w: &mut impl Write, v: u64) -> io::Result<()> {
    w.write_all(&v.to_le_bytes())
}

/// Writes a byte string after its length.
pub(crate) fn put_bytes(w: &mut impl Write, b: &[u8]) -> io::Result<()> {
    put_u64(w, b.len() as u64)?;
    w.write_all(b)
}

/// Reads one byte.
pub(crate) fn get_u8(r: &mut impl Read) -> io::Result<u8> {
    let mut b = [0u8; 1];
    r.read_exact(&mut b)?;
    Ok(b[0])
}

/// Reads a `u64`.
pub(crate) fn get_u64(r: &mut impl Read) -> io::Result<u64> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b)?;
    Ok(u64::from_le_bytes(b))
}

/// Reads a byte string written by [`put_bytes`], refusing lengths above `limit` (a corrupt or
/// foreign stream must not make us allocate gigabytes).
pub(crate) fn get_bytes(r: &mut impl Read, limit: u64) -> io::Result<Vec<u8>> {
    let n = get_u64(r)?;
    if n > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a field of {n} bytes is longer than the limit of {limit}"),
        ));
    }
    let mut b = vec![0u8; n as usize];
    r.read_exact(&mut b)?;
    Ok(b)
}

/// Whether an I/O error means the peer did not answer in time (a read or write timeout).
pub(crate) fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// Whether an I/O error means the peer went away (its process exited or closed the socket).
pub(crate) fn is_disconnect(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
    )
}
