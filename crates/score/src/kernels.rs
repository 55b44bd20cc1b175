//! The stored-answer rules as DataFusion scalar functions, each wrapping the one plain Rust
//! function that defines the rule, so that a plan and the plain code can never disagree.
//!
//! | SQL function | wraps | returns |
//! |---|---|---|
//! | `strict_readings(mode, item, reply, failed, option_order, item_order)` | [`read_single`], [`read_whole`], [`option_to_value`] | list of struct `{item, shown_position, option, value, status, lenient_status}`, one per item shown, in item order (`shown_position` null for a single-item request; `lenient_status` the lenient rule's status of the same item, a dictionary over [`Status::ALL`]) |
//! | `lenient_readings` (same arguments) | the same with [`ReplyRule::Lenient`] | as above |
//! | `scale_value(points, max_points, raw_unit)` | [`crate::scorer::scale_value`] | f64 |
//! | `norm_z(test, dimension, value)` | [`crate::norms::Norm::z`] | f64, null when not finite |
//! | `norm_percentile(test, dimension, value)` | [`crate::norms::Norm::percentile`] | f64, null when not finite |
//!
//! Arguments of any string type (Utf8, Utf8View, dictionaries) are accepted: string views are
//! read in place, other types cast once per batch; `failed` is a boolean (the request's `error`
//! is not null).

use crate::norms::{Norm, Norms};
use crate::rules::{Reading, ReplyRule, Status};
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, DictionaryArray, Float64Array, Float64Builder,
    Int32Array, Int32Builder, Int8Array, ListArray, StringArray, StringBuilder, StructArray,
};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::datatypes::{DataType, Field, Fields, Int32Type, Int8Type};
use datafusion::common::{exec_err, Result};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use protospread_format::{option_to_value, OptionOrder};
use std::sync::Arc;

/// `PartialEq`, `Eq` and `Hash` for a function that holds shared data (the key, the norms):
/// two instances are the same function when their `$name` fields are equal and they read the
/// same `$data` object (compared by address: the data has no cheap equality of its own).
macro_rules! same_function_by_data {
    ($t:ty, $name:ident, $data:ident) => {
        impl PartialEq for $t {
            fn eq(&self, other: &Self) -> bool {
                self.$name == other.$name && Arc::ptr_eq(&self.$data, &other.$data)
            }
        }
        impl Eq for $t {}
        impl std::hash::Hash for $t {
            fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
                self.$name.hash(state);
                Arc::as_ptr(&self.$data).hash(state);
            }
        }
    };
}

/// Every function of this module, ready to register on a session.
pub(crate) fn udfs(norms: Arc<Norms>) -> Vec<ScalarUDF> {
    vec![
        ScalarUDF::from(Readings::new(ReplyRule::Strict)),
        ScalarUDF::from(Readings::new(ReplyRule::Lenient)),
        ScalarUDF::from(ScaleValue::new()),
        ScalarUDF::from(NormFn::new("norm_z", norms.clone())),
        ScalarUDF::from(NormFn::new("norm_percentile", norms)),
    ]
}

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

/// The type of `lenient_status`: a one-byte key into the names of [`Status::ALL`], so the
/// column costs a byte per item, not a text.
pub(crate) fn status_dictionary() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int8), Box::new(DataType::Utf8))
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

/// Arguments as arrays of one length, each cast to the type the function reads.
fn arrays(args: &ScalarFunctionArgs, types: &[DataType]) -> Result<Vec<ArrayRef>> {
    let arrays = ColumnarValue::values_to_arrays(&args.args)?;
    if arrays.len() != types.len() {
        return exec_err!("expected {} arguments, got {}", types.len(), arrays.len());
    }
    arrays
        .iter()
        .zip(types)
        .map(|(a, t)| text_or_cast(a, t))
        .collect()
}

/// `a` as type `t`, except that string views stand for plain UTF-8: they are read in place
/// through [`Texts`], where a cast would copy every text of the batch.
pub(crate) fn text_or_cast(a: &ArrayRef, t: &DataType) -> Result<ArrayRef> {
    match (a.data_type(), t) {
        (DataType::Utf8View, DataType::Utf8) => Ok(a.clone()),
        _ => Ok(datafusion::arrow::compute::cast(a, t)?),
    }
}

/// A text argument as [`arrays`] hands it over: plain UTF-8, or string views read in place.
pub(crate) use protospread_engine::Texts;

fn option_order(text: &str) -> Result<OptionOrder> {
    match OptionOrder::parse(text) {
        Some(o) => Ok(o),
        None => exec_err!("option_order {text:?} is not one of human, reversed"),
    }
}

/// The reading of one request's reply: the failed-request rule, then the reply rule.
pub(crate) fn reading(rule: ReplyRule, reply: &str, failed: bool) -> Reading {
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
pub(crate) fn shown_items(item_order: &str) -> Result<Vec<i32>> {
    // The usual text (item numbers of one to nine digits between semicolons) read byte by
    // byte: `str::split` and `parse` took 200 instructions per number, and every whole-test
    // request is read by three functions. Anything else takes the general path below, which
    // decides what is accepted.
    let usual = |d: &[u8]| {
        ((1..=9).contains(&d.len()) && d.iter().all(u8::is_ascii_digit))
            .then(|| d.iter().fold(0i32, |n, c| n * 10 + i32::from(c - b'0')))
    };
    if let Some(items) = item_order
        .as_bytes()
        .split(|c| *c == b';')
        .map(usual)
        .collect::<Option<Vec<i32>>>()
    {
        return Ok(items);
    }
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
pub(crate) fn value(r: &Reading, order: OptionOrder) -> Option<i32> {
    match (r.status, r.option) {
        (Status::Ok, Some(o)) => option_to_value(o, order),
        _ => None,
    }
}

/// The types of the six arguments that say how a request was answered: `mode`, `item`,
/// `reply`, `failed`, `option_order`, `item_order` (`strict_readings` takes exactly these;
/// `strict_administration`, crate::tally, takes the test before them).
pub(crate) fn reply_arg_types() -> [DataType; 6] {
    [
        DataType::Utf8,
        DataType::Int32,
        DataType::Utf8,
        DataType::Boolean,
        DataType::Utf8,
        DataType::Utf8,
    ]
}

/// Those six arguments, cast by [`arrays`] to [`reply_arg_types`].
#[derive(Clone, Copy)]
pub(crate) struct ReplyArgs<'a> {
    mode: Texts<'a>,
    item: &'a datafusion::arrow::array::Int32Array,
    reply: Texts<'a>,
    failed: &'a BooleanArray,
    order: Texts<'a>,
    item_order: Texts<'a>,
}

impl<'a> ReplyArgs<'a> {
    pub(crate) fn of(a: &'a [ArrayRef]) -> Self {
        ReplyArgs {
            mode: Texts::new(&a[0]),
            item: a[1].as_primitive::<Int32Type>(),
            reply: Texts::new(&a[2]),
            failed: a[3].as_boolean(),
            order: Texts::new(&a[4]),
            item_order: Texts::new(&a[5]),
        }
    }
}

/// The readings of request `i` into `shown` as (item, shown position, reading), in item
/// order: the one definition of a request's readings that every function reading replies
/// uses. `texts` are the mode, reply, option order and item order columns. Returns the
/// request's option order.
pub(crate) fn request_readings(
    rule: ReplyRule,
    name: &str,
    i: usize,
    args: &ReplyArgs<'_>,
    shown: &mut Vec<(i32, Option<i32>, Reading)>,
) -> Result<OptionOrder> {
    let ReplyArgs {
        mode,
        item,
        reply,
        failed,
        order,
        item_order,
    } = *args;
    if mode.is_null(i) || reply.is_null(i) || failed.is_null(i) || order.is_null(i) {
        return exec_err!("{name}: null argument in row {i}");
    }
    let oo = option_order(order.value(i))?;
    shown.clear();
    match mode.value(i) {
        "single" => {
            if item.is_null(i) {
                return exec_err!("{name}: single-item request without item in row {i}");
            }
            let r = reading(rule, reply.value(i), failed.value(i));
            shown.push((item.value(i), None, r));
        }
        "whole" => {
            if item_order.is_null(i) {
                return exec_err!("{name}: whole-test request without item_order in row {i}");
            }
            let items = shown_items(item_order.value(i))?;
            let readings = if failed.value(i) {
                vec![reading(rule, "", true); items.len()]
            } else {
                rule.read_whole(reply.value(i), items.len())
            };
            for (p, (r, it)) in readings.into_iter().zip(&items).enumerate() {
                shown.push((*it, Some(p as i32 + 1), r));
            }
            // Stable: the import refuses an item shown twice, so ties do not occur.
            shown.sort_by_key(|x| x.0);
        }
        other => return exec_err!("{name}: unknown mode {other:?} in row {i}"),
    }
    Ok(oo)
}

/// `strict_readings(mode, item, reply, failed, option_order, item_order)`
/// (`lenient_readings` for the lenient rule): one request's readings, one per item it showed,
/// **in item order**: a single-item request's one reading (`shown_position` null), or a
/// whole-test request's reading of each shown position placed on the human item shown there.
///
/// Item order is what lets the plans skip a sort: the stored answers arrive sorted by
/// administration and, within a single-item administration, by item; an administration is one
/// mode (an administration setting), and a whole-test administration is one request. So the
/// readings expanded with `unnest` come out in (administration, item) order.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Readings {
    rule: ReplyRule,
    signature: Signature,
}

impl Readings {
    fn new(rule: ReplyRule) -> Self {
        Readings {
            rule,
            signature: Signature::any(6, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for Readings {
    fn name(&self) -> &str {
        match self.rule {
            ReplyRule::Strict => "strict_readings",
            ReplyRule::Lenient => "lenient_readings",
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
        let a = arrays(&args, &reply_arg_types())?;
        let request = ReplyArgs::of(&a);
        let rows = request.reply.len();
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
        Ok(ColumnarValue::Array(Arc::new(list)))
    }
}

/// A test's items by number: (dimension slot, points of each human value), `None` for a number
/// the key does not score.
pub(crate) type ItemPoints = Vec<Option<(usize, Vec<f64>)>>;

/// The scoring key as the administration's tallies read it ([`crate::tally`]): for each test, each item's dimension slot (the
/// dimension's rank by name within its test, the `ix` of the key tables) and its points for
/// each human value.
#[derive(Debug)]
pub(crate) struct KeyPoints {
    /// Test -> item number -> (slot, points of value 0..OPTIONS).
    tests: std::collections::BTreeMap<String, ItemPoints>,
    /// Slots of every tally: the most dimensions a test has (at least one).
    slots: usize,
}

impl KeyPoints {
    pub(crate) fn new(key: &crate::ScoringKey) -> Self {
        let mut tests = std::collections::BTreeMap::new();
        for (test, tk) in &key.tests {
            let slots = dimension_slots(tk);
            let top = tk.items.iter().map(|k| k.item).max().unwrap_or(0);
            let mut items = vec![None; top + 1];
            for k in &tk.items {
                let ix = slots[k.dim];
                let points = (0..protospread_format::OPTIONS)
                    .map(|v| crate::scorer::item_points(k, v))
                    .collect();
                items[k.item] = Some((ix, points));
            }
            tests.insert(test.clone(), items);
        }
        KeyPoints {
            tests,
            slots: tally_slots(key),
        }
    }

    /// Slots of every tally ([`tally_slots`]).
    pub(crate) fn slots(&self) -> usize {
        self.slots
    }

    /// The items of `test`, if the key scores it.
    pub(crate) fn items(&self, test: &str) -> Option<&ItemPoints> {
        self.tests.get(test)
    }
}

/// The slots of every tally: the most dimensions a test of `key` has, at least one. The
/// scale-score plans name the fields `n_0`, `p_0` ... up to this, so both read it here.
pub(crate) fn tally_slots(key: &crate::ScoringKey) -> usize {
    key.tests
        .values()
        .map(|t| t.dims.len())
        .max()
        .unwrap_or(0)
        .max(1)
}

/// The slot of each dimension of `tk` (in `tk.dims` order): its rank by name within the test.
pub(crate) fn dimension_slots(tk: &crate::key::TestKey) -> Vec<usize> {
    let mut names: Vec<&str> = tk.dims.iter().map(|r| r.name.as_str()).collect();
    names.sort_unstable();
    tk.dims
        .iter()
        .map(|d| {
            names
                .iter()
                .position(|n| *n == d.name)
                .expect("a dimension of the test")
        })
        .collect()
}

pub(crate) fn slot_fields() -> Fields {
    Fields::from(vec![
        Field::new("ix", DataType::Int32, false),
        Field::new("n", DataType::Int64, false),
        Field::new("p", DataType::Float64, true),
    ])
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

same_function_by_data!(NormFn, name, norms);

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
        let (test, dim) = (Texts::new(&a[0]), Texts::new(&a[1]));
        let v = a[2].as_primitive::<datafusion::arrow::datatypes::Float64Type>();
        let mut out = Float64Builder::with_capacity(v.len());
        // The norms of the last test seen by dimension: rows come an administration at a time
        // (one test, its dimensions in turn), and `Norms::get` builds its key's strings.
        let mut of_test: Option<(&str, Vec<(&str, &Norm)>)> = None;
        for i in 0..v.len() {
            let x = if test.is_null(i) || dim.is_null(i) || v.is_null(i) {
                None
            } else {
                let t = test.value(i);
                if of_test.as_ref().is_none_or(|(k, _)| *k != t) {
                    of_test = Some((t, self.norms.of_test(t).collect()));
                }
                let d = dim.value(i);
                of_test
                    .as_ref()
                    .and_then(|(_, dims)| dims.iter().find(|(k, _)| *k == d))
                    .map(|(_, nm)| match self.name {
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What `shown_items` read before its byte-level path: the general rule.
    fn general(item_order: &str) -> Option<Vec<i32>> {
        item_order
            .split(';')
            .map(|x| x.parse::<i32>())
            .collect::<std::result::Result<Vec<_>, _>>()
            .ok()
    }

    #[test]
    fn shown_items_edges() {
        for s in [
            "1;2;3",
            "007;8",
            "",
            ";",
            "1;;2",
            "1;",
            "+5;6",
            "-1;2",
            " 1;2",
            "999999999;1",
            "1000000000;1",
            "2147483647",
            "2147483648",
            "1;2a",
        ] {
            assert_eq!(shown_items(s).ok(), general(s), "{s:?}");
        }
    }

    proptest! {
        #[test]
        fn shown_items_reads_as_the_general_rule(s in "[0-9;+ a-]{0,40}") {
            prop_assert_eq!(shown_items(&s).ok(), general(&s));
        }
    }
}
