//! Reading tables back in tests: a Parquet file as one batch, a named table of a list, a
//! column's values, and a table's CSV text for snapshots.

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Float64Type, Int64Type};
use std::path::Path;

/// The Parquet file `path` as one batch (its batches concatenated). Panics on any error: a
/// test that cannot read its output cannot check it.
pub fn read_table(path: &Path) -> RecordBatch {
    let (schema, batches) =
        protospread_core::read_parquet(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    arrow::compute::concat_batches(&schema, &batches).expect("batches of one file")
}

/// The table `name` of a list of named tables (as the sweep crate returns them).
pub fn table<'a>(tables: &'a [(String, RecordBatch)], name: &str) -> &'a RecordBatch {
    &tables
        .iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no table {name}"))
        .1
}

fn column<'a>(b: &'a RecordBatch, name: &str) -> &'a arrow::array::ArrayRef {
    b.column_by_name(name)
        .unwrap_or_else(|| panic!("no column {name}"))
}

/// The values of a float column (a null reads as its slot's value, 0).
pub fn floats(b: &RecordBatch, name: &str) -> Vec<f64> {
    column(b, name)
        .as_primitive::<Float64Type>()
        .values()
        .to_vec()
}

/// The values of a 64-bit integer column (a null reads as its slot's value, 0).
pub fn ints(b: &RecordBatch, name: &str) -> Vec<i64> {
    column(b, name)
        .as_primitive::<Int64Type>()
        .values()
        .to_vec()
}

/// The values of a column as text (any type, cast as Arrow displays it; a null is "").
pub fn strs(b: &RecordBatch, name: &str) -> Vec<String> {
    let a = arrow::compute::cast(column(b, name), &DataType::Utf8)
        .unwrap_or_else(|e| panic!("column {name}: {e}"));
    a.as_string::<i32>()
        .iter()
        .map(|s| s.unwrap_or("").to_string())
        .collect()
}

/// The values of a boolean column. Panics on a null.
pub fn bools(b: &RecordBatch, name: &str) -> Vec<bool> {
    column(b, name)
        .as_boolean()
        .iter()
        .map(|x| x.unwrap_or_else(|| panic!("null in column {name}")))
        .collect()
}

/// A table as CSV text for a snapshot: a header of column names, then one line a row, each
/// value as Arrow displays it (floats in shortest round-trip form), an empty field for a
/// null, a field holding a comma, a quote or a line break quoted.
pub fn csv_text(b: &RecordBatch) -> String {
    let quote = |s: &str| {
        if s.contains([',', '"', '\n']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_string()
        }
    };
    let schema = b.schema();
    let mut out = schema
        .fields()
        .iter()
        .map(|f| quote(f.name()))
        .collect::<Vec<_>>()
        .join(",");
    out.push('\n');
    for r in 0..b.num_rows() {
        let line: Vec<String> = b
            .columns()
            .iter()
            .map(|c| {
                if c.is_null(r) {
                    String::new()
                } else {
                    quote(&arrow::util::display::array_value_to_string(c, r).expect("displayable"))
                }
            })
            .collect();
        out.push_str(&line.join(","));
        out.push('\n');
    }
    out
}
