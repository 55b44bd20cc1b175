//! protospread-sweep: few-shot delimiter sweeps (Su et al., "A Single Character can Make or
//! Break Your LLM Evals", arXiv 2510.05152), recomputed from per-document results.
//!
//! - [`lmeval`]: lm-evaluation-harness task files, one per delimiter x {plain, named}.
//! - [`ingest`]: lm-eval's `results_*.json` + `samples_<task>_*.jsonl`, checked for a
//!   complete sweep over identical documents.
//! - [`tables`]: accuracy with exact intervals, spread, ranks and leads, naming gains.
//! - [`stats`]: the Clopper-Pearson interval.
//! - `significance`: Cochran's Q and McNemar's exact test over the paired documents, and the
//!   shared ranking measures (`sweep_significance`, `sweep_ranking`).
//! - [`dictionary`]: the native sweep on a generated dictionary-lookup task.
//!
//! The fetch stage calls [`ingest`] and writes the documents ([`samples_batch`]); the
//! aggregate stage reads them back ([`samples_from_batches`]) and calls [`compute`].

mod delimiter;
mod dictionary;
mod ingest;
mod lmeval;
mod significance;
mod staged;
mod stats;
mod tables;
mod yaml;

pub use delimiter::Delimiter;
pub use dictionary::{
    plan as plan_dictionary, record as record_dictionary, score as score_dictionary_reply,
    Doc as DictionaryDoc, Planned as DictionaryRequest, Record as DictionaryRecord,
    RunSummary as DictionaryRunSummary,
};
pub use ingest::{Ingested, SampleRecord, TaskConfigError, TaskSamples};
pub use lmeval::{
    generate as generate_lm_eval_tasks, installed_tasks_dir, Benchmark, Generated, GeneratedFile,
};
pub use staged::{samples_batch, samples_from_batches};
pub use tables::{cells, fmt_pct, spreads, Cell, Spread};

use arrow::record_batch::RecordBatch;
use protospread_core::{Config, SweepSection, SweepVariant};
use std::path::PathBuf;

/// Errors of the sweep crate; each names what it concerns.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// A file-system error from `fs_err`, whose message names the path.
    #[error(transparent)]
    Fs(#[from] std::io::Error),
    /// A file that does not parse.
    #[error("{}{}: {message}", file.display(), if *line > 0 { format!(": line {line}") } else { String::new() })]
    Malformed {
        /// The file.
        file: PathBuf,
        /// 1-based; 0 when the problem concerns the whole file.
        line: usize,
        /// What is wrong, for the user.
        message: String,
    },
    /// A task of an lm-eval results file whose configuration the sweep cannot use.
    #[error("{}: {source}", file.display())]
    Task {
        /// The results file.
        file: PathBuf,
        /// What its `configs.<task>` lacks.
        #[source]
        source: TaskConfigError,
    },
    /// A `[sweep]` setting that cannot be used.
    #[error("{0}")]
    Config(String),
    /// A folder where no sample file was found.
    #[error("{}: no lm-eval samples read; found {found}", dir.display())]
    NothingRead {
        /// The folder.
        dir: PathBuf,
        /// What was found instead.
        found: String,
    },
    /// An error of the shared layer (reading a file to hash it).
    #[error(transparent)]
    Core(#[from] protospread_core::CoreError),
    /// An error of the administer crate.
    #[error(transparent)]
    Administer(#[from] protospread_administer::AdministerError),
    /// A staged samples file whose columns are not its contract's.
    #[error("{}: not the sweep's documents", file.display())]
    Contract {
        /// The file.
        file: PathBuf,
        /// How it breaks the contract.
        #[source]
        source: Box<protospread_core::ContractError>,
    },
    /// An Arrow error while building or reading the sweep's tables.
    #[error(transparent)]
    Arrow(#[from] arrow::error::ArrowError),
    /// Every failed check, one per line.
    #[error("the sweep is not comparable ({} problem(s)):\n  {}", .0.len(), .0.join("\n  "))]
    Check(Vec<String>),
}

/// The validated `[sweep]` section.
#[derive(Debug, Clone)]
pub struct SweepSpec {
    /// Delimiters swept.
    pub delimiters: Vec<delimiter::Delimiter>,
    /// Variants swept.
    pub variants: Vec<SweepVariant>,
    /// Template naming the delimiter (named variant).
    pub naming_template: String,
    /// Few-shot examples per question.
    pub num_fewshot: u32,
    /// lm-eval metric.
    pub metric: String,
}

impl SweepSpec {
    /// Validate a `[sweep]` section: non-empty delimiters without duplicates, at least one
    /// variant and none twice, a naming template that names the delimiter, few-shot > 0.
    pub fn from_section(s: &SweepSection) -> Result<Self, SweepError> {
        let delimiters = delimiter::parse_set(&s.delimiters)?;
        let mut variants = s.variants.clone();
        variants.sort();
        variants.dedup();
        if variants.is_empty() || variants.len() != s.variants.len() {
            return Err(SweepError::Config(
                "[sweep] variants: give \"plain\" and/or \"named\", each once".into(),
            ));
        }
        if !s.naming_template.contains("{delimiter}")
            && !s.naming_template.contains("{delimiter_name}")
        {
            return Err(SweepError::Config(
                "[sweep] naming_template must contain {delimiter} or {delimiter_name}".into(),
            ));
        }
        if s.num_fewshot == 0 {
            return Err(SweepError::Config(
                "[sweep] num_fewshot: 0 examples have no delimiter between them".into(),
            ));
        }
        if s.metric.is_empty() {
            return Err(SweepError::Config("[sweep] metric is empty".into()));
        }
        Ok(SweepSpec {
            delimiters,
            variants,
            naming_template: s.naming_template.clone(),
            num_fewshot: s.num_fewshot,
            metric: s.metric.clone(),
        })
    }

    /// The delimiters whose slugs are `slugs`, in that order (every delimiter of the sweep when
    /// `slugs` is empty); a slug that is not a delimiter of the sweep, or is given twice, is an
    /// error naming it.
    pub fn select_delimiters(&self, slugs: &[String]) -> Result<Vec<Delimiter>, SweepError> {
        if slugs.is_empty() {
            return Ok(self.delimiters.clone());
        }
        let mut chosen: Vec<Delimiter> = Vec::new();
        for slug in slugs {
            let Some(d) = self.delimiters.iter().find(|d| &d.slug == slug) else {
                let all: Vec<&str> = self.delimiters.iter().map(|d| d.slug.as_str()).collect();
                return Err(SweepError::Config(format!(
                    "'{slug}' is not the slug of a [sweep] delimiter ({})",
                    all.join(",")
                )));
            };
            if chosen.contains(d) {
                return Err(SweepError::Config(format!("'{slug}' given twice")));
            }
            chosen.push(d.clone());
        }
        Ok(chosen)
    }
}

/// The client of a dictionary run: one request at a time, `timeout_seconds` per attempt and
/// `retries` after the first, each held to the bounds `administer` holds its flags to.
pub fn dictionary_client(
    base_url: &str,
    timeout_seconds: u64,
    retries: u32,
) -> Result<protospread_administer::Client, SweepError> {
    let settings = protospread_administer::ClientSettings::resolve(
        &protospread_core::AdministerSection::default(),
        Some(timeout_seconds),
        Some(retries),
        Some(1),
    )?;
    Ok(settings.client(base_url, None)?)
}

/// Ingest every configured run (lm-eval folders and dictionary records), check it, and
/// compute the tables: [`ingest`] then [`compute`].
pub fn tables(config: &Config) -> Result<Vec<(String, RecordBatch)>, SweepError> {
    let spec = SweepSpec::from_section(&config.sweep)?;
    let samples = ingest(config, &spec)?;
    if samples.is_empty() {
        return Ok(Vec::new());
    }
    compute(&samples, &spec)
}

/// Whether `[sweep]` names any run (`lm_eval_runs` or `dictionary_runs`): then the fetch stage
/// writes the sweep's documents and the aggregate stage its tables.
pub fn configured(config: &Config) -> bool {
    !config.sweep.lm_eval_runs.is_empty() || !config.sweep.dictionary_runs.is_empty()
}

/// Ingest and check every configured run (the fetch stage's part of the sweep).
///
/// Reads `[sweep] lm_eval_runs` and `[sweep] dictionary_runs` (resolved against the
/// configuration's folder). Returns no samples when neither is configured. Any problem found
/// by the check or during ingestion (a missing variant, different document sets, a
/// multi-turn run, ...) is an error listing every problem. lm-eval runs must cover every
/// configured delimiter; a dictionary run may cover a subset of them, each with every
/// configured variant over the same documents. A dictionary run that is also declared as an
/// `[[inputs]]` entry (same path) must match that entry's sha256.
pub fn ingest(config: &Config, spec: &SweepSpec) -> Result<Vec<TaskSamples>, SweepError> {
    let mut samples = Vec::new();
    if !config.sweep.lm_eval_runs.is_empty() {
        let ing = ingest_all(config, spec)?;
        if !ing.problems.is_empty() {
            return Err(SweepError::Check(ing.problems));
        }
        samples = ing.samples;
    }
    samples.extend(ingest_dictionary_runs(config, spec)?);
    Ok(samples)
}

/// The sweep's tables from checked samples (the aggregate stage's part of the sweep): the
/// cells with their intervals and spreads, `sweep_significance` and `sweep_ranking`.
pub fn compute(
    samples: &[TaskSamples],
    spec: &SweepSpec,
) -> Result<Vec<(String, RecordBatch)>, SweepError> {
    let cells = tables::cells(samples, spec)?;
    let mut out = tables::build(&cells, spec);
    out.push((
        protospread_core::SWEEP_SIGNIFICANCE.name.to_string(),
        significance::significance(samples, &cells, spec),
    ));
    out.push((
        protospread_core::SWEEP_RANKING.name.to_string(),
        significance::sweep_ranking(&cells),
    ));
    Ok(out)
}

/// The label of every lm-eval run and of a dictionary record file not declared as an input:
/// both are recordings of a real model's replies.
pub const RECORDED: &str = "recorded";

/// Read every `[sweep] dictionary_runs` file, verify declared checksums, and check that the
/// runs form a complete sweep over the delimiters they cover. A file declared as an
/// `[[inputs]]` entry has that entry's name as source and its label (default `recorded`);
/// any other file has its configured path as source.
pub fn ingest_dictionary_runs(
    config: &Config,
    spec: &SweepSpec,
) -> Result<Vec<ingest::TaskSamples>, SweepError> {
    let mut samples = Vec::new();
    for p in &config.sweep.dictionary_runs {
        let path = config.resolve(p);
        let mut source = p.display().to_string();
        let mut label = RECORDED.to_string();
        for input in &config.inputs {
            if input.path.as_ref().map(|ip| config.resolve(ip)) == Some(path.clone()) {
                let got = protospread_core::sha256_file(&path)?;
                if got != input.sha256 {
                    return Err(SweepError::Config(format!(
                        "{}: sha256 {got} differs from [[inputs]] {} ({})",
                        path.display(),
                        input.name,
                        input.sha256
                    )));
                }
                source = input.name.clone();
                if let Some(l) = &input.label {
                    label = l.clone();
                }
            }
        }
        let records = dictionary::ingest(&path, spec)?;
        let run = fs_err::canonicalize(&path).map_err(SweepError::Fs)?;
        samples.extend(ingest::TaskSamples::from_records(
            &records, &source, &label, &run,
        ));
    }
    let checked = ingest::check(&samples, &covered_spec(&samples, spec));
    let mut problems = checked.problems;
    problems.extend(checked.gaps);
    if !problems.is_empty() {
        return Err(SweepError::Check(problems));
    }
    Ok(samples)
}

/// The spec restricted to the delimiters that occur in `samples` (configured order), for
/// the completeness check of runs that cover a subset of the configured delimiters.
pub fn covered_spec(samples: &[ingest::TaskSamples], spec: &SweepSpec) -> SweepSpec {
    let present: std::collections::BTreeSet<&str> =
        samples.iter().map(|t| t.delimiter.slug.as_str()).collect();
    let mut s = spec.clone();
    s.delimiters.retain(|d| present.contains(d.slug.as_str()));
    s
}

/// Ingest and check every configured run folder (`[sweep] lm_eval_runs`); problems are
/// collected, not raised, and a cell of the configured grid that no run holds is one of them.
/// Each folder's rows carry its configured path as `source` and the label `recorded`.
pub fn ingest_all(config: &Config, spec: &SweepSpec) -> Result<ingest::Ingested, SweepError> {
    let dirs: Vec<(String, PathBuf)> = config
        .sweep
        .lm_eval_runs
        .iter()
        .map(|d| (d.display().to_string(), config.resolve(d)))
        .collect();
    let declared = Declared {
        delimiters: true,
        variants: true,
    };
    let mut ing = ingest_folders(&dirs, spec, declared)?.0;
    let missing = std::mem::take(&mut ing.missing);
    ing.problems.extend(missing);
    Ok(ing)
}

/// Which half of the sweep's grid (delimiters x variants) the configuration declares; the
/// other comes from the runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Declared {
    /// `[sweep] delimiters` was given.
    pub delimiters: bool,
    /// `[sweep] variants` was given.
    pub variants: bool,
}

/// Ingest and check lm-eval output folders given as (source, path).
///
/// The grid the runs are checked against is `spec`'s delimiters and variants where
/// `declared` says so, else the ones the runs used. Cells of that grid that no run holds,
/// and cells of a run outside it, go to [`Ingested::missing`]; everything else that makes
/// the sweep incomparable to [`Ingested::problems`]. The returned spec covers every cell
/// present (the grid, then any delimiter outside it in text order), for [`cells`].
pub fn ingest_folders(
    dirs: &[(String, PathBuf)],
    spec: &SweepSpec,
    declared: Declared,
) -> Result<(ingest::Ingested, SweepSpec), SweepError> {
    let mut all = ingest::Ingested::default();
    for (source, dir) in dirs {
        let mut one = ingest::ingest_lm_eval(dir, spec, source, RECORDED)?;
        let prefix = |v: Vec<String>| -> Vec<String> {
            v.into_iter()
                .map(|m| format!("{}/{m}", dir.display()))
                .collect()
        };
        all.problems
            .extend(prefix(std::mem::take(&mut one.problems)));
        all.notes.extend(prefix(std::mem::take(&mut one.notes)));
        all.files_read
            .extend(prefix(std::mem::take(&mut one.files_read)));
        all.samples.append(&mut one.samples);
    }
    let mut grid = if declared.delimiters {
        spec.clone()
    } else {
        covered_spec(&all.samples, spec)
    };
    let mut extra: Vec<delimiter::Delimiter> = Vec::new();
    for t in &all.samples {
        if !grid.delimiters.contains(&t.delimiter) && !extra.contains(&t.delimiter) {
            extra.push(t.delimiter.clone());
        }
    }
    extra.sort_by(|a, b| a.text.cmp(&b.text));
    let present: std::collections::BTreeSet<SweepVariant> =
        all.samples.iter().map(|t| t.variant).collect();
    if !declared.variants {
        grid.variants = present.iter().copied().collect();
    }
    if !declared.delimiters {
        grid.delimiters.append(&mut extra);
    }
    let checked = ingest::check(&all.samples, &grid);
    all.problems.extend(checked.problems);
    all.missing = checked.gaps;
    let mut used = grid;
    used.delimiters.extend(extra);
    used.variants.extend(present);
    used.variants.sort();
    used.variants.dedup();
    Ok((all, used))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(sweep: &str) -> Result<Config, String> {
        let text = format!("[study]\nname = \"t\"\n\n[sweep]\n{sweep}");
        Config::parse(
            &text,
            std::path::Path::new("p.toml"),
            std::path::Path::new("."),
        )
        .map_err(|e| e.to_string())
    }

    #[test]
    fn sweep_section_parses_and_validates() {
        let c = parse("delimiters = [\"\\n\", \"\\t\", \"#\"]\nvariants = [\"named\"]\n").unwrap();
        let s = SweepSpec::from_section(&c.sweep).unwrap();
        let slugs: Vec<&str> = s.delimiters.iter().map(|d| d.slug.as_str()).collect();
        assert_eq!(slugs, ["nl", "tab", "hash"]);
        assert_eq!(s.variants, [SweepVariant::Named]);
        // The defaults: 35 delimiters, both variants, 5 shots.
        let d = SweepSpec::from_section(&parse("").unwrap().sweep).unwrap();
        assert_eq!(
            (d.delimiters.len(), d.variants.len(), d.num_fewshot),
            (35, 2, 5)
        );

        let e = parse("variants = [\"plain\", \"loud\"]\n").unwrap_err();
        assert!(e.contains("loud") && e.contains("line 5"), "{e}");
        let e = parse("delimter = [\"#\"]\n").unwrap_err();
        assert!(e.contains("delimter"), "{e}");
        for (bad, want) in [
            ("delimiters = []\n", "empty"),
            ("delimiters = [\"#\", \"#\"]\n", "twice"),
            ("variants = [\"plain\", \"plain\"]\n", "each once"),
            ("naming_template = \"no placeholder\"\n", "{delimiter}"),
            ("num_fewshot = 0\n", "num_fewshot"),
        ] {
            let e = SweepSpec::from_section(&parse(bad).unwrap().sweep)
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{bad}: {e}");
        }
    }
}
