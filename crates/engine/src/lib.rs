//! protospread-engine: the one DataFusion session that the score and aggregate stages run their
//! plans in.
//!
//! Every session has a fair spill pool of three quarters of `memory_limit` (the rest is for
//! what the pool does not count: [`POOL_QUARTERS`]) and a disk manager, so sorts,
//! joins and grouped aggregations spill to disk instead of growing past the limit (a study of
//! 10^8 answers runs in about 1 GiB). Plans built on it must not let float results depend on
//! the partition count: aggregate integers, convert once at the end.

mod functions;
mod memory;
mod order;
mod sql;
mod texts;

pub use functions::{
    array_udf, groups_udaf, plain_udf, Accumulate, ArrayFunction, ByAddress, Groups,
    GroupsFunction, Rows,
};
pub use memory::is_out_of_memory;
pub use order::{key_greater, KeyOrder};
pub use sql::{Binds, Sql};
pub use texts::Texts;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::{DataType, Schema, SchemaRef};
use datafusion::common::{ParamValues, ScalarValue};
use datafusion::datasource::MemTable;
use datafusion::error::DataFusionError;
use datafusion::execution::disk_manager::{DiskManagerBuilder, DiskManagerMode};
use datafusion::execution::memory_pool::{FairSpillPool, TrackConsumersPool};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::prelude::{DataFrame, ParquetReadOptions, SessionConfig, SessionContext};
use futures::StreamExt;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::Arc;

/// Smallest memory limit accepted: below this DataFusion cannot hold one batch per operator.
pub const MIN_MEMORY_LIMIT: u64 = 32 << 20;
/// Largest partition count accepted: every partition holds its own buffers of each operator, so
/// the engine's memory grows with the count past its pool (at 64, and at times 32, the embedded study fails to
/// sort in the default pool); 16 is more than the cores of any machine we run on.
pub const MAX_PARTITIONS: usize = 16;

/// Spill files one sort partition merges in one pass (see `session`).
pub const SPILL_MERGE_FAN_IN: usize = 4;

/// The memory pool's share of [`EngineOptions::memory_limit`], in quarters.
///
/// The pool counts what DataFusion's operators reserve (sort buffers, hash tables), not all a
/// stage holds: the batches moving between operators, Parquet readers and writers, the
/// program itself. At 10^7 answers the score stage's peak RSS was about 180 MB above a 256 MiB
/// pool and 100 MB above a 1 GiB one, so the pool gets three quarters of the limit and the
/// rest is left for those.
pub const POOL_QUARTERS: u64 = 3;

/// How a session is set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineOptions {
    /// Memory a stage's engine may use: its pool holds [`POOL_QUARTERS`] quarters of it
    /// before operators must spill.
    pub memory_limit: u64,
    /// DataFusion target partitions; 0 means one per core. Results never depend on it.
    pub target_partitions: usize,
    /// Folder for spill files; `None` uses the system's temporary folder.
    pub spill_dir: Option<PathBuf>,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            memory_limit: 1 << 30,
            target_partitions: 0,
            spill_dir: None,
        }
    }
}

/// Errors of setting up or running the engine.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// An option is out of range; the message says which and why.
    #[error("engine: {0}")]
    Options(String),
    /// DataFusion refused to set up the session or the runtime.
    #[error("engine: {0}")]
    DataFusion(#[from] datafusion::error::DataFusionError),
    /// The async runtime could not be started.
    #[error("engine: starting the runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

impl EngineOptions {
    /// Check the options before any allocation depends on them.
    pub fn validate(&self) -> Result<(), EngineError> {
        if self.memory_limit < MIN_MEMORY_LIMIT {
            return Err(EngineError::Options(format!(
                "memory limit {} bytes is below the minimum of {} bytes (32 MiB)",
                self.memory_limit, MIN_MEMORY_LIMIT
            )));
        }
        if usize::try_from(self.memory_limit).is_err() {
            return Err(EngineError::Options(format!(
                "memory limit {} bytes does not fit this machine's address space",
                self.memory_limit
            )));
        }
        if self.target_partitions > MAX_PARTITIONS {
            return Err(EngineError::Options(format!(
                "{} partitions is more than the maximum of {MAX_PARTITIONS}",
                self.target_partitions
            )));
        }
        Ok(())
    }
}

/// A session with a bounded, spilling memory pool.
fn session(opts: &EngineOptions) -> Result<SessionContext, EngineError> {
    opts.validate()?;
    let limit =
        usize::try_from(opts.memory_limit / 4 * POOL_QUARTERS).expect("checked by validate");
    // Fair spill pool: every spilling operator gets an equal share, so one large sort cannot
    // starve a join. The tracking wrapper names the largest consumers when the limit is hit.
    let pool = TrackConsumersPool::new(
        FairSpillPool::new(limit),
        NonZeroUsize::new(5).expect("5 is not zero"),
    );
    let disk = match &opts.spill_dir {
        Some(dir) => DiskManagerMode::Directories(vec![dir.clone()]),
        None => DiskManagerMode::OsTmpDirectory,
    };
    // Without a fan-in limit, a sort partition merging its spill files reserves a read buffer
    // for as many files as the pool lets it, and these merge reservations cannot spill: at 10^8
    // answers one partition's merge took 590 MB and the next partition's merge then failed for
    // want of 1.4 MB. With the limit, a partition merges at most this many files per pass
    // (writing the result back to disk when more remain), so its reservation stays a few
    // batches wide and every partition can merge at once.
    let disk = DiskManagerBuilder::default()
        .with_mode(disk)
        .with_max_spill_merge_fan_in(SPILL_MERGE_FAN_IN);
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_pool(Arc::new(pool))
        .with_disk_manager_builder(disk)
        .build_arc()?;
    let mut config = SessionConfig::new();
    // One pass of the logical optimizer instead of three: the planner is built without
    // optimizations (Cargo.toml), and protospread plans many small queries, so the passes
    // were a quarter of `protospread run` on the embedded data (2.0 s -> 1.65 s measured).
    // The rewrites are the same rules, applied once; the results cannot differ.
    config.options_mut().optimizer.max_passes = 1;
    if opts.target_partitions > 0 {
        config = config.with_target_partitions(opts.target_partitions);
    }
    Ok(SessionContext::new_with_config_rt(config, runtime))
}

/// A DataFusion session and the runtime its plans run on, behind a synchronous API.
///
/// Every asynchronous DataFusion call (planning SQL, registering files, collecting and
/// streaming results) is awaited inside this crate. The state machine of an `async fn` is
/// compiled in the crate that polls it, so a stage crate that awaited `SessionContext::sql`
/// itself compiled DataFusion's whole SQL planner again (about 150 s of release build per
/// crate, for each of four crates and again for their unit tests). Through this type it is
/// compiled once, here.
pub struct Engine {
    ctx: SessionContext,
    rt: tokio::runtime::Runtime,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("session", &self.ctx.session_id())
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// A session with `opts`'s memory pool, spill folder and partitions, and a multi-threaded
    /// runtime for its plans.
    pub fn new(opts: &EngineOptions) -> Result<Engine, EngineError> {
        let ctx = session(opts)?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(EngineError::Runtime)?;
        Ok(Engine { ctx, rt })
    }

    /// A second session on the same memory pool, spill folder and settings, with this one's
    /// functions and every table registered in it now: for independent plans that another
    /// thread plans and runs at the same time (planning is single-threaded). The pool is
    /// shared, so both together stay within the memory limit.
    pub fn fork(&self) -> Result<Engine, EngineError> {
        let state = self.ctx.state();
        let ctx = SessionContext::new_with_config_rt(
            state.config().clone(),
            Arc::clone(state.runtime_env()),
        );
        for f in state.scalar_functions().values() {
            ctx.register_udf(f.as_ref().clone());
        }
        for f in state.aggregate_functions().values() {
            ctx.register_udaf(f.as_ref().clone());
        }
        if let Some(schema) = self
            .ctx
            .catalog("datafusion")
            .and_then(|c| c.schema("public"))
        {
            for name in schema.table_names() {
                if let Some(table) = self.rt.block_on(schema.table(&name))? {
                    ctx.register_table(name.as_str(), table)?;
                }
            }
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(EngineError::Runtime)?;
        Ok(Engine { ctx, rt })
    }

    /// The session, for what needs no waiting: registering functions and in-memory tables.
    pub fn context(&self) -> &SessionContext {
        &self.ctx
    }

    /// Register the Parquet file (or folder) at `path` as table `name`.
    pub fn register_parquet(&self, name: &str, path: &str) -> Result<(), DataFusionError> {
        self.register_parquet_ordered(name, path, &[])
    }

    /// Register the Parquet file at `path`, whose rows the writer sorted by `order` (column
    /// name, nulls first), as table `name`. The planner then relies on that order: grouping by
    /// a prefix of it streams instead of building a hash table, and sorting by it is free. Only
    /// for files that protospread sorted itself (the fetch stage's stored answers).
    pub fn register_sorted_parquet(
        &self,
        name: &str,
        path: &str,
        order: &[(&str, bool)],
    ) -> Result<(), DataFusionError> {
        self.register_parquet_ordered(name, path, order)
    }

    /// Both registrations: an empty `order` declares none.
    fn register_parquet_ordered(
        &self,
        name: &str,
        path: &str,
        order: &[(&str, bool)],
    ) -> Result<(), DataFusionError> {
        let file_sort_order = if order.is_empty() {
            Vec::new()
        } else {
            vec![order
                .iter()
                .map(|(c, nulls_first)| datafusion::prelude::col(*c).sort(true, *nulls_first))
                .collect()]
        };
        let options = ParquetReadOptions {
            file_sort_order,
            ..Default::default()
        };
        self.rt
            .block_on(self.ctx.register_parquet(name, path, options))
    }

    /// Register `batches` (all of `schema`) as the in-memory table `name`.
    pub fn register_batches(
        &self,
        name: &str,
        schema: SchemaRef,
        batches: Vec<RecordBatch>,
    ) -> Result<(), DataFusionError> {
        let table = MemTable::try_new(schema, vec![batches])?;
        self.ctx.register_table(name, Arc::new(table))?;
        Ok(())
    }

    /// Register `batches` (all of `schema`) as the in-memory table `name`, sorted here by
    /// `order` (column name, nulls first; ascending) and declared sorted, as
    /// [`Engine::register_sorted_parquet`] declares a file: for small tables that must take
    /// the same plans as a sorted file.
    pub fn register_sorted_batches(
        &self,
        name: &str,
        schema: SchemaRef,
        batches: Vec<RecordBatch>,
        order: &[(&str, bool)],
    ) -> Result<(), DataFusionError> {
        use datafusion::arrow::compute::{
            concat_batches, lexsort_to_indices, take_record_batch, SortColumn, SortOptions,
        };
        let batch = concat_batches(&schema, &batches)?;
        let columns = order
            .iter()
            .map(|(c, nulls_first)| {
                Ok(SortColumn {
                    values: batch
                        .column_by_name(c)
                        .cloned()
                        .ok_or_else(|| DataFusionError::Plan(format!("no column {c} in {name}")))?,
                    options: Some(SortOptions {
                        descending: false,
                        nulls_first: *nulls_first,
                    }),
                })
            })
            .collect::<Result<Vec<_>, DataFusionError>>()?;
        let sorted = take_record_batch(&batch, &lexsort_to_indices(&columns, None)?)?;
        let table = MemTable::try_new(schema, vec![vec![sorted]])?.with_sort_order(vec![order
            .iter()
            .map(|(c, nulls_first)| datafusion::prelude::col(*c).sort(true, *nulls_first))
            .collect()]);
        self.ctx.register_table(name, Arc::new(table))?;
        Ok(())
    }

    /// Plan `sql` (statements such as `CREATE VIEW` and `SET` take effect here).
    pub fn sql(&self, sql: &str) -> Result<DataFrame, DataFusionError> {
        self.rt.block_on(self.ctx.sql(sql))
    }

    /// Plan `sql` with `params` bound to its placeholders: `params[0]` is `$1`, `params[1]`
    /// is `$2`, and so on. Values that come from outside the program (names in the
    /// configuration or the data) enter a plan this way, as values, never as SQL text, so no
    /// name can change what a statement does. Each placeholder becomes a literal of its value
    /// before the plan runs (also in a `CREATE VIEW`, which takes effect here), so the plan is
    /// the one the same statement with literals would give. A placeholder whose type the
    /// statement does not imply takes its value's type.
    pub fn sql_with_params(
        &self,
        sql: &str,
        params: Vec<ScalarValue>,
    ) -> Result<DataFrame, DataFusionError> {
        self.rt.block_on(async {
            // `SessionContext::sql` would run a `CREATE VIEW` before the values are bound.
            let plan = self.ctx.state().create_logical_plan(sql).await?;
            let plan = plan.with_param_values(ParamValues::from(params))?;
            self.ctx.execute_logical_plan(plan).await
        })
    }

    /// The plan of `sql`, its values bound ([`Engine::sql_with_params`]; plain
    /// [`Engine::sql`] when it has none).
    pub fn bound(&self, sql: &Sql) -> Result<DataFrame, DataFusionError> {
        if sql.params.is_empty() {
            return self.sql(&sql.text);
        }
        let params = sql
            .params
            .iter()
            .map(|v| ScalarValue::Utf8(Some(v.clone())))
            .collect();
        self.sql_with_params(&sql.text, params)
    }

    /// Run a plan and return all its batches.
    pub fn collect(&self, df: DataFrame) -> Result<Vec<RecordBatch>, DataFusionError> {
        self.rt.block_on(df.collect())
    }

    /// Plan and run `sql`, returning all its batches: for small results.
    pub fn query(&self, sql: &str) -> Result<Vec<RecordBatch>, DataFusionError> {
        self.rt
            .block_on(async { self.ctx.sql(sql).await?.collect().await })
    }

    /// The first row of `sql`'s result (a one-row batch), if it returns any row.
    pub fn first_row(&self, sql: &str) -> Result<Option<RecordBatch>, DataFusionError> {
        let mut rows = self.stream(self.sql(sql)?)?;
        for b in &mut rows {
            let b = b?;
            if b.num_rows() > 0 {
                return Ok(Some(b.slice(0, 1)));
            }
        }
        Ok(None)
    }

    /// Run a plan and hand out its rows as batches of exactly [`WRITE_BATCH_ROWS`] rows (the
    /// last one shorter), each column cast to the type `schema` gives it: what a Parquet
    /// writer must be fed for its bytes not to depend on how the plan cut its output, or on
    /// the string encodings and nullability a plan happens to produce.
    pub fn stream_for_writing(
        &self,
        df: DataFrame,
        schema: SchemaRef,
    ) -> Result<ForWriting<'_>, DataFusionError> {
        Ok(ForWriting {
            batches: self.stream(df)?,
            schema,
            chunks: Rechunk::new(WRITE_BATCH_ROWS),
            ready: std::collections::VecDeque::new(),
            finished: false,
            keep_views: false,
        })
    }

    /// Run a plan and hand out its batches one at a time, as they are produced: memory stays
    /// bounded by the plan's operators, not by the size of the result.
    pub fn stream(&self, df: DataFrame) -> Result<Batches<'_>, DataFusionError> {
        let stream = self.rt.block_on(df.execute_stream())?;
        Ok(Batches {
            rt: &self.rt,
            stream,
        })
    }
}

/// The batches of a running plan, in the order the plan produces them ([`Engine::stream`]).
pub struct Batches<'a> {
    rt: &'a tokio::runtime::Runtime,
    stream: SendableRecordBatchStream,
}

impl std::fmt::Debug for Batches<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batches")
            .field("schema", &self.stream.schema())
            .finish_non_exhaustive()
    }
}

impl Iterator for Batches<'_> {
    type Item = Result<RecordBatch, DataFusionError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.rt.block_on(self.stream.next())
    }
}

/// The batches of [`Engine::stream_for_writing`].
#[derive(Debug)]
pub struct ForWriting<'a> {
    batches: Batches<'a>,
    schema: SchemaRef,
    chunks: Rechunk,
    ready: std::collections::VecDeque<RecordBatch>,
    finished: bool,
    keep_views: bool,
}

impl ForWriting<'_> {
    /// Hand out a plan's string views as they are where the schema has plain UTF-8 (the
    /// batches' schema says `Utf8View` there), instead of copying every text into a plain
    /// array: for a Parquet writer, which encodes both to the same bytes. Nullability and
    /// every other type are conformed as before.
    pub fn keeping_string_views(mut self) -> Self {
        self.keep_views = true;
        self
    }

    fn conform(&self, b: &RecordBatch) -> Result<RecordBatch, DataFusionError> {
        let mut fields = Vec::with_capacity(b.num_columns());
        let mut cols = Vec::with_capacity(b.num_columns());
        let mut viewed = false;
        for (f, c) in self.schema.fields().iter().zip(b.columns()) {
            if self.keep_views
                && f.data_type() == &DataType::Utf8
                && c.data_type() == &DataType::Utf8View
            {
                viewed = true;
                fields.push(Arc::new(
                    f.as_ref().clone().with_data_type(DataType::Utf8View),
                ));
                cols.push(c.clone());
            } else {
                fields.push(f.clone());
                cols.push(datafusion::arrow::compute::cast(c, f.data_type())?);
            }
        }
        let schema = if viewed {
            Arc::new(Schema::new_with_metadata(
                fields,
                self.schema.metadata().clone(),
            ))
        } else {
            self.schema.clone()
        };
        Ok(RecordBatch::try_new(schema, cols)?)
    }
}

impl Iterator for ForWriting<'_> {
    type Item = Result<RecordBatch, DataFusionError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(b) = self.ready.pop_front() {
                return Some(Ok(b));
            }
            if self.finished {
                return None;
            }
            let step = match self.batches.next() {
                Some(Ok(b)) => self.conform(&b).and_then(|b| Ok(self.chunks.push(b)?)),
                Some(Err(e)) => Err(e),
                None => {
                    self.finished = true;
                    let rest = std::mem::replace(&mut self.chunks, Rechunk::new(WRITE_BATCH_ROWS));
                    rest.finish()
                        .map(|b| b.into_iter().collect())
                        .map_err(Into::into)
                }
            };
            match step {
                Ok(out) => self.ready.extend(out),
                Err(e) => {
                    self.finished = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

/// Rows per batch handed to a writer by [`Rechunk`]: a multiple of the Parquet writer's
/// mini-batch (1024), so that the pages come out as if the table were written in one batch.
pub const WRITE_BATCH_ROWS: usize = 8192;

/// Re-cuts a plan's output into batches of exactly `rows` rows (the last one shorter): how a
/// plan cuts its output depends on partitions and timing, and a Parquet writer's pages depend
/// on the batches it is given, so a writer must see fixed batches for the bytes to be fixed.
#[derive(Debug)]
pub struct Rechunk {
    rows: usize,
    pending: Vec<datafusion::arrow::array::RecordBatch>,
    pending_rows: usize,
}

impl Rechunk {
    /// A re-cutter to batches of `rows` rows (at least 1).
    pub fn new(rows: usize) -> Self {
        Rechunk {
            rows: rows.max(1),
            pending: Vec::new(),
            pending_rows: 0,
        }
    }

    /// Take `batch`; return the full batches now ready, in order.
    pub fn push(
        &mut self,
        batch: datafusion::arrow::array::RecordBatch,
    ) -> Result<Vec<datafusion::arrow::array::RecordBatch>, datafusion::arrow::error::ArrowError>
    {
        let n = batch.num_rows();
        if n == 0 {
            return Ok(Vec::new());
        }
        // Only the rows that complete a pending batch are copied; whole batches inside
        // `batch` go out as slices of it (at 10^8 answers, copying every row to re-cut it was
        // a few percent of the score stage).
        let mut out = Vec::new();
        let mut offset = 0;
        if self.pending_rows > 0 {
            let need = self.rows - self.pending_rows;
            if n < need {
                self.pending_rows += n;
                self.pending.push(batch);
                return Ok(Vec::new());
            }
            self.pending.push(batch.slice(0, need));
            out.push(datafusion::arrow::compute::concat_batches(
                &self.pending[0].schema(),
                &self.pending,
            )?);
            self.pending.clear();
            self.pending_rows = 0;
            offset = need;
        }
        while n - offset >= self.rows {
            out.push(batch.slice(offset, self.rows));
            offset += self.rows;
        }
        if offset < n {
            self.pending_rows = n - offset;
            self.pending.push(batch.slice(offset, n - offset));
        }
        Ok(out)
    }

    /// The last, shorter batch, if any rows are left.
    pub fn finish(
        self,
    ) -> Result<Option<datafusion::arrow::array::RecordBatch>, datafusion::arrow::error::ArrowError>
    {
        if self.pending.is_empty() {
            return Ok(None);
        }
        datafusion::arrow::compute::concat_batches(&self.pending[0].schema(), &self.pending)
            .map(Some)
    }
}
