//! Parity on the embedded human data (data/jobcannon), through the library.

use protospread_core::instruments;
use protospread_score::evidence::{self, Rule};
use protospread_score::human;
use protospread_score::key::ScoringKey;
use protospread_score::norms::Norms;
use protospread_score::parity::{
    summarize, Allowlist, Category, REASON_CURRENT, REASON_INCONSISTENT, REASON_UNKNOWN,
};
use protospread_score::stage::{self, HumanInput};
use std::path::{Path, PathBuf};

fn data(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../data")
        .join(p)
}

fn inputs() -> Vec<HumanInput> {
    instruments::study()
        .map(|inst| {
            let p = data(&format!("jobcannon/{}", inst.file_name()));
            HumanInput {
                inst,
                rows: human::read_csv(inst, &p).unwrap(),
                origin: p,
            }
        })
        .collect()
}

fn keys() -> (ScoringKey, Vec<ScoringKey>, Allowlist) {
    (
        ScoringKey::load(&data("scoring_key.csv")).unwrap(),
        ScoringKey::load_versions(&data("scoring_key_legacy.csv")).unwrap(),
        Allowlist::load(&data("parity_allowlist.csv")).unwrap(),
    )
}

fn legacy(v: &str) -> String {
    format!("reproduced exactly by older key version {v} (data/scoring_key_legacy.csv)")
}

#[test]
fn parity_counts_sweep_and_norms() {
    let (key, old, allow) = keys();
    let inputs = inputs();
    let run = stage::run(&key, &old, &allow, &inputs, true).unwrap();
    let s = summarize(&run.classes);
    let get = |i: &str, c: Category, r: &str| s[i].get(&(c, r.to_string())).copied().unwrap_or(0);
    let total = |i: &str| s[i].values().sum::<usize>();

    assert_eq!(total("big_five"), 880);
    assert_eq!(get("big_five", Category::Reproduced, REASON_CURRENT), 755);
    assert_eq!(
        get(
            "big_five",
            Category::SetAside,
            &legacy("big_five_v0_blocks")
        ),
        120
    );
    assert_eq!(get("big_five", Category::SetAside, REASON_INCONSISTENT), 4);
    assert_eq!(get("big_five", Category::Unexplained, REASON_UNKNOWN), 1);

    assert_eq!(total("riasec"), 1455);
    assert_eq!(get("riasec", Category::Reproduced, REASON_CURRENT), 1226);
    assert_eq!(
        get("riasec", Category::SetAside, &legacy("riasec_v0_raw")),
        2
    );
    assert_eq!(
        get(
            "riasec",
            Category::SetAside,
            &legacy("riasec_v0_blocks_top3")
        ),
        129
    );
    assert_eq!(
        get("riasec", Category::SetAside, &legacy("riasec_v0_blocks")),
        89
    );
    assert_eq!(
        get("riasec", Category::SetAside, &legacy("riasec_v1_max20")),
        6
    );
    assert_eq!(get("riasec", Category::SetAside, REASON_INCONSISTENT), 2);
    assert_eq!(get("riasec", Category::Unexplained, REASON_UNKNOWN), 1);

    assert_eq!(total("dark_triad"), 155);
    assert_eq!(get("dark_triad", Category::Reproduced, REASON_CURRENT), 155);
    assert_eq!(total("multiple_intelligences"), 498);
    assert_eq!(
        get(
            "multiple_intelligences",
            Category::Reproduced,
            REASON_CURRENT
        ),
        498
    );

    // The unexplained rows are exactly the reviewed ones.
    let unexplained: Vec<(String, i64)> = run
        .classes
        .iter()
        .filter(|c| c.category == Category::Unexplained)
        .map(|c| (c.instrument.clone(), c.id))
        .collect();
    assert_eq!(
        unexplained,
        vec![("big_five".into(), 124), ("riasec".into(), 140)]
    );
    assert!(stage::not_allowlisted(&run.classes).is_empty());
    assert!(allow.stale(&run.classes).is_empty());

    // The test submissions: identical answers 0,1,2,3,4,... with different scores.
    let inconsistent: Vec<i64> = run
        .classes
        .iter()
        .filter(|c| c.reason == REASON_INCONSISTENT)
        .map(|c| c.id)
        .collect();
    assert_eq!(inconsistent, vec![323, 324, 325, 326, 439, 440]);

    // Every single-item change is caught, and breaks a large share of reproduced rows.
    assert_eq!(run.sweep.len(), 168);
    for m in &run.sweep {
        assert!(m.weight_broken * 4 >= m.reproduced, "{m:?}");
        assert!(m.reverse_broken * 4 >= m.reproduced, "{m:?}");
    }

    // Norms: reproduced rows minus repeated answer vectors; a round trip through Parquet
    // gives the same norms.
    let bf = run.norm_rows["big_five"];
    assert_eq!(bf.reproduced, 755);
    assert_eq!(bf.used + bf.duplicates, bf.reproduced);
    let n = run.norms.get("big_five", "O").unwrap();
    assert_eq!(n.n, bf.used);
    assert!(n.sd > 0.0);
    let at_max = n.values.iter().filter(|v| **v == n.max()).count();
    assert_eq!(
        n.percentile(n.max()),
        100.0 * (n.n as f64 - 0.5 * at_max as f64) / n.n as f64
    );
    assert_eq!(n.percentile(n.min() - 1.0), 0.0);
    let dir = tempfile::tempdir().unwrap();
    for t in protospread_score::tables::tables(&run, &inputs).unwrap() {
        protospread_core::pq::write(&dir.path().join(t.file), t.schema, &[t.batch]).unwrap();
    }
    assert_eq!(Norms::load(dir.path()).unwrap(), run.norms);
}

#[test]
fn evidence_rejects_the_alternatives() {
    let (key, _, _) = keys();
    let inputs = inputs();
    let count = |rule: Rule, name: &str| {
        let i = inputs.iter().find(|i| i.inst.name == name).unwrap();
        evidence::count_reproduced(&key, i.inst, &i.rows, rule)
    };
    // The independent evidence scorer agrees with the product scorer's counts.
    assert_eq!(count(Rule::PRODUCT, "big_five"), 755);
    assert_eq!(count(Rule::PRODUCT, "riasec"), 1226);
    assert_eq!(count(Rule::PRODUCT, "dark_triad"), 155);
    assert_eq!(count(Rule::PRODUCT, "multiple_intelligences"), 498);
    for (aspect, variant, rule) in evidence::alternatives().into_iter().skip(1) {
        let total: usize = ["big_five", "riasec", "dark_triad", "multiple_intelligences"]
            .iter()
            .map(|n| count(rule, n))
            .sum();
        assert!(
            total < 755 + 1226 + 155 + 498,
            "{aspect}: {variant} is not rejected"
        );
    }
}
