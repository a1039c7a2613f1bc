//! The per-conversation state the lifecycle keeps between boundaries (and across restarts
//! and handovers): replaced atomically as a whole.

use serde::{Deserialize, Serialize};

use crate::record::{AgentRequest, Notice, OutcomeClass, Purpose};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConversationState {
    pub last_maintenance_turn: Option<u32>,
    /// No maintenance before this turn.
    pub cooldown_until_turn: u32,
    /// An agent request waiting for the cooldown.
    pub pending: Option<AgentRequest>,
    pub no_progress_streak: u32,
    pub paused: bool,
    /// The turn automatic maintenance paused at.
    pub paused_at_turn: Option<u32>,
    /// A maintenance whose cooldown is reserved and whose outcome is not yet bookkept.
    pub prepared: Option<Prepared>,
    /// The last outcomes, newest last, for the trigger.
    pub recent: Vec<OutcomeClass>,
    /// Notices decided with this state and not yet known to be in the outbox; queued (again,
    /// idempotently) on the next call if a crash came in between.
    pub owed_notices: Vec<Notice>,
    /// Trigger and commit-policy plugins (`name@version`) failing now; the host's rules
    /// stand in for them until they answer again.
    pub failing_plugins: Vec<String>,
    /// The operator's switches for this conversation, over whatever the policy says.
    pub overlay: Overlay,
    /// The context a committed compaction found and left `(before, after)`, until the next
    /// boundary measures what the harness added back.
    pub compacted: Option<(u64, u64)>,
    /// Why the next automatic maintenance is a handover (the thrash guard), if it is one.
    pub handover_next: Option<String>,
    /// Undo events the lifecycle has seen in the record: a new one starts a cooldown.
    pub undos_seen: usize,
    /// Set when the record can rebuild the context the last boundary left the harness with,
    /// whose last entry an incremental boundary's `since` must name. With `held` empty that
    /// context is the record's own, and this id may be older than its tail: boundaries that
    /// only append to the record do not rewrite the state. None: send the context whole.
    pub acknowledged: Option<String>,
    /// That context's entry ids when the record's own context differs from it (a harness that
    /// rewound or rewrote its history and sent it whole); empty: the record's context.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<String>,
}

/// Per-conversation switches over the policy (`cairn serve`'s `policy_set`); unset follows
/// the policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Overlay {
    /// Off: the trigger's automatic decisions are not acted on; agent requests still run.
    pub maintenance: Option<bool>,
    /// Off: an automatic handover becomes a compaction. Either way it replaces the trigger
    /// config's `auto_handover` key where the policy sets one.
    pub auto_handover: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prepared {
    pub purpose: Purpose,
    pub archive_id: String,
    pub turn: u32,
    /// The working context's entry ids, to rebuild it from the record after a crash.
    pub entry_ids: Vec<String>,
    pub request: Option<AgentRequest>,
}

impl ConversationState {
    /// Ends a pause, owing a notice that says why.
    pub fn resume(&mut self, why: &str, id: String) {
        if !self.paused {
            return;
        }
        self.paused = false;
        self.paused_at_turn = None;
        self.no_progress_streak = 0;
        self.owed_notices.push(Notice::new(id, "resumed", format!("Automatic maintenance resumes: {why}.")));
    }
}
