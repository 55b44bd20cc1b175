//! Any Parquet table to text: canonical CSV and Markdown, with ONE float formatting rule.
//!
//! The rule ([`push_float`]): a finite float is written with exactly six decimals
//! (`format!("{:.6}")`, round-half-to-even on the binary value as Rust's formatter does), a
//! negative zero after rounding is written as `0.000000`, infinities as `inf` / `-inf`, NaN as
//! `NaN`. Integers are written in full, booleans as `true` / `false`, a null as an empty field.
//! Every table of every study goes through this one function, so a figure is the same string
//! in the CSV, the Markdown and the HTML.

/// The one float formatting rule of every table (see the module documentation), as a string.
#[cfg(test)]
pub(crate) fn fmt_float(x: f64) -> String {
    let mut s = String::new();
    push_float(&mut s, x);
    s
}

/// The one float formatting rule of every table (see the module documentation), appended to
/// `out`.
pub(crate) fn push_float(out: &mut String, x: f64) {
    use std::fmt::Write;
    if x.is_nan() {
        out.push_str("NaN");
    } else if x.is_infinite() {
        out.push_str(if x > 0.0 { "inf" } else { "-inf" });
    } else {
        let start = out.len();
        let _ = write!(out, "{x:.6}");
        if &out[start..] == "-0.000000" {
            out.truncate(start);
            out.push_str("0.000000");
        }
    }
}

/// A table as strings: the header, the rows, and which columns are numeric (right-aligned).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextTable {
    /// Column names.
    pub header: Vec<String>,
    /// Whether each column is numeric (right-aligned).
    pub numeric: Vec<bool>,
    /// Cells, row by row.
    pub rows: Vec<Vec<String>>,
}

impl TextTable {
    /// Index of a column by name.
    pub fn col(&self, name: &str) -> Option<usize> {
        self.header.iter().position(|h| h == name)
    }

    /// The indices of the columns `names` of this table (table `name`), or an error naming
    /// the missing column.
    pub(crate) fn cols<const N: usize>(
        &self,
        name: &str,
        names: [&str; N],
    ) -> Result<[usize; N], String> {
        positions(&self.header, names, |n| {
            format!("table {name} has no column `{n}`")
        })
    }
}

/// The columns that say which model and test a row of the `cells` and `error_bars` tables is
/// about, as the figures read them.
pub(crate) const MODEL_TEST: [&str; 5] = ["source", "label", "model", "arm", "test"];

/// The positions of the columns `names` in `header`; `missing` words the error for a column
/// that is not there.
pub(crate) fn positions<const N: usize>(
    header: &[String],
    names: [&str; N],
    missing: impl Fn(&str) -> String,
) -> Result<[usize; N], String> {
    let mut out = [0; N];
    for (o, n) in out.iter_mut().zip(names) {
        *o = header
            .iter()
            .position(|h| h == n)
            .ok_or_else(|| missing(n))?;
    }
    Ok(out)
}

/// The positions of the [`MODEL_TEST`] columns and of the columns `values` in the header of
/// the table `table` that a figure reads; an error names the table and the missing column.
pub(crate) fn figure_columns<const N: usize>(
    table: &str,
    header: &[String],
    values: [&str; N],
) -> Result<([usize; 5], [usize; N]), String> {
    let missing = |n: &str| format!("{table} table has no column `{n}`");
    Ok((
        positions(header, MODEL_TEST, missing)?,
        positions(header, values, missing)?,
    ))
}

/// The canonical CSV writer: RFC 4180 quoting where needed, `\n` line ends.
pub(crate) fn csv_writer<W: std::io::Write>(w: W) -> csv::Writer<W> {
    csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .buffer_capacity(1 << 16)
        .from_writer(w)
}

/// Parse canonical CSV back (for comparisons in `verify`).
pub(crate) fn parse_csv(bytes: &[u8]) -> Result<Vec<Vec<String>>, csv::Error> {
    let mut r = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(bytes);
    let mut out = Vec::new();
    for rec in r.records() {
        out.push(rec?.iter().map(str::to_string).collect());
    }
    Ok(out)
}

fn md_escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('|', "\\|")
        .replace('\n', " ")
}

/// A GitHub-flavoured Markdown table (numeric columns right-aligned). A table without rows
/// is followed by the line `(no rows)`.
pub fn to_markdown(t: &TextTable) -> String {
    let mut s = String::new();
    s.push('|');
    for h in &t.header {
        s.push(' ');
        s.push_str(&md_escape(h));
        s.push_str(" |");
    }
    s.push_str("\n|");
    for n in &t.numeric {
        s.push_str(if *n { "---:|" } else { "---|" });
    }
    s.push('\n');
    for r in &t.rows {
        s.push('|');
        for c in r {
            s.push(' ');
            s.push_str(&md_escape(c));
            s.push_str(" |");
        }
        s.push('\n');
    }
    if t.rows.is_empty() {
        s.push_str("\n(no rows)\n");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_rule() {
        assert_eq!(fmt_float(2.885), "2.885000");
        assert_eq!(fmt_float(-0.0000001), "0.000000");
        assert_eq!(fmt_float(-0.0), "0.000000");
        assert_eq!(fmt_float(f64::INFINITY), "inf");
        assert_eq!(fmt_float(f64::NEG_INFINITY), "-inf");
        assert_eq!(fmt_float(f64::NAN), "NaN");
        assert_eq!(fmt_float(1.0 / 3.0), "0.333333");
    }

    fn to_csv(t: &TextTable) -> Vec<u8> {
        let mut w = csv_writer(Vec::new());
        w.write_record(&t.header).unwrap();
        for r in &t.rows {
            w.write_record(r).unwrap();
        }
        w.into_inner().unwrap()
    }

    #[test]
    fn csv_quotes_and_roundtrips() {
        let t = TextTable {
            header: vec!["a".into(), "b".into()],
            numeric: vec![false, true],
            rows: vec![
                vec!["x, \"y\"".into(), "1".into()],
                vec!["".into(), "2".into()],
            ],
        };
        let bytes = to_csv(&t);
        assert_eq!(
            String::from_utf8(bytes.clone()).unwrap(),
            "a,b\n\"x, \"\"y\"\"\",1\n,2\n"
        );
        let back = parse_csv(&bytes).unwrap();
        assert_eq!(back[1][0], "x, \"y\"");
        let md = to_markdown(&t);
        assert!(md.starts_with("| a | b |\n|---|---:|\n"), "{md}");
    }
}
