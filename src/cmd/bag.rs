//! `protospread bag DIR`: a BagIt (RFC 8493) archive of a run.

use crate::Ctx;
use anyhow::Context;
use protospread_core::config::Source;
use protospread_report::bag::{self, Content, PayloadFile};
use std::path::{Path, PathBuf};
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
pub struct Args {
    /// Folder to create (must not exist).
    pub dir: PathBuf,
    /// Bagging-Date as YYYY-MM-DD (default: SOURCE_DATE_EPOCH's date, else today, UTC).
    #[arg(long)]
    pub date: Option<String>,
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    for e in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let e = e?;
        if e.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let p = e.path();
        if e.file_type()?.is_dir() {
            walk(&p, out)?;
        } else if e.file_type()?.is_file() {
            out.push(p);
        }
    }
    Ok(())
}

pub fn run(ctx: &Ctx, args: Args) -> anyhow::Result<ExitCode> {
    let cfg = ctx.config()?;
    if !ctx.out.join("report").is_dir() {
        anyhow::bail!(
            "{} holds no report; run `protospread run --out {}` first",
            ctx.out.display(),
            ctx.out.display()
        );
    }
    let mut payload = Vec::new();
    let config_name = ctx
        .config_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "pipeline.toml".into());
    payload.push(PayloadFile {
        path: format!("config/{config_name}"),
        content: Content::File(ctx.config_path.clone()),
    });
    for (rel, abs) in protospread_report::verify::input_files(&cfg, &ctx.config_path)? {
        if abs == ctx.config_path || rel == config_name {
            continue;
        }
        let path = if rel.starts_with("..") || rel.starts_with('/') {
            format!(
                "inputs/external/{}",
                abs.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            )
        } else {
            format!("inputs/{rel}")
        };
        payload.push(PayloadFile {
            path,
            content: Content::File(abs),
        });
    }
    let mut outs = Vec::new();
    for e in
        std::fs::read_dir(&ctx.out).with_context(|| format!("reading {}", ctx.out.display()))?
    {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        if name == cfg.fetch.cache_dir.to_string_lossy() || name == "cache" || name.starts_with('.')
        {
            continue;
        }
        if e.file_type()?.is_dir() {
            walk(&e.path(), &mut outs)?;
        } else {
            outs.push(e.path());
        }
    }
    for p in outs {
        let rel = protospread_core::hash::rel_path(&ctx.out, &p);
        payload.push(PayloadFile {
            path: format!("outputs/{rel}"),
            content: Content::File(p),
        });
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let sde = std::env::var("SOURCE_DATE_EPOCH").ok();
    let (date, rule) = bag::bagging_date(args.date.as_deref(), sde.as_deref(), now)?;
    let inputs: Vec<_> = cfg
        .inputs
        .iter()
        .map(|i| {
            let (source, revision) = match i.source() {
                Ok(Source::Local(p)) => (format!("path:{}", p.display()), None),
                Ok(Source::Http(u)) => (format!("url:{u}"), None),
                Ok(Source::HuggingFace(h)) => {
                    (format!("hf:{}/{}", h.repo, h.file), Some(h.commit.clone()))
                }
                Err(e) => (format!("invalid: {e}"), None),
            };
            serde_json::json!({
                "name": i.name, "role": format!("{:?}", i.role).to_lowercase(),
                "instrument": i.instrument, "label": i.label,
                "source": source, "revision": revision, "sha256": i.sha256,
            })
        })
        .collect();
    let provenance = serde_json::json!({
        "tool": "protospread",
        "version": env!("CARGO_PKG_VERSION"),
        "cargo_lock_sha256": protospread_core::hash::sha256_hex(CARGO_LOCK),
        "config": { "file": config_name, "sha256": protospread_core::hash::sha256_file(&ctx.config_path)? },
        "study": cfg.study.name,
        "inputs": inputs,
        "bagging_date": date,
        "bagging_date_rule": rule,
        "layout": "data/config: configuration; data/inputs: input files by path relative to the configuration's folder; data/outputs: every output of the run except the download cache",
    });
    let mut text = serde_json::to_string_pretty(&provenance)?;
    text.push('\n');
    payload.push(PayloadFile {
        path: "provenance.json".into(),
        content: Content::Bytes(text.into_bytes()),
    });
    let info = vec![
        (
            "Bag-Software-Agent".to_string(),
            format!("protospread {}", env!("CARGO_PKG_VERSION")),
        ),
        ("Bagging-Date".to_string(), date.clone()),
        (
            "External-Description".to_string(),
            format!(
                "{}: configuration, inputs, outputs and provenance of a protospread run",
                cfg.study.name
            ),
        ),
    ];
    let s = bag::write_bag(&args.dir, &payload, &info)?;
    ctx.say(format!(
        "bag: wrote {} ({} payload files, {} bytes, Bagging-Date {date} {rule})",
        args.dir.display(),
        s.files,
        s.octets
    ));
    Ok(ExitCode::SUCCESS)
}
