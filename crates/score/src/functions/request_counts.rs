//! `request_counts(rule, reply, failed, item_order)`: struct `{requests, failed_requests,
//! readable_replies, items, failed_items, readable_items}` (Int64): the requests of the
//! group, those failed and those whose every shown position `rule` reads `ok`; the positions
//! shown (1 per single-item request), those of failed requests and those read `ok`.
//!
//! Counts are integers, so their sums are exact in any order; every group's counts are kept in
//! one flat vector, and the partial states are the same counts.

use crate::kernels::{cast_args, reading, shown_items, Texts};
use crate::rules::{ReplyRule, Status};
use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int64Array, StructArray};
use datafusion::arrow::datatypes::{DataType, Field, Fields};
use datafusion::common::{exec_err, Result};
use datafusion::logical_expr::{AggregateUDF, EmitTo, Signature, Volatility};
use protospread_engine::{groups_udaf, Groups, GroupsFunction, Rows};
use std::sync::Arc;

/// The function, ready to register.
pub(super) fn udaf() -> AggregateUDF {
    groups_udaf(
        "request_counts",
        Signature::any(4, Volatility::Immutable),
        RequestCounts,
    )
}

/// The fields of `request_counts`.
fn count_fields() -> Fields {
    Fields::from(
        [
            "requests",
            "failed_requests",
            "readable_replies",
            "items",
            "failed_items",
            "readable_items",
        ]
        .map(|n| Field::new(n, DataType::Int64, false))
        .to_vec(),
    )
}

/// `request_counts(rule, reply, failed, item_order)`: see the module doc.
#[derive(Debug, PartialEq, Eq, Hash)]
struct RequestCounts;

impl GroupsFunction for RequestCounts {
    type Groups = CountGroups;
    fn return_type(&self) -> DataType {
        DataType::Struct(count_fields())
    }
    fn state_fields(&self) -> Vec<Field> {
        count_fields().iter().map(|f| f.as_ref().clone()).collect()
    }
    fn groups(&self) -> CountGroups {
        CountGroups::default()
    }
}

/// The six counts of every group, each group's in `6 * g .. 6 * g + 6` (the order of
/// [`count_fields`]).
#[derive(Default)]
struct CountGroups {
    counts: Vec<i64>,
}

const COUNTS: usize = 6;

impl CountGroups {
    fn take_counts(&mut self, emit_to: EmitTo) -> Vec<i64> {
        match emit_to {
            EmitTo::All => std::mem::take(&mut self.counts),
            EmitTo::First(k) => {
                let rest = self.counts.split_off(k * COUNTS);
                std::mem::replace(&mut self.counts, rest)
            }
        }
    }

    fn columns(&mut self, emit_to: EmitTo) -> Vec<ArrayRef> {
        let counts = self.take_counts(emit_to);
        (0..COUNTS)
            .map(|c| {
                Arc::new(Int64Array::from_iter_values(
                    counts.iter().skip(c).step_by(COUNTS).copied(),
                )) as ArrayRef
            })
            .collect()
    }
}

impl Groups for CountGroups {
    fn empty(&self) -> Self {
        CountGroups::default()
    }

    fn grow(&mut self, groups: usize) {
        self.counts.resize(groups * COUNTS, 0);
    }

    fn update(&mut self, rows: Rows<'_>) -> Result<()> {
        let types = [
            DataType::Utf8,
            DataType::Utf8,
            DataType::Boolean,
            DataType::Utf8,
        ];
        let a = cast_args(rows.values, &types, "request_counts")?;
        let (rule, reply, failed, item_order) = (
            Texts::new(&a[0]),
            Texts::new(&a[1]),
            a[2].as_boolean(),
            Texts::new(&a[3]),
        );
        let mut last_rule: Option<(&str, ReplyRule)> = None;
        for (i, &g) in rows.groups.iter().enumerate() {
            if !rows.counted(i) {
                continue;
            }
            if rule.is_null(i) || reply.is_null(i) || failed.is_null(i) {
                return exec_err!("request_counts: null argument in row {i}");
            }
            let r = match last_rule {
                Some((name, r)) if name == rule.value(i) => r,
                _ => match ReplyRule::parse(rule.value(i)) {
                    Some(r) => {
                        last_rule = Some((rule.value(i), r));
                        r
                    }
                    None => {
                        return exec_err!("request_counts: unknown reply rule {:?}", rule.value(i))
                    }
                },
            };
            let is_failed = failed.value(i);
            // Counted without a vector of readings per request; a failed request's items
            // all have `reading`'s failed reading.
            let failed_ok = || usize::from(reading(r, "", true).status == Status::Ok);
            let (shown, ok) = match (is_failed, item_order.is_null(i)) {
                (true, true) => (1, failed_ok()),
                (true, false) => {
                    let n = shown_items(item_order.value(i))?.len();
                    (n, n * failed_ok())
                }
                (false, true) => (
                    1,
                    usize::from(r.read_single(reply.value(i)).status == Status::Ok),
                ),
                (false, false) => {
                    let readings =
                        r.read_whole(reply.value(i), shown_items(item_order.value(i))?.len());
                    let ok = readings.iter().filter(|x| x.status == Status::Ok).count();
                    (readings.len(), ok)
                }
            };
            let (shown, ok) = (shown as i64, ok as i64);
            let c = &mut self.counts[g * COUNTS..g * COUNTS + COUNTS];
            c[0] += 1;
            c[3] += shown;
            c[5] += ok;
            if is_failed {
                c[1] += 1;
                c[4] += shown;
            } else if ok == shown {
                c[2] += 1;
            }
        }
        Ok(())
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        let cols = self.columns(emit_to);
        Ok(Arc::new(StructArray::try_new(count_fields(), cols, None)?))
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        Ok(self.columns(emit_to))
    }

    fn merge(&mut self, rows: Rows<'_>) -> Result<()> {
        let values = rows.values;
        if values.len() != COUNTS {
            return exec_err!(
                "request_counts: a partial state of {} columns",
                values.len()
            );
        }
        let cols: Vec<&Int64Array> = values.iter().map(|v| v.as_primitive()).collect();
        for (i, &g) in rows.groups.iter().enumerate() {
            for (c, col) in cols.iter().enumerate() {
                self.counts[g * COUNTS + c] += col.value(i);
            }
        }
        Ok(())
    }

    fn size(&self) -> usize {
        self.counts.capacity() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{requests, same_by_every_path};
    use super::*;
    use crate::rules::ReplyRule;
    use datafusion::arrow::array::{AsArray, StringArray};
    use datafusion::arrow::datatypes::Int64Type;
    use datafusion::logical_expr::GroupsAccumulator;
    use protospread_engine::Accumulate;

    #[test]
    fn request_counts_partial_states_merge_to_the_same_result() {
        let r = requests();
        let n = r[0].len();
        let rule: ArrayRef = Arc::new(StringArray::from(
            (0..n)
                .map(|i| if i % 3 == 0 { "lenient" } else { "strict" })
                .collect::<Vec<_>>(),
        ));
        let args = vec![rule, r[3].clone(), r[4].clone(), r[6].clone()];
        let groups: Vec<usize> = (0..n).map(|i| i % 4).collect();
        same_by_every_path(|| Accumulate(CountGroups::default()), &args, &groups, 4);

        let mut all = Accumulate(CountGroups::default());
        all.update_batch(&args, &vec![0; n], None, 1).unwrap();
        let out = all.evaluate(EmitTo::All).unwrap();
        let counts: Vec<i64> = (0..COUNTS)
            .map(|c| {
                out.as_struct()
                    .column(c)
                    .as_primitive::<Int64Type>()
                    .value(0)
            })
            .collect();
        // 21 requests, one failed; 18 single items and 3 x 18 shown positions, one failed.
        assert_eq!(&counts[..2], &[21, 1]);
        assert_eq!(counts[3], 18 + 3 * 18);
        assert_eq!(counts[4], 1);
        // Readable replies and items as each request's rule reads it, one request at a time.
        let (mut replies, mut items) = (0, 0);
        let reply = r[3].as_string::<i32>();
        let item_order = r[6].as_string::<i32>();
        for i in (0..n).filter(|i| *i != 6) {
            let rule = if i % 3 == 0 {
                ReplyRule::Lenient
            } else {
                ReplyRule::Strict
            };
            let read = match item_order.is_null(i) {
                true => vec![rule.read_single(reply.value(i))],
                false => rule.read_whole(reply.value(i), 18),
            };
            let ok = read.iter().filter(|x| x.status == Status::Ok).count() as i64;
            items += ok;
            replies += i64::from(ok == read.len() as i64);
        }
        assert_eq!((counts[2], counts[5]), (replies, items));
        assert!(
            replies > 0 && replies < 20,
            "{replies}: some readable, some not"
        );
    }
}
