//! 6. A server started in the background on a port: after compaction the context still says
//! it runs, and on which port, so the agent does not launch a second one.

use cairn::transcript::{Entry, Origin, Part, Role};

use super::{Cycle, Scenario, Score};
use crate::commands::eval::lab::{committed_by, grown, text, tool_result, tool_work};
use crate::commands::eval::Lab;

const COMMAND: &str = "python -m http.server 8765";
const PORT: &str = "8765";

pub struct BackgroundWorker;

impl Scenario for BackgroundWorker {
    fn name(&self) -> &'static str {
        "background-worker"
    }

    fn run(&self, lab: &Lab) -> anyhow::Result<Score> {
        let (session, base) = lab.session("openai-chat")?;
        let launch = vec![
            Entry {
                parts: vec![
                    Part::Text { text: "Starting the dev server in the background.".into() },
                    Part::ToolCall { id: "bw-call".into(), name: "bash".into(), args: format!(r#"{{"command":"{COMMAND} > /tmp/server.log 2>&1 &"}}"#) },
                ],
                ..Entry::text("bw-a1", Role::Assistant, Origin::Agent, "")
            },
            tool_result("bw-t1", "bw-call", "[1] 48211".into()),
            Entry::text("bw-a2", Role::Assistant, Origin::Agent, format!("The dev server is running in the background on port {PORT} (pid 48211).")),
        ];
        let mut context = grown(&grown(&base, launch), tool_work("bw", 20));
        let mut cycles = Vec::new();
        for n in 0..2 {
            let report = lab.compact("background-worker", &context)?;
            cycles.push(Cycle::from(&report));
            context = report.transcript.clone();
            let seen = text(&context);
            if !(seen.contains(PORT) && seen.contains("http.server")) {
                return Ok(Score::new(false, format!("{session}: after cycle {} the context no longer says the server runs on port {PORT} (committed by {})", n + 1, committed_by(&report)), cycles));
            }
            context = grown(&context, tool_work(&format!("bw{n}"), 15));
        }
        Ok(Score::new(true, format!("{session}: the running server and its port {PORT} are in the context after 2 cycles"), cycles))
    }
}
