//! A small synthetic score-stage output of exactly the contract's shape, for tests of this
//! crate, the report crate and the binary. It is labelled "fixture"/"recorded-fixture" and is
//! never part of a real run.
//!
//! Planted features: one model skips a test (its cells are dropped as "test not
//! administered"), one incomplete administration (one dropped cell), one cell whose three
//! temperature-1 samples are identical (sampling SD 0), one model whose SP replies are partly
//! unreadable, one constant-answer administration, a command-line model without temperature-1
//! samples (kept, no sampling SD), a second source in another arm.
//!
//! Scores are integers 0..100 as the scorer gives them, and `z` is computed from the fixture's
//! human norms (`norms.parquet`, [`NORMS`]) exactly as the score stage does: `(score - mean) / sd`.

use arrow::array::{ArrayRef, BooleanArray, Float64Array, Int32Array, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use std::path::Path;
use std::sync::Arc;

/// Conditions in the order they are generated.
pub const CONDITIONS: &[&str] = &[
    "S0", "S0r", "SR", "SP", "ST1", "B0", "B0r", "BS1", "BS2", "BS3", "BS4",
];

/// A scale-score row as in `scale_scores.parquet`.
#[derive(Debug, Clone, PartialEq)]
pub struct FxScore {
    pub source: String,
    pub label: String,
    pub model: String,
    pub arm: String,
    pub cohort: Option<String>,
    pub condition: String,
    pub sample: i32,
    pub test: String,
    pub dimension: String,
    pub score: Option<f64>,
    pub complete: bool,
    pub z: Option<f64>,
    pub constant_answers: bool,
}

/// A parsed-answer row as in `parsed_answers.parquet`.
#[derive(Debug, Clone, PartialEq)]
pub struct FxAnswer {
    pub source: String,
    pub label: String,
    pub model: String,
    pub arm: String,
    pub cohort: Option<String>,
    pub condition: String,
    pub sample: i32,
    pub test: String,
    pub mode: String,
    pub item: i32,
    pub status: String,
}

/// Human norms of the fixture's scales: (test, dimension, mean, sd).
pub const NORMS: &[(&str, &str, f64, f64)] = &[
    ("big_five", "Extraversion", 52.25, 12.5),
    ("big_five", "Neuroticism", 47.5, 15.0),
    ("big_five", "Openness", 61.0, 9.75),
    ("riasec", "Realistic", 40.5, 18.0),
    ("riasec", "Social", 55.0, 11.0),
];

/// The human mean and SD of a scale of the fixture.
pub fn norm(test: &str, dimension: &str) -> (f64, f64) {
    NORMS
        .iter()
        .find(|n| n.0 == test && n.1 == dimension)
        .map(|n| (n.2, n.3))
        .expect("every fixture scale has a norm")
}

/// A model's score for a target distance from the human mean: the nearest integer 0..100,
/// and its z as the score stage computes it.
pub fn score_and_z(test: &str, dimension: &str, target_z: f64) -> (f64, f64) {
    let (mean, sd) = norm(test, dimension);
    let score = (mean + sd * target_z).round().clamp(0.0, 100.0);
    (score, (score - mean) / sd)
}

/// Deterministic pseudo-random numbers in [0, 1) (64-bit LCG), so the fixture needs no
/// random-number crate and never changes.
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

struct Model {
    source: &'static str,
    label: &'static str,
    name: &'static str,
    arm: &'static str,
    cohort: Option<&'static str>,
}

const MODELS: &[Model] = &[
    Model {
        source: "fx",
        label: "fixture",
        name: "api-a",
        arm: "api",
        cohort: Some("pilot"),
    },
    Model {
        source: "fx",
        label: "fixture",
        name: "api-b",
        arm: "api",
        cohort: Some("pilot"),
    },
    Model {
        source: "fx",
        label: "fixture",
        name: "api-c",
        arm: "api",
        cohort: Some("full"),
    },
    Model {
        source: "fx",
        label: "fixture",
        name: "api-d",
        arm: "api",
        cohort: Some("full"),
    },
    Model {
        source: "fx",
        label: "fixture",
        name: "api-e",
        arm: "api",
        cohort: Some("full"),
    },
    Model {
        source: "fx",
        label: "fixture",
        name: "cli-x",
        arm: "cli",
        cohort: None,
    },
    Model {
        source: "fx",
        label: "fixture",
        name: "cli-y",
        arm: "cli",
        cohort: None,
    },
    Model {
        source: "rx",
        label: "recorded-fixture",
        name: "local-1",
        arm: "local",
        cohort: None,
    },
];

/// (test, dimensions, items per test); items are split evenly over the dimensions.
const TESTS: &[(&str, &[&str], i32)] = &[
    ("big_five", &["Extraversion", "Neuroticism", "Openness"], 6),
    ("riasec", &["Realistic", "Social"], 4),
];

fn mode_of(condition: &str) -> &'static str {
    if condition.starts_with('B') {
        "whole"
    } else {
        "single"
    }
}

/// The fixture rows, in generation order (not sorted: the stage must sort).
pub fn rows() -> (Vec<FxScore>, Vec<FxAnswer>) {
    let mut rng = Lcg(20240611);
    let mut scores = Vec::new();
    let mut answers = Vec::new();
    for (mi, m) in MODELS.iter().enumerate() {
        for (ti, (test, dims, items)) in TESTS.iter().enumerate() {
            if m.name == "api-e" && *test == "riasec" {
                continue; // planted: a model that skipped a test
            }
            for cond in CONDITIONS {
                if m.name == "cli-y" && *cond == "ST1" {
                    continue; // planted: a command-line model without temperature-1 samples
                }
                let samples = if *cond == "ST1" { 3 } else { 1 };
                for sample in 0..samples {
                    let constant = m.name == "api-b" && *cond == "BS2" && *test == "big_five";
                    for item in 1..=*items {
                        let status = if m.name == "api-c" && *cond == "SP" && item % 3 == 0 {
                            "not_a_number"
                        } else if m.name == "api-d"
                            && *cond == "B0r"
                            && *test == "riasec"
                            && item == 2
                        {
                            "missing_in_whole"
                        } else {
                            "ok"
                        };
                        answers.push(FxAnswer {
                            source: m.source.into(),
                            label: m.label.into(),
                            model: m.name.into(),
                            arm: m.arm.into(),
                            cohort: m.cohort.map(Into::into),
                            condition: cond.to_string(),
                            sample,
                            test: test.to_string(),
                            mode: mode_of(cond).into(),
                            item,
                            status: status.into(),
                        });
                    }
                    for (di, dim) in dims.iter().enumerate() {
                        // A trait level per model and scale, a shift per condition, small noise.
                        let level = (mi as f64 - 3.0) * 0.3 + di as f64 * 0.2 - ti as f64 * 0.1;
                        let shift = match *cond {
                            "SR" => 0.4,
                            "SP" => -0.3,
                            "B0" | "B0r" => 0.5,
                            c if c.starts_with("BS") => 0.6 + 0.1 * (c.as_bytes()[2] - b'0') as f64,
                            _ => 0.0,
                        };
                        let noise_scale = if *cond == "ST1" { 0.25 } else { 0.02 };
                        let mut z = level
                            + shift * (1.0 + di as f64 * 0.5)
                            + noise_scale * (rng.next() - 0.5);
                        if *cond == "S0r" && mi % 2 == 0 {
                            z = level; // an exact rerun for half the models
                        }
                        if *cond == "S0" {
                            z = level;
                        }
                        if m.name == "api-a" && *dim == "Openness" && *cond == "ST1" {
                            z = level + 0.1; // planted: identical samples, sampling SD 0
                        }
                        let incomplete = (m.name == "api-d"
                            && *cond == "B0r"
                            && *test == "riasec"
                            && *dim == "Realistic")
                            || (m.name == "api-c"
                                && *cond == "SP"
                                && *test == "big_five"
                                && *dim == "Neuroticism");
                        let (score, z) = score_and_z(test, dim, z);
                        scores.push(FxScore {
                            source: m.source.into(),
                            label: m.label.into(),
                            model: m.name.into(),
                            arm: m.arm.into(),
                            cohort: m.cohort.map(Into::into),
                            condition: cond.to_string(),
                            sample,
                            test: test.to_string(),
                            dimension: dim.to_string(),
                            score: (!incomplete).then_some(score),
                            complete: !incomplete,
                            z: (!incomplete).then_some(z),
                            constant_answers: constant,
                        });
                    }
                }
            }
        }
    }
    // Generation order is model-major; reverse it so a reader cannot rely on file order.
    scores.reverse();
    answers.reverse();
    (scores, answers)
}

fn s(v: impl Iterator<Item = String>) -> ArrayRef {
    Arc::new(StringArray::from(v.collect::<Vec<_>>()))
}
fn so(v: impl Iterator<Item = Option<String>>) -> ArrayRef {
    Arc::new(StringArray::from(v.collect::<Vec<_>>()))
}

/// The scale-score batch with the contract's schema.
pub fn scores_batch(rows: &[FxScore]) -> RecordBatch {
    let schema = protospread_core::tables::scale_scores_schema();
    let cols: Vec<ArrayRef> = vec![
        s(rows.iter().map(|r| r.source.clone())),
        s(rows.iter().map(|r| r.label.clone())),
        s(rows.iter().map(|_| "questionnaire".to_string())),
        s(rows.iter().map(|r| r.model.clone())),
        s(rows.iter().map(|r| r.arm.clone())),
        so(rows.iter().map(|r| r.cohort.clone())),
        s(rows.iter().map(|r| r.condition.clone())),
        Arc::new(Int32Array::from(
            rows.iter().map(|r| r.sample).collect::<Vec<_>>(),
        )),
        s(rows.iter().map(|r| r.test.clone())),
        s(rows.iter().map(|r| r.dimension.clone())),
        Arc::new(Float64Array::from(
            rows.iter()
                .map(|r| if r.condition == "ST1" { 1.0 } else { 0.0 })
                .collect::<Vec<_>>(),
        )),
        Arc::new(Float64Array::from(
            rows.iter().map(|r| r.score).collect::<Vec<_>>(),
        )),
        Arc::new(BooleanArray::from(
            rows.iter().map(|r| r.complete).collect::<Vec<_>>(),
        )),
        Arc::new(Int32Array::from(rows.iter().map(|_| 2).collect::<Vec<_>>())),
        Arc::new(Int32Array::from(
            rows.iter()
                .map(|r| if r.complete { 2 } else { 1 })
                .collect::<Vec<_>>(),
        )),
        Arc::new(Float64Array::from(
            rows.iter().map(|r| r.z).collect::<Vec<_>>(),
        )),
        Arc::new(Float64Array::from(
            rows.iter().map(|r| r.z.map(|_| 50.0)).collect::<Vec<_>>(),
        )),
        Arc::new(BooleanArray::from(
            rows.iter().map(|r| r.constant_answers).collect::<Vec<_>>(),
        )),
    ];
    RecordBatch::try_new(schema, cols).expect("fixture schema")
}

/// The parsed-answer batch with the contract's schema.
pub fn answers_batch(rows: &[FxAnswer]) -> RecordBatch {
    let schema = protospread_core::tables::parsed_answers_schema();
    let ok = |r: &FxAnswer| r.status == "ok";
    let cols: Vec<ArrayRef> = vec![
        s(rows.iter().map(|r| r.source.clone())),
        s(rows.iter().map(|r| r.label.clone())),
        s(rows.iter().map(|_| "questionnaire".to_string())),
        s(rows.iter().map(|r| r.model.clone())),
        s(rows.iter().map(|r| r.arm.clone())),
        so(rows.iter().map(|r| r.cohort.clone())),
        s(rows.iter().map(|r| r.condition.clone())),
        Arc::new(Int32Array::from(
            rows.iter().map(|r| r.sample).collect::<Vec<_>>(),
        )),
        s(rows.iter().map(|r| r.test.clone())),
        s(rows.iter().map(|r| r.mode.clone())),
        Arc::new(Int32Array::from(
            rows.iter().map(|r| r.item).collect::<Vec<_>>(),
        )),
        Arc::new(Int32Array::from(
            rows.iter()
                .map(|r| (r.mode == "whole").then_some(r.item))
                .collect::<Vec<_>>(),
        )),
        Arc::new(Int32Array::from(
            rows.iter().map(|r| ok(r).then_some(3)).collect::<Vec<_>>(),
        )),
        Arc::new(Int32Array::from(
            rows.iter().map(|r| ok(r).then_some(2)).collect::<Vec<_>>(),
        )),
        s(rows.iter().map(|r| r.status.clone())),
    ];
    RecordBatch::try_new(schema, cols).expect("fixture schema")
}

/// The norms batch (the columns of `norms.parquet` that later stages read).
pub fn norms_batch() -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("test", DataType::Utf8, false),
        Field::new("dimension", DataType::Utf8, false),
        Field::new("n", DataType::Int64, false),
        Field::new("mean", DataType::Float64, false),
        Field::new("sd", DataType::Float64, false),
    ]));
    let cols: Vec<ArrayRef> = vec![
        s(NORMS.iter().map(|n| n.0.to_string())),
        s(NORMS.iter().map(|n| n.1.to_string())),
        Arc::new(Int64Array::from(vec![100; NORMS.len()])),
        Arc::new(Float64Array::from(
            NORMS.iter().map(|n| n.2).collect::<Vec<_>>(),
        )),
        Arc::new(Float64Array::from(
            NORMS.iter().map(|n| n.3).collect::<Vec<_>>(),
        )),
    ];
    RecordBatch::try_new(schema, cols).expect("fixture schema")
}

/// Write `scale_scores.parquet`, `parsed_answers.parquet`, `norms.parquet` and an empty
/// `reply_rules.parquet` of the fixture into `score_dir`.
pub fn write(score_dir: &Path) -> Result<(), protospread_core::CoreError> {
    let (s, a) = rows();
    let sb = scores_batch(&s);
    let ab = answers_batch(&a);
    let nb = norms_batch();
    protospread_core::pq::write(&score_dir.join("scale_scores.parquet"), sb.schema(), &[sb])?;
    protospread_core::pq::write(
        &score_dir.join("parsed_answers.parquet"),
        ab.schema(),
        &[ab],
    )?;
    protospread_core::pq::write(&score_dir.join("norms.parquet"), nb.schema(), &[nb])?;
    let rb = RecordBatch::new_empty(protospread_core::tables::reply_rules_schema());
    protospread_core::pq::write(&score_dir.join("reply_rules.parquet"), rb.schema(), &[rb])?;
    Ok(())
}
