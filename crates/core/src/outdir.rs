//! Ownership, locking and all-or-nothing replacement of output folders.
//!
//! protospread only deletes or replaces what it wrote itself:
//! - an output folder (`--out`) is protospread's when it holds the marker file
//!   [`MARKER_NAME`] (written when protospread creates the folder or finds it empty), or when
//!   every file in it is listed in a `SHA256SUMS` manifest protospread wrote (a folder from an
//!   older version);
//! - a stage folder (`out/score/`) is replaced as a whole only when every file in it is listed
//!   in its own `SHA256SUMS`;
//! - temporaries are removed only when their name has protospread's pattern
//!   (`.NAME.PID.tmp`, `.NAME.PID.part`) and the process `PID` is gone.
//!
//! A folder is replaced by building its new content in a sibling `.NAME.PID.tmp` and
//! exchanging the two in one `renameat2(RENAME_EXCHANGE)` call, so that a reader (or a run
//! killed at any moment) sees either the complete old folder or the complete new one.

use crate::hash::{Manifest, MANIFEST_NAME};
use crate::paths::{is_link, is_real_dir, is_real_file, process_alive, resolved, temporary_pid};
use crate::{CoreError, Result};
use fs_err as fs;
use std::io::{Read, Seek, Write};
use std::path::{Component, Path, PathBuf};

/// Marker file that makes a folder protospread's output folder.
pub(crate) const MARKER_NAME: &str = ".protospread";
/// Lock file of an output folder; it holds the pid of the process writing the folder.
pub(crate) const LOCK_NAME: &str = ".protospread.lock";
/// Folders that `protospread run` writes below `--out`, in stage order.
pub const STAGE_DIRS: [&str; 4] = ["fetch", "score", "aggregate", "report"];

const MARKER_TEXT: &str = "This folder is written by protospread (docs/reliability.md).\n\
protospread replaces the files listed in its SHA256SUMS manifests and removes its own\n\
temporaries (.NAME.PID.tmp, .NAME.PID.part) of dead processes; it touches nothing else here.\n";

const NO_LINKS: &str = "is a symlink; protospread writes and deletes only below --out, never through a link: remove the link (or replace it with a folder)";

fn refused(path: &Path, message: impl Into<String>) -> CoreError {
    CoreError::Refused {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// True for a protospread temporary whose process is gone.
fn dead_temporary(name: &str) -> bool {
    temporary_pid(name).is_some_and(|pid| !process_alive(pid))
}

/// Remove, directly in `dir`, the temporaries (`.NAME.PID.tmp` files or folders,
/// `.NAME.PID.part` downloads) of processes that no longer exist. Returns what was removed.
/// A `dir` that is a symlink is not looked into: what it points to is not protospread's.
pub fn remove_dead_temporaries(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    if is_link(dir) {
        return Ok(removed);
    }
    let rd = match fs_err::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(removed),
        Err(e) => return Err(CoreError::Fs(e)),
    };
    for entry in rd {
        let entry = entry.map_err(CoreError::Fs)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !dead_temporary(&name) {
            continue;
        }
        remove_entry(&entry)?;
        removed.push(entry.path());
    }
    Ok(removed)
}

/// Every regular file below `dir` (not following symlinks), as paths relative to `dir`, with
/// the other entries (symlinks, sockets...) reported as errors.
fn files_below(dir: &Path, skip_top: &[&str]) -> Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d)? {
            let entry = entry.map_err(CoreError::Fs)?;
            let p = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if d == dir && skip_top.contains(&name.as_str()) {
                continue;
            }
            if temporary_pid(&name).is_some() {
                continue;
            }
            let ft = entry.file_type().map_err(CoreError::Fs)?;
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file() {
                out.push((crate::hash::rel_path(dir, &p), p));
            } else {
                return Err(refused(
                    &p,
                    "not a regular file or folder written by protospread (a symlink or special file); move it away",
                ));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Check that every file below the stage folder `dir` is listed in `dir/SHA256SUMS` (the
/// folder's own manifest), so replacing the folder destroys nothing protospread did not write.
/// A missing folder is fine.
pub(crate) fn check_owned_stage_dir(dir: &Path) -> Result<()> {
    if !dir.exists() && !is_link(dir) {
        return Ok(());
    }
    if is_link(dir) {
        return Err(refused(dir, NO_LINKS));
    }
    if !dir.is_dir() {
        return Err(refused(
            dir,
            "not a folder written by protospread; move it away or choose another --out",
        ));
    }
    let manifest_path = dir.join(MANIFEST_NAME);
    let listed = if manifest_path.is_file() {
        Manifest::read(&manifest_path)?.entries
    } else {
        Default::default()
    };
    for (rel, p) in files_below(dir, &[])? {
        if rel == MANIFEST_NAME || rel.ends_with(&format!("/{MANIFEST_NAME}")) {
            continue;
        }
        if !listed.contains_key(&rel) {
            return Err(refused(
                &p,
                format!(
                    "not listed in {}, so protospread did not write it and will not replace it; move it away (or delete {} if it is an old protospread output)",
                    manifest_path.display(),
                    dir.display()
                ),
            ));
        }
    }
    Ok(())
}

/// True when every file below `out` is explained as protospread's: listed in a `SHA256SUMS`
/// of `out` or of one of its stage folders, a manifest itself, or below `cache_top`.
fn all_files_listed(out: &Path, cache_top: Option<&str>) -> Result<Option<PathBuf>> {
    let mut listed = std::collections::BTreeSet::new();
    let top = out.join(MANIFEST_NAME);
    if top.is_file() {
        listed.extend(Manifest::read(&top)?.entries.into_keys());
    }
    for s in STAGE_DIRS {
        let m = out.join(s).join(MANIFEST_NAME);
        if m.is_file() {
            for k in Manifest::read(&m)?.entries.into_keys() {
                listed.insert(format!("{s}/{k}"));
            }
        }
    }
    // The lock file of a run that failed or was killed, or of a run starting right now, is
    // protospread's too.
    let skip: Vec<&str> = cache_top.into_iter().chain([LOCK_NAME]).collect();
    for (rel, p) in files_below(out, &skip)? {
        let name = rel.rsplit('/').next().unwrap_or(&rel);
        if name == MANIFEST_NAME || listed.contains(&rel) {
            continue;
        }
        return Ok(Some(p));
    }
    Ok(None)
}

/// The held lock of an output folder; dropping it removes the lock file and releases the
/// lock, so no run, failed or not, leaves a lock file behind (only a killed one does, and the
/// next run takes it over).
#[derive(Debug)]
pub struct OutLock {
    file: Option<fs_err::File>,
    path: PathBuf,
    /// Its registration for removal on a signal.
    signal_id: u64,
    /// The folder did not exist before [`claim_out_dir`] created it.
    created: Option<PathBuf>,
}

impl OutLock {
    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// After a failed command: if [`claim_out_dir`] created the folder and it holds nothing but the
    /// marker and the lock, remove it again, so a failure into a new folder creates nothing.
    pub fn release_unused(mut self) {
        self.unlock();
        let Some(out) = &self.created else {
            return;
        };
        let only_ours = fs_err::read_dir(out).is_ok_and(|rd| {
            rd.flatten().all(|e| {
                let n = e.file_name();
                n == MARKER_NAME || n == LOCK_NAME
            })
        });
        if only_ours {
            let _ = fs_err::remove_file(out.join(MARKER_NAME));
            let _ = fs_err::remove_file(&self.path);
            let _ = fs_err::remove_dir(out);
        }
    }

    /// Remove the lock file while the lock is held, then release it.
    fn unlock(&mut self) {
        if let Some(f) = self.file.take() {
            crate::scratch::unregister(self.signal_id);
            let _ = fs_err::remove_file(&self.path);
            drop(f);
        }
    }
}

impl Drop for OutLock {
    fn drop(&mut self) {
        self.unlock();
    }
}

/// First component of a relative cache folder (`cache` for `[fetch] cache_dir = "cache"`).
pub fn cache_top(cache_dir: &Path) -> Option<String> {
    if cache_dir.is_absolute() {
        return None;
    }
    cache_dir.components().find_map(|c| match c {
        Component::Normal(n) => Some(n.to_string_lossy().into_owned()),
        _ => None,
    })
}

/// Claim `out` for writing: refuse a non-empty folder that protospread did not create, create
/// the folder with its marker if needed, take the exclusive lock (refusing when another process
/// holds it, naming its pid), and remove temporaries that dead processes left in `out`, in its
/// stage folders, in `cache_top` and beside `out`. `cache_top` is the top folder of the download
/// cache when it lies inside `out` (see [`cache_top`]).
pub fn claim_out_dir(out: &Path, cache_top: Option<&str>) -> Result<OutLock> {
    if out.as_os_str().is_empty() {
        return Err(refused(out, "--out is empty"));
    }
    if out.is_symlink() || (out.exists() && !out.is_dir()) {
        return Err(refused(
            out,
            "--out must be a folder (not a file or a symlink)",
        ));
    }
    if out.is_dir() && !is_real_file(&out.join(MARKER_NAME)) {
        let empty = fs::read_dir(out)?.next().is_none();
        if !empty {
            if let Some(foreign) = all_files_listed(out, cache_top)? {
                return Err(refused(
                    out,
                    format!(
                        "folder is not empty and was not created by protospread ({} is not one of its outputs); protospread never writes into such a folder: choose a new or empty --out",
                        foreign.display()
                    ),
                ));
            }
        }
    }
    // Every folder the claim cleans must be a folder, not a link out of `out`.
    for name in [Some(MARKER_NAME), cache_top]
        .into_iter()
        .flatten()
        .chain(STAGE_DIRS)
    {
        if is_link(&out.join(name)) {
            return Err(refused(&out.join(name), NO_LINKS));
        }
    }
    let created = (!out.exists()).then(|| out.to_path_buf());
    fs::create_dir_all(out)?;
    let lock_path = out.join(LOCK_NAME);
    let file = take_lock(out, &lock_path)?;
    if !is_real_file(&out.join(MARKER_NAME)) {
        crate::atomic_file::write_atomic(&out.join(MARKER_NAME), MARKER_TEXT.as_bytes())?;
    }
    let lock = OutLock {
        file: Some(file),
        signal_id: crate::scratch::register(&lock_path, false),
        path: lock_path,
        created,
    };
    rescue_dead_runs(out)?;
    remove_dead_temporaries(out)?;
    for s in STAGE_DIRS {
        remove_dead_temporaries(&out.join(s))?;
    }
    if let Some(c) = cache_top {
        remove_dead_temporaries(&out.join(c))?;
    }
    Ok(lock)
}

/// Open and lock `out`'s lock file and write this process's pid into it. The file is opened
/// without following a link and must be a regular file; after locking, it must still be the
/// file at `lock_path` (a run that ends removes its lock file while holding the lock, so a
/// process that opened it just before holds a lock on a removed file and opens it again).
fn take_lock(out: &Path, lock_path: &Path) -> Result<fs::File> {
    use fs_err::os::unix::fs::OpenOptionsExt;
    use std::os::unix::fs::MetadataExt;
    for _ in 0..100 {
        let mut file = match fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(lock_path)
        {
            Ok(f) => f,
            Err(_) if is_link(lock_path) => return Err(refused(lock_path, NO_LINKS)),
            Err(e) => return Err(CoreError::Fs(e)),
        };
        let held = file.metadata().map_err(CoreError::Fs)?;
        if !held.is_file() {
            return Err(refused(
                lock_path,
                "is not a regular file (protospread's lock file is); remove it",
            ));
        }
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let mut pid = String::new();
                let _ = file.read_to_string(&mut pid);
                let pid = pid.trim();
                return Err(refused(
                    out,
                    format!(
                        "another protospread process (pid {}) is writing this folder (lock {}); wait for it to finish or stop it",
                        if pid.is_empty() { "unknown" } else { pid },
                        lock_path.display()
                    ),
                ));
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(CoreError::io(lock_path, e)),
        }
        let same = fs::symlink_metadata(lock_path)
            .is_ok_and(|m| m.dev() == held.dev() && m.ino() == held.ino());
        if !same {
            continue;
        }
        (|| {
            file.set_len(0)?;
            file.rewind()?;
            writeln!(file, "{}", std::process::id())?;
            file.sync_all()
        })()
        .map_err(CoreError::Fs)?;
        return Ok(file);
    }
    Err(refused(
        lock_path,
        "the lock file keeps being replaced by other processes; try again",
    ))
}

/// Refuse an `--out` that holds or sits among the inputs, or that lies inside a source tree:
/// equal to or inside the folder of an input file (other than the configuration's own folder,
/// where `out/` normally lives), containing an input file or the configuration, or below a
/// folder with a `Cargo.toml` other than its direct parent (e.g. `--out crates/x`), or in `.git`.
pub fn check_out_location(out: &Path, config_path: &Path, inputs: &[PathBuf]) -> Result<()> {
    let o = resolved(out);
    let config = resolved(config_path);
    let config_dir = config.parent().map(Path::to_path_buf).unwrap_or_default();
    for f in std::iter::once(&config).chain(inputs.iter()) {
        let f = resolved(f);
        if f.starts_with(&o) {
            return Err(refused(
                out,
                format!(
                    "--out contains the input {}; choose another folder",
                    f.display()
                ),
            ));
        }
        // A new folder, or one protospread made, among the inputs holds none of them (checked
        // above) and protospread writes only into it; an existing folder of someone else's
        // there is likely data.
        if let Some(dir) = f.parent() {
            let fresh = !o.exists() || is_real_file(&o.join(MARKER_NAME));
            if dir != config_dir && o.starts_with(dir) && !fresh {
                return Err(refused(
                    out,
                    format!(
                        "--out is an existing folder that protospread did not create, in the folder of the input {}; choose a new folder (protospread creates it)",
                        f.display()
                    ),
                ));
            }
        }
    }
    let parent = o.parent().map(Path::to_path_buf).unwrap_or_default();
    // A scratch folder this process made (`verify` regenerating into the temporary folder) is
    // no source tree, wherever the temporary folder is.
    if o.parent().is_some_and(crate::scratch::is_own_scratch) {
        return Ok(());
    }
    for a in o.ancestors() {
        if a.file_name().is_some_and(|n| n == ".git") {
            return Err(refused(out, "--out lies inside a .git folder"));
        }
        if a != parent && a.join("Cargo.toml").is_file() {
            return Err(refused(
                out,
                format!(
                    "--out lies inside the source tree {} (it has a Cargo.toml); choose a folder such as {}/out",
                    a.display(),
                    a.display()
                ),
            ));
        }
    }
    Ok(())
}

/// `.NAME.PID.tmp` beside `path`, for this process.
pub(crate) fn twin_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into());
    path.with_file_name(format!(".{name}.{}.tmp", std::process::id()))
}

fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Before removing the staging folders of runs that died beside `out`, move back what a run
/// moves into its staging folder just before the switch (the download cache, other folders of
/// `out` that are not stage outputs), if `out` does not have them.
fn rescue_dead_runs(out: &Path) -> Result<()> {
    let Some(name) = out.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return Ok(());
    };
    let parent = parent_of(out);
    let prefix = format!(".{name}.");
    let Ok(rd) = fs_err::read_dir(&parent) else {
        return Ok(());
    };
    for entry in rd.flatten() {
        let n = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = n.strip_prefix(&prefix) else {
            continue;
        };
        let is_run_dir = rest
            .strip_suffix(".tmp")
            .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()));
        // A link with a staging folder's name is not protospread's (it makes no links):
        // nothing is moved out of it or deleted through it.
        let real_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if !is_run_dir || !real_dir || !dead_temporary(&n) {
            continue;
        }
        let staging = entry.path();
        // Only a folder that protospread marked as a run's staging folder is touched, or one
        // that a run killed before it wrote the marker left behind: nothing in it, or only
        // dead temporaries (the marker's own, half written).
        if !is_real_file(&staging.join(MARKER_NAME)) {
            if holds_only_dead_temporaries(&staging)? {
                fs::remove_dir_all(&staging)?;
            }
            continue;
        }
        for e in fs::read_dir(&staging)?.flatten() {
            let en = e.file_name().to_string_lossy().into_owned();
            if STAGE_DIRS.contains(&en.as_str())
                || en == MANIFEST_NAME
                || en == MARKER_NAME
                || en == LOCK_NAME
                || temporary_pid(&en).is_some()
            {
                continue;
            }
            let dest = out.join(&en);
            if !dest.exists() {
                fs::rename(e.path(), &dest)?;
            }
        }
        remove_marked_dir(&staging)?;
    }
    Ok(())
}

/// True when the folder `dir` is empty or holds only temporaries of dead processes (files, not
/// folders).
fn holds_only_dead_temporaries(dir: &Path) -> Result<bool> {
    for e in fs::read_dir(dir)? {
        let e = e.map_err(CoreError::Fs)?;
        let n = e.file_name().to_string_lossy().into_owned();
        if !dead_temporary(&n) || !e.file_type().map_err(CoreError::Fs)?.is_file() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Remove the folder `dir` with its ownership marker last, so that a kill during the removal
/// leaves a folder that is still marked as protospread's (the next run removes it), not an
/// unmarked one that no run may touch.
fn remove_marked_dir(dir: &Path) -> Result<()> {
    if !is_real_dir(dir) {
        return Err(refused(dir, NO_LINKS));
    }
    for e in fs::read_dir(dir)? {
        let e = e.map_err(CoreError::Fs)?;
        if e.file_name() != MARKER_NAME {
            remove_entry(&e)?;
        }
    }
    fs::remove_dir_all(dir)?;
    Ok(())
}

/// Remove a folder entry: a folder with everything in it, anything else as a file.
fn remove_entry(e: &fs_err::DirEntry) -> Result<()> {
    if e.file_type().map_err(CoreError::Fs)?.is_dir() {
        fs::remove_dir_all(e.path())?;
    } else {
        fs::remove_file(e.path())?;
    }
    Ok(())
}

/// Exchange the folders `a` and `b` in one step (both must exist).
pub(crate) fn exchange(a: &Path, b: &Path) -> Result<()> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use std::ffi::CString;
        use std::os::unix::ffi::OsStrExt;
        let ca = CString::new(a.as_os_str().as_bytes())
            .map_err(|e| CoreError::io(a, std::io::Error::other(e)))?;
        let cb = CString::new(b.as_os_str().as_bytes())
            .map_err(|e| CoreError::io(b, std::io::Error::other(e)))?;
        // SAFETY: both paths are valid NUL-terminated strings that outlive the call.
        #[allow(unsafe_code, reason = "renameat2 has no safe wrapper in std or libc")]
        let rc = unsafe {
            libc::renameat2(
                libc::AT_FDCWD,
                ca.as_ptr(),
                libc::AT_FDCWD,
                cb.as_ptr(),
                libc::RENAME_EXCHANGE,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        let err = std::io::Error::last_os_error();
        // File systems without RENAME_EXCHANGE fall through to the two-rename switch.
        if !matches!(err.raw_os_error(), Some(libc::EINVAL) | Some(libc::ENOSYS)) {
            return Err(CoreError::io(b, err));
        }
    }
    // Not atomic: between the two renames `b` is missing for an instant.
    let aside = b.with_file_name(format!(
        ".{}.{}.old.tmp",
        b.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id()
    ));
    fs::rename(b, &aside)?;
    fs::rename(a, b)?;
    fs::rename(&aside, a)?;
    Ok(())
}

/// Put the complete folder `new` at `dest` in one step; the previous content of `dest` (which
/// the caller checked to be protospread's) is removed afterwards.
pub(crate) fn replace_dir(new: &Path, dest: &Path) -> Result<()> {
    if dest.exists() {
        exchange(new, dest)?;
        // `new` now holds the previous content; losing it to a kill is harmless (a dead
        // process's `.NAME.PID.tmp`, removed by the next run).
        remove_marked_dir(new)?;
    } else {
        fs::rename(new, dest)?;
    }
    Ok(())
}

/// A run's output built beside `out` (`.NAME.PID.tmp`) and switched in at the end.
///
/// The download cache (`cache_top`) moves into the staging folder at the start, so downloads
/// are reused; [`RunStaging::commit`] moves the other entries of `out` that are not stage outputs
/// (an `administer/` folder, user files) across and exchanges the folders. Dropping it without
/// commit moves the cache back and removes the staging folder: `out` is as before.
#[derive(Debug)]
pub struct RunStaging {
    out: PathBuf,
    staging: PathBuf,
    cache_top: Option<String>,
    done: bool,
}

impl RunStaging {
    /// Start a run into `out` (already claimed with [`claim_out_dir`]); each stage folder of `out` must
    /// be protospread's, since the switch replaces it.
    pub fn begin(out: &Path, cache_top: Option<&str>) -> Result<Self> {
        for s in STAGE_DIRS {
            check_owned_stage_dir(&out.join(s))?;
        }
        let top = out.join(MANIFEST_NAME);
        if top.exists() && !top.is_file() {
            return Err(refused(&top, "not a manifest written by protospread"));
        }
        let staging = twin_path(out);
        if staging.exists() || is_link(&staging) {
            remove_marked_dir(&staging)?;
        }
        fs::create_dir_all(&staging)?;
        crate::atomic_file::write_atomic(&staging.join(MARKER_NAME), MARKER_TEXT.as_bytes())?;
        let run = RunStaging {
            out: out.to_path_buf(),
            staging,
            cache_top: cache_top.map(String::from),
            done: false,
        };
        if let Some(c) = &run.cache_top {
            let from = out.join(c);
            if from.exists() {
                fs::rename(&from, run.staging.join(c))?;
            }
        }
        Ok(run)
    }

    /// The folder the stages write into (it stands for `out` during the run).
    pub fn path(&self) -> &Path {
        &self.staging
    }

    /// Switch the staged run in: carry over entries of `out` that are not stage outputs, then
    /// exchange the folders in one step and remove the previous outputs.
    pub fn commit(mut self) -> Result<()> {
        for e in fs::read_dir(&self.out)?.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if STAGE_DIRS.contains(&n.as_str())
                || n == MANIFEST_NAME
                || n == LOCK_NAME
                || dead_temporary(&n)
            {
                continue;
            }
            let dest = self.staging.join(&n);
            if !dest.exists() {
                fs::rename(e.path(), &dest)?;
            }
        }
        self.done = true;
        replace_dir(&self.staging, &self.out)
    }
}

impl Drop for RunStaging {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if let Some(c) = &self.cache_top {
            let from = self.staging.join(c);
            let to = self.out.join(c);
            if from.exists() && !to.exists() {
                let _ = fs_err::rename(&from, &to);
            }
        }
        let _ = remove_marked_dir(&self.staging);
    }
}

/// The top `out/SHA256SUMS` around a single stage (`protospread fetch|score|aggregate|report`).
///
/// The top manifest lists the files of the stage folders that are consistent with each other
/// (pipeline order [`STAGE_DIRS`]; a stage folder that does not exist is skipped):
/// - [`TopManifest::begin`] (before the stage runs) rewrites it with only the stages before
///   the stage that it listed (or, when there was no top manifest, that exist with their own
///   `SHA256SUMS`), so that at any moment (a failure, `kill -9`) `sha256sum -c SHA256SUMS`
///   passes and vouches only for folders no one is replacing;
/// - [`TopManifest::finish`] (after the stage succeeded) adds the stage's new files (from the
///   stage's own `SHA256SUMS`, i.e. the bytes it just wrote) if every earlier stage is listed,
///   and adds back each later stage only if the stage's files are exactly those the top
///   manifest listed before (then nothing a later stage read has changed). It returns the
///   stage folders left out: stale;
/// - dropping it without `finish` (the stage failed or wrote nothing) puts the previous top
///   manifest back.
///
/// An earlier stage stays listed only if its own `SHA256SUMS` still agrees with the top
/// manifest (its files are not hashed again, so a file changed by hand still fails
/// `sha256sum -c`); one that does not (its folder was replaced without updating the top
/// manifest) is left out, and so is every stage after it.
pub struct TopManifest {
    out: PathBuf,
    stage: usize,
    /// The previous top manifest's text (`None`: there was none).
    before: Option<Vec<u8>>,
    old: Manifest,
    /// The previous entries that stay: files outside the stage folders and the listed stages
    /// before `stage`.
    base: Manifest,
    /// Every stage before `stage` that exists is listed.
    upstream_ok: bool,
    done: bool,
}

/// Entries of `out/<stage>/SHA256SUMS` as paths relative to `out`; `None` if the folder or its
/// manifest is missing.
fn stage_entries(out: &Path, stage: &str) -> Result<Option<Manifest>> {
    let p = out.join(stage).join(MANIFEST_NAME);
    if !out.join(stage).exists() {
        return Ok(None);
    }
    if !p.is_file() {
        return Ok(Some(Manifest::default()));
    }
    let m = Manifest::read(&p)?;
    Ok(Some(Manifest {
        entries: m
            .entries
            .into_iter()
            .map(|(k, v)| (format!("{stage}/{k}"), v))
            .collect(),
    }))
}

/// The entries of `m` below `out/<stage>/`.
fn entries_of(m: &Manifest, stage: &str) -> Manifest {
    let prefix = format!("{stage}/");
    Manifest {
        entries: m
            .entries
            .iter()
            .filter(|(k, _)| k.starts_with(&prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    }
}

impl TopManifest {
    /// Before `stage` (one of [`STAGE_DIRS`]) runs into `out`.
    pub fn begin(out: &Path, stage: &str) -> Result<Self> {
        let idx =
            STAGE_DIRS
                .iter()
                .position(|s| *s == stage)
                .ok_or_else(|| CoreError::Refused {
                    path: out.join(stage),
                    message: "not a stage folder".into(),
                })?;
        let path = out.join(MANIFEST_NAME);
        let before = match fs::read(&path) {
            Ok(b) => Some(b),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(CoreError::io(&path, e)),
        };
        let old = match &before {
            Some(b) => Manifest::parse(&String::from_utf8_lossy(b), &path)?,
            None => Manifest::default(),
        };
        let stage_prefixes: Vec<String> = STAGE_DIRS.iter().map(|s| format!("{s}/")).collect();
        let mut base = Manifest {
            entries: old
                .entries
                .iter()
                .filter(|(k, _)| !stage_prefixes.iter().any(|p| k.starts_with(p.as_str())))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        };
        let mut upstream_ok = true;
        for s in &STAGE_DIRS[..idx] {
            match stage_entries(out, s)? {
                None => continue,
                // Without a top manifest (no `run` yet, or one from an older version), a
                // stage's own manifest is all there is to go by.
                Some(own)
                    if upstream_ok
                        && !own.entries.is_empty()
                        && (before.is_none() || own == entries_of(&old, s)) =>
                {
                    base.entries.extend(own.entries);
                }
                Some(_) => upstream_ok = false,
            }
        }
        let t = TopManifest {
            out: out.to_path_buf(),
            stage: idx,
            before,
            old,
            base,
            upstream_ok,
            done: false,
        };
        t.write(&t.base)?;
        Ok(t)
    }

    fn write(&self, m: &Manifest) -> Result<()> {
        crate::atomic_file::write_atomic(&self.out.join(MANIFEST_NAME), m.render().as_bytes())
    }

    /// After the stage succeeded: write the final top manifest and return the stage folders of
    /// `out` it does not list (stale, or made from a stale stage), in pipeline order.
    pub fn finish(mut self) -> Result<Vec<&'static str>> {
        let mut m = self.base.clone();
        let stage = STAGE_DIRS[self.stage];
        if self.upstream_ok {
            if let Some(new) = stage_entries(&self.out, stage)?.filter(|n| !n.entries.is_empty()) {
                let unchanged = self.before.is_some() && new == entries_of(&self.old, stage);
                m.entries.extend(new.entries);
                if unchanged {
                    for s in &STAGE_DIRS[self.stage + 1..] {
                        match stage_entries(&self.out, s)? {
                            None => continue,
                            Some(own)
                                if !own.entries.is_empty() && own == entries_of(&self.old, s) =>
                            {
                                m.entries.extend(own.entries);
                            }
                            Some(_) => break,
                        }
                    }
                }
            }
        }
        self.write(&m)?;
        self.done = true;
        Ok(STAGE_DIRS
            .iter()
            .copied()
            .filter(|s| self.out.join(s).exists() && entries_of(&m, s).entries.is_empty())
            .collect())
    }
}

impl Drop for TopManifest {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let path = self.out.join(MANIFEST_NAME);
        let _ = match &self.before {
            Some(b) => crate::atomic_file::write_atomic(&path, b),
            None => fs_err::remove_file(&path).map_err(CoreError::Fs),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replace `out/<stage>` with one file `t.txt` holding `text`, as a stage does.
    fn stage_writes(out: &Path, stage: &str, text: &str) {
        let mut s = crate::atomic::Staged::in_dir(&out.join(stage)).unwrap();
        s.put(&out.join(stage).join("t.txt"), text.as_bytes())
            .unwrap();
        s.commit().unwrap();
    }

    fn single_stage(out: &Path, stage: &str, text: &str) -> Vec<&'static str> {
        let t = TopManifest::begin(out, stage).unwrap();
        stage_writes(out, stage, text);
        t.finish().unwrap()
    }

    fn listed(out: &Path) -> Vec<String> {
        let m = Manifest::read(&out.join(MANIFEST_NAME)).unwrap();
        m.entries.into_keys().collect()
    }

    #[test]
    fn top_manifest_lists_only_consistent_stages() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path();
        for s in STAGE_DIRS {
            assert!(single_stage(out, s, "1").is_empty(), "{s}");
        }
        let mut all: Vec<String> = STAGE_DIRS.iter().map(|s| format!("{s}/t.txt")).collect();
        all.sort();
        assert_eq!(listed(out), all);
        // The same bytes again: nothing is stale.
        assert!(single_stage(out, "score", "1").is_empty());
        assert_eq!(listed(out), all);
        // A changed fetch: everything after it is stale, and stays so while a stage between
        // is stale (report alone cannot make aggregate current).
        assert_eq!(
            single_stage(out, "fetch", "2"),
            ["score", "aggregate", "report"]
        );
        assert_eq!(listed(out), ["fetch/t.txt"]);
        assert_eq!(
            single_stage(out, "report", "1"),
            ["score", "aggregate", "report"]
        );
        assert_eq!(listed(out), ["fetch/t.txt"]);
        assert_eq!(single_stage(out, "score", "2"), ["aggregate", "report"]);
        assert_eq!(single_stage(out, "aggregate", "2"), ["report"]);
        assert!(single_stage(out, "report", "2").is_empty());
        assert_eq!(listed(out), all);
        // A stage that fails puts the previous manifest back.
        let before = fs_err::read(out.join(MANIFEST_NAME)).unwrap();
        {
            let _t = TopManifest::begin(out, "score").unwrap();
            assert_eq!(listed(out), ["fetch/t.txt"], "while score runs");
        }
        assert_eq!(fs_err::read(out.join(MANIFEST_NAME)).unwrap(), before);
    }

    #[test]
    fn temporary_names() {
        assert_eq!(temporary_pid(".a.parquet.123.tmp"), Some(123));
        assert_eq!(temporary_pid(".abc.77.part"), Some(77));
        assert_eq!(temporary_pid("a.123.tmp"), None);
        assert_eq!(temporary_pid(".123.tmp"), None);
        assert_eq!(temporary_pid(".a.x1.tmp"), None);
    }

    #[test]
    fn foreign_folder_is_refused_and_untouched() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("mine");
        fs_err::create_dir_all(&out).unwrap();
        fs_err::write(out.join("notes.txt"), b"keep").unwrap();
        let e = claim_out_dir(&out, None).unwrap_err().to_string();
        assert!(e.contains("not created by protospread"), "{e}");
        assert_eq!(fs_err::read_dir(&out).unwrap().count(), 1);
    }

    #[test]
    fn second_claim_is_refused_with_pid() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("out");
        let _held = claim_out_dir(&out, None).unwrap();
        let e = claim_out_dir(&out, None).unwrap_err().to_string();
        assert!(e.contains(&format!("pid {}", std::process::id())), "{e}");
    }

    #[test]
    fn exchange_swaps_folders() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        fs_err::create_dir_all(&a).unwrap();
        fs_err::create_dir_all(&b).unwrap();
        fs_err::write(a.join("x"), b"a").unwrap();
        fs_err::write(b.join("x"), b"b").unwrap();
        exchange(&a, &b).unwrap();
        assert_eq!(fs_err::read(a.join("x")).unwrap(), b"b");
        assert_eq!(fs_err::read(b.join("x")).unwrap(), b"a");
    }

    #[test]
    fn unlisted_file_in_stage_folder_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let s = d.path().join("report");
        fs_err::create_dir_all(&s).unwrap();
        fs_err::write(s.join("a.csv"), b"1").unwrap();
        crate::hash::write_manifest(&s).unwrap();
        check_owned_stage_dir(&s).unwrap();
        fs_err::write(s.join("mine.md"), b"2").unwrap();
        let e = check_owned_stage_dir(&s).unwrap_err().to_string();
        assert!(e.contains("mine.md") && e.contains("not listed"), "{e}");
    }
}
