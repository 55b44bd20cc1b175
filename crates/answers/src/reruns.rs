//! Does the endpoint honour temperature 0? The study's checklist asks for it: a straight rerun
//! at temperature 0 (S0 vs S0r, B0 vs B0r) should give the same reply text. This compares raw
//! replies byte for byte, before any parsing, so that a reply that changes but still parses to
//! the same option is still seen as a change.

use crate::format::StoredRecord;
use crate::AnswersError;
use arrow::array::{ArrayRef, BooleanArray, Int32Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use std::collections::BTreeMap;
use std::sync::Arc;

/// File name of the table in the score stage's folder.
pub const RERUNS_FILE: &str = "reply_reruns.parquet";

/// One (source, model, test, pair) comparison.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RerunRow {
    pub source: String,
    pub label: String,
    pub model: String,
    pub test: String,
    pub first: String,
    pub rerun: String,
    /// Requests present in both conditions with neither failed.
    pub compared: i32,
    /// Of those, replies identical byte for byte.
    pub identical: i32,
    /// Requests present in only one of the two, or failed in either.
    pub unmatched: i32,
}

impl RerunRow {
    /// True when every compared reply was identical (and at least one was compared).
    pub fn honoured(&self) -> bool {
        self.compared > 0 && self.identical == self.compared
    }
}

/// Compare each pair `[first, rerun]` of conditions. Requests are matched on
/// (test, item, sample); whole-test requests have no item and match on (test, sample).
/// Rows come out sorted by (model, test, first, rerun).
pub fn compare(
    source: &str,
    label: &str,
    records: &[StoredRecord],
    pairs: &[[String; 2]],
) -> Vec<RerunRow> {
    type Key<'a> = (&'a str, &'a str, Option<i32>, i32);
    // (model, test, first, rerun) -> (compared, identical, unmatched)
    type Acc = BTreeMap<(String, String, String, String), (i32, i32, i32)>;
    let mut by_cond: BTreeMap<&str, BTreeMap<Key, &StoredRecord>> = BTreeMap::new();
    for r in records {
        by_cond
            .entry(r.condition.as_str())
            .or_default()
            .insert((r.model.as_str(), r.test.as_str(), r.item, r.sample), r);
    }
    let empty = BTreeMap::new();
    let mut acc = Acc::new();
    for [a, b] in pairs {
        let ra = by_cond.get(a.as_str()).unwrap_or(&empty);
        let rb = by_cond.get(b.as_str()).unwrap_or(&empty);
        let keys: std::collections::BTreeSet<&Key> = ra.keys().chain(rb.keys()).collect();
        for k in keys {
            let e = acc
                .entry((k.0.to_string(), k.1.to_string(), a.clone(), b.clone()))
                .or_default();
            match (ra.get(k), rb.get(k)) {
                (Some(x), Some(y)) if x.error.is_none() && y.error.is_none() => {
                    e.0 += 1;
                    if x.reply == y.reply {
                        e.1 += 1;
                    }
                }
                _ => e.2 += 1,
            }
        }
    }
    acc.into_iter()
        .map(
            |((model, test, first, rerun), (compared, identical, unmatched))| RerunRow {
                source: source.to_string(),
                label: label.to_string(),
                model,
                test,
                first,
                rerun,
                compared,
                identical,
                unmatched,
            },
        )
        .collect()
}

/// Arrow schema of [`RERUNS_FILE`].
pub fn schema() -> SchemaRef {
    let s = |n: &str| Field::new(n, DataType::Utf8, false);
    let i = |n: &str| Field::new(n, DataType::Int32, false);
    Arc::new(Schema::new(vec![
        s("source"),
        s("label"),
        s("model"),
        s("test"),
        s("first"),
        s("rerun"),
        i("compared"),
        i("identical"),
        i("unmatched"),
        Field::new("temperature0_honoured", DataType::Boolean, false),
    ]))
}

/// The rows as one batch, in the order given.
pub fn batch(rows: &[RerunRow]) -> Result<RecordBatch, AnswersError> {
    let s = |f: fn(&RerunRow) -> &str| -> ArrayRef {
        Arc::new(StringArray::from_iter_values(rows.iter().map(f)))
    };
    let i = |f: fn(&RerunRow) -> i32| -> ArrayRef {
        Arc::new(Int32Array::from_iter_values(rows.iter().map(f)))
    };
    let honoured: ArrayRef = Arc::new(BooleanArray::from(
        rows.iter().map(RerunRow::honoured).collect::<Vec<_>>(),
    ));
    Ok(RecordBatch::try_new(
        schema(),
        vec![
            s(|r| &r.source),
            s(|r| &r.label),
            s(|r| &r.model),
            s(|r| &r.test),
            s(|r| &r.first),
            s(|r| &r.rerun),
            i(|r| r.compared),
            i(|r| r.identical),
            i(|r| r.unmatched),
            honoured,
        ],
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{Arm, Mode, OptionOrder};

    fn rec(cond: &str, item: i32, reply: &str, error: Option<&str>) -> StoredRecord {
        StoredRecord {
            format_version: 1,
            study: "t".into(),
            model: "m".into(),
            arm: Arm::Api,
            cohort: None,
            condition: cond.into(),
            sample: 0,
            test: "big_five".into(),
            mode: Mode::Single,
            item: Some(item),
            item_order: None,
            order_seed: None,
            option_order: OptionOrder::Human,
            instruction: "P1".into(),
            temperature: Some(0.0),
            reply: reply.into(),
            error: error.map(str::to_string),
            label: None,
        }
    }

    #[test]
    fn counts_identical_changed_failed_and_unmatched() {
        let records = vec![
            rec("S0", 1, "3", None),
            rec("S0r", 1, "3", None),
            rec("S0", 2, "3", None),
            rec("S0r", 2, "3 ", None), // one trailing space is a different reply
            rec("S0", 3, "", Some("timeout")),
            rec("S0r", 3, "4", None),
            rec("S0", 4, "1", None), // no rerun of item 4
        ];
        let pairs = [["S0".to_string(), "S0r".to_string()]];
        let rows = compare("src", "simulated", &records, &pairs);
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert_eq!((r.compared, r.identical, r.unmatched), (2, 1, 2));
        assert!(!r.honoured());
        let same = vec![rec("S0", 1, "3", None), rec("S0r", 1, "3", None)];
        assert!(compare("src", "", &same, &pairs)[0].honoured());
        assert_eq!(batch(&rows).unwrap().num_rows(), 1);
    }
}
