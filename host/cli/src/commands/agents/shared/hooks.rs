//! What the hook handlers of Claude Code, Codex and Gemini CLI share: they send the same
//! payload fields, and each agent's handlers are this logic under its own words ([`Agent`]).
//! Payloads and outputs as Claude Code documents them
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
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use cairn::record::{CompactionEvent, Event};
use cairn::reinject::{answered, Retained};
use cairn::storage::{ConversationKey, Home};
use cairn::transcript::{formats, Entry, Origin, Role};
use serde::Deserialize;
use serde_json::{json, Value};

use super::HookArgs;
use crate::hook_failures::{self, Failure};
use crate::setup;

/// An agent whose hooks run Cairn's handlers: the name its hook failures are recorded under,
/// and its own words.
pub(crate) struct Agent {
    pub(crate) name: &'static str,
    pub(crate) title: &'static str,
    /// How the injected context says what happened ("Claude Code compacted it").
    pub(crate) compacted: &'static str,
    /// What the added context is compared with: the agent's summary alone, or (false) every
    /// entry it kept after compacting, so that nothing it kept is repeated.
    pub(crate) compares_summary_only: bool,
}

/// The first line of the injected context: with the archive id, how an injection is recognized.
pub(crate) const HEADING: &str = "# Cairn: the record of this session before compaction";

/// Claude Code's limit on injected context.
pub const CONTEXT_LIMIT: usize = 10_000;

/// The fields Cairn reads; the agents send more, which are ignored.
#[derive(Deserialize)]
pub(crate) struct Payload {
    #[serde(default)]
    pub(crate) session_id: Option<String>,
    pub(crate) transcript_path: PathBuf,
    #[serde(default)]
    pub(crate) cwd: Option<PathBuf>,
    #[serde(default)]
    pub(crate) source: Option<String>,
    #[serde(default)]
    pub(crate) trigger: Option<String>,
}

/// Runs `hook`'s `work` on the payload on `stdin`. A failure is recorded in the home, with the
/// session and transcript the payload names (when it names them), before it is returned.
pub(crate) fn recorded<T>(agent: &Agent, hook: &str, home: Option<PathBuf>, mut stdin: impl Read, work: impl FnOnce(Payload) -> Result<T>) -> Result<T> {
    let mut input = String::new();
    let what = || format!("reading {}'s hook payload on stdin", agent.title);
    let result = stdin.read_to_string(&mut input).with_context(what).and_then(|_| serde_json::from_str(&input).with_context(what)).and_then(work);
    if let Err(error) = &result {
        let value: Value = serde_json::from_str(&input).unwrap_or(Value::Null);
        let field = |name: &str| value.get(name).and_then(Value::as_str).map(String::from);
        let failure = Failure::new(agent.name, hook, field("session_id"), field("transcript_path"), error);
        hook_failures::record(&setup::home_path(home), failure);
    }
    result
}

/// A hook that adds context for the model: prints `context`'s text as
/// `hookSpecificOutput.additionalContext` of `event`, an earlier hook failure not yet told
/// first (and to the user as `systemMessage`); prints nothing when there is nothing to add.
pub(crate) fn add_context(agent: &Agent, hook: &str, event: &str, args: &HookArgs, stdin: impl Read, context: impl FnOnce(&Payload, Option<&str>) -> Result<Option<String>>) -> Result<()> {
    let home = setup::home_path(args.home.clone());
    // Told only once the hook has something to print: a hook that fails tells nothing.
    let untold = hook_failures::untold(&home, agent.name);
    let notice = hook_failures::notice(&untold);
    let context = recorded(agent, hook, args.home.clone(), stdin, |payload| context(&payload, notice.as_deref()))?;
    let Some(context) = context.or_else(|| notice.clone()) else { return Ok(()) };
    let mut output = json!({"hookSpecificOutput": {"hookEventName": event, "additionalContext": context}});
    if let Some(notice) = &notice {
        // Shown to the user; `additionalContext` goes to the model.
        output["systemMessage"] = json!(notice);
    }
    println!("{output}");
    hook_failures::mark_told(&home, &untold);
    Ok(())
}

/// One Cairn conversation per project, the one `cairn serve --project` started there serves:
/// Claude Code names the project in `CLAUDE_PROJECT_DIR` (Gemini CLI too, and in
/// `GEMINI_PROJECT_DIR`), else the session's `cwd` (Codex). Sessions are told apart in it by
/// their transcript path.
fn conversation(payload: &Payload) -> ConversationKey {
    let project = ["CLAUDE_PROJECT_DIR", "GEMINI_PROJECT_DIR"].iter().find_map(std::env::var_os).map(PathBuf::from).or_else(|| payload.cwd.clone()).unwrap_or_default();
    setup::project_conversation(&project)
}

/// Archives the whole session into the project's conversation before the agent compacts: a
/// handover archives every entry and computes the deterministic checkpoint; the agent replaces
/// the context with its own summary, and the context hook adds what it left out. The number of
/// entries archived, and the report.
pub(crate) fn archive(args: HookArgs, payload: &Payload) -> Result<(usize, cairn::record::CompactionReport)> {
    let session =
        setup::SessionArgs { file: payload.transcript_path.clone(), policy: args.policy, home: args.home, conversation: Some(conversation(payload).to_string()), plugin_dir: Vec::new() }.open()?;
    let setup::Session { name, transcript, policy, cairn, mut store, .. } = session;
    let report = cairn.handover(&policy, &mut store, &transcript, &name)?;
    Ok((transcript.entries.len(), report))
}

/// The context to add after a compaction (none when there is nothing of this session's to
/// add), `notice` first.
pub(crate) fn context(agent: &Agent, args: &HookArgs, payload: &Payload, notice: Option<&str>) -> Result<Option<String>> {
    if payload.source.as_deref().is_some_and(|s| s != "compact") {
        return Ok(None);
    }
    let Some(record) = SessionRecord::load(args, payload)? else { return Ok(None) };
    // The context as the agent holds it after compacting: its own summary and what it kept.
    // Without it nothing can be compared and everything is injected.
    let kept =
        std::fs::read_to_string(&payload.transcript_path).ok().and_then(|text| formats::parse(&text, &payload.transcript_path.display().to_string()).ok()).map(|(t, _)| t.entries).unwrap_or_default();
    let summary = kept.iter().find(|e| e.origin == Origin::Summary).map(Entry::model_text);
    let kept = if agent.compares_summary_only { kept.into_iter().filter(|e| e.origin == Origin::Summary).collect() } else { kept };
    Ok(Some(record.render(agent, notice, summary.as_deref(), &kept, reinject_budget(args.policy.as_deref())?)))
}

/// What Cairn archived of one agent session in the project's conversation: the session's
/// snapshots (its transcript path names them) and the compactions committed since the first.
pub(crate) struct SessionRecord {
    conversation: ConversationKey,
    events: Vec<Event>,
    source: String,
    /// The session's first snapshot.
    first: usize,
    /// The latest committed compaction since (there is one).
    latest: usize,
}

impl SessionRecord {
    /// None when nothing of this session was archived and committed.
    pub(crate) fn load(args: &HookArgs, payload: &Payload) -> Result<Option<Self>> {
        let home = Home::open(&setup::home_path(args.home.clone()))?;
        let conversation = conversation(payload);
        if !home.conversations()?.contains(&conversation) {
            return Ok(None);
        }
        let events = home.existing_conversation(&conversation)?.events().to_vec();
        let source = payload.transcript_path.display().to_string();
        let ours = |e: &Event| matches!(e, Event::Snapshot { source: s, .. } if *s == source);
        let Some(first) = events.iter().position(ours) else { return Ok(None) };
        let committed = |e: &Event| matches!(e, Event::Compaction(c) if c.committed_by.is_some());
        let Some(latest) = events[first..].iter().rposition(committed).map(|i| first + i) else { return Ok(None) };
        Ok(Some(SessionRecord { conversation, events, source, first, latest }))
    }

    pub(crate) fn latest(&self) -> &CompactionEvent {
        match &self.events[self.latest] {
            Event::Compaction(c) => c,
            _ => unreachable!("`latest` is a compaction"),
        }
    }

    /// The session's snapshots, oldest first.
    pub(crate) fn snapshots(&self) -> impl DoubleEndedIterator<Item = &[Entry]> {
        self.events.iter().filter_map(|e| match e {
            Event::Snapshot { source, entries, .. } if *source == self.source => Some(entries.as_slice()),
            _ => None,
        })
    }

    /// The injected context (see [`render`]) for the latest compaction, with the operator's
    /// constraints of every compaction of the session (a rule from before an earlier one is
    /// no longer in the context the latest checkpoint was computed from) and every message the
    /// operator typed, once. Only what the agent lost: an item `kept` (the context as the agent
    /// holds it now) still holds word for word is left out, and so is a next action naming a
    /// request the agent has answered.
    pub(crate) fn render(&self, agent: &Agent, notice: Option<&str>, summary: Option<&str>, kept: &[Entry], budget: u64) -> String {
        let retained = Retained::of(kept);
        let mut constraints: Vec<String> = Vec::new();
        for c in self.events[self.first..].iter().filter_map(|e| match e {
            Event::Compaction(c) if c.committed_by.is_some() => Some(c),
            _ => None,
        }) {
            let value: Value = c.checkpoint.as_deref().and_then(|c| serde_json::from_str(c).ok()).unwrap_or(Value::Null);
            for rule in strings(&value, "/negative_constraints") {
                if !constraints.iter().any(|r| r == rule) && !retained.holds(rule) {
                    constraints.push(rule.to_string());
                }
            }
        }
        let mut operator: Vec<String> = Vec::new();
        for e in self.snapshots().flatten().filter(|e| e.role == Role::User && e.origin == Origin::Operator) {
            let typed = e.model_text().trim().to_string();
            // Held as shown: an agent that keeps a long message cut (Codex keeps its head and
            // tail) still holds all the context would show of it.
            if !typed.is_empty() && !operator.contains(&typed) && !retained.holds(shown(&typed).trim_end_matches(CUT_MARK)) {
                operator.push(typed);
            }
        }
        let latest = self.latest();
        // Pins are carried verbatim: the agent's summary replaced them, so they come back whole.
        let pinned: Vec<String> = latest
            .pinned
            .iter()
            .filter_map(|id| self.snapshots().flatten().find(|e| &e.id == id))
            .map(|e| e.model_text().trim().to_string())
            .filter(|text| !text.is_empty() && !retained.holds(text))
            .collect();
        let mut checkpoint: Value = latest.checkpoint.as_deref().and_then(|c| serde_json::from_str(c).ok()).unwrap_or(Value::Null);
        // The next action is the latest request as the record saw it: answered before the
        // compaction (in the latest archived history) or since (in what the agent holds now),
        // it would send the model back to done work.
        let next = checkpoint.pointer("/next_immediate_action").and_then(Value::as_str).unwrap_or_default().to_string();
        if answered(self.snapshots().next_back().unwrap_or_default(), &next) || answered(kept, &next) {
            checkpoint["next_immediate_action"] = json!("");
        }
        let record = Record {
            pinned: &pinned,
            checkpoint: &checkpoint,
            constraints: &constraints,
            operator: &operator,
            archive_id: &latest.archive_id,
            conversation: self.conversation.as_str(),
            compacted: agent.compacted,
        };
        render(notice, &record, summary, budget)
    }
}

/// The policy's re-injection budget (`[lifecycle] reinject_budget_tokens`): what Cairn adds
/// back counts against it.
pub(crate) fn reinject_budget(policy: Option<&Path>) -> Result<u64> {
    Ok(setup::policy_settings(policy)?.lifecycle.reinject_budget_tokens)
}

/// How much of one operator message the context shows (the archive has the rest).
const OPERATOR_CHARS: usize = 1200;

/// Said where an operator message is cut: the agent can get the rest back.
const CUT_MARK: &str = " … (cut here: the whole message is in the archive, and session_history reads it)";

/// The part of an operator message the context shows, marked where it is cut.
fn shown(message: &str) -> String {
    // The mark tells the agent that session_history reads the whole back from the archive.
    let head: String = message.chars().take(OPERATOR_CHARS).collect();
    if head.len() < message.len() {
        head + CUT_MARK
    } else {
        head
    }
}

/// What Cairn recorded before the agent compacted.
pub struct Record<'a> {
    /// The text of each pinned entry, verbatim.
    pub pinned: &'a [String],
    pub checkpoint: &'a Value,
    pub constraints: &'a [String],
    pub operator: &'a [String],
    pub archive_id: &'a str,
    pub conversation: &'a str,
    /// How the agent's compaction is told ("Claude Code compacted it").
    pub compacted: &'a str,
}

/// Lowercase, whitespace collapsed: how "the summary mentions it" is judged.
pub use cairn::reinject::normalized;

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
        "{HEADING}\n\nCairn archived the whole conversation before {} \
         (conversation {}, archive {}). Below: what the operator asked, verbatim, and what the compaction summary does not mention.\n",
        record.compacted, record.conversation, record.archive_id
    ));
    out.section("## Pinned (verbatim; kept through every compaction)", record.pinned.iter().map(|p| format!("{p}\n")));
    out.section("## Operator constraints (verbatim; still in force)", record.constraints.iter().map(|c| format!("- {c}")));
    let requests: Vec<&String> = record.operator.iter().filter(|m| dropped(m)).collect();
    out.section("## Operator messages the summary leaves out (verbatim)", requests.iter().map(|m| format!("- {}", shown(m))));
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
        self.text.chars().count() + more.chars().count() + reserve_chars < self.chars && u64::from(self.tokenizer.count(&format!("{}{more}", self.text))) + reserve_tokens <= self.tokens
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A long operator message comes back cut where the context's share ends, saying so and
    /// where the whole is; a short one comes back whole, unmarked.
    #[test]
    fn a_cut_operator_message_says_where_the_whole_is() {
        let long = format!("Never touch the staging database. {}", "detail ".repeat(400));
        let record = Record {
            pinned: &[],
            checkpoint: &Value::Null,
            constraints: &[],
            operator: &[long.clone(), "Run the tests.".into()],
            archive_id: "a-0123456789abcdef",
            conversation: "c",
            compacted: "Claude Code compacted it",
        };
        let context = render(None, &record, Some("nothing of either"), 100_000);
        let shown_long = context.lines().find(|l| l.starts_with("- Never touch")).expect("the long message is re-added");
        assert!(shown_long.ends_with(CUT_MARK) && shown_long.contains(&long[..OPERATOR_CHARS]) && !shown_long.contains(&long), "{shown_long}");
        assert!(context.lines().any(|l| l == "- Run the tests."), "{context}");
    }
}
