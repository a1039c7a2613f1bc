//! 5. One 80,000-token JSON tool output: no step crashes, the output is set aside with a
//!    recovery pointer that returns it byte for byte, and the context that comes out is bounded.

use cairn::record::OutcomeClass;
use cairn::storage::ArtifactUri;
use cairn::transcript::Part;

use super::{Cycle, Scenario, Score};
use crate::commands::eval::lab::{grown, plant, tool_work};
use crate::commands::eval::Lab;

pub struct LongToolTurn;

impl Scenario for LongToolTurn {
    fn name(&self) -> &'static str {
        "long-tool-turn"
    }

    fn run(&self, lab: &Lab) -> anyhow::Result<Score> {
        let (session, base) = lab.session("openai-chat")?;
        let rows: Vec<serde_json::Value> = (0..5200).map(|i| serde_json::json!({"id": i, "status": if i % 7 == 0 { "failed" } else { "ok" }, "host": format!("node-{}", i % 97)})).collect();
        let huge = serde_json::to_string(&rows)?;
        let mut probe = tool_work("lt", 1);
        plant(&mut probe[1], huge.clone());
        let context = grown(&grown(&base, probe), tool_work("lt-later", 12));
        let report = lab.compact("long-tool-turn", &context)?;
        let cycles = vec![Cycle::from(&report)];
        let crashed: Vec<&str> = report.steps.iter().filter(|s| matches!(s.outcome, OutcomeClass::Trap | OutcomeClass::Timeout | OutcomeClass::Oom)).map(|s| s.plugin.as_str()).collect();
        let uri = report.transcript.entries.iter().flat_map(|e| &e.parts).find_map(|p| match p {
            Part::ToolResult { call_id, elided: Some(uri), .. } if call_id == "lt-call-0" => Some(uri.clone()),
            _ => None,
        });
        let dropped = !report.transcript.entries.iter().any(|e| e.tool_call_ids().any(|c| c == "lt-call-0"));
        let recovered = match &uri {
            Some(uri) => lab.home.find_artifact(&uri.parse::<ArtifactUri>()?)? == huge.as_bytes(),
            None => false,
        };
        let bounded = report.tokens_after < report.tokens_before / 2;
        let passed = crashed.is_empty() && (recovered || dropped) && bounded;
        let detail = format!(
            "{session}: {} tokens → {}; {}; {}",
            report.tokens_before,
            report.tokens_after,
            if crashed.is_empty() { "no step crashed".to_string() } else { format!("crashed steps: {}", crashed.join(", ")) },
            match (uri, recovered, dropped) {
                (Some(uri), true, _) => format!("set aside as {uri}, recovered byte for byte"),
                (Some(uri), false, _) => format!("set aside as {uri}, but the artifact differs"),
                (None, _, true) => "dropped with its call (the archive keeps it)".into(),
                (None, _, false) => "still in the context".into(),
            }
        );
        Ok(Score::new(passed, detail, cycles))
    }
}
