//! Facts about paths and processes that the output folder and the scratch folders rest on.

use fs_err as fs;
use std::path::{Path, PathBuf};

/// True when `path` itself (not a link to it) is a folder.
pub(crate) fn is_real_dir(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
}

/// True when `path` itself (not a link to it) is a regular file.
pub(crate) fn is_real_file(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.is_file())
}

/// True when `path` is a symlink (dangling or not).
pub(crate) fn is_link(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

/// The process id in a temporary's name `.NAME.PID.tmp` / `.NAME.PID.part`, if it has that form.
pub(crate) fn temporary_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix('.')?;
    let stem = rest
        .strip_suffix(".tmp")
        .or_else(|| rest.strip_suffix(".part"))?;
    let (base, pid) = stem.rsplit_once('.')?;
    if base.is_empty() || pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

/// True when process `pid` still exists. Where that cannot be known, every process counts as
/// alive, so nothing is removed.
pub(crate) fn process_alive(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    if cfg!(target_os = "linux") {
        Path::new("/proc").join(pid.to_string()).exists()
    } else {
        true
    }
}

/// `path` made absolute with symlinks resolved as far as it exists.
pub(crate) fn resolved(path: &Path) -> PathBuf {
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|c| c.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    };
    let mut existing = abs;
    let mut rest = Vec::new();
    while !existing.exists() {
        match (existing.file_name(), existing.parent()) {
            (Some(n), Some(p)) => {
                rest.push(n.to_os_string());
                existing = p.to_path_buf();
            }
            _ => break,
        }
    }
    let mut out = fs_err::canonicalize(&existing).unwrap_or(existing);
    for n in rest.into_iter().rev() {
        if n == ".." {
            out.pop();
        } else if n != "." {
            out.push(n);
        }
    }
    out
}
