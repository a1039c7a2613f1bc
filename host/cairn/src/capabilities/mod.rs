//! Host capabilities plugins may import, one module each. A policy grants them per plugin;
//! a component importing an interface it was not granted is refused at load time, and each
//! call checks its grant again (defence in depth).

mod archive;
mod log;
mod model;
mod tokens;

pub use archive::ArchiveScope;
pub use log::LogBudget;

use std::collections::BTreeSet;
use std::fmt;

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
            "types" => return None,
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

    pub fn can_read_archive(&self) -> bool {
        self.allows_import(Interface::Archive)
    }
}

impl crate::wit_edge::types::Host for crate::engine::CallState {}
