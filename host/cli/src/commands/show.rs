//! `cairn show`: what each compaction did. Without an archive, the conversation's timeline
//! (compactions, undos, pins); with one, that compaction part by part (`cairn::show`).

use std::path::PathBuf;

use anyhow::Result;
use cairn::show::{self, CompactionView, Moment, Part, Timeline};
use cairn::storage::{ConversationKey, Home};

use crate::setup;

#[derive(clap::Args)]
pub struct Args {
    #[arg(long)]
    conversation: String,
    /// One compaction's archive id (`a-…`, as the timeline lists them); without it, the timeline.
    archive: Option<String>,
    #[arg(long)]
    home: Option<PathBuf>,
    /// Print one JSON object for scripts.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<()> {
    let key = ConversationKey::parse(&args.conversation)?;
    let home = Home::open_existing(&setup::home_path(args.home))?;
    let store = setup::existing_conversation(&home, &key)?;
    match &args.archive {
        None => {
            let timeline = show::timeline(&store);
            if args.json {
                println!("{}", serde_json::to_string_pretty(&timeline)?);
            } else {
                print_timeline(&timeline);
            }
        }
        Some(archive) => {
            let view = show::compaction(&store, archive)?;
            if args.json {
                println!("{}", serde_json::to_string_pretty(&view)?);
            } else {
                print_compaction(&view);
            }
        }
    }
    Ok(())
}

/// Milliseconds since the epoch as `YYYY-MM-DD HH:MM:SS`.
fn when(millis: u64) -> String {
    let iso = cairn::transcript::formats::iso8601(millis);
    format!("{} {}", &iso[..10], &iso[11..19])
}

fn word<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

/// `println!` for human output: the record's text (previews, messages, ids from a transcript)
/// has its control characters escaped, so a transcript cannot drive the terminal.
macro_rules! say {
    ($($arg:tt)*) => {
        println!("{}", cairn::echo::terminal(&format!($($arg)*)))
    };
}

fn print_timeline(timeline: &Timeline) {
    say!("conversation {}", timeline.conversation);
    if timeline.moments.is_empty() {
        say!("  no compaction, undo or pin yet");
    }
    const NOTHING: &str = "(nothing committed)";
    // The widest `committed_by` sets the column: a pipeline names every stage's plugin.
    let by_width = timeline
        .moments
        .iter()
        .filter_map(|m| match m {
            Moment::Compaction { committed_by, .. } => Some(committed_by.as_deref().unwrap_or(NOTHING).chars().count()),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    for moment in &timeline.moments {
        match moment {
            Moment::Compaction { at, archive_id, purpose, status, committed_by, tokens_before, tokens_after, forgotten } => say!(
                "  {}  {:<10} {archive_id}  {:<9} {:<by_width$} {tokens_before} → {tokens_after} tokens, {forgotten} entries forgotten",
                when(*at),
                word(purpose),
                word(status),
                committed_by.as_deref().unwrap_or(NOTHING),
            ),
            Moment::Undo { at, undone, tokens_before, tokens_after } => {
                say!("  {}  undo       {}  {tokens_before} → {tokens_after} tokens", when(*at), undone.join(", "))
            }
            Moment::Pin { at, ids, pinned } => say!("  {}  {:<10} {}", when(*at), if *pinned { "pin" } else { "unpin" }, ids.join(", ")),
        }
    }
    if !timeline.pinned.is_empty() {
        say!("pinned now: {}", timeline.pinned.join(", "));
    }
}

fn print_compaction(view: &CompactionView) {
    say!("{} {} of conversation {} at {}: {}, {} → {} tokens", word(&view.purpose), view.archive_id, view.conversation, when(view.at), word(&view.status), view.tokens_before, view.tokens_after);
    match &view.committed_by {
        Some(by) => say!("committed by {by}"),
        None => say!("nothing committed"),
    }
    for (name, part) in [("kept", &view.kept), ("summarized", &view.summarized), ("into summaries", &view.summaries), ("elided", &view.elided), ("dropped", &view.dropped)] {
        print_part(name, part);
    }
    say!("steps:");
    for step in &view.steps {
        let message = step.message.as_deref().map(|m| format!(" — {m}")).unwrap_or_default();
        let tokens = step.tokens_after.map(|t| format!(" → {t} tokens")).unwrap_or_default();
        say!("  {:<24} {:<12} {:>6} ms{tokens}{message}", step.plugin, step.outcome.to_string(), step.millis);
        for flag in &step.flags {
            say!("    flag {}: {} — {}", word(&flag.kind), flag.item, flag.why);
        }
    }
    if !view.pinned.is_empty() {
        say!("pinned: {}", view.pinned.join(", "));
    }
    for refused in &view.pins_refused {
        say!("pin refused: {refused}");
    }
    for (label, line) in [("rejected", &view.rejected), ("over window", &view.over_window)] {
        if let Some(line) = line {
            say!("{label}: {line}");
        }
    }
}

fn print_part(name: &str, part: &Part) {
    if part.entries.is_empty() {
        return;
    }
    say!("{name}: {} entries, {} tokens", part.entries.len(), part.tokens);
    for entry in &part.entries {
        let preview: String = entry.preview.split_whitespace().collect::<Vec<_>>().join(" ");
        let preview = cairn_rules::clip_chars(&preview, 100);
        say!("  {:<28} {:<9} turn {:<4} {:>6} tok  {preview}", entry.id, word(&entry.role), entry.turn, entry.tokens);
        for uri in &entry.uris {
            say!("      {uri}");
        }
    }
}
