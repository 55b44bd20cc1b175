//! The report stage on the aggregate fixture: committed insta snapshots of every CSV table and
//! of report.md (tests/snapshots/), the generic renderer on a table of another stage, and the
//! self-containedness of report.html.
//!
//! A difference fails the test and writes nothing, in CI or not: `.config/insta.yaml` at the
//! workspace root sets `update: "no"`. Rewrite the snapshots on purpose with
//! `INSTA_UPDATE=always cargo test --release --workspace --test snapshot` and review the diff.

use protospread_core::ReportSection;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use protospread_testutils as fixture;

/// A score-stage-like table (the parity summary's contract shape).
fn write_parity(out: &Path) {
    use arrow::array::{ArrayRef, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    let schema = Arc::new(Schema::new(vec![
        Field::new("instrument", DataType::Utf8, false),
        Field::new("category", DataType::Utf8, false),
        Field::new("reason", DataType::Utf8, true),
        Field::new("rows", DataType::Int64, false),
    ]));
    let b = arrow::record_batch::RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(StringArray::from(vec!["big_five", "big_five"])) as ArrayRef,
            Arc::new(StringArray::from(vec!["reproduced", "set_aside"])),
            Arc::new(StringArray::from(vec![
                None,
                Some("duplicate of row 3, \"same\" | answers"),
            ])),
            Arc::new(Int64Array::from(vec![877, 3])),
        ],
    )
    .unwrap();
    protospread_core::write_parquet(
        &out.join("score/parity_summary.parquet"),
        schema,
        &[b],
        &protospread_core::FileMeta::default(),
    )
    .unwrap();
}

fn build() -> (tempfile::TempDir, protospread_report::Summary) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path();
    fixture::write(&out.join("score")).unwrap();
    write_parity(out);
    protospread_aggregate::run(
        &out.join("score"),
        &out.join("aggregate"),
        &Default::default(),
    )
    .unwrap();
    let section = ReportSection {
        tables: vec![PathBuf::from("score/parity_summary.parquet")],
        ..ReportSection::default()
    };
    let s = protospread_report::run(out, &section).unwrap();
    (dir, s)
}

#[test]
fn tables_match_committed_snapshots() {
    let (dir, s) = build();
    let report = dir.path().join("report");
    let mut names: Vec<String> = s
        .files
        .iter()
        .filter(|f| f.ends_with(".csv"))
        .cloned()
        .collect();
    names.push("report.md".to_string());
    assert!(names.len() >= 12, "{names:?}");
    let mut settings = insta::Settings::clone_current();
    settings.set_omit_expression(true);
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(|| {
        for n in &names {
            let text = fs_err::read_to_string(report.join(n)).unwrap();
            // One snapshot per file, named after it (`cells.csv` -> `cells_csv.snap`).
            insta::assert_snapshot!(n.replace('.', "_"), text);
        }
    });
    // Every table carries its source label.
    for n in names
        .iter()
        .filter(|n| n.ends_with(".csv") && *n != "parity_summary.csv")
    {
        let text = fs_err::read_to_string(report.join(n)).unwrap();
        let lines = text.lines().count();
        if lines > 1 {
            assert!(
                text.lines().next().unwrap().contains("label"),
                "{n} has no label column"
            );
            assert!(text.contains("fixture"), "{n} does not show the label");
        }
    }
}

#[test]
fn generic_rendering_and_manifest() {
    let (dir, _) = build();
    let report = dir.path().join("report");
    let csv = fs_err::read_to_string(report.join("parity_summary.csv")).unwrap();
    assert_eq!(
        csv,
        "instrument,category,reason,rows\nbig_five,reproduced,,877\nbig_five,set_aside,\"duplicate of row 3, \"\"same\"\" | answers\",3\n"
    );
    let md = fs_err::read_to_string(report.join("parity_summary.md")).unwrap();
    assert!(
        md.contains("| big_five | set_aside | duplicate of row 3, \"same\" \\| answers | 3 |"),
        "{md}"
    );
    let m = protospread_core::Manifest::read(&report.join("SHA256SUMS")).unwrap();
    assert!(m.entries.contains_key("report.html") && m.entries.contains_key("cells.csv"));
    let fresh = protospread_core::Manifest::from_dir(&report).unwrap();
    assert_eq!(m, fresh);
    // A listed table of another stage is copied too, byte for byte.
    assert!(m.entries.contains_key("parity_summary.parquet"));
    assert_eq!(
        fs_err::read(report.join("parity_summary.parquet")).unwrap(),
        fs_err::read(dir.path().join("score/parity_summary.parquet")).unwrap()
    );
}

#[test]
fn html_is_self_contained_with_figures() {
    let (dir, _) = build();
    let html = fs_err::read_to_string(dir.path().join("report/report.html")).unwrap();
    for banned in [
        "<script", "http://", "https://", "@import", "url(", "<link", "<img",
    ] {
        let hits: Vec<_> = html
            .match_indices(banned)
            .filter(|(i, _)| !html[..*i].ends_with("xmlns=\""))
            .collect();
        assert!(hits.is_empty(), "report.html contains {banned}");
    }
    assert_eq!(
        html.matches("<svg").count(),
        14,
        "scatter and range figure for each of two sources, an error-bar figure for each of their five scales"
    );
    assert_eq!(
        html.matches("aria-label=\"error bars per model, ").count(),
        10
    );
    assert!(html.contains("above y = x"));
    assert!(html.contains("recorded-fixture"));
}

#[test]
fn a_missing_listed_table_is_an_error_and_keeps_previous_outputs() {
    let (dir, _) = build();
    let before = fs_err::read(dir.path().join("report/cells.csv")).unwrap();
    let section = ReportSection {
        tables: vec![PathBuf::from("score/nope.parquet")],
        ..ReportSection::default()
    };
    let e = protospread_report::run(dir.path(), &section)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("score/nope.parquet") && e.contains("does not exist"),
        "{e}"
    );
    assert_eq!(
        fs_err::read(dir.path().join("report/cells.csv")).unwrap(),
        before
    );
}

/// The fixture with its second source labelled `recorded` (as a real-model source is), scale
/// scores under the strict and the lenient rule (lenient: one more complete SP administration
/// is not needed; the same scores) and its requests per rule counted from its answers, three
/// S0 replies of which only the lenient rule reads.
fn build_recorded() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path();
    let score = out.join("score");
    fixture::write(&score).unwrap();
    let (mut s, mut a) = fixture::rows();
    for r in s.iter_mut().filter(|r| r.source == "rx") {
        r.label = "recorded".into();
    }
    for r in a.iter_mut().filter(|r| r.source == "rx") {
        r.label = "recorded".into();
        // Three S0 replies the strict rule cannot read and the lenient one can.
        if r.condition == "S0" && r.test == "big_five" && r.item % 2 == 0 {
            r.status = protospread_score::Status::NotANumber;
        }
    }
    let sb = fixture::scores_batch(&s);
    let both = [
        fixture::by_rule_batch(&sb, "strict"),
        fixture::by_rule_batch(&sb, "lenient"),
    ];
    protospread_core::write_parquet(
        &score.join("scale_scores.parquet"),
        sb.schema(),
        std::slice::from_ref(&sb),
        &protospread_core::FileMeta::default(),
    )
    .unwrap();
    protospread_core::write_parquet(
        &score.join("scale_scores_by_rule.parquet"),
        both[0].schema(),
        &both,
        &protospread_core::FileMeta::default(),
    )
    .unwrap();
    let rb = fixture::reply_rules_batch(&a);
    protospread_core::write_parquet(
        &score.join("reply_rules.parquet"),
        rb.schema(),
        &[rb],
        &protospread_core::FileMeta::default(),
    )
    .unwrap();
    protospread_aggregate::run(&score, &out.join("aggregate"), &Default::default()).unwrap();
    let section = ReportSection {
        tables: vec![],
        ..ReportSection::default()
    };
    protospread_report::run(out, &section).unwrap();
    dir
}

#[test]
fn recorded_section_matches_committed_snapshot() {
    let dir = build_recorded();
    let md = fs_err::read_to_string(dir.path().join("report/report.md")).unwrap();
    let start = md
        .find("## Recorded study")
        .expect("report.md has the recorded-study section");
    let end = start + md[start..].find("\n## Verdict").unwrap();
    let mut settings = insta::Settings::clone_current();
    settings.set_omit_expression(true);
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(|| insta::assert_snapshot!("recorded_section_md", &md[start..end]));
    let html = fs_err::read_to_string(dir.path().join("report/report.html")).unwrap();
    assert!(html
        .contains("<h3>Under each reply rule: primary and secondary (single-item) analysis</h3>"));
    assert!(
        html.contains("<title>S0 strict rule: 7 of 10 readable</title>")
            && html.contains("<title>S0 lenient rule: 10 of 10 readable</title>"),
        "{html}"
    );
    // The simulated-like fixture source is not in the section.
    assert!(!md[start..end].contains("Source fx"));
}
