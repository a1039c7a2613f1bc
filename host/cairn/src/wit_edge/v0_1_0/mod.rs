//! Contract `cairn:compaction@0.1.0`: its bindings (private to this module, so the compiler
//! keeps generated types here), the linkers of its three worlds, the conversions and the
//! capability `Host` impls (`host/`, one file per capability, each delegating to
//! `crate::capabilities`).

mod convert;
mod host;

use anyhow::{Context, Result};
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::Store;

use crate::chain::{StepError, StepInput, StrategyOutput};
use crate::engine::{CallState, World};
use crate::record::{Boundary, CommitDecision, Proposal, TriggerDecision, TriggerInput};

pub const VERSION: &str = "0.1.0";

mod bindings {
    /// World `strategy` (also generates the shared interfaces).
    pub mod strategy {
        wasmtime::component::bindgen!({
            path: "../../wit/0.1.0",
            world: "strategy",
            imports: { default: trappable },
        });
    }

    /// World `trigger`.
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

    /// World `commit-policy`.
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
}

use bindings::{archive, commit_policy, log, model, strategy, tokens, trigger, types};

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
        // Looked up by hand, not through the generated `call_compact`, to lower the request
        // from borrowed entries (`convert::CompactRequest`); the lookup checks its type.
        let instance = pre.instance_pre().instantiate(&mut *store)?;
        let compact = instance.get_typed_func::<(&convert::CompactRequest<'_>,), (Result<types::Outcome, types::StrategyError>,)>(&mut *store, "compact")?;
        let request = convert::compact_request(input, config);
        let (answer,) = compact.call(&mut *store, (&request,))?;
        Ok(convert::strategy_result(answer))
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
