//! `log`: plugin messages into the host's `tracing`, bounded so a plugin cannot flood it.

use super::{Capability, Gate};

pub const MAX_LINES_PER_CALL: u32 = 1_000;
pub const MAX_LINE_CHARS: usize = 2_000;

pub struct LogCapability {
    gate: Gate,
    lines: u32,
    /// Lines over the budget, reported once the call ends.
    pub dropped: u32,
}

impl LogCapability {
    pub fn new(gate: Gate) -> Self {
        LogCapability { gate, lines: 0, dropped: 0 }
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
            _ => tracing::error!(plugin, "{message}"),
        }
    }
}
