//! `cairn gemini`: Cairn inside this agent (being built; see issue 21).

use anyhow::Result;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Add Cairn to the agent's configuration.
    Install,
    /// Remove exactly what `install` added.
    Uninstall,
}

pub fn run(command: Command) -> Result<()> {
    match command {
        Command::Install | Command::Uninstall => anyhow::bail!("not built yet"),
    }
}
