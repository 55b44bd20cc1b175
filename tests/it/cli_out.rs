//! The global `--out` is the output folder, and the commands that write elsewhere name their
//! destination with their own argument: `simulate --dir`, `administer --to`, `sweep lm-eval
//! --task-dir`, `sweep dictionary --to`. Each argument is checked with a good value and a bad
//! one, and each old use of `--out` as such a destination is refused with an error naming the
//! argument to use instead. Nothing here sends a request (dry runs, or refusals before any).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn protospread(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_protospread"))
        .current_dir(cwd)
        .args(args)
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .env_remove("ALL_PROXY")
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `--config` of the repository, for the commands that read it.
fn config() -> String {
    repo().join("pipeline.toml").display().to_string()
}

/// The arguments of an `administer` dry run of the repository's study, one item.
fn administer_dry(extra: &[&str]) -> Vec<String> {
    let instrument = repo().join("data/instruments/ipip50.toml");
    let mut a: Vec<String> = [
        "--config",
        &config(),
        "administer",
        "--dry-run",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m/1",
        "--conditions",
        "S0",
        "--items",
        "1",
        "--instrument",
        instrument.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

fn run_owned(cwd: &Path, args: &[String]) -> Output {
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    protospread(cwd, &refs)
}

#[test]
fn administer_writes_to_its_record_file_or_under_the_output_folder() {
    let d = tempfile::tempdir().unwrap();
    // `--to FILE.jsonl`: that file.
    let o = run_owned(d.path(), &administer_dry(&["--to", "rec/m.jsonl"]));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("-> rec/m.jsonl"), "{}", stdout(&o));
    // Without it: administer/<model>.jsonl under the output folder `--out`.
    let mut a = vec!["--out".to_string(), "results".to_string()];
    a.extend(administer_dry(&[]));
    let o = run_owned(d.path(), &a);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("-> results/administer/m_1.jsonl"),
        "{}",
        stdout(&o)
    );
    // The old spelling, `--out FILE.jsonl`, is refused and names `--to`.
    let mut a = vec!["--out".to_string(), "rec.jsonl".to_string()];
    a.extend(administer_dry(&[]));
    let o = run_owned(d.path(), &a);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--out is the output folder") && stderr(&o).contains("--to FILE.jsonl"),
        "{}",
        stderr(&o)
    );
    assert!(!d.path().join("rec.jsonl").exists());
}

#[test]
fn administer_refuses_a_folder_as_record_file_before_sending() {
    let d = tempfile::tempdir().unwrap();
    fs_err::create_dir(d.path().join("folder.jsonl")).unwrap();
    // Not a dry run: the record file is opened before any request (none could be answered at
    // port 9 anyway).
    let mut a = administer_dry(&["--to", "folder.jsonl", "--retries", "0"]);
    a.retain(|s| s != "--dry-run");
    let o = run_owned(d.path(), &a);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--to folder.jsonl: not a regular file"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn administer_arm_takes_the_formats_spellings() {
    let d = tempfile::tempdir().unwrap();
    let o = run_owned(d.path(), &administer_dry(&["--arm", "local"]));
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run_owned(d.path(), &administer_dry(&["--arm", "web"]));
    assert_eq!(o.status.code(), Some(64), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("invalid value 'web' for '--arm <ARM>'")
            && e.contains("[possible values: api, cli, local]"),
        "{e}"
    );
}

#[test]
fn simulate_writes_into_its_dir_and_requires_it() {
    let d = tempfile::tempdir().unwrap();
    let key = repo().join("data/scoring_key.csv");
    let key = key.to_str().unwrap();
    let o = protospread(
        d.path(),
        &["simulate", "--seed", "3", "--key", key, "--dir", "sim"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(d.path().join("sim/simulated_answers.jsonl").is_file());
    assert!(d.path().join("sim/simulated_truth.json").is_file());
    // Without --dir (the old `--out DIR simulate`): a usage error naming --dir.
    let o = protospread(d.path(), &["--out", "old", "simulate", "--key", key]);
    assert_eq!(o.status.code(), Some(64), "{}", stderr(&o));
    assert!(stderr(&o).contains("--dir <DIR>"), "{}", stderr(&o));
    assert!(!d.path().join("old").exists());
    // A --dir that is a file: an error naming it.
    fs_err::write(d.path().join("file"), "x").unwrap();
    let o = protospread(d.path(), &["simulate", "--key", key, "--dir", "file"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("writing file"), "{}", stderr(&o));
}

/// A configuration with only `[sweep]`, and lm-eval's task folder with the ARC base task.
fn sweep_project() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    fs_err::write(d.path().join("pipeline.toml"), "[sweep]\n").unwrap();
    let arc = d.path().join("tasks/arc");
    fs_err::create_dir_all(&arc).unwrap();
    fs_err::write(arc.join("arc_challenge.yaml"), "task: arc_challenge\n").unwrap();
    d
}

#[test]
fn lm_eval_writes_into_its_task_dir_and_refuses_the_global_out() {
    let d = sweep_project();
    let lm = [
        "sweep",
        "lm-eval",
        "--task",
        "arc_challenge",
        "--lm-eval-tasks",
    ];
    let tasks = d.path().join("tasks");
    let with = |extra: &[&'static str]| {
        let mut a: Vec<&str> = extra.to_vec();
        a.extend(lm);
        a.push(tasks.to_str().unwrap());
        a
    };
    let mut a = with(&[]);
    a.extend(["--task-dir", "arc"]);
    let o = protospread(d.path(), &a);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(d.path().join("arc/README.md").is_file());
    // The same folder again: not empty, refused, named as --task-dir.
    let o = protospread(d.path(), &a);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--task-dir arc: folder is not empty"),
        "{}",
        stderr(&o)
    );
    // The old spelling, `--out DIR`, is refused and names --task-dir.
    let o = protospread(d.path(), &with(&["--out", "old"]));
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--out is the output folder of the stages")
            && stderr(&o).contains("--task-dir DIR"),
        "{}",
        stderr(&o)
    );
    assert!(!d.path().join("old").exists());
    // --task takes the benchmarks' lm-eval names only.
    let o = protospread(d.path(), &["sweep", "lm-eval", "--task", "hellaswag"]);
    assert_eq!(o.status.code(), Some(64), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("[possible values: mmlu, arc_challenge, commonsense_qa]"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn dictionary_records_to_its_file_and_checks_its_arguments() {
    let d = sweep_project();
    let base = [
        "sweep",
        "dictionary",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        "--dry-run",
    ];
    let args = |extra: &[&'static str]| {
        let mut a = base.to_vec();
        a.extend(extra);
        a
    };
    let o = protospread(d.path(), &args(&["--to", "d.jsonl", "--n-docs", "2"]));
    assert!(o.status.success(), "{}", stderr(&o));
    // --to is required: a usage error naming it.
    let o = protospread(d.path(), &args(&[]));
    assert_eq!(o.status.code(), Some(64), "{}", stderr(&o));
    assert!(stderr(&o).contains("--to <FILE.jsonl>"), "{}", stderr(&o));
    // The old spelling, `--out FILE.jsonl`, is refused and names --to.
    let mut old = vec!["--out", "d.jsonl"];
    old.extend(args(&["--to", "d.jsonl"]));
    let o = protospread(d.path(), &old);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("--to FILE.jsonl"), "{}", stderr(&o));
    // --n-docs 0 is refused by the parser.
    let o = protospread(d.path(), &args(&["--to", "d.jsonl", "--n-docs", "0"]));
    assert_eq!(o.status.code(), Some(64), "{}", stderr(&o));
    assert!(stderr(&o).contains("--n-docs"), "{}", stderr(&o));
    // A delimiter outside the sweep is named with the flag and the sweep's slugs.
    let o = protospread(
        d.path(),
        &args(&["--to", "d.jsonl", "--delimiters", "nl,zz"]),
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--delimiters: 'zz' is not the slug of a [sweep] delimiter"),
        "{}",
        stderr(&o)
    );
    let o = protospread(
        d.path(),
        &args(&["--to", "d.jsonl", "--delimiters", "nl,nl"]),
    );
    assert!(
        stderr(&o).contains("--delimiters: 'nl' given twice"),
        "{}",
        stderr(&o)
    );
    assert!(
        !d.path().join("d.jsonl").exists(),
        "a dry run writes nothing"
    );
}

#[test]
fn every_destination_argument_is_in_the_help() {
    let d = tempfile::tempdir().unwrap();
    let help = |args: &[&str]| {
        let o = protospread(d.path(), args);
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o)
    };
    let top = help(&["--help"]);
    assert!(
        top.contains("--out <DIR>") && top.contains("The output folder"),
        "{top}"
    );
    assert!(help(&["simulate", "--help"]).contains("--dir <DIR>"));
    assert!(help(&["administer", "--help"]).contains("--to <FILE.jsonl>"));
    assert!(help(&["sweep", "lm-eval", "--help"]).contains("--task-dir <DIR>"));
    assert!(help(&["sweep", "dictionary", "--help"]).contains("--to <FILE.jsonl>"));
}
