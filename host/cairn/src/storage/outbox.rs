//! Notices for the harness (`outbox.jsonl`, append-only) and their acknowledgements
//! (`acks.jsonl`, one JSON string per line). Delivery is at least once: a notice is returned
//! until it is acknowledged.

use std::collections::HashSet;
use std::path::Path;

use anyhow::{bail, Context, Result};
use cap_std::fs::Dir;

use super::files;
use crate::record::Notice;

const OUTBOX: &str = "outbox.jsonl";
const ACKS: &str = "acks.jsonl";

/// Queued notices, oldest first; acknowledged ones only when `include_acked`.
pub fn notices(dir: &Dir, shown: &Path, include_acked: bool) -> Result<Vec<Notice>> {
    let acked: HashSet<String> = if include_acked {
        HashSet::new()
    } else {
        let acks = files::read_lines(dir, ACKS)?;
        acks.complete.into_iter().map(|(_, line)| serde_json::from_str::<String>(&line).unwrap_or(line)).collect()
    };
    let mut notices = Vec::new();
    for (number, line) in files::read_lines(dir, OUTBOX)?.complete {
        let notice: Notice = serde_json::from_str(&line).with_context(|| format!("{}:{number}: not a notice", shown.join(OUTBOX).display()))?;
        if !acked.contains(&notice.id) {
            notices.push(notice);
        }
    }
    Ok(notices)
}

/// Queues a notice unless one with its id is already queued (a retried maintenance queues
/// the same id). Returns whether it was new.
pub fn queue(dir: &Dir, shown: &Path, notice: &Notice) -> Result<bool> {
    if notices(dir, shown, true)?.iter().any(|n| n.id == notice.id) {
        return Ok(false);
    }
    files::append_line(dir, OUTBOX, &serde_json::to_vec(notice)?).with_context(|| format!("queueing notice {}", notice.id))?;
    Ok(true)
}

/// The harness saw this notice; it is not delivered again.
pub fn ack(dir: &Dir, shown: &Path, id: &str) -> Result<()> {
    if !notices(dir, shown, true)?.iter().any(|n| n.id == id) {
        bail!("no notice {id:?} in {}", shown.display());
    }
    files::append_line(dir, ACKS, &serde_json::to_vec(id)?).with_context(|| format!("acknowledging notice {id}"))
}
