//! Write Cairn compaction plugins in Rust.
//!
//! Implement one of [`Strategy`], [`Trigger`] or [`CommitPolicy`] for a unit struct and export it
//! with the matching macro ([`export_strategy!`], [`export_trigger!`], [`export_commit_policy!`]).
//! Build with `cargo build --target wasm32-unknown-unknown --release` and turn the module into a
//! component (`wasm-tools component new`); the bundled plugins in `plugins/` show the whole loop.
//!
//! A plugin describes itself in its manifest, `cairn-plugin.toml`, beside its `Cargo.toml`: the
//! host reads name, kind, version, description and capabilities there before it compiles
//! anything, so the component exports only the work itself.
//!
//! ```no_run
//! use cairn_sdk::types::{TriggerDecision, TriggerInput};
//! use cairn_sdk::{export_trigger, pending_request_decision, Trigger};
//!
//! /// Acts only when the agent asks, once any cooldown is over.
//! struct AgentOnly;
//!
//! impl Trigger for AgentOnly {
//!     fn decide(input: TriggerInput) -> TriggerDecision {
//!         pending_request_decision(&input, None).unwrap_or(TriggerDecision::None)
//!     }
//! }
//!
//! export_trigger!(AgentOnly);
//! ```
//!
//! ```toml
//! # cairn-plugin.toml
//! name = "agent-only"
//! kind = "trigger"
//! version = "0.1.0"
//! description = "Compacts or hands over only when the agent asks"
//! capabilities = []
//! ```
//!
//! The rules the host checks every outcome against (entry text, safe cut points, placeholder
//! text, seed limits) come from `cairn-rules`, the crate the host uses too: see [`rules`].
//!
//! Every trait method has a default, so a plugin keeps compiling when the contract grows.

pub mod checkpoint;
pub mod chunks;
mod helpers;
pub mod ledger;
pub mod lent;
#[cfg(not(target_arch = "wasm32"))]
pub mod native;
pub mod prompt;
mod request;

/// The rules host and plugins share, as the host applies them.
pub use cairn_rules as rules;
pub use helpers::*;

/// Generated bindings of the `strategy` world (also the home of the shared types and capabilities).
#[doc(hidden)]
pub mod strategy_bindings {
    wit_bindgen::generate!({
        path: "../../wit/0.2.0",
        world: "strategy",
        pub_export_macro: true,
        export_macro_name: "__export_strategy_world",
        default_bindings_module: "cairn_sdk::strategy_bindings",
        generate_all,
    });
}

/// Generated bindings of the `trigger` world.
#[doc(hidden)]
pub mod trigger_bindings {
    wit_bindgen::generate!({
        path: "../../wit/0.2.0",
        world: "trigger",
        pub_export_macro: true,
        export_macro_name: "__export_trigger_world",
        default_bindings_module: "cairn_sdk::trigger_bindings",
        with: {
            "cairn:compaction/types@0.2.0": crate::strategy_bindings::cairn::compaction::types,
            "cairn:compaction/log@0.2.0": crate::strategy_bindings::cairn::compaction::log,
        },
    });
}

/// Generated bindings of the `commit-policy` world.
#[doc(hidden)]
#[allow(clippy::too_many_arguments)] // the flattened `decide(boundary, proposal)` export
pub mod commit_policy_bindings {
    wit_bindgen::generate!({
        path: "../../wit/0.2.0",
        world: "commit-policy",
        pub_export_macro: true,
        export_macro_name: "__export_commit_policy_world",
        default_bindings_module: "cairn_sdk::commit_policy_bindings",
        with: {
            "cairn:compaction/types@0.2.0": crate::strategy_bindings::cairn::compaction::types,
            "cairn:compaction/log@0.2.0": crate::strategy_bindings::cairn::compaction::log,
        },
    });
}

/// The contract's types: entries, parts, requests, outcomes, decisions. [`CompactRequest`]
/// and [`Outcome`] are the SDK's (with every entry); [`Request`] and [`WireOutcome`] are the
/// contract's own, for [`Strategy::compact_lent`].
///
/// [`CompactRequest`]: types::CompactRequest
/// [`Outcome`]: types::Outcome
/// [`Request`]: types::Request
/// [`WireOutcome`]: types::WireOutcome
pub mod types {
    pub use crate::request::{CompactRequest, Outcome};
    pub use crate::strategy_bindings::cairn::compaction::types::*;
    pub use crate::strategy_bindings::cairn::compaction::types::{CompactRequest as Request, Outcome as WireOutcome, ReplacementEntry as Replacement};
}

/// Host capabilities. Each call works only if the policy grants the capability to this plugin.
pub mod host {
    pub use crate::strategy_bindings::cairn::compaction::{archive, conversation, log, model, tokens};
}

use types::*;

/// What replaces older history. Called with the entries, the protected head and the verbatim tail.
pub trait Strategy {
    fn compact(request: CompactRequest) -> Result<Outcome, StrategyError> {
        let _ = request;
        Err(StrategyError::Failed("compact is not implemented by this plugin".into()))
    }

    /// The call as the host makes it: the conversation lent, read by index. By default every
    /// entry is read in one batch and [`Strategy::compact`] answers. A strategy that needs
    /// less (outlines, a few parts' text) reads only that here, and answers with
    /// [`Replacement::Original`](types::Replacement::Original) for entries it keeps.
    fn compact_lent(conversation: &dyn lent::Conversation, request: Request) -> Result<WireOutcome, StrategyError> {
        lent::compact_with_every_entry(conversation, request, Self::compact)
    }
}

/// When to act: called at every turn boundary.
pub trait Trigger {
    fn decide(input: TriggerInput) -> TriggerDecision {
        let _ = input;
        TriggerDecision::None
    }
}

/// Whether swapping the working context now is safe.
pub trait CommitPolicy {
    fn decide(boundary: Boundary, proposal: Proposal) -> CommitDecision {
        let _ = (boundary, proposal);
        CommitDecision::Commit
    }
}

/// Exports a type implementing [`Strategy`] as this component's `strategy` world.
#[macro_export]
macro_rules! export_strategy {
    ($plugin:ident) => {
        impl $crate::strategy_bindings::Guest for $plugin {
            fn compact(
                history: &$crate::host::conversation::History,
                request: $crate::types::Request,
            ) -> Result<$crate::types::WireOutcome, $crate::types::StrategyError> {
                <$plugin as $crate::Strategy>::compact_lent(history, request)
            }
        }
        $crate::strategy_bindings::__export_strategy_world!($plugin with_types_in $crate::strategy_bindings);
    };
}

/// Exports a type implementing [`Trigger`] as this component's `trigger` world.
#[macro_export]
macro_rules! export_trigger {
    ($plugin:ident) => {
        impl $crate::trigger_bindings::Guest for $plugin {
            fn decide(input: $crate::types::TriggerInput) -> $crate::types::TriggerDecision {
                <$plugin as $crate::Trigger>::decide(input)
            }
        }
        $crate::trigger_bindings::__export_trigger_world!($plugin with_types_in $crate::trigger_bindings);
    };
}

/// Exports a type implementing [`CommitPolicy`] as this component's `commit-policy` world.
#[macro_export]
macro_rules! export_commit_policy {
    ($plugin:ident) => {
        impl $crate::commit_policy_bindings::Guest for $plugin {
            fn decide(
                boundary: $crate::types::Boundary,
                proposal: $crate::types::Proposal,
            ) -> $crate::types::CommitDecision {
                <$plugin as $crate::CommitPolicy>::decide(boundary, proposal)
            }
        }
        $crate::commit_policy_bindings::__export_commit_policy_world!($plugin with_types_in $crate::commit_policy_bindings);
    };
}
