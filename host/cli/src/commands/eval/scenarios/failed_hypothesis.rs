//! 2. A fix is attempted and fails its tests; after compaction the context still names the
//! approach as rejected, with the reason.

use cairn::transcript::{Entry, Origin, Part, Role};

use super::{Cycle, Scenario, Score};
use crate::commands::eval::lab::{committed_by, grown, text, tool_result, tool_work};
use crate::commands::eval::Lab;

const APPROACH: &str = "retrying the upload with a longer timeout";
const REASON: &str = "the server closes the connection after 30 seconds whatever the client timeout";

pub struct FailedHypothesis;

impl Scenario for FailedHypothesis {
    fn name(&self) -> &'static str {
        "failed-hypothesis"
    }

    fn run(&self, lab: &Lab) -> anyhow::Result<Score> {
        let (session, base) = lab.session("openai-chat")?;
        let attempt = vec![
            Entry {
                parts: vec![
                    Part::Text { text: format!("Trying a fix: {APPROACH}.") },
                    Part::ToolCall { id: "hyp-call".into(), name: "bash".into(), args: r#"{"command":"pytest tests/test_upload.py"}"#.into() },
                ],
                ..Entry::text("hyp-a1", Role::Assistant, Origin::Agent, "")
            },
            tool_result("hyp-t1", "hyp-call", "FAILED tests/test_upload.py::test_large_upload - ConnectionResetError\n1 failed, 12 passed".into()),
            Entry::text("hyp-a2", Role::Assistant, Origin::Agent, format!("That approach failed: {APPROACH} does not help, because {REASON}. Rejecting it.")),
        ];
        let mut context = grown(&grown(&base, attempt), tool_work("fh", 20));
        let mut cycles = Vec::new();
        for n in 0..2 {
            let report = lab.compact("failed-hypothesis", &context)?;
            cycles.push(Cycle::from(&report));
            context = report.transcript.clone();
            let seen = text(&context);
            if !(seen.contains(APPROACH) && seen.contains(REASON)) {
                let what = if seen.contains(APPROACH) { "the reason" } else { "the approach" };
                return Ok(Score::new(false, format!("{session}: {what} is gone after cycle {} (committed by {})", n + 1, committed_by(&report)), cycles));
            }
            context = grown(&context, tool_work(&format!("fh{n}"), 15));
        }
        Ok(Score::new(true, format!("{session}: the rejected approach and its reason survive 2 cycles"), cycles))
    }
}
