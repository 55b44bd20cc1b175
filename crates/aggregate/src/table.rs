//! An output table: a name and its rows, whose columns have the stage's output types. The stage
//! hands each table out as [`Rows`], a stream of batches, so that no table needs to fit in
//! memory; [`Table`] is the same table held whole, for callers that want it so.

use crate::AggregateError;
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

/// The output schema of a query's `schema`: every column nullable and of its output type.
pub(crate) fn output_schema(schema: &SchemaRef) -> SchemaRef {
    Arc::new(Schema::new(
        schema
            .fields()
            .iter()
            .map(|f| Field::new(f.name(), output_type(f.data_type()), true))
            .collect::<Vec<_>>(),
    ))
}

/// The output schema of `contract`, after checking that a plan's `schema` has its columns in
/// its order.
pub(crate) fn contract_schema(
    contract: &protospread_core::TableContract,
    schema: &SchemaRef,
) -> Result<SchemaRef, ArrowError> {
    let got: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    if got != contract.names() {
        return Err(ArrowError::SchemaError(format!(
            "table {}: the plan gives the columns {got:?}, the contract {:?}",
            contract.name,
            contract.names()
        )));
    }
    Ok(contract.schema())
}

impl Table {
    /// The Arrow schema of the table.
    pub fn schema(&self) -> SchemaRef {
        self.batch.schema()
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.batch.num_rows()
    }
}

/// The batches of a table being computed, in the table's order.
pub(crate) type Batches<'a> = Box<dyn Iterator<Item = Result<RecordBatch, AggregateError>> + 'a>;

/// A table of the stage as it is computed: its name, its output schema and its rows, batch by
/// batch, each batch already of that schema.
pub(crate) struct Rows<'a> {
    /// File stem of the table (`<name>.parquet`).
    pub(crate) name: String,
    /// The output schema.
    pub(crate) schema: SchemaRef,
    /// The rows, sorted by the table's key.
    pub(crate) batches: Batches<'a>,
}

impl Rows<'_> {
    /// The whole table in one batch; `path` (the stage's input) names it in errors.
    pub(crate) fn into_table(self, path: &std::path::Path) -> Result<Table, AggregateError> {
        let name = self.name;
        let batches = self.batches.collect::<Result<Vec<_>, _>>()?;
        let batch = concat_batches(&self.schema, &batches)
            .map_err(|e| AggregateError::engine(path, format!("table {name}"), e))?;
        Ok(Table { name, batch })
    }
}

/// `b` as a batch of `out_schema`, each column cast to its field's type.
pub(crate) fn conform(out_schema: &SchemaRef, b: &RecordBatch) -> Result<RecordBatch, ArrowError> {
    let cols = b
        .columns()
        .iter()
        .zip(out_schema.fields())
        .map(|(c, f)| cast(c, f.data_type()))
        .collect::<Result<Vec<ArrayRef>, _>>()?;
    RecordBatch::try_new(out_schema.clone(), cols)
}
