//! The harness API's one error type: a kind per way a call can fail, each with a stable
//! machine code a caller matches on (`Diverged` → resend the whole history), whatever the
//! message says. Inside the library errors stay `anyhow` chains; they are sorted into kinds
//! here, at the surface, by the marker at their root (`error_kinds`, `Diverged`,
//! `TranscriptError`).

use crate::error_kinds::{NotFound, Refused};
use crate::lifecycle::Diverged;
use crate::storage::archive::ReadError;
use crate::transcript::formats::TranscriptError;

/// Why a harness call failed. The message is the whole chain, as a person reads it; the
/// [`code`](Error::code) is what a program matches on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The request itself is wrong: a missing or conflicting argument, a bad conversation key,
    /// an unknown format name.
    #[error("{0}")]
    InvalidRequest(String),
    /// The caller may not do this here (a server-side `path` over HTTP, another tenant).
    #[error("{0}")]
    Forbidden(String),
    /// The conversation, compaction, artifact or entry named does not exist.
    #[error("{0}")]
    NotFound(String),
    /// An incremental call (`since`) the record cannot follow: send the whole history once.
    #[error("{0}")]
    Diverged(String),
    /// The transcript could not be read (its message names the line).
    #[error("{0}")]
    TranscriptInvalid(String),
    /// The conversation's state refuses a well-formed call (nothing to undo, a pin over budget).
    #[error("{0}")]
    Refused(String),
    /// The host has no plugins and policy to run on (their load failed).
    #[error("{0}")]
    Unavailable(String),
    /// Anything else: storage, I/O, a bug. The message says what.
    #[error("{0}")]
    Internal(String),
}

impl Error {
    /// The stable machine code of this kind: `invalid-request`, `forbidden`, `not-found`,
    /// `diverged`, `transcript-invalid`, `refused`, `unavailable` or `internal`.
    pub fn code(&self) -> &'static str {
        match self {
            Error::InvalidRequest(_) => "invalid-request",
            Error::Forbidden(_) => "forbidden",
            Error::NotFound(_) => "not-found",
            Error::Diverged(_) => "diverged",
            Error::TranscriptInvalid(_) => "transcript-invalid",
            Error::Refused(_) => "refused",
            Error::Unavailable(_) => "unavailable",
            Error::Internal(_) => "internal",
        }
    }

    /// Every code, for documentation and for bindings that declare one exception per code.
    pub const CODES: &'static [&'static str] = &["invalid-request", "forbidden", "not-found", "diverged", "transcript-invalid", "refused", "unavailable", "internal"];

    /// The message, without the kind.
    pub fn message(&self) -> &str {
        match self {
            Error::InvalidRequest(m) | Error::Forbidden(m) | Error::NotFound(m) | Error::Diverged(m) | Error::TranscriptInvalid(m) | Error::Refused(m) | Error::Unavailable(m) | Error::Internal(m) => {
                m
            }
        }
    }
}

impl From<anyhow::Error> for Error {
    fn from(error: anyhow::Error) -> Self {
        let message = format!("{error:#}");
        if error.downcast_ref::<Diverged>().is_some() {
            Error::Diverged(message)
        } else if error.downcast_ref::<NotFound>().is_some() || matches!(error.downcast_ref::<ReadError>(), Some(ReadError::NotFound(_))) {
            Error::NotFound(message)
        } else if error.downcast_ref::<Refused>().is_some() {
            Error::Refused(message)
        } else if error.downcast_ref::<TranscriptError>().is_some() {
            Error::TranscriptInvalid(message)
        } else if matches!(error.downcast_ref::<ReadError>(), Some(ReadError::Invalid(_))) || error.downcast_ref::<crate::storage::IdError>().is_some() {
            Error::InvalidRequest(message)
        } else {
            Error::Internal(message)
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn a_marker_under_any_context_sorts_the_chain_and_the_message_reads_as_before() {
        let error: anyhow::Error = Err::<(), _>(NotFound("no conversation x in home h".into())).context("opening").context("show").unwrap_err();
        let sorted = Error::from(error);
        assert_eq!(sorted.code(), "not-found");
        assert_eq!(sorted.to_string(), "show: opening: no conversation x in home h");

        let diverged = Error::from(anyhow::Error::from(Diverged { reason: "entry 3 is sent again".into() }).context("boundary"));
        assert_eq!(diverged.code(), "diverged");
        assert!(diverged.message().starts_with("boundary: diverged: entry 3"), "{diverged}");

        assert_eq!(Error::from(anyhow::anyhow!("disk full")).code(), "internal");
        assert_eq!(Error::from(anyhow::Error::from(Refused("pin refused: over budget".into()))).code(), "refused");
    }

    #[test]
    fn every_kind_has_a_distinct_listed_code() {
        let kinds = [
            Error::InvalidRequest(String::new()),
            Error::Forbidden(String::new()),
            Error::NotFound(String::new()),
            Error::Diverged(String::new()),
            Error::TranscriptInvalid(String::new()),
            Error::Refused(String::new()),
            Error::Unavailable(String::new()),
            Error::Internal(String::new()),
        ];
        let codes: Vec<&str> = kinds.iter().map(Error::code).collect();
        assert_eq!(codes, Error::CODES);
    }
}
