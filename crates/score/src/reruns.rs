//! Does the endpoint honour temperature 0? The study's checklist asks for it: a straight rerun
//! at temperature 0 (S0 vs S0r, B0 vs B0r) should give the same reply text. This compares raw
//! replies byte for byte, before any parsing, so that a reply that changes but still parses to
//! the same option is still seen as a change.
//!
//! The comparison is a plan of the stored-answer part (`answers.rs`): for each pair `[first, rerun]` of
//! `[aggregate] rerun_pairs`, a full outer join of the two conditions' requests on (model,
//! test, item, sample) (whole-test requests have no item and match on (model, test, sample)),
//! grouped by (model, test). Rows come out sorted by (model, test, first, rerun).

use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::Int32Type;

/// File name of the table in the score stage's folder.
pub const RERUNS_FILE: &str = "reply_reruns.parquet";

/// One (source, model, test, pair) comparison, as read back from the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RerunRow {
    /// Input name.
    pub source: String,
    /// Provenance label.
    pub label: String,
    /// Model id.
    pub model: String,
    /// Test name.
    pub test: String,
    /// Condition code of the first run.
    pub first: String,
    /// Condition code of the rerun.
    pub rerun: String,
    /// Requests present in both conditions with neither failed.
    pub compared: i32,
    /// Of those, replies identical byte for byte.
    pub identical: i32,
    /// Requests present in only one of the two, or failed in either.
    pub unmatched: i32,
    /// True when every compared reply was identical (and at least one was compared).
    pub temperature0_honoured: bool,
}

/// Rows of batches of [`RERUNS_FILE`] (schema
/// [`protospread_core::REPLY_RERUNS`]).
pub fn rerun_rows(batches: &[RecordBatch]) -> Vec<RerunRow> {
    let mut out = Vec::new();
    for b in batches {
        let c = |n: &str| b.column_by_name(n).expect("rerun schema");
        let s = |n: &str, r: usize| c(n).as_string::<i32>().value(r).to_string();
        let i = |n: &str, r: usize| c(n).as_primitive::<Int32Type>().value(r);
        for r in 0..b.num_rows() {
            out.push(RerunRow {
                source: s("source", r),
                label: s("label", r),
                model: s("model", r),
                test: s("test", r),
                first: s("first", r),
                rerun: s("rerun", r),
                compared: i("compared", r),
                identical: i("identical", r),
                unmatched: i("unmatched", r),
                temperature0_honoured: c("temperature0_honoured").as_boolean().value(r),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{score_in_memory, Norms, ScoringKey};
    use protospread_format::{Arm, Mode, OptionOrder, StoredRecord, Vocabulary};

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

    fn key() -> ScoringKey {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/scoring_key.csv");
        ScoringKey::load(&p).unwrap()
    }

    fn compare(records: &[StoredRecord], pairs: &[[String; 2]]) -> Vec<RerunRow> {
        let m = score_in_memory(
            "src",
            Some("simulated"),
            records,
            &Vocabulary::default(),
            &key(),
            &Norms::default(),
            pairs,
        )
        .unwrap();
        rerun_rows(&m.reruns)
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
        let rows = compare(&records, &pairs);
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert_eq!((r.compared, r.identical, r.unmatched), (2, 1, 2));
        assert_eq!((r.source.as_str(), r.label.as_str()), ("src", "simulated"));
        assert!(!r.temperature0_honoured);
        let same = vec![rec("S0", 1, "3", None), rec("S0r", 1, "3", None)];
        assert!(compare(&same, &pairs)[0].temperature0_honoured);
        // Two pairs come out sorted by (model, test, first, rerun).
        let two = [
            ["S0r".to_string(), "S0".to_string()],
            ["S0".to_string(), "S0r".to_string()],
        ];
        let got = compare(&same, &two);
        assert_eq!(
            got.iter()
                .map(|r| (r.first.as_str(), r.rerun.as_str()))
                .collect::<Vec<_>>(),
            [("S0", "S0r"), ("S0r", "S0")]
        );
    }
}
