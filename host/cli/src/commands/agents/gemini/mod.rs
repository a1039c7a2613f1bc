//! `cairn gemini`: Cairn inside Gemini CLI (0.61.0) through its hooks and its MCP servers.
//! - `install` / `uninstall` add and remove exactly Cairn's entries in a settings file: the
//!   `PreCompress` and `BeforeAgent` hooks, and the `cairn` MCP server (`session_history`);
//! - `pre-compress` (the `PreCompress` hook) archives the whole session into the project's
//!   conversation, but only before a compression that will really run: Gemini CLI fires the
//!   hook before every model request and decides afterwards (see [`compression`]);
//! - `before-agent` (the `BeforeAgent` hook) adds, once after each compression, the record of
//!   the session that Gemini CLI's `<state_snapshot>` left out, as `additionalContext`.

mod compression;
mod hooks;
mod settings;

use anyhow::Result;

use super::shared::HookArgs;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Add Cairn's hooks and MCP server to Gemini CLI's settings (the user's, or a project's with --project).
    Install(settings::Args),
    /// Remove exactly what `install` added (hooks, MCP server, a file it left empty).
    Uninstall(settings::Args),
    /// The PreCompress hook: reads Gemini CLI's hook payload on stdin; archives when a compression will run.
    PreCompress(HookArgs),
    /// The BeforeAgent hook: reads the payload on stdin, prints the context to add after a compression.
    BeforeAgent(HookArgs),
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
        Command::PreCompress(args) => hooks::pre_compress(args, std::io::stdin().lock()),
        Command::BeforeAgent(args) => hooks::before_agent(args, std::io::stdin().lock()),
    }
}
