//! The two hook handlers, on Claude Code's logic (`claude_code::hooks`): Codex's hook payloads
//! carry the same fields (`session_id`, `transcript_path` — the rollout —, `cwd`,
//! `hook_event_name`; `PreCompact` adds `trigger`, `SessionStart` adds `source`), and Codex
//! reads the same `{"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext":
//! …}}` answer from `SessionStart`, as a developer message to the model
//! (openai/codex `codex-rs/hooks/src/events/session_start.rs`). `PreCompact`'s output can only
//! stop Codex (`continue: false`), never add context (`codex-rs/hooks/src/events/compact.rs`),
//! so nothing is printed there. A failing hook exits 1: Codex shows it as a failed hook and goes
//! on compacting. Failures are recorded under the agent `codex`.

use std::io::Read;
use std::path::PathBuf;

use anyhow::{Context, Result};
use serde_json::{json, Value};

use crate::commands::claude_code::hooks::{self as shared, Payload};
use crate::commands::claude_code::HookArgs;
use crate::hook_failures::{self, Failure};
use crate::setup;

/// The agent these hooks' failures are recorded under.
const AGENT: &str = "codex";

/// Runs `hook`'s `work` on the payload on `stdin`; a failure is recorded in the home with the
/// session and rollout the payload names, then returned.
fn recorded<T>(hook: &str, home: Option<PathBuf>, mut stdin: impl Read, work: impl FnOnce(Payload) -> Result<T>) -> Result<T> {
    let mut input = String::new();
    let result = stdin
        .read_to_string(&mut input)
        .map_err(anyhow::Error::from)
        .and_then(|_| serde_json::from_str::<Payload>(&input).map_err(anyhow::Error::from))
        .context("reading Codex's hook payload on stdin")
        .and_then(work);
    if let Err(error) = &result {
        let value: Value = serde_json::from_str(&input).unwrap_or(Value::Null);
        let field = |name: &str| value.get(name).and_then(Value::as_str).map(String::from);
        let failure = Failure::new(AGENT, hook, field("session_id"), field("transcript_path"), error);
        hook_failures::record(&setup::home_path(home), failure);
    }
    result
}

/// `PreCompact`: archives the whole rollout into the project's conversation (a handover, with
/// its deterministic checkpoint) before Codex replaces it with its summary.
pub fn pre_compact(args: HookArgs, stdin: impl Read) -> Result<()> {
    recorded("pre-compact", args.home.clone(), stdin, |payload| shared::archive(args, payload))
}

/// `SessionStart` (matcher `compact`; Codex runs it at the start of the turn after a
/// compaction): prints what Codex's summary left out, and any earlier hook failure.
pub fn session_start(args: HookArgs, stdin: impl Read) -> Result<()> {
    let home = setup::home_path(args.home.clone());
    let untold = hook_failures::untold(&home, AGENT);
    let notice = hook_failures::notice(&untold);
    let context = recorded("session-start", args.home.clone(), stdin, |payload| shared::context(&args, &payload, notice.as_deref()))?;
    let Some(context) = context.map(|c| in_codex_words(&c)).or_else(|| notice.clone()) else { return Ok(()) };
    let mut output = json!({"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": context}});
    if let Some(notice) = &notice {
        // Shown to the user as a warning; `additionalContext` goes to the model.
        output["systemMessage"] = json!(notice);
    }
    println!("{output}");
    hook_failures::mark_told(&home, &untold);
    Ok(())
}

/// The shared rendering names the agent whose compaction it follows in its heading only.
fn in_codex_words(context: &str) -> String {
    context.replacen("before Claude Code compacted it", "before Codex compacted it", 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_heading_names_codex_and_the_operators_words_stay_as_written() {
        let text = "Cairn archived the whole conversation before Claude Code compacted it (x).\n- Operator: compare with Claude Code before Claude Code compacted it";
        let out = in_codex_words(text);
        assert!(out.starts_with("Cairn archived the whole conversation before Codex compacted it (x)."), "{out}");
        assert!(out.ends_with("compare with Claude Code before Claude Code compacted it"), "{out}");
    }
}
