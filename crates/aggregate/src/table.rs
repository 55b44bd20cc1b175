//! An output table: a name and one record batch whose columns have the stage's output types.

use arrow::array::ArrayRef;
use arrow::compute::{cast, concat_batches};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;
use std::sync::Arc;

/// A named table of the stage, written as `<name>.parquet`.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// File stem of the table (`<name>.parquet`).
    pub name: String,
    /// All rows, sorted by the table's key.
    pub batch: RecordBatch,
}

/// The output type of a query column: every string Utf8, every integer Int64, every float
/// Float64 (one fixed Parquet layout whatever types DataFusion chose on the way).
fn output_type(t: &DataType) -> DataType {
    match t {
        DataType::Utf8View | DataType::LargeUtf8 | DataType::Dictionary(_, _) => DataType::Utf8,
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64 => DataType::Int64,
        DataType::Float16 | DataType::Float32 => DataType::Float64,
        DataType::Null => DataType::Utf8,
        other => other.clone(),
    }
}

impl Table {
    /// One batch from query results, every column nullable and of its output type.
    pub(crate) fn from_batches(
        name: &str,
        schema: &SchemaRef,
        batches: &[RecordBatch],
    ) -> Result<Table, ArrowError> {
        let out_schema: SchemaRef = Arc::new(Schema::new(
            schema
                .fields()
                .iter()
                .map(|f| Field::new(f.name(), output_type(f.data_type()), true))
                .collect::<Vec<_>>(),
        ));
        Ok(Table {
            name: name.to_string(),
            batch: conform(&out_schema, batches)?,
        })
    }

    /// One batch from query results in the columns of `contract`: the query's columns must
    /// be the contract's, in its order; each is cast to the contract's type, and a required
    /// column that holds a null is an error.
    pub(crate) fn from_contract(
        contract: &protospread_core::TableContract,
        schema: &SchemaRef,
        batches: &[RecordBatch],
    ) -> Result<Table, ArrowError> {
        let got: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        if got != contract.names() {
            return Err(ArrowError::SchemaError(format!(
                "table {}: the plan gives the columns {got:?}, the contract {:?}",
                contract.name,
                contract.names()
            )));
        }
        let out_schema = contract.schema();
        Ok(Table {
            name: contract.name.to_string(),
            batch: conform(&out_schema, batches)?,
        })
    }

    /// The Arrow schema of the table.
    pub fn schema(&self) -> SchemaRef {
        self.batch.schema()
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.batch.num_rows()
    }
}

/// `batches` as one batch of `out_schema`, each column cast to its field's type.
fn conform(out_schema: &SchemaRef, batches: &[RecordBatch]) -> Result<RecordBatch, ArrowError> {
    let mut conformed = Vec::with_capacity(batches.len());
    for b in batches {
        let cols = b
            .columns()
            .iter()
            .zip(out_schema.fields())
            .map(|(c, f)| cast(c, f.data_type()))
            .collect::<Result<Vec<ArrayRef>, _>>()?;
        conformed.push(RecordBatch::try_new(out_schema.clone(), cols)?);
    }
    concat_batches(out_schema, &conformed)
}
