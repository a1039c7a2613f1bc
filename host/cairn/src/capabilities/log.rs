//! `log`: plugin messages into the host's `tracing`, bounded so a plugin cannot flood it.

use super::{Capability, Gate};

pub const MAX_LINES_PER_CALL: u32 = 1_000;
pub const MAX_LINE_CHARS: usize = 2_000;

pub struct LogCapability {
    gate: Gate,
    lines: u32,
    /// Lines over the budget, reported once the call ends.
    pub dropped: u32,
    /// The last error-level line: an SDK logs an uncaught exception (with the author's source
    /// lines) before the call traps, and the trap's message carries it.
    pub last_error: Option<String>,
}

impl LogCapability {
    pub fn new(gate: Gate) -> Self {
        LogCapability { gate, lines: 0, dropped: 0, last_error: None }
    }

    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    /// Logs one line; without the grant the line is dropped and the refusal recorded.
    pub fn log(&mut self, level: tracing::Level, message: &str) {
        if self.gate.check(&[Capability::Log], "log").is_err() {
            return;
        }
        if self.lines >= MAX_LINES_PER_CALL {
            self.dropped += 1;
            return;
        }
        self.lines += 1;
        let message = cairn_rules::clip_chars(message, MAX_LINE_CHARS);
        let plugin = self.gate.plugin();
        match level {
            tracing::Level::TRACE => tracing::trace!(plugin, "{message}"),
            tracing::Level::DEBUG => tracing::debug!(plugin, "{message}"),
            tracing::Level::INFO => tracing::info!(plugin, "{message}"),
            tracing::Level::WARN => tracing::warn!(plugin, "{message}"),
            _ => {
                tracing::error!(plugin, "{message}");
                self.last_error = Some(message.to_string());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::Grants;

    #[test]
    fn lines_past_the_budget_are_counted_and_dropped() {
        let mut log = LogCapability::new(Gate::new("p@1".into(), Grants::new([Capability::Log])));
        for _ in 0..MAX_LINES_PER_CALL + 250 {
            log.log(tracing::Level::INFO, &"x".repeat(MAX_LINE_CHARS * 3));
        }
        assert_eq!(log.lines, MAX_LINES_PER_CALL);
        assert_eq!(log.dropped, 250);
        assert!(log.gate().refused().is_empty());
    }

    #[test]
    fn without_the_grant_a_line_is_refused_and_recorded() {
        let mut log = LogCapability::new(Gate::new("p@1".into(), Grants::default()));
        log.log(tracing::Level::INFO, "hello");
        assert_eq!(log.lines, 0);
        assert_eq!(log.gate().refused()[0].capability, Capability::Log);
    }
}
