//! Shared CLI setup: a host with the bundled plugins, plugin directories, homes, policies.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use cairn::{Cairn, Policy};

/// A host with every bundled plugin, then those in `plugin_dirs` (which may override them).
pub fn host(plugin_dirs: &[PathBuf]) -> Result<Cairn> {
    let mut cairn = Cairn::new()?;
    for bundled in cairn_bundle::BUNDLED {
        cairn.add_plugin(bundled.manifest, bundled.component, "bundled")?;
    }
    for dir in plugin_dirs {
        cairn.load_plugin_dir(dir)?;
    }
    Ok(cairn)
}

pub fn policy(path: Option<&Path>) -> Result<Policy> {
    match path {
        None => Ok(Policy::default_policy()),
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading policy {}", path.display()))?;
            Policy::parse(&text, &path.display().to_string())
        }
    }
}

/// `--home`, else `$CAIRN_HOME`, else `$XDG_DATA_HOME/cairn`, else `~/.local/share/cairn`.
pub fn home_path(home: Option<PathBuf>) -> PathBuf {
    home.or_else(|| std::env::var_os("CAIRN_HOME").map(PathBuf::from))
        .or_else(|| std::env::var_os("XDG_DATA_HOME").map(|d| PathBuf::from(d).join("cairn")))
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share/cairn")))
        .unwrap_or_else(|| PathBuf::from(".cairn"))
}
