//! The compaction pipeline: stages in order, each a fallback chain ([`run`](super::run)) on
//! what the stages before it left, run only while that is still above the target (offload
//! tool outputs first, then summarize what is still too large). What the stages commit is
//! composed into one outcome on the original entries, so the commit policy, the record and
//! the archive see one compaction.

use super::{run, Applied, Approve, BreakerSettings, ChainRun, CircuitBreaker, Committed, Step, StepInput, Window};
use crate::record::StageRecord;
use crate::tokenizer::Tokenizer;
use crate::transcript::Entry;

/// A stage's name, its chain, how far it reaches and when it is needed.
pub struct StageSteps<'s> {
    pub name: &'s str,
    pub steps: Vec<Box<dyn Step>>,
    pub reach: Reach,
    /// Run only while the context is above this many tokens (default: the pipeline's target);
    /// the first stage always runs.
    pub until: Option<u64>,
}

impl<'s> StageSteps<'s> {
    /// A policy stage: between the protected head and the verbatim tail, until the target.
    pub fn policy(name: &'s str, steps: Vec<Box<dyn Step>>) -> Self {
        StageSteps { name, steps, reach: Reach::Window, until: None }
    }
}

/// What a stage may touch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Between the protected head and the verbatim tail: the policy's strategies.
    Window,
    /// Everything after the leading system prompt, the verbatim tail too: only for host steps
    /// that shorten tool outputs in place (the clip), so no entry is too big to touch.
    PastTail,
}

/// Runs the stages; a policy of one stage is exactly its chain.
pub fn run_pipeline(stages: &[StageSteps<'_>], input: &StepInput<'_>, tokenizer: &Tokenizer, breaker: &CircuitBreaker, breaker_settings: BreakerSettings, approve: Option<Approve<'_>>) -> ChainRun {
    if let [only] = stages {
        if only.reach == Reach::Window {
            let mut chain = run(&only.steps, input, tokenizer, breaker, breaker_settings, approve);
            chain.stages = vec![stage_record(only.name, input.entries, &chain)];
            return chain;
        }
    }
    let tokens_before: u64 = input.entries.iter().map(|e| e.tokens as u64).sum();
    let target = input.window.token_target;
    let tail_len = input.entries.len() - input.window.tail_start;
    let mut context = input.entries.to_vec();
    let mut composed: Option<Committed> = None;
    let (mut reports, mut refused, mut records) = (Vec::new(), None, Vec::new());
    for (n, stage) in stages.iter().enumerate() {
        let current = composed.as_ref().map_or(tokens_before, |c| c.applied.tokens_after);
        let until = stage.until.unwrap_or(target);
        if n > 0 && current <= until {
            tracing::info!(stage = stage.name, current, until, "the context is at its target; the stage is not needed");
            records.push(StageRecord::idle(stage.name, current, Some(format!("not needed: the context was at {current} tokens, at or below the stage's target of {until}"))));
            continue;
        }
        // Earlier stages replaced nothing in the protected head, and the verbatim tail only
        // entry for entry (the clip).
        let window = match stage.reach {
            Reach::Window => Window { protected_head: input.window.protected_head, tail_start: context.len() - tail_len, token_target: until },
            Reach::PastTail => Window { protected_head: super::window::protected_head(&context), tail_start: context.len(), token_target: until },
        };
        let earlier = composed.as_ref();
        let stage_input = StepInput {
            purpose: input.purpose,
            entries: &context,
            window: &window,
            archive_id: input.archive_id,
            artifacts_before: input.artifacts_before + earlier.map_or(0, |c| c.artifacts.len()),
            archive: input.archive.clone(),
            preserve: input.preserve,
            resume: input.resume,
            previous_checkpoint: earlier.and_then(|c| c.checkpoint.as_deref()).or(input.previous_checkpoint),
            // An earlier stage's checkpoint was made from this run's conversation, whose end
            // every stage keeps.
            previous_checkpoint_through: match earlier.and_then(|c| c.checkpoint.as_ref()) {
                Some(_) => input.entries.last().map(|e| e.id.as_str()),
                None => input.previous_checkpoint_through,
            },
            deadline: input.deadline,
            reject_unverified: input.reject_unverified,
            budget: input.budget,
        };
        let onto_original = |applied: &Applied| compose(input.entries, earlier.map(|c| &c.applied), applied);
        let stage_approve = approve.map(|approve| move |plugin: &str, applied: &Applied| approve(plugin, &onto_original(applied)));
        let mut stage_run = run(&stage.steps, &stage_input, tokenizer, breaker, breaker_settings, stage_approve.as_ref().map(|a| a as Approve<'_>));
        records.push(stage_record(stage.name, &context, &stage_run));
        reports.extend(std::mem::take(&mut stage_run.steps).into_iter().map(|mut report| {
            report.stage = Some(stage.name.to_string());
            report
        }));
        if stage_run.deferred {
            return ChainRun { tokens_before, steps: reports, committed: None, refused: stage_run.refused, deferred: true, stages: records };
        }
        refused = stage_run.refused.or(refused);
        if let Some(stage_committed) = stage_run.committed {
            let applied = onto_original(&stage_committed.applied);
            context = stage_committed.applied.context.clone();
            composed = Some(merge(composed, stage_committed, applied));
        }
    }
    let refused = if composed.is_some() { None } else { refused };
    ChainRun { tokens_before, steps: reports, committed: composed, refused, deferred: false, stages: records }
}

/// What one stage's chain did on `context`, the context the stages before it left.
fn stage_record(name: &str, context: &[Entry], run: &ChainRun) -> StageRecord {
    match &run.committed {
        Some(c) => StageRecord::committed(name, &c.plugin, context, c.applied.first, c.applied.last, &c.applied.replacement, c.applied.tokens_after),
        None => StageRecord::idle(name, run.tokens_before, None),
    }
}

/// A stage's outcome (on the context the earlier stages left) as one outcome on the original
/// entries: the replaced range spans every stage's range; its replacement is whatever the
/// final context holds there.
fn compose(original: &[Entry], earlier: Option<&Applied>, stage: &Applied) -> Applied {
    let Some(earlier) = earlier else { return stage.clone() };
    let added = earlier.replacement.len();
    // An index of the earlier context, as an index of the original; inside the earlier
    // replacement it stands for the earlier range's first (or last) entry.
    let to_original = |i: usize, inside: usize| match i {
        i if i < earlier.first => i,
        i if i < earlier.first + added => inside,
        i => i - (earlier.first + added) + earlier.last + 1,
    };
    let first = earlier.first.min(to_original(stage.first, earlier.first));
    let last = earlier.last.max(to_original(stage.last, earlier.last));
    let after = original.len() - last - 1;
    let replacement = stage.context[first..stage.context.len() - after].to_vec();
    let kept: std::collections::HashSet<&str> = replacement.iter().map(|e| e.id.as_str()).collect();
    let forgotten = original[first..=last].iter().filter(|e| !kept.contains(e.id.as_str())).map(|e| e.id.clone()).collect();
    Applied { first, last, replacement, forgotten, context: stage.context.clone(), tokens_after: stage.tokens_after }
}

/// What the stages committed so far, with one more stage's outcome.
fn merge(earlier: Option<Committed>, stage: Committed, applied: Applied) -> Committed {
    match earlier {
        None => Committed { applied, ..stage },
        Some(mut earlier) => Committed {
            plugin: format!("{} + {}", earlier.plugin, stage.plugin),
            applied,
            // Moved, not copied.
            artifacts: {
                earlier.artifacts.extend(stage.artifacts);
                earlier.artifacts
            },
            checkpoint: stage.checkpoint.or(earlier.checkpoint),
            seed: stage.seed.or(earlier.seed),
            retrospective: stage.retrospective.or(earlier.retrospective),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::{Origin, Role};

    fn entry(id: &str) -> Entry {
        let mut entry = Entry::text(id, Role::User, Origin::Operator, id);
        entry.tokens = 10;
        entry
    }

    fn applied(input: &[Entry], first: usize, last: usize, replacement: Vec<Entry>) -> Applied {
        let context: Vec<Entry> = input[..first].iter().cloned().chain(replacement.iter().cloned()).chain(input[last + 1..].iter().cloned()).collect();
        let tokens_after = context.iter().map(|e| e.tokens as u64).sum();
        Applied { first, last, replacement, forgotten: Vec::new(), context, tokens_after }
    }

    /// Stage 1 elides entries 2..=4 into two; stage 2 summarizes from entry 1 through the
    /// first of the elided ones, and then one more original entry after them.
    #[test]
    fn stages_compose_into_one_range_of_the_original() {
        let original: Vec<Entry> = (0..10).map(|i| entry(&format!("e{i}"))).collect();
        let first = applied(&original, 2, 4, vec![entry("e2"), entry("x-r2")]);
        let second = applied(&first.context, 1, 4, vec![entry("x-r1.2")]);
        let composed = compose(&original, Some(&first), &second);
        assert_eq!((composed.first, composed.last), (1, 5), "from e1 (before stage 1's range) to e5 (after it)");
        let ids: Vec<&str> = composed.replacement.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["x-r1.2"]);
        assert_eq!(composed.forgotten, ["e1", "e2", "e3", "e4", "e5"]);
        let rebuilt: Vec<&str> = original[..1].iter().chain(&composed.replacement).chain(&original[6..]).map(|e| e.id.as_str()).collect();
        let context: Vec<&str> = composed.context.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(rebuilt, context, "the original with the composed range replaced is the final context");

        // A second stage inside the first one's replacement keeps the first's range.
        let inside = applied(&first.context, 3, 3, vec![entry("x-r1.3")]);
        let composed = compose(&original, Some(&first), &inside);
        assert_eq!((composed.first, composed.last), (2, 4));
        let ids: Vec<&str> = composed.replacement.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["e2", "x-r1.3"]);
        assert_eq!(composed.forgotten, ["e3", "e4"]);
    }
}
