//! Scorer parity: every human row is reproduced exactly, set aside for a demonstrated
//! reason, or counted as unexplained.
//!
//! A row is *reproduced* when the current key gives every stored `score_<dim>`, the stored
//! `top_result` and (when present) every value of the stored `score_percentiles` JSON.
//! Otherwise, in this order:
//! 1. *set aside, older key version*: the first version of the legacy key file that
//!    reproduces the row exactly in the same sense;
//! 2. *set aside, scores inconsistent with any key*: shown by the row itself, either another
//!    row has the identical answer vector but different stored scores or `top_result` (no
//!    deterministic scorer gives both), or a stored value is not `round(100 * k / max)` for
//!    any integer number of points `k` on the dimension's scale (no key with weights 1 reaches
//!    it);
//! 3. *unexplained* ("mismatch, reason unknown"): counted, and allowed only if listed in the
//!    reviewed allow-list.

use crate::human::HumanRow;
use crate::key::{Mutation, ScoringKey};
use crate::scorer::{score, ScaleScores};
use crate::ScoreError;
use protospread_core::instruments::Instrument;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Category of a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Category {
    /// The key and scorer give the site's result.
    Reproduced,
    /// Differs, with a reason on the allowlist.
    SetAside,
    /// Differs without a known reason.
    Unexplained,
}

impl Category {
    /// Spelling in the parity tables.
    pub fn as_str(&self) -> &'static str {
        match self {
            Category::Reproduced => "reproduced",
            Category::SetAside => "set_aside",
            Category::Unexplained => "unexplained",
        }
    }
}

/// Reason text of reproduced rows.
pub const REASON_CURRENT: &str = "reproduced exactly by the current key";
/// Reason text of inconsistent rows.
pub const REASON_INCONSISTENT: &str =
    "scores inconsistent with any key (identical answers scored differently, or a value no key reaches)";
/// Reason text of unexplained rows.
pub const REASON_UNKNOWN: &str = "mismatch, reason unknown";

/// The classification of one human row.
#[derive(Debug, Clone)]
pub struct RowClass {
    /// Instrument name.
    pub instrument: String,
    /// Row id in the human data.
    pub id: i64,
    /// How the row was classified.
    pub category: Category,
    /// One of a few fixed texts per instrument (summary key).
    pub reason: String,
    /// Row-specific evidence (which rows share the answers, which value is unreachable...).
    pub detail: String,
    /// What the current key gives.
    pub computed: ScaleScores,
    /// True when every stored score equals the current key's value (top_result aside).
    pub scores_equal: bool,
    /// The allow-list note, for unexplained rows listed there.
    pub allowlisted: Option<String>,
}

/// Does `key` reproduce `row` exactly? Returns the current scores too.
fn reproduces(
    key: &ScoringKey,
    inst: &Instrument,
    row: &HumanRow,
    origin: &Path,
) -> Result<(bool, bool, ScaleScores), ScoreError> {
    let s = score(key, inst.name, &row.answer_vector())?;
    let scores_equal = s
        .dims
        .iter()
        .zip(&row.scores)
        .all(|(d, &st)| d.value == Some(f64::from(st)));
    let mut all = scores_equal && s.top_result.as_deref() == Some(row.top_result.as_str());
    if all {
        if let Some(p) = &row.percentiles {
            let pct = parse_percentiles(p, inst, row.id, origin)?;
            all = s.dims.iter().zip(&pct).all(|(d, &v)| d.percent == Some(v));
        }
    }
    Ok((all, scores_equal, s))
}

/// The stored `score_percentiles` JSON object, one number per dimension.
fn parse_percentiles(
    text: &str,
    inst: &Instrument,
    id: i64,
    origin: &Path,
) -> Result<Vec<f64>, ScoreError> {
    let bad = |m: String| {
        ScoreError::file(
            origin,
            format!("row id {id}, column score_percentiles: {m}"),
        )
    };
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| bad(format!("not JSON: {e}")))?;
    inst.dimensions
        .iter()
        .map(|d| {
            v.get(d)
                .and_then(|x| x.as_f64())
                .ok_or_else(|| bad(format!("no number for `{d}`")))
        })
        .collect()
}

/// Classify every row of one instrument. `legacy` versions are tried in order.
pub fn classify(
    inst: &Instrument,
    rows: &[HumanRow],
    key: &ScoringKey,
    legacy: &[ScoringKey],
    allowlist: &Allowlist,
    origin: &Path,
) -> Result<Vec<RowClass>, ScoreError> {
    // Answer vector -> the distinct stored results it was given, with row ids.
    let mut by_answers: BTreeMap<&[u8], Vec<&HumanRow>> = BTreeMap::new();
    for r in rows {
        by_answers.entry(&r.answers).or_default().push(r);
    }
    let tk = key.test(inst.name).ok_or_else(|| ScoreError::Score {
        test: inst.name.into(),
        message: "not in the key".into(),
    })?;
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let (ok, scores_equal, computed) = reproduces(key, inst, row, origin)?;
        let (category, reason, detail) = if ok {
            (
                Category::Reproduced,
                REASON_CURRENT.to_string(),
                String::new(),
            )
        } else if let Some(v) = legacy.iter().try_fold(None, |found, k| {
            if found.is_some() || k.test(inst.name).is_none() {
                return Ok::<_, ScoreError>(found);
            }
            Ok(reproduces(k, inst, row, origin)?.0.then_some(k))
        })? {
            (
                Category::SetAside,
                format!(
                    "reproduced exactly by older key version {} ({})",
                    v.version,
                    file_name(&v.source)
                ),
                String::new(),
            )
        } else {
            let mut ev = Vec::new();
            let twins: Vec<String> = by_answers[row.answers.as_slice()]
                .iter()
                .filter(|o| {
                    o.id != row.id && (o.scores != row.scores || o.top_result != row.top_result)
                })
                .map(|o| o.id.to_string())
                .collect();
            if !twins.is_empty() {
                ev.push(format!(
                    "same answers as row(s) {} with different stored scores",
                    twins.join(", ")
                ));
            }
            for ((di, d), &st) in tk.dims.iter().enumerate().zip(&row.scores) {
                let items: Vec<_> = tk.items.iter().filter(|it| it.dim == di).collect();
                let max: u32 = items
                    .iter()
                    .map(|it| u32::from(it.scale_max - it.scale_min))
                    .sum();
                let reachable = (0..=max)
                    .any(|k| (f64::from(k) / f64::from(max) * 100.0).round() == f64::from(st));
                if !reachable {
                    ev.push(format!(
                        "score_{}={st} is not round(100*k/{max}) for any integer k",
                        d.name
                    ));
                }
            }
            if ev.is_empty() {
                (
                    Category::Unexplained,
                    REASON_UNKNOWN.to_string(),
                    String::new(),
                )
            } else {
                (
                    Category::SetAside,
                    REASON_INCONSISTENT.to_string(),
                    ev.join("; "),
                )
            }
        };
        let allowlisted = match category {
            Category::Unexplained => allowlist.note(inst.name, row.id).map(str::to_string),
            _ => None,
        };
        out.push(RowClass {
            instrument: inst.name.to_string(),
            id: row.id,
            category,
            reason,
            detail,
            computed,
            scores_equal,
            allowlisted,
        });
    }
    Ok(out)
}

fn file_name(p: &Path) -> String {
    let name = p
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("data/{name}")
}

/// Per instrument and (category, reason): number of rows. Reproduced and unexplained are
/// always present, with 0 when empty, so an unexplained count is never hidden.
pub fn summarize(classes: &[RowClass]) -> BTreeMap<String, BTreeMap<(Category, String), usize>> {
    let mut out: BTreeMap<String, BTreeMap<(Category, String), usize>> = BTreeMap::new();
    for c in classes {
        let m = out.entry(c.instrument.clone()).or_default();
        m.entry((Category::Reproduced, REASON_CURRENT.into()))
            .or_insert(0);
        m.entry((Category::Unexplained, REASON_UNKNOWN.into()))
            .or_insert(0);
        *m.entry((c.category, c.reason.clone())).or_insert(0) += 1;
    }
    out
}

/// The reviewed allow-list: unexplained rows that may stay unexplained, each with a note.
/// CSV columns `instrument,id,note`.
#[derive(Debug, Clone, Default)]
pub struct Allowlist {
    /// Reason by (instrument, row id).
    pub entries: BTreeMap<(String, i64), String>,
    /// The allowlist file.
    pub source: PathBuf,
}

impl Allowlist {
    /// Load the allow-list; every row needs a known study instrument, an integer id and a
    /// non-empty note.
    pub fn load(path: &Path) -> Result<Allowlist, ScoreError> {
        let bytes = fs_err::read(path)?;
        let mut rdr = csv::ReaderBuilder::new().from_reader(bytes.as_slice());
        let h = rdr
            .headers()
            .map_err(|e| ScoreError::file(path, format!("header: {e}")))?
            .clone();
        if h.iter().collect::<Vec<_>>() != ["instrument", "id", "note"] {
            return Err(ScoreError::cell(
                path,
                1,
                "-",
                "header must be instrument,id,note",
            ));
        }
        let mut entries = BTreeMap::new();
        for rec in rdr.records() {
            let rec = rec.map_err(|e| {
                let line = e.position().map(|p| p.line() as usize).unwrap_or(0);
                ScoreError::cell(path, line, "-", format!("malformed CSV row: {e}"))
            })?;
            let line = rec.position().map(|p| p.line() as usize).unwrap_or(0);
            let inst = &rec[0];
            if !protospread_core::instruments::study().any(|i| i.name == inst) {
                return Err(ScoreError::cell(
                    path,
                    line,
                    "instrument",
                    format!("`{inst}` is not a study instrument"),
                ));
            }
            let id: i64 = rec[1].parse().map_err(|_| {
                ScoreError::cell(path, line, "id", format!("`{}` is not an integer", &rec[1]))
            })?;
            if rec[2].trim().is_empty() {
                return Err(ScoreError::cell(
                    path,
                    line,
                    "note",
                    "a reviewed row needs a note",
                ));
            }
            if entries
                .insert((inst.to_string(), id), rec[2].to_string())
                .is_some()
            {
                return Err(ScoreError::cell(
                    path,
                    line,
                    "id",
                    format!("{inst} {id} listed twice"),
                ));
            }
        }
        Ok(Allowlist {
            entries,
            source: path.to_path_buf(),
        })
    }

    /// The reason a row is set aside, if listed.
    pub fn note(&self, instrument: &str, id: i64) -> Option<&str> {
        self.entries
            .get(&(instrument.to_string(), id))
            .map(|s| s.as_str())
    }

    /// Entries that are not (or no longer) unexplained rows.
    pub fn stale(&self, classes: &[RowClass]) -> Vec<(String, i64)> {
        let unexplained: BTreeSet<(String, i64)> = classes
            .iter()
            .filter(|c| c.category == Category::Unexplained)
            .map(|c| (c.instrument.clone(), c.id))
            .collect();
        self.entries
            .keys()
            .filter(|k| !unexplained.contains(*k))
            .cloned()
            .collect()
    }
}

/// The result of mutating one item of the key.
#[derive(Debug, Clone, PartialEq)]
pub struct MutationResult {
    /// Test name.
    pub test: String,
    /// 0-based item index.
    pub item: usize,
    /// Dimension of the item.
    pub dimension: String,
    /// Rows of the test the current key reproduces.
    pub reproduced: usize,
    /// Of those, rows no longer reproduced when the item's weight is doubled.
    pub weight_broken: usize,
    /// Of those, rows no longer reproduced when the item's reverse flag is flipped.
    pub reverse_broken: usize,
}

/// The weight change of the mutation check: the item's weight is doubled.
pub const WEIGHT_FACTOR: f64 = 2.0;

/// Mutate one item (weight doubled; separately, reverse flipped) and count how many of the
/// `reproduced` rows then disagree.
pub fn mutate(
    key: &ScoringKey,
    inst: &Instrument,
    item: usize,
    reproduced: &[&HumanRow],
    origin: &Path,
) -> Result<MutationResult, ScoreError> {
    let bad = || ScoreError::Score {
        test: inst.name.into(),
        message: format!("no item {item} in the key"),
    };
    let tk = key.test(inst.name).ok_or_else(bad)?;
    let dim = tk.dims[tk.items.get(item.wrapping_sub(1)).ok_or_else(bad)?.dim]
        .name
        .clone();
    let mut broken = [0usize; 2];
    for (b, m) in broken
        .iter_mut()
        .zip([Mutation::ScaleWeight(WEIGHT_FACTOR), Mutation::FlipReverse])
    {
        let k = key.mutated(inst.name, item, m).ok_or_else(bad)?;
        for r in reproduced {
            if !reproduces(&k, inst, r, origin)?.0 {
                *b += 1;
            }
        }
    }
    Ok(MutationResult {
        test: inst.name.to_string(),
        item,
        dimension: dim,
        reproduced: reproduced.len(),
        weight_broken: broken[0],
        reverse_broken: broken[1],
    })
}
