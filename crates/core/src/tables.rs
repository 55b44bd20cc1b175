//! The tables that pass between stages, each declared once as a [`TableContract`]: the
//! stored answers (fetch -> score), and the score stage's tables that the aggregate and report
//! stages read. Writers take their schema from here, plans their projection, readers their
//! input check, tests their row builders.

use crate::contract::{Column, ColumnType, TableContract};
use ColumnType::{Boolean, Float64, Int32, Int64, Label, Text};

const fn req(name: &'static str, ty: ColumnType) -> Column {
    Column::required(name, ty)
}

const fn opt(name: &'static str, ty: ColumnType) -> Column {
    Column::optional(name, ty)
}

/// Normalized stored answers, `out/fetch/answers/<input>.parquet`: one row per request, the
/// stored-answer format v1 (docs/stored-answers.md) with its fixed types. Written by the fetch
/// stage's import, read by the score stage.
pub const STORED_ANSWERS: TableContract = TableContract::new(
    "answers",
    "fetch",
    1,
    &[
        &[req("format_version", Int32)],
        REQUEST,
        &[
            req("mode", Text),
            opt("item", Int32),
            opt("item_order", Text),
            opt("order_seed", Int64),
            req("option_order", Text),
            req("instruction", Text),
            opt("temperature", Float64),
            req("reply", Text),
            opt("error", Text),
            opt("label", Text),
        ],
    ],
    &["model", "condition", "sample", "test", "item"],
);

/// The columns that say which administration of a test a request belongs to: in the stored
/// answers after `format_version`; in the score stage's tables after [`SOURCE`], the two
/// together naming one administration of a test in a source.
const REQUEST: &[Column] = &[
    req("study", Text),
    req("model", Text),
    req("arm", Text),
    opt("cohort", Text),
    req("condition", Text),
    req("sample", Int32),
    req("test", Text),
];

/// The input a score-stage row comes from and its label.
const SOURCE: &[Column] = &[req("source", Text), req("label", Text)];

/// `out/score/parsed_answers.parquet`: one row per (source, model, condition, sample, test,
/// item), each item as the study's strict rule reads it.
pub const PARSED_ANSWERS: TableContract = TableContract::new(
    "parsed_answers",
    "score",
    1,
    &[
        SOURCE,
        REQUEST,
        &[
            req("mode", Text),
            req("item", Int32),
            opt("shown_position", Int32),
            opt("option_replied", Int32),
            opt("value", Int32),
            req("status", Text),
            req("lenient_status", Label),
        ],
    ],
    &["source", "model", "condition", "sample", "test", "item"],
);

/// What [`SCALE_SCORES`] holds after [`SOURCE`] and [`REQUEST`]: a dimension's score.
const SCALE_SCORE: &[Column] = &[
    req("dimension", Text),
    opt("temperature", Float64),
    opt("score", Float64),
    req("complete", Boolean),
    req("n_items", Int32),
    req("n_answered", Int32),
    opt("z", Float64),
    opt("percentile", Float64),
    req("constant_answers", Boolean),
];

/// `out/score/scale_scores.parquet`: one row per (source, model, condition, sample, test,
/// dimension) under the strict rule. Read by the aggregate stage.
pub const SCALE_SCORES: TableContract = TableContract::new(
    "scale_scores",
    "score",
    1,
    &[SOURCE, REQUEST, SCALE_SCORE],
    &[
        "source",
        "model",
        "condition",
        "sample",
        "test",
        "dimension",
    ],
);

/// `out/score/scale_scores_by_rule.parquet`: `rule`, then the columns of [`SCALE_SCORES`]:
/// the scale scores as each rule of `[score] reply_rules` reads the replies (the `strict` rows
/// equal `scale_scores.parquet`). Within a source the rules come in their configured order.
pub const SCALE_SCORES_BY_RULE: TableContract = TableContract::new(
    "scale_scores_by_rule",
    "score",
    1,
    &[&[req("rule", Text)], SOURCE, REQUEST, SCALE_SCORE],
    &[
        "source",
        "rule",
        "model",
        "condition",
        "sample",
        "test",
        "dimension",
    ],
);

/// `out/score/reply_rules.parquet`: one row per (source, model, condition, mode, rule):
/// requests, the replies and items each configured reply rule reads, and the failed requests
/// and their items (the same under every rule); rows of one group come in the configured order
/// of the rules. The aggregate stage counts requests from the `strict` rows and passes the
/// table through.
pub const REPLY_RULE_COUNTS: TableContract = TableContract::new(
    "reply_rules",
    "score",
    1,
    &[&[
        req("source", Text),
        req("label", Text),
        req("model", Text),
        req("arm", Text),
        opt("cohort", Text),
        req("condition", Text),
        req("mode", Text),
        req("rule", Text),
        req("requests", Int32),
        req("failed_requests", Int32),
        req("readable_replies", Int32),
        req("items", Int32),
        req("failed_items", Int32),
        req("readable_items", Int32),
    ]],
    &["source", "model", "arm", "condition", "mode", "rule"],
);

/// `out/score/reply_reruns.parquet`: one row per (source, model, test, rerun pair): whether a
/// condition and its temperature-0 rerun (S0 vs S0r, B0 vs B0r) gave identical raw replies.
pub const REPLY_RERUNS: TableContract = TableContract::new(
    "reply_reruns",
    "score",
    1,
    &[&[
        req("source", Text),
        req("label", Text),
        req("model", Text),
        req("test", Text),
        req("first", Text),
        req("rerun", Text),
        req("compared", Int32),
        req("identical", Int32),
        req("unmatched", Int32),
        req("temperature0_honoured", Boolean),
    ]],
    &["source", "model", "test", "first", "rerun"],
);

/// `out/score/norms.parquet`: the human norms per instrument and dimension, from the human
/// rows the current key reproduces (docs/norms.md). Read by the aggregate stage.
pub const NORMS: TableContract = TableContract::new(
    "norms",
    "score",
    1,
    &[&[
        req("test", Text),
        req("dimension", Text),
        req("n", Int64),
        req("mean", Float64),
        req("sd", Float64),
        req("min", Float64),
        req("median", Float64),
        req("max", Float64),
        req("rows_reproduced", Int64),
        req("rows_duplicate", Int64),
    ]],
    &["test", "dimension"],
);

/// Every contract of this module, in pipeline order.
pub const CONTRACTS: [&TableContract; 7] = [
    &STORED_ANSWERS,
    &PARSED_ANSWERS,
    &SCALE_SCORES,
    &SCALE_SCORES_BY_RULE,
    &REPLY_RULE_COUNTS,
    &REPLY_RERUNS,
    &NORMS,
];
