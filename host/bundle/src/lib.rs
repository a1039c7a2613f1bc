//! The plugins built from `plugins/` and embedded in the binary.

/// A plugin's manifest (TOML) and its Wasm component.
pub struct BundledPlugin {
    pub manifest: &'static str,
    pub component: &'static [u8],
    /// The component's hex SHA-256, computed by the build from the bytes it embeds: a host
    /// starting up need not hash them again (that was a sixth of its start-up).
    pub sha256: &'static str,
}

include!(concat!(env!("OUT_DIR"), "/bundle.rs"));
