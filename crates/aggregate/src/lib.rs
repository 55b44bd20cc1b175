//! protospread-aggregate: per-cell protocol and sampling spread of questionnaire scale scores.
//!
//! Reads `out/score/scale_scores.parquet`, `out/score/norms.parquet`,
//! `out/score/reply_rules.parquet` (the requests per model, condition and reply rule: the
//! `requests` table counts the strict rule's; passed through as table `reply_rules`) and `out/score/scale_scores_by_rule.parquet` (the side-by-side tables
//! `cells_by_rule`, `protocol_vs_sampling_by_rule`, `verdict_by_rule`: every reply rule x
//! protocol set, primary and secondary) and writes the per-cell statistics and the study tables to
//! `out/aggregate/` (one Parquet file per table, plus `SHA256SUMS`). Every table is a DataFusion
//! plan (SQL over the inputs and the scalar functions of `stats`) run in the engine's bounded,
//! spilling session. The statistical conventions (sample SD with divisor n - 1 from exact
//! integer moments, exact variance comparison, the median of an even count, the ratio rule when
//! the sampling SD is 0, which cells are dropped) are stated in docs/statistics.md.
//!
//! Determinism: the plans sum integers only and convert each cell's moments to floats once, so
//! the output bytes are the same for any number of DataFusion partitions or threads (tested in
//! `tests/tables.rs`).

mod functions;
mod groups;
mod plan;
mod stage;
mod stats;
mod table;
mod unique;

use protospread_core::{AggregateSection, Config, InputRole};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use arrow::record_batch::RecordBatch;
pub use protospread_engine::{EngineOptions, MAX_PARTITIONS};
pub use stage::{PRIMARY, SECONDARY};
pub use stats::{diff_z, mean_z, ratio, sd_z, shift_z, variance_gt, z, Moments, RatioRule};
use table::Rows;
pub use table::Table;

/// Errors of the aggregate stage; each names the file it concerns.
#[derive(Debug, thiserror::Error)]
pub enum AggregateError {
    /// An input table that is missing or malformed.
    #[error("{path}: {message}")]
    Input {
        /// The input file.
        path: PathBuf,
        /// What is wrong, for the user.
        message: String,
    },
    /// An input table that the Parquet or Arrow library cannot read.
    #[error("{}: {}{source}", path.display(), if what.is_empty() { String::new() } else { format!("{what}: ") })]
    Read {
        /// The input file.
        path: PathBuf,
        /// What was being done, when the library's error does not say it ("" otherwise).
        what: String,
        /// The library's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A DataFusion plan (or the scratch file it writes) failed.
    #[error("{}: query failed{}", path.display(), if what.is_empty() { String::new() } else { format!(": {what}") })]
    Engine {
        /// The file the plan reads or writes.
        path: PathBuf,
        /// Which plan or table, when there is more than one.
        what: String,
        /// The engine's (or the file system's) error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// An `[aggregate]` setting that cannot be used.
    #[error("[aggregate] in the configuration: {0}")]
    Config(String),
    /// An input's `headline_arm` names an arm its stored answers do not have.
    #[error(
        "input {input:?}: headline_arm {arm:?} is not an arm of this source (its arms: {arms})"
    )]
    HeadlineArm {
        /// The input's name in pipeline.toml.
        input: String,
        /// The arm it names.
        arm: String,
        /// The arms its stored answers have, comma-separated.
        arms: String,
    },
    /// An error of the shared layer.
    #[error(transparent)]
    Core(#[from] protospread_core::CoreError),
    /// An error of the DataFusion session.
    #[error(transparent)]
    Session(#[from] protospread_engine::EngineError),
    /// The delimiter sweep's tables could not be computed from its documents.
    #[error("{}: the delimiter sweep's tables", path.display())]
    Sweep {
        /// The fetch stage's `sweep_samples.parquet`.
        path: PathBuf,
        /// What the sweep crate found.
        #[source]
        source: protospread_sweep::SweepError,
    },
}

/// The library error behind a failed read or plan.
type Cause = Box<dyn std::error::Error + Send + Sync>;

impl AggregateError {
    /// The input `path` does not read: `what` was being done ("" when `source` says it).
    pub(crate) fn read(path: &Path, what: impl Into<String>, source: impl Into<Cause>) -> Self {
        let (path, what, source) = (path.to_path_buf(), what.into(), source.into());
        AggregateError::Read { path, what, source }
    }

    /// A failed plan on `path`: `what` names the plan or table ("" when the path says it).
    pub(crate) fn engine(path: &Path, what: impl Into<String>, source: impl Into<Cause>) -> Self {
        let (path, what, source) = (path.to_path_buf(), what.into(), source.into());
        AggregateError::Engine { path, what, source }
    }
}

/// Parameters of the stage: `[aggregate]` of pipeline.toml and the `headline_arm` of each
/// stored-answer input that sets one.
#[derive(Debug, Clone, Default)]
pub struct Params {
    /// `[aggregate]` of pipeline.toml.
    pub aggregate: AggregateSection,
    /// Source (the `[[inputs]]` name of a stored-answer set) -> the arm its verdict uses, from
    /// the input's `headline_arm`. A source not listed uses its single arm when it has exactly
    /// one, else `aggregate.headline_arm` (docs/statistics.md).
    pub input_arms: BTreeMap<String, String>,
    /// `[sweep]` when it names runs: the stage then also writes the sweep's tables, from the
    /// documents the fetch stage staged (`out/fetch/sweep_samples.parquet`).
    pub sweep: Option<protospread_core::SweepSection>,
    /// Leave out the inference tables (`cell_tests` .. `ranking`): only to measure what they
    /// add to the stage (docs/performance.md). The report of such a folder has none of their
    /// tables or figures.
    pub without_inference: bool,
}

impl Params {
    /// The stage's parameters from a parsed configuration.
    pub fn from_config(cfg: &Config) -> Self {
        Params {
            aggregate: cfg.aggregate.clone(),
            input_arms: cfg
                .inputs_with_role(InputRole::Answers)
                .filter_map(|i| Some((i.name.clone(), i.headline_arm.clone()?)))
                .collect(),
            sweep: protospread_sweep::configured(cfg).then(|| cfg.sweep.clone()),
            without_inference: false,
        }
    }
}

impl From<AggregateSection> for Params {
    fn from(aggregate: AggregateSection) -> Self {
        Params {
            aggregate,
            input_arms: BTreeMap::new(),
            sweep: None,
            without_inference: false,
        }
    }
}

/// Check the parameters: non-empty disjoint condition sets, known group columns, thresholds in
/// range, no empty input arm.
pub fn validate(params: &Params) -> Result<(), AggregateError> {
    let err = |m: String| Err(AggregateError::Config(m));
    if let Some((input, _)) = params.input_arms.iter().find(|(_, a)| a.is_empty()) {
        return err(format!("input {input:?}: headline_arm is empty"));
    }
    let p = &params.aggregate;
    if p.protocol_conditions.len() < 2 {
        return err("protocol_conditions needs at least two conditions".into());
    }
    if p.sampling_conditions.is_empty() {
        return err("sampling_conditions needs at least one condition".into());
    }
    if let Some(c) = p
        .protocol_conditions
        .iter()
        .find(|c| p.sampling_conditions.contains(c))
    {
        return err(format!(
            "condition {c:?} is in both protocol_conditions and sampling_conditions"
        ));
    }
    for (i, c) in p.protocol_conditions.iter().enumerate() {
        if p.protocol_conditions[..i].contains(c) {
            return err(format!(
                "condition {c:?} is listed twice in protocol_conditions"
            ));
        }
    }
    let key = "secondary_protocol_conditions";
    let sec = &p.secondary_protocol_conditions;
    if sec.len() == 1 {
        return err(format!(
            "{key} needs at least two conditions (or [] for no secondary analysis)"
        ));
    }
    for (i, c) in sec.iter().enumerate() {
        if !p.protocol_conditions.contains(c) {
            return err(format!(
                "{key}: condition {c:?} is not in protocol_conditions"
            ));
        }
        if sec[..i].contains(c) {
            return err(format!("{key}: condition {c:?} is listed twice"));
        }
    }
    if p.groups.is_empty() {
        return err("groups needs at least one column (\"arm\")".into());
    }
    for (i, g) in p.groups.iter().enumerate() {
        if g != "arm" && g != "cohort" {
            return err(format!(
                "groups: unknown column {g:?} (use \"arm\" and/or \"cohort\")"
            ));
        }
        if p.groups[..i].contains(g) {
            return err(format!("groups: column {g:?} listed twice"));
        }
    }
    for [a, b] in &p.rerun_pairs {
        for c in [a, b] {
            if !p.protocol_conditions.contains(c) {
                return err(format!(
                    "rerun pair condition {c:?} is not in protocol_conditions"
                ));
            }
        }
    }
    for (name, set) in [("shift_from", &p.shift_from), ("shift_to", &p.shift_to)] {
        if set.is_empty() {
            return err(format!("{name} needs at least one condition"));
        }
        if let Some(c) = set.iter().find(|c| !p.protocol_conditions.contains(c)) {
            return err(format!(
                "{name}: condition {c:?} is not in protocol_conditions"
            ));
        }
    }
    if !(0.0..=1.0).contains(&p.verdict_share) || !(0.0..=1.0).contains(&p.verdict_few) {
        return err("verdict_share and verdict_few are shares between 0 and 1".into());
    }
    if p.target_partitions > MAX_PARTITIONS {
        return err(format!(
            "target_partitions {} is more than the maximum of {MAX_PARTITIONS}",
            p.target_partitions
        ));
    }
    if !(p.verdict_ratio.is_finite() && p.verdict_ratio > 0.0) {
        return err("verdict_ratio must be a positive number".into());
    }
    Ok(())
}

/// What a run of the stage produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Per source: (label, kept cells, dropped cells).
    pub sources: Vec<(String, String, usize, usize)>,
    /// Files written, relative to the output folder, sorted.
    pub files: Vec<String>,
}

/// Compute every table from the score stage's folder (no writing), in a session with the
/// default engine options (1 GiB memory limit).
pub fn compute_tables(score_dir: &Path, params: &Params) -> Result<Vec<Table>, AggregateError> {
    compute_tables_with(score_dir, params, &EngineOptions::default())
}

/// [`compute_tables`] in a session of `engine` (memory limit, spill folder); the partition
/// count is `params.aggregate.target_partitions`.
pub fn compute_tables_with(
    score_dir: &Path,
    params: &Params,
    engine: &EngineOptions,
) -> Result<Vec<Table>, AggregateError> {
    validate(params)?;
    let mut tables = Vec::new();
    stage::compute(score_dir, params, engine, &mut |t| {
        tables.push(t.into_table(score_dir)?);
        Ok(())
    })?;
    tables.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(tables)
}

/// Run the stage: read `score_dir`, write every table to `out_dir` (all or nothing) and its
/// `SHA256SUMS`. Parquet files in `out_dir` that this run does not write are removed, so the
/// folder holds exactly the current tables.
pub fn run(score_dir: &Path, out_dir: &Path, params: &Params) -> Result<Summary, AggregateError> {
    run_with_extra(
        score_dir,
        out_dir,
        params,
        &EngineOptions::default(),
        &[],
        &protospread_core::Provenance::default(),
        &protospread_core::NoProgress,
    )
}

/// Run the stage in the output root `out` as the pipeline does: read `out/score` (and, when
/// `params.sweep` names runs, the sweep's documents `out/fetch/sweep_samples.parquet`), write
/// every table to `out/aggregate` in one all-or-nothing commit with its `SHA256SUMS`. Each
/// file's key-value metadata comes from `prov` ([`protospread_core::Provenance::stage_table`]);
/// each table staged is counted to `progress`.
pub fn run_in(
    out: &Path,
    params: &Params,
    engine: &EngineOptions,
    prov: &protospread_core::Provenance,
    progress: &dyn protospread_core::Progress,
) -> Result<Summary, AggregateError> {
    validate(params)?;
    let sweep = match &params.sweep {
        Some(section) => sweep_tables(&out.join("fetch"), section)?,
        None => Vec::new(),
    };
    run_with_extra(
        &out.join("score"),
        &out.join("aggregate"),
        params,
        engine,
        &sweep,
        prov,
        progress,
    )
}

/// The delimiter sweep's tables from the fetch stage's `sweep_samples.parquet` in `fetch_dir`.
fn sweep_tables(
    fetch_dir: &Path,
    section: &protospread_core::SweepSection,
) -> Result<Vec<(String, arrow::record_batch::RecordBatch)>, AggregateError> {
    let path = fetch_dir.join(protospread_core::SWEEP_SAMPLES.file_name());
    if !path.is_file() {
        return Err(AggregateError::Input {
            path,
            message: "missing: [sweep] names runs, whose documents the fetch stage writes here; \
                      run `protospread fetch` first"
                .into(),
        });
    }
    let sweep_err = |source| AggregateError::Sweep {
        path: path.clone(),
        source,
    };
    let spec = protospread_sweep::SweepSpec::from_section(section).map_err(sweep_err)?;
    let (_, batches) = protospread_core::read_parquet(&path)?;
    let samples = protospread_sweep::samples_from_batches(&path, &batches).map_err(sweep_err)?;
    protospread_sweep::compute(&samples, &spec).map_err(sweep_err)
}

/// [`run`], also writing `extra` tables computed elsewhere (the sweep's tables), each as
/// `out_dir/<name>.parquet` in the same all-or-nothing commit and the same manifest. A name
/// that collides with a table of this stage is an error.
fn run_with_extra(
    score_dir: &Path,
    out_dir: &Path,
    params: &Params,
    engine: &EngineOptions,
    extra: &[(String, arrow::record_batch::RecordBatch)],
    prov: &protospread_core::Provenance,
    progress: &dyn protospread_core::Progress,
) -> Result<Summary, AggregateError> {
    validate(params)?;
    progress.begin("aggregate", "tables", None);
    let mut staged = protospread_core::Staged::in_dir(out_dir)?;
    let mut files = Vec::new();
    let mut sources = Vec::new();
    // Each table's rows stream into its staged file as the plan computes them: at 10^9
    // answers the per-cell tables are gigabytes.
    stage::compute(score_dir, params, engine, &mut |t| {
        let name = format!("{}.parquet", t.name);
        let path = out_dir.join(&name);
        let meta = prov.stage_table("aggregate", &t.name, layout_version(&t.name));
        let mut count = Sources::default();
        let cells = t.name == protospread_core::CELLS.name;
        write_table(&mut staged, &path, t, &meta, |b| {
            if cells {
                count.add(b);
            }
        })?;
        if cells {
            sources = count.0;
        }
        files.push(name);
        progress.advance(1);
        Ok(())
    })?;
    for (stem, batch) in extra {
        let name = format!("{stem}.parquet");
        let path = out_dir.join(&name);
        if files.contains(&name) {
            return Err(AggregateError::Input {
                path,
                message: "an extra table has the name of a table of the aggregate stage".into(),
            });
        }
        let meta = prov.stage_table("aggregate", stem, layout_version(stem));
        let bytes = protospread_core::encode_parquet(
            &path,
            batch.schema(),
            std::slice::from_ref(batch),
            &meta,
        )?;
        staged.put(&path, &bytes)?;
        files.push(name);
        progress.advance(1);
    }
    // Replaces the folder with exactly these files and their SHA256SUMS: a stale table of an
    // earlier run is gone without deleting anything protospread did not write.
    staged.commit()?;
    progress.end();
    files.sort();
    Ok(Summary { sources, files })
}

/// The layout version of the aggregate stage's table `name`: its contract's, or
/// [`protospread_core::UNDECLARED_VERSION`] for a table no contract declares.
fn layout_version(name: &str) -> u32 {
    protospread_core::CONTRACTS
        .iter()
        .find(|c| c.stage == "aggregate" && c.name == name)
        .map_or(protospread_core::UNDECLARED_VERSION, |c| c.version)
}

/// Rows per write to a table's Parquet file. The writer cuts pages per write, so the writes
/// must not depend on how the plan batched its rows (which varies with partitions and
/// threads): every write but the last has exactly this many rows. A multiple of the pinned
/// write batch (1,024 rows) and a divisor of the row group size, so that a table of at most
/// this many rows is one write, the same bytes as the table written whole.
const WRITE_ROWS: usize = 1 << 16;

/// Write `rows` to the staged file of `path` with the pinned settings and `meta`, calling
/// `each` with every batch on the way.
fn write_table(
    staged: &mut protospread_core::Staged,
    path: &Path,
    rows: Rows<'_>,
    meta: &protospread_core::FileMeta,
    mut each: impl FnMut(&RecordBatch),
) -> Result<(), AggregateError> {
    use protospread_core::CoreError;
    let perr = |e: parquet::errors::ParquetError| CoreError::parquet(path, e);
    let tmp = staged.file(path)?;
    let file = fs_err::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(CoreError::Fs)?;
    let props = protospread_core::parquet_writer_properties(meta);
    let mut w = parquet::arrow::ArrowWriter::try_new(file, rows.schema.clone(), Some(props))
        .map_err(perr)?;
    let cut = |e: arrow::error::ArrowError| AggregateError::engine(path, "writing", e);
    let mut rechunk = protospread_engine::Rechunk::new(WRITE_ROWS);
    for b in rows.batches {
        let b = b?;
        each(&b);
        for chunk in rechunk.push(b).map_err(cut)? {
            w.write(&chunk).map_err(perr)?;
        }
    }
    if let Some(last) = rechunk.finish().map_err(cut)? {
        w.write(&last).map_err(perr)?;
    }
    let file = w.into_inner().map_err(perr)?;
    file.sync_all().map_err(CoreError::Fs)?;
    Ok(())
}

/// Per source of `cells`: (source, label, kept cells, dropped cells), counted batch by batch.
#[derive(Default)]
struct Sources(Vec<(String, String, usize, usize)>);

impl Sources {
    fn add(&mut self, b: &RecordBatch) {
        use arrow::array::AsArray;
        let col = |n: &str| b.column_by_name(n).and_then(|c| c.as_string_opt::<i32>());
        let (Some(src), Some(lab), Some(kept)) = (
            col("source"),
            col("label"),
            b.column_by_name("kept").and_then(|c| c.as_boolean_opt()),
        ) else {
            return;
        };
        // Cells are sorted by source: one run per source, its label from the first cell.
        let out = &mut self.0;
        for i in 0..b.num_rows() {
            let s = src.value(i);
            if out.last().is_none_or(|l| l.0 != s) {
                out.push((s.to_string(), lab.value(i).to_string(), 0, 0));
            }
            let last = out.last_mut().expect("pushed above");
            if kept.value(i) {
                last.2 += 1;
            } else {
                last.3 += 1;
            }
        }
    }
}
