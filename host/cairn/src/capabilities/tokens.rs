//! `tokens`: exact counts by the host's tokenizer, so plugins and host agree on sizes.

use super::{Capability, Gate, Refusal};
use crate::tokenizer::Tokenizer;

pub struct TokensCapability {
    gate: Gate,
    tokenizer: Tokenizer,
}

impl TokensCapability {
    pub fn new(gate: Gate, tokenizer: Tokenizer) -> Self {
        TokensCapability { gate, tokenizer }
    }

    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    /// The count, or the refusal (which ends the call as `denied`: no made-up count).
    pub fn count(&mut self, text: &str) -> Result<u32, Refusal> {
        self.gate.check(&[Capability::Tokens], "count tokens")?;
        Ok(self.tokenizer.count(text))
    }
}
