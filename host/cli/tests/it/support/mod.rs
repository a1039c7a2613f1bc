//! Shared by the CLI's integration tests.

pub mod mcp;
pub mod node_packages;
pub mod python_wheel;

use std::path::{Path, PathBuf};

/// `../shared/transcripts/<dir>`. Tests using it carry
/// `#[cfg_attr(no_shared_transcripts, ignore = ...)]` (see build.rs), so outside CI without
/// the files they are reported as ignored; when they run, the files must be there.
pub fn shared(dir: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/transcripts").join(dir);
    assert!(path.is_dir(), "this test needs the shared transcripts at {}", path.display());
    path
}

/// The compiled-code cache the other tests warm (a temporary HOME would compile every plugin again).
pub fn shared_cache() -> PathBuf {
    std::env::var_os("CAIRN_CACHE_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("cairn")))
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/cairn"))
}

/// `<dir>/plugins` holding the misbehave fixture as a plugin file.
pub fn misbehave_plugin_dir(dir: &Path) -> PathBuf {
    let plugins = dir.join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    let fixture = cairn_bundle::FIXTURES.iter().find(|p| p.manifest.contains("name = \"misbehave\"")).unwrap();
    std::fs::write(plugins.join("misbehave.wasm"), fixture.component).unwrap();
    std::fs::write(plugins.join("misbehave.toml"), fixture.manifest).unwrap();
    plugins
}

/// The library's loopback HTTP server, for a fake model endpoint.
#[path = "../../../../cairn/tests/it/support/loopback.rs"]
#[allow(dead_code)]
pub mod loopback;
