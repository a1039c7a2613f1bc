//! `tokens`: exact counts by the host's tokenizer, so plugins and host agree on sizes.

use crate::capabilities::Capability;
use crate::engine::CallState;
use crate::wit_edge::tokens::Host;

impl Host for CallState {
    fn count(&mut self, text: String) -> wasmtime::Result<u32> {
        if !self.grants.has(Capability::Tokens) {
            // Unreachable for a component refused at load time; kept as a second wall.
            self.denied = Some(format!("plugin {} called `tokens` without a grant", self.plugin));
            return Ok(0);
        }
        Ok(self.tokenizer.count(&text))
    }
}
