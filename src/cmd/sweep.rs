//! `protospread sweep`: few-shot delimiter sweeps.
//!
//! `sweep lm-eval` writes lm-evaluation-harness task files for every delimiter x variant of
//! `[sweep]`; `sweep ingest` reads lm-eval output folders, checks that they form a complete
//! sweep over identical documents, and prints the accuracy table.

use crate::Ctx;
use anyhow::Context;
use protospread_sweep::{lmeval, tables, SweepSpec};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug, Default)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<SweepCommand>,
}

#[derive(clap::Subcommand, Debug)]
pub enum SweepCommand {
    /// Write one lm-evaluation-harness task file per delimiter x {plain, named}, and a
    /// README with the exact `lm_eval` command, into the folder given by the global
    /// `--out DIR` (which must not exist or be empty).
    LmEval(LmEvalArgs),
    /// Read lm-eval output folders (results_*.json + samples_*.jsonl from --log_samples),
    /// check that every delimiter variant is present and saw the same documents, and print
    /// the accuracy of each model, delimiter and variant. Exits 1 if any check fails.
    Ingest(IngestArgs),
}

#[derive(clap::Args, Debug)]
pub struct LmEvalArgs {
    /// Benchmark: mmlu, arc_challenge or commonsense_qa.
    #[arg(long)]
    pub task: String,
    /// lm-eval's installed task folder (absolute), e.g. the output of
    /// `python -c 'import lm_eval.tasks, os; print(os.path.dirname(lm_eval.tasks.__file__))'`.
    #[arg(long)]
    pub lm_eval_tasks: PathBuf,
}

#[derive(clap::Args, Debug)]
pub struct IngestArgs {
    /// lm-eval `--output_path` folders; default: `[sweep] lm_eval_runs`.
    pub dirs: Vec<PathBuf>,
}

pub fn run(ctx: &Ctx, args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        None => anyhow::bail!("give a sweep subcommand: `protospread sweep lm-eval` or `protospread sweep ingest` (see --help)"),
        Some(SweepCommand::LmEval(a)) => lm_eval(ctx, a),
        Some(SweepCommand::Ingest(a)) => ingest_cmd(ctx, a),
    }
}

fn spec(ctx: &Ctx) -> anyhow::Result<(protospread_core::config::Config, SweepSpec)> {
    let cfg = ctx.config()?;
    let spec = SweepSpec::from_section(&cfg.sweep)
        .with_context(|| format!("{}: [sweep]", ctx.config_path.display()))?;
    Ok((cfg, spec))
}

fn lm_eval(ctx: &Ctx, a: LmEvalArgs) -> anyhow::Result<ExitCode> {
    let (_, spec) = spec(ctx)?;
    // The global `--out` names the task folder here (`sweep lm-eval --task T --out DIR`).
    let out_dir = &ctx.out;
    let bench = lmeval::Benchmark::parse(&a.task)?;
    if out_dir.exists() {
        let non_empty = std::fs::read_dir(out_dir)
            .with_context(|| format!("reading {}", out_dir.display()))?
            .next()
            .is_some();
        if non_empty {
            anyhow::bail!(
                "{}: folder is not empty; lm-eval would also load any stale task file in it, so give a new folder",
                out_dir.display()
            );
        }
    }
    let generated = lmeval::generate(&spec, bench, &a.lm_eval_tasks)?;
    let mut staged = protospread_core::atomic::Staged::new();
    for f in &generated.files {
        staged.put(&out_dir.join(&f.rel_path), f.contents.as_bytes())?;
    }
    staged.commit()?;
    protospread_core::hash::write_manifest(out_dir)?;
    if ctx.json {
        println!(
            "{}",
            serde_json::json!({
                "task": bench.name(),
                "out_dir": out_dir.display().to_string(),
                "files": generated.files.len(),
                "runs": generated.run_names,
            })
        );
    } else {
        ctx.say(format!(
            "{}: {} files for {} runs ({} delimiters x {} variants) in {}; see its README.md for the lm_eval command",
            bench.name(),
            generated.files.len(),
            generated.run_names.len(),
            spec.delimiters.len(),
            spec.variants.len(),
            out_dir.display()
        ));
    }
    Ok(ExitCode::SUCCESS)
}

fn ingest_cmd(ctx: &Ctx, a: IngestArgs) -> anyhow::Result<ExitCode> {
    let (mut cfg, spec) = spec(ctx)?;
    if !a.dirs.is_empty() {
        // Folders on the command line are relative to the current directory.
        let cwd = std::env::current_dir()?;
        cfg.sweep.lm_eval_runs = a.dirs.iter().map(|d| cwd.join(d)).collect();
    }
    if cfg.sweep.lm_eval_runs.is_empty() {
        anyhow::bail!("no lm-eval output folder: give one or set [sweep] lm_eval_runs");
    }
    let ing = protospread_sweep::ingest_all(&cfg, &spec)?;
    let cells = tables::cells(&ing.records, &spec)?;
    if ctx.json {
        let rows: Vec<_> = cells
            .iter()
            .map(|c| {
                serde_json::json!({
                    "model": c.model, "benchmark": c.benchmark, "variant": c.variant.as_str(),
                    "delimiter": spec.delimiters[c.delim_index].text, "n": c.n, "correct": c.correct,
                })
            })
            .collect();
        println!(
            "{}",
            serde_json::json!({"files": ing.files_read, "problems": ing.problems, "notes": ing.notes, "cells": rows})
        );
    } else {
        ctx.say(format!(
            "read {} samples file(s), {} document results",
            ing.files_read.len(),
            ing.records.len()
        ));
        for n in &ing.notes {
            ctx.say(format!("note: {n}"));
        }
        for c in &cells {
            ctx.say(format!(
                "{}  {}  {:5}  {:10}  {:>4}/{:<4} {}",
                c.model,
                c.benchmark,
                c.variant.as_str(),
                spec.delimiters[c.delim_index].slug,
                c.correct,
                c.n,
                tables::fmt_pct(c.correct, c.n)
            ));
        }
    }
    if ing.problems.is_empty() {
        ctx.say("check: complete sweep, every variant saw the same documents");
        Ok(ExitCode::SUCCESS)
    } else {
        for p in &ing.problems {
            eprintln!("problem: {p}");
        }
        eprintln!("check failed: {} problem(s)", ing.problems.len());
        Ok(ExitCode::from(1))
    }
}
