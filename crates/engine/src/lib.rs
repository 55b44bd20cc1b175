//! protospread-engine: the one DataFusion session that the score and aggregate stages run their
//! plans in.
//!
//! Every session has a fair spill pool of `memory_limit` bytes and a disk manager, so sorts,
//! joins and grouped aggregations spill to disk instead of growing past the limit (a study of
//! 10^8 answers runs in about 1 GiB). Plans built on it must not let float results depend on
//! the partition count: aggregate integers, convert once at the end.

use datafusion::execution::disk_manager::{DiskManagerBuilder, DiskManagerMode};
use datafusion::execution::memory_pool::{FairSpillPool, TrackConsumersPool};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use std::future::Future;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::Arc;

/// Smallest memory limit accepted: below this DataFusion cannot hold one batch per operator.
pub const MIN_MEMORY_LIMIT: u64 = 32 << 20;
/// Largest partition count accepted; more only adds scheduling overhead on any machine we know.
pub const MAX_PARTITIONS: usize = 1024;

/// How a session is set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineOptions {
    /// Bytes the memory pool holds before operators must spill.
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
pub fn session(opts: &EngineOptions) -> Result<SessionContext, EngineError> {
    opts.validate()?;
    let limit = usize::try_from(opts.memory_limit).expect("checked by validate");
    // Fair spill pool: every spilling operator gets an equal share, so one large sort cannot
    // starve a join. The tracking wrapper names the largest consumers when the limit is hit.
    let pool = TrackConsumersPool::new(
        FairSpillPool::new(limit),
        NonZeroUsize::new(5).expect("5 is not zero"),
    );
    let disk = match &opts.spill_dir {
        Some(dir) => {
            DiskManagerBuilder::default().with_mode(DiskManagerMode::Directories(vec![dir.clone()]))
        }
        None => DiskManagerBuilder::default().with_mode(DiskManagerMode::OsTmpDirectory),
    };
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_pool(Arc::new(pool))
        .with_disk_manager_builder(disk)
        .build_arc()?;
    let mut config = SessionConfig::new();
    if opts.target_partitions > 0 {
        config = config.with_target_partitions(opts.target_partitions);
    }
    Ok(SessionContext::new_with_config_rt(config, runtime))
}

/// Run a future on a fresh multi-threaded runtime: stages are synchronous functions that
/// execute DataFusion plans inside.
pub fn block_on<F: Future>(future: F) -> Result<F::Output, EngineError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(EngineError::Runtime)?;
    Ok(rt.block_on(future))
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
        if batch.num_rows() == 0 {
            return Ok(Vec::new());
        }
        self.pending_rows += batch.num_rows();
        self.pending.push(batch);
        if self.pending_rows < self.rows {
            return Ok(Vec::new());
        }
        let all =
            datafusion::arrow::compute::concat_batches(&self.pending[0].schema(), &self.pending)?;
        self.pending.clear();
        let mut out = Vec::new();
        let mut offset = 0;
        while all.num_rows() - offset >= self.rows {
            out.push(all.slice(offset, self.rows));
            offset += self.rows;
        }
        self.pending_rows = all.num_rows() - offset;
        if self.pending_rows > 0 {
            self.pending.push(all.slice(offset, self.pending_rows));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_out_of_range_options() {
        let small = EngineOptions {
            memory_limit: 1,
            ..Default::default()
        };
        let err = |o: &EngineOptions| session(o).err().expect("refused").to_string();
        assert!(err(&small).contains("below the minimum"));
        let many = EngineOptions {
            target_partitions: usize::MAX,
            ..Default::default()
        };
        assert!(err(&many).contains("maximum"));
    }

    #[test]
    fn rechunk_cuts_fixed_batches_whatever_comes_in() {
        use datafusion::arrow::array::{Int32Array, RecordBatch};
        use datafusion::arrow::datatypes::{DataType, Field, Schema};
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int32, false)]));
        let batch = |a: i32, b: i32| {
            RecordBatch::try_new(
                schema.clone(),
                vec![Arc::new(Int32Array::from_iter_values(a..b))],
            )
            .unwrap()
        };
        for cuts in [
            vec![0, 10],
            vec![0, 3, 4, 9, 10],
            vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
        ] {
            let mut r = Rechunk::new(4);
            let mut out = Vec::new();
            for w in cuts.windows(2) {
                out.extend(r.push(batch(w[0], w[1])).unwrap());
            }
            out.extend(r.finish().unwrap());
            let sizes: Vec<usize> = out.iter().map(|b| b.num_rows()).collect();
            assert_eq!(sizes, [4, 4, 2], "cuts {cuts:?}");
            let values: Vec<i32> = out
                .iter()
                .flat_map(|b| {
                    b.column(0)
                        .as_any()
                        .downcast_ref::<Int32Array>()
                        .unwrap()
                        .values()
                        .to_vec()
                })
                .collect();
            assert_eq!(values, (0..10).collect::<Vec<_>>());
        }
    }

    #[test]
    fn runs_a_plan_within_the_pool() {
        let ctx = session(&EngineOptions {
            target_partitions: 3,
            ..Default::default()
        })
        .unwrap();
        let batches = block_on(async {
            ctx.sql("SELECT sum(v) AS s FROM (VALUES (1), (2), (3)) AS t(v)")
                .await?
                .collect()
                .await
        })
        .unwrap()
        .unwrap();
        let s = batches[0]
            .column(0)
            .as_any()
            .downcast_ref::<datafusion::arrow::array::Int64Array>()
            .unwrap()
            .value(0);
        assert_eq!(s, 6);
    }
}
