//! `protospread report`: every table as CSV, Markdown and Parquet, and report.html (out/report/).

use crate::Ctx;
use anyhow::Context;
use std::process::ExitCode;

/// Render every table of <out>/aggregate/ and the tables listed in [report] tables (by
/// default the score stage's parity, mutation-sweep and norms tables) as canonical CSV,
/// Markdown and a copy of their Parquet file, plus report.md and a self-contained report.html with figures, into <out>/report/
/// with SHA256SUMS. Prints the verdict and the headline tables as Markdown. See docs/report.md.
#[derive(clap::Args, Debug, Default)]
pub(crate) struct Args {}

/// Tables printed after a run, in this order.
/// `verdict_by_rule` follows the study's verdict: the same rule under each reply rule and for
/// the primary and the secondary (single-item) protocol set.
const PRINTED: &[&str] = &[
    "verdict",
    "verdict_by_rule",
    "protocol_vs_sampling",
    "range",
    "reruns",
];

pub(crate) fn run(ctx: &Ctx, _args: Args) -> anyhow::Result<ExitCode> {
    let cfg = ctx.config()?;
    let s = protospread_report::run(&ctx.out, &cfg.report).context("report stage")?;
    let dir = ctx.out.join("report");
    if ctx.json {
        let names: Vec<_> = s.tables.iter().map(|t| &t.name).collect();
        ctx.emit(
            "report",
            serde_json::json!({"out": dir, "tables": names, "files": s.files}),
        );
    } else {
        for name in PRINTED {
            if let Some(t) = s.tables.iter().find(|t| &t.name == name) {
                ctx.say(format!("\n### {} ({}.csv)\n", t.title, t.name));
                ctx.say(t.markdown(true).trim_end());
            }
        }
        ctx.say(format!(
            "\nreport: {} tables as CSV, Markdown and Parquet, report.md and report.html in {} with SHA256SUMS",
            s.tables.len(),
            dir.display()
        ));
    }
    Ok(ExitCode::SUCCESS)
}
