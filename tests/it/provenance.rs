//! Each Parquet output's key-value metadata names its table and layout version, the stage and
//! command that wrote it, and the sha256 of only the inputs that file is computed from. Read
//! with the parquet crate's own footer reader, on a copy of the study in a temporary folder.

use parquet::file::reader::{FileReader, SerializedFileReader};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The key-value metadata of a Parquet file's footer.
fn footer_meta(path: &Path) -> BTreeMap<String, String> {
    let f = fs_err::File::open(path).unwrap().into_parts().0;
    let r = SerializedFileReader::new(f).unwrap();
    r.metadata()
        .file_metadata()
        .key_value_metadata()
        .into_iter()
        .flatten()
        .map(|kv| (kv.key.clone(), kv.value.clone().unwrap_or_default()))
        .collect()
}

fn parquet_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs_err::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            parquet_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "parquet") {
            out.push(p);
        }
    }
}

/// The input names of `protospread.input.<name>.sha256` keys.
fn inputs_named(meta: &BTreeMap<String, String>) -> Vec<&str> {
    meta.keys()
        .filter_map(|k| k.strip_prefix("protospread.input."))
        .filter_map(|k| k.strip_suffix(".sha256"))
        .collect()
}

#[test]
fn every_parquet_output_names_its_table_stage_and_only_its_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    protospread_testutils::copy_dir(&repo().join("data"), &d.join("data"));
    fs_err::copy(repo().join("pipeline.toml"), d.join("pipeline.toml")).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_protospread"))
        .current_dir(d)
        .args(["--quiet", "run"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let cfg = protospread_core::Config::load(&d.join("pipeline.toml")).unwrap();
    let sha = |name: &str| {
        cfg.inputs
            .iter()
            .find(|i| i.name == name)
            .unwrap()
            .sha256
            .clone()
    };
    let role_of = |name: &str| cfg.inputs.iter().find(|i| i.name == name).unwrap().role;
    let config_sha = protospread_core::sha256_file(&d.join("pipeline.toml")).unwrap();
    let mut files = Vec::new();
    parquet_files(&d.join("out"), &mut files);
    files.sort();
    assert!(files.len() > 40, "{files:?}");
    for f in &files {
        let rel = protospread_core::rel_path(&d.join("out"), f);
        let meta = footer_meta(f);
        let (stage, rest) = rel.split_once('/').unwrap();
        // The report's Parquet files are byte-for-byte copies of the stage files it rendered,
        // footer included.
        if stage == "report" {
            let copy = fs_err::read(f).unwrap();
            assert!(
                ["aggregate", "score"]
                    .iter()
                    .any(
                        |s| fs_err::read(d.join("out").join(s).join(rest)).is_ok_and(|b| b == copy)
                    ),
                "{rel}"
            );
            continue;
        }
        let table = rest
            .rsplit('/')
            .next()
            .unwrap()
            .trim_end_matches(".parquet");
        assert_eq!(meta["protospread.stage"], stage, "{rel}");
        assert_eq!(
            meta["protospread.command"],
            format!("protospread {stage}"),
            "{rel}"
        );
        assert_eq!(
            meta["protospread.version"],
            env!("CARGO_PKG_VERSION"),
            "{rel}"
        );
        assert_eq!(meta["protospread.config_sha256"], config_sha, "{rel}");
        // The layout: a declared table's from its contract, any other's version 1.
        let expected_schema = if rest.starts_with("answers/") {
            let c = protospread_core::STORED_ANSWERS;
            format!("{} v{}", c.name, c.version)
        } else if let Some(inst) = rest.strip_prefix("human/") {
            format!("human.{} v1", inst.trim_end_matches(".parquet"))
        } else {
            match protospread_core::CONTRACTS
                .iter()
                .find(|c| c.stage == stage && c.name == table)
            {
                Some(c) => format!("{} v{}", c.name, c.version),
                None => format!("{table} v1"),
            }
        };
        assert_eq!(meta["protospread.schema"], expected_schema, "{rel}");
        // Every hash named is the input's declared one.
        let named = inputs_named(&meta);
        for n in &named {
            assert_eq!(
                meta[&format!("protospread.input.{n}.sha256")],
                sha(n),
                "{rel}"
            );
        }
        use protospread_core::InputRole::{Answers, Human, Other};
        let roles: Vec<_> = named.iter().map(|n| role_of(n)).collect();
        match (stage, rest) {
            ("fetch", r) if r.starts_with("answers/") => assert_eq!(named, [table], "{rel}"),
            ("fetch", "sweep_samples.parquet") => {
                assert_eq!(named, ["sweep_dictionary_smollm2"], "{rel}");
            }
            ("fetch", _) => {
                assert_eq!(named.len(), 1, "{rel}: {named:?}");
                assert_eq!(
                    cfg.inputs
                        .iter()
                        .find(|i| i.name == named[0])
                        .unwrap()
                        .instrument
                        .as_deref(),
                    Some(table),
                    "{rel}"
                );
            }
            (
                "score",
                "parsed_answers.parquet" | "reply_rules.parquet" | "reply_reruns.parquet",
            ) => {
                assert!(roles.iter().all(|r| *r == Answers), "{rel}: {named:?}");
                assert_eq!(roles.len(), 3, "{rel}: {named:?}");
            }
            ("score", "scale_scores.parquet" | "scale_scores_by_rule.parquet") => {
                assert!(!roles.contains(&Other), "{rel}: {named:?}");
                assert_eq!(roles.len(), 12, "{rel}: {named:?}");
            }
            ("score", _) => {
                assert!(roles.iter().all(|r| *r == Human), "{rel}: {named:?}");
                assert_eq!(roles.len(), 9, "{rel}: {named:?}");
            }
            ("aggregate", t) if t.starts_with("sweep_") => {
                assert_eq!(named, ["sweep_dictionary_smollm2"], "{rel}");
            }
            ("aggregate", _) => {
                assert!(
                    !named.contains(&"sweep_dictionary_smollm2"),
                    "{rel}: {named:?}"
                );
                assert_eq!(roles.len(), 12, "{rel}: {named:?}");
            }
            _ => panic!("{rel}: a Parquet file outside fetch, score and aggregate"),
        }
    }
}
