//! The two hook handlers. Payloads and outputs as Claude Code documents them
//! (https://code.claude.com/docs/en/hooks): every hook gets `session_id`, `transcript_path`,
//! `cwd` and `hook_event_name` on stdin; `PreCompact` adds `trigger` and its stdout is not
//! shown to the model; `SessionStart` adds `source` ("compact" after a compaction) and may
//! print `{"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": …}}`,
//! capped by Claude Code at 10,000 characters. A failing hook exits 1, never 2: exit 2 would
//! block Claude Code's compaction. Claude Code shows a failing hook only in its debug log, so
//! the failure is first recorded in Cairn's home ([`crate::hook_failures`]), and the next
//! `session-start` tells the agent (atop its `additionalContext`) and the user (`systemMessage`)
//! in one line.

use std::io::Read;
use std::path::PathBuf;

use anyhow::{Context, Result};
use cairn::policy::Policy;
use cairn::storage::{ConversationKey, Home};
use cairn::transcript::{formats, Origin, Role};
use cairn::record::Event;
use serde::Deserialize;
use serde_json::{json, Value};

use super::HookArgs;
use crate::hook_failures::{self, Failure};
use crate::setup;

/// The agent these hooks' failures are recorded under.
const AGENT: &str = "claude-code";

/// Claude Code's limit on injected context.
pub const CONTEXT_LIMIT: usize = 10_000;

/// The fields Cairn reads; Claude Code sends more, which are ignored.
#[derive(Deserialize)]
pub(crate) struct Payload {
    session_id: String,
    transcript_path: PathBuf,
    #[serde(default)]
    cwd: Option<PathBuf>,
    #[serde(default)]
    source: Option<String>,
}

fn payload(stdin: impl Read) -> Result<Payload> {
    serde_json::from_reader(stdin).context("reading Claude Code's hook payload on stdin")
}

/// Runs `hook`'s `work` on the payload on `stdin`. A failure is recorded in the home, with the
/// session and transcript the payload names (when it names them), before it is returned.
fn recorded<T>(hook: &str, home: Option<PathBuf>, mut stdin: impl Read, work: impl FnOnce(Payload) -> Result<T>) -> Result<T> {
    let mut input = String::new();
    let result = stdin
        .read_to_string(&mut input)
        .context("reading Claude Code's hook payload on stdin")
        .and_then(|_| payload(input.as_bytes()))
        .and_then(work);
    if let Err(error) = &result {
        let value: Value = serde_json::from_str(&input).unwrap_or(Value::Null);
        let field = |name: &str| value.get(name).and_then(Value::as_str).map(String::from);
        let failure = Failure::new(AGENT, hook, field("session_id"), field("transcript_path"), error);
        hook_failures::record(&setup::home_path(home), failure);
    }
    result
}

/// One Cairn conversation per project, the one `cairn serve --expose agent` started there
/// serves: Claude Code names the project in `CLAUDE_PROJECT_DIR`, else the session's `cwd`.
/// Sessions are told apart in it by their transcript path.
fn conversation(payload: &Payload) -> ConversationKey {
    let project = std::env::var_os("CLAUDE_PROJECT_DIR").map(PathBuf::from).or_else(|| payload.cwd.clone()).unwrap_or_default();
    setup::project_conversation(&project)
}

pub fn pre_compact(args: HookArgs, stdin: impl Read) -> Result<()> {
    recorded("pre-compact", args.home.clone(), stdin, |payload| archive(args, payload))
}

pub(crate) fn archive(args: HookArgs, payload: Payload) -> Result<()> {
    let session = setup::SessionArgs {
        file: payload.transcript_path.clone(),
        policy: args.policy,
        home: args.home,
        conversation: Some(conversation(&payload).to_string()),
        plugin_dir: Vec::new(),
    }
    .open()?;
    let setup::Session { name, transcript, policy, cairn, mut store, .. } = session;
    // A handover archives every entry and computes the deterministic checkpoint; Claude Code
    // replaces the context with its own summary, and `session-start` adds what it left out.
    let report = cairn.handover(&policy, &mut store, &transcript, &name)?;
    eprintln!(
        "cairn: archived {} entries of session {} as {}{}",
        transcript.entries.len(),
        payload.session_id,
        report.archive_id,
        if report.checkpoint.is_some() { " with a checkpoint" } else { "" }
    );
    Ok(())
}

pub fn session_start(args: HookArgs, stdin: impl Read) -> Result<()> {
    let home = setup::home_path(args.home.clone());
    // Told only once the hook has something to print: a session-start that fails tells nothing.
    let untold = hook_failures::untold(&home, AGENT);
    let notice = hook_failures::notice(&untold);
    let context = recorded("session-start", args.home.clone(), stdin, |payload| context(&args, &payload, notice.as_deref()))?;
    let Some(context) = context.or_else(|| notice.clone()) else { return Ok(()) };
    let mut output = json!({"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": context}});
    if let Some(notice) = &notice {
        // Shown to the user; `additionalContext` goes to the model.
        output["systemMessage"] = json!(notice);
    }
    println!("{output}");
    hook_failures::mark_told(&home, &untold);
    Ok(())
}

/// The context to add after a compaction (none when there is nothing of this session's to
/// add), `notice` first.
pub(crate) fn context(args: &HookArgs, payload: &Payload, notice: Option<&str>) -> Result<Option<String>> {
    if payload.source.as_deref().is_some_and(|s| s != "compact") {
        return Ok(None);
    }
    let home = Home::open(&setup::home_path(args.home.clone()))?;
    let key = conversation(payload);
    if !home.conversations()?.contains(&key) {
        return Ok(None);
    }
    let store = home.existing_conversation(&key)?;
    // This session's record: its snapshots (the transcript path names them) and the handovers
    // `pre-compact` committed since the first of them.
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
    let operator: Vec<String> = events
        .iter()
        .filter(ours)
        .filter_map(|e| match e {
            Event::Snapshot { entries, .. } => Some(entries),
            _ => None,
        })
        .flatten()
        .filter(|e| e.role == Role::User && e.origin == Origin::Operator)
        .map(|e| e.model_text().trim().to_string())
        .collect();
    // Claude Code's own summary, from the compacted transcript; without it nothing can be
    // compared and everything is injected.
    let summary = std::fs::read_to_string(&payload.transcript_path)
        .ok()
        .and_then(|text| formats::parse(&text, &payload.transcript_path.display().to_string()).ok())
        .and_then(|(t, _)| t.entries.into_iter().find(|e| e.origin == Origin::Summary))
        .map(|e| e.model_text());
    // What Cairn adds back counts against the policy's re-injection budget too.
    let policy = match &args.policy {
        Some(file) => Policy::parse(&std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?, &file.display().to_string())?,
        None => Policy::default_policy(),
    };
    let record = Record { checkpoint: &checkpoint, constraints: &constraints, operator: &operator, archive_id: &event.archive_id, conversation: key.as_str() };
    Ok(Some(render(notice, &record, summary.as_deref(), policy.lifecycle.reinject_budget_tokens)))
}

/// What Cairn recorded before Claude Code compacted.
pub struct Record<'a> {
    pub checkpoint: &'a Value,
    pub constraints: &'a [String],
    pub operator: &'a [String],
    pub archive_id: &'a str,
    pub conversation: &'a str,
}

/// Lowercase, whitespace collapsed: how "the summary mentions it" is judged.
pub fn normalized(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

/// Whether `summary` (normalized) mentions `item`: verbatim, or, for an item naming paths,
/// every path's file name (summaries often name only the file).
pub fn mentioned(summary: &str, item: &str) -> bool {
    let item = normalized(item);
    // A check's outcome tail (" — exit code 2") is Cairn's wording, not the summary's.
    let core = item.split(" — ").next().unwrap_or(&item);
    if summary.contains(core) {
        return true;
    }
    let paths: Vec<&str> = core.split_whitespace().filter(|w| w.contains('/') && !w.contains("://")).collect();
    !paths.is_empty() && paths.iter().all(|p| p.rsplit('/').next().is_some_and(|name| name.len() >= 4 && summary.contains(name)))
}

pub fn strings<'v>(checkpoint: &'v Value, pointer: &str) -> Vec<&'v str> {
    checkpoint.pointer(pointer).and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default()
}

/// The injected context, most important first, within Claude Code's limit and `budget`
/// tokens: operator constraints verbatim, then what the summary dropped (operator requests,
/// failing tests, files changed, identifiers), test status, the next action, and how to
/// recall the rest; a `notice` of Cairn's own (a hook that failed) goes before all of it.
pub fn render(notice: Option<&str>, record: &Record, summary: Option<&str>, budget: u64) -> String {
    let summary = summary.map(normalized);
    let dropped = |item: &str| summary.as_deref().is_none_or(|s| !mentioned(s, item));
    let checkpoint = record.checkpoint;
    let mut out = Budget::new(CONTEXT_LIMIT, budget);
    if let Some(notice) = notice {
        out.line(&format!("{notice}\n\n"));
    }
    out.line(&format!(
        "# Cairn: the record of this session before compaction\n\nCairn archived the whole conversation before Claude Code compacted it \
         (conversation {}, archive {}). Below: what the operator asked, verbatim, and what the compaction summary does not mention.\n",
        record.conversation, record.archive_id
    ));
    out.section("## Operator constraints (verbatim; still in force)", record.constraints.iter().map(|c| format!("- {c}")));
    let requests: Vec<&String> = record.operator.iter().filter(|m| dropped(m)).collect();
    out.section(
        "## Operator messages the summary leaves out (verbatim)",
        requests.iter().map(|m| format!("- {}", m.chars().take(1200).collect::<String>())),
    );
    let failed = strings(checkpoint, "/verification/failed");
    out.section("## Failing checks the summary does not mention", failed.iter().filter(|f| dropped(f)).map(|f| format!("- FAILED: {f}")));
    let modified = strings(checkpoint, "/files_modified");
    out.section("## Files changed that the summary does not name", modified.iter().filter(|f| dropped(f)).map(|f| format!("- {f}")));
    let artifacts: Vec<String> = checkpoint
        .pointer("/external_artifacts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|a| a.get("uri").and_then(Value::as_str))
        .filter(|u| dropped(u))
        .map(|u| format!("- {u}"))
        .collect();
    out.section("## Identifiers the summary does not keep", artifacts);
    let rejected: Vec<String> = checkpoint
        .pointer("/rejected_hypotheses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| Some(format!("- {} — rejected: {}", r.get("approach")?.as_str()?, r.get("reason")?.as_str()?)))
        .collect();
    out.section("## Approaches already rejected", rejected);
    let passed = strings(checkpoint, "/verification/passed");
    out.section("## Test status", failed.iter().map(|f| format!("- FAILED: {f}")).chain(passed.iter().map(|p| format!("- passed: {p}"))));
    if let Some(next) = checkpoint.pointer("/next_immediate_action").and_then(Value::as_str).filter(|n| !n.is_empty()) {
        out.section("## Next action in the record", [format!("- {next}")]);
    }
    out.line(&format!(
        "\n## Recall\nAnything else is in the archive: the `session_history` tool of the `cairn` MCP server (summary, search, page), \
         or `cairn history --conversation {} search TEXT` in a shell.",
        record.conversation
    ));
    out.text
}

/// Text that stops growing at a limit in chars and in tokens, saying how much it left out.
struct Budget {
    text: String,
    chars: usize,
    tokens: u64,
    tokenizer: cairn::tokenizer::Tokenizer,
}

impl Budget {
    fn new(chars: usize, tokens: u64) -> Self {
        Budget { text: String::new(), chars, tokens, tokenizer: cairn::tokenizer::Tokenizer::default() }
    }

    /// Room kept for the recall note at the end.
    const RESERVE_CHARS: usize = 400;
    const RESERVE_TOKENS: u64 = 120;

    /// Whether `more` fits after the text, keeping the reserve (or not, for the last line).
    fn fits(&self, more: &str, reserve: bool) -> bool {
        let (reserve_chars, reserve_tokens) = if reserve { (Self::RESERVE_CHARS, Self::RESERVE_TOKENS) } else { (0, 0) };
        self.text.chars().count() + more.chars().count() + reserve_chars < self.chars
            && u64::from(self.tokenizer.count(&format!("{}{more}", self.text))) + reserve_tokens <= self.tokens
    }

    fn line(&mut self, line: &str) {
        if self.fits(line, false) {
            self.text.push_str(line);
        }
    }

    fn section(&mut self, heading: &str, items: impl IntoIterator<Item = String>) {
        let items: Vec<String> = items.into_iter().collect();
        let heading = format!("\n{heading}\n");
        if items.is_empty() || !self.fits(&heading, true) {
            return;
        }
        self.text.push_str(&heading);
        for (n, item) in items.iter().enumerate() {
            let item = format!("{item}\n");
            if !self.fits(&item, true) {
                self.text.push_str(&format!("- … {} more in the archive\n", items.len() - n));
                return;
            }
            self.text.push_str(&item);
        }
    }
}
