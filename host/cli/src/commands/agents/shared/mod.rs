//! What several agents' adapters share: the hook handlers' logic (Claude Code, Codex and
//! Gemini CLI send the same payload), and the installers' JSON settings files.

pub(crate) mod hooks;
pub(crate) mod report;
pub(crate) mod settings;

use std::path::PathBuf;

/// The arguments of every agent's hook handlers (Claude Code's, Codex's, Gemini CLI's).
#[derive(clap::Args)]
pub struct HookArgs {
    /// Cairn's home (default: $CAIRN_HOME, else ~/.local/share/cairn).
    #[arg(long)]
    pub(crate) home: Option<PathBuf>,
    /// Policy file (TOML): the handover chain that archives before the agent compacts, and the
    /// re-injection budget of the context added after (`[lifecycle] reinject_budget_tokens`);
    /// the embedded default when absent.
    #[arg(long)]
    pub(crate) policy: Option<PathBuf>,
}
