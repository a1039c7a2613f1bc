//! Contract 0.1.0 ⇄ domain conversions, both ways. Nothing else converts.

use wasmtime::component::{ComponentType, Lower};

use super::bindings::{archive as wit_archive, model as wit_model, types as wit};
use crate::capabilities::ArchiveError;
use crate::chain::{StepError, StepInput, StrategyOutput};
use crate::model::{ChatMessage, ModelError, ModelRequest};
use crate::record::{clip_message, AgentRequest, Boundary, CommitDecision, OutcomeClass, Proposal, Purpose, RequestKind, TriggerDecision, TriggerInput};
use crate::storage::archive::{EntrySlice, Hit, Hits, Page, ReadError, Summary};
use crate::transcript::{Entry, Origin, Part, Role};

// ---- entries ----------------------------------------------------------------------------

/// The request a strategy gets, lowered into the guest straight from the host's entries: a
/// 30 MB session crosses into the component once, not first into an owned copy of itself.
/// Field for field `compact-request` of the contract (checked when the export is looked up).
#[derive(ComponentType, Lower)]
#[component(record)]
pub struct CompactRequest<'a> {
    purpose: wit::RequestKind,
    #[component(name = "archive-id")]
    archive_id: &'a str,
    entries: Vec<EntryRef<'a>>,
    #[component(name = "protected-head")]
    protected_head: u32,
    #[component(name = "tail-start")]
    tail_start: u32,
    #[component(name = "token-target")]
    token_target: u64,
    preserve: Option<&'a str>,
    resume: Option<&'a str>,
    #[component(name = "previous-checkpoint")]
    previous_checkpoint: Option<&'a str>,
    config: &'a str,
}

/// `entry`, borrowed from a domain entry.
#[derive(ComponentType, Lower)]
#[component(record)]
pub struct EntryRef<'a> {
    id: &'a str,
    role: wit::Role,
    origin: wit::Origin,
    parts: Vec<PartRef<'a>>,
    tokens: u32,
    turn: u32,
    pinned: bool,
}

/// `part`, borrowed from a domain part.
#[derive(ComponentType, Lower)]
#[component(variant)]
pub enum PartRef<'a> {
    #[component(name = "text")]
    Text(&'a str),
    #[component(name = "thinking")]
    Thinking(&'a str),
    #[component(name = "tool-call")]
    ToolCall(ToolCallRef<'a>),
    #[component(name = "tool-result")]
    ToolResult(ToolResultRef<'a>),
    #[component(name = "image")]
    Image(&'a str),
    #[component(name = "placeholder")]
    Placeholder(PlaceholderRef<'a>),
}

#[derive(ComponentType, Lower)]
#[component(record)]
pub struct ToolCallRef<'a> {
    id: &'a str,
    name: &'a str,
    args: &'a str,
}

#[derive(ComponentType, Lower)]
#[component(record)]
pub struct ToolResultRef<'a> {
    #[component(name = "call-id")]
    call_id: &'a str,
    content: &'a str,
    #[component(name = "is-error")]
    is_error: bool,
    elided: Option<&'a str>,
}

#[derive(ComponentType, Lower)]
#[component(record)]
pub struct PlaceholderRef<'a> {
    text: &'a str,
    uri: Option<&'a str>,
}

impl<'a> From<&'a Entry> for EntryRef<'a> {
    fn from(e: &'a Entry) -> Self {
        EntryRef {
            id: &e.id,
            role: match e.role {
                Role::System => wit::Role::System,
                Role::User => wit::Role::User,
                Role::Assistant => wit::Role::Assistant,
                Role::Tool => wit::Role::Tool,
            },
            origin: match e.origin {
                Origin::Operator => wit::Origin::Operator,
                Origin::Agent => wit::Origin::Agent,
                Origin::Tool => wit::Origin::Tool,
                Origin::Harness => wit::Origin::Harness,
                Origin::Summary => wit::Origin::Summary,
            },
            parts: e.parts.iter().map(PartRef::from).collect(),
            tokens: e.tokens,
            turn: e.turn,
            pinned: e.pinned,
        }
    }
}

impl<'a> From<&'a Part> for PartRef<'a> {
    fn from(p: &'a Part) -> Self {
        match p {
            Part::Text { text } => PartRef::Text(text),
            Part::Thinking { text } => PartRef::Thinking(text),
            Part::ToolCall { id, name, args } => PartRef::ToolCall(ToolCallRef { id, name, args }),
            Part::ToolResult { call_id, content, is_error, elided } => PartRef::ToolResult(ToolResultRef { call_id, content, is_error: *is_error, elided: elided.as_deref() }),
            Part::Image { reference } => PartRef::Image(reference),
            Part::Placeholder { text, uri } => PartRef::Placeholder(PlaceholderRef { text, uri: uri.as_deref() }),
        }
    }
}

impl From<wit::Entry> for Entry {
    fn from(e: wit::Entry) -> Self {
        Entry {
            id: e.id,
            role: match e.role {
                wit::Role::System => Role::System,
                wit::Role::User => Role::User,
                wit::Role::Assistant => Role::Assistant,
                wit::Role::Tool => Role::Tool,
            },
            origin: match e.origin {
                wit::Origin::Operator => Origin::Operator,
                wit::Origin::Agent => Origin::Agent,
                wit::Origin::Tool => Origin::Tool,
                wit::Origin::Harness => Origin::Harness,
                wit::Origin::Summary => Origin::Summary,
            },
            parts: e.parts.into_iter().map(Part::from).collect(),
            tokens: e.tokens,
            turn: e.turn,
            pinned: e.pinned,
            // Host-side metadata the contract does not carry; `invariants::apply` restores
            // it on entries a plugin hands back.
            response: None,
            reported_tokens: None,
        }
    }
}

impl From<wit::Part> for Part {
    fn from(p: wit::Part) -> Self {
        match p {
            wit::Part::Text(text) => Part::Text { text },
            wit::Part::Thinking(text) => Part::Thinking { text },
            wit::Part::ToolCall(c) => Part::ToolCall { id: c.id, name: c.name, args: c.args },
            wit::Part::ToolResult(r) => Part::ToolResult { call_id: r.call_id, content: r.content, is_error: r.is_error, elided: r.elided },
            wit::Part::Image(reference) => Part::Image { reference },
            wit::Part::Placeholder(p) => Part::Placeholder { text: p.text, uri: p.uri },
        }
    }
}

// ---- strategy ---------------------------------------------------------------------------

pub fn compact_request<'a>(input: &'a StepInput<'_>, config: &'a str) -> CompactRequest<'a> {
    CompactRequest {
        purpose: match input.purpose {
            Purpose::Compact => wit::RequestKind::Compact,
            Purpose::Handover => wit::RequestKind::Handover,
        },
        archive_id: input.archive_id,
        entries: input.entries.iter().map(EntryRef::from).collect(),
        protected_head: input.window.protected_head as u32,
        tail_start: input.window.tail_start as u32,
        token_target: input.window.token_target,
        preserve: input.preserve,
        resume: input.resume,
        previous_checkpoint: input.previous_checkpoint,
        config,
    }
}

pub fn strategy_result(result: Result<wit::Outcome, wit::StrategyError>) -> Result<StrategyOutput, StepError> {
    match result {
        Ok(o) => Ok(StrategyOutput {
            first: o.replaced.first,
            last: o.replaced.last,
            replacement: o.replacement.into_iter().map(Entry::from).collect(),
            checkpoint: o.checkpoint,
            seed: o.seed,
            retrospective: o.retrospective,
        }),
        // A plugin's own words are clipped before they reach a log line or the record.
        Err(wit::StrategyError::Unavailable(why)) => Err(StepError::Unavailable(clip_message(&why))),
        Err(wit::StrategyError::NothingToDo(why)) => Err(StepError::NoProgress(clip_message(&why))),
        Err(wit::StrategyError::Failed(why)) => Err(StepError::Invalid(format!("plugin reported failure: {}", clip_message(&why)))),
    }
}

// ---- trigger and commit policy ----------------------------------------------------------

impl From<&AgentRequest> for wit::AgentRequest {
    fn from(r: &AgentRequest) -> Self {
        wit::AgentRequest {
            kind: match r.kind {
                RequestKind::Compact => wit::RequestKind::Compact,
                RequestKind::Handover => wit::RequestKind::Handover,
            },
            preserve: r.preserve.clone(),
            resume: r.resume.clone(),
        }
    }
}

impl From<OutcomeClass> for wit::OutcomeClass {
    fn from(c: OutcomeClass) -> Self {
        match c {
            OutcomeClass::Ok => wit::OutcomeClass::Ok,
            OutcomeClass::Trap => wit::OutcomeClass::Trap,
            OutcomeClass::Timeout => wit::OutcomeClass::Timeout,
            OutcomeClass::Oom => wit::OutcomeClass::Oom,
            OutcomeClass::Denied => wit::OutcomeClass::Denied,
            OutcomeClass::Invalid => wit::OutcomeClass::Invalid,
            OutcomeClass::Invariant => wit::OutcomeClass::Invariant,
            OutcomeClass::NoProgress => wit::OutcomeClass::NoProgress,
            OutcomeClass::Unavailable => wit::OutcomeClass::Unavailable,
            OutcomeClass::Rejected => wit::OutcomeClass::Rejected,
        }
    }
}

pub fn trigger_input(input: &TriggerInput, config: &str) -> wit::TriggerInput {
    wit::TriggerInput {
        usage: wit::Usage { context_tokens: input.context_tokens, window: input.window, reserve: input.reserve },
        turn: input.turn,
        turns_since_maintenance: input.turns_since_maintenance,
        cooldown_left: input.cooldown_left,
        pending_request: input.pending.as_ref().map(Into::into),
        recent_outcomes: input.recent.iter().map(|c| (*c).into()).collect(),
        config: config.to_string(),
    }
}

pub fn commit_question(boundary: &Boundary, proposal: &Proposal, config: &str) -> (wit::Boundary, wit::Proposal) {
    (
        wit::Boundary { turn: boundary.turn, turn_complete: boundary.turn_complete, tool_call_outstanding: boundary.tool_call_outstanding, config: config.to_string() },
        wit::Proposal {
            strategy: proposal.strategy.clone(),
            tokens_before: proposal.tokens_before,
            tokens_after: proposal.tokens_after,
            replaced_ids: proposal.replaced_ids.clone(),
            kept_summary_ids: proposal.kept_summary_ids.clone(),
        },
    )
}

impl From<wit::TriggerDecision> for TriggerDecision {
    fn from(d: wit::TriggerDecision) -> Self {
        match d {
            wit::TriggerDecision::None => TriggerDecision::None,
            wit::TriggerDecision::Advise(text) => TriggerDecision::Advise(text),
            wit::TriggerDecision::Compact(reason) => TriggerDecision::Compact(reason),
            wit::TriggerDecision::Handover(reason) => TriggerDecision::Handover(reason),
        }
    }
}

impl From<wit::CommitDecision> for CommitDecision {
    fn from(d: wit::CommitDecision) -> Self {
        match d {
            wit::CommitDecision::Commit => CommitDecision::Commit,
            wit::CommitDecision::Defer(why) => CommitDecision::Defer(why),
            wit::CommitDecision::Reject(why) => CommitDecision::Reject(why),
        }
    }
}

// ---- capabilities -----------------------------------------------------------------------

pub fn level(level: super::bindings::log::Level) -> tracing::Level {
    use super::bindings::log::Level;
    match level {
        Level::Trace => tracing::Level::TRACE,
        Level::Debug => tracing::Level::DEBUG,
        Level::Info => tracing::Level::INFO,
        Level::Warn => tracing::Level::WARN,
        Level::Error => tracing::Level::ERROR,
    }
}

pub fn model_request(request: wit_model::CompletionRequest) -> ModelRequest {
    ModelRequest { messages: request.messages.into_iter().map(|m| ChatMessage { role: m.role, content: m.content }).collect(), max_tokens: request.max_tokens }
}

impl From<ModelError> for wit_model::ModelError {
    fn from(e: ModelError) -> Self {
        match e {
            ModelError::Unavailable(why) => wit_model::ModelError::Unavailable(why),
            ModelError::Timeout => wit_model::ModelError::Timeout,
            ModelError::Failed(why) => wit_model::ModelError::Failed(why),
            // The contract has no variant of its own for it: the stable text is the signal.
            too_long @ ModelError::TooLong { .. } => wit_model::ModelError::Failed(too_long.to_string()),
        }
    }
}

impl From<ArchiveError> for wit_archive::ArchiveError {
    fn from(e: ArchiveError) -> Self {
        match e {
            ArchiveError::Denied(refusal) => wit_archive::ArchiveError::Denied(refusal.to_string()),
            ArchiveError::Read(ReadError::NotFound(m)) => wit_archive::ArchiveError::NotFound(m),
            ArchiveError::Read(ReadError::Invalid(m)) | ArchiveError::TooLarge(m) => wit_archive::ArchiveError::Invalid(m),
            ArchiveError::Read(ReadError::Unreadable(m)) | ArchiveError::Unavailable(m) => wit_archive::ArchiveError::Unavailable(m),
        }
    }
}

impl From<Summary> for wit_archive::Summary {
    fn from(s: Summary) -> Self {
        wit_archive::Summary { text: s.text, truncated: s.truncated }
    }
}

impl From<Hits> for wit_archive::Hits {
    fn from(found: Hits) -> Self {
        wit_archive::Hits { hits: found.hits.into_iter().map(hit).collect(), total: saturate(found.total), next_offset: found.next_offset.map(saturate), clamped: found.clamped }
    }
}

impl From<Page> for wit_archive::Page {
    fn from(page: Page) -> Self {
        wit_archive::Page {
            archive_id: page.archive_id,
            entries: page.entries.into_iter().map(slice).collect(),
            total: saturate(page.total),
            next_offset: page.next_offset.map(saturate),
            clamped: page.clamped,
        }
    }
}

fn hit(h: Hit) -> wit_archive::Hit {
    wit_archive::Hit { archive_id: h.archive_id, index: saturate(h.index), entry_id: h.entry_id, score: h.score, snippet: h.snippet, char_offset: saturate(h.char_offset) }
}

fn slice(s: EntrySlice) -> wit_archive::EntrySlice {
    wit_archive::EntrySlice {
        index: saturate(s.index),
        entry_id: s.entry_id,
        role: s.role,
        text: s.text,
        char_offset: saturate(s.char_offset),
        total_chars: saturate(s.total_chars),
        next_char_offset: s.next_char_offset.map(saturate),
    }
}

fn saturate(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}
