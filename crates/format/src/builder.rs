//! Building batches of stored answers a record at a time: one builder per column of the
//! contract [`STORED_ANSWERS`], used by the import, the generators and [`crate::to_batch`].

use crate::record::{Arm, Mode, OptionOrder};
use arrow::array::{
    ArrayRef, Float64Builder, Int32Builder, Int64Builder, RecordBatch, StringBuilder,
};
use arrow::error::ArrowError;
use protospread_core::STORED_ANSWERS;
use std::sync::Arc;

/// One record's values, borrowed from wherever the caller holds them (nothing is kept per
/// record: the values go straight into the column builders).
#[derive(Debug, Clone, Copy)]
pub struct RecordValues<'a> {
    /// Stored-answer format version.
    pub format_version: i32,
    /// Study name.
    pub study: &'a str,
    /// Model id.
    pub model: &'a str,
    /// How the model was run.
    pub arm: Arm,
    /// Cohort, if any.
    pub cohort: Option<&'a str>,
    /// Condition code.
    pub condition: &'a str,
    /// 1-based sample index.
    pub sample: i32,
    /// Test name.
    pub test: &'a str,
    /// One item per request or the whole test.
    pub mode: Mode,
    /// Human item number, single mode only.
    pub item: Option<i32>,
    /// Item order as written in files (human item numbers joined by `;`), whole mode only.
    pub item_order: Option<&'a str>,
    /// Seed of the item-order shuffle.
    pub order_seed: Option<i64>,
    /// Order in which the options were shown.
    pub option_order: OptionOrder,
    /// Instruction variant.
    pub instruction: &'a str,
    /// Temperature, when the harness set one.
    pub temperature: Option<f64>,
    /// The raw reply.
    pub reply: &'a str,
    /// Why the request failed.
    pub error: Option<&'a str>,
    /// Provenance label.
    pub label: Option<&'a str>,
}

/// Declares [`RecordBuilder`] from one list of the columns of [`STORED_ANSWERS`], in its order:
/// each column's builder, and how the [`RecordValues`] field of the same name is appended (a
/// function applied to it first, when given).
macro_rules! record_builder {
    ($($col:ident: $builder:ty => $append:ident $(($conv:path))?;)*) => {
        /// Column builders of a batch of stored answers, in the order of [`STORED_ANSWERS`].
        #[derive(Debug, Default)]
        pub struct RecordBuilder {
            $($col: $builder,)*
            len: usize,
        }

        impl RecordBuilder {
            /// Append one record.
            pub fn append(&mut self, r: &RecordValues<'_>) {
                $(self.$col.$append($($conv)?(r.$col));)*
                self.len += 1;
            }

            /// The columns so far, in the order of [`STORED_ANSWERS`]; the builders start over.
            pub fn finish_columns(&mut self) -> Vec<ArrayRef> {
                self.len = 0;
                let cols: Vec<ArrayRef> = vec![$(Arc::new(self.$col.finish()),)*];
                debug_assert_eq!(cols.len(), STORED_ANSWERS.len());
                cols
            }
        }
    };
}

record_builder! {
    format_version: Int32Builder => append_value;
    study: StringBuilder => append_value;
    model: StringBuilder => append_value;
    arm: StringBuilder => append_value(Arm::as_str);
    cohort: StringBuilder => append_option;
    condition: StringBuilder => append_value;
    sample: Int32Builder => append_value;
    test: StringBuilder => append_value;
    mode: StringBuilder => append_value(Mode::as_str);
    item: Int32Builder => append_option;
    item_order: StringBuilder => append_option;
    order_seed: Int64Builder => append_option;
    option_order: StringBuilder => append_value(OptionOrder::as_str);
    instruction: StringBuilder => append_value;
    temperature: Float64Builder => append_option;
    reply: StringBuilder => append_value;
    error: StringBuilder => append_option;
    label: StringBuilder => append_option;
}

impl RecordBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records appended since the last [`Self::finish`].
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no record was appended since the last [`Self::finish`].
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The batch so far in the schema of [`STORED_ANSWERS`]; the builders start over.
    pub fn finish(&mut self) -> Result<RecordBatch, ArrowError> {
        RecordBatch::try_new(STORED_ANSWERS.schema(), self.finish_columns())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The builder's columns are the contract's, in its order and with its types: a column
    /// added to the contract and not here fails.
    #[test]
    fn the_builder_makes_the_contract_schema() {
        let mut b = RecordBuilder::new();
        b.append(&RecordValues {
            format_version: 1,
            study: "s",
            model: "m",
            arm: Arm::Api,
            cohort: None,
            condition: "S0",
            sample: 1,
            test: "big_five",
            mode: Mode::Single,
            item: Some(1),
            item_order: None,
            order_seed: None,
            option_order: OptionOrder::Human,
            instruction: "P1",
            temperature: Some(0.0),
            reply: "3",
            error: None,
            label: None,
        });
        let batch = b.finish().unwrap();
        assert_eq!(batch.num_rows(), 1);
        assert!(b.is_empty());
    }
}
