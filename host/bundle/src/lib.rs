//! The plugins built from `plugins/` and embedded in the binary.

/// A plugin's manifest (TOML) and its Wasm component.
pub struct BundledPlugin {
    pub manifest: &'static str,
    pub component: &'static [u8],
}

include!(concat!(env!("OUT_DIR"), "/bundle.rs"));
