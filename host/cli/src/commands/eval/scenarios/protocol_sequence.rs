//! 9. Interrupted mid-turn with a tool call outstanding: the lifecycle defers, and a forced
//!    compaction yields a context where every call but the outstanding one has its result, and
//!    the outstanding one is still last, waiting for its result.

use cairn::lifecycle::{Action, BoundaryReport, Usage};
use cairn::storage::ConversationKey;
use cairn::transcript::Transcript;

use super::{Cycle, Scenario, Score};
use crate::commands::eval::lab::{grown, tool_work};
use crate::commands::eval::Lab;

pub struct ProtocolSequence;

impl Scenario for ProtocolSequence {
    fn name(&self) -> &'static str {
        "protocol-sequence"
    }

    fn run(&self, lab: &Lab) -> anyhow::Result<Score> {
        let (session, base) = lab.session("openai-chat")?;
        let mut work = tool_work("ps", 25);
        work.pop(); // the last call's result has not arrived
        let context = grown(&base, work);

        // The harness reports the boundary honestly: a call is running.
        let lifecycle = lab.lifecycle()?;
        let outcome = lifecycle.boundary_blocking(BoundaryReport {
            conversation: ConversationKey::parse("protocol-sequence")?,
            turn: 1,
            turn_complete: false,
            tool_call_outstanding: true,
            window: 32_000,
            reserve: 4_000,
            usage: Usage::Counted,
            transcript: context.clone(),
        })?;
        let deferred = matches!(outcome.action, Action::Deferred(_) | Action::None | Action::Advised);

        // Forced anyway: the outstanding call must stay last and everything else paired.
        let report = lab.compact("protocol-sequence-forced", &context)?;
        let cycles = vec![Cycle::from(&report)];
        let problems = unpaired_except_last(&report.transcript);
        let passed = deferred && problems.is_empty();
        let detail = format!(
            "{session}: at the boundary: {}; forced: {}",
            if deferred { "deferred".to_string() } else { format!("{:?}", outcome.action) },
            if problems.is_empty() { "the open call is still last, every other call answered".to_string() } else { problems.join("; ") }
        );
        Ok(Score::new(passed, detail, cycles))
    }
}

/// Calls without a result right after them, except the last entry's own calls.
fn unpaired_except_last(t: &Transcript) -> Vec<String> {
    let last = t.entries.len().saturating_sub(1);
    let mut problems = Vec::new();
    for (i, entry) in t.entries.iter().enumerate() {
        for call in entry.tool_call_ids() {
            let answered = t.entries[i + 1..].iter().take_while(|e| e.tool_result_ids().next().is_some()).any(|e| e.tool_result_ids().any(|r| r == call));
            if !answered && i != last {
                problems.push(format!("call {call} of entry {} has no result", entry.id));
            }
            if !answered && i == last {
                continue;
            }
        }
    }
    if t.entries.last().is_none_or(|e| e.tool_call_ids().next().is_none()) {
        problems.push("the outstanding call is no longer last".into());
    }
    problems
}
