//! `strict_readings(mode, item, reply, failed, option_order, item_order)`
//! (`lenient_readings` for the lenient rule): one request's readings, one per item it showed,
//! **in item order**: a single-item request's one reading (`shown_position` null), or a
//! whole-test request's reading of each shown position placed on the human item shown there.
//!
//! Item order is what lets the plans skip a sort: the stored answers arrive sorted by
//! administration and, within a single-item administration, by item; an administration is one
//! mode (an administration setting), and a whole-test administration is one request. So the
//! readings expanded with `unnest` come out in (administration, item) order.
//!
//! A reading is struct `{item, shown_position, option, value, status, lenient_status}`;
//! `lenient_status` is the lenient rule's status of the same item, a dictionary over
//! [`Status::ALL`].

use crate::kernels::{
    cast_args, reply_arg_types, request_readings, status_dictionary, value, ReplyArgs,
};
use crate::rules::{Reading, ReplyRule, Status};
use datafusion::arrow::array::{
    ArrayRef, DictionaryArray, Int32Array, Int32Builder, Int8Array, ListArray, StringArray,
    StringBuilder, StructArray,
};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::datatypes::{DataType, Field, Fields, Int8Type};
use datafusion::common::{exec_err, Result};
use datafusion::logical_expr::{ScalarUDF, Signature, Volatility};
use protospread_engine::{array_udf, ArrayFunction};
use std::sync::Arc;

/// The function of `rule`, ready to register.
pub(super) fn udf(rule: ReplyRule) -> ScalarUDF {
    array_udf(Readings { rule }, Signature::any(6, Volatility::Immutable))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Readings {
    rule: ReplyRule,
}

impl ArrayFunction for Readings {
    fn name(&self) -> &str {
        match self.rule {
            ReplyRule::Strict => "strict_readings",
            ReplyRule::Lenient => "lenient_readings",
        }
    }
    fn return_type(&self) -> DataType {
        DataType::new_list(DataType::Struct(position_fields()), true)
    }
    fn invoke(&self, args: &[ArrayRef]) -> Result<ArrayRef> {
        let a = cast_args(args, &reply_arg_types(), self.name())?;
        let request = ReplyArgs::of(&a);
        let rows = request.rows();
        // One typed builder per field, not a struct builder: that one looks each field's
        // builder up by type for every value (five per item; at 10^8 answers half a billion
        // lookups per plan that reads replies).
        let mut offsets: Vec<i32> = Vec::with_capacity(rows + 1);
        offsets.push(0);
        let mut items: Vec<i32> = Vec::with_capacity(rows);
        let mut positions = Int32Builder::with_capacity(rows);
        let mut options = Int32Builder::with_capacity(rows);
        let mut values = Int32Builder::with_capacity(rows);
        let mut statuses = StringBuilder::with_capacity(rows, 2 * rows);
        let mut lenient: Vec<i8> = Vec::with_capacity(rows);
        // (item, shown position, reading) of the current request, and of its lenient reading.
        let mut shown: Vec<(i32, Option<i32>, Reading)> = Vec::new();
        let mut again: Vec<(i32, Option<i32>, Reading)> = Vec::new();
        for i in 0..rows {
            let oo = request_readings(self.rule, self.name(), i, &request, &mut shown)?;
            lenient_statuses(self.rule, i, &request, &shown, &mut again, &mut lenient)?;
            for (it, pos, r) in &shown {
                items.push(*it);
                positions.append_option(*pos);
                options.append_option(r.option);
                values.append_option(value(r, oo));
                statuses.append_value(r.status.as_str());
            }
            let end = i32::try_from(items.len())
                .or_else(|_| exec_err!("{}: more than 2^31 readings in one batch", self.name()))?;
            offsets.push(end);
        }
        let fields = position_fields();
        let values = StructArray::try_new(
            fields.clone(),
            vec![
                Arc::new(Int32Array::from(items)),
                Arc::new(positions.finish()),
                Arc::new(options.finish()),
                Arc::new(values.finish()),
                Arc::new(statuses.finish()),
                Arc::new(DictionaryArray::<Int8Type>::try_new(
                    Int8Array::from(lenient),
                    Arc::new(StringArray::from_iter_values(
                        Status::ALL.iter().map(|s| s.as_str()),
                    )),
                )?),
            ],
            None,
        )?;
        let list = ListArray::try_new(
            Arc::new(Field::new_list_field(DataType::Struct(fields), true)),
            OffsetBuffer::new(offsets.into()),
            Arc::new(values),
            None,
        )?;
        Ok(Arc::new(list))
    }
}

/// The fields of a reading.
fn position_fields() -> Fields {
    Fields::from(vec![
        Field::new("item", DataType::Int32, false),
        Field::new("shown_position", DataType::Int32, true),
        Field::new("option", DataType::Int32, true),
        Field::new("value", DataType::Int32, true),
        Field::new("status", DataType::Utf8, false),
        Field::new("lenient_status", status_dictionary(), false),
    ])
}

/// The statuses of the lenient rule for the readings in `shown` (of `rule`). The lenient rule
/// reads every reply the strict rule reads alike (property-tested in crates/score/src/rules.rs), a
/// failed request is failed under both, and a whole-test reply has the same answer lines
/// under both (so the same missing and duplicate positions): only a strict `not_a_number`
/// can read otherwise, so the request is read again only when it has one.
fn lenient_statuses(
    rule: ReplyRule,
    i: usize,
    args: &ReplyArgs<'_>,
    shown: &[(i32, Option<i32>, Reading)],
    again: &mut Vec<(i32, Option<i32>, Reading)>,
    out: &mut Vec<i8>,
) -> Result<()> {
    let reread =
        rule != ReplyRule::Lenient && shown.iter().any(|x| x.2.status == Status::NotANumber);
    if reread {
        request_readings(ReplyRule::Lenient, "lenient_status", i, args, again)?;
        out.extend(again.iter().map(|x| status_key(x.2.status)));
    } else {
        out.extend(shown.iter().map(|x| status_key(x.2.status)));
    }
    Ok(())
}

/// The key of a status in `lenient_status`: its position in [`Status::ALL`].
fn status_key(s: Status) -> i8 {
    Status::ALL.iter().position(|x| *x == s).unwrap_or(0) as i8
}
