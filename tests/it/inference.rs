//! The statistics of docs/statistics.md ("Inference") on cells and sweeps small enough to check
//! by hand: every split of a cell enumerated here, independently of the crate's enumeration.

use protospread_inference::{cochran_q, mcnemar_exact, permutation_test};

/// Exact sample variance as a fraction (num, den) of `v` (divisor n - 1).
fn var(v: &[i64]) -> (i128, i128) {
    let n = v.len() as i128;
    let s: i128 = v.iter().map(|&x| i128::from(x)).sum();
    let q: i128 = v.iter().map(|&x| i128::from(x) * i128::from(x)).sum();
    (n * q - s * s, n * (n - 1))
}

/// The statistic's rank key: 0 for 0/0, 1 with the exact ratio for a finite one, 2 for +inf.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Key {
    Undefined,
    Finite(i128, i128),
    Infinite,
}

fn key(p: &[i64], s: &[i64]) -> Key {
    let ((a, b), (c, d)) = (var(p), var(s));
    match (a, c) {
        (0, 0) => Key::Undefined,
        (_, 0) => Key::Infinite,
        _ => Key::Finite(a * d, b * c),
    }
}

fn at_least(x: Key, y: Key) -> bool {
    match (x, y) {
        (_, Key::Undefined) => true,
        (Key::Undefined, _) => false,
        (Key::Infinite, _) => true,
        (Key::Finite(..), Key::Infinite) => false,
        // a/b >= c/d with positive denominators.
        (Key::Finite(a, b), Key::Finite(c, d)) => a * d >= c * b,
    }
}

/// (splits, splits at least the observed, splits equal to it, splits with a protocol variance
/// above the sampling variance) over every choice of three of the thirteen scores as the sampling
/// scores: three nested loops.
fn by_hand(protocol: &[i64], sampling: &[i64]) -> (u64, u64, u64, u64) {
    assert_eq!((protocol.len(), sampling.len()), (10, 3));
    let all: Vec<i64> = protocol.iter().chain(sampling).copied().collect();
    let observed = key(protocol, sampling);
    let (mut n, mut ge, mut eq, mut gt) = (0, 0, 0, 0);
    for i in 0..13 {
        for j in i + 1..13 {
            for k in j + 1..13 {
                let s = [all[i], all[j], all[k]];
                let p: Vec<i64> = (0..13)
                    .filter(|&x| x != i && x != j && x != k)
                    .map(|x| all[x])
                    .collect();
                let st = key(&p, &s);
                n += 1;
                ge += u64::from(at_least(st, observed));
                eq += u64::from(at_least(st, observed) && at_least(observed, st));
                let ((a, b), (c, d)) = (var(&p), var(&s));
                gt += u64::from(a * d > c * b);
            }
        }
    }
    (n, ge, eq, gt)
}

fn check(protocol: &[i64], sampling: &[i64], want: (u64, u64, u64, u64)) {
    let hand = by_hand(protocol, sampling);
    assert_eq!(hand, want, "hand count of {protocol:?} / {sampling:?}");
    let t = permutation_test(protocol, sampling).unwrap();
    assert_eq!(
        (t.splits, t.at_least, t.protocol_gt),
        (hand.0, hand.1, hand.3)
    );
    assert_eq!(t.p_value(), hand.1 as f64 / 286.0);
}

/// A cell of ten setups and three samples: the protocol scores spread over 41..73, the samples
/// at 57..60. Of the 286 splits, 4 have a variance ratio at least the observed one (the
/// observed split among them, no tie): p = 4/286 = 0.013986.
#[test]
fn a_cell_by_hand() {
    check(
        &[62, 48, 70, 55, 41, 66, 59, 73, 50, 45],
        &[58, 60, 57],
        (286, 4, 1, 166),
    );
}

/// Sampling variance 0 and protocol variance > 0: the observed statistic is +infinity, and the
/// only split with a zero sampling variance is the observed one (50 occurs only three times):
/// p = 1/286.
#[test]
fn a_cell_with_zero_sampling_variance() {
    check(
        &[0, 10, 20, 30, 40, 60, 70, 80, 90, 100],
        &[50, 50, 50],
        (286, 1, 1, 170),
    );
}

/// Ties: the sampling scores 20, 30, 40 occur again among the protocol scores, so choosing each
/// from either copy gives the same split: 2^3 = 8 splits equal the observed statistic, and all
/// of them count (p = 38/286).
#[test]
fn a_cell_with_ties() {
    check(
        &[20, 30, 40, 0, 100, 0, 100, 50, 50, 50],
        &[20, 30, 40],
        (286, 38, 8, 165),
    );
}

/// 0/0 does not exceed: in ten 50s and three 60s, choosing the three 60s as sampling leaves
/// both parts constant (0/0); it is the one split of 286 that does not count against the
/// finite observed statistic (p = 285/286). A cell whose split is 0/0 itself has p = 1.
#[test]
fn a_split_of_zero_over_zero_does_not_exceed() {
    let mut p = vec![50; 9];
    p.push(60);
    check(&p, &[60, 60, 50], (286, 285, 30, 120));
    check(&[50; 10], &[60, 60, 60], (286, 286, 1, 120));
}

/// A constructed sweep: 8 documents under 3 delimiters, outcomes written out. Column totals
/// (right per delimiter) 7, 4, 2; row totals (delimiters right per document) 3,2,2,1,1,1,2,1;
/// N = 13. Q = (k - 1)(k sum C^2 - N^2) / (k N - sum R^2) = 2 (3 x 69 - 169) / (39 - 25)
/// = 76 / 14 = 5.428571; p = P(chi2(2) >= Q) = exp(-Q/2) = 0.066252. Best (7) against worst
/// (2): b = 5 documents right under the best only, c = 0: McNemar p = 2 / 2^5 = 0.0625.
#[test]
fn cochran_and_mcnemar_on_a_constructed_sweep() {
    let docs: [[bool; 3]; 8] = [
        [true, true, true],
        [true, true, false],
        [true, true, false],
        [true, false, false],
        [true, false, false],
        [true, false, false],
        [true, false, true],
        [false, true, false],
    ];
    let cols: Vec<u64> = (0..3)
        .map(|j| docs.iter().filter(|d| d[j]).count() as u64)
        .collect();
    let rows: Vec<u64> = docs
        .iter()
        .map(|d| d.iter().filter(|&&x| x).count() as u64)
        .collect();
    assert_eq!(cols, [7, 4, 2]);
    assert_eq!(rows, [3, 2, 2, 1, 1, 1, 2, 1]);
    let q = cochran_q(&cols, &rows).unwrap();
    assert!((q.q - 76.0 / 14.0).abs() < 1e-15, "{}", q.q);
    assert!((q.p_value - (-38.0f64 / 14.0).exp()).abs() < 1e-15);
    let b = docs.iter().filter(|d| d[0] && !d[2]).count() as u64;
    let c = docs.iter().filter(|d| !d[0] && d[2]).count() as u64;
    assert_eq!((b, c), (5, 0));
    assert_eq!(mcnemar_exact(b, c), 0.0625);
}

// ---- the tables on the embedded data ------------------------------------------------------

use arrow::array::RecordBatch;
use protospread_testutils::{bools, floats, ints, read_table as read, strs};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn protospread(out: &Path, args: &[&str]) {
    let o = Command::new(env!("CARGO_BIN_EXE_protospread"))
        .current_dir(repo())
        .args(["--quiet", "--out", out.to_str().unwrap()])
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Every file of a folder, by name, with its bytes.
fn folder_bytes(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fs_err::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                fs_err::read(&p).unwrap(),
            )
        })
        .collect()
}

/// The SD of the planted condition shifts of a cell over the ten protocol conditions (keyed
/// item points), from the truth file.
pub(crate) fn planted_spread(truth: &serde_json::Value) -> BTreeMap<(String, String, String), f64> {
    const PROTOCOL: [&str; 10] = [
        "S0", "S0r", "SR", "SP", "B0", "B0r", "BS1", "BS2", "BS3", "BS4",
    ];
    let mut out = BTreeMap::new();
    for sc in truth["scales"].as_array().unwrap() {
        let x: Vec<f64> = PROTOCOL
            .iter()
            .map(|c| sc["shift"][c].as_f64().unwrap())
            .collect();
        let m = x.iter().sum::<f64>() / 10.0;
        let sd = (x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / 9.0).sqrt();
        let s = |k: &str| sc[k].as_str().unwrap().to_string();
        out.insert((s("model"), s("test"), s("dimension")), sd);
    }
    out
}

/// The pipeline on the embedded data: the inference tables are there, the same bytes for 1, 3
/// and 8 partitions, the planted effects are recovered (docs/simulation.md says which cells
/// must be significant), and the recorded sweep's paired tests match a computation from its
/// records.
#[test]
fn inference_tables_on_the_embedded_study() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    protospread(&out, &["run"]);
    let agg = out.join("aggregate");
    let first = folder_bytes(&agg);
    for t in [
        "cell_tests",
        "cell_tests_by_group",
        "headline_interval",
        "error_bars",
        "ranking",
        "sweep_significance",
        "sweep_ranking",
    ] {
        assert!(first.contains_key(&format!("{t}.parquet")), "no {t}");
        assert!(
            out.join("report").join(format!("{t}.csv")).is_file(),
            "no {t}.csv in out/report"
        );
    }
    for parts in ["1", "3", "8"] {
        protospread(&out, &["aggregate", "--partitions", parts]);
        let again = folder_bytes(&agg);
        for (name, bytes) in &first {
            assert!(
                again.get(name) == Some(bytes),
                "{name} differs with {parts} partitions"
            );
        }
        assert_eq!(again.len(), first.len());
    }

    // Planted effects.
    let truth: serde_json::Value = serde_json::from_str(
        &fs_err::read_to_string(repo().join("data/simulated/simulated_truth.json")).unwrap(),
    )
    .unwrap();
    let spread = planted_spread(&truth);
    let ct = read(&agg.join("cell_tests.parquet"));
    let (src, model, test, dim) = (
        strs(&ct, "source"),
        strs(&ct, "model"),
        strs(&ct, "test"),
        strs(&ct, "dimension"),
    );
    let (at_least, splits, p05) = (
        ints(&ct, "splits_at_least"),
        ints(&ct, "splits"),
        bools(&ct, "p_le_0_05"),
    );
    // Cell level: every required cell of the well-sampled model is tested, with all
    // C(10 + N, N) splits, and reaches p <= 0.05.
    let (well, n_st1) = well_sampled(&truth);
    let required = required_cells(&truth);
    assert!(!required.is_empty());
    let mut found = BTreeSet::new();
    // Study level (docs/simulation.md), over the cells with the published three samples: far
    // more reach p <= 0.05 than the at most 5% the null allows, and more of them among cells
    // with a large planted spread than a small.
    let (mut tested, mut significant) = (0, 0);
    let (mut large, mut large_sig, mut small, mut small_sig) = (0, 0, 0, 0);
    for r in 0..ct.num_rows() {
        if src[r] != "simulated_answers" {
            continue;
        }
        let cell = (model[r].clone(), test[r].clone(), dim[r].clone());
        if model[r] == well {
            assert_eq!(splits[r] as u64, choose(10 + n_st1, n_st1), "{cell:?}");
            if let Some(sd) = required.get(&cell) {
                eprintln!(
                    "required {cell:?}: planted SD {sd:.3}, p = {} / {}",
                    at_least[r], splits[r]
                );
                assert!(p05[r] && 20 * at_least[r] <= splits[r], "{cell:?}");
                found.insert(cell);
            }
            continue;
        }
        assert_eq!(splits[r], 286, "{cell:?}");
        if model[r] == "simulated-api-12" {
            // Constant answers: every score equal, every split 0/0: p = 1.
            assert_eq!(at_least[r], 286, "{} {}", test[r], dim[r]);
            continue;
        }
        let sd = spread[&cell];
        tested += 1;
        significant += usize::from(p05[r]);
        if sd >= LARGE_SD {
            large += 1;
            large_sig += usize::from(p05[r]);
        } else if sd < SMALL_SD {
            small += 1;
            small_sig += usize::from(p05[r]);
        }
    }
    eprintln!(
        "p <= 0.05 in {significant} of {tested} cells; planted SD >= {LARGE_SD}: \
         {large_sig} of {large}; < {SMALL_SD}: {small_sig} of {small}"
    );
    assert_eq!(
        found,
        required.keys().cloned().collect::<BTreeSet<_>>(),
        "a required cell is not tested"
    );
    assert!(significant * 10 >= tested, "{significant} of {tested}");
    assert!(large >= 30 && small >= 30, "{large} large, {small} small");
    assert!(
        large_sig * small > 2 * small_sig * large,
        "{large_sig}/{large} vs {small_sig}/{small}"
    );
    let hi = read(&agg.join("headline_interval.parquet"));
    let null = floats(&hi, "null_expected_share");
    let low = floats(&hi, "share_low");
    assert!(low[0] > null[0], "interval {} vs null {}", low[0], null[0]);

    // The headline's interval holds its estimate; the sweep's paired tests from its records.
    let (share, lo, up) = (
        floats(&hi, "share"),
        floats(&hi, "share_low"),
        floats(&hi, "share_high"),
    );
    for r in 0..hi.num_rows() {
        assert!(lo[r] <= share[r] && share[r] <= up[r], "row {r}");
    }
    recorded_sweep_matches_its_records(&read(&agg.join("sweep_significance.parquet")));

    // The benchmark's measurement (docs/performance.md): without the inference tables the
    // stage writes every other table with the same bytes.
    protospread(&out, &["aggregate", "--without-inference"]);
    let without = folder_bytes(&agg);
    let inference = [
        "cell_tests",
        "cell_tests_by_group",
        "headline_interval",
        "error_bars",
        "ranking",
    ]
    .map(|t| format!("{t}.parquet"));
    for (name, bytes) in &first {
        if inference.contains(name) {
            assert!(!without.contains_key(name), "{name} written");
        } else if name != "SHA256SUMS" {
            assert!(without.get(name) == Some(bytes), "{name} differs");
        }
    }
    assert_eq!(without.len() + inference.len(), first.len());
}

/// A large and a small planted spread: the SD of a cell's planted condition shifts over the
/// ten protocol conditions, in keyed item points (docs/simulation.md).
const LARGE_SD: f64 = 0.5;
const SMALL_SD: f64 = 0.3;

/// Every cell of the well-sampled model with at least this planted spread (keyed item points)
/// must reach p <= 0.05 (docs/simulation.md, "What the inference tables must show").
pub(crate) const REQUIRED_SD: f64 = 0.7;

/// The well-sampled model of a truth file (exactly one) and its number of ST1 samples.
pub(crate) fn well_sampled(truth: &serde_json::Value) -> (String, u64) {
    let well: Vec<(String, u64)> = truth["models"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["well_sampled"].as_bool().unwrap())
        .map(|m| {
            (
                m["model"].as_str().unwrap().to_string(),
                m["st1_samples"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(well.len(), 1, "{well:?}");
    well[0].clone()
}

/// The cells (model, test, dimension) that must reach p <= 0.05: those of the well-sampled
/// model whose planted spread is at least [`REQUIRED_SD`], with that spread.
pub(crate) fn required_cells(truth: &serde_json::Value) -> BTreeMap<(String, String, String), f64> {
    let (model, _) = well_sampled(truth);
    planted_spread(truth)
        .into_iter()
        .filter(|((m, _, _), sd)| *m == model && *sd >= REQUIRED_SD)
        .collect()
}

/// C(n, k) for the small counts of a cell.
pub(crate) fn choose(n: u64, k: u64) -> u64 {
    (0..k).fold(1, |c, i| c * (n - i) / (i + 1))
}

/// Cochran's Q and McNemar of the recorded dictionary sweep, computed here from its records
/// (the `correct` field per document, delimiter and variant) with the textbook form
/// Q = k (k - 1) sum_j (C_j - N/k)^2 / (k N - sum_i R_i^2), against `sweep_significance`.
fn recorded_sweep_matches_its_records(sig: &RecordBatch) {
    let text =
        fs_err::read_to_string(repo().join("data/sweep/dictionary-smollm2-135m-instruct.jsonl"))
            .unwrap();
    // variant -> delimiter slug -> doc -> correct
    let mut m: BTreeMap<String, BTreeMap<String, BTreeMap<u64, bool>>> = BTreeMap::new();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        m.entry(v["variant"].as_str().unwrap().to_string())
            .or_default()
            .entry(v["delimiter_slug"].as_str().unwrap().to_string())
            .or_default()
            .insert(v["doc"].as_u64().unwrap(), v["correct"].as_bool().unwrap());
    }
    let variants = strs(sig, "variant");
    let (q, qp, mp) = (
        floats(sig, "cochran_q"),
        floats(sig, "cochran_p"),
        floats(sig, "mcnemar_p"),
    );
    let (best, worst) = (strs(sig, "best_delimiter"), strs(sig, "worst_delimiter"));
    let noise = bools(sig, "more_than_noise");
    assert_eq!(variants, ["plain", "named"]);
    for r in 0..sig.num_rows() {
        let by = &m[&variants[r]];
        let k = by.len() as f64;
        let docs: BTreeSet<u64> = by.values().flat_map(|d| d.keys().copied()).collect();
        let c: Vec<f64> = by
            .values()
            .map(|d| d.values().filter(|x| **x).count() as f64)
            .collect();
        let n: f64 = c.iter().sum();
        let r2: f64 = docs
            .iter()
            .map(|i| by.values().filter(|d| d[i]).count() as f64)
            .map(|x| x * x)
            .sum();
        let want = if k * n - r2 == 0.0 {
            0.0
        } else {
            k * (k - 1.0) * c.iter().map(|x| (x - n / k).powi(2)).sum::<f64>() / (k * n - r2)
        };
        assert!(
            (q[r] - want).abs() < 1e-5,
            "{}: Q {} vs {want}",
            variants[r],
            q[r]
        );
        let acc = |s: &str| by[s].values().filter(|x| **x).count();
        assert_eq!(
            acc(&best[r]),
            *c.iter()
                .map(|x| *x as usize)
                .collect::<Vec<_>>()
                .iter()
                .max()
                .unwrap()
        );
        assert_eq!(
            acc(&worst[r]),
            *c.iter()
                .map(|x| *x as usize)
                .collect::<Vec<_>>()
                .iter()
                .min()
                .unwrap()
        );
        let b = docs
            .iter()
            .filter(|i| by[&best[r]][i] && !by[&worst[r]][i])
            .count() as u64;
        let w = docs
            .iter()
            .filter(|i| !by[&best[r]][i] && by[&worst[r]][i])
            .count() as u64;
        let tail: f64 = (0..=b.min(w))
            .map(|i| (0..i).fold(1.0, |acc, j| acc * (b + w - j) as f64 / (j + 1) as f64))
            .sum::<f64>()
            / 2f64.powi((b + w) as i32);
        let want_mp = if b + w == 0 {
            1.0
        } else {
            (2.0 * tail).min(1.0)
        };
        assert!(
            (mp[r] - want_mp).abs() < 1e-6,
            "{}: McNemar {} vs {want_mp}",
            variants[r],
            mp[r]
        );
        assert!((0.0..=1.0).contains(&qp[r]));
        eprintln!(
            "recorded sweep, {}: Q = {} (p = {}), best {} vs worst {}: {b} vs {w}, McNemar p = {}, more than noise: {}",
            variants[r], q[r], qp[r], best[r], worst[r], mp[r], noise[r]
        );
    }
}
