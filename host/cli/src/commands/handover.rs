//! `cairn handover FILE`: archive the session and prepare the seed of a fresh one.

use std::path::PathBuf;

use anyhow::{Context, Result};
use cairn::transcript::formats;
use serde_json::json;

use crate::setup;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    session: setup::SessionArgs,
    /// Write the new session's starting transcript (protected head + seed) here, as Cairn JSONL.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print one JSON object for scripts.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<()> {
    let setup::Session { name, transcript, policy, cairn, home, mut store, .. } = args.session.open()?;
    let report = cairn.handover(&policy, &mut store, &transcript, &name)?;
    if let Some(out) = &args.out {
        std::fs::write(out, formats::write_cairn(&report.transcript)).with_context(|| format!("writing {}", out.display()))?;
    }
    if args.json {
        let mut value = serde_json::to_value(&report)?;
        value["home"] = json!(home.path().display().to_string());
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    super::compact::print_report(&report, &name, &home);
    if let (Some(seed), Some(sessions)) = (&report.seed, &report.sessions) {
        println!("\nSession {} hands over to {}. Seed of the new session:\n\n{seed}", sessions.source, sessions.target);
    }
    Ok(())
}
