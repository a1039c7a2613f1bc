//! Compiled code cached on disk, so a plugin is compiled once per machine, not once per
//! process: a Python or JS component takes seconds to compile and milliseconds to load.
//!
//! An entry is keyed by the component's sha256 and the engine's
//! `precompile_compatibility_hash` (wasmtime version, target, settings), and holds a CRC-32 of
//! the compiled code followed by the code. The checksum is verified before wasmtime is asked
//! to load it, so a corrupt, truncated or half-written entry is a miss that is rebuilt —
//! never a crash and never code run unchecked. Entries are written atomically. The directory
//! is created private to the user: whoever can write it can run code in the host, so the
//! checksum guards against damage, not against an attacker — which is why it is a CRC (~0.5 ms
//! for the bundled plugins' 5.7 MB) and not the SHA-256 it was (a quarter of start-up). Every new
//! entry is a component nobody may load again (each build of a plugin has a new hash), so the
//! cache keeps to [`MAX_CACHE_BYTES`], dropping the entries used least recently.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use anyhow::Result;
use cap_std::fs::Dir;
use wasmtime::component::Component;

/// The CRC-32 of the code, little-endian, heads an entry.
const CHECKSUM_BYTES: usize = 4;
/// The entries' layout, in every key: an entry another layout wrote is never read as this one.
const ENTRY_LAYOUT: u32 = 2;
/// The cache's size after a new entry is written; a load marks an entry used (its mtime).
pub const MAX_CACHE_BYTES: u64 = 1 << 30;

#[derive(Clone)]
pub struct CodeCache {
    dir: PathBuf,
    /// The engine's compatibility, in every key.
    engine_key: u64,
    max_bytes: u64,
}

/// Where a component came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compiled {
    Fresh,
    FromCache,
}

impl CodeCache {
    /// `$CAIRN_CACHE_DIR`, else `$XDG_CACHE_HOME/cairn`, else `~/.cache/cairn`; none when
    /// `CAIRN_CACHE_DIR` is empty or no home is known.
    pub fn default_dir() -> Option<PathBuf> {
        match std::env::var_os("CAIRN_CACHE_DIR") {
            Some(dir) if dir.is_empty() => None,
            Some(dir) => Some(PathBuf::from(dir)),
            None => std::env::var_os("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("cairn")).or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/cairn"))),
        }
    }

    pub fn new(dir: PathBuf, engine: &wasmtime::Engine) -> Self {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (ENTRY_LAYOUT, engine.precompile_compatibility_hash()).hash(&mut hasher);
        CodeCache { dir, engine_key: hasher.finish(), max_bytes: MAX_CACHE_BYTES }
    }

    /// The compiled component whose bytes hash to `sha256` (hex): loaded from a valid entry,
    /// else compiled (and stored; a cache that cannot be written only costs the next start its
    /// compile).
    pub fn component(&self, engine: &wasmtime::Engine, bytes: &[u8], sha256: &str) -> wasmtime::Result<(Component, Compiled)> {
        let name = self.entry_name(sha256);
        if let Some(component) = self.load(engine, &name) {
            return Ok((component, Compiled::FromCache));
        }
        let component = Component::new(engine, bytes)?;
        match self.store(&name, &component) {
            Ok(()) => self.sweep(&name),
            Err(e) => tracing::warn!(cache = %self.dir.display(), "could not cache compiled code: {e:#}"),
        }
        Ok((component, Compiled::Fresh))
    }

    /// Whether the cache holds a valid entry for the component whose bytes hash to `sha256`
    /// (hex), compiled by an engine like this one: loading it takes milliseconds, not a compile.
    pub fn holds(&self, sha256: &str) -> bool {
        self.verified_entry(&self.entry_name(sha256)).is_some()
    }

    fn entry_name(&self, sha256: &str) -> String {
        format!("{sha256}-{:016x}.cwasm", self.engine_key)
    }

    /// The entry `name` (checksum, then code) if it is there and its checksum holds; a corrupt
    /// one is said in the log.
    fn verified_entry(&self, name: &str) -> Option<Vec<u8>> {
        let entry = std::fs::read(self.dir.join(name)).ok()?;
        if entry.len() < CHECKSUM_BYTES || crc32fast::hash(&entry[CHECKSUM_BYTES..]).to_le_bytes() != entry[..CHECKSUM_BYTES] {
            tracing::warn!(entry = %self.dir.join(name).display(), "corrupt compiled-code cache entry; recompiling");
            return None;
        }
        Some(entry)
    }

    fn load(&self, engine: &wasmtime::Engine, name: &str) -> Option<Component> {
        let entry = self.verified_entry(name)?;
        // SAFETY: the bytes are what `Component::serialize` wrote for an engine with the same
        // compatibility hash (it is in the name), verified against their checksum; wasmtime
        // checks the header and version again.
        match unsafe { Component::deserialize(engine, &entry[CHECKSUM_BYTES..]) } {
            Ok(component) => {
                // Used now: the sweep drops entries used least recently first.
                let _ = std::fs::File::options().write(true).open(self.dir.join(name)).and_then(|f| f.set_modified(std::time::SystemTime::now()));
                Some(component)
            }
            Err(e) => {
                tracing::warn!(entry = %self.dir.join(name).display(), "unusable compiled-code cache entry ({e}); recompiling");
                None
            }
        }
    }

    fn store(&self, name: &str, component: &Component) -> Result<()> {
        create_private_dir(&self.dir)?;
        let code = component.serialize()?;
        let mut entry = crc32fast::hash(&code).to_le_bytes().to_vec();
        entry.extend_from_slice(&code);
        let dir = Dir::open_ambient_dir(&self.dir, cap_std::ambient_authority())?;
        crate::storage::files::write_atomically(&dir, name, &entry)?;
        Ok(())
    }
}

impl CodeCache {
    /// Drops the entries used least recently (never `kept`, just written) until the cache
    /// holds at most `max_bytes`. Another process that loses an entry it was about to load
    /// only compiles it again.
    fn sweep(&self, kept: &str) {
        let Ok(listing) = std::fs::read_dir(&self.dir) else { return };
        let mut entries: Vec<(std::time::SystemTime, u64, PathBuf)> = listing
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_str().is_some_and(|n| n.ends_with(".cwasm") && n != kept))
            .filter_map(|e| e.metadata().ok().map(|m| (m.modified().unwrap_or(std::time::UNIX_EPOCH), m.len(), e.path())))
            .collect();
        let kept_bytes = std::fs::metadata(self.dir.join(kept)).map_or(0, |m| m.len());
        let mut total = kept_bytes + entries.iter().map(|(_, len, _)| len).sum::<u64>();
        entries.sort();
        for (_, len, path) in entries {
            if total <= self.max_bytes {
                break;
            }
            if std::fs::remove_file(&path).is_ok() {
                tracing::debug!(entry = %path.display(), "dropped a compiled-code cache entry used least recently");
                total -= len;
            }
        }
    }
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    fn engine() -> wasmtime::Engine {
        let mut config = wasmtime::Config::new();
        config.wasm_component_model(true);
        wasmtime::Engine::new(&config).unwrap()
    }

    fn component_bytes() -> &'static [u8] {
        cairn_bundle::BUNDLED.iter().find(|p| p.manifest.contains("name = \"trigger-reserve\"")).unwrap().component
    }

    fn load(cache: &CodeCache, engine: &wasmtime::Engine) -> Compiled {
        let sha = Sha256::digest(component_bytes()).iter().map(|b| format!("{b:02x}")).collect::<String>();
        cache.component(engine, component_bytes(), &sha).unwrap().1
    }

    #[test]
    fn a_second_load_comes_from_the_cache_and_a_damaged_entry_is_rebuilt() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine();
        let cache = CodeCache::new(dir.path().join("cache"), &engine);
        assert_eq!(load(&cache, &engine), Compiled::Fresh);
        assert_eq!(load(&cache, &engine), Compiled::FromCache);

        let entry = std::fs::read_dir(dir.path().join("cache")).unwrap().next().unwrap().unwrap().path();
        let good = std::fs::read(&entry).unwrap();
        for damage in [
            good[..good.len() / 2].to_vec(),
            {
                let mut b = good.clone();
                let at = b.len() - 100;
                b[at] ^= 0xff;
                b
            },
            Vec::new(),
        ] {
            std::fs::write(&entry, damage).unwrap();
            assert_eq!(load(&cache, &engine), Compiled::Fresh, "a damaged entry is a miss");
            assert_eq!(std::fs::read(&entry).unwrap(), good, "and is rebuilt");
        }
        assert_eq!(std::fs::read_dir(dir.path().join("cache")).unwrap().count(), 1, "no temporaries left behind");
    }

    /// Past its size the cache drops what was used least recently, never what was just
    /// written or just loaded.
    #[test]
    fn the_cache_keeps_to_its_size_dropping_what_was_used_least_recently() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine();
        let plugin = |name: &str| cairn_bundle::BUNDLED.iter().find(|p| p.manifest.contains(&format!("name = \"{name}\""))).unwrap().component;
        let load = |cache: &CodeCache, bytes: &[u8]| {
            let sha = Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect::<String>();
            cache.component(&engine, bytes, &sha).unwrap().1
        };
        let mut cache = CodeCache::new(dir.path().to_path_buf(), &engine);
        let (a, b, c) = (plugin("trigger-reserve"), plugin("trigger-default"), plugin("commit-turn-boundary"));
        load(&cache, a);
        std::thread::sleep(std::time::Duration::from_millis(20));
        load(&cache, b);
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(load(&cache, a), Compiled::FromCache, "a is used again: b is now the least recent");
        let size: u64 = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).sum();
        // Room for what is there now, not for one more entry.
        cache.max_bytes = size;
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(load(&cache, c), Compiled::Fresh);
        assert_eq!(load(&cache, a), Compiled::FromCache, "recently used: kept");
        assert_eq!(load(&cache, c), Compiled::FromCache, "just written: kept");
        assert_eq!(load(&cache, b), Compiled::Fresh, "least recently used: dropped");
    }

    #[test]
    fn the_cache_holds_a_component_once_it_is_compiled_and_not_when_damaged() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine();
        let cache = CodeCache::new(dir.path().to_path_buf(), &engine);
        let sha = Sha256::digest(component_bytes()).iter().map(|b| format!("{b:02x}")).collect::<String>();
        assert!(!cache.holds(&sha), "an empty cache holds nothing");
        load(&cache, &engine);
        assert!(cache.holds(&sha));
        let entry = std::fs::read_dir(dir.path()).unwrap().next().unwrap().unwrap().path();
        let good = std::fs::read(&entry).unwrap();
        std::fs::write(&entry, &good[..good.len() / 2]).unwrap();
        assert!(!cache.holds(&sha), "a truncated entry would be compiled again");
    }

    #[test]
    fn another_engine_configuration_never_loads_this_code() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine();
        load(&CodeCache::new(dir.path().to_path_buf(), &engine), &engine);
        let mut config = wasmtime::Config::new();
        config.wasm_component_model(true).epoch_interruption(true);
        let other = wasmtime::Engine::new(&config).unwrap();
        let cache = CodeCache::new(dir.path().to_path_buf(), &other);
        assert_eq!(load(&cache, &other), Compiled::Fresh);
    }
}
