//! The on-disk cache of compiled kernels, under `$RTX_HOME/kernels` (default
//! `~/.cache/rtx/kernels`), so a second run starts warm.
//!
//! An entry is named by a hash of everything that decides the machine code (source, target
//! architecture, NVRTC version, options) and starts with a header holding a checksum of its
//! payload: a truncated or corrupt entry fails the check, is reported as absent and gets rebuilt.
//! Entries are written to a temporary file and renamed, so a reader never sees half of one.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::RwLock;

const MAGIC: &[u8; 8] = b"RTXKERN1";
const HEADER: usize = 8 + 1 + 16 + 8;

/// What a cache entry holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    /// Machine code for one architecture.
    Cubin,
    /// PTX, compiled by the driver when loaded.
    Ptx,
}

/// FNV-1a over 128 bits: stable across runs and platforms (std's hashers are not), and wide
/// enough that distinct kernels do not collide in practice. Not for adversarial input.
pub(crate) fn hash128(parts: &[&[u8]]) -> u128 {
    const OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
    const PRIME: u128 = 0x0000000001000000000000000000013B;
    let mut h = OFFSET;
    for part in parts {
        // The length first, so ("ab", "c") and ("a", "bc") differ.
        for b in (part.len() as u64).to_le_bytes().iter().chain(part.iter()) {
            h ^= *b as u128;
            h = h.wrapping_mul(PRIME);
        }
    }
    h
}

static DIR_OVERRIDE: RwLock<Option<PathBuf>> = RwLock::new(None);

/// Makes the kernel cache live in `dir` (`None` goes back to `$RTX_HOME/kernels`), for tests
/// and tools that must not touch the user's cache.
pub fn set_kernel_cache_dir(dir: Option<PathBuf>) {
    *DIR_OVERRIDE.write().unwrap_or_else(|p| p.into_inner()) = dir;
}

/// The folder compiled kernels are cached in: the override, else `$RTX_HOME/kernels`, else
/// `~/.cache/rtx/kernels` (`None` when there is no home folder either).
pub fn kernel_cache_dir() -> Option<PathBuf> {
    if let Some(d) = DIR_OVERRIDE
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
    {
        return Some(d);
    }
    if let Some(h) = std::env::var_os("RTX_HOME").filter(|h| !h.is_empty()) {
        return Some(PathBuf::from(h).join("kernels"));
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".cache/rtx/kernels"))
}

/// The file of the entry `key` in `dir`.
pub(crate) fn entry_path(dir: &Path, key: u128) -> PathBuf {
    dir.join(format!("{key:032x}.bin"))
}

/// The entry's payload, or `None` when it is missing, truncated or fails its checksum.
pub(crate) fn read(path: &Path) -> Option<(Format, Vec<u8>)> {
    let bytes = std::fs::read(path).ok()?;
    if bytes.len() < HEADER || &bytes[..8] != MAGIC {
        return None;
    }
    let format = match bytes[8] {
        0 => Format::Cubin,
        1 => Format::Ptx,
        _ => return None,
    };
    let sum = u128::from_le_bytes(bytes[9..25].try_into().ok()?);
    let len = u64::from_le_bytes(bytes[25..33].try_into().ok()?) as usize;
    let payload = &bytes[HEADER..];
    (payload.len() == len && hash128(&[payload]) == sum).then(|| (format, payload.to_vec()))
}

/// Writes an entry (header and payload) through a temporary file and a rename. Failing to
/// write the cache only costs a recompile next time, so callers may ignore the error.
pub(crate) fn write(path: &Path, format: Format, payload: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("entry"),
        std::process::id()
    ));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(MAGIC)?;
    f.write_all(&[match format {
        Format::Cubin => 0,
        Format::Ptx => 1,
    }])?;
    f.write_all(&hash128(&[payload]).to_le_bytes())?;
    f.write_all(&(payload.len() as u64).to_le_bytes())?;
    f.write_all(payload)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_separates_parts() {
        assert_ne!(hash128(&[b"ab", b"c"]), hash128(&[b"a", b"bc"]));
        assert_eq!(hash128(&[b"x"]), hash128(&[b"x"]));
    }

    #[test]
    fn entries_round_trip_and_corruption_is_caught() {
        let dir = std::env::temp_dir().join(format!("rtx-disk-cache-{}", std::process::id()));
        let p = entry_path(&dir, 42);
        write(&p, Format::Ptx, b"payload bytes").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read(&p), Some((Format::Ptx, b"payload bytes".to_vec())));
        let mut bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{e}"));
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&p, &bytes).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read(&p), None);
        std::fs::write(&p, &bytes[..HEADER - 1]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read(&p), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
