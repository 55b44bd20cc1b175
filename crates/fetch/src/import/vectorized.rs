//! The import's record rules applied to a whole Parquet batch at once.
//!
//! Most stored-answer Parquet files are valid and typed as the format describes them (texts as
//! strings, numbers as integers, temperatures as doubles). For those, checking each column as
//! a whole and keeping its arrays avoids turning every cell into text and building it again,
//! which was most of the fetch stage's time.
//!
//! This is only a faster way to *accept* a batch. When a batch holds anything these checks do
//! not vouch for (a column of another type, a value they would refuse, an item order not in
//! its canonical form), [`accept`] declines and the batch goes through the row-by-row rules
//! (`import::validate`), which accept it or name the first invalid record. So every refusal,
//! and every message, comes from the one set of rules, and a batch accepted here is exactly
//! what the row rules would have made of it (a property test in `import` compares the two).

use arrow::array::{
    new_null_array, Array, ArrayRef, AsArray, BooleanArray, Float64Array, Int32Array, Int64Array,
    RecordBatch, StringArray, UInt64Array,
};
use arrow::compute::{cast, nullif};
use arrow::datatypes::{DataType, Float64Type, Int64Type, SchemaRef};
use protospread_format::{Arm, Mode, OptionOrder, Vocabulary, COLUMNS, FORMAT_VERSION};
use std::sync::Arc;

/// The index of a column of [`COLUMNS`].
fn slot(name: &str) -> usize {
    COLUMNS
        .iter()
        .position(|c| *c == name)
        .expect("a stored-answer column")
}

/// A column as text, if it is stored as text: `Some(None)` when the file has no such column,
/// `None` (decline the batch) when it has another type.
fn text(col: Option<&ArrayRef>) -> Option<Option<StringArray>> {
    let Some(c) = col else { return Some(None) };
    let is_text =
        |t: &DataType| matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View);
    let ok = match c.data_type() {
        DataType::Dictionary(_, v) => is_text(v),
        t => is_text(t),
    };
    if !ok {
        return None;
    }
    Some(Some(
        cast(c, &DataType::Utf8).ok()?.as_string::<i32>().clone(),
    ))
}

/// A column of integers as i64: `Some(None)` when absent, `None` for any other type (an
/// unsigned 64-bit column could overflow; text goes through the row rules).
fn integers(col: Option<&ArrayRef>) -> Option<Option<Int64Array>> {
    let Some(c) = col else { return Some(None) };
    match c.data_type() {
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32 => {}
        _ => return None,
    }
    Some(Some(
        cast(c, &DataType::Int64)
            .ok()?
            .as_primitive::<Int64Type>()
            .clone(),
    ))
}

/// Whether no value is null and none is empty (an empty cell is a missing value).
fn all_present(a: &StringArray) -> bool {
    a.null_count() == 0 && a.offsets().windows(2).all(|w| w[1] > w[0])
}

/// Whether every value passes `ok`, asked once per run of equal values (categorical
/// columns come in long runs).
fn every_value(a: &StringArray, ok: impl Fn(&str) -> bool) -> bool {
    let mut last: Option<&str> = None;
    for v in a {
        let Some(v) = v else { return false };
        if last != Some(v) {
            if !ok(v) {
                return false;
            }
            last = Some(v);
        }
    }
    true
}

/// An optional text column with empty cells made null, as the row rules read them.
fn empty_as_null(a: Option<StringArray>, n: usize) -> Option<ArrayRef> {
    let Some(a) = a else {
        return Some(new_null_array(&DataType::Utf8, n));
    };
    if a.offsets().windows(2).all(|w| w[1] > w[0]) {
        return Some(Arc::new(a));
    }
    let empty: BooleanArray = a.iter().map(|v| Some(v == Some(""))).collect();
    nullif(&a, &empty).ok()
}

/// An item order in canonical form (no leading zeros) listing each of `n` items exactly
/// once. `seen` is scratch space.
fn canonical_order(s: &str, n: u32, seen: &mut Vec<bool>) -> bool {
    seen.clear();
    seen.resize(n as usize + 1, false);
    let mut entries = 0u32;
    for part in s.split(';') {
        if part.is_empty() || part.starts_with('0') || !part.bytes().all(|b| b.is_ascii_digit()) {
            return false;
        }
        match part.parse::<u32>() {
            Ok(x) if (1..=n).contains(&x) && !std::mem::replace(&mut seen[x as usize], true) => {
                entries += 1;
            }
            _ => return false,
        }
    }
    entries == n
}

/// The temperature column when it is absent or holds finite, non-negative floats (`Some`);
/// `None` when the row rules must decide.
fn temperatures(col: Option<&ArrayRef>) -> Option<Option<Float64Array>> {
    Some(match col {
        None => None,
        Some(c) if c.data_type() == &DataType::Float64 => {
            let t = c.as_primitive::<Float64Type>().clone();
            // As the row rules read the value's text: finite and not negative (-0 passes).
            if t.iter().flatten().any(|v| !v.is_finite() || v < 0.0) {
                return None;
            }
            Some(t)
        }
        Some(_) => return None,
    })
}

/// The rules that depend on the mode and the test, record by record: mode single has an
/// item of its test and no order or seed; mode whole has no item and a canonical order of all
/// the test's items; a seed is never negative.
fn mode_rules_hold(
    vocab: &Vocabulary,
    test: &StringArray,
    mode: &StringArray,
    [item, order_seed]: [&Option<Int64Array>; 2],
    item_order: &Option<StringArray>,
) -> bool {
    let mut seen = Vec::new();
    let mut items_of: (Option<&str>, u32) = (None, 0);
    for i in 0..test.len() {
        let t = test.value(i);
        if items_of.0 != Some(t) {
            items_of = (Some(t), vocab.items(t).expect("checked above"));
        }
        let n_items = items_of.1;
        let it = item
            .as_ref()
            .and_then(|a| a.is_valid(i).then(|| a.value(i)));
        let order = item_order
            .as_ref()
            .and_then(|a| a.is_valid(i).then(|| a.value(i)))
            .filter(|s| !s.is_empty());
        let seed = order_seed
            .as_ref()
            .and_then(|a| a.is_valid(i).then(|| a.value(i)));
        if seed.is_some_and(|s| s < 0) {
            return false;
        }
        let ok = if mode.value(i) == Mode::Single.as_str() {
            it.is_some_and(|x| (1..=i64::from(n_items)).contains(&x))
                && order.is_none()
                && seed.is_none()
        } else {
            it.is_none() && order.is_some_and(|s| canonical_order(s, n_items, &mut seen))
        };
        if !ok {
            return false;
        }
    }
    true
}

/// The batch in the import's staging schema (`schema`: the stored-answer columns, then
/// `_row` and `_line`), if every record passes the record rules; `None` when the row rules
/// must decide. `map[j]` is the stored-answer column of the batch's column `j` (`None` for an
/// extension column); `first_row` is the 1-based data row of the batch's first record.
pub(crate) fn accept(
    batch: &RecordBatch,
    map: &[Option<usize>],
    vocab: &Vocabulary,
    first_row: usize,
    schema: &SchemaRef,
) -> Option<RecordBatch> {
    let n = batch.num_rows();
    let mut cols: Vec<Option<&ArrayRef>> = vec![None; COLUMNS.len()];
    for (j, k) in map.iter().enumerate() {
        if let Some(k) = k {
            cols[*k] = Some(batch.column(j));
        }
    }
    let col = |name: &str| cols[slot(name)];
    let required = |name: &str| text(col(name)).flatten().filter(all_present);
    // A required column whose every value passes `ok`.
    let checked =
        |name: &str, ok: &dyn Fn(&str) -> bool| required(name).filter(|a| every_value(a, ok));

    let fv = integers(col("format_version"))??;
    if fv.null_count() > 0 || fv.values().iter().any(|v| *v != i64::from(FORMAT_VERSION)) {
        return None;
    }
    let study = required("study")?;
    let model = required("model")?;
    let arm = checked("arm", &|v| Arm::parse(v).is_some())?;
    let condition = checked("condition", &|v| vocab.has_condition(v))?;
    let sample = integers(col("sample"))??;
    if sample.null_count() > 0
        || sample
            .values()
            .iter()
            .any(|v| !(0..=i64::from(i32::MAX)).contains(v))
    {
        return None;
    }
    let test = checked("test", &|v| vocab.items(v).is_some())?;
    let mode = checked("mode", &|v| Mode::parse(v).is_some())?;
    let item = integers(col("item"))?;
    let order_seed = integers(col("order_seed"))?;
    let item_order = text(col("item_order"))?;
    let option_order = checked("option_order", &|v| OptionOrder::parse(v).is_some())?;
    let instruction = checked("instruction", &|v| vocab.has_instruction(v))?;
    let temperature = temperatures(col("temperature"))?;
    let reply = text(col("reply"))??;

    if !mode_rules_hold(vocab, &test, &mode, [&item, &order_seed], &item_order) {
        return None;
    }

    let reply: ArrayRef = if reply.null_count() == 0 {
        Arc::new(reply)
    } else {
        Arc::new(StringArray::from_iter_values(
            reply.iter().map(|v| v.unwrap_or("")),
        ))
    };
    let to_i32 = |a: Option<Int64Array>| -> Option<ArrayRef> {
        match a {
            None => Some(new_null_array(&DataType::Int32, n)),
            Some(a) => cast(&a, &DataType::Int32).ok(),
        }
    };
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int32Array::from(vec![FORMAT_VERSION; n])),
        Arc::new(study),
        Arc::new(model),
        Arc::new(arm),
        empty_as_null(text(col("cohort"))?, n)?,
        Arc::new(condition),
        to_i32(Some(sample))?,
        Arc::new(test),
        Arc::new(mode),
        to_i32(item)?,
        empty_as_null(item_order, n)?,
        match order_seed {
            Some(a) => Arc::new(a),
            None => new_null_array(&DataType::Int64, n),
        },
        Arc::new(option_order),
        Arc::new(instruction),
        match temperature {
            Some(t) => Arc::new(t),
            None => Arc::new(Float64Array::new_null(n)),
        },
        reply,
        empty_as_null(text(col("error"))?, n)?,
        empty_as_null(text(col("label"))?, n)?,
        Arc::new(UInt64Array::from_iter_values(
            (first_row..first_row + n).map(|r| r as u64),
        )),
        new_null_array(&DataType::UInt64, n),
    ];
    RecordBatch::try_new(schema.clone(), columns).ok()
}
