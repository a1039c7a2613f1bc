use super::super::bindings::log::{Host, Level};
use super::super::convert;
use crate::capabilities::LogCapability;

impl Host for LogCapability {
    fn log(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
        LogCapability::log(self, convert::level(level), &message);
        Ok(())
    }
}
