//! `protospread administer`: record a model's answers under the study's conditions.

use crate::Ctx;
use anyhow::Context;
use protospread_administer::{ClientSettings, Plan, RunLabels, Selection};
use protospread_core::AdministerSection;
use protospread_format::Arm;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Give questionnaires to a model behind an OpenAI-compatible endpoint and record every request.
///
/// Builds the requests of every condition of [administer] in pipeline.toml (by default S0, S0r,
/// SR, SP, ST1 x3, B0, B0r, BS1..BS4) from instrument files, POSTs them to
/// BASE_URL/chat/completions, and appends each reply to the output file (JSONL, stored-answer
/// format v1) as soon as it arrives. Rerunning the same command resumes: answered requests are
/// not sent again, failed ones are. The global --out names the file when it ends in .jsonl,
/// else the file is OUT/administer/<model>.jsonl. Exit code 2 when some requests failed.
///
/// Example: protospread administer --base-url http://127.0.0.1:8088/v1
/// --model SmolLM2-135M-Instruct.Q4_1 --out data/recorded/smollm2.jsonl
#[derive(clap::Args, Debug, Default)]
pub(crate) struct Args {
    /// Base URL of the OpenAI-compatible API, up to and including /v1.
    #[arg(long, required = true)]
    pub(crate) base_url: String,
    /// Model id exactly as it is sent in every request (and recorded).
    #[arg(long, required = true)]
    pub(crate) model: String,
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
    /// `arm` column: api, cli or local.
    #[arg(long, default_value = "api", value_parser = parse_arm)]
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

/// The output file: `--out` itself when it ends in `.jsonl`, else a file per model under it.
fn output_file(out: &Path, model: &str) -> PathBuf {
    if out.extension().is_some_and(|e| e == "jsonl") {
        return out.to_path_buf();
    }
    let safe: String = model
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    out.join("administer").join(format!("{safe}.jsonl"))
}

pub(crate) fn run(ctx: &Ctx, args: Args) -> anyhow::Result<ExitCode> {
    // pipeline.toml is optional here: outside a protospread checkout the defaults apply.
    let (sec, study, base): (AdministerSection, String, PathBuf) = if ctx.config_path.exists() {
        let cfg = ctx.config()?;
        let base = cfg.base_dir.clone();
        (cfg.administer, cfg.study.name, base)
    } else {
        (
            AdministerSection::default(),
            "administered".to_string(),
            PathBuf::from("."),
        )
    };
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
    let Plan {
        instruments,
        conditions,
        requests: planned,
    } = selection.plan(&args.model, &sec, &base)?;
    let out = output_file(&ctx.out, &args.model);
    let settings = ClientSettings::resolve(&sec, args.timeout, args.retries, args.concurrency)?;
    let client = settings.client(&args.base_url, api_key)?;

    if args.dry_run {
        ctx.emit(
            "administer",
            serde_json::json!({
                "dry_run": true,
                "requests": planned.len(),
                "tests": instruments.len(),
                "conditions": conditions.len(),
                "endpoint": client.url(),
                "output": out.display().to_string(),
                "first_request": planned.first().map(|p| serde_json::json!({"key": p.key.clone(), "body": p.body})),
            }),
        );
        ctx.say(format!(
            "administer (dry run): {} requests ({} tests x {} conditions) to {} -> {}",
            planned.len(),
            instruments.len(),
            conditions.len(),
            client.url(),
            out.display()
        ));
        if let Some(p) = planned.first() {
            ctx.say(format!("first request ({}):\n{}", p.key, p.body));
        }
        return Ok(ExitCode::SUCCESS);
    }

    let labels = RunLabels {
        study: args.study.clone().unwrap_or(study),
        model: args.model.clone(),
        arm: args.arm.as_str().to_string(),
        cohort: args.cohort.clone(),
        label: args.label,
        endpoint: client.url().to_string(),
    };
    let progress = !ctx.quiet && !ctx.json && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let s = protospread_administer::administer(
        &client,
        &labels,
        &planned,
        &out,
        settings.concurrency,
        progress,
    )
    .with_context(|| format!("administering to {}", client.url()))?;

    if ctx.json {
        let mut v = serde_json::to_value(&s)?;
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
    Ok(if s.failed > 0 {
        ctx.fail(
            "requests",
            &format!(
                "{} request(s) failed; rerun the same command to send them again",
                s.failed
            ),
        );
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

/// `--arm` by the stored-answer format's spelling ([`Arm::parse`]).
fn parse_arm(text: &str) -> Result<Arm, String> {
    Arm::parse(text).ok_or_else(|| format!("must be api, cli or local, not '{text}'"))
}
