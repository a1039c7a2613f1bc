//! Contract `cairn:compaction@0.2.0`: its bindings (private to this module, so the compiler
//! keeps generated types here), the linkers of its three worlds, the conversions and the
//! capability `Host` impls (`host/`, one file per capability, each delegating to
//! `crate::capabilities`). What is new against 0.1.0: a strategy is lent the conversation
//! (`conversation.history`, a resource in the call's table) instead of given every entry,
//! and answers with the indexes of entries it keeps unchanged.

mod convert;
mod host;

use anyhow::{Context, Result};
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::Store;

use crate::capabilities::conversation::LentHistory;
use crate::chain::{StepError, StepInput, StrategyOutput};
use crate::engine::{CallState, World};
use crate::record::{Boundary, CommitDecision, Proposal, TriggerDecision, TriggerInput};

pub const VERSION: &str = "0.2.0";

mod bindings {
    /// World `strategy` (also generates the shared interfaces).
    pub mod strategy {
        wasmtime::component::bindgen!({
            path: "../../wit/0.2.0",
            world: "strategy",
            imports: { default: trappable },
            with: { "cairn:compaction/conversation.history": crate::capabilities::conversation::LentHistory },
        });
    }

    /// World `trigger`.
    pub mod trigger {
        wasmtime::component::bindgen!({
            path: "../../wit/0.2.0",
            world: "trigger",
            imports: { default: trappable },
            with: {
                "cairn:compaction/types": super::strategy::cairn::compaction::types,
                "cairn:compaction/log": super::strategy::cairn::compaction::log,
            },
        });
    }

    /// World `commit-policy`.
    pub mod commit_policy {
        wasmtime::component::bindgen!({
            path: "../../wit/0.2.0",
            world: "commit-policy",
            imports: { default: trappable },
            with: {
                "cairn:compaction/types": super::strategy::cairn::compaction::types,
                "cairn:compaction/log": super::strategy::cairn::compaction::log,
            },
        });
    }

    pub use strategy::cairn::compaction::{archive, conversation, log, model, tokens, types};
}

use bindings::{archive, commit_policy, conversation, log, model, strategy, tokens, trigger, types};

/// This version's linkers, one pair per world, each built at its first use.
pub type Linkers = super::WorldLinkers;

pub fn linkers(engine: &wasmtime::Engine) -> Result<Linkers> {
    Linkers::new(engine, add_imports)
}

/// The world's imports, each capability projected onto its own state in the call's store.
fn add_imports(linker: &mut Linker<CallState>, world: World) -> wasmtime::Result<()> {
    types::add_to_linker::<CallState, HasSelf<CallState>>(linker, |s| s)?;
    log::add_to_linker::<CallState, HasSelf<_>>(linker, |s| &mut s.log)?;
    if world == World::Strategy {
        tokens::add_to_linker::<CallState, HasSelf<_>>(linker, |s| &mut s.tokens)?;
        model::add_to_linker::<CallState, HasSelf<_>>(linker, |s| &mut s.model)?;
        archive::add_to_linker::<CallState, HasSelf<_>>(linker, |s| &mut s.archive)?;
    }
    // In every world: an SDK binding all three worlds leaves the `history` resource's drop
    // among a trigger's imports. Only a strategy is ever lent one; the others can read nothing.
    conversation::add_to_linker::<CallState, HasSelf<CallState>>(linker, |s| s)?;
    Ok(())
}

pub enum Pre {
    Strategy(strategy::StrategyPre<CallState>),
    Trigger(trigger::TriggerPre<CallState>),
    CommitPolicy(commit_policy::CommitPolicyPre<CallState>),
}

impl Pre {
    pub fn new(linkers: &Linkers, component: &Component, world: World, uses_wasi: bool) -> Result<Self> {
        let linker = linkers.get(world, uses_wasi)?;
        let pre = linker.instantiate_pre(component).map_err(anyhow::Error::from).with_context(|| format!("its imports do not match the {world} world"))?;
        let wrong_world = || format!("it does not export the {world} world of cairn:compaction@{VERSION}");
        Ok(match world {
            World::Strategy => Pre::Strategy(strategy::StrategyPre::new(pre).map_err(anyhow::Error::from).with_context(wrong_world)?),
            World::Trigger => Pre::Trigger(trigger::TriggerPre::new(pre).map_err(anyhow::Error::from).with_context(wrong_world)?),
            World::CommitPolicy => Pre::CommitPolicy(commit_policy::CommitPolicyPre::new(pre).map_err(anyhow::Error::from).with_context(wrong_world)?),
        })
    }

    pub fn compact(&self, store: &mut Store<CallState>, input: &StepInput<'_>, config: &str) -> wasmtime::Result<Result<StrategyOutput, StepError>> {
        let Pre::Strategy(pre) = self else { wasmtime::bail!("not a strategy plugin") };
        let tokenizer = store.data().tokens.tokenizer();
        let history = store.data_mut().lend(LentHistory::new(input.entries, tokenizer))?;
        let request = convert::compact_request(input, config);
        let answer = pre.instantiate(&mut *store)?.call_compact(&mut *store, history, &request)?;
        Ok(convert::strategy_result(answer, input.entries))
    }

    pub fn decide_trigger(&self, store: &mut Store<CallState>, input: &TriggerInput, config: &str) -> wasmtime::Result<TriggerDecision> {
        let Pre::Trigger(pre) = self else { wasmtime::bail!("not a trigger plugin") };
        let input = convert::trigger_input(input, config);
        Ok(pre.instantiate(&mut *store)?.call_decide(&mut *store, &input)?.into())
    }

    pub fn decide_commit(&self, store: &mut Store<CallState>, boundary: &Boundary, proposal: &Proposal, config: &str) -> wasmtime::Result<CommitDecision> {
        let Pre::CommitPolicy(pre) = self else { wasmtime::bail!("not a commit-policy plugin") };
        let (boundary, proposal) = convert::commit_question(boundary, proposal, config);
        Ok(pre.instantiate(&mut *store)?.call_decide(&mut *store, &boundary, &proposal)?.into())
    }
}
