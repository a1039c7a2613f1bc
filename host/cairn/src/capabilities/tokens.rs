//! `tokens`: exact counts by the host's tokenizer, so plugins and host agree on sizes. The
//! input is bounded and counting stops at the call's deadline.

use std::time::Instant;

use super::{Capability, Gate, Refusal};
use crate::tokenizer::Tokenizer;

/// The most text one `count` call may ask about (a whole large context is a few MiB).
pub const MAX_COUNT_BYTES: usize = 8 << 20;

pub struct TokensCapability {
    gate: Gate,
    tokenizer: Tokenizer,
    deadline: Instant,
    /// Set when a count ran into the deadline: the step then ends as `timeout`.
    pub timed_out: bool,
}

/// Why a count produced no number; each ends the call (no made-up count).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CountError {
    #[error("{0}")]
    Denied(Refusal),
    #[error("tokens.count was asked about {0} bytes; at most {MAX_COUNT_BYTES} per call")]
    TooLarge(usize),
    #[error("tokens.count ran out of time")]
    Timeout,
}

impl TokensCapability {
    pub fn new(gate: Gate, tokenizer: Tokenizer, deadline: Instant) -> Self {
        TokensCapability { gate, tokenizer, deadline, timed_out: false }
    }

    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    /// The call's tokenizer, for counts that need no grant (a lent conversation's parts).
    pub fn tokenizer(&self) -> Tokenizer {
        self.tokenizer
    }

    pub fn count(&mut self, text: &str) -> Result<u32, CountError> {
        self.gate.check(&[Capability::Tokens], "count tokens").map_err(CountError::Denied)?;
        if text.len() > MAX_COUNT_BYTES {
            return Err(CountError::TooLarge(text.len()));
        }
        let counted = self.tokenizer.count_until(text, self.deadline);
        self.timed_out = counted.is_none();
        counted.ok_or(CountError::Timeout)
    }
}
