//! `log`: plugin messages into the host's `tracing`, bounded so a plugin cannot flood it.

use crate::engine::CallState;
use crate::wit_edge::log::{Host, Level};

const MAX_LINES_PER_CALL: u32 = 1_000;
const MAX_LINE_CHARS: usize = 2_000;

#[derive(Debug, Default)]
pub struct LogBudget {
    lines: u32,
}

impl Host for CallState {
    fn log(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
        if !self.grants.has(crate::capabilities::Capability::Log) || self.log.lines >= MAX_LINES_PER_CALL {
            return Ok(());
        }
        self.log.lines += 1;
        let message: String = message.chars().take(MAX_LINE_CHARS).collect();
        let plugin = self.plugin.as_str();
        match level {
            Level::Trace => tracing::trace!(plugin, "{message}"),
            Level::Debug => tracing::debug!(plugin, "{message}"),
            Level::Info => tracing::info!(plugin, "{message}"),
            Level::Warn => tracing::warn!(plugin, "{message}"),
            Level::Error => tracing::error!(plugin, "{message}"),
        }
        Ok(())
    }
}
