//! The sweep's tables, from per-document records.
//!
//! A cell is (model, benchmark, variant, delimiter): `n` documents (MMLU: all subjects
//! pooled, as lm-eval's weight-by-size group accuracy), `correct` of them right. Accuracies
//! and gains are in percentage points; every derived float is rounded to 6 decimals by
//! [`round6`] so that last-bit differences between platforms' `ln`/`exp` cannot change the
//! bytes. Means are unweighted means over delimiters (or models), summed in table order.

use crate::delimiter::Delimiter;
use crate::ingest::TaskSamples;
use crate::stats::clopper_pearson;
use crate::{SweepError, SweepSpec};
use arrow::array::{ArrayRef, BooleanArray, Float64Array, Int64Array, StringArray};
use arrow::record_batch::RecordBatch;
use protospread_core::{
    SweepVariant, TableContract, SWEEP_ACCURACY, SWEEP_DELIMITER_GAIN, SWEEP_DELIMITER_GAIN_MEAN,
    SWEEP_LEAD, SWEEP_NAMED_GAIN, SWEEP_NAMED_GAIN_MEAN, SWEEP_RANK, SWEEP_SPREAD,
};
use protospread_inference::Fraction;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Level of every interval: 95%.
pub(crate) const ALPHA: f64 = 0.05;

/// Round to 6 decimals, half away from zero: the one float rule of the sweep tables.
pub(crate) fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

/// `correct/n` as a percentage with two decimals, for printing (`56.25%`).
pub fn fmt_pct(correct: u64, n: u64) -> String {
    format!("{:.2}%", 100.0 * correct as f64 / n as f64)
}

/// One cell's counts.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// The runs the cell's documents came from (`; `-separated when several).
    pub source: String,
    /// Their labels (`recorded`, ...; `; `-separated when several).
    pub label: String,
    /// Model id.
    pub model: String,
    /// Benchmark name.
    pub benchmark: String,
    /// Plain or named delimiter.
    pub variant: SweepVariant,
    /// Index of the delimiter in the configured set (table order).
    pub delim_index: usize,
    /// Questions.
    pub n: u64,
    /// Correct answers.
    pub correct: u64,
}

impl Cell {
    fn pct(&self) -> f64 {
        100.0 * self.correct as f64 / self.n as f64
    }
    fn ci(&self) -> (f64, f64) {
        let (lo, hi) = clopper_pearson(self.correct, self.n, ALPHA);
        (round6(100.0 * lo), round6(100.0 * hi))
    }
}

/// The position of each configured delimiter (by slug) in `spec`'s delimiters.
pub(crate) fn delimiter_index(spec: &SweepSpec) -> BTreeMap<&str, usize> {
    spec.delimiters
        .iter()
        .enumerate()
        .map(|(i, d)| (d.slug.as_str(), i))
        .collect()
}

/// Count correct answers per cell, from the columns of every task. Tasks whose delimiter
/// is not configured are refused.
pub fn cells(samples: &[TaskSamples], spec: &SweepSpec) -> Result<Vec<Cell>, SweepError> {
    let index = delimiter_index(spec);
    type Acc<'a> = (u64, u64, BTreeSet<&'a str>, BTreeSet<&'a str>);
    let mut acc: BTreeMap<(String, String, SweepVariant, usize), Acc> = BTreeMap::new();
    for t in samples {
        let i = *index.get(t.delimiter.slug.as_str()).ok_or_else(|| {
            SweepError::Check(vec![format!(
                "task {} of {}: delimiter {} is not in [sweep] delimiters",
                t.task,
                t.run.display(),
                t.delimiter.quoted()
            )])
        })?;
        let e = acc
            .entry((t.model.clone(), t.benchmark.clone(), t.variant, i))
            .or_default();
        e.0 += t.n();
        e.1 += t.correct();
        e.2.insert(&t.source);
        e.3.insert(&t.label);
    }
    Ok(acc
        .into_iter()
        .map(
            |((model, benchmark, variant, delim_index), (n, correct, sources, labels))| Cell {
                source: join(sources),
                label: join(labels),
                model,
                benchmark,
                variant,
                delim_index,
                n,
                correct,
            },
        )
        .collect())
}

/// Distinct values, sorted, `; `-separated.
fn join<'a>(v: impl IntoIterator<Item = &'a str>) -> String {
    v.into_iter()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect::<Vec<_>>()
        .join(SEP)
}

/// Separates several sources or labels in one cell.
const SEP: &str = "; ";

/// The sources and labels of a group of cells.
pub(crate) fn provenance(g: &[&Cell]) -> (String, String) {
    (
        join(g.iter().flat_map(|c| c.source.split(SEP))),
        join(g.iter().flat_map(|c| c.label.split(SEP))),
    )
}

/// A text column.
pub(crate) fn s(v: Vec<String>) -> ArrayRef {
    Arc::new(StringArray::from(v))
}
/// A float column.
pub(crate) fn f(v: Vec<f64>) -> ArrayRef {
    Arc::new(Float64Array::from(v))
}
/// An integer column.
pub(crate) fn i(v: Vec<i64>) -> ArrayRef {
    Arc::new(Int64Array::from(v))
}
/// A boolean column.
pub(crate) fn b(v: Vec<bool>) -> ArrayRef {
    Arc::new(BooleanArray::from(v))
}

/// `a` better than `b` by exact comparison of correct/n (no float rounding in ranks).
pub(crate) fn cmp_acc(a: &Cell, b: &Cell) -> std::cmp::Ordering {
    (a.correct as u128 * b.n as u128).cmp(&(b.correct as u128 * a.n as u128))
}

/// Group cells by a key, keeping table order within each group.
pub(crate) fn group<K: Ord>(cells: &[Cell], key: impl Fn(&Cell) -> K) -> BTreeMap<K, Vec<&Cell>> {
    let mut m: BTreeMap<K, Vec<&Cell>> = BTreeMap::new();
    for c in cells {
        m.entry(key(c)).or_default().push(c);
    }
    m
}

/// Spread of one model, benchmark and variant over its delimiters: a row of `sweep_spread`.
#[derive(Debug, Clone, PartialEq)]
pub struct Spread {
    /// The runs its cells came from (`; `-separated).
    pub source: String,
    /// Their labels (`; `-separated).
    pub label: String,
    /// Model id.
    pub model: String,
    /// Benchmark name.
    pub benchmark: String,
    /// Plain or named delimiter.
    pub variant: SweepVariant,
    /// Delimiters with a cell.
    pub delimiters: usize,
    /// Lowest accuracy, percent (6 decimals).
    pub min_pct: f64,
    /// Slugs of every delimiter at the lowest accuracy.
    pub min_delimiters: Vec<String>,
    /// Highest accuracy, percent (6 decimals).
    pub max_pct: f64,
    /// Slugs of every delimiter at the highest accuracy: the leading delimiters.
    pub max_delimiters: Vec<String>,
    /// Highest minus lowest, points (6 decimals).
    pub spread_pct: f64,
    /// Whether the 95% intervals of the lowest and highest cell do not overlap.
    pub intervals_disjoint: bool,
}

/// The spread per model, benchmark and variant (the `sweep_spread` table's rows), from
/// [`cells`] computed with the same `spec`.
pub fn spreads(cells: &[Cell], spec: &SweepSpec) -> Vec<Spread> {
    let d = |c: &Cell| &spec.delimiters[c.delim_index];
    let mut out = Vec::new();
    for ((model, benchmark, variant), g) in
        group(cells, |c| (c.model.clone(), c.benchmark.clone(), c.variant))
    {
        let (source, label) = provenance(&g);
        let lo = g
            .iter()
            .copied()
            .min_by(|a, b| cmp_acc(a, b))
            .expect("non-empty");
        let hi = g
            .iter()
            .copied()
            .max_by(|a, b| cmp_acc(a, b))
            .expect("non-empty");
        let slugs = |t: &Cell| {
            g.iter()
                .filter(|c| cmp_acc(c, t).is_eq())
                .map(|c| d(c).slug.clone())
                .collect::<Vec<_>>()
        };
        out.push(Spread {
            source,
            label,
            model,
            benchmark,
            variant,
            delimiters: g.len(),
            min_pct: round6(lo.pct()),
            min_delimiters: slugs(lo),
            max_pct: round6(hi.pct()),
            max_delimiters: slugs(hi),
            spread_pct: round6(hi.pct() - lo.pct()),
            // The extremes differ beyond sampling error when their intervals are disjoint.
            intervals_disjoint: lo.ci().1 < hi.ci().0,
        });
    }
    out
}

/// What a row of a sweep table is about: its provenance, model, benchmark, variant and
/// delimiter. A table writes the key columns its contract declares and no others, so a
/// field a table is not keyed by may hold anything.
struct Key<'a> {
    source: String,
    label: String,
    model: &'a str,
    benchmark: &'a str,
    variant: SweepVariant,
    delimiter: Option<&'a Delimiter>,
}

impl<'a> Key<'a> {
    /// A cell's own key.
    fn of(c: &'a Cell, spec: &'a SweepSpec) -> Self {
        Key {
            source: c.source.clone(),
            label: c.label.clone(),
            model: &c.model,
            benchmark: &c.benchmark,
            variant: c.variant,
            delimiter: Some(&spec.delimiters[c.delim_index]),
        }
    }
}

/// A table of `contract`: its key columns (`source`, `label`, and whichever of `model`,
/// `benchmark`, `variant`, `delimiter` and `delimiter_slug` it declares) from `keys`, its
/// other columns from `values`, in the contract's order (the contract alone names them).
fn table(contract: &TableContract, keys: &[Key], values: Vec<ArrayRef>) -> RecordBatch {
    let text = |f: &dyn Fn(&Key) -> String| s(keys.iter().map(f).collect());
    let delim = |k: &Key, f: fn(&Delimiter) -> &String| {
        f(k.delimiter.expect("a table keyed by delimiter")).clone()
    };
    let mut values = values.into_iter();
    let cols: Vec<ArrayRef> = contract
        .names()
        .into_iter()
        .map(|name| match name {
            "source" => text(&|k| k.source.clone()),
            "label" => text(&|k| k.label.clone()),
            "model" => text(&|k| k.model.to_string()),
            "benchmark" => text(&|k| k.benchmark.to_string()),
            "variant" => text(&|k| k.variant.as_str().to_string()),
            "delimiter" => text(&|k| delim(k, |d| &d.text)),
            "delimiter_slug" => text(&|k| delim(k, |d| &d.slug)),
            _ => values.next().expect("a value for every contract column"),
        })
        .collect();
    assert!(
        values.next().is_none(),
        "{}: a value not in the contract",
        contract.name
    );
    RecordBatch::try_new(contract.schema(), cols).expect("columns of the contract")
}

/// Every table, named as its Parquet file stem (`out/aggregate/<name>.parquet`), in a fixed
/// order. `cells` must come from [`cells`] (sorted by model, benchmark, variant, delimiter).
pub(crate) fn build(cells: &[Cell], spec: &SweepSpec) -> Vec<(String, RecordBatch)> {
    let (rank, leads) = rank(cells, spec);
    let [named_gain, named_gain_mean] = named_gain(cells, spec);
    let [delimiter_gain, delimiter_gain_mean] = delimiter_gain(cells, spec);
    [
        (SWEEP_ACCURACY.name, accuracy(cells, spec)),
        (SWEEP_SPREAD.name, spread(cells, spec)),
        (SWEEP_RANK.name, rank),
        (SWEEP_LEAD.name, lead(cells, &leads, spec)),
        (SWEEP_NAMED_GAIN.name, named_gain),
        (SWEEP_NAMED_GAIN_MEAN.name, named_gain_mean),
        (SWEEP_DELIMITER_GAIN.name, delimiter_gain),
        (SWEEP_DELIMITER_GAIN_MEAN.name, delimiter_gain_mean),
    ]
    .into_iter()
    .map(|(name, t)| (name.to_string(), t))
    .collect()
}

/// `sweep_accuracy`: accuracy with its exact interval, per cell.
fn accuracy(cells: &[Cell], spec: &SweepSpec) -> RecordBatch {
    let keys: Vec<Key> = cells.iter().map(|c| Key::of(c, spec)).collect();
    let ci: Vec<(f64, f64)> = cells.iter().map(Cell::ci).collect();
    table(
        &SWEEP_ACCURACY,
        &keys,
        vec![
            i(cells.iter().map(|c| c.n as i64).collect()),
            i(cells.iter().map(|c| c.correct as i64).collect()),
            f(cells.iter().map(|c| round6(c.pct())).collect()),
            f(ci.iter().map(|x| x.0).collect()),
            f(ci.iter().map(|x| x.1).collect()),
        ],
    )
}

/// `sweep_spread`: spread (max - min) per model, benchmark and variant.
fn spread(cells: &[Cell], spec: &SweepSpec) -> RecordBatch {
    let g = spreads(cells, spec);
    let keys: Vec<Key> = g
        .iter()
        .map(|x| Key {
            source: x.source.clone(),
            label: x.label.clone(),
            model: &x.model,
            benchmark: &x.benchmark,
            variant: x.variant,
            delimiter: None,
        })
        .collect();
    let col = |f: &dyn Fn(&Spread) -> String| s(g.iter().map(f).collect());
    let num = |x: &dyn Fn(&Spread) -> f64| f(g.iter().map(x).collect());
    table(
        &SWEEP_SPREAD,
        &keys,
        vec![
            i(g.iter().map(|x| x.delimiters as i64).collect()),
            num(&|x| x.min_pct),
            col(&|x| x.min_delimiters.join(" ")),
            num(&|x| x.max_pct),
            col(&|x| x.max_delimiters.join(" ")),
            num(&|x| x.spread_pct),
            b(g.iter().map(|x| x.intervals_disjoint).collect()),
        ],
    )
}

/// Per model, benchmark and variant: the delimiters (indices) under which the model ranks
/// first, and the source and label of its first cell.
type Leads = BTreeMap<(String, String, SweepVariant), (Vec<usize>, String, String)>;

/// `sweep_rank`: rank of each model under each delimiter (1 = best; ties share the best
/// rank), with the [`Leads`] it implies. Models are ranked against models of the same label
/// only (never recorded against simulated).
fn rank(cells: &[Cell], spec: &SweepSpec) -> (RecordBatch, Leads) {
    let by_delim = group(cells, |c| {
        (
            c.label.clone(),
            c.benchmark.clone(),
            c.variant,
            c.delim_index,
        )
    });
    let mut rows = Vec::new();
    for g in by_delim.values() {
        for &c in g {
            let rank = 1 + g.iter().filter(|o| cmp_acc(o, c).is_gt()).count();
            rows.push((c, rank, g.len()));
        }
    }
    let order = |c: &Cell| {
        (
            c.model.clone(),
            c.benchmark.clone(),
            c.variant,
            c.delim_index,
        )
    };
    rows.sort_by_key(|r| order(r.0));
    let mut leads = Leads::new();
    let (mut keys, mut a, mut r, mut nm, mut ld) = (vec![], vec![], vec![], vec![], vec![]);
    for (c, rank, models) in rows {
        let e = leads
            .entry((c.model.clone(), c.benchmark.clone(), c.variant))
            .or_insert_with(|| (Vec::new(), c.source.clone(), c.label.clone()));
        if rank == 1 {
            e.0.push(c.delim_index);
        }
        keys.push(Key::of(c, spec));
        a.push(round6(c.pct()));
        r.push(rank as i64);
        nm.push(models as i64);
        ld.push(rank == 1);
    }
    let t = table(&SWEEP_RANK, &keys, vec![f(a), i(r), i(nm), b(ld)]);
    (t, leads)
}

/// `sweep_lead`: does some delimiter put each model in the lead? The judgement is the shared
/// ranking code's (`protospread_inference::ranking`, the questionnaire's `ranking` table too)
/// over the models scored under every delimiter; a model missing a delimiter leads where its
/// rank is 1.
fn lead(cells: &[Cell], leads: &Leads, spec: &SweepSpec) -> RecordBatch {
    // (label, benchmark, variant) -> model -> can lead
    let mut shared: BTreeMap<(String, String, SweepVariant), BTreeMap<String, bool>> =
        BTreeMap::new();
    for (key, sc) in model_scores(cells) {
        if let Ok(r) = protospread_inference::ranking(&sc.scores) {
            shared.insert(key, sc.models.into_iter().zip(r.can_lead).collect());
        }
    }
    let can_lead = |model: &String, group: &(String, String, SweepVariant), ds: &[usize]| {
        shared
            .get(group)
            .and_then(|m| m.get(model).copied())
            .unwrap_or(!ds.is_empty())
    };
    let mut every: BTreeMap<(String, String, SweepVariant), bool> = BTreeMap::new();
    for ((model, bench, var), (ds, _, label)) in leads {
        let group = (label.clone(), bench.clone(), *var);
        let leads = can_lead(model, &group, ds);
        *every.entry(group).or_insert(true) &= leads;
    }
    let (mut keys, mut n, mut any, mut which, mut all) = (vec![], vec![], vec![], vec![], vec![]);
    for ((model, bench, var), (ds, source, label)) in leads {
        let group = (label.clone(), bench.clone(), *var);
        keys.push(Key {
            source: source.clone(),
            label: label.clone(),
            model,
            benchmark: bench,
            variant: *var,
            delimiter: None,
        });
        n.push(ds.len() as i64);
        any.push(can_lead(model, &group, ds));
        which.push(
            ds.iter()
                .map(|i| spec.delimiters[*i].slug.clone())
                .collect::<Vec<_>>()
                .join(" "),
        );
        all.push(every[&group]);
    }
    table(&SWEEP_LEAD, &keys, vec![i(n), b(any), s(which), b(all)])
}

/// `sweep_named_gain` and `sweep_named_gain_mean`: named minus plain, per delimiter and on
/// average over the delimiters.
fn named_gain(cells: &[Cell], spec: &SweepSpec) -> [RecordBatch; 2] {
    type Pairs<'c> = Vec<(usize, &'c Cell, &'c Cell)>;
    let mut per: BTreeMap<(String, String), Pairs> = BTreeMap::new();
    let plain = group(cells, |c| {
        (
            c.model.clone(),
            c.benchmark.clone(),
            c.variant,
            c.delim_index,
        )
    });
    for ((model, bench, var, di), p) in &plain {
        if *var != SweepVariant::Plain {
            continue;
        }
        if let Some(nm) = plain.get(&(model.clone(), bench.clone(), SweepVariant::Named, *di)) {
            per.entry((model.clone(), bench.clone()))
                .or_default()
                .push((*di, p[0], nm[0]));
        }
    }
    let (mut keys, mut pp, mut np, mut g) = (vec![], vec![], vec![], vec![]);
    let (mut mean_keys, mut k, mut mp, mut mn, mut mg) = (vec![], vec![], vec![], vec![], vec![]);
    for ((model, bench), rows) in &per {
        let key = |cells: &[&Cell], delimiter: Option<usize>| {
            let (source, label) = provenance(cells);
            Key {
                source,
                label,
                model,
                benchmark: bench,
                variant: SweepVariant::Plain,
                delimiter: delimiter.map(|di| &spec.delimiters[di]),
            }
        };
        let (mut sp, mut sn) = (0.0, 0.0);
        let all: Vec<&Cell> = rows.iter().flat_map(|(_, p, n)| [*p, *n]).collect();
        mean_keys.push(key(&all, None));
        for (di, p, n) in rows {
            keys.push(key(&[*p, *n], Some(*di)));
            pp.push(round6(p.pct()));
            np.push(round6(n.pct()));
            g.push(round6(n.pct() - p.pct()));
            sp += p.pct();
            sn += n.pct();
        }
        let n = rows.len() as f64;
        k.push(rows.len() as i64);
        mp.push(round6(sp / n));
        mn.push(round6(sn / n));
        mg.push(round6(sn / n - sp / n));
    }
    [
        table(&SWEEP_NAMED_GAIN, &keys, vec![f(pp), f(np), f(g)]),
        table(
            &SWEEP_NAMED_GAIN_MEAN,
            &mean_keys,
            vec![i(k), f(mp), f(mn), f(mg)],
        ),
    ]
}

/// `sweep_delimiter_gain` and `sweep_delimiter_gain_mean`: each delimiter against the mean of
/// all delimiters, per model; then averaged over the models of a label.
fn delimiter_gain(cells: &[Cell], spec: &SweepSpec) -> [RecordBatch; 2] {
    type Across<'c> = BTreeMap<(String, String, SweepVariant, usize), Vec<(f64, &'c Cell)>>;
    let mut across: Across = BTreeMap::new();
    let (mut keys, mut a, mut mean, mut g) = (vec![], vec![], vec![], vec![]);
    for grp in group(cells, |c| (c.model.clone(), c.benchmark.clone(), c.variant)).values() {
        let mu = grp.iter().map(|c| c.pct()).sum::<f64>() / grp.len() as f64;
        for &c in grp {
            keys.push(Key::of(c, spec));
            a.push(round6(c.pct()));
            mean.push(round6(mu));
            g.push(round6(c.pct() - mu));
            across
                .entry((
                    c.label.clone(),
                    c.benchmark.clone(),
                    c.variant,
                    c.delim_index,
                ))
                .or_default()
                .push((c.pct() - mu, c));
        }
    }
    let per_model = table(&SWEEP_DELIMITER_GAIN, &keys, vec![f(a), f(mean), f(g)]);
    let (mut keys, mut k, mut mg) = (vec![], vec![], vec![]);
    for ((_, bench, var, di), rows) in &across {
        let grp: Vec<&Cell> = rows.iter().map(|r| r.1).collect();
        let (source, label) = provenance(&grp);
        keys.push(Key {
            source,
            label,
            model: "",
            benchmark: bench,
            variant: *var,
            delimiter: Some(&spec.delimiters[*di]),
        });
        k.push(rows.len() as i64);
        mg.push(round6(
            rows.iter().map(|r| r.0).sum::<f64>() / rows.len() as f64,
        ));
    }
    let mean = table(&SWEEP_DELIMITER_GAIN_MEAN, &keys, vec![i(k), f(mg)]);
    [per_model, mean]
}

/// One (label, benchmark, variant) of a sweep as setups x models: the models scored under
/// every delimiter of the group (in byte order), their accuracies `correct / n` per delimiter
/// (configured order) compared exactly, and the group's sources and labels.
pub(crate) struct Scores {
    pub(crate) models: Vec<String>,
    pub(crate) scores: Vec<Vec<Fraction>>,
    pub(crate) source: String,
    pub(crate) label: String,
}

/// [`Scores`] per (label, benchmark, variant).
pub(crate) fn model_scores(cells: &[Cell]) -> BTreeMap<(String, String, SweepVariant), Scores> {
    let mut out = BTreeMap::new();
    for (key, g) in group(cells, |c| (c.label.clone(), c.benchmark.clone(), c.variant)) {
        let mut delims: Vec<usize> = g.iter().map(|c| c.delim_index).collect();
        delims.sort_unstable();
        delims.dedup();
        let by: BTreeMap<(&str, usize), &Cell> = g
            .iter()
            .map(|c| ((c.model.as_str(), c.delim_index), *c))
            .collect();
        let mut models: Vec<&str> = g.iter().map(|c| c.model.as_str()).collect();
        models.sort_unstable();
        models.dedup();
        models.retain(|m| delims.iter().all(|d| by.contains_key(&(*m, *d))));
        let scores = delims
            .iter()
            .map(|d| {
                models
                    .iter()
                    .map(|m| {
                        let c = by[&(*m, *d)];
                        Fraction::new(c.correct, c.n)
                    })
                    .collect()
            })
            .collect();
        let (source, label) = provenance(&g);
        out.insert(
            key,
            Scores {
                models: models.iter().map(|m| m.to_string()).collect(),
                scores,
                source,
                label,
            },
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::AsArray;
    use protospread_core::SweepSection;

    fn spec(delims: &[&str]) -> SweepSpec {
        SweepSpec::from_section(&SweepSection {
            delimiters: delims.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        })
        .unwrap()
    }

    fn cell(model: &str, di: usize, correct: u64, n: u64) -> Cell {
        Cell {
            source: "s".into(),
            label: "recorded".into(),
            model: model.into(),
            benchmark: "b".into(),
            variant: SweepVariant::Plain,
            delim_index: di,
            n,
            correct,
        }
    }

    fn table<'a>(t: &'a [(String, RecordBatch)], name: &str) -> &'a RecordBatch {
        &t.iter().find(|(n, _)| n == name).unwrap().1
    }

    fn strs(b: &RecordBatch, col: &str) -> Vec<String> {
        b.column_by_name(col)
            .unwrap()
            .as_string::<i32>()
            .iter()
            .map(|s| s.unwrap().to_string())
            .collect()
    }

    fn bools(b: &RecordBatch, col: &str) -> Vec<bool> {
        b.column_by_name(col)
            .unwrap()
            .as_boolean()
            .iter()
            .map(|x| x.unwrap())
            .collect()
    }

    /// Three models, four delimiters. m1 leads under "\n" and (tied with m2) under "#", m2
    /// under "!" and "#", m3 only under ",", where its 31 of 50 (0.62) beats m1's 60 of 100:
    /// accuracies out of different n are compared exactly, not by counts.
    #[test]
    fn any_model_in_the_lead_known_answer() {
        let spec = spec(&["\n", "!", "#", ","]);
        let cells = vec![
            cell("m1", 0, 80, 100),
            cell("m1", 1, 40, 100),
            cell("m1", 2, 50, 100),
            cell("m1", 3, 60, 100),
            cell("m2", 0, 70, 100),
            cell("m2", 1, 60, 100),
            cell("m2", 2, 50, 100),
            cell("m2", 3, 59, 100),
            cell("m3", 0, 10, 100),
            cell("m3", 1, 50, 100),
            cell("m3", 2, 20, 100),
            cell("m3", 3, 31, 50),
        ];
        let t = build(&cells, &spec);
        let lead = table(&t, "sweep_lead");
        assert_eq!(strs(lead, "model"), ["m1", "m2", "m3"]);
        assert_eq!(
            strs(lead, "leading_delimiters"),
            ["nl hash", "exclam hash", "comma"]
        );
        assert_eq!(
            bools(lead, "leads_under_some_delimiter"),
            [true, true, true]
        );
        assert_eq!(bools(lead, "every_model_can_lead"), [true, true, true]);
        let rank = table(&t, "sweep_rank");
        let ranks: Vec<i64> = rank
            .column_by_name("rank")
            .unwrap()
            .as_primitive::<arrow::datatypes::Int64Type>()
            .values()
            .to_vec();
        // Rows by model then delimiter: m1 (1,3,1,2), m2 (2,1,1,3), m3 (3,2,3,1).
        assert_eq!(ranks, [1, 3, 1, 2, 2, 1, 1, 3, 3, 2, 3, 1]);

        // With 29/50 (0.58, below m2's 0.59) m3 leads nowhere and the flag turns false.
        let mut cells2 = cells;
        cells2[11] = cell("m3", 3, 29, 50);
        let t2 = build(&cells2, &spec);
        let lead2 = table(&t2, "sweep_lead");
        assert_eq!(
            strs(lead2, "leading_delimiters"),
            ["nl hash comma", "exclam hash", ""]
        );
        assert_eq!(
            bools(lead2, "leads_under_some_delimiter"),
            [true, true, false]
        );
        assert_eq!(bools(lead2, "every_model_can_lead"), [false, false, false]);
    }

    #[test]
    fn spread_and_gains_by_hand() {
        let spec = spec(&["\n", "!"]);
        let mut cells = vec![cell("m", 0, 30, 40), cell("m", 1, 10, 40)];
        let mut named = cells.clone();
        for c in &mut named {
            c.variant = SweepVariant::Named;
        }
        named[1].correct = 20;
        cells.extend(named);
        let t = build(&cells, &spec);
        let sp = table(&t, "sweep_spread");
        let f = |b: &RecordBatch, c: &str| -> Vec<f64> {
            b.column_by_name(c)
                .unwrap()
                .as_primitive::<arrow::datatypes::Float64Type>()
                .values()
                .to_vec()
        };
        // Variants sort plain, named. plain: 75% vs 25% -> 50 points; named: 75% vs 50% -> 25.
        assert_eq!(strs(sp, "variant"), ["plain", "named"]);
        assert_eq!(f(sp, "spread_pct"), [50.0, 25.0]);
        assert_eq!(strs(sp, "max_delimiters"), ["nl", "nl"]);
        let g = table(&t, "sweep_named_gain");
        assert_eq!(f(g, "gain_pct"), [0.0, 25.0]);
        let gm = table(&t, "sweep_named_gain_mean");
        assert_eq!(f(gm, "mean_gain_pct"), [12.5]);
        let dg = table(&t, "sweep_delimiter_gain");
        // plain mean 50: +25, -25; named mean 62.5: +12.5, -12.5.
        assert_eq!(f(dg, "gain_over_mean_pct"), [25.0, -25.0, 12.5, -12.5]);
        // Clopper-Pearson: 30/40 (58.8-87.3) and 10/40 (12.7-41.2) are disjoint; 20/40
        // (33.8-66.2) overlaps 30/40.
        assert_eq!(bools(sp, "intervals_disjoint"), [true, false]);
    }
}
