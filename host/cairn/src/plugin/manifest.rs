//! The plugin manifest (`cairn-plugin.toml`): strict, so a typo is an error, not a default.

use serde::{Deserialize, Serialize};

use crate::engine::World;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub name: String,
    pub kind: World,
    pub version: String,
    #[serde(default)]
    pub description: String,
    /// Capability interfaces the component may import and the policy must grant:
    /// `log`, `tokens`, `model`, `archive`.
    #[serde(default)]
    pub capabilities: Vec<String>,
    /// Interfaces it may import that the policy may leave ungranted; calls then answer
    /// `denied` and the plugin falls back (e.g. no model → deterministic extraction).
    #[serde(default)]
    pub optional_capabilities: Vec<String>,
    /// The JSON Schema of the plugin's config (a policy step's `config` table, as the JSON the
    /// plugin receives). When present, every step's config is checked against it when the
    /// policy loads, so a typo'd key or a wrong type is an error naming the policy's line, not
    /// a failed step at run time. Written as a TOML table (`[config_schema]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_schema: Option<serde_json::Value>,
    /// Hex sha256 of the component; checked when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

impl Manifest {
    /// Parses and validates; `source` names the file in errors.
    pub fn parse(text: &str, source: &str) -> anyhow::Result<Self> {
        let manifest: Manifest = toml::from_str(text).map_err(|e| anyhow::anyhow!("{source}: {e}"))?;
        let name_ok = !manifest.name.is_empty() && manifest.name.len() <= 64 && manifest.name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !name_ok {
            anyhow::bail!("{source}: plugin name {:?} must be 1-64 characters of a-z 0-9 -", manifest.name);
        }
        for capability in manifest.capabilities.iter().chain(&manifest.optional_capabilities) {
            if !["log", "tokens", "model", "archive"].contains(&capability.as_str()) {
                anyhow::bail!("{source}: unknown capability {capability:?} (known: log, tokens, model, archive)");
            }
        }
        if let Some(schema) = &manifest.config_schema {
            if !schema.is_object() {
                anyhow::bail!("{source}: config_schema must be a table (a JSON Schema object), not {schema}");
            }
            jsonschema::validator_for(schema).map_err(|e| anyhow::anyhow!("{source}: config_schema is not a valid JSON Schema: {e}"))?;
        }
        Ok(manifest)
    }

    /// The config schema, compiled (`None` when the manifest has none). [`Manifest::parse`]
    /// has already checked that it compiles.
    pub fn config_validator(&self) -> Option<jsonschema::Validator> {
        self.config_schema.as_ref().and_then(|schema| jsonschema::validator_for(schema).ok())
    }

    /// Whether the component may import `interface` at all.
    pub fn declares(&self, interface: &str) -> bool {
        self.capabilities.iter().chain(&self.optional_capabilities).any(|c| c == interface)
    }

    pub fn is_optional(&self, interface: &str) -> bool {
        self.optional_capabilities.iter().any(|c| c == interface)
    }

    pub fn label(&self) -> String {
        format!("{}@{}", self.name, self.version)
    }
}
