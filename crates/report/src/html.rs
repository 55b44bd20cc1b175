//! The self-contained HTML report: inline CSS, inline SVG figures drawn here, no scripts, no
//! fonts or images from anywhere. The figures are drawn from the rendered `cells` table (the
//! same strings as the canonical CSV), so they show exactly the published figures.

use crate::render::{figure_columns, positions, TextTable};
use crate::svg::{
    c, esc, label_margin, legend_dot, row_figure_width, text_width, tick_label, tick_step, Plot,
    FIGURE_SOURCES,
};
use crate::{Rendered, ReportError};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

const PALETTE: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf",
];

/// A kept cell as the figures need it: names as indices into [`PointsBuilder::names`].
#[derive(Debug, Clone, Copy)]
struct Point {
    model: u32,
    arm: u32,
    test: u32,
    protocol_sd: f64,
    /// None for a cell without sampling administrations (a separate arm).
    sampling_sd: Option<f64>,
    range_z: f64,
}

/// The kept cells of the `cells` table per (source, label), collected row by row from the
/// rendered strings (the same strings as the canonical CSV), so the figures show exactly the
/// published figures.
#[derive(Debug)]
pub(crate) struct PointsBuilder {
    /// The columns [`crate::render::MODEL_TEST`].
    key: [usize; 5],
    /// kept, protocol_sd, sampling_sd, range_z.
    values: [usize; 4],
    names: Vec<String>,
    ids: std::collections::HashMap<String, u32>,
    groups: BTreeMap<(String, String), Vec<Point>>,
}

impl PointsBuilder {
    /// A builder for rows of a table with columns `header`; an error names a missing column.
    pub(crate) fn new(header: &[String]) -> Result<Self, String> {
        let (key, values) = figure_columns(
            "cells",
            header,
            ["kept", "protocol_sd", "sampling_sd", "range_z"],
        )?;
        Ok(PointsBuilder {
            key,
            values,
            names: Vec::new(),
            ids: Default::default(),
            groups: BTreeMap::new(),
        })
    }

    fn id(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.ids.get(s) {
            return i;
        }
        let i = u32::try_from(self.names.len()).unwrap_or(u32::MAX);
        self.names.push(s.to_string());
        self.ids.insert(s.to_string(), i);
        i
    }

    /// Add one row (its cells as rendered); a row whose `kept` is not `true` is skipped.
    pub(crate) fn push(&mut self, r: &[String]) -> Result<(), String> {
        let [src, lab, model, arm, test] = self.key;
        let [kept, psd, ssd, range] = self.values;
        if r[kept] != "true" {
            return Ok(());
        }
        let num = |i: usize| {
            r[i].parse::<f64>()
                .map_err(|_| format!("cells table: `{}` is not a number", r[i]))
        };
        let p = Point {
            model: self.id(&r[model]),
            arm: self.id(&r[arm]),
            test: self.id(&r[test]),
            protocol_sd: num(psd)?,
            sampling_sd: if r[ssd].is_empty() {
                None
            } else {
                Some(num(ssd)?)
            },
            range_z: num(range)?,
        };
        match self.groups.get_mut(&(r[src].clone(), r[lab].clone())) {
            Some(v) => v.push(p),
            None => {
                self.groups
                    .insert((r[src].clone(), r[lab].clone()), vec![p]);
            }
        }
        Ok(())
    }

    fn name(&self, id: u32) -> &str {
        &self.names[id as usize]
    }
}

fn color_map(keys: impl IntoIterator<Item = String>) -> BTreeMap<String, &'static str> {
    keys.into_iter()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .enumerate()
        .map(|(i, k)| (k, PALETTE[i % PALETTE.len()]))
        .collect()
}

/// A scatter of more kept cells than this is drawn as squares of a 40 x 40 grid shaded by
/// the number of cells in each, so its size does not grow with the study.
pub(crate) const SCATTER_POINTS: usize = 1000;
/// Squares per axis of a binned scatter.
const SCATTER_BINS: usize = 40;
/// A range figure of more models than this has one row per test, binned, instead of one row
/// per model.
pub(crate) const STRIP_MODELS: usize = 60;
/// Bins along the axis of a binned range figure.
const STRIP_BINS: usize = 100;
/// Delimiter-sweep figures (model x benchmark) drawn; the table holds the rest.
pub(crate) const SWEEP_FIGURES: usize = 24;

/// The opacity of a bin holding `n` of at most `max` cells.
fn shade(n: u32, max: u32) -> f64 {
    0.15 + 0.85 * f64::from(n) / f64::from(max.max(1))
}

/// Scatter of protocol SD (y) against sampling SD (x) per kept cell, with the line y = x;
/// binned above [`SCATTER_POINTS`] cells.
fn scatter(names: &PointsBuilder, all: &[Point], source: &str, label: &str) -> String {
    let pts: Vec<(&Point, f64)> = all
        .iter()
        .filter_map(|p| p.sampling_sd.map(|s| (p, s)))
        .collect();
    let (ml, mr, mt, mb) = (60.0f64, 20.0, 40.0, 50.0);
    let (pw, ph) = (440.0, 380.0);
    let binned = pts.len() > SCATTER_POINTS;
    let above = pts.iter().filter(|(p, s)| p.protocol_sd > *s).count();
    let title = format!(
        "{source} ({label}): {} cells, {above} above y = x",
        pts.len()
    );
    let colors = color_map(pts.iter().map(|(p, _)| names.name(p.arm).to_string()));
    let legend: Vec<String> = if binned {
        vec![format!(
            "binned: darker squares hold more cells (arms {})",
            colors.keys().cloned().collect::<Vec<_>>().join(", ")
        )]
    } else {
        colors.keys().map(|a| format!("arm {a}")).collect()
    };
    let w = (ml + pw + mr)
        .max(ml + text_width(&title, "t") + 10.0)
        .max(
            legend
                .iter()
                .map(|l| ml + 20.0 + text_width(l, "a") + 10.0)
                .fold(0.0, f64::max),
        )
        .ceil();
    let h = mt + ph + mb;
    let max = pts
        .iter()
        .flat_map(|(p, s)| [p.protocol_sd, *s])
        .fold(0.0f64, f64::max);
    let step = tick_step(if max > 0.0 { max } else { 1.0 }, 5.0);
    let top = ((if max > 0.0 { max } else { 1.0 }) / step).ceil() * step;
    let plot = Plot { ml, mt, pw, ph };
    let aria = format!("protocol SD against sampling SD, {}", esc(source));
    let mut s = crate::svg::open(w, h, &aria);
    let _ = write!(
        s,
        r#"<text x="{}" y="20" class="t">{}</text>"#,
        c(ml),
        esc(&title)
    );
    scatter_axes(&mut s, &plot, top, step);
    if binned {
        scatter_bins(&mut s, &plot, &pts, top);
    } else {
        let (x, y) = scatter_xy(&plot, top);
        for (p, ssd) in &pts {
            let _ = write!(
                s,
                r#"<circle cx="{}" cy="{}" r="3.5" fill="{}" fill-opacity="0.65"><title>{} {}: protocol SD {:.3}, sampling SD {:.3}</title></circle>"#,
                c(x(*ssd)),
                c(y(p.protocol_sd)),
                colors[names.name(p.arm)],
                esc(names.name(p.model)),
                esc(names.name(p.test)),
                p.protocol_sd,
                ssd
            );
        }
    }
    for (i, (text, col)) in legend
        .iter()
        .zip(colors.values().copied().chain(std::iter::repeat("#1f77b4")))
        .enumerate()
    {
        let ly = mt + 14.0 + 16.0 * i as f64;
        let _ = write!(
            s,
            r##"<circle cx="{}" cy="{}" r="4" fill="{col}"/><text x="{}" y="{}" class="a">{}</text>"##,
            c(ml + 12.0),
            c(ly - 4.0),
            c(ml + 20.0),
            c(ly),
            esc(text)
        );
    }
    let _ = write!(
        s,
        r#"<text x="{}" y="{}" class="a" text-anchor="middle">sampling SD (three temperature-1 samples), human SDs</text><text x="14" y="{}" class="a" text-anchor="middle" transform="rotate(-90 14 {})">protocol SD (ten temperature-0 setups), human SDs</text></svg>"#,
        c(ml + pw / 2.0),
        c(h - 10.0),
        c(mt + ph / 2.0),
        c(mt + ph / 2.0)
    );
    s
}

/// The scatter's coordinates: x and y of a value on axes from 0 to `top`.
fn scatter_xy(plot: &Plot, top: f64) -> (impl Fn(f64) -> f64, impl Fn(f64) -> f64) {
    let Plot { ml, mt, pw, ph } = *plot;
    (
        move |v: f64| ml + v / top * pw,
        move |v: f64| mt + ph - v / top * ph,
    )
}

/// The scatter's grid, ticks on both axes every `step` up to `top`, frame and line y = x.
fn scatter_axes(s: &mut String, plot: &Plot, top: f64, step: f64) {
    let Plot { ml, mt, pw, ph } = *plot;
    let (x, y) = scatter_xy(plot, top);
    let mut v = 0.0;
    while v <= top + step / 2.0 {
        let _ = write!(
            s,
            r##"<line x1="{x1}" y1="{yy}" x2="{x2}" y2="{yy}" stroke="#e5e5e5"/><line x1="{xx}" y1="{y1}" x2="{xx}" y2="{y2}" stroke="#e5e5e5"/><text x="{tx}" y="{ty}" class="a" text-anchor="end">{l}</text><text x="{xx}" y="{bx}" class="a" text-anchor="middle">{l}</text>"##,
            x1 = c(ml),
            x2 = c(ml + pw),
            yy = c(y(v)),
            xx = c(x(v)),
            y1 = c(mt),
            y2 = c(mt + ph),
            tx = c(ml - 6.0),
            ty = c(y(v) + 4.0),
            bx = c(mt + ph + 16.0),
            l = tick_label(v, step)
        );
        v += step;
    }
    let _ = write!(
        s,
        r##"<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#888"/>"##,
        c(ml),
        c(mt),
        c(pw),
        c(ph)
    );
    let _ = write!(
        s,
        r##"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#444" stroke-dasharray="5,4"/><text x="{}" y="{}" class="a" text-anchor="end">y = x</text>"##,
        c(x(0.0)),
        c(y(0.0)),
        c(x(top)),
        c(y(top)),
        c(x(top) - 10.0),
        c(y(top) + 22.0)
    );
}

/// The scatter's cells counted in the squares of a [`SCATTER_BINS`] grid, darker for more.
fn scatter_bins(s: &mut String, plot: &Plot, pts: &[(&Point, f64)], top: f64) {
    let Plot { ml, mt, pw, ph } = *plot;
    let g = SCATTER_BINS;
    let bin = |v: f64| ((v / top * g as f64) as usize).min(g - 1);
    let mut counts = vec![0u32; g * g];
    for (p, ssd) in pts {
        counts[bin(p.protocol_sd) * g + bin(*ssd)] += 1;
    }
    let most = counts.iter().copied().max().unwrap_or(1);
    let side = pw / g as f64;
    for (k, &n) in counts.iter().enumerate().filter(|(_, n)| **n > 0) {
        let (by, bx) = (k / g, k % g);
        let _ = write!(
            s,
            r##"<rect x="{}" y="{}" width="{}" height="{}" fill="#1f77b4" fill-opacity="{:.2}"><title>{n} cells</title></rect>"##,
            c(ml + bx as f64 * side),
            c(mt + ph - (by + 1) as f64 * ph / g as f64),
            c(side),
            c(ph / g as f64),
            shade(n, most)
        );
    }
}

/// Range (highest minus lowest setup, human SDs) of every kept cell, one row per model,
/// coloured by test, with reference lines at 1 and 2 human SDs; above [`STRIP_MODELS`]
/// models one row per test with the cells counted in bins.
fn range_strip(names: &PointsBuilder, pts: &[Point], source: &str, label: &str) -> String {
    let models: Vec<(&str, &str)> = pts
        .iter()
        .map(|p| (names.name(p.arm), names.name(p.model)))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let tests: Vec<String> = pts
        .iter()
        .map(|p| names.name(p.test).to_string())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let binned = models.len() > STRIP_MODELS;
    let colors = color_map(tests.iter().cloned());
    // Row labels: "model (arm)", or the test when binned.
    let row_labels: Vec<String> = if binned {
        tests.clone()
    } else {
        models.iter().map(|(a, m)| format!("{m} ({a})")).collect()
    };
    let title = if binned {
        format!(
            "{source} ({label}): range over the protocol setups per cell, human SDs; {} cells of {} models, counted per test",
            pts.len(),
            models.len()
        )
    } else {
        format!("{source} ({label}): range over the protocol setups per cell, human SDs")
    };
    let legend_rows = if binned { 0 } else { tests.len() };
    let ml = label_margin(row_labels.iter().map(String::as_str));
    let (mr, mt, mb, row) = (20.0, 40.0 + 16.0 * legend_rows as f64, 40.0, 20.0);
    let w = row_figure_width(720.0, ml, &title, &[], tests.iter().map(String::as_str)).ceil();
    let pw = w - ml - mr;
    let ph = row * row_labels.len().max(1) as f64;
    let h = mt + ph + mb;
    let max = pts.iter().map(|p| p.range_z).fold(2.0f64, f64::max);
    let step = tick_step(max, 6.0);
    let top = (max / step).ceil() * step;
    let x = |v: f64| ml + v / top * pw;
    let plot = Plot { ml, mt, pw, ph };
    let aria = format!("range per model and test, {}", esc(source));
    let mut s = crate::svg::open(w, h, &aria);
    let _ = write!(s, r#"<text x="10" y="20" class="t">{}</text>"#, esc(&title));
    if !binned {
        for (i, t) in tests.iter().enumerate() {
            legend_dot(&mut s, ml, 38.0 + 16.0 * i as f64, colors[t], t);
        }
    }
    let mut v = 0.0;
    while v <= top + step / 2.0 {
        let strong = (v - 1.0).abs() < 1e-9 || (v - 2.0).abs() < 1e-9;
        let stroke = if strong { "#999" } else { "#e5e5e5" };
        plot.grid_line(&mut s, x(v), stroke, &tick_label(v, step));
        v += step;
    }
    for (ri, row_label) in row_labels.iter().enumerate() {
        let cy = plot.row(&mut s, ri, row, row_label);
        if binned {
            let ranges = pts
                .iter()
                .filter(|p| names.name(p.test) == row_label)
                .map(|p| p.range_z);
            let bounds = (cy - row / 2.0 + 3.0, row - 6.0);
            strip_bins(
                &mut s,
                &plot,
                bounds,
                row_label,
                colors[row_label],
                ranges,
                top,
            );
            continue;
        }
        let (arm, model) = models[ri];
        for p in pts
            .iter()
            .filter(|p| names.name(p.model) == model && names.name(p.arm) == arm)
        {
            let test = names.name(p.test);
            let ti = tests.iter().position(|t| t == test).unwrap_or(0) as f64;
            let dy = (ti - (tests.len() as f64 - 1.0) / 2.0) * 3.0;
            let _ = write!(
                s,
                r#"<circle cx="{}" cy="{}" r="3.5" fill="{}" fill-opacity="0.7"><title>{} {}: range {:.3}</title></circle>"#,
                c(x(p.range_z)),
                c(cy + dy),
                colors[test],
                esc(model),
                esc(test),
                p.range_z
            );
        }
    }
    plot.close(
        &mut s,
        h,
        "highest minus lowest setup, human SDs (lines at 1 and 2)",
    );
    s
}

/// One row of a binned range figure: the `ranges` of test `test` counted in [`STRIP_BINS`]
/// bins from 0 to `top`, each a box (top and height `bounds`) of colour `fill`, darker for
/// more cells.
fn strip_bins(
    s: &mut String,
    plot: &Plot,
    bounds: (f64, f64),
    test: &str,
    fill: &str,
    ranges: impl Iterator<Item = f64>,
    top: f64,
) {
    let mut counts = vec![0u32; STRIP_BINS];
    for r in ranges {
        let b = ((r / top * STRIP_BINS as f64) as usize).min(STRIP_BINS - 1);
        counts[b] += 1;
    }
    let most = counts.iter().copied().max().unwrap_or(1);
    let bw = plot.pw / STRIP_BINS as f64;
    for (b, &n) in counts.iter().enumerate().filter(|(_, n)| **n > 0) {
        let _ = write!(
            s,
            r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{}" fill-opacity="{:.2}"><title>{}: {n} cells from {:.3} to {:.3}</title></rect>"#,
            c(plot.ml + b as f64 * bw),
            c(bounds.0),
            c(bw),
            c(bounds.1),
            fill,
            shade(n, most),
            esc(test),
            b as f64 * top / STRIP_BINS as f64,
            (b + 1) as f64 * top / STRIP_BINS as f64
        );
    }
}

/// One cell of the `sweep_accuracy` table as the sweep figure needs it.
#[derive(Debug, Clone)]
struct SweepPoint {
    variant: String,
    slug: String,
    pct: f64,
    lo: f64,
    hi: f64,
    label_text: String,
}

type SweepKey = (String, String, String, String);

/// `sweep_accuracy` rows grouped by (source, label, model, benchmark), in table order.
fn sweep_points(t: &TextTable) -> Result<BTreeMap<SweepKey, Vec<SweepPoint>>, String> {
    let [src, lab, model, bench, var, slug, n, k, acc, lo, hi] = positions(
        &t.header,
        [
            "source",
            "label",
            "model",
            "benchmark",
            "variant",
            "delimiter_slug",
            "n",
            "correct",
            "accuracy_pct",
            "ci95_low_pct",
            "ci95_high_pct",
        ],
        |n| format!("sweep_accuracy table has no column `{n}`"),
    )?;
    let mut out: BTreeMap<SweepKey, Vec<SweepPoint>> = BTreeMap::new();
    for r in &t.rows {
        let num = |i: usize| {
            r[i].parse::<f64>()
                .map_err(|_| format!("sweep_accuracy table: `{}` is not a number", r[i]))
        };
        out.entry((
            r[src].clone(),
            r[lab].clone(),
            r[model].clone(),
            r[bench].clone(),
        ))
        .or_default()
        .push(SweepPoint {
            variant: r[var].clone(),
            slug: r[slug].clone(),
            pct: num(acc)?,
            lo: num(lo)?,
            hi: num(hi)?,
            label_text: format!("{}/{}", r[k], r[n]),
        });
    }
    Ok(out)
}

/// Accuracy per delimiter (one row each, in table order) with its 95% interval, one colour
/// per variant, for one model and benchmark of one source.
fn sweep_figure(key: &SweepKey, pts: &[SweepPoint]) -> String {
    let (source, label, model, bench) = key;
    let mut slugs: Vec<&str> = Vec::new();
    for p in pts {
        if !slugs.contains(&p.slug.as_str()) {
            slugs.push(&p.slug);
        }
    }
    let mut variants: Vec<&str> = Vec::new();
    for p in pts {
        if !variants.contains(&p.variant.as_str()) {
            variants.push(&p.variant);
        }
    }
    let colors: BTreeMap<&str, &str> = variants
        .iter()
        .enumerate()
        .map(|(i, v)| (*v, PALETTE[i % PALETTE.len()]))
        .collect();
    // The title in two lines: the run, then what is drawn; the figure widens for a long one.
    let title = format!("{source} ({label})");
    let subtitle = format!("{model} on {bench}, accuracy per delimiter");
    let ml = label_margin(slugs.iter().copied());
    let (mr, mt, mb, row) = (20.0, 56.0 + 16.0 * variants.len() as f64, 40.0, 18.0);
    let w = row_figure_width(560.0, ml, &title, &[&subtitle], variants.iter().copied()).ceil();
    let pw = w - ml - mr;
    let ph = row * slugs.len().max(1) as f64;
    let h = mt + ph + mb;
    let x = |v: f64| ml + v / 100.0 * pw;
    let plot = Plot { ml, mt, pw, ph };
    let (e_source, e_label) = (esc(source), esc(label));
    let aria = format!(
        "delimiter sweep accuracy, {e_source} ({e_label}), {} on {}",
        esc(model),
        esc(bench)
    );
    let mut s = crate::svg::open(w, h, &aria);
    crate::svg::titles(&mut s, 18, &title, &subtitle);
    for (i, v) in variants.iter().enumerate() {
        legend_dot(&mut s, ml, 54.0 + 16.0 * i as f64, colors[v], v);
    }
    for t in (0..=100).step_by(20) {
        plot.grid_line(&mut s, x(f64::from(t)), "#e5e5e5", &t.to_string());
    }
    for (ri, slug) in slugs.iter().enumerate() {
        let cy = plot.row(&mut s, ri, row, slug);
        for p in pts.iter().filter(|p| p.slug == *slug) {
            let vi = variants.iter().position(|v| *v == p.variant).unwrap_or(0) as f64;
            let dy = (vi - (variants.len() as f64 - 1.0) / 2.0) * 5.0;
            let col = colors[p.variant.as_str()];
            let _ = write!(
                s,
                r#"<line x1="{}" y1="{yy}" x2="{}" y2="{yy}" stroke="{col}" stroke-opacity="0.6"/><circle cx="{}" cy="{yy}" r="3.5" fill="{col}"><title>{} {}: {} = {:.2}% (95% CI {:.2} to {:.2})</title></circle>"#,
                c(x(p.lo)),
                c(x(p.hi)),
                c(x(p.pct)),
                esc(slug),
                esc(&p.variant),
                esc(&p.label_text),
                p.pct,
                p.lo,
                p.hi,
                yy = c(cy + dy)
            );
        }
    }
    plot.close(&mut s, h, "accuracy, % (lines: exact 95% interval)");
    s
}

fn html_table(t: &TextTable) -> String {
    let mut s = String::from("<div class=\"tw\"><table><thead><tr>");
    for h in &t.header {
        let _ = write!(s, "<th>{}</th>", esc(h));
    }
    s.push_str("</tr></thead><tbody>");
    for r in &t.rows {
        s.push_str("<tr>");
        for (j, v) in r.iter().enumerate() {
            if t.numeric[j] {
                let _ = write!(s, "<td class=\"n\">{}</td>", esc(v));
            } else {
                let _ = write!(s, "<td>{}</td>", esc(v));
            }
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table></div>");
    if t.rows.is_empty() {
        s.push_str("<p class=\"d\">(no rows)</p>");
    }
    s
}

const STYLE: &str = "body{font-family:sans-serif;margin:24px;max-width:1200px;color:#222}\
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ccc}h3{font-size:15px;margin-top:22px}\
.d{color:#555;font-size:13px}.tw{overflow-x:auto}table{border-collapse:collapse;font-size:12px}\
th,td{border:1px solid #ddd;padding:2px 6px;white-space:nowrap}th{background:#f0f0f0}td.n{text-align:right;font-family:monospace}\
svg{display:block;margin:8px 0}svg .t{font:bold 13px sans-serif}svg .a{font:11px sans-serif;fill:#333}\
.figs{display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start}.h{font-size:15px;max-width:900px}";

/// Per recorded source (label `recorded`: replies of real models), a plain-language paragraph
/// built from the `requests` and `verdict` tables: how many requests each model got, how many
/// replies the study's strict rule could read, and what the verdict says. Nothing here is
/// computed anew; every number is in those two tables.
fn recorded_section(tables: &[Rendered]) -> Result<String, String> {
    let Some(req) = tables.iter().find(|t| t.name == "requests") else {
        return Ok(String::new());
    };
    let t = &req.recorded;
    let col = |n: &str| {
        t.col(n)
            .ok_or(format!("table requests has no column `{n}`"))
    };
    let (src, label, model) = (col("source")?, col("label")?, col("model")?);
    let (requests, unreadable, failed) = (
        col("requests")?,
        col("unreadable_replies")?,
        col("failed_requests")?,
    );
    let num = |r: &[String], i: usize| -> Result<u64, String> {
        r[i].parse()
            .map_err(|_| format!("table requests: `{}` is not a count", r[i]))
    };
    // (source, model) -> (requests, unreadable, failed), in the table's order.
    let mut per: BTreeMap<(String, String), (u64, u64, u64)> = BTreeMap::new();
    for r in t.rows.iter().filter(|r| r[label] == "recorded") {
        let e = per.entry((r[src].clone(), r[model].clone())).or_default();
        e.0 += num(r, requests)?;
        e.1 += num(r, unreadable)?;
        e.2 += num(r, failed)?;
    }
    if per.is_empty() {
        return Ok(String::new());
    }
    let verdicts: BTreeMap<&str, &str> = tables
        .iter()
        .find(|t| t.name == "verdict")
        .and_then(|v| {
            let t = &v.recorded;
            let (s, c, st) = (t.col("source")?, t.col("criterion")?, t.col("statement")?);
            Some(
                t.rows
                    .iter()
                    .filter(|r| r[c] == "verdict")
                    .map(|r| (r[s].as_str(), r[st].as_str()))
                    .collect(),
            )
        })
        .unwrap_or_default();
    let mut s = String::from("<h2>Recorded study</h2>\n<p class=\"d\">Real models, recorded with <code>protospread administer</code> (data/recorded/README.md). Counts from the tables <code>requests</code> and <code>verdict</code>; a reply is readable when the study's strict reply rule reads every item it should answer (docs/stored-answers.md).</p>\n");
    for ((source, model), (n, bad, failed)) in &per {
        let _ = writeln!(
            s,
            "<p>Source {} (recorded), model <code>{}</code>: {} requests, {} failed, {} of the replies received unreadable under the strict rule ({} readable). Verdict: {}.</p>",
            esc(source),
            esc(model),
            n,
            failed,
            bad,
            n.saturating_sub(*bad + *failed),
            esc(verdicts.get(source.as_str()).copied().unwrap_or("none computed")),
        );
    }
    let paragraphs = crate::recorded::paragraphs(tables)?;
    if !paragraphs.is_empty() {
        let _ = writeln!(
            s,
            "<h3>Under each reply rule: primary and secondary (single-item) analysis</h3>\n<p class=\"d\">{}</p>",
            esc(crate::recorded::INTRO)
        );
        for p in &paragraphs {
            let _ = writeln!(s, "<p>{}</p>", esc(p));
        }
        s.push_str("<div class=\"figs\">");
        for f in crate::recorded::figures(tables)? {
            s.push_str(&f);
        }
        s.push_str("</div>\n");
    }
    Ok(s)
}

/// A table as the page shows it: whole, or its excerpt under the line that says how many rows
/// the table has and links its CSV and Parquet files (both in out/report/).
fn shown_table(t: &Rendered, whole: bool) -> String {
    let (Some(excerpt), false) = (&t.excerpt, whole && t.is_whole()) else {
        return html_table(&t.head);
    };
    let mut s = String::new();
    let _ = write!(
        s,
        "<p class=\"d\">{} rows in all, see <a href=\"{n}.csv\">{n}.csv</a> (Parquet: <a href=\"{n}.parquet\">{n}.parquet</a>); {}.</p>",
        t.rows,
        esc(&crate::excerpt_what(excerpt)),
        n = esc(&t.name),
    );
    match excerpt {
        crate::Excerpt::Extremes { column, high, low } => {
            let _ = write!(
                s,
                "<p class=\"d\">Highest {}:</p>{}<p class=\"d\">Lowest {}:</p>{}",
                esc(column),
                html_table(high),
                esc(column),
                html_table(low)
            );
        }
        crate::Excerpt::First(first) => s.push_str(&html_table(first)),
    }
    s
}

/// Bytes of `t` shown whole.
pub(crate) fn whole_bytes(t: &TextTable) -> usize {
    html_table(t).len()
}

/// The whole HTML report: the headline, the figures, the recorded study, then every table
/// (whole where `whole[i]`, else its excerpt). `points` are the kept cells of the `cells`
/// table, when there is one.
pub(crate) fn report(
    title: &str,
    tables: &[Rendered],
    whole: &[bool],
    points: Option<&PointsBuilder>,
    bars: Option<crate::inference::BarsBuilder>,
) -> Result<String, ReportError> {
    let usage = |m: String| ReportError::Usage(format!("report.html: {m}"));
    let mut s = String::new();
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>\n",
        esc(title),
        esc(title)
    );
    let headlines = crate::headline::headlines(tables).map_err(usage)?;
    if !headlines.is_empty() {
        s.push_str("<h2>Headline</h2>\n");
        for h in &headlines {
            let _ = writeln!(s, "<p class=\"h\">{}</p>", esc(&h.sentence()));
        }
    }
    let _ = writeln!(
        s,
        "<p class=\"d\">Generated by protospread from the stored answers. Every table is also written as canonical CSV (hashed) and as Parquet (a copy of the file it was read from), both in this folder. Floats have six decimals; SDs and ranges are in human SDs; conventions in docs/statistics.md. Sources are labelled (\"simulated\" data is marked as such in every table).</p>"
    );
    if let Some(pb) = points {
        cell_figures(&mut s, pb);
    }
    if let Some(b) = bars.filter(|b| b.counts().1 > 0) {
        bar_figures(&mut s, b);
    }
    if let Some((intro, summary, more)) =
        crate::inference::ranking_section(tables).map_err(usage)?
    {
        let _ = writeln!(
            s,
            "<h2>Ranking robustness</h2>\n<p class=\"d\">{}</p>",
            esc(&intro)
        );
        s.push_str(&html_table(&summary));
        s.push('\n');
        if let Some(m) = more {
            let _ = writeln!(s, "<p class=\"d\">{}</p>", esc(&m));
        }
    }
    if let Some(acc) = tables.iter().find(|t| t.name == "sweep_accuracy") {
        sweep_figures(&mut s, acc).map_err(usage)?;
    }
    s.push_str(&recorded_section(tables).map_err(usage)?);
    s.push_str("<h2>Tables</h2>\n");
    for (t, whole) in tables.iter().zip(whole) {
        let _ = writeln!(s, "<h3 id=\"{}\">{}</h3>", esc(&t.name), esc(&t.title));
        if !t.description.is_empty() {
            let _ = writeln!(s, "<p class=\"d\">{}</p>", esc(&t.description));
        }
        let _ = writeln!(
            s,
            "<p class=\"d\"><code>{}.csv</code> from <code>{}</code></p>",
            esc(&t.name),
            esc(&t.from)
        );
        s.push_str(&shown_table(t, *whole));
        s.push('\n');
    }
    s.push_str("</body>\n</html>\n");
    Ok(s)
}

/// The scatter and the range figure of each of the first [`FIGURE_SOURCES`] sources.
fn cell_figures(s: &mut String, pb: &PointsBuilder) {
    s.push_str("<h2>Figures</h2>\n");
    for ((source, label), p) in pb.groups.iter().take(FIGURE_SOURCES) {
        let _ = write!(
            s,
            "<h3>Source {} ({})</h3>\n<div class=\"figs\">",
            esc(source),
            esc(label)
        );
        s.push_str(&scatter(pb, p, source, label));
        s.push_str(&range_strip(pb, p, source, label));
        s.push_str("</div>\n");
    }
    if pb.groups.len() > FIGURE_SOURCES {
        let _ = writeln!(
            s,
            "<p class=\"d\">Figures for the first {FIGURE_SOURCES} of {} sources; every cell is in the table <code>cells</code>.</p>",
            pb.groups.len()
        );
    }
}

/// The error-bar figures per model and scale, and what they leave out.
fn bar_figures(s: &mut String, b: crate::inference::BarsBuilder) {
    let (drawn, scales, sources) = b.counts();
    s.push_str("<h2>Error bars per model and scale</h2>\n<p class=\"d\">Per scale, the models in order of their mean z over the protocol setups (dot), with +/- the error bar (the larger of the protocol SD and the sampling SD; its colour says which) and whiskers to the lowest and the highest setup (table <a href=\"#error_bars\"><code>error_bars</code></a>, every row in <a href=\"error_bars.csv\">error_bars.csv</a>).</p>\n<div class=\"figs\">");
    for f in b.figures() {
        s.push_str(&f);
    }
    s.push_str("</div>\n");
    if drawn < scales || sources > FIGURE_SOURCES {
        let _ = writeln!(
            s,
            "<p class=\"d\">Figures for {drawn} of {scales} scales of the first {} of {sources} sources; every row is in <a href=\"error_bars.csv\">error_bars.csv</a>.</p>",
            sources.min(FIGURE_SOURCES)
        );
    }
}

/// The delimiter-sweep figures of the first [`SWEEP_FIGURES`] model and benchmark pairs of
/// the `sweep_accuracy` table `acc`.
fn sweep_figures(s: &mut String, acc: &Rendered) -> Result<(), String> {
    let mut groups = sweep_points(&acc.head)?;
    if !acc.is_whole() {
        // The last group may continue past the rows kept.
        groups.pop_last();
    }
    if !groups.is_empty() {
        s.push_str("<h2>Delimiter sweep</h2>\n<p class=\"d\">Accuracy per few-shot delimiter and variant with its exact 95% interval (table <code>sweep_accuracy</code>; docs/sweep.md).</p>\n");
    }
    for (key, p) in groups.iter().take(SWEEP_FIGURES) {
        let _ = write!(
            s,
            "<h3>Source {} ({}): {}, {}</h3>\n<div class=\"figs\">",
            esc(&key.0),
            esc(&key.1),
            esc(&key.2),
            esc(&key.3)
        );
        s.push_str(&sweep_figure(key, p));
        s.push_str("</div>\n");
    }
    if groups.len() > SWEEP_FIGURES || !acc.is_whole() {
        let _ = writeln!(
            s,
            "<p class=\"d\">Figures for the first {} model and benchmark pairs; every row is in the table <code>sweep_accuracy</code>.</p>",
            groups.len().min(SWEEP_FIGURES)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_figure_shows_source_label_and_every_cell() {
        let header = [
            "source",
            "label",
            "model",
            "benchmark",
            "variant",
            "delimiter",
            "delimiter_slug",
            "n",
            "correct",
            "accuracy_pct",
            "ci95_low_pct",
            "ci95_high_pct",
        ];
        let row = |src: &str, v: &str, slug: &str, k: &str, a: &str| -> Vec<String> {
            [
                src, "recorded", "m<1>", "b", v, "x", slug, "12", k, a, "1.0", "50.0",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect()
        };
        let t = TextTable {
            header: header.iter().map(|s| s.to_string()).collect(),
            numeric: vec![false; header.len()],
            rows: vec![
                row("runs/a", "plain", "nl", "3", "25.0"),
                row("runs/a", "named", "nl", "0", "0.0"),
                row("runs/a", "plain", "hash", "6", "50.0"),
                row("runs/b", "plain", "nl", "1", "8.333333"),
            ],
        };
        let groups = sweep_points(&t).unwrap();
        assert_eq!(groups.len(), 2, "one figure per source");
        let (key, pts) = groups.iter().next().unwrap();
        let svg = sweep_figure(key, pts);
        assert!(
            svg.contains(">runs/a (recorded)</text><text x=\"10\" y=\"34\" class=\"a\">m&lt;1&gt; on b, accuracy per delimiter</text>"),
            "{svg}"
        );
        assert_eq!(svg.matches("<title>").count(), 3);
        assert!(svg.contains("<title>nl plain: 3/12 = 25.00% (95% CI 1.00 to 50.00)</title>"));
        // A table without the provenance columns is refused, not drawn without them.
        let mut bad = t;
        bad.header[0] = "origin".into();
        assert!(sweep_points(&bad).unwrap_err().contains("`source`"));
    }

    #[test]
    fn recorded_section_counts_each_model_from_the_requests_table() {
        use crate::test_tables::table;
        let h = [
            "source",
            "label",
            "model",
            "requests",
            "failed_requests",
            "unreadable_replies",
        ];
        let req = table(
            "requests",
            &h,
            &[
                &["rec", "recorded", "m1", "50", "0", "47"],
                &["rec", "recorded", "m1", "1", "0", "1"],
                &["sim", "simulated", "s", "9", "0", "0"],
            ],
        );
        let verdict = table(
            "verdict",
            &["source", "label", "criterion", "statement"],
            &[&["rec", "recorded", "verdict", "no kept cells: no verdict"]],
        );
        let s = recorded_section(&[req.clone(), verdict]).unwrap();
        assert!(s.contains("<h2>Recorded study</h2>"));
        assert!(
            s.contains("model <code>m1</code>: 51 requests, 0 failed, 48 of the replies received unreadable under the strict rule (3 readable). Verdict: no kept cells: no verdict."),
            "{s}"
        );
        assert!(
            !s.contains("sim"),
            "simulated sources are not in the recorded section"
        );
        let mut bad = req;
        bad.recorded.rows[0][3] = "x".into();
        assert!(recorded_section(&[bad])
            .unwrap_err()
            .contains("not a count"));
    }

    #[test]
    fn ticks_are_nice() {
        assert_eq!(tick_step(1.0, 5.0), 0.2);
        assert_eq!(tick_step(3.84, 6.0), 1.0);
        assert_eq!(esc("<a&\"b\">"), "&lt;a&amp;&quot;b&quot;&gt;");
    }

    /// docs/report.md states every limit of the documents' size; a change of a limit that the
    /// page does not follow fails here.
    #[test]
    fn docs_state_the_size_limits() {
        let doc = include_str!("../../../docs/report.md");
        let thousands = |n: usize| {
            let d = n.to_string();
            let mut out = String::new();
            for (i, ch) in d.chars().enumerate() {
                if i > 0 && (d.len() - i).is_multiple_of(3) {
                    out.push(',');
                }
                out.push(ch);
            }
            out
        };
        let k = crate::EXTREME_ROWS;
        for s in [
            format!("at most {} rows", thousands(crate::FULL_ROWS)),
            format!("the {k} rows with the highest and the {k} with the lowest `ratio`"),
            format!("the first {} rows", 2 * k),
            format!(
                "at most {} bytes of HTML",
                thousands(crate::PAGE_TABLE_BYTES)
            ),
            format!("at most {} cells", thousands(SCATTER_POINTS)),
            format!("{SCATTER_BINS} x {SCATTER_BINS} grid"),
            format!("at most {STRIP_MODELS} models"),
            format!("counted in {STRIP_BINS} bins"),
            format!("the first {FIGURE_SOURCES} sources"),
            format!("the first {SWEEP_FIGURES} model x benchmark pairs"),
            format!(
                "at most {} models, one row each | the {} models with the highest and the {} with the lowest mean z",
                crate::inference::BAR_MODELS,
                crate::inference::BAR_SIDE,
                crate::inference::BAR_SIDE
            ),
            format!(
                "the first {} scales of the first {FIGURE_SOURCES} sources",
                crate::inference::BAR_FIGURES
            ),
            format!(
                "the first {} rows of `ranking`",
                crate::inference::RANKING_ROWS
            ),
        ] {
            assert!(doc.contains(&s), "docs/report.md does not say `{s}`");
        }
        assert_eq!(text_width("abcde", "t"), 5.0 * 0.6 * 13.0);
    }
}
