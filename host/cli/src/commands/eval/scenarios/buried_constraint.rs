//! 1. A rule given at turn 1 ("never edit files in /config"), then three compaction cycles
//!    across 50 tool calls: the rule is still in the working context, verbatim, after each.

use super::{cycles, Scenario, Score};
use crate::commands::eval::lab::{text, with_first_request};
use crate::commands::eval::Lab;

pub const RULE: &str = "Never edit files in /config.";

pub struct BuriedConstraint;

impl Scenario for BuriedConstraint {
    fn name(&self) -> &'static str {
        "buried-constraint"
    }

    fn run(&self, lab: &Lab) -> anyhow::Result<Score> {
        let (session, base) = lab.session("openai-chat")?;
        let (kept, tokens, context) =
            cycles(lab, "buried-constraint", with_first_request(base, RULE), &[17, 17, 16], |r| (!text(&r.transcript).contains(RULE)).then(|| "the rule is gone".to_string()))?;
        Ok(Score::after_cycles(&session, kept, "the rule is verbatim in the context after 3 cycles, 50 tool calls".to_string(), tokens).probed(
            "Which files or directories did the operator tell you never to edit?",
            &["/config"],
            context,
        ))
    }
}
