//! Cairn's host runtime: sandboxed, swappable, auditable context compaction for LLM agent
//! harnesses. The data path reads top-down: parse a transcript (`transcript`), check a policy
//! against the plugins (`policy`), run its chain of Wasm strategies (`chain`), check every
//! outcome against the host's invariants, and record it durably (`storage`, `record`); the
//! `lifecycle` decides when, at each turn boundary.
//!
//! Embed it with [`Cairn`]: add plugins, load a policy ([`Cairn::load_policy`]), open a
//! [`storage::Home`] and call [`Cairn::compact`] — or hand all three to a [`Lifecycle`].
//!
//! Modules, bottom to top (arrows only point down): `record`, `transcript`, `tokenizer`,
//! `checkpoint`, `pricing`, `pins` → `storage` → `model` → `capabilities` → `engine` → `chain`
//! → `wit_edge` → `plugin` → `policy` → `Cairn` → `lifecycle` → `recall`, `undo`, `show` → `harness` (the operations a harness calls,
//! typed requests and answers, typed errors).

mod capabilities;
pub mod chain;
pub mod checkpoint;
pub mod echo;
mod engine;
mod error_kinds;
mod fault;
pub mod harness;
mod host;
pub mod lifecycle;
pub mod model;
pub mod pins;
mod plugin;
pub mod policy;
mod preparing;
pub mod pricing;
pub mod recall;
pub mod record;
pub mod reinject;
pub mod show;
pub mod storage;
pub mod tokenizer;
pub mod transcript;
pub mod undo;
mod wit_edge;
pub mod workspace;

pub use capabilities::{Capability, Interface};
pub use engine::World;
pub use harness::Harness;
pub use host::{Cairn, RunOptions};
pub use lifecycle::Lifecycle;
pub use plugin::{inspect, Manifest, Plugin};
pub use policy::{CheckedPolicy, Policy};
pub use preparing::Preparing;
pub use record::CompactionReport;
pub use wit_edge::CONTRACT_VERSIONS;

/// Where Cairn caches compiled plugin code (and other derived files): `$CAIRN_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/cairn`, else `~/.cache/cairn`; `None` when `CAIRN_CACHE_DIR` is empty.
pub fn cache_dir() -> Option<std::path::PathBuf> {
    engine::CodeCache::default_dir()
}
