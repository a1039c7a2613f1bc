//! The chain runner: strategies in policy order until one yields an outcome that passes the
//! host's checks (a pipeline runs one chain per stage, `pipeline.rs`). Every step's outcome
//! class, time and token figures are recorded, and what a step's model wrote is fact-checked
//! against the history it replaces (`fact_check.rs`). The last step is host-native and cannot
//! fail, so a chain always ends.

pub mod anchor;
mod breaker;
pub(crate) mod clip;
pub mod fact_check;
pub(crate) mod invariants;

pub use invariants::pairing_problems;
mod last_resort;
mod pipeline;
mod seed;
mod window;

pub use breaker::{BreakerSettings, CircuitBreaker};
pub use clip::{oversized, Clip, CLIP};
pub use invariants::{apply, Applied};
pub use last_resort::{LastResort, LAST_RESORT};
pub use pipeline::{run_pipeline, Reach, StageSteps};
pub use seed::{HostSeed, SEED_STEP};
pub use window::{safe_cuts, Window};

use std::time::Instant;

use crate::record::{OutcomeClass, Purpose, StepReport};
use crate::transcript::{Artifact, Entry};

/// Why a step yielded nothing the host could commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepError {
    Trap(String),
    Timeout(String),
    Oom(String),
    Denied(String),
    Invalid(String),
    Invariant(String),
    NoProgress(String),
    Unavailable(String),
}

impl StepError {
    pub fn class(&self) -> OutcomeClass {
        match self {
            StepError::Trap(_) => OutcomeClass::Trap,
            StepError::Timeout(_) => OutcomeClass::Timeout,
            StepError::Oom(_) => OutcomeClass::Oom,
            StepError::Denied(_) => OutcomeClass::Denied,
            StepError::Invalid(_) => OutcomeClass::Invalid,
            StepError::Invariant(_) => OutcomeClass::Invariant,
            StepError::NoProgress(_) => OutcomeClass::NoProgress,
            StepError::Unavailable(_) => OutcomeClass::Unavailable,
        }
    }

    pub fn message(&self) -> &str {
        match self {
            StepError::Trap(m)
            | StepError::Timeout(m)
            | StepError::Oom(m)
            | StepError::Denied(m)
            | StepError::Invalid(m)
            | StepError::Invariant(m)
            | StepError::NoProgress(m)
            | StepError::Unavailable(m) => m,
        }
    }
}

/// What a strategy proposes, in domain terms, before the host checks it.
#[derive(Debug, Clone)]
pub struct StrategyOutput {
    pub first: String,
    pub last: String,
    pub replacement: Vec<Entry>,
    pub checkpoint: Option<String>,
    pub seed: Option<String>,
    pub retrospective: Option<String>,
}

/// Everything a step needs to run.
pub struct StepInput<'a> {
    pub purpose: Purpose,
    pub entries: &'a [Entry],
    pub window: &'a Window,
    pub archive_id: &'a str,
    /// Artifacts earlier stages of this run stored; this step's are numbered after them.
    pub artifacts_before: usize,
    /// The conversation's archive, for plugins granted `archive:read`.
    pub archive: Option<std::sync::Arc<crate::storage::ArchiveView>>,
    pub preserve: Option<&'a str>,
    pub resume: Option<&'a str>,
    pub previous_checkpoint: Option<&'a str>,
    /// The id of the last entry `previous_checkpoint` was made from.
    pub previous_checkpoint_through: Option<&'a str>,
    /// When the whole chain must be done; each step's own limit is cut to fit.
    pub deadline: std::time::Instant,
    /// Refuse a model-written outcome the fact-check flags ([`fact_check`]), as the commit
    /// policy refuses one: the chain moves on.
    pub reject_unverified: bool,
    /// The run's token budget, if it has one: strategies learn it through their config's
    /// reserved key `context_budget_tokens` and fill it by value.
    pub budget: Option<u64>,
}

/// A step's answer: its proposal (or failure), the artifacts it asked to store, and the
/// capabilities it was refused along the way.
#[derive(Debug)]
pub struct StepAnswer {
    pub output: Result<StrategyOutput, StepError>,
    pub artifacts: Vec<Artifact>,
    pub refused: Vec<String>,
    /// The step's model calls, if it made any.
    pub model: Option<crate::record::ModelUse>,
}

impl StepAnswer {
    pub fn new(output: Result<StrategyOutput, StepError>) -> Self {
        StepAnswer { output, artifacts: Vec::new(), refused: Vec::new(), model: None }
    }
}

/// One link of the chain.
pub trait Step: Send + Sync {
    /// `name@version`.
    fn name(&self) -> String;
    fn run(&self, input: &StepInput<'_>) -> StepAnswer;
    /// Host-native steps that cannot fail run even when the budget is spent.
    fn trusted(&self) -> bool {
        false
    }
}

/// The outcome the chain committed.
#[derive(Debug, Clone)]
pub struct Committed {
    pub plugin: String,
    pub applied: Applied,
    pub artifacts: Vec<Artifact>,
    pub checkpoint: Option<String>,
    pub seed: Option<String>,
    pub retrospective: Option<String>,
}

#[derive(Debug, Clone)]
pub struct ChainRun {
    pub tokens_before: u64,
    pub steps: Vec<StepReport>,
    pub committed: Option<Committed>,
    /// Why the commit policy (or the fact-check, under `reject_unverified`) refused the last
    /// outcome it was shown, if it refused one.
    pub refused: Option<String>,
    /// The commit policy said "not now": nothing after it ran.
    pub deferred: bool,
    /// What each stage did, in order (filled by [`run_pipeline`]).
    pub stages: Vec<crate::record::StageRecord>,
}

/// The commit policy's word on one checked outcome: `Reject` passes the turn to the next
/// step; `Defer` (not now, whatever the outcome) ends the chain.
pub type Approve<'a> = &'a dyn Fn(&str, &Applied) -> crate::record::CommitDecision;

/// Runs the steps in order; stops at the first outcome that passes every check and the
/// commit policy. Untrusted steps are skipped once the chain's budget is spent or while their
/// circuit is open.
pub fn run(
    steps: &[Box<dyn Step>],
    input: &StepInput<'_>,
    tokenizer: &crate::tokenizer::Tokenizer,
    breaker: &CircuitBreaker,
    breaker_settings: BreakerSettings,
    approve: Option<Approve<'_>>,
) -> ChainRun {
    use crate::record::CommitDecision;
    let (mut refused, mut deferred) = (None, false);
    let tokens_before: u64 = input.entries.iter().map(|e| e.tokens as u64).sum();
    let mut reports = Vec::new();
    for step in steps {
        let name = step.name();
        if !step.trusted() {
            let skip = if Instant::now() >= input.deadline {
                Some(StepError::Timeout("skipped: the chain's time budget is spent".into()))
            } else {
                breaker.refuses(&name).map(|why| StepError::Unavailable(format!("skipped: {why}")))
            };
            if let Some(skip) = skip {
                tracing::info!(plugin = %name, "{}", skip.message());
                reports.push(StepReport::failed(name, skip.class(), skip.message(), 0, Vec::new()));
                continue;
            }
        }
        let started = Instant::now();
        let answer = step.run(input);
        let checked = answer.output.and_then(|output| {
            if let Some(checkpoint) = &output.checkpoint {
                crate::checkpoint::validate(checkpoint).map_err(StepError::Invalid)?;
            }
            if input.purpose == Purpose::Handover && output.seed.as_deref().is_none_or(|s| s.trim().is_empty()) {
                return Err(StepError::Invalid("a handover outcome needs a seed".into()));
            }
            let (checkpoint, seed, retrospective) = (output.checkpoint.clone(), output.seed.clone(), output.retrospective.clone());
            let applied = apply(input.entries, input.window, output, input.archive_id, tokenizer)?;
            // A handover need not shrink a short history: its point is the archive and a fresh
            // session (Claude Code's PreCompact archives through it, however short the session).
            if input.purpose == Purpose::Compact && applied.tokens_after >= tokens_before {
                return Err(StepError::NoProgress(format!("the context would not shrink ({} → {} tokens)", tokens_before, applied.tokens_after)));
            }
            Ok((applied, checkpoint, seed, retrospective))
        });
        let millis = started.elapsed().as_millis() as u64;
        match checked {
            Ok((applied, checkpoint, seed, retrospective)) => {
                breaker.record(&name, OutcomeClass::Ok, breaker_settings);
                // What the model wrote is checked against the history it replaces.
                let flags = match answer.model {
                    Some(used) if used.calls > 0 => fact_check::check_step(input, &applied, checkpoint.as_deref(), answer.artifacts.len()),
                    _ => Vec::new(),
                };
                if !flags.is_empty() {
                    let why = fact_check::rejection(&flags);
                    tracing::info!(plugin = %name, flags = flags.len(), "{why}");
                    // Refused by the policy, like a commit-policy rejection: no malfunction (the
                    // circuit breaker counted the step as ok), and the chain moves on.
                    if input.reject_unverified {
                        tracing::info!(plugin = %name, "the outcome is refused (reject_unverified)");
                        let mut report = StepReport::failed(name, OutcomeClass::Rejected, &why, millis, answer.refused);
                        report.model = answer.model;
                        report.flags = flags;
                        reports.push(report);
                        refused = Some(why);
                        continue;
                    }
                }
                let verdict = approve.map_or(CommitDecision::Commit, |approve| approve(&name, &applied));
                if let CommitDecision::Defer(why) | CommitDecision::Reject(why) = &verdict {
                    tracing::info!(plugin = %name, "the commit policy refused the outcome: {why}");
                    let mut report = StepReport::failed(name, OutcomeClass::Rejected, &format!("the commit policy refused it: {why}"), millis, answer.refused);
                    report.model = answer.model;
                    report.flags = flags;
                    reports.push(report);
                    refused = Some(why.clone());
                    if matches!(verdict, CommitDecision::Defer(_)) {
                        deferred = true;
                        break;
                    }
                    continue;
                }
                tracing::info!(plugin = %name, millis, tokens_after = applied.tokens_after, "step ok");
                reports.push(StepReport {
                    plugin: name.clone(),
                    outcome: OutcomeClass::Ok,
                    millis,
                    message: None,
                    tokens_after: Some(applied.tokens_after),
                    refused: answer.refused,
                    stage: None,
                    model: answer.model,
                    flags,
                });
                let committed = Committed { plugin: name, applied, artifacts: answer.artifacts, checkpoint, seed, retrospective };
                return ChainRun { tokens_before, steps: reports, committed: Some(committed), refused: None, deferred: false, stages: Vec::new() };
            }
            Err(error) => {
                breaker.record(&name, error.class(), breaker_settings);
                tracing::info!(plugin = %name, millis, outcome = %error.class(), "step failed: {}", error.message());
                let mut report = StepReport::failed(name, error.class(), error.message(), millis, answer.refused);
                report.model = answer.model;
                reports.push(report);
            }
        }
    }
    ChainRun { tokens_before, steps: reports, committed: None, refused, deferred, stages: Vec::new() }
}
