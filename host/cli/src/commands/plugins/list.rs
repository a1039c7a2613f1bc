//! `cairn plugins list`: what the host can run.

use std::path::PathBuf;

use anyhow::Result;
use serde_json::json;

use crate::setup;

pub fn run(plugin_dir: &[PathBuf], json: bool) -> Result<()> {
    let cairn = setup::host(plugin_dir)?;
    let rows: Vec<_> = cairn
        .plugins()
        .map(|p| {
            json!({
                "name": p.manifest.name,
                "kind": p.manifest.kind.to_string(),
                "version": p.manifest.version,
                "imports": p.imports.iter().map(|i| i.name()).collect::<Vec<_>>(),
                "wasi": p.uses_wasi,
                "cached": p.from_cache,
                "source": p.source,
                "sha256": p.sha256,
                "description": p.manifest.description,
            })
        })
        .collect();
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    println!("{:<22} {:<14} {:<9} {:<22} {:<8} source", "name", "kind", "version", "imports", "code");
    for p in cairn.plugins() {
        let imports: Vec<_> = p.imports.iter().map(|i| i.name()).collect();
        let code = if p.from_cache { "cached" } else { "compiled" };
        println!("{:<22} {:<14} {:<9} {:<22} {:<8} {}", p.manifest.name, p.manifest.kind.to_string(), p.manifest.version, imports.join(","), code, p.source);
    }
    println!("{:<22} {:<14} {:<9} {:<22} {:<8} host (always the compaction chain's last step)", "last-resort", "strategy", env!("CARGO_PKG_VERSION"), "-", "-");
    println!("{:<22} {:<14} {:<9} {:<22} {:<8} host (always the handover chain's last step)", "host-seed", "strategy", env!("CARGO_PKG_VERSION"), "-", "-");
    Ok(())
}
