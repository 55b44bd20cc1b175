//! The stored-answer part of the score stage, as DataFusion plans: fetched stored answers ->
//! parsed answers (one row per item) -> scale scores in human units (docs/stored-answers.md,
//! section 3) and the temperature-0 rerun comparison.
//!
//! Every table is a plan over the fetched Parquet, with the rules registered as functions
//! ([`crate::functions`], on the readings of [`crate::kernels`]): the strict reply rule, the
//! expansion of a whole-test reply to one row per shown position, the scorer's value and the
//! norms; and as aggregates: an administration's scored readings and a group's request
//! counts. Sums are of integer-valued points, so
//! they are exact in any order; every output is sorted by its full key, so the bytes do not
//! depend on the partition count. Batches stream from the plan into the Parquet writer: no
//! stage holds the rows of a stored-answer set.
//!
//! [`run_answers`] reads `out/fetch/answers/<input>.parquet` for every `role = "answers"` input of
//! pipeline.toml and stages `parsed_answers.parquet`, `scale_scores.parquet` and
//! `reply_reruns.parquet` into the score stage's [`Staged`] set, so that they appear together
//! with the parity tables or not at all.

use crate::kernels::Texts;
use crate::norms::Norms;
use crate::rules::{ReplyRule, Status};
use crate::{ScoreError, ScoringKey};
use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::SchemaRef;
use datafusion::datasource::MemTable;
use datafusion::prelude::{DataFrame, SessionContext};
use protospread_core::{
    Config, InputRole, Progress, Provenance, Staged, TableContract, PARSED_ANSWERS, REPLY_RERUNS,
    REPLY_RULE_COUNTS, SCALE_SCORES, SCALE_SCORES_BY_RULE, STORED_ANSWERS,
};
use protospread_engine::{Binds, Engine, EngineOptions, KeyOrder, Sql};
use protospread_format::{StoredRecord, Vocabulary};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What one source produced; serialized as one element of [`AnswersSummary::to_json`].
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct AnswerSourceSummary {
    /// Input name.
    pub source: String,
    /// Provenance label.
    pub label: String,
    /// Records read.
    pub records: usize,
    /// Administrations (model, condition, sample, test).
    pub administrations: usize,
    /// Administrations with constant answers.
    pub constant_administrations: usize,
    /// Parsed item rows by status name.
    pub statuses: BTreeMap<&'static str, usize>,
    /// Scale rows written.
    pub scale_rows: usize,
    /// Scale rows with every item answered.
    pub complete_scale_rows: usize,
}

/// What the stored-answer part wrote.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AnswersSummary {
    /// Per source.
    pub sources: Vec<AnswerSourceSummary>,
    /// Rows of the parsed-answers table.
    pub parsed_rows: usize,
    /// Rows of the scale-score table.
    pub scale_rows: usize,
}

impl AnswersSummary {
    /// The printed summary: one line per source, naming its label (e.g. "simulated").
    pub fn lines(&self) -> Vec<String> {
        if self.sources.is_empty() {
            return vec!["stored answers: no input with role \"answers\" in pipeline.toml".into()];
        }
        self.sources
            .iter()
            .map(|x| {
                let label = if x.label.is_empty() {
                    String::new()
                } else {
                    format!(" [{}]", x.label)
                };
                let statuses: Vec<String> =
                    x.statuses.iter().map(|(k, n)| format!("{k} {n}")).collect();
                format!(
                    "stored answers {}{label}: {} requests, {} administrations; item readings: {}; {} constant-answer administrations; {} of {} scale scores complete",
                    x.source,
                    x.records,
                    x.administrations,
                    statuses.join(", "),
                    x.constant_administrations,
                    x.complete_scale_rows,
                    x.scale_rows
                )
            })
            .collect()
    }

    /// The summary as one JSON object `{"stored_answers": [...]}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({ "stored_answers": self.sources })
    }
}

/// The SQL of the source and label columns of a source's rows (a record's own label, else
/// the input's), their values bound in `q`.
fn source_columns(q: &Binds, source: &str, input_label: Option<&str>) -> (String, String) {
    (
        q.bind(source),
        format!("COALESCE(label, {})", q.bind(input_label.unwrap_or(""))),
    )
}

fn df_err(what: &str, e: datafusion::error::DataFusionError) -> ScoreError {
    ScoreError::Score {
        test: what.to_string(),
        message: e.to_string(),
    }
}

/// Register the scoring key's dimensions as table `key_dims` (test, dimension, ix, n_items,
/// max_points, raw_unit), from the scorer's own functions. `ix` numbers a test's dimensions in
/// name order, from 0 (below [`crate::kernels::tally_slots`]), as the tallies' slots do
/// ([`crate::kernels::dimension_slots`]); the items' points reach the plans through the
/// administration's aggregate (`strict_administration`, [`crate::functions`]).
fn register_key(ctx: &SessionContext, key: &ScoringKey) -> Result<(), ScoreError> {
    use arrow::array::{BooleanArray, Float64Array, Int32Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    let (mut dt, mut dd, mut dx, mut dn, mut dm, mut dr) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    for (test, tk) in &key.tests {
        let slots = crate::kernels::dimension_slots(tk);
        for (i, rule) in tk.dims.iter().enumerate() {
            dt.push(test.clone());
            dd.push(rule.name.clone());
            dx.push(slots[i] as i32);
            dn.push(tk.items.iter().filter(|k| k.dim == i).count() as i32);
            dm.push(crate::scorer::dim_max(tk, i));
            dr.push(tk.unit == crate::key::Unit::Raw);
        }
    }
    let s = |n: &str| Field::new(n, DataType::Utf8, false);
    let i = |n: &str| Field::new(n, DataType::Int32, false);
    let f = |n: &str| Field::new(n, DataType::Float64, false);
    let dims_schema = Arc::new(Schema::new(vec![
        s("test"),
        s("dimension"),
        i("ix"),
        i("n_items"),
        f("max_points"),
        Field::new("raw_unit", DataType::Boolean, false),
    ]));
    let dims = RecordBatch::try_new(
        dims_schema.clone(),
        vec![
            Arc::new(StringArray::from(dt)),
            Arc::new(StringArray::from(dd)),
            Arc::new(Int32Array::from(dx)),
            Arc::new(Int32Array::from(dn)),
            Arc::new(Float64Array::from(dm)),
            Arc::new(BooleanArray::from(dr)),
        ],
    )?;
    let reg = |name: &str, schema, batch| -> Result<(), ScoreError> {
        let table = MemTable::try_new(schema, vec![vec![batch]]).map_err(|e| df_err(name, e))?;
        ctx.register_table(name, Arc::new(table))
            .map_err(|e| df_err(name, e))?;
        Ok(())
    };
    reg("key_dims", dims_schema, dims)?;
    Ok(())
}

/// A session with the scoring key and the rule functions registered, on one partition.
///
/// One partition, whatever `engine.target_partitions` says: the stored answers arrive sorted
/// and every plan here groups or sorts by a prefix of that order, so with more partitions
/// DataFusion re-partitions by hash while preserving the order, and each such repartition
/// merges its inputs in buffers that cannot spill. At 10^7 answers under a 256 MiB pool (what
/// 10^8 answers are to the default 1 GiB) two partitions failed on those buffers; one partition
/// ran in 27 s, and under the default pool took 25 s against 23 s with two (docs/performance.md).
/// The outputs are sorted by their full keys, so their bytes are the same either way.
pub(crate) fn session(
    engine: &EngineOptions,
    key: &ScoringKey,
    norms: &Norms,
) -> Result<Engine, ScoreError> {
    let engine = Engine::new(&EngineOptions {
        target_partitions: 1,
        ..engine.clone()
    })?;
    // The plans read many fields of one struct a function returns; these two rules push
    // each field access down to the scan, where each became a call of the function of its
    // own (with the per-request tallies this plan once had: 19 calls per request instead of
    // one, 10^7 answers 6 s -> 17 s).
    for rule in ["extract_leaf_expressions", "push_down_leaf_projections"] {
        engine.context().remove_optimizer_rule(rule);
    }
    let points = Arc::new(crate::kernels::KeyPoints::new(key));
    for f in crate::functions::udfs(Arc::new(norms.clone())) {
        engine.context().register_udf(f);
    }
    for f in crate::functions::udafs(points) {
        engine.context().register_udaf(f);
    }
    register_key(engine.context(), key)?;
    Ok(engine)
}

/// One row per item of the stored answers registered as `raw`, read by `rule`
/// ([`crate::kernels`]): a single-item request's reading, or a whole-test request expanded to
/// one row per shown position. Rows come in (administration, item) order: DataFusion knows
/// the administration order (the file's, kept by `unnest`), and the function's item order
/// does the rest, so no plan sorts the readings; the sinks check the order ([`KeyOrder`]).
fn readings_sql(rule: ReplyRule) -> String {
    let f = match rule {
        ReplyRule::Strict => "strict_readings",
        ReplyRule::Lenient => "lenient_readings",
    };
    format!(
        "SELECT model, condition, sample, test, study, arm, cohort, label, temperature, mode, \
                get_field(w, 'item') AS item, get_field(w, 'shown_position') AS shown_position, \
                get_field(w, 'option') AS option_replied, get_field(w, 'value') AS value, \
                get_field(w, 'status') AS status, get_field(w, 'lenient_status') AS lenient_status \
         FROM (SELECT model, condition, sample, test, study, arm, cohort, label, temperature, mode, \
                      unnest({f}(mode, item, reply, error IS NOT NULL, option_order, item_order)) AS w \
               FROM raw)"
    )
}

/// The plans of one source as SQL, over its stored answers registered as table `raw`: each is
/// planned by the thread that runs it (on small studies planning is most of the stage).
struct SourcePlans {
    parsed: Sql,
    scales: Sql,
    /// The scale scores under each configured rule but the strict one, in the configured order.
    by_rule: Vec<Sql>,
    reruns: Option<Sql>,
    rules: Sql,
    records: usize,
}

/// Refuse what the plans cannot express as an error: records labelled other than their input,
/// tests the vocabulary or the key cannot score. Returns the number of records. `raw` must be
/// registered.
fn check_source(
    engine: &Engine,
    source: &str,
    input_label: Option<&str>,
    vocab: &Vocabulary,
    key: &ScoringKey,
) -> Result<usize, ScoreError> {
    let what = format!("source {source}");
    let e = |x| df_err(&what, x);
    // Each query ends in LIMIT 1.
    let first_row = |q: Sql| -> Result<Option<RecordBatch>, datafusion::error::DataFusionError> {
        let batches = engine.collect(engine.bound(&q)?)?;
        Ok(batches.into_iter().find(|b| b.num_rows() > 0))
    };
    let text = |b: &RecordBatch, i: usize| -> String {
        let c = arrow::compute::cast(b.column(i), &arrow::datatypes::DataType::Utf8)
            .expect("any column casts to text");
        c.as_string::<i32>().value(0).to_string()
    };

    if let Some(lab) = input_label {
        let q = Binds::default();
        let sql = format!(
            "SELECT label FROM raw WHERE label IS NOT NULL AND label <> {} ORDER BY {ADMIN_ORDER} LIMIT 1",
            q.bind(lab)
        );
        if let Some(b) = first_row(q.sql(sql)).map_err(e)? {
            return Err(ScoreError::Score {
                test: what.clone(),
                message: format!(
                    "records are labelled {:?} but the input is labelled {lab:?} in pipeline.toml",
                    text(&b, 0)
                ),
            });
        }
    }
    // Tests the vocabulary or the key cannot score, named by their first administration.
    let tests = engine
        .query("SELECT DISTINCT test FROM raw ORDER BY test")
        .map_err(e)?;
    for b in &tests {
        let col = arrow::compute::cast(b.column(0), &arrow::datatypes::DataType::Utf8)?;
        for t in col.as_string::<i32>().iter().flatten() {
            let problem = match vocab.items(t) {
                None => Some("unknown test".to_string()),
                Some(n) => crate::score(key, t, &vec![None; n as usize])
                    .err()
                    .map(|x| x.to_string()),
            };
            if let Some(message) = problem {
                let q = Binds::default();
                let sql = format!(
                    "SELECT model, condition, sample FROM raw WHERE test = {} ORDER BY {ADMIN_ORDER} LIMIT 1",
                    q.bind(t)
                );
                let b = first_row(q.sql(sql)).map_err(e)?.expect("the test occurs");
                return Err(ScoreError::Score {
                    test: format!(
                        "{source}: {} {} sample {} {t}",
                        text(&b, 0),
                        text(&b, 1),
                        text(&b, 2)
                    ),
                    message,
                });
            }
        }
    }
    let records: usize = engine
        .query("SELECT count(*) FROM raw")
        .map_err(e)?
        .iter()
        .map(|b| {
            b.column(0)
                .as_primitive::<arrow::datatypes::Int64Type>()
                .value(0) as usize
        })
        .sum();
    Ok(records)
}

/// The order of a source's administrations, in which its stored answers arrive.
const ADMIN_ORDER: &str = "model, condition, sample, test";

/// One source to score, registered as `raw`, and what it is scored with: its label, the
/// vocabulary and key, the rerun pairs and the reply rules.
#[derive(Clone, Copy)]
struct Job<'a> {
    engine: &'a Engine,
    source: &'a str,
    input_label: Option<&'a str>,
    vocab: &'a Vocabulary,
    key: &'a ScoringKey,
    pairs: &'a [[String; 2]],
    rules: &'a [ReplyRule],
}

/// Check a source ([`check_source`]), then build its plans. `raw` must be registered.
fn plan_source(job: Job<'_>) -> Result<SourcePlans, ScoreError> {
    let Job {
        engine,
        source,
        input_label,
        vocab,
        key,
        pairs,
        rules,
    } = job;
    let records = check_source(engine, source, input_label, vocab, key)?;
    // One row per item, read by the study's strict rule (`parsed_answers`).
    let readings = readings_sql(ReplyRule::Strict);
    let q = Binds::default();
    let (src, label) = source_columns(&q, source, input_label);
    let parsed = q.sql(format!(
        "SELECT {} FROM ({readings}) ORDER BY {ADMIN_ORDER}",
        PARSED_ANSWERS.projection(&[("source", &src), ("label", &label)])
    ));
    // One pass over the stored answers, and no sort: the requests arrive in administration
    // order, and the grouping by administration streams (its input is sorted by its keys).
    // Each request's readings are scored with the key where they are read and summed per
    // administration by one aggregate (`*_administration`, crate::functions: per dimension slot
    // `ix`, by name, the items read `ok` and their points), so an administration is one row
    // per request, not per item, and one accumulator, not a sum per slot; its dimensions come
    // out as one array of (ix, answered, points) in slot order, unnested and joined to `key_dims`: every
    // dimension of the test gets its row, also one with no answered item (incomplete), in
    // dimension order. The constant-answer flag is the administration's own aggregate.
    let scales = scales_plan(source, input_label, ReplyRule::Strict, false);
    // The strict rule's rows of `scale_scores_by_rule` are `scale_scores` itself, written from
    // the same stream (see `score_registered`); only the other rules need a plan.
    let by_rule = rules
        .iter()
        .filter(|r| **r != ReplyRule::Strict)
        .map(|r| scales_plan(source, input_label, *r, true))
        .collect();
    let reruns = reruns_plan(source, input_label, pairs);
    let rules = rule_counts_plan(source, input_label, rules);
    Ok(SourcePlans {
        parsed,
        scales,
        by_rule,
        reruns,
        rules,
        records,
    })
}

/// The plan of `scale_scores` (of `scale_scores_by_rule` when `by_rule`) under `rule`, for
/// the rows of `source`.
fn scales_plan(source: &str, input_label: Option<&str>, rule: ReplyRule, by_rule: bool) -> Sql {
    let q = Binds::default();
    let (src, label) = source_columns(&q, source, input_label);
    let (src, label) = (src.as_str(), label.as_str());
    let administration = match rule {
        ReplyRule::Strict => "strict_administration",
        ReplyRule::Lenient => "lenient_administration",
    };
    let exprs = [
        ("source", src),
        ("label", label),
        ("z", "norm_z(test, dimension, score)"),
        ("percentile", "norm_percentile(test, dimension, score)"),
    ];
    let rule_name = q.bind(rule.as_str());
    let projection = if by_rule {
        let mut with_rule = exprs.to_vec();
        with_rule.push(("rule", &rule_name));
        SCALE_SCORES_BY_RULE.projection(&with_rule)
    } else {
        SCALE_SCORES.projection(&exprs)
    };
    q.sql(format!(
        "WITH admins AS (SELECT model, condition, sample, test, min(study) AS study, min(arm) AS arm, \
                    min(cohort) AS cohort, min(label) AS label, min(temperature) AS temperature, \
                    {administration}(test, mode, item, reply, error IS NOT NULL, option_order, \
                                     item_order) AS t \
                    FROM raw GROUP BY model, condition, sample, test), \
         per_dim AS (SELECT model, condition, sample, test, study, arm, cohort, label, temperature, \
                    constant_answers, get_field(x, 'ix') AS ix, get_field(x, 'n') AS n_answered, \
                    get_field(x, 'p') AS points \
                    FROM (SELECT *, get_field(t, 'constant_answers') AS constant_answers, \
                                 unnest(get_field(t, 'per_dim')) AS x FROM admins)), \
         scored AS (SELECT g.model, g.condition, g.sample, g.test, g.study, g.arm, g.cohort, \
                    g.label, g.temperature, d.dimension, d.n_items, \
                    CAST(g.n_answered AS INT) AS n_answered, \
                    g.n_answered = d.n_items AS complete, \
                    COALESCE(g.points, 0.0) AS points, d.max_points, d.raw_unit, \
                    g.constant_answers \
                    FROM key_dims d JOIN per_dim g ON g.test = d.test AND g.ix = d.ix), \
         valued AS (SELECT *, CASE WHEN complete THEN scale_value(points, max_points, raw_unit) END \
                    AS score FROM scored) \
         SELECT {projection} FROM valued ORDER BY {ADMIN_ORDER}",
    ))
}

/// The plan of `reply_reruns` of `source`: per pair of conditions (first, rerun), whether the
/// replies at temperature 0 come back the same.
fn reruns_plan(source: &str, input_label: Option<&str>, pairs: &[[String; 2]]) -> Option<Sql> {
    if pairs.is_empty() {
        return None;
    }
    let q = Binds::default();
    // One grouping per pair over the two conditions' rows (keys are unique within a
    // condition), not a full outer join: the grouping spills, a join's build side would not.
    let one = |a: &str, b: &str| {
        format!(
                "SELECT model, test, {la} AS \"first\", {lb} AS rerun, \
                        (nx = 1 AND ny = 1 AND okx = 1 AND oky = 1) AS both_ok, rx = ry AS same \
                 FROM (SELECT model, test, \
                         count(CASE WHEN condition = {la} THEN 1 END) AS nx, \
                         count(CASE WHEN condition = {lb} THEN 1 END) AS ny, \
                         max(CASE WHEN condition = {la} AND error IS NULL THEN 1 ELSE 0 END) AS okx, \
                         max(CASE WHEN condition = {lb} AND error IS NULL THEN 1 ELSE 0 END) AS oky, \
                         min(CASE WHEN condition = {la} THEN reply END) AS rx, \
                         min(CASE WHEN condition = {lb} THEN reply END) AS ry \
                       FROM raw WHERE condition IN ({la}, {lb}) \
                       GROUP BY model, test, sample, COALESCE(item, 0))",
                la = q.bind(a),
                lb = q.bind(b)
            )
    };
    let union = pairs
        .iter()
        .map(|[a, b]| one(a, b))
        .collect::<Vec<_>>()
        .join(" UNION ALL ");
    let projection = REPLY_RERUNS.projection(&[
        ("source", &q.bind(source)),
        ("label", &q.bind(input_label.unwrap_or(""))),
        (
            "temperature0_honoured",
            "compared > 0 AND identical = compared",
        ),
    ]);
    Some(q.sql(format!(
                "SELECT {projection} \
                 FROM (SELECT model, test, \"first\", rerun, \
                       CAST(sum(CASE WHEN both_ok THEN 1 ELSE 0 END) AS INT) AS compared, \
                       CAST(sum(CASE WHEN both_ok AND same THEN 1 ELSE 0 END) AS INT) AS identical, \
                       CAST(sum(CASE WHEN both_ok THEN 0 ELSE 1 END) AS INT) AS unmatched \
                       FROM ({union}) GROUP BY model, test, \"first\", rerun) \
                 ORDER BY model, test, \"first\", rerun"
        )))
}

/// The plan of `reply_rule_counts` of `source`.
fn rule_counts_plan(source: &str, input_label: Option<&str>, rules: &[ReplyRule]) -> Sql {
    let q = Binds::default();
    let (src, label) = source_columns(&q, source, input_label);
    // Every request read by every configured rule; a whole-test reply is readable when each
    // shown position is read `ok`. `ord` keeps the configured order (strict first). Each
    // rule's requests are grouped on their own and the rule's name and position added after:
    // two constant keys less in every request's grouping. Failed requests and their items
    // (failed under every rule alike) ride along, so the aggregate stage counts requests from
    // these rows instead of grouping every parsed answer again.
    let per_rule = rules
        .iter()
        .enumerate()
        .map(|(ord, r)| {
            format!(
                "SELECT label, model, arm, cohort, condition, mode, {name} AS rule, {ord} AS ord, \
                        requests, failed_requests, readable_replies, items, failed_items, readable_items \
                 FROM (SELECT label, model, arm, cohort, condition, mode, \
                         CAST(get_field(c, 'requests') AS INT) AS requests, \
                         CAST(get_field(c, 'failed_requests') AS INT) AS failed_requests, \
                         CAST(get_field(c, 'readable_replies') AS INT) AS readable_replies, \
                         CAST(get_field(c, 'items') AS INT) AS items, \
                         CAST(get_field(c, 'failed_items') AS INT) AS failed_items, \
                         CAST(get_field(c, 'readable_items') AS INT) AS readable_items \
                       FROM (SELECT {label} AS label, model, arm, cohort, condition, mode, \
                               request_counts({name}, reply, error IS NOT NULL, item_order) AS c \
                             FROM raw GROUP BY {label}, model, arm, cohort, condition, mode))",
                name = q.bind(r.as_str())
            )
        })
        .collect::<Vec<_>>()
        .join(" UNION ALL ");
    q.sql(format!(
        "SELECT {} \
         FROM ({per_rule}) ORDER BY model, arm, condition, mode, ord, label, cohort NULLS FIRST",
        REPLY_RULE_COUNTS.projection(&[("source", &src)])
    ))
}

/// A plan's rows, re-cut and conformed for writing ([`Engine::stream_for_writing`]; with
/// `views`, texts stay string views: [`Sink::takes_views`]), handed to `sink` one batch at a time; with a `key`, rows must come in strictly increasing order of it
/// ([`KeyOrder`]: for plans that sort by a prefix of their key only, see [`readings_sql`]).
fn drain(
    engine: &Engine,
    df: DataFrame,
    schema: &SchemaRef,
    key: &[&str],
    views: bool,
    mut sink: impl FnMut(RecordBatch) -> Result<(), ScoreError>,
) -> Result<(), ScoreError> {
    let e = |x| df_err("stored answers", x);
    let mut order = (!key.is_empty()).then(|| KeyOrder::new(key));
    let batches = engine.stream_for_writing(df, schema.clone()).map_err(e)?;
    let batches = if views {
        batches.keeping_string_views()
    } else {
        batches
    };
    for b in batches {
        let b = b.map_err(e)?;
        if let Some(o) = &mut order {
            o.push(&b).map_err(|x| ScoreError::Score {
                test: "stored answers".into(),
                message: format!("internal error, please report: {x}"),
            })?;
        }
        sink(b)?;
    }
    Ok(())
}

/// The key of `parsed_answers` within one source: its rows come in this order.
const PARSED_KEY: [&str; 5] = ["model", "condition", "sample", "test", "item"];
/// The key of `scale_scores` within one source.
const SCALES_KEY: [&str; 5] = ["model", "condition", "sample", "test", "dimension"];

/// Where one table goes: a Parquet file being written with the pinned settings by
/// [`protospread_core::TableWriter`] straight into the stage's staged folder (its row groups go to disk as
/// they fill, so no table is held in memory), or (for [`score_in_memory`]) a list of batches.
struct Sink {
    path: PathBuf,
    schema: SchemaRef,
    writer: Option<protospread_core::TableWriter<fs_err::File>>,
    kept: Vec<RecordBatch>,
}

impl Sink {
    fn parquet(
        dir: &Path,
        table: &TableContract,
        staged: &mut Staged,
        prov: &Provenance,
    ) -> Result<Self, ScoreError> {
        Self::parquet_with(
            dir,
            table,
            staged,
            protospread_core::parquet_writer_properties(&prov.table(table)),
        )
    }
    fn parquet_with(
        dir: &Path,
        table: &TableContract,
        staged: &mut Staged,
        properties: parquet::file::properties::WriterProperties,
    ) -> Result<Self, ScoreError> {
        let (path, schema) = (dir.join(table.file_name()), table.schema());
        let file = fs_err::File::create(staged.file(&path)?).map_err(|e| ScoreError::File {
            path: path.clone(),
            message: e.to_string(),
        })?;
        // Text and integer columns as runs (`TableWriter`): these tables come sorted by their
        // keys, so a value repeats row after row (at 10^6 answers the Arrow writer's dictionary
        // lookup of every text was 30 % of the stage's instructions).
        let writer = protospread_core::TableWriter::try_new(file, schema.clone(), properties)
            .map_err(|e| pq_err(&path, e))?;
        Ok(Sink {
            path,
            schema,
            writer: Some(writer),
            kept: Vec::new(),
        })
    }
    fn memory(table: &TableContract) -> Self {
        Sink {
            path: PathBuf::from(table.file_name()),
            schema: table.schema(),
            writer: None,
            kept: Vec::new(),
        }
    }
    /// Whether this sink takes string views ([`drain`]): a Parquet writer encodes them to
    /// the bytes of plain UTF-8; kept batches are plain UTF-8, as a reader of the files sees
    /// them.
    fn takes_views(&self) -> bool {
        self.writer.is_some()
    }
    fn write(&mut self, b: &RecordBatch) -> Result<(), ScoreError> {
        match &mut self.writer {
            Some(w) => w.write(b).map_err(|e| pq_err(&self.path, e)),
            None => {
                self.kept.push(b.clone());
                Ok(())
            }
        }
    }
    /// Close the Parquet file and sync it; [`Staged::commit`] makes it visible.
    fn finish(self) -> Result<(), ScoreError> {
        let w = self.writer.expect("finish is for Parquet sinks");
        let file = w.into_inner().map_err(|e| pq_err(&self.path, e))?;
        file.sync_all().map_err(|e| ScoreError::File {
            path: self.path.clone(),
            message: e.to_string(),
        })
    }
}

fn pq_err(path: &Path, e: parquet::errors::ParquetError) -> ScoreError {
    ScoreError::File {
        path: path.to_path_buf(),
        message: format!("writing Parquet: {e}"),
    }
}

/// Count what the summary reports while the batches stream past.
fn tally_parsed(sum: &mut AnswerSourceSummary, b: &RecordBatch) {
    let status = Texts::new(
        b.column_by_name("status")
            .expect("parsed schema has status"),
    );
    for i in 0..status.len() {
        if status.is_null(i) {
            continue;
        }
        let s = status.value(i);
        if let Some(st) = Status::ALL.iter().find(|x| x.as_str() == s) {
            *sum.statuses.entry(st.as_str()).or_insert(0) += 1;
        }
    }
}

/// The administration a scale row belongs to: model, condition, sample, test.
type AdminKey = (String, String, i32, String);

/// Administrations are contiguous in the sorted scale rows: count them and their constant
/// flags, complete rows, and keep the last administration's label.
fn tally_scales(sum: &mut AnswerSourceSummary, last: &mut Option<AdminKey>, b: &RecordBatch) {
    let s = |n: &str| Texts::new(b.column_by_name(n).expect("scale schema"));
    let (model, cond, test, label) = (s("model"), s("condition"), s("test"), s("label"));
    let sample = b
        .column_by_name("sample")
        .expect("scale schema")
        .as_primitive::<arrow::datatypes::Int32Type>();
    let complete = b
        .column_by_name("complete")
        .expect("scale schema")
        .as_boolean();
    let constant = b
        .column_by_name("constant_answers")
        .expect("scale schema")
        .as_boolean();
    for i in 0..b.num_rows() {
        sum.scale_rows += 1;
        if complete.value(i) {
            sum.complete_scale_rows += 1;
        }
        let (m, c, n, t) = (
            model.value(i),
            cond.value(i),
            sample.value(i),
            test.value(i),
        );
        let same = last
            .as_ref()
            .is_some_and(|k| k.0 == m && k.1 == c && k.2 == n && k.3 == t);
        if !same {
            sum.administrations += 1;
            if constant.value(i) {
                sum.constant_administrations += 1;
            }
            *last = Some((m.to_string(), c.to_string(), n, t.to_string()));
        }
    }
    if let Some(i) = b.num_rows().checked_sub(1) {
        sum.label = label.value(i).to_string();
    }
}

/// Where the fetch stage puts the stored answers of input `name`.
pub(crate) fn fetched_path(out: &Path, name: &str) -> PathBuf {
    out.join("fetch")
        .join("answers")
        .join(format!("{name}.parquet"))
}

/// Parse and score every `role = "answers"` input of `cfg` (inputs in name order) from
/// `out/fetch/answers/`, and stage the tables [`PARSED_ANSWERS`], [`SCALE_SCORES`],
/// [`REPLY_RERUNS`] and [`REPLY_RULE_COUNTS`] (the rules of `[score] reply_rules`) into
/// `score_dir` through `staged`. With no answer inputs,
/// the files are written empty (with their schemas), so that downstream stages always find
/// them.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_answers(
    cfg: &Config,
    out: &Path,
    score_dir: &Path,
    key: &ScoringKey,
    norms: &Norms,
    engine: &EngineOptions,
    staged: &mut Staged,
    prov: &Provenance,
    progress: &dyn Progress,
) -> Result<AnswersSummary, ScoreError> {
    let vocab = Vocabulary::from_section(&cfg.answers);
    let mut inputs: Vec<_> = cfg.inputs_with_role(InputRole::Answers).collect();
    inputs.sort_by(|a, b| a.name.cmp(&b.name));
    for input in &inputs {
        let p = fetched_path(out, &input.name);
        if !p.exists() {
            return Err(ScoreError::File {
                path: p,
                message: "not found; run `protospread fetch` first".into(),
            });
        }
    }
    let rules = cfg
        .score
        .reply_rules
        .iter()
        .map(|r| {
            ReplyRule::parse(r).ok_or_else(|| ScoreError::Score {
                test: "[score] reply_rules".into(),
                message: format!("unknown reply rule {r:?}"),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let engine = session(engine, key, norms)?;
    let d = score_dir;
    // A row per answer: statistics only where they can prune a read, on the sort key.
    let mut parsed = Sink::parquet_with(
        d,
        &PARSED_ANSWERS,
        staged,
        protospread_core::parquet_writer_properties_with_statistics(
            &prov.table(&PARSED_ANSWERS),
            &PARSED_KEY,
        ),
    )?;
    let mut scales = Sink::parquet(d, &SCALE_SCORES, staged, prov)?;
    let mut reruns = Sink::parquet(d, &REPLY_RERUNS, staged, prov)?;
    let mut rule_sink = Sink::parquet(d, &REPLY_RULE_COUNTS, staged, prov)?;
    let mut by_rule = Sink::parquet(d, &SCALE_SCORES_BY_RULE, staged, prov)?;
    let mut summary = AnswersSummary::default();
    for input in &inputs {
        let p = fetched_path(out, &input.name);
        let what = p.display().to_string();
        engine
            .register_sorted_parquet("raw", &what, &STORED_ANSWERS.sorted_by())
            .map_err(|e| df_err(&what, e))?;
        progress.begin(&format!("score {}", input.name), "answers", None);
        let job = Job {
            engine: &engine,
            source: &input.name,
            input_label: input.label.as_deref(),
            vocab: &vocab,
            key,
            pairs: &cfg.aggregate.rerun_pairs,
            rules: &rules,
        };
        let sum = score_registered(
            job,
            Sinks {
                parsed: &mut parsed,
                scales: &mut scales,
                reruns: &mut reruns,
                rules: &mut rule_sink,
                by_rule: &mut by_rule,
                progress,
            },
        );
        progress.end();
        engine
            .context()
            .deregister_table("raw")
            .map_err(|e| df_err(&what, e))?;
        let sum = sum?;
        summary.parsed_rows += sum.statuses.values().sum::<usize>();
        summary.scale_rows += sum.scale_rows;
        summary.sources.push(sum);
    }
    for sink in [parsed, scales, reruns, rule_sink, by_rule] {
        sink.finish()?;
    }
    Ok(summary)
}

/// The sinks of the score stage's stored-answer tables.
struct Sinks<'a> {
    parsed: &'a mut Sink,
    scales: &'a mut Sink,
    reruns: &'a mut Sink,
    rules: &'a mut Sink,
    by_rule: &'a mut Sink,
    /// Counts the parsed answers written.
    progress: &'a dyn Progress,
}

/// A chain of plans of one source, run by one thread, with its part of the summary.
type Chain<'c> = Box<dyn FnOnce() -> Result<AnswerSourceSummary, ScoreError> + Send + 'c>;

/// Run `chains` on two threads, each taking the next chain not yet taken when it comes free;
/// their results in the order of `chains`. After a chain fails, no other chain starts (those
/// come back as `Ok` with an empty summary). A chain is taken only after every chain before
/// it, so a skipped one always follows a failed one: the first error in order is the error
/// a run of the chains one after another would meet.
fn run_chains(chains: Vec<Chain<'_>>) -> Vec<Result<AnswerSourceSummary, ScoreError>> {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Mutex;
    let n = chains.len();
    let chains: Vec<Mutex<Option<_>>> = chains.into_iter().map(|c| Mutex::new(Some(c))).collect();
    let results: Vec<Mutex<Option<Result<AnswerSourceSummary, ScoreError>>>> =
        (0..n).map(|_| Mutex::new(None)).collect();
    let (next, failed) = (AtomicUsize::new(0), AtomicBool::new(false));
    let work = || loop {
        let i = next.fetch_add(1, Ordering::SeqCst);
        if i >= n || failed.load(Ordering::SeqCst) {
            break;
        }
        let chain = chains[i]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .expect("each chain is taken once");
        let r = chain();
        if r.is_err() {
            failed.store(true, Ordering::SeqCst);
        }
        *results[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
    };
    std::thread::scope(|scope| {
        let other = scope.spawn(work);
        work();
        other
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    });
    results
        .into_iter()
        .map(|r| {
            r.into_inner()
                .unwrap_or_else(|p| p.into_inner())
                .unwrap_or_else(|| Ok(AnswerSourceSummary::default()))
        })
        .collect()
}

/// Run the plans of one source registered as `raw`, streaming into the sinks.
fn score_registered(job: Job<'_>, sinks: Sinks<'_>) -> Result<AnswerSourceSummary, ScoreError> {
    let (engine, source, input_label) = (job.engine, job.source, job.input_label);
    let Sinks {
        parsed,
        scales,
        reruns,
        rules: rule_sink,
        by_rule,
        progress,
    } = sinks;
    let plans = plan_source(job)?;
    let mut sum = AnswerSourceSummary {
        source: source.to_string(),
        label: input_label.unwrap_or("").to_string(),
        records: plans.records,
        ..Default::default()
    };
    let SourcePlans {
        parsed: parsed_plan,
        scales: scales_plan,
        by_rule: by_rule_plans,
        reruns: reruns_plan,
        rules: rules_plan,
        ..
    } = plans;
    // Four independent chains of plans, each writing its own files: the parsed answers; the
    // scale scores (then the other rules' scale scores, after the strict ones, which open
    // `scale_scores_by_rule`); the reply rules; the reruns. Two workers (both cores) take
    // them in this order as they come free: on large studies the parsed answers, a row per
    // item, take longer than the scale scores, so the scale scores' worker takes the reply
    // rules, the longer of the last two (the first two chains take three to five times as long as
    // the last two), and on
    // small studies planning is most of each chain. The summary's counts are split between
    // the chains the same way.
    let plan = |sql: &Sql| {
        engine
            .bound(sql)
            .map_err(|x| df_err(&format!("source {source}"), x))
    };
    let mut chains: Vec<Chain<'_>> = Vec::with_capacity(4);
    chains.push(Box::new(|| {
        let mut part = AnswerSourceSummary::default();
        let schema = parsed.schema.clone();
        let views = parsed.takes_views();
        drain(
            engine,
            plan(&parsed_plan)?,
            &schema,
            &PARSED_KEY,
            views,
            |b| {
                tally_parsed(&mut part, &b);
                progress.advance(b.num_rows() as u64);
                parsed.write(&b)
            },
        )?;
        Ok(part)
    }));
    chains.push(Box::new(|| {
        scales_chain(
            engine,
            &plan,
            job.rules,
            [scales, by_rule],
            &scales_plan,
            &by_rule_plans,
        )
    }));
    chains.push(Box::new(|| {
        let schema = rule_sink.schema.clone();
        let views = rule_sink.takes_views();
        drain(engine, plan(&rules_plan)?, &schema, &[], views, |b| {
            rule_sink.write(&b)
        })?;
        Ok(AnswerSourceSummary::default())
    }));
    if let Some(sql) = &reruns_plan {
        chains.push(Box::new(|| {
            let schema = reruns.schema.clone();
            let views = reruns.takes_views();
            drain(engine, plan(sql)?, &schema, &[], views, |b| {
                reruns.write(&b)
            })?;
            Ok(AnswerSourceSummary::default())
        }));
    }
    let mut done = run_chains(chains).into_iter();
    let (first, second) = (
        done.next().expect("the parsed answers' chain"),
        done.next().expect("the scale scores' chain"),
    );
    // The error a run of the chains one after another would meet first.
    let (first, second) = (first?, second?);
    for rest in done {
        rest?;
    }

    sum.statuses = first.statuses;
    sum.administrations = second.administrations;
    sum.constant_administrations = second.constant_administrations;
    sum.scale_rows = second.scale_rows;
    sum.complete_scale_rows = second.complete_scale_rows;
    if second.scale_rows > 0 {
        sum.label = second.label;
    }
    Ok(sum)
}

/// The chain of the scale scores: `scales_sql` into `scale_scores` (and, when strict is the
/// first of `rules`, into `scale_scores_by_rule` too), then the other rules' `by_rule_sql`
/// into `scale_scores_by_rule`; its part of the summary.
fn scales_chain(
    engine: &Engine,
    plan: &impl Fn(&Sql) -> Result<DataFrame, ScoreError>,
    rules: &[ReplyRule],
    [scales, by_rule]: [&mut Sink; 2],
    scales_sql: &Sql,
    by_rule_sql: &[Sql],
) -> Result<AnswerSourceSummary, ScoreError> {
    let mut part = AnswerSourceSummary::default();
    let schema = scales.schema.clone();
    let mut last = None;
    // Strict is always the first configured rule (the configuration refuses another
    // order), so its rows open this source's part of `scale_scores_by_rule`: the
    // scale-score batches with the rule column in front. Batches are cut to a fixed
    // size, so the bytes are those a plan of their own would give.
    let strict = rules.first() == Some(&ReplyRule::Strict);
    let rule_col: arrow::array::ArrayRef = Arc::new(arrow::array::StringArray::from(vec![
                ReplyRule::Strict.as_str();
                protospread_engine::WRITE_BATCH_ROWS
            ]));
    let views = scales.takes_views();
    drain(
        engine,
        plan(scales_sql)?,
        &schema,
        &SCALES_KEY,
        views,
        |b| {
            tally_scales(&mut part, &mut last, &b);
            scales.write(&b)?;
            if strict {
                let mut cols = vec![rule_col.slice(0, b.num_rows())];
                cols.extend(b.columns().iter().cloned());
                // The scale scores' own field types: their texts may be string views.
                let mut fields = vec![by_rule.schema.field(0).clone()];
                fields.extend(b.schema().fields().iter().map(|f| f.as_ref().clone()));
                let schema = Arc::new(arrow::datatypes::Schema::new(fields));
                by_rule.write(&RecordBatch::try_new(schema, cols)?)?;
            }
            Ok(())
        },
    )?;
    let schema = by_rule.schema.clone();
    for sql in by_rule_sql {
        drain(engine, plan(sql)?, &schema, &SCALES_KEY, views, |b| {
            by_rule.write(&b)
        })?;
    }
    Ok(part)
}

/// What [`score_in_memory`] returns: the tables as batches, and the summary.
#[derive(Debug, Clone)]
pub struct ScoredInMemory {
    /// Parsed-answer batches.
    pub parsed: Vec<RecordBatch>,
    /// Scale-score batches.
    pub scales: Vec<RecordBatch>,
    /// Reply-rerun batches.
    pub reruns: Vec<RecordBatch>,
    /// Reply-rule batches, for every rule of [`ReplyRule::ALL`].
    pub rules: Vec<RecordBatch>,
    /// Scale-score batches under every rule of [`ReplyRule::ALL`] (column `rule`).
    pub by_rule: Vec<RecordBatch>,
    /// What the source produced.
    pub summary: AnswerSourceSummary,
}

/// Score the records of one source held in memory, through the same plans as the score stage
/// (tests and small tools; the stage streams from Parquet and never builds rows).
pub fn score_in_memory(
    source: &str,
    input_label: Option<&str>,
    records: &[StoredRecord],
    vocab: &Vocabulary,
    key: &ScoringKey,
    norms: &Norms,
    pairs: &[[String; 2]],
) -> Result<ScoredInMemory, ScoreError> {
    let engine = session(&EngineOptions::default(), key, norms)?;
    let batch = protospread_format::to_batch(records)?;
    engine
        .register_sorted_batches(
            "raw",
            batch.schema(),
            vec![batch],
            &STORED_ANSWERS.sorted_by(),
        )
        .map_err(|e| df_err(source, e))?;
    let mut parsed = Sink::memory(&PARSED_ANSWERS);
    let mut scales = Sink::memory(&SCALE_SCORES);
    let mut reruns = Sink::memory(&REPLY_RERUNS);
    let mut rules = Sink::memory(&REPLY_RULE_COUNTS);
    let mut by_rule = Sink::memory(&SCALE_SCORES_BY_RULE);
    let job = Job {
        engine: &engine,
        source,
        input_label,
        vocab,
        key,
        pairs,
        rules: &ReplyRule::ALL,
    };
    let summary = score_registered(
        job,
        Sinks {
            parsed: &mut parsed,
            scales: &mut scales,
            reruns: &mut reruns,
            rules: &mut rules,
            by_rule: &mut by_rule,
            progress: &protospread_core::NoProgress,
        },
    )?;
    Ok(ScoredInMemory {
        parsed: parsed.kept,
        scales: scales.kept,
        reruns: reruns.kept,
        rules: rules.kept,
        by_rule: by_rule.kept,
        summary,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failing(n: usize) -> Result<AnswerSourceSummary, ScoreError> {
        Err(ScoreError::Score {
            test: format!("chain {n}"),
            message: "failed".into(),
        })
    }

    #[test]
    fn chains_come_back_in_order_and_none_starts_after_a_failure() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let started = AtomicUsize::new(0);
        let ok = |records: usize| -> Chain<'_> {
            Box::new({
                let started = &started;
                move || {
                    started.fetch_add(1, Ordering::SeqCst);
                    // The first chain outlasts the others, so the second worker runs them.
                    if records == 0 {
                        std::thread::sleep(std::time::Duration::from_millis(50));
                    }
                    Ok(AnswerSourceSummary {
                        records,
                        ..Default::default()
                    })
                }
            })
        };
        let results = run_chains(vec![ok(0), ok(1), ok(2)]);
        let records: Vec<usize> = results.into_iter().map(|r| r.unwrap().records).collect();
        assert_eq!(records, [0, 1, 2]);

        started.store(0, Ordering::SeqCst);
        let results = run_chains(vec![
            ok(0),
            Box::new(|| failing(1)),
            Box::new(|| failing(2)),
            ok(3),
            ok(4),
        ]);
        // Chain 1 fails while chain 0 still runs: chains 2..4 never start.
        assert_eq!(started.load(Ordering::SeqCst), 1);
        assert_eq!(results.len(), 5);
        assert_eq!(results[0].as_ref().unwrap().records, 0);
        match &results[1] {
            Err(ScoreError::Score { test, .. }) => assert_eq!(test, "chain 1"),
            other => panic!("chain 1 should fail, got {other:?}"),
        }
        assert!(results[2..]
            .iter()
            .all(|r| r.as_ref().is_ok_and(|s| s.records == 0)));
    }
}
