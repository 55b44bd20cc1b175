//! `protospread score`: scorer parity on the human data, the mutation check, human norms and
//! the scale scores of stored answers (protospread_score::run_stage).

use crate::Ctx;
use anyhow::{bail, Context};
use protospread_core::{InputRole, Instrument};
use protospread_score::{
    evidence_table, mutate_item, read_human_csv, run_stage, Allowlist, Category, HumanInput,
    HumanSource, MutationResult, ParityRun, ScoringKey, StageRun, MUTATION_WEIGHT_FACTOR,
};
use std::path::PathBuf;
use std::process::ExitCode;

/// Exit code when an unexplained row is not in the allow-list.
pub(crate) const EXIT_PARITY: u8 = 2;

/// Check that the scoring key reproduces the product's stored scores on every human row.
///
/// Prints, per instrument: rows, reproduced exactly, set aside by reason, unexplained. Writes
/// out/score/{parity_summary,parity_rows,human_scores,mutation_sweep,norms,norm_values}.parquet
/// and out/score/SHA256SUMS. Exits with code 2 if an unexplained row is not listed in the
/// allow-list ([score] allowlist in pipeline.toml). See docs/scoring-key.md and docs/norms.md.
#[derive(clap::Args, Debug, Default)]
pub(crate) struct Args {
    /// Mutation check of one item, e.g. `big_five:17`: double its weight, and separately flip
    /// its reverse flag, and report how many reproduced rows then disagree. Writes nothing.
    #[arg(long, value_name = "TEST:ITEM")]
    pub(crate) mutate: Option<String>,
    /// Print how many rows each alternative rule (rounding, out-of-range answers, tie order,
    /// Big Five N direction) reproduces, next to the product rule. Writes nothing.
    #[arg(long)]
    pub(crate) evidence: bool,
    /// Read the human CSVs (<DIR>/<instrument>.csv) instead of out/fetch/human/*.parquet.
    #[arg(long, value_name = "DIR")]
    pub(crate) human_csv: Option<PathBuf>,
    /// Skip the mutation sweep over all 168 items (the sweep table is then empty).
    #[arg(long)]
    pub(crate) no_sweep: bool,
}

fn load_inputs(ctx: &Ctx, args: &Args) -> anyhow::Result<Vec<HumanInput>> {
    let cfg = ctx.config()?;
    let declared: Vec<&'static Instrument> = match &args.human_csv {
        Some(_) => protospread_core::study_instruments().collect(),
        None => protospread_core::study_instruments()
            .filter(|i| {
                cfg.inputs_with_role(InputRole::Human)
                    .any(|inp| inp.instrument.as_deref() == Some(i.name))
            })
            .collect(),
    };
    if declared.is_empty() {
        bail!("pipeline.toml declares no human input of the four study instruments");
    }
    let mut out = Vec::new();
    for inst in declared {
        let (source, origin) = match &args.human_csv {
            Some(dir) => {
                let p = dir.join(inst.file_name());
                (HumanSource::rows(read_human_csv(inst, &p)?), p)
            }
            None => {
                let p = ctx
                    .out
                    .join("fetch/human")
                    .join(format!("{}.parquet", inst.name));
                if !p.exists() {
                    bail!("{}: not found; run `protospread fetch` first", p.display());
                }
                // Read in chunks by the stage, never whole.
                (HumanSource::Parquet(p.clone()), p)
            }
        };
        out.push(HumanInput {
            inst,
            source,
            origin,
        });
    }
    Ok(out)
}

fn keys(ctx: &Ctx) -> anyhow::Result<(ScoringKey, Vec<ScoringKey>, Allowlist)> {
    let cfg = ctx.config()?;
    let s = &cfg.score;
    let key = ScoringKey::load(&cfg.resolve(&s.key))?;
    let legacy = ScoringKey::load_versions(&cfg.resolve(&s.legacy_keys))?;
    let allow = Allowlist::load(&cfg.resolve(&s.allowlist))?;
    Ok((key, legacy, allow))
}

pub(crate) fn run(ctx: &Ctx, args: Args) -> anyhow::Result<ExitCode> {
    let (key, legacy, allowlist) = keys(ctx)?;
    let inputs = load_inputs(ctx, &args)?;
    if args.evidence {
        return print_evidence(ctx, &key, &inputs);
    }
    if let Some(spec) = &args.mutate {
        return mutate_one(ctx, spec, &key, &legacy, &allowlist, &inputs);
    }
    let cfg = ctx.config()?;
    let sweep = cfg.score.sweep && !args.no_sweep;
    let engine = protospread_engine::EngineOptions {
        memory_limit: ctx.memory_limit_for(&cfg),
        ..Default::default()
    };
    let prov = ctx.provenance(&cfg, &stage_command(&args))?;
    let st = run_stage(
        &cfg,
        &ctx.out,
        &key,
        &legacy,
        &allowlist,
        &inputs,
        sweep,
        &engine,
        &prov,
        &*ctx.observer(),
    )
    .with_context(|| format!("score stage ({})", ctx.out.join("score").display()))?;
    let parity_json = print_summary(ctx, &st.parity, &allowlist);
    // One JSON object for the whole stage: parity and stored answers together.
    if let Some(mut v) = parity_json {
        v["stored_answers"] = st.answers.to_json();
        ctx.emit("score", v);
    } else {
        st.answers.lines().iter().for_each(|l| ctx.say(l));
    }
    if !st.written {
        return Ok(parity_failed(ctx, &st, &allowlist));
    }
    Ok(ExitCode::SUCCESS)
}

/// A failed parity check: the rows not reproduced on standard error, exit code 2.
fn parity_failed(ctx: &Ctx, st: &StageRun, allowlist: &Allowlist) -> ExitCode {
    // A wrong key can fail every row of a large file: name the first rows, count the rest.
    for c in st.failing.iter().take(FAILING_ROWS_LISTED) {
        eprintln!(
            "error: {} row id {}: scores not reproduced and reason unknown; fix the key or scorer, or review the row and add it to {}",
            c.instrument,
            c.id,
            allowlist.source.display()
        );
    }
    if st.failing.len() > FAILING_ROWS_LISTED {
        eprintln!(
            "error: and {} more rows not reproduced, reason unknown ({} in all; the first {FAILING_ROWS_LISTED} by test and id are listed)",
            st.failing.len() - FAILING_ROWS_LISTED,
            st.failing.len()
        );
    }
    eprintln!(
        "error: scorer parity failed; nothing written ({} left as it was)",
        st.out_dir.display()
    );
    ctx.fail(
        "check",
        &format!(
            "scorer parity failed: {} row(s) not reproduced; nothing written",
            st.failing.len()
        ),
    );
    ExitCode::from(EXIT_PARITY)
}

/// The command line that writes these tables, as the files' metadata names it: the options
/// that change what is written, not `--out`.
fn stage_command(args: &Args) -> String {
    let mut c = String::from("protospread score");
    if let Some(dir) = &args.human_csv {
        c.push_str(&format!(" --human-csv {}", dir.display()));
    }
    if args.no_sweep {
        c.push_str(" --no-sweep");
    }
    c
}

/// Failing rows named one by one on standard error; the rest are counted.
const FAILING_ROWS_LISTED: usize = 20;

fn print_summary(ctx: &Ctx, run: &ParityRun, allowlist: &Allowlist) -> Option<serde_json::Value> {
    if ctx.json {
        return Some(run.to_json(allowlist));
    }
    ctx.say("scorer parity on the human data (key: current; rows: every row of each file)");
    for (name, m) in &run.summary {
        print_instrument(ctx, run, name, m);
    }
    for (i, id) in &allowlist.stale(&run.unexplained) {
        ctx.say(format!(
            "warning: allow-list entry {i}:{id} is not an unexplained row (stale entry)"
        ));
    }
    print_sweep(ctx, run);
    for (t, n) in &run.norm_rows {
        ctx.say(format!(
            "norms {t}: {} rows ({} reproduced, {} repeated answer vectors left out)",
            n.used, n.reproduced, n.duplicates
        ));
    }
    None
}

/// The parity lines of instrument `name`, whose rows per (category, reason) are `m`.
fn print_instrument(
    ctx: &Ctx,
    run: &ParityRun,
    name: &str,
    m: &std::collections::BTreeMap<(Category, String), usize>,
) {
    let count = |c: Category| {
        m.iter()
            .filter(|((k, _), _)| *k == c)
            .map(|(_, n)| n)
            .sum::<usize>()
    };
    ctx.say(format!(
        "{name}: {} rows, {} reproduced exactly, {} set aside, {} unexplained",
        m.values().sum::<usize>(),
        count(Category::Reproduced),
        count(Category::SetAside),
        count(Category::Unexplained)
    ));
    for ((k, reason), n) in m {
        if *k == Category::SetAside {
            ctx.say(format!("  set aside {n:>4}  {reason}"));
        }
    }
    for c in run.unexplained.iter().filter(|c| c.instrument == name) {
        let how = if c.allowlisted.is_some() {
            "allow-listed"
        } else {
            "NOT in the allow-list"
        };
        ctx.say(format!("  unexplained  id {} ({how})", c.id));
    }
}

/// The mutation sweep's line: its size, the mutations not caught and the weakest items.
fn print_sweep(ctx: &Ctx, run: &ParityRun) {
    if run.sweep.is_empty() {
        ctx.say("mutation sweep: skipped");
        return;
    }
    let sweep_min = |f: fn(&MutationResult) -> usize| {
        run.sweep
            .iter()
            .map(|m| (f(m), m.reproduced))
            .min_by(|a, b| {
                (a.0 as f64 / a.1.max(1) as f64).total_cmp(&(b.0 as f64 / b.1.max(1) as f64))
            })
    };
    let w = sweep_min(|m| m.weight_broken).unwrap_or((0, 0));
    let r = sweep_min(|m| m.reverse_broken).unwrap_or((0, 0));
    ctx.say(format!(
        "mutation sweep: {} items x 2 changes, {} not caught; weakest: weight x2 breaks {} of {}, reverse flip breaks {} of {} reproduced rows",
        run.sweep.len(),
        run.uncaught_mutations(),
        w.0,
        w.1,
        r.0,
        r.1
    ));
}

fn mutate_one(
    ctx: &Ctx,
    spec: &str,
    key: &ScoringKey,
    legacy: &[ScoringKey],
    allowlist: &Allowlist,
    inputs: &[HumanInput],
) -> anyhow::Result<ExitCode> {
    let (test, item) = spec
        .split_once(':')
        .with_context(|| format!("--mutate `{spec}`: expected TEST:ITEM, e.g. big_five:17"))?;
    let item: usize = item
        .parse()
        .with_context(|| format!("--mutate `{spec}`: item `{item}` is not a number"))?;
    let m = mutate_item(key, legacy, allowlist, inputs, test, item)
        .with_context(|| format!("--mutate `{spec}`"))?;
    if ctx.json {
        ctx.emit("mutate", m.to_json());
    } else {
        ctx.say(format!(
            "{test} item {item} (dimension {}): {} rows reproduced by the key",
            m.dimension, m.reproduced
        ));
        ctx.say(format!(
            "  weight x{MUTATION_WEIGHT_FACTOR}: {} of them disagree",
            m.weight_broken
        ));
        ctx.say(format!(
            "  reverse flag flipped: {} of them disagree",
            m.reverse_broken
        ));
    }
    Ok(ExitCode::SUCCESS)
}

fn print_evidence(ctx: &Ctx, key: &ScoringKey, inputs: &[HumanInput]) -> anyhow::Result<ExitCode> {
    let evidence = evidence_table(key, inputs)?;
    if ctx.json {
        ctx.emit("evidence", evidence.to_json());
        return Ok(ExitCode::SUCCESS);
    }
    let names = &evidence.instruments;
    ctx.say("rows reproduced exactly by the current key under each rule variant (one aspect changed at a time)");
    let heads: Vec<String> = names
        .iter()
        .map(|n| format!("{n:>w$}", w = n.len().max(9)))
        .collect();
    ctx.say(format!(
        "{:<22} {:<42} {}",
        "aspect",
        "variant",
        heads.join("  ")
    ));
    for row in &evidence.rows {
        let cells: Vec<String> = row
            .counts
            .iter()
            .zip(names)
            .map(|(c, name)| {
                format!(
                    "{:>w$}",
                    format!("{}/{}", c.reproduced, c.rows),
                    w = name.len().max(9)
                )
            })
            .collect();
        ctx.say(format!(
            "{:<22} {:<42} {}",
            row.aspect,
            row.variant,
            cells.join("  ")
        ));
    }
    Ok(ExitCode::SUCCESS)
}
