//! The only place generated WIT types exist on the host: `bindgen!` per world, and the
//! conversions to and from the domain types. Nothing outside this module names a WIT type.

pub mod convert;

/// `cairn:compaction@0.1.0`, world `strategy` (also generates the shared interfaces).
pub mod strategy {
    wasmtime::component::bindgen!({
        path: "../../wit/0.1.0",
        world: "strategy",
        imports: { default: trappable },
    });
}

/// `cairn:compaction@0.1.0`, world `trigger`.
pub mod trigger {
    wasmtime::component::bindgen!({
        path: "../../wit/0.1.0",
        world: "trigger",
        imports: { default: trappable },
        with: {
            "cairn:compaction/types": super::strategy::cairn::compaction::types,
            "cairn:compaction/log": super::strategy::cairn::compaction::log,
        },
    });
}

/// `cairn:compaction@0.1.0`, world `commit-policy`.
pub mod commit_policy {
    wasmtime::component::bindgen!({
        path: "../../wit/0.1.0",
        world: "commit-policy",
        imports: { default: trappable },
        with: {
            "cairn:compaction/types": super::strategy::cairn::compaction::types,
            "cairn:compaction/log": super::strategy::cairn::compaction::log,
        },
    });
}

pub use strategy::cairn::compaction::{archive, log, model, tokens, types};
