//! `protospread sweep`: task generation, ingestion of lm-eval output (fixtures in the exact
//! lm-eval 0.4.13 layout, tests/fixtures/lm_eval/), its failure reports, and the acceptance
//! check against the real harness (scripts/lm-eval-check.sh).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_protospread");

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fixture() -> PathBuf {
    repo().join("tests/fixtures/lm_eval")
}

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// A private copy of the fixture sweep, to be damaged by a test.
fn fixture_copy() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture(), dir.path());
    let cfg = dir.path().join("pipeline.toml");
    (dir, cfg)
}

fn smol_dir(root: &Path) -> PathBuf {
    root.join("arc_sweep/HuggingFaceTB__SmolLM2-135M-Instruct")
}

fn file_starting(dir: &Path, prefix: &str) -> PathBuf {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix}* in {}", dir.display()))
}

fn ingest(cfg: &Path) -> Output {
    run(&[
        "--config",
        cfg.to_str().unwrap(),
        "--json",
        "sweep",
        "ingest",
    ])
}

#[test]
fn ingest_fixture_counts_every_cell() {
    let out = ingest(&fixture().join("pipeline.toml"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["problems"].as_array().unwrap().len(), 0);
    assert_eq!(v["files"].as_array().unwrap().len(), 12);
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 12);
    // make_fixtures.py's SCORES, read back through the samples files.
    let want = [
        ("HuggingFaceTB/SmolLM2-135M-Instruct", "plain", "\n", 6),
        ("HuggingFaceTB/SmolLM2-135M-Instruct", "plain", "!", 3),
        ("HuggingFaceTB/SmolLM2-135M-Instruct", "named", "!", 5),
        ("Qwen/Qwen2.5-0.5B-Instruct", "plain", "#", 2),
        ("Qwen/Qwen2.5-0.5B-Instruct", "named", "\n", 6),
    ];
    for (model, variant, delim, correct) in want {
        let c = cells
            .iter()
            .find(|c| c["model"] == model && c["variant"] == variant && c["delimiter"] == delim)
            .unwrap();
        assert_eq!(c["correct"], correct, "{c}");
        assert_eq!(c["n"], 8);
        assert_eq!(c["benchmark"], "arc_challenge");
    }
}

#[test]
fn malformed_line_is_named_with_file_and_line() {
    let (dir, cfg) = fixture_copy();
    let f = file_starting(
        &smol_dir(dir.path()),
        "samples_arc_challenge_delim_hash_plain",
    );
    let text = fs::read_to_string(&f).unwrap();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    lines[2] = lines[2][..lines[2].len() / 2].to_string();
    fs::write(&f, lines.join("\n") + "\n").unwrap();
    let out = ingest(&cfg);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("samples_arc_challenge_delim_hash_plain"),
        "{err}"
    );
    assert!(err.contains("line 3"), "{err}");

    // A line without one of lm-eval's fields is refused the same way.
    let mut v: serde_json::Value = serde_json::from_str(text.lines().nth(4).unwrap()).unwrap();
    v.as_object_mut().unwrap().remove("doc_hash");
    lines[2] = text.lines().nth(2).unwrap().to_string();
    lines[4] = v.to_string();
    fs::write(&f, lines.join("\n") + "\n").unwrap();
    let err = String::from_utf8_lossy(&ingest(&cfg).stderr).into_owned();
    assert!(err.contains("line 5") && err.contains("doc_hash"), "{err}");
}

#[test]
fn missing_variant_is_reported() {
    let (dir, cfg) = fixture_copy();
    let d = smol_dir(dir.path());
    let task = "arc_challenge_delim_hash_named";
    fs::remove_file(file_starting(&d, &format!("samples_{task}"))).unwrap();
    let rf = file_starting(&d, "results_");
    let mut r: serde_json::Value = serde_json::from_str(&fs::read_to_string(&rf).unwrap()).unwrap();
    for key in [
        "results",
        "configs",
        "versions",
        "n-shot",
        "n-samples",
        "group_subtasks",
    ] {
        r[key].as_object_mut().unwrap().remove(task);
    }
    fs::write(&rf, serde_json::to_string_pretty(&r).unwrap()).unwrap();
    let out = ingest(&cfg);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "SmolLM2-135M-Instruct, arc_challenge: delimiter \"#\" (hash) variant named is missing"
        ),
        "{err}"
    );
    assert!(err.contains("1 problem(s)"), "{err}");
}

#[test]
fn different_document_sets_are_reported() {
    let (dir, cfg) = fixture_copy();
    let f = file_starting(
        &smol_dir(dir.path()),
        "samples_arc_challenge_delim_exclam_plain",
    );
    let text = fs::read_to_string(&f).unwrap();
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with("{\"doc_id\": 7,"))
        .collect();
    assert_eq!(kept.len(), 7);
    fs::write(&f, kept.join("\n") + "\n").unwrap();
    let out = ingest(&cfg);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("delimiter exclam variant plain saw 7 of the 8 documents"),
        "{err}"
    );
}

#[test]
fn multiturn_run_and_wrong_delimiter_are_reported() {
    let (dir, cfg) = fixture_copy();
    let rf = file_starting(&smol_dir(dir.path()), "results_");
    let mut r: serde_json::Value = serde_json::from_str(&fs::read_to_string(&rf).unwrap()).unwrap();
    r["fewshot_as_multiturn"] = serde_json::Value::Bool(true);
    r["configs"]["arc_challenge_delim_nl_plain"]["fewshot_delimiter"] = "\n\n".into();
    fs::write(&rf, serde_json::to_string_pretty(&r).unwrap()).unwrap();
    let out = ingest(&cfg);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("fewshot_as_multiturn = true"), "{err}");
    assert!(
        err.contains("arc_challenge_delim_nl_plain ran with fewshot_delimiter \"\\n\\n\""),
        "{err}"
    );
}

/// A stand-in for lm-eval's task folder with the base files the generator includes.
fn fake_tasks_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("arc")).unwrap();
    fs::write(
        dir.path().join("arc/arc_challenge.yaml"),
        "task: arc_challenge\n",
    )
    .unwrap();
    dir
}

#[test]
fn lm_eval_task_files_and_readme() {
    let tasks = fake_tasks_dir();
    let work = tempfile::tempdir().unwrap();
    let cfg = work.path().join("pipeline.toml");
    fs::write(&cfg, "[study]\nname = \"t\"\n").unwrap();
    let out_dir = work.path().join("arc");
    let args = [
        "--config",
        cfg.to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
        "sweep",
        "lm-eval",
        "--task",
        "arc_challenge",
        "--lm-eval-tasks",
        tasks.path().to_str().unwrap(),
    ];
    let out = run(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let yaml = fs::read_to_string(out_dir.join("arc_challenge_delim_hash_named.yaml")).unwrap();
    assert!(yaml.contains("fewshot_delimiter: \"#\"\n"), "{yaml}");
    assert!(
        yaml.contains(
            "description: \"The question-answer examples are separated by \\\"#\\\".\\n\\n\"\n"
        ),
        "{yaml}"
    );
    let nl = fs::read_to_string(out_dir.join("arc_challenge_delim_nl_plain.yaml")).unwrap();
    assert!(
        nl.contains("fewshot_delimiter: \"\\n\"\n") && !nl.contains("description"),
        "{nl}"
    );
    let readme = fs::read_to_string(out_dir.join("README.md")).unwrap();
    assert!(readme.contains("--include_path") && readme.contains("--apply_chat_template"));
    assert!(readme.contains("--fewshot_as_multiturn false") && readme.contains("--log_samples"));
    let listed = fs::read_to_string(out_dir.join("tasks.txt")).unwrap();
    assert_eq!(listed.lines().count(), 70);
    let n_yaml = fs::read_dir(&out_dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "yaml")
        })
        .count();
    assert_eq!(n_yaml, 70);
    // The manifest checks with the real sha256sum.
    let sums = Command::new("sha256sum")
        .arg("-c")
        .arg("--quiet")
        .arg("SHA256SUMS")
        .current_dir(&out_dir)
        .status()
        .unwrap();
    assert!(sums.success());
    // A second run into the same (now non-empty) folder is refused and changes nothing.
    let before = fs::read(out_dir.join("SHA256SUMS")).unwrap();
    let again = run(&args);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("not empty"));
    assert_eq!(fs::read(out_dir.join("SHA256SUMS")).unwrap(), before);
    // A missing base task file is named.
    let other = work.path().join("csqa");
    let out = run(&[
        "--config",
        cfg.to_str().unwrap(),
        "--out",
        other.to_str().unwrap(),
        "sweep",
        "lm-eval",
        "--task",
        "commonsense_qa",
        "--lm-eval-tasks",
        tasks.path().to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("commonsense_qa/default.yaml"));
    assert!(!other.exists());
}

/// The acceptance check with lm-evaluation-harness 0.4.13 itself (installed from PyPI into
/// target/lm-eval-venv on first use). Skips, saying so, only when python3 is missing.
#[test]
fn generated_tasks_load_and_render_in_real_lm_eval() {
    if Command::new("python3").arg("--version").output().is_err() {
        eprintln!(
            "SKIPPED generated_tasks_load_and_render_in_real_lm_eval: python3 is not installed"
        );
        return;
    }
    let out = Command::new("bash")
        .arg(repo().join("scripts/lm-eval-check.sh"))
        .env("PROTOSPREAD", BIN)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("lm-eval check: 210 task variants rendered, 0 failure(s)"),
        "{stdout}"
    );
}
