//! `cairn artifact URI`: the stored original, byte for byte.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use cairn::storage::{ArtifactUri, ConversationKey, Home};

use crate::setup;

#[derive(clap::Args)]
pub struct Args {
    /// `artifact://<archive-id>/<n>`
    uri: String,
    /// Cairn's home (default: $CAIRN_HOME, else ~/.local/share/cairn).
    #[arg(long)]
    home: Option<PathBuf>,
    /// Look only in this conversation.
    #[arg(long)]
    conversation: Option<String>,
}

pub fn run(args: Args) -> Result<()> {
    let uri: ArtifactUri = args.uri.parse()?;
    let home = Home::open_existing(&setup::home_path(args.home))?;
    let bytes = match &args.conversation {
        Some(key) => setup::existing_conversation(&home, &ConversationKey::parse(key)?)?.read_artifact(&uri)?,
        None => home.find_artifact(&uri)?,
    };
    std::io::stdout().lock().write_all(&bytes)?;
    Ok(())
}
