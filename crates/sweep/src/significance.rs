//! Is a sweep's spread more than noise? The same documents are answered under every
//! delimiter, so the outcomes are paired: Cochran's Q across the delimiters of each model,
//! benchmark and variant, and McNemar's exact test between the best and the worst delimiter
//! (`sweep_significance`); and the shared ranking measures of `protospread_inference` per
//! benchmark and variant (`sweep_ranking`). docs/sweep.md states the rules.

use crate::ingest::TaskSamples;
use crate::tables::{
    b, cmp_acc, delimiter_index, f, group, i, model_scores, provenance, round6, s, Cell, Scores,
};
use crate::SweepSpec;
use arrow::array::{ArrayRef, BooleanArray, Float64Array};
use arrow::record_batch::RecordBatch;
use protospread_core::{SweepVariant, SWEEP_RANKING, SWEEP_SIGNIFICANCE};
use protospread_inference::{cochran_q, mcnemar_exact, ranking};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The level of "more than noise": both p-values at most 0.05.
const LEVEL: f64 = 0.05;

/// Per (model, benchmark, variant): each document, by (subset, doc_id), with a bit per
/// delimiter index set when the document was answered right under it.
type Outcomes<'a> = BTreeMap<(String, String, SweepVariant), BTreeMap<(&'a str, u64), u128>>;

/// Most delimiters a group may have for the paired tests (one bit each).
const MAX_DELIMITERS: usize = 128;

fn outcomes<'a>(samples: &'a [TaskSamples], spec: &SweepSpec) -> Outcomes<'a> {
    let index = delimiter_index(spec);
    let mut out: Outcomes = BTreeMap::new();
    for t in samples {
        let Some(&i) = index
            .get(t.delimiter.slug.as_str())
            .filter(|&&i| i < MAX_DELIMITERS)
        else {
            continue;
        };
        let docs = out
            .entry((t.model.clone(), t.benchmark.clone(), t.variant))
            .or_default();
        let ids = t
            .docs
            .column(0)
            .as_any()
            .downcast_ref::<arrow::array::UInt64Array>();
        let right = t.docs.column(2).as_any().downcast_ref::<BooleanArray>();
        let (Some(ids), Some(right)) = (ids, right) else {
            continue;
        };
        for r in 0..ids.len() {
            let e = docs.entry((t.subset.as_str(), ids.value(r))).or_default();
            if right.value(r) {
                *e |= 1 << i;
            }
        }
    }
    out
}

fn batch(contract: &protospread_core::TableContract, cols: Vec<ArrayRef>) -> RecordBatch {
    RecordBatch::try_new(contract.schema(), cols).expect("columns of the contract")
}

/// `sweep_significance`: one row per model, benchmark and variant with at least two
/// delimiters. `cells` must come from [`crate::cells`] over the same `samples` and `spec`, so
/// that every delimiter of a group has the same documents (the ingestion's check).
pub(crate) fn significance(
    samples: &[TaskSamples],
    cells: &[Cell],
    spec: &SweepSpec,
) -> RecordBatch {
    let docs = outcomes(samples, spec);
    let mut c: [Vec<String>; 7] = Default::default();
    let mut n: [Vec<i64>; 5] = Default::default();
    let mut x: [Vec<f64>; 5] = Default::default();
    let mut noise = Vec::new();
    for ((model, bench, var), g) in
        group(cells, |c| (c.model.clone(), c.benchmark.clone(), c.variant))
    {
        if g.len() < 2 || g.iter().any(|c| c.delim_index >= MAX_DELIMITERS) {
            continue;
        }
        let Some(rows) = docs.get(&(model.clone(), bench.clone(), var)) else {
            continue;
        };
        // Cells of a group come in delimiter order: the first at the extreme is named.
        let best = g
            .iter()
            .copied()
            .reduce(|a, c| if cmp_acc(c, a).is_gt() { c } else { a });
        let worst = g
            .iter()
            .copied()
            .reduce(|a, c| if cmp_acc(c, a).is_lt() { c } else { a });
        let (Some(best), Some(worst)) = (best, worst) else {
            continue;
        };
        let bits: u128 = g
            .iter()
            .map(|c| 1u128 << c.delim_index)
            .fold(0, |a, x| a | x);
        let cols: Vec<u64> = g.iter().map(|c| c.correct).collect();
        let row_totals: Vec<u64> = rows
            .values()
            .map(|m| u64::from((m & bits).count_ones()))
            .collect();
        let Ok(q) = cochran_q(&cols, &row_totals) else {
            continue;
        };
        let (bi, wi) = (1u128 << best.delim_index, 1u128 << worst.delim_index);
        let best_only = rows
            .values()
            .filter(|m| *m & bi != 0 && *m & wi == 0)
            .count() as u64;
        let worst_only = rows
            .values()
            .filter(|m| *m & wi != 0 && *m & bi == 0)
            .count() as u64;
        let mp = mcnemar_exact(best_only, worst_only);
        let (source, label) = provenance(&g);
        let d = |c: &Cell| spec.delimiters[c.delim_index].slug.clone();
        for (col, v) in c.iter_mut().zip([
            source,
            label,
            model,
            bench,
            var.as_str().to_string(),
            d(best),
            d(worst),
        ]) {
            col.push(v);
        }
        for (col, v) in n.iter_mut().zip([
            g.len() as i64,
            rows.len() as i64,
            q.df as i64,
            best_only as i64,
            worst_only as i64,
        ]) {
            col.push(v);
        }
        let pct = |c: &Cell| round6(100.0 * c.correct as f64 / c.n as f64);
        for (col, v) in x.iter_mut().zip([
            round6(q.q),
            round6(q.p_value),
            pct(best),
            pct(worst),
            round6(mp),
        ]) {
            col.push(v);
        }
        noise.push(q.p_value <= LEVEL && mp <= LEVEL);
    }
    let [src, lab, model, bench, var, best, worst] = c;
    let [delims, documents, df, best_only, worst_only] = n;
    let [q, qp, best_pct, worst_pct, mp] = x;
    batch(
        &SWEEP_SIGNIFICANCE,
        vec![
            s(src),
            s(lab),
            s(model),
            s(bench),
            s(var),
            i(delims),
            i(documents),
            f(q),
            i(df),
            f(qp),
            s(best),
            f(best_pct),
            s(worst),
            f(worst_pct),
            i(best_only),
            i(worst_only),
            f(mp),
            b(noise),
        ],
    )
}

/// `sweep_ranking`: the ranking measures of `protospread_inference::ranking` per label,
/// benchmark and variant, the delimiters as setups.
pub(crate) fn sweep_ranking(cells: &[Cell]) -> RecordBatch {
    let mut t: [Vec<String>; 4] = Default::default();
    let mut n: [Vec<i64>; 6] = Default::default();
    let (mut tau_med, mut tau_min, mut share, mut lead, mut every) =
        (vec![], vec![], vec![], vec![], vec![]);
    for ((_, bench, var), sc) in model_scores(cells) {
        let Scores {
            models,
            scores,
            source,
            label,
        } = sc;
        let Ok(r) = ranking(&scores) else {
            continue;
        };
        let leaders: Vec<&str> = models
            .iter()
            .zip(&r.can_lead)
            .filter(|(_, l)| **l)
            .map(|(m, _)| m.as_str())
            .collect();
        for (col, v) in t
            .iter_mut()
            .zip([source, label, bench, var.as_str().to_string()])
        {
            col.push(v);
        }
        for (col, v) in n.iter_mut().zip([
            r.setups as i64,
            r.models as i64,
            r.setup_pairs as i64,
            r.model_pairs as i64,
            r.flipped_pairs as i64,
            leaders.len() as i64,
        ]) {
            col.push(v);
        }
        tau_med.push(r.tau_median.map(round6));
        tau_min.push(r.tau_min.map(round6));
        share.push(
            (r.model_pairs > 0).then(|| round6(r.flipped_pairs as f64 / r.model_pairs as f64)),
        );
        every.push(leaders.len() == models.len());
        lead.push(leaders.join(" "));
    }
    let [src, lab, bench, var] = t;
    let [setups, models, pairs, mpairs, flipped, leaders] = n;
    batch(
        &SWEEP_RANKING,
        vec![
            s(src),
            s(lab),
            s(bench),
            s(var),
            i(setups),
            i(models),
            i(pairs),
            Arc::new(Float64Array::from(tau_med)),
            Arc::new(Float64Array::from(tau_min)),
            i(mpairs),
            i(flipped),
            Arc::new(Float64Array::from(share)),
            i(leaders),
            s(lead),
            b(every),
        ],
    )
}
