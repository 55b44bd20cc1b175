//! The simulated study: stored answers with the published design and planted effects.
//!
//! The generative model is described in docs/simulation.md; the names here follow it. Every
//! record carries `label = "simulated"`, the study name and every model id contain
//! "simulated". Determinism: one ChaCha20 stream per model (seeded from the seed, stream =
//! model index), normal draws built from sums of uniforms (additions only, so no libm
//! function whose last bit could differ between machines), records and truth serialized from
//! structs and `BTreeMap`s, floats rounded to 6 decimals.

use crate::SimulateError;
use protospread_format::{option_to_value, OptionOrder, CONDITIONS, FORMAT_VERSION, TESTS};
use protospread_score::{ScoringKey, Status};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

/// Version of the generative model; part of the truth file.
pub(crate) const SIMULATION_GENERATOR: &str = "protospread simulate v1";
/// The label of every simulated record.
pub const SIMULATED_LABEL: &str = "simulated";
/// The study name of every simulated record.
pub(crate) const SIMULATED_STUDY: &str = "questionnaire-protocol-sensitivity-simulated";
/// File names written by [`write`].
pub const SIMULATED_ANSWERS_FILE: &str = "simulated_answers.jsonl";
/// File name of the planted truth (JSON).
pub const SIMULATED_TRUTH_FILE: &str = "simulated_truth.json";

/// Item order seeds of BS1..BS4 (the same for every model and test).
pub(crate) const SHUFFLE_SEEDS: [(&str, i64); 4] = [("BS1", 1), ("BS2", 2), ("BS3", 3), ("BS4", 4)];

/// Standard deviations and ranges of the generative model (docs/simulation.md).
pub(crate) mod params {
    /// Trait level of a model on a scale, keyed 0..4 units: uniform on [LO, HI].
    pub(crate) const TRAIT_LO: f64 = 0.8;
    /// Upper bound of the trait level.
    pub(crate) const TRAIT_HI: f64 = 3.2;
    /// Per model and item deviation from the trait level.
    pub(crate) const ITEM_SD: f64 = 0.5;
    /// Condition shifts per model, test and scale.
    pub(crate) const SR_SD: f64 = 0.3;
    /// Condition shift SD of the single-item paraphrase (SP).
    pub(crate) const SP_SD: f64 = 0.5;
    /// Condition shift SD of the whole-test mode.
    pub(crate) const WHOLE_SD: f64 = 0.6;
    /// Condition shift SD of the item shuffles (BS1..BS4).
    pub(crate) const SHUFFLE_SD: f64 = 0.35;
    /// Option-order bias (towards lower option numbers), uniform on [0, BIAS_MAX].
    pub(crate) const BIAS_MAX: f64 = 0.5;
    /// Temperature-1 noise per reply.
    pub(crate) const ST1_SD: f64 = 0.35;
    /// Rerun noise of the one model whose endpoint does not honour temperature 0.
    pub(crate) const JITTER_SD: f64 = 0.3;
}

/// Scoring direction of one item, as the scoring key gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemInfo {
    /// Test (instrument) name.
    pub test: String,
    /// Human item number.
    pub item: i32,
    /// Dimension the item scores.
    pub dimension: String,
    /// Whether the item is reverse-keyed.
    pub reverse: bool,
}

/// The item map of the four study tests from the scoring key (dimension names and reverse
/// flags), in (test, item) order. Every item 1..=N of each test must be in the key.
pub fn item_map(key: &ScoringKey) -> Result<Vec<ItemInfo>, SimulateError> {
    let mut out = Vec::new();
    for (t, n) in TESTS {
        let err = |m: String| SimulateError::Key {
            test: t.to_string(),
            message: m,
        };
        let tk = key
            .test(t)
            .ok_or_else(|| err("not in the scoring key".into()))?;
        let mut items: Vec<ItemInfo> = tk
            .items
            .iter()
            .map(|k| ItemInfo {
                test: t.to_string(),
                item: k.item as i32,
                dimension: tk.dims[k.dim].name.clone(),
                reverse: k.reverse,
            })
            .collect();
        items.sort_by_key(|x| x.item);
        if items.iter().map(|x| x.item).collect::<Vec<_>>() != (1..=n as i32).collect::<Vec<_>>() {
            return Err(err(format!("the key must list items 1..={n} once each")));
        }
        out.extend(items);
    }
    Ok(out)
}

/// A simulated model and what is planted in it.
#[derive(Debug, Clone, Serialize)]
pub struct SimModel {
    /// Model id.
    pub model: String,
    /// `api`, `cli` or `local`.
    pub arm: String,
    /// Cohort, if any.
    pub cohort: Option<String>,
    /// Option-order bias: the latent option number is lowered by this much.
    pub option_bias: f64,
    /// True for the endpoint that does not honour temperature 0 (reruns differ).
    pub rerun_jitter: bool,
    /// True for the model that answers the middle option to everything.
    pub constant: bool,
    /// A test this model never received.
    pub skips_test: Option<String>,
    /// Single-item SP (instruction P2) requests answered in words, not an option number.
    pub paraphrase_unreadable: usize,
    /// True for the model whose ST1 condition is sampled more often than the published design
    /// (so that its cells' permutation tests have the power to recover planted effects).
    pub well_sampled: bool,
    /// ST1 (temperature 1) samples per single item: 3 as published, more for the
    /// well-sampled model, 0 where ST1 is not administered.
    pub st1_samples: i32,
    /// Conditions administered.
    pub conditions: Vec<String>,
    /// Requests written.
    pub requests: usize,
}

/// Planted truth for one model and scale.
#[derive(Debug, Clone, Serialize)]
pub struct SimScale {
    /// Model id.
    pub model: String,
    /// Test name.
    pub test: String,
    /// Dimension (scale).
    pub dimension: String,
    /// Trait level in keyed 0..4 item units.
    #[serde(rename = "trait")]
    pub trait_level: f64,
    /// Condition shift in keyed item units, per condition (S0, S0r, ST1 are 0).
    pub shift: BTreeMap<String, f64>,
}

/// The keyed latent level of one item for one model (trait level plus item deviation), before
/// condition shifts, option-order bias and noise.
#[derive(Debug, Clone, Serialize)]
pub struct SimItem {
    /// Model id.
    pub model: String,
    /// Test name.
    pub test: String,
    /// Human item number.
    pub item: i32,
    /// Latent keyed level of the item.
    pub level: f64,
}

/// One planted non-ok reading: the parser must report exactly these.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Planted {
    /// Model id.
    pub model: String,
    /// Condition code.
    pub condition: String,
    /// 1-based sample index.
    pub sample: i32,
    /// Test name.
    pub test: String,
    /// Human item number.
    pub item: i32,
    /// Status the parser must report.
    pub status: String,
}

/// Everything planted; written as the truth file.
#[derive(Debug, Clone, Serialize)]
pub struct Truth {
    /// Generator name and version.
    pub generator: String,
    /// Seed of the generator.
    pub seed: u64,
    /// Label of every simulated record.
    pub label: String,
    /// Study name of every simulated record.
    pub study: String,
    /// Generative-model parameters by name.
    pub params: BTreeMap<String, f64>,
    /// Every simulated model.
    pub models: Vec<SimModel>,
    /// Planted condition shifts per model and scale.
    pub scales: Vec<SimScale>,
    /// Keyed latent level of every item of every model.
    pub items: Vec<SimItem>,
    /// Every reading the parser must report as not ok, sorted.
    pub planted: Vec<Planted>,
    /// Count of `planted` by status.
    pub planted_counts: BTreeMap<String, usize>,
    /// Records written.
    pub records: usize,
}

/// One stored-answer record as written to JSONL (absent optional fields are left out).
#[derive(Debug, Clone, Serialize)]
struct OutRecord<'a> {
    format_version: i32,
    study: &'a str,
    model: &'a str,
    arm: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    cohort: Option<&'a str>,
    condition: &'a str,
    sample: i32,
    test: &'a str,
    mode: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    item: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    item_order: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    order_seed: Option<i64>,
    option_order: &'a str,
    instruction: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    reply: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    label: &'a str,
}

/// The generated files.
pub struct SimOutput {
    /// The stored answers (JSON Lines).
    pub answers_jsonl: Vec<u8>,
    /// The truth file (JSON).
    pub truth_json: Vec<u8>,
    /// The planted truth.
    pub truth: Truth,
}

/// Approximately standard normal: the sum of 12 uniforms minus 6 (Irwin-Hall), bounded by
/// +-6. Only additions, so bit-identical on every IEEE-754 machine.
fn normal(rng: &mut ChaCha20Rng) -> f64 {
    let mut s = 0.0;
    for _ in 0..12 {
        s += rng.gen::<f64>();
    }
    s - 6.0
}

fn r6(x: f64) -> f64 {
    let y = (x * 1e6).round() / 1e6;
    if y == 0.0 {
        0.0
    } else {
        y
    }
}

/// Round half away from zero, then clamp to the options 1..=5.
fn to_option(latent: f64) -> i32 {
    (latent.round() as i32).clamp(1, 5)
}

/// The item order of BSk for a test of `n` items (Fisher-Yates with its fixed seed).
pub(crate) fn shuffled_order(n: usize, order_seed: i64) -> Vec<i32> {
    let mut v: Vec<i32> = (1..=n as i32).collect();
    let mut rng = ChaCha20Rng::seed_from_u64(order_seed as u64);
    for i in (1..n).rev() {
        let j = rng.gen_range(0..=i as u32) as usize;
        v.swap(i, j);
    }
    v
}

const API_MODELS: usize = 13;
const PILOT: usize = 3;
const CLI_MODELS: usize = 3;
/// Roles planted in specific models (1-based api model numbers).
const SKIP_MODEL: usize = 5;
const SKIP_TEST: &str = "dark_triad";
const PARAPHRASE_MODEL: usize = 7;
const PARAPHRASE_UNREADABLE: usize = 67;
const JITTER_MODEL: usize = 9;
const FAILED_MODEL: usize = 10;
const OUT_OF_RANGE_MODEL: usize = 11;
const CONSTANT_MODEL: usize = 12;
const MISSING_LINE_MODEL: usize = 4;
const DUPLICATE_LINE_MODEL: usize = 6;
/// ST1 samples per item in the published design.
const ST1_SAMPLES: i32 = 3;
/// The model sampled more often under ST1, and how often: C(10 + 10, 10) = 184,756 splits
/// per cell, enough power that every cell with a large planted spread reaches p <= 0.05
/// (docs/simulation.md), still cheap to enumerate.
const WELL_SAMPLED_MODEL: usize = 3;
const WELL_SAMPLED_ST1: i32 = 10;
// The extra samples leave the model's other replies unchanged only if nothing after ST1 draws
// from its stream, which the rerun jitter of B0r would.
const _: () = assert!(WELL_SAMPLED_MODEL != JITTER_MODEL);

/// Words for the five human values, used in unreadable paraphrase replies (no digits).
const VALUE_WORDS: [&str; 5] = [
    "Very inaccurate - this does not describe me at all.",
    "Moderately inaccurate.",
    "Neither accurate nor inaccurate; it depends on the situation.",
    "Moderately accurate, I would say.",
    "Very accurate. That describes me well.",
];

/// Generate the simulated study for `seed` over the items of `items`.
///
/// Long on purpose: the body is the one sequence of random draws per model (levels, then the
/// paraphrase breaker, then every request in condition, sample, test and item order), and that
/// order is what makes the committed study's bytes; read top to bottom it is the generative
/// model of docs/simulation.md. The level draws and the truth file are their own functions.
pub fn simulate(seed: u64, items: &[ItemInfo]) -> Result<SimOutput, SimulateError> {
    let mut out = Vec::<u8>::new();
    let mut models = Vec::new();
    let mut scales = Vec::new();
    let mut sim_items = Vec::new();
    let mut planted = Vec::new();
    let mut n_records = 0usize;
    let by_test: BTreeMap<&str, Vec<&ItemInfo>> = TESTS
        .iter()
        .map(|(t, _)| (*t, items.iter().filter(|x| x.test == *t).collect()))
        .collect();

    for m in 0..API_MODELS + CLI_MODELS {
        let is_api = m < API_MODELS;
        let num = if is_api { m + 1 } else { m + 1 - API_MODELS };
        let name = if is_api {
            format!("simulated-api-{num:02}")
        } else {
            format!("simulated-cli-{num:02}")
        };
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        rng.set_stream(m as u64);
        let cohort = match (is_api, num <= PILOT) {
            (true, true) => Some("pilot".to_string()),
            (true, false) => Some("full".to_string()),
            _ => None,
        };
        let api = |k: usize| is_api && num == k;
        let option_bias = r6(rng.gen::<f64>() * params::BIAS_MAX);
        let style = rng.gen_range(0..5u32);
        let st1_samples = match (is_api, api(WELL_SAMPLED_MODEL)) {
            (false, _) => 0,
            (true, true) => WELL_SAMPLED_ST1,
            (true, false) => ST1_SAMPLES,
        };
        let conditions: Vec<&str> = CONDITIONS
            .iter()
            .copied()
            .filter(|c| is_api || *c != "ST1")
            .collect();
        let mut sm = SimModel {
            model: name.clone(),
            arm: if is_api { "api" } else { "cli" }.into(),
            cohort: cohort.clone(),
            option_bias,
            rerun_jitter: api(JITTER_MODEL),
            constant: api(CONSTANT_MODEL),
            skips_test: api(SKIP_MODEL).then(|| SKIP_TEST.to_string()),
            paraphrase_unreadable: if api(PARAPHRASE_MODEL) {
                PARAPHRASE_UNREADABLE
            } else {
                0
            },
            well_sampled: api(WELL_SAMPLED_MODEL),
            st1_samples,
            conditions: conditions.iter().map(|s| s.to_string()).collect(),
            requests: 0,
        };

        let skipped = if api(SKIP_MODEL) {
            Some(SKIP_TEST)
        } else {
            None
        };
        let (level, shift) = plant_levels(
            &mut rng,
            &by_test,
            &name,
            conditions.len() < CONDITIONS.len(),
            skipped,
            &mut scales,
            &mut sim_items,
        );

        // The single-item SP requests this model answers in words (the paraphrase breaker).
        let mut unreadable_sp: std::collections::BTreeSet<(&str, i32)> = Default::default();
        if api(PARAPHRASE_MODEL) {
            let mut all: Vec<(&str, i32)> =
                items.iter().map(|x| (x.test.as_str(), x.item)).collect();
            for i in (1..all.len()).rev() {
                let j = rng.gen_range(0..=i as u32) as usize;
                all.swap(i, j);
            }
            unreadable_sp.extend(all.into_iter().take(PARAPHRASE_UNREADABLE));
        }

        // Latent option for one item: keyed level + shift (+ noise), to raw, to shown option.
        let constant = sm.constant;
        let latent_option = |t: &str,
                             it: &ItemInfo,
                             cond: &str,
                             order: OptionOrder,
                             noise_sd: f64,
                             rng: &mut ChaCha20Rng|
         -> i32 {
            if constant {
                return 3;
            }
            let mut x = level[&(t, it.item)] + shift[&(t, it.dimension.as_str(), cond)];
            if noise_sd > 0.0 {
                x += noise_sd * normal(rng);
            }
            let raw = if it.reverse { 4.0 - x } else { x };
            let shown = match order {
                OptionOrder::Human => raw + 1.0,
                OptionOrder::Reversed => 5.0 - raw,
            };
            to_option(shown - option_bias)
        };

        for &cond in &conditions {
            // Samples beyond the third are drawn after it from the same stream, and the
            // conditions after ST1 draw nothing (temperature 0, no jitter) for the
            // well-sampled model, so its first three samples and everything else it
            // answers are the same as with the published three.
            let samples: Vec<i32> = if cond == "ST1" {
                (1..=st1_samples).collect()
            } else {
                vec![1]
            };
            for &sample in &samples {
                for (t, n) in TESTS {
                    if api(SKIP_MODEL) && t == SKIP_TEST {
                        continue;
                    }
                    let order = if cond == "SR" {
                        OptionOrder::Reversed
                    } else {
                        OptionOrder::Human
                    };
                    let instruction = if cond == "SP" { "P2" } else { "P1" };
                    let temperature = match (is_api, cond) {
                        (false, _) => None,
                        (true, "ST1") => Some(1.0),
                        (true, _) => Some(0.0),
                    };
                    let noise = match cond {
                        "ST1" => params::ST1_SD,
                        "S0r" | "B0r" if api(JITTER_MODEL) => params::JITTER_SD,
                        _ => 0.0,
                    };
                    let base = |mode: &'static str, reply: String| OutRecord {
                        format_version: FORMAT_VERSION,
                        study: SIMULATED_STUDY,
                        model: &name,
                        arm: if is_api { "api" } else { "cli" },
                        cohort: cohort.as_deref(),
                        condition: cond,
                        sample,
                        test: t,
                        mode,
                        item: None,
                        item_order: None,
                        order_seed: None,
                        option_order: order.as_str(),
                        instruction,
                        temperature,
                        reply,
                        error: None,
                        label: SIMULATED_LABEL,
                    };
                    let whole = cond.starts_with('B');
                    if !whole {
                        for it in &by_test[t] {
                            let opt = latent_option(t, it, cond, order, noise, &mut rng);
                            let mut rec = base("single", single_reply(style, opt));
                            rec.item = Some(it.item);
                            let mut plant = |status: Status| {
                                planted.push(Planted {
                                    model: name.clone(),
                                    condition: cond.to_string(),
                                    sample,
                                    test: t.to_string(),
                                    item: it.item,
                                    status: status.as_str().to_string(),
                                });
                            };
                            if cond == "SP" && unreadable_sp.contains(&(t, it.item)) {
                                let v = option_to_value(opt, order)
                                    .expect("generated options are 1..=5");
                                rec.reply = VALUE_WORDS[v as usize].to_string();
                                plant(Status::NotANumber);
                            } else if api(FAILED_MODEL)
                                && cond == "ST1"
                                && sample == 2
                                && t == "big_five"
                                && it.item <= 3
                            {
                                rec.reply = String::new();
                                rec.error = Some("HTTP 503 Service Unavailable after 3 attempts");
                                plant(Status::RequestFailed);
                            } else if api(OUT_OF_RANGE_MODEL)
                                && cond == "SR"
                                && t == "riasec"
                                && it.item % 15 == 0
                            {
                                rec.reply = "0".to_string();
                                plant(Status::OutOfRange);
                            }
                            emit(&mut out, &rec)?;
                            n_records += 1;
                            sm.requests += 1;
                        }
                    } else {
                        let (item_order, order_seed) =
                            match SHUFFLE_SEEDS.iter().find(|(c, _)| *c == cond) {
                                Some((_, s)) => (shuffled_order(n as usize, *s), Some(*s)),
                                None => ((1..=n as i32).collect(), None),
                            };
                        let mut lines = Vec::with_capacity(n as usize);
                        for (p, human) in item_order.iter().enumerate() {
                            let it = by_test[t][(*human - 1) as usize];
                            let opt = latent_option(t, it, cond, order, noise, &mut rng);
                            lines.push((p as i32 + 1, opt, *human));
                        }
                        let mut defect = None;
                        if api(MISSING_LINE_MODEL) && cond == "BS3" && t == "riasec" {
                            defect = Some((Status::MissingInWhole, 17));
                        }
                        if api(DUPLICATE_LINE_MODEL)
                            && cond == "BS1"
                            && t == "multiple_intelligences"
                        {
                            defect = Some((Status::DuplicateInWhole, 8));
                        }
                        if let Some((status, pos)) = defect {
                            let human = lines[(pos - 1) as usize].2;
                            planted.push(Planted {
                                model: name.clone(),
                                condition: cond.to_string(),
                                sample,
                                test: t.to_string(),
                                item: human,
                                status: status.as_str().to_string(),
                            });
                        }
                        let mut rec = base("whole", whole_reply(style, t, &lines, defect));
                        rec.item_order = Some(
                            item_order
                                .iter()
                                .map(|i| i.to_string())
                                .collect::<Vec<_>>()
                                .join(";"),
                        );
                        rec.order_seed = order_seed;
                        emit(&mut out, &rec)?;
                        n_records += 1;
                        sm.requests += 1;
                    }
                }
            }
        }
        models.push(sm);
    }
    let truth = truth(seed, models, scales, sim_items, planted, n_records);
    let mut truth_json = serde_json::to_vec_pretty(&truth).map_err(|e| SimulateError::Json {
        what: "truth",
        source: e,
    })?;
    truth_json.push(b'\n');
    Ok(SimOutput {
        answers_jsonl: out,
        truth_json,
        truth,
    })
}

/// A model's latent keyed level per item and its condition shifts per scale (drawn from
/// `rng` in a fixed order: per test, per dimension its trait, whole-test shift and condition
/// shifts, then per item its deviation), recorded in `scales` and `items` except for the
/// `skipped` test.
#[allow(clippy::type_complexity)]
fn plant_levels<'a>(
    rng: &mut ChaCha20Rng,
    by_test: &BTreeMap<&'a str, Vec<&'a ItemInfo>>,
    name: &str,
    without_st1: bool,
    skipped: Option<&str>,
    scales: &mut Vec<SimScale>,
    sim_items: &mut Vec<SimItem>,
) -> (
    BTreeMap<(&'a str, i32), f64>,
    BTreeMap<(&'a str, &'a str, &'a str), f64>,
) {
    let mut level: BTreeMap<(&str, i32), f64> = BTreeMap::new();
    let mut shift: BTreeMap<(&str, &str, &str), f64> = BTreeMap::new();
    for (t, _) in TESTS {
        let dims: std::collections::BTreeSet<&str> =
            by_test[t].iter().map(|x| x.dimension.as_str()).collect();
        for d in dims {
            let tr = params::TRAIT_LO + (params::TRAIT_HI - params::TRAIT_LO) * rng.gen::<f64>();
            let whole = params::WHOLE_SD * normal(rng);
            let mut sh = BTreeMap::new();
            for c in CONDITIONS {
                let v = match c {
                    "SR" => params::SR_SD * normal(rng),
                    "SP" => params::SP_SD * normal(rng),
                    "B0" | "B0r" => whole,
                    c if c.starts_with("BS") => whole + params::SHUFFLE_SD * normal(rng),
                    _ => 0.0,
                };
                let v = r6(v);
                sh.insert(c.to_string(), v);
                shift.insert((t, d, c), v);
            }
            let tr = r6(tr);
            for it in by_test[t].iter().filter(|x| x.dimension == d) {
                level.insert((t, it.item), tr);
            }
            if without_st1 {
                sh.remove("ST1");
            }
            if skipped != Some(t) {
                scales.push(SimScale {
                    model: name.to_string(),
                    test: t.to_string(),
                    dimension: d.to_string(),
                    trait_level: tr,
                    shift: sh,
                });
            }
        }
        for it in &by_test[t] {
            let dev = params::ITEM_SD * normal(rng);
            let l = level.get_mut(&(t, it.item)).expect("item has a level");
            *l = r6(*l + dev);
            if skipped != Some(t) {
                sim_items.push(SimItem {
                    model: name.to_string(),
                    test: t.to_string(),
                    item: it.item,
                    level: *l,
                });
            }
        }
    }
    (level, shift)
}

/// The truth file's content: everything planted, with the generator's parameters.
fn truth(
    seed: u64,
    models: Vec<SimModel>,
    scales: Vec<SimScale>,
    items: Vec<SimItem>,
    mut planted: Vec<Planted>,
    records: usize,
) -> Truth {
    planted.sort();
    let mut planted_counts = BTreeMap::new();
    for p in &planted {
        *planted_counts.entry(p.status.clone()).or_insert(0) += 1;
    }
    let params: BTreeMap<String, f64> = [
        ("trait_lo", params::TRAIT_LO),
        ("trait_hi", params::TRAIT_HI),
        ("item_sd", params::ITEM_SD),
        ("sr_sd", params::SR_SD),
        ("sp_sd", params::SP_SD),
        ("whole_sd", params::WHOLE_SD),
        ("shuffle_sd", params::SHUFFLE_SD),
        ("bias_max", params::BIAS_MAX),
        ("st1_sd", params::ST1_SD),
        ("jitter_sd", params::JITTER_SD),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    Truth {
        generator: SIMULATION_GENERATOR.into(),
        seed,
        label: SIMULATED_LABEL.into(),
        study: SIMULATED_STUDY.into(),
        params,
        models,
        scales,
        items,
        planted,
        planted_counts,
        records,
    }
}

fn emit(out: &mut Vec<u8>, rec: &OutRecord) -> Result<(), SimulateError> {
    serde_json::to_writer(&mut *out, rec).map_err(|e| SimulateError::Json {
        what: "record",
        source: e,
    })?;
    out.push(b'\n');
    Ok(())
}

/// A readable single-item reply in the model's style.
fn single_reply(style: u32, opt: i32) -> String {
    match style {
        0 => format!("{opt}"),
        1 => format!("{opt}."),
        2 => format!("{opt}\n"),
        3 => format!(" {opt}"),
        _ => format!("{opt})"),
    }
}

/// A whole-test reply: prose, then one numbered line per shown position (in the model's
/// style), optionally with one line left out or given twice.
fn whole_reply(
    style: u32,
    test: &str,
    lines: &[(i32, i32, i32)],
    defect: Option<(Status, i32)>,
) -> String {
    let intro = match style {
        0 => String::new(),
        1 => "Here are my answers:\n\n".to_string(),
        2 => format!("Sure! My answers to the {} statements:\n", lines.len()),
        3 => "Answers (statement: option)\n".to_string(),
        _ => format!("Below are my ratings for the {test} items.\n\n"),
    };
    let mut s = intro;
    for &(pos, opt, _) in lines {
        let line = match style {
            0 | 3 => format!("{pos}: {opt}\n"),
            1 => format!("{pos}. {opt}\n"),
            2 => format!("{pos}) {opt}\n"),
            _ => format!("{pos} - {opt}\n"),
        };
        match defect {
            Some((Status::MissingInWhole, p)) if p == pos => {}
            Some((Status::DuplicateInWhole, p)) if p == pos => {
                s.push_str(&line);
                let again = if opt == 5 { 4 } else { opt + 1 };
                s.push_str(&format!("{pos}: {again}\n"));
            }
            _ => s.push_str(&line),
        }
    }
    if style == 2 || style == 4 {
        s.push_str("\nLet me know if you would like me to explain any of these.");
    }
    s
}

/// Write the answers and the truth file into `dir` (created if needed), atomically.
pub fn write_simulation(dir: &Path, sim: &SimOutput) -> Result<(), SimulateError> {
    let mut staged = protospread_core::Staged::new();
    staged.put(&dir.join(SIMULATED_ANSWERS_FILE), &sim.answers_jsonl)?;
    staged.put(&dir.join(SIMULATED_TRUTH_FILE), &sim.truth_json)?;
    staged.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shuffles_are_fixed_permutations() {
        for (_, seed) in SHUFFLE_SEEDS {
            let a = shuffled_order(60, seed);
            assert_eq!(a, shuffled_order(60, seed));
            let mut s = a.clone();
            s.sort_unstable();
            assert_eq!(s, (1..=60).collect::<Vec<_>>());
            assert_ne!(a, s, "seed {seed} left the order unchanged");
        }
        assert_ne!(shuffled_order(50, 1), shuffled_order(50, 2));
    }

    #[test]
    fn normal_draws_have_unit_spread() {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let x: Vec<f64> = (0..20_000).map(|_| normal(&mut rng)).collect();
        let m = x.iter().sum::<f64>() / x.len() as f64;
        let v = x.iter().map(|a| (a - m) * (a - m)).sum::<f64>() / (x.len() - 1) as f64;
        assert!(m.abs() < 0.03, "{m}");
        assert!((v - 1.0).abs() < 0.05, "{v}");
    }

    #[test]
    fn options_round_half_away_and_clamp() {
        assert_eq!(to_option(2.5), 3);
        assert_eq!(to_option(2.49), 2);
        assert_eq!(to_option(-3.0), 1);
        assert_eq!(to_option(7.2), 5);
    }
}
