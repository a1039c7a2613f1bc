//! Where an agent's hook logs: the home's `hook-log.txt` document, never the hook's stderr.
//! The agents show a hook's stderr to the user and some save it (Gemini CLI puts it in the
//! session file), so a warning of Cairn's (`unrecognized line kinds …`) written there becomes
//! part of the user's screen and of the session. A hook's log events are captured in memory
//! instead and appended to the home's log when the hook ends, each line prefixed with the
//! agent and the hook; the last [`KEEP`] lines are kept. A hook with nothing to log opens no
//! home. What a hook means to say (its answer on stdout, an error that makes it exit 1) is
//! unchanged.

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use cairn::storage::{DocumentName, Home};

/// How many lines the hook log keeps (the oldest go first).
pub const KEEP: usize = 1000;

/// A hook's log events, captured until [`Capture::keep`] writes them into the home.
#[derive(Clone)]
pub struct Capture {
    /// `codex pre-compact`: which hook logged.
    hook: String,
    home: PathBuf,
    buffer: Arc<Mutex<Vec<u8>>>,
}

impl Capture {
    pub fn new(hook: String, home: PathBuf) -> Self {
        Capture { hook, home, buffer: Arc::default() }
    }

    /// Appends what was captured to the home's hook log. A log that cannot be written is
    /// dropped: saying so on stderr is exactly what a hook must not do, and the hook's work
    /// (and its failure record) does not depend on it.
    pub fn keep(&self) {
        let captured = std::mem::take(&mut *self.buffer.lock().unwrap_or_else(|poisoned| poisoned.into_inner()));
        let captured = String::from_utf8_lossy(&captured);
        let lines: Vec<String> = captured.lines().filter(|l| !l.trim().is_empty()).map(|l| format!("{}: {l}", self.hook)).collect();
        if lines.is_empty() {
            return;
        }
        let _ = Home::open(&self.home).and_then(|home| home.update_document(&DocumentName::HOOK_LOG, |old| Ok(Some(appended(old.unwrap_or_default(), &lines)))));
    }
}

/// `old` with `lines` after it, the last [`KEEP`] lines only.
fn appended(old: &[u8], lines: &[String]) -> Vec<u8> {
    let old = String::from_utf8_lossy(old);
    let all: Vec<&str> = old.lines().chain(lines.iter().map(String::as_str)).collect();
    let kept = &all[all.len().saturating_sub(KEEP)..];
    let mut text = kept.join("\n");
    text.push('\n');
    text.into_bytes()
}

impl Write for Capture {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.buffer.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_keeps_its_last_lines() {
        let old: String = (0..KEEP).map(|i| format!("old {i}\n")).collect();
        let text = String::from_utf8(appended(old.as_bytes(), &["new".to_string()])).unwrap();
        assert_eq!(text.lines().count(), KEEP);
        assert_eq!(text.lines().next(), Some("old 1"));
        assert_eq!(text.lines().last(), Some("new"));
    }
}
