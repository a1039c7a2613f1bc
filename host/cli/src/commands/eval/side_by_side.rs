//! Beside Claude Code's own compaction: on each recorded Claude Code session that compacted,
//! what the record says work needs (the operator's constraints, failing checks, changed
//! files, identifiers — from Cairn's deterministic checkpoint of the transcript as it stood
//! before) is looked up in Claude Code's real summary and in the context Cairn's chain leaves.

use std::path::Path;

use anyhow::{Context, Result};
use cairn::storage::ConversationKey;
use cairn::transcript::{formats, Origin};
use serde::Serialize;
use serde_json::Value;

use super::lab::text;
use super::Lab;
use crate::commands::agents::shared::hooks::{mentioned, normalized, strings};

#[derive(Serialize)]
pub struct Row {
    pub session: String,
    /// What the record holds that work needs.
    pub items: usize,
    pub claude_code_kept: usize,
    pub claude_code_tokens: u64,
    pub cairn_kept: usize,
    pub cairn_tokens: u64,
}

/// One row per Claude Code session with a compaction under `transcripts/claude-code`.
pub fn rows(lab: &Lab, transcripts: &Path) -> Result<Vec<Row>> {
    let dir = transcripts.join("claude-code");
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut files: Vec<_> = std::fs::read_dir(&dir)?.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>()?;
    files.sort();
    let mut rows = Vec::new();
    for (n, file) in files.iter().enumerate() {
        let text_of_file = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        let lines: Vec<&str> = text_of_file.lines().collect();
        let Some(boundary) = lines.iter().rposition(|l| l.contains("\"compact_boundary\"")) else { continue };
        let name = file.file_name().unwrap_or_default().to_string_lossy().into_owned();
        let (before, _) = formats::parse(&(lines[..boundary].join("\n") + "\n"), &name)?;
        let (after, _) = formats::parse(&text_of_file, &name)?;
        let Some(summary) = after.entries.iter().find(|e| e.origin == Origin::Summary) else { continue };

        // The record's view of what matters: the deterministic checkpoint of the default
        // policy's handover, the same whatever policy is under test.
        let key = format!("side-by-side-{n}");
        let mut store = lab.home.conversation(&ConversationKey::parse(&key)?)?;
        let handover = lab.cairn.handover(&lab.cairn.default_policy()?, &mut store, &before, &name)?;
        let checkpoint: Value = handover.checkpoint.as_deref().and_then(|c| serde_json::from_str(c).ok()).unwrap_or(Value::Null);
        let mut items: Vec<String> = ["/negative_constraints", "/verification/failed", "/files_modified"].iter().flat_map(|p| strings(&checkpoint, p)).map(str::to_string).collect();
        items.extend(checkpoint.pointer("/external_artifacts").and_then(Value::as_array).into_iter().flatten().filter_map(|a| a.get("uri")?.as_str().map(str::to_string)));

        let compacted = lab.compact(&format!("{key}-chain"), &before)?;
        let (claude, cairn) = (normalized(&summary.model_text()), normalized(&text(&compacted.transcript)));
        let mut claude_summary = cairn::transcript::Transcript::new(vec![summary.clone()]);
        lab.cairn.tokenizer().count_transcript(&mut claude_summary);
        rows.push(Row {
            session: name,
            items: items.len(),
            claude_code_kept: items.iter().filter(|i| mentioned(&claude, i)).count(),
            claude_code_tokens: claude_summary.total_tokens(),
            cairn_kept: items.iter().filter(|i| mentioned(&cairn, i)).count(),
            cairn_tokens: compacted.tokens_after,
        });
    }
    Ok(rows)
}
