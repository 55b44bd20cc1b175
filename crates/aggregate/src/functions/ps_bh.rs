//! `ps_bh(list)`: Benjamini-Hochberg at q = 0.05 over the p-values of a family, from
//! `array_agg(named_struct('a', at_least, 'n', splits))` (p = a / n, exact): struct {count,
//! cut_a, cut_n}, the number rejected and the largest rejected p-value (null when none).

use super::lists::{fields, int_fields, list_of, list_udf, span};
use arrow::array::{Array, ArrayRef, Int64Builder, StructArray};
use arrow::datatypes::{DataType, Fields};
use datafusion::common::Result;
use datafusion::logical_expr::ScalarUDF;
use protospread_inference::{benjamini_hochberg, Fraction, BH_Q};
use std::sync::Arc;

/// The function, ready to register.
pub(super) fn udf() -> ScalarUDF {
    list_udf("ps_bh", DataType::Struct(bh_fields()), bh)
}

/// Fields of the result.
fn bh_fields() -> Fields {
    fields(&["count", "cut_a", "cut_n"].map(|n| (n, DataType::Int64)))
}

fn bh(a: &[ArrayRef]) -> Result<ArrayRef> {
    let what = "ps_bh";
    let (list, items) = list_of(&a[0], what)?;
    let [at, n] = int_fields(items, ["a", "n"], what)?;
    let mut cols = [
        Int64Builder::new(),
        Int64Builder::new(),
        Int64Builder::new(),
    ];
    for row in 0..list.len() {
        let mut p: Vec<Fraction> = span(list, row)
            .filter(|&k| at.is_valid(k) && n.is_valid(k) && n.value(k) > 0)
            .map(|k| Fraction::new(at.value(k) as u64, n.value(k) as u64))
            .collect();
        p.sort();
        let r = benjamini_hochberg(&p, BH_Q);
        cols[0].append_value(r.count as i64);
        match r.cutoff {
            Some(c) => {
                cols[1].append_value(c.num as i64);
                cols[2].append_value(c.den as i64);
            }
            None => {
                cols[1].append_null();
                cols[2].append_null();
            }
        }
    }
    let arrays: Vec<ArrayRef> = cols
        .iter_mut()
        .map(|c| Arc::new(c.finish()) as ArrayRef)
        .collect();
    Ok(Arc::new(StructArray::try_new(bh_fields(), arrays, None)?))
}
