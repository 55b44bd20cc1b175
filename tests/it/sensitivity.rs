//! The side-by-side analysis (issue 13): scale scores under each reply rule
//! (`scale_scores_by_rule.parquet`) and the tables `cells_by_rule`,
//! `protocol_vs_sampling_by_rule` and `verdict_by_rule` for every rule x protocol set
//! (primary = `protocol_conditions`, secondary = `secondary_protocol_conditions`). Stored
//! answers built here are scored by the score stage's plans and aggregated by the aggregate
//! stage's plans, from a real score folder.

use arrow::array::{AsArray, RecordBatch, StringArray};
use protospread_aggregate::{compute_tables, AggregateError, Params, Table};
use protospread_core::AggregateSection;
use protospread_format::{Mode, StoredRecord, Vocabulary};
use protospread_score::{score_in_memory, Norms, ScoringKey};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Write `batches` of `schema` to the Parquet file `name` in `dir`, as a stage writes it.
fn write_in(dir: &Path, name: &str, schema: arrow::datatypes::SchemaRef, batches: &[RecordBatch]) {
    protospread_core::write_parquet(
        &dir.join(name),
        schema,
        batches,
        &protospread_core::FileMeta::default(),
    )
    .unwrap();
}

const DIMS: [&str; 5] = ["A", "C", "E", "N", "O"];

/// One big_five request of model `m` (arm local), at temperature 1 in ST1. `item` None = the
/// whole test in one reply.
fn record(condition: &str, sample: i32, item: Option<i32>, reply: String) -> StoredRecord {
    let mut r =
        protospread_testutils::local_request("big_five", 50, condition, sample, item, &reply);
    if condition == "ST1" {
        r.temperature = Some(1.0);
    }
    r
}

/// Every single-item setup (S0, S0r, SR, SP, three ST1 samples) answered with option
/// `1 + (item + shift) % 5` written by `fmt`, and every whole-test setup answered with prose
/// no rule reads.
fn records(fmt: impl Fn(i32) -> String) -> Vec<StoredRecord> {
    let mut out = Vec::new();
    for (c, sample, shift) in [
        ("S0", 1, 0),
        ("S0r", 1, 0),
        ("SR", 1, 2),
        ("SP", 1, 3),
        ("ST1", 1, 0),
        ("ST1", 2, 1),
        ("ST1", 3, 0),
    ] {
        for item in 1..=50 {
            out.push(record(c, sample, Some(item), fmt(1 + (item + shift) % 5)));
        }
    }
    for c in ["B0", "B0r", "BS1", "BS2", "BS3", "BS4"] {
        out.push(record(c, 1, None, "I would rather not say.".into()));
    }
    out
}

/// Keep the rows of `batches` whose `rule` is in `rules`.
fn only_rules(batches: &[RecordBatch], rules: &[&str]) -> Vec<RecordBatch> {
    batches
        .iter()
        .map(|b| {
            let keep: arrow::array::BooleanArray = b
                .column_by_name("rule")
                .unwrap()
                .as_string::<i32>()
                .iter()
                .map(|r| Some(rules.contains(&r.unwrap())))
                .collect();
            arrow::compute::filter_record_batch(b, &keep).unwrap()
        })
        .collect()
}

/// The repository's scoring key.
fn scoring_key() -> ScoringKey {
    ScoringKey::load(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/scoring_key.csv"))
        .unwrap()
}

/// Human norms of the big_five dimensions from three scores each (20, 50, 80).
fn human_norms() -> Norms {
    Norms::from_scores(
        DIMS.iter()
            .flat_map(|d| [20.0, 50.0, 80.0].map(|v| ("big_five", *d, v))),
    )
}

/// `norms.parquet`'s rows: mean 50 and SD 30 per big_five dimension.
fn norms_table() -> RecordBatch {
    let rows: Vec<(&str, &str, f64, f64)> =
        DIMS.iter().map(|d| ("big_five", *d, 50.0, 30.0)).collect();
    protospread_testutils::norms_batch_of(&rows)
}

/// A score folder of `records` (source `rec`, label `recorded`) as the score stage writes it,
/// with the reply rules `rules` (strict first), and norms of mean 50 and SD 30 per dimension.
fn score_dir(records: &[StoredRecord], rules: &[&str]) -> tempfile::TempDir {
    let (key, norms) = (scoring_key(), human_norms());
    let m = score_in_memory(
        "rec",
        Some("recorded"),
        records,
        &Vocabulary::default(),
        &key,
        &norms,
        &[],
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let write =
        |name: &str, schema, batches: &[RecordBatch]| write_in(dir.path(), name, schema, batches);
    write(
        "scale_scores.parquet",
        protospread_core::SCALE_SCORES.schema(),
        &m.scales,
    );
    write(
        "reply_rules.parquet",
        protospread_core::REPLY_RULE_COUNTS.schema(),
        &only_rules(&m.rules, rules),
    );
    write(
        "scale_scores_by_rule.parquet",
        protospread_core::SCALE_SCORES_BY_RULE.schema(),
        &only_rules(&m.by_rule, rules),
    );
    let nb = norms_table();
    write("norms.parquet", nb.schema(), &[nb]);
    dir
}

fn tables(dir: &Path, params: &Params) -> BTreeMap<String, Table> {
    compute_tables(dir, params)
        .unwrap()
        .into_iter()
        .map(|t| (t.name.clone(), t))
        .collect()
}

fn text(t: &Table, col: &str, row: usize) -> String {
    let c = t.batch.column_by_name(col).unwrap();
    arrow::util::display::array_value_to_string(c, row).unwrap()
}

/// (rule, protocol_set) -> kept cells of `cells_by_rule`, and the dropped cells' reasons.
fn kept(t: &Table) -> BTreeMap<(String, String), (usize, Vec<String>)> {
    let mut out: BTreeMap<(String, String), (usize, Vec<String>)> = BTreeMap::new();
    for i in 0..t.rows() {
        let e = out
            .entry((text(t, "rule", i), text(t, "protocol_set", i)))
            .or_default();
        if text(t, "kept", i) == "true" {
            e.0 += 1;
        } else {
            e.1.push(text(t, "drop_reason", i));
        }
    }
    out
}

/// (rule, protocol_set) -> the statement of the `verdict` criterion.
fn verdicts(t: &Table) -> BTreeMap<(String, String), String> {
    (0..t.rows())
        .filter(|&i| text(t, "criterion", i) == "verdict")
        .map(|i| {
            (
                (text(t, "rule", i), text(t, "protocol_set", i)),
                text(t, "statement", i),
            )
        })
        .collect()
}

fn key(rule: &str, set: &str) -> (String, String) {
    (rule.to_string(), set.to_string())
}

#[test]
fn only_the_secondary_set_keeps_cells_when_whole_tests_are_unreadable() {
    let dir = score_dir(&records(|o| o.to_string()), &["strict"]);
    let t = tables(dir.path(), &Params::default());
    let k = kept(&t["cells_by_rule"]);
    assert_eq!(k.len(), 2, "strict x (primary, secondary): {k:?}");
    let (n, why) = &k[&key("strict", "primary")];
    assert_eq!(*n, 0);
    assert_eq!(why.len(), 5);
    assert!(
        why.iter()
            .all(|r| r
                == "incomplete administrations: B0[1], B0r[1], BS1[1], BS2[1], BS3[1], BS4[1]"),
        "{why:?}"
    );
    assert_eq!(k[&key("strict", "secondary_single_item")], (5, vec![]));
    // The study's table is the primary analysis: nothing kept.
    let cells = &t["cells"];
    assert!((0..cells.rows()).all(|i| text(cells, "kept", i) == "false"));
    let v = verdicts(&t["verdict_by_rule"]);
    assert_eq!(
        v[&key("strict", "primary")],
        "no kept arm=local cells: no verdict: 5 of 5 arm=local cells dropped (first: big_five A: incomplete administrations: B0[1], B0r[1], BS1[1], BS2[1], BS3[1], BS4[1]); unreadable replies: whole-test B0 1 of 1, whole-test B0r 1 of 1, whole-test BS1 1 of 1, whole-test BS2 1 of 1, whole-test BS3 1 of 1, whole-test BS4 1 of 1"
    );
    assert!(
        v[&key("strict", "secondary_single_item")].starts_with("arm=local: "),
        "{v:?}"
    );
    // The headline-arm summary has a row per rule x set, also without kept cells.
    let g = &t["protocol_vs_sampling_by_rule"];
    assert_eq!(g.rows(), 2);
    assert_eq!(
        (0..2)
            .map(|i| (
                text(g, "protocol_set", i),
                text(g, "group", i),
                text(g, "cells", i),
                text(g, "dropped_cells", i)
            ))
            .collect::<Vec<_>>(),
        vec![
            ("primary".into(), "arm=local".into(), "0".into(), "5".into()),
            (
                "secondary_single_item".into(),
                "arm=local".into(),
                "5".into(),
                "0".into()
            )
        ]
    );
    // Requests of the secondary set are those of its conditions and the sampling set.
    let vt = &t["verdict_by_rule"];
    let unread: Vec<String> = (0..vt.rows())
        .filter(|&i| text(vt, "criterion", i) == "unreadable_replies_few")
        .map(|i| text(vt, "statement", i))
        .collect();
    assert_eq!(
        unread,
        vec![
            "6 of 356 arm=local requests gave an unreadable reply: below the threshold counts as few",
            "0 of 350 arm=local requests gave an unreadable reply: below the threshold counts as few"
        ]
    );
}

#[test]
fn the_lenient_rule_keeps_cells_the_strict_rule_drops() {
    let dir = score_dir(
        &records(|o| format!("{o} - Moderately Accurate")),
        &["strict", "lenient"],
    );
    let t = tables(dir.path(), &Params::default());
    let k = kept(&t["cells_by_rule"]);
    assert_eq!(k[&key("strict", "secondary_single_item")].0, 0);
    assert_eq!(k[&key("lenient", "secondary_single_item")], (5, vec![]));
    assert_eq!(
        k[&key("lenient", "primary")].0,
        0,
        "whole tests stay unreadable"
    );
    let v = verdicts(&t["verdict_by_rule"]);
    assert!(
        v[&key("strict", "secondary_single_item")]
            == "no kept arm=local cells: no verdict: 5 of 5 arm=local cells dropped (first: big_five A: incomplete administrations: S0[1], S0r[1], SP[1], SR[1], ST1[1], ST1[2], ST1[3]); unreadable replies: single-item S0 50 of 50, single-item S0r 50 of 50, single-item SP 50 of 50, single-item SR 50 of 50, single-item ST1 150 of 150",
        "{v:?}"
    );
    assert!(v[&key("lenient", "secondary_single_item")].starts_with("arm=local: "));
    // Rows are strict first, then lenient; primary before secondary.
    let order: Vec<(String, String)> = v.keys().cloned().collect();
    assert_eq!(order.len(), 4);
    let c = &t["cells_by_rule"];
    assert_eq!(text(c, "rule", 0), "strict");
    assert_eq!(text(c, "protocol_set", 0), "primary");
    assert_eq!(text(c, "rule", c.rows() - 1), "lenient");
    assert_eq!(
        text(c, "protocol_set", c.rows() - 1),
        "secondary_single_item"
    );
    // The lenient scale scores are the strict ones of the same options written bare.
    let bare = score_dir(&records(|o| o.to_string()), &["strict"]);
    let tb = tables(bare.path(), &Params::default());
    let cb = &tb["cells_by_rule"];
    let lenient: Vec<usize> = (0..c.rows())
        .filter(|&i| text(c, "rule", i) == "lenient")
        .collect();
    assert_eq!(lenient.len(), cb.rows());
    for (j, &i) in lenient.iter().enumerate() {
        for col in ["kept", "protocol_sd", "sampling_sd", "ratio", "range_z"] {
            assert_eq!(text(c, col, i), text(cb, col, j), "{col} row {j}");
        }
    }
}

#[test]
fn the_secondary_set_refuses_bad_config_naming_the_key() {
    let dir = score_dir(&records(|o| o.to_string()), &["strict"]);
    let with = |sec: &[&str]| {
        Params::from(AggregateSection {
            secondary_protocol_conditions: sec.iter().map(|s| s.to_string()).collect(),
            ..AggregateSection::default()
        })
    };
    for (sec, msg) in [
        (&["S0"][..], "needs at least two conditions"),
        (
            &["S0", "ST1"][..],
            "condition \"ST1\" is not in protocol_conditions",
        ),
        (
            &["S0", "X"][..],
            "condition \"X\" is not in protocol_conditions",
        ),
        (&["S0", "SR", "S0"][..], "condition \"S0\" is listed twice"),
    ] {
        let e = compute_tables(dir.path(), &with(sec)).unwrap_err();
        assert!(matches!(e, AggregateError::Config(_)), "{e}");
        let e = e.to_string();
        assert!(
            e.contains("[aggregate]")
                && e.contains("secondary_protocol_conditions")
                && e.contains(msg),
            "{sec:?}: {e}"
        );
    }
    // From pipeline.toml the key reaches the stage, and its error names it.
    let cfg = protospread_core::Config::parse(
        "[study]\nname = \"t\"\n[aggregate]\nsecondary_protocol_conditions = [\"S0\", \"BS9\"]\n",
        Path::new("pipeline.toml"),
        Path::new("."),
    )
    .unwrap();
    let e = compute_tables(dir.path(), &Params::from_config(&cfg))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("secondary_protocol_conditions: condition \"BS9\""),
        "{e}"
    );
    // An empty list turns the secondary analysis off.
    let t = tables(dir.path(), &with(&[]));
    let sets: Vec<String> = (0..t["verdict_by_rule"].rows())
        .map(|i| text(&t["verdict_by_rule"], "protocol_set", i))
        .collect();
    assert!(
        !sets.is_empty() && sets.iter().all(|s| s == "primary"),
        "{sets:?}"
    );
}

#[test]
fn existing_tables_do_not_change_with_rules_or_the_secondary_set() {
    // Single items only, each a bare number, and a protocol set of the single-item setups, so
    // that the study's tables have kept cells to compare.
    let recs = {
        let mut r = records(|o| o.to_string());
        r.retain(|x| x.mode == Mode::Single);
        r
    };
    let primary = AggregateSection {
        protocol_conditions: ["S0", "S0r", "SR", "SP"].map(String::from).to_vec(),
        rerun_pairs: vec![["S0".into(), "S0r".into()]],
        shift_to: vec!["SR".into(), "SP".into()],
        shift_from: vec!["S0".into(), "S0r".into()],
        ..AggregateSection::default()
    };
    let strict_only = score_dir(&recs, &["strict"]);
    let both = score_dir(&recs, &["strict", "lenient"]);
    let off = Params::from(AggregateSection {
        secondary_protocol_conditions: vec![],
        ..primary.clone()
    });
    let on = Params::from(AggregateSection {
        secondary_protocol_conditions: vec!["S0".into(), "SR".into()],
        ..primary
    });
    let a = tables(strict_only.path(), &off);
    let b = tables(both.path(), &on);
    let new = [
        "cells_by_rule",
        "protocol_vs_sampling_by_rule",
        "verdict_by_rule",
    ];
    for n in new {
        assert!(a.contains_key(n) && b.contains_key(n), "{n}");
    }
    for (name, t) in &a {
        if new.contains(&name.as_str()) || name == "reply_rules" {
            continue;
        }
        assert_eq!(t, &b[name], "table {name} changed");
    }
    // Strict only and no secondary set: only strict / primary rows, equal to `cells`.
    let c = &a["cells_by_rule"];
    let cells = &a["cells"];
    assert_eq!(c.rows(), cells.rows());
    for i in 0..c.rows() {
        assert_eq!(
            (text(c, "rule", i), text(c, "protocol_set", i)),
            key("strict", "primary")
        );
        for col in [
            "model",
            "test",
            "dimension",
            "kept",
            "drop_reason",
            "protocol_sd",
            "sampling_sd",
            "ratio",
            "range_z",
        ] {
            assert_eq!(text(c, col, i), text(cells, col, i), "{col} row {i}");
        }
    }
    let kept_cells = (0..cells.rows())
        .filter(|&i| text(cells, "kept", i) == "true")
        .count();
    assert_eq!(kept_cells, 5);
    // The strict / primary verdict lines are the verdict's, criterion by criterion.
    let (v, vb) = (&a["verdict"], &a["verdict_by_rule"]);
    assert_eq!(v.rows(), vb.rows());
    for i in 0..v.rows() {
        for col in ["source", "arm", "criterion", "value", "passed", "statement"] {
            assert_eq!(text(v, col, i), text(vb, col, i), "{col} row {i}");
        }
    }
}

#[test]
fn strict_scale_scores_by_rule_are_the_scale_scores() {
    let key = scoring_key();
    let recs = records(|o| {
        if o % 2 == 0 {
            o.to_string()
        } else {
            format!("{o}. Accurate")
        }
    });
    let m = score_in_memory(
        "rec",
        None,
        &recs,
        &Vocabulary::default(),
        &key,
        &Norms::default(),
        &[],
    )
    .unwrap();
    let cat = |b: &[RecordBatch]| arrow::compute::concat_batches(&b[0].schema(), b).unwrap();
    let scales = cat(&m.scales);
    let strict = cat(&only_rules(&m.by_rule, &["strict"]));
    let lenient = cat(&only_rules(&m.by_rule, &["lenient"]));
    let mut without_rule = strict.clone();
    without_rule.remove_column(0);
    assert_eq!(without_rule.columns(), scales.columns());
    // The lenient rule reads the labelled odd options too: more complete scale scores.
    let complete = |b: &RecordBatch| {
        let c = b.column_by_name("complete").unwrap().as_boolean();
        c.true_count()
    };
    assert!(
        complete(&lenient) > complete(&strict),
        "{} vs {}",
        complete(&lenient),
        complete(&strict)
    );
    assert_eq!(lenient.num_rows(), strict.num_rows());
}

/// Model `model`'s requests: the single-item setups of [`records`], and every whole-test setup
/// answered line by line (`p: <option>`), the option shifted per condition, both written by
/// `fmt`.
fn answered(model: &str, fmt: impl Fn(i32) -> String) -> Vec<StoredRecord> {
    let mut out = records(&fmt);
    out.retain(|r| r.mode == Mode::Single);
    for (shift, c) in ["B0", "B0r", "BS1", "BS2", "BS3", "BS4"]
        .into_iter()
        .enumerate()
    {
        let lines: Vec<String> = (1..=50)
            .map(|p| format!("{p}: {}", fmt(1 + (p + shift as i32 * 2) % 5)))
            .collect();
        out.push(record(c, 1, None, lines.join("\n")));
    }
    for r in &mut out {
        r.model = model.into();
    }
    out
}

/// Keep the rows of `batches` whose `rule` is `rule` and write `strict` in that column: the
/// tables of a study whose reply rule is `rule`.
fn as_strict(batches: &[RecordBatch], rule: &str) -> Vec<RecordBatch> {
    only_rules(batches, &[rule])
        .into_iter()
        .map(|b| {
            let i = b.schema().index_of("rule").unwrap();
            let mut cols = b.columns().to_vec();
            cols[i] = Arc::new(StringArray::from(vec!["strict"; b.num_rows()]));
            RecordBatch::try_new(b.schema(), cols).unwrap()
        })
        .collect()
}

/// The rows of `t` for `(rule, set)`, every column but those two, as text.
fn rows_of(t: &Table, rule: &str, set: &str) -> Vec<Vec<String>> {
    let names: Vec<String> = t
        .batch
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .filter(|n| n != "rule" && n != "protocol_set")
        .collect();
    (0..t.rows())
        .filter(|&i| text(t, "rule", i) == rule && text(t, "protocol_set", i) == set)
        .map(|i| names.iter().map(|n| text(t, n, i)).collect())
        .collect()
}

#[test]
fn each_combination_is_the_study_of_its_rule_and_protocol_set() {
    // Two sources, models the two rules read differently (bare options, labelled ones that only
    // the lenient rule reads, a mix), whole tests that no rule reads, and missing setups.
    let labelled = |o: i32| format!("{o} - Moderately Accurate");
    let mixed = |o: i32| {
        if o % 2 == 0 {
            o.to_string()
        } else {
            format!("{o}. Accurate")
        }
    };
    let mut prose = answered("m3", |o| o.to_string());
    for r in &mut prose {
        if r.mode == Mode::Whole {
            r.reply = "I would rather not say.".into();
        }
    }
    // A model without two setups: each combination names those it uses as missing.
    let mut gaps = answered("m4", labelled);
    gaps.retain(|r| r.condition != "SR" && r.condition != "BS2");
    let sources: [(&str, Vec<StoredRecord>); 2] = [
        (
            "rec",
            [answered("m1", |o| o.to_string()), answered("m2", labelled)].concat(),
        ),
        ("rec2", [answered("m1", mixed), prose, gaps].concat()),
    ];
    let (key, norms) = (scoring_key(), human_norms());
    let (mut rules, mut by_rule) = (Vec::new(), Vec::new());
    for (source, recs) in &sources {
        let m = score_in_memory(
            source,
            None,
            recs,
            &Vocabulary::default(),
            &key,
            &norms,
            &[],
        )
        .unwrap();
        rules.extend(m.rules);
        by_rule.extend(m.by_rule);
    }
    let norm_batch = norms_table();
    // A score folder whose reply rules are `names`, the first of them written as `strict`.
    let folder = |names: &[&str]| {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, schema, batches: &[RecordBatch]| {
            write_in(dir.path(), name, schema, batches);
        };
        let study: Vec<RecordBatch> = as_strict(&by_rule, names[0]);
        let scales: Vec<RecordBatch> = study
            .iter()
            .map(|b| {
                let mut b = b.clone();
                b.remove_column(b.schema().index_of("rule").unwrap());
                b
            })
            .collect();
        let mut r = as_strict(&rules, names[0]);
        let mut s = study;
        r.extend(only_rules(&rules, &names[1..]));
        s.extend(only_rules(&by_rule, &names[1..]));
        write(
            "scale_scores.parquet",
            protospread_core::SCALE_SCORES.schema(),
            &scales,
        );
        write(
            "reply_rules.parquet",
            protospread_core::REPLY_RULE_COUNTS.schema(),
            &r,
        );
        write(
            "scale_scores_by_rule.parquet",
            protospread_core::SCALE_SCORES_BY_RULE.schema(),
            &s,
        );
        write(
            "norms.parquet",
            norm_batch.schema(),
            std::slice::from_ref(&norm_batch),
        );
        dir
    };
    let section = |protocol: &[&str], secondary: &[&str]| {
        Params::from(AggregateSection {
            protocol_conditions: protocol.iter().map(|s| s.to_string()).collect(),
            secondary_protocol_conditions: secondary.iter().map(|s| s.to_string()).collect(),
            rerun_pairs: vec![["S0".into(), "S0r".into()]],
            shift_from: vec!["S0".into(), "S0r".into()],
            shift_to: vec!["SR".into(), "SP".into()],
            ..AggregateSection::default()
        })
    };
    let primary: Vec<String> = AggregateSection::default().protocol_conditions;
    let primary: Vec<&str> = primary.iter().map(|s| s.as_str()).collect();
    let secondary = ["S0", "S0r", "SR", "SP"];
    let names = [
        "cells_by_rule",
        "protocol_vs_sampling_by_rule",
        "verdict_by_rule",
    ];
    // Each combination computed alone: its rule as the study's, its set as the protocol set.
    let mut alone = BTreeMap::new();
    for rule in ["strict", "lenient"] {
        for (set, conds) in [
            ("primary", &primary[..]),
            ("secondary_single_item", &secondary[..]),
        ] {
            let dir = folder(&[rule]);
            let t = tables(dir.path(), &section(conds, &[]));
            let rows: Vec<Vec<Vec<String>>> = names
                .iter()
                .map(|n| rows_of(&t[*n], "strict", "primary"))
                .collect();
            alone.insert((rule, set), rows);
        }
    }
    // The combinations differ, so a row of one given to another would show.
    let kept: Vec<usize> = alone
        .values()
        .map(|t| t[0].iter().filter(|r| r[8] == "true").count())
        .collect();
    assert!(
        kept.iter().any(|&k| k > 0) && kept.windows(2).any(|w| w[0] != w[1]),
        "{kept:?}"
    );
    // Together: four combinations (three in one plan), two (one computed apart from the
    // study's tables) and two of the primary set.
    for (rules, sec) in [
        (&["strict", "lenient"][..], &secondary[..]),
        (&["strict"][..], &secondary[..]),
        (&["strict", "lenient"][..], &[][..]),
    ] {
        let dir = folder(rules);
        let t = tables(dir.path(), &section(&primary, sec));
        let mut rows = [0; 3];
        for ((rule, set), want) in &alone {
            if !rules.contains(rule) || (sec.is_empty() && *set != "primary") {
                continue;
            }
            for (i, (n, want)) in names.iter().zip(want).enumerate() {
                assert!(!want.is_empty(), "{n} of {rule} x {set}");
                assert_eq!(
                    &rows_of(&t[*n], rule, set),
                    want,
                    "{n} of {rule} x {set} with rules {rules:?}, secondary {sec:?}"
                );
                rows[i] += want.len();
            }
        }
        // And no other rows.
        for (n, rows) in names.iter().zip(rows) {
            assert_eq!(t[*n].rows(), rows, "{n}");
        }
    }
}
