//! Ids that name things on disk. Each has one fixed format, checked before any use, so no
//! input string ever becomes a path.

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};

/// An id or URI that does not have its fixed format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct IdError(String);

/// A harness's stable id for one conversation: 1–64 chars of `[A-Za-z0-9._-]`, starting
/// with a letter or digit.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConversationKey(String);

impl ConversationKey {
    pub fn parse(key: &str) -> Result<Self, IdError> {
        checked_name("conversation key", key).map(ConversationKey)
    }

    /// A valid key derived from arbitrary text (e.g. a file name): invalid characters become `-`.
    pub fn derive(text: &str) -> Self {
        let mut key: String = text.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '-' }).take(64).collect();
        if !key.starts_with(|c: char| c.is_ascii_alphanumeric()) {
            key.insert(0, 'c');
            key.truncate(64);
        }
        ConversationKey(key)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// 1-64 chars of `[A-Za-z0-9._-]`, starting with a letter or digit, no `..`: safe as a file name.
fn checked_name(what: &str, name: &str) -> Result<String, IdError> {
    let valid = (1..=64).contains(&name.len())
        && name.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
        && !name.contains("..");
    if valid {
        Ok(name.to_string())
    } else {
        Err(IdError(format!("invalid {what} {}: use 1-64 characters of A-Z a-z 0-9 . _ -, starting with a letter or digit", crate::echo::input(name))))
    }
}

/// Whose conversations: every key is resolved inside one tenant, so a caller scoped to one
/// tenant can never name another's. A home used by one developer has only the default.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tenant(String);

impl Tenant {
    pub const DEFAULT: &'static str = "default";

    pub fn parse(name: &str) -> Result<Self, IdError> {
        checked_name("tenant", name).map(Tenant)
    }

    pub fn default_tenant() -> Self {
        Tenant(Self::DEFAULT.to_string())
    }

    pub fn is_default(&self) -> bool {
        self.0 == Self::DEFAULT
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for Tenant {
    fn default() -> Self {
        Tenant::default_tenant()
    }
}

impl fmt::Display for Tenant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for ConversationKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `a-` followed by 16 lowercase hex digits; unique per compaction attempt.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ArchiveId(String);

impl ArchiveId {
    pub fn generate(conversation: &ConversationKey) -> Self {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
        let mut hash = Sha256::new();
        hash.update(conversation.as_str());
        hash.update(nanos.to_le_bytes());
        hash.update(std::process::id().to_le_bytes());
        hash.update(COUNTER.fetch_add(1, Ordering::Relaxed).to_le_bytes());
        let digest = hash.finalize();
        ArchiveId(format!("a-{}", hex(&digest[..8])))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for ArchiveId {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, IdError> {
        let hex_part = s.strip_prefix("a-").unwrap_or("");
        if hex_part.len() == 16 && hex_part.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            Ok(ArchiveId(s.to_string()))
        } else {
            Err(IdError(format!("invalid archive id {}: expected `a-` and 16 lowercase hex digits", crate::echo::input(s))))
        }
    }
}

impl TryFrom<String> for ArchiveId {
    type Error = IdError;
    fn try_from(s: String) -> Result<Self, IdError> {
        s.parse()
    }
}

impl From<ArchiveId> for String {
    fn from(id: ArchiveId) -> String {
        id.0
    }
}

impl fmt::Display for ArchiveId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `artifact://<archive-id>/<n>`, `n` in 1..=1,000,000 without leading zeros.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactUri {
    pub archive_id: String,
    pub index: u32,
}

pub const MAX_ARTIFACTS_PER_ARCHIVE: u32 = 1_000_000;

impl ArtifactUri {
    /// The URIs of an archive's first `count` artifacts, as its compaction names them.
    pub fn numbered(archive_id: &ArchiveId, count: usize) -> Vec<String> {
        (1..=count).map(|index| ArtifactUri { archive_id: archive_id.to_string(), index: index as u32 }.to_string()).collect()
    }
}

impl FromStr for ArtifactUri {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, IdError> {
        let bad = || IdError(format!("invalid artifact URI {}: expected artifact://<archive-id>/<n>", crate::echo::input(s)));
        let rest = s.strip_prefix("artifact://").ok_or_else(bad)?;
        let (archive, n) = rest.split_once('/').ok_or_else(bad)?;
        let archive_id: ArchiveId = archive.parse()?;
        let canonical = !n.is_empty() && n.len() <= 7 && n.bytes().all(|b| b.is_ascii_digit()) && !n.starts_with('0');
        let index: u32 = if canonical { n.parse().map_err(|_| bad())? } else { return Err(bad()) };
        if index > MAX_ARTIFACTS_PER_ARCHIVE {
            return Err(bad());
        }
        Ok(ArtifactUri { archive_id: archive_id.0, index })
    }
}

impl fmt::Display for ArtifactUri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "artifact://{}/{}", self.archive_id, self.index)
    }
}

/// `s-` and 16 hex digits: the initial session of a conversation (salt `initial`, stable)
/// or a fresh one for a handover's target (salt = the new archive id).
pub fn session_id(conversation: &str, salt: &str) -> String {
    let digest = Sha256::digest(format!("{conversation}\0{salt}"));
    format!("s-{}", hex(&digest[..8]))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversation_keys_reject_paths_and_lookalikes() {
        for bad in ["", "..", "../x", "a/b", "/etc", "a\0b", ".hidden", "-x", "a..b", "ａbc", "a b", &"x".repeat(65)] {
            assert!(ConversationKey::parse(bad).is_err(), "{bad:?} should be rejected");
        }
        assert!(ConversationKey::parse("pi-mono_large.session-1").is_ok());
    }

    #[test]
    fn derived_keys_are_always_valid() {
        for text in ["../../etc/passwd", ".x", "ünïcode name", "", "a b c"] {
            let key = ConversationKey::derive(text);
            assert!(ConversationKey::parse(key.as_str()).is_ok(), "{text:?} -> {key}");
        }
    }

    #[test]
    fn archive_ids_have_one_format() {
        let id = ArchiveId::generate(&ConversationKey::parse("c").unwrap());
        assert!(id.as_str().parse::<ArchiveId>().is_ok());
        assert_ne!(id, ArchiveId::generate(&ConversationKey::parse("c").unwrap()));
        for bad in ["a-../../../etc", "a-0123456789ABCDEF", "a-0123", "b-0123456789abcdef", "a-0123456789abcdef/"] {
            assert!(bad.parse::<ArchiveId>().is_err(), "{bad}");
        }
    }

    #[test]
    fn artifact_uris_parse_strictly() {
        let uri: ArtifactUri = "artifact://a-0123456789abcdef/12".parse().unwrap();
        assert_eq!(uri.index, 12);
        assert_eq!(uri.to_string(), "artifact://a-0123456789abcdef/12");
        for bad in [
            "artifact://a-0123456789abcdef/0",
            "artifact://a-0123456789abcdef/012",
            "artifact://a-0123456789abcdef/1/2",
            "artifact://a-0123456789abcdef/../1",
            "artifact://../a-0123456789abcdef/1",
            "artifact://a-0123456789abcdef/99999999",
            "file:///etc/passwd",
            "artifact://a-0123456789abcdef/+1",
        ] {
            assert!(bad.parse::<ArtifactUri>().is_err(), "{bad}");
        }
    }
}
