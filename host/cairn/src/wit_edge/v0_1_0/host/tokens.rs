use super::super::bindings::tokens::Host;
use crate::capabilities::TokensCapability;

impl Host for TokensCapability {
    /// `count` has no error channel: a refusal ends the call (as `denied`), never a made-up 0.
    fn count(&mut self, text: String) -> wasmtime::Result<u32> {
        TokensCapability::count(self, &text).map_err(wasmtime::Error::new)
    }
}
