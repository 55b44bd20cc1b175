//! The aggregate stage on the synthetic fixture: every table's figures against an independent,
//! straightforward computation written here (from the fixture's in-memory rows, without
//! DataFusion and without the crate's `stats`), partition independence, and bad inputs.

use arrow::array::{Array, BooleanArray, Float64Array, Int32Array, Int64Array, StringArray};
use arrow::record_batch::RecordBatch;
use protospread_aggregate::Params;
use protospread_core::AggregateSection;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use fixture::{ParsedRow, ScaleRow};
use protospread_score::Status;
use protospread_testutils as fixture;

const PROTOCOL: &[&str] = &[
    "S0", "S0r", "SR", "SP", "B0", "B0r", "BS1", "BS2", "BS3", "BS4",
];

fn run_fixture(partitions: usize) -> (tempfile::TempDir, BTreeMap<String, RecordBatch>) {
    let (s, a) = fixture::rows();
    run_rows(partitions, &s, &a)
}

fn run_rows(
    partitions: usize,
    scores: &[ScaleRow],
    answers: &[ParsedRow],
) -> (tempfile::TempDir, BTreeMap<String, RecordBatch>) {
    run_configured(
        AggregateSection {
            target_partitions: partitions,
            ..AggregateSection::default()
        },
        scores,
        answers,
    )
}

fn run_configured(
    section: AggregateSection,
    scores: &[ScaleRow],
    answers: &[ParsedRow],
) -> (tempfile::TempDir, BTreeMap<String, RecordBatch>) {
    let dir = tempfile::tempdir().unwrap();
    let score = dir.path().join("score");
    fs_err::create_dir_all(&score).unwrap();
    write_many_row_groups(&score, scores, answers);
    let params = Params::from(section);
    protospread_aggregate::run(&score, &dir.path().join("aggregate"), &params).unwrap();
    let mut tables = BTreeMap::new();
    for e in fs_err::read_dir(dir.path().join("aggregate")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "parquet") {
            let (_, b) = protospread_core::read_parquet(&p).unwrap();
            assert_eq!(b.len(), 1);
            tables.insert(
                p.file_stem().unwrap().to_string_lossy().into_owned(),
                b[0].clone(),
            );
        }
    }
    (dir, tables)
}

/// The fixture written with small row groups, so DataFusion has many pieces to scan in
/// parallel.
fn write_many_row_groups(score: &Path, s: &[ScaleRow], a: &[ParsedRow]) {
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;
    for (name, batch) in [
        ("scale_scores.parquet", fixture::scores_batch(s)),
        ("norms.parquet", fixture::norms_batch()),
        ("reply_rules.parquet", fixture::reply_rules_batch(a)),
        (
            "scale_scores_by_rule.parquet",
            fixture::by_rule_batch(&fixture::scores_batch(s), "strict"),
        ),
    ] {
        let f = fs_err::File::create(score.join(name)).unwrap();
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(97))
            .build();
        let mut w = ArrowWriter::try_new(f, batch.schema(), Some(props)).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
    }
}

fn strs(b: &RecordBatch, n: &str) -> Vec<Option<String>> {
    let a = b.column_by_name(n).unwrap_or_else(|| panic!("column {n}"));
    let a = a.as_any().downcast_ref::<StringArray>().unwrap();
    (0..a.len())
        .map(|i| (!a.is_null(i)).then(|| a.value(i).to_string()))
        .collect()
}
fn s(b: &RecordBatch, n: &str) -> Vec<String> {
    strs(b, n)
        .into_iter()
        .map(|x| x.unwrap_or_default())
        .collect()
}
fn f(b: &RecordBatch, n: &str) -> Vec<Option<f64>> {
    let a = b.column_by_name(n).unwrap_or_else(|| panic!("column {n}"));
    let a = a.as_any().downcast_ref::<Float64Array>().unwrap();
    (0..a.len())
        .map(|i| (!a.is_null(i)).then(|| a.value(i)))
        .collect()
}
fn i(b: &RecordBatch, n: &str) -> Vec<Option<i64>> {
    let a = b.column_by_name(n).unwrap_or_else(|| panic!("column {n}"));
    let a = a.as_any().downcast_ref::<Int64Array>().unwrap();
    (0..a.len())
        .map(|k| (!a.is_null(k)).then(|| a.value(k)))
        .collect()
}
fn bo(b: &RecordBatch, n: &str) -> Vec<Option<bool>> {
    let a = b.column_by_name(n).unwrap_or_else(|| panic!("column {n}"));
    let a = a.as_any().downcast_ref::<BooleanArray>().unwrap();
    (0..a.len())
        .map(|k| (!a.is_null(k)).then(|| a.value(k)))
        .collect()
}

fn close(a: Option<f64>, b: Option<f64>, what: &str) {
    match (a, b) {
        (Some(x), Some(y)) if x.is_infinite() || y.is_infinite() => assert_eq!(x, y, "{what}"),
        (Some(x), Some(y)) => assert!((x - y).abs() < 1e-9, "{what}: {x} vs {y}"),
        (None, None) => {}
        _ => panic!("{what}: {a:?} vs {b:?}"),
    }
}

/// Sample SD in two passes over the z values (the crate works from integer moments instead).
fn sd_other(xs: &[f64]) -> f64 {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let ss: f64 = xs.iter().map(|x| (x - mean) * (x - mean)).sum();
    let sd = (ss / (n - 1.0)).sqrt();
    // Equal z values can leave a rounding residue; the exact SD is 0.
    if sd < 1e-12 {
        0.0
    } else {
        sd
    }
}

fn median_other(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut v: Vec<f64> = xs.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The expected cell, computed directly from the fixture rows.
#[derive(Debug)]
struct Expect {
    kept: bool,
    psd: f64,
    ssd: f64,
    range: f64,
    rerun_s0: f64,
    rerun_b0: f64,
    has_sampling: bool,
    shift: f64,
    arm: String,
    cohort: Option<String>,
    test: String,
}

type Key = (String, String, String, String);

fn expected_cells(rows: &[ScaleRow]) -> BTreeMap<Key, Expect> {
    let mut by: BTreeMap<Key, Vec<&ScaleRow>> = BTreeMap::new();
    let mut scales: BTreeMap<String, BTreeSet<(String, String)>> = BTreeMap::new();
    let mut models: BTreeMap<(String, String), (String, Option<String>)> = BTreeMap::new();
    for r in rows {
        by.entry((
            r.source.clone(),
            r.model.clone(),
            r.test.clone(),
            r.dimension.clone(),
        ))
        .or_default()
        .push(r);
        scales
            .entry(r.source.clone())
            .or_default()
            .insert((r.test.clone(), r.dimension.clone()));
        models.insert(
            (r.source.clone(), r.model.clone()),
            (r.arm.clone(), r.cohort.clone()),
        );
    }
    let mut out = BTreeMap::new();
    for ((src, model), (arm, cohort)) in &models {
        for (test, dim) in &scales[src] {
            let key = (src.clone(), model.clone(), test.clone(), dim.clone());
            let rs = by.get(&key).cloned().unwrap_or_default();
            let z = |c: &str| {
                rs.iter()
                    .find(|r| r.condition == c && r.complete)
                    .and_then(|r| r.z)
            };
            let pz: Vec<f64> = PROTOCOL.iter().filter_map(|c| z(c)).collect();
            let sz: Vec<f64> = rs
                .iter()
                .filter(|r| r.condition == "ST1" && r.complete)
                .filter_map(|r| r.z)
                .collect();
            let no_st1 = arm == "cli" && !rs.iter().any(|r| r.condition == "ST1");
            let kept = pz.len() == 10 && (sz.len() == 3 || no_st1);
            let mean = |cs: &[&str]| cs.iter().filter_map(|c| z(c)).sum::<f64>() / cs.len() as f64;
            let shift =
                mean(&["B0", "B0r", "BS1", "BS2", "BS3", "BS4"]) - mean(&["S0", "S0r", "SR", "SP"]);
            // The range from the integer scores: a range of exactly one human SD must count as
            // ">= 1", which a difference of two rounded z values can miss by an ulp.
            let (lo, hi) = PROTOCOL
                .iter()
                .filter_map(|c| {
                    rs.iter()
                        .find(|r| r.condition == *c && r.complete)
                        .and_then(|r| r.score)
                })
                .fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(x), b.max(x)));
            let human_sd = fixture::norm(test, dim).1;
            out.insert(
                key,
                Expect {
                    kept,
                    psd: if kept { sd_other(&pz) } else { 0.0 },
                    ssd: if kept && !no_st1 { sd_other(&sz) } else { 0.0 },
                    has_sampling: !no_st1,
                    shift,
                    range: (hi - lo) / human_sd,
                    rerun_s0: z("S0")
                        .zip(z("S0r"))
                        .map(|(a, b)| (a - b).abs())
                        .unwrap_or(0.0),
                    rerun_b0: z("B0")
                        .zip(z("B0r"))
                        .map(|(a, b)| (a - b).abs())
                        .unwrap_or(0.0),
                    arm: arm.clone(),
                    cohort: cohort.clone(),
                    test: test.clone(),
                },
            );
        }
    }
    out
}

#[test]
fn one_and_many_partitions_give_identical_bytes() {
    let (d1, _) = run_fixture(1);
    let (d8, _) = run_fixture(8);
    let (d3, _) = run_fixture(3);
    let files = |d: &Path| {
        let mut v: Vec<_> = fs_err::read_dir(d.join("aggregate"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        v.sort();
        v
    };
    let names = files(d1.path());
    assert!(names.len() >= 10, "{names:?}");
    assert_eq!(names, files(d8.path()));
    for n in &names {
        let a = fs_err::read(d1.path().join("aggregate").join(n)).unwrap();
        assert_eq!(
            a,
            fs_err::read(d8.path().join("aggregate").join(n)).unwrap(),
            "{n:?} differs between 1 and 8 partitions"
        );
        assert_eq!(
            a,
            fs_err::read(d3.path().join("aggregate").join(n)).unwrap(),
            "{n:?} differs between 1 and 3 partitions"
        );
    }
}

/// Names from the configuration and the data are values in the plans, not SQL: with the
/// condition `SP` and the arm `cli` renamed to names holding quotes, a backslash and SQL (in
/// the data and in every list of `[aggregate]` that names them), every table is the one of
/// the plain names, with the new names in place of the old (the new names sort where the old
/// ones do, so rows keep their order).
#[test]
fn names_holding_quotes_backslashes_and_sql_are_values() {
    const COND: &str = "SP' OR '1'='1\\";
    const ARM: &str = "cli') OR TRUE; --\\";
    let cond = |c: &str| if c == "SP" { COND } else { c }.to_string();
    let arm = |a: &str| if a == "cli" { ARM } else { a }.to_string();
    let (scores, answers) = fixture::rows();
    let mut renamed = scores.clone();
    for r in &mut renamed {
        (r.condition, r.arm) = (cond(&r.condition), arm(&r.arm));
    }
    let mut renamed_answers = answers.clone();
    for r in &mut renamed_answers {
        (r.condition, r.arm) = (cond(&r.condition), arm(&r.arm));
    }
    let plain = AggregateSection {
        target_partitions: 2,
        ..AggregateSection::default()
    };
    let conds = |v: &[String]| v.iter().map(|c| cond(c)).collect::<Vec<_>>();
    let named = AggregateSection {
        protocol_conditions: conds(&plain.protocol_conditions),
        secondary_protocol_conditions: conds(&plain.secondary_protocol_conditions),
        shift_from: conds(&plain.shift_from),
        shift_to: conds(&plain.shift_to),
        separate_arms: plain.separate_arms.iter().map(|a| arm(a)).collect(),
        ..plain.clone()
    };
    assert!(named.protocol_conditions.iter().any(|c| c == COND));
    let (_d1, want) = run_configured(plain, &scores, &answers);
    let (_d2, got) = run_configured(named, &renamed, &renamed_answers);
    assert_eq!(
        want.keys().collect::<Vec<_>>(),
        got.keys().collect::<Vec<_>>()
    );
    // Each text with the old names put back.
    let back = |b: &RecordBatch| {
        let cols: Vec<arrow::array::ArrayRef> = b
            .columns()
            .iter()
            .map(|c| match c.as_any().downcast_ref::<StringArray>() {
                Some(t) => Arc::new(
                    t.iter()
                        .map(|v| v.map(|v| v.replace(COND, "SP").replace(ARM, "cli")))
                        .collect::<StringArray>(),
                ) as arrow::array::ArrayRef,
                None => c.clone(),
            })
            .collect();
        RecordBatch::try_new(b.schema(), cols).unwrap()
    };
    for (name, table) in &got {
        assert_eq!(back(table), want[name], "table {name}");
    }
    // The new names are in the tables, as themselves.
    assert!(
        s(&got["dropped_cells"], "reason").contains(&format!("incomplete administrations: {COND}")),
        "{:?}",
        s(&got["dropped_cells"], "reason")
    );
    assert_eq!(s(&got["separate_arms"], "arm"), vec![ARM]);
    assert!(s(&got["protocol_vs_sampling"], "group").contains(&format!("arm={ARM}")));
    assert!(s(&got["requests"], "condition").iter().any(|c| c == COND));
}

#[test]
fn cells_match_an_independent_computation() {
    let (scores, _) = fixture::rows();
    let exp = expected_cells(&scores);
    let (_d, t) = run_fixture(4);
    let c = &t["cells"];
    let (src, model, test, dim) = (
        s(c, "source"),
        s(c, "model"),
        s(c, "test"),
        s(c, "dimension"),
    );
    let (kept, psd, ssd, ratio, range) = (
        bo(c, "kept"),
        f(c, "protocol_sd"),
        f(c, "sampling_sd"),
        f(c, "ratio"),
        f(c, "range_z"),
    );
    let (r0, rb, reason, label) = (
        f(c, "rerun_S0_S0r_z"),
        f(c, "rerun_B0_B0r_z"),
        strs(c, "drop_reason"),
        s(c, "label"),
    );
    assert_eq!(c.num_rows(), exp.len());
    let (mut seen_inf, mut expect_inf) = (0, 0);
    for k in 0..c.num_rows() {
        let key = (
            src[k].clone(),
            model[k].clone(),
            test[k].clone(),
            dim[k].clone(),
        );
        let e = &exp[&key];
        assert_eq!(kept[k], Some(e.kept), "{key:?}");
        assert_eq!(
            label[k],
            if src[k] == "fx" {
                "fixture"
            } else {
                "recorded-fixture"
            }
        );
        if !e.kept {
            assert!(reason[k].is_some(), "{key:?}");
            continue;
        }
        close(psd[k], Some(e.psd), &format!("protocol sd {key:?}"));
        close(f(c, "shift_z")[k], Some(e.shift), &format!("shift {key:?}"));
        if !e.has_sampling {
            assert_eq!(
                (ssd[k], ratio[k], bo(c, "protocol_gt_sampling")[k]),
                (None, None, None),
                "{key:?}"
            );
            close(range[k], Some(e.range), &format!("range {key:?}"));
            continue;
        }
        close(ssd[k], Some(e.ssd), &format!("sampling sd {key:?}"));
        let er = if e.ssd > 1e-12 {
            Some(e.psd / e.ssd)
        } else {
            Some(f64::INFINITY)
        };
        close(ratio[k], er, &format!("ratio {key:?}"));
        seen_inf += (ratio[k] == Some(f64::INFINITY)) as usize;
        expect_inf += (er == Some(f64::INFINITY)) as usize;
        close(range[k], Some(e.range), &format!("range {key:?}"));
        close(r0[k], Some(e.rerun_s0), &format!("rerun S0 {key:?}"));
        close(rb[k], Some(e.rerun_b0), &format!("rerun B0 {key:?}"));
    }
    assert_eq!(seen_inf, expect_inf);
    assert!(seen_inf >= 1, "the planted zero-sampling-SD cell");
    // The planted drops, with their reasons.
    let d = &t["dropped_cells"];
    let got: Vec<(String, String, String, String)> = (0..d.num_rows())
        .map(|k| {
            (
                s(d, "model")[k].clone(),
                s(d, "test")[k].clone(),
                s(d, "dimension")[k].clone(),
                s(d, "reason")[k].clone(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "api-c".into(),
                "big_five".into(),
                "Neuroticism".into(),
                "incomplete administrations: SP".into()
            ),
            (
                "api-d".into(),
                "riasec".into(),
                "Realistic".into(),
                "incomplete administrations: B0r".into()
            ),
            (
                "api-e".into(),
                "riasec".into(),
                "Realistic".into(),
                "test not administered (no scale scores)".into()
            ),
            (
                "api-e".into(),
                "riasec".into(),
                "Social".into(),
                "test not administered (no scale scores)".into()
            ),
        ]
    );
}

fn group_of(e: &Expect, group: &str) -> bool {
    let mut parts = group.split(' ');
    let arm = parts.next().unwrap().strip_prefix("arm=").unwrap();
    let cohort = parts.next().map(|c| c.strip_prefix("cohort=").unwrap());
    e.arm == arm && cohort.is_none_or(|c| e.cohort.as_deref() == Some(c))
}

#[test]
fn group_tables_match_an_independent_computation() {
    let (scores, _) = fixture::rows();
    let exp = expected_cells(&scores);
    let (_d, t) = run_fixture(2);
    let p = &t["protocol_vs_sampling"];
    let groups = s(p, "group");
    let sources = s(p, "source");
    assert_eq!(
        groups,
        vec![
            "arm=api",
            "arm=api cohort=full",
            "arm=api cohort=pilot",
            "arm=cli",
            "arm=local"
        ]
    );
    for k in 0..p.num_rows() {
        let cells: Vec<&Expect> = exp
            .iter()
            .filter(|(key, e)| key.0 == sources[k] && e.kept && group_of(e, &groups[k]))
            .map(|(_, e)| e)
            .collect();
        assert_eq!(i(p, "cells")[k], Some(cells.len() as i64), "{}", groups[k]);
        let cells: Vec<&Expect> = cells.into_iter().filter(|e| e.has_sampling).collect();
        let exceed = cells.iter().filter(|e| e.psd > e.ssd).count() as i64;
        assert_eq!(
            i(p, "compared_cells")[k],
            Some(cells.len() as i64),
            "{}",
            groups[k]
        );
        assert_eq!(
            i(p, "protocol_gt_sampling")[k],
            Some(exceed),
            "{}",
            groups[k]
        );
        close(
            f(p, "share")[k],
            Some(exceed as f64 / cells.len() as f64),
            "share",
        );
        let ratios: Vec<f64> = cells
            .iter()
            .map(|e| {
                if e.ssd > 1e-12 {
                    e.psd / e.ssd
                } else {
                    f64::INFINITY
                }
            })
            .collect();
        close(
            f(p, "median_ratio")[k],
            median_other(&ratios),
            &format!("median ratio {}", groups[k]),
        );
    }
    let r = &t["range"];
    for k in 0..r.num_rows() {
        let g = &s(r, "group")[k];
        let rs: Vec<f64> = exp
            .iter()
            .filter(|(key, e)| key.0 == s(r, "source")[k] && e.kept && group_of(e, g))
            .map(|(_, e)| e.range)
            .collect();
        close(f(r, "median_range_z")[k], median_other(&rs), "median range");
        close(
            f(r, "min_range_z")[k],
            rs.iter().copied().reduce(f64::min),
            "min range",
        );
        close(
            f(r, "max_range_z")[k],
            rs.iter().copied().reduce(f64::max),
            "max range",
        );
        assert_eq!(
            i(r, "cells_range_ge_1")[k],
            Some(rs.iter().filter(|x| **x >= 1.0).count() as i64)
        );
        assert_eq!(
            i(r, "cells_range_ge_2")[k],
            Some(rs.iter().filter(|x| **x >= 2.0).count() as i64)
        );
    }
    let b = &t["by_test"];
    assert!(b.num_rows() >= 8);
    for k in 0..b.num_rows() {
        let (g, test) = (&s(b, "group")[k], &s(b, "test")[k]);
        let cells: Vec<&Expect> = exp
            .iter()
            .filter(|(key, e)| {
                key.0 == s(b, "source")[k] && e.kept && group_of(e, g) && &e.test == test
            })
            .map(|(_, e)| e)
            .collect();
        assert_eq!(i(b, "cells")[k], Some(cells.len() as i64));
        assert_eq!(
            i(b, "protocol_gt_sampling")[k],
            Some(
                cells
                    .iter()
                    .filter(|e| e.has_sampling && e.psd > e.ssd)
                    .count() as i64
            )
        );
        close(
            f(b, "median_range_z")[k],
            median_other(&cells.iter().map(|e| e.range).collect::<Vec<_>>()),
            "by test range",
        );
    }
    let rr = &t["reruns"];
    for k in 0..rr.num_rows() {
        let g = &s(rr, "group")[k];
        let cells: Vec<&Expect> = exp
            .iter()
            .filter(|(key, e)| key.0 == s(rr, "source")[k] && e.kept && group_of(e, g))
            .map(|(_, e)| e)
            .collect();
        let d: Vec<f64> = cells
            .iter()
            .map(|e| {
                if s(rr, "pair")[k] == "S0 vs S0r" {
                    e.rerun_s0
                } else {
                    e.rerun_b0
                }
            })
            .collect();
        close(f(rr, "median_diff_z")[k], median_other(&d), "rerun median");
        close(
            f(rr, "max_diff_z")[k],
            d.iter().copied().reduce(f64::max),
            "rerun max",
        );
        assert_eq!(
            i(rr, "cells_identical")[k],
            Some(d.iter().filter(|x| **x == 0.0).count() as i64)
        );
    }
    let sa = &t["separate_arms"];
    assert_eq!(s(sa, "arm"), vec!["cli"]);
    assert_eq!(
        s(sa, "reference_arm"),
        vec!["api"],
        "fx: two arms, the global headline arm"
    );
    let cli: Vec<(&Key, &Expect)> = exp
        .iter()
        .filter(|(_, e)| e.kept && e.arm == "cli")
        .collect();
    assert_eq!(i(sa, "cells")[0], Some(cli.len() as i64));
    assert_eq!(
        i(sa, "compared_cells")[0],
        Some(cli.iter().filter(|(_, e)| e.has_sampling).count() as i64)
    );
    // Same direction: the sign of the cli cell's shift equals the sign of the median shift of
    // the api cells of the same scale.
    let mut same = 0;
    let mut counted = 0;
    for (key, e) in &cli {
        let api: Vec<f64> = exp
            .iter()
            .filter(|(k, a)| {
                k.0 == key.0 && k.2 == key.2 && k.3 == key.3 && a.kept && a.arm == "api"
            })
            .map(|(_, a)| a.shift)
            .collect();
        let r = median_other(&api).unwrap();
        counted += 1;
        same += ((r > 0.0) == (e.shift > 0.0)) as i64;
    }
    assert_eq!(i(sa, "direction_cells")[0], Some(counted));
    assert_eq!(i(sa, "same_direction")[0], Some(same));
    let cli: Vec<&Expect> = cli.into_iter().map(|(_, e)| e).collect();
    close(
        f(sa, "median_range_z")[0],
        median_other(&cli.iter().map(|e| e.range).collect::<Vec<_>>()),
        "cli range",
    );
}

/// Requests, unreadable requests and unreadable items of one (source, model, condition).
/// Requests, unreadable replies, unreadable items and failed requests of a model and condition.
type ReqCounts = (BTreeSet<String>, BTreeSet<String>, i64, BTreeSet<String>);

#[test]
fn request_tables_match_an_independent_computation() {
    let (scores, answers) = fixture::rows();
    let (_d, t) = run_fixture(2);
    let q = &t["requests"];
    // requests: single mode one per item row; whole mode one per (sample, test).
    let mut exp: BTreeMap<(String, String, String), ReqCounts> = BTreeMap::new();
    for a in &answers {
        let e = exp
            .entry((a.source.clone(), a.model.clone(), a.condition.clone()))
            .or_default();
        let req = if a.mode == "whole" {
            format!("{}/{}", a.sample, a.test)
        } else {
            format!("{}/{}/{}", a.sample, a.test, a.item)
        };
        e.0.insert(req.clone());
        if a.status == Status::RequestFailed {
            e.3.insert(req);
        } else if a.status != Status::Ok {
            e.1.insert(req);
            e.2 += 1;
        }
    }
    let failed: usize = exp.values().map(|e| e.3.len()).sum();
    assert_eq!(failed, 2, "the fixture's failed requests");
    assert_eq!(q.num_rows(), exp.len());
    for k in 0..q.num_rows() {
        let key = (
            s(q, "source")[k].clone(),
            s(q, "model")[k].clone(),
            s(q, "condition")[k].clone(),
        );
        let e = &exp[&key];
        assert_eq!(i(q, "requests")[k], Some(e.0.len() as i64), "{key:?}");
        assert_eq!(
            i(q, "unreadable_replies")[k],
            Some(e.1.len() as i64),
            "{key:?}"
        );
        assert_eq!(i(q, "unreadable_items")[k], Some(e.2), "{key:?}");
        assert_eq!(
            i(q, "failed_requests")[k],
            Some(e.3.len() as i64),
            "{key:?}"
        );
    }
    let sp = (0..q.num_rows())
        .find(|k| s(q, "model")[*k] == "api-c" && s(q, "condition")[*k] == "SP")
        .unwrap();
    assert_eq!(
        i(q, "unreadable_replies")[sp],
        Some(2 + 1),
        "6 big-five items -> 2, 4 riasec items -> 1"
    );
    let b0r = (0..q.num_rows())
        .find(|k| s(q, "model")[*k] == "api-d" && s(q, "condition")[*k] == "B0r")
        .unwrap();
    assert_eq!(i(q, "requests")[b0r], Some(2));
    assert_eq!(i(q, "unreadable_replies")[b0r], Some(1));
    let c = &t["constant_runs"];
    let want: BTreeSet<(String, String, String)> = scores
        .iter()
        .filter(|r| r.constant_answers)
        .map(|r| (r.model.clone(), r.condition.clone(), r.test.clone()))
        .collect();
    let got: BTreeSet<(String, String, String)> = (0..c.num_rows())
        .map(|k| {
            (
                s(c, "model")[k].clone(),
                s(c, "condition")[k].clone(),
                s(c, "test")[k].clone(),
            )
        })
        .collect();
    assert_eq!(got, want);
    assert_eq!(got.len(), 1);
    let v = &t["verdict"];
    let crit = s(v, "criterion");
    let fx: Vec<usize> = (0..v.num_rows())
        .filter(|k| s(v, "source")[*k] == "fx")
        .collect();
    assert_eq!(
        fx.iter().map(|k| crit[*k].as_str()).collect::<Vec<_>>(),
        vec![
            "share_protocol_gt_sampling",
            "median_ratio",
            "unreadable_replies_few",
            "constant_runs_few",
            "verdict"
        ]
    );
    let api_requests: i64 = exp
        .iter()
        .filter(|(k, _)| k.0 == "fx" && k.1.starts_with("api"))
        .map(|(_, e)| e.0.len() as i64)
        .sum();
    let api_unread: i64 = exp
        .iter()
        .filter(|(k, _)| k.0 == "fx" && k.1.starts_with("api"))
        .map(|(_, e)| e.1.len() as i64)
        .sum();
    close(
        f(v, "value")[fx[2]],
        Some(api_unread as f64 / api_requests as f64),
        "unreadable share",
    );
    assert_eq!(
        bo(v, "passed")[fx[2]],
        Some((api_unread as f64 / api_requests as f64) < 0.05)
    );
    let share = f(v, "value")[fx[0]].unwrap();
    let ratio = f(v, "value")[fx[1]].unwrap();
    assert_eq!(bo(v, "passed")[fx[4]], Some(share >= 0.8 && ratio >= 2.0));
}

/// The verdict's share of cells with protocol SD > sampling SD and median ratio over the kept
/// cells of `arm` in `source`, from the independent cell computation.
fn expected_verdict(
    exp: &BTreeMap<Key, Expect>,
    source: &str,
    arm: &str,
) -> (Option<f64>, Option<f64>) {
    let compared: Vec<&Expect> = exp
        .iter()
        .filter(|(k, e)| k.0 == source && e.kept && e.arm == arm && e.has_sampling)
        .map(|(_, e)| e)
        .collect();
    let exceeding = compared.iter().filter(|e| e.psd > e.ssd).count();
    let ratios: Vec<f64> = compared
        .iter()
        .filter(|e| e.psd > 0.0 || e.ssd > 0.0)
        .map(|e| {
            if e.ssd == 0.0 {
                f64::INFINITY
            } else {
                e.psd / e.ssd
            }
        })
        .collect();
    let share = (!compared.is_empty()).then(|| exceeding as f64 / compared.len() as f64);
    (share, median_other(&ratios))
}

/// Rows of `source` in the verdict table, in criterion order.
fn verdict_rows(v: &RecordBatch, source: &str) -> Vec<usize> {
    (0..v.num_rows())
        .filter(|k| s(v, "source")[*k] == source)
        .collect()
}

/// Each verdict row is over `arm`, says so in its statement, and has the share and median
/// ratio of that arm's cells.
fn check_verdict_arm(v: &RecordBatch, exp: &BTreeMap<Key, Expect>, source: &str, arm: &str) {
    let r = verdict_rows(v, source);
    assert_eq!(r.len(), 5, "{source}");
    for k in &r {
        assert_eq!(s(v, "arm")[*k], arm, "{source}");
        let st = &s(v, "statement")[*k];
        assert!(st.contains(&format!("arm={arm}")), "{source}: {st}");
    }
    let (share, ratio) = expected_verdict(exp, source, arm);
    assert!(
        share.is_some() && ratio.is_some(),
        "{source} {arm}: cells to compare"
    );
    close(f(v, "value")[r[0]], share, "verdict share");
    close(f(v, "value")[r[1]], ratio, "verdict median ratio");
    assert_eq!(
        bo(v, "passed")[r[4]],
        Some(share.unwrap() >= 0.8 && ratio.unwrap() >= 2.0),
        "{source} {arm}"
    );
}

/// A source with one arm gets its verdict over that arm; a source with several arms over the
/// global `headline_arm`.
#[test]
fn verdict_is_over_each_sources_own_arm() {
    let (scores, answers) = fixture::rows();
    let exp = expected_cells(&scores);
    let (_d, t) = run_fixture(3);
    let v = &t["verdict"];
    check_verdict_arm(v, &exp, "fx", "api");
    check_verdict_arm(v, &exp, "rx", "local");
    // The recorded fixture's requests and administrations are all of arm local.
    let requests: BTreeSet<String> = answers
        .iter()
        .filter(|a| a.source == "rx")
        .map(|a| {
            if a.mode == "whole" {
                format!("{}/{}/{}/{}", a.model, a.condition, a.sample, a.test)
            } else {
                format!(
                    "{}/{}/{}/{}/{}",
                    a.model, a.condition, a.sample, a.test, a.item
                )
            }
        })
        .collect();
    let admins: BTreeSet<String> = scores
        .iter()
        .filter(|r| r.source == "rx")
        .map(|r| format!("{}/{}/{}/{}", r.model, r.condition, r.sample, r.test))
        .collect();
    assert!(!requests.is_empty() && !admins.is_empty());
    let r = verdict_rows(v, "rx");
    let st = s(v, "statement");
    assert!(
        st[r[2]].ends_with(&format!(
            " of {} arm=local requests gave an unreadable reply: below the threshold counts as few",
            requests.len()
        )),
        "{}",
        st[r[2]]
    );
    assert!(
        st[r[3]].ends_with(&format!(
            " of {} arm=local administrations gave constant answers: below the threshold counts as few",
            admins.len()
        )),
        "{}",
        st[r[3]]
    );
}

/// An input's `headline_arm` overrides both rules; an arm the source does not have is refused,
/// naming the input and the arm.
#[test]
fn an_inputs_headline_arm_chooses_the_arm_and_must_be_one_it_has() {
    let (scores, answers) = fixture::rows();
    let exp = expected_cells(&scores);
    let dir = tempfile::tempdir().unwrap();
    fixture::write_rows(dir.path(), &scores, &answers).unwrap();
    let with = |input: &str, arm: &str| Params {
        input_arms: [(input.to_string(), arm.to_string())].into(),
        ..Params::default()
    };
    let tables = protospread_aggregate::compute_tables(dir.path(), &with("fx", "cli")).unwrap();
    let get = |n: &str| &tables.iter().find(|t| t.name == n).unwrap().batch;
    check_verdict_arm(get("verdict"), &exp, "fx", "cli");
    check_verdict_arm(get("verdict"), &exp, "rx", "local");
    assert_eq!(s(get("separate_arms"), "reference_arm"), vec!["cli"]);
    for (input, arm, arms) in [
        ("rx", "api", "its arms: local)"),
        ("fx", "local", "its arms: api, cli)"),
        ("ghost", "api", "its arms: none"),
    ] {
        let e = protospread_aggregate::compute_tables(dir.path(), &with(input, arm))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!(
                "input {input:?}: headline_arm {arm:?} is not an arm of this source"
            )) && e.contains(arms),
            "{e}"
        );
    }
    let e = protospread_aggregate::compute_tables(dir.path(), &with("rx", ""))
        .unwrap_err()
        .to_string();
    assert!(e.contains("input \"rx\": headline_arm is empty"), "{e}");
}

/// `Params::from_config` takes the arm of each stored-answer input that sets one.
#[test]
fn params_from_config_take_each_inputs_headline_arm() {
    let zeros = "0".repeat(64);
    let text = format!(
        "[study]\nname = \"t\"\n\
         [[inputs]]\nname = \"a\"\nrole = \"answers\"\npath = \"a.jsonl\"\nsha256 = \"{zeros}\"\nheadline_arm = \"local\"\n\
         [[inputs]]\nname = \"b\"\nrole = \"answers\"\npath = \"b.jsonl\"\nsha256 = \"{zeros}\"\n\
         [aggregate]\nheadline_arm = \"cli\"\n"
    );
    let cfg = protospread_core::Config::parse(&text, Path::new("p.toml"), Path::new(".")).unwrap();
    let p = Params::from_config(&cfg);
    assert_eq!(
        p.input_arms,
        BTreeMap::from([("a".to_string(), "local".to_string())])
    );
    assert_eq!(p.aggregate.headline_arm, "cli");
}

#[test]
fn reply_rules_pass_through_sorted_strict_first() {
    let (_d, t) = run_fixture(3);
    let r = &t["reply_rules"];
    let s = |n: &str| -> Vec<String> {
        let c = r.column_by_name(n).unwrap();
        let c = c.as_any().downcast_ref::<StringArray>().unwrap();
        (0..c.len()).map(|i| c.value(i).to_string()).collect()
    };
    let i = |n: &str| -> Vec<i64> {
        let c = r.column_by_name(n).unwrap();
        c.as_any()
            .downcast_ref::<Int64Array>()
            .unwrap()
            .values()
            .to_vec()
    };
    let (source, model, arm, condition, mode, rule) = (
        s("source"),
        s("model"),
        s("arm"),
        s("condition"),
        s("mode"),
        s("rule"),
    );
    let (_, answers) = fixture::rows();
    let keys: Vec<_> = (0..r.num_rows())
        .map(|k| (&source[k], &model[k], &arm[k], &condition[k], &mode[k]))
        .collect();
    for k in 0..r.num_rows() {
        // Sorted by source, model, arm, condition and mode; strict, then lenient, per key.
        assert_eq!(rule[k], if k % 2 == 0 { "strict" } else { "lenient" });
        if k % 2 == 1 {
            assert_eq!(keys[k], keys[k - 1]);
        } else if k > 0 {
            assert!(keys[k] > keys[k - 1], "row {k}");
        }
        let of_key: Vec<&ParsedRow> = answers
            .iter()
            .filter(|a| {
                (&a.source, &a.model, &a.arm, &a.condition, &a.mode)
                    == (keys[k].0, keys[k].1, keys[k].2, keys[k].3, keys[k].4)
            })
            .collect();
        assert_eq!(i("items")[k], of_key.len() as i64, "row {k}");
        if rule[k] == "strict" {
            let ok = of_key.iter().filter(|a| a.status == Status::Ok).count();
            assert_eq!(i("readable_items")[k], ok as i64, "row {k}");
        }
    }
    // Every key of the parsed answers has its two rows.
    let answer_keys: BTreeSet<_> = answers
        .iter()
        .map(|a| (&a.source, &a.model, &a.arm, &a.condition, &a.mode))
        .collect();
    assert_eq!(r.num_rows(), 2 * answer_keys.len());
}

/// `batch` with `column` of `row` set to `value` (a text, or an integer for Int32 columns).
fn with_value(batch: &RecordBatch, row: usize, column: &str, value: &str) -> RecordBatch {
    let i = batch.schema().index_of(column).unwrap();
    let mut cols = batch.columns().to_vec();
    let c = &cols[i];
    cols[i] = if let Some(t) = c.as_any().downcast_ref::<StringArray>() {
        Arc::new(
            (0..t.len())
                .map(|r| Some(if r == row { value } else { t.value(r) }))
                .collect::<StringArray>(),
        )
    } else {
        let n = c.as_any().downcast_ref::<Int32Array>().unwrap();
        Arc::new(
            (0..n.len())
                .map(|r| {
                    Some(if r == row {
                        value.parse().unwrap()
                    } else {
                        n.value(r)
                    })
                })
                .collect::<Int32Array>(),
        )
    };
    RecordBatch::try_new(batch.schema(), cols).unwrap()
}

/// The error of computing the tables of the fixture's score folder with `rules` as its
/// `reply_rules.parquet`, which must fail.
fn refusal_of_rules(
    dir: &Path,
    scores: &[ScaleRow],
    answers: &[ParsedRow],
    rules: &RecordBatch,
    p: &Params,
) -> String {
    fixture::write_rows(dir, scores, answers).unwrap();
    protospread_core::write_parquet(
        &dir.join("reply_rules.parquet"),
        rules.schema(),
        std::slice::from_ref(rules),
        &protospread_core::FileMeta::default(),
    )
    .unwrap();
    refusal(dir, p)
}

/// The error of computing the tables of the score folder `dir`, which must fail.
fn refusal(dir: &Path, p: &Params) -> String {
    protospread_aggregate::compute_tables(dir, p)
        .unwrap_err()
        .to_string()
}

#[test]
fn bad_inputs_are_named() {
    let (scores, answers) = fixture::rows();
    let dir = tempfile::tempdir().unwrap();
    let p = Params::default();
    // Missing file.
    let e = refusal(dir.path(), &p);
    assert!(
        e.contains("failed to open file") && e.contains("scale_scores.parquet"),
        "{e}"
    );
    // Duplicate row.
    let mut dup = scores.clone();
    dup.push(scores[5].clone());
    fixture::write_rows(dir.path(), &dup, &answers).unwrap();
    let e = refusal(dir.path(), &p);
    assert!(
        e.contains("scale_scores.parquet") && e.contains("duplicate row"),
        "{e}"
    );
    // The same row twice in a row, in a file otherwise in the score stage's order.
    let mut dup = scores.clone();
    dup.insert(6, scores[5].clone());
    fixture::write_rows(dir.path(), &dup, &answers).unwrap();
    let e = refusal(dir.path(), &p);
    assert!(
        e.contains("scale_scores.parquet") && e.contains("duplicate row"),
        "{e}"
    );
    // Request counts that do not add up, and an unknown mode, in one row of the strict rule's
    // or the lenient rule's: the first such row is named.
    let rules = fixture::reply_rules_batch(&answers);
    let last = rules.num_rows() - 1;
    // A whole-test row (several items per request) given more requests than items.
    let modes = rules.column_by_name("mode").unwrap();
    let modes = modes.as_any().downcast_ref::<StringArray>().unwrap();
    let whole_row = (0..rules.num_rows())
        .find(|r| modes.value(*r) == "whole")
        .unwrap();
    let items = rules.column_by_name("items").unwrap();
    let items = items.as_any().downcast_ref::<Int32Array>().unwrap();
    let too_many = (items.value(whole_row) + 1).to_string();
    for (row, column, value, problem) in [
        (
            0,
            "readable_replies",
            "1000",
            "failed_requests + readable_replies exceed requests",
        ),
        (last, "failed_items", "-1", "a count is negative"),
        (
            3,
            "items",
            "0",
            "failed_items + readable_items exceed items",
        ),
        (
            whole_row,
            "requests",
            too_many.as_str(),
            "more requests than items",
        ),
        (last, "mode", "both", "column `mode` is not single or whole"),
    ] {
        let bad = with_value(&rules, row, column, value);
        let e = refusal_of_rules(dir.path(), &scores, &answers, &bad, &p);
        let model = bad
            .column_by_name("model")
            .unwrap()
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap()
            .value(row)
            .to_string();
        assert!(
            e.contains("reply_rules.parquet")
                && e.contains(problem)
                && e.contains(&format!("model={model:?}")),
            "{column} = {value} in row {row}: {e}"
        );
    }
    // Another arm in one rule's row only (row 0 is a lenient row, row 1 a strict one): the
    // side tables group each rule's requests by arm, so every rule's rows are checked.
    for (row, rule) in [(0, "lenient"), (1, "strict")] {
        let bad = with_value(&rules, row, "arm", "elsewhere");
        let r = bad.column_by_name("rule").unwrap();
        assert_eq!(
            r.as_any().downcast_ref::<StringArray>().unwrap().value(row),
            rule
        );
        let e = refusal_of_rules(dir.path(), &scores, &answers, &bad, &p);
        assert!(
            e.contains("reply_rules.parquet") && e.contains("has more than one label/arm/cohort"),
            "arm of row {row} ({rule}): {e}"
        );
    }
    // A model of the parsed answers with a second arm, label or cohort in one row (a
    // single-item row and a whole-test row): the scale scores agree, the request counts the
    // score stage made from those answers do not.
    let whole = answers.iter().position(|a| a.mode == "whole").unwrap();
    let last = answers.len() - 1;
    let single = answers.iter().position(|a| a.mode != "whole").unwrap();
    let with_cohort = answers
        .iter()
        .position(|a| a.mode != "whole" && a.cohort.is_some())
        .unwrap();
    for (k, edit) in [
        (single, "arm"),
        (whole, "arm"),
        (whole, "label"),
        (last, "cohort"),
        (with_cohort, "no cohort"),
    ] {
        let mut bad = answers.clone();
        match edit {
            "arm" => bad[k].arm = "cli".into(),
            "label" => bad[k].label = "other".into(),
            "cohort" => bad[k].cohort = Some("zz".into()),
            _ => bad[k].cohort = None,
        }
        fixture::write_rows(dir.path(), &scores, &bad).unwrap();
        let Err(e) = protospread_aggregate::compute_tables(dir.path(), &p) else {
            panic!("{edit} in row {k} ({:?}) was not refused", bad[k]);
        };
        let e = e.to_string();
        assert!(
            e.contains("reply_rules.parquet")
                && e.contains(&format!("model {:?}", bad[k].model))
                && e.contains("has more than one label/arm/cohort"),
            "{edit} in row {k}: {e}"
        );
    }
    // Missing column.
    let sb = fixture::scores_batch(&scores);
    let idx = sb.schema().index_of("z").unwrap();
    let mut sb2 = sb;
    sb2.remove_column(idx);
    protospread_core::write_parquet(
        &dir.path().join("scale_scores.parquet"),
        sb2.schema(),
        &[sb2],
        &protospread_core::FileMeta::default(),
    )
    .unwrap();
    let e = refusal(dir.path(), &p);
    assert!(
        e.contains("scale_scores.parquet") && e.contains("column `z` is missing"),
        "{e}"
    );
    // A model with two arms.
    let mut two = scores.clone();
    two[0].arm = "cli".into();
    fixture::write_rows(dir.path(), &two, &answers).unwrap();
    let e = refusal(dir.path(), &p);
    assert!(e.contains("inconsistent"), "{e}");
    // Bad parameters.
    let bad = Params::from(AggregateSection {
        groups: vec!["colour".into()],
        ..AggregateSection::default()
    });
    let e = refusal(dir.path(), &bad);
    assert!(e.contains("colour"), "{e}");
    // A score that is not an integer 0..100 (the moments are exact integers).
    let mut frac = scores.clone();
    let k = frac.iter().position(|r| r.score.is_some()).unwrap();
    frac[k].score = Some(41.5);
    fixture::write_rows(dir.path(), &frac, &answers).unwrap();
    let e = refusal(dir.path(), &p);
    assert!(
        e.contains("scale_scores.parquet")
            && e.contains("score 41.5 is not an integer")
            && e.contains(&format!("model={:?}", frac[k].model)),
        "{e}"
    );
    // Strict rows of scale_scores_by_rule that are not those of scale_scores (files of two
    // score runs): the side-by-side tables would mix them, so they are refused.
    fixture::write_rows(dir.path(), &scores, &answers).unwrap();
    let fewer = fixture::by_rule_batch(&fixture::scores_batch(&scores[1..]), "strict");
    protospread_core::write_parquet(
        &dir.path().join("scale_scores_by_rule.parquet"),
        fewer.schema(),
        &[fewer],
        &protospread_core::FileMeta::default(),
    )
    .unwrap();
    let e = refusal(dir.path(), &p);
    assert!(
        e.contains("scale_scores_by_rule.parquet")
            && e.contains(&format!("{} rows of rule strict, but", scores.len() - 1))
            && e.contains("not from one run of the score stage"),
        "{e}"
    );
    // No human norms.
    fixture::write_rows(dir.path(), &scores, &answers).unwrap();
    fs_err::remove_file(dir.path().join("norms.parquet")).unwrap();
    let e = refusal(dir.path(), &p);
    assert!(
        e.contains("failed to open file") && e.contains("norms.parquet"),
        "{e}"
    );
    // Too many partitions is refused before any session is set up.
    let many = Params::from(AggregateSection {
        target_partitions: usize::MAX,
        ..AggregateSection::default()
    });
    let e = refusal(dir.path(), &many);
    assert!(
        e.contains("target_partitions") && e.contains("maximum"),
        "{e}"
    );
}

/// The example: protocol scores with variance 100 over ten setups, sampling scores
/// with variance 100 over three samples. Equal variances are a tie: the cell does not count
/// as protocol SD > sampling SD, on any partition count.
#[test]
fn equal_variances_are_not_exceeding_on_any_partition_count() {
    let (mut scores, answers) = fixture::rows();
    let protocol = [35, 65, 35, 65, 50, 50, 50, 50, 50, 50];
    let sampling = [40, 50, 60];
    let cell =
        |r: &ScaleRow| r.model == "api-b" && r.test == "big_five" && r.dimension == "Extraversion";
    let (mean, sd) = fixture::norm("big_five", "Extraversion");
    for r in scores.iter_mut().filter(|r| cell(r)) {
        let v = match PROTOCOL.iter().position(|c| *c == r.condition) {
            Some(i) => protocol[i],
            None => sampling[r.sample as usize],
        };
        r.score = Some(v as f64);
        r.z = Some((v as f64 - mean) / sd);
    }
    let mut first: Option<Vec<u8>> = None;
    for parts in [1, 3, 8] {
        let (d, t) = run_rows(parts, &scores, &answers);
        let c = &t["cells"];
        let k = (0..c.num_rows())
            .find(|&k| {
                s(c, "model")[k] == "api-b"
                    && s(c, "test")[k] == "big_five"
                    && s(c, "dimension")[k] == "Extraversion"
            })
            .unwrap();
        assert_eq!(bo(c, "kept")[k], Some(true));
        assert_eq!(
            bo(c, "protocol_gt_sampling")[k],
            Some(false),
            "{parts} partitions"
        );
        assert_eq!(f(c, "ratio")[k], Some(1.0));
        assert_eq!(f(c, "protocol_sd")[k], f(c, "sampling_sd")[k]);
        let bytes = fs_err::read(d.path().join("aggregate/cells.parquet")).unwrap();
        match &first {
            None => first = Some(bytes),
            Some(b) => assert_eq!(b, &bytes, "{parts} partitions"),
        }
    }
}

#[test]
fn failed_run_leaves_previous_outputs() {
    let (_d, _) = run_fixture(1);
    let out = _d.path().join("aggregate");
    let before = fs_err::read(out.join("cells.parquet")).unwrap();
    fs_err::write(_d.path().join("score/reply_rules.parquet"), b"not parquet").unwrap();
    let e =
        protospread_aggregate::run(&_d.path().join("score"), &out, &Params::default()).unwrap_err();
    assert!(e.to_string().contains("reply_rules.parquet"), "{e}");
    assert_eq!(fs_err::read(out.join("cells.parquet")).unwrap(), before);
}
