//! `cairn demo`: a long generated coding session compacted by the embedded default policy
//! into a demo home, with a readable before and after, and the commands to look further —
//! which work, since the home stays. No model, no network.

use std::path::{Path, PathBuf};

use anyhow::{bail, ensure, Context, Result};
use cairn::storage::{ArtifactUri, ConversationKey, Home};
use cairn::transcript::{formats, sample, Part, Transcript};

use super::agents::shared::settings::quote;
use crate::setup;

#[derive(clap::Args)]
pub struct Args {
    /// Operator turns in the generated session.
    #[arg(long, default_value_t = 30)]
    turns: usize,
    /// The demo's folder: the session and the home it compacts into (default: `cairn-demo-$USER`
    /// in the temporary directory). A folder an earlier demo made is replaced; any other that
    /// exists is refused.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Accepted for scripts written before the home was always kept.
    #[arg(long, hide = true)]
    keep: bool,
    /// Print one JSON object for scripts: the folder, the figures and the next commands.
    #[arg(long)]
    json: bool,
}

/// The file that marks a folder as a demo's, so that a second run may replace it.
const MARKER: &str = ".cairn-demo";

/// The demo's folder, empty but for its marker: an earlier demo's is cleared, any other
/// existing non-empty folder refused (it is someone's).
fn fresh_dir(dir: &Path) -> Result<()> {
    let empty = std::fs::read_dir(dir).map(|mut d| d.next().is_none()).unwrap_or(true);
    if !empty {
        if !dir.join(MARKER).is_file() {
            bail!("{} exists and is not a folder `cairn demo` made: name a new one with --dir", dir.display());
        }
        std::fs::remove_dir_all(dir).with_context(|| format!("clearing the earlier demo in {}", dir.display()))?;
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::write(dir.join(MARKER), "made by `cairn demo`; the next demo replaces this folder\n")?;
    Ok(())
}

pub fn run(args: Args) -> Result<()> {
    // One per user: the temporary directory is shared.
    let user = std::env::var("USER").ok().filter(|u| !u.is_empty() && !u.contains(['/', '\\']));
    let dir = args.dir.unwrap_or_else(|| std::env::temp_dir().join(user.map_or("cairn-demo".into(), |u| format!("cairn-demo-{u}"))));
    fresh_dir(&dir)?;
    let transcript = sample::coding_session(args.turns);
    let input_path = dir.join("session.jsonl");
    std::fs::write(&input_path, formats::write_cairn(&transcript))?;

    let cairn = setup::host(&[])?;
    let home_path = dir.join("home");
    let home = Home::open(&home_path)?;
    let mut store = home.conversation(&ConversationKey::parse("demo")?)?;
    let report = cairn.compact(&cairn.default_policy()?, &mut store, &transcript, "demo session")?;
    let h = quote(&home_path.display().to_string());
    let elided = first_elision(&transcript, &report.transcript);
    if let Some((before, _, uri)) = &elided {
        let stored = home.find_artifact(&uri.parse::<ArtifactUri>()?)?;
        ensure!(stored == before.as_bytes(), "the stored artifact differs from the original");
    }
    // Every one of these is run by a test (`cli::the_demo_s_next_commands_work`).
    let mut next = vec![format!("cairn show --home {h} --conversation demo"), format!("cairn show --home {h} --conversation demo {}", report.archive_id)];
    if let Some((_, _, uri)) = &elided {
        next.push(format!("cairn artifact {uri} --home {h}"));
    }
    next.extend([
        format!("cairn context --home {h} --conversation demo --out-format openai"),
        format!("cairn history --home {h} --conversation demo search journal"),
        format!("cairn undo --home {h} --conversation demo"),
        format!("cairn ui --home {h}"),
    ]);

    if args.json {
        let value = serde_json::json!({
            "dir": dir.display().to_string(),
            "session": input_path.display().to_string(),
            "home": home_path.display().to_string(),
            "conversation": "demo",
            "entries": transcript.entries.len(),
            "tokens_before": report.tokens_before,
            "tokens_after": report.tokens_after,
            "committed_by": report.committed_by,
            "archive_id": report.archive_id,
            "artifact": elided.as_ref().map(|(_, _, uri)| uri),
            "next": next,
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    println!("Generated a coding session: {} entries over {} operator turns ({}).\n", transcript.entries.len(), args.turns, input_path.display());
    super::compact::print_report(&report, "demo session", &home);
    if let Some((before, after, uri)) = &elided {
        println!("\nBefore — a tool output early in the session ({} chars):\n{}", before.len(), indent(&excerpt(before)));
        println!("After — what the model sees now:\n{}", indent(after));
        println!("`cairn artifact {uri} --home {h}` returns the original, byte for byte ({} bytes).", before.len());
    }
    let recent = report.transcript.entries.last().map(|e| e.model_text()).unwrap_or_default();
    println!("\nThe recent tail stays verbatim; the last entry still reads:\n{}", indent(&excerpt(&recent)));
    println!("\nThe home stays at {h} (the next `cairn demo` replaces it). Look further:");
    for command in &next {
        println!("  {command}");
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
