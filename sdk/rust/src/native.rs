//! The host, when a plugin's code runs natively instead of in Wasm: a benchmark comparing the
//! two builds of one plugin, or a test that needs token counts. The embedding program installs
//! a [`Host`] once; the SDK's capability helpers ([`crate::count_tokens`],
//! [`crate::store_artifact`], [`crate::log_info`]…) call it. In Wasm they call the host's
//! imports and this module does not exist.

use std::sync::OnceLock;

/// What the SDK's helpers need from a host.
pub trait Host: Send + Sync {
    fn count_tokens(&self, text: &str) -> u32;
    /// Stores `content` and returns its `artifact://` URI.
    fn put_artifact(&self, content: &str) -> Result<String, String>;
    fn log(&self, level: crate::host::log::Level, message: &str);
}

static HOST: OnceLock<Box<dyn Host>> = OnceLock::new();

/// Installs the native host; the first one stays.
pub fn install(host: Box<dyn Host>) {
    let _ = HOST.set(host);
}

pub(crate) fn host() -> &'static dyn Host {
    HOST.get().map(|h| h.as_ref()).expect("a plugin ran natively before cairn_sdk::native::install")
}
