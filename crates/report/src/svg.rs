//! The pieces the page's SVG figures share: escaping, coordinates, ticks, text widths, and the
//! frame of a figure with one row per item (background, grid, row labels, axis title).

use std::fmt::Write;

/// Sources with figures (in every figure section of the page); the figures of further sources
/// are left out (the tables hold them).
pub(crate) const FIGURE_SOURCES: usize = 12;

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
pub(crate) fn c(x: f64) -> String {
    format!("{x:.2}")
}

/// A "nice" tick step (1, 2 or 5 times a power of ten) giving about `n` ticks up to `max`.
pub(crate) fn tick_step(max: f64, n: f64) -> f64 {
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

/// A tick's label, with as many decimals as the step needs.
pub(crate) fn tick_label(v: f64, step: f64) -> String {
    if step >= 1.0 {
        format!("{v:.0}")
    } else if step >= 0.1 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Estimated width in SVG units of `text` in the figures' font of class `class`: `t` (bold
/// 13px sans-serif) or `a` (11px sans-serif). A fixed width per character of 0.6 em, wider
/// than the average glyph of the common sans-serif faces, so that a text sized by this
/// estimate is not cut by the figure's edge.
pub(crate) fn text_width(text: &str, class: &str) -> f64 {
    let em = if class == "t" { 13.0 } else { 11.0 };
    text.chars().count() as f64 * 0.6 * em
}

/// The left margin of a figure whose rows are labelled `labels`: room for the longest.
pub(crate) fn label_margin<'a>(labels: impl IntoIterator<Item = &'a str>) -> f64 {
    let widest = labels
        .into_iter()
        .map(|l| text_width(l, "a"))
        .fold(0.0, f64::max);
    (widest + 16.0).max(90.0)
}

/// The width of a row figure with left margin `ml`, at least `min` and room for a 400-wide
/// plot, the `title` (class `t`), the `lines` under it and the `legend` entries (class `a`),
/// not yet rounded up.
pub(crate) fn row_figure_width<'a>(
    min: f64,
    ml: f64,
    title: &str,
    lines: &[&str],
    legend: impl IntoIterator<Item = &'a str>,
) -> f64 {
    let mut w = min
        .max(ml + 400.0)
        .max(10.0 + text_width(title, "t") + 10.0);
    for l in lines {
        w = w.max(10.0 + text_width(l, "a") + 10.0);
    }
    w.max(
        legend
            .into_iter()
            .map(|t| ml + 14.0 + text_width(t, "a") + 10.0)
            .fold(0.0, f64::max),
    )
}

/// A figure `w` by `h` on a white background, opened; `aria` (already escaped) labels it.
pub(crate) fn open(w: f64, h: f64, aria: &str) -> String {
    format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" aria-label="{aria}"><rect x="0" y="0" width="{w}" height="{h}" fill="#ffffff"/>"##
    )
}

/// A figure's `title` (class `t`, baseline `y`) and the line under it (class `a`).
pub(crate) fn titles(s: &mut String, y: u32, title: &str, sub: &str) {
    let _ = write!(
        s,
        r#"<text x="10" y="{y}" class="t">{}</text><text x="10" y="{}" class="a">{}</text>"#,
        esc(title),
        y + 16,
        esc(sub)
    );
}

/// A legend entry at baseline `ly`: a dot of colour `fill`, then `text`.
pub(crate) fn legend_dot(s: &mut String, ml: f64, ly: f64, fill: &str, text: &str) {
    let _ = write!(
        s,
        r#"<circle cx="{}" cy="{}" r="4" fill="{}"/><text x="{}" y="{}" class="a">{}</text>"#,
        c(ml + 6.0),
        c(ly - 4.0),
        fill,
        c(ml + 14.0),
        c(ly),
        esc(text)
    );
}

/// The plot area of a figure: its left and top margins, its width and its height.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plot {
    pub(crate) ml: f64,
    pub(crate) mt: f64,
    pub(crate) pw: f64,
    pub(crate) ph: f64,
}

impl Plot {
    /// A vertical grid line at `x` of colour `stroke`, with its tick `label` under the plot.
    pub(crate) fn grid_line(&self, s: &mut String, x: f64, stroke: &str, label: &str) {
        let _ = write!(
            s,
            r#"<line x1="{xx}" y1="{}" x2="{xx}" y2="{}" stroke="{}"/><text x="{xx}" y="{}" class="a" text-anchor="middle">{}</text>"#,
            c(self.mt),
            c(self.mt + self.ph),
            stroke,
            c(self.mt + self.ph + 16.0),
            label,
            xx = c(x)
        );
    }

    /// The centre of row `ri` of rows `row` high.
    pub(crate) fn row_centre(&self, ri: usize, row: f64) -> f64 {
        self.mt + row * ri as f64 + row / 2.0
    }

    /// Row `ri` of rows `row` high: shaded when even, and its `label` left of the plot.
    /// Returns the row's centre.
    pub(crate) fn row(&self, s: &mut String, ri: usize, row: f64, label: &str) -> f64 {
        let cy = self.row_centre(ri, row);
        if ri.is_multiple_of(2) {
            let _ = write!(
                s,
                r##"<rect x="{}" y="{}" width="{}" height="{}" fill="#f6f6f6"/>"##,
                c(self.ml),
                c(cy - row / 2.0),
                c(self.pw),
                c(row)
            );
        }
        self.row_label(s, cy, label);
        cy
    }

    /// A row's `label`, right-aligned left of the plot, for the row centred at `cy`.
    pub(crate) fn row_label(&self, s: &mut String, cy: f64, label: &str) {
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" class="a" text-anchor="end">{}</text>"#,
            c(self.ml - 6.0),
            c(cy + 4.0),
            esc(label)
        );
    }

    /// The frame around the plot and the `axis` title under it; closes the figure of height
    /// `h`.
    pub(crate) fn close(&self, s: &mut String, h: f64, axis: &str) {
        let _ = write!(
            s,
            r##"<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#888"/><text x="{}" y="{}" class="a" text-anchor="middle">{}</text></svg>"##,
            c(self.ml),
            c(self.mt),
            c(self.pw),
            c(self.ph),
            c(self.ml + self.pw / 2.0),
            c(h - 8.0),
            esc(axis)
        );
    }
}
