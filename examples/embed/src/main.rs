//! A harness embedding Cairn: load the bundled plugins, read a policy, and compact a
//! conversation, keeping its record in a storage home. Run with
//! `cargo run -p cairn-example-embed [POLICY]`.

use anyhow::Result;
use cairn::storage::{ConversationKey, Home};
use cairn::transcript::sample;
use cairn::Cairn;

fn main() -> Result<()> {
    let mut cairn = Cairn::new()?;
    for plugin in cairn_bundle::BUNDLED {
        cairn.add_plugin(plugin.manifest, plugin.component, "bundled")?;
    }
    // Policies are data: swap the chain by passing another file, no recompiling. Loading
    // checks it against the plugins (names, worlds, grants), citing file:line:column.
    let policy = match std::env::args().nth(1) {
        Some(path) => cairn.load_policy(&std::fs::read_to_string(&path)?, &path)?,
        None => cairn.default_policy()?,
    };

    let home_dir = tempfile::tempdir()?;
    let home = Home::open(home_dir.path())?;
    let mut conversation = home.conversation(&ConversationKey::parse("example-session")?)?;

    // Your harness would hand over its own history here.
    let history = sample::coding_session(20);
    let report = cairn.compact(&policy, &mut conversation, &history, "example harness")?;

    println!("{} → {} tokens", report.tokens_before, report.tokens_after);
    for step in &report.steps {
        println!("  {} {} ({} ms)", step.plugin, step.outcome, step.millis);
    }
    println!("{} originals recoverable, e.g. {:?}", report.artifacts.len(), report.artifacts.first());
    Ok(())
}
