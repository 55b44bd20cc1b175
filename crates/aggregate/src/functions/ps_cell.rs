//! `ps_cell(scores)`: what the inference tables need of one cell, from the list of its
//! protocol and sampling scores (`ps_ints` of the packed scores, [`SETUP_PACK`]).
//! docs/statistics.md ("Inference") states the statistics.

use super::lists::{fields, int_list, span};
use arrow::array::{Array, ArrayRef, Int64Builder, StringBuilder, StructArray};
use arrow::datatypes::{DataType, Field, Fields};
use datafusion::common::{exec_err, Result};
use datafusion::logical_expr::{ScalarUDF, Signature, Volatility};
use protospread_engine::{array_udf, ArrayFunction};
use protospread_inference::permutation_test;
use std::fmt::Write as _;
use std::sync::Arc;

/// The struct `ps_cell` returns as `t`: the permutation test's counts.
fn perm_fields() -> Fields {
    fields(&[
        ("splits", DataType::Int64),
        ("at_least", DataType::Int64),
        ("protocol_gt", DataType::Int64),
    ])
}

/// Fields of the list `sums` of [`CellUdf::cell`]: a setup (its position in byte order of the setups'
/// names), the sum of its scores and their count.
fn sums_fields() -> Fields {
    fields(&[
        ("c", DataType::Int64),
        ("s", DataType::Int64),
        ("n", DataType::Int64),
    ])
}

/// The item field of `sums`.
fn sums_item() -> Field {
    Field::new("item", DataType::Struct(sums_fields()), true)
}

/// Fields of [`CellUdf::cell`]'s struct.
fn cell_fields() -> Fields {
    fields(&[
        ("t", DataType::Struct(perm_fields())),
        ("lowest", DataType::Utf8),
        ("highest", DataType::Utf8),
        ("sums", DataType::List(Arc::new(sums_item()))),
    ])
}

/// A score's packing in the list `ps_cell` reads: position * SETUP_PACK + score, the position
/// its setup's in the study's protocol conditions, or their count for a sampling score.
/// Exact: a score is an integer from 0 to 100.
pub(crate) const SETUP_PACK: i64 = 1024;

/// `ps_cell` of one study: the names of its protocol setups, by position.
#[derive(Debug, PartialEq, Eq, Hash)]
struct CellUdf {
    /// The setups' names in byte order, and each position's place in that order.
    sorted: Vec<String>,
    place: Vec<usize>,
}

impl ArrayFunction for CellUdf {
    fn name(&self) -> &str {
        "ps_cell"
    }
    fn return_type(&self) -> DataType {
        DataType::Struct(cell_fields())
    }
    fn invoke(&self, args: &[ArrayRef]) -> Result<ArrayRef> {
        self.cell(args)
    }
}

/// `ps_cell` for a study whose protocol setups are `setups`, in the order of the positions its
/// packed scores carry (see [`CellUdf::cell`]).
pub(crate) fn udf(setups: &[String]) -> ScalarUDF {
    let mut by_name: Vec<usize> = (0..setups.len()).collect();
    by_name.sort_by(|&a, &b| setups[a].cmp(&setups[b]));
    let mut place = vec![0; setups.len()];
    for (k, &i) in by_name.iter().enumerate() {
        place[i] = k;
    }
    array_udf(
        CellUdf {
            sorted: by_name.iter().map(|&i| setups[i].clone()).collect(),
            place,
        },
        Signature::any(1, Volatility::Immutable),
    )
}

impl CellUdf {
    /// Appends the names of the setups of `one` ((place, score) pairs, sorted) whose score is
    /// `target`: each once, in byte order, space-separated; null when there is no target (no
    /// scores).
    fn append_setups_at(&self, one: &[(usize, i64)], target: Option<i64>, out: &mut StringBuilder) {
        let Some(target) = target else {
            out.append_null();
            return;
        };
        let mut last: Option<&str> = None;
        for &(c, v) in one {
            let name = self.sorted[c].as_str();
            if v == target && last != Some(name) {
                if last.is_some() {
                    out.write_char(' ').expect("writing to a string builder");
                }
                out.write_str(name).expect("writing to a string builder");
                last = Some(name);
            }
        }
        out.append_value("");
    }

    /// `ps_cell(scores)`: what the inference tables need of one cell, from the list of its
    /// protocol and sampling scores (packed with their positions, [`SETUP_PACK`]): struct {t,
    /// lowest, highest, sums}.
    /// - `t`: the exact permutation test ([`protospread_inference::permutation_test`]), struct
    ///   {splits, at_least, protocol_gt}; null when either side has fewer than two scores or
    ///   the splits exceed the limit.
    /// - `lowest`, `highest`: the setups at the cell's lowest and highest protocol score,
    ///   every tied setup once, in byte order, space-separated; null without protocol scores.
    /// - `sums`: the protocol scores summed per setup, in byte order of the setups, a list of
    ///   struct {c, s, n} (setup's place in that order, sum, count): what `ps_ranking` reads
    ///   of a cell, a row per setup instead of one per score.
    ///
    /// Each side is sorted before use, so the result does not depend on the order
    /// `ps_ints` met the rows in.
    fn cell(&self, a: &[ArrayRef]) -> Result<ArrayRef> {
        let what = "ps_cell";
        let (pl, pv) = int_list(&a[0], what)?;
        let sampling = self.place.len() as i64;
        let mut t = [
            Int64Builder::new(),
            Int64Builder::new(),
            Int64Builder::new(),
        ];
        let mut valid = Vec::with_capacity(pl.len());
        let (mut lowest, mut highest) = (StringBuilder::new(), StringBuilder::new());
        let (mut places, mut sums, mut counts) = (
            Int64Builder::new(),
            Int64Builder::new(),
            Int64Builder::new(),
        );
        let (mut offsets, mut len) = (vec![0i32], 0i32);
        let (mut p, mut s, mut one) = (Vec::new(), Vec::new(), Vec::<(usize, i64)>::new());
        for row in 0..pl.len() {
            p.clear();
            s.clear();
            one.clear();
            for k in span(pl, row).filter(|&k| pv.is_valid(k)) {
                let packed = pv.value(k);
                let (setup, v) = (packed.div_euclid(SETUP_PACK), packed.rem_euclid(SETUP_PACK));
                if setup == sampling {
                    s.push(v);
                    continue;
                }
                let Some(&place) = usize::try_from(setup).ok().and_then(|i| self.place.get(i))
                else {
                    return exec_err!("{what}: packed score {packed} names no setup");
                };
                p.push(v);
                one.push((place, v));
            }
            p.sort_unstable();
            s.sort_unstable();
            match permutation_test(&p, &s) {
                Ok(r) => {
                    for (c, v) in t.iter_mut().zip([r.splits, r.at_least, r.protocol_gt]) {
                        c.append_value(v as i64);
                    }
                    valid.push(true);
                }
                Err(_) => {
                    t.iter_mut().for_each(Int64Builder::append_null);
                    valid.push(false);
                }
            }
            one.sort_unstable();
            self.append_setups_at(&one, p.first().copied(), &mut lowest);
            self.append_setups_at(&one, p.last().copied(), &mut highest);
            for run in one.chunk_by(|x, y| x.0 == y.0) {
                places.append_value(run[0].0 as i64);
                sums.append_value(run.iter().map(|x| x.1).sum());
                counts.append_value(run.len() as i64);
                len += 1;
            }
            offsets.push(len);
        }
        let t: Vec<ArrayRef> = t
            .iter_mut()
            .map(|c| Arc::new(c.finish()) as ArrayRef)
            .collect();
        let t = StructArray::try_new(perm_fields(), t, Some(valid.into()))?;
        let values = StructArray::try_new(
            sums_fields(),
            vec![
                Arc::new(places.finish()) as ArrayRef,
                Arc::new(sums.finish()),
                Arc::new(counts.finish()),
            ],
            None,
        )?;
        let sums = arrow::array::ListArray::try_new(
            Arc::new(sums_item()),
            arrow::buffer::OffsetBuffer::new(offsets.into()),
            Arc::new(values),
            None,
        )?;
        let arrays: Vec<ArrayRef> = vec![
            Arc::new(t),
            Arc::new(lowest.finish()),
            Arc::new(highest.finish()),
            Arc::new(sums),
        ];
        Ok(Arc::new(StructArray::try_new(cell_fields(), arrays, None)?))
    }
}
