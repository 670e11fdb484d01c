//! Atomic file replacement: the target path holds either its previous content or the new
//! content in full, never a part of it, whatever fails (an error, a crash, a power cut).
//!
//! The bytes go to a temporary file beside the target (same directory, so the same file
//! system), which is flushed to disk (`fsync`) and then renamed over the target; rename is
//! atomic on POSIX file systems. Finally the directory is synced so the rename itself is
//! durable. On an error before the rename the temporary file is removed.

use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// An [`Error::Io`] about `file`.
pub(crate) fn io_error(file: &Path, doing: &str, e: &std::io::Error) -> Error {
    Error::Io {
        file: file.to_path_buf(),
        kind: e.kind(),
        msg: format!("{doing}: {e}"),
    }
}

/// Replaces the content of `path` with `bytes`, atomically (see the module docs). When
/// `fail_after` is set, writes to the temporary file fail after that many bytes: how the
/// tests stand in for a full disk or a crash part-way.
pub(crate) fn write(path: &Path, bytes: &[u8], fail_after: Option<usize>) -> Result<()> {
    let tmp = temp_path(path);
    let result = write_temp(&tmp, path, bytes, fail_after);
    if result.is_err() {
        // Best effort: the error that matters is the one being returned.
        let _ = std::fs::remove_file(&tmp);
        return result;
    }
    if let Err(e) = std::fs::rename(&tmp, path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(io_error(
            path,
            "cannot move the written file into place",
            &e,
        ));
    }
    sync_dir(path)
}

/// A fresh name beside `path`: `.NAME.tmp-PID-N`, hidden, unique within this process.
fn temp_path(path: &Path) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let name = path
        .file_name()
        .map_or_else(|| "checkpoint".into(), |n| n.to_string_lossy());
    let tmp = format!(".{name}.tmp-{}-{n}", std::process::id());
    path.with_file_name(tmp)
}

/// Writes and syncs the temporary file, with the target's permissions when it exists.
fn write_temp(tmp: &Path, path: &Path, bytes: &[u8], fail_after: Option<usize>) -> Result<()> {
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(tmp)
        .map_err(|e| io_error(path, "cannot create a temporary file beside it", &e))?;
    if let Ok(meta) = std::fs::metadata(path) {
        // Keeps a read-only or shared checkpoint's mode; not worth failing the save over.
        let _ = file.set_permissions(meta.permissions());
    }
    let mut w = FailAfter {
        inner: &file,
        left: fail_after,
    };
    w.write_all(bytes)
        .and_then(|()| w.flush())
        .map_err(|e| io_error(path, "cannot write", &e))?;
    file.sync_all()
        .map_err(|e| io_error(path, "cannot flush to disk", &e))
}

/// Makes the rename durable by syncing the directory that holds `path` (POSIX only; other
/// systems make the rename durable themselves or offer no way to ask).
fn sync_dir(path: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io_error(path, "written, but cannot sync its directory", &e))?;
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

/// A writer that fails with "no space left" once `left` bytes have gone through.
struct FailAfter<W> {
    inner: W,
    left: Option<usize>,
}

impl<W: Write> Write for FailAfter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let Some(left) = self.left else {
            return self.inner.write(buf);
        };
        if left == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::StorageFull,
                "injected failure: no space left",
            ));
        }
        let n = self.inner.write(&buf[..buf.len().min(left)])?;
        self.left = Some(left - n);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("rtx-atomic-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn listing(d: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_failed_write_leaves_the_old_file_and_no_temporary() {
        let d = dir("fail");
        let target = d.join("ck.safetensors");
        let old: Vec<u8> = (0..100u8).collect();
        write(&target, &old, None).unwrap();
        let new = vec![7u8; 5000];
        for n in [0, 1, 99, 4096, 4999] {
            let e = write(&target, &new, Some(n)).unwrap_err();
            assert!(e.to_string().contains("ck.safetensors"), "{e}");
            assert!(e.to_string().contains("injected failure"), "{e}");
            assert_eq!(std::fs::read(&target).unwrap(), old, "after failing at {n}");
            assert_eq!(listing(&d), ["ck.safetensors"]);
        }
        write(&target, &new, Some(5000)).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), new);
        assert_eq!(listing(&d), ["ck.safetensors"]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_missing_directory_is_an_error_naming_the_file() {
        let d = dir("missing");
        let target = d.join("no/such/dir/ck.safetensors");
        let e = write(&target, b"x", None).unwrap_err();
        std::fs::remove_dir_all(&d).unwrap();
        assert!(e.to_string().contains("no/such/dir/ck.safetensors"), "{e}");
        assert!(matches!(
            e,
            Error::Io {
                kind: std::io::ErrorKind::NotFound,
                ..
            }
        ));
    }
}
