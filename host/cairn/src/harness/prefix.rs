//! A committed compaction as "a summary, then the entries kept verbatim": the shape of a
//! harness that replaces a prefix of its history by a summary (Pi's compaction entry) rather
//! than the whole context. The summary is a bounded rendering of the compacted entries; the
//! whole prefix stays in the archive.

use crate::record::CompactionReport;
use crate::transcript::{Entry, Origin, Role, Transcript};

/// A committed run as "a summary, then the entries kept verbatim" (Pi's compaction entry).
#[derive(Default)]
pub(super) struct Kept {
    pub(super) first_kept_entry_id: Option<String>,
    pub(super) prefix_summary: String,
}

impl Kept {
    pub(super) fn of(input: &Transcript, run: &CompactionReport) -> Self {
        if run.committed_by.is_none() {
            return Kept::default();
        }
        let output = &run.transcript.entries;
        let kept = kept_tail_start(&input.entries, output);
        Kept { first_kept_entry_id: output.get(kept).map(|e| e.id.clone()), prefix_summary: render_prefix(&output[..kept], &run.archive_id, &run.pinned) }
    }
}

/// Where the unchanged tail of `output` begins: the longest run of entries at its end that the
/// input ends with too (same ids, same parts), started past any tool results, so a kept
/// result never loses its call to the summary.
fn kept_tail_start(input: &[Entry], output: &[Entry]) -> usize {
    let common = input.iter().rev().zip(output.iter().rev()).take_while(|(a, b)| a.id == b.id && a.parts == b.parts).count();
    let mut start = output.len() - common;
    while output.get(start).is_some_and(|e| e.role == Role::Tool) {
        start += 1;
    }
    start
}

/// Budget of a prefix summary, in chars (~8k tokens): it replaces history, so a later
/// compaction must be able to shrink a context that holds it.
const PREFIX_BUDGET_CHARS: usize = 32_000;
/// Per entry: operator messages and earlier summaries are intent and keep more.
const INTENT_CHARS: usize = cairn_rules::SEED_MESSAGE_CHARS;
const ENTRY_CHARS: usize = 400;

/// The compacted entries as one bounded text, roles marked: operator messages and earlier
/// summaries first in importance (clipped at 2,000 chars), other entries clipped at 400, the
/// oldest of those dropped when over budget. The whole prefix stays in the archive.
fn render_prefix(entries: &[Entry], archive_id: &str, pinned: &[String]) -> String {
    let lines: Vec<(bool, String)> = entries
        .iter()
        .map(|entry| {
            let role = match (entry.origin, entry.role) {
                (Origin::Summary, _) => "summary",
                (_, Role::System) => "system",
                (_, Role::User) => "user",
                (_, Role::Assistant) => "assistant",
                (_, Role::Tool) => "tool result",
            };
            let text = entry.model_text();
            // A pinned entry is carried whole, never clipped or left out.
            if pinned.contains(&entry.id) {
                return (true, format!("\n[pinned {role}] {}", text.trim()));
            }
            let intent = matches!(entry.origin, Origin::Summary | Origin::Operator);
            let clip = if intent { INTENT_CHARS } else { ENTRY_CHARS };
            let clipped = cairn_rules::clip_chars(text.trim(), clip);
            let more = if clipped.len() < text.trim().len() { " …" } else { "" };
            (intent, format!("\n[{role}] {clipped}{more}"))
        })
        .collect();
    // Over budget: the oldest non-intent lines go first.
    let mut keep = vec![true; lines.len()];
    let mut total: usize = lines.iter().map(|(_, l)| l.len()).sum();
    for (i, (intent, line)) in lines.iter().enumerate() {
        if total <= PREFIX_BUDGET_CHARS {
            break;
        }
        if !intent {
            keep[i] = false;
            total -= line.len();
        }
    }
    let dropped = keep.iter().filter(|k| !**k).count();
    let mut out = format!(
        "The earlier part of this conversation, condensed by Cairn (archive {archive_id}). Long entries are clipped \
         here; what compaction set aside is named by artifact:// URIs that session_history reads back."
    );
    if dropped > 0 {
        out.push_str(&format!(" {dropped} older steps are left out of this summary."));
    }
    out.push('\n');
    for ((_, line), kept) in lines.iter().zip(keep) {
        if kept {
            out.push_str(line);
        }
    }
    out
}
