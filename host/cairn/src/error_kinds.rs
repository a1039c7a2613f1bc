//! Marker errors: the root of an `anyhow` chain that tells the harness API what kind of
//! failure it carries (`harness::Error` reads them back with `downcast_ref`, through every
//! `context` added on the way up). Each displays its message unchanged, so a chain reads as
//! it did before it was typed.

/// What the call names does not exist: a conversation, a compaction, an artifact, an entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotFound(pub String);

/// The call is well formed, but the conversation's state refuses it: nothing to undo, a pin
/// over the pin budget, an id that is not pinned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);
