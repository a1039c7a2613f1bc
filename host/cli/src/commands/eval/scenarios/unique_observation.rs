//! 4. A UUID and a port inside a tool output that compaction sets aside: the agent's
//!    `session_history` tool finds them and reads them back exactly.

use cairn::recall;
use cairn::storage::ConversationKey;

use super::{Cycle, Scenario, Score};
use crate::commands::eval::lab::{grown, plant, text, tool_work};
use crate::commands::eval::Lab;

const NEEDLE: &str = "3f2b9c1e-7d4a-4e8b-9a61-0c5d2e7f8b13";

pub struct UniqueObservation;

impl Scenario for UniqueObservation {
    fn name(&self) -> &'static str {
        "unique-observation"
    }

    fn run(&self, lab: &Lab) -> anyhow::Result<Score> {
        let (session, base) = lab.session("openai-chat")?;
        let mut probe = tool_work("uo", 1);
        let filler: String = (0..200).map(|i| format!("worker {i}: idle\n")).collect();
        plant(&mut probe[1], format!("{filler}staging deployment {NEEDLE} listening on port 48213\n{filler}"));
        let context = grown(&grown(&base, probe), tool_work("uo-later", 30));
        let report = lab.compact("unique-observation", &context)?;
        let cycles = vec![Cycle::from(&report)];
        let still_visible = text(&report.transcript).contains(NEEDLE);
        let key = ConversationKey::parse("unique-observation")?;
        let found = recall::execute_json(&lab.home, &key, &serde_json::json!({"action": "search", "query": NEEDLE}).to_string());
        let hit = found.to_string().contains(NEEDLE) && found.to_string().contains("48213");
        let detail = match (still_visible, hit) {
            (true, _) => format!("{session}: the output was not set aside; the UUID is still in the context"),
            (false, true) => format!("{session}: set aside, and session_history search reads the UUID and port back exactly"),
            (false, false) => format!("{session}: set aside, and session_history search does not find it: {}", clip(&found.to_string())),
        };
        Ok(Score::new(still_visible || hit, detail, cycles))
    }
}

fn clip(s: &str) -> String {
    s.chars().take(160).collect()
}
