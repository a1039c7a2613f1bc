//! The agent's `session_history` tool: any JSON the model sends gets an answer object.
#![no_main]

use std::sync::OnceLock;

use cairn::storage::{ConversationKey, Home};
use libfuzzer_sys::fuzz_target;

fn home() -> &'static (tempfile::TempDir, Home, ConversationKey) {
    static HOME: OnceLock<(tempfile::TempDir, Home, ConversationKey)> = OnceLock::new();
    HOME.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::open(dir.path()).unwrap();
        let key = ConversationKey::parse("fuzz").unwrap();
        drop(home.conversation(&key).unwrap());
        (dir, home, key)
    })
}

fuzz_target!(|data: &[u8]| {
    let (_, home, key) = home();
    let answer = cairn::recall::execute_json(home, key, &String::from_utf8_lossy(data));
    assert!(answer.is_object());
});
