//! `protospread simulate`: write the simulated study (docs/simulation.md).

use crate::Ctx;
use anyhow::Context;
use protospread_score::ScoringKey;
use protospread_simulate::{
    item_map, simulate, write_simulation, SIMULATED_ANSWERS_FILE, SIMULATED_LABEL,
    SIMULATED_TRUTH_FILE,
};
use std::path::PathBuf;
use std::process::ExitCode;

/// Write a simulated stored-answer set with the published design and planted effects.
///
/// Writes DIR/simulated_answers.jsonl (stored-answer format v1, every record labelled
/// "simulated") and DIR/simulated_truth.json (everything planted: trait levels, condition
/// shifts, option-order bias, unreadable replies). The same seed always gives the same bytes.
/// The folder is `--dir DIR` (created if needed; both files are replaced atomically). The
/// committed study was written with
/// `protospread simulate --seed 20250401 --dir data/simulated`.
#[derive(clap::Args, Debug, Default)]
pub(crate) struct Args {
    /// The folder the two files are written to (a data folder, not the output folder
    /// `--out`).
    #[arg(long, value_name = "DIR", required = true)]
    pub(crate) dir: PathBuf,
    /// Seed of the generative model.
    #[arg(long, default_value_t = 20250401)]
    pub(crate) seed: u64,
    /// Scoring key giving each item's dimension and reverse flag (default: [score] key of
    /// pipeline.toml, or data/scoring_key.csv without a configuration file).
    #[arg(long, value_name = "CSV")]
    pub(crate) key: Option<PathBuf>,
}

pub(crate) fn run(ctx: &Ctx, args: Args) -> anyhow::Result<ExitCode> {
    let key_path = match &args.key {
        Some(k) => k.clone(),
        None if ctx.config_path.exists() => {
            let cfg = ctx.config()?;
            cfg.resolve(&cfg.score.key)
        }
        None => PathBuf::from("data/scoring_key.csv"),
    };
    let key = ScoringKey::load(&key_path).context("loading the scoring key")?;
    let items = item_map(&key)?;
    let sim = simulate(args.seed, &items)?;
    write_simulation(&args.dir, &sim).with_context(|| format!("writing {}", args.dir.display()))?;
    let answers = args.dir.join(SIMULATED_ANSWERS_FILE);
    let sha = protospread_core::sha256_file(&answers)?;
    if ctx.json {
        ctx.emit(
            "simulate",
            serde_json::json!({
                "label": SIMULATED_LABEL,
                "seed": args.seed,
                "records": sim.truth.records,
                "models": sim.truth.models.len(),
                "planted": sim.truth.planted_counts,
                "answers": answers.display().to_string(),
                "answers_sha256": sha,
                "truth": args.dir.join(SIMULATED_TRUTH_FILE).display().to_string(),
            }),
        );
    } else {
        ctx.say(format!(
            "simulated study (label \"simulated\"), seed {}: {} records from {} models",
            args.seed,
            sim.truth.records,
            sim.truth.models.len()
        ));
        for (status, n) in &sim.truth.planted_counts {
            ctx.say(format!("  planted {status}: {n}"));
        }
        ctx.say(format!("wrote {} (sha256 {sha})", answers.display()));
        ctx.say(format!(
            "wrote {}",
            args.dir.join(SIMULATED_TRUTH_FILE).display()
        ));
    }
    Ok(ExitCode::SUCCESS)
}
