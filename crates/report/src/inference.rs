//! The inference tables on the page: a dot-and-bar figure per scale from `error_bars` (mean z
//! per model with its error bar and the lowest and highest setup) and a short summary of
//! `ranking`. The figure's rows are collected while the table streams, keeping per scale only
//! the models with the highest and lowest mean z, so that its size and memory do not grow
//! with the study.

use crate::render::{figure_columns, TextTable};
use crate::svg::{c, esc, label_margin, row_figure_width, text_width, tick_label, tick_step, Plot};
use std::collections::BTreeMap;
use std::fmt::Write;

/// A scale's figure shows every model when it has at most this many; above, the
/// [`BAR_SIDE`] models with the highest and the [`BAR_SIDE`] with the lowest mean z.
pub(crate) const BAR_MODELS: usize = 40;
/// Models shown at each end of a scale with more than [`BAR_MODELS`] models.
pub(crate) const BAR_SIDE: usize = 20;
/// Error-bar figures (source x scale) drawn; the table holds the rest.
pub(crate) const BAR_FIGURES: usize = 24;

/// One model of a scale: its label (`model (arm)`) and its figures.
#[derive(Debug, Clone)]
struct Bar {
    label: String,
    mean: f64,
    low: f64,
    high: f64,
    bar: f64,
    from_protocol: bool,
}

/// Highest mean first; ties by label, so the kept models do not depend on the row order.
fn order(a: &Bar, b: &Bar) -> std::cmp::Ordering {
    b.mean
        .total_cmp(&a.mean)
        .then_with(|| a.label.cmp(&b.label))
}

/// Per scale, its model count and the models the figure shows.
#[derive(Debug, Default)]
struct Scale {
    models: usize,
    bars: Vec<Bar>,
}

/// Key of a figure: source, label, test, dimension.
type ScaleKey = (String, String, String, String);

/// The rows of the `error_bars` table the figures draw, collected row by row from the
/// rendered strings (the same strings as the canonical CSV).
#[derive(Debug)]
pub(crate) struct BarsBuilder {
    /// The columns [`crate::render::MODEL_TEST`].
    key: [usize; 5],
    /// dimension, mean_z, lowest_z, highest_z, error_bar, error_bar_from.
    values: [usize; 6],
    scales: BTreeMap<ScaleKey, Scale>,
    /// Every source of the table, in order (the figures' sources are the first of them).
    sources: Vec<String>,
}

impl BarsBuilder {
    /// A builder for rows of a table with columns `header`; an error names a missing column.
    pub(crate) fn new(header: &[String]) -> Result<Self, String> {
        let (key, values) = figure_columns(
            "error_bars",
            header,
            [
                "dimension",
                "mean_z",
                "lowest_z",
                "highest_z",
                "error_bar",
                "error_bar_from",
            ],
        )?;
        Ok(BarsBuilder {
            key,
            values,
            scales: BTreeMap::new(),
            sources: Vec::new(),
        })
    }

    /// Add one row (its cells as rendered).
    pub(crate) fn push(&mut self, r: &[String]) -> Result<(), String> {
        let [src, lab, model, arm, test] = self.key;
        let [dim, mean, low, high, bar, from] = self.values;
        if !self.sources.contains(&r[src]) {
            self.sources.push(r[src].clone());
        }
        if self
            .sources
            .iter()
            .position(|s| *s == r[src])
            .is_some_and(|i| i >= crate::svg::FIGURE_SOURCES)
        {
            return Ok(());
        }
        let num = |i: usize| {
            r[i].parse::<f64>()
                .map_err(|_| format!("error_bars table: `{}` is not a number", r[i]))
        };
        let b = Bar {
            label: format!("{} ({})", r[model], r[arm]),
            mean: num(mean)?,
            low: num(low)?,
            high: num(high)?,
            bar: num(bar)?,
            from_protocol: r[from] == "protocol",
        };
        let s = self
            .scales
            .entry((
                r[src].clone(),
                r[lab].clone(),
                r[test].clone(),
                r[dim].clone(),
            ))
            .or_default();
        s.models += 1;
        s.bars.push(b);
        if s.bars.len() > 2 * BAR_MODELS {
            keep_ends(&mut s.bars);
        }
        Ok(())
    }

    /// The figures, at most [`BAR_FIGURES`], then a line for what is left out.
    pub(crate) fn figures(mut self) -> Vec<String> {
        let mut out = Vec::new();
        for (key, s) in self.scales.iter_mut().take(BAR_FIGURES) {
            s.bars.sort_by(order);
            if s.models > BAR_MODELS {
                keep_ends(&mut s.bars);
            }
            out.push(figure(key, s));
        }
        out
    }

    /// Scales with a figure, scales in all (of the sources drawn) and sources in all.
    pub(crate) fn counts(&self) -> (usize, usize, usize) {
        (
            self.scales.len().min(BAR_FIGURES),
            self.scales.len(),
            self.sources.len(),
        )
    }
}

/// Keep the [`BAR_SIDE`] bars of highest and of lowest mean, highest first.
fn keep_ends(bars: &mut Vec<Bar>) {
    bars.sort_by(order);
    if bars.len() > 2 * BAR_SIDE {
        bars.drain(BAR_SIDE..bars.len() - BAR_SIDE);
    }
}

/// Dot (mean z over the protocol setups), bar (+/- error bar) and whiskers (lowest and
/// highest setup) per model of one scale, highest mean first.
fn figure(key: &ScaleKey, s: &Scale) -> String {
    let (source, label, test, dim) = key;
    let cut = s.models > s.bars.len();
    let title = format!("{source} ({label}): {test} {dim}, mean z per model");
    let sub = if cut {
        format!(
            "{} models in all; shown: the {} with the highest and the {} with the lowest mean (error_bars.csv)",
            s.models, BAR_SIDE, BAR_SIDE
        )
    } else {
        format!("{} models, highest mean first", s.models)
    };
    let legend = [
        ("#1f77b4", "bar: +/- error bar = protocol SD"),
        ("#ff7f0e", "bar: +/- error bar = sampling SD"),
        ("#888888", "whiskers: lowest and highest setup"),
    ];
    let axis = "z, human SDs (dot: mean over the protocol setups)";
    let ml = label_margin(s.bars.iter().map(|b| b.label.as_str()));
    let (mr, mt, mb, row) = (20.0, 56.0 + 16.0 * legend.len() as f64, 40.0, 18.0);
    // A gap row between the highest and the lowest models when some are left out.
    let rows = s.bars.len() + usize::from(cut);
    let w = row_figure_width(720.0, ml, &title, &[&sub], legend.iter().map(|(_, t)| *t))
        .max(ml + text_width(axis, "a") + 20.0)
        .ceil();
    let pw = w - ml - mr;
    let ph = row * rows.max(1) as f64;
    let h = mt + ph + mb;
    let (from, to, step) = z_axis(&s.bars);
    let x = |v: f64| ml + (v - from) / (to - from) * pw;
    let plot = Plot { ml, mt, pw, ph };
    let aria = format!(
        "error bars per model, {} {} {}",
        esc(source),
        esc(test),
        esc(dim)
    );
    let mut o = crate::svg::open(w, h, &aria);
    crate::svg::titles(&mut o, 20, &title, &sub);
    for (i, (col, t)) in legend.iter().enumerate() {
        let ly = 54.0 + 16.0 * i as f64;
        let _ = write!(
            o,
            r#"<line x1="{}" y1="{y}" x2="{}" y2="{y}" stroke="{col}" stroke-width="3"/><text x="{}" y="{}" class="a">{}</text>"#,
            c(ml),
            c(ml + 10.0),
            c(ml + 14.0),
            c(ly),
            esc(t),
            y = c(ly - 4.0),
        );
    }
    let mut v = from;
    while v <= to + step / 2.0 {
        let zero = v.abs() < step / 1e6;
        let stroke = if zero { "#999" } else { "#e5e5e5" };
        plot.grid_line(
            &mut o,
            x(v),
            stroke,
            &tick_label(if zero { 0.0 } else { v }, step),
        );
        v += step;
    }
    for (i, b) in s.bars.iter().enumerate() {
        let ri = if cut && i >= BAR_SIDE { i + 1 } else { i };
        let cy = plot.row_centre(ri, row);
        if cut && i == BAR_SIDE {
            let _ = write!(
                o,
                r#"<text x="{}" y="{}" class="a" text-anchor="middle">... {} models not shown ...</text>"#,
                c(ml + pw / 2.0),
                c(cy - row + 4.0),
                s.models - s.bars.len()
            );
        }
        plot.row_label(&mut o, cy, &b.label);
        bar_marks(&mut o, b, cy, x);
    }
    plot.close(&mut o, h, axis);
    o
}

/// The z axis of a scale's figure: from and to (whole steps, zero included) and the step.
fn z_axis(bars: &[Bar]) -> (f64, f64, f64) {
    let lo = bars
        .iter()
        .map(|b| b.low.min(b.mean - b.bar))
        .fold(0.0f64, f64::min);
    let hi = bars
        .iter()
        .map(|b| b.high.max(b.mean + b.bar))
        .fold(0.0f64, f64::max);
    let step = tick_step((hi - lo).max(1e-6), 6.0);
    let (from, to) = ((lo / step).floor() * step, (hi / step).ceil() * step);
    let to = if to - from < step / 2.0 {
        from + step
    } else {
        to
    };
    (from, to, step)
}

/// One model's marks in the row centred at `cy`: whiskers, the bar in the colour of where the
/// error bar comes from, the dot, and a tooltip with the numbers.
fn bar_marks(o: &mut String, b: &Bar, cy: f64, x: impl Fn(f64) -> f64) {
    let col = if b.from_protocol {
        "#1f77b4"
    } else {
        "#ff7f0e"
    };
    let _ = write!(
        o,
        r##"<g><title>{}: mean {:.6}, error bar {:.6} ({}), lowest setup {:.6}, highest {:.6}</title><line x1="{}" y1="{y}" x2="{}" y2="{y}" stroke="#888888"/><line x1="{lx}" y1="{}" x2="{lx}" y2="{}" stroke="#888888"/><line x1="{hx}" y1="{}" x2="{hx}" y2="{}" stroke="#888888"/><line x1="{}" y1="{y}" x2="{}" y2="{y}" stroke="{col}" stroke-width="4" stroke-opacity="0.6"/><circle cx="{}" cy="{y}" r="3.5" fill="#222222"/></g>"##,
        esc(&b.label),
        b.mean,
        b.bar,
        if b.from_protocol {
            "protocol"
        } else {
            "sampling"
        },
        b.low,
        b.high,
        c(x(b.low)),
        c(x(b.high)),
        c(cy - 4.0),
        c(cy + 4.0),
        c(cy - 4.0),
        c(cy + 4.0),
        c(x(b.mean - b.bar)),
        c(x(b.mean + b.bar)),
        c(x(b.mean)),
        y = c(cy),
        lx = c(x(b.low)),
        hx = c(x(b.high)),
    );
}

/// Rows of the ranking summary shown; the table holds the rest.
pub(crate) const RANKING_ROWS: usize = 60;
/// Leading models named per row of the ranking summary.
const LEADERS_SHOWN: usize = 5;

/// One row of the ranking summary: source, arm, scale, models, median and minimum tau,
/// share of model pairs that flip, the models some setup ranks first.
pub(crate) fn ranking_summary(t: &TextTable) -> Result<TextTable, String> {
    let col = |n: &str| {
        t.col(n)
            .ok_or_else(|| format!("ranking table has no column `{n}`"))
    };
    let idx = [
        col("source")?,
        col("arm")?,
        col("test")?,
        col("dimension")?,
        col("models")?,
        col("tau_median")?,
        col("tau_min")?,
        col("flipped_share")?,
    ];
    let (leaders, names, every) = (
        col("leaders")?,
        col("leading_models")?,
        col("every_model_can_lead")?,
    );
    let none = |s: &str| {
        if s.is_empty() {
            "none".to_string()
        } else {
            s.to_string()
        }
    };
    let rows = t
        .rows
        .iter()
        .take(RANKING_ROWS)
        .map(|r| {
            let mut out: Vec<String> = idx.iter().map(|&i| none(&r[i])).collect();
            let all: Vec<&str> = r[names].split(' ').filter(|s| !s.is_empty()).collect();
            let mut lead = all
                .iter()
                .take(LEADERS_SHOWN)
                .copied()
                .collect::<Vec<_>>()
                .join(", ");
            if all.len() > LEADERS_SHOWN {
                let _ = write!(lead, " and {} more", all.len() - LEADERS_SHOWN);
            }
            out.push(format!(
                "{} ({}{})",
                r[leaders],
                lead,
                if r[every] == "true" {
                    "; every model"
                } else {
                    ""
                }
            ));
            out
        })
        .collect();
    Ok(TextTable {
        header: [
            "source",
            "arm",
            "test",
            "dimension",
            "models",
            "tau median",
            "tau min",
            "pairs flipped",
            "models that can lead",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
        numeric: vec![false, false, false, false, true, true, true, true, false],
        rows,
    })
}

/// The ranking summary of the `ranking` table, when there is one: an introduction, the
/// summary (at most [`RANKING_ROWS`] rows) and, when rows are left out, a line saying how many
/// there are in all.
pub(crate) fn ranking_section(
    tables: &[crate::Rendered],
) -> Result<Option<(String, TextTable, Option<String>)>, String> {
    let Some(t) = tables.iter().find(|t| t.name == "ranking") else {
        return Ok(None);
    };
    if t.rows == 0 {
        return Ok(None);
    }
    let summary = ranking_summary(&t.head)?;
    let more = (t.rows > summary.rows.len()).then(|| {
        format!(
            "The first {} of {} rows; every row is in ranking.csv.",
            summary.rows.len(),
            t.rows
        )
    });
    Ok(Some((
        "Per source, arm and scale, how much the order of the models depends on the protocol setup (table ranking): Kendall's tau-b between the model orders of every two setups (median and minimum; 1 = the same order, none = fewer than two models), the share of model pairs whose order flips between some two setups, and how many models some setup ranks first (at most five named).".to_string(),
        summary,
        more,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Vec<String> {
        [
            "source",
            "label",
            "model",
            "arm",
            "test",
            "dimension",
            "mean_z",
            "lowest_z",
            "highest_z",
            "error_bar",
            "error_bar_from",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    fn row(model: &str, mean: f64) -> Vec<String> {
        [
            "s",
            "simulated",
            model,
            "api",
            "t",
            "d",
            &format!("{mean:.6}"),
            &format!("{:.6}", mean - 1.0),
            &format!("{:.6}", mean + 1.0),
            "0.500000",
            "protocol",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    #[test]
    fn a_scale_of_many_models_keeps_its_ends_in_any_row_order() {
        let draw = |rev: bool| {
            let mut b = BarsBuilder::new(&header()).unwrap();
            let mut ids: Vec<usize> = (0..500).collect();
            if rev {
                ids.reverse();
            }
            for i in ids {
                b.push(&row(&format!("m{i:03}"), i as f64 / 100.0)).unwrap();
            }
            b.figures()
        };
        let f = draw(false);
        assert_eq!(f, draw(true), "the same figure whatever the row order");
        assert_eq!(f.len(), 1);
        let svg = &f[0];
        assert!(svg.contains("500 models in all; shown: the 20 with the highest and the 20 with the lowest mean (error_bars.csv)"), "{svg}");
        assert!(svg.contains("... 460 models not shown ..."));
        assert_eq!(svg.matches("<circle").count(), 2 * BAR_SIDE);
        assert!(svg.contains(">m499 (api)</text>") && svg.contains(">m000 (api)</text>"));
        assert!(!svg.contains(">m250 (api)</text>"));
        assert!(svg.find(">m499 (api)<").unwrap() < svg.find(">m000 (api)<").unwrap());
        let mut bad = header();
        bad[6] = "mean".into();
        assert!(BarsBuilder::new(&bad).unwrap_err().contains("`mean_z`"));
        let mut b = BarsBuilder::new(&header()).unwrap();
        let mut r = row("m", 0.0);
        r[9] = "x".into();
        assert!(b.push(&r).unwrap_err().contains("not a number"));
    }

    #[test]
    fn ranking_summary_names_at_most_five_leaders() {
        let t = crate::test_tables::table(
            "ranking",
            &[
                "source",
                "arm",
                "test",
                "dimension",
                "models",
                "tau_median",
                "tau_min",
                "flipped_share",
                "leaders",
                "leading_models",
                "every_model_can_lead",
            ],
            &[
                &[
                    "s",
                    "api",
                    "t",
                    "d",
                    "7",
                    "0.5",
                    "-0.1",
                    "0.3",
                    "7",
                    "a b c d e f g",
                    "true",
                ],
                &["s", "local", "t", "d", "1", "", "", "", "1", "a", "true"],
            ],
        );
        let s = ranking_summary(&t.head).unwrap();
        assert_eq!(s.rows[0][8], "7 (a, b, c, d, e and 2 more; every model)");
        assert_eq!(s.rows[1][5], "none");
    }
}
