//! The headline statistics of a source's cells with their cluster bootstrap intervals, a
//! function of the source's group of rows (`crate::groups`), each item
//! `named_struct('model', model, 'gt', protocol_gt_sampling, 'ratio', ratio, 'null_gt',
//! protocol_gt, 'splits', splits)`. Models are numbered in byte order of their ids; the
//! null-expected share is the mean over compared cells of null_gt / splits, summed in
//! ascending order of the terms.

use super::lists::{contract_fields, field, int_fields, list_of, span, strings};
use crate::groups::GroupFunction;
use arrow::array::{Array, ArrayRef, AsArray, Float64Builder, Int64Builder, StructArray};
use arrow::datatypes::{DataType, Fields, Float64Type};
use datafusion::common::Result;
use protospread_core::HEADLINE_INTERVAL;
use protospread_inference::{cluster_bootstrap, BOOTSTRAP_REPLICATES, BOOTSTRAP_SEED};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The function, as column `h`.
pub(crate) const HEADLINE: GroupFunction = GroupFunction {
    column: "h",
    ret: || DataType::Struct(headline_fields()),
    body: headline,
};

/// Fields of the result: these columns of [`HEADLINE_INTERVAL`], of the types it declares.
fn headline_fields() -> Fields {
    contract_fields(
        &HEADLINE_INTERVAL,
        "models share share_low share_high median_ratio median_ratio_low \
         median_ratio_high null_expected_share replicates",
    )
}

fn headline(a: &[ArrayRef]) -> Result<ArrayRef> {
    let what = "ps_headline";
    let (list, items) = list_of(&a[0], what)?;
    let model = strings(items, "model", what)?;
    let gt = field(items, "gt", &DataType::Boolean, what)?;
    let ratio = field(items, "ratio", &DataType::Float64, what)?;
    let [null_gt, splits] = int_fields(items, ["null_gt", "splits"], what)?;
    let gt = gt.as_boolean();
    let ratio = ratio.as_primitive::<Float64Type>();
    let f = headline_fields();
    let mut ints = [Int64Builder::new(), Int64Builder::new()];
    let mut floats: Vec<Float64Builder> = (0..7).map(|_| Float64Builder::new()).collect();
    for row in 0..list.len() {
        let ks: Vec<usize> = span(list, row).filter(|&k| model.is_valid(k)).collect();
        let ids: BTreeMap<&str, usize> = {
            let mut m: Vec<&str> = ks.iter().map(|&k| model.value(k)).collect();
            m.sort_unstable();
            m.dedup();
            m.into_iter().enumerate().map(|(i, s)| (s, i)).collect()
        };
        let cluster: Vec<usize> = ks.iter().map(|&k| ids[model.value(k)]).collect();
        let g: Vec<Option<bool>> = ks
            .iter()
            .map(|&k| gt.is_valid(k).then(|| gt.value(k)))
            .collect();
        let r: Vec<Option<f64>> = ks
            .iter()
            .map(|&k| ratio.is_valid(k).then(|| ratio.value(k)))
            .collect();
        let h = cluster_bootstrap(
            ids.len(),
            &cluster,
            &g,
            &r,
            BOOTSTRAP_REPLICATES,
            BOOTSTRAP_SEED,
        )
        .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
        let mut terms: Vec<f64> = ks
            .iter()
            .filter(|&&k| gt.is_valid(k) && null_gt.is_valid(k) && splits.is_valid(k))
            .map(|&k| null_gt.value(k) as f64 / splits.value(k) as f64)
            .collect();
        terms.sort_by(f64::total_cmp);
        let null_share =
            (!terms.is_empty()).then(|| terms.iter().sum::<f64>() / terms.len() as f64);
        ints[0].append_value(ids.len() as i64);
        ints[1].append_value(h.share.replicates.min(h.median_ratio.replicates) as i64);
        for (b, v) in floats.iter_mut().zip([
            h.share.estimate,
            h.share.low,
            h.share.high,
            h.median_ratio.estimate,
            h.median_ratio.low,
            h.median_ratio.high,
            null_share,
        ]) {
            b.append_option(v);
        }
    }
    let mut arrays: Vec<ArrayRef> = vec![Arc::new(ints[0].finish())];
    arrays.extend(floats.iter_mut().map(|b| Arc::new(b.finish()) as ArrayRef));
    arrays.push(Arc::new(ints[1].finish()));
    Ok(Arc::new(StructArray::try_new(f, arrays, None)?))
}
