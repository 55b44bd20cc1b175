//! What the functions that read replies share ([`crate::functions`]): a request's readings
//! under a reply rule ([`request_readings`], one definition for every function), the scoring
//! key as the tallies read it ([`KeyPoints`]), and the arguments' casting.

use crate::rules::{Reading, ReplyRule, Status};
use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray};
use datafusion::arrow::datatypes::{DataType, Field, Fields, Int32Type};
use datafusion::common::{exec_err, Result};
use protospread_format::{option_to_value, OptionOrder};

/// The type of `lenient_status`: a one-byte key into the names of [`Status::ALL`], so the
/// column costs a byte per item, not a text.
pub(crate) fn status_dictionary() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int8), Box::new(DataType::Utf8))
}

/// The arguments of function `name`, each as the type in `types` (by [`text_or_cast`]).
pub(crate) fn cast_args(
    values: &[ArrayRef],
    types: &[DataType],
    name: &str,
) -> Result<Vec<ArrayRef>> {
    if values.len() != types.len() {
        return exec_err!(
            "{name}: expected {} arguments, got {}",
            types.len(),
            values.len()
        );
    }
    values
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

/// A text argument as [`cast_args`] hands it over: plain UTF-8, or string views read in place.
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
/// `strict_administration` takes the test before them).
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

/// Those six arguments, cast by [`cast_args`] to [`reply_arg_types`].
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

    /// The requests (rows) of the batch.
    pub(crate) fn rows(&self) -> usize {
        self.reply.len()
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

/// A test's items by number: (dimension slot, points of each human value), `None` for a number
/// the key does not score.
pub(crate) type ItemPoints = Vec<Option<(usize, Vec<f64>)>>;

/// The scoring key as the administration's tallies read it: for each test, each item's dimension slot (the
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

/// The fields of a dimension slot's tally: its `ix`, the items counted and their points.
pub(crate) fn slot_fields() -> Fields {
    Fields::from(vec![
        Field::new("ix", DataType::Int32, false),
        Field::new("n", DataType::Int64, false),
        Field::new("p", DataType::Float64, true),
    ])
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
