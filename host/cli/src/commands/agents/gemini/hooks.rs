//! The two hook handlers. Gemini CLI 0.61.0 (packages/core/src/hooks/hookEventHandler.ts,
//! hookRunner.ts) writes every hook `session_id`, `transcript_path`, `cwd`, `hook_event_name`
//! and `timestamp` on stdin, sets `GEMINI_PROJECT_DIR` (and `CLAUDE_PROJECT_DIR`) to the
//! workspace, and reads a JSON answer on stdout (else stderr's text, as a message to show).
//! - `PreCompress` adds `trigger` (`manual` | `auto`); its answer is ignored. It fires before
//!   every turn of the model, so `pre-compress` archives only when [`compression::predict`]
//!   says Gemini CLI will compress, and prints nothing.
//! - `BeforeAgent` adds `prompt` and fires once per prompt, before that turn's compression
//!   check (packages/core/src/core/client.ts, `sendMessageStream`); its
//!   `hookSpecificOutput.additionalContext` is appended to the prompt as
//!   `<hook_context>…</hook_context>` (`<` and `>` escaped), kept in the history and the
//!   session file. No later hook can add to the history: `SessionStart` has no compression
//!   source (startup, resume, clear: packages/core/src/hooks/types.ts), `BeforeModel` rewrites
//!   the text of one request, not the history (packages/core/src/hooks/hookTranslator.ts,
//!   core/geminiChat.ts), and the snapshot's requests run no hook (core/baseLlmClient.ts). So
//!   what Gemini CLI's snapshot left out comes back with the first prompt after the compression
//!   (not in the requests that finish the compressing turn), once: `before-agent` adds nothing
//!   when the session file already holds it.
//!
//! A failing hook exits 1 (a warning for Gemini CLI, which goes on); the failure is recorded in
//! Cairn's home ([`crate::hook_failures`]) and told by the next `before-agent`.

use std::io::Read;

use anyhow::{Context, Result};
use cairn::transcript::{formats, Origin, Role};

use super::super::shared::hooks::{self as shared, Agent, Payload, SessionRecord, HEADING};
use super::super::shared::HookArgs;
use super::compression;

const GEMINI: Agent = Agent { name: "gemini", title: "Gemini CLI", compacted: "Gemini CLI compressed it", compares_summary_only: false };

pub fn pre_compress(args: HookArgs, stdin: impl Read) -> Result<()> {
    shared::recorded(&GEMINI, "pre-compress", args.home.clone(), stdin, |payload| {
        // A manual /compress always runs; an automatic check mostly does nothing.
        if payload.trigger.as_deref() != Some("manual") && !compression::predict(&payload.transcript_path, payload.cwd.as_deref())?.compresses() {
            return Ok(());
        }
        // Nothing printed: Gemini CLI would show stderr's text as the hook's message.
        shared::archive(args, &payload).map(drop)
    })
}

pub fn before_agent(args: HookArgs, stdin: impl Read) -> Result<()> {
    shared::add_context(&GEMINI, "before-agent", "BeforeAgent", &args, stdin, |payload, notice| context(&args, payload, notice))
}

/// The context to add to this prompt: the record of the latest compression of this session,
/// unless the session file holds it since that compression already (or there is none).
fn context(args: &HookArgs, payload: &Payload, notice: Option<&str>) -> Result<Option<String>> {
    let Some(record) = SessionRecord::load(args, payload)? else { return Ok(None) };
    let latest = record.latest();
    // The session as Gemini CLI holds it now: its latest snapshot, and what followed it.
    let source = payload.transcript_path.display().to_string();
    let text = std::fs::read_to_string(&payload.transcript_path).with_context(|| format!("reading {source}"))?;
    let (transcript, _) = formats::parse(&text, &source)?;
    let Some(snapshot) = transcript.entries.iter().rposition(|e| e.origin == Origin::Summary) else {
        // Archived, but Gemini CLI did not compress after all: the history is whole.
        return Ok(None);
    };
    // The latest archive saw this snapshot already: Gemini CLI did not compress after it.
    if record.snapshots().next_back().is_some_and(|entries| entries.iter().any(|e| e.id == transcript.entries[snapshot].id)) {
        return Ok(None);
    }
    let injected = |text: &str| text.contains(HEADING) && text.contains(latest.archive_id.as_str());
    if transcript.entries[snapshot + 1..].iter().any(|e| e.role == Role::User && injected(&e.model_text())) {
        return Ok(None);
    }
    let summary = transcript.entries[snapshot].model_text();
    Ok(Some(record.render(&GEMINI, notice, Some(&summary), &transcript.entries, shared::reinject_budget(args.policy.as_deref())?)))
}
