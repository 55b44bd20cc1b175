//! The rules docs/statistics.md, docs/stored-answers.md and docs/simulation.md state in one
//! sentence each, checked against the outputs: each test builds the cases a sentence describes
//! and compares the output with what the sentence says, so doc and output cannot part silently.

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::Int64Type;
use protospread_aggregate::Params;
use protospread_core::AggregateSection;
use protospread_format::{StoredRecord, Vocabulary};
use protospread_score::{read_single_lenient, read_whole_lenient, Status};
use protospread_score::{Norms, ScoringKey};
use protospread_testutils::{self as fx, parse_and_score, ScaleRow as FxScore};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The aggregate stage over the fixture's score-stage output with `edit` applied to its scale
/// scores, every table read back.
fn aggregate(edit: impl Fn(&mut Vec<FxScore>)) -> BTreeMap<String, RecordBatch> {
    let (mut scores, answers) = fx::rows();
    edit(&mut scores);
    let dir = tempfile::tempdir().unwrap();
    let score = dir.path().join("score");
    fs_err::create_dir_all(&score).unwrap();
    let sb = fx::scores_batch(&scores);
    let bb = fx::by_rule_batch(&sb, "strict");
    let nb = fx::norms_batch();
    let rb = fx::reply_rules_batch(&answers);
    for (name, b) in [
        ("scale_scores", sb),
        ("scale_scores_by_rule", bb),
        ("norms", nb),
        ("reply_rules", rb),
    ] {
        protospread_core::write_parquet(
            &score.join(format!("{name}.parquet")),
            b.schema(),
            &[b],
            &protospread_core::FileMeta::default(),
        )
        .unwrap();
    }
    let out = dir.path().join("aggregate");
    let params = Params::from(AggregateSection::default());
    protospread_aggregate::run(&score, &out, &params).unwrap();
    let mut tables = BTreeMap::new();
    for name in ["cells", "cells_by_rule"] {
        let (_, b) = protospread_core::read_parquet(&out.join(format!("{name}.parquet"))).unwrap();
        tables.insert(
            name.to_string(),
            arrow::compute::concat_batches(&b[0].schema(), &b).unwrap(),
        );
    }
    tables
}

fn text(b: &RecordBatch, col: &str, row: usize) -> Option<String> {
    let c = arrow::compute::cast(
        b.column_by_name(col).unwrap(),
        &arrow::datatypes::DataType::Utf8,
    )
    .unwrap();
    let c = c.as_string::<i32>();
    (!c.is_null(row)).then(|| c.value(row).to_string())
}

fn int(b: &RecordBatch, col: &str, row: usize) -> i64 {
    let c = arrow::compute::cast(
        b.column_by_name(col).unwrap(),
        &arrow::datatypes::DataType::Int64,
    )
    .unwrap();
    c.as_primitive::<Int64Type>().value(row)
}

/// The rows of `b` of one cell of source `fx` (and, in `cells_by_rule`, of each rule x set).
fn rows_of(b: &RecordBatch, model: &str, test: &str, dimension: &str) -> Vec<usize> {
    (0..b.num_rows())
        .filter(|&r| {
            text(b, "source", r).as_deref() == Some("fx")
                && text(b, "model", r).as_deref() == Some(model)
                && text(b, "test", r).as_deref() == Some(test)
                && text(b, "dimension", r).as_deref() == Some(dimension)
        })
        .collect()
}

fn at(r: &FxScore, model: &str, test: &str, dim: &str) -> bool {
    r.model == model && r.test == test && r.dimension == dim
}

/// Blank an administration's score: incomplete, so no score and no z.
fn incomplete(r: &mut FxScore) {
    r.score = None;
    r.z = None;
    r.complete = false;
}

/// statistics.md, "Which cells are dropped": the reasons 2-4 that hold are all listed, joined
/// by `; `, missing conditions in the configured order (protocol set, then sampling set),
/// incomplete and z-less administrations in byte order of the condition, then by sample;
/// "fewer than two sampling administrations" only when none of them holds; `protocol_n` and
/// `sampling_n` count the administrations with a z, also on a dropped cell.
#[test]
fn drop_reasons_orders_and_counts_are_as_documented() {
    let t = aggregate(|s| {
        // Missing SR, B0 and every ST1 sample: configured order, not byte order.
        s.retain(|r| {
            !(at(r, "api-a", "big_five", "Extraversion")
                && ["SR", "B0", "ST1"].contains(&r.condition.as_str()))
        });
        // One ST1 sample left: only "fewer than two sampling administrations".
        s.retain(|r| {
            !(at(r, "api-b", "big_five", "Neuroticism") && r.condition == "ST1" && r.sample > 0)
        });
        // Missing BS4 (reason 2) with an incomplete SP (3) and a z-less S0r (4): all listed.
        s.retain(|r| !(at(r, "api-b", "big_five", "Extraversion") && r.condition == "BS4"));
        for r in s.iter_mut() {
            let cond = r.condition.clone();
            let c = cond.as_str();
            if at(r, "api-a", "big_five", "Neuroticism")
                && (c == "S0" || c == "B0" || (c == "ST1" && r.sample > 0))
            {
                incomplete(r);
            }
            if at(r, "api-a", "riasec", "Realistic") && (c == "SP" || (c == "ST1" && r.sample == 2))
            {
                r.z = None;
            }
            if at(r, "api-b", "big_five", "Extraversion") {
                match c {
                    "SP" => incomplete(r),
                    "S0r" => r.z = None,
                    _ => {}
                }
            }
        }
    });
    let c = &t["cells"];
    // (model, test, dimension, drop_reason, protocol_n, sampling_n)
    let expected = [
        (
            "api-a",
            "big_five",
            "Extraversion",
            "missing administrations: SR, B0, ST1",
            8,
            0,
        ),
        (
            "api-a",
            "big_five",
            "Neuroticism",
            "incomplete administrations: B0, S0, ST1[1], ST1[2]",
            8,
            1,
        ),
        (
            "api-a",
            "riasec",
            "Realistic",
            "no score in human SDs (z is null): SP, ST1[2]",
            9,
            2,
        ),
        (
            "api-b",
            "big_five",
            "Extraversion",
            "missing administrations: BS4; incomplete administrations: SP; \
             no score in human SDs (z is null): S0r",
            7,
            3,
        ),
        (
            "api-b",
            "big_five",
            "Neuroticism",
            "fewer than two sampling administrations",
            10,
            1,
        ),
        (
            "api-e",
            "riasec",
            "Social",
            "test not administered (no scale scores)",
            0,
            0,
        ),
    ];
    for (model, test, dim, reason, pn, sn) in expected {
        let rows = rows_of(c, model, test, dim);
        assert_eq!(rows.len(), 1, "{model} {test} {dim}");
        let r = rows[0];
        assert_eq!(text(c, "kept", r).as_deref(), Some("false"));
        assert_eq!(
            text(c, "drop_reason", r).as_deref(),
            Some(reason),
            "{model} {test} {dim}"
        );
        assert_eq!(
            int(c, "protocol_n", r),
            pn,
            "{model} {test} {dim} protocol_n"
        );
        assert_eq!(
            int(c, "sampling_n", r),
            sn,
            "{model} {test} {dim} sampling_n"
        );
    }
    // A command-line cell without any ST1 administration is kept (fixture: cli-y).
    let rows = rows_of(c, "cli-y", "big_five", "Openness");
    assert_eq!(text(c, "kept", rows[0]).as_deref(), Some("true"));
    assert_eq!(int(c, "sampling_n", rows[0]), 0);
    // A command-line cell with one ST1 administration is dropped like any other.
    let t = aggregate(|s| {
        let mut one = s
            .iter()
            .find(|r| at(r, "cli-x", "big_five", "Openness") && r.condition == "ST1")
            .unwrap()
            .clone();
        one.model = "cli-y".into();
        s.push(one);
    });
    let c = &t["cells"];
    let rows = rows_of(c, "cli-y", "big_five", "Openness");
    assert_eq!(
        text(c, "drop_reason", rows[0]).as_deref(),
        Some("fewer than two sampling administrations")
    );
}

/// statistics.md: `constant_administrations` counts the cell's constant-answer
/// administrations of the row's protocol set and of the sampling set, no other condition's.
#[test]
fn constant_administrations_count_the_protocol_set_and_sampling() {
    let t = aggregate(|s| {
        for r in s.iter_mut() {
            // Fixture: api-b big_five BS2 is constant. Add a constant SP and ST1 sample 1 on
            // one riasec cell, and a constant B0.
            if at(r, "api-c", "riasec", "Social")
                && (r.condition == "SP"
                    || r.condition == "B0"
                    || (r.condition == "ST1" && r.sample == 1))
            {
                r.constant_answers = true;
            }
        }
    });
    let c = &t["cells"];
    let r = rows_of(c, "api-b", "big_five", "Openness")[0];
    assert_eq!(int(c, "constant_administrations", r), 1);
    let r = rows_of(c, "api-c", "riasec", "Social")[0];
    assert_eq!(int(c, "constant_administrations", r), 3);
    let b = &t["cells_by_rule"];
    // (model, test, dimension, protocol_set, expected)
    for (model, test, dim, set, n) in [
        ("api-b", "big_five", "Openness", "primary", 1),
        ("api-b", "big_five", "Openness", "secondary_single_item", 0),
        ("api-c", "riasec", "Social", "primary", 3),
        ("api-c", "riasec", "Social", "secondary_single_item", 2),
    ] {
        let rows: Vec<usize> = rows_of(b, model, test, dim)
            .into_iter()
            .filter(|&r| text(b, "protocol_set", r).as_deref() == Some(set))
            .collect();
        assert_eq!(rows.len(), 1, "{model} {test} {dim} {set}");
        assert_eq!(
            int(b, "constant_administrations", rows[0]),
            n,
            "{model} {test} {dim} {set}"
        );
    }
}

/// stored-answers.md 2.3: after the label only `.`, `!` and whitespace may follow, newlines
/// included, so a second line of only those is read; a second line with anything else is not.
#[test]
fn lenient_rule_reads_a_second_line_of_only_stops() {
    for reply in [
        "4. Moderately Accurate\n.",
        "4\n.",
        "4 Accurate\n!\n",
        "4.\n\n.",
    ] {
        let r = read_single_lenient(reply);
        assert_eq!((r.status, r.option), (Status::Ok, Some(4)), "{reply:?}");
    }
    for reply in [
        "4\nAccurate",
        "4. Moderately Accurate\nor 5",
        "4\n5",
        "4\n-",
    ] {
        let r = read_single_lenient(reply);
        assert_eq!(r.status, Status::NotANumber, "{reply:?}");
    }
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The seeds of the claims that must hold beyond the committed study (docs/simulation.md).
const FIVE_SEEDS: [u64; 5] = [4242, 60613, 1, 7, 31337];

/// The simulated study of `seed`, written by `simulate` into a folder of `dir`.
fn simulated(dir: &std::path::Path, seed: u64) -> PathBuf {
    let out = dir.join(seed.to_string());
    let st = std::process::Command::new(env!("CARGO_BIN_EXE_protospread"))
        .args(["--quiet", "--config"])
        .arg(root().join("pipeline.toml"))
        .args(["simulate", "--seed", &seed.to_string(), "--dir"])
        .arg(&out)
        .status()
        .unwrap();
    assert!(st.success(), "simulate --seed {seed}");
    out
}

/// simulation.md ("What the inference tables must show"): on fresh studies of the five seeds,
/// every cell of the well-sampled model whose planted spread is at least
/// `inference::REQUIRED_SD` reaches p <= 0.05 in the exact permutation test, applied to its
/// ten protocol scores and its ST1 scores as the score stage computes them (the committed
/// study's test checks the same through the whole pipeline). Each seed has at least one such
/// cell.
#[test]
fn required_cells_are_significant_on_five_seeds() {
    use crate::inference::{choose, required_cells, well_sampled};
    let dir = tempfile::tempdir().unwrap();
    for seed in FIVE_SEEDS {
        let sim = crate::answers::load_sim_from(&simulated(dir.path(), seed));
        let (model, n) = well_sampled(&sim.truth);
        let required = required_cells(&sim.truth);
        assert!(!required.is_empty(), "seed {seed}: no required cell");
        let cells = crate::answers::cell_scores(&sim, &model);
        for ((m, test, dim), sd) in &required {
            let c = &cells[&(test.clone(), dim.clone())];
            assert_eq!(
                (c.protocol.len(), c.sampling.len() as u64),
                (10, n),
                "seed {seed}: {m} {test} {dim}"
            );
            let t = protospread_inference::permutation_test(&c.protocol, &c.sampling).unwrap();
            assert_eq!(t.splits, choose(10 + n, n));
            eprintln!(
                "seed {seed}: {m} {test} {dim}: planted SD {sd:.3}, p = {} / {} = {:.6}",
                t.at_least,
                t.splits,
                t.p_value()
            );
            assert!(
                20 * t.at_least <= t.splits,
                "seed {seed}: {m} {test} {dim}: p = {}",
                t.p_value()
            );
        }
    }
}

/// simulation.md: on fresh studies of five more seeds, the measured condition shifts recover
/// the planted ones as the committed study's test claims: every cell within its tolerance,
/// mean absolute error against the expected shifts below 0.15, correlation with them above
/// 0.95, and correlation with the planted shifts above 0.9 over SP, B0, BS1..BS4 (SR left
/// out).
#[test]
fn planted_truth_claim_holds_on_five_seeds() {
    let dir = tempfile::tempdir().unwrap();
    for seed in FIVE_SEEDS {
        let out = simulated(dir.path(), seed);
        let rec = crate::answers::recovery(&crate::answers::load_sim_from(&out));
        eprintln!(
            "seed {seed}: {} pairs, MAE {:.4}, r {:.4}, r(planted) {:.4}, \
             r(planted, SR included) {:.4}, worst {:.2}",
            rec.pairs, rec.mae, rec.r, rec.r_planted, rec.r_planted_with_sr, rec.worst.0
        );
        assert!(rec.pairs >= 2000, "seed {seed}");
        assert!(
            rec.worst.0 <= 1.0,
            "seed {seed}: worst cell {}",
            rec.worst.1
        );
        assert!(rec.mae < 0.15, "seed {seed}: MAE {}", rec.mae);
        assert!(rec.r > 0.95, "seed {seed}: r {}", rec.r);
        assert!(
            rec.r_planted > 0.9,
            "seed {seed}: r(planted) {}",
            rec.r_planted
        );
    }
}

/// One big_five request of model `m`; `item` None = the whole test (shown in human order).
fn request(condition: &str, sample: i32, item: Option<i32>, reply: &str) -> StoredRecord {
    protospread_testutils::local_request("big_five", 50, condition, sample, item, reply)
}

/// stored-answers.md 3: `parsed_answers.lenient_status` is the lenient rule's status of each
/// item, beside the strict `status`: for every reply of the two-rule table (single items), for
/// whole-test replies with every status, and for a failed request.
#[test]
fn parsed_answers_carry_the_lenient_status_of_each_item() {
    let mut lines: Vec<String> = (1..=50).map(|p| format!("{p}: 3")).collect();
    lines[0] = "1: 4. Moderately Accurate".into();
    lines[1] = "2: 6. Very Accurate".into();
    lines[2] = "3: 7".into();
    lines[4] = "Here position 5 is left out.".into();
    lines[5] = "6: 2\n6: 2".into();
    lines[6] = "7: Agree".into();
    let mixed = lines.join("\n");
    let only_missing: String = (1..=50)
        .filter(|p| *p != 9)
        .map(|p| format!("{p}. 4\n"))
        .collect();
    let whole = [mixed.as_str(), only_missing.as_str(), "No answers today."];
    let mut records = Vec::new();
    for (k, reply) in whole.iter().enumerate() {
        records.push(request("B0", k as i32 + 1, None, reply));
    }
    for (k, (reply, _, _)) in crate::rules::TABLE.iter().enumerate() {
        records.push(request("S0", k as i32 + 1, Some(1), reply));
    }
    let failed = crate::rules::TABLE.len() as i32 + 1;
    let mut f = request("S0", failed, Some(1), "4. Moderately Accurate");
    f.error = Some("HTTP 503".into());
    records.push(f);
    let key = ScoringKey::load(&root().join("data/scoring_key.csv")).unwrap();
    let (parsed, _, _) = parse_and_score(
        "t",
        None,
        &records,
        &Vocabulary::default(),
        &key,
        &Norms::default(),
    )
    .unwrap();
    let mut seen = BTreeMap::new();
    for p in &parsed {
        let k = p.sample as usize - 1;
        let expected = match (p.condition.as_str(), p.shown_position) {
            ("B0", Some(pos)) => read_whole_lenient(whole[k], 50)[pos as usize - 1].status,
            _ if p.sample == failed => Status::RequestFailed,
            _ => read_single_lenient(crate::rules::TABLE[k].0).status,
        };
        assert_eq!(
            p.lenient_status, expected,
            "{} sample {} item {}",
            p.condition, p.sample, p.item
        );
        *seen.entry((p.status, p.lenient_status)).or_insert(0) += 1;
    }
    assert_eq!(parsed.len(), 3 * 50 + crate::rules::TABLE.len() + 1);
    // The cases where the two rules part are among them.
    for pair in [
        (Status::NotANumber, Status::Ok),
        (Status::NotANumber, Status::OutOfRange),
        (Status::NotANumber, Status::NotANumber),
        (Status::MissingInWhole, Status::MissingInWhole),
        (Status::DuplicateInWhole, Status::DuplicateInWhole),
        (Status::OutOfRange, Status::OutOfRange),
        (Status::RequestFailed, Status::RequestFailed),
    ] {
        assert!(seen.contains_key(&pair), "{pair:?}: {seen:?}");
    }
}
