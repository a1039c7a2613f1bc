use super::super::bindings::tokens::Host;
use crate::capabilities::{CountError, TokensCapability};

impl Host for TokensCapability {
    /// `count` has no error channel: a refusal, an oversized input or the deadline ends the
    /// call (as `denied`, `invalid`… or `timeout`), never a made-up count.
    fn count(&mut self, text: String) -> wasmtime::Result<u32> {
        TokensCapability::count(self, &text).map_err(|e| match e {
            CountError::Denied(refusal) => wasmtime::Error::new(refusal),
            other => wasmtime::Error::new(other),
        })
    }
}
