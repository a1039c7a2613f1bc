//! 10. Six consecutive cycles on a long session: the root objective (the first request), the
//!     operator's constraint and the test status stay in the context in every cycle, and the
//!     context stays under the window.

use cairn::transcript::{Entry, Origin, Part, Role};

use super::buried_constraint::RULE;
use super::{cycles, Scenario, Score};
use crate::commands::eval::lab::{grown, text, tool_result, with_first_request};
use crate::commands::eval::Lab;

const WINDOW: u64 = 128_000;
const FAILING: &str = "tests/test_ledger.py::test_negative_amounts";

pub struct SixCycles;

impl Scenario for SixCycles {
    fn name(&self) -> &'static str {
        "six-cycles"
    }

    fn run(&self, lab: &Lab) -> anyhow::Result<Score> {
        let (session, base) = lab.session("pi")?;
        let objective = base.entries.iter().find(|e| e.role == Role::User && e.origin == Origin::Operator).map(|e| e.model_text().trim().chars().take(200).collect::<String>()).unwrap_or_default();
        let status = vec![
            Entry {
                parts: vec![Part::ToolCall { id: "sc-test".into(), name: "bash".into(), args: r#"{"command":"pytest"}"#.into() }].into(),
                ..Entry::text("sc-a", Role::Assistant, Origin::Agent, "")
            },
            tool_result("sc-t", "sc-test", format!("FAILED {FAILING} - assert -5 >= 0\n1 failed, 88 passed")),
        ];
        let (kept, tokens, context) = cycles(lab, "six-cycles", grown(&with_first_request(base, RULE), status), &[12; 6], |r| {
            let seen = text(&r.transcript);
            let missing: Vec<&str> = [("the root objective", objective.as_str()), ("the constraint", RULE), ("the failing test", FAILING)]
                .into_iter()
                .filter(|(_, needle)| !seen.contains(needle))
                .map(|(what, _)| what)
                .collect();
            match (missing.is_empty(), r.tokens_after > WINDOW) {
                (false, _) => Some(format!("{} gone", missing.join(", "))),
                (true, true) => Some(format!("{} tokens, over the window", r.tokens_after)),
                (true, false) => None,
            }
        })?;
        Ok(Score::after_cycles(&session, kept, format!("objective, constraint and test status in every one of 6 cycles, under {WINDOW} tokens"), tokens).probed(
            "Which test was failing at the last test run?",
            &["test_negative_amounts"],
            context,
        ))
    }
}
