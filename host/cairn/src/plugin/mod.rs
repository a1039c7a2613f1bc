//! Plugins: a strict manifest, a compiled component, its checked imports and a ready
//! `InstancePre` for its world. Loaded once; instantiated in a fresh `Store` per call.

mod manifest;
mod decide;
mod registry;
mod strategy;

pub use manifest::Manifest;
pub use registry::Registry;
pub use strategy::{StepLimits, WasmStrategy};

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};
use wasmtime::component::types::ComponentItem;
use wasmtime::component::Component;

use crate::capabilities::Interface;
use crate::engine::{CallState, Engine, World};
use crate::wit_edge;

/// What a plugin says about itself through `describe`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PluginInfo {
    pub name: String,
    pub version: String,
    pub description: String,
    pub capabilities: Vec<String>,
}

/// A loaded, validated plugin.
pub struct Plugin {
    pub manifest: Manifest,
    pub sha256: String,
    /// `bundled` or the file it came from.
    pub source: String,
    /// Capability interfaces the component imports.
    pub imports: Vec<Interface>,
    pub uses_wasi: bool,
    pre: Pre,
}

enum Pre {
    Strategy(wit_edge::strategy::StrategyPre<CallState>),
    Trigger(wit_edge::trigger::TriggerPre<CallState>),
    CommitPolicy(wit_edge::commit_policy::CommitPolicyPre<CallState>),
}

impl Plugin {
    /// `name@version`, the way every message names a plugin.
    pub fn label(&self) -> String {
        self.manifest.label()
    }

    /// Why this plugin may not run under `grants`: an imported capability that is neither
    /// granted nor optional. Checked before instantiation, so nothing runs.
    pub fn refusal(&self, grants: &crate::capabilities::Grants) -> Option<String> {
        self.imports.iter().find(|i| !self.manifest.is_optional(i.name()) && !grants.allows_import(**i)).map(|interface| {
            format!("plugin {} imports the `{interface}` capability, which the policy does not grant it; refused at load", self.label())
        })
    }

    /// Compiles and checks a component against its manifest: hash, world, declared imports.
    pub fn load(engine: &Engine, manifest: Manifest, bytes: &[u8], source: String) -> Result<Self> {
        let label = manifest.label();
        let sha256 = hex_sha256(bytes);
        if let Some(expected) = &manifest.sha256 {
            if !expected.eq_ignore_ascii_case(&sha256) {
                bail!("plugin {label} ({source}): sha256 mismatch: manifest says {expected}, the component is {sha256}");
            }
        }
        let component = Component::new(engine.wasmtime(), bytes).map_err(anyhow::Error::from).with_context(|| format!("plugin {label} ({source}): not a valid Wasm component"))?;
        let (imports, uses_wasi) = capability_imports(engine, &component).with_context(|| format!("plugin {label} ({source})"))?;
        for interface in &imports {
            if !manifest.declares(interface.name()) {
                bail!("plugin {label} ({source}) imports the `{interface}` capability but its manifest does not declare it");
            }
        }
        let linkers = engine.linkers(manifest.kind);
        let linker = if uses_wasi { &linkers.with_wasi } else { &linkers.plain };
        let instance_pre = linker
            .instantiate_pre(&component)
            .map_err(anyhow::Error::from)
            .with_context(|| format!("plugin {label} ({source}): its imports do not match the {} world", manifest.kind))?;
        let wrong_world = || format!("plugin {label} ({source}) does not export the {} world", manifest.kind);
        let pre = match manifest.kind {
            World::Strategy => Pre::Strategy(wit_edge::strategy::StrategyPre::new(instance_pre).map_err(anyhow::Error::from).with_context(wrong_world)?),
            World::Trigger => Pre::Trigger(wit_edge::trigger::TriggerPre::new(instance_pre).map_err(anyhow::Error::from).with_context(wrong_world)?),
            World::CommitPolicy => {
                Pre::CommitPolicy(wit_edge::commit_policy::CommitPolicyPre::new(instance_pre).map_err(anyhow::Error::from).with_context(wrong_world)?)
            }
        };
        Ok(Plugin { manifest, sha256, source, imports, uses_wasi, pre })
    }
}

/// The cairn capability interfaces a component imports, and whether it imports WASI.
fn capability_imports(engine: &Engine, component: &Component) -> Result<(Vec<Interface>, bool)> {
    let mut interfaces = Vec::new();
    let mut uses_wasi = false;
    for (name, item) in component.component_type().imports(engine.wasmtime()) {
        if name.starts_with("wasi:") {
            uses_wasi = true;
            continue;
        }
        match Interface::from_import(name) {
            Some(Ok(interface)) => interfaces.push(interface),
            Some(Err(unknown)) => bail!("imports {unknown}"),
            None if name.starts_with("cairn:compaction/") => {}
            None => {
                let kind = if matches!(item.ty, ComponentItem::ComponentFunc(_)) { "function" } else { "interface" };
                bail!("imports the {kind} `{name}`, which no Cairn world provides");
            }
        }
    }
    interfaces.sort();
    interfaces.dedup();
    Ok((interfaces, uses_wasi))
}

pub fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}
