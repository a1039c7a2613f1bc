//! 1. A rule given at turn 1 ("never edit files in /config"), then three compaction cycles
//! across 50 tool calls: the rule is still in the working context, verbatim, after each.

use super::{Cycle, Scenario, Score};
use crate::commands::eval::lab::{committed_by, grown, text, tool_work, with_first_request};
use crate::commands::eval::Lab;

pub const RULE: &str = "Never edit files in /config.";

pub struct BuriedConstraint;

impl Scenario for BuriedConstraint {
    fn name(&self) -> &'static str {
        "buried-constraint"
    }

    fn run(&self, lab: &Lab) -> anyhow::Result<Score> {
        let (session, base) = lab.session("openai-chat")?;
        let mut context = with_first_request(base, RULE);
        let mut cycles = Vec::new();
        for (n, calls) in [17, 17, 16].into_iter().enumerate() {
            context = grown(&context, tool_work(&format!("c{n}"), calls));
            let report = lab.compact("buried-constraint", &context)?;
            cycles.push(Cycle::from(&report));
            context = report.transcript.clone();
            if !text(&context).contains(RULE) {
                return Ok(Score::new(false, format!("{session}: the rule is gone after cycle {} of 3 (committed by {})", n + 1, committed_by(&report)), cycles));
            }
        }
        Ok(Score::new(true, format!("{session}: the rule is verbatim in the context after 3 cycles, 50 tool calls"), cycles))
    }
}
