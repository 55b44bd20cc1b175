//! The input size limits of `protospread_core` (a cell, a record, a Parquet footer, row-group
//! count and page) applied to stored-answer files, with errors naming the file, the row (or
//! row group) and the column.

use super::{file_err, ImportError};
use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::DataType;
use protospread_core::{Limited, Place, TooLarge};
use protospread_format::FormatError;
use std::path::Path;

/// The error of a CSV cell or row over its limit; `headers` names the columns (empty while the
/// header itself is read).
pub(super) fn csv(path: &Path, t: &TooLarge, headers: &[String]) -> ImportError {
    let Place::Record {
        record,
        line,
        field,
    } = t.place
    else {
        return file_err(path, t.to_string());
    };
    let column = match field {
        Some(f) if t.what == Limited::Cell => headers
            .get(f)
            .cloned()
            .unwrap_or_else(|| format!("{} (no header)", f + 1)),
        _ => "-".to_string(),
    };
    if record == 0 {
        return file_err(path, format!("header, column {column}: {t}"));
    }
    ImportError::from(FormatError::Record {
        file: path.to_path_buf(),
        row: record as usize,
        line: Some(line as usize),
        column,
        message: t.to_string(),
        source: Some(Box::new(t.clone())),
    })
}

/// The error of a JSON line over the record limit.
pub(super) fn json_line(path: &Path, row: usize, line: usize) -> ImportError {
    let t = TooLarge {
        what: Limited::Record,
        size: protospread_core::MAX_RECORD_BYTES as u64 + 1,
        exact: false,
        place: Place::File,
    };
    ImportError::from(FormatError::Record {
        file: path.to_path_buf(),
        row,
        line: Some(line),
        column: "-".into(),
        message: t.to_string(),
        source: Some(Box::new(t)),
    })
}

/// Every page of a Parquet file (`metadata` is its decoded footer) within
/// [`protospread_core::MAX_PARQUET_PAGE_BYTES`], checked from the page headers before any page
/// is read.
pub(super) fn parquet_layout(
    path: &Path,
    metadata: &parquet::file::metadata::ParquetMetaData,
) -> Result<(), ImportError> {
    let t = match protospread_core::check_parquet_pages(path, metadata).map_err(ImportError::Fs)? {
        Ok(()) => return Ok(()),
        Err(t) => t,
    };
    let Place::Page {
        row_group,
        column,
        first_row,
    } = t.place
    else {
        return Err(file_err(path, t.to_string()));
    };
    let name = metadata
        .file_metadata()
        .schema_descr()
        .column(column)
        .path()
        .string();
    Err(ImportError::from(FormatError::Record {
        file: path.to_path_buf(),
        row: first_row as usize,
        line: None,
        column: name,
        message: format!(
            "row group {} of {}: {t}",
            row_group + 1,
            metadata.num_row_groups()
        ),
        source: Some(Box::new(t)),
    }))
}

/// The footer check of [`protospread_core::check_parquet_footer`], as an import error.
pub(super) fn parquet_footer(path: &Path) -> Result<(), ImportError> {
    protospread_core::check_parquet_footer(path)
        .map_err(ImportError::Fs)?
        .map_err(|t| file_err(path, t.to_string()))
}

/// Every text cell of a decoded Parquet batch (whose first record is data row `first_row`)
/// within [`protospread_core::MAX_CELL_BYTES`]; `names` names the batch's columns.
pub(super) fn parquet_cells(
    path: &Path,
    b: &RecordBatch,
    names: &[String],
    first_row: usize,
) -> Result<(), ImportError> {
    for (j, c) in b.columns().iter().enumerate() {
        if let Some(i) = oversized(c.as_ref()) {
            let len = cell_len(c.as_ref(), i).unwrap_or(0);
            let t = TooLarge::check_cell(len, Place::File).unwrap_err();
            return Err(ImportError::from(FormatError::Record {
                file: path.to_path_buf(),
                row: first_row + i,
                line: None,
                column: names
                    .get(j)
                    .cloned()
                    .unwrap_or_else(|| format!("{}", j + 1)),
                message: t.to_string(),
                source: Some(Box::new(t)),
            }));
        }
    }
    Ok(())
}

/// The first row of a text column whose value is over the cell limit.
fn oversized(a: &dyn Array) -> Option<usize> {
    let over = |len: usize| len > protospread_core::MAX_CELL_BYTES;
    match a.data_type() {
        DataType::Utf8 => {
            let s = a.as_string::<i32>();
            let o = s.value_offsets();
            (0..s.len()).find(|&i| over((o[i + 1] - o[i]) as usize))
        }
        DataType::LargeUtf8 => {
            let s = a.as_string::<i64>();
            let o = s.value_offsets();
            (0..s.len()).find(|&i| over((o[i + 1] - o[i]) as usize))
        }
        DataType::Utf8View => {
            let s = a.as_string_view();
            (0..s.len()).find(|&i| !s.is_null(i) && over(s.value(i).len()))
        }
        DataType::Dictionary(_, _) => {
            let d = a.as_any_dictionary();
            oversized(d.values().as_ref())?;
            let keys = d.normalized_keys();
            (0..a.len()).find(|&i| {
                !a.is_null(i) && cell_len(d.values().as_ref(), keys[i]).is_some_and(over)
            })
        }
        _ => None,
    }
}

fn cell_len(a: &dyn Array, i: usize) -> Option<usize> {
    match a.data_type() {
        DataType::Utf8 => Some(a.as_string::<i32>().value(i).len()),
        DataType::LargeUtf8 => Some(a.as_string::<i64>().value(i).len()),
        DataType::Utf8View => Some(a.as_string_view().value(i).len()),
        DataType::Dictionary(_, _) => {
            let d = a.as_any_dictionary();
            cell_len(d.values().as_ref(), d.normalized_keys()[i])
        }
        _ => None,
    }
}
