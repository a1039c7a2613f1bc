//! `cairn history`: what the agent's `session_history` tool sees, from the command line.

use std::path::PathBuf;

use anyhow::{bail, Result};
use cairn::recall::{self, HistoryCall};
use cairn::storage::{ConversationKey, Home};
use serde_json::Value;

use crate::setup;

#[derive(clap::Args)]
pub struct Args {
    /// Cairn's home (default: $CAIRN_HOME, else ~/.local/share/cairn).
    #[arg(long)]
    home: Option<PathBuf>,
    /// The conversation whose archives to read (an unknown one is an error that lists those the home holds).
    #[arg(long)]
    conversation: String,
    /// Print the raw JSON answer.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    read: Read,
}

#[derive(clap::Subcommand)]
enum Read {
    /// An overview of the conversation's archives.
    Summary,
    /// Ranked keyword search over archived entries.
    Search {
        /// Keywords; a query starting with `-` is taken as is.
        #[arg(allow_hyphen_values = true)]
        query: String,
        /// Skip this many hits.
        #[arg(long, default_value_t = 0)]
        offset: usize,
        /// At most this many hits.
        #[arg(long, default_value_t = 10)]
        limit: usize,
    },
    /// Read an archive's entries in bounded slices.
    Page {
        /// The archive's id (`a-…`, as the summary and search list them).
        archive_id: String,
        /// Skip this many entries of the archive.
        #[arg(long, default_value_t = 0)]
        offset: usize,
        /// At most this many entries.
        #[arg(long, default_value_t = 10)]
        limit: usize,
        /// Continue a long first entry from this character.
        #[arg(long, default_value_t = 0)]
        char_offset: usize,
    },
}

pub fn run(args: Args) -> Result<()> {
    let home = Home::open_existing(&setup::home_path(args.home))?;
    let key = ConversationKey::parse(&args.conversation)?;
    // The agent's tool answers "nothing compacted yet" for its own fresh conversation; a person
    // naming one that is not here has most likely mistyped it: a search or a page is an error
    // that lists what is here, and a summary says so after the tool's answer.
    let missing = setup::missing_conversation(&home, &key)?;
    if let (Some(missing), Read::Search { .. } | Read::Page { .. }) = (&missing, &args.read) {
        bail!("{missing}");
    }
    let query = match &args.read {
        Read::Search { query, .. } => Some(query.clone()),
        _ => None,
    };
    let call = match args.read {
        Read::Summary => HistoryCall::Summary,
        Read::Search { query, offset, limit } => HistoryCall::Search { query, offset, limit },
        Read::Page { archive_id, offset, limit, char_offset } => HistoryCall::Page { archive_id, offset, limit, char_offset },
    };
    let answer = recall::execute(&home, &key, &call)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&answer)?);
    } else if answer["hits"].as_array().is_some_and(Vec::is_empty) {
        println!("no archived entry of conversation {key} matches {}", cairn::echo::input(query.as_deref().unwrap_or_default()));
    } else {
        print_human(&answer);
        if let Some(missing) = missing {
            println!("({missing})");
        }
    }
    Ok(())
}

fn print_human(answer: &Value) {
    if let Some(text) = answer["text"].as_str() {
        say!("{text}");
    }
    for hit in answer["hits"].as_array().into_iter().flatten() {
        say!(
            "{} #{} ({}) score {:.2} at char {}",
            hit["archive_id"].as_str().unwrap_or(""),
            hit["index"],
            hit["entry_id"].as_str().unwrap_or(""),
            hit["score"].as_f64().unwrap_or(0.0),
            hit["char_offset"]
        );
        say!("    {}", hit["snippet"].as_str().unwrap_or("").replace('\n', "\n    "));
    }
    for entry in answer["entries"].as_array().into_iter().flatten() {
        say!(
            "--- #{} {} ({}) chars {}..{} of {}",
            entry["index"],
            entry["entry_id"].as_str().unwrap_or(""),
            entry["role"].as_str().unwrap_or(""),
            entry["char_offset"],
            entry["next_char_offset"].as_u64().unwrap_or(entry["total_chars"].as_u64().unwrap_or(0)),
            entry["total_chars"]
        );
        say!("{}", entry["text"].as_str().unwrap_or(""));
    }
    for key in ["next_offset", "clamped"] {
        if !answer[key].is_null() {
            say!("{key}: {}", answer[key]);
        }
    }
}
