//! `cairn::show` tells the truth for every pipeline: each stage's parts (elided, summarized and
//! into what, dropped, kept verbatim, the verbatim tail) add up to the stage's tokens before and
//! after, each stage starts where the one before it ended, and the last ends at the total.

use crate::support;
use cairn::show::{CompactionView, StageStatus};
use cairn::storage::{ConversationKey, Home};
use cairn::transcript::sample;

fn shown(policy: Option<&str>, turns: usize) -> (CompactionView, cairn::CompactionReport) {
    let cairn = support::host();
    let policy = match policy {
        Some(text) => support::policy(&cairn, text),
        None => cairn.default_policy().unwrap(),
    };
    let dir = tempfile::tempdir().unwrap();
    let home = Home::open(dir.path()).unwrap();
    let key = ConversationKey::parse("show").unwrap();
    let mut store = home.conversation(&key).unwrap();
    let mut transcript = sample::coding_session(turns);
    cairn.tokenizer().count_transcript(&mut transcript);
    let report = cairn.compact(&policy, &mut store, &transcript, "test").unwrap();
    assert!(report.committed, "{:?}", report.not_committed);
    let store = home.existing_conversation(&key).unwrap();
    (cairn::show::compaction(&store, &report.archive_id).unwrap(), report)
}

/// Every stage adds up, the stages chain, and the last committed one ends at the total (or the
/// view says by how much and why it does not).
fn assert_adds_up(view: &CompactionView) {
    let json = serde_json::to_string(view).unwrap();
    let short = || json.chars().take(2000).collect::<String>();
    assert!(!view.stages.is_empty(), "{}", short());
    let mut at = view.tokens_before;
    for stage in &view.stages {
        assert!(stage.adds_up(), "stage {}: parts do not add up: {}", stage.stage, short());
        assert_eq!(stage.tokens_before, at, "stage {} starts where the one before ended", stage.stage);
        at = stage.tokens_after;
    }
    let adjusted = view.adjusted.as_ref().map_or(0, |a| a.tokens);
    assert_eq!(at as i64 + adjusted, view.tokens_after as i64, "the stages and the adjustment end at the total: {}", short());
}

#[test]
fn show_adds_up_for_a_single_chain() {
    let (view, report) = shown(Some("[[chain]]\nplugin = \"shake-elide\"\ngrants = [\"log\", \"tokens\", \"archive:write\"]\n"), 40);
    assert_adds_up(&view);
    assert_eq!(view.stages.len(), 1);
    let stage = &view.stages[0];
    assert!(stage.elided.count > 0 && stage.elided.tokens_after.unwrap() < stage.elided.tokens, "{stage:?}");
    assert!(stage.elided.entries.iter().all(|e| e.placeholder.as_deref().is_some_and(|p| p.contains("artifact://")) && !e.uris.is_empty()), "each elided entry shows its placeholder and URI");
    assert!(stage.tail.count > 0 && stage.tail.tokens > 0, "the verbatim tail is shown as such");
    assert_eq!(stage.steps.len(), report.steps.len());
}

#[test]
fn show_adds_up_for_the_default_two_stage_pipeline_when_both_stages_run() {
    // The default's two stages aiming at 0.05: elision alone does not meet it, so both commit.
    let deep = include_str!("../../../../examples/policies/offline-deep.toml").replace("target_ratio = 0.2", "target_ratio = 0.05");
    let (view, _) = shown(Some(&deep), 120);
    assert_adds_up(&view);
    let names: Vec<&str> = view.stages.iter().map(|s| s.stage.as_str()).collect();
    assert_eq!(names, ["offload", "summarize"], "{view:?}");
    let (offload, summarize) = (&view.stages[0], &view.stages[1]);
    assert_eq!(summarize.status, StageStatus::Committed, "{summarize:?}");
    assert!(offload.elided.count > 0 && offload.elided.tokens > 0, "what the first stage elided is listed, not hidden by the second: {offload:?}");
    assert!(summarize.summarized.count > 0 && summarize.summaries.count > 0);
    assert!(summarize.tail.tokens > 0, "the verbatim tail is kept verbatim");
    let step = summarize.steps.iter().find(|s| s.report.plugin.starts_with("checkpoint-json")).unwrap();
    assert_eq!(step.not_granted, ["model"], "{step:?}");
    assert!(step.report.refused.is_empty() && step.note.as_deref().unwrap().contains("offline by policy"), "{step:?}");
}

#[test]
fn show_adds_up_for_the_default_policy() {
    let (view, _) = shown(None, 120);
    assert_adds_up(&view);
}

#[test]
fn show_says_a_stage_was_skipped_because_the_target_was_met() {
    // The target is generous: elision alone meets it, so the summarize stage does not run.
    let policy = r#"
[compaction]
target_ratio = 0.95

[[stage]]
name = "offload"
[[stage.chain]]
plugin = "shake-elide"
grants = ["log", "tokens", "archive:write"]

[[stage]]
name = "summarize"
[[stage.chain]]
plugin = "checkpoint-json"
grants = ["log", "tokens"]
"#;
    let (view, _) = shown(Some(policy), 40);
    assert_adds_up(&view);
    let summarize = view.stages.iter().find(|s| s.stage == "summarize").unwrap();
    assert_eq!(summarize.status, StageStatus::Skipped, "{view:?}");
    assert!(summarize.note.as_deref().unwrap().contains("not needed"), "{summarize:?}");
    assert_eq!(summarize.tokens_before, summarize.tokens_after);
}

#[test]
fn show_adds_up_for_a_last_resort_compaction() {
    let (view, report) = shown(Some("[[chain]]\nplugin = \"misbehave\"\ngrants = [\"archive:read\"]\nconfig = { mode = \"trap\" }\n"), 12);
    assert!(report.degraded, "{report:?}");
    assert_adds_up(&view);
    let stage = &view.stages[0];
    assert!(stage.committed_by.as_deref().unwrap().starts_with("last-resort@"));
    assert!(stage.dropped.count > 0 && stage.summarized.count == 0, "the last resort drops; nothing is summarized: {stage:?}");
    assert!(stage.tail.count > 0);
}

/// A record written before stages were recorded is shown as one stage whose parts still add up
/// (the head and tail counted, not listed, and said so).
#[test]
fn show_adds_up_for_a_record_without_stages() {
    let cairn = support::host();
    let policy = support::policy(&cairn, "[[chain]]\nplugin = \"shake-elide\"\ngrants = [\"log\", \"tokens\", \"archive:write\"]\n");
    let dir = tempfile::tempdir().unwrap();
    let home = Home::open(dir.path()).unwrap();
    let key = ConversationKey::parse("old").unwrap();
    let mut transcript = sample::coding_session(40);
    cairn.tokenizer().count_transcript(&mut transcript);
    let report = cairn.compact(&policy, &mut home.conversation(&key).unwrap(), &transcript, "test").unwrap();
    // As an older version wrote it: no `stages`.
    let log = dir.path().join("conversations/old/events.jsonl");
    let lines: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|line| {
            let mut event: serde_json::Value = serde_json::from_str(line).unwrap();
            event.as_object_mut().unwrap().remove("stages");
            event.to_string()
        })
        .collect();
    std::fs::write(&log, lines.join("\n") + "\n").unwrap();
    let home = Home::open(dir.path()).unwrap();
    let store = home.existing_conversation(&key).unwrap();
    let view = cairn::show::compaction(&store, &report.archive_id).unwrap();
    assert_adds_up(&view);
    let stage = &view.stages[0];
    assert!(stage.elided.count > 0 && stage.note.as_deref().is_some_and(|n| n.contains("counted, not listed")), "{stage:?}");
}
