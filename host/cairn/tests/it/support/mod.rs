//! Shared by the library's integration tests: one way to build a host with the bundled
//! plugins (and the misbehaving fixtures), and to check a policy against it.
#![allow(dead_code)]

pub mod loopback;

use cairn::{Cairn, CheckedPolicy};

/// A host with every bundled plugin and every test fixture.
pub fn host() -> Cairn {
    let mut cairn = Cairn::new().unwrap();
    for plugin in cairn_bundle::BUNDLED.iter().chain(cairn_bundle::FIXTURES) {
        cairn.add_plugin(plugin.manifest, plugin.component, "bundled").unwrap();
    }
    cairn
}

/// `text` checked against `cairn`'s plugins; panics with the policy error.
pub fn policy(cairn: &Cairn, text: &str) -> CheckedPolicy {
    cairn.load_policy(text, "test-policy.toml").unwrap_or_else(|e| panic!("{e:#}"))
}
