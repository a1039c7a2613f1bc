//! 2. A fix is attempted and fails its tests; after compaction the context still names the
//!    approach as rejected, with the reason.

use cairn::transcript::{Entry, Origin, Part, Role};

use super::{cycles, Scenario, Score};
use crate::commands::eval::lab::{grown, text, tool_result};
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
                ]
                .into(),
                ..Entry::text("hyp-a1", Role::Assistant, Origin::Agent, "")
            },
            tool_result("hyp-t1", "hyp-call", "FAILED tests/test_upload.py::test_large_upload - ConnectionResetError\n1 failed, 12 passed".into()),
            Entry::text("hyp-a2", Role::Assistant, Origin::Agent, format!("That approach failed: {APPROACH} does not help, because {REASON}. Rejecting it.")),
        ];
        let (kept, tokens, context) = cycles(lab, "failed-hypothesis", grown(&base, attempt), &[20, 15], |r| {
            let seen = text(&r.transcript);
            match (seen.contains(APPROACH), seen.contains(REASON)) {
                (true, true) => None,
                (true, false) => Some("the reason is gone".into()),
                _ => Some("the approach is gone".into()),
            }
        })?;
        Ok(Score::after_cycles(&session, kept, "the rejected approach and its reason survive 2 cycles".to_string(), tokens).probed(
            "Which fix for the failing upload test did you already try and reject, and why did it not work?",
            &["timeout", "30 seconds"],
            context,
        ))
    }
}
