//! `cairn context`: a conversation's working context as the record holds it now — what the
//! agent's next request carries after every compaction, undo and pin — in any format Cairn
//! writes.

use std::path::PathBuf;

use anyhow::{Context, Result};
use cairn::storage::{ConversationKey, Home};
use cairn::tokenizer::Tokenizer;
use cairn::transcript::Transcript;
use serde_json::json;

use super::compact::OutFormat;
use crate::setup;

#[derive(clap::Args)]
pub struct Args {
    /// The conversation (as `compact` or the agent's hooks named it; an unknown one is an
    /// error that lists those the home holds).
    #[arg(long)]
    conversation: String,
    /// The format to print or write.
    #[arg(long, default_value = "cairn", value_parser = OutFormat::parser())]
    out_format: OutFormat,
    /// Write the context here instead of printing it.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Cairn's home (default: $CAIRN_HOME, else ~/.local/share/cairn).
    #[arg(long)]
    home: Option<PathBuf>,
    /// Print one JSON object for scripts (the context as a string in `transcript`).
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<()> {
    let home = Home::open_existing(&setup::home_path(args.home))?;
    let key = ConversationKey::parse(&args.conversation)?;
    let store = setup::existing_conversation(&home, &key)?;
    let mut context = Transcript::new(store.context()?);
    Tokenizer::default().count_transcript(&mut context);
    let tokens = context.total_tokens();
    let text = args.out_format.write(&context);
    if let Some(out) = &args.out {
        std::fs::write(out, &text).with_context(|| format!("writing {}", out.display()))?;
    }
    if args.json {
        let transcript = if args.out.is_some() { None } else { Some(&text) };
        let value = json!({
            "conversation": key.to_string(),
            "entries": context.entries.len(),
            "tokens": tokens,
            "format": args.out_format.name(),
            "out": args.out.as_ref().map(|p| p.display().to_string()),
            "transcript": transcript,
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else if let Some(out) = &args.out {
        println!("conversation {key}: {} entries, {tokens} tokens, written to {} ({})", context.entries.len(), out.display(), args.out_format.name());
    } else {
        print!("{text}");
    }
    Ok(())
}
