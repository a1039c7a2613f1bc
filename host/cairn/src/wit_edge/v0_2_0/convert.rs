//! Contract 0.2.0 ⇄ domain conversions, both ways. Nothing else converts.

use super::bindings::conversation::SetAsideError;
use super::bindings::{archive as wit_archive, model as wit_model, types as wit};
use crate::capabilities::ArchiveError;
use crate::chain::{StepError, StepInput, StrategyOutput};
use crate::model::{ChatMessage, ModelError, ModelRequest};
use crate::record::{clip_message, AgentRequest, Boundary, CommitDecision, OutcomeClass, Proposal, Purpose, RequestKind, TriggerDecision, TriggerInput};
use crate::storage::archive::{EntrySlice, Hit, Hits, Page, ReadError, Summary};
use crate::transcript::{Entry, Origin, Part, Role};
use crate::wit_edge::same_in_every_version::same_in_every_version;

// ---- the lent conversation --------------------------------------------------------------

fn role(role: Role) -> wit::Role {
    match role {
        Role::System => wit::Role::System,
        Role::User => wit::Role::User,
        Role::Assistant => wit::Role::Assistant,
        Role::Tool => wit::Role::Tool,
    }
}

fn origin(origin: Origin) -> wit::Origin {
    match origin {
        Origin::Operator => wit::Origin::Operator,
        Origin::Agent => wit::Origin::Agent,
        Origin::Tool => wit::Origin::Tool,
        Origin::Harness => wit::Origin::Harness,
        Origin::Summary => wit::Origin::Summary,
    }
}

pub fn entry(e: &Entry) -> wit::Entry {
    wit::Entry { id: e.id.clone(), role: role(e.role), origin: origin(e.origin), parts: e.parts.iter().map(part).collect(), tokens: e.tokens, turn: e.turn, pinned: e.pinned }
}

fn part(p: &Part) -> wit::Part {
    match p {
        Part::Text { text } => wit::Part::Text(text.clone()),
        Part::Thinking { text } => wit::Part::Thinking(text.clone()),
        Part::ToolCall { id, name, args } => wit::Part::ToolCall(wit::ToolCall { id: id.clone(), name: name.clone(), args: args.clone() }),
        Part::ToolResult { call_id, content, is_error, elided } => {
            wit::Part::ToolResult(wit::ToolResult { call_id: call_id.clone(), content: content.clone(), is_error: *is_error, elided: elided.clone() })
        }
        Part::Image { reference } => wit::Part::Image(reference.clone()),
        Part::Placeholder { text, uri } => wit::Part::Placeholder(wit::Placeholder { text: text.clone(), uri: uri.clone() }),
    }
}

pub fn outline(e: &Entry) -> wit::EntryOutline {
    wit::EntryOutline { id: e.id.clone(), role: role(e.role), origin: origin(e.origin), parts: e.parts.iter().map(part_outline).collect(), tokens: e.tokens, turn: e.turn, pinned: e.pinned }
}

fn part_outline(p: &Part) -> wit::PartOutline {
    let bytes = |text: &str| u32::try_from(text.len()).unwrap_or(u32::MAX);
    match p {
        Part::Text { text } => wit::PartOutline::Text(bytes(text)),
        Part::Thinking { text } => wit::PartOutline::Thinking(bytes(text)),
        Part::ToolCall { id, name, args } => wit::PartOutline::ToolCall(wit::ToolCall { id: id.clone(), name: name.clone(), args: args.clone() }),
        Part::ToolResult { call_id, content, is_error, elided } => {
            wit::PartOutline::ToolResult(wit::ToolResultOutline { call_id: call_id.clone(), bytes: bytes(content), is_error: *is_error, elided: elided.clone() })
        }
        Part::Image { reference } => wit::PartOutline::Image(bytes(reference)),
        Part::Placeholder { text, uri } => wit::PartOutline::Placeholder(wit::Placeholder { text: text.clone(), uri: uri.clone() }),
    }
}

pub fn set_aside_error(error: ArchiveError) -> SetAsideError {
    match error {
        ArchiveError::Denied(refusal) => SetAsideError::Denied(refusal.to_string()),
        ArchiveError::TooLarge(why) => SetAsideError::TooLarge(why),
        // Setting aside reads nothing from the archive: no other error comes from it.
        other => SetAsideError::NotFound(format!("{other:?}")),
    }
}

// ---- strategy ---------------------------------------------------------------------------

pub fn compact_request(input: &StepInput<'_>, config: &str) -> wit::CompactRequest {
    wit::CompactRequest {
        purpose: match input.purpose {
            Purpose::Compact => wit::RequestKind::Compact,
            Purpose::Handover => wit::RequestKind::Handover,
        },
        archive_id: input.archive_id.to_string(),
        protected_head: input.window.protected_head as u32,
        tail_start: input.window.tail_start as u32,
        token_target: input.window.token_target,
        preserve: input.preserve.map(str::to_string),
        resume: input.resume.map(str::to_string),
        previous_checkpoint: input.previous_checkpoint.map(str::to_string),
        previous_checkpoint_through: input.previous_checkpoint_through.map(str::to_string),
        config: config.to_string(),
    }
}

/// The plugin's answer; `original(i)` replacement entries are the conversation's own `entries[i]`.
pub fn strategy_result(result: Result<wit::Outcome, wit::StrategyError>, entries: &[Entry]) -> Result<StrategyOutput, StepError> {
    match result {
        Ok(o) => Ok(StrategyOutput {
            first: o.replaced.first,
            last: o.replaced.last,
            replacement: o
                .replacement
                .into_iter()
                .map(|r| match r {
                    wit::ReplacementEntry::Original(i) => {
                        entries.get(i as usize).cloned().ok_or_else(|| StepError::Invalid(format!("the replacement names original entry {i}; the conversation has {}", entries.len())))
                    }
                    wit::ReplacementEntry::Entry(e) => Ok(Entry::from(e)),
                })
                .collect::<Result<_, _>>()?,
            checkpoint: o.checkpoint,
            seed: o.seed,
            retrospective: o.retrospective,
        }),
        Err(error) => Err(strategy_error(error)),
    }
}

same_in_every_version!();
