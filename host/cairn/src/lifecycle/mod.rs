//! The maintenance lifecycle: the harness reports every turn boundary; Cairn asks the trigger
//! whether to act, honours the cooldown (reserved *before* the chain runs, so a failed attempt
//! counts), lets the commit policy veto unsafe moments, runs agent requests once allowed,
//! pauses after repeated passes that free too little, and queues a notice — only after the
//! state is saved — for every maintenance. State survives crashes; a prepared handover
//! resumes on the next call.

mod boundary;
mod fallback;
mod headroom;
mod incremental;
mod state;

pub use crate::record::{AgentRequest, Boundary, CommitDecision, Proposal, RequestKind, TriggerDecision, TriggerInput};
pub use crate::transcript::Usage;
pub use incremental::Diverged;
pub use state::{ConversationState, Overlay, Prepared};

use std::sync::Arc;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::fault;
use crate::host::{Cairn, RunOptions};
use crate::policy::CheckedPolicy;
use crate::record::{CompactionEvent, CompactionReport, Event, Notice, OutcomeClass, Purpose};
use crate::storage::{ArchiveId, ConversationKey, ConversationStore, Home};
use crate::transcript::Transcript;

/// One turn boundary, as the harness reports it.
#[derive(Debug, Clone)]
pub struct BoundaryReport {
    pub conversation: ConversationKey,
    pub turn: u32,
    pub turn_complete: bool,
    pub tool_call_outstanding: bool,
    pub window: u64,
    pub reserve: u64,
    pub usage: Usage,
    /// The working context as the model would see it next.
    pub transcript: Transcript,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind", content = "reason")]
pub enum Action {
    None,
    Advised,
    Compacted,
    HandedOver,
    /// The trigger wanted maintenance but now is not safe (or the cooldown holds a request).
    Deferred(String),
    /// Automatic maintenance is paused after repeated passes that freed too little.
    Paused,
    /// Maintenance ran and committed nothing.
    Failed,
}

#[derive(Debug, Clone, Serialize)]
pub struct BoundaryOutcome {
    pub turn: u32,
    /// A line for the harness to append to the turn (no extra model call).
    pub advice: Option<String>,
    pub action: Action,
    /// Why nothing was done, for action `none`: the cooldown, usage the trigger did not act
    /// on (with the figures), or usage unknown. (`deferred` carries its reason itself.)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    pub usage: Option<u64>,
    pub report: Option<CompactionReport>,
    /// Ids of notices queued by this call.
    pub notices: Vec<String>,
    /// Files the last stamped compaction described that changed since (with a workspace).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stale_files: Vec<crate::workspace::StaleFile>,
    /// The working context after this boundary.
    #[serde(skip)]
    pub transcript: Transcript,
    /// The id of that context's last entry: the next incremental boundary's `since`. None when
    /// the context is empty, or when the record cannot rebuild it (send it whole again).
    pub acknowledged: Option<String>,
    /// The context maintenance started from, when it replaced it (to compare the two).
    #[serde(skip)]
    pub before: Option<Transcript>,
}

/// The lifecycle API a harness embeds. Cheap to clone; every method is async and runs the
/// blocking work (Wasm, disk) on tokio's blocking pool.
#[derive(Clone)]
pub struct Lifecycle {
    inner: Arc<Inner>,
}

struct Inner {
    cairn: Arc<Cairn>,
    home: Arc<Home>,
    policy: CheckedPolicy,
    workspace: Option<std::path::PathBuf>,
}

impl Lifecycle {
    pub fn new(cairn: Cairn, home: Home, policy: CheckedPolicy) -> Self {
        Lifecycle { inner: Arc::new(Inner { cairn: Arc::new(cairn), home: Arc::new(home), policy, workspace: None }) }
    }

    /// The harness's working directory: compactions stamp the files the conversation touched
    /// there, and every boundary reports those that changed since (`stale_files`).
    pub fn with_workspace(&self, workspace: impl Into<std::path::PathBuf>) -> Self {
        let Inner { cairn, home, policy, .. } = self.inner.as_ref();
        Lifecycle { inner: Arc::new(Inner { cairn: cairn.clone(), home: home.clone(), policy: policy.clone(), workspace: Some(workspace.into()) }) }
    }

    /// The same host, home and plugins (and circuit breaker) under another policy: a
    /// long-running host swaps policies this way without recompiling anything.
    pub fn with_policy(&self, policy: CheckedPolicy) -> Self {
        Lifecycle { inner: Arc::new(Inner { cairn: self.inner.cairn.clone(), home: self.inner.home.clone(), policy, workspace: self.inner.workspace.clone() }) }
    }

    /// The same host, policy and plugins over another home (a tenant's view of it, say).
    pub fn with_home(&self, home: Home) -> Self {
        let Inner { cairn, policy, workspace, .. } = self.inner.as_ref();
        Lifecycle { inner: Arc::new(Inner { cairn: cairn.clone(), home: Arc::new(home), policy: policy.clone(), workspace: workspace.clone() }) }
    }

    pub fn cairn(&self) -> &Cairn {
        &self.inner.cairn
    }

    /// The workspace compactions stamp files in, if the harness named one.
    pub fn workspace(&self) -> Option<&std::path::Path> {
        self.inner.workspace.as_deref()
    }

    pub fn home(&self) -> &Home {
        &self.inner.home
    }

    pub fn policy(&self) -> &CheckedPolicy {
        &self.inner.policy
    }

    pub async fn boundary(&self, report: BoundaryReport) -> Result<BoundaryOutcome> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.boundary_blocking(report)).await?
    }

    /// An incremental boundary: `report.transcript` holds only the entries appended since the
    /// context the previous boundary acknowledged, and `since` names that context's last entry
    /// (None only for a conversation nothing is recorded for yet). The record rebuilds the rest.
    /// Fails with [`Diverged`] (nothing merged or recorded) when the harness's history is not
    /// the one acknowledged: the harness then sends its whole transcript once.
    pub async fn boundary_since(&self, report: BoundaryReport, since: Option<String>) -> Result<BoundaryOutcome> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.boundary_since_blocking(report, since)).await?
    }

    /// Records an agent request; it runs at the next boundary the cooldown allows.
    pub async fn request(&self, conversation: ConversationKey, request: AgentRequest) -> Result<()> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.request_blocking(&conversation, request)).await?
    }

    /// Notices not yet acknowledged, oldest first (see [`take_notices`]).
    pub async fn take_notices(&self, conversation: ConversationKey) -> Result<Vec<Notice>> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || take_notices(&this.inner.home, &conversation)).await?
    }

    pub async fn acknowledge(&self, conversation: ConversationKey, notice_id: String) -> Result<()> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.inner.home.conversation(&conversation)?.ack_notice(&notice_id)).await?
    }

    /// Lifts an automatic pause (the operator's switch), with a notice.
    pub async fn resume(&self, conversation: ConversationKey) -> Result<()> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || resume(&this.inner.home, &conversation)).await?
    }

    /// Moves notices owed by every conversation into its outbox: a long-running host calls
    /// this at start-up, so notices decided just before a crash reach the harness even if
    /// that conversation never reports another boundary.
    pub fn deliver_owed_notices(&self) -> Result<usize> {
        let mut delivered = 0;
        for key in self.inner.home.conversations()? {
            // Read first: a fleet's node starting up locks only the conversations owed something.
            let owed = self.inner.home.state::<ConversationState>(&key)?.is_some_and(|s| !s.owed_notices.is_empty());
            if owed {
                let (mut store, mut state) = open(&self.inner.home, &key)?;
                delivered += deliver(&mut store, &mut state)?.len();
            }
        }
        Ok(delivered)
    }

    pub fn request_blocking(&self, conversation: &ConversationKey, request: AgentRequest) -> Result<()> {
        let (mut store, mut state) = open(&self.inner.home, conversation)?;
        state.pending = Some(request);
        store.save_state(&state)
    }

    /// What [`Lifecycle::boundary`] would do, with nothing written: the trigger's decision and,
    /// if it would act, the report of the maintenance it would commit (`dry_run` set).
    pub async fn dry_run(&self, report: BoundaryReport) -> Result<BoundaryOutcome> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.dry_run_blocking(report)).await?
    }

    /// The synchronous core of [`Lifecycle::boundary`].
    pub fn boundary_blocking(&self, report: BoundaryReport) -> Result<BoundaryOutcome> {
        self.run_boundary(report, Sent::Whole, false)
    }

    /// The synchronous core of [`Lifecycle::boundary_since`].
    pub fn boundary_since_blocking(&self, report: BoundaryReport, since: Option<String>) -> Result<BoundaryOutcome> {
        self.run_boundary(report, Sent::Since(since), false)
    }

    /// The synchronous core of [`Lifecycle::dry_run`]: the conversation is opened to read (a
    /// new one only in memory), so any write would fail rather than happen.
    pub fn dry_run_blocking(&self, report: BoundaryReport) -> Result<BoundaryOutcome> {
        self.run_boundary(report, Sent::Whole, true)
    }

    /// [`Lifecycle::dry_run_blocking`] for an incremental report (see [`Lifecycle::boundary_since`]).
    pub fn dry_run_since_blocking(&self, report: BoundaryReport, since: Option<String>) -> Result<BoundaryOutcome> {
        self.run_boundary(report, Sent::Since(since), true)
    }

    /// Ends a boundary that ran no maintenance: state saved if the trigger or commit policy
    /// changed it (a fallback notice, a plugin recovered), owed notices delivered.
    #[allow(clippy::too_many_arguments)]
    fn settle(
        &self,
        store: &mut ConversationStore,
        state: &mut ConversationState,
        loaded: &ConversationState,
        mut notices: Vec<String>,
        mut outcome: BoundaryOutcome,
        dry: bool,
    ) -> Result<BoundaryOutcome> {
        if state != loaded && !dry {
            store.save_state(state)?;
            notices.extend(deliver(store, state)?);
        }
        outcome.notices = notices;
        Ok(outcome)
    }

    #[allow(clippy::too_many_arguments)]
    fn maintain(
        &self,
        store: &mut ConversationStore,
        transcript: &Transcript,
        purpose: Purpose,
        archive_id: ArchiveId,
        request: Option<&AgentRequest>,
        boundary: &Boundary,
        usable: Option<u64>,
        dry_run: bool,
    ) -> Result<CompactionReport> {
        let Inner { cairn, policy, workspace, .. } = self.inner.as_ref();
        // After the chain the built-in rule has nothing to add: a failing commit policy commits.
        let approve = |proposal: &Proposal| fallback::ask_commit(cairn, policy, boundary, proposal).unwrap_or(CommitDecision::Commit);
        let options = RunOptions {
            archive_id: Some(archive_id),
            preserve: request.map(|r| r.preserve.as_str()),
            resume: request.map(|r| r.resume.as_str()),
            approve: Some(&approve),
            workspace: workspace.as_deref(),
            window: usable,
            // The policy's `compaction.budget_tokens`, if any, applies.
            budget: None,
            dry_run,
            // `usable` is the harness's window less its reserve, as the trigger saw it.
            usage: None,
        };
        match purpose {
            Purpose::Compact => cairn.compact_with(policy, store, transcript, "boundary", options),
            Purpose::Handover => cairn.handover_with(policy, store, transcript, "boundary", options),
        }
    }

    /// After a maintenance: progress bookkeeping and the thrash guard (with the usable window,
    /// when known), state saved, then the notice.
    fn finish(&self, store: &mut ConversationStore, state: &mut ConversationState, run: &CompactionReport, requested: bool, usable: Option<u64>) -> Result<Vec<String>> {
        let settings = &self.inner.policy.lifecycle;
        let freed = run.tokens_before.saturating_sub(run.tokens_after);
        let enough = run.committed_by.is_some() && freed as f64 >= run.tokens_before as f64 * settings.min_freed_ratio;
        if enough && requested {
            state.resume("an agent request freed enough", format!("resumed-{}", run.archive_id));
        }
        state.no_progress_streak = if enough { 0 } else { state.no_progress_streak.saturating_add(1) };
        let pausing = !state.paused && state.no_progress_streak >= settings.pause_after;
        state.paused |= pausing;
        if pausing {
            state.paused_at_turn = state.last_maintenance_turn;
        }
        state.recent.push(run.steps.last().map(|s| s.outcome).unwrap_or(OutcomeClass::NoProgress));
        let keep = state.recent.len().saturating_sub(8);
        state.recent.drain(..keep);
        state.prepared = None;
        state.owed_notices.push(maintenance_notice(run));
        match (&run.committed_by, run.purpose) {
            (None, _) => {}
            (Some(_), Purpose::Handover) => (state.compacted, state.handover_next) = (None, None),
            (Some(_), Purpose::Compact) => {
                state.compacted = Some((run.tokens_before, run.tokens_after));
                let floor = run.tokens_after.saturating_add(settings.reinject_budget_tokens);
                let what = format!("the compaction left {} tokens, plus a re-injection budget of {}", run.tokens_after, settings.reinject_budget_tokens);
                if let Some(notice) = usable.and_then(|usable| headroom::check(state, settings, floor, usable, format!("low-headroom-{}", run.archive_id), &what)) {
                    state.owed_notices.push(notice);
                }
            }
        }
        if let Some(why) = &run.over_window {
            let text = format!("This conversation does not fit its context window after maintenance: {why}. The next request to the model may be refused.");
            state.owed_notices.push(Notice::new(format!("over-window-{}", run.archive_id), "degraded", text));
        } else if run.degraded {
            state.owed_notices.push(Notice::new(
                format!("degraded-{}", run.archive_id),
                "degraded",
                format!(
                    "No strategy could compact this conversation; the host's last resort dropped the {} oldest entries from the working context. They are kept in archive {}.",
                    run.replaced, run.archive_id
                ),
            ));
        }
        if pausing {
            state.owed_notices.push(Notice::new(
                format!("paused-{}", run.archive_id),
                "paused",
                format!(
                    "Automatic maintenance is paused: {} passes in a row freed too little. Agent requests still run; it resumes after {} turns, or when resumed.",
                    settings.pause_after, settings.resume_after_turns
                ),
            ));
        }
        // One save for the bookkeeping and the notices, once they are queued: a crash before it
        // leaves the prepared state, and recovery runs this again (the queue drops a notice it
        // holds already).
        let queued = queue_owed(store, state)?;
        fault::point("noticed");
        store.save_state(state)?;
        fault::point("saved");
        Ok(queued)
    }

    /// Finishes what a crash interrupted: a prepared handover is run again (same archive id,
    /// same entries); a compaction whose event is recorded gets its bookkeeping and notice;
    /// one that never got that far counts as a failed attempt.
    fn recover(&self, store: &mut ConversationStore, state: &mut ConversationState) -> Result<(Vec<String>, Option<CompactionReport>)> {
        let Some(prepared) = state.prepared.clone() else { return Ok((deliver(store, state)?, None)) };
        store.begin()?;
        let recorded = store.events().iter().find_map(|e| match e {
            Event::Compaction(c) if c.archive_id == prepared.archive_id => Some(c.as_ref().clone()),
            _ => None,
        });
        let run = match recorded {
            Some(event) => {
                let mut run = CompactionReport::from_event(store.key().as_str(), &event);
                // What the harness would have been handed: the prepared context with the
                // recorded outcome applied.
                if let Ok(entries) = store.recorded_entries(&prepared.entry_ids) {
                    run.transcript = Transcript::new(event.applied_to(&entries));
                }
                run
            }
            None if prepared.purpose == Purpose::Handover => {
                tracing::warn!(conversation = %store.key(), archive = %prepared.archive_id, "resuming a handover interrupted by a crash");
                let entries = store.recorded_entries(&prepared.entry_ids).context("resuming the prepared handover")?;
                let boundary = Boundary { turn: prepared.turn, turn_complete: true, tool_call_outstanding: false };
                let archive_id: ArchiveId = prepared.archive_id.parse()?;
                self.maintain(store, &Transcript::new(entries), Purpose::Handover, archive_id, prepared.request.as_ref(), &boundary, None, false)?
            }
            None => {
                let mut failed = CompactionReport::from_event(store.key().as_str(), &CompactionEvent::new(prepared.purpose, &prepared.archive_id, 0, Vec::new()));
                failed.committed_by = None;
                failed
            }
        };
        let notices = self.finish(store, state, &run, prepared.request.is_some(), None)?;
        store.commit()?;
        Ok((notices, Some(run)))
    }
}

/// How much of the working context a boundary report's transcript holds.
enum Sent {
    Whole,
    /// The entries appended after the acknowledged context that ended with this entry.
    Since(Option<String>),
}

/// A conversation opened to write, with its lifecycle state (the default before any).
fn open(home: &Home, conversation: &ConversationKey) -> Result<(ConversationStore, ConversationState)> {
    let store = home.conversation(conversation)?;
    let state = store.load_state()?.unwrap_or_default();
    Ok((store, state))
}

/// Notices not yet acknowledged, oldest first, after moving any owed ones (decided just
/// before a crash) into the outbox. Delivery is at least once: a notice comes back, with the
/// same id, until it is acknowledged. Needs no host, so the CLI calls it directly. A read
/// unless notices are owed: a conversation the home does not hold has none (and is not
/// created), and one owed nothing is read without its lock.
pub fn take_notices(home: &Home, conversation: &ConversationKey) -> Result<Vec<Notice>> {
    if !home.has_conversation(conversation)? {
        return Ok(Vec::new());
    }
    let owed = home.state::<ConversationState>(conversation)?.is_some_and(|s| !s.owed_notices.is_empty());
    if !owed {
        return home.existing_conversation(conversation)?.notices(false);
    }
    let (mut store, mut state) = open(home, conversation)?;
    deliver(&mut store, &mut state)?;
    store.notices(false)
}

/// Sets the operator's switches for a conversation (`None` leaves one as it is); returns the
/// overlay now in force and whether maintenance is paused.
pub fn set_overlay(home: &Home, conversation: &ConversationKey, maintenance: Option<bool>, auto_handover: Option<bool>) -> Result<(Overlay, bool)> {
    let (mut store, mut state) = open(home, conversation)?;
    state.overlay.maintenance = maintenance.or(state.overlay.maintenance);
    state.overlay.auto_handover = auto_handover.or(state.overlay.auto_handover);
    store.save_state(&state)?;
    Ok((state.overlay, state.paused))
}

/// Whether Cairn may hand over on its own: the operator's switch, else the trigger config's
/// `auto_handover` key (where the trigger has one), else yes.
fn auto_handover_allowed(policy: &CheckedPolicy, overlay: Overlay) -> bool {
    overlay.auto_handover.unwrap_or_else(|| {
        let config = policy.trigger.as_ref().and_then(|step| serde_json::from_str::<serde_json::Value>(&step.config).ok());
        config.and_then(|c| c.get("auto_handover").and_then(serde_json::Value::as_bool)) != Some(false)
    })
}

/// The policy with the overlay's `auto_handover` written into the trigger's config, when the
/// policy's config has that key (a trigger that does not know it is left alone).
fn overlay_trigger_config(policy: &CheckedPolicy, overlay: Overlay) -> Option<CheckedPolicy> {
    let auto = overlay.auto_handover?;
    let step = policy.trigger.as_ref()?;
    let mut config: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&step.config).ok()?;
    config.get("auto_handover")?;
    config.insert("auto_handover".into(), auto.into());
    let mut overlaid = policy.clone();
    overlaid.trigger.as_mut()?.config = serde_json::Value::Object(config).to_string();
    Some(overlaid)
}

/// Lifts an automatic pause (the operator's switch), with a notice.
pub fn resume(home: &Home, conversation: &ConversationKey) -> Result<()> {
    let (mut store, mut state) = open(home, conversation)?;
    state.resume("resumed by the operator", format!("resumed-{conversation}-{}", crate::record::now_millis()));
    store.save_state(&state)?;
    deliver(&mut store, &mut state).map(|_| ())
}

/// Moves owed notices into the outbox (a notice already there is not queued twice), then
/// records that they are delivered.
fn deliver(store: &mut ConversationStore, state: &mut ConversationState) -> Result<Vec<String>> {
    if state.owed_notices.is_empty() {
        return Ok(Vec::new());
    }
    let ids = queue_owed(store, state)?;
    store.save_state(state)?;
    Ok(ids)
}

/// Queues the owed notices and takes them out of the state, which the caller saves next: a
/// crash between the two delivers a notice twice under one id at worst, never loses one.
fn queue_owed(store: &mut ConversationStore, state: &mut ConversationState) -> Result<Vec<String>> {
    let mut ids = Vec::new();
    for notice in &state.owed_notices {
        store.queue_notice(notice)?;
        ids.push(notice.id.clone());
    }
    state.owed_notices.clear();
    Ok(ids)
}

/// The notice for one maintenance; failures carry no exception detail.
fn maintenance_notice(run: &CompactionReport) -> Notice {
    let (kind, text) = match (&run.committed_by, run.purpose) {
        (Some(_), Purpose::Compact) => ("compacted", format!("Context compacted: {} → {} tokens; earlier details are searchable (archive {}).", run.tokens_before, run.tokens_after, run.archive_id)),
        (Some(_), Purpose::Handover) => ("handed-over", format!("Handed over to a fresh session; the previous one is archive {}.", run.archive_id)),
        (None, _) => ("failed", "Context maintenance did not complete; the conversation is unchanged.".to_string()),
    };
    Notice::new(format!("n-{}", run.archive_id), kind, text)
}
