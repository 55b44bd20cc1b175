//! `protospread aggregate`: per-cell protocol and sampling spread (out/aggregate/).

use crate::Ctx;
use anyhow::Context;
use std::process::ExitCode;

/// Read out/score/scale_scores.parquet and out/score/parsed_answers.parquet with DataFusion and
/// write the per-cell statistics and the study tables to <out>/aggregate/ (Parquet, one file
/// per table, plus SHA256SUMS); with [sweep] runs, also the delimiter sweep's tables from
/// out/fetch/sweep_samples.parquet. Parameters: [aggregate] of pipeline.toml (protocol and sampling
/// conditions, rerun pairs, groups, verdict thresholds). Conventions: docs/statistics.md.
#[derive(clap::Args, Debug, Default)]
pub(crate) struct Args {
    /// DataFusion target partitions for this run (overrides [aggregate] target_partitions;
    /// 0 = one per core; at most 16). The output bytes do not depend on it.
    #[arg(long)]
    pub(crate) partitions: Option<usize>,
    /// Benchmark only: leave out the inference tables, to measure what they add to the
    /// stage's time (docs/performance.md). The report of the folder this writes has none of
    /// their tables or figures.
    #[arg(long, hide = true)]
    pub(crate) without_inference: bool,
}

pub(crate) fn run(ctx: &Ctx, args: Args) -> anyhow::Result<ExitCode> {
    let cfg = ctx.config()?;
    let mut params = protospread_aggregate::Params::from_config(&cfg);
    if let Some(p) = args.partitions {
        anyhow::ensure!(
            p <= protospread_aggregate::MAX_PARTITIONS,
            "--partitions {p} is more than the maximum of {}",
            protospread_aggregate::MAX_PARTITIONS
        );
        params.aggregate.target_partitions = p;
    }
    params.without_inference = args.without_inference;
    let engine = protospread_aggregate::EngineOptions {
        memory_limit: ctx.memory_limit_for(&cfg),
        ..Default::default()
    };
    let dir = ctx.out.join("aggregate");
    let s = protospread_aggregate::run_in(
        &ctx.out,
        &params,
        &engine,
        &ctx.provenance(&cfg, "protospread aggregate")?,
        &*ctx.observer(),
    )
    .context("aggregate stage")?;
    if ctx.json {
        let sources: Vec<_> = s
            .sources
            .iter()
            .map(|(src, label, kept, dropped)| {
                serde_json::json!({"source": src, "label": label, "kept_cells": kept, "dropped_cells": dropped})
            })
            .collect();
        ctx.emit(
            "aggregate",
            serde_json::json!({"out": dir, "sources": sources, "files": s.files}),
        );
    } else {
        for (src, label, kept, dropped) in &s.sources {
            ctx.say(format!(
                "aggregate: source {src} ({label}): {kept} cells kept, {dropped} dropped (listed in dropped_cells)"
            ));
        }
        ctx.say(format!(
            "wrote {} tables to {} with SHA256SUMS",
            s.files.len(),
            dir.display()
        ));
    }
    Ok(ExitCode::SUCCESS)
}
