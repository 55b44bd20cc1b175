//! Human rows of one instrument: the stored answers and the product's stored scores.
//!
//! The score stage reads the fetch stage's Parquet (`out/fetch/human/<instrument>.parquet`,
//! schema `core::instruments::arrow_schema`). [`read_csv`] reads the original CSV with the
//! same strictness, for tests and for `protospread score --human-csv DIR`.

use crate::ScoreError;
use arrow::array::{Array, Int32Array, Int64Array, Int8Array, StringArray};
use arrow::record_batch::RecordBatch;
use protospread_core::instruments::{Instrument, ItemKind};
use std::path::Path;

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

/// Rows from record batches with the schema `core::instruments::arrow_schema(inst)`. `origin`
/// names the source in errors; `line` in an error is the 1-based data row + 1 (as in the CSV).
pub fn from_batches(
    inst: &Instrument,
    batches: &[RecordBatch],
    origin: &Path,
) -> Result<Vec<HumanRow>, ScoreError> {
    check_int(inst)?;
    let mut out = Vec::new();
    for b in batches {
        let col = |name: &str| {
            b.column_by_name(name)
                .ok_or_else(|| ScoreError::file(origin, format!("missing column {name}")))
        };
        fn typed<'a, T: 'static>(
            a: &'a dyn Array,
            origin: &Path,
            name: &str,
        ) -> Result<&'a T, ScoreError> {
            a.as_any().downcast_ref::<T>().ok_or_else(|| {
                ScoreError::file(origin, format!("column {name} has type {}", a.data_type()))
            })
        }
        let ids = typed::<Int64Array>(col("id")?.as_ref(), origin, "id")?;
        let tops = typed::<StringArray>(col("top_result")?.as_ref(), origin, "top_result")?;
        let mut scores = Vec::new();
        for d in inst.dimensions {
            let n = format!("score_{d}");
            scores.push((typed::<Int32Array>(col(&n)?.as_ref(), origin, &n)?, n));
        }
        let pct = match inst.text_scores.contains(&"percentiles") {
            true => Some(typed::<StringArray>(
                col("score_percentiles")?.as_ref(),
                origin,
                "score_percentiles",
            )?),
            false => None,
        };
        let mut qs = Vec::new();
        for i in 1..=inst.items {
            let n = format!("q{i}");
            qs.push((typed::<Int8Array>(col(&n)?.as_ref(), origin, &n)?, n));
        }
        for r in 0..b.num_rows() {
            let line = out.len() + 2;
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
                ans.push(u8::try_from(v).map_err(|_| {
                    ScoreError::cell(origin, line, n, format!("negative answer {v}"))
                })?);
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
    }
    Ok(out)
}

/// Rows from the fetch stage's Parquet file.
pub fn read_parquet(inst: &Instrument, path: &Path) -> Result<Vec<HumanRow>, ScoreError> {
    let (_, batches) = protospread_core::pq::read(path)?;
    from_batches(inst, &batches, path)
}

/// Rows from the original JobCannon CSV. Every cell the scorer uses must parse; an error
/// names file, line and column.
pub fn read_csv(inst: &Instrument, path: &Path) -> Result<Vec<HumanRow>, ScoreError> {
    check_int(inst)?;
    let bytes = fs_err::read(path)?;
    let mut rdr = csv::ReaderBuilder::new().from_reader(bytes.as_slice());
    let header = rdr
        .headers()
        .map_err(|e| ScoreError::file(path, format!("header: {e}")))?
        .clone();
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
    for rec in rdr.records() {
        let rec = rec.map_err(|e| {
            let line = e.position().map(|p| p.line() as usize).unwrap_or(0);
            ScoreError::cell(path, line, "-", format!("malformed CSV row: {e}"))
        })?;
        let line = rec.position().map(|p| p.line() as usize).unwrap_or(0);
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
