//! What triggers and commit policies are asked and what they answer, in domain terms (the WIT
//! edge converts them); shared by the lifecycle that asks and the host that runs the chain.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::OutcomeClass;
use crate::transcript::{Entry, Origin};

/// What the agent asked for with its compact or handover tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentRequest {
    pub kind: RequestKind,
    /// What must survive.
    pub preserve: String,
    /// How to resume afterwards.
    pub resume: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RequestKind {
    Compact,
    Handover,
}

/// What the trigger sees.
#[derive(Debug, Clone, PartialEq)]
pub struct TriggerInput {
    pub context_tokens: Option<u64>,
    pub window: u64,
    pub reserve: u64,
    pub turn: u32,
    pub turns_since_maintenance: Option<u32>,
    pub cooldown_left: u32,
    pub pending: Option<AgentRequest>,
    pub recent: Vec<OutcomeClass>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TriggerDecision {
    None,
    Advise(String),
    Compact(String),
    Handover(String),
}

/// The moment the commit policy judges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Boundary {
    pub turn: u32,
    pub turn_complete: bool,
    pub tool_call_outstanding: bool,
}

/// The swap the commit policy judges (empty before the chain has run).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Proposal {
    pub strategy: String,
    pub tokens_before: u64,
    pub tokens_after: u64,
    pub replaced_ids: Vec<String>,
    pub kept_summary_ids: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommitDecision {
    Commit,
    Defer(String),
    Reject(String),
}

/// Ids of earlier summaries a proposal leaves in the kept range while it adds a summary of
/// its own: they would go stale beside the new one. An outcome that adds no summary (an
/// elision) makes nothing stale, and a handover seed (`seeds`) starts a session: it never goes
/// stale.
pub fn kept_summary_ids(context: &[Entry], added: &[&Entry], seeds: &HashSet<String>) -> Vec<String> {
    if !added.iter().any(|e| e.origin == Origin::Summary) {
        return Vec::new();
    }
    let added: HashSet<&str> = added.iter().map(|e| e.id.as_str()).collect();
    context.iter().filter(|e| e.origin == Origin::Summary && !added.contains(e.id.as_str()) && !seeds.contains(&e.id)).map(|e| e.id.clone()).collect()
}
