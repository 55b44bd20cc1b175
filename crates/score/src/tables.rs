//! The Arrow tables of the parity part of the score stage (all sorted by their key columns).
//!
//! | file | columns |
//! |---|---|
//! | `parity_summary.parquet` | instrument, category, reason, rows |
//! | `parity_rows.parquet` | instrument, id, category, reason, detail, top_result_stored, top_result_computed, scores_equal, allowlist_note |
//! | `human_scores.parquet` | instrument, id, dimension, stored, computed, equal |
//! | `mutation_sweep.parquet` | test, item, dimension, reproduced_rows, weight_broken, weight_broken_share, reverse_broken, reverse_broken_share |
//! | `norms.parquet` | test, dimension, n, mean, sd, min, median, max, rows_reproduced, rows_duplicate |
//! | `norm_values.parquet` | test, dimension, value, count |
//!
//! `computed` is the current key's value; it is the number the product stores when the row is
//! reproduced. Floats are f64.

use crate::parity::summarize;
use crate::stage::{HumanInput, ParityRun};
use crate::ScoreError;
use arrow::array::{ArrayRef, BooleanArray, Float64Array, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use std::collections::BTreeMap;
use std::sync::Arc;

/// One output table.
pub struct Table {
    /// File name in the score folder.
    pub file: &'static str,
    /// Its schema.
    pub schema: SchemaRef,
    /// Its rows.
    pub batch: RecordBatch,
}

enum Col {
    S(Vec<Option<String>>),
    I(Vec<i64>),
    F(Vec<Option<f64>>),
    B(Vec<bool>),
}

fn table(file: &'static str, cols: Vec<(&str, Col)>) -> Result<Table, ScoreError> {
    let mut fields = Vec::new();
    let mut arrays: Vec<ArrayRef> = Vec::new();
    for (name, c) in cols {
        let (dt, nullable, a): (DataType, bool, ArrayRef) = match c {
            Col::S(v) => {
                let n = v.iter().any(|x| x.is_none());
                (DataType::Utf8, n, Arc::new(StringArray::from(v)))
            }
            Col::I(v) => (DataType::Int64, false, Arc::new(Int64Array::from(v))),
            Col::F(v) => {
                let n = v.iter().any(|x| x.is_none());
                (DataType::Float64, n, Arc::new(Float64Array::from(v)))
            }
            Col::B(v) => (DataType::Boolean, false, Arc::new(BooleanArray::from(v))),
        };
        fields.push(Field::new(name, dt, nullable));
        arrays.push(a);
    }
    let schema = Arc::new(Schema::new(fields));
    let batch = RecordBatch::try_new(schema.clone(), arrays)
        .map_err(|e| ScoreError::Arrow(e.to_string()))?;
    Ok(Table {
        file,
        schema,
        batch,
    })
}

fn s(x: &str) -> Option<String> {
    Some(x.to_string())
}

/// Every table of the parity part.
pub fn tables(run: &ParityRun, inputs: &[HumanInput]) -> Result<Vec<Table>, ScoreError> {
    let mut out = Vec::new();

    let (mut a, mut b, mut c, mut d) = (vec![], vec![], vec![], vec![]);
    for (inst, m) in summarize(&run.classes) {
        for ((cat, reason), n) in m {
            a.push(s(&inst));
            b.push(s(cat.as_str()));
            c.push(s(&reason));
            d.push(n as i64);
        }
    }
    out.push(table(
        "parity_summary.parquet",
        vec![
            ("instrument", Col::S(a)),
            ("category", Col::S(b)),
            ("reason", Col::S(c)),
            ("rows", Col::I(d)),
        ],
    )?);

    let stored: BTreeMap<(&str, i64), &crate::human::HumanRow> = inputs
        .iter()
        .flat_map(|i| i.rows.iter().map(move |r| ((i.inst.name, r.id), r)))
        .collect();
    let n = run.classes.len();
    let (mut inst, mut id, mut cat, mut reason, mut detail) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut tops, mut topc, mut eq, mut note) = (vec![], vec![], vec![], vec![]);
    let (mut hi, mut hid, mut hd, mut hs, mut hc, mut he) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    for cl in &run.classes {
        let row = stored[&(cl.instrument.as_str(), cl.id)];
        inst.push(s(&cl.instrument));
        id.push(cl.id);
        cat.push(s(cl.category.as_str()));
        reason.push(s(&cl.reason));
        detail.push(s(&cl.detail));
        tops.push(s(&row.top_result));
        topc.push(cl.computed.top_result.clone());
        eq.push(cl.scores_equal);
        note.push(cl.allowlisted.clone());
        for (dsc, &st) in cl.computed.dims.iter().zip(&row.scores) {
            hi.push(s(&cl.instrument));
            hid.push(cl.id);
            hd.push(s(&dsc.dimension));
            hs.push(Some(f64::from(st)));
            hc.push(dsc.value);
            he.push(dsc.value == Some(f64::from(st)));
        }
    }
    out.push(table(
        "parity_rows.parquet",
        vec![
            ("instrument", Col::S(inst)),
            ("id", Col::I(id)),
            ("category", Col::S(cat)),
            ("reason", Col::S(reason)),
            ("detail", Col::S(detail)),
            ("top_result_stored", Col::S(tops)),
            ("top_result_computed", Col::S(topc)),
            ("scores_equal", Col::B(eq)),
            ("allowlist_note", Col::S(note)),
        ],
    )?);
    // human_scores: dimension order within a row is the instrument's column order, which is
    // alphabetical for the four study instruments; sort explicitly anyway.
    let mut idx: Vec<usize> = (0..hi.len()).collect();
    idx.sort_by(|&x, &y| (&hi[x], hid[x], &hd[x]).cmp(&(&hi[y], hid[y], &hd[y])));
    out.push(table(
        "human_scores.parquet",
        vec![
            (
                "instrument",
                Col::S(idx.iter().map(|&i| hi[i].clone()).collect()),
            ),
            ("id", Col::I(idx.iter().map(|&i| hid[i]).collect())),
            (
                "dimension",
                Col::S(idx.iter().map(|&i| hd[i].clone()).collect()),
            ),
            ("stored", Col::F(idx.iter().map(|&i| hs[i]).collect())),
            ("computed", Col::F(idx.iter().map(|&i| hc[i]).collect())),
            ("equal", Col::B(idx.iter().map(|&i| he[i]).collect())),
        ],
    )?);

    let sw = &run.sweep;
    let share = |k: usize, n: usize| {
        Some(if n == 0 {
            f64::NAN
        } else {
            k as f64 / n as f64
        })
    };
    out.push(table(
        "mutation_sweep.parquet",
        vec![
            ("test", Col::S(sw.iter().map(|m| s(&m.test)).collect())),
            ("item", Col::I(sw.iter().map(|m| m.item as i64).collect())),
            (
                "dimension",
                Col::S(sw.iter().map(|m| s(&m.dimension)).collect()),
            ),
            (
                "reproduced_rows",
                Col::I(sw.iter().map(|m| m.reproduced as i64).collect()),
            ),
            (
                "weight_broken",
                Col::I(sw.iter().map(|m| m.weight_broken as i64).collect()),
            ),
            (
                "weight_broken_share",
                Col::F(
                    sw.iter()
                        .map(|m| share(m.weight_broken, m.reproduced))
                        .collect(),
                ),
            ),
            (
                "reverse_broken",
                Col::I(sw.iter().map(|m| m.reverse_broken as i64).collect()),
            ),
            (
                "reverse_broken_share",
                Col::F(
                    sw.iter()
                        .map(|m| share(m.reverse_broken, m.reproduced))
                        .collect(),
                ),
            ),
        ],
    )?);

    let ns: Vec<_> = run.norms.norms.values().collect();
    let nr = |t: &str| run.norm_rows.get(t).copied().unwrap_or_default();
    out.push(table(
        "norms.parquet",
        vec![
            ("test", Col::S(ns.iter().map(|n| s(&n.test)).collect())),
            (
                "dimension",
                Col::S(ns.iter().map(|n| s(&n.dimension)).collect()),
            ),
            ("n", Col::I(ns.iter().map(|n| n.n as i64).collect())),
            ("mean", Col::F(ns.iter().map(|n| Some(n.mean)).collect())),
            ("sd", Col::F(ns.iter().map(|n| Some(n.sd)).collect())),
            ("min", Col::F(ns.iter().map(|n| Some(n.min())).collect())),
            (
                "median",
                Col::F(ns.iter().map(|n| Some(n.median())).collect()),
            ),
            ("max", Col::F(ns.iter().map(|n| Some(n.max())).collect())),
            (
                "rows_reproduced",
                Col::I(ns.iter().map(|n| nr(&n.test).reproduced as i64).collect()),
            ),
            (
                "rows_duplicate",
                Col::I(ns.iter().map(|n| nr(&n.test).duplicates as i64).collect()),
            ),
        ],
    )?);

    let (mut t, mut d, mut v, mut c) = (vec![], vec![], vec![], vec![]);
    for n in &ns {
        let mut i = 0;
        while i < n.values.len() {
            let j = n.values[i..]
                .iter()
                .take_while(|x| **x == n.values[i])
                .count();
            t.push(s(&n.test));
            d.push(s(&n.dimension));
            v.push(Some(n.values[i]));
            c.push(j as i64);
            i += j;
        }
    }
    out.push(table(
        crate::norms::VALUES_FILE,
        vec![
            ("test", Col::S(t)),
            ("dimension", Col::S(d)),
            ("value", Col::F(v)),
            ("count", Col::I(c)),
        ],
    )?);
    Ok(out)
}
