//! The plugins a host knows, by name: bundled ones and those found in plugin directories.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context, Result};

use super::{Manifest, Plugin};
use crate::chain::{LAST_RESORT, SEED_STEP};
use crate::engine::Engine;
use crate::wit_edge::Linkers;

pub struct Registry {
    engine: Engine,
    /// Built once: every plugin of every contract version links against these.
    linkers: Arc<Linkers>,
    plugins: BTreeMap<String, Arc<Plugin>>,
}

impl Registry {
    pub fn new(engine: Engine) -> Result<Self> {
        let linkers = Arc::new(Linkers::new(engine.wasmtime())?);
        Ok(Registry { engine, linkers, plugins: BTreeMap::new() })
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Adds a plugin from its manifest text and component bytes (whose hex SHA-256 is `sha256`
    /// when the caller knows it, else computed).
    pub fn add(&mut self, manifest: &str, component: &[u8], sha256: Option<&str>, source: &str) -> Result<Arc<Plugin>> {
        let manifest = Manifest::parse(manifest, source)?;
        if [LAST_RESORT, SEED_STEP].contains(&manifest.name.as_str()) {
            bail!("{source}: the name `{}` is reserved for the host's own steps", manifest.name);
        }
        let plugin = Arc::new(Plugin::load(&self.engine, &self.linkers, manifest, component, sha256, source.to_string())?);
        self.plugins.insert(plugin.manifest.name.clone(), plugin.clone());
        Ok(plugin)
    }

    /// Loads every `<name>.wasm` with a `<name>.toml` manifest beside it. A later plugin with
    /// the same name replaces an earlier one (so a directory can override a bundled plugin).
    pub fn load_dir(&mut self, dir: &Path) -> Result<usize> {
        let mut loaded = 0;
        let mut paths: Vec<_> = std::fs::read_dir(dir)
            .with_context(|| format!("reading plugin directory {}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "wasm"))
            .collect();
        paths.sort();
        for wasm in paths {
            let manifest_path = wasm.with_extension("toml");
            let manifest = read_regular(&manifest_path, MAX_MANIFEST_BYTES).with_context(|| format!("{}: every plugin needs a manifest at {}", wasm.display(), manifest_path.display()))?;
            let manifest = String::from_utf8(manifest).with_context(|| format!("{}: not UTF-8", manifest_path.display()))?;
            let bytes = read_regular(&wasm, MAX_COMPONENT_BYTES).with_context(|| format!("reading {}", wasm.display()))?;
            self.add(&manifest, &bytes, None, &wasm.display().to_string())?;
            loaded += 1;
        }
        Ok(loaded)
    }

    pub fn get(&self, name: &str) -> Option<&Arc<Plugin>> {
        self.plugins.get(name)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<Plugin>> {
        self.plugins.values()
    }
}

/// A plugin directory's files are read only if they are regular files (not a FIFO, a device
/// or a link to one) and at most this large.
const MAX_COMPONENT_BYTES: u64 = 64 << 20;
const MAX_MANIFEST_BYTES: u64 = 64 << 10;

fn read_regular(path: &Path, max: u64) -> Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    // Opened without blocking, so a FIFO cannot hang the host before it is refused.
    let file = std::fs::OpenOptions::new().read(true).custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32).open(path)?;
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        bail!("{} is not a regular file", path.display());
    }
    if metadata.len() > max {
        bail!("{} is {} bytes; plugin files may be at most {max}", path.display(), metadata.len());
    }
    let mut bytes = Vec::new();
    file.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        bail!("{} grew past {max} bytes while being read", path.display());
    }
    Ok(bytes)
}
