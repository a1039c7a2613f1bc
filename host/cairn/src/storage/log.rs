//! The append-only event log of one conversation (`events.jsonl`).

use std::path::Path;

use anyhow::{Context, Result};
use cap_std::fs::{Dir, OpenOptions};

use super::files;
use crate::record::Event;

pub const EVENTS: &str = "events.jsonl";

/// Reads the log. A torn last line (a crash mid-append) is cut off and the log repaired;
/// a bad line anywhere else is corruption and an error naming the line.
pub fn load(dir: &Dir, shown: &Path) -> Result<Vec<Event>> {
    let lines = files::read_lines(dir, EVENTS).with_context(|| format!("reading {}", shown.display()))?;
    let mut events = Vec::with_capacity(lines.complete.len());
    let last = lines.complete.len();
    let mut good_len = lines.complete_len;
    for (n, (number, line)) in lines.complete.iter().enumerate() {
        match serde_json::from_str::<Event>(line) {
            Ok(event) => events.push(event),
            // A complete last line that does not parse, with nothing after it: torn as well.
            Err(_) if n + 1 == last && lines.torn.is_none() => {
                good_len -= line.len() as u64 + 1;
                return repair(dir, shown, *number, good_len).map(|_| events);
            }
            Err(_) => anyhow::bail!("{}:{number}: corrupt event log line (not a Cairn event)", shown.display()),
        }
    }
    if lines.torn.is_some() {
        repair(dir, shown, last + 1, good_len)?;
    }
    Ok(events)
}

fn repair(dir: &Dir, shown: &Path, line: usize, good_len: u64) -> Result<()> {
    tracing::warn!(log = %shown.display(), line, "dropping a torn last line of the event log");
    let file = dir.open_with(EVENTS, OpenOptions::new().write(true))?;
    file.set_len(good_len)?;
    file.sync_all()?;
    Ok(())
}

/// One JSON line, then fsync: an event is either wholly in the log or (torn by a crash)
/// dropped on the next load.
pub fn append(dir: &Dir, shown: &Path, event: &Event) -> Result<()> {
    let line = serde_json::to_vec(event)?;
    files::append_line(dir, EVENTS, &line).with_context(|| format!("appending to {}", shown.display()))
}
