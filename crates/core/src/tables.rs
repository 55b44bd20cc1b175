//! The tables that pass between stages, each declared once as a [`TableContract`]: the
//! stored answers (fetch -> score), and the score stage's tables that the aggregate and report
//! stages read. Writers take their schema from here, plans their projection, readers their
//! input check, tests their row builders.

use crate::contract::{Column, ColumnType, TableContract};

/// Columns in file order, as a `&[Column]`: `name: Type` for a column that is never null,
/// `name: Type | null` for one that may be, `Type` a [`ColumnType`]; a list that starts with
/// `nullable:` declares every column of it as one that may be null.
macro_rules! cols {
    (nullable: $($name:ident: $ty:ident),* $(,)?) => {
        cols![$($name: $ty | null),*]
    };
    ($($name:ident: $ty:ident $(| $null:ident)?),* $(,)?) => {
        &[$(Column {
            name: stringify!($name),
            ty: ColumnType::$ty,
            nullable: nullable!($($null)?),
        }),*]
    };
}

/// Whether a column of `cols!` may be null: only when it says `| null`.
macro_rules! nullable {
    () => {
        false
    };
    (null) => {
        true
    };
}

/// A [`TableContract`], declared as its facts only:
/// `pub const NAME = <stage> "<name>" version <n> [<parts>] by <sort key>;`, the parts each a
/// group of columns declared once (`SOURCE`) or a `[...]` list of columns as in `cols!`
/// (`nullable:` included), the sort key a `[column, ...]` list or a constant holding one.
macro_rules! contract {
    (
        $(#[$doc:meta])*
        $vis:vis const $id:ident = $stage:ident $name:literal version $version:literal [
            $($part:tt),* $(,)?
        ] by $key:tt;
    ) => {
        $(#[$doc])*
        $vis const $id: TableContract = TableContract::new(
            $name,
            stringify!($stage),
            $version,
            &[$(part!($part)),*],
            sort_key!($key),
        );
    };
}

/// A part of a `contract!`: a group of columns, or a list of them.
macro_rules! part {
    ([$($cols:tt)*]) => {
        cols![$($cols)*]
    };
    ($group:ident) => {
        $group
    };
}

/// The sort key of a `contract!`: a list of its columns, or a constant holding one.
macro_rules! sort_key {
    ([$($column:ident),* $(,)?]) => {
        &[$(stringify!($column)),*]
    };
    ($order:ident) => {
        $order
    };
}

contract! {
    /// Normalized stored answers, `out/fetch/answers/<input>.parquet`: one row per request, the
    /// stored-answer format v1 (docs/stored-answers.md) with its fixed types. Written by the fetch
    /// stage's import, read by the score stage.
    pub const STORED_ANSWERS = fetch "answers" version 1 [[format_version: Int32], REQUEST, [
        mode: Text, item: Int32 | null, item_order: Text | null, order_seed: Int64 | null,
        option_order: Text, instruction: Text, temperature: Float64 | null, reply: Text,
        error: Text | null, label: Text | null,
    ]] by [model, condition, sample, test, item];
}

contract! {
    /// `out/fetch/sweep_samples.parquet`: every document of every configured delimiter-sweep run
    /// (`[sweep] lm_eval_runs` and `dictionary_runs`), one row per document of a run's task, as
    /// the fetch stage ingested and checked them (docs/sweep.md). Read by the aggregate stage,
    /// which computes the sweep's tables from it.
    pub const SWEEP_SAMPLES = fetch "sweep_samples" version 1 [[
        source: Text,
        // The run's results (or record) file, relative to the configuration's folder when
        // inside it, so that the file's bytes do not depend on where the study is checked out.
        run: Text, task: Text, label: Text, model: Text, benchmark: Text, subset: Text,
        delimiter: Text, variant: Text, metric: Text, doc_id: Int64, doc_hash: Text,
        correct: Boolean,
    ]] by [source, run, task, doc_id];
}

/// The columns that say which administration of a test a request belongs to: in the stored
/// answers after `format_version`; in the score stage's tables after [`SOURCE`], the two
/// together naming one administration of a test in a source.
const REQUEST: &[Column] = cols![
    study: Text, model: Text, arm: Text, cohort: Text | null, condition: Text, sample: Int32,
    test: Text,
];

/// The input a score-stage row comes from and its label.
const SOURCE: &[Column] = cols![source: Text, label: Text];

contract! {
    /// `out/score/parsed_answers.parquet`: one row per (source, model, condition, sample, test,
    /// item), each item as the study's strict rule reads it.
    pub const PARSED_ANSWERS = score "parsed_answers" version 1 [SOURCE, REQUEST, [
        mode: Text, item: Int32, shown_position: Int32 | null, option_replied: Int32 | null,
        value: Int32 | null, status: Text, lenient_status: Label,
    ]] by [source, model, condition, sample, test, item];
}

/// What [`SCALE_SCORES`] holds after [`SOURCE`] and [`REQUEST`]: a dimension's score.
const SCALE_SCORE: &[Column] = cols![
    dimension: Text, temperature: Float64 | null, score: Float64 | null, complete: Boolean,
    n_items: Int32, n_answered: Int32, z: Float64 | null, percentile: Float64 | null,
    constant_answers: Boolean,
];

contract! {
    /// `out/score/scale_scores.parquet`: one row per (source, model, condition, sample, test,
    /// dimension) under the strict rule. Read by the aggregate stage.
    pub const SCALE_SCORES = score "scale_scores" version 1 [SOURCE, REQUEST, SCALE_SCORE]
    by [source, model, condition, sample, test, dimension];
}

contract! {
    /// `out/score/scale_scores_by_rule.parquet`: `rule`, then the columns of [`SCALE_SCORES`]:
    /// the scale scores as each rule of `[score] reply_rules` reads the replies (the `strict` rows
    /// equal `scale_scores.parquet`). Within a source the rules come in their configured order.
    pub const SCALE_SCORES_BY_RULE = score "scale_scores_by_rule" version 1
        [[rule: Text], SOURCE, REQUEST, SCALE_SCORE]
    by [source, rule, model, condition, sample, test, dimension];
}

contract! {
    /// `out/score/reply_rules.parquet`: one row per (source, model, condition, mode, rule):
    /// requests, the replies and items each configured reply rule reads, and the failed requests
    /// and their items (the same under every rule); rows of one group come in the configured order
    /// of the rules. The aggregate stage counts requests from the `strict` rows and passes the
    /// table through.
    pub const REPLY_RULE_COUNTS = score "reply_rules" version 1 [SOURCE, [
        model: Text, arm: Text, cohort: Text | null, condition: Text, mode: Text, rule: Text,
        requests: Int32, failed_requests: Int32, readable_replies: Int32, items: Int32,
        failed_items: Int32, readable_items: Int32,
    ]] by [source, model, arm, condition, mode, rule];
}

contract! {
    /// `out/score/reply_reruns.parquet`: one row per (source, model, test, rerun pair): whether a
    /// condition and its temperature-0 rerun (S0 vs S0r, B0 vs B0r) gave identical raw replies.
    pub const REPLY_RERUNS = score "reply_reruns" version 1 [SOURCE, [
        model: Text, test: Text, first: Text, rerun: Text, compared: Int32, identical: Int32,
        unmatched: Int32, temperature0_honoured: Boolean,
    ]] by [source, model, test, first, rerun];
}

contract! {
    /// `out/score/norms.parquet`: the human norms per instrument and dimension, from the human
    /// rows the current key reproduces (docs/norms.md). Read by the aggregate stage.
    pub const NORMS = score "norms" version 1 [[
        test: Text, dimension: Text, n: Int64, mean: Float64, sd: Float64, min: Float64,
        median: Float64, max: Float64, rows_reproduced: Int64, rows_duplicate: Int64,
    ]] by [test, dimension];
}

contract! {
    /// `out/score/norm_values.parquet`: the human values behind [`NORMS`], one row per distinct
    /// value of a test's dimension with the rows that have it (docs/norms.md); the score stage's
    /// `Norms::load` rebuilds the norms from it.
    pub const NORM_VALUES = score "norm_values" version 1 [[
        test: Text, dimension: Text, value: Float64, count: Int64,
    ]] by [test, dimension, value];
}

/// The human row a scorer-parity row is about: its instrument and its `id` in the human data.
const HUMAN_ROW: &[Column] = cols![instrument: Text, id: Int64];

contract! {
    /// `out/score/parity_summary.parquet`: per instrument, the human rows of each category
    /// (`reproduced`, `set_aside`, `unexplained`) and reason (docs/scoring-key.md); `reproduced`
    /// and `unexplained` have a row also when they count none.
    pub const PARITY_SUMMARY = score "parity_summary" version 1 [[
        instrument: Text, category: Text, reason: Text, rows: Int64,
    ]] by [instrument, category, reason];
}

contract! {
    /// `out/score/parity_rows.parquet`: every human row with its category, reason and evidence
    /// (`detail`, empty when there is none), the stored and the current key's top result, whether
    /// every stored score is the current key's, and the allow-list note of an allow-listed
    /// unexplained row (null for every other row). A human row answers every item, so the current
    /// key always gives it a top result.
    pub const PARITY_ROWS = score "parity_rows" version 1 [HUMAN_ROW, [
        category: Text, reason: Text, detail: Text, top_result_stored: Text,
        top_result_computed: Text, scores_equal: Boolean, allowlist_note: Text | null,
    ]] by [instrument, id];
}

contract! {
    /// `out/score/human_scores.parquet`: every stored score of every human row, one row per
    /// dimension, with the current key's value (never null: a human row answers every item) and
    /// whether the two are equal.
    pub const HUMAN_SCORES = score "human_scores" version 1 [HUMAN_ROW, [
        dimension: Text, stored: Float64, computed: Float64, equal: Boolean,
    ]] by [instrument, id, dimension];
}

contract! {
    /// `out/score/mutation_sweep.parquet`: per item of the key, the rows of its test the current
    /// key reproduces, and how many of them no longer are when the item's weight is doubled or
    /// its reverse flag flipped, with their shares (NaN when the test reproduces no row).
    pub const MUTATION_SWEEP = score "mutation_sweep" version 1 [[
        test: Text, item: Int64, dimension: Text, reproduced_rows: Int64, weight_broken: Int64,
        weight_broken_share: Float64, reverse_broken: Int64, reverse_broken_share: Float64,
    ]] by [test, item];
}

/// The keys of a cell in the aggregate stage's per-cell tables after [`SOURCE`]: the model,
/// its arm and cohort, then the scale.
const CELL: &[Column] = cols![
    model: Text, arm: Text, cohort: Text | null, test: Text, dimension: Text,
];

/// The order of the per-cell tables: by source, model and scale.
const CELL_ORDER: &[&str] = &["source", "model", "test", "dimension"];

contract! {
    /// `out/aggregate/cell_tests.parquet`: the exact permutation test of every kept cell with a
    /// sampling SD (docs/statistics.md, "Inference"): splits enumerated, splits at least as
    /// extreme, p, the null probability of protocol SD > sampling SD, p <= 0.05, and whether
    /// Benjamini-Hochberg at q = 0.05 over the cells of the same source and arm rejects it.
    pub const CELL_TESTS = aggregate "cell_tests" version 1 [SOURCE, CELL, [
        protocol_n: Int64, sampling_n: Int64, splits: Int64, splits_at_least: Int64,
        p_value: Float64, null_share_protocol_gt: Float64, p_le_0_05: Boolean, bh_rejected: Boolean,
    ]] by CELL_ORDER;
}

contract! {
    /// `out/aggregate/cell_tests_by_group.parquet`: per source and group (the groups of
    /// `protocol_vs_sampling`), the tested cells, those with p <= 0.05 and those Benjamini-Hochberg
    /// at q = 0.05 rejects within the group.
    pub const CELL_TESTS_BY_GROUP = aggregate "cell_tests_by_group" version 1 [SOURCE, [
        group: Text, cells: Int64, p_le_0_05: Int64, bh_rejected: Int64,
    ]] by [source, group];
}

contract! {
    /// `out/aggregate/headline_interval.parquet`: per source, over the kept cells of its headline
    /// arm: the share of cells with protocol SD > sampling SD and the median ratio, each with its
    /// 95% cluster-bootstrap interval over models, and the share expected under the permutation
    /// null; the replicates used and the generator's seed.
    pub const HEADLINE_INTERVAL = aggregate "headline_interval" version 1 [SOURCE, [
        arm: Text, models: Int64, compared_cells: Int64, protocol_gt_sampling: Int64,
        share: Float64 | null, share_low: Float64 | null, share_high: Float64 | null,
        ratio_cells: Int64, median_ratio: Float64 | null, median_ratio_low: Float64 | null,
        median_ratio_high: Float64 | null, null_expected_share: Float64 | null, replicates: Int64,
        seed: Int64,
    ]] by [source];
}

contract! {
    /// `out/aggregate/error_bars.parquet`: per kept cell, the mean z over the protocol setups, the
    /// lowest and highest setup with their z, the protocol and sampling SDs and the error bar (the
    /// larger of the two) with which it is.
    pub const ERROR_BARS = aggregate "error_bars" version 1 [SOURCE, CELL, [
        protocol_n: Int64, mean_z: Float64, lowest_setups: Text, lowest_z: Float64,
        highest_setups: Text, highest_z: Float64, protocol_sd: Float64, sampling_sd: Float64 | null,
        error_bar: Float64, error_bar_from: Text,
    ]] by CELL_ORDER;
}

/// The ranking measures of [`RANKING`] and [`SWEEP_RANKING`] after their keys: setups and
/// models, Kendall's tau-b between setups (median, minimum), model pairs whose order flips,
/// and the models some setup ranks first.
const RANKING_MEASURES: &[Column] = cols![
    setups: Int64, models: Int64, setup_pairs: Int64, tau_median: Float64 | null,
    tau_min: Float64 | null, model_pairs: Int64, flipped_pairs: Int64,
    flipped_share: Float64 | null, leaders: Int64, leading_models: Text,
    every_model_can_lead: Boolean,
];

contract! {
    /// `out/aggregate/ranking.parquet`: per source, arm and scale, how much the order of models
    /// depends on the protocol setup: Kendall's tau-b between setups (median, minimum), model
    /// pairs whose order flips, and the models some setup ranks first.
    pub const RANKING = aggregate "ranking" version 1 [SOURCE, [
        arm: Text, test: Text, dimension: Text,
    ], RANKING_MEASURES] by [source, arm, test, dimension];
}

/// A row of a delimiter sweep per model, benchmark and variant, after [`SOURCE`].
const SWEEP_GROUP: &[Column] = cols![model: Text, benchmark: Text, variant: Text];

/// A delimiter of a sweep: its text and its file-safe slug.
const SWEEP_DELIMITER: &[Column] = cols![delimiter: Text, delimiter_slug: Text];

/// The order of the sweep tables with a row per model: by model and benchmark, then the
/// variant (plain before named) and the delimiter in the configured order, which are the
/// sweep's orders, not the text's.
const SWEEP_ORDER: &[&str] = &["model", "benchmark"];

contract! {
    /// `out/aggregate/sweep_accuracy.parquet`: per cell (model, benchmark, variant, delimiter) of
    /// a delimiter sweep, documents, correct ones, accuracy and its exact 95% interval
    /// (docs/sweep.md).
    pub const SWEEP_ACCURACY = aggregate "sweep_accuracy" version 1 [
        SOURCE, SWEEP_GROUP, SWEEP_DELIMITER,
        [
            n: Int64, correct: Int64, accuracy_pct: Float64, ci95_low_pct: Float64,
            ci95_high_pct: Float64,
        ],
    ] by SWEEP_ORDER;
}

contract! {
    /// `out/aggregate/sweep_spread.parquet`: per model, benchmark and variant, the lowest and
    /// highest accuracy over the delimiters, which delimiters give them, and the spread.
    pub const SWEEP_SPREAD = aggregate "sweep_spread" version 1 [SOURCE, SWEEP_GROUP, [
        delimiters: Int64, min_pct: Float64, min_delimiters: Text, max_pct: Float64,
        max_delimiters: Text, spread_pct: Float64, intervals_disjoint: Boolean,
    ]] by SWEEP_ORDER;
}

contract! {
    /// `out/aggregate/sweep_rank.parquet`: per cell, the model's rank among the models of its
    /// label under that delimiter.
    pub const SWEEP_RANK = aggregate "sweep_rank" version 1 [SOURCE, SWEEP_GROUP, SWEEP_DELIMITER, [
        accuracy_pct: Float64, rank: Int64, models: Int64, leads: Boolean,
    ]] by SWEEP_ORDER;
}

contract! {
    /// `out/aggregate/sweep_lead.parquet`: per model, benchmark and variant, the delimiters under
    /// which the model leads and whether some delimiter puts it (and every model) in the lead.
    pub const SWEEP_LEAD = aggregate "sweep_lead" version 1 [SOURCE, SWEEP_GROUP, [
        delimiters_leading: Int64, leads_under_some_delimiter: Boolean, leading_delimiters: Text,
        every_model_can_lead: Boolean,
    ]] by SWEEP_ORDER;
}

contract! {
    /// `out/aggregate/sweep_named_gain.parquet`: per model, benchmark and delimiter, the named
    /// variant's accuracy minus the plain one's.
    pub const SWEEP_NAMED_GAIN = aggregate "sweep_named_gain" version 1 [SOURCE, [
        model: Text, benchmark: Text,
    ], SWEEP_DELIMITER, [plain_pct: Float64, named_pct: Float64, gain_pct: Float64]] by SWEEP_ORDER;
}

contract! {
    /// `out/aggregate/sweep_named_gain_mean.parquet`: [`SWEEP_NAMED_GAIN`] averaged over the
    /// delimiters of each model and benchmark.
    pub const SWEEP_NAMED_GAIN_MEAN = aggregate "sweep_named_gain_mean" version 1 [SOURCE, [
        model: Text, benchmark: Text, delimiters: Int64, mean_plain_pct: Float64,
        mean_named_pct: Float64, mean_gain_pct: Float64,
    ]] by SWEEP_ORDER;
}

contract! {
    /// `out/aggregate/sweep_delimiter_gain.parquet`: per cell, the accuracy against the mean over
    /// all delimiters of its model, benchmark and variant.
    pub const SWEEP_DELIMITER_GAIN = aggregate "sweep_delimiter_gain" version 1 [
        SOURCE, SWEEP_GROUP, SWEEP_DELIMITER,
        [accuracy_pct: Float64, mean_all_delimiters_pct: Float64, gain_over_mean_pct: Float64],
    ] by SWEEP_ORDER;
}

contract! {
    /// `out/aggregate/sweep_delimiter_gain_mean.parquet`: [`SWEEP_DELIMITER_GAIN`] averaged over
    /// the models of a label, per benchmark, variant and delimiter.
    pub const SWEEP_DELIMITER_GAIN_MEAN = aggregate "sweep_delimiter_gain_mean" version 1 [SOURCE, [
        benchmark: Text, variant: Text,
    ], SWEEP_DELIMITER, [models: Int64, mean_gain_over_mean_pct: Float64]]
    // Then the variant and the delimiter in the sweep's orders.
    by [label, benchmark];
}

contract! {
    /// `out/aggregate/sweep_significance.parquet` (written with the aggregate stage's tables): per
    /// model, benchmark and variant of a delimiter sweep, Cochran's Q across the delimiters over
    /// the paired documents, and McNemar's exact test between the best and the worst delimiter.
    pub const SWEEP_SIGNIFICANCE = aggregate "sweep_significance" version 1 [SOURCE, SWEEP_GROUP, [
        delimiters: Int64, documents: Int64, cochran_q: Float64, cochran_df: Int64,
        cochran_p: Float64, best_delimiter: Text, best_pct: Float64, worst_delimiter: Text,
        worst_pct: Float64, best_only: Int64, worst_only: Int64, mcnemar_p: Float64,
        more_than_noise: Boolean,
    ]]
    // Then the variant, plain before named (the sweep's order, not the text's).
    by [model, benchmark];
}

contract! {
    /// `out/aggregate/sweep_ranking.parquet`: per label, benchmark and variant of a delimiter
    /// sweep, the ranking measures of [`RANKING`] with the delimiters as setups.
    pub const SWEEP_RANKING = aggregate "sweep_ranking" version 1 [SOURCE, [
        benchmark: Text, variant: Text,
    ], RANKING_MEASURES]
    // Then the variant, plain before named.
    by [label, benchmark];
}

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
// declares them all nullable (`nullable:` lists); the descriptions say which are never null.

/// The reply rule and protocol set a row of a side-by-side table is computed under.
const RULE_SET: &[Column] = cols![nullable: rule: Text, protocol_set: Text];

/// A cell of [`CELLS`] up to its range: the cell's keys and the statistics that depend on
/// neither the protocol shift nor the rerun pairs.
const CELL_STATISTICS: &[Column] = cols![
    nullable: source: Text, label: Text, study: Text, model: Text, arm: Text, cohort: Text,
    test: Text, dimension: Text, kept: Boolean, drop_reason: Text, protocol_n: Int64,
    sampling_n: Int64, protocol_mean_z: Float64, protocol_sd: Float64, sampling_sd: Float64,
    ratio: Float64, ratio_rule: Text, protocol_gt_sampling: Boolean, min_z: Float64, max_z: Float64,
    range_z: Float64,
];

/// The rerun columns of [`CELLS`] under the default `[aggregate] rerun_pairs`: one
/// `rerun_<first>_<rerun>_z` per configured pair, in the pairs' order.
const CELL_RERUNS: &[Column] = cols![nullable: rerun_S0_S0r_z: Float64, rerun_B0_B0r_z: Float64];

/// The administrations of a cell that gave constant answers.
const CELL_CONSTANT: &[Column] = cols![nullable: constant_administrations: Int64];

contract! {
    /// `out/aggregate/cells.parquet`: every cell (source, model, test, dimension) of the study
    /// (strict rule, `protocol_conditions`), kept or dropped with its reason, with its statistics
    /// in human SDs (docs/statistics.md). Between `range_z` and `shift_z` come the rerun
    /// differences, one column `rerun_<first>_<rerun>_z` per `[aggregate] rerun_pairs` entry: the
    /// contract lists the default pairs' ([`CELL_RERUNS`]).
    pub const CELLS = aggregate "cells" version 1 [CELL_STATISTICS, CELL_RERUNS, [
        nullable: shift_z: Float64,
    ], CELL_CONSTANT] by [source, model, test, dimension];
}

contract! {
    /// `out/aggregate/cells_by_rule.parquet`: the cells of [`CELLS`] for every reply rule x
    /// protocol set (strict x primary first), with the columns that depend on neither the shift
    /// nor the rerun settings. The rules come strict first, then by name; the sets primary first.
    pub const CELLS_BY_RULE = aggregate "cells_by_rule" version 1
        [RULE_SET, CELL_STATISTICS, CELL_CONSTANT]
    by [rule, protocol_set, source, model, test, dimension];
}

contract! {
    /// `out/aggregate/dropped_cells.parquet`: the cells of [`CELLS`] left out, with the reason.
    pub const DROPPED_CELLS = aggregate "dropped_cells" version 1 [[
        nullable: source: Text, label: Text, model: Text, arm: Text, cohort: Text, test: Text,
        dimension: Text, reason: Text,
    ]] by [source, model, test, dimension];
}

/// The first columns of a group table: the source, its label and the group (`arm=api`,
/// `arm=api cohort=...`: the nested `[aggregate] groups`).
const GROUP: &[Column] = cols![nullable: source: Text, label: Text, group: Text];

contract! {
    /// `out/aggregate/protocol_vs_sampling.parquet`: per source and group, the kept cells whose
    /// protocol SD exceeds their sampling SD, their share and the median ratio.
    pub const PROTOCOL_VS_SAMPLING = aggregate "protocol_vs_sampling" version 1 [GROUP, [
        nullable: models: Int64, cells: Int64, compared_cells: Int64, protocol_gt_sampling: Int64,
        share: Float64, ratio_cells: Int64, median_ratio: Float64,
    ]] by [source, group];
}

contract! {
    /// `out/aggregate/range.parquet`: per source and group, the range (highest minus lowest
    /// setup, in human SDs) over the kept cells: median, minimum, maximum, cells of at least 1
    /// and 2 human SDs.
    pub const RANGE = aggregate "range" version 1 [GROUP, [
        nullable: cells: Int64, median_range_z: Float64, min_range_z: Float64, max_range_z: Float64,
        cells_range_ge_1: Int64, cells_range_ge_2: Int64,
    ]] by [source, group];
}

contract! {
    /// `out/aggregate/by_test.parquet`: per source, group and test, the kept cells with protocol
    /// SD > sampling SD, their share, the median ratio and the median range.
    pub const BY_TEST = aggregate "by_test" version 1 [GROUP, [
        nullable: test: Text, cells: Int64, compared_cells: Int64, protocol_gt_sampling: Int64,
        share: Float64, median_ratio: Float64, median_range_z: Float64,
    ]] by [source, group, test];
}

contract! {
    /// `out/aggregate/reruns.parquet`: per source, group and rerun pair (`S0 vs S0r`), the
    /// absolute difference in human SDs between a condition and its rerun over the kept cells:
    /// cells, identical cells, median and maximum.
    pub const RERUNS = aggregate "reruns" version 1 [GROUP, [
        nullable: pair: Text, cells: Int64, cells_identical: Int64, median_diff_z: Float64,
        max_diff_z: Float64,
    ]]
    // Then the pairs in their configured order.
    by [source, group];
}

contract! {
    /// `out/aggregate/separate_arms.parquet`: per source and arm of `[aggregate] separate_arms`,
    /// the kept cells whose protocol shift has the sign of the headline arm's (`reference_arm`)
    /// median shift of the scale, and the median range.
    pub const SEPARATE_ARMS = aggregate "separate_arms" version 1 [[
        nullable: source: Text, label: Text, arm: Text, reference_arm: Text, models: Int64,
        cells: Int64, direction_cells: Int64, same_direction: Int64, share: Float64,
        median_range_z: Float64, compared_cells: Int64, protocol_gt_sampling: Int64,
    ]] by [source, arm];
}

contract! {
    /// `out/aggregate/requests.parquet`: per source, model and condition, the requests sent,
    /// failed and with an unreadable reply (strict rule), their items, and the administrations
    /// with constant answers.
    pub const REQUESTS = aggregate "requests" version 1 [[
        nullable: source: Text, label: Text, model: Text, arm: Text, cohort: Text, condition: Text,
        requests: Int64, failed_requests: Int64, unreadable_replies: Int64,
        unreadable_share: Float64, items: Int64, unreadable_items: Int64, administrations: Int64,
        constant_administrations: Int64,
    ]] by [source, model, condition];
}

contract! {
    /// `out/aggregate/constant_runs.parquet`: every administration whose answers were all the
    /// same option.
    pub const CONSTANT_RUNS = aggregate "constant_runs" version 1 [[
        nullable: source: Text, label: Text, model: Text, arm: Text, cohort: Text, condition: Text,
        sample: Int64, test: Text,
    ]] by [source, model, condition, sample, test];
}

contract! {
    /// `out/aggregate/reply_rules.parquet`: the score stage's [`REPLY_RULE_COUNTS`] passed
    /// through for the report: per source, model, condition, mode and reply rule (strict first,
    /// then by name), requests and items, and those each rule reads.
    pub const READABLE_REPLIES = aggregate "reply_rules" version 1 [[
        nullable: source: Text, label: Text, model: Text, arm: Text, condition: Text, mode: Text,
        rule: Text, requests: Int64, readable_replies: Int64, items: Int64, readable_items: Int64,
    ]] by [source, model, arm, condition, mode, rule];
}

/// A verdict row: a criterion over a source's headline arm, its value, threshold, whether it
/// passed, and what it means in words.
const VERDICT_ROW: &[Column] = cols![
    nullable: source: Text, label: Text, arm: Text, criterion: Text, value: Float64,
    threshold: Float64, passed: Boolean, statement: Text,
];

contract! {
    /// `out/aggregate/verdict.parquet`: per source, the five criteria of the verdict rule over
    /// its headline arm (docs/statistics.md).
    pub const VERDICT = aggregate "verdict" version 1 [VERDICT_ROW]
    // Then the criteria in their fixed order (share, median ratio, unreadable replies,
    // constant runs, verdict).
    by [source];
}

contract! {
    /// `out/aggregate/verdict_by_rule.parquet`: the rows of [`VERDICT`] for every reply rule x
    /// protocol set; a "no verdict" row also says why.
    pub const VERDICT_BY_RULE = aggregate "verdict_by_rule" version 1 [RULE_SET, VERDICT_ROW]
    // Then the criteria in their fixed order.
    by [rule, protocol_set, source];
}

contract! {
    /// `out/aggregate/protocol_vs_sampling_by_rule.parquet`: per source, the group of its headline
    /// arm in [`PROTOCOL_VS_SAMPLING`] for every reply rule x protocol set, with its dropped cells
    /// and median range (a row also when no cell is kept).
    pub const PROTOCOL_VS_SAMPLING_BY_RULE = aggregate "protocol_vs_sampling_by_rule" version 1
        [RULE_SET, [
            nullable: source: Text, label: Text, arm: Text, group: Text, models: Int64,
            cells: Int64, dropped_cells: Int64, compared_cells: Int64, protocol_gt_sampling: Int64,
            share: Float64, ratio_cells: Int64, median_ratio: Float64, median_range_z: Float64,
        ]]
    by [rule, protocol_set, source];
}
