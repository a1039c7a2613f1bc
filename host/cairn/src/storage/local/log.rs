//! The append-only event log of one conversation (`events.jsonl`).
//!
//! Every boundary opens its conversation, so a log is kept parsed for the life of the process
//! (by path, device and inode, and checked against its first and last bytes): a later load
//! parses only the lines appended since, instead of the whole history again.

use std::collections::HashMap;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use anyhow::{Context, Result};
use cap_std::fs::{Dir, OpenOptions};

use super::files;
use crate::record::Event;
use crate::storage::backend::Parsed;

pub const EVENTS: &str = "events.jsonl";

/// Where the parsing of a log stopped, and how to know the file again.
pub struct Position {
    log: LogId,
    /// Bytes up to the end of the last complete line parsed.
    len: u64,
    next_line: usize,
    /// The file's first and last bytes up to `len`: a file that reuses the inode of a deleted
    /// log (or was rewritten) does not match them.
    head: Vec<u8>,
    tail: Vec<u8>,
}

/// A parsed log and where its parsing stopped.
struct Kept {
    parsed: Arc<Parsed>,
    at: Position,
}

const KEPT_LOGS: usize = 64;
const CHECK_BYTES: u64 = 256;
/// A log file: its path as shown, device and inode.
type LogId = (PathBuf, u64, u64);
static KEPT: LazyLock<Mutex<HashMap<LogId, Kept>>> = LazyLock::new(Default::default);

fn bytes_at(file: &std::fs::File, offset: u64, len: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = vec![0; len as usize];
    file.read_exact_at(&mut bytes, offset)?;
    Ok(bytes)
}

fn ends(file: &std::fs::File, len: u64) -> std::io::Result<(Vec<u8>, Vec<u8>)> {
    let n = len.min(CHECK_BYTES);
    Ok((bytes_at(file, 0, n)?, bytes_at(file, len - n, n)?))
}

/// Reads the log. A last line without its newline is a write in progress or one a crash
/// tore: it is not read, and only a writer (holding the lock, so no write is in progress)
/// cuts it off. A line of a kind this version does not know is kept and skipped; a line that
/// is not an event is corruption, an error naming the line.
///
/// The kept copy is taken out while the lines appended since are parsed into it, so it is
/// extended in place rather than copied. A reader's log goes back at once, shared; a writer's
/// stays its own, with where it stands, until [`keep`] gives it back: its appends never copy
/// the log either.
pub fn load(dir: &Dir, shown: &Path, writer: bool) -> Result<(Arc<Parsed>, Option<Position>)> {
    let reading = || format!("reading {}", shown.display());
    let file = match dir.open(EVENTS) {
        Ok(file) => file.into_std(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Arc::default(), None)),
        Err(e) => return Err(e).with_context(reading),
    };
    let metadata = file.metadata().with_context(reading)?;
    let key = (shown.to_path_buf(), metadata.dev(), metadata.ino());
    let kept = KEPT.lock().ok().and_then(|mut kept| kept.remove(&key));
    let kept = kept.filter(|k| k.at.len <= metadata.len() && ends(&file, k.at.len).is_ok_and(|(head, tail)| head == k.at.head && tail == k.at.tail));
    let (mut parsed, start, line) = kept.map_or((Arc::default(), 0, 1), |k| (k.parsed, k.at.len, k.at.next_line));

    let lines = files::read_lines_from(&file, start, line).map_err(|e| match e.kind() {
        std::io::ErrorKind::InvalidData => anyhow::anyhow!("{}: corrupt event log ({e})", shown.display()),
        _ => anyhow::Error::new(e).context(reading()),
    })?;
    for (number, text) in &lines.complete {
        match serde_json::from_str::<Event>(text) {
            Ok(Event::Unknown) => tracing::debug!(log = %shown.display(), line = number, "skipping an event of a kind this version does not know"),
            // Copies only while another store of this process still reads the kept copy.
            Ok(event) => Arc::make_mut(&mut parsed).push(event),
            Err(e) => anyhow::bail!("{}:{number}: corrupt event log line (not a Cairn event: {e})", shown.display()),
        }
    }
    let (complete, line) = (lines.complete_len, lines.next_line);
    if lines.torn.is_some() && writer {
        repair(dir, shown, line, complete)?;
    }
    let position = ends(&file, complete).ok().map(|(head, tail)| Position { log: key, len: complete, next_line: line, head, tail });
    if writer {
        return Ok((parsed, position));
    }
    if let Some(position) = position {
        keep(parsed.clone(), position);
    }
    Ok((parsed, None))
}

/// Keeps `parsed`, the log parsed up to `at`, for the next load.
pub fn keep(parsed: Arc<Parsed>, at: Position) {
    if let Ok(mut kept) = KEPT.lock() {
        if kept.len() >= KEPT_LOGS {
            kept.clear();
        }
        kept.insert(at.log.clone(), Kept { parsed, at });
    }
}

fn repair(dir: &Dir, shown: &Path, line: usize, good_len: u64) -> Result<()> {
    tracing::warn!(log = %shown.display(), line, "dropping a torn last line of the event log");
    let file = dir.open_with(EVENTS, OpenOptions::new().write(true))?;
    file.set_len(good_len)?;
    file.sync_all()?;
    Ok(())
}

/// A writer's appends since its load, as far as it can vouch for them.
#[derive(Default)]
pub enum Appended {
    #[default]
    Nothing,
    /// `lines` lines, one after the other from where the load stopped, up to `end`.
    Through { end: u64, lines: usize },
    /// One failed, or did not start where the one before ended.
    Unknown,
}

impl Appended {
    /// After an append that wrote `line` (where `loaded` is where the load stopped).
    pub fn then(self, loaded: Option<&Position>, line: &std::ops::Range<u64>) -> Appended {
        match self {
            Appended::Nothing if line.start == loaded.map_or(0, |at| at.len) => Appended::Through { end: line.end, lines: 1 },
            Appended::Through { end, lines } if line.start == end => Appended::Through { end: line.end, lines: lines + 1 },
            _ => Appended::Unknown,
        }
    }
}

/// Where the log stands after a writer's appends, for keeping the log it loaded at `loaded`
/// (none: there was no log) extended with them as if the next load had parsed them: the
/// same file, at least that long, its ends read again. None when any of that fails.
pub fn after_appends(dir: &Dir, shown: &Path, loaded: Option<&Position>, end: u64, lines: usize) -> Option<Position> {
    let file = dir.open(EVENTS).ok()?.into_std();
    let metadata = file.metadata().ok()?;
    let log = (shown.to_path_buf(), metadata.dev(), metadata.ino());
    if loaded.is_some_and(|at| at.log != log) || metadata.len() < end {
        return None;
    }
    let (head, tail) = ends(&file, end).ok()?;
    Some(Position { log, len: end, next_line: loaded.map_or(1, |at| at.next_line) + lines, head, tail })
}

/// One JSON line, then fsync: an event is either wholly in the log or (torn by a crash)
/// dropped on the next load. Returns where the line lies in the log.
pub fn append(dir: &Dir, shown: &Path, event: &Event) -> Result<std::ops::Range<u64>> {
    // Written as it is serialized: a snapshot of a whole session is never held as one buffer.
    files::append_with(dir, EVENTS, |out| serde_json::to_writer(out, event).map_err(std::io::Error::from)).with_context(|| format!("appending to {}", shown.display()))
}
