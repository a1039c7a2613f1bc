//! The compaction pipeline with real components: stages run in order on what the earlier ones
//! left, only while the context is above its target, and compose into one recorded outcome
//! whose every artifact and original stays recoverable.

use crate::support::{host, policy};

use cairn::record::{CommitDecision, CompactionReport, Event};
use cairn::storage::{ArtifactUri, ConversationKey, Home};
use cairn::transcript::{sample, Origin, Part, Role, Transcript};
use cairn::RunOptions;

fn stage(name: &str, plugin: &str, grants: &str, config: &str) -> String {
    format!("[[stage]]\nname = \"{name}\"\n[[stage.chain]]\nplugin = \"{plugin}\"\ngrants = [{grants}]\nconfig = {{ {config} }}\n")
}

const ELIDE: &str = r#""log", "tokens", "archive:write""#;

struct Run {
    report: CompactionReport,
    home: Home,
    before: Transcript,
    _dir: tempfile::TempDir,
}

fn compact(text: &str, approve: Option<&dyn Fn(&cairn::record::Proposal) -> CommitDecision>) -> Run {
    let cairn = host();
    let policy = policy(&cairn, text);
    let dir = tempfile::tempdir().unwrap();
    let home = Home::open(dir.path()).unwrap();
    let mut store = home.conversation(&ConversationKey::parse("pipe").unwrap()).unwrap();
    let before = sample::coding_session(12);
    let options = RunOptions { approve, ..RunOptions::default() };
    let report = cairn.compact_with(&policy, &mut store, &before, "sample", options).unwrap();
    Run { report, home, before, _dir: dir }
}

fn steps(report: &CompactionReport) -> Vec<(String, String)> {
    report.steps.iter().map(|s| (s.stage.clone().unwrap_or_default(), s.plugin.split('@').next().unwrap().to_string())).collect()
}

fn originals(t: &Transcript) -> std::collections::HashMap<String, String> {
    t.entries
        .iter()
        .flat_map(|e| e.parts.iter())
        .filter_map(|p| match p {
            Part::ToolResult { call_id, content, .. } => Some((call_id.clone(), content.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_stage_summarizes_what_the_one_before_left_above_the_target() {
    let text = format!("[compaction]\ntarget_ratio = 0.2\n{}{}", stage("offload", "shake-elide", ELIDE, ""), stage("summarize", "checkpoint-json", r#""log", "tokens""#, ""));
    let Run { report, home, before, _dir } = compact(&text, None);
    assert_eq!(steps(&report), [("offload".into(), "shake-elide".into()), ("summarize".into(), "checkpoint-json".into())], "{:#?}", report.steps);
    assert_eq!(report.committed_by.as_deref(), Some("shake-elide@0.1.0 + checkpoint-json@0.1.0"));
    let elided = report.steps[0].tokens_after.unwrap();
    assert!(report.tokens_after < elided && elided < report.tokens_before, "{} → {elided} → {}", report.tokens_before, report.tokens_after);

    // One compaction in the record: its range and replacement rebuild the context from the
    // original, and every output the first stage set aside is in the archive, byte for byte.
    let store = home.existing_conversation(&ConversationKey::parse("pipe").unwrap()).unwrap();
    let Some(Event::Compaction(event)) = store.events().get(1) else { panic!("no compaction recorded") };
    let content = |entries: &[cairn::transcript::Entry]| entries.iter().map(|e| (e.id.clone(), e.parts.clone())).collect::<Vec<_>>();
    assert!(content(&event.applied_to(&before.entries)) == content(&report.transcript.entries), "the record rebuilds the context");
    assert!(!event.artifacts.is_empty());
    for uri in &event.artifacts {
        let stored = String::from_utf8(home.find_artifact(&uri.parse::<ArtifactUri>().unwrap()).unwrap()).unwrap();
        assert!(before.entries.iter().any(|e| e.model_text().contains(&stored)), "{uri} is not original content");
    }
    // The checkpoint anchors the first request, and the context quotes it.
    let first = before.entries.iter().find(|e| e.role == Role::User && e.origin == Origin::Operator).unwrap().model_text();
    let checkpoint: serde_json::Value = serde_json::from_str(event.checkpoint.as_deref().unwrap()).unwrap();
    assert_eq!(checkpoint["root_objective"], first.trim());
    assert!(report.transcript.entries.iter().any(|e| e.model_text().contains(first.trim())));
}

#[test]
fn a_stage_is_not_run_once_the_context_is_at_its_target() {
    let text = format!("{}{}", stage("offload", "shake-elide", ELIDE, ""), stage("summarize", "checkpoint-json", r#""log", "tokens""#, ""));
    let Run { report, .. } = compact(&text, None);
    assert!(report.tokens_after * 2 <= report.tokens_before, "elision alone reaches the default target");
    assert_eq!(steps(&report), [("offload".into(), "shake-elide".into())]);
    assert_eq!(report.committed_by.as_deref(), Some("shake-elide@0.1.0"));
}

/// Two stages that both set outputs aside: their artifacts are numbered apart, and each URI
/// left in the context recovers its own call's output.
#[test]
fn artifacts_of_every_stage_are_numbered_apart() {
    let text = format!("[compaction]\ntarget_ratio = 0.1\n{}{}", stage("large", "shake-elide", ELIDE, "min_tokens = 1500"), stage("small", "shake-elide", ELIDE, "min_tokens = 200"));
    let Run { report, home, before, _dir } = compact(&text, None);
    assert_eq!(report.committed_by.as_deref(), Some("shake-elide@0.1.0 + shake-elide@0.1.0"), "{:#?}", report.steps);
    let unique: std::collections::HashSet<&String> = report.artifacts.iter().collect();
    assert_eq!(unique.len(), report.artifacts.len(), "{:?}", report.artifacts);
    let outputs = originals(&before);
    let mut resolved = 0;
    for part in report.transcript.entries.iter().flat_map(|e| e.parts.iter()) {
        if let Part::ToolResult { call_id, elided: Some(uri), .. } = part {
            assert_eq!(home.find_artifact(&uri.parse().unwrap()).unwrap(), outputs[call_id].as_bytes(), "{uri}");
            resolved += 1;
        }
    }
    assert!(resolved > 0);
}

/// "Not now" from the commit policy in a later stage commits nothing at all: the context is
/// not left half-compacted.
#[test]
fn a_deferral_in_a_later_stage_commits_nothing() {
    let text = format!("[compaction]\ntarget_ratio = 0.2\n{}{}", stage("offload", "shake-elide", ELIDE, ""), stage("summarize", "checkpoint-json", r#""log", "tokens""#, ""));
    let approve = |proposal: &cairn::record::Proposal| {
        if proposal.strategy.starts_with("checkpoint-json") {
            CommitDecision::Defer("a turn is in flight".into())
        } else {
            CommitDecision::Commit
        }
    };
    let Run { report, before, .. } = compact(&text, Some(&approve));
    assert_eq!(report.committed_by, None);
    assert_eq!(report.transcript.entries.len(), before.entries.len());
    assert_eq!(report.steps.len(), 2, "both stages recorded: {:#?}", report.steps);
}
