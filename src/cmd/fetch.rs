//! `protospread fetch`: verify every input against its sha256 and import it (out/fetch/).

use crate::Ctx;
use protospread_fetch::{Options, Origin, Summary};
use std::io::IsTerminal;
use std::process::ExitCode;

/// Fetch every input of pipeline.toml (local path, http(s) URL, or Hugging Face file at a
/// pinned commit), verify its sha256, import human CSVs and stored answers to Parquet under
/// <out>/fetch/, and write <out>/fetch/SHA256SUMS. Downloads are cached in <out>/cache/
/// ([fetch] cache_dir), so a second run needs no network. HF_ENDPOINT overrides
/// [fetch] hf_endpoint. On any error nothing under <out>/fetch/ changes. See docs/fetch.md.
#[derive(clap::Args, Debug, Default)]
pub(crate) struct Args {}

pub(crate) fn run(ctx: &Ctx, _args: Args) -> anyhow::Result<ExitCode> {
    let cfg = ctx.config()?;
    let opts = Options {
        progress: !ctx.quiet && std::io::stderr().is_terminal(),
        memory_limit: ctx.memory_limit,
        provenance: ctx.provenance(&cfg, "protospread fetch")?,
        observer: ctx.observer(),
        ..Options::from_env()
    };
    let summary = protospread_fetch::run(&cfg, &ctx.out, &opts)?;
    if ctx.json {
        ctx.emit("fetch", serde_json::to_value(&summary)?);
    } else {
        for line in summary_lines(&summary) {
            ctx.say(line);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn summary_lines(s: &Summary) -> Vec<String> {
    let count = |o: Origin| s.inputs.iter().filter(|i| i.origin == o).count();
    let mut lines = vec![format!(
        "fetch: {} input{}, all verified by sha256 ({} local, {} from cache, {} downloaded)",
        s.inputs.len(),
        if s.inputs.len() == 1 { "" } else { "s" },
        count(Origin::Local),
        count(Origin::Cache),
        count(Origin::Download)
    )];
    let width = s.inputs.iter().map(|i| i.name.len()).max().unwrap_or(0);
    for i in &s.inputs {
        let what = match (&i.rows, i.role.as_str()) {
            (Some(r), "human") => format!(
                "{} rows ({})",
                r,
                i.instrument.as_deref().unwrap_or_default()
            ),
            (Some(r), _) => format!("{r} records"),
            (None, _) => format!("{} bytes", i.bytes),
        };
        lines.push(format!(
            "  {:<width$}  {:<7}  {:<32}  -> {}/{}",
            i.name, i.role, what, s.out_dir, i.output
        ));
        for x in &i.excluded {
            lines.push(format!(
                "  {:<width$}  excluded row {} (line {}, id {}) of {}, columns {}: {}",
                "",
                x.row,
                x.line,
                x.id,
                i.source,
                x.columns.join(","),
                x.reason
            ));
        }
    }
    if let Some(n) = s.sweep_documents {
        lines.push(format!(
            "  [sweep] runs: {n} documents, checked as one sweep -> {}/sweep_samples.parquet",
            s.out_dir
        ));
    }
    for r in &s.removed {
        lines.push(format!("  removed stale {}/{r}", s.out_dir));
    }
    lines.push(format!("wrote {} ({} files listed)", s.manifest, s.files));
    lines
}
