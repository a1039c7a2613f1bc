//! One turn boundary, step by step: open the conversation and finish what a crash left; take in
//! the operator's moves since the last boundary; record the working context; measure it; decide
//! (trigger, switches, cooldown, commit policy); maintain. Each step is a function named for it.

use anyhow::Result;

use super::state::ConversationState;
use super::{auto_handover_allowed, fallback, headroom, incremental, open, overlay_trigger_config, Action, BoundaryOutcome, BoundaryReport, Lifecycle, Prepared, Sent};
use crate::fault;
use crate::record::{Boundary, CommitDecision, Event, Proposal, Purpose, RequestKind, TriggerDecision, TriggerInput};
use crate::storage::{ArchiveId, ConversationKey, ConversationStore};
use crate::transcript::Transcript;

/// What the trigger, the conversation's switches, the cooldown and the commit policy decided.
enum Decision {
    /// Run maintenance for `purpose`; `requested` when an agent's request asked for it.
    Maintain { purpose: Purpose, requested: bool },
    /// No maintenance now: the outcome's action, advice for the harness if any, and why
    /// nothing was done when the action does not say.
    Stop { action: Action, advice: Option<String>, why: Option<String> },
}

impl Lifecycle {
    pub(super) fn run_boundary(&self, report: BoundaryReport, sent: Sent, dry: bool) -> Result<BoundaryOutcome> {
        let BoundaryReport { conversation, turn, turn_complete, tool_call_outstanding, window, reserve, usage, transcript } = report;
        let (mut store, mut state) = if dry { self.preview(&conversation)? } else { open(self.home(), &conversation)? };
        let stale_files = self.workspace().map(|w| store.stale_files(w)).unwrap_or_default();
        let (notices, resumed) = if dry { (Vec::new(), None) } else { self.recover(&mut store, &mut state)? };
        if let Some(run) = resumed.filter(|r| r.purpose == Purpose::Handover && r.committed_by.is_some()) {
            // The harness never saw this handover's outcome: it gets it now, in place of
            // whatever it reported against the old session.
            let acknowledged = incremental::acknowledge(&mut state, incremental::follow(&store, &run.transcript.entries)?);
            store.save_state(&state)?;
            let (usage, transcript) = (Some(run.tokens_after), run.transcript.clone());
            return Ok(BoundaryOutcome { acknowledged, before: None, turn, advice: None, action: Action::HandedOver, why: None, usage, transcript, report: Some(run), notices, stale_files });
        }
        // What is on disk now; any change from here on is saved however the boundary ends.
        let loaded = state.clone();
        self.take_operator_moves(&store, &mut state, &conversation, turn);
        let (transcript, acknowledged) = self.record_context(&mut store, &mut state, transcript, &sent, dry)?;
        let usage = usage.context_tokens(&transcript.entries);
        let usable = window.saturating_sub(reserve);
        self.measure_headroom(&mut state, usage, usable, &conversation, turn);
        let input = TriggerInput {
            context_tokens: usage,
            window,
            reserve,
            turn,
            turns_since_maintenance: state.last_maintenance_turn.map(|t| turn.saturating_sub(t)),
            cooldown_left: state.cooldown_until_turn.saturating_sub(turn),
            pending: state.pending.clone(),
            recent: state.recent.clone(),
        };
        let mut outcome = BoundaryOutcome { turn, advice: None, action: Action::None, why: None, usage, report: None, notices: Vec::new(), stale_files, transcript, acknowledged, before: None };
        let boundary = Boundary { turn, turn_complete, tool_call_outstanding };
        match self.decide(&mut state, &input, &boundary, &conversation) {
            Decision::Stop { action, advice, why } => {
                (outcome.action, outcome.advice, outcome.why) = (action, advice, why);
                self.settle(&mut store, &mut state, &loaded, notices, outcome, dry)
            }
            // A window no larger than the reserve says nothing about what fits.
            Decision::Maintain { purpose, requested } => self.maintain_at(&mut store, &mut state, outcome, purpose, requested, &boundary, Some(usable).filter(|&u| u > 0), notices, dry),
        }
    }

    /// The conversation as it is, opened to read (a new one only in memory), for a dry run.
    fn preview(&self, conversation: &ConversationKey) -> Result<(ConversationStore, ConversationState)> {
        let store = self.home().preview(conversation)?;
        let state = store.load_state()?.unwrap_or_default();
        Ok((store, state))
    }

    /// The operator's moves since the last boundary. An undo takes a compaction back: the
    /// cooldown starts again from here, so the restored history is not compacted away at the
    /// very next boundary. A pause lifts after the policy's turns.
    fn take_operator_moves(&self, store: &ConversationStore, state: &mut ConversationState, conversation: &ConversationKey, turn: u32) {
        let settings = &self.policy().lifecycle;
        let undos = store.events().iter().filter(|e| matches!(e, Event::Undo(_))).count();
        if undos > state.undos_seen {
            state.undos_seen = undos;
            state.last_maintenance_turn = Some(turn);
            state.cooldown_until_turn = turn.saturating_add(settings.cooldown_turns);
            state.compacted = None;
        }
        if let Some(since) = state.paused_at_turn.filter(|_| state.paused && settings.resume_after_turns > 0) {
            if turn.saturating_sub(since) >= settings.resume_after_turns {
                state.resume(&format!("paused for {} turns", settings.resume_after_turns), format!("resumed-{conversation}-{turn}"));
            }
        }
    }

    /// The whole working context, recorded at every boundary (entries the record lacks), so
    /// the record's context is the harness's and the next boundary may send only what is new;
    /// with the id the harness names as its next `since`, as the state keeps it.
    fn record_context(&self, store: &mut ConversationStore, state: &mut ConversationState, sent_entries: Transcript, sent: &Sent, dry: bool) -> Result<(Transcript, Option<String>)> {
        let tokenizer = self.cairn().tokenizer();
        let (transcript, acknowledged) = match sent {
            Sent::Whole => {
                let mut transcript = sent_entries;
                tokenizer.count_transcript(&mut transcript);
                let mut acknowledged = None;
                if !dry {
                    store.record_snapshot("boundary", &transcript.entries)?;
                    acknowledged = incremental::acknowledge(state, incremental::follow(store, &transcript.entries)?);
                }
                (transcript, acknowledged)
            }
            Sent::Since(since) => {
                let appended = sent_entries.entries.len();
                let transcript = incremental::rebuild(store, state, since.as_deref(), sent_entries, &tokenizer)?;
                let new = &transcript.entries[transcript.entries.len() - appended..];
                if !dry && !new.is_empty() {
                    store.record_snapshot("boundary", new)?;
                    let last = new.last().map(|e| e.id.clone());
                    if state.held.is_empty() {
                        incremental::acknowledge(state, (last, Vec::new()));
                    } else {
                        state.held.extend(new.iter().map(|e| e.id.clone()));
                        state.acknowledged = last;
                    }
                }
                let acknowledged = transcript.entries.last().map(|e| e.id.clone());
                (transcript, acknowledged)
            }
        };
        // A dry run records nothing: its context is the one sent, whole.
        let acknowledged = if dry { transcript.entries.last().map(|e| e.id.clone()) } else { acknowledged };
        Ok((transcript, acknowledged))
    }

    /// The first boundary after a compaction measures what the harness added back; a figure as
    /// large as before the compaction is a bill from before it, not a measurement.
    fn measure_headroom(&self, state: &mut ConversationState, usage: Option<u64>, usable: u64, conversation: &ConversationKey, turn: u32) {
        let settings = &self.policy().lifecycle;
        let Some(now) = usage else { return };
        if let Some((_, left)) = state.compacted.take().filter(|(before, _)| now < *before) {
            let what = format!("the context grew from {left} to {now} tokens right after the compaction (re-injection budget {})", settings.reinject_budget_tokens);
            if let Some(notice) = headroom::check(state, settings, now, usable, format!("low-headroom-{conversation}-{turn}"), &what) {
                state.owed_notices.push(notice);
            }
        }
    }

    /// The trigger (under the conversation's overlay), then the switches, the thrash guard,
    /// the cooldown, a pause and the commit policy, in that order: the first that says no
    /// stops the boundary.
    fn decide(&self, state: &mut ConversationState, input: &TriggerInput, boundary: &Boundary, conversation: &ConversationKey) -> Decision {
        let (cairn, policy) = (self.cairn(), self.policy());
        let stop = |action| Decision::Stop { action, advice: None, why: None };
        let overlaid = overlay_trigger_config(policy, state.overlay);
        let (mut purpose, requested) = match fallback::trigger(cairn, overlaid.as_ref().unwrap_or(policy), state, input) {
            TriggerDecision::None if input.pending.is_some() && input.cooldown_left > 0 => {
                return stop(Action::Deferred(format!("agent request waits for the cooldown ({} turns)", input.cooldown_left)));
            }
            TriggerDecision::None => return Decision::Stop { action: Action::None, advice: None, why: Some(quiet(input)) },
            TriggerDecision::Advise(text) => return Decision::Stop { action: Action::Advised, advice: Some(text), why: None },
            TriggerDecision::Compact(_) => (Purpose::Compact, state.pending.as_ref().is_some_and(|r| r.kind == RequestKind::Compact)),
            TriggerDecision::Handover(_) => (Purpose::Handover, state.pending.as_ref().is_some_and(|r| r.kind == RequestKind::Handover)),
        };
        if !requested && state.overlay.maintenance == Some(false) {
            return stop(Action::Deferred("automatic maintenance is switched off for this conversation".into()));
        }
        if !requested && purpose == Purpose::Handover && state.overlay.auto_handover == Some(false) {
            purpose = Purpose::Compact;
        }
        if !requested && purpose == Purpose::Compact && state.handover_next.is_some() && auto_handover_allowed(policy, state.overlay) {
            tracing::info!(%conversation, "thrash guard: handing over instead of compacting");
            purpose = Purpose::Handover;
        }
        if input.cooldown_left > 0 {
            // A trigger may not override the cooldown.
            return stop(Action::Deferred(format!("cooldown: {} turns left", input.cooldown_left)));
        }
        if state.paused && !requested {
            return stop(Action::Paused);
        }
        let proposal = Proposal { tokens_before: input.context_tokens.unwrap_or(0), ..Proposal::default() };
        if let CommitDecision::Defer(why) | CommitDecision::Reject(why) = fallback::commit(cairn, policy, state, boundary, &proposal) {
            return stop(Action::Deferred(why));
        }
        Decision::Maintain { purpose, requested }
    }

    /// Runs the maintenance decided on: the cooldown reserved and the attempt recorded before
    /// any work, then the chain, a handover when no compaction fits the window, the
    /// bookkeeping and notices — one unit in the record. A dry run only reports.
    #[allow(clippy::too_many_arguments)]
    fn maintain_at(
        &self,
        store: &mut ConversationStore,
        state: &mut ConversationState,
        mut outcome: BoundaryOutcome,
        mut purpose: Purpose,
        requested: bool,
        boundary: &Boundary,
        usable: Option<u64>,
        mut notices: Vec<String>,
        dry: bool,
    ) -> Result<BoundaryOutcome> {
        let archive_id = ArchiveId::generate(store.key());
        let request = if requested { state.pending.take() } else { None };
        let transcript = &outcome.transcript;
        if dry {
            let run = self.maintain(store, transcript, purpose, archive_id, request.as_ref(), boundary, usable, true)?;
            outcome.action = action_of(&run, purpose);
            outcome.before = Some(std::mem::replace(&mut outcome.transcript, run.transcript.clone()));
            outcome.acknowledged = outcome.transcript.entries.last().map(|e| e.id.clone());
            outcome.report = Some(run);
            return Ok(outcome);
        }
        state.last_maintenance_turn = Some(boundary.turn);
        state.cooldown_until_turn = boundary.turn.saturating_add(self.policy().lifecycle.cooldown_turns);
        state.prepared =
            Some(Prepared { purpose, archive_id: archive_id.to_string(), turn: boundary.turn, entry_ids: transcript.entries.iter().map(|e| e.id.clone()).collect(), request: request.clone() });
        store.record_snapshot("boundary", &transcript.entries)?;
        store.save_state(state)?;
        fault::point("reserved");
        // The maintenance's archive, event, state and notices are one unit from here.
        store.begin()?;

        let mut run = self.maintain(store, transcript, purpose, archive_id, request.as_ref(), boundary, usable, false)?;
        if purpose == Purpose::Compact && run.over_window.is_some() && auto_handover_allowed(self.policy(), state.overlay) {
            // What no compaction could fit, a fresh session can: its seed is small by construction.
            tracing::warn!(conversation = %store.key(), "the compacted context does not fit the window; handing over");
            let context = if run.committed { run.transcript.clone() } else { transcript.clone() };
            let handover_id = ArchiveId::generate(store.key());
            let handover = self.maintain(store, &context, Purpose::Handover, handover_id, request.as_ref(), boundary, usable, false)?;
            if handover.committed {
                (run, purpose) = (handover, Purpose::Handover);
            }
        }
        outcome.action = action_of(&run, purpose);
        if run.committed_by.is_some() {
            // What the harness is handed next: the state saved with the bookkeeping says so.
            outcome.before = Some(std::mem::replace(&mut outcome.transcript, run.transcript.clone()));
            outcome.acknowledged = incremental::acknowledge(state, incremental::follow(store, &outcome.transcript.entries)?);
        }
        notices.extend(self.finish(store, state, &run, request.is_some(), usable)?);
        store.commit()?;
        outcome.report = Some(run);
        outcome.notices = notices;
        Ok(outcome)
    }
}

/// The boundary's action for a maintenance run for `purpose`.
fn action_of(run: &crate::record::CompactionReport, purpose: Purpose) -> Action {
    match (&run.committed_by, purpose) {
        (None, _) => Action::Failed,
        (Some(_), Purpose::Compact) => Action::Compacted,
        (Some(_), Purpose::Handover) => Action::HandedOver,
    }
}

/// Why a boundary whose trigger saw no need did nothing, in the figures the trigger saw.
fn quiet(input: &TriggerInput) -> String {
    let usable = input.window.saturating_sub(input.reserve);
    let seen = match input.context_tokens {
        None => return "usage unknown: the boundary reported no token count (reported, counted or from the transcript), so nothing runs automatically".into(),
        Some(tokens) if usable > 0 => format!("{tokens} of {usable} usable tokens ({:.0}%)", tokens as f64 * 100.0 / usable as f64),
        Some(tokens) => format!("{tokens} tokens (the reserve of {} takes the whole window of {})", input.reserve, input.window),
    };
    match input.cooldown_left {
        0 => format!("the trigger saw no need at {seen}"),
        left => format!("cooldown: {left} turns left since the last maintenance or undo (at {seen})"),
    }
}
