//! The self-contained HTML report: inline CSS, inline SVG figures drawn here, no scripts, no
//! fonts or images from anywhere. The figures are drawn from the rendered `cells` table (the
//! same strings as the canonical CSV), so they show exactly the published figures.

use crate::render::TextTable;
use crate::{Rendered, ReportError};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

const PALETTE: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf",
];

/// Escape text for HTML element content and attribute values.
pub(crate) fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            _ => o.push(c),
        }
    }
    o
}

/// A coordinate with two decimals (SVG user units).
fn c(x: f64) -> String {
    format!("{x:.2}")
}

/// A "nice" tick step (1, 2 or 5 times a power of ten) giving about `n` ticks up to `max`.
fn tick_step(max: f64, n: f64) -> f64 {
    let raw = (max / n).max(1e-9);
    let p = 10f64.powf(raw.log10().floor());
    let m = raw / p;
    let k = if m <= 1.0 {
        1.0
    } else if m <= 2.0 {
        2.0
    } else if m <= 5.0 {
        5.0
    } else {
        10.0
    };
    k * p
}

fn tick_label(v: f64, step: f64) -> String {
    if step >= 1.0 {
        format!("{v:.0}")
    } else if step >= 0.1 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A kept cell as the figures need it.
#[derive(Debug, Clone)]
struct Point {
    model: String,
    arm: String,
    test: String,
    protocol_sd: f64,
    /// None for a cell without sampling administrations (a separate arm).
    sampling_sd: Option<f64>,
    range_z: f64,
}

fn points(cells: &TextTable) -> Result<BTreeMap<(String, String), Vec<Point>>, String> {
    let col = |n: &str| {
        cells
            .col(n)
            .ok_or_else(|| format!("cells table has no column `{n}`"))
    };
    let (src, lab, model, arm, test, kept) = (
        col("source")?,
        col("label")?,
        col("model")?,
        col("arm")?,
        col("test")?,
        col("kept")?,
    );
    let (psd, ssd, range) = (col("protocol_sd")?, col("sampling_sd")?, col("range_z")?);
    let mut out: BTreeMap<(String, String), Vec<Point>> = BTreeMap::new();
    for r in &cells.rows {
        if r[kept] != "true" {
            continue;
        }
        let num = |i: usize| {
            r[i].parse::<f64>()
                .map_err(|_| format!("cells table: `{}` is not a number", r[i]))
        };
        out.entry((r[src].clone(), r[lab].clone()))
            .or_default()
            .push(Point {
                model: r[model].clone(),
                arm: r[arm].clone(),
                test: r[test].clone(),
                protocol_sd: num(psd)?,
                sampling_sd: if r[ssd].is_empty() {
                    None
                } else {
                    Some(num(ssd)?)
                },
                range_z: num(range)?,
            });
    }
    Ok(out)
}

fn color_map(keys: impl IntoIterator<Item = String>) -> BTreeMap<String, &'static str> {
    keys.into_iter()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .enumerate()
        .map(|(i, k)| (k, PALETTE[i % PALETTE.len()]))
        .collect()
}

/// Scatter of protocol SD (y) against sampling SD (x) per kept cell, with the line y = x.
fn scatter(all: &[Point], source: &str, label: &str) -> String {
    let pts: Vec<(&Point, f64)> = all
        .iter()
        .filter_map(|p| p.sampling_sd.map(|s| (p, s)))
        .collect();
    let (w, h, ml, mr, mt, mb) = (520.0, 470.0, 60.0, 20.0, 40.0, 50.0);
    let (pw, ph) = (w - ml - mr, h - mt - mb);
    let max = pts
        .iter()
        .flat_map(|(p, s)| [p.protocol_sd, *s])
        .fold(0.0f64, f64::max);
    let step = tick_step(if max > 0.0 { max } else { 1.0 }, 5.0);
    let top = ((if max > 0.0 { max } else { 1.0 }) / step).ceil() * step;
    let x = |v: f64| ml + v / top * pw;
    let y = |v: f64| mt + ph - v / top * ph;
    let colors = color_map(pts.iter().map(|(p, _)| p.arm.clone()));
    let above = pts.iter().filter(|(p, s)| p.protocol_sd > *s).count();
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" aria-label="protocol SD against sampling SD, {src}">"#,
        src = esc(source)
    );
    let _ = write!(
        s,
        r##"<rect x="0" y="0" width="{w}" height="{h}" fill="#ffffff"/>"##
    );
    let _ = write!(
        s,
        r#"<text x="{}" y="20" class="t">{} ({}): {} cells, {} above y = x</text>"#,
        c(ml),
        esc(source),
        esc(label),
        pts.len(),
        above
    );
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
    for (p, ssd) in &pts {
        let _ = write!(
            s,
            r#"<circle cx="{}" cy="{}" r="3.5" fill="{}" fill-opacity="0.65"><title>{} {}: protocol SD {:.3}, sampling SD {:.3}</title></circle>"#,
            c(x(*ssd)),
            c(y(p.protocol_sd)),
            colors[&p.arm],
            esc(&p.model),
            esc(&p.test),
            p.protocol_sd,
            ssd
        );
    }
    for (i, (arm, col)) in colors.iter().enumerate() {
        let ly = mt + 14.0 + 16.0 * i as f64;
        let _ = write!(
            s,
            r##"<circle cx="{}" cy="{}" r="4" fill="{col}"/><text x="{}" y="{}" class="a">arm {}</text>"##,
            c(ml + 12.0),
            c(ly - 4.0),
            c(ml + 20.0),
            c(ly),
            esc(arm)
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

/// Range (highest minus lowest setup, human SDs) of every kept cell, one row per model,
/// coloured by test, with reference lines at 1 and 2 human SDs.
fn range_strip(pts: &[Point], source: &str, label: &str) -> String {
    let mut models: Vec<(String, String)> = pts
        .iter()
        .map(|p| (p.arm.clone(), p.model.clone()))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    models.sort();
    let tests: Vec<String> = pts
        .iter()
        .map(|p| p.test.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let colors = color_map(tests.iter().cloned());
    let name_w = models
        .iter()
        .map(|(a, m)| a.len() + m.len() + 3)
        .max()
        .unwrap_or(8) as f64
        * 6.5;
    let (ml, mr, mt, mb, row) = (
        name_w.max(80.0) + 10.0,
        20.0,
        40.0 + 16.0 * tests.len() as f64,
        40.0,
        20.0,
    );
    let w = 720.0f64.max(ml + 400.0);
    let pw = w - ml - mr;
    let ph = row * models.len().max(1) as f64;
    let h = mt + ph + mb;
    let max = pts.iter().map(|p| p.range_z).fold(2.0f64, f64::max);
    let step = tick_step(max, 6.0);
    let top = (max / step).ceil() * step;
    let x = |v: f64| ml + v / top * pw;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" aria-label="range per model and test, {}">"#,
        esc(source)
    );
    let _ = write!(
        s,
        r##"<rect x="0" y="0" width="{w}" height="{h}" fill="#ffffff"/>"##
    );
    let _ = write!(
        s,
        r#"<text x="10" y="20" class="t">{} ({}): range over the protocol setups per cell, human SDs</text>"#,
        esc(source),
        esc(label)
    );
    for (i, t) in tests.iter().enumerate() {
        let ly = 38.0 + 16.0 * i as f64;
        let _ = write!(
            s,
            r#"<circle cx="{}" cy="{}" r="4" fill="{}"/><text x="{}" y="{}" class="a">{}</text>"#,
            c(ml + 6.0),
            c(ly - 4.0),
            colors[t],
            c(ml + 14.0),
            c(ly),
            esc(t)
        );
    }
    let mut v = 0.0;
    while v <= top + step / 2.0 {
        let strong = (v - 1.0).abs() < 1e-9 || (v - 2.0).abs() < 1e-9;
        let _ = write!(
            s,
            r#"<line x1="{xx}" y1="{}" x2="{xx}" y2="{}" stroke="{}"/><text x="{xx}" y="{}" class="a" text-anchor="middle">{}</text>"#,
            c(mt),
            c(mt + ph),
            if strong { "#999" } else { "#e5e5e5" },
            c(mt + ph + 16.0),
            tick_label(v, step),
            xx = c(x(v))
        );
        v += step;
    }
    for (ri, (arm, model)) in models.iter().enumerate() {
        let cy = mt + row * ri as f64 + row / 2.0;
        if ri % 2 == 0 {
            let _ = write!(
                s,
                r##"<rect x="{}" y="{}" width="{}" height="{}" fill="#f6f6f6"/>"##,
                c(ml),
                c(cy - row / 2.0),
                c(pw),
                c(row)
            );
        }
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" class="a" text-anchor="end">{} ({})</text>"#,
            c(ml - 6.0),
            c(cy + 4.0),
            esc(model),
            esc(arm)
        );
        for p in pts.iter().filter(|p| &p.model == model && &p.arm == arm) {
            let ti = tests.iter().position(|t| t == &p.test).unwrap_or(0) as f64;
            let dy = (ti - (tests.len() as f64 - 1.0) / 2.0) * 3.0;
            let _ = write!(
                s,
                r#"<circle cx="{}" cy="{}" r="3.5" fill="{}" fill-opacity="0.7"><title>{} {}: range {:.3}</title></circle>"#,
                c(x(p.range_z)),
                c(cy + dy),
                colors[&p.test],
                esc(&p.model),
                esc(&p.test),
                p.range_z
            );
        }
    }
    let _ = write!(
        s,
        r##"<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#888"/><text x="{}" y="{}" class="a" text-anchor="middle">highest minus lowest setup, human SDs (lines at 1 and 2)</text></svg>"##,
        c(ml),
        c(mt),
        c(pw),
        c(ph),
        c(ml + pw / 2.0),
        c(h - 8.0)
    );
    s
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
    let col = |n: &str| {
        t.col(n)
            .ok_or_else(|| format!("sweep_accuracy table has no column `{n}`"))
    };
    let (src, lab, model, bench, var, slug) = (
        col("source")?,
        col("label")?,
        col("model")?,
        col("benchmark")?,
        col("variant")?,
        col("delimiter_slug")?,
    );
    let (n, k, acc, lo, hi) = (
        col("n")?,
        col("correct")?,
        col("accuracy_pct")?,
        col("ci95_low_pct")?,
        col("ci95_high_pct")?,
    );
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
    let (ml, mr, mt, mb, row) = (90.0, 20.0, 40.0 + 16.0 * variants.len() as f64, 40.0, 18.0);
    let w = 560.0f64;
    let pw = w - ml - mr;
    let ph = row * slugs.len().max(1) as f64;
    let h = mt + ph + mb;
    let x = |v: f64| ml + v / 100.0 * pw;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" aria-label="delimiter sweep accuracy, {} ({}), {} on {}">"#,
        esc(source),
        esc(label),
        esc(model),
        esc(bench)
    );
    let _ = write!(
        s,
        r##"<rect x="0" y="0" width="{w}" height="{h}" fill="#ffffff"/>"##
    );
    let _ = write!(
        s,
        r#"<text x="10" y="20" class="t">{} ({}): {} on {}, accuracy per delimiter</text>"#,
        esc(source),
        esc(label),
        esc(model),
        esc(bench)
    );
    for (i, v) in variants.iter().enumerate() {
        let ly = 38.0 + 16.0 * i as f64;
        let _ = write!(
            s,
            r#"<circle cx="{}" cy="{}" r="4" fill="{}"/><text x="{}" y="{}" class="a">{}</text>"#,
            c(ml + 6.0),
            c(ly - 4.0),
            colors[v],
            c(ml + 14.0),
            c(ly),
            esc(v)
        );
    }
    for t in (0..=100).step_by(20) {
        let v = f64::from(t);
        let _ = write!(
            s,
            r##"<line x1="{xx}" y1="{}" x2="{xx}" y2="{}" stroke="#e5e5e5"/><text x="{xx}" y="{}" class="a" text-anchor="middle">{t}</text>"##,
            c(mt),
            c(mt + ph),
            c(mt + ph + 16.0),
            xx = c(x(v))
        );
    }
    for (ri, slug) in slugs.iter().enumerate() {
        let cy = mt + row * ri as f64 + row / 2.0;
        if ri % 2 == 0 {
            let _ = write!(
                s,
                r##"<rect x="{}" y="{}" width="{}" height="{}" fill="#f6f6f6"/>"##,
                c(ml),
                c(cy - row / 2.0),
                c(pw),
                c(row)
            );
        }
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" class="a" text-anchor="end">{}</text>"#,
            c(ml - 6.0),
            c(cy + 4.0),
            esc(slug)
        );
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
    let _ = write!(
        s,
        r##"<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#888"/><text x="{}" y="{}" class="a" text-anchor="middle">accuracy, % (lines: exact 95% interval)</text></svg>"##,
        c(ml),
        c(mt),
        c(pw),
        c(ph),
        c(ml + pw / 2.0),
        c(h - 8.0)
    );
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
.figs{display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start}";

/// Per recorded source (label `recorded`: replies of real models), a plain-language paragraph
/// built from the `requests` and `verdict` tables: how many requests each model got, how many
/// replies the study's strict rule could read, and what the verdict says. Nothing here is
/// computed anew; every number is in those two tables.
fn recorded_section(tables: &[Rendered]) -> Result<String, String> {
    let Some(req) = tables.iter().find(|t| t.name == "requests") else {
        return Ok(String::new());
    };
    let t = &req.table;
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
            let t = &v.table;
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

/// The whole HTML report.
pub(crate) fn report(title: &str, tables: &[Rendered]) -> Result<String, ReportError> {
    let mut s = String::new();
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>\n<p class=\"d\">Generated by protospread from the stored answers. Every table is also written as canonical CSV (hashed). Floats have six decimals; SDs and ranges are in human SDs; conventions in docs/statistics.md. Sources are labelled (\"simulated\" data is marked as such in every table).</p>\n",
        esc(title),
        esc(title)
    );
    if let Some(cells) = tables.iter().find(|t| t.name == "cells") {
        let pts =
            points(&cells.table).map_err(|m| ReportError::Usage(format!("report.html: {m}")))?;
        s.push_str("<h2>Figures</h2>\n");
        for ((source, label), p) in &pts {
            let _ = write!(
                s,
                "<h3>Source {} ({})</h3>\n<div class=\"figs\">",
                esc(source),
                esc(label)
            );
            s.push_str(&scatter(p, source, label));
            s.push_str(&range_strip(p, source, label));
            s.push_str("</div>\n");
        }
    }
    if let Some(acc) = tables.iter().find(|t| t.name == "sweep_accuracy") {
        let groups = sweep_points(&acc.table)
            .map_err(|m| ReportError::Usage(format!("report.html: {m}")))?;
        if !groups.is_empty() {
            s.push_str("<h2>Delimiter sweep</h2>\n<p class=\"d\">Accuracy per few-shot delimiter and variant with its exact 95% interval (table <code>sweep_accuracy</code>; docs/sweep.md).</p>\n");
        }
        for (key, p) in &groups {
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
    }
    s.push_str(
        &recorded_section(tables).map_err(|m| ReportError::Usage(format!("report.html: {m}")))?,
    );
    s.push_str("<h2>Tables</h2>\n");
    for t in tables {
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
        s.push_str(&html_table(&t.table));
        s.push('\n');
    }
    s.push_str("</body>\n</html>\n");
    Ok(s)
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
        assert!(svg.contains("runs/a (recorded): m&lt;1&gt; on b"), "{svg}");
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
            &["source", "criterion", "statement"],
            &[&["rec", "verdict", "no kept cells: no verdict"]],
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
        bad.table.rows[0][3] = "x".into();
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
}
