//! Archive access across every boundary: bounded reads, recall for the agent, and attempts to
//! escape the conversation — by path tricks, forged ids, planted symlinks, another
//! conversation's archive, oversized requests, and plugins asking for what they may not have.

use std::path::Path;

use crate::support;

use cairn::recall::{self, HistoryCall};
use cairn::record::{CompactionReport, OutcomeClass};
use cairn::storage::archive::{PAGE_MAX_ENTRIES, SEARCH_MAX_HITS, SLICE_MAX_CHARS};
use cairn::storage::{ArtifactUri, ConversationKey, Home};
use cairn::transcript::{sample, Part, Transcript};
use serde_json::Value;
use support::{host, policy};

const NEEDLE: &str = "zebra-quartz-4711";

const SHAKE: &str = "[[chain]]\nplugin = \"shake-elide\"\ngrants = [\"log\", \"tokens\", \"archive:write\"]\n";

/// A session whose second tool output carries a unique string, long enough to be elided.
fn session_with_needle() -> Transcript {
    let mut t = sample::coding_session(12);
    let mut planted = false;
    for entry in &mut t.entries {
        for part in &mut entry.parts {
            if let Part::ToolResult { content, .. } = part {
                if !planted && content.contains("test result") {
                    content.push_str(&format!("\nnote: flaky fixture {NEEDLE} seen once\n"));
                    planted = true;
                }
            }
        }
    }
    assert!(planted);
    t
}

fn compact(home: &Home, key: &str, text: &str, transcript: &Transcript) -> CompactionReport {
    let cairn = host();
    let policy = policy(&cairn, text);
    let mut store = home.conversation(&ConversationKey::parse(key).unwrap()).unwrap();
    cairn.compact(&policy, &mut store, transcript, "test").unwrap()
}

fn history(home: &Home, key: &str, call: HistoryCall) -> anyhow::Result<Value> {
    recall::execute(home, &ConversationKey::parse(key).unwrap(), &call)
}

/// Every file under `dir` with its bytes, to prove nothing changed.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.is_dir() {
            out.extend(snapshot(&path));
        } else {
            out.push((path.display().to_string(), std::fs::read(&path).unwrap_or_default()));
        }
    }
    out.sort();
    out
}

#[test]
fn an_elided_string_is_found_by_search_and_read_back_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::open(dir.path()).unwrap();
    let report = compact(&home, "conv-a", SHAKE, &session_with_needle());
    assert!(report.committed_by.is_some());

    let found = history(&home, "conv-a", HistoryCall::Search { query: NEEDLE.into(), offset: 0, limit: 5 }).unwrap();
    let hit = &found["hits"][0];
    assert!(hit["snippet"].as_str().unwrap().contains(NEEDLE), "{found:#}");
    assert_eq!(hit["archive_id"], report.archive_id);

    // Page through the hit's entry slice by slice; the text reassembles exactly.
    let (archive_id, index) = (hit["archive_id"].as_str().unwrap().to_string(), hit["index"].as_u64().unwrap() as usize);
    let mut text = String::new();
    let mut char_offset = 0;
    loop {
        let page = history(&home, "conv-a", HistoryCall::Page { archive_id: archive_id.clone(), offset: index, limit: 1, char_offset }).unwrap();
        let slice = &page["entries"][0];
        assert!(slice["text"].as_str().unwrap().chars().count() <= SLICE_MAX_CHARS);
        text.push_str(slice["text"].as_str().unwrap());
        match slice["next_char_offset"].as_u64() {
            Some(next) => char_offset = next as usize,
            None => break,
        }
    }
    assert!(text.contains(&format!("flaky fixture {NEEDLE} seen once")), "{text}");

    // And the placeholder's artifact is the original output, byte for byte.
    let uri = report
        .transcript
        .entries
        .iter()
        .flat_map(|e| e.parts.iter())
        .find_map(|p| match p {
            Part::ToolResult { elided: Some(uri), .. } => {
                let uri = uri.clone();
                let original = String::from_utf8(home.find_artifact(&uri.parse().unwrap()).unwrap()).unwrap();
                original.contains(NEEDLE).then_some((uri, original))
            }
            _ => None,
        })
        .expect("the needle's output was elided into an artifact");
    let read = history(&home, "conv-a", HistoryCall::Artifact { uri: uri.0.clone(), char_offset: 0 }).unwrap();
    assert_eq!(read["text"].as_str().unwrap(), uri.1);
    assert!(text.contains(&uri.1), "paging shows the same original text");
}

#[test]
fn reads_never_exceed_their_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::open(dir.path()).unwrap();
    let report = compact(&home, "big", SHAKE, &sample::coding_session(40));
    let page = history(&home, "big", HistoryCall::Page { archive_id: report.archive_id.clone(), offset: 0, limit: 100_000, char_offset: 0 }).unwrap();
    assert_eq!(page["entries"].as_array().unwrap().len(), PAGE_MAX_ENTRIES);
    assert!(page["clamped"].as_str().unwrap().contains("clamped"));
    assert!(page["entries"].as_array().unwrap().iter().all(|e| e["text"].as_str().unwrap().chars().count() <= SLICE_MAX_CHARS));
    assert_eq!(page["next_offset"], PAGE_MAX_ENTRIES);

    let hits = history(&home, "big", HistoryCall::Search { query: "posting balances rejected".into(), offset: 0, limit: 100_000 }).unwrap();
    assert_eq!(hits["hits"].as_array().unwrap().len(), SEARCH_MAX_HITS);
    assert!(hits["total"].as_u64().unwrap() > SEARCH_MAX_HITS as u64);
    assert!(hits["clamped"].as_str().unwrap().contains("clamped"));

    let long_query = "ledger ".repeat(5_000);
    let hits = history(&home, "big", HistoryCall::Search { query: long_query, offset: 0, limit: 5 }).unwrap();
    assert!(hits["clamped"].as_str().unwrap().contains("query cut"));

    let summary = history(&home, "big", HistoryCall::Summary).unwrap();
    assert!(summary["text"].as_str().unwrap().chars().count() <= 20_000);
    assert!(summary["text"].as_str().unwrap().contains(&report.archive_id));
}

#[test]
fn bad_ids_are_refused_before_touching_the_disk() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::open(dir.path()).unwrap();
    compact(&home, "conv-a", SHAKE, &sample::coding_session(6));
    for key in ["..", "../conv-a", "/etc", "conv-a/../x", "conv\0a", "c".repeat(65).as_str(), "cоnv-a" /* Cyrillic о */, "conv-a\u{200b}"] {
        assert!(ConversationKey::parse(key).is_err(), "key {key:?}");
    }
    for id in ["../a-0123456789abcdef", "/a-0123456789abcdef", "a-0123456789abcde\0", "a-0123456789abcdef0", "a-０１２３４５６７８９abcdef", "A-0123456789ABCDEF", ""] {
        let err = history(&home, "conv-a", HistoryCall::Page { archive_id: id.into(), offset: 0, limit: 1, char_offset: 0 }).unwrap_err();
        assert!(err.to_string().contains("invalid archive id"), "{id:?}: {err}");
    }
    for uri in ["artifact://a-0123456789abcdef/../../x", "artifact:///etc/passwd", "artifact://a-0123456789abcdef/1\0", "file://a-0123456789abcdef/1"] {
        let err = history(&home, "conv-a", HistoryCall::Artifact { uri: uri.into(), char_offset: 0 }).unwrap_err();
        assert!(err.to_string().contains("invalid"), "{uri:?}: {err}");
    }
    assert!(recall::execute_json(&home, &ConversationKey::parse("conv-a").unwrap(), r#"{"action":"page","archive_id":"x","path":"/etc"}"#)["error"].as_str().unwrap().contains("unknown field"));
}

#[test]
fn another_conversations_archive_is_not_found_and_forged_uris_resolve_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::open(dir.path()).unwrap();
    let a = compact(&home, "conv-a", SHAKE, &session_with_needle());
    compact(&home, "conv-b", SHAKE, &sample::coding_session(6));
    let before = snapshot(dir.path());

    let err = history(&home, "conv-b", HistoryCall::Page { archive_id: a.archive_id.clone(), offset: 0, limit: 5, char_offset: 0 }).unwrap_err();
    assert!(err.to_string().contains("not found"), "{err}");
    let err = history(&home, "conv-b", HistoryCall::Artifact { uri: a.artifacts[0].clone(), char_offset: 0 }).unwrap_err();
    assert!(err.to_string().contains("not found"), "{err}");
    let hits = history(&home, "conv-b", HistoryCall::Search { query: NEEDLE.into(), offset: 0, limit: 5 }).unwrap();
    assert_eq!(hits["total"], 0, "search stays inside the conversation");

    // Valid format, but never committed: an uncommitted or made-up archive resolves nothing.
    let forged = ArtifactUri { archive_id: "a-0123456789abcdef".into(), index: 1 }.to_string();
    assert!(history(&home, "conv-a", HistoryCall::Artifact { uri: forged, char_offset: 0 }).is_err());
    let past_end = ArtifactUri { archive_id: a.archive_id.clone(), index: 999_999 }.to_string();
    assert!(history(&home, "conv-a", HistoryCall::Artifact { uri: past_end, char_offset: 0 }).is_err());
    // Reads never create a conversation: one never compacted has an empty history.
    let summary = history(&home, "conv-new", HistoryCall::Summary).unwrap();
    assert!(summary["text"].as_str().unwrap().contains("Nothing in this conversation has been compacted yet"), "{summary}");
    assert!(history(&home, "conv-new", HistoryCall::Page { archive_id: a.archive_id.clone(), offset: 0, limit: 5, char_offset: 0 }).is_err());
    assert_eq!(snapshot(dir.path()), before, "reads changed nothing");
}

#[cfg(unix)]
#[test]
fn symlinks_planted_in_the_home_lead_nowhere() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("artifacts"), "{\"lengths\":[23]}\nsecret outside the home").unwrap();
    std::fs::write(outside.path().join("entries.jsonl"), "").unwrap();
    let home = Home::open(dir.path()).unwrap();
    let report = compact(&home, "conv-a", SHAKE, &sample::coding_session(6));

    // Replace the committed archive folder by a link to a folder outside the home.
    let archive = dir.path().join("conversations/conv-a/archives").join(&report.archive_id);
    std::fs::rename(&archive, dir.path().join("moved")).unwrap();
    std::os::unix::fs::symlink(outside.path(), &archive).unwrap();
    let err = home.find_artifact(&report.artifacts[0].parse().unwrap()).unwrap_err();
    assert!(!format!("{err:#}").contains("secret"));
    let page = history(&home, "conv-a", HistoryCall::Page { archive_id: report.archive_id.clone(), offset: 0, limit: 5, char_offset: 0 });
    assert!(page.is_err() || page.unwrap()["entries"].as_array().unwrap().is_empty());

    // A file inside the archive linked to one outside.
    std::fs::remove_file(&archive).unwrap();
    std::fs::rename(dir.path().join("moved"), &archive).unwrap();
    std::fs::remove_file(archive.join("artifacts")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("artifacts"), archive.join("artifacts")).unwrap();
    let read = home.find_artifact(&report.artifacts[0].parse().unwrap());
    assert!(read.is_err(), "a link out of the home is not followed");
    assert!(std::fs::read_to_string(outside.path().join("artifacts")).unwrap().ends_with("secret outside the home"));
}

#[test]
fn a_plugin_cannot_read_another_conversations_archive() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::open(dir.path()).unwrap();
    let a = compact(&home, "conv-a", SHAKE, &session_with_needle());
    let peek = format!("[[chain]]\nplugin = \"misbehave\"\ngrants = [\"archive:read\"]\nconfig = {{ mode = \"peek\", archive = \"{}\" }}\n{SHAKE}", a.archive_id);
    let b = compact(&home, "conv-b", &peek, &sample::coding_session(6));
    let message = b.steps[0].message.as_deref().unwrap();
    assert!(message.contains("NotFound"), "{message}");
    assert!(!message.contains(NEEDLE));
    assert_eq!(b.steps[1].outcome, OutcomeClass::Ok);
}

#[test]
fn a_plugin_with_a_read_grant_searches_its_own_conversation_within_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::open(dir.path()).unwrap();
    compact(&home, "conv-a", SHAKE, &session_with_needle());
    let recall = format!("[[chain]]\nplugin = \"misbehave\"\ngrants = [\"archive:read\"]\nconfig = {{ mode = \"recall\", query = \"{NEEDLE}\" }}\n{SHAKE}");
    let again = compact(&home, "conv-a", &recall, &session_with_needle());
    let message = again.steps[0].message.as_deref().unwrap();
    assert!(message.contains(NEEDLE) && message.contains("clamped=Some"), "{message}");
}

/// Two compactions of the same original (stacked by a harness that handed it in twice) archive
/// the same entries twice; a search finds each once, in the newest archive. And the record
/// recognises the original handed in again (`ConversationStore::already_compacted`), so
/// `cairn compact` does not stack the second one.
#[test]
fn a_search_never_returns_the_same_hit_twice() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::open(dir.path()).unwrap();
    let session = session_with_needle();
    let key = ConversationKey::parse("twice").unwrap();
    assert!(home.conversation(&key).unwrap().already_compacted(&session.entries).is_none(), "nothing compacted yet");
    let first = compact(&home, "twice", SHAKE, &session);
    let store = home.existing_conversation(&key).unwrap();
    assert_eq!(store.already_compacted(&session.entries).map(|c| c.archive_id.clone()), Some(first.archive_id.clone()), "the same original, handed in again");
    let compacted = store.context().unwrap();
    assert!(store.already_compacted(&compacted).is_none(), "the compacted context is not the original");
    let second = compact(&home, "twice", SHAKE, &session);
    assert!(second.committed_by.is_some() && second.archive_id != first.archive_id);

    let found = history(&home, "twice", HistoryCall::Search { query: "test result".into(), offset: 0, limit: SEARCH_MAX_HITS }).unwrap();
    let hits = found["hits"].as_array().unwrap();
    assert!(!hits.is_empty(), "{found:#}");
    let mut seen = std::collections::HashSet::new();
    for hit in hits {
        assert!(seen.insert(hit["entry_id"].as_str().unwrap().to_string()), "entry {} found twice: {found:#}", hit["entry_id"]);
    }
    let needle = history(&home, "twice", HistoryCall::Search { query: NEEDLE.into(), offset: 0, limit: 5 }).unwrap();
    assert_eq!(needle["total"], 1, "{needle:#}");
}
