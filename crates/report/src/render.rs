//! Any Parquet table to text: canonical CSV and Markdown, with ONE float formatting rule.
//!
//! The rule ([`fmt_float`]): a finite float is written with exactly six decimals
//! (`format!("{:.6}")`, round-half-to-even on the binary value as Rust's formatter does), a
//! negative zero after rounding is written as `0.000000`, infinities as `inf` / `-inf`, NaN as
//! `NaN`. Integers are written in full, booleans as `true` / `false`, a null as an empty field.
//! Every table of every study goes through this one function, so a figure is the same string
//! in the CSV, the Markdown and the HTML.

use crate::ReportError;
use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{DataType, Float32Type, Float64Type};
use arrow::record_batch::RecordBatch;
use std::path::Path;

/// The one float formatting rule of every table (see the module documentation).
pub(crate) fn fmt_float(x: f64) -> String {
    if x.is_nan() {
        return "NaN".to_string();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    let s = format!("{x:.6}");
    if s == "-0.000000" {
        "0.000000".to_string()
    } else {
        s
    }
}

/// A table as strings: the header, the rows, and which columns are numeric (right-aligned).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextTable {
    /// Column names.
    pub header: Vec<String>,
    /// Whether each column is numeric (right-aligned).
    pub numeric: Vec<bool>,
    /// Cells, row by row.
    pub rows: Vec<Vec<String>>,
}

impl TextTable {
    /// Index of a column by name.
    pub fn col(&self, name: &str) -> Option<usize> {
        self.header.iter().position(|h| h == name)
    }
}

fn cell(path: &Path, name: &str, a: &ArrayRef, i: usize) -> Result<String, ReportError> {
    if a.is_null(i) {
        return Ok(String::new());
    }
    Ok(match a.data_type() {
        DataType::Float64 => fmt_float(a.as_primitive::<Float64Type>().value(i)),
        DataType::Float32 => fmt_float(a.as_primitive::<Float32Type>().value(i) as f64),
        DataType::Boolean => a.as_boolean().value(i).to_string(),
        DataType::Utf8
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
        | DataType::Date32 => {
            let f = arrow::util::display::ArrayFormatter::try_new(a.as_ref(), &Default::default())
                .map_err(|e| ReportError::table(path, format!("column `{name}`: {e}")))?;
            f.value(i).to_string()
        }
        other => {
            return Err(ReportError::table(
                path,
                format!("column `{name}` has type {other}, which the renderer does not write"),
            ))
        }
    })
}

fn is_numeric(t: &DataType) -> bool {
    t.is_numeric()
}

/// Render record batches (any schema of the supported types) to a text table.
pub(crate) fn to_text(
    path: &Path,
    batches: &[RecordBatch],
    schema: &arrow::datatypes::Schema,
) -> Result<TextTable, ReportError> {
    let header: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
    let numeric = schema
        .fields()
        .iter()
        .map(|f| is_numeric(f.data_type()))
        .collect();
    let mut rows = Vec::new();
    for b in batches {
        for i in 0..b.num_rows() {
            let mut row = Vec::with_capacity(header.len());
            for (j, name) in header.iter().enumerate() {
                row.push(cell(path, name, b.column(j), i)?);
            }
            rows.push(row);
        }
    }
    Ok(TextTable {
        header,
        numeric,
        rows,
    })
}

/// Read a Parquet file and render it.
pub(crate) fn read_table(path: &Path) -> Result<TextTable, ReportError> {
    let (schema, batches) = protospread_core::read_parquet(path)?;
    to_text(path, &batches, &schema)
}

/// Canonical CSV: RFC 4180 quoting where needed, `\n` line ends, header first.
pub(crate) fn to_csv(t: &TextTable) -> Vec<u8> {
    let mut w = csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    w.write_record(&t.header).expect("write to memory");
    for r in &t.rows {
        w.write_record(r).expect("write to memory");
    }
    w.into_inner().expect("flush to memory")
}

/// Parse canonical CSV back (for comparisons in `verify`).
pub(crate) fn parse_csv(bytes: &[u8]) -> Result<Vec<Vec<String>>, csv::Error> {
    let mut r = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(bytes);
    let mut out = Vec::new();
    for rec in r.records() {
        out.push(rec?.iter().map(str::to_string).collect());
    }
    Ok(out)
}

fn md_escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('|', "\\|")
        .replace('\n', " ")
}

/// A GitHub-flavoured Markdown table (numeric columns right-aligned). A table without rows
/// is followed by the line `(no rows)`.
pub fn to_markdown(t: &TextTable) -> String {
    let mut s = String::new();
    s.push('|');
    for h in &t.header {
        s.push(' ');
        s.push_str(&md_escape(h));
        s.push_str(" |");
    }
    s.push_str("\n|");
    for n in &t.numeric {
        s.push_str(if *n { "---:|" } else { "---|" });
    }
    s.push('\n');
    for r in &t.rows {
        s.push('|');
        for c in r {
            s.push(' ');
            s.push_str(&md_escape(c));
            s.push_str(" |");
        }
        s.push('\n');
    }
    if t.rows.is_empty() {
        s.push_str("\n(no rows)\n");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_rule() {
        assert_eq!(fmt_float(2.885), "2.885000");
        assert_eq!(fmt_float(-0.0000001), "0.000000");
        assert_eq!(fmt_float(-0.0), "0.000000");
        assert_eq!(fmt_float(f64::INFINITY), "inf");
        assert_eq!(fmt_float(f64::NEG_INFINITY), "-inf");
        assert_eq!(fmt_float(f64::NAN), "NaN");
        assert_eq!(fmt_float(1.0 / 3.0), "0.333333");
    }

    #[test]
    fn csv_quotes_and_roundtrips() {
        let t = TextTable {
            header: vec!["a".into(), "b".into()],
            numeric: vec![false, true],
            rows: vec![
                vec!["x, \"y\"".into(), "1".into()],
                vec!["".into(), "2".into()],
            ],
        };
        let bytes = to_csv(&t);
        assert_eq!(
            String::from_utf8(bytes.clone()).unwrap(),
            "a,b\n\"x, \"\"y\"\"\",1\n,2\n"
        );
        let back = parse_csv(&bytes).unwrap();
        assert_eq!(back[1][0], "x, \"y\"");
        let md = to_markdown(&t);
        assert!(md.starts_with("| a | b |\n|---|---:|\n"), "{md}");
    }
}
