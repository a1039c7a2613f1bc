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
use std::path::PathBuf;

use anyhow::{Context, Result};
use cairn::policy::Policy;
use cairn::record::Event;
use cairn::storage::{ConversationKey, Home};
use cairn::transcript::{formats, Origin, Role};
use serde::Deserialize;
use serde_json::{json, Value};

use super::compression;
use super::HookArgs;
use crate::commands::claude_code::hooks::{render, strings, Record};
use crate::hook_failures::{self, Failure};
use crate::setup;

/// The agent these hooks' failures are recorded under.
const AGENT: &str = "gemini";

/// The first line of what `render` writes: with the archive id, how an injection is recognized.
const INJECTED_HEADING: &str = "# Cairn: the record of this session before compaction";

/// The fields Cairn reads; Gemini CLI sends more, which are ignored.
#[derive(Deserialize)]
struct Payload {
    transcript_path: PathBuf,
    #[serde(default)]
    cwd: Option<PathBuf>,
    #[serde(default)]
    trigger: Option<String>,
}

/// Runs `hook`'s `work` on the payload on `stdin`. A failure is recorded in the home, with the
/// session and transcript the payload names (when it names them), before it is returned.
fn recorded<T>(hook: &str, home: Option<PathBuf>, mut stdin: impl Read, work: impl FnOnce(Payload) -> Result<T>) -> Result<T> {
    let mut input = String::new();
    let result = stdin
        .read_to_string(&mut input)
        .context("reading Gemini CLI's hook payload on stdin")
        .and_then(|_| serde_json::from_str(&input).context("reading Gemini CLI's hook payload on stdin"))
        .and_then(work);
    if let Err(error) = &result {
        let value: Value = serde_json::from_str(&input).unwrap_or(Value::Null);
        let field = |name: &str| value.get(name).and_then(Value::as_str).map(String::from);
        let failure = Failure::new(AGENT, hook, field("session_id"), field("transcript_path"), error);
        hook_failures::record(&setup::home_path(home), failure);
    }
    result
}

/// The project's conversation, the one `cairn serve --project` serves: Gemini CLI names the
/// workspace in `GEMINI_PROJECT_DIR`, else the payload's `cwd`.
fn conversation(payload: &Payload) -> ConversationKey {
    let project = std::env::var_os("GEMINI_PROJECT_DIR").map(PathBuf::from).or_else(|| payload.cwd.clone()).unwrap_or_default();
    setup::project_conversation(&project)
}

pub fn pre_compress(args: HookArgs, stdin: impl Read) -> Result<()> {
    recorded("pre-compress", args.home.clone(), stdin, |payload| {
        // A manual /compress always runs; an automatic check mostly does nothing.
        if payload.trigger.as_deref() != Some("manual") && !compression::predict(&payload.transcript_path, payload.cwd.as_deref())?.compresses() {
            return Ok(());
        }
        archive(args, payload)
    })
}

fn archive(args: HookArgs, payload: Payload) -> Result<()> {
    let session = setup::SessionArgs {
        file: payload.transcript_path.clone(),
        policy: args.policy,
        home: args.home,
        conversation: Some(conversation(&payload).to_string()),
        plugin_dir: Vec::new(),
    }
    .open()?;
    let setup::Session { name, transcript, policy, cairn, mut store, .. } = session;
    // A handover archives every entry and computes the deterministic checkpoint; Gemini CLI
    // replaces the history with its snapshot, and `before-agent` adds what it left out.
    cairn.handover(&policy, &mut store, &transcript, &name)?;
    Ok(())
}

pub fn before_agent(args: HookArgs, stdin: impl Read) -> Result<()> {
    let home = setup::home_path(args.home.clone());
    // Told only once the hook has something to print: a before-agent that fails tells nothing.
    let untold = hook_failures::untold(&home, AGENT);
    let notice = hook_failures::notice(&untold);
    let context = recorded("before-agent", args.home.clone(), stdin, |payload| context(&args, &payload, notice.as_deref()))?;
    let Some(context) = context.or_else(|| notice.clone()) else { return Ok(()) };
    let mut output = json!({"hookSpecificOutput": {"hookEventName": "BeforeAgent", "additionalContext": context}});
    if let Some(notice) = &notice {
        // Shown to the user; `additionalContext` goes to the model.
        output["systemMessage"] = json!(notice);
    }
    println!("{output}");
    hook_failures::mark_told(&home, &untold);
    Ok(())
}

/// The context to add to this prompt: the record of the latest compression of this session,
/// unless the session file holds it since that compression already (or there is none).
fn context(args: &HookArgs, payload: &Payload, notice: Option<&str>) -> Result<Option<String>> {
    let home = Home::open(&setup::home_path(args.home.clone()))?;
    let key = conversation(payload);
    if !home.conversations()?.contains(&key) {
        return Ok(None);
    }
    let store = home.existing_conversation(&key)?;
    // This session's record: its snapshots (the session file names them) and the handovers
    // `pre-compress` committed since the first of them.
    let source = payload.transcript_path.display().to_string();
    let ours = |e: &&Event| matches!(e, Event::Snapshot { source: s, .. } if *s == source);
    let events = store.events();
    let Some(first) = events.iter().position(|e| ours(&e)) else { return Ok(None) };
    let committed: Vec<_> = events[first..]
        .iter()
        .filter_map(|e| match e {
            Event::Compaction(c) if c.committed_by.is_some() => Some(c),
            _ => None,
        })
        .collect();
    let Some(event) = committed.last() else { return Ok(None) };

    // The session as Gemini CLI holds it now: its latest snapshot, and what followed it.
    let text = std::fs::read_to_string(&payload.transcript_path).with_context(|| format!("reading {}", payload.transcript_path.display()))?;
    let (transcript, _) = formats::parse(&text, &source)?;
    let Some(snapshot) = transcript.entries.iter().rposition(|e| e.origin == Origin::Summary) else {
        // Archived, but Gemini CLI did not compress after all: the history is whole.
        return Ok(None);
    };
    // The latest archive saw this snapshot already: Gemini CLI did not compress after it.
    let last_archived = events.iter().rev().find_map(|e| match e {
        Event::Snapshot { source: s, entries, .. } if *s == source => Some(entries),
        _ => None,
    });
    if last_archived.is_some_and(|entries| entries.iter().any(|e| e.id == transcript.entries[snapshot].id)) {
        return Ok(None);
    }
    let injected = |text: &str| text.contains(INJECTED_HEADING) && text.contains(event.archive_id.as_str());
    if transcript.entries[snapshot + 1..].iter().any(|e| e.role == Role::User && injected(&e.model_text())) {
        return Ok(None);
    }
    let summary = transcript.entries[snapshot].model_text();

    let checkpoint: Value = event.checkpoint.as_deref().and_then(|c| serde_json::from_str(c).ok()).unwrap_or(Value::Null);
    // Constraints of every compaction of this session: a rule from before an earlier
    // compaction is no longer in the context the latest checkpoint was computed from.
    let mut constraints: Vec<String> = Vec::new();
    for c in &committed {
        let value: Value = c.checkpoint.as_deref().and_then(|c| serde_json::from_str(c).ok()).unwrap_or(Value::Null);
        for rule in strings(&value, "/negative_constraints") {
            if !constraints.iter().any(|r| r == rule) {
                constraints.push(rule.to_string());
            }
        }
    }
    // What the operator typed (the reader keeps a hook's context apart), once each: every
    // snapshot holds the session from its start.
    let mut operator: Vec<String> = Vec::new();
    for entry in events.iter().filter(ours).filter_map(|e| match e {
        Event::Snapshot { entries, .. } => Some(entries),
        _ => None,
    }) {
        for e in entry.iter().filter(|e| e.role == Role::User && e.origin == Origin::Operator) {
            let typed = e.model_text().trim().to_string();
            if !typed.is_empty() && !operator.contains(&typed) {
                operator.push(typed);
            }
        }
    }
    let policy = match &args.policy {
        Some(file) => Policy::parse(&std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?, &file.display().to_string())?,
        None => Policy::default_policy(),
    };
    let record = Record { checkpoint: &checkpoint, constraints: &constraints, operator: &operator, archive_id: &event.archive_id, conversation: key.as_str() };
    let rendered = render(notice, &record, Some(&summary), policy.lifecycle.reinject_budget_tokens);
    Ok(Some(rendered.replacen("before Claude Code compacted it", "before Gemini CLI compressed it", 1)))
}
