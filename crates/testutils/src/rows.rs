//! Typed rows of the contract tables, for tests: a struct per table whose fields are named
//! after the table's columns, read from record batches and built into them by the contract.
//!
//! The contract decides the columns: [`rows_of`] checks a batch's schema against the contract
//! and reads each column by its contract name; [`batch_of`] builds the columns in the
//! contract's order with its types. Both first check that the struct's fields are exactly the
//! contract's columns, so a column added to a declaration fails every test that reads or
//! builds that table until its row struct gets the field.

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Float64Array, Int32Array, RecordBatch, StringArray,
};
use arrow::datatypes::{DataType, Float64Type, Int32Type};
use protospread_core::{
    TableContract, PARSED_ANSWERS, REPLY_RULE_COUNTS, SCALE_SCORES, SCALE_SCORES_BY_RULE,
};
use protospread_format::{StoredRecord, Vocabulary};
use protospread_score::{AnswerSourceSummary, Norms, ScoreError, ScoringKey, Status};
use std::path::Path;
use std::sync::Arc;

/// A struct whose fields are the columns of [`ContractRow::CONTRACT`] (declared with
/// `contract_row!`).
pub trait ContractRow: Sized {
    /// The table the struct is a row of.
    const CONTRACT: TableContract;
    /// The struct's field names in declaration order.
    const FIELDS: &'static [&'static str];
    /// The rows of `batch`, each column read by its field's name (the schema already checked).
    fn read_batch(batch: &RecordBatch) -> Vec<Self>;
    /// The values of field `name` over `rows`, or `None` when the struct has no such field.
    fn column(rows: &[Self], name: &str) -> Option<ArrayRef>;
}

/// A value of one column: how it is read from an Arrow array and written into one.
pub trait Cell: Sized {
    /// The Arrow type the column is cast to before it is read.
    const TYPE: DataType;
    /// The value at `row` of `a` (of [`Cell::TYPE`]); `None` when it is null.
    fn get(a: &ArrayRef, row: usize) -> Option<Self>;
    /// An array of [`Cell::TYPE`] holding `values`.
    fn array(values: Vec<Option<Self>>) -> ArrayRef;
}

impl Cell for String {
    const TYPE: DataType = DataType::Utf8;
    fn get(a: &ArrayRef, row: usize) -> Option<Self> {
        let a = a.as_string::<i32>();
        (!a.is_null(row)).then(|| a.value(row).to_string())
    }
    fn array(values: Vec<Option<Self>>) -> ArrayRef {
        Arc::new(StringArray::from(values))
    }
}

impl Cell for i32 {
    const TYPE: DataType = DataType::Int32;
    fn get(a: &ArrayRef, row: usize) -> Option<Self> {
        let a = a.as_primitive::<Int32Type>();
        (!a.is_null(row)).then(|| a.value(row))
    }
    fn array(values: Vec<Option<Self>>) -> ArrayRef {
        Arc::new(Int32Array::from(values))
    }
}

impl Cell for f64 {
    const TYPE: DataType = DataType::Float64;
    fn get(a: &ArrayRef, row: usize) -> Option<Self> {
        let a = a.as_primitive::<Float64Type>();
        (!a.is_null(row)).then(|| a.value(row))
    }
    fn array(values: Vec<Option<Self>>) -> ArrayRef {
        Arc::new(Float64Array::from(values))
    }
}

impl Cell for bool {
    const TYPE: DataType = DataType::Boolean;
    fn get(a: &ArrayRef, row: usize) -> Option<Self> {
        let a = a.as_boolean();
        (!a.is_null(row)).then(|| a.value(row))
    }
    fn array(values: Vec<Option<Self>>) -> ArrayRef {
        Arc::new(BooleanArray::from(values))
    }
}

/// A status is written as its name; a name the score crate does not know fails the read.
impl Cell for Status {
    const TYPE: DataType = DataType::Utf8;
    fn get(a: &ArrayRef, row: usize) -> Option<Self> {
        let name = String::get(a, row)?;
        Some(
            *Status::ALL
                .iter()
                .find(|s| s.as_str() == name)
                .unwrap_or_else(|| panic!("unknown status {name:?}")),
        )
    }
    fn array(values: Vec<Option<Self>>) -> ArrayRef {
        String::array(
            values
                .into_iter()
                .map(|v| v.map(|s| s.as_str().to_string()))
                .collect(),
        )
    }
}

/// A field's type: a [`Cell`] for a column the contract declares required, `Option` of one
/// for a nullable column.
pub trait Field: Sized {
    /// The cell type.
    type Cell: Cell;
    /// The field's value from a cell (`what` names the column and row for the panic on a null
    /// in a required field).
    fn from_cell(cell: Option<Self::Cell>, what: &dyn Fn() -> String) -> Self;
    /// The cell of the field's value.
    fn to_cell(&self) -> Option<Self::Cell>;
}

impl<T: Cell + Clone> Field for T {
    type Cell = T;
    fn from_cell(cell: Option<T>, what: &dyn Fn() -> String) -> Self {
        cell.unwrap_or_else(|| panic!("null in required {}", what()))
    }
    fn to_cell(&self) -> Option<T> {
        Some(self.clone())
    }
}

impl<T: Cell + Clone> Field for Option<T> {
    type Cell = T;
    fn from_cell(cell: Option<T>, _: &dyn Fn() -> String) -> Self {
        cell
    }
    fn to_cell(&self) -> Option<T> {
        self.clone()
    }
}

/// The values of column `name` of `batch` as field type `F`, cast to the cell's Arrow type
/// (so a dictionary-encoded label reads as its text).
pub fn read_column<F: Field>(table: &TableContract, batch: &RecordBatch, name: &str) -> Vec<F> {
    let a = batch
        .column_by_name(name)
        .unwrap_or_else(|| panic!("table {} has no column {name}", table.name));
    let a = arrow::compute::cast(a, &F::Cell::TYPE)
        .unwrap_or_else(|e| panic!("table {} column {name}: {e}", table.name));
    (0..a.len())
        .map(|r| {
            F::from_cell(F::Cell::get(&a, r), &|| {
                format!("column {name} of table {}, row {r}", table.name)
            })
        })
        .collect()
}

/// The array of field values `values`.
pub fn field_array<F: Field>(values: impl Iterator<Item = F>) -> ArrayRef {
    F::Cell::array(values.map(|v| v.to_cell()).collect())
}

/// Declares a row struct of a contract table: `contract_row! { /// doc  pub Name = CONTRACT;
/// { /// doc  field: Type, ... } }`. Field names are column names; `Option<T>` for a nullable
/// column.
macro_rules! contract_row {
    (
        $(#[$m:meta])*
        $vis:vis $name:ident = $contract:expr;
        { $( $(#[$fm:meta])* $field:ident : $ty:ty, )* }
    ) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq)]
        $vis struct $name {
            $( $(#[$fm])* $vis $field: $ty, )*
        }

        impl ContractRow for $name {
            const CONTRACT: TableContract = $contract;
            const FIELDS: &'static [&'static str] = &[$(stringify!($field)),*];

            fn read_batch(batch: &RecordBatch) -> Vec<Self> {
                $(
                    let mut $field = read_column::<$ty>(&Self::CONTRACT, batch, stringify!($field))
                        .into_iter();
                )*
                (0..batch.num_rows())
                    .map(|_| $name { $( $field: $field.next().expect("one value a row"), )* })
                    .collect()
            }

            fn column(rows: &[Self], name: &str) -> Option<ArrayRef> {
                match name {
                    $( stringify!($field) => Some(field_array(rows.iter().map(|r| r.$field.clone()))), )*
                    _ => None,
                }
            }
        }
    };
}

/// Panics unless the fields of `R` are the columns of its contract, in file order.
fn check_fields<R: ContractRow>() {
    let columns = R::CONTRACT.names();
    assert_eq!(
        R::FIELDS,
        columns.as_slice(),
        "the fields of {} are not the columns of table {}",
        std::any::type_name::<R>(),
        R::CONTRACT.name
    );
}

/// The rows of `batches` of `R`'s table: each batch's schema is checked against the contract
/// ([`TableContract::check_schema`]) and its columns read by the contract's names.
pub fn rows_of<R: ContractRow>(batches: &[RecordBatch]) -> Vec<R> {
    check_fields::<R>();
    let mut out = Vec::new();
    for b in batches {
        if let Err(e) = R::CONTRACT.check_schema(&b.schema()) {
            panic!("a batch of table {}: {e}", R::CONTRACT.name);
        }
        out.extend(R::read_batch(b));
    }
    out
}

/// The rows of the Parquet file `path` of `R`'s table (checked as in [`rows_of`]).
pub fn read_rows<R: ContractRow>(path: &Path) -> Vec<R> {
    let (_, batches) =
        protospread_core::read_parquet(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    rows_of(&batches)
}

/// `rows` as a batch of `R`'s table: the contract's columns in order, with its schema.
pub fn batch_of<R: ContractRow>(rows: &[R]) -> RecordBatch {
    check_fields::<R>();
    let table = R::CONTRACT;
    let cols: Vec<ArrayRef> = table
        .columns()
        .iter()
        .map(|c| {
            let a = R::column(rows, c.name).expect("checked: every column is a field");
            arrow::compute::cast(&a, &c.ty.arrow()).expect("a field casts to its column type")
        })
        .collect();
    RecordBatch::try_new(table.schema(), cols)
        .unwrap_or_else(|e| panic!("a batch of table {}: {e}", table.name))
}

contract_row! {
    /// A row of `parsed_answers.parquet` ([`PARSED_ANSWERS`]).
    pub ParsedRow = PARSED_ANSWERS;
    {
        /// Input name the record came from.
        source: String,
        /// Provenance label.
        label: String,
        /// Study name.
        study: String,
        /// Model id.
        model: String,
        /// `api`, `cli` or `local`.
        arm: String,
        /// Cohort, if any.
        cohort: Option<String>,
        /// Condition code.
        condition: String,
        /// 1-based sample index.
        sample: i32,
        /// Test name.
        test: String,
        /// `single` or `whole`.
        mode: String,
        /// Human item number.
        item: i32,
        /// 1-based position at which the item was shown (whole mode).
        shown_position: Option<i32>,
        /// Option number read from the reply.
        option_replied: Option<i32>,
        /// Keyed value of the answer.
        value: Option<i32>,
        /// How the strict rule read the reply.
        status: Status,
        /// How the lenient rule read the same item.
        lenient_status: Status,
    }
}

contract_row! {
    /// A row of `scale_scores.parquet` ([`SCALE_SCORES`]).
    pub ScaleRow = SCALE_SCORES;
    {
        /// Input name the records came from.
        source: String,
        /// Provenance label.
        label: String,
        /// Study name.
        study: String,
        /// Model id.
        model: String,
        /// `api`, `cli` or `local`.
        arm: String,
        /// Cohort, if any.
        cohort: Option<String>,
        /// Condition code.
        condition: String,
        /// 1-based sample index.
        sample: i32,
        /// Test name.
        test: String,
        /// Dimension (scale).
        dimension: String,
        /// Sampling temperature of the condition.
        temperature: Option<f64>,
        /// Scale score, if the scale is complete.
        score: Option<f64>,
        /// Every item of the scale was answered.
        complete: bool,
        /// Items of the scale.
        n_items: i32,
        /// Items answered.
        n_answered: i32,
        /// Score in human SDs.
        z: Option<f64>,
        /// Percentile among the human scores.
        percentile: Option<f64>,
        /// The administration gave the same option to every item.
        constant_answers: bool,
    }
}

contract_row! {
    /// A row of `reply_rules.parquet` ([`REPLY_RULE_COUNTS`]).
    pub ReplyRuleRow = REPLY_RULE_COUNTS;
    {
        /// Input name.
        source: String,
        /// Provenance label.
        label: String,
        /// Model id.
        model: String,
        /// `api`, `cli` or `local`.
        arm: String,
        /// Cohort, if any.
        cohort: Option<String>,
        /// Condition code.
        condition: String,
        /// `single` or `whole`.
        mode: String,
        /// Reply rule.
        rule: String,
        /// Requests.
        requests: i32,
        /// Requests that failed.
        failed_requests: i32,
        /// Replies the rule reads in full.
        readable_replies: i32,
        /// Items asked.
        items: i32,
        /// Items of failed requests.
        failed_items: i32,
        /// Items the rule reads.
        readable_items: i32,
    }
}

/// `batch` (of [`SCALE_SCORES`]) as the rows of reply rule `rule` in
/// `scale_scores_by_rule.parquet` ([`SCALE_SCORES_BY_RULE`]): every other column is taken from
/// `batch` by its contract name.
pub fn by_rule_batch(batch: &RecordBatch, rule: &str) -> RecordBatch {
    SCALE_SCORES
        .check_schema(&batch.schema())
        .expect("a scale-score batch");
    let table = SCALE_SCORES_BY_RULE;
    let cols: Vec<ArrayRef> = table
        .columns()
        .iter()
        .map(|c| match c.name {
            "rule" => Arc::new(StringArray::from(vec![rule; batch.num_rows()])) as ArrayRef,
            name => batch
                .column_by_name(name)
                .unwrap_or_else(|| panic!("no value for column {name} of table {}", table.name))
                .clone(),
        })
        .collect();
    RecordBatch::try_new(table.schema(), cols).expect("fixture schema")
}

/// [`protospread_score::score_in_memory`] of `records` without reruns, its tables read back as
/// rows.
pub fn parse_and_score(
    source: &str,
    input_label: Option<&str>,
    records: &[StoredRecord],
    vocab: &Vocabulary,
    key: &ScoringKey,
    norms: &Norms,
) -> Result<(Vec<ParsedRow>, Vec<ScaleRow>, AnswerSourceSummary), ScoreError> {
    let m =
        protospread_score::score_in_memory(source, input_label, records, vocab, key, norms, &[])?;
    Ok((rows_of(&m.parsed), rows_of(&m.scales), m.summary))
}

#[cfg(test)]
mod tests {
    use super::*;
    use protospread_core::{Column, ColumnType};

    const AB: TableContract = TableContract::new(
        "ab",
        "score",
        1,
        &[&[
            Column::required("a", ColumnType::Text),
            Column::optional("b", ColumnType::Int32),
        ]],
        &["a"],
    );

    contract_row! {
        /// Only the first column of [`AB`].
        OnlyA = AB;
        {
            /// Column a.
            a: String,
        }
    }

    contract_row! {
        /// Both columns of [`AB`].
        Both = AB;
        {
            /// Column a.
            a: String,
            /// Column b.
            b: Option<i32>,
        }
    }

    #[test]
    #[should_panic(expected = "are not the columns of table ab")]
    fn a_row_without_a_contract_column_cannot_be_built() {
        batch_of(&[OnlyA { a: "x".into() }]);
    }

    #[test]
    #[should_panic(expected = "are not the columns of table ab")]
    fn a_row_without_a_contract_column_cannot_be_read() {
        let b = batch_of(&[Both {
            a: "x".into(),
            b: None,
        }]);
        rows_of::<OnlyA>(&[b]);
    }

    #[test]
    #[should_panic(expected = "column `b` is missing (table ab v1)")]
    fn a_batch_without_a_contract_column_is_refused() {
        let b = batch_of(&[Both {
            a: "x".into(),
            b: Some(1),
        }]);
        rows_of::<Both>(&[b.project(&[0]).unwrap()]);
    }

    #[test]
    #[should_panic(expected = "null in required column a of table ab, row 1")]
    fn a_null_in_a_required_column_is_refused() {
        let a: ArrayRef = Arc::new(StringArray::from(vec![Some("x"), None]));
        let b: ArrayRef = Arc::new(Int32Array::from(vec![Some(1), None]));
        let schema = Arc::new(arrow::datatypes::Schema::new(vec![
            arrow::datatypes::Field::new("a", DataType::Utf8, true),
            arrow::datatypes::Field::new("b", DataType::Int32, true),
        ]));
        rows_of::<Both>(&[RecordBatch::try_new(schema, vec![a, b]).unwrap()]);
    }

    #[test]
    fn the_fixture_rows_survive_a_round_trip_through_their_contracts() {
        let (scores, answers) = crate::rows();
        assert_eq!(rows_of::<ScaleRow>(&[batch_of(&scores)]), scores);
        assert_eq!(rows_of::<ParsedRow>(&[batch_of(&answers)]), answers);
        // The label column is written as the contract's dictionary and read back as text.
        let b = batch_of(&answers);
        assert!(matches!(
            b.column_by_name("lenient_status").unwrap().data_type(),
            DataType::Dictionary(..)
        ));
    }
}
