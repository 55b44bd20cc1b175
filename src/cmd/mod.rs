//! One module per subcommand. Each exposes `Args` (clap) and `run(ctx, args)`.

pub mod administer;
pub mod aggregate;
pub mod bag;
pub mod fetch;
pub mod report;
pub mod score;
pub mod simulate;
pub mod sweep;
pub mod verify;

use crate::{Command, Ctx};
use std::process::ExitCode;

pub fn dispatch(ctx: &Ctx, command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Run => run_all(ctx),
        Command::Fetch(a) => fetch::run(ctx, a),
        Command::Score(a) => score::run(ctx, a),
        Command::Aggregate(a) => aggregate::run(ctx, a),
        Command::Report(a) => report::run(ctx, a),
        Command::Verify(a) => verify::run(ctx, a),
        Command::Bag(a) => bag::run(ctx, a),
        Command::Simulate(a) => simulate::run(ctx, a),
        Command::Administer(a) => administer::run(ctx, a),
        Command::Sweep(a) => sweep::run(ctx, a),
    }
}

type Stage = fn(&Ctx) -> anyhow::Result<ExitCode>;

/// Every stage in order; the first failing stage stops the run with its exit code.
pub fn run_all(ctx: &Ctx) -> anyhow::Result<ExitCode> {
    let stages: [(&str, Stage); 4] = [
        ("fetch", |c| fetch::run(c, Default::default())),
        ("score", |c| score::run(c, Default::default())),
        ("aggregate", |c| aggregate::run(c, Default::default())),
        ("report", |c| report::run(c, Default::default())),
    ];
    for (name, stage) in stages {
        let code = stage(ctx).map_err(|e| e.context(format!("stage {name}")))?;
        if code != ExitCode::SUCCESS {
            return Ok(code);
        }
    }
    // One manifest over every stage's outputs; the download cache is not an output.
    let m = protospread_core::hash::Manifest::from_dir_excluding(&ctx.out, &["cache"])?;
    protospread_core::atomic::write_atomic(
        &ctx.out.join(protospread_core::hash::MANIFEST_NAME),
        m.render().as_bytes(),
    )?;
    ctx.say(format!(
        "run: {} output files hashed in {}",
        m.entries.len(),
        ctx.out
            .join(protospread_core::hash::MANIFEST_NAME)
            .display()
    ));
    Ok(ExitCode::SUCCESS)
}
