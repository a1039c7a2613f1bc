//! Conversation keys, archive ids and artifact URIs: what parses stays inside its folder, and
//! a key derived from any text is valid.
#![no_main]

use cairn::storage::{ArchiveId, ArtifactUri, ConversationKey};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(key) = ConversationKey::parse(&text) {
        assert!(!key.as_str().contains('/') && key.as_str() != "." && key.as_str() != "..");
    }
    let _ = text.parse::<ArchiveId>();
    if let Ok(uri) = text.parse::<ArtifactUri>() {
        assert!(uri.archive_id.parse::<ArchiveId>().is_ok());
    }
    let derived = ConversationKey::derive(&text);
    assert!(ConversationKey::parse(derived.as_str()).is_ok(), "{derived}");
});
