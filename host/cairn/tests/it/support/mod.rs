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

/// xorshift64*: deterministic, dependency-free, so a failing random case reproduces.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}
