//! Plugins: a strict manifest, a compiled component, its checked imports and a ready
//! `InstancePre` for its world. Loaded once; instantiated in a fresh `Store` per call.

mod call;
pub mod inspect;
mod manifest;
mod registry;
mod strategy;

pub use call::StepLimits;
pub use manifest::Manifest;
pub use registry::Registry;
pub use strategy::WasmStrategy;

use anyhow::{bail, Result};
use sha2::{Digest, Sha256};
use wasmtime::component::types::ComponentItem;
use wasmtime::component::Component;

use crate::capabilities::{Grants, Interface};
use crate::chain::StepError;
use crate::engine::{Compiled, Engine};
use crate::wit_edge::{Linkers, PluginPre};

/// A loaded, validated plugin.
pub struct Plugin {
    pub manifest: Manifest,
    pub sha256: String,
    /// `bundled` or the file it came from.
    pub source: String,
    /// Capability interfaces the component imports.
    pub imports: Vec<Interface>,
    pub uses_wasi: bool,
    /// Whether its compiled code came from the code cache.
    pub from_cache: bool,
    label: String,
    pre: PluginPre,
    /// The manifest's `config_schema`, compiled once.
    config_validator: Option<jsonschema::Validator>,
    /// Built by componentize-qjs (JavaScript): WASI is stubbed out to `unreachable`.
    quickjs: bool,
}

/// How a failure names the sandbox's filesystem (none).
pub const SANDBOX_FILESYSTEM: &str = "no filesystem in this sandbox";
/// How a JavaScript plugin's trap names the WASI its build stubs out.
pub const QUICKJS_STUBS: &str = "no WASI in a JavaScript plugin's sandbox";

/// What is wrong with a step's config under its plugin's `config_schema`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigProblem {
    /// The keys leading to the value at fault (for an unknown key, ending with that key).
    pub path: Vec<String>,
    pub message: String,
}

impl Plugin {
    /// `name@version`, the way every message names a plugin.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The version of `cairn:compaction` it was built against, as its imports say.
    pub fn contract(&self) -> &'static str {
        self.pre.contract()
    }

    /// A message about this plugin, worded the one way every message names a plugin.
    pub fn says(&self, what: impl std::fmt::Display) -> String {
        format!("plugin {}: {what}", self.label)
    }

    /// The capability this plugin imports and needs but `grants` leaves out, if any: such a
    /// step is refused when the policy is loaded, so nothing runs.
    pub fn ungranted_import(&self, grants: &Grants) -> Option<Interface> {
        self.imports.iter().copied().find(|i| !self.manifest.is_optional(i.name()) && !grants.allows_import(*i))
    }

    /// Compiles and checks a component against its manifest: hash, world, declared imports.
    pub fn load(engine: &Engine, linkers: &Linkers, manifest: Manifest, bytes: &[u8], sha256: Option<&str>, source: String) -> Result<Self> {
        let label = manifest.label();
        let context = |what: String| format!("plugin {label} ({source}): {what}");
        let sha256 = sha256.map_or_else(|| hex_sha256(bytes), str::to_string);
        if let Some(expected) = &manifest.sha256 {
            if !expected.eq_ignore_ascii_case(&sha256) {
                bail!(context(format!("sha256 mismatch: manifest says {expected}, the component is {sha256}")));
            }
        }
        let (component, compiled) = engine.component(bytes, &sha256).map_err(|e| anyhow::anyhow!(context(format!("not a valid Wasm component: {e}"))))?;
        let (imports, uses_wasi) = capability_imports(engine, &component).map_err(|e| anyhow::anyhow!(context(format!("{e:#}"))))?;
        if let Some(undeclared) = imports.iter().find(|i| !manifest.declares(i.name())) {
            bail!(context(format!("it imports the `{undeclared}` capability but its manifest does not declare it")));
        }
        let pre = PluginPre::new(linkers, engine.wasmtime(), &component, manifest.kind, uses_wasi).map_err(|e| anyhow::anyhow!(context(format!("{e:#}"))))?;
        let config_validator = manifest.config_validator();
        let quickjs = inspect::built_by_quickjs(bytes);
        Ok(Plugin { manifest, sha256, source, imports, uses_wasi, from_cache: compiled == Compiled::FromCache, label, pre, config_validator, quickjs })
    }

    /// `error` with what the sandbox explains about it: a plugin that imports WASI and fails
    /// on a file "not found" met the sandbox's empty filesystem (no directory is open to
    /// plugins, so WASI libc answers ENOENT for every path), not a missing file; a JavaScript
    /// plugin's `unreachable` trap is most often its runtime reaching for WASI, which its build
    /// stubs out.
    pub(crate) fn explain_sandbox(&self, error: StepError) -> StepError {
        const MISSING: [&str; 4] = ["No such file or directory", "ENOENT", "FileNotFoundError", "[Errno 44]"];
        let explain = |message: String| {
            if self.uses_wasi && MISSING.iter().any(|m| message.contains(m)) && !message.contains(SANDBOX_FILESYSTEM) {
                format!("{message} ({SANDBOX_FILESYSTEM}: no directory is open to plugins, so every path reads as missing; pass what it needs through its config or the archive)")
            } else {
                message
            }
        };
        match error {
            StepError::Trap(message) if self.quickjs && message.contains("`unreachable`") && !message.contains(QUICKJS_STUBS) => StepError::Trap(format!(
                "{message} ({QUICKJS_STUBS}: a JavaScript plugin traps this way when it reads the clock (`performance.now()`; the SDK turns `Date.now()` into an error that says so), sets a timer, or touches files, network or the environment)"
            )),
            StepError::Invalid(message) => StepError::Invalid(explain(message)),
            StepError::Trap(message) => StepError::Trap(explain(message)),
            StepError::Unavailable(message) => StepError::Unavailable(explain(message)),
            other => other,
        }
    }

    /// Checks a step's config (the JSON object the plugin will receive, before the host adds
    /// its reserved keys) against the manifest's `config_schema`; none means anything goes.
    pub fn config_problems(&self, config: &serde_json::Value) -> Vec<ConfigProblem> {
        let (Some(validator), Some(schema)) = (&self.config_validator, &self.manifest.config_schema) else {
            return Vec::new();
        };
        let mut config = config.clone();
        if let Some(object) = config.as_object_mut() {
            // Set by the host (a policy may write them; the host's value wins).
            object.remove(strategy::MODEL_CONTEXT_WINDOW_KEY);
            object.remove(strategy::BUDGET_KEY);
        }
        let mut problems = Vec::new();
        for error in validator.iter_errors(&config).take(10) {
            let path: Vec<String> = error.instance_path().as_str().split('/').skip(1).map(|s| s.replace("~1", "/").replace("~0", "~")).collect();
            match error.kind() {
                jsonschema::error::ValidationErrorKind::AdditionalProperties { unexpected } => {
                    // The schema object holding this `additionalProperties` lists the known keys.
                    let holder = error.schema_path().as_str().rsplit_once('/').map_or("", |(parent, _)| parent);
                    let properties = schema.pointer(holder).and_then(|s| s.get("properties")).and_then(|p| p.as_object());
                    let known = match properties.map(|p| p.keys().map(String::as_str).collect::<Vec<_>>()) {
                        Some(keys) if keys.is_empty() && path.is_empty() => " (it takes no config)".to_string(),
                        Some(keys) if !keys.is_empty() => format!(" (known: {})", keys.join(", ")),
                        _ => String::new(),
                    };
                    for key in unexpected {
                        let mut at = path.clone();
                        at.push(key.clone());
                        problems.push(ConfigProblem { path: at, message: format!("unknown key `{key}`{known}") });
                    }
                }
                _ => {
                    let message = match path.last() {
                        Some(key) => format!("`{key}`: {error}"),
                        None => error.to_string(),
                    };
                    problems.push(ConfigProblem { path, message: crate::record::clip_message(&message) });
                }
            }
        }
        problems
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
            // A type a world `use`s (0.2.0's `history`): no capability in it, it links or not.
            None if matches!(item.ty, ComponentItem::Resource(_) | ComponentItem::Type(_)) => {}
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

#[cfg(test)]
mod tests {
    /// A bundled plugin's hash is taken on trust at start-up: it must be its bytes' own.
    #[test]
    fn every_bundled_plugin_carries_its_components_own_sha256() {
        for plugin in cairn_bundle::BUNDLED.iter().chain(cairn_bundle::FIXTURES) {
            assert_eq!(plugin.sha256, super::hex_sha256(plugin.component), "{}", plugin.manifest.lines().next().unwrap_or_default());
        }
    }
}
