//! Ranking robustness of one scale, a function of the scale's group of kept cells
//! (`crate::groups`), each item `named_struct('model', model, 'pl', pl)`, `pl` a cell's
//! protocol sums per setup (`sums` of `ps_cell`): a model's score under a setup is the mean of
//! its scores there (an exact fraction); setups in byte order; models in byte order, only
//! those with a score under every setup.

use super::lists::{contract_fields, int_fields, list_of, span, strings};
use crate::groups::GroupFunction;
use arrow::array::{Array, ArrayRef, Float64Builder, Int64Builder, StringBuilder, StructArray};
use arrow::datatypes::{DataType, Fields};
use datafusion::common::{exec_err, Result};
use protospread_core::RANKING;
use protospread_inference::{ranking, Fraction};
use std::sync::Arc;

/// The function, as column `r`.
pub(crate) const RANKING_OF: GroupFunction = GroupFunction {
    column: "r",
    ret: || DataType::Struct(ranking_fields()),
    body: rank,
};

/// Fields of the result: these columns of [`RANKING`], of the types it declares.
fn ranking_fields() -> Fields {
    contract_fields(
        &RANKING,
        "setups models setup_pairs tau_median tau_min model_pairs flipped_pairs \
         leaders leading_models",
    )
}

fn rank(a: &[ArrayRef]) -> Result<ArrayRef> {
    let what = "ps_ranking";
    let (list, items) = list_of(&a[0], what)?;
    let model = strings(items, "model", what)?;
    let Some(pl) = items.column_by_name("pl") else {
        return exec_err!("{what}: no field pl");
    };
    let (pl, sums_of) = list_of(pl, what)?;
    let [c, s, n] = int_fields(sums_of, ["c", "s", "n"], what)?;
    let mut ints: Vec<Int64Builder> = (0..6).map(|_| Int64Builder::new()).collect();
    let mut floats = [Float64Builder::new(), Float64Builder::new()];
    let mut leaders = StringBuilder::new();
    for row in 0..list.len() {
        // ((model, setup), (sum, count)): each cell's scores, summed per setup.
        type Run<'a> = ((&'a str, i64), (u64, u64));
        let mut cells: Vec<usize> = span(list, row).filter(|&k| model.is_valid(k)).collect();
        cells.sort_unstable_by(|&x, &y| model.value(x).cmp(model.value(y)));
        let mut acc: Vec<Run> = Vec::new();
        for &k in &cells {
            let m = model.value(k);
            // A cell's sums come in byte order of their setups (`ps_cell`).
            for j in span(pl, k).filter(|&j| c.is_valid(j) && s.is_valid(j) && n.is_valid(j)) {
                let (setup, x, count) = (c.value(j), s.value(j) as u64, n.value(j) as u64);
                match acc.last_mut() {
                    Some((key, (sum, total))) if *key == (m, setup) => {
                        *sum += x;
                        *total += count;
                    }
                    _ => acc.push(((m, setup), (x, count))),
                }
            }
        }
        let mut setups: Vec<i64> = acc.iter().map(|(k, _)| k.1).collect();
        setups.sort_unstable();
        setups.dedup();
        // Models with a score under every setup (acc is sorted by model, then setup).
        let mut models: Vec<&str> = Vec::new();
        let mut starts: Vec<usize> = Vec::new();
        let mut i = 0;
        while i < acc.len() {
            let m = acc[i].0 .0;
            let j = i + acc[i..].iter().take_while(|(k, _)| k.0 == m).count();
            if acc[i..j]
                .iter()
                .map(|(k, _)| k.1)
                .eq(setups.iter().copied())
            {
                starts.push(i);
                models.push(m);
            }
            i = j;
        }
        // A kept model's runs cover every setup in order: setup k is at its start + k.
        let scores: Vec<Vec<Fraction>> = (0..setups.len())
            .map(|k| {
                starts
                    .iter()
                    .map(|&i| {
                        let (sum, n) = acc[i + k].1;
                        Fraction::new(sum, n)
                    })
                    .collect()
            })
            .collect();
        let r = ranking(&scores)
            .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
        let lead: Vec<&str> = models
            .iter()
            .zip(&r.can_lead)
            .filter(|(_, l)| **l)
            .map(|(m, _)| *m)
            .collect();
        for (b, x) in ints.iter_mut().zip([
            r.setups as i64,
            r.models as i64,
            r.setup_pairs as i64,
            r.model_pairs as i64,
            r.flipped_pairs as i64,
            lead.len() as i64,
        ]) {
            b.append_value(x);
        }
        floats[0].append_option(r.tau_median);
        floats[1].append_option(r.tau_min);
        leaders.append_value(lead.join(" "));
    }
    let arrays: Vec<ArrayRef> = vec![
        Arc::new(ints[0].finish()),
        Arc::new(ints[1].finish()),
        Arc::new(ints[2].finish()),
        Arc::new(floats[0].finish()),
        Arc::new(floats[1].finish()),
        Arc::new(ints[3].finish()),
        Arc::new(ints[4].finish()),
        Arc::new(ints[5].finish()),
        Arc::new(leaders.finish()),
    ];
    Ok(Arc::new(StructArray::try_new(
        ranking_fields(),
        arrays,
        None,
    )?))
}
