//! After an agent compacted by itself: its summary is history Cairn's next compaction replaces
//! (the commit policy used to reject every summarizing step, "a stale compaction entry would
//! stay in the kept range", leaving only the degraded last resort), and its instructions stay
//! verbatim wherever it placed them. On a real Codex 0.169.0 rollout with two remote
//! compactions (an encrypted summary Cairn cannot read).

use cairn::lifecycle::{Action, BoundaryReport, Usage};
use cairn::storage::{ConversationKey, Home};
use cairn::transcript::{formats, Origin, Part, Role, Transcript};
use cairn::Lifecycle;
use serde_json::Value;

use crate::support;

const ROLLOUT: &str = include_str!("../../src/transcript/formats/testdata/codex/remote-compaction-mcp-0.169.0.jsonl");
const INSTRUCTIONS: &str = "<skills_instructions>";

/// The rollout with the developer message of its last compaction moved after the user messages
/// it keeps, where Codex also places it.
fn instructions_after_user_messages() -> String {
    let mut lines: Vec<String> = ROLLOUT.lines().map(String::from).collect();
    let last = lines.iter().rposition(|l| l.contains(r#""type":"compacted""#)).unwrap();
    let mut line: Value = serde_json::from_str(&lines[last]).unwrap();
    let history = line["payload"]["replacement_history"].as_array_mut().unwrap();
    let developer = history.remove(0);
    assert_eq!(developer["role"], "developer");
    let at = history.len() - 1;
    history.insert(at, developer);
    lines[last] = line.to_string();
    lines.join("\n")
}

fn text(entry: &cairn::transcript::Entry) -> &str {
    match entry.parts.first() {
        Some(Part::Text { text }) => text,
        _ => "",
    }
}

async fn compact_at_a_boundary(rollout: &str) -> (Transcript, cairn::lifecycle::BoundaryOutcome) {
    let (mut transcript, format) = formats::parse(rollout, "rollout.jsonl").unwrap();
    assert_eq!(format, formats::Format::Codex);
    cairn::tokenizer::Tokenizer::default().count_transcript(&mut transcript);
    let dir = tempfile::tempdir().unwrap();
    let cairn = support::host();
    let policy = support::policy(&cairn, cairn::policy::DEFAULT_POLICY);
    let life = Lifecycle::new(cairn, Home::open(dir.path()).unwrap(), policy);
    let window = transcript.total_tokens() * 100 / 80;
    let report = BoundaryReport {
        conversation: ConversationKey::parse("codex").unwrap(),
        turn: 3,
        turn_complete: true,
        tool_call_outstanding: false,
        window,
        reserve: 0,
        usage: Usage::Counted,
        transcript: transcript.clone(),
    };
    let outcome = life.boundary(report).await.unwrap();
    (transcript, outcome)
}

#[tokio::test]
async fn codex_remote_compaction_is_replaced_by_a_summarizing_step_and_its_instructions_kept() {
    for (shape, rollout) in [("as recorded", ROLLOUT.to_string()), ("instructions after the kept user messages", instructions_after_user_messages())] {
        let (before, outcome) = compact_at_a_boundary(&rollout).await;
        let codex_summary = before.entries.iter().find(|e| e.origin == Origin::Summary).expect("Codex's encrypted summary is read as a summary");
        assert_eq!(outcome.action, Action::Compacted, "{shape}: {outcome:?}");
        let report = outcome.report.as_ref().unwrap();
        assert_eq!(report.committed_by.as_deref(), Some("checkpoint-json@0.1.0"), "{shape}: a summarizing step commits, not the last resort: {report:?}");
        assert!(!report.degraded, "{shape}");
        let after = &outcome.transcript.entries;
        assert!(after.iter().all(|e| e.id != codex_summary.id), "{shape}: Codex's summary is replaced, not left stale");
        let instructions: Vec<_> = after.iter().filter(|e| text(e).starts_with(INSTRUCTIONS)).collect();
        assert_eq!(instructions.len(), 1, "{shape}: Codex's instructions kept once: {after:#?}");
        let original = before.entries.iter().find(|e| text(e).starts_with(INSTRUCTIONS)).unwrap();
        assert_eq!((instructions[0].role, &instructions[0].parts), (Role::System, &original.parts), "{shape}: verbatim");
        assert!(!report.forgotten.contains(&original.id), "{shape}");
        let summaries: Vec<_> = after.iter().filter(|e| e.origin == Origin::Summary).collect();
        assert_eq!(summaries.len(), 1, "{shape}: one summary, Cairn's: {summaries:#?}");
        assert!(text(summaries[0]).contains("Root objective"), "{shape}: {}", text(summaries[0]));
    }
}
