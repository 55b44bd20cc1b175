//! Import of a JobCannon human-response CSV into one Arrow record batch.
//!
//! The schema is [`protospread_core::instrument_schema`]; nothing is inferred. Every
//! cell is parsed by the type of its column. A blank cell becomes null only in a column the
//! schema marks nullable (`locale`, `duration_seconds`, the text score columns); a blank
//! anywhere else is an error, as is every other cell that does not parse.

use crate::cells::{parse_int, parse_timestamp_micros, Bounded, IntError};
use arrow::array::{
    ArrayRef, Int32Builder, Int64Builder, Int8Builder, StringBuilder, TimestampMicrosecondBuilder,
};
use arrow::datatypes::{DataType, SchemaRef, TimeUnit};
use arrow::record_batch::RecordBatch;
use protospread_core::{instrument_schema, Instrument};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where in a CSV file an import error is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CsvPlace {
    /// The whole file (e.g. it is empty).
    File,
    /// The header row, at a 1-based column.
    Header {
        /// 1-based column.
        column: usize,
        /// Header name, if the cell has one.
        name: Option<String>,
    },
    /// A data row: 1-based among data rows, its starting line in the file, and the column.
    Row {
        /// 1-based data row.
        row: usize,
        /// 1-based line where the row starts.
        line: u64,
        /// 1-based column.
        column: usize,
        /// Column name.
        name: String,
    },
}

/// A CSV import error naming file, row (and line) and column.
#[derive(Debug, Clone)]
pub struct CsvError {
    /// The CSV file.
    pub file: PathBuf,
    /// Where in the file.
    pub place: CsvPlace,
    /// What is wrong, for the user.
    pub message: String,
    /// The reader's, parser's or limit's error behind `message`, when one found the problem.
    pub source: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

/// Errors are equal when they say the same of the same place; `message` holds the text of
/// `source`.
impl PartialEq for CsvError {
    fn eq(&self, other: &Self) -> bool {
        (&self.file, &self.place, &self.message) == (&other.file, &other.place, &other.message)
    }
}

impl Eq for CsvError {}

impl fmt::Display for CsvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.file.display())?;
        match &self.place {
            CsvPlace::File => {}
            CsvPlace::Header { column, name } => {
                write!(f, "header (line 1), column {column}")?;
                if let Some(n) = name {
                    write!(f, " `{n}`")?;
                }
                write!(f, ": ")?;
            }
            CsvPlace::Row {
                row,
                line,
                column,
                name,
            } => write!(f, "row {row} (line {line}), column {column} `{name}`: ")?,
        }
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for CsvError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// A data row left out of an import, with where and why; reported, never silent.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ExcludedRow {
    /// 1-based among data rows.
    pub row: usize,
    /// Line of the file where the row starts.
    pub line: u64,
    /// The row's `id` cell.
    pub id: String,
    /// Columns whose cells caused the exclusion.
    pub columns: Vec<String>,
    /// Why, with the first such cell verbatim.
    pub reason: String,
}

/// A human CSV as one record batch, and the rows left out of it.
#[derive(Debug, Clone)]
pub struct HumanImport {
    /// The imported rows.
    pub batch: RecordBatch,
    /// Rows set aside, with the reason.
    pub excluded: Vec<ExcludedRow>,
}

/// `Some(value)` for an item cell written as the JSON object
/// `{"value":V,"question_index":K}` whose `K` is the column's 0-based item index. One
/// career_match row stores every answer so (a different export format); its values cannot be
/// told from the app's own 0-based item numbering, so such a row is excluded and reported
/// instead of being read as integers or typing the whole column as text.
fn json_answer_cell(cell: &str, item_index: usize) -> Option<i64> {
    let inner = cell.trim().strip_prefix('{')?.strip_suffix('}')?;
    let mut value = None;
    let mut index = None;
    for part in inner.split(',') {
        let (k, v) = part.split_once(':')?;
        let v: i64 = v.trim().parse().ok()?;
        match k.trim() {
            "\"value\"" if value.is_none() => value = Some(v),
            "\"question_index\"" if index.is_none() => index = Some(v),
            _ => return None,
        }
    }
    (index? == item_index as i64).then_some(value?)
}

enum Col {
    I64(Int64Builder),
    I32(Int32Builder),
    I8(Int8Builder),
    Ts(TimestampMicrosecondBuilder),
    Str(StringBuilder),
}

impl Col {
    fn for_type(t: &DataType) -> Col {
        match t {
            DataType::Int64 => Col::I64(Int64Builder::new()),
            DataType::Int32 => Col::I32(Int32Builder::new()),
            DataType::Int8 => Col::I8(Int8Builder::new()),
            DataType::Timestamp(TimeUnit::Microsecond, tz) => {
                Col::Ts(TimestampMicrosecondBuilder::new().with_timezone_opt(tz.clone()))
            }
            DataType::Utf8 => Col::Str(StringBuilder::new()),
            other => unreachable!("instrument schemas use no {other} column"),
        }
    }

    fn push_null(&mut self) {
        match self {
            Col::I64(b) => b.append_null(),
            Col::I32(b) => b.append_null(),
            Col::I8(b) => b.append_null(),
            Col::Ts(b) => b.append_null(),
            Col::Str(b) => b.append_null(),
        }
    }

    /// Parse and append one non-blank cell; the error text describes the cell.
    fn push(&mut self, cell: &str) -> Result<(), String> {
        fn int<T: TryFrom<i128> + Bounded>(cell: &str, ty: &str) -> Result<T, String> {
            parse_int::<T>(cell).map_err(|e| match e {
                IntError::OutOfRange { .. } => format!("`{cell}` {e} ({ty})"),
                _ => format!("`{cell}` {e}"),
            })
        }
        match self {
            Col::I64(b) => b.append_value(int::<i64>(cell, "Int64")?),
            Col::I32(b) => b.append_value(int::<i32>(cell, "Int32")?),
            Col::I8(b) => b.append_value(int::<i8>(cell, "Int8")?),
            Col::Ts(b) => b.append_value(parse_timestamp_micros(cell)?),
            Col::Str(b) => b.append_value(cell),
        }
        Ok(())
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Col::I64(b) => Arc::new(b.finish()),
            Col::I32(b) => Arc::new(b.finish()),
            Col::I8(b) => Arc::new(b.finish()),
            Col::Ts(b) => Arc::new(b.finish()),
            Col::Str(b) => Arc::new(b.finish()),
        }
    }
}

/// Import the bytes of a human-response CSV of `inst`. `file` only names the file in errors.
///
/// The first record must be exactly the instrument's header
/// ([`Instrument::columns`]; the csv reader skips a UTF-8 byte-order mark at the very start); every later record must have exactly that many fields. Rows
/// are sorted by `id` (the JobCannon files already are, so their order is kept), because the
/// score stage streams them in id order. A file with a header but no data row is an error, as is an empty
/// file or one that is not UTF-8.
pub fn import_human_csv(
    file: &Path,
    bytes: &[u8],
    inst: &Instrument,
) -> Result<RecordBatch, CsvError> {
    import_human_csv_reporting(file, bytes, inst).map(|h| h.batch)
}

/// [`import_human_csv`], also returning the rows it left out: a row whose item cells are
/// JSON objects `{"value":V,"question_index":K}` (see `docs/fetch.md`) is excluded and
/// listed; any other cell that does not parse is an error.
pub fn import_human_csv_reporting(
    file: &Path,
    bytes: &[u8],
    inst: &Instrument,
) -> Result<HumanImport, CsvError> {
    let mut batches = Vec::new();
    let streamed = import_human_csv_stream(file, bytes, inst, |b| {
        batches.push(b);
        Ok::<(), std::convert::Infallible>(())
    })
    .map_err(|e| match e {
        HumanStreamError::Csv(e) => e,
        HumanStreamError::Sink(never) => match never {},
    })?;
    let arrow_err = |e: arrow::error::ArrowError| CsvError {
        file: file.to_path_buf(),
        place: CsvPlace::File,
        message: format!("arrow: {e}"),
        source: Some(Arc::new(e)),
    };
    let batch =
        arrow::compute::concat_batches(&instrument_schema(inst), &batches).map_err(arrow_err)?;
    let batch = sort_by_id(batch).map_err(arrow_err)?;
    Ok(HumanImport {
        batch,
        excluded: streamed.excluded,
    })
}

/// Rows per batch of [`import_human_csv_stream`]: a multiple of the Parquet writer's mini-batch
/// (1024 rows), so a file written batch by batch has the bytes of one written at once.
pub const HUMAN_BATCH_ROWS: usize = 64 * 1024;

/// What [`import_human_csv_stream`] read.
#[derive(Debug, Clone)]
pub struct HumanStream {
    /// Rows handed to the sink.
    pub rows: usize,
    /// Rows set aside, with the reason.
    pub excluded: Vec<ExcludedRow>,
    /// The ids were strictly ascending, so the rows went out in id order. Otherwise the caller
    /// must sort them by `id`: the score stage reads them in id order.
    pub ascending: bool,
}

/// An error of [`import_human_csv_stream`]: the CSV's, or the sink's.
#[derive(Debug)]
pub enum HumanStreamError<E> {
    /// The CSV does not import (names file, row, line and column).
    Csv(CsvError),
    /// The sink refused a batch.
    Sink(E),
}

/// [`import_human_csv_reporting`] read from `reader` and handed to `sink` in batches of
/// [`HUMAN_BATCH_ROWS`] rows, in file order, so that a large file is never held whole. Memory
/// is one batch, 16 bytes per row for the duplicate-id check (each id and its row, kept while
/// the ids ascend) and a hash entry per row after the first id out of order. The checks and
/// their errors are those of [`import_human_csv_reporting`], at the first violating row;
/// batches handed out before an error are the caller's to discard.
pub fn import_human_csv_stream<R: std::io::Read, E>(
    file: &Path,
    reader: R,
    inst: &Instrument,
    mut sink: impl FnMut(RecordBatch) -> Result<(), E>,
) -> Result<HumanStream, HumanStreamError<E>> {
    let mut parser = HumanParser::new(file, reader, inst).map_err(HumanStreamError::Csv)?;
    while let Some(batch) = parser.next_batch().map_err(HumanStreamError::Csv)? {
        sink(batch).map_err(HumanStreamError::Sink)?;
    }
    Ok(HumanStream {
        rows: parser.rows_out,
        excluded: parser.excluded,
        ascending: parser.ids.ascending(),
    })
}

/// The ids seen so far, for the duplicate check: while they ascend, a sorted list (a new id
/// above the last cannot repeat one); after the first id out of order, also a hash map.
#[derive(Default)]
struct SeenIds {
    ascending: Vec<(i64, usize)>,
    later: Option<std::collections::HashMap<i64, usize>>,
}

impl SeenIds {
    /// Record `id` of data row `row`; `Err(first_row)` if an earlier row had it.
    fn insert(&mut self, id: i64, row: usize) -> Result<(), usize> {
        if self.later.is_none() && self.ascending.last().is_none_or(|&(last, _)| id > last) {
            self.ascending.push((id, row));
            return Ok(());
        }
        if let Ok(i) = self.ascending.binary_search_by_key(&id, |&(v, _)| v) {
            return Err(self.ascending[i].1);
        }
        let later = self.later.get_or_insert_with(Default::default);
        match later.entry(id) {
            std::collections::hash_map::Entry::Occupied(e) => Err(*e.get()),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(row);
                Ok(())
            }
        }
    }

    fn ascending(&self) -> bool {
        self.later.is_none()
    }
}

/// A human CSV being read: the header checked, then rows parsed into column builders.
struct HumanParser<R: std::io::Read> {
    file: PathBuf,
    rdr: csv::Reader<protospread_core::CsvLimiter<std::io::BufReader<R>>>,
    rec: csv::ByteRecord,
    schema: SchemaRef,
    expected: Vec<String>,
    cols: Vec<Col>,
    nullable: Vec<bool>,
    id_col: Option<usize>,
    item_cols: Vec<(usize, usize)>,
    excluded: Vec<ExcludedRow>,
    ids: SeenIds,
    /// Data rows read (excluded ones included): the `row` of errors.
    row: usize,
    rows_out: usize,
    done: bool,
}

impl<R: std::io::Read> HumanParser<R> {
    fn err(&self, place: CsvPlace, message: String) -> CsvError {
        CsvError {
            file: self.file.clone(),
            place,
            message,
            source: None,
        }
    }

    /// [`Self::err`] with the error that found the problem, whose text ends `message`.
    fn err_from(
        &self,
        place: CsvPlace,
        message: String,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> CsvError {
        CsvError {
            source: Some(Arc::new(source)),
            ..self.err(place, message)
        }
    }

    fn read(&mut self) -> Result<bool, CsvError> {
        self.rdr.read_byte_record(&mut self.rec).map_err(|e| {
            let too_large = match e.kind() {
                csv::ErrorKind::Io(io) => protospread_core::TooLarge::in_io(io),
                _ => None,
            };
            match too_large {
                Some(t) => self.too_large(t),
                None => self.err_from(CsvPlace::File, format!("CSV: {e}"), e),
            }
        })
    }

    /// A cell or row over the input size limits (`protospread_core::MAX_CELL_BYTES`), named
    /// by its row and column.
    fn too_large(&self, t: &protospread_core::TooLarge) -> CsvError {
        let protospread_core::Place::Record {
            record,
            line,
            field,
        } = t.place
        else {
            return self.err_from(CsvPlace::File, t.to_string(), t.clone());
        };
        let column = field.unwrap_or(0) + 1;
        let name = self.expected.get(column - 1).cloned();
        let place = if record == 0 {
            CsvPlace::Header { column, name }
        } else {
            CsvPlace::Row {
                row: record as usize,
                line,
                column,
                name: name.unwrap_or_else(|| "(none)".to_string()),
            }
        };
        self.err_from(place, t.to_string(), t.clone())
    }

    /// Open `reader` and check its header against `inst`'s columns.
    fn new(file: &Path, reader: R, inst: &Instrument) -> Result<Self, CsvError> {
        let schema: SchemaRef = instrument_schema(inst);
        let mut reader = std::io::BufReader::new(reader);
        let first = std::io::BufRead::fill_buf(&mut reader).map_err(|e| CsvError {
            file: file.to_path_buf(),
            place: CsvPlace::File,
            message: format!("reading: {e}"),
            source: Some(Arc::new(e)),
        })?;
        let empty = first.is_empty();
        let expected = inst.columns();
        let mut p = HumanParser {
            file: file.to_path_buf(),
            rdr: csv::ReaderBuilder::new()
                .has_headers(false)
                .flexible(true)
                .from_reader(protospread_core::CsvLimiter::new(reader)),
            rec: csv::ByteRecord::new(),
            cols: schema
                .fields()
                .iter()
                .map(|f| Col::for_type(f.data_type()))
                .collect(),
            nullable: schema.fields().iter().map(|f| f.is_nullable()).collect(),
            id_col: expected.iter().position(|c| c == "id"),
            item_cols: expected
                .iter()
                .enumerate()
                .filter_map(|(i, c)| {
                    let n: usize = c.strip_prefix('q')?.parse().ok()?;
                    (schema.field(i).data_type() == &DataType::Int8).then_some((i, n - 1))
                })
                .collect(),
            schema,
            expected,
            excluded: Vec::new(),
            ids: SeenIds::default(),
            row: 0,
            rows_out: 0,
            done: false,
        };
        if empty {
            return Err(p.err(
                CsvPlace::File,
                "empty file: expected a header row".to_string(),
            ));
        }
        if !p.read()? {
            return Err(p.err(
                CsvPlace::File,
                "no records: expected a header row".to_string(),
            ));
        }
        p.check_header(inst)?;
        Ok(p)
    }

    fn check_header(&self, inst: &Instrument) -> Result<(), CsvError> {
        let (rec, expected) = (&self.rec, &self.expected);
        for (i, field) in rec.iter().enumerate() {
            let column = i + 1;
            let name = std::str::from_utf8(field).map_err(|e| {
                self.err(
                    CsvPlace::Header { column, name: None },
                    format!("not UTF-8 (invalid byte at offset {})", e.valid_up_to()),
                )
            })?;
            match expected.get(i) {
                None => {
                    return Err(self.err(
                        CsvPlace::Header {
                            column,
                            name: Some(name.to_string()),
                        },
                        format!(
                            "extra column: header has {} columns, {} expects {}",
                            rec.len(),
                            inst.name,
                            expected.len()
                        ),
                    ))
                }
                Some(want) if want.as_str() != name => {
                    return Err(self.err(
                        CsvPlace::Header {
                            column,
                            name: Some(name.to_string()),
                        },
                        format!("expected `{want}`"),
                    ));
                }
                Some(_) => {}
            }
        }
        if rec.len() < expected.len() {
            return Err(self.err(
                CsvPlace::Header {
                    column: rec.len() + 1,
                    name: None,
                },
                format!(
                    "missing column `{}`: header has {} columns, {} expects {}",
                    expected[rec.len()],
                    rec.len(),
                    inst.name,
                    expected.len()
                ),
            ));
        }
        Ok(())
    }

    /// The next batch of at most [`HUMAN_BATCH_ROWS`] rows; `None` after the last.
    fn next_batch(&mut self) -> Result<Option<RecordBatch>, CsvError> {
        let mut in_batch = 0usize;
        while !self.done && in_batch < HUMAN_BATCH_ROWS {
            if !self.read()? {
                self.done = true;
                if self.row == 0 {
                    return Err(
                        self.err(CsvPlace::File, "no data rows after the header".to_string())
                    );
                }
                break;
            }
            self.row += 1;
            if self.parse_row()? {
                in_batch += 1;
            }
        }
        if in_batch == 0 {
            return Ok(None);
        }
        self.rows_out += in_batch;
        let arrays: Vec<ArrayRef> = self.cols.iter_mut().map(Col::finish).collect();
        RecordBatch::try_new(self.schema.clone(), arrays)
            .map(Some)
            .map_err(|e| self.err(CsvPlace::File, format!("arrow: {e}")))
    }

    /// Parse the current record into the builders; `false` when it is excluded instead.
    fn parse_row(&mut self) -> Result<bool, CsvError> {
        let (row, expected) = (self.row, &self.expected);
        let rec = &self.rec;
        let line = rec.position().map(|p| p.line()).unwrap_or(0);
        let place = |column: usize| CsvPlace::Row {
            row,
            line,
            column,
            name: expected
                .get(column - 1)
                .cloned()
                .unwrap_or_else(|| "(none)".to_string()),
        };
        if rec.len() != expected.len() {
            // The first column one of them lacks.
            let (what, column) = if rec.len() < expected.len() {
                ("missing", rec.len() + 1)
            } else {
                ("extra column", expected.len() + 1)
            };
            return Err(self.err(
                place(column),
                format!(
                    "{what}: the row has {} columns, the header {}",
                    rec.len(),
                    expected.len()
                ),
            ));
        }
        let json_cells: Vec<usize> = self
            .item_cols
            .iter()
            .filter(|(i, k)| {
                std::str::from_utf8(&rec[*i])
                    .ok()
                    .is_some_and(|c| json_answer_cell(c, *k).is_some())
            })
            .map(|(i, _)| *i)
            .collect();
        // Excluded only when every other item cell is an integer: any other odd cell is an
        // error naming it (below).
        let rest_are_ints = self.item_cols.iter().all(|(i, _)| {
            json_cells.contains(i)
                || std::str::from_utf8(&rec[*i])
                    .ok()
                    .is_some_and(|c| c.trim().parse::<i64>().is_ok())
        });
        if let (Some(&first), true) = (json_cells.first(), rest_are_ints) {
            self.excluded.push(ExcludedRow {
                row,
                line,
                id: String::from_utf8_lossy(&rec[0]).into_owned(),
                columns: json_cells.iter().map(|i| expected[*i].clone()).collect(),
                reason: format!(
                    "answers written as JSON objects ({}) instead of integers",
                    String::from_utf8_lossy(&rec[first])
                ),
            });
            return Ok(false);
        }
        for (i, field) in rec.iter().enumerate() {
            let cell = std::str::from_utf8(field).map_err(|e| {
                self.err(
                    place(i + 1),
                    format!("not UTF-8 (invalid byte at offset {})", e.valid_up_to()),
                )
            })?;
            if cell.is_empty() {
                if self.nullable[i] {
                    self.cols[i].push_null();
                    continue;
                }
                return Err(self.err(
                    place(i + 1),
                    "blank, but this column requires a value".to_string(),
                ));
            }
            self.cols[i]
                .push(cell)
                .map_err(|m| self.err(place(i + 1), m))?;
            if Some(i) == self.id_col {
                // The id column is Int64: the cell just parsed as one. Compared as numbers,
                // so `7` and `07` are the same id.
                let value = parse_int::<i64>(cell)
                    .map_err(|e| self.err_from(place(i + 1), e.to_string(), e))?;
                if let Err(first) = self.ids.insert(value, row) {
                    return Err(self.err(
                        place(i + 1),
                        format!(
                            "duplicate id {cell} (first in row {first}); every row must have its own id"
                        ),
                    ));
                }
            }
        }
        Ok(true)
    }
}

/// `batch` in ascending `id` order. The score stage reads the rows in record batches and
/// writes its per-row tables as it goes, so it needs them in id order; a file already in that
/// order is returned as it is (no copy).
fn sort_by_id(batch: RecordBatch) -> Result<RecordBatch, arrow::error::ArrowError> {
    let Some(ids) = batch
        .column_by_name("id")
        .and_then(|c| c.as_any().downcast_ref::<arrow::array::Int64Array>())
    else {
        return Ok(batch);
    };
    if ids.values().windows(2).all(|w| w[0] < w[1]) {
        return Ok(batch);
    }
    let order = arrow::compute::sort_to_indices(ids, None, None)?;
    arrow::compute::take_record_batch(&batch, &order)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, Int8Array, StringArray, TimestampMicrosecondArray};
    use protospread_core::{instrument_by_name, DARK_TRIAD};

    fn header(inst: &Instrument) -> String {
        inst.columns().join(",")
    }

    fn row(id: u32, ts: &str, q: &str) -> String {
        format!("{id},{ts},,,narcissism,1,2,3,{q}")
    }

    fn items(v: &str) -> String {
        vec![v; 18].join(",")
    }

    fn good() -> String {
        format!(
            "{}\n{}\n{}\n",
            header(&DARK_TRIAD),
            row(1, "2026-03-10T15:48:45.624832+00:00", &items("3")),
            row(2, "2026-04-03T20:50:20.089+00:00", &items("0"))
        )
    }

    /// A cell over the input limit is refused naming its row and column, with the limit's own
    /// error as the cause.
    #[test]
    fn a_cell_over_the_limit_keeps_the_limit_as_its_cause() {
        let big = "x".repeat(protospread_core::MAX_CELL_BYTES + 1);
        let text = format!("{}\n{}\n", header(&DARK_TRIAD), row(1, &big, &items("3")));
        let e = import_human_csv(Path::new("dt.csv"), text.as_bytes(), &DARK_TRIAD).unwrap_err();
        let cause = std::error::Error::source(&e)
            .and_then(|s| s.downcast_ref::<protospread_core::TooLarge>());
        assert_eq!(
            cause.map(|t| t.what),
            Some(protospread_core::Limited::Cell),
            "{e}"
        );
        assert!(
            e.to_string()
                .starts_with("dt.csv: row 1 (line 2), column 2 `created_at`: cell"),
            "{e}"
        );
    }

    #[test]
    fn a_row_of_json_object_answers_is_excluded_and_reported() {
        let inst = instrument_by_name("career_match").unwrap();
        let ints: Vec<String> = (0..12).map(|i| (i % 5).to_string()).collect();
        let objs: Vec<String> = (0..12)
            .map(|i| format!("\"{{\"\"value\"\":{},\"\"question_index\"\":{i}}}\"", i % 2))
            .collect();
        let text = format!(
            "{}\n1,2026-03-31T14:03:30.424+00:00,,,E,0,3,19,6,6,0,{}\n2,2026-03-31T14:03:30.424+00:00,en,120,IA,40,14,16,48,24,18,{}\n",
            header(inst),
            ints.join(","),
            objs.join(",")
        );
        let h = import_human_csv_reporting(Path::new("cm.csv"), text.as_bytes(), inst).unwrap();
        assert_eq!(h.batch.num_rows(), 1);
        assert_eq!(
            h.batch.schema().field_with_name("q1").unwrap().data_type(),
            &DataType::Int8
        );
        assert_eq!(h.excluded.len(), 1);
        let x = &h.excluded[0];
        assert_eq!(
            (x.row, x.line, x.id.as_str(), x.columns.len()),
            (2, 3, "2", 12)
        );
        assert!(
            x.reason.contains(r#"{"value":0,"question_index":0}"#),
            "{}",
            x.reason
        );
        // An object naming another item is not this form: an error naming the cell.
        let wrong = text.replace(r#"""question_index"":0}"#, r#"""question_index"":5}"#);
        let m = import_human_csv(Path::new("cm.csv"), wrong.as_bytes(), inst)
            .unwrap_err()
            .to_string();
        assert!(m.contains("row 2 (line 3), column 12 `q1`"), "{m}");
    }

    #[test]
    fn duplicate_id_is_refused_with_row_and_column() {
        let text = format!(
            "{}\n{}\n{}\n",
            header(&DARK_TRIAD),
            row(7, "2026-03-10T15:48:45.624832+00:00", &items("3")),
            row(7, "2026-04-03T20:50:20.089+00:00", &items("0"))
        );
        let m = e(&text);
        assert!(
            m.contains("row 2 (line 3), column 1 `id`")
                && m.contains("duplicate id 7 (first in row 1)"),
            "{m}"
        );
    }

    fn e(text: &str) -> String {
        import_human_csv(Path::new("dt.csv"), text.as_bytes(), &DARK_TRIAD)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn good_file_imports_with_nulls() {
        let b = import_human_csv(Path::new("dt.csv"), good().as_bytes(), &DARK_TRIAD).unwrap();
        assert_eq!(b.num_rows(), 2);
        assert_eq!(b.schema(), instrument_schema(&DARK_TRIAD));
        let loc = b
            .column_by_name("locale")
            .unwrap()
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        assert!(loc.is_null(0));
        assert!(b.column_by_name("duration_seconds").unwrap().is_null(1));
        let q = b
            .column_by_name("q18")
            .unwrap()
            .as_any()
            .downcast_ref::<Int8Array>()
            .unwrap();
        assert_eq!(q.values().to_vec(), vec![3, 0]);
        let ts = b
            .column_by_name("created_at")
            .unwrap()
            .as_any()
            .downcast_ref::<TimestampMicrosecondArray>()
            .unwrap();
        assert_eq!(ts.value(1), 1_775_249_420_089_000);
    }

    #[test]
    fn bad_cells_name_row_line_column() {
        let mut t = good();
        t = t.replacen(",3,3,3,3", ",3,x,3,3", 1);
        let m = e(&t);
        assert!(m.starts_with("dt.csv: row 1 (line 2), column "), "{m}");
        assert!(m.contains("`x` is not an integer"), "{m}");

        let t = good().replacen(",0,0,0", ",0,200,0", 1);
        let m = e(&t);
        assert!(
            m.contains("row 2 (line 3)") && m.contains("outside -128..=127 (Int8)"),
            "{m}"
        );

        let t = good().replace("2026-04-03T20:50:20.089+00:00", "2026-04-03 20:50:20");
        let m = e(&t);
        assert!(m.contains("row 2 (line 3), column 2 `created_at`"), "{m}");

        let t = good().replacen(",narcissism,", ",,", 1);
        let m = e(&t);
        assert!(m.contains("column 5 `top_result`: blank"), "{m}");
    }

    #[test]
    fn column_count_errors() {
        let t = good().trim_end().to_string() + ",0\n";
        let m = e(&t);
        assert!(
            m.contains("row 2 (line 3), column 27 `(none)`: extra column"),
            "{m}"
        );
        let g = good();
        let lines: Vec<&str> = g.lines().collect();
        let short = format!("{}\n{}\n", lines[0], lines[1].rsplit_once(',').unwrap().0);
        let m = e(&short);
        assert!(
            m.contains("row 1 (line 2), column 26 `q18`: missing"),
            "{m}"
        );
        let m = e(&good().replacen(",q18", "", 1));
        assert!(
            m.contains("header (line 1), column 26: missing column `q18`"),
            "{m}"
        );
        let m = e(&good().replacen(",q18", ",q18,q19", 1));
        assert!(
            m.contains("header (line 1), column 27 `q19`: extra column"),
            "{m}"
        );
        let m = e(&good().replacen("locale", "loc", 1));
        assert!(m.contains("column 3 `loc`: expected `locale`"), "{m}");
    }

    #[test]
    fn empty_header_only_and_non_utf8() {
        assert!(e("").contains("empty file"));
        assert!(e(&format!("{}\n", header(&DARK_TRIAD))).contains("no data rows"));
        let mut bytes = good().into_bytes();
        let header_end = bytes.iter().position(|b| *b == b'\n').unwrap();
        let pos = header_end
            + bytes[header_end..]
                .windows(10)
                .position(|w| w == b"narcissism")
                .unwrap();
        bytes[pos + 1] = 0xff;
        let m = import_human_csv(Path::new("dt.csv"), &bytes, &DARK_TRIAD)
            .unwrap_err()
            .to_string();
        assert!(
            m.contains("row 1 (line 2), column 5 `top_result`: not UTF-8"),
            "{m}"
        );
        // The csv reader skips a UTF-8 byte-order mark at the very start; elsewhere it is text.
        let bom = format!("\u{feff}{}", good());
        assert!(import_human_csv(Path::new("dt.csv"), bom.as_bytes(), &DARK_TRIAD).is_ok());
        let m = e(&good().replacen("locale", "\u{feff}locale", 1));
        assert!(m.contains("column 3"), "{m}");
    }

    #[test]
    fn line_numbers_follow_quoted_newlines() {
        let inst = instrument_by_name("riasec").unwrap();
        let q = vec!["1"; 60].join(",");
        let text = format!(
            "{}\n1,2026-03-10T15:48:45Z,,,RIE,1,2,3,4,5,6,\"{{\n}}\",{q}\n2,2026-03-10T15:48:45Z,,,RIE,1,2,3,4,5,6,,{}\n",
            header(inst),
            q.replacen('1', "x", 1)
        );
        let m = import_human_csv(Path::new("r.csv"), text.as_bytes(), inst)
            .unwrap_err()
            .to_string();
        assert!(m.contains("row 2 (line 4), column 13 `q1`"), "{m}");
    }
}
