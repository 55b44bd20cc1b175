//! Atomic file replacement.
//!
//! Every output is first written to a temporary file in the destination folder and then
//! renamed over the destination. A crash or an error before the rename leaves the previous
//! file exactly as it was; rename within one folder is atomic on POSIX file systems.

use crate::{CoreError, Result};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Path of the temporary sibling used while `path` is being written.
fn temp_sibling(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // The pid keeps two concurrent runs from sharing a temporary file.
    path.with_file_name(format!(".{name}.{}.tmp", std::process::id()))
}

/// Write `bytes` to `path` atomically, creating parent folders as needed.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    if let Some(parent) = path.parent() {
        if !parent.as_os_str().is_empty() {
            fs::create_dir_all(parent).map_err(|e| CoreError::io(parent, e))?;
        }
    }
    let tmp = temp_sibling(path);
    let result = (|| {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        return Err(CoreError::io(path, e));
    }
    Ok(())
}

/// A set of outputs that become visible together, or not at all.
///
/// Files are staged as temporaries; [`Staged::commit`] renames them all. Dropping a
/// `Staged` without committing removes the temporaries, so an error half-way through a stage
/// leaves every previous output in place.
#[derive(Default)]
pub struct Staged {
    pending: Vec<(PathBuf, PathBuf)>,
}

impl Staged {
    pub fn new() -> Self {
        Self::default()
    }

    /// Stage `bytes` for `path`.
    pub fn put(&mut self, path: &Path, bytes: &[u8]) -> Result<()> {
        if let Some(parent) = path.parent() {
            if !parent.as_os_str().is_empty() {
                fs::create_dir_all(parent).map_err(|e| CoreError::io(parent, e))?;
            }
        }
        let tmp = temp_sibling(path);
        (|| {
            let mut f = fs::File::create(&tmp)?;
            f.write_all(bytes)?;
            f.sync_all()
        })()
        .map_err(|e| CoreError::io(&tmp, e))?;
        self.pending.push((tmp, path.to_path_buf()));
        Ok(())
    }

    /// Paths staged so far, in staging order.
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.pending.iter().map(|(_, p)| p.as_path())
    }

    /// Rename every staged file into place.
    pub fn commit(mut self) -> Result<()> {
        let pending = std::mem::take(&mut self.pending);
        for (tmp, dest) in pending {
            fs::rename(&tmp, &dest).map_err(|e| CoreError::io(&dest, e))?;
        }
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        for (tmp, _) in &self.pending {
            let _ = fs::remove_file(tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropped_stage_leaves_previous_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.txt");
        write_atomic(&p, b"old").unwrap();
        {
            let mut s = Staged::new();
            s.put(&p, b"new").unwrap();
        }
        assert_eq!(fs::read(&p).unwrap(), b"old");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
        let mut s = Staged::new();
        s.put(&p, b"new").unwrap();
        s.commit().unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"new");
    }
}
