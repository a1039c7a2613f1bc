//! The harness API's requests and answers: the stable wire shape every shell speaks (MCP's
//! tool schemas are generated from these types; the Python and Node packages hand them across
//! as dicts and objects). Field names are stable; a new field is optional.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::lifecycle::Usage;
use crate::record::{CompactionReport, StepReport};
use crate::transcript::Transcript;

/// `compact` and `handover`: one run of the policy's chain (or handover chain) on a transcript.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompactRequest {
    /// Conversation key: 1-64 chars of a-z 0-9 - _ . (its record, archive and lock).
    pub conversation: String,
    /// The session file's text: Pi, Claude Code, Codex or Gemini CLI session JSONL, an OpenCode export, OpenAI or Anthropic JSON, or Cairn JSONL (auto-detected).
    /// Exactly one of `transcript` and `path`.
    pub transcript: Option<String>,
    /// The session file itself, read by the server instead of `transcript` (no size limit on
    /// the request). Only over stdio, where harness and server share a disk; refused over HTTP.
    pub path: Option<String>,
    /// What must survive, verbatim.
    pub preserve: Option<String>,
    /// How to resume afterwards.
    pub resume: Option<String>,
    /// Return the compacted context as `transcript` [default true]; a harness that applies
    /// `first_kept_entry_id` + `prefix_summary` (Pi) saves the bytes.
    pub include_transcript: Option<bool>,
    /// The usable context window in tokens (window less output reserve): the result is held
    /// to it, or reported `degraded` with `over_window` saying why nothing could make it fit.
    pub window: Option<u64>,
    /// The context this compaction may leave, in tokens (overrides the policy's
    /// `compaction.budget_tokens`): the checkpoint, placeholders and verbatim tail share it,
    /// filled by value; `left_out` says what did not fit.
    pub budget: Option<u64>,
    /// Report what would be committed, writing nothing (no record, no archive) [default false].
    pub dry_run: Option<bool>,
    /// The context as the agent measured it (`recorded`: the usage its transcript holds, or a
    /// `reported_tokens` figure): what it bills beyond the transcript (system prompt, tool
    /// schemas) is taken off `window` [default "counted": the transcript is all there is].
    pub usage: Option<UsageArg>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Step {
    pub plugin: String,
    /// ok, trap, timeout, oom, denied, invalid, invariant, no-progress, unavailable, rejected.
    pub outcome: String,
    pub millis: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_after: Option<u64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<String>,
}

/// One compaction or handover.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Report {
    pub tokens_before: u64,
    pub tokens_after: u64,
    pub steps: Vec<Step>,
    /// The plugin whose outcome was committed; null when nothing was.
    pub committed_by: Option<String>,
    /// Only the host's last resort could commit: the oldest history was dropped (it stays archived).
    pub degraded: bool,
    /// An outcome was committed: the context changed and the archive below was written.
    pub committed: bool,
    /// The archive this compaction wrote; null when nothing was committed.
    pub archive_id: Option<String>,
    /// Why nothing was committed, in one line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_committed: Option<String>,
    /// Why the context is still above the usable window or budget (`degraded` is then set).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub over_window: Option<String>,
    /// What the budget left out of the checkpoint the context shows: items per section.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub left_out: BTreeMap<String, u64>,
    /// `artifact://` URIs of what was set aside.
    pub artifacts: Vec<String>,
    pub replaced: usize,
    pub forgotten: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rejected: Option<String>,
    /// Handover: the text that starts the fresh session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<String>,
    /// Entries pinned for this run (by id, `!pin` or a policy rule), carried verbatim.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pinned: Vec<String>,
    /// Pins refused because they would not fit the pins budget, each with why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pins_refused: Vec<String>,
    /// A dry run: what would have been committed; nothing was written. Absent otherwise.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// A dry run's prompt-cache rewrite cost per priced model.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cache_rewrite: Vec<CacheRewrite>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CacheRewrite {
    pub model: String,
    /// The first call after the compaction: the whole new context written to the cache.
    pub next_call_usd: f64,
    /// The same call without the compaction: the old context read from the cache.
    pub next_call_uncompacted_usd: f64,
    /// Calls until the smaller context pays the rewrite back; null: never at this price.
    pub break_even_calls: Option<u64>,
}

/// A report with the new working context.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Compacted {
    #[serde(flatten)]
    pub report: Report,
    /// The format of `transcript`: the caller's when Cairn writes it (cairn, pi, openai, anthropic), else `cairn`.
    pub format: &'static str,
    /// The compacted working context.
    pub transcript: String,
    /// The first entry of the verbatim tail: from it on, nothing changed. Null when nothing was committed.
    pub first_kept_entry_id: Option<String>,
    /// The compacted context before that entry as text, for a harness that replaces a prefix by
    /// a summary (Pi's compaction entry).
    pub prefix_summary: String,
    /// Line kinds of the transcript its reader does not know; absent when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unrecognized: Option<UnrecognizedKinds>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum UsageWord {
    /// The host counts the whole context.
    Counted,
    /// Nothing automatic happens.
    Unknown,
    /// The usage the transcript records (Pi, Claude Code, Codex), else counted.
    Recorded,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum UsageArg {
    Word(UsageWord),
    /// The provider's last billed figure, plus the host's count of the entries after it.
    Reported {
        reported_tokens: u64,
        #[serde(default)]
        entries_after: usize,
    },
}

impl UsageArg {
    /// The measure an argument names, for `transcript` [default: counted].
    pub(super) fn resolve(arg: Option<UsageArg>, transcript: &Transcript) -> Usage {
        match arg.unwrap_or(UsageArg::Word(UsageWord::Counted)) {
            UsageArg::Word(UsageWord::Counted) => Usage::Counted,
            UsageArg::Word(UsageWord::Unknown) => Usage::Unknown,
            UsageArg::Word(UsageWord::Recorded) => Usage::recorded_or_counted(&transcript.entries),
            UsageArg::Reported { reported_tokens, entries_after } => Usage::Reported { tokens: reported_tokens, entries_after },
        }
    }
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BoundaryRequest {
    pub conversation: String,
    pub turn: u32,
    /// The working context as the model would see it next. Exactly one of `transcript` and `path`.
    pub transcript: Option<String>,
    /// A file holding the working context, read by the server instead of `transcript`. Only
    /// over stdio, where harness and server share a disk; refused over HTTP.
    pub path: Option<String>,
    /// The model's context window in tokens.
    pub window: u64,
    /// Tokens kept free for the reply [default 16384].
    pub reserve: Option<u64>,
    /// [default "counted"]
    pub usage: Option<UsageArg>,
    /// [default true]
    pub turn_complete: Option<bool>,
    /// [default false]
    pub tool_call_outstanding: Option<bool>,
    /// Return the working context as `transcript` [default true].
    pub include_transcript: Option<bool>,
    /// Decide and run as this boundary would, writing nothing (no record, state or notices) [default false].
    pub dry_run: Option<bool>,
    /// The `acknowledged` entry id the previous boundary returned: `transcript` then holds only
    /// the entries appended after it, and the server rebuilds the rest from its record. A
    /// history that is no longer the acknowledged one fails with `diverged: …`: send it whole once.
    pub since: Option<String>,
    /// With `since`: the entries' format, when a fragment does not show it (`pi`: session lines
    /// without the header, each with its `id`) [default: detected].
    pub format: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ActionTaken {
    /// none, advised, compacted, handed-over, deferred, paused or failed.
    pub kind: String,
    /// Why: for `deferred` the rule that held maintenance back, for `none` why nothing was
    /// needed (the cooldown, the usage the trigger saw, usage unknown).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct BoundaryAnswer {
    pub turn: u32,
    pub action: ActionTaken,
    /// A line to append to the turn for the agent.
    pub advice: Option<String>,
    /// Context tokens as the trigger saw them; null when unknown.
    pub usage: Option<u64>,
    pub report: Option<Report>,
    /// Notices queued by this boundary (take them with `notices_take`).
    pub notices: Vec<String>,
    pub format: &'static str,
    /// The working context after this boundary ("" when not asked for).
    pub transcript: String,
    /// As `compact`'s, when this boundary compacted or handed over.
    pub first_kept_entry_id: Option<String>,
    pub prefix_summary: String,
    /// Files the last compaction described that changed since (`serve --workspace`).
    pub stale_files: Vec<StaleFile>,
    /// Line kinds of the transcript its reader does not know; absent when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unrecognized: Option<UnrecognizedKinds>,
    /// A dry run: nothing was written. Absent otherwise.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// The last entry of the working context after this boundary: the next call's `since`.
    /// Null when the context cannot be followed incrementally (send it whole next time).
    pub acknowledged: Option<String>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UndoRequest {
    pub conversation: String,
    /// The compaction to take back (and every later one) [default: the latest].
    pub archive_id: Option<String>,
    /// The working context now, in any format Cairn reads [default: the context the record knows].
    pub transcript: Option<String>,
    /// A file holding the working context now, read by the server instead of `transcript`.
    /// Only over stdio, where harness and server share a disk; refused over HTTP.
    pub path: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Restored {
    /// Archive ids taken back, latest first.
    pub undone: Vec<String>,
    pub tokens_before: u64,
    pub tokens_after: u64,
    /// The caller's format when Cairn writes it, else `cairn`.
    pub format: &'static str,
    /// The restored context.
    pub transcript: String,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PinRequest {
    pub conversation: String,
    /// Entry ids, as the transcript names them.
    pub ids: Vec<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Pins {
    /// The ids pinned now.
    pub pinned: Vec<String>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShowRequest {
    pub conversation: String,
    /// One compaction's archive id; without it, the timeline.
    pub archive_id: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Shown {
    /// Without `archive_id`: every compaction, undo and pin, oldest first, and the pins now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeline: Option<serde_json::Value>,
    /// With `archive_id`: that compaction part by part (kept, summarized, summaries, elided, dropped) and its steps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compaction: Option<serde_json::Value>,
}

/// Kinds counted by name: `skipped` carried nothing for the model, `kept` carried a message
/// whose text was kept as an opaque entry.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct UnrecognizedKinds {
    pub skipped: BTreeMap<String, u32>,
    pub kept: BTreeMap<String, u32>,
}

impl UnrecognizedKinds {
    pub(super) fn of(t: &Transcript) -> Option<Self> {
        let u = &t.unrecognized;
        (!u.is_empty()).then(|| UnrecognizedKinds { skipped: u.skipped.clone(), kept: u.kept.clone() })
    }
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct StaleFile {
    /// Relative to the workspace.
    pub path: String,
    /// `changed` or `deleted`.
    pub change: String,
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MaintenanceKind {
    Compact,
    Handover,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MaintenanceRequest {
    pub conversation: String,
    pub kind: MaintenanceKind,
    #[serde(default)]
    pub preserve: String,
    #[serde(default)]
    pub resume: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Recorded {
    pub recorded: bool,
    pub message: String,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConversationRequest {
    pub conversation: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Notice {
    pub id: String,
    /// compacted, handed-over, failed, paused, degraded, plugin-failed, resumed, or policy (the server's).
    pub kind: String,
    pub text: String,
    /// Milliseconds since the Unix epoch.
    pub at: u64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Notices {
    pub notices: Vec<Notice>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AckRequest {
    pub conversation: String,
    pub ids: Vec<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Acknowledged {
    pub acknowledged: usize,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ArtifactRequest {
    /// `artifact://a-<16 hex>/<n>`
    pub uri: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Artifact {
    pub uri: String,
    /// The stored original, byte for byte.
    pub content: String,
    pub bytes: usize,
}

/// `switches`: per-conversation switches over the policy; an absent one is left as it is.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SwitchesRequest {
    pub conversation: String,
    /// Automatic maintenance on or off (agent requests still run).
    pub maintenance: Option<bool>,
    /// Automatic handover on or off (off: the trigger's handovers become compactions).
    pub auto_handover: Option<bool>,
    /// Lift an automatic pause now.
    pub resume: Option<bool>,
}

/// The switches set on a conversation (null: the policy decides).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SwitchesSet {
    pub maintenance: Option<bool>,
    pub auto_handover: Option<bool>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Switches {
    pub overlay: SwitchesSet,
    pub paused: bool,
}

impl From<&CompactionReport> for Report {
    fn from(run: &CompactionReport) -> Self {
        Report {
            tokens_before: run.tokens_before,
            tokens_after: run.tokens_after,
            steps: run.steps.iter().map(Step::from).collect(),
            committed_by: run.committed_by.clone(),
            degraded: run.degraded,
            committed: run.committed,
            archive_id: run.archive.clone(),
            not_committed: run.not_committed.clone(),
            over_window: run.over_window.clone(),
            left_out: run.left_out.clone(),
            artifacts: run.artifacts.clone(),
            replaced: run.replaced,
            forgotten: run.forgotten.clone(),
            rejected: run.rejected.clone(),
            seed: run.seed.clone(),
            pinned: run.pinned.clone(),
            pins_refused: run.pins_refused.clone(),
            dry_run: run.dry_run,
            cache_rewrite: run
                .cache_rewrite
                .iter()
                .map(|c| CacheRewrite { model: c.model.to_string(), next_call_usd: c.next_call_usd, next_call_uncompacted_usd: c.next_call_uncompacted_usd, break_even_calls: c.break_even_calls })
                .collect(),
        }
    }
}

impl From<&StepReport> for Step {
    fn from(step: &StepReport) -> Self {
        Step { plugin: step.plugin.clone(), outcome: step.outcome.to_string(), millis: step.millis, message: step.message.clone(), tokens_after: step.tokens_after, refused: step.refused.clone() }
    }
}
