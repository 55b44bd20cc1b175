//! A small column-oriented table that becomes one Arrow record batch, so every output of the
//! stage is declared in one place with its column names and types.

use arrow::array::{ArrayRef, BooleanArray, Float64Array, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use std::sync::Arc;

/// One column's values; `None` is a null.
#[derive(Debug, Clone, PartialEq)]
pub enum Column {
    Str(Vec<Option<String>>),
    Int(Vec<Option<i64>>),
    Float(Vec<Option<f64>>),
    Bool(Vec<Option<bool>>),
}

impl Column {
    fn len(&self) -> usize {
        match self {
            Column::Str(v) => v.len(),
            Column::Int(v) => v.len(),
            Column::Float(v) => v.len(),
            Column::Bool(v) => v.len(),
        }
    }
}

/// A named table of equal-length columns.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// File stem of the table (`<name>.parquet`).
    pub name: String,
    pub columns: Vec<(String, Column)>,
}

impl Table {
    pub fn new(name: &str) -> Self {
        Table {
            name: name.to_string(),
            columns: Vec::new(),
        }
    }

    pub fn str<I, S>(mut self, name: &str, v: I) -> Self
    where
        I: IntoIterator<Item = Option<S>>,
        S: Into<String>,
    {
        let col = v.into_iter().map(|x| x.map(Into::into)).collect();
        self.columns.push((name.to_string(), Column::Str(col)));
        self
    }

    pub fn int(mut self, name: &str, v: impl IntoIterator<Item = Option<i64>>) -> Self {
        self.columns
            .push((name.to_string(), Column::Int(v.into_iter().collect())));
        self
    }

    pub fn float(mut self, name: &str, v: impl IntoIterator<Item = Option<f64>>) -> Self {
        self.columns
            .push((name.to_string(), Column::Float(v.into_iter().collect())));
        self
    }

    pub fn bool(mut self, name: &str, v: impl IntoIterator<Item = Option<bool>>) -> Self {
        self.columns
            .push((name.to_string(), Column::Bool(v.into_iter().collect())));
        self
    }

    /// Number of rows (0 for a table without columns).
    pub fn rows(&self) -> usize {
        self.columns.first().map(|(_, c)| c.len()).unwrap_or(0)
    }

    /// The Arrow schema: every column nullable, types Utf8 / Int64 / Float64 / Boolean.
    pub fn schema(&self) -> SchemaRef {
        Arc::new(Schema::new(
            self.columns
                .iter()
                .map(|(n, c)| {
                    let t = match c {
                        Column::Str(_) => DataType::Utf8,
                        Column::Int(_) => DataType::Int64,
                        Column::Float(_) => DataType::Float64,
                        Column::Bool(_) => DataType::Boolean,
                    };
                    Field::new(n, t, true)
                })
                .collect::<Vec<_>>(),
        ))
    }

    /// One record batch holding the whole table.
    pub fn to_batch(&self) -> RecordBatch {
        let n = self.rows();
        let arrays: Vec<ArrayRef> = self
            .columns
            .iter()
            .map(|(name, c)| {
                assert_eq!(
                    c.len(),
                    n,
                    "column {name} of table {} has a different length",
                    self.name
                );
                match c {
                    Column::Str(v) => Arc::new(StringArray::from(v.clone())) as ArrayRef,
                    Column::Int(v) => Arc::new(Int64Array::from(v.clone())) as ArrayRef,
                    Column::Float(v) => Arc::new(Float64Array::from(v.clone())) as ArrayRef,
                    Column::Bool(v) => Arc::new(BooleanArray::from(v.clone())) as ArrayRef,
                }
            })
            .collect();
        RecordBatch::try_new(self.schema(), arrays).expect("columns match the schema")
    }
}
