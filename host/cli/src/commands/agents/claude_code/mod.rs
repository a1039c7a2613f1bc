//! `cairn claude-code`: Cairn inside Claude Code through its hooks
//! (https://code.claude.com/docs/en/hooks).
//! - `install` / `uninstall` add and remove exactly Cairn's hooks in a settings file (and with
//!   `--mcp` its MCP server, the agent's recall tools);
//! - `pre-compact` (the `PreCompact` hook) archives the whole transcript into the session's
//!   conversation and computes the deterministic checkpoint, before Claude Code summarizes;
//! - `session-start` (the `SessionStart` hook, matcher `compact`) injects the checkpoint and
//!   what Claude Code's own summary left out as `additionalContext`.

mod hooks;
mod settings;

use anyhow::Result;

use super::shared::HookArgs;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Add Cairn's hooks to Claude Code's settings (the user's, or a project's with --project),
    /// and with --mcp its MCP server.
    Install(settings::Args),
    /// Remove exactly what `install` added (hooks, MCP server, files it left empty).
    Uninstall(settings::Args),
    /// The PreCompact hook: reads Claude Code's hook payload on stdin.
    PreCompact(HookArgs),
    /// The SessionStart hook (source `compact`): reads the payload on stdin, prints the context to add.
    SessionStart(HookArgs),
}

pub fn run(command: Command) -> Result<()> {
    match command {
        Command::Install(args) => {
            let json = args.json;
            settings::install(args)?.finish_install(json)
        }
        Command::Uninstall(args) => {
            let json = args.json;
            settings::uninstall(args)?.print(json)
        }
        Command::PreCompact(args) => hooks::pre_compact(args, std::io::stdin().lock()),
        Command::SessionStart(args) => hooks::session_start(args, std::io::stdin().lock()),
    }
}
