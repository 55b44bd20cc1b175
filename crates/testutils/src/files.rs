//! File helpers for tests.

use std::path::Path;

/// Copy a folder tree (files and folders; the fixtures hold no links). Panics on any error:
/// a test that cannot copy its fixture cannot run.
pub fn copy_dir(from: &Path, to: &Path) {
    fs_err::create_dir_all(to).unwrap();
    for e in fs_err::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            fs_err::copy(e.path(), dest).unwrap();
        }
    }
}
