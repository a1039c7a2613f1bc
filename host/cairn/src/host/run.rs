//! One compaction or handover, in three steps: prepare (the input counted and recorded, pins
//! set, the sizes it is held to, its window) → chain (the policy's stages and the host's,
//! each outcome checked and put to the commit policy) → commit (the archive, then the event
//! that commits it: the durable record gets the input's new entries first, then the archive,
//! then the event).

use std::collections::HashSet;
use std::sync::Arc;

use anyhow::Result;

use super::{Cairn, RunOptions};
use crate::chain::{self, Applied, ChainRun, LastResort, StageSteps, Step, StepInput, Window};
use crate::pins::Resolved;
use crate::policy::CheckedPolicy;
use crate::record::{kept_summary_ids, CompactionEvent, CompactionReport, Proposal, Purpose, Sessions};
use crate::storage::{ArchiveId, ConversationStore};
use crate::transcript::{Entry, Origin, Role, Transcript};

/// The verbatim tail's share of a budget (a window's is the policy's `keep_recent_at_most`).
const BUDGET_TAIL_SHARE: f64 = 0.1;

/// A compaction's input, ready for the chain.
struct Prepared {
    /// Counted, recorded, with the host's pins set.
    transcript: Transcript,
    /// What the harness itself pinned: the host's pins are cleared again in what it gets back.
    harness_pinned: HashSet<String>,
    pins: Resolved,
    tokens_before: u64,
    /// The budget (the call's, else the policy's), the target the strategies fill by value.
    budget: Option<u64>,
    /// What the result is held to: the usable window or the budget, the smaller.
    ceiling: Option<u64>,
    window: Window,
    archive_id: ArchiveId,
}

/// `entries` with the host's pins cleared: only what the harness pinned stays pinned.
fn unpin(entries: &mut [Entry], harness_pinned: &HashSet<String>) {
    entries.iter_mut().filter(|e| e.pinned && !harness_pinned.contains(&e.id)).for_each(|e| e.pinned = false);
}

impl Cairn {
    pub(super) fn run(&self, purpose: Purpose, policy: &CheckedPolicy, store: &mut ConversationStore, transcript: &Transcript, source: &str, options: RunOptions<'_>) -> Result<CompactionReport> {
        let prepared = self.prepare(purpose, policy, store, transcript, source, &options)?;
        let run = self.run_chain(purpose, policy, store, &prepared, &options)?;
        self.commit(purpose, store, prepared, run, &options)
    }

    /// The input counted and (unless a dry run) recorded, the policy's and the operator's pins
    /// set, and the sizes the chain works to: the usable window less what the agent sends
    /// besides the transcript, the budget, the verbatim tail, the target.
    fn prepare(&self, purpose: Purpose, policy: &CheckedPolicy, store: &mut ConversationStore, transcript: &Transcript, source: &str, options: &RunOptions<'_>) -> Result<Prepared> {
        // Ids name entries in the record and in every plugin's answer: two entries with one id
        // would be one in the record and blamed on the first plugin that carried either.
        let mut seen = std::collections::HashMap::new();
        for (i, entry) in transcript.entries.iter().enumerate() {
            if let Some(first) = seen.insert(entry.id.as_str(), i) {
                anyhow::bail!("{source}: entry id {:?} is used twice (entries {} and {}): ids must be unique", entry.id, first + 1, i + 1);
            }
        }
        let mut transcript = transcript.clone();
        self.tokenizer.count_transcript(&mut transcript);
        if !options.dry_run {
            store.record_snapshot(source, &transcript.entries)?;
        }
        // Pins are the host's: set for the chain, cleared again in what the harness gets back.
        let harness_pinned: HashSet<String> = transcript.entries.iter().filter(|e| e.pinned).map(|e| e.id.clone()).collect();
        let pins = crate::pins::apply(&mut transcript.entries, &store.pinned_ids(), &policy.pins);
        for refused in &pins.refused {
            tracing::warn!(conversation = %store.key(), "{refused}");
        }

        let tokens_before = transcript.total_tokens();
        let settings = &policy.compaction;
        // What the agent sends besides the transcript: the room it takes is not the transcript's.
        let unseen = options.usage.and_then(|usage| usage.context_tokens(&transcript.entries)).map_or(0, |measured| measured.saturating_sub(tokens_before));
        let usable = options.window.map(|window| match window.checked_sub(unseen).filter(|&left| left > 0) {
            Some(left) => {
                if unseen > 0 {
                    tracing::info!(conversation = %store.key(), unseen, window, left, "the agent's usage holds tokens the transcript does not: the window left for it is smaller");
                }
                left
            }
            // Nothing the transcript could become would fit: dropping all of it would not help.
            None => {
                tracing::warn!(conversation = %store.key(), unseen, window, "the agent's usage beyond the transcript fills the whole window: held to the window alone");
                window
            }
        });
        // A budget is the target (the strategies fill it by value) and, like the usable window,
        // a ceiling the result is held to.
        let budget = options.budget.or(settings.budget_tokens);
        let ceiling = usable.into_iter().chain(budget).min();
        // Where the ceiling is known the verbatim tail is also at most its share of it: a tail
        // larger than the window (a small model's) could not fit whatever ran before it. Under a
        // budget the share is a tenth — the operator's rules and facts are worth more per token
        // than the newest chatter, and the checkpoint quotes the latest request anyway — and
        // none when what the operator said alone is more than the budget.
        let operator_tokens: u64 = transcript.entries.iter().filter(|e| e.role == Role::User && e.origin == Origin::Operator).map(|e| e.tokens as u64).sum();
        let share = match budget {
            Some(budget) if operator_tokens > budget => 0.0,
            Some(_) => BUDGET_TAIL_SHARE,
            None => settings.keep_recent_at_most,
        };
        let keep_recent = ceiling.map_or(settings.keep_recent(tokens_before), |usable| settings.keep_recent(tokens_before).min((usable as f64 * share) as u64));
        let target = match budget {
            Some(_) => ceiling.expect("a budget is a ceiling"),
            None => usable.map_or(settings.target(tokens_before), |usable| settings.target(tokens_before).min(usable)),
        };
        let window = match purpose {
            Purpose::Compact if budget.is_some() => Window::within(&transcript.entries, keep_recent, target),
            Purpose::Compact => Window::compute(&transcript.entries, keep_recent, target),
            Purpose::Handover => Window::handover(&transcript.entries),
        };
        let archive_id = options.archive_id.clone().unwrap_or_else(|| ArchiveId::generate(store.key()));
        tracing::info!(conversation = %store.key(), %archive_id, ?purpose, tokens_before, ?window, "running chain");
        Ok(Prepared { transcript, harness_pinned, pins, tokens_before, budget, ceiling, window, archive_id })
    }

    /// The policy's stages for `purpose`, with the host's around them so that every result
    /// fits; each checked outcome judged by the commit policy as the chain produces it.
    fn run_chain(&self, purpose: Purpose, policy: &CheckedPolicy, store: &ConversationStore, prepared: &Prepared, options: &RunOptions<'_>) -> Result<ChainRun> {
        let settings = &policy.compaction;
        let entries = &prepared.transcript.entries;
        let input = StepInput {
            purpose,
            entries,
            window: &prepared.window,
            archive_id: prepared.archive_id.as_str(),
            artifacts_before: 0,
            archive: Some(Arc::new(store.archive_view()?)),
            preserve: options.preserve,
            resume: options.resume,
            previous_checkpoint: store.latest_checkpoint(),
            previous_checkpoint_through: store.latest_checkpoint_through(),
            deadline: settings.chain_deadline(),
            reject_unverified: settings.reject_unverified,
            budget: prepared.budget,
        };
        let mut stages = self.stages(policy, purpose);
        if purpose == Purpose::Compact {
            hold_to_window(&mut stages, entries, &prepared.window, settings.keep_recent_tokens, prepared.ceiling);
        }
        let seeds = store.seed_ids();
        let known: HashSet<&str> = entries.iter().map(|e| e.id.as_str()).collect();
        let proposal = |plugin: &str, applied: &Applied| Proposal {
            strategy: plugin.to_string(),
            tokens_before: prepared.tokens_before,
            tokens_after: applied.tokens_after,
            replaced_ids: entries[applied.first..=applied.last].iter().map(|e| e.id.clone()).collect(),
            kept_summary_ids: kept_summary_ids(&applied.context, &applied.replacement.iter().filter(|e| !known.contains(e.id.as_str())).collect::<Vec<_>>(), &seeds),
        };
        let approve = options.approve.map(|approve| move |plugin: &str, applied: &Applied| approve(&proposal(plugin, applied)));
        Ok(chain::run_pipeline(&stages, &input, &self.tokenizer, &self.breaker, settings.breaker(), approve.as_ref().map(|a| a as chain::Approve<'_>)))
    }

    /// What the chain committed, made durable: the root objective and the agent's notes
    /// anchored, the originals archived, then the event that commits them (a dry run writes
    /// nothing). A chain that committed nothing is recorded as such. The report says exactly
    /// what the record says.
    fn commit(&self, purpose: Purpose, store: &mut ConversationStore, prepared: Prepared, run: ChainRun, options: &RunOptions<'_>) -> Result<CompactionReport> {
        let Prepared { mut transcript, harness_pinned, pins, tokens_before, budget, ceiling, archive_id, .. } = prepared;
        let mut event = CompactionEvent::new(purpose, archive_id.as_str(), tokens_before, run.steps);
        event.rejected = run.refused;
        event.pinned = pins.pinned;
        event.pins_refused = pins.refused;
        event.stages = run.stages;
        let Some(mut committed) = run.committed else {
            event.over_window = over_window(&transcript.entries, ceiling, budget);
            if !options.dry_run {
                store.record_compaction(event.clone())?;
            }
            unpin(&mut transcript.entries, &harness_pinned);
            let mut report = CompactionReport::from_event(store.key().as_str(), &event);
            report.transcript = transcript;
            report.dry_run = options.dry_run;
            return Ok(report);
        };
        // A checkpoint of Cairn's the harness handed back quotes the first request of a history
        // the record may not hold.
        let handed_back = transcript.entries.iter().filter(|e| e.origin == Origin::Summary).find_map(|e| cairn_rules::intent::checkpoint_root_objective(&e.model_text()));
        let first_request = handed_back.or_else(|| store.first_operator_request());
        chain::anchor::root_objective(&mut committed, store.latest_checkpoint(), first_request.as_deref(), &self.tokenizer, ceiling, budget.is_some());
        chain::anchor::preserve(&mut committed, options.preserve, archive_id.as_str(), &self.tokenizer);
        event.over_window = over_window(&committed.applied.context, ceiling, budget);
        let mut applied = committed.applied;
        unpin(&mut applied.context, &harness_pinned);
        unpin(&mut applied.replacement, &harness_pinned);
        unpin(&mut transcript.entries[applied.first..=applied.last], &harness_pinned);
        let originals = &transcript.entries[applied.first..=applied.last];
        // The archive and the event that commits it are one unit.
        let artifacts = if options.dry_run {
            crate::storage::ArtifactUri::numbered(&archive_id, committed.artifacts.len())
        } else {
            store.begin()?;
            store.write_archive(&archive_id, originals, &committed.artifacts)?
        };
        crate::fault::point("archived");
        if purpose == Purpose::Handover {
            let source = store.current_session();
            let target = crate::storage::session_id(store.key().as_str(), archive_id.as_str());
            event.sessions = Some(Sessions { source, target });
        }
        event.committed_by = Some(committed.plugin.clone());
        event.replaced = originals.iter().map(|e| e.id.clone()).collect();
        event.forgotten = applied.forgotten;
        event.replacement = applied.replacement;
        event.tokens_after = applied.tokens_after;
        event.artifacts = artifacts;
        event.checkpoint_through = committed.checkpoint.as_ref().and_then(|_| transcript.entries.last()).map(|e| e.id.clone());
        event.checkpoint = committed.checkpoint;
        event.seed = committed.seed;
        event.retrospective = committed.retrospective;
        if let Some(workspace) = options.workspace {
            event.files = crate::workspace::stamp(workspace, &crate::workspace::touched_paths(&transcript.entries));
        }
        let mut report = CompactionReport::from_event(store.key().as_str(), &event);
        report.transcript = Transcript::new(applied.context);
        if options.dry_run {
            report.dry_run = true;
            report.cache_rewrite = crate::pricing::rewrite(report.tokens_before, report.tokens_after);
            return Ok(report);
        }
        store.record_compaction(event)?;
        crate::fault::point("recorded");
        store.commit()?;
        Ok(report)
    }
}

/// Host stages around the policy's, so every result fits. First, where a tool output the
/// strategies cannot reach (in the verbatim tail or the protected head) is larger than the
/// tail's whole share (`keep_recent_tokens`), a clip of such outputs: no entry is too big to
/// touch, the newest turn's included. Then, where the usable window is known, while the result
/// is still above it: a clip of every output over an eighth of it, then the last resort. The
/// clip keeps every call and the operator's words; it runs before anything is dropped.
fn hold_to_window(stages: &mut Vec<StageSteps<'_>>, entries: &[Entry], window: &Window, keep_recent_tokens: u64, usable: Option<u64>) {
    let share = keep_recent_tokens.max(chain::clip::MIN_TOKENS);
    let reachable = window.protected_head..window.tail_start;
    if entries.iter().enumerate().any(|(i, e)| !reachable.contains(&i) && chain::oversized(e, share)) {
        let clip: Vec<Box<dyn Step>> = vec![Box::new(chain::Clip { limit: share, leave: reachable })];
        stages.insert(0, StageSteps { name: "clip", steps: clip, reach: chain::Reach::PastTail, until: None });
    }
    if let Some(usable) = usable {
        let limit = (usable / 8).max(chain::clip::MIN_TOKENS);
        stages.push(StageSteps { name: "fit", steps: vec![Box::new(chain::Clip { limit, leave: 0..0 })], reach: chain::Reach::PastTail, until: Some(usable) });
        stages.push(StageSteps { name: "fit-drop", steps: vec![Box::new(LastResort)], reach: chain::Reach::Window, until: Some(usable) });
    }
}

/// Why `context` does not fit the `ceiling` (the usable window or the budget, the smaller), if
/// it does not: what takes the room — the checkpoint included — that nothing may clip or drop.
fn over_window(context: &[Entry], ceiling: Option<u64>, budget: Option<u64>) -> Option<String> {
    let usable = ceiling?;
    let what = if budget == Some(usable) { "the budget" } else { "the usable window" };
    let total: u64 = context.iter().map(|e| e.tokens as u64).sum();
    if total <= usable {
        return None;
    }
    let sum = |keep: &dyn Fn(&Entry) -> bool| context.iter().filter(|e| keep(e)).map(|e| e.tokens as u64).sum::<u64>();
    let operator = sum(&|e| e.role == Role::User && e.origin == Origin::Operator);
    let system = sum(&|e| e.role == Role::System);
    let pinned = sum(&|e| e.pinned);
    let summary = sum(&|e| e.origin == Origin::Summary && !e.pinned);
    Some(format!(
        "the context is still {total} tokens, over {what} of {usable}: the operator's own messages take {operator}, the system prompt {system}, \
         pinned entries {pinned}, the checkpoint {summary}, and nothing may clip or drop those"
    ))
}
