//! The scoring key: which item counts toward which dimension, how, and how the result is
//! ranked.
//!
//! File format (CSV, header required, columns in any order):
//!
//! | column | meaning |
//! |---|---|
//! | `test` | instrument name (`big_five`, `riasec`, `dark_triad`, `multiple_intelligences`) |
//! | `item` | 1-based item number (`q<item>` in the human data) |
//! | `dimension` | one of the instrument's `score_<dim>` names |
//! | `reverse` | `0` or `1`; a reversed item scores `scale_max - answer` |
//! | `weight` | positive number multiplying the item's points |
//! | `scale_min`, `scale_max` | the answer scale (human data: 0 and 4) |
//! | `tie_rank` | the dimension's place in the `top_result` tie order (1 wins ties); the same for every item of a dimension |
//! | `top_n` | how many dimensions `top_result` names (1, or 3 for an old RIASEC code); the same for every item of a test |
//! | `version` | optional; names a key version (legacy file only) |
//! | `unit` | optional; `percent` (default) or `raw` (old RIASEC: the raw point sum) |
//! | `max_points` | optional; overrides the dimension's maximum (an old RIASEC bug used 20) |
//!
//! The main key ([`ScoringKey::load`]) must hold exactly the 168 items of the four study
//! instruments, each once. Every malformed cell is an error naming file, line and column.

use crate::human::{csv_rows, open_csv};
use crate::ScoreError;
use protospread_core::{Instrument, ItemKind};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What a dimension's value is expressed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// `round(points / max_points * 100)`, rounding half up, on f64 arithmetic.
    Percent,
    /// The raw point sum (only the oldest RIASEC version stored this).
    Raw,
}

/// One item of a test's key.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyItem {
    /// 1-based item number.
    pub item: usize,
    /// Index into [`TestKey::dims`].
    pub dim: usize,
    /// Reverse-keyed item.
    pub reverse: bool,
    /// Weight of the item in its dimension.
    pub weight: f64,
    /// Lowest option value.
    pub scale_min: u8,
    /// Highest option value.
    pub scale_max: u8,
}

/// One dimension of a test's key.
#[derive(Debug, Clone, PartialEq)]
pub struct DimRule {
    /// Dimension name.
    pub name: String,
    /// Place in the tie order of `top_result`: the lower rank wins a tie.
    pub tie_rank: u32,
    /// Overrides the maximum number of points (sum of weight x scale width) when set.
    pub max_points: Option<f64>,
}

/// The key of one test: items in item order, dimensions in the instrument's column order.
#[derive(Debug, Clone, PartialEq)]
pub struct TestKey {
    /// Test name.
    pub test: String,
    /// Items in human order.
    pub items: Vec<KeyItem>,
    /// Dimensions and how they are scored.
    pub dims: Vec<DimRule>,
    /// Dimensions in the reported top result.
    pub top_n: usize,
    /// Unit of the scores.
    pub unit: Unit,
}

/// A scoring key: one version, one [`TestKey`] per test it covers.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoringKey {
    /// `current` for the main key, the `version` column for older versions.
    pub version: String,
    /// The file it was read from.
    pub source: PathBuf,
    /// Key of every test, by name.
    pub tests: BTreeMap<String, TestKey>,
}

/// A single-item change of a key, for the mutation check.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mutation {
    /// Multiply the item's weight by this factor.
    ScaleWeight(f64),
    /// Flip the item's reverse flag.
    FlipReverse,
}

const REQUIRED: [&str; 9] = [
    "test",
    "item",
    "dimension",
    "reverse",
    "weight",
    "scale_min",
    "scale_max",
    "tie_rank",
    "top_n",
];
const OPTIONAL: [&str; 3] = ["version", "unit", "max_points"];

/// Number of rows of the main key: the items of the four study instruments.
pub(crate) const MAIN_KEY_ROWS: usize = 168;

impl ScoringKey {
    /// Load the main key: exactly one version holding all 168 items of the four study
    /// instruments.
    pub fn load(path: &Path) -> Result<ScoringKey, ScoreError> {
        let mut versions = load_versions_inner(path)?;
        if versions.len() != 1 {
            let names: Vec<_> = versions.iter().map(|k| k.version.as_str()).collect();
            return Err(ScoreError::file(
                path,
                format!(
                    "expected one key version, found {}: {}",
                    names.len(),
                    names.join(", ")
                ),
            ));
        }
        let key = versions.remove(0);
        let rows: usize = key.tests.values().map(|t| t.items.len()).sum();
        let expected: Vec<String> = protospread_core::study_instruments()
            .map(|i| format!("{} {}", i.name, i.items))
            .collect();
        for inst in protospread_core::study_instruments() {
            if !key.tests.contains_key(inst.name) {
                return Err(ScoreError::file(
                    path,
                    format!(
                        "{rows} rows, expected {MAIN_KEY_ROWS} ({}): test {} has no rows",
                        expected.join(", "),
                        inst.name
                    ),
                ));
            }
        }
        if rows != MAIN_KEY_ROWS {
            return Err(ScoreError::file(
                path,
                format!(
                    "{rows} rows, expected {MAIN_KEY_ROWS} ({})",
                    expected.join(", ")
                ),
            ));
        }
        Ok(key)
    }

    /// Load a file of key versions (e.g. `data/scoring_key_legacy.csv`), in the order the
    /// versions first appear. Each version must cover every item of each test it names.
    pub fn load_versions(path: &Path) -> Result<Vec<ScoringKey>, ScoreError> {
        load_versions_inner(path)
    }

    /// The key of one test.
    pub fn test(&self, test: &str) -> Option<&TestKey> {
        self.tests.get(test)
    }

    /// A copy with one item changed.
    pub fn mutated(&self, test: &str, item: usize, m: Mutation) -> Option<ScoringKey> {
        let mut k = self.clone();
        let it = k.tests.get_mut(test)?.items.get_mut(item.checked_sub(1)?)?;
        match m {
            Mutation::ScaleWeight(f) => it.weight *= f,
            Mutation::FlipReverse => it.reverse = !it.reverse,
        }
        Some(k)
    }
}

/// One parsed row before grouping.
struct Row {
    line: usize,
    version: String,
    inst: &'static Instrument,
    item: usize,
    dim: usize,
    reverse: bool,
    weight: f64,
    scale_min: u8,
    scale_max: u8,
    tie_rank: u32,
    top_n: usize,
    unit: Unit,
    max_points: Option<f64>,
}

fn load_versions_inner(path: &Path) -> Result<Vec<ScoringKey>, ScoreError> {
    // A header row and every row as long as it (the reader's defaults).
    let (mut rdr, header) = open_csv(path)?;
    let col = columns(path, &header)?;
    let mut rows = Vec::new();
    for rec in csv_rows(path, &mut rdr) {
        let (line, rec) = rec?;
        let cells = Cells {
            path,
            line,
            col: &col,
            rec: &rec,
        };
        rows.push(cells.row()?);
    }
    if rows.is_empty() {
        return Err(ScoreError::file(path, "no rows"));
    }
    group(path, rows)
}

/// The position of every column of the header: each known, none twice, every required one.
fn columns(
    path: &Path,
    header: &csv::StringRecord,
) -> Result<BTreeMap<&'static str, usize>, ScoreError> {
    let mut col: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, h) in header.iter().enumerate() {
        if !REQUIRED.contains(&h) && !OPTIONAL.contains(&h) {
            return Err(ScoreError::cell(
                path,
                1,
                h,
                format!(
                    "unknown column (expected {} and optionally {})",
                    REQUIRED.join(","),
                    OPTIONAL.join(",")
                ),
            ));
        }
        let name: &'static str = REQUIRED
            .iter()
            .chain(OPTIONAL.iter())
            .find(|c| **c == h)
            .copied()
            .expect("checked above");
        if col.insert(name, i).is_some() {
            return Err(ScoreError::cell(path, 1, h, "column given twice"));
        }
    }
    for r in REQUIRED {
        if !col.contains_key(r) {
            return Err(ScoreError::cell(path, 1, r, "missing column"));
        }
    }
    Ok(col)
}

/// One record of the key file, read cell by cell; an error names file, line and column.
struct Cells<'a> {
    path: &'a Path,
    line: usize,
    col: &'a BTreeMap<&'static str, usize>,
    rec: &'a csv::StringRecord,
}

impl Cells<'_> {
    /// Column `c`'s cell, trimmed; empty when the file has no such (optional) column.
    fn cell(&self, c: &str) -> &str {
        self.col
            .get(c)
            .map(|&i| self.rec.get(i).unwrap_or("").trim())
            .unwrap_or("")
    }

    fn err(&self, c: &str, m: String) -> ScoreError {
        ScoreError::cell(self.path, self.line, c, m)
    }

    /// Column `c` parsed as a `T` for which `ok` holds; otherwise an error saying that the
    /// cell is not `what`.
    fn num<T: std::str::FromStr>(
        &self,
        c: &str,
        ok: impl Fn(&T) -> bool,
        what: &str,
    ) -> Result<T, ScoreError> {
        parse_num(self.cell(c))
            .filter(ok)
            .ok_or_else(|| self.err(c, format!("`{}` is not {what}", self.cell(c))))
    }

    fn row(&self) -> Result<Row, ScoreError> {
        let test = self.cell("test");
        let inst = protospread_core::instrument_by_name(test)
            .filter(|i| i.item_kind == ItemKind::Int)
            .ok_or_else(|| self.err("test", format!("unknown test `{test}`")))?;
        let item: usize = self.num(
            "item",
            |n| (1..=inst.items).contains(n),
            &format!("an item number 1..={}", inst.items),
        )?;
        let dname = self.cell("dimension");
        let dim = inst
            .dimensions
            .iter()
            .position(|d| *d == dname)
            .ok_or_else(|| {
                self.err(
                    "dimension",
                    format!(
                        "unknown dimension `{dname}` for {test} (expected one of {})",
                        inst.dimensions.join(", ")
                    ),
                )
            })?;
        let reverse = match self.cell("reverse") {
            "0" => false,
            "1" => true,
            o => return Err(self.err("reverse", format!("`{o}` is not 0 or 1"))),
        };
        let positive = |w: &f64| w.is_finite() && *w > 0.0;
        let weight: f64 = self.num("weight", positive, "a positive number")?;
        let scale_min: u8 = self.num("scale_min", |_| true, "an integer 0..=255")?;
        let scale_max: u8 = self.num(
            "scale_max",
            |m| *m > scale_min,
            "an integer above scale_min",
        )?;
        let tie_rank: u32 = self.num("tie_rank", |r| *r >= 1, "a positive integer")?;
        let dims = inst.dimensions.len();
        let top_n: usize = self.num("top_n", |n| (1..=dims).contains(n), &format!("1..={dims}"))?;
        let unit = match self.cell("unit") {
            "" | "percent" => Unit::Percent,
            "raw" => Unit::Raw,
            o => return Err(self.err("unit", format!("`{o}` is not `percent` or `raw`"))),
        };
        let max_points = match self.cell("max_points") {
            "" => None,
            _ => Some(self.num("max_points", positive, "a positive number")?),
        };
        let version = match self.cell("version") {
            "" => "current".to_string(),
            v => v.to_string(),
        };
        Ok(Row {
            line: self.line,
            version,
            inst,
            item,
            dim,
            reverse,
            weight,
            scale_min,
            scale_max,
            tie_rank,
            top_n,
            unit,
            max_points,
        })
    }
}

fn parse_num<T: std::str::FromStr>(s: &str) -> Option<T> {
    s.parse().ok()
}

/// Group rows into versions and tests, checking completeness and per-test/per-dimension
/// constants.
fn group(path: &Path, rows: Vec<Row>) -> Result<Vec<ScoringKey>, ScoreError> {
    let n_rows = rows.len();
    let mut order: Vec<String> = Vec::new();
    // version -> test -> item -> row
    let mut by: BTreeMap<String, BTreeMap<&'static str, BTreeMap<usize, Row>>> = BTreeMap::new();
    for r in rows {
        if !order.contains(&r.version) {
            order.push(r.version.clone());
        }
        let items = by
            .entry(r.version.clone())
            .or_default()
            .entry(r.inst.name)
            .or_default();
        if let Some(prev) = items.get(&r.item) {
            return Err(ScoreError::cell(
                path,
                r.line,
                "item",
                format!(
                    "duplicate item {} {} (also on line {})",
                    r.inst.name, r.item, prev.line
                ),
            ));
        }
        items.insert(r.item, r);
    }
    let mut out = Vec::new();
    for v in order {
        let mut tests = BTreeMap::new();
        for (test, items) in by.remove(&v).unwrap_or_default() {
            let key = test_key(path, n_rows, &v, test, items)?;
            tests.insert(test.to_string(), key);
        }
        out.push(ScoringKey {
            version: v,
            source: path.to_path_buf(),
            tests,
        });
    }
    Ok(out)
}

/// The key of one test of version `v`, from its rows by item, every item present.
fn test_key(
    path: &Path,
    n_rows: usize,
    v: &str,
    test: &'static str,
    items: BTreeMap<usize, Row>,
) -> Result<TestKey, ScoreError> {
    let inst = protospread_core::instrument_by_name(test).expect("validated");
    if let Some(missing) = (1..=inst.items).find(|i| !items.contains_key(i)) {
        return Err(ScoreError::file(
            path,
            format!(
                "{n_rows} rows; version {v}: test {test} has {} of {} items; item {missing} is missing",
                items.len(),
                inst.items
            ),
        ));
    }
    let first = items.values().next().expect("complete");
    let rules = dim_rules(path, v, inst, &items, first)?;
    let key_items = items
        .values()
        .map(|r| KeyItem {
            item: r.item,
            dim: r.dim,
            reverse: r.reverse,
            weight: r.weight,
            scale_min: r.scale_min,
            scale_max: r.scale_max,
        })
        .collect();
    Ok(TestKey {
        test: test.to_string(),
        items: key_items,
        dims: rules,
        top_n: first.top_n,
        unit: first.unit,
    })
}

/// Row `r` has the test's one `top_n` and unit, those of its `first` row.
fn same_per_test(path: &Path, r: &Row, first: &Row) -> Result<(), ScoreError> {
    if r.top_n != first.top_n {
        return Err(ScoreError::cell(
            path,
            r.line,
            "top_n",
            format!(
                "{} differs from {} on line {} (one value per test)",
                r.top_n, first.top_n, first.line
            ),
        ));
    }
    if r.unit != first.unit {
        return Err(ScoreError::cell(
            path,
            r.line,
            "unit",
            format!("differs from line {} (one value per test)", first.line),
        ));
    }
    Ok(())
}

/// The rule of every dimension of a test of version `v`: each row has the test's `top_n` and
/// unit (those of `first`), each dimension has items, one `tie_rank` and `max_points`, and no
/// two dimensions share a `tie_rank`.
fn dim_rules(
    path: &Path,
    v: &str,
    inst: &Instrument,
    items: &BTreeMap<usize, Row>,
    first: &Row,
) -> Result<Vec<DimRule>, ScoreError> {
    let test = inst.name;
    let mut dims: Vec<Option<DimRule>> = vec![None; inst.dimensions.len()];
    for r in items.values() {
        same_per_test(path, r, first)?;
        match &dims[r.dim] {
            None => {
                dims[r.dim] = Some(DimRule {
                    name: inst.dimensions[r.dim].to_string(),
                    tie_rank: r.tie_rank,
                    max_points: r.max_points,
                });
            }
            Some(d) if d.tie_rank != r.tie_rank => {
                return Err(ScoreError::cell(path, r.line, "tie_rank", format!("{} differs from {} given earlier for dimension {} (one value per dimension)", r.tie_rank, d.tie_rank, d.name)));
            }
            Some(d) if d.max_points != r.max_points => {
                return Err(ScoreError::cell(path, r.line, "max_points", format!("differs from the value given earlier for dimension {} (one value per dimension)", d.name)));
            }
            Some(_) => {}
        }
    }
    let mut ranks = std::collections::BTreeSet::new();
    let mut rules = Vec::new();
    for (i, d) in dims.into_iter().enumerate() {
        let d = d.ok_or_else(|| {
            ScoreError::file(
                path,
                format!(
                    "version {v}: test {test}: dimension {} has no items",
                    inst.dimensions[i]
                ),
            )
        })?;
        if !ranks.insert(d.tie_rank) {
            return Err(ScoreError::file(
                path,
                format!(
                    "version {v}: test {test}: tie_rank {} is used by two dimensions",
                    d.tie_rank
                ),
            ));
        }
        rules.push(d);
    }
    Ok(rules)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn main_key_path() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/scoring_key.csv")
    }

    fn write(text: &str) -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("key.csv");
        fs_err::write(&p, text).unwrap();
        (d, p)
    }

    fn err_of(text: &str) -> String {
        let (_d, p) = write(text);
        ScoringKey::load(&p).unwrap_err().to_string()
    }

    fn main_text() -> String {
        fs_err::read_to_string(main_key_path()).unwrap()
    }

    #[test]
    fn main_key_loads() {
        let k = ScoringKey::load(&main_key_path()).unwrap();
        assert_eq!(k.tests.len(), 4);
        assert_eq!(k.tests.values().map(|t| t.items.len()).sum::<usize>(), 168);
    }

    #[test]
    fn legacy_versions_load() {
        let p = main_key_path().with_file_name("scoring_key_legacy.csv");
        let v = ScoringKey::load_versions(&p).unwrap();
        assert!(v.len() >= 2);
    }

    #[test]
    fn dropped_row_is_rejected() {
        let t = main_text();
        let mut lines: Vec<&str> = t.lines().collect();
        lines.pop();
        let e = err_of(&(lines.join("\n") + "\n"));
        assert!(
            e.contains("167 rows") && e.contains("item 40 is missing"),
            "{e}"
        );
        assert!(e.contains("key.csv"), "{e}");
    }

    #[test]
    fn bad_cells_name_line_and_column() {
        let t = main_text();
        let bad_weight = t.replacen("big_five,1,E,0,1,", "big_five,1,E,0,abc,", 1);
        let e = err_of(&bad_weight);
        assert!(e.contains("line 2, column weight"), "{e}");
        let bad_dim = t.replacen("big_five,1,E,", "big_five,1,X,", 1);
        let e = err_of(&bad_dim);
        assert!(
            e.contains("line 2, column dimension") && e.contains("unknown dimension `X`"),
            "{e}"
        );
        let dup = t.replacen("big_five,2,A,", "big_five,1,A,", 1);
        let e = err_of(&dup);
        assert!(
            e.contains("line 3, column item") && e.contains("duplicate item"),
            "{e}"
        );
    }
}
