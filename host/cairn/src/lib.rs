//! Cairn's host runtime: sandboxed, swappable, auditable context compaction for LLM agent
//! harnesses. The data path reads top-down: parse a transcript (`transcript`), run the
//! policy's strategy chain of Wasm plugins (`chain`, `plugin`, `engine`, `capabilities`),
//! check every outcome against the host's invariants, and record it durably (`storage`).
//!
//! Embed it with [`Cairn`]: add plugins, load a [`Policy`], open a [`storage::Home`] and call
//! [`Cairn::compact`].

pub mod capabilities;
pub mod chain;
pub mod checkpoint;
pub mod engine;
mod fault;
pub mod lifecycle;
pub mod model;
mod host;
pub mod plugin;
pub mod policy;
pub mod recall;
pub mod storage;
pub mod tokenizer;
pub mod transcript;
mod wit_edge;

pub use host::{Cairn, CompactionReport, RunOptions};
pub use lifecycle::Lifecycle;
pub use policy::Policy;
