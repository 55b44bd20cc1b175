//! Parity on the embedded human data (data/jobcannon), through the library.
use protospread_score::{
    alternative_rules, classify, count_reproduced_under, evidence_table, mutate_item,
    not_allowlisted, parity_tables, read_human_csv, run_parity, run_parity_streaming, Allowlist,
    Category, HumanInput, HumanRow, HumanSource, Mutation, MutationSweep, Norms, ParityRowTables,
    ParityRun, ScoringKey, ScoringRule, HUMAN_CHUNK_ROWS, MUTATION_WEIGHT_FACTOR, REASON_CURRENT,
    REASON_INCONSISTENT, REASON_UNKNOWN,
};
use std::path::{Path, PathBuf};

fn data(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../data")
        .join(p)
}

fn inputs() -> Vec<HumanInput> {
    protospread_core::study_instruments()
        .map(|inst| {
            let p = data(&format!("jobcannon/{}", inst.file_name()));
            HumanInput {
                inst,
                source: HumanSource::rows(read_human_csv(inst, &p).unwrap()),
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
    let run = run_parity(&key, &old, &allow, &inputs, true).unwrap();
    let s = &run.summary;
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
        .unexplained
        .iter()
        .map(|c| (c.instrument.clone(), c.id))
        .collect();
    assert_eq!(
        unexplained,
        vec![("big_five".into(), 124), ("riasec".into(), 140)]
    );
    assert!(not_allowlisted(&run.unexplained).is_empty());
    assert!(allow.stale(&run.unexplained).is_empty());

    // The test submissions: identical answers 0,1,2,3,4,... with different scores.
    let mut inconsistent: Vec<i64> = Vec::new();
    for i in &inputs {
        let rows = i.rows().unwrap();
        let classes = classify(i.inst, &rows, &key, &old, &allow, &i.origin).unwrap();
        inconsistent.extend(
            classes
                .iter()
                .filter(|c| c.reason == REASON_INCONSISTENT)
                .map(|c| c.id),
        );
    }
    inconsistent.sort_unstable();
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
    let at_max = n.values.last().unwrap().1;
    assert_eq!(
        n.percentile(n.max()),
        100.0 * (n.n as f64 - 0.5 * at_max as f64) / n.n as f64
    );
    assert_eq!(n.percentile(n.min() - 1.0), 0.0);
    let dir = tempfile::tempdir().unwrap();
    for t in parity_tables(&run).unwrap() {
        protospread_core::write_parquet(
            &dir.path().join(t.contract.file_name()),
            t.contract.schema(),
            &[t.batch],
            &protospread_core::FileMeta::default(),
        )
        .unwrap();
    }
    assert_eq!(Norms::load(dir.path()).unwrap(), run.norms);
}

#[test]
fn evidence_rejects_the_alternatives() {
    let (key, _, _) = keys();
    let inputs = inputs();
    let count = |rule: ScoringRule, name: &str| {
        let i = inputs.iter().find(|i| i.inst.name == name).unwrap();
        count_reproduced_under(&key, i.inst, &i.rows().unwrap(), rule)
    };
    // The independent evidence scorer agrees with the product scorer's counts.
    assert_eq!(count(ScoringRule::PRODUCT, "big_five"), 755);
    assert_eq!(count(ScoringRule::PRODUCT, "riasec"), 1226);
    assert_eq!(count(ScoringRule::PRODUCT, "dark_triad"), 155);
    assert_eq!(count(ScoringRule::PRODUCT, "multiple_intelligences"), 498);
    for (aspect, variant, rule) in alternative_rules().into_iter().skip(1) {
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

/// `score --evidence` as a library call: one row per alternative, the product rule first,
/// one count per input in the order of the inputs.
#[test]
fn evidence_table_counts_every_input_under_every_rule() {
    let (key, _, _) = keys();
    let inputs = inputs();
    let t = evidence_table(&key, &inputs).unwrap();
    let names: Vec<&str> = inputs.iter().map(|i| i.inst.name).collect();
    assert_eq!(t.instruments, names);
    let rules = alternative_rules();
    assert_eq!(t.rows.len(), rules.len());
    for (row, (aspect, variant, rule)) in t.rows.iter().zip(rules) {
        assert_eq!((row.aspect, row.variant), (aspect, variant));
        for (c, i) in row.counts.iter().zip(&inputs) {
            let rows = i.rows().unwrap();
            assert_eq!(c.instrument, i.inst.name);
            assert_eq!(c.rows, rows.len());
            assert_eq!(
                c.reproduced,
                count_reproduced_under(&key, i.inst, &rows, rule)
            );
        }
    }
    assert_eq!(t.rows[0].counts[0].reproduced, 755, "{:?}", t.rows[0]);
    let json = t.to_json();
    assert_eq!(json[0]["reproduced"][0]["rows"], 755);
    assert_eq!(json[0]["aspect"], "product rule");
}

/// `score --mutate` as a library call: the reproduced rows of the test, the item's
/// dimension, and an error naming the test for an unknown test or an item out of range.
#[test]
fn mutate_item_counts_broken_rows_and_rejects_bad_items() {
    let (key, old, allow) = keys();
    let inputs = inputs();
    let m = mutate_item(&key, &old, &allow, &inputs, "big_five", 17).unwrap();
    assert_eq!(
        (m.test.as_str(), m.item, m.dimension.as_str()),
        ("big_five", 17, "A")
    );
    assert_eq!(m.reproduced, 755);
    assert!(m.weight_broken > 300 && m.reverse_broken > 300, "{m:?}");
    assert_eq!(m.to_json()["weight_factor"], MUTATION_WEIGHT_FACTOR);
    for (test, item, want) in [
        ("big_five", 0, "must be 1..=50"),
        ("big_five", 51, "must be 1..=50"),
        ("disc", 1, "no human data"),
    ] {
        let e = mutate_item(&key, &old, &allow, &inputs, test, item)
            .unwrap_err()
            .to_string();
        assert!(e.contains(test) && e.contains(want), "{e}");
    }
}

/// The human rows of `inputs()` repeated `copies` times with fresh ids (`id + k * 100_000`),
/// as a larger file would hold them.
fn repeated(copies: i64) -> Vec<HumanInput> {
    inputs()
        .into_iter()
        .map(|i| {
            let rows = i.rows().unwrap();
            let mut big = Vec::with_capacity(rows.len() * copies as usize);
            for k in 0..copies {
                big.extend(rows.iter().map(|r| HumanRow {
                    id: r.id + k * 100_000,
                    ..r.clone()
                }));
            }
            HumanInput {
                source: HumanSource::rows(big),
                ..i
            }
        })
        .collect()
}

/// Every file the parity part writes, streamed with `chunk_rows` rows in flight.
fn parity_files(
    inputs: &[HumanInput],
    chunk_rows: usize,
    dir: &Path,
) -> (ParityRun, Vec<(String, Vec<u8>)>) {
    let (key, old, _) = keys();
    // Every copy of a reviewed row is allow-listed, so the stage passes.
    let mut allow = Allowlist::load(&data("parity_allowlist.csv")).unwrap();
    for ((inst, id), note) in allow.entries.clone() {
        for k in 1..100 {
            allow
                .entries
                .insert((inst.clone(), id + k * 100_000), note.clone());
        }
    }
    let out = dir.join("score");
    let mut staged = protospread_core::Staged::in_dir(&out).unwrap();
    let mut rows =
        ParityRowTables::new(&out, &mut staged, &protospread_core::Provenance::default()).unwrap();
    let run = run_parity_streaming(
        &key,
        &old,
        &allow,
        inputs,
        false,
        chunk_rows,
        Some(&mut rows),
    )
    .unwrap();
    rows.finish().unwrap();
    for t in parity_tables(&run).unwrap() {
        let p = out.join(t.contract.file_name());
        let bytes = protospread_core::encode_parquet(
            &p,
            t.contract.schema(),
            &[t.batch],
            &protospread_core::FileMeta::default(),
        )
        .unwrap();
        staged.put(&p, &bytes).unwrap();
    }
    staged.commit().unwrap();
    let mut files: Vec<(String, Vec<u8>)> = fs_err::read_dir(&out)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                fs_err::read(e.path()).unwrap(),
            )
        })
        .collect();
    files.sort();
    (run, files)
}

/// Streaming: the score stage holds `chunk_rows` human rows at a time, and its outputs do not
/// depend on that number. 40 copies of the data (113,000 rows, 530,000 `human_scores` rows,
/// so the per-row tables are written in many pieces) give the same bytes with 7 rows in flight
/// as with the default, and each streamed table has exactly the bytes of writing it as one
/// record batch (how the tables were written before they streamed).
#[test]
fn streamed_parity_is_independent_of_the_chunk_size() {
    let inputs = repeated(40);
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (run_a, a) = parity_files(&inputs, 7, a_dir.path());
    let (run_b, b) = parity_files(&inputs, HUMAN_CHUNK_ROWS, b_dir.path());
    assert_eq!(
        a.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        [
            "SHA256SUMS",
            "human_scores.parquet",
            "mutation_sweep.parquet",
            "norm_values.parquet",
            "norms.parquet",
            "parity_rows.parquet",
            "parity_summary.parquet"
        ]
    );
    for ((name, x), (_, y)) in a.iter().zip(&b) {
        assert!(x == y, "{name} differs between chunk sizes");
    }
    assert_eq!(run_a.norms, run_b.norms);
    assert_eq!(run_a.summary, run_b.summary);
    assert_eq!(run_a.summary["big_five"].values().sum::<usize>(), 880 * 40);
    // 40 copies of each reviewed row, all unexplained and allow-listed.
    assert_eq!(run_a.unexplained.len(), 80);
    for (name, bytes) in a
        .iter()
        .filter(|(n, _)| n.ends_with("rows.parquet") || n == "human_scores.parquet")
    {
        let p = a_dir.path().join("score").join(name);
        let (schema, batches) = protospread_core::read_parquet(&p).unwrap();
        // The schema as the stage gives it, without the file's key-value metadata.
        let schema = std::sync::Arc::new(schema.as_ref().clone().with_metadata(Default::default()));
        let batches: Vec<_> = batches
            .into_iter()
            .map(|b| b.with_schema(schema.clone()).unwrap())
            .collect();
        let one = arrow::compute::concat_batches(&schema, &batches).unwrap();
        if name == "human_scores.parquet" {
            let want: usize = inputs
                .iter()
                .map(|i| i.rows().unwrap().len() * i.inst.dimensions.len())
                .sum();
            assert_eq!(one.num_rows(), want);
        }
        // The metadata the stage gives the file when it knows no run.
        let meta = protospread_core::Provenance::default().stage_table(
            "score",
            name.trim_end_matches(".parquet"),
            protospread_core::UNDECLARED_VERSION,
        );
        let whole = protospread_core::encode_parquet(&p, schema, &[one], &meta).unwrap();
        assert!(
            &whole == bytes,
            "{name}: streamed bytes differ from one batch"
        );
    }
}

/// Does `key` reproduce `row` when the whole row is rescored: every stored score, the top
/// result and (where stored) every percentile. The oracle of the mutation sweep, which rescores
/// only the mutated item's dimension.
fn full_rescoring_reproduces(key: &ScoringKey, test: &str, row: &HumanRow) -> bool {
    let s = protospread_score::score(key, test, &row.answer_vector()).unwrap();
    let values = s
        .dims
        .iter()
        .zip(&row.scores)
        .all(|(d, &v)| d.value == Some(f64::from(v)));
    let percentiles = row.percentiles.as_ref().is_none_or(|p| {
        let p: serde_json::Value = serde_json::from_str(p).unwrap();
        s.dims
            .iter()
            .all(|d| d.percent == p.get(&d.dimension).and_then(|x| x.as_f64()))
    });
    values && percentiles && s.top_result.as_deref() == Some(row.top_result.as_str())
}

#[test]
fn sweep_matches_full_rescoring() {
    let (key, old, _) = keys();
    let mut checked = 0;
    // The main key and every legacy version (raw units, other blocks) as the current key.
    for k in std::iter::once(&key).chain(&old) {
        for inst in protospread_core::study_instruments().filter(|i| k.test(i.name).is_some()) {
            let p = data(&format!("jobcannon/{}", inst.file_name()));
            let rows = read_human_csv(inst, &p).unwrap();
            let reproduced: Vec<&HumanRow> = rows
                .iter()
                .filter(|r| full_rescoring_reproduces(k, inst.name, r))
                .collect();
            if reproduced.is_empty() {
                continue;
            }
            let n = k.test(inst.name).unwrap().items.len();
            let mut sw = MutationSweep::new(k, inst, 1..=n, &p).unwrap();
            // Two chunks, as the stage feeds it.
            let (a, b) = reproduced.split_at(reproduced.len() / 2);
            sw.add(a).unwrap();
            sw.add(b).unwrap();
            for m in sw.finish() {
                let broken = |mu| {
                    let mk = k.mutated(inst.name, m.item, mu).unwrap();
                    reproduced
                        .iter()
                        .filter(|r| !full_rescoring_reproduces(&mk, inst.name, r))
                        .count()
                };
                let w = broken(Mutation::ScaleWeight(MUTATION_WEIGHT_FACTOR));
                let r = broken(Mutation::FlipReverse);
                assert_eq!(
                    (m.weight_broken, m.reverse_broken, m.reproduced),
                    (w, r, reproduced.len()),
                    "{} {} item {}",
                    k.version,
                    inst.name,
                    m.item
                );
                checked += 1;
            }
        }
    }
    // The main key's 168 items and the legacy versions' items.
    assert!(checked > 168, "{checked}");
}
