//! A bearer token as the storage keeps it (never its secret) and the scope it grants: the
//! records both the backends and the token store (`tokens`) speak of.

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

/// What a token may reach besides its tenant's conversations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TokenScope {
    /// Its tenant's conversations only.
    #[default]
    Tenant,
    /// Also the node-wide tools (policy reload, plugin list), which affect every tenant.
    Operator,
}

impl TokenScope {
    pub fn as_str(self) -> &'static str {
        match self {
            TokenScope::Tenant => "tenant",
            TokenScope::Operator => "operator",
        }
    }

    /// The scope named `text` as stored ("tenant", "operator").
    pub fn parse(text: &str) -> Result<Self> {
        match text {
            "tenant" => Ok(TokenScope::Tenant),
            "operator" => Ok(TokenScope::Operator),
            other => bail!("unknown token scope {other:?}: expected tenant or operator"),
        }
    }
}

impl std::fmt::Display for TokenScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A token as stored: never its secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoredToken {
    pub id: String,
    pub tenant: String,
    pub name: String,
    /// Hex SHA-256 of the secret.
    pub sha256: String,
    pub created_at: u64,
    pub revoked: bool,
    /// Absent in token lists written before scopes existed: those tokens are tenant tokens.
    #[serde(default)]
    pub scope: TokenScope,
}
