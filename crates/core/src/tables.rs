//! Schemas of the Parquet tables that pass between stages, each defined once and used by its
//! writer, its readers and the test fixtures.

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use std::sync::Arc;

/// Schema of `out/score/parsed_answers.parquet`: one row per (source, model, condition, sample,
/// test, item). Written by the score stage, read by the aggregate stage.
pub fn parsed_answers_schema() -> SchemaRef {
    let s = |n: &str, null: bool| Field::new(n, DataType::Utf8, null);
    let i = |n: &str, null: bool| Field::new(n, DataType::Int32, null);
    Arc::new(Schema::new(vec![
        s("source", false),
        s("label", false),
        s("study", false),
        s("model", false),
        s("arm", false),
        s("cohort", true),
        s("condition", false),
        i("sample", false),
        s("test", false),
        s("mode", false),
        i("item", false),
        i("shown_position", true),
        i("option_replied", true),
        i("value", true),
        s("status", false),
        Field::new(
            "lenient_status",
            DataType::Dictionary(Box::new(DataType::Int8), Box::new(DataType::Utf8)),
            false,
        ),
    ]))
}

/// Schema of `out/score/scale_scores.parquet`: one row per (source, model, condition, sample,
/// test, dimension). Written by the score stage, read by the aggregate stage.
pub fn scale_scores_schema() -> SchemaRef {
    let s = |n: &str, null: bool| Field::new(n, DataType::Utf8, null);
    let i = |n: &str| Field::new(n, DataType::Int32, false);
    let f = |n: &str| Field::new(n, DataType::Float64, true);
    let b = |n: &str| Field::new(n, DataType::Boolean, false);
    Arc::new(Schema::new(vec![
        s("source", false),
        s("label", false),
        s("study", false),
        s("model", false),
        s("arm", false),
        s("cohort", true),
        s("condition", false),
        i("sample"),
        s("test", false),
        s("dimension", false),
        f("temperature"),
        f("score"),
        b("complete"),
        i("n_items"),
        i("n_answered"),
        f("z"),
        f("percentile"),
        b("constant_answers"),
    ]))
}

/// Schema of `out/score/scale_scores_by_rule.parquet`: the columns of
/// [`scale_scores_schema`] after a first column `rule`, one row per (source, rule, model,
/// condition, sample, test, dimension): the scale scores of the replies as each rule of
/// `[score] reply_rules` reads them (the `strict` rows equal `scale_scores.parquet`). Written
/// by the score stage, read by the aggregate stage.
pub fn scale_scores_by_rule_schema() -> SchemaRef {
    let mut fields = vec![Arc::new(Field::new("rule", DataType::Utf8, false))];
    fields.extend(scale_scores_schema().fields().iter().cloned());
    Arc::new(Schema::new(fields))
}

/// Schema of `out/score/reply_rules.parquet`: one row per (source, model, condition, mode,
/// rule): requests and the replies and items each configured reply rule reads, and the
/// failed requests and their items (the same under every rule). Written by the score stage;
/// the aggregate stage counts requests from the `strict` rows and passes the table through.
pub fn reply_rules_schema() -> SchemaRef {
    let s = |n: &str| Field::new(n, DataType::Utf8, false);
    let i = |n: &str| Field::new(n, DataType::Int32, false);
    Arc::new(Schema::new(vec![
        s("source"),
        s("label"),
        s("model"),
        s("arm"),
        Field::new("cohort", DataType::Utf8, true),
        s("condition"),
        s("mode"),
        s("rule"),
        i("requests"),
        i("failed_requests"),
        i("readable_replies"),
        i("items"),
        i("failed_items"),
        i("readable_items"),
    ]))
}

/// Schema of `out/score/reply_reruns.parquet`: one row per (source, model, test, rerun pair):
/// whether a condition and its temperature-0 rerun (S0 vs S0r, B0 vs B0r) gave identical raw
/// replies. Written by the score stage, shown by the report stage.
pub fn reply_reruns_schema() -> SchemaRef {
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
