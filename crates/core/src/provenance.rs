//! The key-value metadata of each Parquet output: which table layout it holds, which stage
//! and command wrote it, and the sha256 of the configuration and of the inputs that file is
//! computed from (and of no other input).
//!
//! The values depend on the inputs and the configuration only, never on the time, host or
//! thread count, so they keep outputs byte-for-byte reproducible.

use crate::config::{Config, InputRole};
use crate::contract::TableContract;
use parquet::file::metadata::KeyValue;
use std::path::PathBuf;

/// The layout version of a table declared by no [`TableContract`]: the fetch stage's human
/// rows, whose columns are their instrument's items. Each has had one layout.
pub const UNDECLARED_VERSION: u32 = 1;

/// What the files of one stage run have in common: protospread's version, the configuration's
/// sha256, the command that writes the stage's files, and every declared input's sha256.
/// [`Provenance::table`], [`Provenance::stage_table`] and [`Provenance::input_file`] make the
/// metadata of one file from it. The default value knows no run (tests, fixtures): its files
/// carry their table, stage and command only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Provenance {
    /// protospread's version.
    pub version: String,
    /// sha256 of the configuration file's bytes.
    pub config_sha256: String,
    /// The command that writes these files, as a user would type it (`protospread score`):
    /// the stage's own command also when `protospread run` runs it, so that both write the
    /// same bytes.
    pub command: String,
    /// Every `[[inputs]]` entry, in file order.
    pub inputs: Vec<InputHash>,
}

/// One declared input as the metadata names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputHash {
    /// The input's name.
    pub name: String,
    /// Its role.
    pub role: InputRole,
    /// Its declared sha256.
    pub sha256: String,
    /// Whether `[sweep]` reads it: a `dictionary_runs` file, or a file under a folder of
    /// `lm_eval_runs`.
    pub sweep_run: bool,
}

/// What a table is computed from, by stage and table name: written down here once.
///
/// - `fetch`: each file from its own input ([`Provenance::input_file`]); `sweep_samples` from
///   the sweep's runs.
/// - `score`: `parsed_answers`, `reply_rules` and `reply_reruns` from the stored answers;
///   `scale_scores` and `scale_scores_by_rule` from the stored answers and the human data
///   (their `z` and `percentile` are against the norms); every other table (parity, human
///   scores, mutation sweep, norms) from the human data.
/// - `aggregate`: the `sweep_*` tables from the sweep's runs; every other table from the
///   stored answers and the human data (it reads the scale scores and the norms).
fn depends_on(stage: &str, table: &str) -> Depends {
    use InputRole::{Answers, Human};
    match (stage, table) {
        ("score", "parsed_answers" | "reply_rules" | "reply_reruns") => Depends::Roles(&[Answers]),
        ("score", "scale_scores" | "scale_scores_by_rule") => Depends::Roles(&[Answers, Human]),
        ("score", _) => Depends::Roles(&[Human]),
        (_, t) if t.starts_with("sweep_") => Depends::SweepRuns,
        ("aggregate", _) => Depends::Roles(&[Answers, Human]),
        _ => Depends::Roles(&[]),
    }
}

enum Depends {
    Roles(&'static [InputRole]),
    SweepRuns,
}

impl Provenance {
    /// The provenance of a run of `cfg` (loaded from a file whose bytes have sha256
    /// `config_sha256`) by `command`.
    pub fn new(cfg: &Config, config_sha256: &str, version: &str, command: &str) -> Self {
        let resolved =
            |paths: &[PathBuf]| -> Vec<PathBuf> { paths.iter().map(|p| cfg.resolve(p)).collect() };
        let runs = resolved(&cfg.sweep.dictionary_runs);
        let run_dirs = resolved(&cfg.sweep.lm_eval_runs);
        let inputs = cfg
            .inputs
            .iter()
            .map(|i| {
                let path = i.path.as_ref().map(|p| cfg.resolve(p));
                let sweep_run = path.is_some_and(|p| {
                    runs.contains(&p) || run_dirs.iter().any(|d| p.starts_with(d))
                });
                InputHash {
                    name: i.name.clone(),
                    role: i.role,
                    sha256: i.sha256.clone(),
                    sweep_run,
                }
            })
            .collect();
        Provenance {
            version: version.to_string(),
            config_sha256: config_sha256.to_string(),
            command: command.to_string(),
            inputs,
        }
    }

    /// The metadata of the file of `contract`, from the inputs its stage's table is computed
    /// from.
    pub fn table(&self, contract: &TableContract) -> FileMeta {
        self.stage_table(contract.stage, contract.name, contract.version)
    }

    /// The metadata of table `name` (layout `version`) written by `stage`, from the inputs that
    /// table is computed from.
    pub fn stage_table(&self, stage: &str, name: &str, version: u32) -> FileMeta {
        let used: Vec<&InputHash> = match depends_on(stage, name) {
            Depends::Roles(roles) => self
                .inputs
                .iter()
                .filter(|i| roles.contains(&i.role))
                .collect(),
            Depends::SweepRuns => self.inputs.iter().filter(|i| i.sweep_run).collect(),
        };
        self.meta(stage, name, version, &used)
    }

    /// The metadata of table `name` (layout `version`) written by `stage` from the one input
    /// named `input` (the fetch stage's imports).
    pub fn input_file(&self, stage: &str, name: &str, version: u32, input: &str) -> FileMeta {
        let used: Vec<&InputHash> = self.inputs.iter().filter(|i| i.name == input).collect();
        self.meta(stage, name, version, &used)
    }

    fn meta(&self, stage: &str, name: &str, version: u32, used: &[&InputHash]) -> FileMeta {
        let mut pairs = vec![
            (
                "protospread.schema".to_string(),
                format!("{name} v{version}"),
            ),
            ("protospread.stage".to_string(), stage.to_string()),
        ];
        let mut put = |k: &str, v: &str| {
            if !v.is_empty() {
                pairs.push((k.to_string(), v.to_string()));
            }
        };
        put("protospread.command", &self.command);
        put("protospread.version", &self.version);
        put("protospread.config_sha256", &self.config_sha256);
        for i in used {
            pairs.push((
                format!("protospread.input.{}.sha256", i.name),
                i.sha256.clone(),
            ));
        }
        FileMeta::from_pairs(pairs)
    }
}

/// The key-value metadata of one Parquet file, keys sorted. The default holds none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileMeta {
    pairs: Vec<(String, String)>,
}

impl FileMeta {
    /// Metadata of these pairs; keys are sorted and the first of a repeated key kept, so the
    /// order of `pairs` does not change the file's bytes.
    pub fn from_pairs(pairs: impl IntoIterator<Item = (String, String)>) -> Self {
        let mut pairs: Vec<(String, String)> = pairs.into_iter().collect();
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        pairs.dedup_by(|a, b| a.0 == b.0);
        FileMeta { pairs }
    }

    /// The pairs, keys sorted.
    pub fn pairs(&self) -> &[(String, String)] {
        &self.pairs
    }

    /// The pairs as the Parquet writer takes them; `None` when there are none.
    pub(crate) fn key_values(&self) -> Option<Vec<KeyValue>> {
        (!self.pairs.is_empty()).then(|| {
            self.pairs
                .iter()
                .map(|(k, v)| KeyValue::new(k.clone(), v.clone()))
                .collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prov() -> Provenance {
        let input = |name: &str, role, sweep_run| InputHash {
            name: name.into(),
            role,
            sha256: format!("{name}-sha"),
            sweep_run,
        };
        Provenance {
            version: "9.9.9".into(),
            config_sha256: "cfg-sha".into(),
            command: "protospread score".into(),
            inputs: vec![
                input("h", InputRole::Human, false),
                input("a", InputRole::Answers, false),
                input("d", InputRole::Other, true),
            ],
        }
    }

    fn keys(m: &FileMeta) -> Vec<&str> {
        m.pairs().iter().map(|(k, _)| k.as_str()).collect()
    }

    #[test]
    fn each_table_names_only_its_inputs() {
        let p = prov();
        let parsed = p.table(&crate::PARSED_ANSWERS);
        assert!(keys(&parsed).contains(&"protospread.input.a.sha256"));
        assert!(!keys(&parsed).contains(&"protospread.input.h.sha256"));
        let norms = p.table(&crate::NORMS);
        assert_eq!(
            keys(&norms)
                .iter()
                .filter(|k| k.starts_with("protospread.input."))
                .collect::<Vec<_>>(),
            [&"protospread.input.h.sha256"]
        );
        let sweep = p.stage_table("aggregate", "sweep_rank", UNDECLARED_VERSION);
        assert!(keys(&sweep).contains(&"protospread.input.d.sha256"));
        assert!(!keys(&sweep).contains(&"protospread.input.a.sha256"));
        let one = p.input_file("fetch", "answers", 1, "a");
        assert_eq!(
            one.pairs(),
            &[
                ("protospread.command".into(), "protospread score".into()),
                ("protospread.config_sha256".into(), "cfg-sha".into()),
                ("protospread.input.a.sha256".into(), "a-sha".into()),
                ("protospread.schema".into(), "answers v1".into()),
                ("protospread.stage".into(), "fetch".into()),
                ("protospread.version".into(), "9.9.9".into()),
            ][..]
        );
    }

    #[test]
    fn no_run_no_empty_values() {
        let m = Provenance::default().table(&crate::SCALE_SCORES);
        assert_eq!(keys(&m), ["protospread.schema", "protospread.stage"]);
        assert_eq!(FileMeta::default().key_values(), None);
    }
}
