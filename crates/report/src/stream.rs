//! One pass over a Parquet table: its file's bytes are copied as they are, then it is read
//! batch by batch, every row going to the canonical CSV file as it is read, and only a
//! bounded part of the table stays in memory (its first rows, the rows with the most extreme
//! ratio, the rows labelled `recorded`, and for `cells` the figures' points). Nothing is held
//! per row of a large table but one reused row of strings, nor of its file but one buffer.

use crate::html::PointsBuilder;
use crate::inference::BarsBuilder;
use crate::render::{push_float, TextTable};
use crate::{Excerpt, ReportError};
use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, Float32Type, Float64Type, SchemaRef};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};
use std::cmp::Ordering;
use std::fmt::Write as _;
use std::path::Path;

/// A table of at most this many rows is kept whole for `<name>.md`, report.md and report.html.
pub const FULL_ROWS: usize = 2000;
/// Rows shown at each end of a larger table's excerpt (highest and lowest ratio), or twice
/// this many first rows for a table without a ratio.
pub const EXTREME_ROWS: usize = 25;
/// The column an excerpt is ordered by, when the table has it.
const EXTREME_COLUMN: &str = "ratio";
/// Label of the rows kept for the recorded-study section.
const RECORDED: &str = "recorded";
const BATCH_ROWS: usize = 8192;
/// Bytes read and written at a time when a table's Parquet file is copied (the writer's
/// buffer, which `std::io::copy` reads into).
const COPY_BUFFER: usize = 1 << 20;

/// What one pass over a table keeps.
#[derive(Debug)]
pub(crate) struct Pass {
    /// Rows in the whole table.
    pub(crate) rows: usize,
    /// The whole table when it has at most [`FULL_ROWS`] rows, else its first rows.
    pub(crate) head: TextTable,
    /// For a table of more than `2 * EXTREME_ROWS` rows, the excerpt shown instead of the
    /// whole table where the whole would be too large.
    pub(crate) excerpt: Option<Excerpt>,
    /// Rows whose `label` is `recorded`, all of them.
    pub(crate) recorded: TextTable,
    /// For the `cells` and `error_bars` tables: what the figures draw.
    pub(crate) points: Option<Collector>,
}

/// What a table's pass collects for the figures.
#[derive(Debug)]
pub(crate) enum Collector {
    /// The kept cells of `cells`.
    Points(PointsBuilder),
    /// The models of each scale of `error_bars`.
    Bars(BarsBuilder),
}

impl Collector {
    fn push(&mut self, r: &[String]) -> Result<(), String> {
        match self {
            Collector::Points(p) => p.push(r),
            Collector::Bars(b) => b.push(r),
        }
    }
}

/// How one column's values are written as text.
enum Col<'a> {
    F64(&'a arrow::array::Float64Array),
    F32(&'a arrow::array::Float32Array),
    Bool(&'a arrow::array::BooleanArray),
    Utf8(&'a arrow::array::StringArray),
    Large(&'a arrow::array::LargeStringArray),
    View(&'a arrow::array::StringViewArray),
    Other(ArrayFormatter<'a>),
}

impl Col<'_> {
    fn push(&self, i: usize, out: &mut String) {
        match self {
            Col::F64(a) => push_float(out, a.value(i)),
            Col::F32(a) => push_float(out, f64::from(a.value(i))),
            Col::Bool(a) => out.push_str(if a.value(i) { "true" } else { "false" }),
            Col::Utf8(a) => out.push_str(a.value(i)),
            Col::Large(a) => out.push_str(a.value(i)),
            Col::View(a) => out.push_str(a.value(i)),
            Col::Other(f) => {
                let _ = write!(out, "{}", f.value(i));
            }
        }
    }
}

fn supported(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Float64
            | DataType::Float32
            | DataType::Boolean
            | DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Utf8View
            | DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
            | DataType::Date32
    )
}

/// The rows with the highest and the lowest value of one column, ties in table order.
struct Extremes {
    column: usize,
    high: Vec<(f64, Vec<String>)>,
    low: Vec<(f64, Vec<String>)>,
}

impl Extremes {
    /// Offer row `cells` with value `v` to both ends.
    fn offer(&mut self, v: f64, cells: &[String]) {
        keep_end(&mut self.high, v, cells, Ordering::Greater);
        keep_end(&mut self.low, v, cells, Ordering::Less);
    }
}

/// Keep in `end` the [`EXTREME_ROWS`] rows whose values lie furthest `towards` (`Greater`:
/// the highest), furthest first. Rows come in table order, so a row equal to a kept one goes
/// after it, and does not displace it.
fn keep_end(end: &mut Vec<(f64, Vec<String>)>, v: f64, cells: &[String], towards: Ordering) {
    let k = EXTREME_ROWS;
    if end.len() < k || v.total_cmp(&end[k - 1].0) == towards {
        let at = end.partition_point(|e| e.0.total_cmp(&v) != towards.reverse());
        end.insert(at, (v, cells.to_vec()));
        end.truncate(k);
    }
}

/// Read the Parquet table at `path` once: copy its bytes to `copy_path` and write its
/// canonical CSV to `csv_path` (files this function creates, writes and syncs), and return
/// what the Markdown, the HTML and the figures need. `name` is the table's file stem (`cells`
/// and `error_bars` also collect what the figures draw). A table with a `contract` must have
/// its columns ([`protospread_core::TableContract::check_schema`]).
pub(crate) fn pass(
    path: &Path,
    name: &str,
    csv_path: &Path,
    copy_path: &Path,
    contract: Option<&protospread_core::TableContract>,
) -> Result<Pass, ReportError> {
    // The copy and the CSV are read through one open file, so the copy holds the very bytes
    // the CSV was made from.
    let mut file = fs_err::File::open(path).map_err(protospread_core::CoreError::Fs)?;
    copy(&mut file, copy_path)?;
    let (reader, rows, schema) = open(path, file, contract)?;
    let header: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
    let numeric: Vec<bool> = schema
        .fields()
        .iter()
        .map(|f| f.data_type().is_numeric())
        .collect();
    let mut keep = Keep::new(path, name, &schema, &header, &numeric, rows)?;
    let cerr = |source| ReportError::Csv {
        path: csv_path.to_path_buf(),
        source,
    };
    let out = fs_err::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(csv_path)
        .map_err(protospread_core::CoreError::Fs)?;
    let mut w = crate::render::csv_writer(out);
    w.write_record(&header).map_err(cerr)?;
    let mut cells: Vec<String> = vec![String::new(); header.len()];
    let mut row_no = 0usize;
    let options = FormatOptions::default();
    for batch in reader {
        let batch = batch.map_err(|e| ReportError::Arrow {
            path: path.to_path_buf(),
            source: e,
        })?;
        let cols = text_columns(path, &batch, &options)?;
        let extreme_values = keep
            .extremes
            .as_ref()
            .map(|x| batch.column(x.column).as_primitive::<Float64Type>());
        for i in 0..batch.num_rows() {
            for (j, col) in cols.iter().enumerate() {
                let s = &mut cells[j];
                s.clear();
                if !batch.column(j).is_null(i) {
                    col.push(i, s);
                }
            }
            w.write_record(&cells).map_err(cerr)?;
            let value = extreme_values
                .filter(|v| v.is_valid(i) && !v.value(i).is_nan())
                .map(|v| v.value(i));
            keep.row(&cells, value)
                .map_err(|m| ReportError::table(path, format!("row {}: {m}", row_no + 1)))?;
            row_no += 1;
        }
    }
    let file = w
        .into_inner()
        .map_err(|e| protospread_core::CoreError::Fs(e.into_error()))?;
    file.sync_all().map_err(protospread_core::CoreError::Fs)?;
    if row_no != rows {
        return Err(ReportError::table(
            path,
            format!("the metadata says {rows} rows, the file holds {row_no}"),
        ));
    }
    Ok(keep.finish(header, numeric, rows))
}

/// Copy the rest of `from` to `to`, a file this function creates and syncs. Streamed through
/// one buffer of [`COPY_BUFFER`] bytes, so a table of any size takes no more memory.
fn copy(from: &mut fs_err::File, to: &Path) -> Result<(), ReportError> {
    (|| {
        let out = fs_err::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(to)?;
        let mut w = std::io::BufWriter::with_capacity(COPY_BUFFER, out);
        std::io::copy(from, &mut w)?;
        w.into_inner().map_err(|e| e.into_error())?.sync_all()
    })()
    .map_err(|e| protospread_core::CoreError::Fs(e).into())
}

/// A reader of the Parquet table in `file` (read from `path`), its row count and its schema;
/// an error names a column of a type the renderer does not write.
fn open(
    path: &Path,
    file: fs_err::File,
    contract: Option<&protospread_core::TableContract>,
) -> Result<(ParquetRecordBatchReader, usize, SchemaRef), ReportError> {
    let perr = |source| ReportError::Parquet {
        path: path.to_path_buf(),
        source,
    };
    let builder = ParquetRecordBatchReaderBuilder::try_new(file.into_parts().0).map_err(perr)?;
    let rows = usize::try_from(builder.metadata().file_metadata().num_rows())
        .map_err(|_| ReportError::table(path, "negative row count in the file's metadata"))?;
    let schema: SchemaRef = builder.schema().clone();
    if let Some(c) = contract {
        c.check_schema(&schema)
            .map_err(|source| ReportError::Contract {
                path: path.to_path_buf(),
                source,
            })?;
    }
    for f in schema.fields() {
        if !supported(f.data_type()) {
            return Err(ReportError::table(
                path,
                format!(
                    "column `{}` has type {}, which the renderer does not write",
                    f.name(),
                    f.data_type()
                ),
            ));
        }
    }
    let reader = builder.with_batch_size(BATCH_ROWS).build().map_err(perr)?;
    Ok((reader, rows, schema))
}

/// How each column of `batch` is written as text.
fn text_columns<'a>(
    path: &Path,
    batch: &'a arrow::record_batch::RecordBatch,
    options: &'a FormatOptions,
) -> Result<Vec<Col<'a>>, ReportError> {
    batch
        .columns()
        .iter()
        .map(|a| {
            Ok(match a.data_type() {
                DataType::Float64 => Col::F64(a.as_primitive::<Float64Type>()),
                DataType::Float32 => Col::F32(a.as_primitive::<Float32Type>()),
                DataType::Boolean => Col::Bool(a.as_boolean()),
                DataType::Utf8 => Col::Utf8(a.as_string::<i32>()),
                DataType::LargeUtf8 => Col::Large(a.as_string::<i64>()),
                DataType::Utf8View => Col::View(a.as_string_view()),
                _ => Col::Other(ArrayFormatter::try_new(a.as_ref(), options).map_err(|e| {
                    ReportError::Arrow {
                        path: path.to_path_buf(),
                        source: e,
                    }
                })?),
            })
        })
        .collect()
}

/// The bounded part of a table that a pass keeps, offered one row at a time.
struct Keep {
    head: TextTable,
    recorded: TextTable,
    /// The `label` column, when the table has one.
    label: Option<usize>,
    extremes: Option<Extremes>,
    points: Option<Collector>,
}

impl Keep {
    fn new(
        path: &Path,
        name: &str,
        schema: &SchemaRef,
        header: &[String],
        numeric: &[bool],
        rows: usize,
    ) -> Result<Self, ReportError> {
        let empty = || TextTable {
            header: header.to_vec(),
            numeric: numeric.to_vec(),
            rows: Vec::new(),
        };
        let extremes = if rows > 2 * EXTREME_ROWS {
            schema
                .index_of(EXTREME_COLUMN)
                .ok()
                .filter(|&i| matches!(schema.field(i).data_type(), DataType::Float64))
                .map(|column| Extremes {
                    column,
                    high: Vec::new(),
                    low: Vec::new(),
                })
        } else {
            None
        };
        let points = match name {
            "cells" => Some(Collector::Points(
                PointsBuilder::new(header).map_err(|m| ReportError::table(path, m))?,
            )),
            "error_bars" => Some(Collector::Bars(
                BarsBuilder::new(header).map_err(|m| ReportError::table(path, m))?,
            )),
            _ => None,
        };
        Ok(Keep {
            head: empty(),
            recorded: empty(),
            label: schema.index_of("label").ok(),
            extremes,
            points,
        })
    }

    /// Offer one row (its cells as written), with its value of [`EXTREME_COLUMN`] when the
    /// excerpt is ordered by it and the value is a number; an error is the figures'.
    fn row(&mut self, cells: &[String], value: Option<f64>) -> Result<(), String> {
        if self.head.rows.len() < FULL_ROWS {
            self.head.rows.push(cells.to_vec());
        }
        if let (Some(x), Some(v)) = (self.extremes.as_mut(), value) {
            x.offer(v, cells);
        }
        if self.label.is_some_and(|l| cells[l] == RECORDED) {
            self.recorded.rows.push(cells.to_vec());
        }
        if let Some(p) = self.points.as_mut() {
            p.push(cells)?;
        }
        Ok(())
    }

    /// What the pass over a table of `rows` rows returns.
    fn finish(self, header: Vec<String>, numeric: Vec<bool>, rows: usize) -> Pass {
        let head = self.head;
        let excerpt = if rows <= 2 * EXTREME_ROWS {
            None
        } else if let Some(x) = self.extremes {
            let part = |rows: Vec<(f64, Vec<String>)>| TextTable {
                header: header.clone(),
                numeric: numeric.clone(),
                rows: rows.into_iter().map(|(_, r)| r).collect(),
            };
            Some(Excerpt::Extremes {
                column: EXTREME_COLUMN.to_string(),
                high: part(x.high),
                low: part(x.low),
            })
        } else {
            Some(Excerpt::First(TextTable {
                header,
                numeric,
                rows: head.rows[..2 * EXTREME_ROWS].to_vec(),
            }))
        };
        Pass {
            rows,
            head,
            excerpt,
            recorded: self.recorded,
            points: self.points,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ArrayRef, BinaryArray, Float64Array, StringArray};
    use arrow::datatypes::{Field, Schema};
    use arrow::record_batch::RecordBatch;
    use std::sync::Arc;

    fn write(dir: &Path, cols: Vec<(&str, ArrayRef)>) -> std::path::PathBuf {
        let schema = Arc::new(Schema::new(
            cols.iter()
                .map(|(n, a)| Field::new(*n, a.data_type().clone(), true))
                .collect::<Vec<_>>(),
        ));
        let b =
            RecordBatch::try_new(schema.clone(), cols.into_iter().map(|c| c.1).collect()).unwrap();
        let p = dir.join("t.parquet");
        protospread_core::write_parquet(&p, schema, &[b], &protospread_core::FileMeta::default())
            .unwrap();
        p
    }

    /// The error of a pass over `table` whose CSV and copy go to `<stem>.csv` and
    /// `<stem>.parquet` beside it.
    fn error(
        table: &Path,
        stem: &str,
        contract: Option<&protospread_core::TableContract>,
    ) -> String {
        let at = |ext: &str| table.with_file_name(format!("{stem}.{ext}"));
        pass(table, "t", &at("csv"), &at("parquet"), contract)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_declared_table_without_a_column_of_its_contract_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            vec![("source", Arc::new(StringArray::from(vec!["s"])) as ArrayRef)],
        );
        let e = error(&p, "copy", Some(&protospread_core::CELLS));
        assert!(
            e.contains("t.parquet") && e.contains("column `label` is missing (table cells v1)"),
            "{e}"
        );
    }

    #[test]
    fn one_pass_writes_every_row_and_keeps_the_extremes() {
        let dir = tempfile::tempdir().unwrap();
        let n = 120;
        // Ratios 0, 1, ..., with ties (i / 2), a null and a NaN that no end shows.
        let ratio: Vec<Option<f64>> = (0..n)
            .map(|i| match i {
                5 => None,
                6 => Some(f64::NAN),
                _ => Some((i / 2) as f64),
            })
            .collect();
        let label: Vec<&str> = (0..n)
            .map(|i| if i == 7 { "recorded" } else { "simulated" })
            .collect();
        let p = write(
            dir.path(),
            vec![
                ("label", Arc::new(StringArray::from(label)) as ArrayRef),
                ("ratio", Arc::new(Float64Array::from(ratio))),
            ],
        );
        let csv = dir.path().join("t.csv");
        let copy = dir.path().join("copy.parquet");
        let r = pass(&p, "t", &csv, &copy, None).unwrap();
        assert_eq!(fs_err::read(&copy).unwrap(), fs_err::read(&p).unwrap());
        let text = fs_err::read_to_string(&csv).unwrap();
        assert_eq!(text.lines().count(), n + 1);
        assert!(text.contains("\nsimulated,\nsimulated,NaN\nrecorded,3.000000\n"));
        assert_eq!((r.rows, r.head.rows.len()), (n, n));
        assert_eq!(r.recorded.rows, vec![vec!["recorded", "3.000000"]]);
        let Some(Excerpt::Extremes { column, high, low }) = r.excerpt else {
            panic!("{:?}", r.excerpt)
        };
        assert_eq!(column, "ratio");
        let values = |t: &TextTable| t.rows.iter().map(|r| r[1].clone()).collect::<Vec<_>>();
        assert_eq!(high.rows.len(), EXTREME_ROWS);
        assert_eq!(values(&high)[..3], ["59.000000", "59.000000", "58.000000"]);
        assert_eq!(
            values(&low)[..5],
            ["0.000000", "0.000000", "1.000000", "1.000000", "2.000000"]
        );
        assert!(
            !values(&low).contains(&"NaN".to_string()) && !values(&low).contains(&String::new())
        );
    }

    #[test]
    fn a_column_the_renderer_cannot_write_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            vec![(
                "blob",
                Arc::new(BinaryArray::from(vec![b"x".as_ref()])) as ArrayRef,
            )],
        );
        let e = error(&p, "copy", None);
        assert!(
            e.contains("t.parquet") && e.contains("column `blob` has type Binary"),
            "{e}"
        );
        let bad = dir.path().join("bad.parquet");
        fs_err::write(&bad, b"not parquet").unwrap();
        let e = error(&bad, "u", None);
        assert!(e.contains("bad.parquet"), "{e}");
    }

    #[test]
    fn the_copy_is_never_written_over_and_a_missing_table_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            vec![("label", Arc::new(StringArray::from(vec!["s"])) as ArrayRef)],
        );
        let copy = dir.path().join("copy.parquet");
        fs_err::write(&copy, b"someone else's").unwrap();
        let e = error(&p, "copy", None);
        assert!(e.contains("copy.parquet"), "{e}");
        assert_eq!(fs_err::read(&copy).unwrap(), b"someone else's");
        let gone = dir.path().join("gone.parquet");
        let e = error(&gone, "g", None);
        assert!(e.contains("gone.parquet"), "{e}");
        assert!(!dir.path().join("g.parquet").exists() && !dir.path().join("g.csv").exists());
    }
}
