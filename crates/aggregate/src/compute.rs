//! Per-cell statistics and the study tables, computed in Rust over rows in key order.

use crate::load::{Inputs, ScoreRow};
use crate::stats::{self, RatioRule};
use crate::table::Table;
use crate::{AggregateError, Params};
use std::collections::{BTreeMap, BTreeSet};

/// What is known about a model within one source.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelMeta {
    pub label: String,
    pub study: String,
    pub arm: String,
    pub cohort: Option<String>,
}

/// One cell: one model x one scale (test, dimension) of one source.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub source: String,
    pub model: String,
    pub meta: ModelMeta,
    pub test: String,
    pub dimension: String,
    /// Why the cell is dropped; empty for a kept cell.
    pub drop_reasons: Vec<String>,
    pub protocol_n: i64,
    pub sampling_n: i64,
    pub protocol_mean_z: Option<f64>,
    /// Sample SD (n - 1) of z over the protocol administrations.
    pub protocol_sd: Option<f64>,
    /// Sample SD (n - 1) of z over the sampling administrations.
    pub sampling_sd: Option<f64>,
    pub ratio: Option<f64>,
    pub ratio_rule: Option<RatioRule>,
    /// protocol SD > sampling SD (strictly).
    pub protocol_exceeds: Option<bool>,
    pub min_z: Option<f64>,
    pub max_z: Option<f64>,
    /// max z - min z over the protocol administrations (human SDs).
    pub range_z: Option<f64>,
    /// Administrations of this cell (protocol and sampling) flagged constant-answer.
    pub constant_administrations: i64,
    /// |z(first) - z(second)| per configured rerun pair, in pair order.
    pub reruns: Vec<Option<f64>>,
    /// Mean z over `shift_to` minus mean z over `shift_from` (the protocol shift).
    pub shift_z: Option<f64>,
}

impl Cell {
    pub fn kept(&self) -> bool {
        self.drop_reasons.is_empty()
    }
}

/// Model metadata per (source, model); an inconsistency is an input error.
pub fn model_meta(
    inputs: &Inputs,
    scores_name: &str,
) -> Result<BTreeMap<(String, String), ModelMeta>, AggregateError> {
    let mut out: BTreeMap<(String, String), ModelMeta> = BTreeMap::new();
    for r in &inputs.scores {
        let m = ModelMeta {
            label: r.label.clone(),
            study: r.study.clone(),
            arm: r.arm.clone(),
            cohort: r.cohort.clone(),
        };
        match out.get(&(r.source.clone(), r.model.clone())) {
            Some(prev) if *prev != m => {
                return Err(AggregateError::Input {
                    path: scores_name.into(),
                    message: format!(
                        "model {:?} of source {:?} has inconsistent label/study/arm/cohort: {:?} vs {:?}",
                        r.model, r.source, prev, m
                    ),
                })
            }
            Some(_) => {}
            None => {
                out.insert((r.source.clone(), r.model.clone()), m);
            }
        }
    }
    Ok(out)
}

fn admin_name(r: &ScoreRow) -> String {
    if r.sample == 0 {
        r.condition.clone()
    } else {
        format!("{}[{}]", r.condition, r.sample)
    }
}

/// Every cell of every source: models of the source x scales seen in the source.
pub fn cells(inputs: &Inputs, params: &Params) -> Result<Vec<Cell>, AggregateError> {
    let meta = model_meta(inputs, "scale_scores.parquet")?;
    // Rows are sorted by (source, model, test, dimension, ...): group them by cell.
    let mut by_cell: BTreeMap<(&str, &str, &str, &str), Vec<&ScoreRow>> = BTreeMap::new();
    let mut scales: BTreeMap<&str, BTreeSet<(&str, &str)>> = BTreeMap::new();
    for r in &inputs.scores {
        by_cell
            .entry((
                r.source.as_str(),
                r.model.as_str(),
                r.test.as_str(),
                r.dimension.as_str(),
            ))
            .or_default()
            .push(r);
        scales
            .entry(&r.source)
            .or_default()
            .insert((r.test.as_str(), r.dimension.as_str()));
    }
    let protocol: BTreeSet<&str> = params
        .protocol_conditions
        .iter()
        .map(String::as_str)
        .collect();
    let sampling: BTreeSet<&str> = params
        .sampling_conditions
        .iter()
        .map(String::as_str)
        .collect();
    let mut out = Vec::new();
    for ((source, model), m) in &meta {
        let tests_of_model: BTreeSet<&str> = by_cell
            .keys()
            .filter(|k| k.0 == source && k.1 == model)
            .map(|k| k.2)
            .collect();
        for (test, dimension) in &scales[source.as_str()] {
            let rows: &[&ScoreRow] = by_cell
                .get(&(source.as_str(), model.as_str(), *test, *dimension))
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            let mut cell = compute_cell(
                source, model, m, test, dimension, rows, params, &protocol, &sampling,
            );
            if rows.is_empty() && !tests_of_model.contains(test) {
                cell.drop_reasons = vec!["test not administered (no scale scores)".to_string()];
            }
            out.push(cell);
        }
    }
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
fn compute_cell(
    source: &str,
    model: &str,
    meta: &ModelMeta,
    test: &str,
    dimension: &str,
    rows: &[&ScoreRow],
    params: &Params,
    protocol: &BTreeSet<&str>,
    sampling: &BTreeSet<&str>,
) -> Cell {
    let mut reasons = Vec::new();
    // Separate arms (command-line tools) expose no temperature: a cell of such an arm without
    // any sampling administration is kept without a sampling SD.
    let separate = params.separate_arms.contains(&meta.arm);
    let no_sampling = !rows.iter().any(|r| sampling.contains(r.condition.as_str()));
    let sampling_optional = separate && no_sampling;
    let missing: Vec<&str> = params
        .protocol_conditions
        .iter()
        .chain(if sampling_optional {
            &[][..]
        } else {
            &params.sampling_conditions[..]
        })
        .filter(|c| !rows.iter().any(|r| &r.condition == *c))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        reasons.push(format!("missing administrations: {}", missing.join(", ")));
    }
    let used: Vec<&ScoreRow> = rows
        .iter()
        .copied()
        .filter(|r| {
            protocol.contains(r.condition.as_str()) || sampling.contains(r.condition.as_str())
        })
        .collect();
    let incomplete: Vec<String> = used
        .iter()
        .filter(|r| !r.complete || r.score.is_none())
        .map(|r| admin_name(r))
        .collect();
    if !incomplete.is_empty() {
        reasons.push(format!(
            "incomplete administrations: {}",
            incomplete.join(", ")
        ));
    }
    let no_z: Vec<String> = used
        .iter()
        .filter(|r| r.complete && r.score.is_some() && r.z.is_none())
        .map(|r| admin_name(r))
        .collect();
    if !no_z.is_empty() {
        reasons.push(format!(
            "no score in human SDs (z is null): {}",
            no_z.join(", ")
        ));
    }
    let pz: Vec<f64> = used
        .iter()
        .filter(|r| protocol.contains(r.condition.as_str()))
        .filter_map(|r| r.z)
        .collect();
    let sz: Vec<f64> = used
        .iter()
        .filter(|r| sampling.contains(r.condition.as_str()))
        .filter_map(|r| r.z)
        .collect();
    if reasons.is_empty() && !sampling_optional && sz.len() < 2 {
        reasons.push("fewer than two sampling administrations".to_string());
    }
    if reasons.is_empty() && pz.len() < 2 {
        reasons.push("fewer than two protocol administrations".to_string());
    }
    let constant_administrations = used.iter().filter(|r| r.constant_answers).count() as i64;
    let mut cell = Cell {
        source: source.to_string(),
        model: model.to_string(),
        meta: meta.clone(),
        test: test.to_string(),
        dimension: dimension.to_string(),
        drop_reasons: reasons,
        protocol_n: pz.len() as i64,
        sampling_n: sz.len() as i64,
        protocol_mean_z: None,
        protocol_sd: None,
        sampling_sd: None,
        ratio: None,
        ratio_rule: None,
        protocol_exceeds: None,
        min_z: None,
        max_z: None,
        range_z: None,
        constant_administrations,
        reruns: vec![None; params.rerun_pairs.len()],
        shift_z: None,
    };
    if !cell.kept() {
        return cell;
    }
    let psd = stats::sample_sd(&pz).expect("two or more values");
    let (lo, hi) = (stats::min(&pz).unwrap(), stats::max(&pz).unwrap());
    cell.protocol_mean_z = stats::mean(&pz);
    cell.protocol_sd = Some(psd);
    if let Some(ssd) = stats::sample_sd(&sz) {
        let (ratio, rule) = stats::ratio(psd, ssd);
        cell.sampling_sd = Some(ssd);
        cell.ratio = ratio;
        cell.ratio_rule = Some(rule);
        cell.protocol_exceeds = Some(psd > ssd);
    }
    let side = |set: &[String]| -> Vec<f64> {
        used.iter()
            .filter(|r| set.contains(&r.condition))
            .filter_map(|r| r.z)
            .collect()
    };
    if let (Some(to), Some(from)) = (
        stats::mean(&side(&params.shift_to)),
        stats::mean(&side(&params.shift_from)),
    ) {
        cell.shift_z = Some(to - from);
    }
    cell.min_z = Some(lo);
    cell.max_z = Some(hi);
    cell.range_z = Some(hi - lo);
    for (i, [a, b]) in params.rerun_pairs.iter().enumerate() {
        // The lowest sample of each condition is its administration (protocol conditions have one).
        let za = used.iter().find(|r| &r.condition == a).and_then(|r| r.z);
        let zb = used.iter().find(|r| &r.condition == b).and_then(|r| r.z);
        if let (Some(x), Some(y)) = (za, zb) {
            cell.reruns[i] = Some((x - y).abs());
        }
    }
    cell
}

/// A group of models within a source, e.g. `arm=api cohort=pilot`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct GroupKey {
    pub source: String,
    /// Values of the first k grouping columns.
    pub values: Vec<String>,
}

impl GroupKey {
    pub fn name(&self, columns: &[String]) -> String {
        columns
            .iter()
            .zip(&self.values)
            .map(|(c, v)| format!("{c}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn group_value(meta: &ModelMeta, column: &str) -> Option<String> {
    match column {
        "arm" => Some(meta.arm.clone()),
        "cohort" => meta.cohort.clone(),
        _ => None,
    }
}

/// The groups a cell belongs to: one per prefix of the grouping columns whose values are set.
pub fn groups_of(source: &str, meta: &ModelMeta, columns: &[String]) -> Vec<GroupKey> {
    let mut out = Vec::new();
    let mut values = Vec::new();
    for c in columns {
        match group_value(meta, c) {
            Some(v) => {
                values.push(v);
                out.push(GroupKey {
                    source: source.to_string(),
                    values: values.clone(),
                });
            }
            None => break,
        }
    }
    out
}

fn label_of<'a>(cells: &'a [&Cell]) -> &'a str {
    cells.first().map(|c| c.meta.label.as_str()).unwrap_or("")
}

fn share(k: i64, n: i64) -> Option<f64> {
    (n > 0).then(|| k as f64 / n as f64)
}

/// Kept cells grouped by every group they belong to, cells in key order within a group.
pub fn grouped<'a>(cells: &'a [Cell], columns: &[String]) -> BTreeMap<GroupKey, Vec<&'a Cell>> {
    let mut g: BTreeMap<GroupKey, Vec<&Cell>> = BTreeMap::new();
    for c in cells.iter().filter(|c| c.kept()) {
        for k in groups_of(&c.source, &c.meta, columns) {
            g.entry(k).or_default().push(c);
        }
    }
    g
}

fn ratios(cells: &[&Cell]) -> Vec<f64> {
    cells.iter().filter_map(|c| c.ratio).collect()
}

fn ranges(cells: &[&Cell]) -> Vec<f64> {
    cells.iter().filter_map(|c| c.range_z).collect()
}

fn exceeding(cells: &[&Cell]) -> i64 {
    cells
        .iter()
        .filter(|c| c.protocol_exceeds == Some(true))
        .count() as i64
}

/// Cells with both SDs (the denominator of the share of protocol SD > sampling SD).
fn compared(cells: &[&Cell]) -> i64 {
    cells
        .iter()
        .filter(|c| c.protocol_exceeds.is_some())
        .count() as i64
}

fn distinct_models(cells: &[&Cell]) -> i64 {
    cells
        .iter()
        .map(|c| &c.model)
        .collect::<BTreeSet<_>>()
        .len() as i64
}

/// Every output table of the stage, in file-name order.
pub fn tables(inputs: &Inputs, params: &Params) -> Result<Vec<Table>, AggregateError> {
    let cells = cells(inputs, params)?;
    let groups = grouped(&cells, &params.groups);
    let mut out = vec![
        cells_table(&cells, params),
        dropped_table(&cells),
        protocol_vs_sampling_table(&groups, &params.groups),
        range_table(&groups, &params.groups),
        by_test_table(&groups, &params.groups),
        reruns_table(&groups, params),
        separate_arms_table(&cells, params),
        requests_table(inputs),
        constant_runs_table(inputs),
        verdict_table(&cells, inputs, params),
    ];
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

fn cells_table(cells: &[Cell], params: &Params) -> Table {
    let mut t = Table::new("cells")
        .str("source", cells.iter().map(|c| Some(c.source.clone())))
        .str("label", cells.iter().map(|c| Some(c.meta.label.clone())))
        .str("study", cells.iter().map(|c| Some(c.meta.study.clone())))
        .str("model", cells.iter().map(|c| Some(c.model.clone())))
        .str("arm", cells.iter().map(|c| Some(c.meta.arm.clone())))
        .str("cohort", cells.iter().map(|c| c.meta.cohort.clone()))
        .str("test", cells.iter().map(|c| Some(c.test.clone())))
        .str("dimension", cells.iter().map(|c| Some(c.dimension.clone())))
        .bool("kept", cells.iter().map(|c| Some(c.kept())))
        .str(
            "drop_reason",
            cells
                .iter()
                .map(|c| (!c.kept()).then(|| c.drop_reasons.join("; "))),
        )
        .int("protocol_n", cells.iter().map(|c| Some(c.protocol_n)))
        .int("sampling_n", cells.iter().map(|c| Some(c.sampling_n)))
        .float("protocol_mean_z", cells.iter().map(|c| c.protocol_mean_z))
        .float("protocol_sd", cells.iter().map(|c| c.protocol_sd))
        .float("sampling_sd", cells.iter().map(|c| c.sampling_sd))
        .float("ratio", cells.iter().map(|c| c.ratio))
        .str(
            "ratio_rule",
            cells.iter().map(|c| c.ratio_rule.map(|r| r.as_str())),
        )
        .bool(
            "protocol_gt_sampling",
            cells.iter().map(|c| c.protocol_exceeds),
        )
        .float("min_z", cells.iter().map(|c| c.min_z))
        .float("max_z", cells.iter().map(|c| c.max_z))
        .float("range_z", cells.iter().map(|c| c.range_z));
    for (i, [a, b]) in params.rerun_pairs.iter().enumerate() {
        t = t.float(
            &format!("rerun_{a}_{b}_z"),
            cells.iter().map(|c| c.reruns[i]),
        );
    }
    t.float("shift_z", cells.iter().map(|c| c.shift_z)).int(
        "constant_administrations",
        cells.iter().map(|c| Some(c.constant_administrations)),
    )
}

fn dropped_table(cells: &[Cell]) -> Table {
    let d: Vec<&Cell> = cells.iter().filter(|c| !c.kept()).collect();
    Table::new("dropped_cells")
        .str("source", d.iter().map(|c| Some(c.source.clone())))
        .str("label", d.iter().map(|c| Some(c.meta.label.clone())))
        .str("model", d.iter().map(|c| Some(c.model.clone())))
        .str("arm", d.iter().map(|c| Some(c.meta.arm.clone())))
        .str("cohort", d.iter().map(|c| c.meta.cohort.clone()))
        .str("test", d.iter().map(|c| Some(c.test.clone())))
        .str("dimension", d.iter().map(|c| Some(c.dimension.clone())))
        .str("reason", d.iter().map(|c| Some(c.drop_reasons.join("; "))))
}

fn protocol_vs_sampling_table(
    groups: &BTreeMap<GroupKey, Vec<&Cell>>,
    columns: &[String],
) -> Table {
    let rows: Vec<(&GroupKey, &Vec<&Cell>)> = groups.iter().collect();
    Table::new("protocol_vs_sampling")
        .str("source", rows.iter().map(|(k, _)| Some(k.source.clone())))
        .str("label", rows.iter().map(|(_, c)| Some(label_of(c))))
        .str("group", rows.iter().map(|(k, _)| Some(k.name(columns))))
        .int("models", rows.iter().map(|(_, c)| Some(distinct_models(c))))
        .int("cells", rows.iter().map(|(_, c)| Some(c.len() as i64)))
        .int(
            "compared_cells",
            rows.iter().map(|(_, c)| Some(compared(c))),
        )
        .int(
            "protocol_gt_sampling",
            rows.iter().map(|(_, c)| Some(exceeding(c))),
        )
        .float(
            "share",
            rows.iter().map(|(_, c)| share(exceeding(c), compared(c))),
        )
        .int(
            "ratio_cells",
            rows.iter().map(|(_, c)| Some(ratios(c).len() as i64)),
        )
        .float(
            "median_ratio",
            rows.iter().map(|(_, c)| stats::median(&ratios(c))),
        )
}

fn count_ge(xs: &[f64], t: f64) -> i64 {
    xs.iter().filter(|x| **x >= t).count() as i64
}

fn range_table(groups: &BTreeMap<GroupKey, Vec<&Cell>>, columns: &[String]) -> Table {
    let rows: Vec<(&GroupKey, Vec<f64>, &str)> = groups
        .iter()
        .map(|(k, c)| (k, ranges(c), label_of(c)))
        .collect();
    Table::new("range")
        .str(
            "source",
            rows.iter().map(|(k, _, _)| Some(k.source.clone())),
        )
        .str("label", rows.iter().map(|(_, _, l)| Some(*l)))
        .str("group", rows.iter().map(|(k, _, _)| Some(k.name(columns))))
        .int("cells", rows.iter().map(|(_, r, _)| Some(r.len() as i64)))
        .float(
            "median_range_z",
            rows.iter().map(|(_, r, _)| stats::median(r)),
        )
        .float("min_range_z", rows.iter().map(|(_, r, _)| stats::min(r)))
        .float("max_range_z", rows.iter().map(|(_, r, _)| stats::max(r)))
        .int(
            "cells_range_ge_1",
            rows.iter().map(|(_, r, _)| Some(count_ge(r, 1.0))),
        )
        .int(
            "cells_range_ge_2",
            rows.iter().map(|(_, r, _)| Some(count_ge(r, 2.0))),
        )
}

fn by_test_table(groups: &BTreeMap<GroupKey, Vec<&Cell>>, columns: &[String]) -> Table {
    let mut rows: Vec<(&GroupKey, String, Vec<&Cell>)> = Vec::new();
    for (k, cells) in groups {
        let mut by: BTreeMap<&str, Vec<&Cell>> = BTreeMap::new();
        for c in cells {
            by.entry(c.test.as_str()).or_default().push(c);
        }
        for (t, cs) in by {
            rows.push((k, t.to_string(), cs));
        }
    }
    Table::new("by_test")
        .str(
            "source",
            rows.iter().map(|(k, _, _)| Some(k.source.clone())),
        )
        .str("label", rows.iter().map(|(_, _, c)| Some(label_of(c))))
        .str("group", rows.iter().map(|(k, _, _)| Some(k.name(columns))))
        .str("test", rows.iter().map(|(_, t, _)| Some(t.clone())))
        .int("cells", rows.iter().map(|(_, _, c)| Some(c.len() as i64)))
        .int(
            "compared_cells",
            rows.iter().map(|(_, _, c)| Some(compared(c))),
        )
        .int(
            "protocol_gt_sampling",
            rows.iter().map(|(_, _, c)| Some(exceeding(c))),
        )
        .float(
            "share",
            rows.iter()
                .map(|(_, _, c)| share(exceeding(c), compared(c))),
        )
        .float(
            "median_ratio",
            rows.iter().map(|(_, _, c)| stats::median(&ratios(c))),
        )
        .float(
            "median_range_z",
            rows.iter().map(|(_, _, c)| stats::median(&ranges(c))),
        )
}

fn reruns_table(groups: &BTreeMap<GroupKey, Vec<&Cell>>, params: &Params) -> Table {
    let mut rows: Vec<(&GroupKey, &str, String, Vec<f64>)> = Vec::new();
    for (k, cells) in groups {
        for (i, [a, b]) in params.rerun_pairs.iter().enumerate() {
            let d: Vec<f64> = cells.iter().filter_map(|c| c.reruns[i]).collect();
            rows.push((k, label_of(cells), format!("{a} vs {b}"), d));
        }
    }
    Table::new("reruns")
        .str("source", rows.iter().map(|r| Some(r.0.source.clone())))
        .str("label", rows.iter().map(|r| Some(r.1)))
        .str("group", rows.iter().map(|r| Some(r.0.name(&params.groups))))
        .str("pair", rows.iter().map(|r| Some(r.2.clone())))
        .int("cells", rows.iter().map(|r| Some(r.3.len() as i64)))
        .int(
            "cells_identical",
            rows.iter()
                .map(|r| Some(r.3.iter().filter(|x| **x == 0.0).count() as i64)),
        )
        .float("median_diff_z", rows.iter().map(|r| stats::median(&r.3)))
        .float("max_diff_z", rows.iter().map(|r| stats::max(&r.3)))
}

/// The headline arm's median shift per (source, test, dimension).
fn reference_shifts<'a>(
    cells: &'a [Cell],
    params: &Params,
) -> BTreeMap<(&'a str, &'a str, &'a str), f64> {
    let mut by: BTreeMap<(&str, &str, &str), Vec<f64>> = BTreeMap::new();
    for c in cells
        .iter()
        .filter(|c| c.kept() && c.meta.arm == params.headline_arm)
    {
        if let Some(s) = c.shift_z {
            by.entry((c.source.as_str(), c.test.as_str(), c.dimension.as_str()))
                .or_default()
                .push(s);
        }
    }
    by.into_iter()
        .filter_map(|(k, v)| stats::median(&v).map(|m| (k, m)))
        .collect()
}

/// Whether a cell's shift has the same (non-zero) sign as the headline arm's median shift of
/// the scale; `None` when either is missing or zero.
fn same_direction(c: &Cell, reference: &BTreeMap<(&str, &str, &str), f64>) -> Option<bool> {
    let r = *reference.get(&(c.source.as_str(), c.test.as_str(), c.dimension.as_str()))?;
    let s = c.shift_z?;
    if r == 0.0 || s == 0.0 {
        return None;
    }
    Some((r > 0.0) == (s > 0.0))
}

fn separate_arms_table(cells: &[Cell], params: &Params) -> Table {
    let reference = reference_shifts(cells, params);
    let mut by: BTreeMap<(&str, &str), Vec<&Cell>> = BTreeMap::new();
    for c in cells.iter().filter(|c| c.kept()) {
        if params.separate_arms.contains(&c.meta.arm) {
            by.entry((c.source.as_str(), c.meta.arm.as_str()))
                .or_default()
                .push(c);
        }
    }
    let rows: Vec<_> = by.into_iter().collect();
    let dirs = |c: &[&Cell]| -> (i64, i64) {
        let d: Vec<bool> = c
            .iter()
            .filter_map(|x| same_direction(x, &reference))
            .collect();
        (d.len() as i64, d.iter().filter(|x| **x).count() as i64)
    };
    Table::new("separate_arms")
        .str("source", rows.iter().map(|((s, _), _)| Some(*s)))
        .str("label", rows.iter().map(|(_, c)| Some(label_of(c))))
        .str("arm", rows.iter().map(|((_, a), _)| Some(*a)))
        .int("models", rows.iter().map(|(_, c)| Some(distinct_models(c))))
        .int("cells", rows.iter().map(|(_, c)| Some(c.len() as i64)))
        .int("direction_cells", rows.iter().map(|(_, c)| Some(dirs(c).0)))
        .int("same_direction", rows.iter().map(|(_, c)| Some(dirs(c).1)))
        .float(
            "share",
            rows.iter().map(|(_, c)| share(dirs(c).1, dirs(c).0)),
        )
        .float(
            "median_range_z",
            rows.iter().map(|(_, c)| stats::median(&ranges(c))),
        )
        .int(
            "compared_cells",
            rows.iter().map(|(_, c)| Some(compared(c))),
        )
        .int(
            "protocol_gt_sampling",
            rows.iter().map(|(_, c)| Some(exceeding(c))),
        )
}

/// Per (source, model, condition): requests from the parsed answers, administrations and
/// constant-answer administrations from the scale scores.
fn requests_table(inputs: &Inputs) -> Table {
    #[derive(Default, Clone)]
    struct Row {
        label: String,
        arm: String,
        cohort: Option<String>,
        administrations: i64,
        constant: i64,
        requests: Option<i64>,
        failed: Option<i64>,
        unreadable: Option<i64>,
        items: Option<i64>,
        unreadable_items: Option<i64>,
    }
    let mut m: BTreeMap<(String, String, String), Row> = BTreeMap::new();
    for a in &inputs.administrations {
        let r = m
            .entry((a.source.clone(), a.model.clone(), a.condition.clone()))
            .or_insert_with(|| Row {
                label: a.label.clone(),
                arm: a.arm.clone(),
                cohort: a.cohort.clone(),
                ..Default::default()
            });
        r.administrations += 1;
        r.constant += a.constant as i64;
    }
    for q in &inputs.requests {
        let r = m
            .entry((q.source.clone(), q.model.clone(), q.condition.clone()))
            .or_insert_with(|| Row {
                label: q.label.clone(),
                arm: q.arm.clone(),
                cohort: q.cohort.clone(),
                ..Default::default()
            });
        r.requests = Some(q.requests);
        r.failed = Some(q.failed_requests);
        r.unreadable = Some(q.unreadable_replies);
        r.items = Some(q.items);
        r.unreadable_items = Some(q.unreadable_items);
    }
    let rows: Vec<_> = m.into_iter().collect();
    Table::new("requests")
        .str("source", rows.iter().map(|((s, _, _), _)| Some(s.clone())))
        .str("label", rows.iter().map(|(_, r)| Some(r.label.clone())))
        .str("model", rows.iter().map(|((_, m, _), _)| Some(m.clone())))
        .str("arm", rows.iter().map(|(_, r)| Some(r.arm.clone())))
        .str("cohort", rows.iter().map(|(_, r)| r.cohort.clone()))
        .str(
            "condition",
            rows.iter().map(|((_, _, c), _)| Some(c.clone())),
        )
        .int("requests", rows.iter().map(|(_, r)| r.requests))
        .int("failed_requests", rows.iter().map(|(_, r)| r.failed))
        .int("unreadable_replies", rows.iter().map(|(_, r)| r.unreadable))
        .float(
            "unreadable_share",
            rows.iter().map(|(_, r)| match (r.unreadable, r.requests) {
                (Some(u), Some(n)) => share(u, n),
                _ => None,
            }),
        )
        .int("items", rows.iter().map(|(_, r)| r.items))
        .int(
            "unreadable_items",
            rows.iter().map(|(_, r)| r.unreadable_items),
        )
        .int(
            "administrations",
            rows.iter().map(|(_, r)| Some(r.administrations)),
        )
        .int(
            "constant_administrations",
            rows.iter().map(|(_, r)| Some(r.constant)),
        )
}

fn constant_runs_table(inputs: &Inputs) -> Table {
    let c: Vec<_> = inputs
        .administrations
        .iter()
        .filter(|a| a.constant)
        .collect();
    Table::new("constant_runs")
        .str("source", c.iter().map(|a| Some(a.source.clone())))
        .str("label", c.iter().map(|a| Some(a.label.clone())))
        .str("model", c.iter().map(|a| Some(a.model.clone())))
        .str("arm", c.iter().map(|a| Some(a.arm.clone())))
        .str("cohort", c.iter().map(|a| a.cohort.clone()))
        .str("condition", c.iter().map(|a| Some(a.condition.clone())))
        .int("sample", c.iter().map(|a| Some(a.sample)))
        .str("test", c.iter().map(|a| Some(a.test.clone())))
}

fn verdict_table(cells: &[Cell], inputs: &Inputs, params: &Params) -> Table {
    struct V {
        source: String,
        label: String,
        criterion: String,
        value: Option<f64>,
        threshold: Option<f64>,
        passed: Option<bool>,
        statement: String,
    }
    let arm = &params.headline_arm;
    let mut sources: BTreeMap<&str, &str> = BTreeMap::new();
    for c in cells {
        sources.entry(&c.source).or_insert(&c.meta.label);
    }
    let mut rows = Vec::new();
    for (source, label) in sources {
        let hc: Vec<&Cell> = cells
            .iter()
            .filter(|c| c.source == source && c.kept() && &c.meta.arm == arm)
            .collect();
        let n = compared(&hc);
        let sh = share(exceeding(&hc), n);
        let mr = stats::median(&ratios(&hc));
        let (req, unread) = inputs
            .requests
            .iter()
            .filter(|q| q.source == source && &q.arm == arm)
            .fold((0i64, 0i64), |(a, b), q| {
                (a + q.requests, b + q.unreadable_replies)
            });
        let (adm, cons) = inputs
            .administrations
            .iter()
            .filter(|a| a.source == source && &a.arm == arm)
            .fold((0i64, 0i64), |(a, b), x| (a + 1, b + x.constant as i64));
        let ushare = share(unread, req);
        let cshare = share(cons, adm);
        let pass_share = sh.map(|s| s >= params.verdict_share);
        let pass_ratio = mr.map(|r| r >= params.verdict_ratio);
        let few_u = ushare.map(|s| s < params.verdict_few);
        let few_c = cshare.map(|s| s < params.verdict_few);
        let mk = |criterion: &str, value, threshold, passed, statement: String| V {
            source: source.to_string(),
            label: label.to_string(),
            criterion: criterion.to_string(),
            value,
            threshold,
            passed,
            statement,
        };
        rows.push(mk(
            "share_protocol_gt_sampling",
            sh,
            Some(params.verdict_share),
            pass_share,
            format!("share of {n} kept arm={arm} cells with protocol SD > sampling SD is at least the threshold"),
        ));
        rows.push(mk(
            "median_ratio",
            mr,
            Some(params.verdict_ratio),
            pass_ratio,
            format!("median ratio protocol SD / sampling SD over arm={arm} cells is at least the threshold"),
        ));
        rows.push(mk(
            "unreadable_replies_few",
            ushare,
            Some(params.verdict_few),
            few_u,
            format!("{unread} of {req} arm={arm} requests gave an unreadable reply: below the threshold counts as few"),
        ));
        rows.push(mk(
            "constant_runs_few",
            cshare,
            Some(params.verdict_few),
            few_c,
            format!("{cons} of {adm} arm={arm} administrations gave constant answers: below the threshold counts as few"),
        ));
        let overall = match (pass_share, pass_ratio) {
            (Some(true), Some(true)) => (
                Some(true),
                "protocol spread exceeds sampling noise: use the protocol spread as the error bar"
                    .to_string(),
            ),
            (None, _) | (_, None) => (None, format!("no kept arm={arm} cells: no verdict")),
            _ => (
                Some(false),
                "the protocol spread is not shown to exceed sampling noise by the thresholds"
                    .to_string(),
            ),
        };
        rows.push(mk("verdict", None, None, overall.0, overall.1));
    }
    Table::new("verdict")
        .str("source", rows.iter().map(|r| Some(r.source.clone())))
        .str("label", rows.iter().map(|r| Some(r.label.clone())))
        .str("criterion", rows.iter().map(|r| Some(r.criterion.clone())))
        .float("value", rows.iter().map(|r| r.value))
        .float("threshold", rows.iter().map(|r| r.threshold))
        .bool("passed", rows.iter().map(|r| r.passed))
        .str("statement", rows.iter().map(|r| Some(r.statement.clone())))
}
