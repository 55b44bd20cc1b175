//! `tables(&config)` on the lm-eval fixtures of tests/fixtures/lm_eval (two models, three
//! delimiters, two variants, eight ARC-style documents per cell): every table's figures
//! against values worked out by hand from make_fixtures.py's SCORES, the tables the report
//! reads (`sweep_significance`, `sweep_ranking`) whole against committed insta snapshots
//! (tests/snapshots/; `.config/insta.yaml` never rewrites them on its own), and byte-identical
//! Parquet from two runs.

use protospread_core::Config;
use protospread_testutils::{bools, csv_text, floats, ints, repo_root, strs, table as get};
use std::path::Path;

fn config() -> Config {
    Config::load(&repo_root().join("tests/fixtures/lm_eval/pipeline.toml")).unwrap()
}

#[test]
fn fixture_tables_by_hand() {
    let t = protospread_sweep::tables(&config()).unwrap();
    let names: Vec<&str> = t.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "sweep_accuracy",
            "sweep_spread",
            "sweep_rank",
            "sweep_lead",
            "sweep_named_gain",
            "sweep_named_gain_mean",
            "sweep_delimiter_gain",
            "sweep_delimiter_gain_mean",
            "sweep_significance",
            "sweep_ranking"
        ]
    );
    // Rows: SmolLM2 plain (nl, !, #), SmolLM2 named, Qwen plain, Qwen named.
    let acc = get(&t, "sweep_accuracy");
    assert_eq!(ints(acc, "correct"), [6, 3, 5, 7, 5, 6, 4, 5, 2, 6, 6, 4]);
    assert_eq!(ints(acc, "n"), [8; 12]);
    assert_eq!(floats(acc, "accuracy_pct")[..3], [75.0, 37.5, 62.5]);
    // Clopper-Pearson 95% for 6/8: 34.9146% .. 96.8145% (R: binom.test(6, 8)).
    let lo = floats(acc, "ci95_low_pct")[0];
    let hi = floats(acc, "ci95_high_pct")[0];
    assert!(
        (lo - 34.9146).abs() < 1e-3 && (hi - 96.8145).abs() < 1e-3,
        "{lo} {hi}"
    );

    let sp = get(&t, "sweep_spread");
    assert_eq!(floats(sp, "spread_pct"), [37.5, 25.0, 37.5, 25.0]);
    assert_eq!(
        strs(sp, "max_delimiters"),
        ["nl", "nl", "exclam", "nl exclam"]
    );
    // Eight documents per cell: no extreme pair is outside sampling error.
    assert_eq!(bools(sp, "intervals_disjoint"), [false; 4]);

    // Paired tests. The fixture answers documents 0..k-1 right (k per cell), so for SmolLM2
    // plain (nl 6, exclam 3, hash 5 of 8) the delimiters right per document are 3,3,3,2,2,1,0,0:
    // C = (6, 3, 5), N = 14, Q = 2 (3 x 70 - 196) / (3 x 14 - 36) = 28/6, p = exp(-Q/2);
    // McNemar nl (best) vs exclam (worst): documents 3, 4, 5 right under nl only, none the
    // other way: p = 2 / 2^3. SmolLM2 named (7, 5, 6): Q = 12/4, b = 2; Qwen plain (4, 5, 2):
    // Q = 28/6, b = 3; Qwen named (6, 6, 4): Q = 16/4, best nl (first of the tie), b = 2.
    let sig = get(&t, "sweep_significance");
    assert_eq!(floats(sig, "cochran_q"), [4.666667, 3.0, 4.666667, 4.0]);
    assert_eq!(
        floats(sig, "cochran_p"),
        [0.096972, 0.22313, 0.096972, 0.135335]
    );
    assert_eq!(ints(sig, "cochran_df"), [2; 4]);
    assert_eq!(ints(sig, "documents"), [8; 4]);
    assert_eq!(strs(sig, "best_delimiter"), ["nl", "nl", "exclam", "nl"]);
    assert_eq!(
        strs(sig, "worst_delimiter"),
        ["exclam", "exclam", "hash", "hash"]
    );
    assert_eq!(ints(sig, "best_only"), [3, 2, 3, 2]);
    assert_eq!(ints(sig, "worst_only"), [0; 4]);
    assert_eq!(floats(sig, "mcnemar_p"), [0.25, 0.5, 0.25, 0.5]);
    assert_eq!(bools(sig, "more_than_noise"), [false; 4]);

    // Two models whose order flips between delimiters: tau-b -1, 1, -1 over the three pairs.
    let rk = get(&t, "sweep_ranking");
    assert_eq!(strs(rk, "variant"), ["plain", "named"]);
    assert_eq!(floats(rk, "tau_median"), [-1.0, -1.0]);
    assert_eq!(floats(rk, "tau_min"), [-1.0, -1.0]);
    assert_eq!(ints(rk, "flipped_pairs"), [1, 1]);
    assert_eq!(bools(rk, "every_model_can_lead"), [true, true]);

    // Plain: SmolLM2 leads under nl (6>4) and hash (5>2), Qwen under exclam (5>3).
    // Named: SmolLM2 leads under nl (7>6) and hash (6>4); exclam 5 vs 6 -> Qwen.
    let lead = get(&t, "sweep_lead");
    assert_eq!(
        strs(lead, "leading_delimiters"),
        ["nl hash", "nl hash", "exclam", "exclam"]
    );
    assert_eq!(bools(lead, "every_model_can_lead"), [true; 4]);

    let g = get(&t, "sweep_named_gain_mean");
    // SmolLM2: plain mean 58.333333, named 75 -> +16.666667; Qwen: 45.833333 -> 66.666667.
    assert_eq!(floats(g, "mean_gain_pct"), [16.666667, 20.833333]);
    let dg = get(&t, "sweep_delimiter_gain_mean");
    // Plain nl: SmolLM2 75 - 58.333333 = 16.666667, Qwen 50 - 45.833333 = 4.166667 -> 10.416667.
    let rows: Vec<(String, String, f64)> = strs(dg, "variant")
        .into_iter()
        .zip(strs(dg, "delimiter_slug"))
        .zip(floats(dg, "mean_gain_over_mean_pct"))
        .map(|((v, d), x)| (v, d, x))
        .collect();
    assert!(
        rows.contains(&("plain".into(), "nl".into(), 10.416667)),
        "{rows:?}"
    );
}

#[test]
fn report_tables_match_committed_snapshots() {
    let t = protospread_sweep::tables(&config()).unwrap();
    let mut settings = insta::Settings::clone_current();
    settings.set_omit_expression(true);
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(|| {
        for name in ["sweep_significance", "sweep_ranking"] {
            insta::assert_snapshot!(name, csv_text(get(&t, name)));
        }
    });
}

#[test]
fn same_parquet_bytes_twice() {
    let enc = || -> Vec<Vec<u8>> {
        protospread_sweep::tables(&config())
            .unwrap()
            .iter()
            .map(|(n, b)| {
                protospread_core::encode_parquet(
                    Path::new(n),
                    b.schema(),
                    std::slice::from_ref(b),
                    &protospread_core::FileMeta::default(),
                )
                .unwrap()
            })
            .collect()
    };
    assert_eq!(enc(), enc());
}

#[test]
fn a_failed_check_is_an_error_listing_problems() {
    let mut cfg = config();
    cfg.sweep.delimiters.push(";".into());
    let e = protospread_sweep::tables(&cfg).unwrap_err().to_string();
    assert!(e.contains("4 problem(s)"), "{e}");
    assert!(
        e.contains("delimiter \";\" (semicolon) variant plain is missing"),
        "{e}"
    );
}
