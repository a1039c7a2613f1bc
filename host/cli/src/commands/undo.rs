//! `cairn undo`: take back a committed compaction (by default the latest) and every later one,
//! and write the restored context.

use std::path::PathBuf;

use anyhow::{Context, Result};
use cairn::storage::{ConversationKey, Home};
use cairn::tokenizer::Tokenizer;
use serde_json::json;

use super::compact::OutFormat;
use crate::setup;

/// Takes back compaction ARCHIVE (default: the latest standing one) and every compaction
/// after it; the originals come back exactly as recorded, whatever was appended since stays
/// after them. The undo is recorded (the record stays append-only). After an undo the
/// lifecycle starts its cooldown again at the next boundary: `cooldown_turns` turns with no
/// automatic maintenance. A handover cannot be undone.
#[derive(clap::Args)]
#[command(
    after_help = "Cooldown: after an undo the lifecycle starts its cooldown again at the next boundary (`cooldown_turns` turns with no automatic maintenance), so the restored context is not compacted again at once. A handover cannot be undone."
)]
pub struct Args {
    /// The conversation's key in the home (as `cairn compact` or the agent's hook named it).
    #[arg(long)]
    conversation: String,
    /// The compaction to take back (its archive id, as `cairn show` lists them) [default: the latest].
    #[arg(long)]
    archive: Option<String>,
    /// The working context now (any format `cairn` reads) [default: the context the record knows].
    #[arg(long)]
    transcript: Option<PathBuf>,
    /// Write the restored context here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// The format of `--out`.
    #[arg(long, default_value = "cairn", value_parser = OutFormat::parser())]
    out_format: OutFormat,
    /// Cairn's home (default: $CAIRN_HOME, else ~/.local/share/cairn).
    #[arg(long)]
    home: Option<PathBuf>,
    /// The policy whose `[lifecycle] cooldown_turns` applies after the undo (the embedded
    /// default when absent): the report names the number.
    #[arg(long)]
    policy: Option<PathBuf>,
    /// Print one JSON object for scripts.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<()> {
    let cooldown = setup::policy_settings(args.policy.as_deref())?.lifecycle.cooldown_turns;
    let current = args.transcript.as_deref().map(setup::read_transcript).transpose()?.map(|(transcript, _)| transcript);
    let key = ConversationKey::parse(&args.conversation)?;
    let home = Home::open(&setup::home_path(args.home))?;
    let mut store = setup::existing_conversation_to_write(&home, &key)?;
    let undone = cairn::undo::undo(&mut store, &Tokenizer::default(), current.as_ref(), args.archive.as_deref())?;
    if let Some(out) = &args.out {
        std::fs::write(out, args.out_format.write(&undone.transcript)).with_context(|| format!("writing {}", out.display()))?;
    }
    if args.json {
        let mut value = serde_json::to_value(&undone)?;
        value["out"] = json!(args.out.as_ref().map(|p| p.display().to_string()));
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        println!(
            "conversation {}: undid {} ({} → {} tokens, {} entries in the restored context)",
            undone.conversation,
            undone.undone.join(", "),
            undone.tokens_before,
            undone.tokens_after,
            undone.transcript.entries.len()
        );
        match &args.out {
            Some(out) => println!("restored context written to {}", out.display()),
            None => println!("no --out given: the restored context was not written (the record knows it; `cairn show --conversation {key}`)"),
        }
        match cooldown {
            0 => println!("the policy has no cooldown: automatic maintenance may run again at the next boundary"),
            turns => println!("automatic maintenance waits {turns} turns again from the next boundary (the policy's cooldown_turns)"),
        }
    }
    Ok(())
}
