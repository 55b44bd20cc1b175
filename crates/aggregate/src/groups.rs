//! A function of a whole group's rows (a source's bootstrap, a scale's rankings), run over a
//! plan sorted by the group's key, one group at a time.
//!
//! As an `array_agg` grouping, every group's list is held at once, and a hash aggregation
//! cannot split one group to spill it: at 10^9 answers a source's list of kept cells and a
//! scale's list of models' setup sums each asked for more than a fair share of the pool
//! (80 and 175 MB), and the lists sat partly outside the pool (the stage peaked at 1.46 GB).
//! Sorted, the plan spills like any sort, and only the group being computed is held, its
//! size reserved in the engine's pool so that a group too large for the limit is the
//! stage's out-of-memory error, not an allocation the pool does not see.

use arrow::array::{Array, ArrayRef, AsArray, ListArray, RecordBatch, StructArray};
use arrow::buffer::OffsetBuffer;
use arrow::compute::SortOptions;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::row::{OwnedRow, RowConverter, SortField};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryPool, MemoryReservation};
use std::sync::Arc;

use crate::Cause;

/// A function of one group's rows: `body` gets a list array of one row, the group's items,
/// and returns an array of one row of type `ret`, written as column `column`.
#[derive(Clone, Copy)]
pub(crate) struct GroupFunction {
    pub(crate) column: &'static str,
    pub(crate) ret: fn() -> DataType,
    pub(crate) body: fn(&[ArrayRef]) -> datafusion::common::Result<ArrayRef>,
}

/// `f` of each group of `batches`, whose columns are the group's key (`keys` columns), then
/// columns carried from the group's first row, then the item (the group's list holds one per
/// row); the rows come sorted ascending by the key, nulls last (a plan's `ORDER BY ... NULLS
/// LAST`). The result has the key and carried columns and `f.column`, a row per group in key
/// order. `schema` is the plan's, for a plan without rows: the batches' own schema is used
/// when there are any (a plan's logical schema may name other string types).
pub(crate) fn per_group<E: Into<Cause>>(
    batches: impl Iterator<Item = Result<RecordBatch, E>>,
    schema: &SchemaRef,
    keys: usize,
    f: GroupFunction,
    pool: &Arc<dyn MemoryPool>,
) -> Result<RecordBatch, Cause> {
    let mut groups: Option<Groups> = None;
    for b in batches {
        let b = b.map_err(Into::into)?;
        let g = match groups.as_mut() {
            Some(g) => g,
            None => groups.insert(Groups::new(&b.schema(), keys, f, pool)?),
        };
        g.add(&b)?;
    }
    match groups {
        Some(g) => g.finish(),
        None => Groups::new(schema, keys, f, pool)?.finish(),
    }
}

struct Groups {
    /// The input's schema and its number of key columns.
    schema: SchemaRef,
    keys: usize,
    converter: RowConverter,
    item: Arc<Field>,
    f: GroupFunction,
    /// The key of the group being gathered.
    key: Option<OwnedRow>,
    /// Its first row's key and carried columns.
    first: Vec<ArrayRef>,
    /// Its items so far.
    pieces: Vec<ArrayRef>,
    reservation: MemoryReservation,
    /// Per output column, a one-row array per finished group.
    out: Vec<Vec<ArrayRef>>,
}

impl Groups {
    fn new(
        schema: &SchemaRef,
        keys: usize,
        f: GroupFunction,
        pool: &Arc<dyn MemoryPool>,
    ) -> Result<Self, Cause> {
        let width = schema.fields().len();
        if width < keys + 1 {
            return Err(format!("{}: expected key columns and an item", f.column).into());
        }
        // Ascending, nulls last: how the plans sort the groups.
        let order = SortOptions {
            descending: false,
            nulls_first: false,
        };
        let key_fields = schema.fields()[..keys]
            .iter()
            .map(|k| SortField::new_with_options(k.data_type().clone(), order))
            .collect();
        Ok(Groups {
            schema: schema.clone(),
            keys,
            converter: RowConverter::new(key_fields)?,
            item: Arc::new(Field::new(
                "item",
                schema.field(width - 1).data_type().clone(),
                true,
            )),
            f,
            key: None,
            first: Vec::new(),
            pieces: Vec::new(),
            reservation: MemoryConsumer::new(format!("group function {}", f.column)).register(pool),
            out: vec![Vec::new(); width],
        })
    }

    /// The groups computed, as a batch (see [`per_group`]).
    fn finish(mut self) -> Result<RecordBatch, Cause> {
        self.finish_group()?;
        let width = self.schema.fields().len();
        let mut fields: Vec<Field> = self.schema.fields()[..width - 1]
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        fields.push(Field::new(self.f.column, (self.f.ret)(), true));
        let out_schema = Arc::new(Schema::new(fields));
        let columns = self
            .out
            .iter()
            .zip(out_schema.fields())
            .map(|(parts, field)| {
                if parts.is_empty() {
                    return Ok(arrow::array::new_empty_array(field.data_type()));
                }
                let parts: Vec<&dyn Array> = parts.iter().map(|a| a.as_ref()).collect();
                arrow::compute::concat(&parts)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(RecordBatch::try_new(out_schema, columns)?)
    }

    fn add(&mut self, b: &RecordBatch) -> Result<(), Cause> {
        if b.num_rows() == 0 {
            return Ok(());
        }
        let keys = &b.columns()[..self.keys];
        let rows = self.converter.convert_columns(keys)?;
        let item = b.column(b.num_columns() - 1);
        for run in arrow::compute::partition(keys)?.ranges() {
            let key = rows.row(run.start);
            match &self.key {
                Some(k) if k.row() == key => {}
                Some(k) if k.row() > key => {
                    return Err(format!(
                        "{}: the rows are not sorted by their group",
                        self.f.column
                    )
                    .into())
                }
                _ => {
                    self.finish_group()?;
                    self.key = Some(key.owned());
                    self.first = b.columns()[..b.num_columns() - 1]
                        .iter()
                        .map(|c| own(c, run.start..run.start + 1))
                        .collect::<Result<_, _>>()?;
                }
            }
            let piece = own(item, run)?;
            self.reservation.try_grow(piece.get_array_memory_size())?;
            self.pieces.push(piece);
        }
        Ok(())
    }

    /// Compute the gathered group, if any, and release its rows.
    fn finish_group(&mut self) -> Result<(), Cause> {
        if self.key.take().is_none() {
            return Ok(());
        }
        let parts: Vec<&dyn Array> = self.pieces.iter().map(|a| a.as_ref()).collect();
        let values = arrow::compute::concat(&parts)?;
        self.pieces.clear();
        self.reservation
            .try_resize(values.get_array_memory_size())?;
        let list = ListArray::try_new(
            self.item.clone(),
            OffsetBuffer::from_lengths([values.len()]),
            values,
            None,
        )?;
        let result = (self.f.body)(&[Arc::new(list) as ArrayRef])?;
        self.reservation.free();
        for (out, c) in self.out.iter_mut().zip(self.first.drain(..)) {
            out.push(c);
        }
        self.out.last_mut().expect("a result column").push(result);
        Ok(())
    }
}

/// Rows `rows` of `a`, copied into buffers of their own. A slice keeps its whole batch until
/// the group (for a key, the last group) is done, and so does a string view copied as it is:
/// after a sort's merge every batch's views point into the buffers of many sorted runs, and
/// the pool counted those buffers once per batch (at 10^9 answers one source's cells
/// counted 669 MB).
fn own(a: &ArrayRef, rows: std::ops::Range<usize>) -> Result<ArrayRef, arrow::error::ArrowError> {
    let at = arrow::array::UInt64Array::from_iter_values(rows.map(|r| r as u64));
    Ok(compact(arrow::compute::take(a, &at, None)?))
}

/// `a` with its string views' bytes copied out of the buffers they share (`take` copies
/// everything else).
fn compact(a: ArrayRef) -> ArrayRef {
    match a.data_type() {
        DataType::Utf8View => Arc::new(a.as_string_view().gc()),
        DataType::BinaryView => Arc::new(a.as_binary_view().gc()),
        DataType::Struct(fields) => {
            let s = a.as_struct();
            let columns = s.columns().iter().cloned().map(compact).collect();
            Arc::new(StructArray::new(
                fields.clone(),
                columns,
                s.nulls().cloned(),
            ))
        }
        _ => a,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{AsArray, Int64Array, StringArray};
    use arrow::datatypes::Int64Type;
    use datafusion::execution::memory_pool::GreedyMemoryPool;

    /// The sum of a group's items.
    fn sum(a: &[ArrayRef]) -> datafusion::common::Result<ArrayRef> {
        let list = a[0].as_list::<i32>();
        let total: i64 = list
            .value(0)
            .as_primitive::<Int64Type>()
            .iter()
            .flatten()
            .sum();
        Ok(Arc::new(Int64Array::from(vec![total])))
    }

    const SUM: GroupFunction = GroupFunction {
        column: "total",
        ret: || DataType::Int64,
        body: sum,
    };

    fn batch(keys: &[&str], labels: &[&str], items: &[i64]) -> RecordBatch {
        RecordBatch::try_from_iter([
            ("k", Arc::new(StringArray::from(keys.to_vec())) as ArrayRef),
            (
                "label",
                Arc::new(StringArray::from(labels.to_vec())) as ArrayRef,
            ),
            ("x", Arc::new(Int64Array::from(items.to_vec())) as ArrayRef),
        ])
        .unwrap()
    }

    fn run(batches: Vec<RecordBatch>, pool: usize) -> Result<RecordBatch, Cause> {
        let schema = batches[0].schema();
        let pool: Arc<dyn MemoryPool> = Arc::new(GreedyMemoryPool::new(pool));
        per_group(
            batches.into_iter().map(Ok::<_, Cause>),
            &schema,
            1,
            SUM,
            &pool,
        )
    }

    #[test]
    fn groups_span_batches_and_carry_their_first_row() {
        let out = run(
            vec![
                batch(&["a", "a", "b"], &["a1", "a2", "b1"], &[1, 2, 3]),
                batch(&["b", "b"], &["b2", "b3"], &[4, 5]),
                batch(&[], &[], &[]),
                batch(&["c"], &["c1"], &[6]),
            ],
            1 << 20,
        )
        .unwrap();
        let col = |i: usize| {
            arrow::util::display::ArrayFormatter::try_new(
                out.column(i).as_ref(),
                &Default::default(),
            )
            .unwrap()
        };
        let rows: Vec<String> = (0..out.num_rows())
            .map(|r| {
                format!(
                    "{} {} {}",
                    col(0).value(r),
                    col(1).value(r),
                    col(2).value(r)
                )
            })
            .collect();
        assert_eq!(rows, ["a a1 3", "b b1 12", "c c1 6"]);
        assert_eq!(out.schema().field(2).name(), "total");
    }

    #[test]
    fn no_rows_give_no_groups() {
        let out = run(vec![batch(&[], &[], &[])], 1 << 20).unwrap();
        assert_eq!(out.num_rows(), 0);
        assert_eq!(out.num_columns(), 3);
    }

    #[test]
    fn unsorted_rows_are_refused() {
        let e = run(
            vec![batch(&["b"], &["b1"], &[1]), batch(&["a"], &["a1"], &[2])],
            1 << 20,
        )
        .unwrap_err();
        assert!(e.to_string().contains("not sorted"), "{e}");
    }

    #[test]
    fn a_group_larger_than_the_pool_is_an_out_of_memory_error() {
        let many: Vec<i64> = (0..10_000).collect();
        let keys = vec!["a"; many.len()];
        let e = run(vec![batch(&keys, &keys, &many)], 1024).unwrap_err();
        assert!(protospread_engine::is_out_of_memory(e.as_ref()), "{e}");
    }
}
