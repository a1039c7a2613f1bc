//! Contract 0.1.0 ⇄ domain conversions, both ways. Nothing else converts.

use wasmtime::component::{ComponentType, Lower};

use super::bindings::{archive as wit_archive, model as wit_model, types as wit};
use crate::capabilities::ArchiveError;
use crate::chain::{StepError, StepInput, StrategyOutput};
use crate::model::{ChatMessage, ModelError, ModelRequest};
use crate::record::{clip_message, AgentRequest, Boundary, CommitDecision, OutcomeClass, Proposal, Purpose, RequestKind, TriggerDecision, TriggerInput};
use crate::storage::archive::{EntrySlice, Hit, Hits, Page, ReadError, Summary};
use crate::transcript::{Entry, Origin, Part, Role};
use crate::wit_edge::same_in_every_version::same_in_every_version;

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
        Err(error) => Err(strategy_error(error)),
    }
}

same_in_every_version!();
