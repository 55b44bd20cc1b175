//! Reading the score stage's Parquet with DataFusion.
//!
//! DataFusion does the relational work: filtering, integer counts grouped by key, and sorting
//! every result by a unique key. Only integer aggregates are computed inside DataFusion; every
//! float statistic is computed afterwards in Rust over rows in key order (see `stats`), so no
//! float result depends on how DataFusion partitions or merges work.

use crate::AggregateError;
use arrow::array::AsArray;
use arrow::compute::cast;
use arrow::datatypes::{ArrowPrimitiveType, DataType, Float64Type, Int64Type};
use arrow::record_batch::RecordBatch;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use std::path::{Path, PathBuf};

/// Column kinds the input contract uses.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Str,
    Int,
    Float,
    Bool,
}

const SCORE_COLUMNS: &[(&str, Kind)] = &[
    ("source", Kind::Str),
    ("label", Kind::Str),
    ("study", Kind::Str),
    ("model", Kind::Str),
    ("arm", Kind::Str),
    ("cohort", Kind::Str),
    ("condition", Kind::Str),
    ("sample", Kind::Int),
    ("test", Kind::Str),
    ("dimension", Kind::Str),
    ("score", Kind::Float),
    ("complete", Kind::Bool),
    ("z", Kind::Float),
    ("constant_answers", Kind::Bool),
];

const ANSWER_COLUMNS: &[(&str, Kind)] = &[
    ("source", Kind::Str),
    ("label", Kind::Str),
    ("model", Kind::Str),
    ("arm", Kind::Str),
    ("cohort", Kind::Str),
    ("condition", Kind::Str),
    ("sample", Kind::Int),
    ("test", Kind::Str),
    ("mode", Kind::Str),
    ("item", Kind::Int),
    ("status", Kind::Str),
];

/// Statuses of a parsed answer (the answers stage's contract).
pub const STATUSES: &[&str] = &[
    "ok",
    "not_a_number",
    "out_of_range",
    "missing_in_whole",
    "duplicate_in_whole",
    "request_failed",
];

/// One scale score of one administration (a row of `scale_scores.parquet`).
#[derive(Debug, Clone, PartialEq)]
pub struct ScoreRow {
    pub source: String,
    pub label: String,
    pub study: String,
    pub model: String,
    pub arm: String,
    pub cohort: Option<String>,
    pub condition: String,
    pub sample: i64,
    pub test: String,
    pub dimension: String,
    pub score: Option<f64>,
    pub complete: bool,
    pub z: Option<f64>,
    pub constant_answers: bool,
}

/// Request counts of one (source, model, condition), from `parsed_answers.parquet`.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestRow {
    pub source: String,
    pub label: String,
    pub model: String,
    pub arm: String,
    pub cohort: Option<String>,
    pub condition: String,
    pub requests: i64,
    pub failed_requests: i64,
    pub unreadable_replies: i64,
    pub items: i64,
    pub unreadable_items: i64,
}

/// One administration (source, model, condition, sample, test) and whether it is constant.
#[derive(Debug, Clone, PartialEq)]
pub struct AdministrationRow {
    pub source: String,
    pub label: String,
    pub model: String,
    pub arm: String,
    pub cohort: Option<String>,
    pub condition: String,
    pub sample: i64,
    pub test: String,
    pub constant: bool,
}

/// Everything the aggregate stage reads.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    /// Sorted by (source, model, test, dimension, condition, sample); keys unique.
    pub scores: Vec<ScoreRow>,
    /// Sorted by (source, model, condition).
    pub requests: Vec<RequestRow>,
    /// Sorted by (source, model, condition, sample, test).
    pub administrations: Vec<AdministrationRow>,
}

fn input_err(path: &Path, message: impl Into<String>) -> AggregateError {
    AggregateError::Input {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// Check that `path` exists and has every contract column with a usable type.
fn check_schema(path: &Path, columns: &[(&str, Kind)]) -> Result<(), AggregateError> {
    let f = std::fs::File::open(path).map_err(|e| input_err(path, format!("cannot open: {e}")))?;
    let b = ParquetRecordBatchReaderBuilder::try_new(f)
        .map_err(|e| input_err(path, format!("not a readable Parquet file: {e}")))?;
    let schema = b.schema();
    for (name, kind) in columns {
        let field = schema
            .field_with_name(name)
            .map_err(|_| input_err(path, format!("column `{name}` is missing")))?;
        let ok = match kind {
            Kind::Str => matches!(
                field.data_type(),
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
            ),
            Kind::Int => matches!(
                field.data_type(),
                DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64
            ),
            Kind::Float => matches!(field.data_type(), DataType::Float32 | DataType::Float64),
            Kind::Bool => matches!(field.data_type(), DataType::Boolean),
        };
        if !ok {
            return Err(input_err(
                path,
                format!(
                    "column `{name}` has type {}, expected {kind:?}",
                    field.data_type()
                ),
            ));
        }
    }
    Ok(())
}

/// Typed access to the columns of query results, with errors naming file and column.
struct Cols<'a> {
    path: &'a Path,
    batch: &'a RecordBatch,
}

impl Cols<'_> {
    fn column(&self, name: &str, to: &DataType) -> Result<arrow::array::ArrayRef, AggregateError> {
        let c = self
            .batch
            .column_by_name(name)
            .ok_or_else(|| input_err(self.path, format!("column `{name}` is missing")))?;
        cast(c, to).map_err(|e| input_err(self.path, format!("column `{name}`: {e}")))
    }

    fn strs(&self, name: &str) -> Result<Vec<Option<String>>, AggregateError> {
        let a = self.column(name, &DataType::Utf8)?;
        Ok(a.as_string::<i32>()
            .iter()
            .map(|v| v.map(str::to_string))
            .collect())
    }

    /// A numeric column cast to `T` (the cast is checked against the contract by DataFusion).
    fn prim<T: ArrowPrimitiveType>(
        &self,
        name: &str,
    ) -> Result<Vec<Option<T::Native>>, AggregateError> {
        let a = self.column(name, &T::DATA_TYPE)?;
        Ok(a.as_primitive::<T>().iter().collect())
    }

    fn ints(&self, name: &str) -> Result<Vec<Option<i64>>, AggregateError> {
        self.prim::<Int64Type>(name)
    }

    fn floats(&self, name: &str) -> Result<Vec<Option<f64>>, AggregateError> {
        self.prim::<Float64Type>(name)
    }

    fn bools(&self, name: &str) -> Result<Vec<Option<bool>>, AggregateError> {
        let a = self.column(name, &DataType::Boolean)?;
        Ok(a.as_boolean().iter().collect())
    }
}

/// A value that the contract says is never null; a null is an error naming file, column and
/// the row's key.
fn need<T>(path: &Path, col: &str, key: &str, v: Option<T>) -> Result<T, AggregateError> {
    v.ok_or_else(|| input_err(path, format!("column `{col}` is null in the row {key}")))
}

/// Read the inputs of the aggregate stage from the score stage's folder.
///
/// `target_partitions` (0 = DataFusion's default) only changes how DataFusion parallelises
/// the scans; the returned rows are identical for every value (tested).
pub fn read_inputs(score_dir: &Path, target_partitions: usize) -> Result<Inputs, AggregateError> {
    let scores_path = score_dir.join("scale_scores.parquet");
    let answers_path = score_dir.join("parsed_answers.parquet");
    check_schema(&scores_path, SCORE_COLUMNS)?;
    check_schema(&answers_path, ANSWER_COLUMNS)?;

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| AggregateError::Engine {
            path: score_dir.to_path_buf(),
            message: format!("cannot start the query runtime: {e}"),
        })?;
    rt.block_on(read_async(&scores_path, &answers_path, target_partitions))
}

async fn run_sql(
    ctx: &SessionContext,
    sql: &str,
    path: &Path,
) -> Result<Vec<RecordBatch>, AggregateError> {
    let engine = |e: datafusion::error::DataFusionError| AggregateError::Engine {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    ctx.sql(sql)
        .await
        .map_err(engine)?
        .collect()
        .await
        .map_err(engine)
}

async fn read_async(
    scores_path: &Path,
    answers_path: &Path,
    target_partitions: usize,
) -> Result<Inputs, AggregateError> {
    // Files are small: let DataFusion split even a small file across partitions, so that the
    // partition-independence test exercises real parallel scans and aggregations.
    let mut cfg = SessionConfig::new().with_repartition_file_min_size(0);
    if target_partitions > 0 {
        cfg = cfg.with_target_partitions(target_partitions);
    }
    let ctx = SessionContext::new_with_config(cfg);
    let register = |p: &PathBuf| {
        p.to_str()
            .map(str::to_string)
            .ok_or_else(|| input_err(p, "path is not UTF-8"))
    };
    let sp = register(&scores_path.to_path_buf())?;
    let ap = register(&answers_path.to_path_buf())?;
    let engine = |p: &Path| {
        let p = p.to_path_buf();
        move |e: datafusion::error::DataFusionError| AggregateError::Engine {
            path: p.clone(),
            message: e.to_string(),
        }
    };
    ctx.register_parquet("scores", &sp, ParquetReadOptions::default())
        .await
        .map_err(engine(scores_path))?;
    ctx.register_parquet("answers", &ap, ParquetReadOptions::default())
        .await
        .map_err(engine(answers_path))?;

    let scores = read_scores(&ctx, scores_path).await?;
    let requests = read_requests(&ctx, answers_path).await?;
    let administrations = read_administrations(&ctx, scores_path).await?;
    Ok(Inputs {
        scores,
        requests,
        administrations,
    })
}

async fn read_scores(ctx: &SessionContext, path: &Path) -> Result<Vec<ScoreRow>, AggregateError> {
    let batches = run_sql(
        ctx,
        "SELECT source, label, study, model, arm, cohort, condition, CAST(sample AS BIGINT) AS sample, \
         test, dimension, CAST(score AS DOUBLE) AS score, complete, CAST(z AS DOUBLE) AS z, constant_answers \
         FROM scores ORDER BY source, model, test, dimension, condition, sample",
        path,
    )
    .await?;
    let mut out = Vec::new();
    for b in &batches {
        let c = Cols { path, batch: b };
        let (source, label, study, model) = (
            c.strs("source")?,
            c.strs("label")?,
            c.strs("study")?,
            c.strs("model")?,
        );
        let (arm, cohort, condition, sample) = (
            c.strs("arm")?,
            c.strs("cohort")?,
            c.strs("condition")?,
            c.ints("sample")?,
        );
        let (test, dimension, score, complete) = (
            c.strs("test")?,
            c.strs("dimension")?,
            c.floats("score")?,
            c.bools("complete")?,
        );
        let (z, constant) = (c.floats("z")?, c.bools("constant_answers")?);
        for i in 0..b.num_rows() {
            let key = format!(
                "source={:?} model={:?} condition={:?} sample={:?} test={:?} dimension={:?}",
                source[i].as_deref().unwrap_or("NULL"),
                model[i].as_deref().unwrap_or("NULL"),
                condition[i].as_deref().unwrap_or("NULL"),
                sample[i],
                test[i].as_deref().unwrap_or("NULL"),
                dimension[i].as_deref().unwrap_or("NULL"),
            );
            out.push(ScoreRow {
                source: need(path, "source", &key, source[i].clone())?,
                label: need(path, "label", &key, label[i].clone())?,
                study: need(path, "study", &key, study[i].clone())?,
                model: need(path, "model", &key, model[i].clone())?,
                arm: need(path, "arm", &key, arm[i].clone())?,
                cohort: cohort[i].clone(),
                condition: need(path, "condition", &key, condition[i].clone())?,
                sample: need(path, "sample", &key, sample[i])?,
                test: need(path, "test", &key, test[i].clone())?,
                dimension: need(path, "dimension", &key, dimension[i].clone())?,
                score: score[i],
                complete: need(path, "complete", &key, complete[i])?,
                z: z[i],
                constant_answers: need(path, "constant_answers", &key, constant[i])?,
            });
        }
    }
    for w in out.windows(2) {
        let k = |r: &ScoreRow| {
            (
                r.source.clone(),
                r.model.clone(),
                r.test.clone(),
                r.dimension.clone(),
                r.condition.clone(),
                r.sample,
            )
        };
        if k(&w[0]) == k(&w[1]) {
            let r = &w[1];
            return Err(input_err(
                path,
                format!(
                    "duplicate row for source={:?} model={:?} condition={:?} sample={} test={:?} dimension={:?}",
                    r.source, r.model, r.condition, r.sample, r.test, r.dimension
                ),
            ));
        }
    }
    Ok(out)
}

async fn read_requests(
    ctx: &SessionContext,
    path: &Path,
) -> Result<Vec<RequestRow>, AggregateError> {
    // Contract values first, so a bad status or mode is reported, never counted silently.
    let bad = run_sql(
        ctx,
        &format!(
            "SELECT source, model, condition, CAST(sample AS BIGINT) AS sample, test, mode, CAST(item AS BIGINT) AS item, status FROM answers \
             WHERE status IS NULL OR status NOT IN ({}) OR mode IS NULL OR mode NOT IN ('single', 'whole') \
             ORDER BY source, model, condition, sample, test, item LIMIT 1",
            STATUSES.iter().map(|s| format!("'{s}'")).collect::<Vec<_>>().join(", ")
        ),
        path,
    )
    .await?;
    if let Some(b) = bad.iter().find(|b| b.num_rows() > 0) {
        let c = Cols { path, batch: b };
        let (st, mode) = (c.strs("status")?, c.strs("mode")?);
        let (src, model, cond, test, item) = (
            c.strs("source")?,
            c.strs("model")?,
            c.strs("condition")?,
            c.strs("test")?,
            c.ints("item")?,
        );
        return Err(input_err(
            path,
            format!(
                "row source={:?} model={:?} condition={:?} test={:?} item={:?}: mode {:?} / status {:?} is not in the contract (mode single|whole; status {})",
                src[0], model[0], cond[0], test[0], item[0], mode[0], st[0], STATUSES.join("|")
            ),
        ));
    }
    let unreadable = "'not_a_number', 'out_of_range', 'missing_in_whole', 'duplicate_in_whole'";
    // A request is one item in single mode and one whole test in whole mode.
    let sql = format!(
        "WITH req AS ( \
           SELECT source, label, model, arm, cohort, condition, sample, test, \
                  CASE WHEN mode = 'whole' THEN -1 ELSE CAST(item AS BIGINT) END AS req_item, \
                  MAX(CASE WHEN status = 'request_failed' THEN 1 ELSE 0 END) AS failed, \
                  MAX(CASE WHEN status IN ({unreadable}) THEN 1 ELSE 0 END) AS unreadable, \
                  COUNT(*) AS items, \
                  SUM(CASE WHEN status IN ({unreadable}) THEN 1 ELSE 0 END) AS unreadable_items \
           FROM answers \
           GROUP BY source, label, model, arm, cohort, condition, sample, test, \
                    CASE WHEN mode = 'whole' THEN -1 ELSE CAST(item AS BIGINT) END) \
         SELECT source, label, model, arm, cohort, condition, \
                COUNT(*) AS requests, \
                CAST(SUM(failed) AS BIGINT) AS failed_requests, \
                CAST(SUM(CASE WHEN failed = 0 THEN unreadable ELSE 0 END) AS BIGINT) AS unreadable_replies, \
                CAST(SUM(items) AS BIGINT) AS items, \
                CAST(SUM(unreadable_items) AS BIGINT) AS unreadable_items \
         FROM req GROUP BY source, label, model, arm, cohort, condition \
         ORDER BY source, model, condition, label, arm, cohort"
    );
    let batches = run_sql(ctx, &sql, path).await?;
    let mut out = Vec::new();
    for b in &batches {
        let c = Cols { path, batch: b };
        let (source, label, model, arm) = (
            c.strs("source")?,
            c.strs("label")?,
            c.strs("model")?,
            c.strs("arm")?,
        );
        let (cohort, condition, requests, failed) = (
            c.strs("cohort")?,
            c.strs("condition")?,
            c.ints("requests")?,
            c.ints("failed_requests")?,
        );
        let (unreadable, items, unreadable_items) = (
            c.ints("unreadable_replies")?,
            c.ints("items")?,
            c.ints("unreadable_items")?,
        );
        for i in 0..b.num_rows() {
            let key = format!(
                "source={:?} model={:?} condition={:?}",
                source[i], model[i], condition[i]
            );
            out.push(RequestRow {
                source: need(path, "source", &key, source[i].clone())?,
                label: need(path, "label", &key, label[i].clone())?,
                model: need(path, "model", &key, model[i].clone())?,
                arm: need(path, "arm", &key, arm[i].clone())?,
                cohort: cohort[i].clone(),
                condition: need(path, "condition", &key, condition[i].clone())?,
                requests: need(path, "requests", &key, requests[i])?,
                failed_requests: need(path, "failed_requests", &key, failed[i])?,
                unreadable_replies: need(path, "unreadable_replies", &key, unreadable[i])?,
                items: need(path, "items", &key, items[i])?,
                unreadable_items: need(path, "unreadable_items", &key, unreadable_items[i])?,
            });
        }
    }
    for w in out.windows(2) {
        if (&w[0].source, &w[0].model, &w[0].condition)
            == (&w[1].source, &w[1].model, &w[1].condition)
        {
            return Err(input_err(
                path,
                format!(
                    "model {:?} of source {:?} has more than one label/arm/cohort",
                    w[1].model, w[1].source
                ),
            ));
        }
    }
    Ok(out)
}

async fn read_administrations(
    ctx: &SessionContext,
    path: &Path,
) -> Result<Vec<AdministrationRow>, AggregateError> {
    let batches = run_sql(
        ctx,
        "SELECT source, label, model, arm, cohort, condition, CAST(sample AS BIGINT) AS sample, test, \
                MAX(CASE WHEN constant_answers THEN 1 ELSE 0 END) AS constant \
         FROM scores GROUP BY source, label, model, arm, cohort, condition, sample, test \
         ORDER BY source, model, condition, sample, test, label, arm, cohort",
        path,
    )
    .await?;
    let mut out = Vec::new();
    for b in &batches {
        let c = Cols { path, batch: b };
        let (source, label, model, arm) = (
            c.strs("source")?,
            c.strs("label")?,
            c.strs("model")?,
            c.strs("arm")?,
        );
        let (cohort, condition, sample, test, constant) = (
            c.strs("cohort")?,
            c.strs("condition")?,
            c.ints("sample")?,
            c.strs("test")?,
            c.ints("constant")?,
        );
        for i in 0..b.num_rows() {
            let key = format!(
                "source={:?} model={:?} condition={:?}",
                source[i], model[i], condition[i]
            );
            out.push(AdministrationRow {
                source: need(path, "source", &key, source[i].clone())?,
                label: need(path, "label", &key, label[i].clone())?,
                model: need(path, "model", &key, model[i].clone())?,
                arm: need(path, "arm", &key, arm[i].clone())?,
                cohort: cohort[i].clone(),
                condition: need(path, "condition", &key, condition[i].clone())?,
                sample: need(path, "sample", &key, sample[i])?,
                test: need(path, "test", &key, test[i].clone())?,
                constant: need(path, "constant", &key, constant[i])? != 0,
            });
        }
    }
    Ok(out)
}
