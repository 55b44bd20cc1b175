//! `--json` on every command prints exactly one JSON object on stdout (issue: one object per
//! command, `run` with one member per stage), also when the command fails. Each output is
//! checked with serde_json (which refuses trailing data) and with `python3 -m json.tool`.
//! Everything runs on copies in temporary folders.

use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

use protospread_testutils::copy_dir;

/// A copy of the study's configuration, data and committed checksums.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for d in ["data", "checksums"] {
        copy_dir(&repo().join(d), &dir.path().join(d));
    }
    fs_err::copy(
        repo().join("pipeline.toml"),
        dir.path().join("pipeline.toml"),
    )
    .unwrap();
    fs_err::copy(repo().join("Cargo.lock"), dir.path().join("Cargo.lock")).unwrap();
    dir
}

fn json(cwd: &Path, args: &[&str]) -> (Output, serde_json::Map<String, Value>) {
    let o = Command::new(env!("CARGO_BIN_EXE_protospread"))
        .current_dir(cwd)
        .arg("--json")
        .args(args)
        .output()
        .unwrap();
    let what = format!(
        "protospread --json {}: status {:?}\nstdout:\n{}\nstderr:\n{}",
        args.join(" "),
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}\n{what}"));
    let Value::Object(map) = v else {
        panic!("not a JSON object\n{what}")
    };
    json_tool(&o.stdout, &what);
    (o, map)
}

/// The second, independent parser the issue names. python3 is required: the README's test
/// command (scripts/test.sh) checks for it before any test runs.
fn json_tool(stdout: &[u8], what: &str) {
    let mut child = Command::new("python3")
        .args(["-m", "json.tool"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("python3 is needed for this test (install python3, or run scripts/setup-test-tools.sh): {e}")
        });
    child.stdin.take().unwrap().write_all(stdout).unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "python3 -m json.tool refused the output: {}\n{what}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn every_command_prints_one_json_object() {
    let p = project();
    let d = p.path();

    let (o, m) = json(d, &["run"]);
    assert!(o.status.success());
    for stage in ["fetch", "score", "aggregate", "report", "run"] {
        assert!(
            m.contains_key(stage),
            "run --json lacks member {stage}: {m:?}"
        );
    }
    // Paths name the folder the user gave, not the run's staging folder.
    assert!(!Value::Object(m).to_string().contains(".tmp"));

    // Every Parquet output carries the run's provenance in its key-value metadata.
    let config_sha = protospread_core::sha256_file(&d.join("pipeline.toml")).unwrap();
    for f in [
        "fetch/human/big_five.parquet",
        "score/scale_scores.parquet",
        "aggregate/verdict.parquet",
    ] {
        let (schema, _) = protospread_core::read_parquet(&d.join("out").join(f)).unwrap();
        let meta = schema.metadata();
        assert_eq!(
            meta.get("protospread.version").map(String::as_str),
            Some(env!("CARGO_PKG_VERSION")),
            "{f}: {meta:?}"
        );
        assert_eq!(
            meta.get("protospread.config_sha256"),
            Some(&config_sha),
            "{f}"
        );
        assert_eq!(
            meta.get("protospread.input.human_big_five.sha256")
                .map(String::as_str),
            Some("121966a850d4ea13f38f3759ecf4e70a301479f3e7092a4d4cf9d42cf755eb8f"),
            "{f}"
        );
    }

    for stage in ["fetch", "score", "aggregate", "report"] {
        let (o, m) = json(d, &["--out", "staged", stage]);
        assert!(o.status.success(), "{stage}");
        assert!(m.contains_key(stage), "{stage} --json: {m:?}");
    }

    let (o, m) = json(d, &["verify"]);
    assert!(o.status.success(), "{m:?}");
    assert_eq!(m["verify"]["ok"], Value::Bool(true));
    assert_eq!(m["ok"], Value::Bool(true));

    // A failing verify: one object, ok false, and an error of kind check.
    let sums = d.join("checksums/outputs.sha256");
    let text = fs_err::read_to_string(&sums).unwrap();
    let first = text.lines().find(|l| !l.starts_with('#')).unwrap();
    let bad = format!("{}{}", "0".repeat(64), &first[64..]);
    fs_err::write(&sums, text.replacen(first, &bad, 1)).unwrap();
    let (o, m) = json(d, &["verify"]);
    assert_eq!(o.status.code(), Some(1), "{m:?}");
    assert_eq!(m["ok"], Value::Bool(false));
    assert_eq!(m["error"]["kind"], "check", "{m:?}");
    fs_err::write(&sums, text).unwrap();

    let (o, m) = json(d, &["bag", "bag", "--date", "2026-12-01"]);
    assert!(o.status.success(), "{m:?}");
    assert!(m["bag"]["payload_files"].as_u64().unwrap() > 0);

    let (o, m) = json(d, &["simulate", "--dir", "sim"]);
    assert!(o.status.success(), "{m:?}");
    assert!(m.contains_key("simulate"));

    let (o, m) = json(
        d,
        &[
            "administer",
            "--to",
            "answers.jsonl",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
            "--dry-run",
        ],
    );
    assert!(o.status.success(), "{m:?}");
    assert_eq!(m["administer"]["dry_run"], Value::Bool(true));

    let (o, m) = json(
        d,
        &[
            "sweep",
            "dictionary",
            "--to",
            "dict.jsonl",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
            "--dry-run",
        ],
    );
    assert!(o.status.success(), "{m:?}");
    assert!(m.contains_key("sweep_dictionary"));

    let tasks = d.join("lm_eval_tasks/arc");
    fs_err::create_dir_all(&tasks).unwrap();
    fs_err::write(tasks.join("arc_challenge.yaml"), "task: arc_challenge\n").unwrap();
    let (o, m) = json(
        d,
        &[
            "sweep",
            "lm-eval",
            "--task-dir",
            "arc_tasks",
            "--task",
            "arc_challenge",
            "--lm-eval-tasks",
            d.join("lm_eval_tasks").to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{m:?}");
    assert!(m.contains_key("sweep_lm_eval"));

    let real = repo().join("tests/fixtures/lm_eval/real");
    let (o, m) = json(
        d,
        &[
            "--config",
            real.join("pipeline.toml").to_str().unwrap(),
            "sweep",
            "ingest",
            real.join("results").to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{m:?}");
    assert!(m.contains_key("sweep_ingest"));
}

#[test]
fn a_failing_command_prints_one_object_with_the_error() {
    let d = tempfile::tempdir().unwrap();
    let (o, m) = json(d.path(), &["--config", "missing.toml", "fetch"]);
    assert!(!o.status.success());
    assert_eq!(m["ok"], Value::Bool(false));
    assert!(
        m["error"]["message"]
            .as_str()
            .unwrap()
            .contains("missing.toml"),
        "{m:?}"
    );
}

/// Usage errors: one object on stdout, `ok` false, `error.kind` usage, exit code 64.
#[test]
fn usage_errors_are_one_json_object() {
    let d = tempfile::tempdir().unwrap();
    for args in [
        &["frobnicate"][..],
        &["fetch", "--no-such-flag"],
        &["--memory-limit", "12 parsecs", "fetch"],
        &[],
    ] {
        let (o, m) = json(d.path(), args);
        assert_eq!(o.status.code(), Some(64), "{args:?}: {m:?}");
        assert_eq!(m["ok"], Value::Bool(false), "{args:?}");
        assert_eq!(m["error"]["kind"], "usage", "{args:?}: {m:?}");
        assert!(!m["error"]["message"].as_str().unwrap().is_empty());
    }
    let (o, m) = json(d.path(), &["--help"]);
    assert!(o.status.success());
    assert!(m["help"].as_str().unwrap().contains("protospread"));
}

/// Runtime errors name file, row and column where the library knows them; a failing
/// `sweep ingest` has an error member.
#[test]
fn runtime_errors_name_file_row_and_column() {
    let d = tempfile::tempdir().unwrap();
    fs_err::write(d.path().join("bad.toml"), "[sweep]\nnum_fewshot = \"x\"\n").unwrap();
    let (o, m) = json(d.path(), &["--config", "bad.toml", "sweep", "ingest"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(m["error"]["kind"], "config", "{m:?}");
    assert!(m["error"]["file"].as_str().unwrap().ends_with("bad.toml"));
    assert_eq!(m["error"]["row"], 2, "{m:?}");
    assert!(m["error"]["column"].is_u64(), "{m:?}");

    // A samples line that is not JSON: file and row (its line).
    let real = repo().join("tests/fixtures/lm_eval/real/results");
    let runs = d.path().join("runs");
    copy_dir(&real, &runs);
    let model = runs.join("SmolLM2-135M-Instruct.Q4_1");
    let sample = fs_err::read_dir(&model)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains("samples_addq_alpha_"))
        .unwrap();
    let text = fs_err::read_to_string(&sample).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[2] = "{not json";
    fs_err::write(&sample, lines.join("\n") + "\n").unwrap();
    let (o, m) = json(d.path(), &["sweep", "ingest", "runs"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(m["error"]["kind"], "input", "{m:?}");
    assert_eq!(
        m["error"]["file"],
        sample
            .display()
            .to_string()
            .replace(&d.path().display().to_string(), "")
            .trim_start_matches('/')
    );
    assert_eq!(m["error"]["row"], 3, "{m:?}");

    // A failing check (a run's task ingested twice) is an error of kind check.
    let (o, m) = json(
        d.path(),
        &[
            "sweep",
            "ingest",
            real.to_str().unwrap(),
            real.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{m:?}");
    assert_eq!(m["ok"], Value::Bool(false));
    assert_eq!(m["error"]["kind"], "check", "{m:?}");
    assert!(m.contains_key("sweep_ingest"));
}

/// A memory limit too small for a stage is an error of kind `memory` that names the stage,
/// the limit in force, where it was set and the two ways to raise it; plain text says the same.
/// The engine's smallest limit (32 MiB) is too small for the aggregate stage's hash joins on
/// the embedded study in 8 partitions (each operator's share of the pool is an eighth), while
/// fetch and score spill within it.
#[test]
fn a_memory_limit_too_small_names_the_stage_the_limit_and_the_remedy() {
    let dir = project();
    let (o, _) = json(dir.path(), &["--quiet", "fetch"]);
    assert!(o.status.success());
    let (o, _) = json(dir.path(), &["--memory-limit", "32MiB", "score"]);
    assert!(o.status.success(), "score spills within 32 MiB");
    let (o, map) = json(
        dir.path(),
        &["--memory-limit", "32MiB", "aggregate", "--partitions", "8"],
    );
    assert_eq!(o.status.code(), Some(1));
    let error = &map["error"];
    assert_eq!(error["kind"], "memory", "{error}");
    let message = error["message"].as_str().unwrap();
    for part in [
        "stage aggregate ran out of memory",
        "the engine may hold 32MiB (set by --memory-limit)",
        "`[engine] memory_limit` in pipeline.toml",
        "`--memory-limit 1GiB`",
    ] {
        assert!(message.contains(part), "{part:?} not in {message}");
    }
    // Set in the configuration instead: the message says so.
    let cfg = fs_err::read_to_string(dir.path().join("pipeline.toml")).unwrap();
    let cfg = format!("{cfg}\n[engine]\nmemory_limit = \"32MiB\"\n");
    fs_err::write(dir.path().join("small.toml"), cfg).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_protospread"))
        .current_dir(dir.path())
        .args(["--config", "small.toml", "aggregate", "--partitions", "8"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let text = String::from_utf8_lossy(&o.stderr);
    assert!(
        text.contains("stage aggregate ran out of memory: the engine may hold 32MiB (`[engine] memory_limit` of small.toml"),
        "{text}"
    );
}
