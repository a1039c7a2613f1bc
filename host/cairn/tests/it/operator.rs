//! What the operator does to a conversation through the library: undo compactions (the
//! context comes back exactly as recorded), pin entries (they come out of every compaction
//! verbatim, within the budget), look at each compaction, and dry-run one (nothing written).

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;

use cairn::storage::{ConversationKey, Home};
use cairn::transcript::{formats, sample, Entry, Transcript};
use cairn::{CheckedPolicy, RunOptions};

fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for entry in walk(dir) {
        out.insert(entry.strip_prefix(dir).unwrap().display().to_string(), std::fs::read(&entry).unwrap());
    }
    out
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// Compacts `t` and returns the new context.
fn compact(cairn: &cairn::Cairn, policy: &CheckedPolicy, home: &Home, key: &ConversationKey, t: &Transcript) -> cairn::CompactionReport {
    let mut store = home.conversation(key).unwrap();
    let report = cairn.compact(policy, &mut store, t, "test").unwrap();
    assert!(report.committed, "{:?}", report.not_committed);
    report
}

/// The next turns of the session, appended to a compacted context.
fn grow(context: &Transcript, from: &Transcript, turns: std::ops::Range<usize>) -> Transcript {
    let mut entries = context.entries.clone();
    entries.extend(from.entries.iter().filter(|e| turns.contains(&(e.turn as usize))).cloned());
    Transcript::new(entries)
}

#[test]
fn undo_restores_the_context_before_each_compaction_byte_for_byte_plus_what_came_since() {
    let cairn = support::host();
    let policy = cairn.default_policy().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let home = Home::open(dir.path()).unwrap();
    let key = ConversationKey::parse("undo").unwrap();
    let session = sample::coding_session(60);
    let first: Transcript = Transcript::new(session.entries.iter().filter(|e| e.turn < 40).cloned().collect());
    let one = compact(&cairn, &policy, &home, &key, &first);
    let second = grow(&one.transcript, &session, 40..50);
    let two = compact(&cairn, &policy, &home, &key, &second);
    let now = grow(&two.transcript, &session, 50..61);

    // The latest compaction taken back: the context it found, plus the turns added since.
    let mut store = home.conversation(&key).unwrap();
    let undone = cairn::undo::undo(&mut store, &cairn.tokenizer(), Some(&now), None).unwrap();
    assert_eq!(undone.undone, std::slice::from_ref(&two.archive_id));
    let expected = grow(&second, &session, 50..61);
    assert_eq!(formats::write_cairn(&undone.transcript), formats::write_cairn(&counted(&cairn, expected)));

    // Then the first one, from the record alone: the original history, whole.
    let undone = cairn::undo::undo(&mut store, &cairn.tokenizer(), None, Some(&one.archive_id)).unwrap();
    assert_eq!(undone.undone, std::slice::from_ref(&one.archive_id));
    assert_eq!(formats::write_cairn(&undone.transcript), formats::write_cairn(&counted(&cairn, session.clone())));

    // Undone twice, or nothing left: a clear error, nothing recorded.
    let events = store.events().len();
    let err = cairn::undo::undo(&mut store, &cairn.tokenizer(), None, Some(&one.archive_id)).unwrap_err().to_string();
    assert!(err.contains("was undone already"), "{err}");
    let err = cairn::undo::undo(&mut store, &cairn.tokenizer(), None, None).unwrap_err().to_string();
    assert!(err.contains("no compaction to undo"), "{err}");
    assert_eq!(store.events().len(), events);

    // The timeline says all of it.
    let timeline = cairn::show::timeline(&store);
    let kinds: Vec<String> = timeline.moments.iter().map(|m| serde_json::to_value(m).unwrap()["kind"].as_str().unwrap().to_string()).collect();
    assert_eq!(kinds, ["compaction", "compaction", "undo", "undo"]);
    for moment in &timeline.moments[..2] {
        assert_eq!(serde_json::to_value(moment).unwrap()["status"], "undone");
    }
    // The record's own context is the restored one (a reopened store agrees).
    drop(store);
    assert_eq!(home.existing_conversation(&key).unwrap().context().unwrap().len(), session.entries.len());
}

fn counted(cairn: &cairn::Cairn, mut t: Transcript) -> Transcript {
    cairn.tokenizer().count_transcript(&mut t);
    t
}

#[test]
fn each_compaction_is_shown_part_by_part() {
    let cairn = support::host();
    let policy = cairn.default_policy().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let home = Home::open(dir.path()).unwrap();
    let key = ConversationKey::parse("show").unwrap();
    let report = compact(&cairn, &policy, &home, &key, &sample::coding_session(40));
    let store = home.existing_conversation(&key).unwrap();
    let view = cairn::show::compaction(&store, &report.archive_id).unwrap();
    let json = serde_json::to_value(&view).unwrap();
    assert_eq!(json["status"], "committed");
    assert_eq!(json["replaced"], report.replaced);
    let stages = json["stages"].as_array().unwrap();
    assert!(!stages.is_empty(), "{json:#}");
    for stage in &view.stages {
        assert!(stage.adds_up(), "stage {}'s parts add up to its tokens: {}", stage.stage, serde_json::to_string(stage).unwrap().chars().take(1500).collect::<String>());
    }
    let committed: Vec<_> = view.stages.iter().filter(|s| s.status == cairn::show::StageStatus::Committed).collect();
    assert_eq!(committed.first().unwrap().tokens_before, report.tokens_before);
    let elided: Vec<&cairn::show::EntryView> = view.stages.iter().flat_map(|s| &s.elided.entries).collect();
    let bare: Vec<_> = elided.iter().filter(|e| !e.uris.first().is_some_and(|u| u.starts_with("artifact://")) || e.placeholder.is_none()).collect();
    assert!(!elided.is_empty() && bare.is_empty(), "every elided entry names its placeholder and artifact: {bare:?}");
    for stage in &view.stages {
        assert_eq!(stage.summarized.count == 0, stage.summaries.count == 0 || stage.dropped.count > 0, "what was summarized, and what stands for it");
    }
    assert_eq!(json["steps"].as_array().unwrap().len(), report.steps.len());
    assert!(cairn::show::compaction(&store, "a-0000000000000000").unwrap_err().to_string().contains("no compaction"));
}

#[test]
fn a_pinned_entry_of_the_first_turn_is_verbatim_after_three_cycles() {
    let cairn = support::host();
    let policy = cairn.default_policy().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let home = Home::open(dir.path()).unwrap();
    let key = ConversationKey::parse("pins").unwrap();
    let session = sample::coding_session(90);
    let pinned: Entry = session.entries.iter().find(|e| e.turn == 1 && e.role == cairn::transcript::Role::Tool).unwrap().clone();
    let mut context = Transcript::new(session.entries.iter().filter(|e| e.turn < 30).cloned().collect());
    {
        let mut store = home.conversation(&key).unwrap();
        store.record_snapshot("test", &context.entries).unwrap();
        store.record_pins(vec![pinned.id.clone()], true).unwrap();
    }
    for (cycle, turns) in [(1, 30..60), (2, 60..91), (3, 91..91)] {
        let report = compact(&cairn, &policy, &home, &key, &context);
        assert!(report.pinned.contains(&pinned.id), "cycle {cycle}: {:?}", report.pinned);
        let kept = report.transcript.entries.iter().find(|e| e.id == pinned.id).unwrap_or_else(|| panic!("cycle {cycle}: the pinned entry is gone"));
        assert_eq!(kept.parts, pinned.parts, "cycle {cycle}: the pinned entry is verbatim");
        assert!(!kept.pinned, "the harness gets its own flags back; the pin lives in the record");
        context = grow(&report.transcript, &session, turns);
    }
}

#[test]
fn a_dry_run_reports_the_compaction_and_writes_nothing() {
    let cairn = support::host();
    let policy = cairn.default_policy().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let home = Home::open(dir.path()).unwrap();
    let key = ConversationKey::parse("dry").unwrap();
    let session = sample::coding_session(60);
    compact(&cairn, &policy, &home, &key, &Transcript::new(session.entries.iter().filter(|e| e.turn < 30).cloned().collect()));
    let before = files(dir.path());

    let mut store = home.preview(&key).unwrap();
    let report = cairn.compact_with(&policy, &mut store, &session, "test", RunOptions { dry_run: true, ..Default::default() }).unwrap();
    assert!(report.dry_run && report.committed && report.tokens_after < report.tokens_before);
    assert_eq!(report.cache_rewrite.len(), 2, "the rewrite cost for each priced model");
    let mut fresh = home.preview(&ConversationKey::parse("never-written").unwrap()).unwrap();
    assert!(cairn.compact_with(&policy, &mut fresh, &session, "test", RunOptions { dry_run: true, ..Default::default() }).unwrap().committed);
    drop((store, fresh));
    assert_eq!(files(dir.path()), before, "the home's files are unchanged");
}
