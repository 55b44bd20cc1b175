//! Progress bars are drawn only on a terminal, and never with `--quiet` or `--json`: output
//! to a pipe or file, and `--quiet`/`--json` output on a terminal, hold no progress bytes.
//! The terminal is a pseudo-terminal from util-linux `script`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    protospread_testutils::copy_dir(&repo().join("data"), &dir.path().join("data"));
    fs_err::copy(
        repo().join("pipeline.toml"),
        dir.path().join("pipeline.toml"),
    )
    .unwrap();
    dir
}

/// What a terminal shows for `protospread ARGS` run under a pseudo-terminal in `cwd`
/// (standard output and error together).
fn on_terminal(cwd: &Path, args: &str) -> String {
    let cmd = format!("{} {args}", env!("CARGO_BIN_EXE_protospread"));
    let o = Command::new("script")
        .current_dir(cwd)
        .args(["-qec", &cmd, "/dev/null"])
        .output()
        .unwrap_or_else(|e| panic!("util-linux `script` is needed for this test: {e}"));
    assert!(o.status.success(), "{cmd}: {o:?}");
    String::from_utf8(o.stdout).unwrap()
}

/// Bytes a progress bar draws: carriage returns and terminal escapes.
fn has_progress_bytes(text: &str) -> bool {
    text.contains('\x1b') || text.replace("\r\n", "\n").contains('\r')
}

#[test]
fn progress_only_on_a_terminal_without_quiet_or_json() {
    let p = project();
    let d = p.path();
    // A pipe: the summary lines and nothing else.
    let o = Command::new(env!("CARGO_BIN_EXE_protospread"))
        .current_dir(d)
        .args(["--out", "piped", "run"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let stdout = String::from_utf8(o.stdout).unwrap();
    assert!(!has_progress_bytes(&stdout), "{stdout:?}");
    assert!(stdout.contains("run: "), "{stdout}");
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // A terminal with --quiet: nothing at all.
    assert_eq!(on_terminal(d, "--quiet --out quiet run"), "");
    // With --json: the one JSON object, nothing around it.
    let json = on_terminal(d, "--json --out json run");
    assert!(!has_progress_bytes(&json), "{json:?}");
    let v: serde_json::Value = serde_json::from_str(json.trim_end()).unwrap();
    assert_eq!(v["ok"], serde_json::Value::Bool(true));
    // Without either, the stages draw their bars: the same check sees them.
    let shown = on_terminal(d, "--out shown run");
    assert!(has_progress_bytes(&shown), "{shown:?}");
    assert!(shown.contains("records"), "{shown:?}");
    // Every run wrote the same tables.
    for dir in ["quiet", "json", "shown"] {
        assert_eq!(
            fs_err::read(d.join(dir).join("SHA256SUMS")).unwrap(),
            fs_err::read(d.join("piped/SHA256SUMS")).unwrap(),
            "{dir}"
        );
    }
}
