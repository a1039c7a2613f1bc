//! Claude Code's two hook handlers (the shared logic is `agents::shared::hooks`):
//! `pre-compact` archives before Claude Code summarizes, `session-start` adds what its summary
//! left out.

use std::io::Read;

use anyhow::Result;

use super::super::shared::hooks::{add_context, archive, context, recorded, Agent};
use super::super::shared::HookArgs;

/// Claude Code's conformance test fails when its transcript counts as kept (not yet
/// understood: issue 36 item 6 is proven for Codex and Gemini CLI only): its summary alone.
const CLAUDE_CODE: Agent = Agent { name: "claude-code", title: "Claude Code", compacted: "Claude Code compacted it", compares_summary_only: true };

pub fn pre_compact(args: HookArgs, stdin: impl Read) -> Result<()> {
    recorded(&CLAUDE_CODE, "pre-compact", args.home.clone(), stdin, |payload| {
        let (entries, report) = archive(args, &payload)?;
        eprintln!(
            "cairn: archived {entries} entries of session {} as {}{}",
            payload.session_id.as_deref().unwrap_or("?"),
            report.archive_id,
            if report.checkpoint.is_some() { " with a checkpoint" } else { "" }
        );
        Ok(())
    })
}

pub fn session_start(args: HookArgs, stdin: impl Read) -> Result<()> {
    add_context(&CLAUDE_CODE, "session-start", "SessionStart", &args, stdin, |payload, notice| context(&CLAUDE_CODE, &args, payload, notice))
}
