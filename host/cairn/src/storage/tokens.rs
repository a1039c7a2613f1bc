//! Bearer tokens for `cairn serve --http`, each scoped to one tenant. Only a SHA-256 of each
//! secret is stored: a copy of the home (or the database) does not hand out access. A token's
//! scope says whether it may also call the tools that act on the whole node (reload the
//! policy, list the plugins): only an operator's may.

use std::sync::Arc;

use anyhow::{bail, Result};
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::backend::Backend;
use super::ids::Tenant;
pub use super::stored_token::{StoredToken, TokenScope};

const PREFIX: &str = "cairn_";

/// Who a verified bearer token speaks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    pub tenant: Tenant,
    pub scope: TokenScope,
}

/// What `cairn tokens list` shows.
#[derive(Debug, Clone, Serialize)]
pub struct TokenInfo {
    pub id: String,
    pub tenant: String,
    pub name: String,
    pub scope: TokenScope,
    pub created_at: u64,
    pub revoked: bool,
}

impl From<&StoredToken> for TokenInfo {
    fn from(t: &StoredToken) -> Self {
        TokenInfo { id: t.id.clone(), tenant: t.tenant.clone(), name: t.name.clone(), scope: t.scope, created_at: t.created_at, revoked: t.revoked }
    }
}

/// The token store of one home (all tenants).
#[derive(Clone)]
pub struct Tokens {
    pub(super) backend: Arc<dyn Backend>,
}

fn digest(secret: &str) -> String {
    Sha256::digest(secret.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

impl Tokens {
    /// A new token for `tenant` with `scope`; the secret is returned once and never stored.
    pub fn create(&self, tenant: &Tenant, name: &str, scope: TokenScope) -> Result<(TokenInfo, String)> {
        let mut random = [0u8; 32];
        getrandom::fill(&mut random).map_err(|e| anyhow::anyhow!("no randomness for a token: {e}"))?;
        let hex: String = random.iter().map(|b| format!("{b:02x}")).collect();
        let secret = format!("{PREFIX}{hex}");
        let token = StoredToken {
            id: format!("t-{}", &digest(&secret)[..12]),
            tenant: tenant.to_string(),
            name: name.to_string(),
            sha256: digest(&secret),
            created_at: crate::record::now_millis(),
            revoked: false,
            scope,
        };
        self.backend.add_token(&token)?;
        Ok((TokenInfo::from(&token), secret))
    }

    pub fn list(&self) -> Result<Vec<TokenInfo>> {
        Ok(self.backend.tokens()?.iter().map(TokenInfo::from).collect())
    }

    pub fn revoke(&self, id: &str) -> Result<()> {
        if !self.backend.revoke_token(id)? {
            bail!("no token {id:?} in {}", self.backend.location());
        }
        Ok(())
    }

    /// The tenant and scope a secret belongs to; `None` for an unknown or revoked one.
    pub fn verify(&self, secret: &str) -> Result<Option<Credential>> {
        if !secret.starts_with(PREFIX) {
            return Ok(None);
        }
        let found = self.backend.token(&digest(secret))?.filter(|t| !t.revoked);
        Ok(found.and_then(|t| Some(Credential { tenant: Tenant::parse(&t.tenant).ok()?, scope: t.scope })))
    }
}
