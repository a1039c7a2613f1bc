//! The append-only event log of one conversation (`events.jsonl`).

use std::io::{Read, Write};
use std::path::Path;

use anyhow::{Context, Result};
use cap_std::fs::{Dir, OpenOptions};
use serde::{Deserialize, Serialize};

use crate::chain::{Purpose, StepReport};
use crate::transcript::Entry;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Event {
    /// Entries of the input the record had not seen before.
    Snapshot { at: u64, source: String, entries: Vec<Entry> },
    /// One compaction attempt, committed or not.
    Compaction(Box<CompactionEvent>),
}

/// One compaction or handover attempt.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CompactionEvent {
    pub at: u64,
    #[serde(default = "compact")]
    pub purpose: Purpose,
    pub archive_id: String,
    /// The plugin whose outcome was committed; `None` when every step failed.
    pub committed_by: Option<String>,
    /// Ids of the replaced range; their originals are in the archive.
    #[serde(default)]
    pub replaced: Vec<String>,
    /// Ids of entries the working context no longer holds.
    pub forgotten: Vec<String>,
    /// The entries that took the replaced range's place.
    pub replacement: Vec<Entry>,
    pub tokens_before: u64,
    pub tokens_after: u64,
    pub steps: Vec<StepReport>,
    pub artifacts: Vec<String>,
    pub checkpoint: Option<String>,
    /// Handover only: the seed of the next session, the retrospective, and which session
    /// was handed over to which.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retrospective: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<Sessions>,
    /// Why the commit policy refused a checked outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sessions {
    pub source: String,
    pub target: String,
}

impl CompactionEvent {
    /// An attempt that committed nothing yet; the caller fills in what was committed.
    pub fn new(purpose: Purpose, archive_id: &str, tokens_before: u64, steps: Vec<StepReport>) -> Self {
        CompactionEvent {
            at: now_millis(),
            purpose,
            archive_id: archive_id.to_string(),
            committed_by: None,
            replaced: Vec::new(),
            forgotten: Vec::new(),
            replacement: Vec::new(),
            tokens_before,
            tokens_after: tokens_before,
            steps,
            artifacts: Vec::new(),
            checkpoint: None,
            seed: None,
            retrospective: None,
            sessions: None,
            rejected: None,
        }
    }
}

fn compact() -> Purpose {
    Purpose::Compact
}

/// A message for the harness after a maintenance; its id is stable across retries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Notice {
    pub id: String,
    /// `compacted`, `handed-over`, `failed` or `paused`.
    pub kind: String,
    pub text: String,
    pub at: u64,
}

pub fn now_millis() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// Reads the log. A torn last line (a crash mid-append) is cut off and the log repaired;
/// a bad line anywhere else is corruption and an error naming the line.
pub fn load(dir: &Dir, name: &str, shown: &Path) -> Result<Vec<Event>> {
    let mut text = String::new();
    match dir.open(name) {
        Ok(mut file) => {
            file.read_to_string(&mut text).with_context(|| format!("reading {}", shown.display()))?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("opening {}", shown.display())),
    }
    let mut events = Vec::new();
    let mut good_len = 0;
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    for (i, line) in lines.iter().enumerate() {
        let complete = line.ends_with('\n');
        match serde_json::from_str::<Event>(line.trim_end()) {
            Ok(event) if complete => {
                events.push(event);
                good_len += line.len();
            }
            _ if i + 1 == lines.len() => {
                tracing::warn!(log = %shown.display(), line = i + 1, "dropping a torn last line of the event log");
                let mut file = dir.open_with(name, OpenOptions::new().write(true))?;
                file.set_len(good_len as u64)?;
                file.flush()?;
                file.sync_all()?;
            }
            Ok(_) | Err(_) => {
                anyhow::bail!("{}:{}: corrupt event log line (not a Cairn event)", shown.display(), i + 1)
            }
        }
    }
    Ok(events)
}
