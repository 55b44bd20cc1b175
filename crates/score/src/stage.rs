//! The score stage as a library: scorer parity (classify, sweep, norms) and the stored-answer
//! part, committed together only when every check passed.

use crate::human::HumanRow;
use crate::key::ScoringKey;
use crate::norms::Norms;
use crate::parity::{self, Allowlist, Category, MutationResult, RowClass};
use crate::ScoreError;
use protospread_core::atomic::Staged;
use protospread_core::config::Config;
use protospread_core::instruments::Instrument;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The human rows of one instrument and where they came from.
#[derive(Debug, Clone)]
pub struct HumanInput {
    /// The instrument.
    pub inst: &'static Instrument,
    /// Its human rows.
    pub rows: Vec<HumanRow>,
    /// The file they came from.
    pub origin: PathBuf,
}

/// Which rows entered the norms of one test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NormRows {
    /// Rows reproduced exactly by the current key.
    pub reproduced: usize,
    /// Of those, rows whose answer vector repeats that of a lower id (left out).
    pub duplicates: usize,
    /// Rows used: reproduced minus duplicates.
    pub used: usize,
}

/// Everything the parity part computes.
#[derive(Debug, Clone)]
pub struct ParityRun {
    /// Every human row, sorted by (instrument, id).
    pub classes: Vec<RowClass>,
    /// The mutation sweep.
    pub sweep: Vec<MutationResult>,
    /// Human norms.
    pub norms: Norms,
    /// Norm rows per instrument.
    pub norm_rows: BTreeMap<String, NormRows>,
}

/// Classify every row, sweep every item of the key, and build the norms.
/// `sweep` = false skips the 336 re-scorings (the sweep is then empty).
pub fn run(
    key: &ScoringKey,
    legacy: &[ScoringKey],
    allowlist: &Allowlist,
    inputs: &[HumanInput],
    sweep: bool,
) -> Result<ParityRun, ScoreError> {
    let mut classes = Vec::new();
    let mut sweep_out = Vec::new();
    let mut norm_scores: Vec<(String, String, f64)> = Vec::new();
    let mut norm_rows = BTreeMap::new();
    for input in inputs {
        let mut cls = parity::classify(
            input.inst,
            &input.rows,
            key,
            legacy,
            allowlist,
            &input.origin,
        )?;
        let reproduced: Vec<&HumanRow> = input
            .rows
            .iter()
            .zip(&cls)
            .filter(|(_, c)| c.category == Category::Reproduced)
            .map(|(r, _)| r)
            .collect();
        if sweep {
            let n = key
                .test(input.inst.name)
                .map(|t| t.items.len())
                .unwrap_or(0);
            for item in 1..=n {
                sweep_out.push(parity::mutate(
                    key,
                    input.inst,
                    item,
                    &reproduced,
                    &input.origin,
                )?);
            }
        }
        // Norm rows: reproduced rows in id order, first occurrence of each answer vector.
        let mut by_id: Vec<(&HumanRow, &RowClass)> = input
            .rows
            .iter()
            .zip(&cls)
            .filter(|(_, c)| c.category == Category::Reproduced)
            .collect();
        by_id.sort_by_key(|(r, _)| r.id);
        let mut seen: BTreeSet<&[u8]> = BTreeSet::new();
        let mut nr = NormRows {
            reproduced: by_id.len(),
            ..Default::default()
        };
        for (r, c) in by_id {
            if !seen.insert(r.answers.as_slice()) {
                nr.duplicates += 1;
                continue;
            }
            nr.used += 1;
            for d in &c.computed.dims {
                let v = d.value.expect("a reproduced row has every value");
                norm_scores.push((input.inst.name.to_string(), d.dimension.clone(), v));
            }
        }
        norm_rows.insert(input.inst.name.to_string(), nr);
        classes.append(&mut cls);
    }
    classes.sort_by(|a, b| (&a.instrument, a.id).cmp(&(&b.instrument, b.id)));
    sweep_out.sort_by(|a, b| (&a.test, a.item).cmp(&(&b.test, b.item)));
    let norms = Norms::from_scores(
        norm_scores
            .iter()
            .map(|(t, d, v)| (t.as_str(), d.as_str(), *v)),
    );
    Ok(ParityRun {
        classes,
        sweep: sweep_out,
        norms,
        norm_rows,
    })
}

/// Unexplained rows that are not in the allow-list.
pub fn not_allowlisted(classes: &[RowClass]) -> Vec<&RowClass> {
    classes
        .iter()
        .filter(|c| c.category == Category::Unexplained && c.allowlisted.is_none())
        .collect()
}

/// What [`run_stage`] computed and whether it replaced the stage's folder.
#[derive(Debug, Clone)]
pub struct StageRun {
    /// Scorer parity on the human data.
    pub parity: ParityRun,
    /// What the stored-answer part wrote.
    pub answers: crate::answers::Summary,
    /// Unexplained human rows that are not in the allow-list; the stage wrote nothing if any.
    pub failing: Vec<RowClass>,
    /// The folder that was (or, on a failed check, would have been) written.
    pub out_dir: PathBuf,
    /// True when `out_dir` was replaced (every check passed).
    pub written: bool,
}

/// The whole score stage: parity, mutation sweep, norms and the stored answers of every
/// `role = "answers"` input (scored by DataFusion plans in a session set up by `engine`),
/// written to `<out>/score/` with its `SHA256SUMS`.
///
/// All-or-nothing: every table is staged first and the folder is replaced only when every
/// check passed. A human row that is neither reproduced nor allow-listed, or any error, leaves
/// the previous `<out>/score/` exactly as it was (see [`StageRun::written`]).
#[allow(clippy::too_many_arguments)]
pub fn run_stage(
    cfg: &Config,
    out: &Path,
    key: &ScoringKey,
    legacy: &[ScoringKey],
    allowlist: &Allowlist,
    inputs: &[HumanInput],
    sweep: bool,
    engine: &protospread_engine::EngineOptions,
) -> Result<StageRun, ScoreError> {
    let parity = run(key, legacy, allowlist, inputs, sweep)?;
    let out_dir = out.join("score");
    // The whole folder is staged: the commit replaces it with exactly these tables and their
    // SHA256SUMS, and refuses a folder holding files protospread did not write.
    let mut staged = Staged::in_dir(&out_dir)?;
    for t in crate::tables::tables(&parity, inputs)? {
        let p = out_dir.join(t.file);
        let bytes = protospread_core::pq::encode(&p, t.schema, &[t.batch])?;
        staged.put(&p, &bytes)?;
    }
    let answers = crate::answers::run(cfg, out, &out_dir, key, &parity.norms, engine, &mut staged)?;
    let failing: Vec<RowClass> = not_allowlisted(&parity.classes)
        .into_iter()
        .cloned()
        .collect();
    let written = failing.is_empty();
    if written {
        staged.commit()?;
    }
    // Otherwise dropping `staged` removes its temporaries.
    Ok(StageRun {
        parity,
        answers,
        failing,
        out_dir,
        written,
    })
}
