//! The stored-answer rules as DataFusion scalar functions, each wrapping the one plain Rust
//! function that defines the rule, so that a plan and the plain code can never disagree.
//!
//! | SQL function | wraps | returns |
//! |---|---|---|
//! | `strict_reply(reply, failed, option_order)` | [`read_single`], [`option_to_value`] | struct `{option, value, status}` |
//! | `whole_reply(reply, failed, option_order, item_order)` | [`read_whole`], [`option_to_value`] | list of struct `{item, shown_position, option, value, status}`, one per shown position |
//! | `lenient_reply`, `whole_reply_lenient` (same arguments) | the same with [`ReplyRule::Lenient`] | as above |
//! | `reply_counts(rule, reply, failed, item_order)` | [`ReplyRule::read_single`], [`ReplyRule::read_whole`] | struct `{items, readable_items}`: positions shown (1 for a single-item request) and those read `ok` |
//! | `scale_value(points, max_points, raw_unit)` | [`crate::scorer::scale_value`] | f64 |
//! | `norm_z(test, dimension, value)` | [`crate::norms::Norm::z`] | f64, null when not finite |
//! | `norm_percentile(test, dimension, value)` | [`crate::norms::Norm::percentile`] | f64, null when not finite |
//!
//! Arguments of any string type (Utf8, Utf8View, dictionaries) are accepted and cast once per
//! batch; `failed` is a boolean (the request's `error` is not null).

use crate::norms::Norms;
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Float64Array, Float64Builder, Int32Builder,
    ListBuilder, StringBuilder, StructArray, StructBuilder,
};
use datafusion::arrow::datatypes::{DataType, Field, Fields};
use datafusion::common::{exec_err, Result};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use protospread_answers::OptionOrder;
use protospread_answers::{option_to_value, Reading, ReplyRule, Status};
use std::sync::Arc;

/// Every function of this module, ready to register on a session.
pub(crate) fn udfs(norms: Arc<Norms>) -> Vec<ScalarUDF> {
    vec![
        ScalarUDF::from(StrictReply::new(ReplyRule::Strict)),
        ScalarUDF::from(WholeReply::new(ReplyRule::Strict)),
        ScalarUDF::from(StrictReply::new(ReplyRule::Lenient)),
        ScalarUDF::from(WholeReply::new(ReplyRule::Lenient)),
        ScalarUDF::from(ReplyCounts::new()),
        ScalarUDF::from(ScaleValue::new()),
        ScalarUDF::from(NormFn::new("norm_z", norms.clone())),
        ScalarUDF::from(NormFn::new("norm_percentile", norms)),
    ]
}

fn reading_fields() -> Fields {
    Fields::from(vec![
        Field::new("option", DataType::Int32, true),
        Field::new("value", DataType::Int32, true),
        Field::new("status", DataType::Utf8, false),
    ])
}

fn position_fields() -> Fields {
    Fields::from(vec![
        Field::new("item", DataType::Int32, false),
        Field::new("shown_position", DataType::Int32, false),
        Field::new("option", DataType::Int32, true),
        Field::new("value", DataType::Int32, true),
        Field::new("status", DataType::Utf8, false),
    ])
}

/// Arguments as arrays of one length, each cast to the type the function reads.
fn arrays(args: &ScalarFunctionArgs, types: &[DataType]) -> Result<Vec<ArrayRef>> {
    let arrays = ColumnarValue::values_to_arrays(&args.args)?;
    if arrays.len() != types.len() {
        return exec_err!("expected {} arguments, got {}", types.len(), arrays.len());
    }
    arrays
        .iter()
        .zip(types)
        .map(|(a, t)| Ok(datafusion::arrow::compute::cast(a, t)?))
        .collect()
}

fn option_order(text: &str) -> Result<OptionOrder> {
    match OptionOrder::parse(text) {
        Some(o) => Ok(o),
        None => exec_err!("option_order {text:?} is not one of human, reversed"),
    }
}

/// The reading of one request's reply: the failed-request rule, then the reply rule.
fn reading(rule: ReplyRule, reply: &str, failed: bool) -> Reading {
    if failed {
        Reading {
            option: None,
            status: Status::RequestFailed,
        }
    } else {
        rule.read_single(reply)
    }
}

/// The human items shown by a whole-test request, in shown order.
fn shown_items(item_order: &str) -> Result<Vec<i32>> {
    match item_order
        .split(';')
        .map(|x| x.parse::<i32>())
        .collect::<std::result::Result<Vec<_>, _>>()
    {
        Ok(items) => Ok(items),
        Err(_) => exec_err!("item_order {item_order:?} is not a list of item numbers"),
    }
}

/// The human value of a reading: only `ok` readings have one.
fn value(r: &Reading, order: OptionOrder) -> Option<i32> {
    match (r.status, r.option) {
        (Status::Ok, Some(o)) => option_to_value(o, order),
        _ => None,
    }
}

/// `strict_reply(reply, failed, option_order)` (`lenient_reply` for the lenient rule): a
/// single-item request's reading.
#[derive(Debug, PartialEq, Eq, Hash)]
struct StrictReply {
    rule: ReplyRule,
    signature: Signature,
}

impl StrictReply {
    fn new(rule: ReplyRule) -> Self {
        StrictReply {
            rule,
            signature: Signature::any(3, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for StrictReply {
    fn name(&self) -> &str {
        match self.rule {
            ReplyRule::Strict => "strict_reply",
            ReplyRule::Lenient => "lenient_reply",
        }
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Struct(reading_fields()))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let a = arrays(&args, &[DataType::Utf8, DataType::Boolean, DataType::Utf8])?;
        let (reply, failed, order) = (
            a[0].as_string::<i32>(),
            a[1].as_boolean(),
            a[2].as_string::<i32>(),
        );
        let n = reply.len();
        let (mut opt, mut val, mut st) = (
            Int32Builder::with_capacity(n),
            Int32Builder::with_capacity(n),
            StringBuilder::with_capacity(n, n * 2),
        );
        for i in 0..n {
            if reply.is_null(i) || failed.is_null(i) || order.is_null(i) {
                return exec_err!("{}: null argument in row {i}", self.name());
            }
            let r = reading(self.rule, reply.value(i), failed.value(i));
            opt.append_option(r.option);
            val.append_option(value(&r, option_order(order.value(i))?));
            st.append_value(r.status.as_str());
        }
        let s = StructArray::try_new(
            reading_fields(),
            vec![
                Arc::new(opt.finish()),
                Arc::new(val.finish()),
                Arc::new(st.finish()),
            ],
            None,
        )?;
        Ok(ColumnarValue::Array(Arc::new(s)))
    }
}

/// `whole_reply(reply, failed, option_order, item_order)` (`whole_reply_lenient` for the
/// lenient rule): a whole-test request's readings, one per shown position, each placed on the
/// human item shown there.
#[derive(Debug, PartialEq, Eq, Hash)]
struct WholeReply {
    rule: ReplyRule,
    signature: Signature,
}

impl WholeReply {
    fn new(rule: ReplyRule) -> Self {
        WholeReply {
            rule,
            signature: Signature::any(4, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for WholeReply {
    fn name(&self) -> &str {
        match self.rule {
            ReplyRule::Strict => "whole_reply",
            ReplyRule::Lenient => "whole_reply_lenient",
        }
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::new_list(
            DataType::Struct(position_fields()),
            true,
        ))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let a = arrays(
            &args,
            &[
                DataType::Utf8,
                DataType::Boolean,
                DataType::Utf8,
                DataType::Utf8,
            ],
        )?;
        let (reply, failed, order, item_order) = (
            a[0].as_string::<i32>(),
            a[1].as_boolean(),
            a[2].as_string::<i32>(),
            a[3].as_string::<i32>(),
        );
        let fields = position_fields();
        let mut list = ListBuilder::new(StructBuilder::from_fields(fields.clone(), 0)).with_field(
            Arc::new(Field::new_list_field(DataType::Struct(fields), true)),
        );
        for i in 0..reply.len() {
            // The planner may evaluate this before the `mode = 'whole'` filter: a request
            // without an item order (single mode) shows no positions.
            if reply.is_null(i) || failed.is_null(i) || order.is_null(i) || item_order.is_null(i) {
                list.append(true);
                continue;
            }
            let items = shown_items(item_order.value(i))?;
            let oo = option_order(order.value(i))?;
            let readings = if failed.value(i) {
                vec![reading(self.rule, "", true); items.len()]
            } else {
                self.rule.read_whole(reply.value(i), items.len())
            };
            let s = list.values();
            for (p, (r, item)) in readings.iter().zip(&items).enumerate() {
                s.field_builder::<Int32Builder>(0)
                    .expect("item")
                    .append_value(*item);
                s.field_builder::<Int32Builder>(1)
                    .expect("shown_position")
                    .append_value(p as i32 + 1);
                s.field_builder::<Int32Builder>(2)
                    .expect("option")
                    .append_option(r.option);
                s.field_builder::<Int32Builder>(3)
                    .expect("value")
                    .append_option(value(r, oo));
                s.field_builder::<StringBuilder>(4)
                    .expect("status")
                    .append_value(r.status.as_str());
                s.append(true);
            }
            list.append(true);
        }
        Ok(ColumnarValue::Array(Arc::new(list.finish())))
    }
}

fn count_fields() -> Fields {
    Fields::from(vec![
        Field::new("items", DataType::Int32, false),
        Field::new("readable_items", DataType::Int32, false),
    ])
}

/// `reply_counts(rule, reply, failed, item_order)`: how many items a request shows (1 for a
/// single-item request, whose `item_order` is null) and how many of them the rule reads `ok`.
#[derive(Debug, PartialEq, Eq, Hash)]
struct ReplyCounts {
    signature: Signature,
}

impl ReplyCounts {
    fn new() -> Self {
        ReplyCounts {
            signature: Signature::any(4, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for ReplyCounts {
    fn name(&self) -> &str {
        "reply_counts"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Struct(count_fields()))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let a = arrays(
            &args,
            &[
                DataType::Utf8,
                DataType::Utf8,
                DataType::Boolean,
                DataType::Utf8,
            ],
        )?;
        let (rule, reply, failed, item_order) = (
            a[0].as_string::<i32>(),
            a[1].as_string::<i32>(),
            a[2].as_boolean(),
            a[3].as_string::<i32>(),
        );
        let n = reply.len();
        let (mut items, mut readable) = (
            Int32Builder::with_capacity(n),
            Int32Builder::with_capacity(n),
        );
        for i in 0..n {
            if rule.is_null(i) || reply.is_null(i) || failed.is_null(i) {
                return exec_err!("reply_counts: null argument in row {i}");
            }
            let Some(r) = ReplyRule::parse(rule.value(i)) else {
                return exec_err!("reply_counts: unknown reply rule {:?}", rule.value(i));
            };
            let readings = match (failed.value(i), item_order.is_null(i)) {
                (true, true) => vec![reading(r, "", true)],
                (true, false) => {
                    vec![reading(r, "", true); shown_items(item_order.value(i))?.len()]
                }
                (false, true) => vec![r.read_single(reply.value(i))],
                (false, false) => {
                    r.read_whole(reply.value(i), shown_items(item_order.value(i))?.len())
                }
            };
            let ok = readings.iter().filter(|x| x.status == Status::Ok).count();
            items.append_value(readings.len() as i32);
            readable.append_value(ok as i32);
        }
        let s = StructArray::try_new(
            count_fields(),
            vec![Arc::new(items.finish()), Arc::new(readable.finish())],
            None,
        )?;
        Ok(ColumnarValue::Array(Arc::new(s)))
    }
}

/// `scale_value(points, max_points, raw_unit)`: the scorer's value of a complete dimension.
#[derive(Debug, PartialEq, Eq, Hash)]
struct ScaleValue {
    signature: Signature,
}

impl ScaleValue {
    fn new() -> Self {
        ScaleValue {
            signature: Signature::any(3, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for ScaleValue {
    fn name(&self) -> &str {
        "scale_value"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let a = arrays(
            &args,
            &[DataType::Float64, DataType::Float64, DataType::Boolean],
        )?;
        let points = a[0].as_primitive::<datafusion::arrow::datatypes::Float64Type>();
        let max = a[1].as_primitive::<datafusion::arrow::datatypes::Float64Type>();
        let raw: &BooleanArray = a[2].as_boolean();
        let out: Float64Array = (0..points.len())
            .map(|i| {
                (!points.is_null(i) && !max.is_null(i) && !raw.is_null(i)).then(|| {
                    crate::scorer::scale_value(points.value(i), max.value(i), raw.value(i))
                })
            })
            .collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

/// `norm_z` / `norm_percentile(test, dimension, value)`: a value placed in the human norms.
#[derive(Debug)]
struct NormFn {
    name: &'static str,
    norms: Arc<Norms>,
    signature: Signature,
}

impl NormFn {
    fn new(name: &'static str, norms: Arc<Norms>) -> Self {
        NormFn {
            name,
            norms,
            signature: Signature::any(3, Volatility::Immutable),
        }
    }
}

// Two instances are the same function when they read the same norms object.
impl PartialEq for NormFn {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && Arc::ptr_eq(&self.norms, &other.norms)
    }
}
impl Eq for NormFn {}
impl std::hash::Hash for NormFn {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
        Arc::as_ptr(&self.norms).hash(state);
    }
}

impl ScalarUDFImpl for NormFn {
    fn name(&self) -> &str {
        self.name
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let a = arrays(&args, &[DataType::Utf8, DataType::Utf8, DataType::Float64])?;
        let (test, dim) = (a[0].as_string::<i32>(), a[1].as_string::<i32>());
        let v = a[2].as_primitive::<datafusion::arrow::datatypes::Float64Type>();
        let mut out = Float64Builder::with_capacity(v.len());
        for i in 0..v.len() {
            let x = if test.is_null(i) || dim.is_null(i) || v.is_null(i) {
                None
            } else {
                self.norms
                    .get(test.value(i), dim.value(i))
                    .map(|nm| match self.name {
                        "norm_z" => nm.z(v.value(i)),
                        _ => nm.percentile(v.value(i)),
                    })
                    .filter(|x| x.is_finite())
            };
            out.append_option(x);
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}
