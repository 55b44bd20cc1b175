//! Human rows of one instrument: the stored answers and the product's stored scores.
//!
//! The score stage reads the fetch stage's Parquet (`out/fetch/human/<instrument>.parquet`,
//! schema `core::instruments::arrow_schema`). [`read_csv`] reads the original CSV with the
//! same strictness, for tests and for `protospread score --human-csv DIR`.

use crate::ScoreError;
use arrow::array::{Array, Int32Array, Int64Array, Int8Array, StringArray};
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use protospread_core::{Instrument, ItemKind};
use std::path::{Path, PathBuf};

/// Rows per chunk when the score stage streams the human rows: memory for the rows in flight
/// is this many rows, whatever the size of the file.
pub const HUMAN_CHUNK_ROWS: usize = 8192;

/// Where the human rows of one instrument come from.
#[derive(Debug, Clone)]
pub enum HumanSource {
    /// The fetch stage's Parquet file, read in record batches; its ids must be strictly
    /// ascending (the fetch stage writes them so).
    Parquet(PathBuf),
    /// Rows already in memory (the original CSV), in ascending id order.
    Rows(Vec<HumanRow>),
}

impl HumanSource {
    /// Rows in memory, sorted by id (stable: rows with one id keep their order).
    pub fn rows(mut rows: Vec<HumanRow>) -> HumanSource {
        rows.sort_by_key(|r| r.id);
        HumanSource::Rows(rows)
    }

    /// Call `f` on the rows in id order, at most `chunk_rows` rows at a time. `origin` names
    /// the source in errors.
    pub fn for_each_chunk(
        &self,
        inst: &Instrument,
        origin: &Path,
        chunk_rows: usize,
        mut f: impl FnMut(&[HumanRow]) -> Result<(), ScoreError>,
    ) -> Result<(), ScoreError> {
        let chunk_rows = chunk_rows.max(1);
        match self {
            HumanSource::Rows(rows) => rows.chunks(chunk_rows).try_for_each(f),
            HumanSource::Parquet(path) => {
                check_int(inst)?;
                let perr = |source: parquet::errors::ParquetError| ScoreError::Parquet {
                    path: path.clone(),
                    source,
                };
                let file = fs_err::File::open(path)?.into_parts().0;
                let reader = ParquetRecordBatchReaderBuilder::try_new(file)
                    .map_err(perr)?
                    .with_batch_size(chunk_rows)
                    .build()
                    .map_err(perr)?;
                let (mut seen, mut last) = (0usize, None::<i64>);
                for b in reader {
                    let b =
                        b.map_err(|e| perr(parquet::errors::ParquetError::External(Box::new(e))))?;
                    let rows = rows_of_batch(inst, &b, origin, seen)?;
                    for (k, r) in rows.iter().enumerate() {
                        if let Some(prev) = last.filter(|p| r.id <= *p) {
                            return Err(ScoreError::cell(
                                origin,
                                seen + k + 2,
                                "id",
                                format!(
                                    "id {} follows id {prev}: the rows must be in ascending id order, as `protospread fetch` writes them",
                                    r.id
                                ),
                            ));
                        }
                        last = Some(r.id);
                    }
                    seen += rows.len();
                    f(&rows)?;
                }
                Ok(())
            }
        }
    }

    /// Every row at once (for the diagnostics `score --evidence` and `score --mutate`).
    pub fn load(&self, inst: &Instrument, origin: &Path) -> Result<Vec<HumanRow>, ScoreError> {
        match self {
            HumanSource::Rows(rows) => Ok(rows.clone()),
            HumanSource::Parquet(_) => {
                let mut out = Vec::new();
                self.for_each_chunk(inst, origin, HUMAN_CHUNK_ROWS, |c| {
                    out.extend_from_slice(c);
                    Ok(())
                })?;
                Ok(out)
            }
        }
    }
}

/// One completed assessment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HumanRow {
    /// The file's anonymous sequential `id`.
    pub id: i64,
    /// Top result as the site reported it.
    pub top_result: String,
    /// `score_<dim>` in the instrument's dimension order.
    pub scores: Vec<i32>,
    /// `score_percentiles` (RIASEC only; a JSON object or absent).
    pub percentiles: Option<String>,
    /// `q1..qN` as stored (0..4 expected; some cells hold 5 or 6).
    pub answers: Vec<u8>,
}

impl HumanRow {
    /// The answers as the scorer takes them (every item answered).
    pub fn answer_vector(&self) -> Vec<Option<u8>> {
        self.answers.iter().map(|&a| Some(a)).collect()
    }
}

fn check_int(inst: &Instrument) -> Result<(), ScoreError> {
    if inst.item_kind != ItemKind::Int {
        return Err(ScoreError::Score {
            test: inst.name.to_string(),
            message: "items are not integers; this instrument is not scored".into(),
        });
    }
    Ok(())
}

/// Column `name` of `b` (read from `origin`) as an array of type `T`; an error names the file
/// and the column that is missing or of another type.
pub(crate) fn column<'a, T: 'static>(
    b: &'a RecordBatch,
    origin: &Path,
    name: &str,
) -> Result<&'a T, ScoreError> {
    let a = b
        .column_by_name(name)
        .ok_or_else(|| ScoreError::file(origin, format!("missing column {name}")))?;
    a.as_any().downcast_ref::<T>().ok_or_else(|| {
        ScoreError::file(origin, format!("column {name} has type {}", a.data_type()))
    })
}

/// The rows of one batch; `before` rows of the same file precede it (for line numbers).
fn rows_of_batch(
    inst: &Instrument,
    b: &RecordBatch,
    origin: &Path,
    before: usize,
) -> Result<Vec<HumanRow>, ScoreError> {
    let mut out = Vec::with_capacity(b.num_rows());
    let ids = column::<Int64Array>(b, origin, "id")?;
    let tops = column::<StringArray>(b, origin, "top_result")?;
    let mut scores = Vec::new();
    for d in inst.dimensions {
        let n = format!("score_{d}");
        scores.push((column::<Int32Array>(b, origin, &n)?, n));
    }
    let pct = match inst.text_scores.contains(&"percentiles") {
        true => Some(column::<StringArray>(b, origin, "score_percentiles")?),
        false => None,
    };
    let mut qs = Vec::new();
    for i in 1..=inst.items {
        let n = format!("q{i}");
        qs.push((column::<Int8Array>(b, origin, &n)?, n));
    }
    for r in 0..b.num_rows() {
        let line = before + out.len() + 2;
        let null = |c: &str| ScoreError::cell(origin, line, c, "empty cell");
        if ids.is_null(r) {
            return Err(null("id"));
        }
        if tops.is_null(r) {
            return Err(null("top_result"));
        }
        let mut sc = Vec::new();
        for (a, n) in &scores {
            if a.is_null(r) {
                return Err(null(n));
            }
            sc.push(a.value(r));
        }
        let mut ans = Vec::new();
        for (a, n) in &qs {
            if a.is_null(r) {
                return Err(null(n));
            }
            let v = a.value(r);
            ans.push(
                u8::try_from(v).map_err(|_| {
                    ScoreError::cell(origin, line, n, format!("negative answer {v}"))
                })?,
            );
        }
        out.push(HumanRow {
            id: ids.value(r),
            top_result: tops.value(r).to_string(),
            scores: sc,
            percentiles: pct
                .filter(|p| !p.is_null(r))
                .map(|p| p.value(r).to_string()),
            answers: ans,
        });
    }
    Ok(out)
}

/// A reader of a CSV file read whole.
pub(crate) type CsvReader = csv::Reader<std::io::Cursor<Vec<u8>>>;

/// A reader of the CSV file `path`, read whole, and its header row.
pub(crate) fn open_csv(path: &Path) -> Result<(CsvReader, csv::StringRecord), ScoreError> {
    let bytes = fs_err::read(path)?;
    let mut rdr = csv::ReaderBuilder::new().from_reader(std::io::Cursor::new(bytes));
    let header = rdr
        .headers()
        .map_err(|e| ScoreError::file(path, format!("header: {e}")))?
        .clone();
    Ok((rdr, header))
}

/// The records `rdr` reads from the CSV file `path`, each with its line (the header is line
/// 1); a row that does not parse is an error naming its line.
pub(crate) fn csv_rows<'r, R: std::io::Read + 'r>(
    path: &'r Path,
    rdr: &'r mut csv::Reader<R>,
) -> impl Iterator<Item = Result<(usize, csv::StringRecord), ScoreError>> + 'r {
    rdr.records().map(move |rec| {
        let rec = rec.map_err(|e| {
            let line = e.position().map(|p| p.line() as usize).unwrap_or(0);
            ScoreError::cell(path, line, "-", format!("malformed CSV row: {e}"))
        })?;
        let line = rec.position().map(|p| p.line() as usize).unwrap_or(0);
        Ok((line, rec))
    })
}

/// Rows from the original JobCannon CSV. Every cell the scorer uses must parse; an error
/// names file, line and column.
pub fn read_human_csv(inst: &Instrument, path: &Path) -> Result<Vec<HumanRow>, ScoreError> {
    check_int(inst)?;
    let (mut rdr, header) = open_csv(path)?;
    let expected = inst.columns();
    let got: Vec<&str> = header.iter().collect();
    if got != expected.iter().map(|s| s.as_str()).collect::<Vec<_>>() {
        return Err(ScoreError::file(
            path,
            format!(
                "header is not the {} columns of {}",
                expected.len(),
                inst.name
            ),
        ));
    }
    let pos = |c: &str| expected.iter().position(|e| e == c).expect("own column");
    let mut out = Vec::new();
    for rec in csv_rows(path, &mut rdr) {
        let (line, rec) = rec?;
        let get = |c: &str| rec.get(pos(c)).unwrap_or("");
        fn num<T: std::str::FromStr>(
            path: &Path,
            line: usize,
            c: &str,
            s: &str,
        ) -> Result<T, ScoreError> {
            s.parse()
                .map_err(|_| ScoreError::cell(path, line, c, format!("`{s}` is not an integer")))
        }
        let id: i64 = num(path, line, "id", get("id"))?;
        let mut scores = Vec::new();
        for d in inst.dimensions {
            let c = format!("score_{d}");
            scores.push(num::<i32>(path, line, &c, get(&c))?);
        }
        let percentiles = match inst.text_scores.contains(&"percentiles") {
            true => Some(get("score_percentiles").to_string()).filter(|s| !s.is_empty()),
            false => None,
        };
        let mut answers = Vec::new();
        for i in 1..=inst.items {
            let c = format!("q{i}");
            answers.push(num::<u8>(path, line, &c, get(&c))?);
        }
        let top = get("top_result");
        if top.is_empty() {
            return Err(ScoreError::cell(path, line, "top_result", "empty cell"));
        }
        out.push(HumanRow {
            id,
            top_result: top.to_string(),
            scores,
            percentiles,
            answers,
        });
    }
    Ok(out)
}
