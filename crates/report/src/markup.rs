//! Text in HTML and SVG: escaping, and the width a label takes in the figures' font.

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

/// Estimated width in SVG units of `text` in the figures' font of class `class`: `t` (bold
/// 13px sans-serif) or `a` (11px sans-serif). A fixed width per character of 0.6 em, wider
/// than the average glyph of the common sans-serif faces, so that a text sized by this
/// estimate is not cut by the figure's edge.
pub(crate) fn text_width(text: &str, class: &str) -> f64 {
    let em = if class == "t" { 13.0 } else { 11.0 };
    text.chars().count() as f64 * 0.6 * em
}
