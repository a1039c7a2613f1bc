//! 6. A server started in the background on a port: after compaction the context still says
//!    it runs, and on which port, so the agent does not launch a second one.

use cairn::transcript::{Entry, Origin, Part, Role};

use super::{cycles, Scenario, Score};
use crate::commands::eval::lab::{grown, text, tool_result};
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
                ]
                .into(),
                ..Entry::text("bw-a1", Role::Assistant, Origin::Agent, "")
            },
            tool_result("bw-t1", "bw-call", "[1] 48211".into()),
            Entry::text("bw-a2", Role::Assistant, Origin::Agent, format!("The dev server is running in the background on port {PORT} (pid 48211).")),
        ];
        let (kept, tokens, context) = cycles(lab, "background-worker", grown(&base, launch), &[20, 15], |r| {
            let seen = text(&r.transcript);
            (!(seen.contains(PORT) && seen.contains("http.server"))).then(|| format!("the context no longer says the server runs on port {PORT}"))
        })?;
        Ok(Score::after_cycles(&session, kept, format!("the running server and its port {PORT} are in the context after 2 cycles"), tokens).probed(
            "Is a dev server already running in the background? On which port?",
            &[PORT],
            context,
        ))
    }
}
