//! Reading members straight out of a gzip-compressed tar archive, without extracting to disk.
//!
//! Invariant: either every requested member is returned, whole, or the error names the
//! archive and the member missing or unreadable.

use super::cache::io_error;
use crate::error::{Error, Result};
use flate2::read::GzDecoder;
use std::io::{BufReader, Read};
use std::path::Path;

/// The contents of the members `names` of the `.tgz` at `path`, in the order asked for.
pub(crate) fn read_members(path: &Path, names: &[&str]) -> Result<Vec<Vec<u8>>> {
    let file = std::fs::File::open(path).map_err(|e| io_error(path, "opening", e))?;
    let mut archive = tar::Archive::new(GzDecoder::new(BufReader::new(file)));
    let corrupt = |e: std::io::Error| Error::Data {
        path: path.display().to_string(),
        msg: format!("not a readable gzip-compressed tar archive: {e}"),
    };
    let mut found: Vec<Option<Vec<u8>>> = vec![None; names.len()];
    for entry in archive.entries().map_err(corrupt)? {
        let mut entry = entry.map_err(corrupt)?;
        let entry_path = entry.path().map_err(corrupt)?;
        let Some(slot) = names.iter().position(|n| Path::new(n) == entry_path) else {
            continue;
        };
        let mut data = Vec::with_capacity(entry.size() as usize);
        entry.read_to_end(&mut data).map_err(|e| Error::Data {
            path: format!("{}:{}", path.display(), names[slot]),
            msg: format!("reading the member failed: {e}"),
        })?;
        found[slot] = Some(data);
        if found.iter().all(Option::is_some) {
            break;
        }
    }
    names
        .iter()
        .zip(found)
        .map(|(name, data)| {
            data.ok_or_else(|| Error::Data {
                path: path.display().to_string(),
                msg: format!("the archive has no member {name}"),
            })
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use flate2::Compression;
    use flate2::write::GzEncoder;

    /// Writes a `.tgz` holding the given (name, content) members.
    pub(crate) fn write_tgz(path: &Path, members: &[(&str, &[u8])]) {
        let gz = GzEncoder::new(std::fs::File::create(path).unwrap(), Compression::fast());
        let mut tar = tar::Builder::new(gz);
        for (name, data) in members {
            let mut header = tar::Header::new_gnu();
            header.set_size(data.len() as u64);
            header.set_mode(0o644);
            header.set_cksum();
            tar.append_data(&mut header, name, *data).unwrap();
        }
        tar.into_inner().unwrap().finish().unwrap();
    }

    fn scratch(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("rtx-tgz-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn reads_members_in_the_order_asked() {
        let path = scratch("order").join("a.tgz");
        write_tgz(&path, &[("package/a", b"first"), ("package/b", b"second")]);
        let got = read_members(&path, &["package/b", "package/a"]).unwrap();
        assert_eq!(got, vec![b"second".to_vec(), b"first".to_vec()]);
    }

    #[test]
    fn a_missing_member_is_named() {
        let path = scratch("missing").join("a.tgz");
        write_tgz(&path, &[("package/a", b"x")]);
        let err = read_members(&path, &["package/a", "package/zz"]).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("{}: the archive has no member package/zz", path.display())
        );
    }

    #[test]
    fn a_non_gzip_file_is_an_error_naming_it() {
        let path = scratch("notgz").join("a.tgz");
        std::fs::write(&path, b"this is not gzip").unwrap();
        let err = read_members(&path, &["x"]).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("{}: not a readable gzip", path.display())),
            "{err}"
        );
    }
}
