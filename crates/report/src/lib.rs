//! protospread-report: the study's tables as canonical CSV, Markdown and Parquet (a copy of
//! the file each table was read from) and one self-contained HTML report; plus `verify` (compare a regeneration with committed checksums) and `bag`
//! (a BagIt archive, RFC 8493).
//!
//! The report stage renders Parquet tables generically (`render`, `stream`): every table of
//! `out/aggregate/` and the tables listed in `[report] tables` (by default the score stage's
//! parity, mutation-sweep and norms tables). One float formatting rule
//! (`push_float`) is used for every figure. Each table is read once, batch by batch, straight
//! into its CSV file; the Markdown and the HTML hold whole only the tables of at most
//! [`FULL_ROWS`] rows (and report.html at most [`PAGE_TABLE_BYTES`] of them), and of larger
//! tables an excerpt, so their size does not grow with the study. Each table's Parquet file
//! is copied into the report folder as it is, streamed, so that the folder alone holds every
//! table in both forms. See docs/report.md.

mod bag;
mod headline;
mod html;
mod inference;
mod provenance;
mod recorded;
mod render;
mod stream;
mod svg;
mod verify;

/// Tables built in unit tests: one helper for every module's tests.
#[cfg(test)]
mod test_tables {
    use crate::render::TextTable;
    use crate::Rendered;

    /// A rendered table `name` of text cells, no title or description.
    /// Its `recorded` rows are those whose `label` is `recorded`, as the report stage keeps them.
    pub(crate) fn table(name: &str, header: &[&str], rows: &[&[&str]]) -> Rendered {
        let head = TextTable {
            header: header.iter().map(|s| s.to_string()).collect(),
            numeric: vec![false; header.len()],
            rows: rows
                .iter()
                .map(|r| r.iter().map(|s| s.to_string()).collect())
                .collect(),
        };
        let mut recorded = head.clone();
        let label = head.col("label");
        recorded
            .rows
            .retain(|r| label.is_some_and(|l| r[l] == "recorded"));
        Rendered {
            name: name.into(),
            title: String::new(),
            description: String::new(),
            from: String::new(),
            rows: head.rows.len(),
            head,
            excerpt: None,
            recorded,
        }
    }
}

pub use bag::{bagging_date, write_bag, BagSummary, Content, PayloadFile};
pub use provenance::{bag_contents, BagContents, Tool};
pub use render::{to_markdown, TextTable};
pub use stream::{EXTREME_ROWS, FULL_ROWS};
pub use verify::{
    compare_inputs, compare_outputs, first_csv_difference, input_manifest, read_expected,
    update as update_checksums, Difference,
};

use protospread_core::{
    ReportSection, BY_TEST, CELLS, CELLS_BY_RULE, CELL_TESTS, CELL_TESTS_BY_GROUP, CONSTANT_RUNS,
    DROPPED_CELLS, ERROR_BARS, HEADLINE_INTERVAL, MUTATION_SWEEP, NORMS, PARITY_SUMMARY,
    PROTOCOL_VS_SAMPLING, PROTOCOL_VS_SAMPLING_BY_RULE, RANGE, RANKING, READABLE_REPLIES,
    REPLY_RERUNS, REQUESTS, RERUNS, SEPARATE_ARMS, SWEEP_ACCURACY, SWEEP_DELIMITER_GAIN,
    SWEEP_DELIMITER_GAIN_MEAN, SWEEP_LEAD, SWEEP_NAMED_GAIN, SWEEP_NAMED_GAIN_MEAN, SWEEP_RANK,
    SWEEP_SPREAD, VERDICT, VERDICT_BY_RULE,
};
use std::path::{Path, PathBuf};

/// Errors of the report, verify and bag code; each names the file it concerns.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A table that cannot be read or rendered.
    #[error("{path}: {message}")]
    Table {
        /// The table file.
        path: PathBuf,
        /// What is wrong, for the user.
        message: String,
    },
    /// A declared table whose file breaks its contract: a column missing or of another type.
    #[error("{path}: {source}")]
    Contract {
        /// The table file.
        path: PathBuf,
        /// The column the file lacks.
        source: protospread_core::ContractError,
    },
    /// A Parquet table that cannot be read.
    #[error("{path}: {source}")]
    Parquet {
        /// The table file.
        path: PathBuf,
        /// The reader's error.
        source: parquet::errors::ParquetError,
    },
    /// A column the renderer cannot turn into text.
    #[error("{path}: {source}")]
    Arrow {
        /// The table file.
        path: PathBuf,
        /// The formatter's error.
        source: arrow::error::ArrowError,
    },
    /// A CSV output that cannot be written.
    #[error("{path}: {source}")]
    Csv {
        /// The CSV file being written.
        path: PathBuf,
        /// The writer's error.
        source: csv::Error,
    },
    /// A command-line usage error.
    #[error("{0}")]
    Usage(String),
    /// An error of the shared layer.
    #[error(transparent)]
    Core(#[from] protospread_core::CoreError),
}

impl ReportError {
    pub(crate) fn table(path: &Path, message: impl Into<String>) -> Self {
        ReportError::Table {
            path: path.to_path_buf(),
            message: message.into(),
        }
    }
}

/// Title and one-line description of a known table, by its name (a declared table's from its
/// contract, so that its name is written once); order here is the order in the report.
pub const CATALOG: &[(&str, &str, &str)] = &[
    (VERDICT.name, "Verdict", "The verdict rule applied per source to its headline arm (column arm: the input's headline_arm, else the source's single arm, else [aggregate] headline_arm), with its thresholds from [aggregate] (share of cells, median ratio, \"few\")."),
    (HEADLINE_INTERVAL.name, "Headline with 95% intervals", "Per source, over its headline arm's kept cells: the share of cells with protocol SD > sampling SD and the median ratio, each with a 95% percentile interval from a cluster bootstrap over models (2000 replicates, SplitMix64 from the seed shown), and the share expected if setups and samples were exchangeable (mean over cells of the permutation probability of protocol SD > sampling SD; docs/statistics.md)."),
    (CELL_TESTS_BY_GROUP.name, "Exact permutation tests, by group", "Per group: cells tested, cells with p <= 0.05, and cells that remain after Benjamini-Hochberg at q = 0.05 within the group."),
    (PROTOCOL_VS_SAMPLING.name, "Protocol SD versus sampling SD, by group", "Kept cells where the SD over the protocol administrations exceeds the SD over the temperature-1 samples, and the median ratio (inf = sampling SD 0)."),
    (RANGE.name, "Highest minus lowest setup, in human SDs", "Per group: median, min and max of the range over the protocol administrations, and cells with a range of at least 1 and 2 human SDs."),
    (BY_TEST.name, "By test", "Per group and test: cells with protocol SD > sampling SD, median ratio, median range."),
    (RERUNS.name, "Rerun differences", "Absolute difference in human SDs between a condition and its rerun, per group: median and max over cells."),
    (SEPARATE_ARMS.name, "Separate arms (command-line tools)", "Arms reported apart (no temperature control): same direction = the cell's protocol shift (mean z whole-test minus single-item setups) has the sign of the median shift of that scale in the source's headline arm (reference_arm); median range in human SDs."),
    (REQUESTS.name, "Requests, unreadable replies and constant-answer administrations", "Per model and condition: requests sent, failed, replies with an unreadable answer, administrations with constant answers."),
    (READABLE_REPLIES.name, "Readable replies under each reply rule", "Per source, model and condition: requests, replies read under each rule of [score] reply_rules (strict = the study's rule, behind every other table; lenient = a leading option number with at most an option label, docs/stored-answers.md), and item lines read. A whole-test reply is readable when every shown position is read."),
    (VERDICT_BY_RULE.name, "Verdict under each reply rule: primary and secondary (single-item) analysis", "The verdict rule per source over its headline arm, for every reply rule x protocol set. Every row names its reply rule (strict = the study's rule; lenient, docs/stored-answers.md) and its protocol_set: primary = the study's protocol set (protocol_conditions, ten setups); secondary_single_item = the declared SECONDARY analysis over the single-item setups only (secondary_protocol_conditions), same sampling set and drop rules (docs/statistics.md). A \"no verdict\" line says how many of the arm's cells were dropped and the first one's reason."),
    (PROTOCOL_VS_SAMPLING_BY_RULE.name, "Headline arm under each reply rule: primary and secondary (single-item) analysis", "Per source, the group of its headline arm: kept and dropped cells, cells with protocol SD > sampling SD, median ratio and median range, for every reply rule x protocol set (a row also when no cell is kept). Every row names its reply rule (strict = the study's rule; lenient, docs/stored-answers.md) and its protocol_set: primary = the study's protocol set (protocol_conditions, ten setups); secondary_single_item = the declared SECONDARY analysis over the single-item setups only (secondary_protocol_conditions), same sampling set and drop rules (docs/statistics.md)."),
    (CELLS_BY_RULE.name, "Per-cell detail under each reply rule: primary and secondary (single-item) analysis", "Every cell for every reply rule x protocol set, with the columns of cells that do not depend on the shift or rerun settings. Every row names its reply rule (strict = the study's rule; lenient, docs/stored-answers.md) and its protocol_set: primary = the study's protocol set (protocol_conditions, ten setups); secondary_single_item = the declared SECONDARY analysis over the single-item setups only (secondary_protocol_conditions), same sampling set and drop rules (docs/statistics.md)."),
    (ERROR_BARS.name, "Error bars per model and scale", "Per kept cell: mean z over the protocol setups, the lowest and highest setup (every tied one) with their z, protocol SD, sampling SD, and the error bar = the larger of the two (error_bar_from says which; sampling when they are equal)."),
    (RANKING.name, "Ranking robustness per scale", "Per source, arm and scale: Kendall's tau-b between the model orders of every pair of protocol setups (median, minimum), the share of model pairs whose order flips between some two setups, and the models some setup ranks first."),
    (CELL_TESTS.name, "Exact permutation test per cell", "Per kept cell with a sampling SD: all C(n_p + n_s, n_s) splits of its scores into protocol and sampling, the splits whose variance ratio is at least the observed one, p, the permutation probability of protocol SD > sampling SD, p <= 0.05, and Benjamini-Hochberg at q = 0.05 over the cells of the same source and arm."),
    (CONSTANT_RUNS.name, "Constant-answer administrations", "Every administration whose answers were all the same option."),
    (DROPPED_CELLS.name, "Dropped cells", "Every cell left out of the tables, with the reason."),
    (CELLS.name, "Per-cell detail", "Every cell (model x scale) with its statistics; SDs and ranges in human SDs."),
    (PARITY_SUMMARY.name, "Scorer parity on the human data", "Per instrument: human rows reproduced exactly by the key and scorer, or set aside with a reason (score stage)."),
    (MUTATION_SWEEP.name, "Mutation sweep", "For each item of the key: rows that disagree after changing its weight or flipping its reverse flag (score stage)."),
    (NORMS.name, "Human norms", "Mean and SD of the human scores per instrument and dimension (score stage)."),
    (REPLY_RERUNS.name, "Is temperature 0 honoured?", "Raw replies of a condition and its rerun (S0 vs S0r, B0 vs B0r) compared byte for byte, per model and test (score stage)."),
    (SWEEP_ACCURACY.name, "Delimiter sweep: accuracy", "Accuracy per model, benchmark, delimiter and variant (plain / named), with an exact Clopper-Pearson 95% interval (docs/sweep.md). Every sweep table starts with the run it comes from (source) and its label (recorded, ...)."),
    (SWEEP_SPREAD.name, "Delimiter sweep: spread", "Per model, benchmark and variant: highest minus lowest accuracy over delimiters, in points, and whether the two extremes' intervals are disjoint."),
    (SWEEP_RANK.name, "Delimiter sweep: rank", "Rank of each model under each delimiter and variant."),
    (SWEEP_LEAD.name, "Delimiter sweep: who can lead", "Whether some delimiter puts each model in the lead."),
    (SWEEP_NAMED_GAIN.name, "Delimiter sweep: naming the delimiter", "Named minus plain accuracy per delimiter, in points."),
    (SWEEP_NAMED_GAIN_MEAN.name, "Delimiter sweep: naming the delimiter, on average", "Mean named-minus-plain gain over delimiters, in points."),
    (SWEEP_DELIMITER_GAIN.name, "Delimiter sweep: gain over the mean", "Each delimiter's accuracy minus the mean over all delimiters, in points."),
    (SWEEP_DELIMITER_GAIN_MEAN.name, "Delimiter sweep: gain over the mean, summary", "Per benchmark, variant and delimiter: the gain over the mean of all delimiters, averaged over models, in points."),
];

/// What the Markdown and the HTML show of a table too large to show whole.
#[derive(Debug, Clone)]
pub enum Excerpt {
    /// The [`EXTREME_ROWS`] rows with the highest and the lowest value of `column` (rows
    /// without a value left out; ties in table order).
    Extremes {
        /// The column the rows are ordered by (`ratio`).
        column: String,
        /// Highest first.
        high: TextTable,
        /// Lowest first.
        low: TextTable,
    },
    /// The table's first `2 * EXTREME_ROWS` rows (a table without a `ratio` column).
    First(TextTable),
}

/// What an excerpt shows, in words (after "N rows in all, see FILE;").
pub(crate) fn excerpt_what(e: &Excerpt) -> String {
    match e {
        Excerpt::Extremes { column, high, low } => format!(
            "shown: the {} rows with the highest and the {} with the lowest {column}",
            high.rows.len(),
            low.rows.len()
        ),
        Excerpt::First(t) => format!("shown: its first {} rows", t.rows.len()),
    }
}

/// A rendered table with its provenance: its CSV is written; what the documents show of it is
/// kept.
#[derive(Debug, Clone)]
pub struct Rendered {
    /// File stem of the outputs (`<name>.csv`, `<name>.md`, `<name>.parquet`).
    pub name: String,
    /// Title from [`CATALOG`] (or the file name).
    pub title: String,
    /// One-line description from [`CATALOG`].
    pub description: String,
    /// Parquet file it was rendered from, relative to the output folder.
    pub from: String,
    /// Rows in the whole table (and its CSV).
    pub rows: usize,
    /// The whole table when it has at most [`FULL_ROWS`] rows, else its first [`FULL_ROWS`].
    pub head: TextTable,
    /// For a table of more than `2 * EXTREME_ROWS` rows, what is shown instead of the whole.
    pub excerpt: Option<Excerpt>,
    /// The rows labelled `recorded`, all of them (the recorded-study section).
    pub(crate) recorded: TextTable,
}

impl Rendered {
    /// Whether [`Rendered::head`] is the whole table.
    pub fn is_whole(&self) -> bool {
        self.head.rows.len() == self.rows
    }

    /// The table as Markdown: whole when `whole` and [`Rendered::is_whole`], else its
    /// excerpt under the line "N rows in all, see <name>.csv (Parquet: <name>.parquet) ...".
    pub fn markdown(&self, whole: bool) -> String {
        let Some(e) = self
            .excerpt
            .as_ref()
            .filter(|_| !(whole && self.is_whole()))
        else {
            return render::to_markdown(&self.head);
        };
        let mut s = format!(
            "{} rows in all, see [{n}.csv]({n}.csv) (Parquet: [{n}.parquet]({n}.parquet)); {}.\n\n",
            self.rows,
            excerpt_what(e),
            n = self.name,
        );
        match e {
            Excerpt::Extremes { column, high, low } => {
                s.push_str(&format!("Highest {column}:\n\n"));
                s.push_str(&render::to_markdown(high));
                s.push_str(&format!("\nLowest {column}:\n\n"));
                s.push_str(&render::to_markdown(low));
            }
            Excerpt::First(t) => s.push_str(&render::to_markdown(t)),
        }
        s
    }
}

/// What the report stage wrote.
#[derive(Debug, Clone)]
pub struct Summary {
    /// Every rendered table, in report order.
    pub tables: Vec<Rendered>,
    /// Files written, relative to the report folder, sorted.
    pub files: Vec<String>,
}

/// Bytes of whole tables report.html holds at most: the tables are taken in report order,
/// and one that would pass this is shown as its excerpt (report.md follows the same choice).
pub const PAGE_TABLE_BYTES: usize = 3_000_000;

fn catalog_entry(name: &str) -> (usize, String, String) {
    match CATALOG.iter().position(|(n, _, _)| *n == name) {
        Some(i) => (i, CATALOG[i].1.to_string(), CATALOG[i].2.to_string()),
        None => (CATALOG.len(), name.to_string(), String::new()),
    }
}

/// Names the report stage writes itself; a table may not be rendered under them.
const OWN_FILES: &[&str] = &["report.md", "report.html", protospread_core::MANIFEST_NAME];

/// Check the `[report]` section before anything runs: the rendered names of every listed
/// table (`<stem>.csv`, `<stem>.md`, `<stem>.parquet`) neither collide with the
/// report's own files (`report.md`, `report.html`, `SHA256SUMS`) nor with another listed
/// table. `run` and every stage call this before they claim `--out`, so such a configuration
/// is refused before anything is written.
pub fn check_section(section: &ReportSection) -> Result<(), ReportError> {
    let mut stems: Vec<String> = Vec::new();
    for t in &section.tables {
        let bad = |m: String| ReportError::Table {
            path: t.clone(),
            message: format!("[report] tables: {m}"),
        };
        let stem = t
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        if stem.is_empty() || stem.starts_with('.') {
            return Err(bad(format!(
                "the file name `{stem}` is empty or hidden; rename the table"
            )));
        }
        for ext in ["csv", "md", "parquet"] {
            let f = format!("{stem}.{ext}");
            if OWN_FILES.contains(&f.as_str()) {
                return Err(bad(format!(
                    "would be rendered as `{f}`, a file the report writes itself (report.md, report.html, SHA256SUMS); rename the table"
                )));
            }
        }
        if stems.contains(&stem) {
            return Err(bad(format!(
                "a second table named `{stem}`; table file names must be unique"
            )));
        }
        stems.push(stem);
    }
    Ok(())
}

/// A table to render: its place in report order, its file stem and its file relative to
/// the output folder.
struct Source {
    order: usize,
    name: String,
    rel: PathBuf,
}

/// Every table the report renders, in report order: all of `out/aggregate/*.parquet`, then
/// the `[report] tables`. A listed table that is missing, a table `out/aggregate/SHA256SUMS`
/// lists that is missing, or two tables with one file stem, is an error.
fn collect_sources(out: &Path, section: &ReportSection) -> Result<Vec<Source>, ReportError> {
    let agg = out.join("aggregate");
    let mut sources: Vec<PathBuf> = Vec::new();
    let rd = fs_err::read_dir(&agg)
        .map_err(|e| ReportError::Usage(format!("{e}; run `protospread aggregate` first")))?;
    for e in rd {
        let e = e.map_err(protospread_core::CoreError::Fs)?;
        let n = e.file_name().to_string_lossy().into_owned();
        if n.ends_with(".parquet") && !n.starts_with('.') {
            sources.push(Path::new("aggregate").join(n));
        }
    }
    sources.sort();
    // A table the aggregate stage wrote that is gone is an error: the report would otherwise
    // replace the previous one without it.
    let manifest = agg.join(protospread_core::MANIFEST_NAME);
    if manifest.is_file() {
        let m = protospread_core::Manifest::read(&manifest)?;
        for n in m.entries.keys() {
            let p = agg.join(n);
            if n.ends_with(".parquet") && !n.contains('/') && !p.is_file() {
                return Err(ReportError::table(
                    &p,
                    format!(
                        "listed in {} but missing; run `protospread aggregate` again",
                        manifest.display()
                    ),
                ));
            }
        }
    }
    if sources.is_empty() {
        return Err(ReportError::table(
            &agg,
            "no Parquet tables; run `protospread aggregate` first",
        ));
    }
    for t in &section.tables {
        let p = out.join(t);
        if !p.is_file() {
            return Err(ReportError::table(
                &p,
                "listed in [report] tables but does not exist",
            ));
        }
        sources.push(t.clone());
    }
    let mut out_sources: Vec<Source> = Vec::new();
    for rel in sources {
        let name = rel
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        if out_sources.iter().any(|s| s.name == name) {
            return Err(ReportError::table(
                &out.join(&rel),
                format!("a second table named `{name}`; table file names must be unique"),
            ));
        }
        let (order, _, _) = catalog_entry(&name);
        out_sources.push(Source { order, name, rel });
    }
    out_sources.sort_by(|a, b| (a.order, &a.name).cmp(&(b.order, &b.name)));
    Ok(out_sources)
}

/// The contract of a table the report reads, if one declares it: by the stage (the first
/// folder of its path under the output folder) and the name.
fn contract_of(source: &Source) -> Option<&'static protospread_core::TableContract> {
    let stage = source.rel.components().next()?.as_os_str().to_str()?;
    protospread_core::CONTRACTS
        .iter()
        .copied()
        .find(|c| c.stage == stage && c.name == source.name)
}

/// One table to render: its source, and the staged files its CSV, Markdown and the copy of
/// its Parquet file go to.
struct Job {
    source: Source,
    parquet: PathBuf,
    csv: PathBuf,
    md: PathBuf,
    copy: PathBuf,
}

/// Render one table: the copy of its Parquet file and its CSV in one pass over the file, then
/// its Markdown (each file written and synced here, so that several tables' files are written
/// at once).
fn render_table(job: &Job) -> Result<(Rendered, Option<stream::Collector>), ReportError> {
    let p = stream::pass(
        &job.parquet,
        &job.source.name,
        &job.csv,
        &job.copy,
        contract_of(&job.source),
    )?;
    let (_, title, description) = catalog_entry(&job.source.name);
    let t = Rendered {
        title,
        description,
        from: protospread_core::rel_path(Path::new(""), &job.source.rel),
        name: job.source.name.clone(),
        rows: p.rows,
        head: p.head,
        excerpt: p.excerpt,
        recorded: p.recorded,
    };
    (|| {
        use std::io::Write;
        let mut f = fs_err::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&job.md)?;
        f.write_all(t.markdown(true).as_bytes())?;
        f.sync_all()
    })()
    .map_err(protospread_core::CoreError::Fs)?;
    Ok((t, p.points))
}

/// [`render_table`] for every job, on up to four threads (largest files first); results in
/// the order of `jobs`. Of several failures the first table's is returned.
fn render_all(jobs: &[Job]) -> Result<Vec<(Rendered, Option<stream::Collector>)>, ReportError> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    type Slot = Mutex<Option<Result<(Rendered, Option<stream::Collector>), ReportError>>>;
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_key(|&i| {
        std::cmp::Reverse(fs_err::metadata(&jobs[i].parquet).map_or(0, |m| m.len()))
    });
    let results: Vec<Slot> = jobs.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4)
        .min(jobs.len().max(1));
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                let Some(&i) = order.get(k) else { break };
                let r = render_table(&jobs[i]);
                if let Ok(mut slot) = results[i].lock() {
                    *slot = Some(r);
                }
            });
        }
    });
    results
        .into_iter()
        .zip(jobs)
        .map(|(m, job)| {
            m.into_inner()
                .ok()
                .flatten()
                .unwrap_or_else(|| Err(ReportError::table(&job.parquet, "its renderer stopped")))
        })
        .collect()
}

/// Which tables report.html and report.md show whole: in report order, every table kept whole
/// while the whole tables stay within [`PAGE_TABLE_BYTES`] of HTML.
fn page_choices(tables: &[Rendered]) -> Vec<bool> {
    let mut used = 0usize;
    tables
        .iter()
        .map(|t| {
            if !t.is_whole() {
                return false;
            }
            if t.excerpt.is_none() {
                return true;
            }
            let n = html::whole_bytes(&t.head);
            if used + n <= PAGE_TABLE_BYTES {
                used += n;
                true
            } else {
                false
            }
        })
        .collect()
}

/// The Markdown document: the headline, the recorded study, then every table (whole where
/// `whole[i]`, else its excerpt).
fn markdown_report(
    title: &str,
    tables: &[Rendered],
    whole: &[bool],
) -> Result<String, ReportError> {
    let mut s = format!("# {title}\n\n");
    let headlines =
        headline::headlines(tables).map_err(|m| ReportError::Usage(format!("report.md: {m}")))?;
    if !headlines.is_empty() {
        s.push_str("## Headline\n\n");
        for h in &headlines {
            s.push_str(&h.sentence());
            s.push_str("\n\n");
        }
    }
    s.push_str("Every figure is also in the CSV file named in each section (the canonical, hashed form); every table is also in `<table>.parquet`, a copy of the file it was read from. Floats: six decimals; SDs and ranges in human SDs. Conventions: docs/statistics.md.\n");
    if let Some((intro, summary, more)) = inference::ranking_section(tables)
        .map_err(|m| ReportError::Usage(format!("report.md: {m}")))?
    {
        s.push_str("\n## Ranking robustness\n\n");
        s.push_str(&intro);
        s.push_str("\n\n");
        s.push_str(&render::to_markdown(&summary));
        if let Some(m) = more {
            s.push_str(&format!("\n{m}\n"));
        }
    }
    let recorded =
        recorded::paragraphs(tables).map_err(|m| ReportError::Usage(format!("report.md: {m}")))?;
    if !recorded.is_empty() {
        s.push_str("\n## Recorded study: real models under each reply rule, primary and secondary analysis\n\n");
        s.push_str(recorded::INTRO);
        s.push_str("\n\n");
        for p in recorded {
            s.push_str(&p);
            s.push_str("\n\n");
        }
    }
    for (t, whole) in tables.iter().zip(whole) {
        s.push_str(&format!("\n## {}\n\n", t.title));
        if !t.description.is_empty() {
            s.push_str(&t.description);
            s.push_str("\n\n");
        }
        s.push_str(&format!("`{}.csv` (from `{}`)\n\n", t.name, t.from));
        s.push_str(&t.markdown(*whole));
    }
    Ok(s)
}

/// Run the stage: render every table of `out` into `out/report/` (CSV, Markdown, a copy of
/// its Parquet file, `report.md`, `report.html`), all or nothing, then write
/// `out/report/SHA256SUMS`.
pub fn run(out: &Path, section: &ReportSection) -> Result<Summary, ReportError> {
    check_section(section)?;
    let sources = collect_sources(out, section)?;
    let dir = out.join("report");
    // The whole folder is replaced in one step: files of tables that no longer exist go with
    // the previous folder, and a failure changes nothing.
    let mut staged = protospread_core::Staged::in_dir(&dir)?;
    let mut files = Vec::new();
    let mut jobs = Vec::new();
    for source in sources {
        let (csv, md, copy) = (
            format!("{}.csv", source.name),
            format!("{}.md", source.name),
            format!("{}.parquet", source.name),
        );
        jobs.push(Job {
            parquet: out.join(&source.rel),
            csv: staged.file(&dir.join(&csv))?,
            md: staged.file(&dir.join(&md))?,
            copy: staged.file(&dir.join(&copy))?,
            source,
        });
        files.extend([csv, md, copy]);
    }
    let (mut points, mut bars) = (None, None);
    let mut tables = Vec::new();
    for (t, p) in render_all(&jobs)? {
        match p {
            Some(stream::Collector::Points(p)) => points = Some(p),
            Some(stream::Collector::Bars(b)) => bars = Some(b),
            None => {}
        }
        tables.push(t);
    }
    let whole = page_choices(&tables);
    staged.put(
        &dir.join("report.md"),
        markdown_report(&section.title, &tables, &whole)?.as_bytes(),
    )?;
    files.push("report.md".to_string());
    let html = html::report(&section.title, &tables, &whole, points.as_ref(), bars)?;
    staged.put(&dir.join("report.html"), html.as_bytes())?;
    files.push("report.html".to_string());
    // check_section refused a listed table named like the report's files, and aggregate
    // tables have fixed names; this guards the invariant before anything is replaced.
    let mut unique = files.clone();
    unique.sort();
    unique.dedup();
    if unique.len() != files.len() {
        return Err(ReportError::table(
            &dir,
            "two outputs of the report have one file name; nothing written",
        ));
    }
    staged.commit()?;
    files.sort();
    Ok(Summary { tables, files })
}
