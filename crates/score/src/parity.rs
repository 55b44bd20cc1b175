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

use crate::human::{csv_rows, open_csv, HumanRow};
use crate::key::{Mutation, ScoringKey};
use crate::scorer::{score, score_dim, ScaleScores};
use crate::ScoreError;
use protospread_core::Instrument;
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
    let mut c = Classifier::new(inst, key, legacy, allowlist, origin)?;
    for r in rows {
        c.first_pass(r)?;
    }
    if c.needs_twins() {
        rows.iter().for_each(|r| c.twin_pass(r));
    }
    rows.iter().map(|r| c.classify(r)).collect()
}

/// Ids of other rows named in a row's "same answers" evidence; beyond this many they are
/// counted, not listed, so a row's detail stays short however often its answers repeat.
pub(crate) const TWINS_LISTED: usize = 20;

/// The rows with one answer vector, grouped by their stored result (scores, top_result):
/// per group, the number of rows and the first [`TWINS_LISTED`] ids in id order.
type TwinGroups = BTreeMap<(Vec<i32>, String), (usize, Vec<i64>)>;

/// Classification of the rows of one instrument in up to three passes over the rows, so the
/// rows can stream (see [`classify`] for the in-memory form):
/// 1. [`Classifier::first_pass`] on every row notes the answer vectors of rows that neither
///    the current nor an older key reproduces (usually none);
/// 2. if there are any ([`Classifier::needs_twins`]), [`Classifier::twin_pass`] on every row
///    keeps the rows with one of those answer vectors;
/// 3. [`Classifier::classify`] on every row.
///
/// Memory is proportional to the rows no key reproduces and their twins, not to all rows.
pub(crate) struct Classifier<'a> {
    inst: &'a Instrument,
    key: &'a ScoringKey,
    legacy: &'a [ScoringKey],
    allowlist: &'a Allowlist,
    origin: &'a Path,
    tk: &'a crate::key::TestKey,
    twins: BTreeMap<Vec<u8>, TwinGroups>,
}

impl<'a> Classifier<'a> {
    /// A classifier for the rows of `inst` from `origin`.
    pub(crate) fn new(
        inst: &'a Instrument,
        key: &'a ScoringKey,
        legacy: &'a [ScoringKey],
        allowlist: &'a Allowlist,
        origin: &'a Path,
    ) -> Result<Self, ScoreError> {
        let tk = key.test(inst.name).ok_or_else(|| ScoreError::Score {
            test: inst.name.into(),
            message: "not in the key".into(),
        })?;
        Ok(Classifier {
            inst,
            key,
            legacy,
            allowlist,
            origin,
            tk,
            twins: BTreeMap::new(),
        })
    }

    /// The first older key version that reproduces `row`.
    fn legacy_for(&self, row: &HumanRow) -> Result<Option<&'a ScoringKey>, ScoreError> {
        for k in self.legacy {
            if k.test(self.inst.name).is_some() && reproduces(k, self.inst, row, self.origin)?.0 {
                return Ok(Some(k));
            }
        }
        Ok(None)
    }

    /// Pass 1: note `row`'s answer vector if no key reproduces it.
    pub(crate) fn first_pass(&mut self, row: &HumanRow) -> Result<(), ScoreError> {
        if !reproduces(self.key, self.inst, row, self.origin)?.0 && self.legacy_for(row)?.is_none()
        {
            self.twins.entry(row.answers.clone()).or_default();
        }
        Ok(())
    }

    /// Whether pass 2 is needed.
    pub(crate) fn needs_twins(&self) -> bool {
        !self.twins.is_empty()
    }

    /// Pass 2: keep `row` if its answer vector was noted in pass 1.
    pub(crate) fn twin_pass(&mut self, row: &HumanRow) {
        if let Some(groups) = self.twins.get_mut(row.answers.as_slice()) {
            let g = groups
                .entry((row.scores.clone(), row.top_result.clone()))
                .or_default();
            g.0 += 1;
            if g.1.len() < TWINS_LISTED {
                g.1.push(row.id);
            }
        }
    }

    /// Pass 3: the class of `row`.
    pub(crate) fn classify(&self, row: &HumanRow) -> Result<RowClass, ScoreError> {
        let (inst, tk) = (self.inst, self.tk);
        let (ok, scores_equal, computed) = reproduces(self.key, inst, row, self.origin)?;
        let (category, reason, detail) = if ok {
            (
                Category::Reproduced,
                REASON_CURRENT.to_string(),
                String::new(),
            )
        } else if let Some(v) = self.legacy_for(row)? {
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
            // Rows with the same answers and a different stored result: every group but the
            // row's own.
            let (mut n, mut ids) = (0usize, Vec::new());
            for ((scores, top), (count, first)) in
                self.twins.get(row.answers.as_slice()).into_iter().flatten()
            {
                if *scores != row.scores || *top != row.top_result {
                    n += count;
                    ids.extend_from_slice(first);
                }
            }
            ids.sort_unstable();
            ids.truncate(TWINS_LISTED);
            if n > 0 {
                let listed: Vec<String> = ids.iter().map(i64::to_string).collect();
                let more = match n - ids.len() {
                    0 => String::new(),
                    k => format!(" and {k} more"),
                };
                ev.push(format!(
                    "same answers as row(s) {}{more} with different stored scores",
                    listed.join(", ")
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
            Category::Unexplained => self.allowlist.note(inst.name, row.id).map(str::to_string),
            _ => None,
        };
        Ok(RowClass {
            instrument: inst.name.to_string(),
            id: row.id,
            category,
            reason,
            detail,
            computed,
            scores_equal,
            allowlisted,
        })
    }
}

fn file_name(p: &Path) -> String {
    let name = p
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("data/{name}")
}

/// Rows per instrument and (category, reason). Reproduced and unexplained are always present,
/// with 0 when empty, so an unexplained count is never hidden.
pub type ParitySummary = BTreeMap<String, BTreeMap<(Category, String), usize>>;

/// Count one row into `summary`.
pub(crate) fn count(summary: &mut ParitySummary, c: &RowClass) {
    let m = summary.entry(c.instrument.clone()).or_default();
    m.entry((Category::Reproduced, REASON_CURRENT.into()))
        .or_insert(0);
    m.entry((Category::Unexplained, REASON_UNKNOWN.into()))
        .or_insert(0);
    *m.entry((c.category, c.reason.clone())).or_insert(0) += 1;
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
        let (mut rdr, h) = open_csv(path)?;
        if h.iter().collect::<Vec<_>>() != ["instrument", "id", "note"] {
            return Err(ScoreError::cell(
                path,
                1,
                "-",
                "header must be instrument,id,note",
            ));
        }
        let mut entries = BTreeMap::new();
        for rec in csv_rows(path, &mut rdr) {
            let (line, rec) = rec?;
            let inst = &rec[0];
            if !protospread_core::study_instruments().any(|i| i.name == inst) {
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
    /// 1-based item number.
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

impl MutationResult {
    /// The result as the JSON object of `score --mutate --json`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({"test": self.test, "item": self.item, "dimension": self.dimension,
            "reproduced": self.reproduced, "weight_factor": MUTATION_WEIGHT_FACTOR,
            "weight_broken": self.weight_broken, "reverse_broken": self.reverse_broken})
    }
}

/// The weight change of the mutation check: the item's weight is doubled.
pub const MUTATION_WEIGHT_FACTOR: f64 = 2.0;

/// Mutate one item (weight doubled; separately, reverse flipped) and count how many of the
/// `reproduced` rows then disagree.
pub(crate) fn mutate(
    key: &ScoringKey,
    inst: &Instrument,
    item: usize,
    reproduced: &[&HumanRow],
    origin: &Path,
) -> Result<MutationResult, ScoreError> {
    let mut sw = MutationSweep::new(key, inst, [item], origin)?;
    sw.add(reproduced)?;
    Ok(sw.finish().remove(0))
}

/// One item's two mutated keys and the rows each breaks.
struct ItemMutations {
    /// 1-based item.
    item: usize,
    dimension: String,
    /// Index of the item's dimension in the test's key.
    dim: usize,
    /// Weight doubled, reverse flipped.
    keys: [ScoringKey; 2],
    broken: [usize; 2],
}

/// The mutation check of several items, counted chunk by chunk of reproduced rows.
pub struct MutationSweep<'a> {
    inst: &'a Instrument,
    origin: &'a Path,
    items: Vec<ItemMutations>,
    reproduced: usize,
}

impl<'a> MutationSweep<'a> {
    /// The check of `items` (1-based) of `inst`'s test in `key`.
    pub fn new(
        key: &ScoringKey,
        inst: &'a Instrument,
        items: impl IntoIterator<Item = usize>,
        origin: &'a Path,
    ) -> Result<Self, ScoreError> {
        let mut out = Vec::new();
        for item in items {
            let bad = || ScoreError::Score {
                test: inst.name.into(),
                message: format!("no item {item} in the key"),
            };
            let tk = key.test(inst.name).ok_or_else(bad)?;
            let d = tk.items.get(item.wrapping_sub(1)).ok_or_else(bad)?.dim;
            let dim = tk.dims[d].name.clone();
            let w = key
                .mutated(
                    inst.name,
                    item,
                    Mutation::ScaleWeight(MUTATION_WEIGHT_FACTOR),
                )
                .ok_or_else(bad)?;
            let r = key
                .mutated(inst.name, item, Mutation::FlipReverse)
                .ok_or_else(bad)?;
            out.push(ItemMutations {
                item,
                dimension: dim,
                dim: d,
                keys: [w, r],
                broken: [0, 0],
            });
        }
        Ok(MutationSweep {
            inst,
            origin,
            items: out,
            reproduced: 0,
        })
    }

    /// Count the rows of `reproduced` (rows the current key reproduces) that each mutation
    /// breaks.
    ///
    /// A mutation changes one item's key row, so under the mutated key every other dimension
    /// keeps the value and percent that already matched the stored ones, and `top_result`
    /// changes only if some value does. A row is therefore broken exactly when the item's own
    /// dimension, rescored in the same order by [`score_dim`], no longer matches its stored
    /// score (or stored percentile): the same verdict as rescoring the whole row, for one
    /// dimension's work instead of every dimension's (a 1 GiB human file has millions of rows,
    /// each checked against two mutations of every item). The test
    /// `sweep_matches_full_rescoring` compares the two on every item.
    pub fn add(&mut self, reproduced: &[&HumanRow]) -> Result<(), ScoreError> {
        self.reproduced += reproduced.len();
        for r in reproduced {
            let answers = r.answer_vector();
            let pct = match &r.percentiles {
                Some(p) => Some(parse_percentiles(p, self.inst, r.id, self.origin)?),
                None => None,
            };
            for m in &mut self.items {
                let d = m.dim;
                for (k, b) in m.keys.iter().zip(m.broken.iter_mut()) {
                    let tk = k.test(self.inst.name).ok_or_else(|| ScoreError::Score {
                        test: self.inst.name.into(),
                        message: "the mutated key lost the test".into(),
                    })?;
                    let s = score_dim(tk, d, &answers);
                    let stored = r.scores.get(d).map(|&v| f64::from(v));
                    let kept = s.value.is_some()
                        && s.value == stored
                        && pct.as_ref().is_none_or(|p| s.percent == p.get(d).copied());
                    if !kept {
                        *b += 1;
                    }
                }
            }
        }
        Ok(())
    }

    /// One result per item, in the order given.
    pub fn finish(self) -> Vec<MutationResult> {
        let (test, reproduced) = (self.inst.name.to_string(), self.reproduced);
        self.items
            .into_iter()
            .map(|m| MutationResult {
                test: test.clone(),
                item: m.item,
                dimension: m.dimension,
                reproduced,
                weight_broken: m.broken[0],
                reverse_broken: m.broken[1],
            })
            .collect()
    }
}
