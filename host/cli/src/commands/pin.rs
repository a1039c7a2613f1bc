//! `cairn pin` / `cairn unpin`: the operator's pins by entry id. A pinned entry survives
//! every compaction verbatim; pins count against the policy's `[pins] budget_tokens`, and a
//! pin that would not fit is refused here, naming the entry, its tokens and the budget.

use std::path::PathBuf;

use anyhow::{Context, Result};
use cairn::storage::{ConversationKey, ConversationStore, Home};
use cairn::tokenizer::Tokenizer;
use serde_json::json;

use crate::setup;

#[derive(clap::Args)]
pub struct Args {
    /// The conversation's key in the home (as `cairn compact` or the agent's hook named it).
    #[arg(long)]
    conversation: String,
    /// Entry ids (as the transcript or `cairn show` names them).
    #[arg(required = true)]
    ids: Vec<String>,
    /// Policy file (TOML) whose `[pins]` budget applies; the embedded default when absent.
    #[arg(long)]
    policy: Option<PathBuf>,
    /// The conversation's transcript as it stands (any format Cairn reads): its entries are
    /// recorded first, so entries can be pinned before the first compaction (the conversation
    /// is created if needed).
    #[arg(long)]
    transcript: Option<PathBuf>,
    /// Cairn's home (default: $CAIRN_HOME, else ~/.local/share/cairn).
    #[arg(long)]
    home: Option<PathBuf>,
    /// Print one JSON object for scripts.
    #[arg(long)]
    json: bool,
}

pub fn pin(args: Args) -> Result<()> {
    let (_, policy) = setup::host_and_policy(&[], args.policy.as_deref())?;
    let (key, mut store) = open(&args)?;
    let new = cairn::pins::pin(&mut store, &Tokenizer::default(), &args.ids, &policy.pins).with_context(|| format!("conversation {key}"))?;
    done(&key, "pinned", &new, store.pinned_ids(), args.json)
}

pub fn unpin(args: Args) -> Result<()> {
    let (key, mut store) = open(&args)?;
    cairn::pins::unpin(&mut store, &args.ids).with_context(|| format!("conversation {key}"))?;
    done(&key, "unpinned", &args.ids, store.pinned_ids(), args.json)
}

/// The conversation to pin in, with `--transcript`'s entries recorded first.
fn open(args: &Args) -> Result<(ConversationKey, ConversationStore)> {
    let key = ConversationKey::parse(&args.conversation)?;
    let home = Home::open(&setup::home_path(args.home.clone()))?;
    let Some(file) = &args.transcript else { return Ok((key.clone(), setup::existing_conversation_to_write(&home, &key)?)) };
    let (mut transcript, _) = setup::read_transcript(file)?;
    Tokenizer::default().count_transcript(&mut transcript);
    let mut store = home.conversation(&key)?;
    store.record_snapshot(&file.display().to_string(), &transcript.entries)?;
    Ok((key, store))
}

fn done(key: &ConversationKey, verb: &str, changed: &[String], now: std::collections::BTreeSet<String>, as_json: bool) -> Result<()> {
    if as_json {
        println!("{}", serde_json::to_string_pretty(&json!({ "conversation": key.to_string(), verb: changed, "pinned": now }))?);
    } else {
        if changed.is_empty() {
            println!("conversation {key}: already pinned, nothing recorded");
        } else {
            println!("conversation {key}: {verb} {}", changed.join(", "));
        }
        println!("pinned now: {}", if now.is_empty() { "none".to_string() } else { now.into_iter().collect::<Vec<_>>().join(", ") });
    }
    Ok(())
}
