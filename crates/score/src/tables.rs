//! The Arrow tables of the parity part of the score stage: [`PARITY_SUMMARY`],
//! [`PARITY_ROWS`], [`HUMAN_SCORES`], [`MUTATION_SWEEP`], [`NORMS`] and [`NORM_VALUES`], each
//! written with exactly the schema of its contract (whatever values a run holds) and sorted by
//! its key.
//!
//! `computed` is the current key's value; it is the number the product stores when the row is
//! reproduced. Floats are f64.

use crate::human::HumanRow;
use crate::parity::RowClass;
use crate::parity_run::ParityRun;
use crate::ScoreError;
use arrow::array::{ArrayRef, BooleanArray, Float64Array, Int64Array, StringArray};
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use protospread_core::{
    ColumnType, Provenance, Staged, TableContract, HUMAN_SCORES, MUTATION_SWEEP, NORMS,
    NORM_VALUES, PARITY_ROWS, PARITY_SUMMARY,
};
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One output table.
pub struct ParityTable {
    /// The table's contract: its file name (in the score folder) and schema.
    pub contract: &'static TableContract,
    /// Its rows, of the contract's schema.
    pub batch: RecordBatch,
}

/// The values of one column, of its contract type.
enum Col {
    S(Vec<Option<String>>),
    I(Vec<i64>),
    F(Vec<Option<f64>>),
    B(Vec<bool>),
}

/// One value of a row, given in the order of its contract's columns. A null (`None`) is
/// refused by a column its contract declares never null when the batch is made.
enum Value {
    S(Option<String>),
    I(i64),
    F(Option<f64>),
    B(bool),
}

/// `impl From<$t> for Value` for each `$t => |v| value`: the Rust types a row gives a column.
macro_rules! value_from {
    ($($t:ty => |$v:ident| $value:expr),* $(,)?) => {
        $(impl From<$t> for Value {
            fn from($v: $t) -> Value {
                $value
            }
        })*
    };
}

value_from! {
    &str => |v| Value::S(Some(v.to_string())),
    &String => |v| Value::S(Some(v.clone())),
    Option<String> => |v| Value::S(v),
    i64 => |v| Value::I(v),
    usize => |v| Value::I(v as i64),
    f64 => |v| Value::F(Some(v)),
    Option<f64> => |v| Value::F(v),
    bool => |v| Value::B(v),
}

impl Col {
    /// An empty column of type `ty`. The parity tables hold text, 64-bit integers, floats and
    /// booleans; a contract column of another type is a programming error every run hits.
    fn new(table: &str, ty: ColumnType) -> Col {
        match ty {
            ColumnType::Text => Col::S(Vec::new()),
            ColumnType::Int64 => Col::I(Vec::new()),
            ColumnType::Float64 => Col::F(Vec::new()),
            ColumnType::Boolean => Col::B(Vec::new()),
            ty => panic!("table {table}: the score stage writes no {ty:?} column"),
        }
    }

    /// Append `v`; a value of another type than the column's is a programming error.
    fn push(&mut self, table: &str, column: &str, v: Value) {
        match (self, v) {
            (Col::S(c), Value::S(v)) => c.push(v),
            (Col::I(c), Value::I(v)) => c.push(v),
            (Col::F(c), Value::F(v)) => c.push(v),
            (Col::B(c), Value::B(v)) => c.push(v),
            _ => panic!("table {table}: a value of another type for column {column}"),
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

    /// The first `n` values as an array, leaving the rest.
    fn split_front(&mut self, n: usize) -> ArrayRef {
        fn front<T>(v: &mut Vec<T>, n: usize) -> Vec<T> {
            let rest = v.split_off(n);
            std::mem::replace(v, rest)
        }
        match self {
            Col::S(v) => Arc::new(StringArray::from(front(v, n))),
            Col::I(v) => Arc::new(Int64Array::from(front(v, n))),
            Col::F(v) => Arc::new(Float64Array::from(front(v, n))),
            Col::B(v) => Arc::new(BooleanArray::from(front(v, n))),
        }
    }
}

/// Rows of one contract's table, buffered column by column.
struct Rows {
    contract: &'static TableContract,
    cols: Vec<Col>,
}

impl Rows {
    fn new(contract: &'static TableContract) -> Rows {
        let cols = contract
            .columns()
            .iter()
            .map(|c| Col::new(contract.name, c.ty))
            .collect();
        Rows { contract, cols }
    }

    /// Append a row: one value per column of the contract, in its order. Another number of
    /// values is a programming error (a column declared but not produced, or the reverse)
    /// that every run hits.
    fn push<const N: usize>(&mut self, row: [Value; N]) {
        let names = self.contract.names();
        assert_eq!(
            N,
            names.len(),
            "table {}: a row of {N} values for the contract's columns {names:?}",
            self.contract.name
        );
        for ((c, v), name) in self.cols.iter_mut().zip(row).zip(names) {
            c.push(self.contract.name, name, v);
        }
    }

    fn len(&self) -> usize {
        self.cols.first().map_or(0, Col::len)
    }

    /// The first `n` rows as a batch of the contract's schema, leaving the rest; a null in a
    /// column the contract declares never null is an error naming the column.
    fn split_front(&mut self, n: usize) -> Result<RecordBatch, ScoreError> {
        let arrays = self.cols.iter_mut().map(|c| c.split_front(n)).collect();
        Ok(RecordBatch::try_new(self.contract.schema(), arrays)?)
    }

    fn table(mut self) -> Result<ParityTable, ScoreError> {
        let batch = self.split_front(self.len())?;
        Ok(ParityTable {
            contract: self.contract,
            batch,
        })
    }
}

/// The per-row tables of the parity part ([`PARITY_ROWS`], [`HUMAN_SCORES`]), written to their
/// staged files as the rows are classified, so that memory does not grow with the number of
/// human rows.
///
/// The bytes are those of writing each table as one record batch: the Parquet writer cuts its
/// input into mini-batches of `write_batch_size` (1024) rows per call, so every write but the
/// last holds a multiple of 1024 rows.
pub struct ParityRowTables {
    parity: Stream,
    scores: Stream,
}

/// Rows buffered before a write; a multiple of the writer's 1024-row mini-batch.
const FLUSH_ROWS: usize = 64 * 1024;

struct Stream {
    /// The output's final path (for errors).
    dest: PathBuf,
    rows: Rows,
    writer: ArrowWriter<BufWriter<fs_err::File>>,
    written: usize,
}

impl Stream {
    /// The writer of `contract`'s table in `dir`, to its staged file.
    fn new(
        dir: &Path,
        contract: &'static TableContract,
        staged: &mut Staged,
        prov: &Provenance,
    ) -> Result<Stream, ScoreError> {
        let dest = dir.join(contract.file_name());
        let file = fs_err::File::create(staged.file(&dest)?)?;
        let props = protospread_core::parquet_writer_properties(&prov.table(contract));
        let writer = ArrowWriter::try_new(BufWriter::new(file), contract.schema(), Some(props))
            .map_err(|e| perr(&dest, e))?;
        Ok(Stream {
            dest,
            rows: Rows::new(contract),
            writer,
            written: 0,
        })
    }

    /// Write the first `n` buffered rows.
    fn write(&mut self, n: usize) -> Result<(), ScoreError> {
        let batch = self.rows.split_front(n)?;
        self.writer.write(&batch).map_err(|e| perr(&self.dest, e))?;
        self.written += n;
        Ok(())
    }

    /// Append a row, and write whole multiples of the mini-batch once enough are buffered.
    fn push<const N: usize>(&mut self, row: [Value; N]) -> Result<(), ScoreError> {
        self.rows.push(row);
        let n = self.rows.len();
        if n >= FLUSH_ROWS {
            self.write(n - n % 1024)?;
        }
        Ok(())
    }

    fn finish(mut self) -> Result<(), ScoreError> {
        let n = self.rows.len();
        if n > 0 || self.written == 0 {
            self.write(n)?;
        }
        let buf = self.writer.into_inner().map_err(|e| perr(&self.dest, e))?;
        let file = buf
            .into_inner()
            .map_err(|e| perr(&self.dest, e.into_error()))?;
        Ok(file.sync_all()?)
    }
}

fn perr(dest: &Path, e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> ScoreError {
    ScoreError::Core(protospread_core::CoreError::parquet(dest, e))
}

impl ParityRowTables {
    /// Stage the two per-row tables of the score folder `dir`, with key-value metadata from
    /// `prov`.
    pub fn new(
        dir: &Path,
        staged: &mut Staged,
        prov: &Provenance,
    ) -> Result<ParityRowTables, ScoreError> {
        Ok(ParityRowTables {
            parity: Stream::new(dir, &PARITY_ROWS, staged, prov)?,
            scores: Stream::new(dir, &HUMAN_SCORES, staged, prov)?,
        })
    }

    /// Add one classified row; rows come in (instrument, id) order.
    pub fn push(&mut self, row: &HumanRow, cl: &RowClass) -> Result<(), ScoreError> {
        self.parity.push([
            (&cl.instrument).into(),
            cl.id.into(),
            cl.category.as_str().into(),
            (&cl.reason).into(),
            (&cl.detail).into(),
            (&row.top_result).into(),
            cl.computed.top_result.clone().into(),
            cl.scores_equal.into(),
            cl.allowlisted.clone().into(),
        ])?;
        // Dimension order within a row is the instrument's column order, which is
        // alphabetical for the four study instruments; sorted explicitly anyway.
        let mut dims: Vec<_> = cl.computed.dims.iter().zip(&row.scores).collect();
        dims.sort_by(|a, b| a.0.dimension.cmp(&b.0.dimension));
        for (dsc, &st) in dims {
            let stored = f64::from(st);
            self.scores.push([
                (&cl.instrument).into(),
                cl.id.into(),
                (&dsc.dimension).into(),
                stored.into(),
                dsc.value.into(),
                (dsc.value == Some(stored)).into(),
            ])?;
        }
        Ok(())
    }

    /// Write what is buffered and close both files.
    pub fn finish(self) -> Result<(), ScoreError> {
        self.parity.finish()?;
        self.scores.finish()
    }
}

/// `k` of `n` reproduced rows as a share; NaN when the test reproduces no row.
fn share(k: usize, n: usize) -> f64 {
    if n == 0 {
        f64::NAN
    } else {
        k as f64 / n as f64
    }
}

/// The tables of the parity part that do not grow with the number of rows.
pub fn parity_tables(run: &ParityRun) -> Result<Vec<ParityTable>, ScoreError> {
    let mut summary = Rows::new(&PARITY_SUMMARY);
    for (inst, m) in &run.summary {
        for ((cat, reason), n) in m {
            summary.push([inst.into(), cat.as_str().into(), reason.into(), (*n).into()]);
        }
    }

    let mut sweep = Rows::new(&MUTATION_SWEEP);
    for m in &run.sweep {
        sweep.push([
            (&m.test).into(),
            m.item.into(),
            (&m.dimension).into(),
            m.reproduced.into(),
            m.weight_broken.into(),
            share(m.weight_broken, m.reproduced).into(),
            m.reverse_broken.into(),
            share(m.reverse_broken, m.reproduced).into(),
        ]);
    }

    let (mut norms, mut values) = (Rows::new(&NORMS), Rows::new(&NORM_VALUES));
    for n in run.norms.norms.values() {
        let rows = run.norm_rows.get(&n.test).copied().unwrap_or_default();
        norms.push([
            (&n.test).into(),
            (&n.dimension).into(),
            n.n.into(),
            n.mean.into(),
            n.sd.into(),
            n.min().into(),
            n.median().into(),
            n.max().into(),
            rows.reproduced.into(),
            rows.duplicates.into(),
        ]);
        for &(value, count) in &n.values {
            values.push([
                (&n.test).into(),
                (&n.dimension).into(),
                value.into(),
                count.into(),
            ]);
        }
    }
    [summary, sweep, norms, values]
        .into_iter()
        .map(Rows::table)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[should_panic(expected = "a row of 3 values")]
    fn a_row_without_a_declared_column_is_refused() {
        Rows::new(&PARITY_SUMMARY).push(["big_five".into(), "reproduced".into(), 1usize.into()]);
    }

    #[test]
    fn a_null_in_a_column_declared_never_null_is_an_error() {
        let mut rows = Rows::new(&NORM_VALUES);
        rows.push(["t".into(), "d".into(), None::<f64>.into(), 1usize.into()]);
        let e = rows.table().err().expect("a null value").to_string();
        assert!(e.contains("value"), "{e}");
    }
}
