//! The score stage's custom DataFusion functions, one (or one family) a file. Each wraps the
//! plain Rust code that defines its rule, so that a plan and the plain code can never
//! disagree.
//!
//! | SQL function | wraps | returns |
//! |---|---|---|
//! | `strict_readings(mode, item, reply, failed, option_order, item_order)`, `lenient_readings` | [`crate::read_single`], [`crate::read_whole`] and their lenient forms, [`protospread_format::option_to_value`] | list of struct `{item, shown_position, option, value, status, lenient_status}`, one per item shown, in item order |
//! | `scale_value(points, max_points, raw_unit)` | [`crate::scorer::scale_value`] | f64 |
//! | `norm_z(test, dimension, value)`, `norm_percentile` | [`crate::Norm::z`], [`crate::Norm::percentile`] | f64, null when not finite |
//! | aggregate `strict_administration(test, mode, item, reply, failed, option_order, item_order)`, `lenient_administration` | the readings scored with the key | struct `{constant_answers, per_dim}` |
//! | aggregate `request_counts(rule, reply, failed, item_order)` | the reply rule named in `rule` | struct of six request and item counts |
//!
//! Arguments of any string type (Utf8, Utf8View, dictionaries) are accepted: string views are
//! read in place, other types cast once per batch; `failed` is a boolean (the request's `error`
//! is not null). The aggregates score each request's readings and sum them per group where
//! they are read, in one accumulator per group instead of a struct per request and a sum per
//! field.

mod administration;
mod norm;
mod readings;
mod request_counts;
mod scale_value;

use crate::kernels::KeyPoints;
use crate::norms::Norms;
use crate::rules::ReplyRule;
use datafusion::logical_expr::{AggregateUDF, ScalarUDF};
use std::sync::Arc;

/// Every scalar function, ready to register on a session.
pub(crate) fn udfs(norms: Arc<Norms>) -> Vec<ScalarUDF> {
    vec![
        readings::udf(ReplyRule::Strict),
        readings::udf(ReplyRule::Lenient),
        scale_value::udf(),
        norm::udf("norm_z", norms.clone()),
        norm::udf("norm_percentile", norms),
    ]
}

/// Every aggregate function, reading the scoring key `key`, ready to register on a session.
pub(crate) fn udafs(key: Arc<KeyPoints>) -> Vec<AggregateUDF> {
    vec![
        administration::udaf(ReplyRule::Strict, key.clone()),
        administration::udaf(ReplyRule::Lenient, key),
        request_counts::udaf(),
    ]
}

#[cfg(test)]
mod fixtures {
    //! What the aggregates' tests share. The plans run the aggregates on one partition,
    //! grouping sorted input: only `update_batch` and `evaluate(All)` or `evaluate(First)` run
    //! there. A plan on more partitions merges partial states, or skips the partial grouping
    //! (`convert_to_state`); each path must give what one accumulator over all rows gives.
    use crate::kernels::KeyPoints;
    use datafusion::arrow::array::{ArrayRef, BooleanArray, Int32Array, StringArray};
    use datafusion::logical_expr::{EmitTo, GroupsAccumulator};
    use std::path::PathBuf;
    use std::sync::Arc;

    pub(super) fn key() -> Arc<KeyPoints> {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/scoring_key.csv");
        let key = crate::ScoringKey::load(&path).expect("the repository's key");
        Arc::new(KeyPoints::new(&key))
    }

    /// Requests of dark_triad: single items 1..=18 with replies of every kind (one failed),
    /// then whole-test requests in three shown orders. Arguments of the administration
    /// aggregate.
    pub(super) fn requests() -> Vec<ArrayRef> {
        let replies = [
            "1", "2", "3", "4", "5", "x", "", "3", "3", "5", "1", "2", "4", "0",
        ];
        let mut mode = Vec::new();
        let mut item = Vec::new();
        let mut reply = Vec::new();
        let mut failed = Vec::new();
        let mut order = Vec::new();
        let mut item_order = Vec::new();
        for i in 1..=18 {
            mode.push("single");
            item.push(Some(i));
            reply.push(replies[i as usize % replies.len()].to_string());
            failed.push(i == 7);
            order.push(if i % 2 == 0 { "human" } else { "reversed" });
            item_order.push(None);
        }
        let shown: Vec<String> = (1..=18).map(|i| i.to_string()).collect();
        let mut backwards = shown.clone();
        backwards.reverse();
        for (k, o) in [&shown, &backwards, &shown].into_iter().enumerate() {
            mode.push("whole");
            item.push(None);
            reply.push(
                (1..=18)
                    .filter(|p| p % (k + 2) != 0)
                    .map(|p| format!("{p}: {}", 1 + (p * (k + 1)) % 5))
                    .collect::<Vec<_>>()
                    .join("\n"),
            );
            failed.push(false);
            order.push("human");
            item_order.push(Some(o.join(";")));
        }
        vec![
            Arc::new(StringArray::from(vec!["dark_triad"; mode.len()])),
            Arc::new(StringArray::from(mode)),
            Arc::new(Int32Array::from(item)),
            Arc::new(StringArray::from(reply)),
            Arc::new(BooleanArray::from(failed)),
            Arc::new(StringArray::from(order)),
            Arc::new(StringArray::from(item_order)),
        ]
    }

    pub(super) fn rows(values: &[ArrayRef], at: usize, len: usize) -> Vec<ArrayRef> {
        values.iter().map(|v| v.slice(at, len)).collect()
    }

    /// Every path to the group's result, for a fresh accumulator from `new`; `args` are the
    /// aggregate's arguments and `groups` assigns each row its group.
    pub(super) fn same_by_every_path<G: GroupsAccumulator>(
        new: impl Fn() -> G,
        args: &[ArrayRef],
        groups: &[usize],
        n_groups: usize,
    ) {
        let mut one = new();
        one.update_batch(args, groups, None, n_groups).unwrap();
        let want = one.evaluate(EmitTo::All).unwrap();

        // Two partial accumulators over two halves, merged.
        let half = groups.len() / 2;
        let mut merged = new();
        for (at, len) in [(0, half), (half, groups.len() - half)] {
            let mut part = new();
            part.update_batch(&rows(args, at, len), &groups[at..at + len], None, n_groups)
                .unwrap();
            let state = part.state(EmitTo::All).unwrap();
            let every: Vec<usize> = (0..n_groups).collect();
            merged.merge_batch(&state, &every, n_groups).unwrap();
        }
        assert_eq!(
            merged.evaluate(EmitTo::All).unwrap().as_ref(),
            want.as_ref()
        );

        // Each row its own partial state, merged into its group.
        let states = new().convert_to_state(args, None).unwrap();
        let mut from_rows = new();
        from_rows.merge_batch(&states, groups, n_groups).unwrap();
        assert_eq!(
            from_rows.evaluate(EmitTo::All).unwrap().as_ref(),
            want.as_ref()
        );

        // The first group emitted on its own, then the rest.
        let mut split = new();
        split.update_batch(args, groups, None, n_groups).unwrap();
        let first = split.evaluate(EmitTo::First(1)).unwrap();
        let rest = split.evaluate(EmitTo::All).unwrap();
        let both = datafusion::arrow::compute::concat(&[first.as_ref(), rest.as_ref()]).unwrap();
        assert_eq!(both.as_ref(), want.as_ref());
    }
}
