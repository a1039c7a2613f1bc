//! Contract versions side by side: shake-elide as built against contract 0.1.0 before 0.2.0
//! existed (kept as a component in `tests/fixtures/contract-0.1.0/`) and its 0.2.0 rebuild,
//! the bundled one, run in one policy and answer alike.

use crate::support::{host, policy};

use cairn::record::{CompactionReport, OutcomeClass};
use cairn::storage::{ConversationKey, Home};
use cairn::transcript::{sample, Part, Transcript};
use cairn::Cairn;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/contract-0.1.0");
const ELIDE: &str = r#"grants = ["log", "tokens", "archive:write"]"#;

fn with_the_0_1_0_build() -> Cairn {
    let mut cairn = host();
    assert_eq!(cairn.load_plugin_dir(std::path::Path::new(FIXTURE)).unwrap(), 1);
    cairn
}

fn compact(cairn: &Cairn, text: &str, session: &Transcript) -> (CompactionReport, Home, tempfile::TempDir) {
    let policy = policy(cairn, text);
    let dir = tempfile::tempdir().unwrap();
    let home = Home::open(dir.path()).unwrap();
    let mut store = home.conversation(&ConversationKey::parse("versions").unwrap()).unwrap();
    let report = cairn.compact(&policy, &mut store, session, "sample").unwrap();
    (report, home, dir)
}

/// The context's entries with each artifact URI's archive id taken out (each run has its own),
/// and so their token counts (random ids tokenize to different lengths).
fn without_archive_ids(report: &CompactionReport) -> Vec<String> {
    let id = regex::Regex::new("artifact://a-[0-9a-f]+/").unwrap();
    report.transcript.entries.iter().map(|e| id.replace_all(&serde_json::to_string(&cairn::transcript::Entry { tokens: 0, ..e.clone() }).unwrap(), "artifact://a-…/").into_owned()).collect()
}

#[test]
fn a_0_1_0_component_and_its_0_2_0_rebuild_run_in_one_policy() {
    let cairn = with_the_0_1_0_build();
    let plugins: Vec<(String, String)> = cairn.plugins().map(|p| (p.manifest.name.clone(), p.contract().to_string())).filter(|(n, _)| n.starts_with("shake-elide")).collect();
    assert!(plugins.contains(&("shake-elide-0-1".into(), "0.1.0".into())) && plugins.contains(&("shake-elide".into(), "0.2.0".into())), "{plugins:?}");

    // Two stages: the 0.1.0 build sets the largest outputs aside, the 0.2.0 one the rest.
    let text = format!(
        "[compaction]\ntarget_ratio = 0.1\n[[stage]]\nname = \"old\"\n[[stage.chain]]\nplugin = \"shake-elide-0-1\"\n{ELIDE}\nconfig = {{ min_tokens = 1500 }}\n[[stage]]\nname = \"new\"\n[[stage.chain]]\nplugin = \"shake-elide\"\n{ELIDE}\nconfig = {{ min_tokens = 200 }}\n"
    );
    let before = sample::coding_session(12);
    let (report, home, _dir) = compact(&cairn, &text, &before);
    let outcomes: Vec<(&str, OutcomeClass)> = report.steps.iter().map(|s| (s.plugin.as_str(), s.outcome)).collect();
    assert_eq!(outcomes, [("shake-elide-0-1@0.1.0", OutcomeClass::Ok), ("shake-elide@0.1.0", OutcomeClass::Ok)], "{:#?}", report.steps);
    assert_eq!(report.committed_by.as_deref(), Some("shake-elide-0-1@0.1.0 + shake-elide@0.1.0"));

    // What either set aside is in the archive, byte for byte.
    let outputs: std::collections::HashMap<&str, &str> = before
        .entries
        .iter()
        .flat_map(|e| e.parts.iter())
        .filter_map(|p| match p {
            Part::ToolResult { call_id, content, .. } => Some((call_id.as_str(), content.as_str())),
            _ => None,
        })
        .collect();
    let mut resolved = 0;
    for part in report.transcript.entries.iter().flat_map(|e| e.parts.iter()) {
        if let Part::ToolResult { call_id, elided: Some(uri), .. } = part {
            assert_eq!(home.find_artifact(&uri.parse().unwrap()).unwrap(), outputs[call_id.as_str()].as_bytes(), "{uri}");
            resolved += 1;
        }
    }
    assert!(resolved >= 10, "{resolved}");
}

/// The lent conversation changes what crosses, not what comes out: each build alone compacts
/// the same session into the same context.
#[test]
fn the_0_2_0_rebuild_answers_as_the_0_1_0_build_did() {
    let cairn = with_the_0_1_0_build();
    for session in [sample::coding_session(12), sample::coding_session(40)] {
        let run = |plugin: &str| compact(&cairn, &format!("[[chain]]\nplugin = \"{plugin}\"\n{ELIDE}\n"), &session).0;
        let (old, new) = (run("shake-elide-0-1"), run("shake-elide"));
        assert!(old.committed_by.is_some() && new.committed_by.is_some());
        assert_eq!(old.artifacts.len(), new.artifacts.len());
        let (old_entries, new_entries) = (without_archive_ids(&old), without_archive_ids(&new));
        assert_eq!(old_entries.len(), new_entries.len());
        if let Some((o, n)) = old_entries.iter().zip(&new_entries).find(|(o, n)| o != n) {
            panic!("the builds differ:\n0.1.0: {o}\n0.2.0: {n}");
        }
    }
}

/// 0.2.0 tells a strategy where the previous checkpoint ended (`previous-checkpoint-through`):
/// the record keeps it with the checkpoint, and checkpoint-json starts from the previous
/// checkpoint instead of reading everything again, still holding what that one held.
#[test]
fn a_later_checkpoint_starts_where_the_previous_one_ended() {
    use cairn::record::Event;
    use cairn::transcript::{Entry, Origin, Role};

    let cairn = host();
    let policy = policy(&cairn, "[compaction]\ntarget_ratio = 0.2\n[[chain]]\nplugin = \"checkpoint-json\"\ngrants = [\"log\", \"tokens\"]\n");
    let dir = tempfile::tempdir().unwrap();
    let home = Home::open(dir.path()).unwrap();
    let key = ConversationKey::parse("later").unwrap();
    let mut store = home.conversation(&key).unwrap();
    let first = sample::coding_session(12);
    let report = cairn.compact(&policy, &mut store, &first, "sample").unwrap();
    assert!(report.committed_by.is_some(), "{:#?}", report.steps);
    let checkpoint_event = |store: &cairn::storage::ConversationStore| -> (Option<String>, serde_json::Value) {
        let Some(Event::Compaction(c)) = store.events().iter().rev().find(|e| matches!(e, Event::Compaction(c) if c.checkpoint.is_some())) else { panic!("no checkpoint recorded") };
        (c.checkpoint_through.clone(), serde_json::from_str(c.checkpoint.as_deref().unwrap()).unwrap())
    };
    let (through, checkpoint) = checkpoint_event(&store);
    assert_eq!(through.as_deref(), Some(first.entries.last().unwrap().id.as_str()), "made through the end of the conversation it was given");
    let files = |cp: &serde_json::Value| -> Vec<String> { cp["files_modified"].as_array().unwrap().iter().map(|f| f.as_str().unwrap().to_string()).collect() };
    let earlier_files = files(&checkpoint);
    assert!(!earlier_files.is_empty(), "{checkpoint}");

    // A new turn after the compacted context, touching a file the first part never did.
    let mut next = report.transcript.clone();
    let turn = next.entries.iter().map(|e| e.turn).max().unwrap() + 1;
    let call = cairn::transcript::Part::ToolCall { id: "call-docs".into(), name: "edit".into(), args: r#"{"path":"docs/ledger.md","old":"a","new":"b"}"#.into() };
    let result = cairn::transcript::Part::ToolResult { call_id: "call-docs".into(), content: "Edited docs/ledger.md".into(), is_error: false, elided: None };
    let mut push = |id: &str, role, origin, parts: Vec<cairn::transcript::Part>| next.entries.push(Entry { turn, parts: parts.into(), ..Entry::text(id, role, origin, "") });
    push("u-next", Role::User, Origin::Operator, vec![cairn::transcript::Part::Text { text: "Document the ledger rules.".into() }]);
    push("a-next", Role::Assistant, Origin::Agent, vec![call]);
    push("t-next", Role::Tool, Origin::Tool, vec![result]);
    for filler in 0..6 {
        push(&format!("f-{filler}"), Role::Assistant, Origin::Agent, vec![cairn::transcript::Part::Text { text: "Checked the ledger rules again. ".repeat(200) }]);
    }
    let report = cairn.compact(&policy, &mut store, &next, "sample").unwrap();
    assert!(report.committed_by.is_some(), "{:#?}", report.steps);
    let (through, checkpoint) = checkpoint_event(&store);
    assert_eq!(through.as_deref(), Some("f-5"));
    let later_files = files(&checkpoint);
    assert!(later_files.contains(&"docs/ledger.md".to_string()), "the new turn is read: {later_files:?}");
    assert!(earlier_files.iter().all(|f| later_files.contains(f)), "what the previous one held is kept: {earlier_files:?} ⊄ {later_files:?}");
}
