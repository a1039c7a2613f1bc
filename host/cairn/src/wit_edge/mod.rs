//! The WIT edge: the only place that knows the plugin contract's generated types. One
//! private module per contract version (`v0_1_0/`: bindings, conversions, `Host` impls,
//! typed calls); this file picks the version a component was built against and offers calls
//! in domain types only. A new version is a module beside the others, a variant in
//! [`PluginPre`] and its linkers in [`Linkers`]; plugins built against older ones keep loading.
//! Conversions that are the same in every version are written once (`same_in_every_version`).

mod same_host_in_every_version;
mod same_in_every_version;
mod v0_1_0;
mod v0_2_0;

use anyhow::{bail, Result};
use wasmtime::component::{Component, Linker};
use wasmtime::Store;

use crate::chain::{StepError, StepInput, StrategyOutput};
use crate::engine::{CallState, World};
use crate::record::{Boundary, CommitDecision, Proposal, TriggerDecision, TriggerInput};

/// The contract versions this host links, oldest first.
pub const CONTRACT_VERSIONS: &[&str] = &[v0_1_0::VERSION, v0_2_0::VERSION];

/// The linkers of every contract version, built once per engine.
pub struct Linkers {
    v0_1_0: v0_1_0::Linkers,
    v0_2_0: v0_2_0::Linkers,
}

impl Linkers {
    pub fn new(engine: &wasmtime::Engine) -> Result<Self> {
        Ok(Linkers { v0_1_0: v0_1_0::linkers(engine)?, v0_2_0: v0_2_0::linkers(engine)? })
    }
}

/// One contract version's linkers: per world, one without WASI and its twin with a deny-all
/// WASI, each built at its first use. The version says which imports each world gets
/// (`add_imports`). Most of a linker's cost is WASI's hundreds of functions: a host whose
/// plugins import no WASI, or are all of one version, never builds the others.
pub struct WorldLinkers {
    engine: wasmtime::Engine,
    add_imports: fn(&mut Linker<CallState>, World) -> wasmtime::Result<()>,
    /// By world (strategy, trigger, commit policy), then without and with WASI.
    linkers: [[std::sync::OnceLock<Linker<CallState>>; 2]; 3],
}

impl WorldLinkers {
    fn new(engine: &wasmtime::Engine, add_imports: fn(&mut Linker<CallState>, World) -> wasmtime::Result<()>) -> Result<Self> {
        Ok(WorldLinkers { engine: engine.clone(), add_imports, linkers: Default::default() })
    }

    fn get(&self, world: World, uses_wasi: bool) -> Result<&Linker<CallState>> {
        let by_world = match world {
            World::Strategy => &self.linkers[0],
            World::Trigger => &self.linkers[1],
            World::CommitPolicy => &self.linkers[2],
        };
        let slot = &by_world[usize::from(uses_wasi)];
        if let Some(linker) = slot.get() {
            return Ok(linker);
        }
        let mut linker = Linker::new(&self.engine);
        (self.add_imports)(&mut linker, world)?;
        if uses_wasi {
            crate::engine::wasi::add_to_linker(&mut linker)?;
        }
        // Two threads may build it at once; both are the same, and the first one set is kept.
        Ok(slot.get_or_init(|| linker))
    }
}

/// A compiled plugin ready to instantiate, for the contract version it was built against.
pub enum PluginPre {
    V0_1_0(v0_1_0::Pre),
    V0_2_0(v0_2_0::Pre),
}

impl PluginPre {
    /// Links `component` as a `world` plugin of the contract version its imports name.
    pub fn new(linkers: &Linkers, engine: &wasmtime::Engine, component: &Component, world: World, uses_wasi: bool) -> Result<Self> {
        match contract_version(engine, component)?.as_deref() {
            // Importing nothing of the contract: only a 0.1.0 strategy can (0.2.0's names the
            // lent `history`), and the other worlds are the same in both.
            None | Some(v0_1_0::VERSION) => Ok(PluginPre::V0_1_0(v0_1_0::Pre::new(&linkers.v0_1_0, component, world, uses_wasi)?)),
            Some(v0_2_0::VERSION) => Ok(PluginPre::V0_2_0(v0_2_0::Pre::new(&linkers.v0_2_0, component, world, uses_wasi)?)),
            Some(other) => bail!("it was built against cairn:compaction@{other}; this host links {}", CONTRACT_VERSIONS.iter().map(|v| format!("@{v}")).collect::<Vec<_>>().join(", ")),
        }
    }

    /// The contract version the plugin was linked against (`0.1.0`, `0.2.0`).
    pub fn contract(&self) -> &'static str {
        match self {
            PluginPre::V0_1_0(_) => v0_1_0::VERSION,
            PluginPre::V0_2_0(_) => v0_2_0::VERSION,
        }
    }

    /// Runs a strategy. The outer error is a trap (or a refusal that ended the call); the
    /// inner one is what the plugin answered.
    pub fn compact(&self, store: &mut Store<CallState>, input: &StepInput<'_>, config: &str) -> wasmtime::Result<Result<StrategyOutput, StepError>> {
        match self {
            PluginPre::V0_1_0(pre) => pre.compact(store, input, config),
            PluginPre::V0_2_0(pre) => pre.compact(store, input, config),
        }
    }

    pub fn decide_trigger(&self, store: &mut Store<CallState>, input: &TriggerInput, config: &str) -> wasmtime::Result<TriggerDecision> {
        match self {
            PluginPre::V0_1_0(pre) => pre.decide_trigger(store, input, config),
            PluginPre::V0_2_0(pre) => pre.decide_trigger(store, input, config),
        }
    }

    pub fn decide_commit(&self, store: &mut Store<CallState>, boundary: &Boundary, proposal: &Proposal, config: &str) -> wasmtime::Result<CommitDecision> {
        match self {
            PluginPre::V0_1_0(pre) => pre.decide_commit(store, boundary, proposal, config),
            PluginPre::V0_2_0(pre) => pre.decide_commit(store, boundary, proposal, config),
        }
    }
}

/// The `@x.y.z` of the `cairn:compaction` interfaces a component imports, if any.
pub(crate) fn contract_version(engine: &wasmtime::Engine, component: &Component) -> Result<Option<String>> {
    let mut found: Option<String> = None;
    for (name, _) in component.component_type().imports(engine) {
        let Some(versioned) = name.strip_prefix("cairn:compaction/") else { continue };
        let version = versioned.split_once('@').map(|(_, v)| v.to_string()).unwrap_or_default();
        match &found {
            Some(seen) if *seen != version => bail!("it imports both cairn:compaction@{seen} and @{version}"),
            _ => found = Some(version),
        }
    }
    Ok(found)
}
