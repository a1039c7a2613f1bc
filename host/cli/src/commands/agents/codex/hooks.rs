//! The two hook handlers, on the shared logic (`agents::shared::hooks`): Codex's hook payloads
//! carry the same fields (`session_id`, `transcript_path` — the rollout —, `cwd`,
//! `hook_event_name`; `PreCompact` adds `trigger`, `SessionStart` adds `source`), and Codex
//! reads the same `{"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext":
//! …}}` answer from `SessionStart`, as a developer message to the model
//! (openai/codex `codex-rs/hooks/src/events/session_start.rs`). `PreCompact`'s output can only
//! stop Codex (`continue: false`), never add context (`codex-rs/hooks/src/events/compact.rs`),
//! so nothing is printed there. A failing hook exits 1: Codex shows it as a failed hook and goes
//! on compacting. Failures are recorded under the agent `codex`.

use std::io::Read;

use anyhow::Result;

use super::super::shared::hooks::{self as shared, Agent};
use super::super::shared::HookArgs;

const CODEX: Agent = Agent { name: "codex", title: "Codex", compacted: "Codex compacted it", compares_summary_only: false };

/// `PreCompact`: archives the whole rollout into the project's conversation (a handover, with
/// its deterministic checkpoint) before Codex replaces it with its summary.
pub fn pre_compact(args: HookArgs, stdin: impl Read) -> Result<()> {
    shared::recorded(&CODEX, "pre-compact", args.home.clone(), stdin, |payload| shared::archive(args, &payload).map(drop))
}

/// `SessionStart` (matcher `compact`; Codex runs it at the start of the turn after a
/// compaction): prints what Codex's summary left out, and any earlier hook failure.
pub fn session_start(args: HookArgs, stdin: impl Read) -> Result<()> {
    shared::add_context(&CODEX, "session-start", "SessionStart", &args, stdin, |payload, notice| shared::context(&CODEX, &args, payload, notice))
}
