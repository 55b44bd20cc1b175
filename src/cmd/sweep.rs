//! `protospread sweep`: few-shot delimiter sweeps.
//!
//! `sweep lm-eval` writes lm-evaluation-harness task files for every delimiter x variant of
//! `[sweep]`; `sweep ingest` reads lm-eval output folders, checks that they form a sweep over
//! identical documents, and prints the accuracy table with its spread.

use crate::Ctx;
use anyhow::Context;
use protospread_core::SweepConfig;
use protospread_sweep::{
    cells, dictionary_client, fmt_pct, generate_lm_eval_tasks, installed_tasks_dir,
    plan_dictionary, record_dictionary, spreads, Benchmark, Cell, Declared, DictionaryRunSummary,
    Ingested, Spread, SweepSpec,
};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug, Default)]
pub(crate) struct Args {
    #[command(subcommand)]
    pub(crate) command: Option<SweepCommand>,
}

#[derive(clap::Subcommand, Debug)]
pub(crate) enum SweepCommand {
    /// Write one lm-evaluation-harness task file per delimiter x {plain, named}, and a
    /// README with the exact `lm_eval` command, into the task folder `--task-dir DIR` (which
    /// must not exist or be empty; default: a new folder sweep-<task>[-N] here).
    LmEval(LmEvalArgs),
    /// Read lm-eval output folders (results_*.json + samples_*.jsonl from --log_samples),
    /// check that every delimiter variant saw the same documents, and print the accuracy of
    /// each model, delimiter and variant, and the spread and leading delimiter. Missing cells
    /// of the sweep are warnings (--strict: problems). Exits 1 if any check fails.
    Ingest(IngestArgs),
    /// Administer the generated dictionary-lookup task (docs/sweep.md) to a model behind an
    /// OpenAI-compatible endpoint, one request per document x delimiter x variant, recording
    /// every request and reply in the record file `--to FILE.jsonl` (appended and flushed per
    /// reply; a rerun sends only unanswered requests).
    Dictionary(DictionaryArgs),
}

#[derive(clap::Args, Debug)]
pub(crate) struct DictionaryArgs {
    #[command(flatten)]
    pub(crate) endpoint: crate::cmd::Endpoint,
    /// The record file (JSONL) every request and reply is appended to.
    #[arg(long, value_name = "FILE.jsonl")]
    pub(crate) to: PathBuf,
    /// Generator seed: the same seed gives the same documents.
    #[arg(long, default_value_t = 20251005)]
    pub(crate) seed: u64,
    /// Documents per delimiter and variant (at least 1).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) n_docs: u32,
    /// Delimiters by slug, comma-separated (e.g. nl,space,comma); default all of
    /// `[sweep] delimiters`. Each must be in `[sweep] delimiters`.
    #[arg(long, value_delimiter = ',')]
    pub(crate) delimiters: Vec<String>,
    /// Seconds one attempt may take.
    #[arg(long, default_value_t = 120)]
    pub(crate) timeout: u64,
    /// Attempts after the first (HTTP 429/5xx, timeouts, connection errors).
    #[arg(long, default_value_t = 2)]
    pub(crate) retries: u32,
    /// Print the number of requests and the first request body; send nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
}

#[derive(clap::Args, Debug)]
pub(crate) struct LmEvalArgs {
    /// Benchmark, by lm-eval's name.
    #[arg(long, value_parser = benchmark_parser())]
    pub(crate) task: Benchmark,
    /// The task folder the files are written to; it must not exist or be empty (lm-eval would
    /// also load a stale task file in it). Default: a new folder sweep-<task>[-N] here.
    #[arg(long, value_name = "DIR")]
    pub(crate) task_dir: Option<PathBuf>,
    /// lm-eval's installed task folder (absolute); default: asked of `--python`
    /// (`import lm_eval.tasks`), an error if lm-eval is not installed there.
    #[arg(long)]
    pub(crate) lm_eval_tasks: Option<PathBuf>,
    /// The Python interpreter whose installed lm-eval names the task folder when
    /// `--lm-eval-tasks` is absent (e.g. a venv's bin/python).
    #[arg(long, default_value = "python3")]
    pub(crate) python: String,
}

#[derive(clap::Args, Debug)]
pub(crate) struct IngestArgs {
    /// lm-eval `--output_path` folders; default: `[sweep] lm_eval_runs`. Given folders need
    /// no configuration file: without one, the sweep is the delimiters and variants the runs
    /// used and the other `[sweep]` settings are the defaults.
    pub(crate) dirs: Vec<PathBuf>,
    /// Exit 1 when a cell of the declared grid (`[sweep] delimiters` x `variants`) is missing
    /// or a run holds a cell outside it; without it those are warnings and the tables cover
    /// the cells present.
    #[arg(long)]
    pub(crate) strict: bool,
}

/// `--task` by lm-eval's names of [`Benchmark`].
fn benchmark_parser() -> impl clap::builder::TypedValueParser<Value = Benchmark> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(Benchmark::ALL.map(Benchmark::name))
        .map(|s| Benchmark::parse(&s).expect("every possible value is a benchmark's name"))
}

pub(crate) fn run(ctx: &Ctx, args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        None => anyhow::bail!("give a sweep subcommand: `protospread sweep lm-eval`, `sweep ingest` or `sweep dictionary` (see --help)"),
        Some(SweepCommand::LmEval(a)) => lm_eval(ctx, a),
        Some(SweepCommand::Ingest(a)) => ingest_cmd(ctx, a),
        Some(SweepCommand::Dictionary(a)) => dictionary_cmd(ctx, a),
    }
}

/// The `[sweep]` of the configuration file; a file with only `[sweep]` is enough.
fn sweep_config(ctx: &Ctx) -> anyhow::Result<(SweepConfig, SweepSpec)> {
    let cfg = SweepConfig::load(&ctx.config_path).context("reading the configuration")?;
    let spec = SweepSpec::from_section(&cfg.sweep)
        .with_context(|| format!("{}: [sweep]", ctx.config_path.display()))?;
    Ok((cfg, spec))
}

fn spec(ctx: &Ctx) -> anyhow::Result<SweepSpec> {
    Ok(sweep_config(ctx)?.1)
}

/// A folder that does not exist yet, in the current one: `sweep-<task>`, else
/// `sweep-<task>-2`, `-3`, ...
fn fresh_folder(task: &str) -> PathBuf {
    let base = format!("sweep-{task}");
    (1..)
        .map(|i| {
            PathBuf::from(if i == 1 {
                base.clone()
            } else {
                format!("{base}-{i}")
            })
        })
        .find(|p| !p.exists())
        .expect("an unbounded range has a free name")
}

/// The global `--out` is the output folder of the stages: a sweep command that writes
/// elsewhere refuses it rather than read it as its own destination.
fn no_global_out(ctx: &Ctx, command: &str, instead: &str) -> anyhow::Result<()> {
    if ctx.out_given {
        anyhow::bail!(
            "sweep {command}: --out is the output folder of the stages and is not used here; give {instead}"
        );
    }
    Ok(())
}

fn lm_eval(ctx: &Ctx, a: LmEvalArgs) -> anyhow::Result<ExitCode> {
    no_global_out(ctx, "lm-eval", "the task folder as --task-dir DIR")?;
    let spec = spec(ctx)?;
    let bench = a.task;
    let out_dir = a.task_dir.unwrap_or_else(|| fresh_folder(bench.name()));
    if out_dir.exists() && fs_err::read_dir(&out_dir)?.next().is_some() {
        anyhow::bail!(
            "--task-dir {}: folder is not empty; lm-eval would also load any stale task file in it, so give a new folder",
            out_dir.display()
        );
    }
    let tasks_dir = match a.lm_eval_tasks {
        Some(d) => d,
        None => installed_tasks_dir(&a.python)?,
    };
    let generated = generate_lm_eval_tasks(&spec, bench, &tasks_dir)?;
    let mut staged = protospread_core::Staged::new();
    for f in &generated.files {
        staged.put(&out_dir.join(&f.rel_path), f.contents.as_bytes())?;
    }
    staged.commit()?;
    protospread_core::write_manifest(&out_dir)?;
    ctx.emit(
        "sweep_lm_eval",
        serde_json::json!({
            "task": bench.name(),
            "out_dir": out_dir.display().to_string(),
            "files": generated.files.len(),
            "runs": generated.run_names,
        }),
    );
    ctx.say(format!(
        "{}: {} files for {} runs ({} delimiters x {} variants) in {}; see its README.md for the lm_eval command",
        bench.name(),
        generated.files.len(),
        generated.run_names.len(),
        spec.delimiters.len(),
        spec.variants.len(),
        out_dir.display()
    ));
    Ok(ExitCode::SUCCESS)
}

/// Ingest the folders given, or `[sweep] lm_eval_runs`: what was read, and the spec that
/// covers every cell present.
fn ingest_runs(ctx: &Ctx, a: &IngestArgs) -> anyhow::Result<(Ingested, SweepSpec)> {
    // Folders on the command line are relative to the current directory and need no
    // configuration file; configured folders are relative to the configuration.
    let (dirs, spec, declared) = if a.dirs.is_empty() || ctx.config_path.exists() {
        let (cfg, spec) = sweep_config(ctx)?;
        let declared = Declared {
            delimiters: cfg.declared_delimiters,
            variants: cfg.declared_variants,
        };
        let dirs: Vec<(String, PathBuf)> = if a.dirs.is_empty() {
            if cfg.sweep.lm_eval_runs.is_empty() {
                anyhow::bail!(
                    "no lm-eval output folder: give one (`sweep ingest DIR`) or set [sweep] lm_eval_runs in {}",
                    ctx.config_path.display()
                );
            }
            cfg.sweep
                .lm_eval_runs
                .iter()
                .map(|d| (d.display().to_string(), cfg.resolve(d)))
                .collect()
        } else {
            a.dirs
                .iter()
                .map(|d| (d.display().to_string(), d.clone()))
                .collect()
        };
        (dirs, spec, declared)
    } else {
        let defaults = protospread_core::SweepSection::default();
        let dirs = a
            .dirs
            .iter()
            .map(|d| (d.display().to_string(), d.clone()))
            .collect();
        (
            dirs,
            SweepSpec::from_section(&defaults)?,
            Declared::default(),
        )
    };
    Ok(protospread_sweep::ingest_folders(&dirs, &spec, declared)?)
}

fn ingest_cmd(ctx: &Ctx, a: IngestArgs) -> anyhow::Result<ExitCode> {
    let (ing, spec) = ingest_runs(ctx, &a)?;
    let cells = cells(&ing.samples, &spec)?;
    let spread = spreads(&cells, &spec);
    if ctx.json {
        ingest_json(ctx, &ing, &spec, &cells, &spread);
    } else {
        ingest_text(ctx, &ing, &spec, &cells, &spread);
    }
    let mut problems = ing.problems.clone();
    if a.strict {
        problems.extend(ing.missing.iter().cloned());
    } else {
        for m in &ing.missing {
            eprintln!("warning: {m}");
        }
        if !ing.missing.is_empty() {
            eprintln!(
                "warning: {} cell(s) of the sweep missing or outside it; the tables cover the {} cell(s) present (--strict refuses)",
                ing.missing.len(),
                cells.len()
            );
        }
    }
    if problems.is_empty() {
        if ing.missing.is_empty() {
            ctx.say("check: complete sweep, every variant saw the same documents");
        } else {
            ctx.say("check: every variant present saw the same documents");
        }
        return Ok(ExitCode::SUCCESS);
    }
    for p in &problems {
        eprintln!("problem: {p}");
    }
    let message = format!("check failed: {} problem(s)", problems.len());
    eprintln!("{message}");
    ctx.fail("check", &message);
    Ok(ExitCode::from(1))
}

fn ingest_json(ctx: &Ctx, ing: &Ingested, spec: &SweepSpec, cells: &[Cell], spread: &[Spread]) {
    let rows: Vec<_> = cells
        .iter()
        .map(|c| {
            serde_json::json!({
                "source": c.source, "label": c.label,
                "model": c.model, "benchmark": c.benchmark, "variant": c.variant.as_str(),
                "delimiter": spec.delimiters[c.delim_index].text, "n": c.n, "correct": c.correct,
            })
        })
        .collect();
    let tasks: Vec<_> = ing
        .samples
        .iter()
        .map(|t| {
            serde_json::json!({
                "task": t.task, "model": t.model, "benchmark": t.benchmark,
                "subset": t.subset, "delimiter": t.delimiter.text,
                "variant": t.variant.as_str(), "metric": t.metric,
                "n": t.n(), "correct": t.correct(),
            })
        })
        .collect();
    let spread: Vec<_> = spread
        .iter()
        .map(|s| {
            serde_json::json!({
                "model": s.model, "benchmark": s.benchmark, "variant": s.variant.as_str(),
                "delimiters": s.delimiters, "min_pct": s.min_pct, "max_pct": s.max_pct,
                "spread_pct": s.spread_pct, "leading": s.max_delimiters,
                "trailing": s.min_delimiters, "intervals_disjoint": s.intervals_disjoint,
            })
        })
        .collect();
    ctx.emit(
        "sweep_ingest",
        serde_json::json!({"files": ing.files_read, "problems": ing.problems, "missing": ing.missing,
            "notes": ing.notes, "tasks": tasks, "cells": rows, "spread": spread}),
    );
}

fn ingest_text(ctx: &Ctx, ing: &Ingested, spec: &SweepSpec, cells: &[Cell], spread: &[Spread]) {
    ctx.say(format!(
        "read {} samples file(s), {} document results",
        ing.files_read.len(),
        ing.documents()
    ));
    for n in &ing.notes {
        ctx.say(format!("note: {n}"));
    }
    for t in &ing.samples {
        ctx.say(format!(
            "task {}: {} {} delimiter {} variant {}, metric {}",
            t.task,
            t.model,
            t.benchmark,
            t.delimiter.slug,
            t.variant.as_str(),
            t.metric
        ));
    }
    for c in cells {
        ctx.say(format!(
            "{}  {}  {}  {:5}  {:10}  {:>4}/{:<4} {}",
            c.source,
            c.model,
            c.benchmark,
            c.variant.as_str(),
            spec.delimiters[c.delim_index].slug,
            c.correct,
            c.n,
            fmt_pct(c.correct, c.n)
        ));
    }
    for s in spread {
        ctx.say(format!(
            "spread  {}  {}  {:5}  {:.2} points over {} delimiter(s) ({:.2}% to {:.2}%{}); leading: {}",
            s.model,
            s.benchmark,
            s.variant.as_str(),
            s.spread_pct,
            s.delimiters,
            s.min_pct,
            s.max_pct,
            if s.intervals_disjoint {
                ", 95% intervals disjoint"
            } else {
                ""
            },
            s.max_delimiters.join(" ")
        ));
    }
}

fn dictionary_cmd(ctx: &Ctx, a: DictionaryArgs) -> anyhow::Result<ExitCode> {
    no_global_out(ctx, "dictionary", "the record file as --to FILE.jsonl")?;
    let spec = spec(ctx)?;
    let delimiters = spec
        .select_delimiters(&a.delimiters)
        .context("--delimiters")?;
    let planned = plan_dictionary(
        &a.endpoint.model,
        a.seed,
        a.n_docs,
        &delimiters,
        &spec.variants,
        &spec.naming_template,
    );
    if a.dry_run {
        ctx.emit(
            "sweep_dictionary",
            serde_json::json!({"dry_run": true, "requests": planned.len(), "first_request": planned[0].body}),
        );
        ctx.say(format!("{} requests; first body:", planned.len()));
        ctx.say(&planned[0].body);
        return Ok(ExitCode::SUCCESS);
    }
    let client = dictionary_client(&a.endpoint.base_url, a.timeout, a.retries)?;
    let chatty = !ctx.quiet && !ctx.json;
    let summary = record_dictionary(
        &client,
        &planned,
        &a.endpoint.model,
        a.seed,
        &a.to,
        |r, sent, failed| {
            if !r.answered() {
                let why = r.error.as_deref().unwrap_or("");
                eprintln!("request {} failed: {why}", r.request_key);
            }
            if chatty && sent % 20 == 0 {
                eprintln!("{sent} sent, {failed} failed");
            }
        },
    )?;
    show_dictionary(ctx, &summary, &a.to)
}

/// Print what a dictionary run did; exit code 2 when requests failed.
fn show_dictionary(
    ctx: &Ctx,
    summary: &DictionaryRunSummary,
    to: &std::path::Path,
) -> anyhow::Result<ExitCode> {
    if ctx.json {
        ctx.emit("sweep_dictionary", serde_json::to_value(summary)?);
    }
    ctx.say(format!(
        "sweep dictionary: {} planned, {} already answered, {} sent, {} failed; {} records in {} ({} correct)",
        summary.planned,
        summary.already_answered,
        summary.sent,
        summary.failed,
        summary.records_in_file,
        to.display(),
        summary.correct
    ));
    Ok(crate::cmd::requests_outcome(ctx, summary.failed))
}
