//! Import of stored-answer files: CSV, JSONL or Parquet (chosen by extension) to normalized,
//! validated, sorted records with the fixed schema of [`crate::format::stored_schema`].
//!
//! Every cell goes through one text rule set whatever the file format (a Parquet column is
//! cast to text first, a JSON number is read by its decimal text), so a record means the same
//! thing in every format. The first invalid record stops the import with an error naming the
//! file, the row and the column; nothing is written by this module.

use crate::format::{
    stored_schema, to_batch, Arm, Mode, OptionOrder, StoredRecord, Vocabulary, COLUMNS,
    FORMAT_VERSION,
};
use crate::AnswersError;
use arrow::array::{Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, SchemaRef};
use protospread_core::config::AnswersSection;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Columns every file must have (optional columns may be left out entirely).
pub const REQUIRED_COLUMNS: [&str; 11] = [
    "format_version",
    "study",
    "model",
    "arm",
    "condition",
    "sample",
    "test",
    "mode",
    "option_order",
    "instruction",
    "reply",
];

/// Prefix of extension columns: carried by harnesses (request, usage, timing...), accepted
/// and not imported. Any other unknown column is an error, so that a misspelt column is caught.
pub const EXTENSION_PREFIX: &str = "x_";

/// Which file format a path holds, by extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Csv,
    Jsonl,
    Parquet,
}

impl FileKind {
    /// `.csv`, `.jsonl` (or `.ndjson`), `.parquet`; anything else is refused.
    pub fn of(path: &Path) -> Result<Self, AnswersError> {
        let ext = path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        match ext.as_str() {
            "csv" => Ok(FileKind::Csv),
            "jsonl" | "ndjson" => Ok(FileKind::Jsonl),
            "parquet" => Ok(FileKind::Parquet),
            _ => Err(AnswersError::File {
                file: path.to_path_buf(),
                message: format!(
                    "unknown stored-answer file type '.{ext}': use .csv, .jsonl or .parquet"
                ),
            }),
        }
    }
}

/// One record as text cells, before validation. `cells[i]` belongs to `COLUMNS[i]`;
/// `None` is an empty cell, a JSON null or an absent key/column.
#[derive(Debug, Clone)]
struct RawRow {
    row: usize,
    line: Option<usize>,
    cells: [Option<String>; COLUMNS.len()],
}

fn col_index(name: &str) -> Option<usize> {
    COLUMNS.iter().position(|c| *c == name)
}

/// Read, validate and normalize a stored-answer file with the built-in vocabularies.
pub fn import_file(path: &Path) -> Result<(SchemaRef, Vec<RecordBatch>), AnswersError> {
    import_file_with(path, &AnswersSection::default())
}

/// As [`import_file`], also accepting the conditions, tests and instructions declared in
/// `[answers]` of pipeline.toml.
pub fn import_file_with(
    path: &Path,
    section: &AnswersSection,
) -> Result<(SchemaRef, Vec<RecordBatch>), AnswersError> {
    let records = read_records(path, &Vocabulary::from_section(section))?;
    Ok((stored_schema(), vec![to_batch(&records)?]))
}

/// Read, validate and normalize a stored-answer file to records sorted by
/// [`StoredRecord::sort_key`].
pub fn read_records(path: &Path, vocab: &Vocabulary) -> Result<Vec<StoredRecord>, AnswersError> {
    let raw = match FileKind::of(path)? {
        FileKind::Csv => read_csv(path)?,
        FileKind::Jsonl => read_jsonl(path)?,
        FileKind::Parquet => read_parquet(path)?,
    };
    let mut recs = Vec::with_capacity(raw.len());
    for r in &raw {
        recs.push((validate(path, r, vocab)?, r.row, r.line));
    }
    recs.sort_by(|a, b| a.0.sort_key().cmp(&b.0.sort_key()).then(a.1.cmp(&b.1)));
    check_unique_and_consistent(path, &recs)?;
    Ok(recs.into_iter().map(|(r, _, _)| r).collect())
}

fn file_err(path: &Path, message: impl Into<String>) -> AnswersError {
    AnswersError::File {
        file: path.to_path_buf(),
        message: message.into(),
    }
}

/// Map header names to column slots; unknown non-extension columns and duplicates are errors.
fn header_map(path: &Path, names: &[String]) -> Result<Vec<Option<usize>>, AnswersError> {
    let mut seen = BTreeMap::new();
    let mut map = Vec::with_capacity(names.len());
    for (i, n) in names.iter().enumerate() {
        if let Some(prev) = seen.insert(n.clone(), i) {
            return Err(file_err(
                path,
                format!(
                    "column {n} appears twice (positions {} and {})",
                    prev + 1,
                    i + 1
                ),
            ));
        }
        match col_index(n) {
            Some(k) => map.push(Some(k)),
            None if n.starts_with(EXTENSION_PREFIX) => map.push(None),
            None => {
                return Err(file_err(
                    path,
                    format!(
                        "unknown column {n:?} (extension columns must start with \"{EXTENSION_PREFIX}\")"
                    ),
                ))
            }
        }
    }
    for req in REQUIRED_COLUMNS {
        if !names.iter().any(|n| n == req) {
            return Err(file_err(path, format!("required column {req} is missing")));
        }
    }
    Ok(map)
}

fn empty_cells() -> [Option<String>; COLUMNS.len()] {
    Default::default()
}

fn read_csv(path: &Path) -> Result<Vec<RawRow>, AnswersError> {
    let bytes = std::fs::read(path).map_err(|e| AnswersError::io(path, e))?;
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(false)
        .from_reader(bytes.as_slice());
    let headers = rdr
        .headers()
        .map_err(|e| file_err(path, format!("header: {e}")))?
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>();
    if headers.len() == 1 && headers[0].is_empty() {
        return Err(file_err(path, "empty file (no header)"));
    }
    let map = header_map(path, &headers)?;
    let mut out = Vec::new();
    for (i, rec) in rdr.records().enumerate() {
        let row = i + 1;
        let rec = rec.map_err(|e| {
            let line = e.position().map(|p| p.line() as usize);
            AnswersError::Record {
                file: path.to_path_buf(),
                row,
                line,
                column: "-".into(),
                message: match e.kind() {
                    csv::ErrorKind::UnequalLengths {
                        expected_len, len, ..
                    } => format!("{len} fields, the header has {expected_len}"),
                    csv::ErrorKind::Utf8 { err, .. } => {
                        format!("field {} is not UTF-8", err.field() + 1)
                    }
                    _ => e.to_string(),
                },
            }
        })?;
        let mut cells = empty_cells();
        for (j, v) in rec.iter().enumerate() {
            if let Some(k) = map[j] {
                if !v.is_empty() {
                    cells[k] = Some(v.to_string());
                }
            }
        }
        out.push(RawRow {
            row,
            line: rec.position().map(|p| p.line() as usize),
            cells,
        });
    }
    Ok(out)
}

fn read_jsonl(path: &Path) -> Result<Vec<RawRow>, AnswersError> {
    let bytes = std::fs::read(path).map_err(|e| AnswersError::io(path, e))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        let off = e.utf8_error().valid_up_to();
        file_err(path, format!("not UTF-8 (first bad byte at offset {off})"))
    })?;
    let mut out = Vec::new();
    for (i, line) in text.split('\n').enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            continue;
        }
        let row = out.len() + 1;
        let lineno = i + 1;
        let err = |column: &str, message: String| AnswersError::Record {
            file: path.to_path_buf(),
            row,
            line: Some(lineno),
            column: column.to_string(),
            message,
        };
        let v: serde_json::Value =
            serde_json::from_str(line).map_err(|e| err("-", format!("not valid JSON: {e}")))?;
        let obj = v
            .as_object()
            .ok_or_else(|| err("-", "a line must be one JSON object".into()))?;
        let mut cells = empty_cells();
        for (k, v) in obj {
            let Some(idx) = col_index(k) else {
                if k.starts_with(EXTENSION_PREFIX) {
                    continue;
                }
                return Err(err(
                    k,
                    format!("unknown key (extension keys must start with \"{EXTENSION_PREFIX}\")"),
                ));
            };
            cells[idx] = match v {
                serde_json::Value::Null => None,
                serde_json::Value::String(s) if s.is_empty() => None,
                serde_json::Value::String(s) => Some(s.clone()),
                serde_json::Value::Number(n) => Some(n.to_string()),
                other => {
                    return Err(err(
                        k,
                        format!("expected a string or a number, got {other}"),
                    ))
                }
            };
        }
        for req in REQUIRED_COLUMNS {
            if !obj.contains_key(req) {
                return Err(err(req, "required key is missing".into()));
            }
        }
        out.push(RawRow {
            row,
            line: Some(lineno),
            cells,
        });
    }
    Ok(out)
}

fn read_parquet(path: &Path) -> Result<Vec<RawRow>, AnswersError> {
    let (schema, batches) = protospread_core::pq::read(path)?;
    let names: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
    let map = header_map(path, &names)?;
    let mut out = Vec::new();
    for b in &batches {
        let mut texts: Vec<Option<StringArray>> = Vec::with_capacity(map.len());
        for (j, slot) in map.iter().enumerate() {
            texts.push(match slot {
                None => None,
                Some(_) => {
                    let c = arrow::compute::cast(b.column(j), &DataType::Utf8).map_err(|e| {
                        file_err(
                            path,
                            format!("column {}: cannot read as text: {e}", names[j]),
                        )
                    })?;
                    Some(
                        c.as_any()
                            .downcast_ref::<StringArray>()
                            .expect("cast to Utf8 yields a StringArray")
                            .clone(),
                    )
                }
            });
        }
        for i in 0..b.num_rows() {
            let mut cells = empty_cells();
            for (j, slot) in map.iter().enumerate() {
                if let (Some(k), Some(a)) = (slot, &texts[j]) {
                    if !a.is_null(i) && !a.value(i).is_empty() {
                        cells[*k] = Some(a.value(i).to_string());
                    }
                }
            }
            out.push(RawRow {
                row: out.len() + 1,
                line: None,
                cells,
            });
        }
    }
    Ok(out)
}

/// A non-negative decimal integer: ASCII digits only (no sign, no spaces, no decimal point).
fn parse_uint(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn validate(path: &Path, r: &RawRow, vocab: &Vocabulary) -> Result<StoredRecord, AnswersError> {
    let err = |column: &str, message: String| AnswersError::Record {
        file: path.to_path_buf(),
        row: r.row,
        line: r.line,
        column: column.to_string(),
        message,
    };
    let cell = |name: &str| r.cells[col_index(name).expect("known column")].as_deref();
    let need = |name: &str| cell(name).ok_or_else(|| err(name, "missing value".into()));
    let int_in = |name: &str, max: u64| -> Result<Option<u64>, AnswersError> {
        match cell(name) {
            None => Ok(None),
            Some(s) => match parse_uint(s) {
                Some(v) if v <= max => Ok(Some(v)),
                _ => Err(err(
                    name,
                    format!("{s:?} is not a non-negative integer (at most {max})"),
                )),
            },
        }
    };

    let fv = int_in("format_version", i32::MAX as u64)?
        .ok_or_else(|| err("format_version", "missing value".into()))?;
    if fv != FORMAT_VERSION as u64 {
        return Err(err(
            "format_version",
            format!("version {fv} is not supported (this build reads version {FORMAT_VERSION})"),
        ));
    }
    let study = need("study")?.to_string();
    let model = need("model")?.to_string();
    let arm_s = need("arm")?;
    let arm = Arm::parse(arm_s)
        .ok_or_else(|| err("arm", format!("{arm_s:?} is not one of api, cli, local")))?;
    let condition = need("condition")?.to_string();
    if !vocab.has_condition(&condition) {
        return Err(err(
            "condition",
            format!("unknown condition {condition:?} (declare it in [answers] extra_conditions)"),
        ));
    }
    let sample = int_in("sample", i32::MAX as u64)?
        .ok_or_else(|| err("sample", "missing value".into()))? as i32;
    let test = need("test")?.to_string();
    let n_items = vocab.items(&test).ok_or_else(|| {
        err(
            "test",
            format!("unknown test {test:?} (declare it in [answers] extra_tests)"),
        )
    })?;
    let mode_s = need("mode")?;
    let mode = Mode::parse(mode_s)
        .ok_or_else(|| err("mode", format!("{mode_s:?} is not one of single, whole")))?;
    let item = int_in("item", i32::MAX as u64)?.map(|v| v as i32);
    let order_seed = int_in("order_seed", i64::MAX as u64)?.map(|v| v as i64);
    let item_order = match cell("item_order") {
        None => None,
        Some(s) => {
            let mut v = Vec::new();
            for part in s.split(';') {
                match parse_uint(part) {
                    Some(x) if x >= 1 && x <= n_items as u64 => v.push(x as i32),
                    _ => {
                        return Err(err(
                            "item_order",
                            format!("{part:?} is not an item number 1..={n_items} of {test}"),
                        ))
                    }
                }
            }
            let mut sorted = v.clone();
            sorted.sort_unstable();
            sorted.dedup();
            if sorted.len() != v.len() || v.len() != n_items as usize {
                return Err(err(
                    "item_order",
                    format!(
                        "must list each of the {n_items} items of {test} exactly once (got {} entries, {} distinct)",
                        v.len(),
                        sorted.len()
                    ),
                ));
            }
            Some(v)
        }
    };
    match mode {
        Mode::Single => {
            match item {
                None => return Err(err("item", "missing value (mode single)".into())),
                Some(i) if i < 1 || i as u32 > n_items => {
                    return Err(err(
                        "item",
                        format!("{i} is not an item number 1..={n_items} of {test}"),
                    ))
                }
                _ => {}
            }
            if item_order.is_some() {
                return Err(err("item_order", "only allowed with mode whole".into()));
            }
            if order_seed.is_some() {
                return Err(err("order_seed", "only allowed with mode whole".into()));
            }
        }
        Mode::Whole => {
            if item.is_some() {
                return Err(err(
                    "item",
                    "must be empty with mode whole (use item_order)".into(),
                ));
            }
            if item_order.is_none() {
                return Err(err("item_order", "missing value (mode whole)".into()));
            }
        }
    }
    let oo_s = need("option_order")?;
    let option_order = OptionOrder::parse(oo_s).ok_or_else(|| {
        err(
            "option_order",
            format!("{oo_s:?} is not one of human, reversed"),
        )
    })?;
    let instruction = need("instruction")?.to_string();
    if !vocab.has_instruction(&instruction) {
        return Err(err(
            "instruction",
            format!(
                "unknown instruction {instruction:?} (declare it in [answers] extra_instructions)"
            ),
        ));
    }
    let temperature = match cell("temperature") {
        None => None,
        Some(s) => match s.parse::<f64>() {
            Ok(t) if t.is_finite() && t >= 0.0 && !s.starts_with('+') => Some(t),
            _ => {
                return Err(err(
                    "temperature",
                    format!("{s:?} is not a non-negative number"),
                ))
            }
        },
    };
    Ok(StoredRecord {
        format_version: FORMAT_VERSION,
        study,
        model,
        arm,
        cohort: cell("cohort").map(str::to_string),
        condition,
        sample,
        test,
        mode,
        item,
        item_order,
        order_seed,
        option_order,
        instruction,
        temperature,
        reply: cell("reply").unwrap_or("").to_string(),
        error: cell("error").map(str::to_string),
        label: cell("label").map(str::to_string),
    })
}

/// Unique keys; one arm and cohort per model; one set of settings per administration.
fn check_unique_and_consistent(
    path: &Path,
    recs: &[(StoredRecord, usize, Option<usize>)],
) -> Result<(), AnswersError> {
    let err =
        |row: usize, line: Option<usize>, column: &str, message: String| AnswersError::Record {
            file: PathBuf::from(path),
            row,
            line,
            column: column.to_string(),
            message,
        };
    let mut models: BTreeMap<&str, (&StoredRecord, usize)> = BTreeMap::new();
    for w in 0..recs.len() {
        let (r, row, line) = &recs[w];
        let (m0, row0) = *models.entry(r.model.as_str()).or_insert((r, *row));
        if m0.arm != r.arm {
            return Err(err(
                *row,
                *line,
                "arm",
                format!(
                    "model {} has arm {} here but {} in row {row0}",
                    r.model,
                    r.arm.as_str(),
                    m0.arm.as_str()
                ),
            ));
        }
        if m0.cohort != r.cohort {
            return Err(err(
                *row,
                *line,
                "cohort",
                format!("model {} has another cohort in row {row0}", r.model),
            ));
        }
        if w == 0 {
            continue;
        }
        let (p, prow, _) = &recs[w - 1];
        if p.sort_key() == r.sort_key() {
            return Err(err(
                *row,
                *line,
                if r.item.is_some() {
                    "item"
                } else {
                    "condition"
                },
                format!(
                    "duplicate request: same model, condition, sample, test and item as row {prow}"
                ),
            ));
        }
        let same_admin = p.model == r.model
            && p.condition == r.condition
            && p.sample == r.sample
            && p.test == r.test;
        if same_admin {
            let checks: [(&str, bool); 7] = [
                ("mode", p.mode == r.mode),
                ("study", p.study == r.study),
                ("option_order", p.option_order == r.option_order),
                ("instruction", p.instruction == r.instruction),
                (
                    "temperature",
                    p.temperature.map(f64::to_bits) == r.temperature.map(f64::to_bits),
                ),
                ("label", p.label == r.label),
                ("cohort", p.cohort == r.cohort),
            ];
            for (col, ok) in checks {
                if !ok {
                    return Err(err(
                        *row,
                        *line,
                        col,
                        format!(
                            "differs from row {prow} of the same administration (model, condition, sample, test)"
                        ),
                    ));
                }
            }
        }
    }
    Ok(())
}
