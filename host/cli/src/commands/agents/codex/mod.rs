//! `cairn codex`: Cairn inside Codex (0.169.0) through its config, hooks and MCP
//! (https://developers.openai.com/codex/hooks, openai/codex `codex-rs/hooks`).
//! - `install` / `uninstall` add and remove exactly Cairn's block in Codex's `config.toml`: its
//!   MCP server (the agent's `session_history`) and its two hooks, trusted;
//! - `pre-compact` (the `PreCompact` hook) archives the whole rollout into the project's
//!   conversation and computes the deterministic checkpoint, before Codex summarizes;
//! - `session-start` (the `SessionStart` hook, matcher `compact`, which Codex runs at the start
//!   of the turn after a compaction) adds what Codex's summary left out as `additionalContext`;
//! - `compact` replaces Codex's compaction with Cairn's in an idle session's rollout (a
//!   `compacted` line Codex resumes from).

mod config;
mod hooks;
mod writer;

use anyhow::Result;

use super::shared::HookArgs;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Add Cairn's MCP server and hooks to Codex's config.toml ($CODEX_HOME, else ~/.codex).
    Install(config::Args),
    /// Remove exactly what `install` added.
    Uninstall(config::Args),
    /// The PreCompact hook: reads Codex's hook payload on stdin.
    PreCompact(HookArgs),
    /// The SessionStart hook (source `compact`): reads the payload on stdin, prints the context to add.
    SessionStart(HookArgs),
    /// Compact an idle session's rollout with Cairn's chain: `codex exec resume` goes on from
    /// Cairn's context instead of Codex's own compaction.
    Compact(writer::Args),
}

pub fn run(command: Command) -> Result<()> {
    match command {
        Command::Install(args) => {
            let json = args.json;
            config::install(args)?.finish_install(json)
        }
        Command::Uninstall(args) => {
            let json = args.json;
            config::uninstall(args)?.print(json)
        }
        Command::PreCompact(args) => hooks::pre_compact(args, std::io::stdin().lock()),
        Command::SessionStart(args) => hooks::session_start(args, std::io::stdin().lock()),
        Command::Compact(args) => writer::compact(args),
    }
}
