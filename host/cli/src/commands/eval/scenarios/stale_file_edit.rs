//! 3. A file read, then changed on disk after the compaction: the record holds the file's
//!    hash, and the next boundary reports it stale (and only it), so the agent re-reads it
//!    instead of trusting the summary.

use cairn::lifecycle::{BoundaryReport, Usage};
use cairn::storage::ConversationKey;
use cairn::transcript::{Entry, Origin, Part, Role};
use cairn::workspace::{Change, StaleFile};
use cairn::RunOptions;

use super::{Cycle, Scenario, Score};
use crate::commands::eval::lab::{grown, tool_result, tool_work};
use crate::commands::eval::Lab;

pub struct StaleFileEdit;

impl Scenario for StaleFileEdit {
    fn name(&self) -> &'static str {
        "stale-file-edit"
    }

    fn run(&self, lab: &Lab) -> anyhow::Result<Score> {
        let (session, base) = lab.session("openai-chat")?;
        let workspace = tempfile::tempdir()?;
        std::fs::create_dir(workspace.path().join("src"))?;
        std::fs::write(workspace.path().join("src/app.py"), "def main():\n    return 1\n")?;
        std::fs::write(workspace.path().join("src/util.py"), "def helper():\n    return 2\n")?;
        let read = |n: usize, path: &str, content: &str| {
            let call = format!("sf-call-{n}");
            vec![
                Entry {
                    parts: vec![Part::ToolCall { id: call.clone(), name: "read".into(), args: format!(r#"{{"path":"{path}"}}"#) }].into(),
                    ..Entry::text(format!("sf-read-{n}"), Role::Assistant, Origin::Agent, "")
                },
                tool_result(&format!("sf-content-{n}"), &call, content.into()),
            ]
        };
        let mut probe = read(0, "src/app.py", "def main():\n    return 1\n");
        probe.extend(read(1, "src/util.py", "def helper():\n    return 2\n"));
        let context = grown(&grown(&base, probe), tool_work("sf", 20));

        let key = "stale-file-edit";
        let mut store = lab.home.conversation(&ConversationKey::parse(key)?)?;
        let report = lab.cairn.compact_with(&lab.policy, &mut store, &context, key, RunOptions { workspace: Some(workspace.path()), ..Default::default() })?;
        drop(store);
        let cycles = vec![Cycle::from(&report)];

        // Someone edits the file after the compaction.
        std::fs::write(workspace.path().join("src/app.py"), "def main():\n    return 42\n")?;
        let outcome = lab.lifecycle()?.with_workspace(workspace.path()).boundary_blocking(BoundaryReport {
            conversation: ConversationKey::parse(key)?,
            turn: 2,
            turn_complete: true,
            tool_call_outstanding: false,
            window: 1_000_000,
            reserve: 0,
            usage: Usage::Counted,
            transcript: report.transcript.clone(),
        })?;
        let expected = [StaleFile { path: "src/app.py".into(), change: Change::Changed }];
        let passed = outcome.stale_files == expected;
        let detail = if passed {
            format!("{session}: the edited src/app.py is reported stale at the next boundary, the untouched src/util.py is not")
        } else {
            format!("{session}: the next boundary reports {:?}, expected only src/app.py as changed", outcome.stale_files)
        };
        Ok(Score::new(passed, detail, cycles))
    }
}
