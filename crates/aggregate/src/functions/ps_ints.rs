//! `ps_ints(x)`: the aggregate that gathers a cell's integer scores for the inference
//! functions, a list of 64-bit integers per group (nulls left out; a group with no rows, or
//! none that pass its `FILTER`, gets an empty list).
//!
//! `array_agg` gave the same lists, but its accumulator keeps every input batch and gathers
//! the values out of them at the end: on the study's grouping (a row per scale score, a group
//! per cell) that was most of the cost of the inference tables. This one appends each value to
//! its group's vector as it meets it.
//!
//! The order of a list's values is the order the grouping met them in, which depends on the
//! partitioning: the functions that read the lists (`ps_cell`) sort them first.

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, ListArray};
use arrow::buffer::OffsetBuffer;
use arrow::datatypes::{DataType, Field, Int64Type};
use datafusion::common::{exec_err, Result};
use datafusion::logical_expr::{AggregateUDF, EmitTo, Signature, Volatility};
use protospread_engine::{groups_udaf, Groups, GroupsFunction, Rows};
use std::sync::Arc;

/// The function, ready to register.
pub(super) fn udaf() -> AggregateUDF {
    let signature = Signature::exact(vec![DataType::Int64], Volatility::Immutable);
    groups_udaf("ps_ints", signature, Ints)
}

fn list_type() -> DataType {
    DataType::List(Arc::new(Field::new_list_field(DataType::Int64, false)))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Ints;

impl GroupsFunction for Ints {
    type Groups = Lists;
    fn return_type(&self) -> DataType {
        list_type()
    }
    fn is_nullable(&self) -> bool {
        false
    }
    fn state_fields(&self) -> Vec<Field> {
        vec![Field::new("values", list_type(), false)]
    }
    fn groups(&self) -> Lists {
        Lists::default()
    }
}

/// Every group's values.
#[derive(Debug, Default)]
struct Lists {
    values: Vec<Vec<i64>>,
    /// The values held, for `size`.
    held: usize,
}

impl Lists {
    /// The emitted groups' values as one list array.
    fn take(&mut self, emit_to: EmitTo) -> ArrayRef {
        let taken = emit_to.take_needed(&mut self.values);
        let count: usize = taken.iter().map(Vec::len).sum();
        self.held -= count;
        let mut flat = Vec::with_capacity(count);
        for v in &taken {
            flat.extend_from_slice(v);
        }
        Arc::new(ListArray::new(
            Arc::new(Field::new_list_field(DataType::Int64, false)),
            OffsetBuffer::from_lengths(taken.iter().map(Vec::len)),
            Arc::new(Int64Array::from(flat)),
            None,
        ))
    }
}

/// The single argument as 64-bit integers.
fn ints(values: &[ArrayRef]) -> Result<&Int64Array> {
    match values
        .first()
        .and_then(|v| v.as_primitive_opt::<Int64Type>())
    {
        Some(v) => Ok(v),
        None => exec_err!("ps_ints: expected one 64-bit integer argument"),
    }
}

impl Groups for Lists {
    fn empty(&self) -> Self {
        Lists::default()
    }

    fn grow(&mut self, groups: usize) {
        if self.values.len() < groups {
            self.values.resize_with(groups, Vec::new);
        }
    }

    fn update(&mut self, rows: Rows<'_>) -> Result<()> {
        let x = ints(rows.values)?;
        for (i, &g) in rows.groups.iter().enumerate() {
            if rows.counted(i) && x.is_valid(i) {
                self.values[g].push(x.value(i));
                self.held += 1;
            }
        }
        Ok(())
    }

    fn merge(&mut self, rows: Rows<'_>) -> Result<()> {
        let Some(lists) = rows.values.first().and_then(|v| v.as_list_opt::<i32>()) else {
            return exec_err!("ps_ints: a partial state that is not a list");
        };
        let Some(x) = lists.values().as_primitive_opt::<Int64Type>() else {
            return exec_err!("ps_ints: a partial state that is not a list of 64-bit integers");
        };
        let offsets = lists.value_offsets();
        for (i, &g) in rows.groups.iter().enumerate() {
            if lists.is_null(i) {
                continue;
            }
            let span = offsets[i] as usize..offsets[i + 1] as usize;
            self.held += span.len();
            self.values[g].extend_from_slice(&x.values()[span]);
        }
        Ok(())
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        Ok(self.take(emit_to))
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        Ok(vec![self.take(emit_to)])
    }

    fn size(&self) -> usize {
        self.values.capacity() * std::mem::size_of::<Vec<i64>>() + self.held * 8
    }
}

#[cfg(test)]
mod tests {
    //! Every path a plan can take (one accumulator, partial states merged, each row a group of
    //! its own) must gather the same values per group.
    use super::*;
    use arrow::array::BooleanArray;
    use datafusion::logical_expr::GroupsAccumulator;
    use protospread_engine::Accumulate;

    fn lists() -> Accumulate<Lists> {
        Accumulate(Lists::default())
    }

    fn sorted(list: &ArrayRef) -> Vec<Vec<i64>> {
        let l = list.as_list::<i32>();
        (0..l.len())
            .map(|i| {
                let mut v: Vec<i64> = l.value(i).as_primitive::<Int64Type>().values().to_vec();
                v.sort_unstable();
                v
            })
            .collect()
    }

    fn input() -> (ArrayRef, Vec<usize>, BooleanArray) {
        let x: ArrayRef = Arc::new(Int64Array::from(vec![
            Some(5),
            None,
            Some(3),
            Some(7),
            Some(1),
            Some(9),
        ]));
        let groups = vec![0, 0, 1, 0, 2, 1];
        let filter = BooleanArray::from(vec![
            Some(true),
            Some(true),
            Some(true),
            None,
            Some(true),
            Some(false),
        ]);
        (x, groups, filter)
    }

    #[test]
    fn one_pass_leaves_out_nulls_and_filtered_rows() {
        let (x, groups, filter) = input();
        let mut g = lists();
        g.update_batch(&[x], &groups, Some(&filter), 4).unwrap();
        let out = g.evaluate(EmitTo::All).unwrap();
        assert_eq!(sorted(&out), vec![vec![5], vec![3], vec![1], vec![]]);
    }

    #[test]
    fn merged_states_and_rows_as_groups_agree_with_one_pass() {
        let (x, groups, filter) = input();
        let mut one = lists();
        one.update_batch(std::slice::from_ref(&x), &groups, None, 3)
            .unwrap();
        let want = sorted(&one.evaluate(EmitTo::All).unwrap());
        assert_eq!(want, vec![vec![5, 7], vec![3, 9], vec![1]]);

        let (a, b) = (x.slice(0, 3), x.slice(3, 3));
        let mut pa = lists();
        pa.update_batch(&[a], &groups[..3], None, 3).unwrap();
        let mut pb = lists();
        pb.update_batch(&[b], &groups[3..], None, 3).unwrap();
        let mut merged = lists();
        merged
            .merge_batch(&pa.state(EmitTo::All).unwrap(), &[0, 1, 2], 3)
            .unwrap();
        merged
            .merge_batch(&pb.state(EmitTo::All).unwrap(), &[0, 1, 2], 3)
            .unwrap();
        assert_eq!(sorted(&merged.evaluate(EmitTo::All).unwrap()), want);

        let rows = merged.convert_to_state(&[x], Some(&filter)).unwrap();
        assert_eq!(
            sorted(&rows[0]),
            vec![vec![5], vec![], vec![3], vec![], vec![1], vec![]]
        );
        let mut from_rows = lists();
        from_rows.merge_batch(&rows, &groups, 3).unwrap();
        assert_eq!(
            sorted(&from_rows.evaluate(EmitTo::All).unwrap()),
            vec![vec![5], vec![3], vec![1]]
        );
    }

    #[test]
    fn emitting_the_first_groups_keeps_the_rest() {
        let (x, groups, _) = input();
        let mut g = lists();
        g.update_batch(&[x], &groups, None, 3).unwrap();
        assert_eq!(
            sorted(&g.evaluate(EmitTo::First(1)).unwrap()),
            vec![vec![5, 7]]
        );
        assert!(g.size() >= 3 * 8);
        assert_eq!(
            sorted(&g.evaluate(EmitTo::All).unwrap()),
            vec![vec![3, 9], vec![1]]
        );
        assert_eq!(g.0.held, 0);
    }

    #[test]
    fn a_partial_state_of_another_type_is_an_error() {
        let mut g = lists();
        let wrong: ArrayRef = Arc::new(Int64Array::from(vec![1]));
        let e = g.merge_batch(&[wrong], &[0], 1).unwrap_err();
        assert!(e.to_string().contains("ps_ints"), "{e}");
    }
}
