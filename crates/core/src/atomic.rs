//! Outputs that become visible together: staged files and stage folders (a single file is
//! replaced by `crate::atomic_file`).

use crate::atomic_file::{create_fresh, temp_sibling, write_atomic};
use crate::{CoreError, Result};
use fs_err as fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// A set of outputs that become visible together, or not at all.
///
/// Two forms:
/// - [`Staged::in_dir`] (every stage folder): files are written into a twin folder
///   `.NAME.PID.tmp` beside the destination folder; [`Staged::commit`] writes the twin's
///   `SHA256SUMS` and exchanges the twin with the destination in one step
///   (`replace_dir` in `outdir.rs`). A reader, or a process killed at any moment, sees the
///   complete previous folder or the complete new one; files the new run does not write are gone
///   with the previous folder, which must hold only files its manifest lists.
/// - [`Staged::new`]: files are staged as temporaries beside their destinations and
///   [`Staged::commit`] renames them one by one (for outputs that are not a stage folder).
///
/// Dropping a `Staged` without committing removes what it staged, so an error half-way
/// through a stage leaves every previous output in place.
#[derive(Default)]
pub struct Staged {
    pending: Vec<(PathBuf, PathBuf)>,
    folder: Option<Folder>,
}

/// The destination folder and its twin of a [`Staged::in_dir`].
struct Folder {
    dest: PathBuf,
    twin: PathBuf,
    /// The twin's registration for removal on a signal.
    signal_id: u64,
}

impl Staged {
    /// Stage files one by one (see the type's documentation).
    pub fn new() -> Self {
        Self::default()
    }

    /// Stage the whole folder `dir`: every [`Staged::put`] must name a path below `dir`, and
    /// [`Staged::commit`] replaces `dir` with exactly the staged files plus their `SHA256SUMS`.
    /// Refuses when `dir` holds a file its `SHA256SUMS` does not list (protospread did not
    /// write it, so it will not destroy it).
    pub fn in_dir(dir: &Path) -> Result<Self> {
        crate::outdir::check_owned_stage_dir(dir)?;
        let twin = crate::outdir::twin_path(dir);
        // remove_dir_all removes a link itself, not what it points to.
        if twin.exists() || twin.is_symlink() {
            fs_err::remove_dir_all(&twin)?;
        }
        fs_err::create_dir_all(&twin)?;
        Ok(Staged {
            pending: Vec::new(),
            folder: Some(Folder {
                dest: dir.to_path_buf(),
                signal_id: crate::scratch::register(&twin, true),
                twin,
            }),
        })
    }

    /// Stage `bytes` for `path`.
    pub fn put(&mut self, path: &Path, bytes: &[u8]) -> Result<()> {
        let tmp = self.file(path)?;
        (|| {
            let mut file = create_fresh(&tmp)?;
            file.write_all(bytes)?;
            file.sync_all()
        })()
        .map_err(CoreError::Fs)
    }

    /// Stage a file for `path` that the caller writes itself (an output too large to hold
    /// in memory): returns the temporary path to create, write and sync; at
    /// [`Staged::commit`] it becomes `path`.
    pub fn file(&mut self, path: &Path) -> Result<PathBuf> {
        if let Some(f) = &self.folder {
            let rel = path.strip_prefix(&f.dest).map_err(|_| CoreError::Refused {
                path: path.to_path_buf(),
                message: format!("not below the staged folder {}", f.dest.display()),
            })?;
            if rel.as_os_str().is_empty()
                || rel
                    .components()
                    .any(|c| !matches!(c, std::path::Component::Normal(_)))
            {
                return Err(CoreError::Refused {
                    path: path.to_path_buf(),
                    message: "not a file path below the staged folder".into(),
                });
            }
            let tmp = f.twin.join(rel);
            if let Some(parent) = tmp.parent() {
                fs_err::create_dir_all(parent)?;
            }
            self.pending.push((tmp.clone(), path.to_path_buf()));
            return Ok(tmp);
        }
        if let Some(parent) = path.parent() {
            if !parent.as_os_str().is_empty() {
                fs::create_dir_all(parent).map_err(CoreError::Fs)?;
            }
        }
        let tmp = temp_sibling(path);
        self.pending.push((tmp.clone(), path.to_path_buf()));
        Ok(tmp)
    }

    /// Paths staged so far, in staging order.
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.pending.iter().map(|(_, p)| p.as_path())
    }

    /// Make every staged file visible: exchange the folder (with its new `SHA256SUMS`), or
    /// rename the files one by one.
    pub fn commit(mut self) -> Result<()> {
        let pending = std::mem::take(&mut self.pending);
        if let Some(f) = self.folder.take() {
            crate::scratch::unregister(f.signal_id);
            let m = crate::hash::Manifest::from_dir(&f.twin)?;
            write_atomic(
                &f.twin.join(crate::hash::MANIFEST_NAME),
                m.render().as_bytes(),
            )?;
            let result = crate::outdir::replace_dir(&f.twin, &f.dest);
            if result.is_err() {
                let _ = fs::remove_dir_all(&f.twin);
            }
            return result;
        }
        for (tmp, dest) in pending {
            fs::rename(&tmp, &dest).map_err(CoreError::Fs)?;
        }
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if let Some(f) = &self.folder {
            crate::scratch::unregister(f.signal_id);
            let _ = fs::remove_dir_all(&f.twin);
            return;
        }
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

    #[test]
    fn folder_stage_replaces_the_whole_folder_or_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("stage");
        let mut s = Staged::in_dir(&d).unwrap();
        s.put(&d.join("a.txt"), b"a1").unwrap();
        s.put(&d.join("sub/b.txt"), b"b1").unwrap();
        s.commit().unwrap();
        assert_eq!(fs::read(d.join("sub/b.txt")).unwrap(), b"b1");
        {
            let mut s = Staged::in_dir(&d).unwrap();
            s.put(&d.join("a.txt"), b"a2").unwrap();
        }
        assert_eq!(fs::read(d.join("a.txt")).unwrap(), b"a1");
        let mut s = Staged::in_dir(&d).unwrap();
        s.put(&d.join("a.txt"), b"a2").unwrap();
        s.commit().unwrap();
        assert_eq!(fs::read(d.join("a.txt")).unwrap(), b"a2");
        assert!(
            !d.join("sub").exists(),
            "a file this run did not write is gone"
        );
        let m = crate::hash::Manifest::read(&d.join("SHA256SUMS")).unwrap();
        assert_eq!(m.entries.keys().collect::<Vec<_>>(), vec!["a.txt"]);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1, "no twin left");
    }
}
