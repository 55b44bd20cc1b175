//! One module per subcommand. Each exposes `Args` (clap) and `run(ctx, args)`.

pub(crate) mod administer;
pub(crate) mod aggregate;
pub(crate) mod bag;
pub(crate) mod fetch;
pub(crate) mod report;
pub(crate) mod score;
pub(crate) mod simulate;
pub(crate) mod sweep;
pub(crate) mod verify;

use crate::{Command, Ctx};
use std::process::ExitCode;

pub(crate) fn dispatch(ctx: &Ctx, command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Run => run_all(ctx),
        // A single stage locks --out, replaces only its own folder, in one step, and keeps the
        // top SHA256SUMS to the stages that are consistent with each other.
        Command::Fetch(a) => with_stage(ctx, "fetch", |c| fetch::run(c, a)),
        Command::Score(a) => with_stage(ctx, "score", |c| score::run(c, a)),
        Command::Aggregate(a) => with_stage(ctx, "aggregate", |c| aggregate::run(c, a)),
        Command::Report(a) => with_stage(ctx, "report", |c| report::run(c, a)),
        Command::Verify(a) => verify::run(ctx, a),
        Command::Bag(a) => bag::run(ctx, a),
        Command::Simulate(a) => simulate::run(ctx, a),
        Command::Administer(a) => administer::run(ctx, a),
        Command::Sweep(a) => sweep::run(ctx, a),
    }
}

type Stage = fn(&Ctx) -> anyhow::Result<ExitCode>;

/// The OpenAI-compatible endpoint a command sends its requests to, and the model it asks.
#[derive(clap::Args, Debug, Default)]
pub(crate) struct Endpoint {
    /// Base URL of the OpenAI-compatible API, up to and including /v1 (e.g.
    /// http://127.0.0.1:8088/v1).
    #[arg(long)]
    pub(crate) base_url: String,
    /// Model id exactly as it is sent in every request (and recorded).
    #[arg(long)]
    pub(crate) model: String,
}

/// `--arm` by the stored-answer format's spellings of [`protospread_format::Arm`].
pub(crate) fn arm_parser() -> impl clap::builder::TypedValueParser<Value = protospread_format::Arm>
{
    use clap::builder::TypedValueParser;
    use protospread_format::Arm;
    clap::builder::PossibleValuesParser::new(Arm::ALL.map(Arm::as_str))
        .map(|s| Arm::parse(&s).expect("every possible value is an arm's spelling"))
}

/// The global `--out` names the output folder; a command that writes a record file refuses a
/// `--out FILE.jsonl` rather than make a folder of that name.
pub(crate) fn out_is_a_folder(ctx: &Ctx, command: &str) -> anyhow::Result<()> {
    if ctx.out_given && ctx.out.extension().is_some_and(|e| e == "jsonl") {
        anyhow::bail!(
            "{command}: --out {} names a file, but --out is the output folder; give the record file as --to FILE.jsonl",
            ctx.out.display()
        );
    }
    Ok(())
}

/// The exit code of a command that sends requests: 2 (and the JSON `error`) when `failed`
/// of them failed.
pub(crate) fn requests_outcome(ctx: &Ctx, failed: usize) -> ExitCode {
    if failed == 0 {
        return ExitCode::SUCCESS;
    }
    ctx.fail(
        "requests",
        &format!("{failed} request(s) failed; rerun the same command to send them again"),
    );
    ExitCode::from(2)
}

/// Check where `--out` is, then claim it (marker, lock, removal of dead temporaries).
fn claim_out(ctx: &Ctx) -> anyhow::Result<protospread_core::OutLock> {
    let cfg = ctx.config()?;
    // A configuration the report stage would refuse stops every stage before it writes.
    protospread_report::check_section(&cfg.report)?;
    let mut inputs: Vec<std::path::PathBuf> = cfg
        .inputs
        .iter()
        .filter_map(|i| match i.source() {
            Ok(protospread_core::InputSource::Local(p)) => Some(cfg.resolve(&p)),
            _ => None,
        })
        .collect();
    for k in [&cfg.score.key, &cfg.score.legacy_keys, &cfg.score.allowlist] {
        inputs.push(cfg.resolve(k));
    }
    protospread_core::check_out_location(&ctx.out, &ctx.config_path, &inputs)?;
    let cache = protospread_core::cache_top(&cfg.fetch.cache_dir);
    Ok(protospread_core::claim_out_dir(&ctx.out, cache.as_deref())?)
}

/// Run `f` holding the claim on `--out`; a failure into a folder the claim created leaves no
/// folder behind.
fn with_out(
    ctx: &Ctx,
    f: impl FnOnce(&Ctx) -> anyhow::Result<ExitCode>,
) -> anyhow::Result<ExitCode> {
    let lock = claim_out(ctx)?;
    let result = f(ctx);
    if !matches!(&result, Ok(c) if *c == ExitCode::SUCCESS) {
        lock.release_unused();
    }
    result
}

/// One stage into `--out`: [`with_out`], and the top `SHA256SUMS` rewritten around the stage
/// (`protospread_core::TopManifest`): it lists the new stage files when the stages
/// before it are listed, and drops the stages after it when the stage's output changed (they
/// were made from the previous one); those are named as stale. A failure leaves it as it was.
fn with_stage(
    ctx: &Ctx,
    stage: &str,
    f: impl FnOnce(&Ctx) -> anyhow::Result<ExitCode>,
) -> anyhow::Result<ExitCode> {
    with_out(ctx, |c| {
        let top = protospread_core::TopManifest::begin(&c.out, stage)?;
        let code = f(c).map_err(|e| out_of_memory(c, stage, e))?;
        if code != ExitCode::SUCCESS {
            return Ok(code);
        }
        let stale = top.finish()?;
        let manifest = c.out.join(protospread_core::MANIFEST_NAME);
        if !stale.is_empty() {
            let names: Vec<String> = stale
                .iter()
                .map(|s| c.out.join(s).display().to_string())
                .collect();
            eprintln!(
                "warning: {} no longer match the other stages (made from earlier outputs, or from a stage that is itself stale) and are not listed in {}; run `protospread run`, or the stages {} in order",
                names.join(", "),
                manifest.display(),
                stale.join(", ")
            );
        }
        c.emit(
            "out",
            serde_json::json!({"manifest": manifest, "stale_stages": stale}),
        );
        Ok(code)
    })
}

/// Every stage in order; the first failing stage stops the run with its exit code.
///
/// All or nothing: the stages write a staging folder beside `--out`, which replaces `--out` in
/// one step after the last stage and the top manifest (docs/reliability.md). A failed run
/// leaves `--out` as it was.
pub(crate) fn run_all(ctx: &Ctx) -> anyhow::Result<ExitCode> {
    with_out(ctx, run_all_claimed)
}

fn run_all_claimed(ctx: &Ctx) -> anyhow::Result<ExitCode> {
    let cfg = ctx.config()?;
    let cache = protospread_core::cache_top(&cfg.fetch.cache_dir);
    let staging = protospread_core::RunStaging::begin(&ctx.out, cache.as_deref())?;
    let sub = Ctx {
        out: staging.path().to_path_buf(),
        shown_as: Some((
            staging.path().display().to_string(),
            ctx.out.display().to_string(),
        )),
        ..ctx.clone()
    };
    let code = run_stages(&sub)?;
    if code != ExitCode::SUCCESS {
        return Ok(code);
    }
    // One manifest over every stage's outputs; the download cache is not an output.
    let skip: Vec<&str> = cache.iter().map(String::as_str).collect();
    let m = protospread_core::Manifest::from_dir_excluding(staging.path(), &skip)?;
    protospread_core::write_atomic(
        &staging.path().join(protospread_core::MANIFEST_NAME),
        m.render().as_bytes(),
    )?;
    staging.commit()?;
    ctx.emit(
        "run",
        serde_json::json!({
            "files_hashed": m.entries.len(),
            "manifest": ctx.out.join(protospread_core::MANIFEST_NAME),
        }),
    );
    ctx.say(format!(
        "run: {} output files hashed in {}",
        m.entries.len(),
        ctx.out.join(protospread_core::MANIFEST_NAME).display()
    ));
    Ok(ExitCode::SUCCESS)
}

/// The four stages into `ctx.out` (the run's staging folder).
fn run_stages(ctx: &Ctx) -> anyhow::Result<ExitCode> {
    let stages: [(&str, Stage); 4] = [
        ("fetch", |c| fetch::run(c, Default::default())),
        ("score", |c| score::run(c, Default::default())),
        ("aggregate", |c| aggregate::run(c, Default::default())),
        ("report", |c| report::run(c, Default::default())),
    ];
    for (name, stage) in stages {
        let code =
            stage(ctx).map_err(|e| out_of_memory(ctx, name, e.context(format!("stage {name}"))))?;
        if code != ExitCode::SUCCESS {
            return Ok(code);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `e`, the failure of stage `stage`; when the engine ran out of its memory pool, with the
/// limit in force and the two ways to raise it (the input is not at fault).
fn out_of_memory(ctx: &Ctx, stage: &str, e: anyhow::Error) -> anyhow::Error {
    if !protospread_engine::is_out_of_memory(e.as_ref()) {
        return e;
    }
    let config = ctx.config_path.display();
    let (limit, from) = match ctx.memory_limit {
        Some(n) => (n, "set by --memory-limit".to_string()),
        None => match protospread_core::Config::load(&ctx.config_path) {
            Ok(cfg) => (
                cfg.engine.memory_limit.0,
                format!("`[engine] memory_limit` of {config}, 1GiB when not set"),
            ),
            Err(_) => return e,
        },
    };
    let size = |n: u64| match n {
        n if n % (1 << 30) == 0 => format!("{}GiB", n >> 30),
        n if n % (1 << 20) == 0 => format!("{}MiB", n >> 20),
        n => format!("{n} bytes"),
    };
    e.context(format!(
        "stage {stage} ran out of memory: the engine may hold {} ({from}); raise \
         `[engine] memory_limit` in {config}, or pass a larger `--memory-limit` (e.g. \
         `--memory-limit {}`)",
        size(limit),
        size(limit.saturating_mul(4).max(1 << 30)),
    ))
}
