//! Report tables of the embedded run that no other snapshot covers, whole, against committed
//! insta snapshots (tests/it/snapshots/): the human norms and scorer parity (from the human
//! data) and the recorded sweep's significance and ranking. A difference fails the test and
//! writes nothing (`.config/insta.yaml`); rewrite on purpose with `INSTA_UPDATE=always` and
//! review the diff.

use protospread_testutils::{output_text, repo_root};
use std::process::Command;

#[test]
fn human_and_sweep_tables_match_committed_snapshots() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    let o = Command::new(env!("CARGO_BIN_EXE_protospread"))
        .current_dir(repo_root())
        .arg("--quiet")
        .arg("--out")
        .arg(&out)
        .arg("run")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", output_text(&o));
    let mut settings = insta::Settings::clone_current();
    settings.set_omit_expression(true);
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(|| {
        for name in [
            "norms",
            "parity_summary",
            "sweep_significance",
            "sweep_ranking",
        ] {
            let text = fs_err::read_to_string(out.join(format!("report/{name}.csv"))).unwrap();
            insta::assert_snapshot!(format!("run_{name}_csv"), text);
        }
    });
}
