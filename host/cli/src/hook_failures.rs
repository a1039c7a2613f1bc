//! Why an agent's hook could not do its work, kept in Cairn's home so it is never lost in the
//! agent's debug log: the home's `hook-failures.jsonl` document (a file at a directory home's
//! top level, a row of a database home), one failure a line, the last [`KEEP`] kept. A hook
//! that fails records itself here and exits without blocking the agent; the next hook of the
//! same agent that can print to the agent tells it (and the user) in one line and marks the
//! failure told; `cairn doctor` lists them all, told or not. Agent-neutral: a record names its
//! agent (`claude-code`, `codex`, …) and its hook.
//!
//! Every write replaces the document atomically, one writer at a time (the home's own lock), so
//! two hooks failing at once both stay recorded. Recording never panics: a database home that
//! cannot be reached records the failure in the default directory home instead (its name holds
//! no secret; `cairn doctor` looks there too), and a home that cannot be written is said on
//! stderr while the hook goes on failing as it would have.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use cairn::storage::{self, DocumentName, Home};
use serde::{Deserialize, Serialize};

use crate::setup;

const DOCUMENT: DocumentName = DocumentName::HOOK_FAILURES;
/// How many failures are kept (the oldest go first).
pub const KEEP: usize = 50;

/// One hook that could not do its work.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Failure {
    /// The agent whose hook it was (`claude-code`).
    pub agent: String,
    /// The hook's verb (`pre-compact`).
    pub hook: String,
    /// When, as seconds since the Unix epoch.
    pub at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript_path: Option<String>,
    /// The error chain, outermost first (`{:#}`).
    pub error: String,
    /// Whether a later hook has told the agent.
    #[serde(default)]
    pub told: bool,
}

impl Failure {
    pub fn new(agent: &str, hook: &str, session_id: Option<String>, transcript_path: Option<String>, error: &anyhow::Error) -> Self {
        let at = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
        Failure { agent: agent.into(), hook: hook.into(), at, session_id, transcript_path, error: format!("{error:#}"), told: false }
    }

    /// `2025-06-01 14:02 UTC`.
    pub fn time(&self) -> String {
        utc(self.at)
    }

    /// What the failure cost, in the words of the hook's job.
    fn consequence(&self) -> &'static str {
        match self.hook.as_str() {
            "pre-compact" | "pre-compress" => "nothing was archived for that compaction",
            "session-start" | "before-agent" => "the record of that compaction was not added back",
            _ => "its work was not done",
        }
    }
}

/// Records `failure` in the home at `location`; never panics, and says on stderr when it cannot.
pub fn record(location: &Path, failure: Failure) {
    let outcome = std::panic::catch_unwind(|| match Home::open(location) {
        Ok(home) => add(&home, &failure),
        Err(unreachable) if storage::is_database(location) => {
            let fallback = setup::default_home();
            let mut failure = failure.clone();
            failure.error = format!("{} (recorded in {} because the home {} could not be opened: {unreachable:#})", failure.error, fallback.display(), storage::shown(location));
            Home::open(&fallback).and_then(|home| add(&home, &failure))
        }
        Err(e) => Err(e),
    });
    let shown = storage::shown(location);
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(e)) => eprintln!("cairn: could not record this hook failure in {shown}: {e:#}"),
        Err(_) => eprintln!("cairn: could not record this hook failure in {shown}"),
    }
}

fn add(home: &Home, failure: &Failure) -> Result<()> {
    update(home, |failures| {
        failures.push(failure.clone());
        true
    })
}

/// Every failure recorded in the home at `location`, oldest first (none when there is no such
/// directory: looking creates nothing). A line that is not a failure (a torn or foreign line)
/// is skipped.
pub fn list(location: &Path) -> Result<Vec<Failure>> {
    if !storage::is_database(location) && !location.is_dir() {
        return Ok(Vec::new());
    }
    read(&Home::open(location)?)
}

fn read(home: &Home) -> Result<Vec<Failure>> {
    Ok(parse(&home.document(&DOCUMENT)?.unwrap_or_default()))
}

fn parse(bytes: &[u8]) -> Vec<Failure> {
    String::from_utf8_lossy(bytes).lines().filter_map(|line| serde_json::from_str(line).ok()).collect()
}

/// `agent`'s failures in the home at `location` no hook has told yet, oldest first (none when
/// the home cannot be read).
pub fn untold(location: &Path, agent: &str) -> Vec<Failure> {
    list(location).unwrap_or_default().into_iter().filter(|f| f.agent == agent && !f.told).collect()
}

/// Marks `failures` told (they stay listed); says on stderr when it cannot.
pub fn mark_told(location: &Path, failures: &[Failure]) {
    if failures.is_empty() {
        return;
    }
    let marked = Home::open(location).and_then(|home| {
        update(&home, |kept| {
            let mut changed = false;
            for f in kept.iter_mut().filter(|f| !f.told && failures.contains(f)) {
                f.told = true;
                changed = true;
            }
            changed
        })
    });
    if let Err(e) = marked {
        eprintln!("cairn: could not mark the hook failures told in {}: {e:#}", storage::shown(location));
    }
}

/// `Cairn: the pre-compact hook failed at 2025-06-01 14:02 UTC (reading …: line 15: …); nothing
/// was archived for that compaction — run `cairn doctor``, with how many more when several.
pub fn notice(untold: &[Failure]) -> Option<String> {
    let last = untold.last()?;
    let error: String = if last.error.chars().count() > 400 { last.error.chars().take(400).collect::<String>() + "…" } else { last.error.clone() };
    let earlier = match untold.len() - 1 {
        0 => String::new(),
        1 => " (and 1 earlier hook failure)".into(),
        n => format!(" (and {n} earlier hook failures)"),
    };
    Some(format!("Cairn: the {} hook failed at {} ({}); {}{earlier} — run `cairn doctor` to see why", last.hook, last.time(), error.replace('\n', " "), last.consequence()))
}

/// Reads, changes and (when `change` says so) replaces the document, keeping the last [`KEEP`].
fn update(home: &Home, change: impl FnOnce(&mut Vec<Failure>) -> bool) -> Result<()> {
    let mut change = Some(change);
    home.update_document(&DOCUMENT, |bytes| {
        let mut failures = parse(bytes.unwrap_or_default());
        let change = change.take().context("a home document is changed once")?;
        if !change(&mut failures) {
            return Ok(None);
        }
        let keep_from = failures.len().saturating_sub(KEEP);
        let mut text = String::new();
        for f in &failures[keep_from..] {
            text.push_str(&serde_json::to_string(f)?);
            text.push('\n');
        }
        Ok(Some(text.into_bytes()))
    })
    .with_context(|| format!("updating the hook failures of {}", home.path().display()))
}

/// `secs` since the epoch as `YYYY-MM-DD HH:MM UTC`.
fn utc(secs: u64) -> String {
    let iso = cairn::transcript::formats::iso8601(secs.saturating_mul(1000));
    format!("{} {} UTC", &iso[..10], &iso[11..16])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a hook that prints does: the notice of the untold failures, then marks them told.
    fn tell(home: &Path, agent: &str) -> Option<String> {
        let untold = untold(home, agent);
        let line = notice(&untold)?;
        mark_told(home, &untold);
        Some(line)
    }

    fn failure(n: u64) -> Failure {
        Failure { agent: "claude-code".into(), hook: "pre-compact".into(), at: n, session_id: None, transcript_path: None, error: format!("error {n}"), told: false }
    }

    #[test]
    fn times_are_civil_dates_in_utc() {
        assert_eq!(utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc(951_827_696), "2000-02-29 12:34 UTC");
        assert_eq!(utc(1_767_225_599), "2025-12-31 23:59 UTC");
    }

    #[test]
    fn failures_are_kept_to_the_last_fifty_and_told_once_per_agent() {
        let home = tempfile::tempdir().unwrap();
        for n in 0..60 {
            record(home.path(), failure(n));
        }
        let mut codex = failure(99);
        codex.agent = "codex".into();
        record(home.path(), codex);
        let kept = list(home.path()).unwrap();
        assert_eq!(kept.len(), KEEP);
        assert_eq!(kept.last().unwrap().agent, "codex");

        let line = tell(home.path(), "claude-code").unwrap();
        assert!(line.starts_with("Cairn: the pre-compact hook failed at 1970-01-01 00:00 UTC (error 59); nothing was archived"), "{line}");
        assert!(line.contains("(and 48 earlier hook failures)"), "{line}");
        assert_eq!(tell(home.path(), "claude-code"), None, "told once");
        assert!(tell(home.path(), "codex").is_some(), "another agent's failures are its own to tell");
        assert!(list(home.path()).unwrap().iter().all(|f| f.told), "told failures stay listed");
    }

    #[test]
    fn a_home_that_cannot_be_written_is_said_not_panicked() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("home");
        std::fs::write(&file, "not a directory").unwrap();
        record(&file, failure(1));
        assert!(list(&file).is_err() || list(&file).unwrap().is_empty());
        assert_eq!(tell(&file, "claude-code"), None);
    }
}
