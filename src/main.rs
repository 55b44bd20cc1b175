//! `protospread`: recompute protocol-sensitivity studies of language-model evaluations from
//! their stored answers, byte for byte.
//!
//! Stages run in order fetch -> score -> aggregate -> report, each reading the Parquet of the
//! previous one under `--out` and writing its own folder with a `SHA256SUMS` manifest.

// The binary is the one place that talks to the terminal; the library crates may not.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod cmd;
mod outcome;
mod progress;

/// jemalloc, with a background thread that returns freed pages (its options are set where it
/// is built, `.cargo/config.toml`). The stages' operators free most of what they allocate
/// while other threads go on allocating; glibc kept those pages resident, and at 10^8 answers
/// the aggregate stage peaked at 1.42 GB against a heap of 0.77 GB (its engine pool). With
/// jemalloc: 0.88 GB, and 73 s instead of 81 s (docs/performance.md).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

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
pub(crate) struct Cli {
    /// Pipeline configuration file.
    #[arg(long, global = true, default_value = "pipeline.toml")]
    pub(crate) config: PathBuf,
    /// The output folder [default: out]: `run` and the stages (fetch, score, aggregate,
    /// report) write a subfolder each in it, with its own SHA256SUMS, and `bag` packs it;
    /// `administer` keeps its default record file administer/<model>.jsonl in it. Commands
    /// that write elsewhere name their destination themselves: `simulate --dir DIR`,
    /// `administer --to FILE.jsonl`, `sweep lm-eval --task-dir DIR`,
    /// `sweep dictionary --to FILE.jsonl`.
    #[arg(long, global = true, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,
    /// Print nothing but errors (no progress bars, no summary).
    #[arg(long, global = true)]
    pub(crate) quiet: bool,
    /// Print the summary as one JSON object instead of text.
    #[arg(long, global = true)]
    pub(crate) json: bool,
    /// Memory the DataFusion engine may hold before it spills to disk, e.g. `512MiB`, `1GiB`
    /// or a number of bytes; overrides `[engine] memory_limit` of pipeline.toml.
    #[arg(long, global = true, value_name = "SIZE", value_parser = parse_size)]
    pub(crate) memory_limit: Option<u64>,
    #[command(subcommand)]
    pub(crate) command: Command,
}

// Parsed once per process, so the size of the largest variant's arguments costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Run every stage in order: fetch, score, aggregate, report.
    Run,
    /// Fetch every input, verify its sha256, import it to Parquet (out/fetch/).
    Fetch(cmd::fetch::Args),
    /// Scorer parity on the human data, norms, and scale scores of stored answers (out/score/).
    Score(cmd::score::Args),
    /// Per-cell protocol and sampling spread with DataFusion (out/aggregate/).
    Aggregate(cmd::aggregate::Args),
    /// Write every table as CSV, Markdown and Parquet, and an HTML report (out/report/).
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
pub(crate) struct Ctx {
    pub(crate) config_path: PathBuf,
    pub(crate) out: PathBuf,
    /// Whether `--out` was given (else `out` is the default `out`).
    pub(crate) out_given: bool,
    pub(crate) quiet: bool,
    pub(crate) json: bool,
    /// While `run` writes its staging folder: (staging folder, `--out`) as printed, so that
    /// progress lines name the folder the user asked for.
    pub(crate) shown_as: Option<(String, String)>,
    /// With `--json`: the members of the one JSON object printed when the command ends (one
    /// per command or stage). Shared by the clones `run` makes for its stages.
    pub(crate) json_out:
        std::rc::Rc<std::cell::RefCell<serde_json::Map<String, serde_json::Value>>>,
    /// `--memory-limit` in bytes, when given; see [`Ctx::memory_limit_for`].
    pub(crate) memory_limit: Option<u64>,
}

impl Ctx {
    /// Load and validate pipeline.toml.
    pub(crate) fn config(&self) -> anyhow::Result<protospread_core::Config> {
        protospread_core::Config::load(&self.config_path).context("reading the configuration")
    }

    /// The provenance of the Parquet files `command` writes from `cfg` (the configuration
    /// loaded from `--config`): protospread's version, the configuration's sha256, the inputs'.
    pub(crate) fn provenance(
        &self,
        cfg: &protospread_core::Config,
        command: &str,
    ) -> anyhow::Result<protospread_core::Provenance> {
        let config_sha = protospread_core::sha256_file(&self.config_path)?;
        Ok(protospread_core::Provenance::new(
            cfg,
            &config_sha,
            env!("CARGO_PKG_VERSION"),
            command,
        ))
    }

    /// With `--json`, keep `value` as member `name` of the single JSON object the process prints
    /// when it ends; without it, do nothing. Paths of `run`'s staging folder are shown as the
    /// `--out` the user gave.
    pub(crate) fn emit(&self, name: &str, value: serde_json::Value) {
        if !self.json {
            return;
        }
        let value = match &self.shown_as {
            Some((staging, out)) => {
                let text = value.to_string().replace(staging.as_str(), out.as_str());
                serde_json::from_str(&text).unwrap_or(value)
            }
            None => value,
        };
        self.json_out.borrow_mut().insert(name.to_string(), value);
    }

    /// With `--json`, the `error` member of a command that ends with a failing exit code
    /// without an error (a failed check, failed requests): `kind` and `message`.
    pub(crate) fn fail(&self, kind: &str, message: &str) {
        if self.json {
            self.json_out.borrow_mut().insert(
                "error".into(),
                serde_json::json!({"kind": kind, "message": message}),
            );
        }
    }

    /// The engine's memory limit in bytes: `--memory-limit` if given, else
    /// `[engine] memory_limit` of `cfg`.
    pub(crate) fn memory_limit_for(&self, cfg: &protospread_core::Config) -> u64 {
        self.memory_limit.unwrap_or(cfg.engine.memory_limit.0)
    }

    /// Where a stage reports its progress: bars on standard error when standard output is a
    /// terminal and neither `--quiet` nor `--json` is given; nowhere otherwise.
    pub(crate) fn observer(&self) -> std::sync::Arc<dyn protospread_core::Progress> {
        use std::io::IsTerminal;
        if !self.quiet && !self.json && std::io::stdout().is_terminal() {
            std::sync::Arc::new(progress::Bars::default())
        } else {
            std::sync::Arc::new(protospread_core::NoProgress)
        }
    }

    /// Print a line of human-readable output unless --quiet or --json.
    pub(crate) fn say(&self, line: impl AsRef<str>) {
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
        // Some parsers end their message with a newline; a cause is shown trimmed.
        let c = cause.to_string();
        let c = c.trim_end();
        if !text.contains(c) {
            text.push_str(": ");
            text.push_str(c);
        }
    }
    text
}

/// `--memory-limit` by the same rule as `[engine] memory_limit`.
// Not `bytesize`: it reads `1GB` as 10^9 bytes and takes fractions; sizes here take binary
// units only and refuse the decimal ones, which are easily mistaken for them.
fn parse_size(text: &str) -> Result<u64, String> {
    protospread_core::ByteSize::parse(text).map(|b| b.0)
}

/// Whether `--json` is on a command line that clap refused: before any `--`, as a word.
fn json_requested() -> bool {
    std::env::args_os()
        .skip(1)
        .take_while(|a| a != "--")
        .any(|a| a == "--json")
}

/// A command line clap refused, or `--help`/`--version`: with `--json`, one object on stdout
/// (the help text as member `help`), and the text on stderr as without it.
fn parse_failure(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    let shown = matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion);
    if !json_requested() {
        let _ = e.print();
        return if shown {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(outcome::EXIT_USAGE)
        };
    }
    if shown {
        let text = e.render().to_string();
        println!("{}", serde_json::json!({"ok": true, "help": text}));
        return ExitCode::SUCCESS;
    }
    let _ = e.print();
    println!(
        "{}",
        serde_json::json!({"ok": false, "error": outcome::usage_error(&e)})
    );
    ExitCode::from(outcome::EXIT_USAGE)
}

fn main() -> ExitCode {
    // Before any other thread exists: Ctrl-C or SIGTERM removes this process's scratch
    // folders and lock files (docs/reliability.md).
    protospread_core::clean_up_on_signals();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => return parse_failure(e),
    };
    let ctx = Ctx {
        config_path: cli.config.clone(),
        out: cli.out.clone().unwrap_or_else(|| PathBuf::from("out")),
        out_given: cli.out.is_some(),
        quiet: cli.quiet,
        json: cli.json,
        shown_as: None,
        json_out: Default::default(),
        memory_limit: cli.memory_limit,
    };
    let result = cmd::dispatch(&ctx, cli.command);
    if let Err(e) = &result {
        eprintln!("error: {}", error_text(e));
    }
    let code = result.as_ref().map_or(ExitCode::from(1), |c| *c);
    if ctx.json {
        // Exactly one JSON object on stdout, also when the command failed.
        let mut object = ctx.json_out.take();
        if let Err(e) = &result {
            object.insert("error".into(), outcome::error_object(e, error_text(e)));
        } else if code != ExitCode::SUCCESS && !object.contains_key("error") {
            // A command that reports its own failure calls `Ctx::fail`; this is the net.
            object.insert(
                "error".into(),
                serde_json::json!({"kind": "error", "message": "the command failed (see stderr)"}),
            );
        }
        let ok = code == ExitCode::SUCCESS;
        let mut all = serde_json::Map::new();
        all.insert("ok".into(), serde_json::Value::Bool(ok));
        all.append(&mut object);
        println!("{}", serde_json::Value::Object(all));
    }
    code
}
