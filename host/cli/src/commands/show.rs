//! `cairn show`: what each compaction did. Without an archive, the conversation's timeline
//! (compactions, undos, pins); with one, that compaction part by part (`cairn::show`).

use std::path::PathBuf;

use anyhow::Result;
use cairn::show::{self, CompactionView, Moment, Part, StageStatus, StepView, Timeline};
use cairn::storage::{ConversationKey, Home};

use crate::setup;

#[derive(clap::Args)]
pub struct Args {
    /// The conversation's key in the home (as `cairn compact` or the agent's hook named it).
    #[arg(long)]
    conversation: String,
    /// One compaction's archive id (`a-…`, as the timeline lists them); without it, the timeline.
    archive: Option<String>,
    /// Cairn's home (default: $CAIRN_HOME, else ~/.local/share/cairn).
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
pub fn when(millis: u64) -> String {
    let iso = cairn::transcript::formats::iso8601(millis);
    format!("{} {}", &iso[..10], &iso[11..19])
}

fn word<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
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
            Moment::Compaction { at, archive_id, purpose, status, committed_by, tokens_before, tokens_after, replaced } => say!(
                "  {}  {:<10} {archive_id}  {:<9} {:<by_width$} {tokens_before} → {tokens_after} tokens, {replaced} entries replaced",
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
        Some(by) => say!("committed by {by}: {} entries replaced, {} artifacts set aside in the archive", view.replaced, view.artifacts.len()),
        None => say!("nothing committed"),
    }
    for stage in &view.stages {
        let by = stage.committed_by.as_deref().map(|b| format!(" by {b}")).unwrap_or_default();
        say!("stage {}: {}{by}, {} → {} tokens", stage.stage, word(&stage.status), stage.tokens_before, stage.tokens_after);
        if let Some(note) = &stage.note {
            say!("  ({note})");
        }
        if stage.status == StageStatus::Committed {
            print_part("elided", &stage.elided, true);
            print_part("summarized", &stage.summarized, true);
            let into = if stage.summarized.count > 0 { "into" } else { "marker" };
            print_part(into, &stage.summaries, true);
            print_part("dropped", &stage.dropped, true);
            print_part("kept verbatim", &stage.kept, false);
            print_part("kept verbatim (tail)", &stage.tail, true);
        }
        for step in &stage.steps {
            print_step(step);
        }
    }
    if view.stages.is_empty() {
        say!("steps:");
        for step in &view.steps {
            print_step(step);
        }
    }
    if let Some(adjusted) = &view.adjusted {
        say!("then {:+} tokens: {}", adjusted.tokens, adjusted.why);
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

fn print_step(step: &StepView) {
    let report = &step.report;
    let mut notes: Vec<String> = report.message.iter().cloned().collect();
    notes.extend(step.note.iter().cloned());
    if !report.refused.is_empty() {
        notes.push(format!("refused: {}", report.refused.join(", ")));
    }
    let notes = if notes.is_empty() { String::new() } else { format!(" — {}", notes.join("; ")) };
    let tokens = report.tokens_after.map(|t| format!(" → {t} tokens")).unwrap_or_default();
    say!("  step {:<24} {:<12} {:>6} ms{tokens}{notes}", report.plugin, report.outcome.to_string(), report.millis);
    for flag in &report.flags {
        say!("    flag {}: {} — {}", word(&flag.kind), flag.item, flag.why);
    }
}

fn print_part(name: &str, part: &Part, list: bool) {
    if part.count == 0 && part.tokens == 0 {
        return;
    }
    let after = part.tokens_after.map(|t| format!(" → {t}")).unwrap_or_default();
    say!("  {name}: {} entries, {}{after} tokens", part.count, part.tokens);
    if !list {
        return;
    }
    for entry in &part.entries {
        let clipped = |text: &str| cairn_rules::clip_chars(&text.split_whitespace().collect::<Vec<_>>().join(" "), 100).to_string();
        say!("    {:<28} {:<9} turn {:<4} {:>6} tok  {}", entry.id, word(&entry.role), entry.turn, entry.tokens, clipped(&entry.preview));
        if let (Some(placeholder), Some(after)) = (&entry.placeholder, entry.tokens_after) {
            say!("      now {after} tok: {}", clipped(placeholder));
        }
        for uri in &entry.uris {
            say!("      {uri}");
        }
    }
}
