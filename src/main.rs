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
    /// Output path. `run` and the stages (fetch, score, aggregate, report) write a subfolder
    /// each, with its own SHA256SUMS; `sweep lm-eval` writes its task files into this folder
    /// (new or empty); `sweep dictionary` appends its records to this FILE.jsonl, and
    /// `administer` to this FILE.jsonl or, for a folder, to administer/<model>.jsonl in it.
    #[arg(long, global = true, default_value = "out")]
    pub out: PathBuf,
    /// Print nothing but errors (no progress bars, no summary).
    #[arg(long, global = true)]
    pub quiet: bool,
    /// Print the summary as one JSON object instead of text.
    #[arg(long, global = true)]
    pub json: bool,
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
#[derive(Clone)]
pub struct Ctx {
    pub config_path: PathBuf,
    pub out: PathBuf,
    pub quiet: bool,
    pub json: bool,
    /// While `run` writes its staging folder: (staging folder, `--out`) as printed, so that
    /// progress lines name the folder the user asked for.
    pub shown_as: Option<(String, String)>,
}

impl Ctx {
    /// Load and validate pipeline.toml.
    pub fn config(&self) -> anyhow::Result<protospread_core::config::Config> {
        protospread_core::config::Config::load(&self.config_path)
            .with_context(|| format!("reading configuration {}", self.config_path.display()))
    }

    /// Print a line of human-readable output unless --quiet or --json.
    pub fn say(&self, line: impl AsRef<str>) {
        if !self.quiet && !self.json {
            match &self.shown_as {
                Some((staging, out)) => println!("{}", line.as_ref().replace(staging, out)),
                None => println!("{}", line.as_ref()),
            }
        }
    }
}

/// The error and its causes on one line, each cause once: a library error that already
/// shows its source (`path: No such file or directory`) is not followed by that source again.
fn error_text(e: &anyhow::Error) -> String {
    let mut text = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !text.contains(&c) {
            text.push_str(": ");
            text.push_str(&c);
        }
    }
    text
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let ctx = Ctx {
        config_path: cli.config.clone(),
        out: cli.out.clone(),
        quiet: cli.quiet,
        json: cli.json,
        shown_as: None,
    };
    match cmd::dispatch(&ctx, cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", error_text(&e));
            ExitCode::from(1)
        }
    }
}
