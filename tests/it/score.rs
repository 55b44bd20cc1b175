//! `protospread score` on the embedded human data: parity counts, outputs, the allow-list gate,
//! the mutation check and malformed keys.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A configuration in `dir` whose [score] section points at the given files.
fn config(dir: &Path, key: &Path, allowlist: &Path) -> PathBuf {
    let text = format!(
        "[study]\nname = \"t\"\n\n[score]\nkey = \"{}\"\nlegacy_keys = \"{}\"\nallowlist = \"{}\"\n",
        key.display(),
        root().join("data/scoring_key_legacy.csv").display(),
        allowlist.display()
    );
    let p = dir.join("pipeline.toml");
    fs_err::write(&p, text).unwrap();
    p
}

fn score(cfg: &Path, out: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_protospread"))
        .arg("--config")
        .arg(cfg)
        .arg("--out")
        .arg(out)
        .arg("score")
        .arg("--human-csv")
        .arg(root().join("data/jobcannon"))
        .args(extra)
        .output()
        .unwrap()
}

fn default_cfg(dir: &Path) -> PathBuf {
    config(
        dir,
        &root().join("data/scoring_key.csv"),
        &root().join("data/parity_allowlist.csv"),
    )
}

/// The files the score stage writes from the human data, each listed in its SHA256SUMS.
const PARITY_FILES: [&str; 6] = [
    "parity_summary.parquet",
    "parity_rows.parquet",
    "human_scores.parquet",
    "mutation_sweep.parquet",
    "norms.parquet",
    "norm_values.parquet",
];

#[test]
fn parity_counts_outputs_and_determinism() {
    let d = tempfile::tempdir().unwrap();
    let cfg = default_cfg(d.path());
    let out1 = d.path().join("out1");
    let o = score(&cfg, &out1, &[]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        text.contains("big_five: 880 rows, 755 reproduced exactly, 124 set aside, 1 unexplained"),
        "{text}"
    );
    assert!(
        text.contains("riasec: 1455 rows, 1226 reproduced exactly, 228 set aside, 1 unexplained"),
        "{text}"
    );
    assert!(
        text.contains("dark_triad: 155 rows, 155 reproduced exactly, 0 set aside, 0 unexplained"),
        "{text}"
    );
    assert!(
        text.contains(
            "multiple_intelligences: 498 rows, 498 reproduced exactly, 0 set aside, 0 unexplained"
        ),
        "{text}"
    );
    assert!(
        text.contains("168 items x 2 changes, 0 not caught"),
        "{text}"
    );
    for f in PARITY_FILES.iter().chain(&["SHA256SUMS"]) {
        assert!(out1.join("score").join(f).is_file(), "{f}");
    }
    let sums = fs_err::read_to_string(out1.join("score/SHA256SUMS")).unwrap();
    for f in PARITY_FILES {
        assert!(
            sums.lines().any(|l| l.ends_with(&format!("  {f}"))),
            "{f} not in {sums}"
        );
    }

    // Same inputs, same bytes.
    let out2 = d.path().join("out2");
    assert!(score(&cfg, &out2, &["--quiet"]).status.success());
    assert_eq!(
        sums,
        fs_err::read_to_string(out2.join("score/SHA256SUMS")).unwrap()
    );

    // --json carries the same counts (the parity object is the first line; the stored-answer
    // part of the stage may print its own object after it).
    let o = Command::new(env!("CARGO_BIN_EXE_protospread"))
        .args(["--json", "--config"])
        .arg(&cfg)
        .arg("--out")
        .arg(d.path().join("out3"))
        .args(["score", "--no-sweep", "--human-csv"])
        .arg(root().join("data/jobcannon"))
        .output()
        .unwrap();
    assert!(o.status.success());
    let first = String::from_utf8_lossy(&o.stdout)
        .lines()
        .next()
        .unwrap_or("")
        .to_string();
    let v: serde_json::Value = serde_json::from_str(&first).unwrap();
    let v = &v["score"];
    let bf = v["instruments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["instrument"] == "big_five")
        .unwrap();
    assert_eq!(bf["reproduced"], 755);
    assert_eq!(bf["unexplained"], 1);
    assert_eq!(v["unexplained_not_allowlisted"], 0);
}

#[test]
fn unexplained_row_outside_the_allowlist_fails() {
    let d = tempfile::tempdir().unwrap();
    let allow = d.path().join("allow.csv");
    // Keep only the Big Five entry: RIASEC row 140 is then unexplained and not reviewed.
    let full = fs_err::read_to_string(root().join("data/parity_allowlist.csv")).unwrap();
    let kept: Vec<&str> = full.lines().filter(|l| !l.starts_with("riasec,")).collect();
    fs_err::write(&allow, kept.join("\n") + "\n").unwrap();
    let cfg = config(d.path(), &root().join("data/scoring_key.csv"), &allow);
    let o = score(&cfg, &d.path().join("out"), &["--no-sweep"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("riasec row id 140"), "{err}");
    assert!(err.contains("nothing written"), "{err}");
    // A failed check writes nothing: no file appears (the staging folder may be left empty).
    let dir = d.path().join("out/score");
    assert!(!dir.exists() || fs_err::read_dir(&dir).unwrap().next().is_none());
}

/// Issue 10, item 5: a failed parity check leaves the previous score/ byte for byte.
#[test]
fn failed_parity_leaves_the_previous_output_intact() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    let good = default_cfg(d.path());
    let o = score(&good, &out, &["--no-sweep"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let snapshot = |dir: &Path| -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<_> = fs_err::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .map(|p| {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                (name, fs_err::read(&p).unwrap())
            })
            .collect();
        v.sort();
        v
    };
    let before = snapshot(&out.join("score"));
    assert!(before.iter().any(|(n, _)| n == "parity_rows.parquet"));
    // Big Five item 30's weight doubled: rows stop being reproduced, parity fails.
    // The edited key lives in a folder of its own: an --out inside an input's folder is refused.
    let key_dir = tempfile::tempdir().unwrap();
    let key = key_dir.path().join("key.csv");
    let text = fs_err::read_to_string(root().join("data/scoring_key.csv")).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("big_five,30,"))
        .unwrap();
    let mut cells: Vec<String> = line.split(',').map(str::to_string).collect();
    assert_eq!(cells[4], "1", "weight column of {line}");
    cells[4] = "2".into();
    fs_err::write(&key, text.replacen(line, &cells.join(","), 1)).unwrap();
    let bad_dir = d.path().join("bad");
    fs_err::create_dir(&bad_dir).unwrap();
    let bad = config(&bad_dir, &key, &root().join("data/parity_allowlist.csv"));
    let o = score(&bad, &out, &["--no-sweep"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(snapshot(&out.join("score")), before);
}

#[test]
fn a_wrong_key_breaks_parity_and_fails() {
    let d = tempfile::tempdir().unwrap();
    let key = d.path().join("key.csv");
    // Big Five item 1 (E) reversed: most Big Five rows are no longer reproduced.
    let text = fs_err::read_to_string(root().join("data/scoring_key.csv")).unwrap();
    fs_err::write(&key, text.replacen("big_five,1,E,0,", "big_five,1,E,1,", 1)).unwrap();
    let cfg = config(d.path(), &key, &root().join("data/parity_allowlist.csv"));
    let o = score(&cfg, &d.path().join("out"), &["--no-sweep"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    // Hundreds of rows fail: the first 20 are named, the rest counted in one line.
    let err = String::from_utf8_lossy(&o.stderr);
    let named = err.lines().filter(|l| l.contains(" row id ")).count();
    assert_eq!(named, 20, "{err}");
    let more = err
        .lines()
        .find_map(|l| l.strip_prefix("error: and "))
        .unwrap_or_else(|| panic!("no count of the other rows: {err}"));
    let (rest, total) = more
        .split_once(" more rows not reproduced, reason unknown (")
        .unwrap();
    let total: usize = total.split(' ').next().unwrap().parse().unwrap();
    assert_eq!(rest.parse::<usize>().unwrap() + 20, total, "{more}");
    assert!(total > 100, "{more}");
}

#[test]
fn malformed_keys_are_rejected_naming_file_line_and_column() {
    let d = tempfile::tempdir().unwrap();
    let text = fs_err::read_to_string(root().join("data/scoring_key.csv")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "short",
            lines[..lines.len() - 1].join("\n") + "\n",
            "167 rows",
        ),
        (
            "dim",
            text.replacen("dark_triad,1,narcissism,", "dark_triad,1,narcisism,", 1),
            "column dimension: unknown dimension `narcisism`",
        ),
        (
            "dup",
            text.replacen("riasec,2,S,", "riasec,1,S,", 1),
            "column item: duplicate item riasec 1",
        ),
        (
            "weight",
            text.replacen("big_five,7,A,0,1,", "big_five,7,A,0,abc,", 1),
            "line 8, column weight: `abc` is not a positive number",
        ),
    ];
    for (name, body, expect) in cases {
        let key = d.path().join(format!("{name}.csv"));
        fs_err::write(&key, body).unwrap();
        let cfg = config(d.path(), &key, &root().join("data/parity_allowlist.csv"));
        let o = score(&cfg, &d.path().join("out"), &[]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{name}: {err}");
        assert!(
            err.contains(expect) && err.contains(&format!("{name}.csv")),
            "{name}: {err}"
        );
        assert_eq!(
            err.trim().lines().count(),
            1,
            "{name}: one-line error: {err}"
        );
        assert!(
            !d.path().join("out/score").exists(),
            "{name}: nothing written"
        );
    }
}

#[test]
fn mutate_one_item_reports_broken_rows() {
    let d = tempfile::tempdir().unwrap();
    let cfg = default_cfg(d.path());
    let o = Command::new(env!("CARGO_BIN_EXE_protospread"))
        .args(["--json", "--config"])
        .arg(&cfg)
        .args(["score", "--mutate", "big_five:17", "--human-csv"])
        .arg(root().join("data/jobcannon"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let v = &v["mutate"];
    assert_eq!(v["dimension"], "A");
    assert_eq!(v["reproduced"], 755);
    assert!(v["weight_broken"].as_u64().unwrap() > 300, "{v}");
    assert!(v["reverse_broken"].as_u64().unwrap() > 300, "{v}");
    let bad = Command::new(env!("CARGO_BIN_EXE_protospread"))
        .arg("--config")
        .arg(&cfg)
        .args(["score", "--mutate", "big_five:51", "--human-csv"])
        .arg(root().join("data/jobcannon"))
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(1));
}

/// The normal path: the fetch stage's Parquet gives exactly the tables the CSVs give.
#[test]
fn fetched_parquet_and_csv_give_identical_tables() {
    let d = tempfile::tempdir().unwrap();
    let cfg = root().join("pipeline.toml");
    let out = d.path().join("out");
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_protospread"))
            .arg("--quiet")
            .arg("--config")
            .arg(&cfg)
            .arg("--out")
            .arg(&out)
            .args(args)
            .output()
            .unwrap()
    };
    let f = run(&["fetch"]);
    assert!(f.status.success(), "{}", String::from_utf8_lossy(&f.stderr));
    let s = run(&["score"]);
    assert!(s.status.success(), "{}", String::from_utf8_lossy(&s.stderr));
    let csv_out = d.path().join("csv");
    let c = score(&default_cfg(d.path()), &csv_out, &["--quiet"]);
    assert!(c.status.success());
    for f in [
        "human_scores.parquet",
        "parity_rows.parquet",
        "norm_values.parquet",
    ] {
        // Same rows and columns; the files' provenance metadata names each run's own
        // configuration, so their bytes differ by design.
        let (schema_a, a) = protospread_core::read_parquet(&out.join("score").join(f)).unwrap();
        let (schema_b, b) = protospread_core::read_parquet(&csv_out.join("score").join(f)).unwrap();
        assert_eq!(schema_a.fields(), schema_b.fields(), "{f}");
        assert_eq!(a, b, "{f}");
    }
}
