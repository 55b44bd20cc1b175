//! The Arrow tables of the parity part of the score stage (all sorted by their key columns).
//!
//! | file | columns |
//! |---|---|
//! | `parity_summary.parquet` | instrument, category, reason, rows |
//! | `parity_rows.parquet` | instrument, id, category, reason, detail, top_result_stored, top_result_computed, scores_equal, allowlist_note |
//! | `human_scores.parquet` | instrument, id, dimension, stored, computed, equal |
//! | `mutation_sweep.parquet` | test, item, dimension, reproduced_rows, weight_broken, weight_broken_share, reverse_broken, reverse_broken_share |
//! | `norms.parquet` | test, dimension, n, mean, sd, min, median, max, rows_reproduced, rows_duplicate |
//! | `norm_values.parquet` | test, dimension, value, count |
//!
//! `computed` is the current key's value; it is the number the product stores when the row is
//! reproduced. Floats are f64.

use crate::human::HumanRow;
use crate::parity::RowClass;
use crate::parity_run::ParityRun;
use crate::ScoreError;
use arrow::array::{ArrayRef, BooleanArray, Float64Array, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use protospread_core::{Provenance, Staged};
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One output table.
pub struct ParityTable {
    /// File name in the score folder.
    pub file: &'static str,
    /// Its schema.
    pub schema: SchemaRef,
    /// Its rows.
    pub batch: RecordBatch,
}

enum Col {
    S(Vec<Option<String>>),
    I(Vec<i64>),
    F(Vec<Option<f64>>),
    B(Vec<bool>),
}

impl Col {
    fn has_null(&self) -> bool {
        match self {
            Col::S(v) => v.iter().any(|x| x.is_none()),
            Col::F(v) => v.iter().any(|x| x.is_none()),
            Col::I(_) | Col::B(_) => false,
        }
    }

    fn data_type(&self) -> DataType {
        match self {
            Col::S(_) => DataType::Utf8,
            Col::I(_) => DataType::Int64,
            Col::F(_) => DataType::Float64,
            Col::B(_) => DataType::Boolean,
        }
    }

    fn len(&self) -> usize {
        match self {
            Col::S(v) => v.len(),
            Col::I(v) => v.len(),
            Col::F(v) => v.len(),
            Col::B(v) => v.len(),
        }
    }

    fn array(self) -> ArrayRef {
        match self {
            Col::S(v) => Arc::new(StringArray::from(v)),
            Col::I(v) => Arc::new(Int64Array::from(v)),
            Col::F(v) => Arc::new(Float64Array::from(v)),
            Col::B(v) => Arc::new(BooleanArray::from(v)),
        }
    }

    /// The first `n` values, leaving the rest.
    fn split_front(&mut self, n: usize) -> Col {
        fn front<T>(v: &mut Vec<T>, n: usize) -> Vec<T> {
            let rest = v.split_off(n);
            std::mem::replace(v, rest)
        }
        match self {
            Col::S(v) => Col::S(front(v, n)),
            Col::I(v) => Col::I(front(v, n)),
            Col::F(v) => Col::F(front(v, n)),
            Col::B(v) => Col::B(front(v, n)),
        }
    }
}

fn table(file: &'static str, cols: Vec<(&str, Col)>) -> Result<ParityTable, ScoreError> {
    let mut fields = Vec::new();
    let mut arrays: Vec<ArrayRef> = Vec::new();
    for (name, c) in cols {
        fields.push(Field::new(name, c.data_type(), c.has_null()));
        arrays.push(c.array());
    }
    let schema = Arc::new(Schema::new(fields));
    let batch = RecordBatch::try_new(schema.clone(), arrays)?;
    Ok(ParityTable {
        file,
        schema,
        batch,
    })
}

/// The per-row tables of the parity part (`parity_rows.parquet`, `human_scores.parquet`),
/// written to their staged files as the rows are classified, so that memory does not grow
/// with the number of human rows.
///
/// The bytes are those of writing each table as one record batch: the Parquet writer cuts its
/// input into mini-batches of `write_batch_size` (1024) rows per call, so every write but the
/// last holds a multiple of 1024 rows. A column is nullable when it holds a null, as for the
/// in-memory tables: `allowlist_note` is null for every row but allow-listed unexplained ones,
/// so its writer starts at the first null (or at the end, if there is none).
pub struct ParityRowTables {
    parity: Stream,
    scores: Stream,
}

/// Rows buffered before a write; a multiple of the writer's 1024-row mini-batch.
const FLUSH_ROWS: usize = 64 * 1024;

struct Stream {
    /// The output's final path (for errors) and its staged file.
    dest: PathBuf,
    tmp: PathBuf,
    names: Vec<&'static str>,
    cols: Vec<Col>,
    /// Columns that may hold nulls; the writer waits for the first null of each (or the end).
    lazy: Vec<usize>,
    writer: Option<(ArrowWriter<BufWriter<fs_err::File>>, SchemaRef)>,
    written: usize,
    /// The file's key-value metadata.
    meta: protospread_core::FileMeta,
}

impl Stream {
    fn new(
        dir: &Path,
        file: &str,
        staged: &mut Staged,
        cols: Vec<(&'static str, Col)>,
        lazy: Vec<usize>,
        prov: &Provenance,
    ) -> Result<Stream, ScoreError> {
        let dest = dir.join(file);
        let meta = prov.stage_table(
            "score",
            file.trim_end_matches(".parquet"),
            protospread_core::UNDECLARED_VERSION,
        );
        let tmp = staged.file(&dest)?;
        let (names, cols) = cols.into_iter().unzip();
        Ok(Stream {
            dest,
            tmp,
            names,
            cols,
            lazy,
            writer: None,
            written: 0,
            meta,
        })
    }

    fn perr(&self, e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> ScoreError {
        ScoreError::Core(protospread_core::CoreError::parquet(&self.dest, e))
    }

    fn rows(&self) -> usize {
        self.cols.first().map(Col::len).unwrap_or(0)
    }

    fn start(&mut self) -> Result<(), ScoreError> {
        let fields: Vec<Field> = self
            .names
            .iter()
            .zip(&self.cols)
            .enumerate()
            .map(|(i, (n, c))| {
                Field::new(*n, c.data_type(), self.lazy.contains(&i) && c.has_null())
            })
            .collect();
        let file = fs_err::File::create(&self.tmp)?;
        let schema = Arc::new(Schema::new(fields));
        let w = ArrowWriter::try_new(
            BufWriter::new(file),
            schema.clone(),
            Some(protospread_core::parquet_writer_properties(&self.meta)),
        )
        .map_err(|e| self.perr(e))?;
        self.writer = Some((w, schema));
        Ok(())
    }

    /// Write the first `n` buffered rows (or none, before the writer starts).
    fn write(&mut self, n: usize) -> Result<(), ScoreError> {
        let Some((w, schema)) = &mut self.writer else {
            return Ok(());
        };
        let arrays: Vec<ArrayRef> = self
            .cols
            .iter_mut()
            .map(|c| c.split_front(n).array())
            .collect();
        let batch = RecordBatch::try_new(schema.clone(), arrays)?;
        let r = w.write(&batch);
        r.map_err(|e| self.perr(e))?;
        self.written += n;
        Ok(())
    }

    /// After each row: start the writer once every lazy column has a null, and write whole
    /// multiples of the mini-batch.
    fn pushed(&mut self) -> Result<(), ScoreError> {
        if self.writer.is_none() && self.lazy.iter().all(|&i| self.cols[i].has_null_fast()) {
            self.start()?;
        }
        let n = self.rows();
        if self.writer.is_some() && n >= FLUSH_ROWS {
            self.write(n - n % 1024)?;
        }
        Ok(())
    }

    fn finish(mut self) -> Result<(), ScoreError> {
        if self.writer.is_none() {
            self.start()?;
        }
        let n = self.rows();
        if n > 0 || self.written == 0 {
            self.write(n)?;
        }
        let (w, _) = self.writer.take().expect("started");
        let buf = w.into_inner().map_err(|e| self.perr(e))?;
        let file = buf.into_inner().map_err(|e| self.perr(e.into_error()))?;
        Ok(file.sync_all()?)
    }
}

impl Col {
    /// `has_null` for the last value only (cheap, called after each push; a null seen once
    /// starts the writer, so earlier values need no second look).
    fn has_null_fast(&self) -> bool {
        match self {
            Col::S(v) => matches!(v.last(), Some(None)),
            Col::F(v) => matches!(v.last(), Some(None)),
            Col::I(_) | Col::B(_) => false,
        }
    }
}

fn s(x: &str) -> Option<String> {
    Some(x.to_string())
}

impl ParityRowTables {
    /// Stage the two per-row tables of the score folder `dir`, with key-value metadata from
    /// `prov`.
    pub fn new(
        dir: &Path,
        staged: &mut Staged,
        prov: &Provenance,
    ) -> Result<ParityRowTables, ScoreError> {
        let parity = Stream::new(
            dir,
            "parity_rows.parquet",
            staged,
            vec![
                ("instrument", Col::S(vec![])),
                ("id", Col::I(vec![])),
                ("category", Col::S(vec![])),
                ("reason", Col::S(vec![])),
                ("detail", Col::S(vec![])),
                ("top_result_stored", Col::S(vec![])),
                ("top_result_computed", Col::S(vec![])),
                ("scores_equal", Col::B(vec![])),
                ("allowlist_note", Col::S(vec![])),
            ],
            vec![8],
            prov,
        )?;
        // human_scores: dimension order within a row is the instrument's column order, which
        // is alphabetical for the four study instruments; sorted explicitly anyway.
        let scores = Stream::new(
            dir,
            "human_scores.parquet",
            staged,
            vec![
                ("instrument", Col::S(vec![])),
                ("id", Col::I(vec![])),
                ("dimension", Col::S(vec![])),
                ("stored", Col::F(vec![])),
                ("computed", Col::F(vec![])),
                ("equal", Col::B(vec![])),
            ],
            vec![],
            prov,
        )?;
        Ok(ParityRowTables { parity, scores })
    }

    /// Add one classified row; rows come in (instrument, id) order.
    pub fn push(&mut self, row: &HumanRow, cl: &RowClass) -> Result<(), ScoreError> {
        let p = &mut self.parity.cols;
        let push_s = |c: &mut Col, v: Option<String>| {
            if let Col::S(x) = c {
                x.push(v);
            }
        };
        push_s(&mut p[0], s(&cl.instrument));
        if let Col::I(x) = &mut p[1] {
            x.push(cl.id);
        }
        push_s(&mut p[2], s(cl.category.as_str()));
        push_s(&mut p[3], s(&cl.reason));
        push_s(&mut p[4], s(&cl.detail));
        push_s(&mut p[5], s(&row.top_result));
        push_s(&mut p[6], cl.computed.top_result.clone());
        if let Col::B(x) = &mut p[7] {
            x.push(cl.scores_equal);
        }
        push_s(&mut p[8], cl.allowlisted.clone());
        self.parity.pushed()?;

        let mut dims: Vec<_> = cl.computed.dims.iter().zip(&row.scores).collect();
        dims.sort_by(|a, b| a.0.dimension.cmp(&b.0.dimension));
        for (dsc, &st) in dims {
            let c = &mut self.scores.cols;
            push_s(&mut c[0], s(&cl.instrument));
            if let Col::I(x) = &mut c[1] {
                x.push(cl.id);
            }
            push_s(&mut c[2], s(&dsc.dimension));
            if let [Col::F(a), Col::F(b), Col::B(e)] = &mut c[3..6] {
                a.push(Some(f64::from(st)));
                b.push(dsc.value);
                e.push(dsc.value == Some(f64::from(st)));
            }
            self.scores.pushed()?;
        }
        Ok(())
    }

    /// Write what is buffered and close both files.
    pub fn finish(self) -> Result<(), ScoreError> {
        self.parity.finish()?;
        self.scores.finish()
    }
}

/// The tables of the parity part that do not grow with the number of rows.
pub fn parity_tables(run: &ParityRun) -> Result<Vec<ParityTable>, ScoreError> {
    let mut out = Vec::new();

    let (mut a, mut b, mut c, mut d) = (vec![], vec![], vec![], vec![]);
    for (inst, m) in &run.summary {
        for ((cat, reason), n) in m {
            a.push(s(inst));
            b.push(s(cat.as_str()));
            c.push(s(reason));
            d.push(*n as i64);
        }
    }
    out.push(table(
        "parity_summary.parquet",
        vec![
            ("instrument", Col::S(a)),
            ("category", Col::S(b)),
            ("reason", Col::S(c)),
            ("rows", Col::I(d)),
        ],
    )?);

    let sw = &run.sweep;
    let share = |k: usize, n: usize| {
        Some(if n == 0 {
            f64::NAN
        } else {
            k as f64 / n as f64
        })
    };
    out.push(table(
        "mutation_sweep.parquet",
        vec![
            ("test", Col::S(sw.iter().map(|m| s(&m.test)).collect())),
            ("item", Col::I(sw.iter().map(|m| m.item as i64).collect())),
            (
                "dimension",
                Col::S(sw.iter().map(|m| s(&m.dimension)).collect()),
            ),
            (
                "reproduced_rows",
                Col::I(sw.iter().map(|m| m.reproduced as i64).collect()),
            ),
            (
                "weight_broken",
                Col::I(sw.iter().map(|m| m.weight_broken as i64).collect()),
            ),
            (
                "weight_broken_share",
                Col::F(
                    sw.iter()
                        .map(|m| share(m.weight_broken, m.reproduced))
                        .collect(),
                ),
            ),
            (
                "reverse_broken",
                Col::I(sw.iter().map(|m| m.reverse_broken as i64).collect()),
            ),
            (
                "reverse_broken_share",
                Col::F(
                    sw.iter()
                        .map(|m| share(m.reverse_broken, m.reproduced))
                        .collect(),
                ),
            ),
        ],
    )?);

    let ns: Vec<_> = run.norms.norms.values().collect();
    let nr = |t: &str| run.norm_rows.get(t).copied().unwrap_or_default();
    out.push(table(
        "norms.parquet",
        vec![
            ("test", Col::S(ns.iter().map(|n| s(&n.test)).collect())),
            (
                "dimension",
                Col::S(ns.iter().map(|n| s(&n.dimension)).collect()),
            ),
            ("n", Col::I(ns.iter().map(|n| n.n as i64).collect())),
            ("mean", Col::F(ns.iter().map(|n| Some(n.mean)).collect())),
            ("sd", Col::F(ns.iter().map(|n| Some(n.sd)).collect())),
            ("min", Col::F(ns.iter().map(|n| Some(n.min())).collect())),
            (
                "median",
                Col::F(ns.iter().map(|n| Some(n.median())).collect()),
            ),
            ("max", Col::F(ns.iter().map(|n| Some(n.max())).collect())),
            (
                "rows_reproduced",
                Col::I(ns.iter().map(|n| nr(&n.test).reproduced as i64).collect()),
            ),
            (
                "rows_duplicate",
                Col::I(ns.iter().map(|n| nr(&n.test).duplicates as i64).collect()),
            ),
        ],
    )?);

    let (mut t, mut d, mut v, mut c) = (vec![], vec![], vec![], vec![]);
    for n in &ns {
        for &(value, count) in &n.values {
            t.push(s(&n.test));
            d.push(s(&n.dimension));
            v.push(Some(value));
            c.push(count as i64);
        }
    }
    out.push(table(
        crate::norms::NORM_VALUES_FILE,
        vec![
            ("test", Col::S(t)),
            ("dimension", Col::S(d)),
            ("value", Col::F(v)),
            ("count", Col::I(c)),
        ],
    )?);
    Ok(out)
}
