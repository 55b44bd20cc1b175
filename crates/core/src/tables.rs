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

/// `out/fetch/sweep_samples.parquet`: every document of every configured delimiter-sweep run
/// (`[sweep] lm_eval_runs` and `dictionary_runs`), one row per document of a run's task, as
/// the fetch stage ingested and checked them (docs/sweep.md). Read by the aggregate stage,
/// which computes the sweep's tables from it.
pub const SWEEP_SAMPLES: TableContract = TableContract::new(
    "sweep_samples",
    "fetch",
    1,
    &[&[
        req("source", Text),
        // The run's results (or record) file, relative to the configuration's folder when
        // inside it, so that the file's bytes do not depend on where the study is checked out.
        req("run", Text),
        req("task", Text),
        req("label", Text),
        req("model", Text),
        req("benchmark", Text),
        req("subset", Text),
        req("delimiter", Text),
        req("variant", Text),
        req("metric", Text),
        req("doc_id", Int64),
        req("doc_hash", Text),
        req("correct", Boolean),
    ]],
    &["source", "run", "task", "doc_id"],
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
    &[
        SOURCE,
        &[
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
        ],
    ],
    &["source", "model", "arm", "condition", "mode", "rule"],
);

/// `out/score/reply_reruns.parquet`: one row per (source, model, test, rerun pair): whether a
/// condition and its temperature-0 rerun (S0 vs S0r, B0 vs B0r) gave identical raw replies.
pub const REPLY_RERUNS: TableContract = TableContract::new(
    "reply_reruns",
    "score",
    1,
    &[
        SOURCE,
        &[
            req("model", Text),
            req("test", Text),
            req("first", Text),
            req("rerun", Text),
            req("compared", Int32),
            req("identical", Int32),
            req("unmatched", Int32),
            req("temperature0_honoured", Boolean),
        ],
    ],
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

/// `out/score/norm_values.parquet`: the human values behind [`NORMS`], one row per distinct
/// value of a test's dimension with the rows that have it (docs/norms.md); the score stage's
/// `Norms::load` rebuilds the norms from it.
pub const NORM_VALUES: TableContract = TableContract::new(
    "norm_values",
    "score",
    1,
    &[&[
        req("test", Text),
        req("dimension", Text),
        req("value", Float64),
        req("count", Int64),
    ]],
    &["test", "dimension", "value"],
);

/// The human row a scorer-parity row is about: its instrument and its `id` in the human data.
const HUMAN_ROW: &[Column] = &[req("instrument", Text), req("id", Int64)];

/// `out/score/parity_summary.parquet`: per instrument, the human rows of each category
/// (`reproduced`, `set_aside`, `unexplained`) and reason (docs/scoring-key.md); `reproduced`
/// and `unexplained` have a row also when they count none.
pub const PARITY_SUMMARY: TableContract = TableContract::new(
    "parity_summary",
    "score",
    1,
    &[&[
        req("instrument", Text),
        req("category", Text),
        req("reason", Text),
        req("rows", Int64),
    ]],
    &["instrument", "category", "reason"],
);

/// `out/score/parity_rows.parquet`: every human row with its category, reason and evidence
/// (`detail`, empty when there is none), the stored and the current key's top result, whether
/// every stored score is the current key's, and the allow-list note of an allow-listed
/// unexplained row (null for every other row). A human row answers every item, so the current
/// key always gives it a top result.
pub const PARITY_ROWS: TableContract = TableContract::new(
    "parity_rows",
    "score",
    1,
    &[
        HUMAN_ROW,
        &[
            req("category", Text),
            req("reason", Text),
            req("detail", Text),
            req("top_result_stored", Text),
            req("top_result_computed", Text),
            req("scores_equal", Boolean),
            opt("allowlist_note", Text),
        ],
    ],
    &["instrument", "id"],
);

/// `out/score/human_scores.parquet`: every stored score of every human row, one row per
/// dimension, with the current key's value (never null: a human row answers every item) and
/// whether the two are equal.
pub const HUMAN_SCORES: TableContract = TableContract::new(
    "human_scores",
    "score",
    1,
    &[
        HUMAN_ROW,
        &[
            req("dimension", Text),
            req("stored", Float64),
            req("computed", Float64),
            req("equal", Boolean),
        ],
    ],
    &["instrument", "id", "dimension"],
);

/// `out/score/mutation_sweep.parquet`: per item of the key, the rows of its test the current
/// key reproduces, and how many of them no longer are when the item's weight is doubled or
/// its reverse flag flipped, with their shares (NaN when the test reproduces no row).
pub const MUTATION_SWEEP: TableContract = TableContract::new(
    "mutation_sweep",
    "score",
    1,
    &[&[
        req("test", Text),
        req("item", Int64),
        req("dimension", Text),
        req("reproduced_rows", Int64),
        req("weight_broken", Int64),
        req("weight_broken_share", Float64),
        req("reverse_broken", Int64),
        req("reverse_broken_share", Float64),
    ]],
    &["test", "item"],
);

/// The keys of a cell in the aggregate stage's per-cell tables after [`SOURCE`]: the model,
/// its arm and cohort, then the scale.
const CELL: &[Column] = &[
    req("model", Text),
    req("arm", Text),
    opt("cohort", Text),
    req("test", Text),
    req("dimension", Text),
];

/// The order of the per-cell tables: by source, model and scale.
const CELL_ORDER: &[&str] = &["source", "model", "test", "dimension"];

/// `out/aggregate/cell_tests.parquet`: the exact permutation test of every kept cell with a
/// sampling SD (docs/statistics.md, "Inference"): splits enumerated, splits at least as
/// extreme, p, the null probability of protocol SD > sampling SD, p <= 0.05, and whether
/// Benjamini-Hochberg at q = 0.05 over the cells of the same source and arm rejects it.
pub const CELL_TESTS: TableContract = TableContract::new(
    "cell_tests",
    "aggregate",
    1,
    &[
        SOURCE,
        CELL,
        &[
            req("protocol_n", Int64),
            req("sampling_n", Int64),
            req("splits", Int64),
            req("splits_at_least", Int64),
            req("p_value", Float64),
            req("null_share_protocol_gt", Float64),
            req("p_le_0_05", Boolean),
            req("bh_rejected", Boolean),
        ],
    ],
    CELL_ORDER,
);

/// `out/aggregate/cell_tests_by_group.parquet`: per source and group (the groups of
/// `protocol_vs_sampling`), the tested cells, those with p <= 0.05 and those Benjamini-Hochberg
/// at q = 0.05 rejects within the group.
pub const CELL_TESTS_BY_GROUP: TableContract = TableContract::new(
    "cell_tests_by_group",
    "aggregate",
    1,
    &[
        SOURCE,
        &[
            req("group", Text),
            req("cells", Int64),
            req("p_le_0_05", Int64),
            req("bh_rejected", Int64),
        ],
    ],
    &["source", "group"],
);

/// `out/aggregate/headline_interval.parquet`: per source, over the kept cells of its headline
/// arm: the share of cells with protocol SD > sampling SD and the median ratio, each with its
/// 95% cluster-bootstrap interval over models, and the share expected under the permutation
/// null; the replicates used and the generator's seed.
pub const HEADLINE_INTERVAL: TableContract = TableContract::new(
    "headline_interval",
    "aggregate",
    1,
    &[
        SOURCE,
        &[
            req("arm", Text),
            req("models", Int64),
            req("compared_cells", Int64),
            req("protocol_gt_sampling", Int64),
            opt("share", Float64),
            opt("share_low", Float64),
            opt("share_high", Float64),
            req("ratio_cells", Int64),
            opt("median_ratio", Float64),
            opt("median_ratio_low", Float64),
            opt("median_ratio_high", Float64),
            opt("null_expected_share", Float64),
            req("replicates", Int64),
            req("seed", Int64),
        ],
    ],
    &["source"],
);

/// `out/aggregate/error_bars.parquet`: per kept cell, the mean z over the protocol setups, the
/// lowest and highest setup with their z, the protocol and sampling SDs and the error bar (the
/// larger of the two) with which it is.
pub const ERROR_BARS: TableContract = TableContract::new(
    "error_bars",
    "aggregate",
    1,
    &[
        SOURCE,
        CELL,
        &[
            req("protocol_n", Int64),
            req("mean_z", Float64),
            req("lowest_setups", Text),
            req("lowest_z", Float64),
            req("highest_setups", Text),
            req("highest_z", Float64),
            req("protocol_sd", Float64),
            opt("sampling_sd", Float64),
            req("error_bar", Float64),
            req("error_bar_from", Text),
        ],
    ],
    CELL_ORDER,
);

/// The ranking measures of [`RANKING`] and [`SWEEP_RANKING`] after their keys: setups and
/// models, Kendall's tau-b between setups (median, minimum), model pairs whose order flips,
/// and the models some setup ranks first.
const RANKING_MEASURES: &[Column] = &[
    req("setups", Int64),
    req("models", Int64),
    req("setup_pairs", Int64),
    opt("tau_median", Float64),
    opt("tau_min", Float64),
    req("model_pairs", Int64),
    req("flipped_pairs", Int64),
    opt("flipped_share", Float64),
    req("leaders", Int64),
    req("leading_models", Text),
    req("every_model_can_lead", Boolean),
];

/// `out/aggregate/ranking.parquet`: per source, arm and scale, how much the order of models
/// depends on the protocol setup: Kendall's tau-b between setups (median, minimum), model
/// pairs whose order flips, and the models some setup ranks first.
pub const RANKING: TableContract = TableContract::new(
    "ranking",
    "aggregate",
    1,
    &[
        SOURCE,
        &[req("arm", Text), req("test", Text), req("dimension", Text)],
        RANKING_MEASURES,
    ],
    &["source", "arm", "test", "dimension"],
);

/// A row of a delimiter sweep per model, benchmark and variant, after [`SOURCE`].
const SWEEP_GROUP: &[Column] = &[
    req("model", Text),
    req("benchmark", Text),
    req("variant", Text),
];

/// A delimiter of a sweep: its text and its file-safe slug.
const SWEEP_DELIMITER: &[Column] = &[req("delimiter", Text), req("delimiter_slug", Text)];

/// The order of the sweep tables with a row per model: by model and benchmark, then the
/// variant (plain before named) and the delimiter in the configured order, which are the
/// sweep's orders, not the text's.
const SWEEP_ORDER: &[&str] = &["model", "benchmark"];

/// `out/aggregate/sweep_accuracy.parquet`: per cell (model, benchmark, variant, delimiter) of
/// a delimiter sweep, documents, correct ones, accuracy and its exact 95% interval
/// (docs/sweep.md).
pub const SWEEP_ACCURACY: TableContract = TableContract::new(
    "sweep_accuracy",
    "aggregate",
    1,
    &[
        SOURCE,
        SWEEP_GROUP,
        SWEEP_DELIMITER,
        &[
            req("n", Int64),
            req("correct", Int64),
            req("accuracy_pct", Float64),
            req("ci95_low_pct", Float64),
            req("ci95_high_pct", Float64),
        ],
    ],
    SWEEP_ORDER,
);

/// `out/aggregate/sweep_spread.parquet`: per model, benchmark and variant, the lowest and
/// highest accuracy over the delimiters, which delimiters give them, and the spread.
pub const SWEEP_SPREAD: TableContract = TableContract::new(
    "sweep_spread",
    "aggregate",
    1,
    &[
        SOURCE,
        SWEEP_GROUP,
        &[
            req("delimiters", Int64),
            req("min_pct", Float64),
            req("min_delimiters", Text),
            req("max_pct", Float64),
            req("max_delimiters", Text),
            req("spread_pct", Float64),
            req("intervals_disjoint", Boolean),
        ],
    ],
    SWEEP_ORDER,
);

/// `out/aggregate/sweep_rank.parquet`: per cell, the model's rank among the models of its
/// label under that delimiter.
pub const SWEEP_RANK: TableContract = TableContract::new(
    "sweep_rank",
    "aggregate",
    1,
    &[
        SOURCE,
        SWEEP_GROUP,
        SWEEP_DELIMITER,
        &[
            req("accuracy_pct", Float64),
            req("rank", Int64),
            req("models", Int64),
            req("leads", Boolean),
        ],
    ],
    SWEEP_ORDER,
);

/// `out/aggregate/sweep_lead.parquet`: per model, benchmark and variant, the delimiters under
/// which the model leads and whether some delimiter puts it (and every model) in the lead.
pub const SWEEP_LEAD: TableContract = TableContract::new(
    "sweep_lead",
    "aggregate",
    1,
    &[
        SOURCE,
        SWEEP_GROUP,
        &[
            req("delimiters_leading", Int64),
            req("leads_under_some_delimiter", Boolean),
            req("leading_delimiters", Text),
            req("every_model_can_lead", Boolean),
        ],
    ],
    SWEEP_ORDER,
);

/// `out/aggregate/sweep_named_gain.parquet`: per model, benchmark and delimiter, the named
/// variant's accuracy minus the plain one's.
pub const SWEEP_NAMED_GAIN: TableContract = TableContract::new(
    "sweep_named_gain",
    "aggregate",
    1,
    &[
        SOURCE,
        &[req("model", Text), req("benchmark", Text)],
        SWEEP_DELIMITER,
        &[
            req("plain_pct", Float64),
            req("named_pct", Float64),
            req("gain_pct", Float64),
        ],
    ],
    SWEEP_ORDER,
);

/// `out/aggregate/sweep_named_gain_mean.parquet`: [`SWEEP_NAMED_GAIN`] averaged over the
/// delimiters of each model and benchmark.
pub const SWEEP_NAMED_GAIN_MEAN: TableContract = TableContract::new(
    "sweep_named_gain_mean",
    "aggregate",
    1,
    &[
        SOURCE,
        &[
            req("model", Text),
            req("benchmark", Text),
            req("delimiters", Int64),
            req("mean_plain_pct", Float64),
            req("mean_named_pct", Float64),
            req("mean_gain_pct", Float64),
        ],
    ],
    SWEEP_ORDER,
);

/// `out/aggregate/sweep_delimiter_gain.parquet`: per cell, the accuracy against the mean over
/// all delimiters of its model, benchmark and variant.
pub const SWEEP_DELIMITER_GAIN: TableContract = TableContract::new(
    "sweep_delimiter_gain",
    "aggregate",
    1,
    &[
        SOURCE,
        SWEEP_GROUP,
        SWEEP_DELIMITER,
        &[
            req("accuracy_pct", Float64),
            req("mean_all_delimiters_pct", Float64),
            req("gain_over_mean_pct", Float64),
        ],
    ],
    SWEEP_ORDER,
);

/// `out/aggregate/sweep_delimiter_gain_mean.parquet`: [`SWEEP_DELIMITER_GAIN`] averaged over
/// the models of a label, per benchmark, variant and delimiter.
pub const SWEEP_DELIMITER_GAIN_MEAN: TableContract = TableContract::new(
    "sweep_delimiter_gain_mean",
    "aggregate",
    1,
    &[
        SOURCE,
        &[req("benchmark", Text), req("variant", Text)],
        SWEEP_DELIMITER,
        &[
            req("models", Int64),
            req("mean_gain_over_mean_pct", Float64),
        ],
    ],
    // Then the variant and the delimiter in the sweep's orders.
    &["label", "benchmark"],
);

/// `out/aggregate/sweep_significance.parquet` (written with the aggregate stage's tables): per
/// model, benchmark and variant of a delimiter sweep, Cochran's Q across the delimiters over
/// the paired documents, and McNemar's exact test between the best and the worst delimiter.
pub const SWEEP_SIGNIFICANCE: TableContract = TableContract::new(
    "sweep_significance",
    "aggregate",
    1,
    &[
        SOURCE,
        SWEEP_GROUP,
        &[
            req("delimiters", Int64),
            req("documents", Int64),
            req("cochran_q", Float64),
            req("cochran_df", Int64),
            req("cochran_p", Float64),
            req("best_delimiter", Text),
            req("best_pct", Float64),
            req("worst_delimiter", Text),
            req("worst_pct", Float64),
            req("best_only", Int64),
            req("worst_only", Int64),
            req("mcnemar_p", Float64),
            req("more_than_noise", Boolean),
        ],
    ],
    // Then the variant, plain before named (the sweep's order, not the text's).
    &["model", "benchmark"],
);

/// `out/aggregate/sweep_ranking.parquet`: per label, benchmark and variant of a delimiter sweep,
/// the ranking measures of [`RANKING`] with the delimiters as setups.
pub const SWEEP_RANKING: TableContract = TableContract::new(
    "sweep_ranking",
    "aggregate",
    1,
    &[
        SOURCE,
        &[req("benchmark", Text), req("variant", Text)],
        RANKING_MEASURES,
    ],
    // Then the variant, plain before named.
    &["label", "benchmark"],
);

/// Every contract of this module, in pipeline order.
pub const CONTRACTS: [&TableContract; 42] = [
    &STORED_ANSWERS,
    &SWEEP_SAMPLES,
    &PARSED_ANSWERS,
    &SCALE_SCORES,
    &SCALE_SCORES_BY_RULE,
    &REPLY_RULE_COUNTS,
    &REPLY_RERUNS,
    &PARITY_SUMMARY,
    &PARITY_ROWS,
    &HUMAN_SCORES,
    &MUTATION_SWEEP,
    &NORMS,
    &NORM_VALUES,
    &CELL_TESTS,
    &CELL_TESTS_BY_GROUP,
    &HEADLINE_INTERVAL,
    &ERROR_BARS,
    &RANKING,
    &SWEEP_ACCURACY,
    &SWEEP_SPREAD,
    &SWEEP_RANK,
    &SWEEP_LEAD,
    &SWEEP_NAMED_GAIN,
    &SWEEP_NAMED_GAIN_MEAN,
    &SWEEP_DELIMITER_GAIN,
    &SWEEP_DELIMITER_GAIN_MEAN,
    &SWEEP_SIGNIFICANCE,
    &SWEEP_RANKING,
    &CELLS,
    &CELLS_BY_RULE,
    &DROPPED_CELLS,
    &PROTOCOL_VS_SAMPLING,
    &PROTOCOL_VS_SAMPLING_BY_RULE,
    &RANGE,
    &BY_TEST,
    &RERUNS,
    &SEPARATE_ARMS,
    &REQUESTS,
    &CONSTANT_RUNS,
    &READABLE_REPLIES,
    &VERDICT,
    &VERDICT_BY_RULE,
];

// The aggregate stage's tables that the report reads. The stage writes every column of these
// tables as nullable (one layout whatever types its plans meet on the way), so each contract
// declares them all nullable; the descriptions say which are never null.

/// The reply rule and protocol set a row of a side-by-side table is computed under.
const RULE_SET: &[Column] = &[opt("rule", Text), opt("protocol_set", Text)];

/// A cell of [`CELLS`] up to its range: the cell's keys and the statistics that depend on
/// neither the protocol shift nor the rerun pairs.
const CELL_STATISTICS: &[Column] = &[
    opt("source", Text),
    opt("label", Text),
    opt("study", Text),
    opt("model", Text),
    opt("arm", Text),
    opt("cohort", Text),
    opt("test", Text),
    opt("dimension", Text),
    opt("kept", Boolean),
    opt("drop_reason", Text),
    opt("protocol_n", Int64),
    opt("sampling_n", Int64),
    opt("protocol_mean_z", Float64),
    opt("protocol_sd", Float64),
    opt("sampling_sd", Float64),
    opt("ratio", Float64),
    opt("ratio_rule", Text),
    opt("protocol_gt_sampling", Boolean),
    opt("min_z", Float64),
    opt("max_z", Float64),
    opt("range_z", Float64),
];

/// The rerun columns of [`CELLS`] under the default `[aggregate] rerun_pairs`: one
/// `rerun_<first>_<rerun>_z` per configured pair, in the pairs' order.
const CELL_RERUNS: &[Column] = &[
    opt("rerun_S0_S0r_z", Float64),
    opt("rerun_B0_B0r_z", Float64),
];

/// The administrations of a cell that gave constant answers.
const CELL_CONSTANT: &[Column] = &[opt("constant_administrations", Int64)];

/// `out/aggregate/cells.parquet`: every cell (source, model, test, dimension) of the study
/// (strict rule, `protocol_conditions`), kept or dropped with its reason, with its statistics
/// in human SDs (docs/statistics.md). Between `range_z` and `shift_z` come the rerun
/// differences, one column `rerun_<first>_<rerun>_z` per `[aggregate] rerun_pairs` entry: the
/// contract lists the default pairs' ([`CELL_RERUNS`]).
pub const CELLS: TableContract = TableContract::new(
    "cells",
    "aggregate",
    1,
    &[
        CELL_STATISTICS,
        CELL_RERUNS,
        &[opt("shift_z", Float64)],
        CELL_CONSTANT,
    ],
    &["source", "model", "test", "dimension"],
);

/// `out/aggregate/cells_by_rule.parquet`: the cells of [`CELLS`] for every reply rule x
/// protocol set (strict x primary first), with the columns that depend on neither the shift
/// nor the rerun settings. The rules come strict first, then by name; the sets primary first.
pub const CELLS_BY_RULE: TableContract = TableContract::new(
    "cells_by_rule",
    "aggregate",
    1,
    &[RULE_SET, CELL_STATISTICS, CELL_CONSTANT],
    &[
        "rule",
        "protocol_set",
        "source",
        "model",
        "test",
        "dimension",
    ],
);

/// `out/aggregate/dropped_cells.parquet`: the cells of [`CELLS`] left out, with the reason.
pub const DROPPED_CELLS: TableContract = TableContract::new(
    "dropped_cells",
    "aggregate",
    1,
    &[&[
        opt("source", Text),
        opt("label", Text),
        opt("model", Text),
        opt("arm", Text),
        opt("cohort", Text),
        opt("test", Text),
        opt("dimension", Text),
        opt("reason", Text),
    ]],
    &["source", "model", "test", "dimension"],
);

/// The first columns of a group table: the source, its label and the group (`arm=api`,
/// `arm=api cohort=...`: the nested `[aggregate] groups`).
const GROUP: &[Column] = &[opt("source", Text), opt("label", Text), opt("group", Text)];

/// `out/aggregate/protocol_vs_sampling.parquet`: per source and group, the kept cells whose
/// protocol SD exceeds their sampling SD, their share and the median ratio.
pub const PROTOCOL_VS_SAMPLING: TableContract = TableContract::new(
    "protocol_vs_sampling",
    "aggregate",
    1,
    &[
        GROUP,
        &[
            opt("models", Int64),
            opt("cells", Int64),
            opt("compared_cells", Int64),
            opt("protocol_gt_sampling", Int64),
            opt("share", Float64),
            opt("ratio_cells", Int64),
            opt("median_ratio", Float64),
        ],
    ],
    &["source", "group"],
);

/// `out/aggregate/range.parquet`: per source and group, the range (highest minus lowest
/// setup, in human SDs) over the kept cells: median, minimum, maximum, cells of at least 1
/// and 2 human SDs.
pub const RANGE: TableContract = TableContract::new(
    "range",
    "aggregate",
    1,
    &[
        GROUP,
        &[
            opt("cells", Int64),
            opt("median_range_z", Float64),
            opt("min_range_z", Float64),
            opt("max_range_z", Float64),
            opt("cells_range_ge_1", Int64),
            opt("cells_range_ge_2", Int64),
        ],
    ],
    &["source", "group"],
);

/// `out/aggregate/by_test.parquet`: per source, group and test, the kept cells with protocol
/// SD > sampling SD, their share, the median ratio and the median range.
pub const BY_TEST: TableContract = TableContract::new(
    "by_test",
    "aggregate",
    1,
    &[
        GROUP,
        &[
            opt("test", Text),
            opt("cells", Int64),
            opt("compared_cells", Int64),
            opt("protocol_gt_sampling", Int64),
            opt("share", Float64),
            opt("median_ratio", Float64),
            opt("median_range_z", Float64),
        ],
    ],
    &["source", "group", "test"],
);

/// `out/aggregate/reruns.parquet`: per source, group and rerun pair (`S0 vs S0r`), the
/// absolute difference in human SDs between a condition and its rerun over the kept cells:
/// cells, identical cells, median and maximum.
pub const RERUNS: TableContract = TableContract::new(
    "reruns",
    "aggregate",
    1,
    &[
        GROUP,
        &[
            opt("pair", Text),
            opt("cells", Int64),
            opt("cells_identical", Int64),
            opt("median_diff_z", Float64),
            opt("max_diff_z", Float64),
        ],
    ],
    // Then the pairs in their configured order.
    &["source", "group"],
);

/// `out/aggregate/separate_arms.parquet`: per source and arm of `[aggregate] separate_arms`,
/// the kept cells whose protocol shift has the sign of the headline arm's (`reference_arm`)
/// median shift of the scale, and the median range.
pub const SEPARATE_ARMS: TableContract = TableContract::new(
    "separate_arms",
    "aggregate",
    1,
    &[&[
        opt("source", Text),
        opt("label", Text),
        opt("arm", Text),
        opt("reference_arm", Text),
        opt("models", Int64),
        opt("cells", Int64),
        opt("direction_cells", Int64),
        opt("same_direction", Int64),
        opt("share", Float64),
        opt("median_range_z", Float64),
        opt("compared_cells", Int64),
        opt("protocol_gt_sampling", Int64),
    ]],
    &["source", "arm"],
);

/// `out/aggregate/requests.parquet`: per source, model and condition, the requests sent,
/// failed and with an unreadable reply (strict rule), their items, and the administrations
/// with constant answers.
pub const REQUESTS: TableContract = TableContract::new(
    "requests",
    "aggregate",
    1,
    &[&[
        opt("source", Text),
        opt("label", Text),
        opt("model", Text),
        opt("arm", Text),
        opt("cohort", Text),
        opt("condition", Text),
        opt("requests", Int64),
        opt("failed_requests", Int64),
        opt("unreadable_replies", Int64),
        opt("unreadable_share", Float64),
        opt("items", Int64),
        opt("unreadable_items", Int64),
        opt("administrations", Int64),
        opt("constant_administrations", Int64),
    ]],
    &["source", "model", "condition"],
);

/// `out/aggregate/constant_runs.parquet`: every administration whose answers were all the
/// same option.
pub const CONSTANT_RUNS: TableContract = TableContract::new(
    "constant_runs",
    "aggregate",
    1,
    &[&[
        opt("source", Text),
        opt("label", Text),
        opt("model", Text),
        opt("arm", Text),
        opt("cohort", Text),
        opt("condition", Text),
        opt("sample", Int64),
        opt("test", Text),
    ]],
    &["source", "model", "condition", "sample", "test"],
);

/// `out/aggregate/reply_rules.parquet`: the score stage's [`REPLY_RULE_COUNTS`] passed
/// through for the report: per source, model, condition, mode and reply rule (strict first,
/// then by name), requests and items, and those each rule reads.
pub const READABLE_REPLIES: TableContract = TableContract::new(
    "reply_rules",
    "aggregate",
    1,
    &[&[
        opt("source", Text),
        opt("label", Text),
        opt("model", Text),
        opt("arm", Text),
        opt("condition", Text),
        opt("mode", Text),
        opt("rule", Text),
        opt("requests", Int64),
        opt("readable_replies", Int64),
        opt("items", Int64),
        opt("readable_items", Int64),
    ]],
    &["source", "model", "arm", "condition", "mode", "rule"],
);

/// A verdict row: a criterion over a source's headline arm, its value, threshold, whether it
/// passed, and what it means in words.
const VERDICT_ROW: &[Column] = &[
    opt("source", Text),
    opt("label", Text),
    opt("arm", Text),
    opt("criterion", Text),
    opt("value", Float64),
    opt("threshold", Float64),
    opt("passed", Boolean),
    opt("statement", Text),
];

/// `out/aggregate/verdict.parquet`: per source, the five criteria of the verdict rule over
/// its headline arm (docs/statistics.md).
pub const VERDICT: TableContract = TableContract::new(
    "verdict",
    "aggregate",
    1,
    &[VERDICT_ROW],
    // Then the criteria in their fixed order (share, median ratio, unreadable replies,
    // constant runs, verdict).
    &["source"],
);

/// `out/aggregate/verdict_by_rule.parquet`: the rows of [`VERDICT`] for every reply rule x
/// protocol set; a "no verdict" row also says why.
pub const VERDICT_BY_RULE: TableContract = TableContract::new(
    "verdict_by_rule",
    "aggregate",
    1,
    &[RULE_SET, VERDICT_ROW],
    // Then the criteria in their fixed order.
    &["rule", "protocol_set", "source"],
);

/// `out/aggregate/protocol_vs_sampling_by_rule.parquet`: per source, the group of its headline
/// arm in [`PROTOCOL_VS_SAMPLING`] for every reply rule x protocol set, with its dropped cells
/// and median range (a row also when no cell is kept).
pub const PROTOCOL_VS_SAMPLING_BY_RULE: TableContract = TableContract::new(
    "protocol_vs_sampling_by_rule",
    "aggregate",
    1,
    &[
        RULE_SET,
        &[
            opt("source", Text),
            opt("label", Text),
            opt("arm", Text),
            opt("group", Text),
            opt("models", Int64),
            opt("cells", Int64),
            opt("dropped_cells", Int64),
            opt("compared_cells", Int64),
            opt("protocol_gt_sampling", Int64),
            opt("share", Float64),
            opt("ratio_cells", Int64),
            opt("median_ratio", Float64),
            opt("median_range_z", Float64),
        ],
    ],
    &["rule", "protocol_set", "source"],
);
