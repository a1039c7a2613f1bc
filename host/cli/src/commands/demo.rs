//! `cairn demo`: a long generated coding session compacted by the embedded default policy
//! into a temporary home, with a readable before and after. No model, no network.

use anyhow::{ensure, Result};
use cairn::storage::{ArtifactUri, ConversationKey, Home};
use cairn::transcript::{formats, sample, Part, Transcript};

use crate::setup;

#[derive(clap::Args)]
pub struct Args {
    /// Operator turns in the generated session.
    #[arg(long, default_value_t = 30)]
    turns: usize,
    /// Keep the temporary home and print its path.
    #[arg(long)]
    keep: bool,
}

pub fn run(args: Args) -> Result<()> {
    let temp = tempfile::Builder::new().prefix("cairn-demo-").tempdir()?;
    let transcript = sample::coding_session(args.turns);
    let input_path = temp.path().join("session.jsonl");
    std::fs::write(&input_path, formats::write_cairn(&transcript))?;

    let cairn = setup::host(&[])?;
    let home = Home::open(&temp.path().join("home"))?;
    let mut store = home.conversation(&ConversationKey::parse("demo")?)?;
    println!("Generated a coding session: {} entries over {} operator turns ({}).\n", transcript.entries.len(), args.turns, input_path.display());
    let report = cairn.compact(&cairn.default_policy()?, &mut store, &transcript, "demo session")?;
    super::compact::print_report(&report, "demo session", &home);

    if let Some((before, after, uri)) = first_elision(&transcript, &report.transcript) {
        println!("\nBefore — a tool output early in the session ({} chars):\n{}", before.len(), indent(&excerpt(&before)));
        println!("After — what the model sees now:\n{}", indent(&after));
        let stored = home.find_artifact(&uri.parse::<ArtifactUri>()?)?;
        ensure!(stored == before.as_bytes(), "the stored artifact differs from the original");
        println!("`cairn artifact {uri}` returns the original, byte for byte ({} bytes).", stored.len());
    }
    let recent = report.transcript.entries.last().map(|e| e.model_text()).unwrap_or_default();
    println!("\nThe recent tail stays verbatim; the last entry still reads:\n{}", indent(&excerpt(&recent)));
    if args.keep {
        let kept = temp.keep();
        println!("\nHome kept at {}", kept.join("home").display());
    }
    Ok(())
}

/// The first tool result whose content the compaction replaced: (original, placeholder, URI).
fn first_elision(before: &Transcript, after: &Transcript) -> Option<(String, String, String)> {
    let originals: std::collections::HashMap<&str, &str> = before
        .entries
        .iter()
        .flat_map(|e| e.parts.iter())
        .filter_map(|p| match p {
            Part::ToolResult { call_id, content, .. } => Some((call_id.as_str(), content.as_str())),
            _ => None,
        })
        .collect();
    after.entries.iter().flat_map(|e| e.parts.iter()).find_map(|p| match p {
        Part::ToolResult { call_id, content, elided: Some(uri), .. } => Some((originals.get(call_id.as_str())?.to_string(), content.clone(), uri.clone())),
        _ => None,
    })
}

fn excerpt(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() <= 8 {
        return text.trim_end().to_string();
    }
    format!("{}\n… ({} more lines)", lines[..6].join("\n"), lines.len() - 6)
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("    {l}\n")).collect()
}
