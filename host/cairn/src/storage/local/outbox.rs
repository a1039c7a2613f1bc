//! Notices for the harness (`outbox.jsonl`, append-only) and their acknowledgements
//! (`acks.jsonl`, one JSON string per line).

use std::collections::HashSet;
use std::path::Path;

use anyhow::{Context, Result};
use cap_std::fs::Dir;

use super::files;
use crate::record::Notice;

const OUTBOX: &str = "outbox.jsonl";
const ACKS: &str = "acks.jsonl";

/// Every queued notice, oldest first, with whether it was acknowledged.
pub fn notices(dir: &Dir, shown: &Path) -> Result<Vec<(Notice, bool)>> {
    let acks = files::read_lines(dir, ACKS)?;
    let acked: HashSet<String> = acks.complete.into_iter().map(|(_, line)| serde_json::from_str::<String>(&line).unwrap_or(line)).collect();
    let mut notices = Vec::new();
    for (number, line) in files::read_lines(dir, OUTBOX)?.complete {
        let notice: Notice = serde_json::from_str(&line).with_context(|| format!("{}:{number}: not a notice", shown.join(OUTBOX).display()))?;
        let is_acked = acked.contains(&notice.id);
        notices.push((notice, is_acked));
    }
    Ok(notices)
}

/// Queues a notice unless one with its id is already queued (a retried maintenance queues
/// the same id). Returns whether it was new.
pub fn queue(dir: &Dir, shown: &Path, notice: &Notice) -> Result<bool> {
    if notices(dir, shown)?.iter().any(|(n, _)| n.id == notice.id) {
        return Ok(false);
    }
    files::append_line(dir, OUTBOX, &serde_json::to_vec(notice)?).with_context(|| format!("queueing notice {}", notice.id))?;
    Ok(true)
}

/// The harness saw this notice; false when there is no such notice.
pub fn ack(dir: &Dir, shown: &Path, id: &str) -> Result<bool> {
    if !notices(dir, shown)?.iter().any(|(n, _)| n.id == id) {
        return Ok(false);
    }
    files::append_line(dir, ACKS, &serde_json::to_vec(id)?).with_context(|| format!("acknowledging notice {id}"))?;
    Ok(true)
}
