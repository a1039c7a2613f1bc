//! WIT ⇄ domain conversions.

use super::types as wit;
use crate::chain::{StepError, StrategyOutput};
use crate::plugin::PluginInfo;
use crate::transcript::{Entry, Origin, Part, Role};

impl From<&Entry> for wit::Entry {
    fn from(e: &Entry) -> Self {
        wit::Entry {
            id: e.id.clone(),
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
            parts: e.parts.iter().map(wit::Part::from).collect(),
            tokens: e.tokens,
            turn: e.turn,
            pinned: e.pinned,
        }
    }
}

impl From<&Part> for wit::Part {
    fn from(p: &Part) -> Self {
        match p.clone() {
            Part::Text { text } => wit::Part::Text(text),
            Part::Thinking { text } => wit::Part::Thinking(text),
            Part::ToolCall { id, name, args } => wit::Part::ToolCall(wit::ToolCall { id, name, args }),
            Part::ToolResult { call_id, content, is_error } => {
                wit::Part::ToolResult(wit::ToolResult { call_id, content, is_error })
            }
            Part::Image { reference } => wit::Part::Image(reference),
            Part::Placeholder { text, uri } => wit::Part::Placeholder(wit::Placeholder { text, uri }),
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
        }
    }
}

impl From<wit::Part> for Part {
    fn from(p: wit::Part) -> Self {
        match p {
            wit::Part::Text(text) => Part::Text { text },
            wit::Part::Thinking(text) => Part::Thinking { text },
            wit::Part::ToolCall(c) => Part::ToolCall { id: c.id, name: c.name, args: c.args },
            wit::Part::ToolResult(r) => Part::ToolResult { call_id: r.call_id, content: r.content, is_error: r.is_error },
            wit::Part::Image(reference) => Part::Image { reference },
            wit::Part::Placeholder(p) => Part::Placeholder { text: p.text, uri: p.uri },
        }
    }
}

impl From<wit::PluginInfo> for PluginInfo {
    fn from(i: wit::PluginInfo) -> Self {
        PluginInfo { name: i.name, version: i.version, description: i.description, capabilities: i.capabilities }
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
        Err(wit::StrategyError::Unavailable(why)) => Err(StepError::Unavailable(why)),
        Err(wit::StrategyError::NothingToDo(why)) => Err(StepError::NoProgress(why)),
        Err(wit::StrategyError::Failed(why)) => Err(StepError::Invalid(format!("plugin reported failure: {why}"))),
    }
}

// ---- lifecycle ------------------------------------------------------------------------

use crate::chain::OutcomeClass;
use crate::lifecycle::{AgentRequest, CommitDecision, RequestKind, TriggerDecision};

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
        }
    }
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
