//! Running the stage's plans: register the inputs, check them, build the views and collect the
//! tables.

use crate::plan::{self, Binds, Sql};
use crate::table::{conform, contract_schema, output_schema, Rows};
use crate::{AggregateError, Cause, Params};
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use arrow::util::display::array_value_to_string;
use datafusion::prelude::DataFrame;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use protospread_core::{
    AggregateSection, TableContract, CELLS, CELLS_BY_RULE, DROPPED_CELLS, NORMS,
    PROTOCOL_VS_SAMPLING_BY_RULE, READABLE_REPLIES, REPLY_RULE_COUNTS, SCALE_SCORES,
    SCALE_SCORES_BY_RULE, VERDICT, VERDICT_BY_RULE,
};
use protospread_engine::{Engine, EngineOptions};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn input_err(path: &Path, message: impl Into<String>) -> AggregateError {
    AggregateError::Input {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// Check that `path` exists and has every column of its contract with a usable type.
fn check_schema(path: &Path, table: &TableContract) -> Result<(), AggregateError> {
    let f = fs_err::File::open(path).map_err(protospread_core::CoreError::Fs)?;
    let b = ParquetRecordBatchReaderBuilder::try_new(f.into_parts().0)
        .map_err(|e| AggregateError::read(path, "not a readable Parquet file", e))?;
    table
        .check_schema(b.schema())
        .map_err(|e| AggregateError::read(path, "", e))
}

/// The arm the verdict of `source` uses, given the arms the source has (docs/statistics.md,
/// "Which arm a source's verdict is about"): the input's own `headline_arm` if set (it must be
/// one of `arms`), else the source's single arm, else `[aggregate] headline_arm`.
pub(crate) fn headline_arm<'a>(
    p: &'a Params,
    source: &str,
    arms: &'a [String],
) -> Result<&'a str, AggregateError> {
    match (p.input_arms.get(source), arms) {
        (Some(arm), _) if arms.contains(arm) => Ok(arm),
        (Some(arm), _) => Err(AggregateError::HeadlineArm {
            input: source.to_string(),
            arm: arm.clone(),
            arms: if arms.is_empty() {
                "none: the source has no scale scores or answers".to_string()
            } else {
                arms.join(", ")
            },
        }),
        (None, [only]) => Ok(only),
        (None, _) => Ok(&p.aggregate.headline_arm),
    }
}

/// `protocol_set` of the rows computed over `protocol_conditions` (the study's set).
pub const PRIMARY: &str = "primary";
/// `protocol_set` of the rows of the declared secondary analysis
/// (`secondary_protocol_conditions`, by default the single-item setups).
pub const SECONDARY: &str = "secondary_single_item";

struct Files {
    scores: PathBuf,
    by_rule: PathBuf,
    norms: PathBuf,
    rules: PathBuf,
}

struct Run<'a> {
    engine: Engine,
    files: &'a Files,
    /// The intermediate tables, as Parquet files (see `materialize`).
    scratch: protospread_core::Scratch,
    /// Files written into `scratch` so far: each table gets a new name, so that a table
    /// materialized again is never read from a file the session has seen before.
    written: std::cell::Cell<usize>,
}

impl<'a> Run<'a> {
    /// A run of the stage's plans in `engine`, with a scratch folder of its own.
    fn new(engine: Engine, files: &'a Files) -> Result<Self, AggregateError> {
        Ok(Run {
            engine,
            files,
            scratch: protospread_core::Scratch::new("aggregate").map_err(|e| {
                AggregateError::engine(&std::env::temp_dir(), "creating a scratch folder", e)
            })?,
            written: std::cell::Cell::new(0),
        })
    }
}

/// The first row of a query's result as display strings by column name, if any row.
fn first_row(batches: &[RecordBatch]) -> Option<Vec<(String, String)>> {
    let b = batches.iter().find(|b| b.num_rows() > 0)?;
    Some(
        b.schema()
            .fields()
            .iter()
            .zip(b.columns())
            .map(|(f, c)| {
                let v = if c.is_null(0) {
                    "NULL".to_string()
                } else {
                    array_value_to_string(c, 0).unwrap_or_default()
                };
                (f.name().clone(), v)
            })
            .collect(),
    )
}

fn describe(row: &[(String, String)], skip: &[&str]) -> String {
    row.iter()
        .filter(|(k, _)| !skip.contains(&k.as_str()))
        .map(|(k, v)| format!("{k}={v:?}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// For checks of the form (condition, what it means): an expression naming the first
/// condition a row meets (the meanings bound in `q`), and one that is true when it meets any.
fn first_problem(q: &Binds, problems: &[(String, String)]) -> (String, String) {
    let which: Vec<String> = problems
        .iter()
        .map(|(when, what)| format!("WHEN {when} THEN {}", q.bind(what)))
        .collect();
    let any: Vec<String> = problems
        .iter()
        .map(|(when, _)| format!("({when})"))
        .collect();
    (format!("CASE {} END", which.join(" ")), any.join(" OR "))
}

fn get<'r>(row: &'r [(String, String)], name: &str) -> &'r str {
    row.iter()
        .find(|(k, _)| k == name)
        .map_or("", |(_, v)| v.as_str())
}

impl Run<'_> {
    fn sql(&self, sql: impl Into<Sql>, path: &Path) -> Result<Vec<RecordBatch>, AggregateError> {
        self.plan(None, sql.into(), path)
            .map(|(_, batches)| batches)
    }

    /// Plan `sql` with its bound values (a statement such as `CREATE VIEW` takes effect here).
    fn frame(&self, sql: Sql) -> Result<DataFrame, datafusion::error::DataFusionError> {
        self.engine.bound(&sql)
    }

    /// The table `name` from `sql`, its columns of their output types, as it is computed.
    fn table(
        &self,
        name: &str,
        sql: impl Into<Sql>,
        path: &Path,
    ) -> Result<Rows<'_>, AggregateError> {
        self.rows_of(name, sql.into(), path, |s| Ok(output_schema(s)))
    }

    /// The table of `contract` from `sql`, whose columns must be the contract's, as it is
    /// computed.
    fn declared(
        &self,
        contract: &TableContract,
        sql: impl Into<Sql>,
        path: &Path,
    ) -> Result<Rows<'_>, AggregateError> {
        self.rows_of(contract.name, sql.into(), path, |s| {
            contract_schema(contract, s)
        })
    }

    /// Plan `sql` and hand out its rows as table `name`, each batch of the schema that
    /// `schema_of` makes of the plan's.
    fn rows_of(
        &self,
        name: &str,
        sql: Sql,
        path: &Path,
        schema_of: impl FnOnce(&SchemaRef) -> Result<SchemaRef, arrow::error::ArrowError>,
    ) -> Result<Rows<'_>, AggregateError> {
        let df = self
            .frame(sql)
            .map_err(|e| AggregateError::engine(path, name, e))?;
        let plan_schema = Arc::new(df.schema().as_arrow().clone());
        let schema = schema_of(&plan_schema)
            .map_err(|e| AggregateError::engine(path, format!("table {name}"), e))?;
        let stream = self
            .engine
            .stream(df)
            .map_err(|e| AggregateError::engine(path, name, e))?;
        let (out, input, table) = (schema.clone(), path.to_path_buf(), name.to_string());
        let batches = stream.map(move |b| {
            let b = b.map_err(|e| AggregateError::engine(&input, &table, e))?;
            conform(&out, &b)
                .map_err(|e| AggregateError::engine(&input, format!("table {table}"), e))
        });
        Ok(Rows {
            name: name.to_string(),
            schema,
            batches: Box::new(batches),
        })
    }

    /// `rows` written to a file of the scratch folder, for a table computed on one thread and
    /// handed out on another, later: [`Spooled::rows`] reads it back in its order. `path`
    /// (the stage's input) names the table in errors.
    fn spool(&self, rows: Rows<'_>, path: &Path) -> Result<Spooled, AggregateError> {
        let what = format!("table {}", rows.name);
        let fail = |e: Cause| AggregateError::engine(path, what.clone(), e);
        let (file, mut w) = self.scratch_file(&rows.name, &rows.schema).map_err(fail)?;
        for b in rows.batches {
            w.write(&b?).map_err(|e| fail(e.into()))?;
        }
        w.close().map_err(|e| fail(e.into()))?;
        Ok(Spooled {
            name: rows.name,
            schema: rows.schema,
            file,
            input: path.to_path_buf(),
        })
    }

    /// A new file of the scratch folder for table `name`, and a writer of `schema` to it.
    fn scratch_file(
        &self,
        name: &str,
        schema: &SchemaRef,
    ) -> Result<(PathBuf, parquet::arrow::ArrowWriter<fs_err::File>), Cause> {
        let n = self.written.get();
        self.written.set(n + 1);
        let file = self.scratch.path().join(format!("{n}-{name}.parquet"));
        let out = fs_err::File::create(&file)?;
        let w = parquet::arrow::ArrowWriter::try_new(out, schema.clone(), None)?;
        Ok((file, w))
    }

    /// Plan and run `sql`; an error names `path` and, when given, the result being computed.
    fn plan(
        &self,
        name: Option<&str>,
        sql: Sql,
        path: &Path,
    ) -> Result<(arrow::datatypes::SchemaRef, Vec<RecordBatch>), AggregateError> {
        let engine = |e: datafusion::error::DataFusionError| {
            AggregateError::engine(path, name.unwrap_or(""), e)
        };
        let df = self.frame(sql).map_err(engine)?;
        let schema = Arc::new(df.schema().as_arrow().clone());
        let batches = self.engine.collect(df).map_err(engine)?;
        Ok((schema, batches))
    }

    /// A query that must return no row; the first row it returns is reported.
    fn refuse(
        &self,
        sql: impl Into<Sql>,
        path: &Path,
        message: impl Fn(&[(String, String)]) -> String,
    ) -> Result<(), AggregateError> {
        match first_row(&self.sql(sql, path)?) {
            Some(row) => Err(input_err(path, message(&row))),
            None => Ok(()),
        }
    }

    fn check_scores(&self) -> Result<(), AggregateError> {
        let path = &self.files.scores;
        let key = "source, model, condition, CAST(sample AS BIGINT) AS sample, test, dimension";
        let order = "ORDER BY source, model, condition, sample, test, dimension LIMIT 1";
        let nulls: Vec<(String, String)> = SCALE_SCORES
            .required()
            .iter()
            .map(|c| (format!("{c} IS NULL"), c.to_string()))
            .collect();
        let q = Binds::default();
        let (which, any) = first_problem(&q, &nulls);
        self.refuse(
            q.sql(format!(
                "SELECT {key}, {which} AS null_column FROM scores WHERE {any} {order}"
            )),
            path,
            |r| {
                format!(
                    "column `{}` is null in the row {}",
                    get(r, "null_column"),
                    describe(r, &["null_column"])
                )
            },
        )?;
        // The grouping only when the file's order does not already prove the keys unique.
        if !crate::unique::unique_in_runs(
            path,
            &SCALE_SCORES.sort_key[..1],
            &SCALE_SCORES.sort_key[1..],
        )? {
            self.refuse(
                format!(
                    "SELECT {key} FROM scores GROUP BY source, model, condition, sample, test, dimension \
                     HAVING COUNT(*) > 1 {order}"
                ),
                path,
                |r| format!("duplicate row for {}", describe(r, &[])),
            )?;
        }
        // MIN <> MAX, not COUNT(DISTINCT ...) > 1: the same test (both ignore nulls), but a
        // distinct count keeps a hash set per model outside the memory pool (5.8 GB at 10^8
        // answers), where MIN and MAX keep one value.
        self.refuse(
            "SELECT source, model FROM scores GROUP BY source, model \
             HAVING MIN(label) <> MAX(label) OR MIN(study) <> MAX(study) OR MIN(arm) <> MAX(arm) \
               OR MIN(cohort) <> MAX(cohort) OR (COUNT(cohort) > 0 AND COUNT(cohort) < COUNT(*)) \
             ORDER BY source, model LIMIT 1",
            path,
            |r| {
                format!(
                    "model {:?} of source {:?} has inconsistent label/study/arm/cohort across its rows",
                    get(r, "model"),
                    get(r, "source")
                )
            },
        )?;
        // The statistics are exact integer moments: a score must be an integer 0..100.
        self.refuse(
            format!(
                "SELECT {key}, score FROM scores WHERE score IS NOT NULL \
                 AND NOT (score >= 0 AND score <= 100 AND score = trunc(score)) {order}"
            ),
            path,
            |r| {
                format!(
                    "score {} is not an integer from 0 to 100 in the row {}",
                    get(r, "score"),
                    describe(r, &["score"])
                )
            },
        )?;
        let norms = &self.files.norms;
        self.refuse(
            "SELECT test, dimension FROM norms GROUP BY test, dimension HAVING COUNT(*) > 1 \
             ORDER BY test, dimension LIMIT 1",
            norms,
            |r| format!("more than one row for {}", describe(r, &[])),
        )?;
        self.refuse(
            format!(
                "SELECT {key} FROM scores s WHERE z IS NOT NULL AND NOT EXISTS \
                 (SELECT 1 FROM norms n WHERE n.test = s.test AND n.dimension = s.dimension \
                  AND n.mean IS NOT NULL AND n.sd IS NOT NULL) {order}"
            ),
            norms,
            |r| {
                format!(
                    "no human mean and SD for test {:?} dimension {:?}, but scale_scores.parquet has a z for it (row {})",
                    get(r, "test"),
                    get(r, "dimension"),
                    describe(r, &[])
                )
            },
        )
    }

    /// The score stage's request counts (`reply_rules`): every mode one the contract names,
    /// and counts that add up (a request is failed, readable or unreadable, and shows at least
    /// one item; so do its items). The first row that breaks a rule is named, with the rule.
    fn check_requests(&self) -> Result<(), AggregateError> {
        let problems: Vec<(String, String)> = [
            (
                "mode IS NULL OR mode NOT IN ('single', 'whole')",
                "column `mode` is not single or whole",
            ),
            (
                "requests < 0 OR failed_requests < 0 OR readable_replies < 0 OR items < 0 \
                 OR failed_items < 0 OR readable_items < 0",
                "a count is negative",
            ),
            (
                "CAST(failed_requests AS BIGINT) + readable_replies > requests",
                "failed_requests + readable_replies exceed requests",
            ),
            (
                "CAST(failed_items AS BIGINT) + readable_items > items",
                "failed_items + readable_items exceed items",
            ),
            (
                "failed_requests > failed_items OR requests > items",
                "more requests than items (failed_requests > failed_items or requests > items)",
            ),
        ]
        .into_iter()
        .map(|(when, what)| (when.to_string(), what.to_string()))
        .collect();
        let q = Binds::default();
        let (which, any) = first_problem(&q, &problems);
        self.refuse(
            q.sql(format!(
                "SELECT source, model, condition, mode, rule, {which} AS problem \
                 FROM reply_rules WHERE {any} ORDER BY source, model, condition, mode, rule LIMIT 1"
            )),
            &self.files.rules,
            |r| format!("row {}: {}", describe(r, &["problem"]), get(r, "problem")),
        )?;
        self.check_labels()
    }

    /// Whether each model has one label, arm and cohort, over every rule's rows: the side
    /// tables group each rule's requests by arm.
    fn check_labels(&self) -> Result<(), AggregateError> {
        let path = &self.files.rules;
        // MIN <> MAX, not COUNT(DISTINCT ...) > 1: the same test (both ignore nulls); a
        // cohort on some rows and none on others shows in the counts.
        self.refuse(
            "SELECT source, model FROM reply_rules GROUP BY source, model \
             HAVING MIN(label) <> MAX(label) OR MIN(arm) <> MAX(arm) \
               OR MIN(cohort) <> MAX(cohort) OR (COUNT(cohort) > 0 AND COUNT(cohort) < COUNT(*)) \
             ORDER BY source, model LIMIT 1",
            path,
            |r| {
                format!(
                    "model {:?} of source {:?} has more than one label/arm/cohort",
                    get(r, "model"),
                    get(r, "source")
                )
            },
        )
    }

    /// Run `sql` once and register its result as table `name`, so that later plans reading
    /// it several times do not recompute it.
    ///
    /// The rows stream into a Parquet file in the scratch folder, which is then registered:
    /// an intermediate table grows with the study (the request table has a row per
    /// administration), and held in memory it sits outside the engine's pool.
    fn materialize(
        &self,
        name: &str,
        sql: impl Into<Sql>,
        path: &Path,
    ) -> Result<(), AggregateError> {
        self.materialize_sorted(name, sql.into(), path, &[])
    }

    /// [`Run::materialize`] for a plan whose rows come sorted by `order` (column, nulls
    /// first): the file is registered with that order, so reading it sorted costs no sort.
    fn materialize_sorted(
        &self,
        name: &str,
        sql: Sql,
        path: &Path,
        order: &[(&str, bool)],
    ) -> Result<(), AggregateError> {
        let fail =
            |e: Box<dyn std::error::Error + Send + Sync>| AggregateError::engine(path, name, e);
        let df = self.frame(sql).map_err(|e| fail(e.into()))?;
        let schema = Arc::new(df.schema().as_arrow().clone());
        // Small results stay in memory: a scratch file costs milliseconds to write and to
        // register, and the stage materializes dozens of tables (on the embedded data they
        // were a tenth of `protospread run`). The first batch past the threshold sends
        // everything to the file.
        let mut held: Vec<RecordBatch> = Vec::new();
        let mut held_bytes = 0;
        let mut writer = None;
        for b in self.engine.stream(df).map_err(|e| fail(e.into()))? {
            let b = b.map_err(|e| fail(e.into()))?;
            if let Some((_, w)) = writer.as_mut() {
                let w: &mut parquet::arrow::ArrowWriter<fs_err::File> = w;
                w.write(&b).map_err(|e| fail(e.into()))?;
                continue;
            }
            held_bytes += b.get_array_memory_size();
            held.push(b);
            if held_bytes <= MATERIALIZE_IN_MEMORY {
                continue;
            }
            let (file, mut w) = self.scratch_file(name, &schema).map_err(fail)?;
            for b in held.drain(..) {
                w.write(&b).map_err(|e| fail(e.into()))?;
            }
            writer = Some((file, w));
        }
        // The batches' own schema: the plan's logical one may name other string types.
        let schema = held.first().map_or(schema, |b| b.schema());
        let Some((file, w)) = writer else {
            let registered = if order.is_empty() {
                self.engine.register_batches(name, schema, held)
            } else {
                self.engine
                    .register_sorted_batches(name, schema, held, order)
            };
            return registered.map_err(|e| fail(e.into()));
        };
        w.close().map_err(|e| fail(e.into()))?;
        let file = file
            .to_str()
            .ok_or_else(|| fail("scratch path is not UTF-8".into()))?;
        self.engine
            .register_sorted_parquet(name, file, order)
            .map_err(|e| fail(e.into()))
    }

    /// Register as table `name` `function` of each group of `sql`'s rows
    /// ([`crate::groups::per_group`]: the key is `sql`'s first `keys` columns).
    fn per_group(
        &self,
        name: &str,
        sql: Sql,
        keys: usize,
        function: crate::groups::GroupFunction,
        path: &Path,
    ) -> Result<(), AggregateError> {
        let fail = |e: Cause| AggregateError::engine(path, name, e);
        let df = self.frame(sql).map_err(|e| fail(e.into()))?;
        let schema = Arc::new(df.schema().as_arrow().clone());
        let pool = Arc::clone(&self.engine.context().runtime_env().memory_pool);
        let batches = self.engine.stream(df).map_err(|e| fail(e.into()))?;
        let table =
            crate::groups::per_group(batches, &schema, keys, function, &pool).map_err(fail)?;
        self.engine
            .register_batches(name, table.schema(), vec![table])
            .map_err(|e| fail(e.into()))
    }

    /// Register `headline` (source, arm): the arm each source's verdict uses. An input whose
    /// `headline_arm` names an arm it does not have is an error, also when the input has no
    /// rows at all.
    fn headline(&self, p: &Params) -> Result<(), AggregateError> {
        let path = &self.files.scores;
        let mut arms: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for b in self.sql(plan::SOURCE_ARMS, path)? {
            for r in 0..b.num_rows() {
                let v = |c: usize| {
                    array_value_to_string(b.column(c), r)
                        .map_err(|e| AggregateError::engine(path, "source arms", e))
                };
                arms.entry(v(0)?).or_default().push(v(1)?);
            }
        }
        for input in p.input_arms.keys() {
            arms.entry(input.clone()).or_default();
        }
        let (mut sources, mut chosen) = (Vec::new(), Vec::new());
        for (source, a) in &arms {
            chosen.push(headline_arm(p, source, a)?.to_string());
            sources.push(source.clone());
        }
        let schema = Arc::new(arrow::datatypes::Schema::new(vec![
            arrow::datatypes::Field::new("source", arrow::datatypes::DataType::Utf8, false),
            arrow::datatypes::Field::new("arm", arrow::datatypes::DataType::Utf8, false),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(arrow::array::StringArray::from(sources)),
                Arc::new(arrow::array::StringArray::from(chosen)),
            ],
        )
        .map_err(|e| AggregateError::engine(path, "headline", e))?;
        self.engine
            .register_batches("headline", schema, vec![batch])
            .map_err(|e| AggregateError::engine(path, "headline", e))
    }

    /// Create view `name` of `sql`, its bound values in it.
    fn view(&self, name: &str, sql: impl Into<Sql>) -> Result<(), AggregateError> {
        let Sql { text, params } = sql.into();
        let create = Sql {
            text: format!("CREATE VIEW {name} AS {text}"),
            params,
        };
        self.sql(create, &self.files.scores).map(|_| ())
    }

    fn tables(&self, p: &Params, emit: Emit<'_>) -> Result<(), AggregateError> {
        let f = self.files;
        for (name, path) in [
            ("scores", &f.scores),
            ("norms", &f.norms),
            ("reply_rules", &f.rules),
            ("scores_by_rule", &f.by_rule),
        ] {
            let p = path
                .to_str()
                .ok_or_else(|| input_err(path, "path is not UTF-8"))?;
            self.engine
                .register_parquet(name, p)
                .map_err(|e| AggregateError::engine(path, "", e))?;
        }
        // The checks of the scale scores (both files) read nothing the request tables make,
        // so a second session runs them while this one builds the request tables and checks
        // the request counts (each is a few short plans, planned on one thread). An error is
        // the one the stage meets first in this order: the scale scores', the request
        // counts', the scale scores by rule's.
        let checker = Run::new(self.fork_engine()?, self.files)?;
        let (checked, prepared) = std::thread::scope(|scope| {
            let checked = scope.spawn(move || {
                let scores = checker.check_scores();
                let jobs = scores.is_ok().then(|| checker.side_jobs(p));
                (scores, jobs)
            });
            let prepared = self.request_tables_checked(p);
            let checked = checked
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (checked, prepared)
        });
        let (scores, jobs) = checked;
        scores?;
        prepared?;
        let jobs = jobs.expect("the scale scores passed their checks")?;
        // The side-by-side combinations (rule x protocol set) need only what is registered
        // now, so a second session on the same pool computes all but the first of them here,
        // in one set of plans, on another thread, while this one computes the main tables and
        // then the first combination (strict x primary), which reuses the main tables' cells.
        // (Planning, single-threaded, is most of their time on small studies: on the embedded
        // data the combinations were half of the stage, run after the main tables.) Rows go out
        // in combination order, and an error is the one the stage meets first in that order:
        // the main tables', then the first combination's, then the others'.
        let mut jobs = jobs.into_iter();
        let first = plan::Cut {
            branches: jobs.next().into_iter().collect(),
        };
        let rest = plan::Cut {
            branches: jobs.collect(),
        };
        let fork = Run::new(self.fork_engine()?, self.files)?;
        let a = &p.aggregate;
        let rest = &rest;
        let by_rule = &f.by_rule;
        let (mine, theirs) = std::thread::scope(|scope| {
            // The other combinations' rows go to scratch files, read back after the first
            // combination's: a table is handed out in combination order, and never whole.
            let theirs = scope.spawn(move || -> Result<(Run<'_>, Vec<Spooled>), AggregateError> {
                let mut spooled = Vec::new();
                if !rest.branches.is_empty() {
                    let sqls = fork.side_plans(a, rest, true)?;
                    for (contract, sql) in SIDE_TABLES.iter().zip(sqls) {
                        spooled.push(fork.spool(fork.declared(contract, sql, by_rule)?, by_rule)?);
                    }
                }
                Ok((fork, spooled))
            });
            let mine = self
                .main_tables(p, &first, emit)
                .and_then(|()| self.side_plans(a, &first, false));
            let theirs = theirs
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (mine, theirs)
        });
        let mine = mine?;
        // The fork's scratch folder holds its spooled rows until they are handed out.
        let (fork, theirs) = theirs?;
        let mut theirs = theirs.into_iter();
        for (contract, sql) in SIDE_TABLES.iter().zip(mine) {
            let mut rows = self.declared(contract, sql, by_rule)?;
            if let Some(more) = theirs.next() {
                let more = more.rows()?;
                rows.batches = Box::new(rows.batches.chain(more.batches));
            }
            emit(rows)?;
        }
        drop(fork);
        Ok(())
    }

    /// A second session of this one's engine, with every table registered so far.
    fn fork_engine(&self) -> Result<Engine, AggregateError> {
        self.engine
            .fork()
            .map_err(|e| AggregateError::engine(&self.files.scores, "", e))
    }

    /// The request views (`req`, `adm`), the request counts' checks, `headline` and `norms_n`.
    fn request_tables_checked(&self, p: &Params) -> Result<(), AggregateError> {
        self.materialize("req", plan::request_view(), &self.files.rules)?;
        self.materialize("adm", plan::administrations_view(), &self.files.scores)?;
        self.check_requests()?;
        self.headline(p)?;
        self.view(
            "norms_n",
            "SELECT test, dimension, CAST(mean AS DOUBLE) AS mean, CAST(sd AS DOUBLE) AS sd FROM norms",
        )
    }

    /// The main tables (all but the side-by-side ones), each handed to `emit` when computed.
    /// `study` is the study's own combination (strict x primary: `scores` and
    /// `protocol_conditions`).
    fn main_tables(
        &self,
        p: &Params,
        study: &plan::Cut,
        emit: Emit<'_>,
    ) -> Result<(), AggregateError> {
        let f = self.files;
        let a = &p.aggregate;
        // `cells` goes to a scratch file that the group tables read, and out as a table once:
        // at 10^8 answers it is the largest table, and held in memory for the other plans it
        // sat outside the engine's pool for the rest of the stage.
        let tests = !p.without_inference;
        self.cells(a, study, tests, &f.scores)?;
        // The view's columns are the contract's, its rerun columns those of the configured
        // pairs (`plan::cells`), which need not be the contract's default ones.
        emit(self.table(
            CELLS.name,
            if tests {
                "SELECT * EXCLUDE (inf_v) FROM cells ORDER BY source, model, test, dimension"
            } else {
                "SELECT * FROM cells ORDER BY source, model, test, dimension"
            },
            &f.scores,
        )?)?;
        if !tests {
            return self.tables_of_cells(a, study, emit);
        }
        // The inference tables need only `cells`, its views and `headline`, and their
        // functions run on one thread each: a second session computes them on another thread
        // while this one computes the other tables, which leave a core idle too. They go out
        // after the others; an error of the others comes first.
        let fork = Run::new(self.fork_engine()?, f)?;
        std::thread::scope(|scope| {
            let inference = scope.spawn(move || {
                let tables = fork.inference_tables(a);
                (fork, tables)
            });
            let others = self.tables_of_cells(a, study, emit);
            // The fork's scratch folder holds the spooled tables until they are handed out.
            let (fork, inference) = inference
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            others?;
            for table in inference? {
                emit(table.rows()?)?;
            }
            drop(fork);
            Ok(())
        })
    }

    /// The main tables after `cells`: `dropped_cells`, the group and request tables,
    /// `reply_rules` and `verdict`.
    fn tables_of_cells(
        &self,
        a: &AggregateSection,
        study: &plan::Cut,
        emit: Emit<'_>,
    ) -> Result<(), AggregateError> {
        let f = self.files;
        emit(self.declared(
            &DROPPED_CELLS,
            format!(
                "SELECT {} FROM cells WHERE NOT kept ORDER BY source, model, test, dimension",
                DROPPED_CELLS.projection(&[("reason", "drop_reason")])
            ),
            &f.scores,
        )?)?;
        for (contract, sql) in plan::group_tables(a) {
            emit(self.declared(contract, sql, &f.scores)?)?;
        }
        for (contract, sql) in plan::request_tables() {
            emit(self.declared(contract, sql, &f.rules)?)?;
        }
        // The score stage's readable replies per reply rule, passed through (strict first).
        emit(self.declared(
            &READABLE_REPLIES,
            format!(
                "SELECT {} FROM reply_rules \
                 ORDER BY source, model, arm, condition, mode, rule <> 'strict', rule, label",
                READABLE_REPLIES.projection(&[])
            ),
            &f.rules,
        )?)?;
        self.materialize(
            "verdict_w",
            plan::verdict_summary(a, study, "req", "adm", false),
            &f.scores,
        )?;
        emit(self.declared(&VERDICT, plan::verdict(a, "verdict_w", None), &f.scores)?)
    }

    /// The inference tables over the study's cells (the session's per-cell views and `cells`
    /// are strict x primary here), each in the columns of its contract, in their order.
    fn inference_tables(&self, a: &AggregateSection) -> Result<Vec<Spooled>, AggregateError> {
        let path = &self.files.scores;
        let inf = plan::inference(a);
        for (name, step) in inf.intermediate {
            match step {
                plan::Step::Plan(sql) => self.materialize(name, sql, path)?,
                plan::Step::Groups {
                    sql,
                    keys,
                    function,
                } => self.per_group(name, sql, keys, function, path)?,
            }
        }
        let mut out = Vec::with_capacity(inf.tables.len());
        for (name, sql) in inf.tables {
            let contract = INFERENCE_TABLES
                .iter()
                .find(|c| c.name == name)
                .expect("every inference table has a contract");
            out.push(self.spool(self.declared(contract, sql, path)?, path)?);
        }
        Ok(out)
    }

    /// The per-cell views of `cut` and its table `cells`, sorted by its key; with `tests`,
    /// `cm` carries the inference tables' per-cell column.
    fn cells(
        &self,
        a: &AggregateSection,
        cut: &plan::Cut,
        tests: bool,
        path: &Path,
    ) -> Result<(), AggregateError> {
        if tests {
            self.engine
                .context()
                .register_udf(crate::functions::cell_udf(&cut.branches[0].protocol));
        }
        for (name, sql) in plan::views(a, cut, tests) {
            if MATERIALIZED_VIEWS.contains(&name) {
                self.materialize(name, sql, path)?;
            } else {
                self.view(name, sql)?;
            }
        }
        // The rows are sorted by a second plan, after the first has released its groupings'
        // memory: in one plan the sort competed with them for the pool.
        self.materialize("cells_unsorted", plan::cells(a, cut, tests), path)?;
        let key = cut.cell_key();
        let order: Vec<String> = key
            .iter()
            .map(|(c, nulls_first)| {
                if *nulls_first {
                    format!("{c} NULLS FIRST")
                } else {
                    c.to_string()
                }
            })
            .collect();
        let sorted = format!("SELECT * FROM cells_unsorted ORDER BY {}", order.join(", "));
        self.materialize_sorted("cells", sorted.into(), path, &key)
    }

    /// The combinations of the side-by-side tables (`cells_by_rule`,
    /// `protocol_vs_sampling_by_rule`, `verdict_by_rule`), after checking
    /// `scale_scores_by_rule.parquet` (table `scores_by_rule`): every reply rule of that file
    /// (strict first) x protocol set (primary = `protocol_conditions`, then
    /// `secondary_protocol_conditions` unless empty), numbered in that order; the first,
    /// strict x primary, is the study's own (`scores`, which the main tables use too).
    /// [`Run::side_tables`] runs them: the plans of `cells`, of the headline arm's group and of
    /// `verdict`, each row labelled with its `rule` and `protocol_set`.
    fn side_jobs(&self, p: &Params) -> Result<Vec<plan::Branch>, AggregateError> {
        let f = self.files;
        let path = &f.by_rule;
        if !crate::unique::unique_in_runs(
            path,
            &SCALE_SCORES_BY_RULE.sort_key[..2],
            &SCALE_SCORES_BY_RULE.sort_key[2..],
        )? {
            self.refuse(
                "SELECT rule, source, model, condition, CAST(sample AS BIGINT) AS sample, test, dimension \
                 FROM scores_by_rule GROUP BY rule, source, model, condition, sample, test, dimension \
                 HAVING COUNT(*) > 1 ORDER BY rule, source, model, condition, sample, test, dimension LIMIT 1",
                path,
                |r| format!("duplicate row for {}", describe(r, &[])),
            )?;
        }
        self.refuse(
            "SELECT rule, source, model, condition, CAST(sample AS BIGINT) AS sample, test, dimension, score \
             FROM scores_by_rule WHERE rule IS NULL OR (score IS NOT NULL \
               AND NOT (score >= 0 AND score <= 100 AND score = trunc(score))) \
             ORDER BY rule, source, model, condition, sample, test, dimension LIMIT 1",
            path,
            |r| {
                format!(
                    "rule is null or score {} is not an integer from 0 to 100 in the row {}",
                    get(r, "score"),
                    describe(r, &["score"])
                )
            },
        )?;
        // The strict rule's rows are `scale_scores` itself (the score stage writes both from
        // one stream), so its combination with the primary protocol set reuses the tables
        // already computed from `scores`: at 10^8 answers those groupings were a third of the
        // stage. Files of two different score runs are refused, not mixed.
        let count = |sql: Sql| -> Result<i64, AggregateError> {
            let b = self.sql(sql, path)?;
            Ok(b.first()
                .filter(|b| b.num_rows() > 0)
                .map(|b| {
                    arrow::array::AsArray::as_primitive::<arrow::datatypes::Int64Type>(b.column(0))
                        .value(0)
                })
                .unwrap_or(0))
        };
        let q = Binds::default();
        let strict = format!(
            "SELECT count(*) FROM scores_by_rule WHERE rule = {}",
            q.bind(plan::STRICT)
        );
        let strict_rows = count(q.sql(strict))?;
        let score_rows = count("SELECT count(*) FROM scores".into())?;
        if strict_rows != score_rows {
            return Err(input_err(
                path,
                format!(
                    "{strict_rows} rows of rule strict, but {} has {score_rows} rows: the two \
                     files are not from one run of the score stage",
                    f.scores.display()
                ),
            ));
        }
        // Strict (the study's rule) first, then the others by name; strict also when the file
        // has no row, so that every table has its columns.
        let mut rules = vec![plan::STRICT.to_string()];
        for b in self.sql(
            "SELECT DISTINCT rule FROM scores_by_rule ORDER BY rule",
            path,
        )? {
            for r in 0..b.num_rows() {
                let v = array_value_to_string(b.column(0), r)
                    .map_err(|e| AggregateError::engine(path, "rules", e))?;
                if !rules.contains(&v) {
                    rules.push(v);
                }
            }
        }
        let a = &p.aggregate;
        let mut sets = vec![(PRIMARY, a.protocol_conditions.clone())];
        if !a.secondary_protocol_conditions.is_empty() {
            sets.push((SECONDARY, a.secondary_protocol_conditions.clone()));
        }
        let mut combos = Vec::new();
        for rule in rules {
            for (set, conds) in &sets {
                combos.push(plan::Branch {
                    combo: combos.len(),
                    // The strict x primary combination's scale scores are `scores` itself.
                    by_rule: !combos.is_empty(),
                    rule: rule.clone(),
                    set,
                    protocol: conds.clone(),
                });
            }
        }
        Ok(combos)
    }

    /// The plans of the side-by-side tables ([`SIDE_TABLES`], in that order) for the
    /// combinations of `cut`, their rows in its order, with the views they read made. With
    /// `fresh` false, `cut` is the study's one combination (strict x primary) and the
    /// session's per-cell views and `cells` are already its own (the main tables').
    fn side_plans(
        &self,
        a: &AggregateSection,
        cut: &plan::Cut,
        fresh: bool,
    ) -> Result<[Sql; 3], AggregateError> {
        let path = &self.files.by_rule;
        let q = Binds::default();
        let adm = if fresh {
            self.cells(a, cut, false, path)?;
            self.materialize("side_adm", plan::side_administrations(cut), path)?;
            "side_adm".to_string()
        } else {
            plan::used_administrations(a, cut, &q)
        };
        let requests = plan::side_requests(a, cut, &q);
        self.materialize(
            "side_verdict_w",
            q.sql(plan::verdict_summary(a, cut, &requests, &adm, true)),
            path,
        )?;
        Ok([
            plan::cells_side(cut),
            plan::headline_group(cut),
            plan::verdict(a, "side_verdict_w", Some(cut)),
        ])
    }
}

/// A table written to a scratch file by [`Run::spool`], to be handed out later.
struct Spooled {
    name: String,
    schema: SchemaRef,
    file: PathBuf,
    /// The stage's input the table is computed from, named in errors.
    input: PathBuf,
}

impl Spooled {
    /// The table's rows, read back in the order they were written.
    fn rows(self) -> Result<Rows<'static>, AggregateError> {
        let what = format!("table {}", self.name);
        let (input, schema) = (self.input, self.schema);
        let f = fs_err::File::open(&self.file).map_err(protospread_core::CoreError::Fs)?;
        let reader = ParquetRecordBatchReaderBuilder::try_new(f.into_parts().0)
            .and_then(|b| b.with_batch_size(SPOOL_BATCH_ROWS).build())
            .map_err(|e| AggregateError::engine(&input, what.clone(), e))?;
        let out = schema.clone();
        let batches = reader.map(move |b| {
            b.and_then(|b| RecordBatch::try_new(out.clone(), b.columns().to_vec()))
                .map_err(|e| AggregateError::engine(&input, what.clone(), e))
        });
        Ok(Rows {
            name: self.name,
            schema,
            batches: Box::new(batches),
        })
    }
}

/// Rows per batch read back from a [`Spooled`] table.
const SPOOL_BATCH_ROWS: usize = 8192;

/// The contracts of the tables of [`plan::inference`].
const INFERENCE_TABLES: [&TableContract; 5] = [
    &protospread_core::CELL_TESTS,
    &protospread_core::CELL_TESTS_BY_GROUP,
    &protospread_core::HEADLINE_INTERVAL,
    &protospread_core::ERROR_BARS,
    &protospread_core::RANKING,
];

/// The side-by-side tables, in the order of [`Run::side_plans`].
const SIDE_TABLES: [&TableContract; 3] = [
    &CELLS_BY_RULE,
    &PROTOCOL_VS_SAMPLING_BY_RULE,
    &VERDICT_BY_RULE,
];

/// Where [`compute`] hands each table as it is computed, so that the caller can write its rows
/// as they come instead of holding any table whole.
pub(crate) type Emit<'a> = &'a mut dyn FnMut(Rows<'_>) -> Result<(), AggregateError>;

/// Largest intermediate table (Arrow bytes) that [`Run::materialize`] keeps in memory rather
/// than in a scratch file.
const MATERIALIZE_IN_MEMORY: usize = 16 << 20;

/// The views of `plan::views` computed once and held (the others are views): `cm`, read
/// several times, and `models` and `scales` (a row per model, a row per scale of a source),
/// materialized so that the planner knows their sizes exactly and holds them, not the
/// per-cell rows they are joined with, in a hash join's memory (at 10^8 answers the other way
/// round took 666 MB that cannot spill).
const MATERIALIZED_VIEWS: [&str; 3] = ["cm", "models", "scales"];

/// Compute every table from the score stage's folder in a session of `engine` (its
/// `target_partitions` is replaced by `params.aggregate.target_partitions`).
pub(crate) fn compute(
    score_dir: &Path,
    params: &Params,
    engine: &EngineOptions,
    emit: Emit<'_>,
) -> Result<(), AggregateError> {
    let files = Files {
        scores: score_dir.join(SCALE_SCORES.file_name()),
        norms: score_dir.join(NORMS.file_name()),
        rules: score_dir.join(REPLY_RULE_COUNTS.file_name()),
        by_rule: score_dir.join(SCALE_SCORES_BY_RULE.file_name()),
    };
    check_schema(&files.scores, &SCALE_SCORES)?;
    check_schema(&files.norms, &NORMS)?;
    check_schema(&files.rules, &REPLY_RULE_COUNTS)?;
    check_schema(&files.by_rule, &SCALE_SCORES_BY_RULE)?;
    let opts = EngineOptions {
        target_partitions: params.aggregate.target_partitions,
        ..engine.clone()
    };
    let engine = Engine::new(&opts)?;
    crate::functions::register(engine.context());
    let run = Run::new(engine, &files)?;
    // Let DataFusion split even a small file across partitions, so that the
    // partition-independence test exercises real parallel scans and aggregations.
    run.sql(
        "SET datafusion.optimizer.repartition_file_min_size = 0",
        score_dir,
    )?;
    run.tables(params, emit)
}
