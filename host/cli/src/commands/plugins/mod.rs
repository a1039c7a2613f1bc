//! `cairn plugins list|check|build`: what the host can run, and the plugin author's loop.

mod build;
mod check;
mod list;

use std::path::PathBuf;

use anyhow::Result;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Bundled plugins and those in --plugin-dir, with kind, version and imports.
    List {
        /// A folder of plugins (`.wasm` beside a `.toml` manifest) to list beside the bundled ones.
        #[arg(long)]
        plugin_dir: Vec<PathBuf>,
        /// Print one JSON object for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Check a plugin the way the host will load and run it: manifest, world, imports against
    /// grants, then sample sessions under the host's invariants.
    Check(check::Args),
    /// Build a plugin project (Rust, Python or JavaScript) into `dist/<name>.wasm` + `<name>.toml`.
    Build(build::Args),
}

pub fn run(command: Command) -> Result<()> {
    match command {
        Command::List { plugin_dir, json } => list::run(&plugin_dir, json),
        Command::Check(args) => check::run(args),
        Command::Build(args) => build::run(args),
    }
}
