//! `protospread bag DIR`: a BagIt (RFC 8493) archive of a run.

use crate::Ctx;
use protospread_report::{bag_contents, bagging_date, write_bag, Tool};
use std::path::PathBuf;
use std::process::ExitCode;

/// The Cargo.lock this binary was built with; its sha256 goes into the provenance file.
const CARGO_LOCK: &[u8] = include_bytes!("../../Cargo.lock");

/// Write a BagIt bag (RFC 8493, version 1.0) at DIR holding the configuration, every input
/// file (data/, including the scoring key), every output under --out except the download
/// cache, and provenance.json (tool version, Cargo.lock and pipeline.toml hashes, each input's
/// source, revision and sha256). Manifests: sha256 and sha512, tag manifests likewise.
/// Bagging-Date: --date, else SOURCE_DATE_EPOCH, else today's UTC date; with a pinned date the
/// bag is byte-for-byte reproducible. Run `protospread run` first. See docs/report.md.
#[derive(clap::Args, Debug, Default)]
pub(crate) struct Args {
    /// Folder to create (must not exist).
    pub(crate) dir: PathBuf,
    /// Bagging-Date as YYYY-MM-DD (default: SOURCE_DATE_EPOCH's date, else today, UTC).
    #[arg(long)]
    pub(crate) date: Option<String>,
}

pub(crate) fn run(ctx: &Ctx, args: Args) -> anyhow::Result<ExitCode> {
    let cfg = ctx.config()?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let sde = std::env::var("SOURCE_DATE_EPOCH").ok();
    let (date, rule) = bagging_date(args.date.as_deref(), sde.as_deref(), now)?;
    let tool = Tool {
        version: env!("CARGO_PKG_VERSION"),
        cargo_lock: CARGO_LOCK,
    };
    let contents = bag_contents(&cfg, &ctx.config_path, &ctx.out, &tool, &date, rule)?;
    let (payload, info) = (contents.payload, contents.info);
    let s = write_bag(&args.dir, &payload, &info)?;
    ctx.emit(
        "bag",
        serde_json::json!({
            "dir": args.dir.display().to_string(),
            "payload_files": s.files,
            "payload_octets": s.octets,
            "bagging_date": date,
            "bagging_date_rule": rule.to_string(),
        }),
    );
    ctx.say(format!(
        "bag: wrote {} ({} payload files, {} bytes, Bagging-Date {date} {rule})",
        args.dir.display(),
        s.files,
        s.octets
    ));
    Ok(ExitCode::SUCCESS)
}
