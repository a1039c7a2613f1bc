//! Host capabilities plugins may import, one module each: its state for one call, its grant
//! check and its logic, in domain types (the WIT edge's `Host` impls delegate here). A policy
//! grants capabilities per plugin; a component importing one it was not granted is refused at
//! load time, and every call checks its grant again through one [`Gate`], which records each
//! refusal the same way so the step record can name the plugin and the capability.

pub mod archive;
pub mod conversation;
pub mod log;
pub mod model;
pub mod tokens;

pub use archive::{ArchiveCapability, ArchiveError};
pub use log::LogCapability;
pub use model::{CompletionError, ModelCapability};
pub use tokens::{CountError, TokensCapability};

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// One grantable permission, as written in a policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Capability {
    #[serde(rename = "log")]
    Log,
    #[serde(rename = "tokens")]
    Tokens,
    #[serde(rename = "model")]
    Model,
    /// Read the conversation's archive (summary, search, pages).
    #[serde(rename = "archive:read")]
    ArchiveRead,
    /// Read, and store artifacts with this compaction's archive.
    #[serde(rename = "archive:write")]
    ArchiveWrite,
}

/// A capability interface a component can import (`cairn:compaction/<name>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Interface {
    Log,
    Tokens,
    Model,
    Archive,
}

impl Interface {
    /// Maps an import name such as `cairn:compaction/archive@0.1.0`.
    /// `None` for names that are not capabilities (e.g. the `types` interface).
    pub fn from_import(name: &str) -> Option<Result<Self, String>> {
        let unversioned = name.split('@').next().unwrap_or(name);
        let local = unversioned.strip_prefix("cairn:compaction/")?;
        Some(match local {
            "log" => Ok(Interface::Log),
            "tokens" => Ok(Interface::Tokens),
            "model" => Ok(Interface::Model),
            "archive" => Ok(Interface::Archive),
            // The entry model, and the conversation a strategy is lent: not grants.
            "types" | "conversation" => return None,
            other => Err(format!("unknown cairn interface `{other}`")),
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Interface::Log => "log",
            Interface::Tokens => "tokens",
            Interface::Model => "model",
            Interface::Archive => "archive",
        }
    }
}

impl fmt::Display for Interface {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What the policy grants one plugin.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants(BTreeSet<Capability>);

impl Grants {
    pub fn new(capabilities: impl IntoIterator<Item = Capability>) -> Self {
        Grants(capabilities.into_iter().collect())
    }

    pub fn has(&self, capability: Capability) -> bool {
        self.0.contains(&capability)
    }

    /// Whether a component may import this interface at all.
    pub fn allows_import(&self, interface: Interface) -> bool {
        match interface {
            Interface::Log => self.has(Capability::Log),
            Interface::Tokens => self.has(Capability::Tokens),
            Interface::Model => self.has(Capability::Model),
            Interface::Archive => self.has(Capability::ArchiveRead) || self.has(Capability::ArchiveWrite),
        }
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Capability::Log => "log",
            Capability::Tokens => "tokens",
            Capability::Model => "model",
            Capability::ArchiveRead => "archive:read",
            Capability::ArchiveWrite => "archive:write",
        })
    }
}

/// A call a plugin made without the grant it needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// `name@version`.
    pub plugin: Arc<str>,
    pub capability: Capability,
    /// What it tried, e.g. "count tokens".
    pub action: &'static str,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "plugin {} may not {}: the policy does not grant it `{}`", self.plugin, self.action, self.capability)
    }
}

impl std::error::Error for Refusal {}

/// One capability's grant check for one call. Every capability refuses through `check`, so
/// every refusal is logged and recorded alike.
#[derive(Debug, Clone)]
pub struct Gate {
    plugin: Arc<str>,
    grants: Grants,
    refused: Vec<Refusal>,
}

impl Gate {
    pub fn new(plugin: Arc<str>, grants: Grants) -> Self {
        Gate { plugin, grants, refused: Vec::new() }
    }

    /// Allows the call if any of `needed` is granted; else records and returns the refusal.
    pub fn check(&mut self, needed: &[Capability], action: &'static str) -> Result<(), Refusal> {
        if needed.iter().any(|c| self.grants.has(*c)) {
            return Ok(());
        }
        let refusal = Refusal { plugin: self.plugin.clone(), capability: needed[0], action };
        // Info, not a warning: plugins probe optional capabilities (a model) and fall back by
        // design; the step record names every refusal either way.
        tracing::info!(plugin = %self.plugin, capability = %refusal.capability, "{refusal}");
        if !self.refused.contains(&refusal) {
            self.refused.push(refusal.clone());
        }
        Err(refusal)
    }

    pub fn plugin(&self) -> &str {
        &self.plugin
    }

    /// Refusals recorded during the call, first of each kind.
    pub fn refused(&self) -> &[Refusal] {
        &self.refused
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gate_records_each_refusal_once_and_names_plugin_and_capability() {
        let mut gate = Gate::new("p@1".into(), Grants::new([Capability::Log]));
        assert!(gate.check(&[Capability::Log], "log").is_ok());
        let refusal = gate.check(&[Capability::Model], "call a model").unwrap_err();
        assert_eq!(refusal.to_string(), "plugin p@1 may not call a model: the policy does not grant it `model`");
        gate.check(&[Capability::Model], "call a model").unwrap_err();
        assert_eq!(gate.refused().len(), 1);
    }
}
