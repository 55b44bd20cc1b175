//! Scratch folders in the temporary folder, and what an interrupted process removes.
//!
//! A scratch folder is named `protospread-KIND-PID-XXXXXX` (`KIND`: import, aggregate,
//! verify). It is removed when its owner drops it; on SIGINT, SIGTERM or SIGHUP (once
//! [`clean_up_on_signals`] is installed) by the signal thread, with the lock files and stage
//! twins this process holds; and after `kill -9`, by the next process that makes a scratch
//! folder: any folder of that pattern whose process no longer exists and which belongs to
//! this user is removed (never a link, never another user's folder).

use crate::paths::{is_real_dir, process_alive};
use fs_err as fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// What the signal thread removes: (id, path, is a folder).
static REGISTERED: Mutex<Vec<(u64, PathBuf, bool)>> = Mutex::new(Vec::new());
static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// The registry, locked. A poisoned lock is taken as it is: the list stays valid.
fn registry() -> std::sync::MutexGuard<'static, Vec<(u64, PathBuf, bool)>> {
    REGISTERED.lock().unwrap_or_else(|p| p.into_inner())
}

/// Record `path` in the locked registry `r`; see [`register`].
fn push(r: &mut Vec<(u64, PathBuf, bool)>, path: &Path, is_dir: bool) -> u64 {
    let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    r.push((id, path.to_path_buf(), is_dir));
    id
}

/// Remove `path` (a folder when `is_dir`) if the process is stopped by a signal, until
/// [`unregister`] is called with the returned id.
pub(crate) fn register(path: &Path, is_dir: bool) -> u64 {
    push(&mut registry(), path, is_dir)
}

/// True when `path` (resolved) is a scratch folder this process made and still holds.
pub(crate) fn is_own_scratch(path: &Path) -> bool {
    let scratch: Vec<PathBuf> = registry()
        .iter()
        .filter(|e| e.2)
        .map(|e| e.1.clone())
        .collect();
    scratch.iter().any(|p| {
        p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("protospread-"))
            && crate::paths::resolved(p) == path
    })
}

/// Forget what [`register`] recorded under `id`.
pub(crate) fn unregister(id: u64) {
    registry().retain(|(i, _, _)| *i != id);
}

/// A scratch folder in the temporary folder, removed when dropped (see the module's
/// documentation for interrupted processes).
#[derive(Debug)]
pub struct Scratch {
    dir: Option<tempfile::TempDir>,
    id: u64,
}

impl Scratch {
    /// A new scratch folder `protospread-KIND-PID-XXXXXX` in the temporary folder, after
    /// removing those of processes that no longer exist.
    pub fn new(kind: &str) -> std::io::Result<Self> {
        let tmp = std::env::temp_dir();
        remove_dead_scratch(&tmp);
        // Made and recorded under the registry's lock, which the signal thread holds from
        // its clean-up to the exit: a folder is never made unrecorded, nor after the clean-up.
        let mut r = registry();
        let dir = tempfile::Builder::new()
            .prefix(&format!("protospread-{kind}-{}-", std::process::id()))
            .tempdir_in(&tmp)?;
        let id = push(&mut r, dir.path(), true);
        Ok(Scratch { dir: Some(dir), id })
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        self.dir.as_ref().map_or(Path::new(""), |d| d.path())
    }

    /// Keep the folder (it is no longer removed on drop or on a signal); returns its path.
    pub fn keep(mut self) -> PathBuf {
        unregister(self.id);
        self.dir.take().map(|d| d.keep()).unwrap_or_default()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // Removed, then forgotten, under the lock: a signal between the two would otherwise
        // find the folder forgotten but still there.
        let mut r = registry();
        if let Some(dir) = self.dir.take() {
            let _ = dir.close();
        }
        r.retain(|(i, _, _)| *i != self.id);
    }
}

/// The pid in a scratch folder's name `protospread-KIND-PID-XXXXXX`.
fn scratch_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("protospread-")?;
    let mut parts = rest.split('-');
    let kind = parts.next()?;
    let pid = parts.next()?;
    parts.next()?;
    if kind.is_empty()
        || !kind.bytes().all(|b| b.is_ascii_lowercase())
        || pid.is_empty()
        || !pid.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    pid.parse().ok()
}

/// Remove, in `tmp`, the scratch folders of processes that no longer exist and that belong to
/// this user. Errors are ignored: another process may be removing the same folder.
pub fn remove_dead_scratch(tmp: &Path) -> Vec<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let mut removed = Vec::new();
    let Ok(rd) = fs::read_dir(tmp) else {
        return removed;
    };
    #[allow(unsafe_code, reason = "geteuid is an FFI call without preconditions")]
    // SAFETY: geteuid takes no arguments and cannot fail.
    let uid = unsafe { libc::geteuid() };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = scratch_pid(&name) else {
            continue;
        };
        let p = e.path();
        let ours = fs::symlink_metadata(&p).is_ok_and(|m| m.is_dir() && m.uid() == uid);
        if ours && is_real_dir(&p) && !process_alive(pid) && fs::remove_dir_all(&p).is_ok() {
            removed.push(p);
        }
    }
    removed
}

/// On SIGINT, SIGTERM or SIGHUP: remove every registered scratch folder, stage twin and lock
/// file, then exit with 128 + the signal's number. Call once at the start of `main`, before
/// any other thread is started (the signals are blocked in every thread and received by one
/// thread of their own). A run's staging folder beside `--out` is left to the next run, which
/// moves the download cache back out of it first.
pub fn clean_up_on_signals() {
    let signals = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];
    #[allow(
        unsafe_code,
        reason = "signal masks have no safe wrapper in std or libc"
    )]
    // SAFETY: `set` is a valid, initialized sigset_t owned by this frame; the calls only read
    // or write it and the calling thread's mask.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in signals {
            libc::sigaddset(&mut set, s);
        }
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            return;
        }
        set
    };
    let spawned = std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || loop {
            let mut sig: libc::c_int = 0;
            #[allow(unsafe_code, reason = "sigwait has no safe wrapper in std or libc")]
            // SAFETY: `set` and `sig` are valid for the duration of the call.
            let rc = unsafe { libc::sigwait(&set, &mut sig) };
            if rc != 0 {
                continue;
            }
            remove_registered();
            std::process::exit(128 + sig);
        });
    if spawned.is_err() {
        // Without the thread, signals must not stay blocked.
        #[allow(
            unsafe_code,
            reason = "signal masks have no safe wrapper in std or libc"
        )]
        // SAFETY: as above.
        unsafe {
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        }
    }
}

/// Remove everything registered. The registry stays locked until the process exits (the
/// guard is leaked), so no other thread records a new folder after the clean-up.
fn remove_registered() {
    let entries = std::mem::ManuallyDrop::new(registry());
    for (_, path, is_dir) in entries.iter().rev() {
        let _ = if *is_dir {
            // Never through a link: remove_dir_all removes a link itself.
            fs::remove_dir_all(path)
        } else {
            fs::remove_file(path)
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scratch_names() {
        assert_eq!(scratch_pid("protospread-import-123-abcdef"), Some(123));
        assert_eq!(scratch_pid("protospread-verify-9-1700000000"), Some(9));
        assert_eq!(scratch_pid("protospread-import-123"), None);
        assert_eq!(scratch_pid("protospread-Import-1-x"), None);
        assert_eq!(scratch_pid("other-import-1-x"), None);
    }

    #[test]
    fn dead_scratch_is_removed_and_only_that() {
        let d = tempfile::tempdir().unwrap();
        let dead = d.path().join("protospread-import-999999999-x");
        let alive = d
            .path()
            .join(format!("protospread-import-{}-x", std::process::id()));
        let other = d.path().join("protospread-notes");
        for p in [&dead, &alive, &other] {
            fs::create_dir_all(p.join("sub")).unwrap();
        }
        let target = d.path().join("target");
        fs::create_dir_all(&target).unwrap();
        fs::write(target.join("keep"), b"1").unwrap();
        let link = d.path().join("protospread-aggregate-999999998-y");
        fs_err::os::unix::fs::symlink(&target, &link).unwrap();
        assert_eq!(remove_dead_scratch(d.path()), vec![dead.clone()]);
        assert!(!dead.exists() && alive.exists() && other.exists() && link.exists());
        assert!(target.join("keep").exists());
    }
}
