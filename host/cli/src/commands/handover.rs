//! `cairn handover FILE`: archive the session and prepare the seed of a fresh one.

use std::path::PathBuf;

use anyhow::{Context, Result};
use cairn::storage::{ConversationKey, Home};
use cairn::transcript::formats;
use serde_json::json;

use crate::setup;

#[derive(clap::Args)]
pub struct Args {
    /// The transcript: Cairn JSONL, Pi session JSONL or OpenAI chat JSON (auto-detected).
    file: PathBuf,
    #[arg(long)]
    policy: Option<PathBuf>,
    #[arg(long)]
    home: Option<PathBuf>,
    /// Conversation key [default: derived from the file name].
    #[arg(long)]
    conversation: Option<String>,
    /// Write the new session's starting transcript (protected head + seed) here, as Cairn JSONL.
    #[arg(long)]
    out: Option<PathBuf>,
    #[arg(long)]
    plugin_dir: Vec<PathBuf>,
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<()> {
    let name = args.file.display().to_string();
    let text = std::fs::read_to_string(&args.file).with_context(|| format!("reading {name}"))?;
    let (transcript, _) = formats::parse(&text, &name)?;
    let policy = setup::policy(args.policy.as_deref())?;
    let cairn = setup::host(&args.plugin_dir)?;
    let key = match &args.conversation {
        Some(key) => ConversationKey::parse(key)?,
        None => ConversationKey::derive(&args.file.file_stem().unwrap_or_default().to_string_lossy()),
    };
    let home = Home::open(&setup::home_path(args.home))?;
    let mut store = home.conversation(&key)?;
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
