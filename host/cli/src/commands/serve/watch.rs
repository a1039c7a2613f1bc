//! Live policy swaps: the policy file and the plugin directories are watched (the `notify`
//! crate: inotify here, the native API elsewhere). Editors save by writing a temporary file and
//! renaming it, so the policy's folder is watched and events are matched by name; a burst of
//! events is settled for a moment before one reload.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use notify::event::ModifyKind;
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};

use super::Serve;

/// How long a burst of file events settles before the reload.
const SETTLE: Duration = Duration::from_millis(200);

/// Starts watching; the returned watcher stops when dropped.
pub fn start(serve: Arc<Serve>) -> Result<RecommendedWatcher> {
    let (events, received) = mpsc::channel();
    let mut watcher = notify::recommended_watcher(events).context("starting the policy watcher")?;
    let policy = serve.policy_path.as_ref().map(|p| absolute(p));
    if let Some(policy) = &policy {
        let folder = policy.parent().unwrap_or(Path::new("/"));
        watcher.watch(folder, RecursiveMode::NonRecursive).with_context(|| format!("watching {}", folder.display()))?;
    }
    let plugin_dirs: Vec<PathBuf> = serve.plugin_dirs.iter().map(|d| absolute(d)).collect();
    for dir in &plugin_dirs {
        watcher.watch(dir, RecursiveMode::NonRecursive).with_context(|| format!("watching {}", dir.display()))?;
    }
    std::thread::Builder::new().name("cairn-policy-watch".into()).spawn(move || {
        let relevant = |path: &Path| -> Option<bool> {
            if plugin_dirs.iter().any(|d| path.parent() == Some(d.as_path())) && path.extension().is_some_and(|x| x == "wasm" || x == "toml") {
                return Some(true);
            }
            (policy.as_deref().is_some_and(|p| p.file_name() == path.file_name() && p.parent() == path.parent())).then_some(false)
        };
        while let Ok(first) = received.recv() {
            let mut plugins = None::<bool>;
            let mut note = |event: notify::Result<notify::Event>| {
                // Only what changes content: reading the policy (as a reload does) must not
                // trigger another reload.
                let writes = |kind: &EventKind| matches!(kind, EventKind::Create(_) | EventKind::Remove(_) | EventKind::Modify(ModifyKind::Data(_) | ModifyKind::Name(_) | ModifyKind::Any));
                if let Ok(event) = event.as_ref().map_err(|_| ()).and_then(|e| if writes(&e.kind) { Ok(e) } else { Err(()) }) {
                    for changed in event.paths.iter().filter_map(|p| relevant(p)) {
                        plugins = Some(plugins.unwrap_or(false) | changed);
                    }
                }
            };
            note(first);
            // Let the burst (write, rename, metadata) settle, then reload once.
            std::thread::sleep(SETTLE);
            while let Ok(more) = received.try_recv() {
                note(more);
            }
            if let Some(plugins) = plugins {
                // A refused policy is logged and noticed by `reload`; the old one keeps running.
                let _ = serve.reload(plugins);
            }
        }
    })?;
    Ok(watcher)
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}
