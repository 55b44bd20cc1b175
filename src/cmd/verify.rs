//! `protospread verify`: regenerate everything in a fresh folder and compare with checksums/.

use crate::Ctx;
use anyhow::Context;
use protospread_report::{
    compare_inputs, compare_outputs, input_manifest, read_expected, update_checksums, Difference,
};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Regenerate every output in a fresh temporary folder (all stages, as `run`), then compare
/// the inputs with checksums/inputs.sha256, every output with checksums/outputs.sha256 and,
/// for a differing table, its CSV with the committed copy in checksums/tables/ to name the
/// first differing row and column. Exit 0 with a one-line summary if everything matches;
/// otherwise exit 1 and name each differing, missing or extra file. The regenerated folder
/// is removed unless --keep is given. `--update` rewrites checksums/ from a fresh regeneration (do this on purpose only,
/// and review the diff). See docs/report.md.
#[derive(clap::Args, Debug, Default)]
pub(crate) struct Args {
    /// Rewrite checksums/ (inputs.sha256, outputs.sha256, tables/) from a fresh regeneration.
    #[arg(long)]
    pub(crate) update: bool,
    /// The checksums folder (default: checksums/ next to the configuration file).
    #[arg(long)]
    pub(crate) checksums: Option<PathBuf>,
    /// Keep the regenerated folder (whether or not everything matches).
    #[arg(long)]
    pub(crate) keep: bool,
}

/// Run every stage into `out`, silently.
fn regenerate(ctx: &Ctx, out: &Path) -> anyhow::Result<ExitCode> {
    let sub = Ctx {
        config_path: ctx.config_path.clone(),
        out: out.to_path_buf(),
        out_given: true,
        quiet: true,
        json: false,
        shown_as: None,
        json_out: Default::default(),
        memory_limit: ctx.memory_limit,
    };
    crate::cmd::run_all(&sub)
}

pub(crate) fn run(ctx: &Ctx, args: Args) -> anyhow::Result<ExitCode> {
    let cfg = ctx.config()?;
    let checksums = args
        .checksums
        .clone()
        .unwrap_or_else(|| cfg.base_dir.join("checksums"));
    let inputs = input_manifest(&cfg, &ctx.config_path).context("hashing the inputs")?;
    // Read before the temporary folder exists, so a bad checksums/ leaves nothing behind.
    let expected = if args.update {
        None
    } else {
        Some(read_expected(&checksums)?)
    };
    // Removed when dropped, on Ctrl-C, or by the next process after a kill.
    let work = protospread_core::Scratch::new("verify").context("creating a scratch folder")?;
    let out = work.path().join("out");

    if args.update {
        return update(ctx, &checksums, &inputs, &out);
    }

    let (exp_inputs, exp_outputs) = expected.expect("read above unless --update");
    let mut diffs: Vec<Difference> = compare_inputs(&exp_inputs, &inputs);
    let regen = regenerate(ctx, &out);
    let regen_error = match regen {
        Ok(code) if code == ExitCode::SUCCESS => None,
        Ok(_) => Some("a stage exited with a failure code".to_string()),
        Err(e) => Some(format!("{e:#}")),
    };
    if regen_error.is_none() {
        match compare_outputs(&checksums, &exp_outputs, &out) {
            Ok(d) => diffs.extend(d),
            Err(e) => return Err(e.into()),
        }
    }
    let kept = (args.keep && out.exists()).then(|| {
        work.keep();
        out.clone()
    });
    let outcome = Outcome {
        inputs: inputs.entries.len(),
        outputs: exp_outputs.entries.len(),
        diffs,
        regen_error,
        kept,
    };
    Ok(outcome.show(ctx, &checksums, args.keep))
}

/// `--update`: regenerate, then rewrite `checksums` from the fresh outputs.
fn update(
    ctx: &Ctx,
    checksums: &Path,
    inputs: &protospread_core::Manifest,
    out: &Path,
) -> anyhow::Result<ExitCode> {
    let code = regenerate(ctx, out).context("regenerating the outputs")?;
    if code != ExitCode::SUCCESS {
        anyhow::bail!("a stage failed; checksums/ left unchanged");
    }
    let (ni, no, nt) = update_checksums(checksums, inputs, out)?;
    ctx.say(format!(
        "verify --update: wrote {} ({ni} inputs, {no} outputs, {nt} tables); review with `git diff checksums/`",
        checksums.display()
    ));
    Ok(ExitCode::SUCCESS)
}

/// What a comparison found.
struct Outcome {
    inputs: usize,
    outputs: usize,
    diffs: Vec<Difference>,
    regen_error: Option<String>,
    kept: Option<PathBuf>,
}

impl Outcome {
    fn ok(&self) -> bool {
        self.diffs.is_empty() && self.regen_error.is_none()
    }

    /// " and a failed regeneration" when it failed.
    fn regen_note(&self) -> &'static str {
        if self.regen_error.is_some() {
            " and a failed regeneration"
        } else {
            ""
        }
    }

    /// Print the outcome (JSON, or a line; differences on stderr) and give the exit code.
    fn show(&self, ctx: &Ctx, checksums: &Path, keep: bool) -> ExitCode {
        if ctx.json {
            self.emit(ctx);
        }
        if self.ok() {
            ctx.say(format!(
                "verify: OK, {} inputs and {} outputs match {}",
                self.inputs,
                self.outputs,
                checksums.display()
            ));
            return ExitCode::SUCCESS;
        }
        let message = format!(
            "verify: {} difference(s){}",
            self.diffs.len(),
            self.regen_note()
        );
        ctx.fail("check", &message);
        if !ctx.json {
            self.print_failure(keep);
        }
        ExitCode::from(1)
    }

    /// The `verify` member of the JSON object.
    fn emit(&self, ctx: &Ctx) {
        let list: Vec<_> = self
            .diffs
            .iter()
            .map(|d| serde_json::json!({"kind": d.kind, "path": d.path, "detail": d.detail}))
            .collect();
        ctx.emit(
            "verify",
            serde_json::json!({
                "ok": self.ok(),
                "inputs": self.inputs,
                "outputs": self.outputs,
                "regeneration_error": self.regen_error,
                "differences": list,
                "regenerated": self.kept,
            }),
        );
    }

    /// Each difference, the failed regeneration and the verdict, on stderr (even with
    /// --quiet: they are the result).
    fn print_failure(&self, keep: bool) {
        for d in &self.diffs {
            eprintln!("DIFFERS {d}");
        }
        if let Some(e) = &self.regen_error {
            eprintln!("regeneration failed: {e}");
        }
        let kept = match &self.kept {
            Some(k) => format!("regenerated folder kept at {}", k.display()),
            None if keep => "nothing was regenerated to keep".to_string(),
            None => "regenerated folder removed (rerun with --keep to keep it)".to_string(),
        };
        eprintln!(
            "verify: FAILED, {} difference(s){}; {kept}",
            self.diffs.len(),
            self.regen_note()
        );
    }
}
