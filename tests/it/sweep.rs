//! `protospread sweep`: task generation, ingestion of lm-eval output (fixtures in the exact
//! lm-eval 0.4.13 layout, tests/fixtures/lm_eval/), its failure reports, and the acceptance
//! check against the real harness (scripts/lm-eval-check.sh).

use fs_err as fs;
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

use protospread_testutils::copy_dir;

/// `sweep ingest` with configuration `cfg`, which must fail (exit 1); its stderr.
fn ingest_fails(cfg: &Path) -> String {
    let out = ingest(cfg);
    assert_eq!(out.status.code(), Some(1));
    String::from_utf8_lossy(&out.stderr).into_owned()
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
    let v = &v["sweep_ingest"];
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
        // The benchmark is the task's data set, not its name.
        assert_eq!(c["benchmark"], "allenai/ai2_arc/ARC-Challenge");
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
    // A declared cell that no run holds is a warning; the tables cover the cells present.
    let out = ingest(&cfg);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let missing = "SmolLM2-135M-Instruct, allenai/ai2_arc/ARC-Challenge: delimiter \"#\" (hash) variant named is missing";
    assert!(err.contains(missing), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let first = v["sweep_ingest"]["missing"][0].as_str().unwrap();
    assert!(first.ends_with(missing), "{first}");
    assert_eq!(v["sweep_ingest"]["cells"].as_array().unwrap().len(), 11);
    // --strict keeps the refusal.
    let out = run(&[
        "--config",
        cfg.to_str().unwrap(),
        "sweep",
        "ingest",
        "--strict",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("problem: model") && err.contains(missing),
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
    let err = ingest_fails(&cfg);
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
    let err = ingest_fails(&cfg);
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

/// Without --out, `sweep lm-eval` writes a new folder, never the stages' out/ (which in the
/// repository is not empty).
#[test]
fn lm_eval_without_out_writes_a_fresh_folder() {
    let tasks = fake_tasks_dir();
    let work = tempfile::tempdir().unwrap();
    fs::write(
        work.path().join("pipeline.toml"),
        "[sweep]\ndelimiters = [\"#\"]\n",
    )
    .unwrap();
    fs::create_dir_all(work.path().join("out/fetch")).unwrap();
    let go = || {
        Command::new(BIN)
            .current_dir(work.path())
            .args([
                "sweep",
                "lm-eval",
                "--task",
                "arc_challenge",
                "--lm-eval-tasks",
            ])
            .arg(tasks.path())
            .output()
            .unwrap()
    };
    for folder in ["sweep-arc_challenge", "sweep-arc_challenge-2"] {
        let out = go();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            work.path()
                .join(folder)
                .join("arc_challenge_delim_hash_plain.yaml")
                .is_file(),
            "{folder}"
        );
    }
    assert_eq!(fs::read_dir(work.path().join("out")).unwrap().count(), 1);
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
        "sweep",
        "lm-eval",
        "--task-dir",
        out_dir.to_str().unwrap(),
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
        "sweep",
        "lm-eval",
        "--task-dir",
        other.to_str().unwrap(),
        "--task",
        "commonsense_qa",
        "--lm-eval-tasks",
        tasks.path().to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("commonsense_qa/default.yaml"));
    assert!(!other.exists());
}

/// Without `--lm-eval-tasks`, the task folder comes from the interpreter given by `--python`;
/// an interpreter without lm-eval is a clear error.
#[cfg(unix)]
#[test]
fn lm_eval_task_folder_from_the_installed_package() {
    use std::os::unix::fs::PermissionsExt;
    let tasks = fake_tasks_dir();
    let dir = tempfile::tempdir().unwrap();
    // A stand-in interpreter that answers the question protospread asks.
    let py = dir.path().join("python");
    fs::write(
        &py,
        format!("#!/bin/sh\necho '{}'\n", tasks.path().display()),
    )
    .unwrap();
    fs::set_permissions(&py, std::fs::Permissions::from_mode(0o755)).unwrap();
    let cfg = dir.path().join("pipeline.toml");
    fs::write(
        &cfg,
        "[study]\nname = \"t\"\n[sweep]\ndelimiters = [\"#\"]\n",
    )
    .unwrap();
    let out_dir = dir.path().join("arc");
    let out = run(&[
        "--config",
        cfg.to_str().unwrap(),
        "sweep",
        "lm-eval",
        "--task-dir",
        out_dir.to_str().unwrap(),
        "--task",
        "arc_challenge",
        "--python",
        py.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let yaml = fs::read_to_string(out_dir.join("arc_challenge_delim_hash_plain.yaml")).unwrap();
    assert!(yaml.contains(&tasks.path().display().to_string()), "{yaml}");

    // An interpreter without lm-eval.
    let nope = dir.path().join("nope");
    fs::write(
        &nope,
        "#!/bin/sh\necho \"ModuleNotFoundError: No module named 'lm_eval'\" >&2\nexit 1\n",
    )
    .unwrap();
    fs::set_permissions(&nope, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = run(&[
        "--config",
        cfg.to_str().unwrap(),
        "sweep",
        "lm-eval",
        "--task-dir",
        dir.path().join("x").to_str().unwrap(),
        "--task",
        "arc_challenge",
        "--python",
        nope.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("lm-eval is not installed for")
            && err.contains("No module named 'lm_eval'")
            && err.contains("--lm-eval-tasks"),
        "{err}"
    );
}

/// The acceptance check with lm-evaluation-harness 0.4.13 itself (installed from PyPI into
/// target/lm-eval-venv on first use). It never passes without running: without python3 it
/// fails, saying what to install.
#[test]
fn generated_tasks_load_and_render_in_real_lm_eval() {
    let py = Command::new("python3")
        .args(["-m", "venv", "--help"])
        .output();
    assert!(
        py.as_ref().is_ok_and(|o| o.status.success()),
        "this test runs lm-evaluation-harness itself: install python3 with its venv module \
         (Debian: apt-get install python3 python3-venv) and allow access to PyPI \
         (scripts/lm-eval-check.sh installs lm-eval==0.4.13 into target/lm-eval-venv); got {py:?}"
    );
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

// ---- the recorded real lm-eval run (tests/fixtures/lm_eval/real/README.md) ----

mod real_lm_eval {
    use super::*;
    use arrow::record_batch::RecordBatch;
    use protospread_core::Config;
    use serde_json::Value;

    fn real() -> PathBuf {
        repo().join("tests/fixtures/lm_eval/real")
    }

    fn run_dir(root: &Path) -> PathBuf {
        root.join("results/SmolLM2-135M-Instruct.Q4_1")
    }

    /// A private copy of the recorded run and its configuration.
    fn copy() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(&real().join("results"), &dir.path().join("results"));
        fs::copy(
            real().join("pipeline.toml"),
            dir.path().join("pipeline.toml"),
        )
        .unwrap();
        let cfg = dir.path().join("pipeline.toml");
        (dir, cfg)
    }

    fn results_json(root: &Path) -> (PathBuf, Value) {
        let f = file_starting(&run_dir(root), "results_");
        let v = serde_json::from_str(&fs::read_to_string(&f).unwrap()).unwrap();
        (f, v)
    }

    fn tables(cfg: &Path) -> Vec<(String, RecordBatch)> {
        let c = Config::load(cfg).unwrap();
        protospread_sweep::tables(&c).unwrap()
    }

    #[test]
    fn fixture_is_byte_identical_to_the_recording() {
        let sums = fs::read_to_string(real().join("SHA256SUMS")).unwrap();
        let mut n = 0;
        for line in sums.lines() {
            let (want, rel) = line.split_once("  ").unwrap();
            let got = protospread_core::sha256_file(&real().join("results").join(rel)).unwrap();
            assert_eq!(got, want, "{rel}");
            n += 1;
        }
        assert_eq!(n, 7, "one results file and six samples files");
    }

    /// Every task of the real run is read, its delimiter, variant and metric come from the
    /// results file's configs (the names say nothing), the repeated document counts twice,
    /// and every count equals lm-eval's own `exact_match,first_number` and `n-samples`.
    #[test]
    fn counts_equal_lm_evals_own_results() {
        let out = ingest(&real().join("pipeline.toml"));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let v = &v["sweep_ingest"];
        assert_eq!(v["problems"].as_array().unwrap().len(), 0, "{v}");
        assert_eq!(v["files"].as_array().unwrap().len(), 6);
        let (_, r) = results_json(&real());
        let tasks = v["tasks"].as_array().unwrap();
        assert_eq!(tasks.len(), 6);
        for t in tasks {
            let name = t["task"].as_str().unwrap();
            let cfg = &r["configs"][name];
            assert_eq!(t["delimiter"], cfg["fewshot_delimiter"], "{name}");
            let named = cfg["description"]
                .as_str()
                .is_some_and(|d| d.contains("separated by"));
            assert_eq!(
                t["variant"],
                if named { "named" } else { "plain" },
                "{name}"
            );
            assert_eq!(t["metric"], "exact_match,first_number");
            assert_eq!(t["benchmark"], "addition");
            let n = t["n"].as_u64().unwrap();
            assert_eq!(
                n,
                r["n-samples"][name]["effective"].as_u64().unwrap(),
                "{name}"
            );
            // 12 documents: the test split holds documents 5 and 9 with the same content.
            assert_eq!(n, 12);
            let acc = t["correct"].as_u64().unwrap() as f64 / n as f64;
            assert_eq!(
                acc,
                r["results"][name]["exact_match,first_number"]
                    .as_f64()
                    .unwrap(),
                "{name}"
            );
        }
        // The same counts per cell (one task per delimiter and variant here).
        let cells = v["cells"].as_array().unwrap();
        assert_eq!(cells.len(), 6);
        for c in cells {
            let t = tasks
                .iter()
                .find(|t| t["delimiter"] == c["delimiter"] && t["variant"] == c["variant"])
                .unwrap();
            assert_eq!((&c["n"], &c["correct"]), (&t["n"], &t["correct"]));
            assert_eq!(c["source"], "results");
            assert_eq!(c["label"], "recorded");
        }
        // The repeated document really is in the recording: two doc_ids, one doc_hash.
        let f = file_starting(&run_dir(&real()), "samples_addq_alpha");
        let lines: Vec<Value> = fs::read_to_string(f)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[5]["doc_hash"], lines[9]["doc_hash"]);
        assert_ne!(lines[5]["doc_id"], lines[9]["doc_id"]);
    }

    /// The same run with every task renamed (results file keys and samples file names) gives
    /// byte-identical tables.
    #[test]
    fn renamed_tasks_give_the_same_tables() {
        let before = tables(&real().join("pipeline.toml"));
        let (dir, cfg) = copy();
        let d = run_dir(dir.path());
        let (rf, _) = results_json(dir.path());
        let mut text = fs::read_to_string(&rf).unwrap();
        // Reversed order, so that the new names also sort differently from the old ones.
        let renames = [
            ("addq_alpha", "zeta_6"),
            ("addq_bravo", "zeta_5"),
            ("addq_charlie", "my task 4"),
            ("addq_delta", "zeta_3"),
            ("addq_echo", "mmlu_x_delim_nl_plain"),
            ("addq_foxtrot", "zeta_1"),
        ];
        for (old, new) in renames {
            text = text.replace(&format!("\"{old}\""), &format!("\"{new}\""));
            let sf = file_starting(&d, &format!("samples_{old}_"));
            let name = sf.file_name().unwrap().to_string_lossy().replace(old, new);
            fs::rename(&sf, d.join(name)).unwrap();
        }
        fs::write(&rf, text).unwrap();
        // Task names that read like protospread's naming must agree with the configs: the
        // renamed "#" task called ..._nl_plain is refused, not silently re-labelled.
        let c = Config::load(&cfg).unwrap();
        let e = protospread_sweep::tables(&c).unwrap_err().to_string();
        assert!(
            e.contains(
                "mmlu_x_delim_nl_plain ran with fewshot_delimiter \"#\" but its name says \"\\n\""
            ),
            "{e}"
        );
        let text = fs::read_to_string(&rf)
            .unwrap()
            .replace("\"mmlu_x_delim_nl_plain\"", "\"zeta_2\"");
        fs::write(&rf, text).unwrap();
        let sf = file_starting(&d, "samples_mmlu_x_delim_nl_plain_");
        let name = sf
            .file_name()
            .unwrap()
            .to_string_lossy()
            .replace("mmlu_x_delim_nl_plain", "zeta_2");
        fs::rename(&sf, d.join(name)).unwrap();
        let after = tables(&cfg);
        assert_eq!(before.len(), 10);
        assert_eq!(before, after);
    }

    /// `sweep ingest` of folder `dir` without a configuration: it must fail (exit 1); its
    /// stderr.
    fn ingest_refused(dir: &Path) -> String {
        let out = run(&[
            "--config",
            "/nonexistent/pipeline.toml",
            "sweep",
            "ingest",
            dir.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(1));
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    #[test]
    fn folder_without_samples_is_an_error_saying_what_was_found() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("notes.txt"), "x").unwrap();
        let err = ingest_refused(dir.path());
        assert!(
            err.contains("no lm-eval samples read; found 1 file(s), 0 results_*.json file(s)"),
            "{err}"
        );

        // Samples files without their results file: read nothing, and say so.
        let (d2, _) = copy();
        fs::remove_file(results_json(d2.path()).0).unwrap();
        let err = ingest_refused(d2.path());
        assert!(
            err.contains("6 samples_*.jsonl file(s) that no results file names"),
            "{err}"
        );
    }

    /// A copy of the recorded run keeping only `keep` of its six tasks: a real lm-eval run of
    /// fewer tasks, as lm-eval writes it (results entries and samples files of the others
    /// removed, nothing else changed).
    fn subset(keep: &[&str]) -> (tempfile::TempDir, PathBuf) {
        let (dir, _) = copy();
        fs::remove_file(dir.path().join("pipeline.toml")).unwrap();
        let d = run_dir(dir.path());
        let (rf, mut r) = results_json(dir.path());
        let all: Vec<String> = r["configs"].as_object().unwrap().keys().cloned().collect();
        for task in all.iter().filter(|t| !keep.contains(&t.as_str())) {
            fs::remove_file(file_starting(&d, &format!("samples_{task}_"))).unwrap();
            for (_, v) in r.as_object_mut().unwrap().iter_mut() {
                if let Some(o) = v.as_object_mut() {
                    o.remove(task);
                }
            }
        }
        fs::write(&rf, serde_json::to_string_pretty(&r).unwrap()).unwrap();
        let results = dir.path().join("results");
        (dir, results)
    }

    fn ingest_in(cwd: &Path, args: &[&str]) -> (Output, Value) {
        let out = Command::new(BIN)
            .current_dir(cwd)
            .args(["--json", "sweep", "ingest"])
            .args(args)
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        (out, v)
    }

    fn cell_counts(v: &Value) -> Vec<(String, String, String, u64, u64)> {
        v["sweep_ingest"]["cells"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["benchmark"].as_str().unwrap().to_string(),
                    c["variant"].as_str().unwrap().to_string(),
                    c["delimiter"].as_str().unwrap().to_string(),
                    c["correct"].as_u64().unwrap(),
                    c["n"].as_u64().unwrap(),
                )
            })
            .collect()
    }

    /// A plain-only sweep ingests with lm-eval's own numbers, from a folder without any
    /// configuration and from the repository (whose [sweep] declares no grid), and prints the
    /// spread and the leading delimiter.
    #[test]
    fn plain_only_run_ingests_anywhere() {
        let (_dir, results) = subset(&["addq_alpha", "addq_charlie", "addq_echo"]);
        // In the default delimiters' order: printable characters, then "\n" and "\t".
        let want = vec![
            (
                "addition".to_string(),
                "plain".to_string(),
                " ".to_string(),
                0,
                12,
            ),
            ("addition".into(), "plain".into(), "#".into(), 0, 12),
            ("addition".into(), "plain".into(), "\n".into(), 3, 12),
        ];
        let empty = tempfile::tempdir().unwrap();
        for cwd in [empty.path(), repo().as_path()] {
            let (out, v) = ingest_in(cwd, &[results.to_str().unwrap()]);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(0), "{}: {err}", cwd.display());
            assert!(!err.contains("missing"), "{err}");
            assert_eq!(cell_counts(&v), want, "{}", cwd.display());
            let s = &v["sweep_ingest"]["spread"][0];
            assert_eq!(s["leading"], serde_json::json!(["nl"]), "{v}");
            assert_eq!(s["spread_pct"], 25.0);
        }
        let out = Command::new(BIN)
            .current_dir(empty.path())
            .args(["sweep", "ingest"])
            .arg(&results)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("spread  SmolLM2-135M-Instruct.Q4_1  addition  plain  25.00 points over 3 delimiter(s) (0.00% to 25.00%); leading: nl"),
            "{text}"
        );
    }

    /// A configuration file with only `[sweep]` is enough, and a declared grid that the runs
    /// do not cover is reported as missing cells while the tables are computed for the rest.
    #[test]
    fn sweep_only_configuration_and_a_partial_grid() {
        let (dir, results) = subset(&["addq_alpha", "addq_bravo", "addq_charlie", "addq_delta"]);
        let cfg = dir.path().join("sweep.toml");
        fs::write(
            &cfg,
            "[sweep]\ndelimiters = [\"\\n\", \" \", \"#\"]\nnum_fewshot = 3\n",
        )
        .unwrap();
        let args = ["--config", cfg.to_str().unwrap(), results.to_str().unwrap()];
        let (out, v) = ingest_in(dir.path(), &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{err}");
        let missing = v["sweep_ingest"]["missing"].as_array().unwrap();
        assert_eq!(missing.len(), 2, "{v}");
        assert!(
            err.contains("SmolLM2-135M-Instruct.Q4_1, addition: delimiter \"#\" (hash) variant plain is missing"),
            "{err}"
        );
        assert_eq!(cell_counts(&v).len(), 4);
        let (out, v) = ingest_in(dir.path(), &[&args[..], &["--strict"]].concat());
        assert_eq!(out.status.code(), Some(1));
        assert_eq!(v["ok"], false);
        assert_eq!(v["error"]["kind"], "check");
        // Variants declared, delimiters not: the grid is the runs' delimiters x both variants.
        fs::write(
            &cfg,
            "[sweep]\nvariants = [\"plain\", \"named\"]\nnum_fewshot = 3\n",
        )
        .unwrap();
        let (out, v) = ingest_in(dir.path(), &args);
        assert_eq!(out.status.code(), Some(0));
        assert_eq!(
            v["sweep_ingest"]["missing"].as_array().unwrap().len(),
            0,
            "{v}"
        );
    }

    /// Renaming tasks to protospread's naming with another base does not change the benchmark:
    /// it is the data set's.
    #[test]
    fn renamed_tasks_keep_the_data_sets_label() {
        let (dir, results) = subset(&["addq_alpha", "addq_bravo", "addq_echo", "addq_foxtrot"]);
        let d = run_dir(dir.path());
        let (rf, _) = results_json(dir.path());
        let mut text = fs::read_to_string(&rf).unwrap();
        for (old, new) in [
            ("addq_echo", "easy_test_delim_hash_plain"),
            ("addq_foxtrot", "easy_test_delim_hash_named"),
        ] {
            text = text.replace(&format!("\"{old}\""), &format!("\"{new}\""));
            let sf = file_starting(&d, &format!("samples_{old}_"));
            let name = sf.file_name().unwrap().to_string_lossy().replace(old, new);
            fs::rename(&sf, d.join(name)).unwrap();
        }
        fs::write(&rf, text).unwrap();
        let (out, v) = ingest_in(dir.path(), &[results.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{err}");
        let counts = cell_counts(&v);
        assert_eq!(counts.len(), 4, "{v}");
        assert!(counts.iter().all(|c| c.0 == "addition"), "{counts:?}");
    }

    /// `sweep ingest DIR` needs no pipeline.toml: the delimiters are those the run used.
    #[test]
    fn ingest_a_folder_without_configuration() {
        let cwd = tempfile::tempdir().unwrap();
        let out = Command::new(BIN)
            .current_dir(cwd.path())
            .args(["--json", "sweep", "ingest"])
            .arg(real().join("results"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let v = &v["sweep_ingest"];
        assert_eq!(v["cells"].as_array().unwrap().len(), 6);
    }

    /// The same run given twice is double ingestion (by the run's identity: results file and
    /// task), and so is a copy of it in another folder (two runs of one cell).
    #[test]
    fn true_double_ingestion_is_reported() {
        let (dir, cfg) = copy();
        fs::write(
            &cfg,
            fs::read_to_string(&cfg).unwrap().replace(
                "lm_eval_runs = [\"results\"]",
                "lm_eval_runs = [\"results\", \"results\"]",
            ),
        )
        .unwrap();
        let err = ingest_fails(&cfg);
        assert!(err.contains("task addq_alpha ingested 2 times"), "{err}");

        copy_dir(&dir.path().join("results"), &dir.path().join("again"));
        fs::write(
            &cfg,
            fs::read_to_string(&cfg)
                .unwrap()
                .replace("[\"results\", \"results\"]", "[\"results\", \"again\"]"),
        )
        .unwrap();
        let err = String::from_utf8_lossy(&ingest(&cfg).stderr).into_owned();
        assert!(
            err.contains("delimiter nl variant plain comes from 2 runs"),
            "{err}"
        );
    }

    #[test]
    fn task_without_delimiter_is_named() {
        let (dir, cfg) = copy();
        let (rf, mut r) = results_json(dir.path());
        r["configs"]["addq_charlie"]
            .as_object_mut()
            .unwrap()
            .remove("fewshot_delimiter");
        fs::write(&rf, serde_json::to_string_pretty(&r).unwrap()).unwrap();
        let err = ingest_fails(&cfg);
        assert!(
            err.contains("task addq_charlie: its delimiter cannot be determined"),
            "{err}"
        );
        assert!(
            err.contains("results_2026-12-01T11-06-48.139841.json"),
            "{err}"
        );
        // `--json` names the results file as the error's place.
        let m: Value = serde_json::from_slice(&ingest(&cfg).stdout).unwrap();
        let file = m["error"]["file"].as_str().unwrap_or_default();
        assert!(
            file.ends_with("results_2026-12-01T11-06-48.139841.json"),
            "{m}"
        );
    }

    /// `protospread run` with the repository's pipeline.toml, its `[sweep]` section replaced
    /// by the recorded run's: the aggregate stage reads every samples file and the tables
    /// hold lm-eval's own counts (the other stages run as always, from links to the
    /// repository's data).
    #[cfg(unix)]
    #[test]
    fn run_reads_the_recorded_run() {
        let dir = tempfile::tempdir().unwrap();
        for e in fs::read_dir(repo()).unwrap() {
            let e = e.unwrap();
            let name = e.file_name();
            if ["target", "pipeline.toml", "out", ".git"].contains(&name.to_str().unwrap()) {
                continue;
            }
            fs_err::os::unix::fs::symlink(e.path(), dir.path().join(&name)).unwrap();
        }
        let base = fs::read_to_string(repo().join("pipeline.toml")).unwrap();
        let cut = base.find("\n[sweep]").unwrap();
        let cfg = dir.path().join("pipeline.toml");
        fs::write(
            &cfg,
            format!(
                "{}\n[sweep]\ndelimiters = [\"\\n\", \" \", \"#\"]\nnum_fewshot = 3\nlm_eval_runs = [\"tests/fixtures/lm_eval/real/results\"]\n",
                &base[..cut]
            ),
        )
        .unwrap();
        let out_dir = dir.path().join("out");
        let out = run(&[
            "--config",
            cfg.to_str().unwrap(),
            "--out",
            out_dir.to_str().unwrap(),
            "--quiet",
            "run",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let csv = fs::read_to_string(out_dir.join("report/sweep_accuracy.csv")).unwrap();
        let mut rdr: Vec<Vec<String>> = Vec::new();
        // The delimiter column holds a quoted newline: parse the CSV with its quotes.
        let mut field = String::new();
        let (mut row, mut quoted) = (Vec::new(), false);
        for ch in csv.chars() {
            match ch {
                '"' => quoted = !quoted,
                ',' if !quoted => row.push(std::mem::take(&mut field)),
                '\n' if !quoted => {
                    row.push(std::mem::take(&mut field));
                    rdr.push(std::mem::take(&mut row));
                }
                c => field.push(c),
            }
        }
        assert_eq!(rdr[0][..2], ["source", "label"]);
        let (_, r) = results_json(&real());
        assert_eq!(rdr.len(), 7);
        for row in &rdr[1..] {
            assert_eq!(row[0], "tests/fixtures/lm_eval/real/results");
            assert_eq!(row[1], "recorded");
            assert_eq!(row[7], "12");
            let named = row[4] == "named";
            let task = r["configs"]
                .as_object()
                .unwrap()
                .iter()
                .find(|(_, c)| {
                    c["fewshot_delimiter"] == row[5].as_str()
                        && c["description"]
                            .as_str()
                            .is_some_and(|d| d.contains("separated by"))
                            == named
                })
                .unwrap()
                .0;
            let want = r["results"][task]["exact_match,first_number"]
                .as_f64()
                .unwrap()
                * 12.0;
            assert_eq!(row[8], format!("{want}"), "{task}");
        }
        let html = fs::read_to_string(out_dir.join("report/report.html")).unwrap();
        assert!(html.contains("<h2>Delimiter sweep</h2>"));
        assert!(html.contains("aria-label=\"delimiter sweep accuracy, tests/fixtures/lm_eval/real/results (recorded), SmolLM2-135M-Instruct.Q4_1 on addition\""));
    }

    /// A samples file whose counts disagree with the results file is a problem.
    #[test]
    fn counts_that_disagree_with_lm_eval_are_reported() {
        let (dir, cfg) = copy();
        let (rf, mut r) = results_json(dir.path());
        r["results"]["addq_alpha"]["exact_match,first_number"] = 0.5.into();
        fs::write(&rf, serde_json::to_string_pretty(&r).unwrap()).unwrap();
        let err = ingest_fails(&cfg);
        assert!(err.contains("task addq_alpha: exact_match,first_number is 0.5 in the results but the samples give 3/12"), "{err}");
    }
}

// ---- native dictionary sweep (protospread sweep dictionary, [sweep] dictionary_runs) ----

mod dictionary {
    use super::*;
    use protospread_core::{Config, SweepVariant};
    use protospread_sweep::{
        plan_dictionary, score_dictionary_reply, Delimiter, DictionaryRecord as Record,
        DictionaryRequest,
    };
    use protospread_testutils::{floats, ints, strs, table};
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpListener;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    const TEMPLATE: &str = "The question-answer examples are separated by {delimiter}.";

    fn delims(texts: &[&str]) -> Vec<Delimiter> {
        texts.iter().map(|t| Delimiter::new(t).unwrap()).collect()
    }

    #[test]
    fn generator_is_deterministic_and_the_same_for_every_delimiter() {
        let ds = delims(&["\n", ";"]);
        let v = [SweepVariant::Plain, SweepVariant::Named];
        let a = plan_dictionary("m", 11, 5, &ds, &v, TEMPLATE);
        let b = plan_dictionary("m", 11, 5, &ds, &v, TEMPLATE);
        let bodies = |p: &[DictionaryRequest]| p.iter().map(|x| x.body.clone()).collect::<Vec<_>>();
        assert_eq!(bodies(&a), bodies(&b));
        assert_eq!(a.len(), 5 * 2 * 2);
        // Every delimiter x variant of a document shows the same pairs and query.
        for chunk in a.chunks(4) {
            assert!(chunk.iter().all(|p| p.doc == chunk[0].doc));
            assert!(chunk.iter().all(|p| p.doc.hash() == chunk[0].doc.hash()));
        }
        assert_ne!(
            bodies(&plan_dictionary("m", 12, 5, &ds, &v, TEMPLATE)),
            bodies(&a)
        );
        // The binary's dry run prints the same first body on every run.
        let dry = || {
            run(&[
                "sweep",
                "dictionary",
                "--to",
                "/nonexistent/x.jsonl",
                "--base-url",
                "http://127.0.0.1:9/v1",
                "--model",
                "m",
                "--seed",
                "11",
                "--n-docs",
                "5",
                "--delimiters",
                "nl,semicolon",
                "--dry-run",
            ])
        };
        let (o1, o2) = (dry(), dry());
        assert!(
            o1.status.success(),
            "{}",
            String::from_utf8_lossy(&o1.stderr)
        );
        assert_eq!(o1.stdout, o2.stdout);
        let printed = String::from_utf8_lossy(&o1.stdout);
        assert_eq!(printed.lines().next(), Some("20 requests; first body:"));
        assert_eq!(printed.lines().nth(1), Some(a[0].body.as_str()));
    }

    #[test]
    fn exact_match_rule() {
        for (reply, expected, want) in [
            ("512", "512", true),
            ("\n 512 \n", "512", true),
            ("The value is 512.", "512", true),
            ("512;abcd: 300", "512", true),
            ("5120", "512", false),
            ("300, then 512", "512", false),
            ("51 2", "512", false),
            ("five hundred twelve", "512", false),
            ("", "512", false),
        ] {
            assert_eq!(score_dictionary_reply(reply, expected), want, "{reply:?}");
        }
    }

    /// Records for `plan` where the reply is right exactly when `right(doc, delimiter index,
    /// variant)`.
    fn records(
        plan: &[DictionaryRequest],
        ds: &[Delimiter],
        right: impl Fn(u32, usize, SweepVariant) -> bool,
    ) -> Vec<Record> {
        plan.iter()
            .map(|p| {
                let di = ds.iter().position(|d| *d == p.delimiter).unwrap();
                let reply = if right(p.doc.index, di, p.variant) {
                    format!("{} ", p.doc.expected())
                } else {
                    "no idea".to_string()
                };
                Record::new(
                    p,
                    "m",
                    3,
                    Some(reply),
                    None,
                    Some("stop".into()),
                    None,
                    Some(200),
                    1,
                    5,
                )
            })
            .collect()
    }

    fn write_records(path: &Path, rs: &[Record]) {
        let text: String = rs.iter().map(Record::to_line).collect();
        fs::write(path, text).unwrap();
    }

    fn config(dir: &Path, extra: &str) -> Config {
        let text = format!(
            "[study]\nname = \"t\"\n\n[sweep]\ndelimiters = [\"\\n\", \";\", \"#\"]\ndictionary_runs = [\"d.jsonl\"]\n{extra}"
        );
        Config::parse(&text, &dir.join("p.toml"), dir).unwrap()
    }

    /// 10 documents, delimiters "\n" and ";" of the configured three: plain "\n" gets docs
    /// 0..8 right (80%), plain ";" 0..4 (40%), named "\n" 0..8 (80%), named ";" 0..6 (60%).
    #[test]
    fn results_to_tables_known_answer() {
        let dir = tempfile::tempdir().unwrap();
        let ds = delims(&["\n", ";"]);
        let v = [SweepVariant::Plain, SweepVariant::Named];
        let plan = plan_dictionary("m", 3, 10, &ds, &v, TEMPLATE);
        let right = |doc: u32, di: usize, var: SweepVariant| {
            let k = match (di, var) {
                (0, _) => 8,
                (1, SweepVariant::Plain) => 4,
                _ => 6,
            };
            doc < k
        };
        write_records(&dir.path().join("d.jsonl"), &records(&plan, &ds, right));
        let t = protospread_sweep::tables(&config(dir.path(), "")).unwrap();
        let acc = table(&t, "sweep_accuracy");
        assert_eq!(strs(acc, "benchmark"), ["dictionary"; 4]);
        assert_eq!(strs(acc, "variant"), ["plain", "plain", "named", "named"]);
        assert_eq!(
            strs(acc, "delimiter_slug"),
            ["nl", "semicolon", "nl", "semicolon"]
        );
        assert_eq!(ints(acc, "n"), [10; 4]);
        assert_eq!(ints(acc, "correct"), [8, 4, 8, 6]);
        assert_eq!(floats(acc, "accuracy_pct"), [80.0, 40.0, 80.0, 60.0]);
        // Clopper-Pearson 95% for 8/10: 44.390454..97.478009 (R binom.test).
        let lo = floats(acc, "ci95_low_pct")[0];
        assert!((lo - 44.390454).abs() < 1e-5, "{lo}");
        assert_eq!(
            floats(table(&t, "sweep_spread"), "spread_pct"),
            [40.0, 20.0]
        );
        assert_eq!(
            floats(table(&t, "sweep_named_gain"), "gain_pct"),
            [0.0, 20.0]
        );
        assert_eq!(
            floats(table(&t, "sweep_named_gain_mean"), "mean_gain_pct"),
            [10.0]
        );
        assert_eq!(
            floats(table(&t, "sweep_delimiter_gain"), "gain_over_mean_pct"),
            [20.0, -20.0, 10.0, -10.0]
        );
    }

    /// The pipeline's path: fetch ingests the runs and stages their documents as
    /// `sweep_samples.parquet`; aggregate reads them back and computes the tables. Both must give
    /// exactly the tables of the in-memory `tables`, and aggregate without the staged file is
    /// refused with the file and what to run.
    #[test]
    fn staged_sweep_documents_give_the_same_tables() {
        let dir = tempfile::tempdir().unwrap();
        let ds = delims(&["\n", ";"]);
        let v = [SweepVariant::Plain, SweepVariant::Named];
        let plan = plan_dictionary("m", 3, 10, &ds, &v, TEMPLATE);
        write_records(
            &dir.path().join("d.jsonl"),
            &records(&plan, &ds, |doc, di, _| {
                !(doc + di as u32).is_multiple_of(3)
            }),
        );
        let cfg = config(dir.path(), "");
        let direct = protospread_sweep::tables(&cfg).unwrap();
        let spec = protospread_sweep::SweepSpec::from_section(&cfg.sweep).unwrap();
        let samples = protospread_sweep::ingest(&cfg, &spec).unwrap();
        let batch = protospread_sweep::samples_batch(&samples, dir.path()).unwrap();
        let run: &arrow::array::StringArray =
            arrow::array::AsArray::as_string(batch.column_by_name("run").unwrap());
        assert_eq!(
            run.value(0),
            "d.jsonl",
            "relative to the configuration's folder"
        );
        let file = dir.path().join("sweep_samples.parquet");
        protospread_core::write_parquet(
            &file,
            batch.schema(),
            &[batch],
            &protospread_core::FileMeta::default(),
        )
        .unwrap();
        let (_, read) = protospread_core::read_parquet(&file).unwrap();
        let back = protospread_sweep::samples_from_batches(&file, &read).unwrap();
        let staged = protospread_sweep::compute(&back, &spec).unwrap();
        assert_eq!(staged.len(), direct.len());
        for ((a, x), (b, y)) in staged.iter().zip(&direct) {
            assert_eq!((a, x), (b, y), "table {a}");
        }

        let out = dir.path().join("out");
        let e = protospread_aggregate::run_in(
            &out,
            &protospread_aggregate::Params::from_config(&cfg),
            &Default::default(),
            &Default::default(),
            &protospread_core::NoProgress,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("fetch/sweep_samples.parquet: missing") && e.contains("protospread fetch"),
            "{e}"
        );
    }

    #[test]
    fn bad_dictionary_runs_are_refused_with_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let ds = delims(&["\n", ";"]);
        let v = [SweepVariant::Plain, SweepVariant::Named];
        let plan = plan_dictionary("m", 3, 4, &ds, &v, TEMPLATE);
        let good = records(&plan, &ds, |d, _, _| d % 2 == 0);
        let path = dir.path().join("d.jsonl");
        let err = |rs: &[Record], extra: &str| {
            write_records(&path, rs);
            protospread_sweep::tables(&config(dir.path(), extra))
                .unwrap_err()
                .to_string()
        };
        // A tampered expected value.
        let mut rs = good.clone();
        rs[2].expected = "999".into();
        let e = err(&rs, "");
        assert!(
            e.contains("d.jsonl: line 3") && e.contains("generated document"),
            "{e}"
        );
        // An unanswered request.
        let mut rs = good.clone();
        rs[5].reply = None;
        rs[5].error = Some("timed out".into());
        let e = err(&rs, "");
        assert!(e.contains("line 6") && e.contains("no reply"), "{e}");
        // A stored score that the reply does not give.
        let mut rs = good.clone();
        rs[0].correct = Some(!rs[0].correct.unwrap());
        assert!(err(&rs, "").contains("line 1"));
        // A missing variant: drop every named ";" record.
        let rs: Vec<Record> = good
            .iter()
            .filter(|r| !(r.delimiter == ";" && r.variant == "named"))
            .cloned()
            .collect();
        let e = err(&rs, "");
        assert!(e.contains("variant named is missing"), "{e}");
        // A different naming template than the one recorded.
        let e = err(&good, "naming_template = \"Split by {delimiter}.\"\n");
        assert!(e.contains("stored prompt differs"), "{e}");
        // A declared checksum that does not match.
        let e = err(
            &good,
            &format!(
                "\n[[inputs]]\nname = \"d\"\nrole = \"other\"\npath = \"d.jsonl\"\nsha256 = \"{}\"\n",
                "0".repeat(64)
            ),
        );
        assert!(e.contains("differs from [[inputs]] d"), "{e}");
        // A truncated last line.
        write_records(&path, &good);
        let mut f = fs::OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"{\"format_version\":1").unwrap();
        drop(f);
        let e = protospread_sweep::tables(&config(dir.path(), ""))
            .unwrap_err()
            .to_string();
        assert!(e.contains("incomplete last line"), "{e}");
    }

    /// A loopback chat-completions server that answers every request with the value of the
    /// queried key (read from the prompt), counting requests.
    fn serve(count: Arc<AtomicUsize>) -> String {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let mut s = s.unwrap();
                let mut r = BufReader::new(s.try_clone().unwrap());
                let mut len = 0usize;
                loop {
                    let mut h = String::new();
                    r.read_line(&mut h).unwrap();
                    if h == "\r\n" || h.is_empty() {
                        break;
                    }
                    if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap();
                    }
                }
                let mut body = vec![0u8; len];
                r.read_exact(&mut body).unwrap();
                count.fetch_add(1, Ordering::SeqCst);
                let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
                let content = v["messages"][0]["content"].as_str().unwrap().to_string();
                let query = content
                    .rsplit(|c: char| !c.is_ascii_lowercase() && c != ':')
                    .next()
                    .unwrap();
                let key = query.trim_end_matches(':');
                let value = content
                    .split(&format!("{key}: ")[..])
                    .nth(1)
                    .map(|t| t[..3].to_string())
                    .unwrap_or_default();
                let resp = serde_json::json!({"choices": [{"index": 0, "finish_reason": "stop",
                    "message": {"role": "assistant", "content": value}}], "model": "m"})
                .to_string();
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{resp}",
                    resp.len()
                );
            }
        });
        format!("http://{addr}/v1")
    }

    fn without_elapsed(path: &Path) -> Vec<serde_json::Value> {
        fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| {
                let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
                v.as_object_mut().unwrap().remove("elapsed_ms");
                v
            })
            .collect()
    }

    #[test]
    fn records_every_reply_and_resumes_by_request_key() {
        let count = Arc::new(AtomicUsize::new(0));
        let base = serve(count.clone());
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("rec.jsonl");
        let go = || {
            run(&[
                "--json",
                "sweep",
                "dictionary",
                "--to",
                out.to_str().unwrap(),
                "--base-url",
                &base,
                "--model",
                "m",
                "--seed",
                "5",
                "--n-docs",
                "3",
                "--delimiters",
                "nl,comma",
                "--retries",
                "0",
            ])
        };
        let o = go();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(count.load(Ordering::SeqCst), 12);
        let first = without_elapsed(&out);
        assert_eq!(first.len(), 12);
        // The server answers the queried key's value: every reply scores correct.
        assert!(first.iter().all(|r| r["correct"] == true), "{first:?}");
        // Cut the file after 7 records plus half a line: the rerun sends the 5 missing ones.
        let text = fs::read_to_string(&out).unwrap();
        let keep: usize = text.lines().take(7).map(|l| l.len() + 1).sum();
        fs::write(&out, &text.as_bytes()[..keep + 40]).unwrap();
        let o = go();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let j = &j["sweep_dictionary"];
        assert_eq!(
            (j["already_answered"].as_u64(), j["sent"].as_u64()),
            (Some(7), Some(5))
        );
        assert_eq!(count.load(Ordering::SeqCst), 17);
        assert_eq!(without_elapsed(&out), first);
        // A third run sends nothing.
        let o = go();
        let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(j["sweep_dictionary"]["sent"].as_u64(), Some(0));
        assert_eq!(count.load(Ordering::SeqCst), 17);
        // Another model id into the same file is refused.
        let o = run(&[
            "sweep",
            "dictionary",
            "--to",
            out.to_str().unwrap(),
            "--base-url",
            &base,
            "--model",
            "other",
            "--seed",
            "5",
            "--n-docs",
            "3",
            "--delimiters",
            "nl,comma",
        ]);
        assert!(!o.status.success());
        assert!(String::from_utf8_lossy(&o.stderr).contains("different request body"));
    }
}
