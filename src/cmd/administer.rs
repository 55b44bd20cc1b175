//! `protospread administer`: record a model's answers under the study's conditions.

use crate::Ctx;
use anyhow::Context;
use protospread_administer::{
    default_output, Client, ClientSettings, Plan, RunLabels, Selection, Summary,
};
use protospread_core::AdministerSection;
use protospread_format::Arm;
use std::path::PathBuf;
use std::process::ExitCode;

/// Give questionnaires to a model behind an OpenAI-compatible endpoint and record every request.
///
/// Builds the requests of every condition of [administer] in pipeline.toml (by default S0, S0r,
/// SR, SP, ST1 x3, B0, B0r, BS1..BS4) from instrument files, POSTs them to
/// BASE_URL/chat/completions, and appends each reply to the record file (JSONL, stored-answer
/// format v1) as soon as it arrives. Rerunning the same command resumes: answered requests are
/// not sent again, failed ones are. The record file is --to FILE.jsonl, by default
/// OUT/administer/<model>.jsonl under the global --out folder. Exit code 2 when some requests
/// failed.
///
/// Example: protospread administer --base-url http://127.0.0.1:8088/v1
/// --model SmolLM2-135M-Instruct.Q4_1 --to data/recorded/smollm2.jsonl
#[derive(clap::Args, Debug, Default)]
pub(crate) struct Args {
    #[command(flatten)]
    pub(crate) endpoint: crate::cmd::Endpoint,
    /// The record file (JSONL) the replies are appended to; default:
    /// OUT/administer/<model>.jsonl under the global --out folder.
    #[arg(long, value_name = "FILE.jsonl")]
    pub(crate) to: Option<PathBuf>,
    /// Instrument file(s) (TOML); default: [administer] instruments of pipeline.toml.
    #[arg(long)]
    pub(crate) instrument: Vec<PathBuf>,
    /// Tests to administer, comma separated (default: every test of the instrument files).
    #[arg(long, value_delimiter = ',')]
    pub(crate) tests: Vec<String>,
    /// Conditions, comma separated (default: [administer] conditions of pipeline.toml).
    #[arg(long, value_delimiter = ',')]
    pub(crate) conditions: Vec<String>,
    /// Only these human item numbers in single-item conditions, comma separated (a quick check
    /// of an endpoint; whole-test conditions are not affected).
    #[arg(long, value_delimiter = ',')]
    pub(crate) items: Vec<u32>,
    /// Name of the environment variable holding the API key (sent as a Bearer token).
    #[arg(long)]
    pub(crate) api_key_env: Option<String>,
    /// Requests in flight at once (default: [administer] concurrency).
    #[arg(long)]
    pub(crate) concurrency: Option<usize>,
    /// Per-request timeout in seconds (default: [administer] timeout_seconds).
    #[arg(long)]
    pub(crate) timeout: Option<u64>,
    /// Retries after the first attempt (default: [administer] retries).
    #[arg(long)]
    pub(crate) retries: Option<u32>,
    /// `study` column (default: [study] name).
    #[arg(long)]
    pub(crate) study: Option<String>,
    /// `arm` column.
    #[arg(long, default_value = "api", value_parser = crate::cmd::arm_parser())]
    pub(crate) arm: Arm,
    /// `cohort` column.
    #[arg(long, default_value = "full")]
    pub(crate) cohort: String,
    /// `label` column.
    #[arg(long, default_value = "recorded")]
    pub(crate) label: String,
    /// Print the plan (request count and the first request body) and send nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
}

/// `[administer]`, the study's name and the folder instrument paths are relative to; without
/// pipeline.toml (outside a protospread checkout) the defaults apply.
fn settings(ctx: &Ctx) -> anyhow::Result<(AdministerSection, String, PathBuf)> {
    if !ctx.config_path.exists() {
        let name = "administered".to_string();
        return Ok((AdministerSection::default(), name, PathBuf::from(".")));
    }
    let cfg = ctx.config()?;
    Ok((cfg.administer, cfg.study.name, cfg.base_dir))
}

/// The record file: `--to`, else the file per model under the global `--out` folder.
fn record_file(ctx: &Ctx, args: &Args) -> anyhow::Result<PathBuf> {
    crate::cmd::out_is_a_folder(ctx, "administer")?;
    Ok(match &args.to {
        Some(f) => f.clone(),
        None => default_output(&ctx.out, &args.endpoint.model),
    })
}

pub(crate) fn run(ctx: &Ctx, args: Args) -> anyhow::Result<ExitCode> {
    let (sec, study, base) = settings(ctx)?;
    let out = record_file(ctx, &args)?;
    let api_key = match &args.api_key_env {
        None => None,
        Some(var) => Some(std::env::var(var).map_err(|_| {
            anyhow::anyhow!("--api-key-env {var}: the environment variable {var} is not set")
        })?),
    };
    let selection = Selection {
        instruments: args.instrument.clone(),
        tests: args.tests.clone(),
        conditions: args.conditions.clone(),
        items: args.items.clone(),
    };
    let plan = selection.plan(&args.endpoint.model, &sec, &base)?;
    let settings = ClientSettings::resolve(&sec, args.timeout, args.retries, args.concurrency)?;
    let client = settings.client(&args.endpoint.base_url, api_key)?;
    if args.dry_run {
        dry_run(ctx, &plan, &client, &out);
        return Ok(ExitCode::SUCCESS);
    }
    let labels = RunLabels {
        study: args.study.clone().unwrap_or(study),
        model: args.endpoint.model.clone(),
        arm: args.arm.as_str().to_string(),
        cohort: args.cohort.clone(),
        label: args.label,
        endpoint: client.url().to_string(),
    };
    let progress = !ctx.quiet && !ctx.json && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let s = protospread_administer::administer(
        &client,
        &labels,
        &plan.requests,
        &out,
        settings.concurrency,
        progress,
    )
    .with_context(|| format!("administering to {}", client.url()))?;
    show(ctx, &s, &out)
}

/// `--dry-run`: the plan's size, endpoint, record file and first request.
fn dry_run(ctx: &Ctx, plan: &Plan, client: &Client, out: &std::path::Path) {
    let first = plan.requests.first();
    ctx.emit(
        "administer",
        serde_json::json!({
            "dry_run": true,
            "requests": plan.requests.len(),
            "tests": plan.instruments.len(),
            "conditions": plan.conditions.len(),
            "endpoint": client.url(),
            "output": out.display().to_string(),
            "first_request": first.map(|p| serde_json::json!({"key": p.key.clone(), "body": p.body})),
        }),
    );
    ctx.say(format!(
        "administer (dry run): {} requests ({} tests x {} conditions) to {} -> {}",
        plan.requests.len(),
        plan.instruments.len(),
        plan.conditions.len(),
        client.url(),
        out.display()
    ));
    if let Some(p) = first {
        ctx.say(format!("first request ({}):\n{}", p.key, p.body));
    }
}

/// Print what the run did; exit code 2 when requests failed.
fn show(ctx: &Ctx, s: &Summary, out: &std::path::Path) -> anyhow::Result<ExitCode> {
    if ctx.json {
        let mut v = serde_json::to_value(s)?;
        v["output"] = serde_json::Value::String(out.display().to_string());
        ctx.emit("administer", v);
    } else {
        ctx.say(format!(
            "administer: {} planned, {} already answered, {} sent: {} answered, {} failed -> {} ({} records)",
            s.planned,
            s.already_answered,
            s.sent,
            s.answered,
            s.failed,
            out.display(),
            s.records_in_file
        ));
        if s.truncated_bytes > 0 {
            ctx.say(format!(
                "administer: cut an incomplete last line ({} bytes) left by an interrupted run",
                s.truncated_bytes
            ));
        }
        if s.failed > 0 {
            ctx.say("administer: failed requests are recorded with their error; rerun the same command to send them again");
        }
    }
    Ok(crate::cmd::requests_outcome(ctx, s.failed))
}
