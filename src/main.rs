//! `protospread`: recompute protocol-sensitivity studies of language-model evaluations from
//! their stored answers, byte for byte.
//!
//! Stages run in order fetch -> score -> aggregate -> report, each reading the Parquet of the
//! previous one under `--out` and writing its own folder with a `SHA256SUMS` manifest.

mod cmd;

use anyhow::Context;
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// Recompute protocol-sensitivity studies of LLM evaluations from stored answers.
///
/// Start with `protospread run`: it fetches and verifies every input named in pipeline.toml,
/// checks scorer parity on the human data, scores the stored answers, aggregates them and
/// writes the study's tables under out/. `protospread verify` then regenerates everything in
/// a fresh folder and compares it with the hashes committed in checksums/.
#[derive(Parser, Debug)]
#[command(name = "protospread", version, about, long_about)]
pub struct Cli {
    /// Pipeline configuration file.
    #[arg(long, global = true, default_value = "pipeline.toml")]
    pub config: PathBuf,
    /// Output folder; each stage writes a subfolder with its own SHA256SUMS.
    #[arg(long, global = true, default_value = "out")]
    pub out: PathBuf,
    /// Print nothing but errors (no progress bars, no summary).
    #[arg(long, global = true)]
    pub quiet: bool,
    /// Print the summary as one JSON object instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    /// Memory the DataFusion engine may hold before it spills to disk, e.g. `512MiB`, `1GiB`
    /// or a number of bytes; overrides `[engine] memory_limit` of pipeline.toml.
    #[arg(long, global = true, value_name = "SIZE", value_parser = parse_size)]
    pub memory_limit: Option<u64>,
    #[command(subcommand)]
    pub command: Command,
}

// Parsed once per process, so the size of the largest variant's arguments costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run every stage in order: fetch, score, aggregate, report.
    Run,
    /// Fetch every input, verify its sha256, import it to Parquet (out/fetch/).
    Fetch(cmd::fetch::Args),
    /// Scorer parity on the human data, norms, and scale scores of stored answers (out/score/).
    Score(cmd::score::Args),
    /// Per-cell protocol and sampling spread with DataFusion (out/aggregate/).
    Aggregate(cmd::aggregate::Args),
    /// Write every table as CSV and Markdown, and an HTML report (out/report/).
    Report(cmd::report::Args),
    /// Regenerate everything in a fresh folder and compare with checksums/.
    Verify(cmd::verify::Args),
    /// Write a BagIt (RFC 8493) archive of inputs, key, configuration and outputs.
    Bag(cmd::bag::Args),
    /// Write a simulated stored-answer set with the published design (labelled "simulated").
    Simulate(cmd::simulate::Args),
    /// Administer a questionnaire to a model behind an OpenAI-compatible endpoint.
    Administer(cmd::administer::Args),
    /// Few-shot delimiter sweeps (lm-evaluation-harness task files, ingestion, native task).
    Sweep(cmd::sweep::Args),
}

/// What every command gets: the parsed global options and, lazily, the configuration.
pub struct Ctx {
    pub config_path: PathBuf,
    pub out: PathBuf,
    pub quiet: bool,
    pub json: bool,
    /// `--memory-limit` in bytes, when given; see [`Ctx::memory_limit_for`].
    pub memory_limit: Option<u64>,
}

impl Ctx {
    /// Load and validate pipeline.toml.
    pub fn config(&self) -> anyhow::Result<protospread_core::config::Config> {
        protospread_core::config::Config::load(&self.config_path)
            .with_context(|| format!("reading configuration {}", self.config_path.display()))
    }

    /// The engine's memory limit in bytes: `--memory-limit` if given, else
    /// `[engine] memory_limit` of `cfg`.
    pub fn memory_limit_for(&self, cfg: &protospread_core::config::Config) -> u64 {
        self.memory_limit.unwrap_or(cfg.engine.memory_limit.0)
    }

    /// Print a line of human-readable output unless --quiet or --json.
    pub fn say(&self, line: impl AsRef<str>) {
        if !self.quiet && !self.json {
            println!("{}", line.as_ref());
        }
    }
}

/// `--memory-limit` by the same rule as `[engine] memory_limit`.
fn parse_size(text: &str) -> Result<u64, String> {
    protospread_core::config::ByteSize::parse(text).map(|b| b.0)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let ctx = Ctx {
        config_path: cli.config.clone(),
        out: cli.out.clone(),
        quiet: cli.quiet,
        json: cli.json,
        memory_limit: cli.memory_limit,
    };
    match cmd::dispatch(&ctx, cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}
