//! Atomic file replacement.
//!
//! Every output is first written to a temporary file in the destination folder and then
//! renamed over the destination. A crash or an error before the rename leaves the previous
//! file exactly as it was; rename within one folder is atomic on POSIX file systems.

use crate::{CoreError, Result};
use fs_err as fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Path of the temporary sibling used while `path` is being written.
pub(crate) fn temp_sibling(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // The pid keeps two concurrent runs from sharing a temporary file.
    path.with_file_name(format!(".{name}.{}.tmp", std::process::id()))
}

/// Create `tmp` as a new file: whatever sits at that name (a temporary of a process that had
/// this pid, or a link someone put there) is removed first, never written through.
pub(crate) fn create_fresh(tmp: &Path) -> std::io::Result<fs::File> {
    match fs::remove_file(tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(tmp)
}

/// Write `bytes` to `path` atomically, creating parent folders as needed.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    if let Some(parent) = path.parent() {
        if !parent.as_os_str().is_empty() {
            fs::create_dir_all(parent).map_err(CoreError::Fs)?;
        }
    }
    let tmp = temp_sibling(path);
    let result = (|| {
        let mut f = create_fresh(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        return Err(CoreError::Fs(e));
    }
    Ok(())
}
