//! The repository and the binary's runs, for tests.

use std::path::{Path, PathBuf};
use std::process::Output;

/// The workspace root (the repository: `pipeline.toml`, `data/`, `tests/fixtures/`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .and_then(Path::parent)
        .expect("crates/testutils is two levels below the root")
        .to_path_buf()
}

/// A finished command's exit status, stdout and stderr, for an assertion's message.
pub fn output_text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
