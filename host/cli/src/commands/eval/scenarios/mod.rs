//! The scenarios, one file each. A scenario builds a session (a recorded one plus injected
//! probes), compacts it one or more times with the policy under test, and checks what the
//! agent would see afterwards.

mod background_worker;
mod buried_constraint;
mod cache_cost;
mod failed_hypothesis;
mod full_context;
mod long_tool_turn;
mod model_switch;
mod protocol_sequence;
mod six_cycles;
mod stale_file_edit;
mod unique_observation;

use serde::Serialize;

use super::probe::{self, Probe};
use super::Lab;

pub trait Scenario {
    fn name(&self) -> &'static str;
    fn run(&self, lab: &Lab) -> anyhow::Result<Score>;
}

/// What a scenario found.
pub struct Score {
    pub passed: bool,
    pub detail: String,
    pub tokens: Vec<Cycle>,
    /// The question for the agent probe, over the last context.
    pub probe: Option<Probe>,
}

impl Score {
    pub fn new(passed: bool, detail: impl Into<String>, tokens: Vec<Cycle>) -> Self {
        Score { passed, detail: detail.into(), tokens, probe: None }
    }

    /// The score of [`cycles`]: passed with `held` when no cycle lost anything, else which
    /// cycle lost what.
    pub fn after_cycles(session: &str, kept: Result<(), String>, held: String, tokens: Vec<Cycle>) -> Self {
        match kept {
            Ok(()) => Score::new(true, format!("{session}: {held}"), tokens),
            Err(why) => Score::new(false, format!("{session}: {why}"), tokens),
        }
    }

    /// With a question the agent probe asks over `context`; a right answer mentions `expect`.
    pub fn probed(self, question: &'static str, expect: &[&str], context: cairn::transcript::Transcript) -> Self {
        Score { probe: Some(Probe { question, expect: expect.iter().map(|e| e.to_string()).collect(), context }), ..self }
    }
}

/// One compaction's tokens, before and after.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Cycle {
    pub before: u64,
    pub after: u64,
}

impl From<&cairn::CompactionReport> for Cycle {
    fn from(r: &cairn::CompactionReport) -> Self {
        Cycle { before: r.tokens_before, after: r.tokens_after }
    }
}

/// Compaction cycles of `context` in conversation `key`: before each, `calls[n]` rounds of
/// fresh tool work join it; after each, `lost` names what the context no longer holds. Stops at
/// the first loss: `Err(line)` says which cycle lost what and who committed it. Also returns
/// the last context.
pub fn cycles(
    lab: &Lab,
    key: &str,
    mut context: cairn::transcript::Transcript,
    calls: &[usize],
    lost: impl Fn(&cairn::CompactionReport) -> Option<String>,
) -> anyhow::Result<(Result<(), String>, Vec<Cycle>, cairn::transcript::Transcript)> {
    use super::lab::{committed_by, grown, tool_work};
    let mut tokens = Vec::new();
    for (n, &work) in calls.iter().enumerate() {
        context = grown(&context, tool_work(&format!("{key}-{n}"), work));
        let report = lab.compact(key, &context)?;
        tokens.push(Cycle::from(&report));
        context = report.transcript.clone();
        if let Some(what) = lost(&report) {
            return Ok((Err(format!("cycle {} of {}: {what} (committed by {})", n + 1, calls.len(), committed_by(&report))), tokens, context));
        }
    }
    Ok((Ok(()), tokens, context))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Pass,
    Fail,
    /// The scenario could not run (its setup failed): a failure of the chain or the host.
    Error,
}

impl Verdict {
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "FAIL",
            Verdict::Error => "ERROR",
        }
    }
}

#[derive(Serialize)]
pub struct Outcome {
    pub name: &'static str,
    pub verdict: Verdict,
    pub detail: String,
    pub tokens: Vec<Cycle>,
    /// The agent probe's answer (`--probe`, for scenarios with a question).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe: Option<probe::Answer>,
}

pub fn all() -> Vec<Box<dyn Scenario>> {
    vec![
        Box::new(buried_constraint::BuriedConstraint),
        Box::new(failed_hypothesis::FailedHypothesis),
        Box::new(stale_file_edit::StaleFileEdit),
        Box::new(unique_observation::UniqueObservation),
        Box::new(long_tool_turn::LongToolTurn),
        Box::new(background_worker::BackgroundWorker),
        Box::new(cache_cost::CacheCost),
        Box::new(model_switch::ModelSwitch),
        Box::new(protocol_sequence::ProtocolSequence),
        Box::new(six_cycles::SixCycles),
        Box::new(full_context::FullContext),
    ]
}

/// Runs `scenario`; with a model, its probe too.
pub fn run(scenario: &dyn Scenario, lab: &Lab, model: Option<&dyn cairn::model::ModelProvider>) -> Outcome {
    let name = scenario.name();
    match scenario.run(lab) {
        Ok(mut score) => {
            // Under `--budget` every compaction the scenario committed is within it.
            if let Some((n, over)) = lab.budget.and_then(|budget| score.tokens.iter().enumerate().find(|(_, c)| c.after > budget)) {
                score.passed = false;
                score.detail = format!("cycle {}: {} tokens, over the budget of {}; {}", n + 1, over.after, lab.budget.unwrap_or_default(), score.detail);
            }
            Outcome {
                name,
                verdict: if score.passed { Verdict::Pass } else { Verdict::Fail },
                detail: score.detail,
                tokens: score.tokens,
                probe: model.zip(score.probe.as_ref()).map(|(model, question)| probe::ask(model, question)),
            }
        }
        Err(e) => Outcome { name, verdict: Verdict::Error, detail: format!("{e:#}"), tokens: Vec::new(), probe: None },
    }
}
