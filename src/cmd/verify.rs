//! `protospread verify`.

use crate::Ctx;
use std::process::ExitCode;

#[derive(clap::Args, Debug, Default)]
pub struct Args {}

pub fn run(_ctx: &Ctx, _args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`verify` is not implemented yet")
}
