//! The score stage as a library: scorer parity (classify, sweep, norms) and the stored-answer
//! part, committed together only when every check passed.

use crate::answers::{run_answers, AnswersSummary};
use crate::human::{HumanRow, HumanSource, HUMAN_CHUNK_ROWS};
use crate::key::ScoringKey;
use crate::norms::{Norms, ValueCounts};
use crate::parity::{
    self, Allowlist, Category, Classifier, MutationResult, MutationSweep, ParitySummary, RowClass,
};
use crate::parity_run::{not_allowlisted, NormRows, ParityRun};
use crate::tables::{parity_tables, ParityRowTables};
use crate::ScoreError;
use protospread_core::{Config, Instrument, Provenance, Staged};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

/// The human rows of one instrument and where they came from.
#[derive(Debug, Clone)]
pub struct HumanInput {
    /// The instrument.
    pub inst: &'static Instrument,
    /// Its human rows (a Parquet file read in chunks, or rows in memory).
    pub source: HumanSource,
    /// The file they came from.
    pub origin: PathBuf,
}

impl HumanInput {
    /// Every row at once (for diagnostics that need them all).
    pub fn rows(&self) -> Result<Vec<HumanRow>, ScoreError> {
        self.source.load(self.inst, &self.origin)
    }
}

/// Classify every row, sweep every item of the key, and build the norms.
/// `sweep` = false skips the 336 re-scorings (the sweep is then empty).
pub fn run_parity(
    key: &ScoringKey,
    legacy: &[ScoringKey],
    allowlist: &Allowlist,
    inputs: &[HumanInput],
    sweep: bool,
) -> Result<ParityRun, ScoreError> {
    parity_in_chunks(key, legacy, allowlist, inputs, sweep, None)
}

/// [`run_parity_streaming`] with the stage's chunk size, [`HUMAN_CHUNK_ROWS`]: the one call
/// [`run_parity`] and [`run_stage`] share.
fn parity_in_chunks(
    key: &ScoringKey,
    legacy: &[ScoringKey],
    allowlist: &Allowlist,
    inputs: &[HumanInput],
    sweep: bool,
    rows: Option<&mut ParityRowTables>,
) -> Result<ParityRun, ScoreError> {
    run_parity_streaming(
        key,
        legacy,
        allowlist,
        inputs,
        sweep,
        HUMAN_CHUNK_ROWS,
        rows,
    )
}

/// [`run_parity`], reading the rows `chunk_rows` at a time and handing each classified row to
/// `rows` (the per-row tables) in (instrument, id) order. Memory does not grow with the
/// number of rows, except for: rows no key reproduces and rows sharing their answers (see
/// [`Classifier`]), and one answer vector per distinct norm row (for the repeat check).
pub fn run_parity_streaming(
    key: &ScoringKey,
    legacy: &[ScoringKey],
    allowlist: &Allowlist,
    inputs: &[HumanInput],
    sweep: bool,
    chunk_rows: usize,
    mut rows: Option<&mut ParityRowTables>,
) -> Result<ParityRun, ScoreError> {
    let mut summary = ParitySummary::new();
    let mut unexplained = Vec::new();
    let mut sweep_out = Vec::new();
    let mut norm_counts: BTreeMap<(String, String), ValueCounts> = BTreeMap::new();
    let mut norm_rows = BTreeMap::new();
    // The tables are sorted by instrument, then id: instruments in name order, rows in id
    // order within each.
    let mut order: Vec<&HumanInput> = inputs.iter().collect();
    order.sort_by_key(|i| i.inst.name);
    for input in order {
        let (inst, origin) = (input.inst, input.origin.as_path());
        let mut cl = Classifier::new(inst, key, legacy, allowlist, origin)?;
        input.source.for_each_chunk(inst, origin, chunk_rows, |c| {
            c.iter().try_for_each(|r| cl.first_pass(r))
        })?;
        if cl.needs_twins() {
            input.source.for_each_chunk(inst, origin, chunk_rows, |c| {
                c.iter().for_each(|r| cl.twin_pass(r));
                Ok(())
            })?;
        }
        let n_items = match sweep {
            true => key.test(inst.name).map(|t| t.items.len()).unwrap_or(0),
            false => 0,
        };
        let mut sw = MutationSweep::new(key, inst, 1..=n_items, origin)?;
        // Norm rows: reproduced rows in id order, first occurrence of each answer vector.
        let mut seen: HashSet<Box<[u8]>> = HashSet::new();
        let mut nr = NormRows::default();
        input.source.for_each_chunk(inst, origin, chunk_rows, |c| {
            let mut reproduced = Vec::new();
            for r in c {
                let class = cl.classify(r)?;
                parity::count(&mut summary, &class);
                if let Some(t) = rows.as_deref_mut() {
                    t.push(r, &class)?;
                }
                match class.category {
                    Category::Reproduced => {
                        reproduced.push(r);
                        nr.reproduced += 1;
                        if !seen.insert(r.answers.as_slice().into()) {
                            nr.duplicates += 1;
                            continue;
                        }
                        nr.used += 1;
                        for d in &class.computed.dims {
                            let v = d.value.expect("a reproduced row has every value");
                            norm_counts
                                .entry((inst.name.to_string(), d.dimension.clone()))
                                .or_default()
                                .add(v);
                        }
                    }
                    Category::Unexplained => unexplained.push(class),
                    Category::SetAside => {}
                }
            }
            sw.add(&reproduced)
        })?;
        if sweep {
            sweep_out.extend(sw.finish());
        }
        norm_rows.insert(inst.name.to_string(), nr);
    }
    unexplained.sort_by(|a, b| (&a.instrument, a.id).cmp(&(&b.instrument, b.id)));
    sweep_out.sort_by(|a, b| (&a.test, a.item).cmp(&(&b.test, b.item)));
    Ok(ParityRun {
        summary,
        unexplained,
        sweep: sweep_out,
        norms: Norms::from_counts(norm_counts),
        norm_rows,
    })
}

/// What [`run_stage`] computed and whether it replaced the stage's folder.
#[derive(Debug, Clone)]
pub struct StageRun {
    /// Scorer parity on the human data.
    pub parity: ParityRun,
    /// What the stored-answer part wrote.
    pub answers: AnswersSummary,
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
///
/// The human rows stream: they are read [`HUMAN_CHUNK_ROWS`] at a time and the
/// per-row tables are written to the staged folder as they are classified
/// ([`run_parity_streaming`]). The parsed answers written are counted to `progress`, a phase
/// per stored-answer input.
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
    prov: &Provenance,
    progress: &dyn protospread_core::Progress,
) -> Result<StageRun, ScoreError> {
    let out_dir = out.join("score");
    // The whole folder is staged: the commit replaces it with exactly these tables and their
    // SHA256SUMS, and refuses a folder holding files protospread did not write.
    let mut staged = Staged::in_dir(&out_dir)?;
    // The per-row tables stream into their staged files while the rows are classified.
    let mut rows = ParityRowTables::new(&out_dir, &mut staged, prov)?;
    let parity = parity_in_chunks(key, legacy, allowlist, inputs, sweep, Some(&mut rows))?;
    rows.finish()?;
    for t in parity_tables(&parity)? {
        let p = out_dir.join(t.contract.file_name());
        let meta = prov.table(t.contract);
        let bytes = protospread_core::encode_parquet(&p, t.contract.schema(), &[t.batch], &meta)?;
        staged.put(&p, &bytes)?;
    }
    let answers = run_answers(
        cfg,
        out,
        &out_dir,
        key,
        &parity.norms,
        engine,
        &mut staged,
        prov,
        progress,
    )?;
    let failing: Vec<RowClass> = not_allowlisted(&parity.unexplained)
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

/// The mutation check of one item (`score --mutate`): classify the rows of `test`'s input,
/// then double the weight of `item` (1-based) and, separately, flip its reverse flag, and
/// count how many rows the current key reproduced then disagree. Writes nothing.
pub fn mutate_item(
    key: &ScoringKey,
    legacy: &[ScoringKey],
    allowlist: &Allowlist,
    inputs: &[HumanInput],
    test: &str,
    item: usize,
) -> Result<MutationResult, ScoreError> {
    let bad = |message: String| ScoreError::Score {
        test: test.to_string(),
        message,
    };
    let input = inputs
        .iter()
        .find(|i| i.inst.name == test)
        .ok_or_else(|| bad("no human data for this test".into()))?;
    let n = key.test(test).map(|t| t.items.len()).unwrap_or(0);
    if !(1..=n).contains(&item) {
        return Err(bad(format!("item {item}: the item must be 1..={n}")));
    }
    let rows = input.rows()?;
    let classes = parity::classify(input.inst, &rows, key, legacy, allowlist, &input.origin)?;
    let reproduced: Vec<&HumanRow> = rows
        .iter()
        .zip(&classes)
        .filter(|(_, c)| c.category == Category::Reproduced)
        .map(|(r, _)| r)
        .collect();
    parity::mutate(key, input.inst, item, &reproduced, &input.origin)
}
