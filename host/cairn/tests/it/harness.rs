//! The harness API as an embedder calls it: a transcript in the caller's format in, the answer
//! in that format out, and every failure a typed error with a stable code a program matches on
//! (the message still says what was wrong, as before).

use crate::support;

use cairn::harness::{self, AckRequest, ArtifactRequest, BoundaryRequest, CompactRequest, ConversationRequest, Harness, PinRequest, ShowRequest, UndoRequest};
use cairn::storage::Home;
use cairn::transcript::{formats, sample};
use cairn::Lifecycle;

fn harness(home: &std::path::Path) -> Harness {
    let cairn = support::host();
    let policy = support::policy(&cairn, cairn::policy::DEFAULT_POLICY);
    Harness::new(Lifecycle::new(cairn, Home::open(home).unwrap(), policy))
}

fn compact(conversation: &str, transcript: String) -> CompactRequest {
    serde_json::from_value(serde_json::json!({ "conversation": conversation, "transcript": transcript })).unwrap()
}

fn code<T: std::fmt::Debug>(result: harness::Result<T>) -> (&'static str, String) {
    let error = result.expect_err("an error");
    (error.code(), error.to_string())
}

#[test]
fn a_compaction_answers_in_the_callers_format_and_undo_restores_it() {
    let home = tempfile::tempdir().unwrap();
    let harness = harness(home.path());
    let session = sample::coding_session(30);
    let sent = formats::write_openai(&session);

    let compacted = harness.compact(compact("app", sent.clone())).unwrap();
    assert!(compacted.report.committed, "{:?}", compacted.report.not_committed);
    assert!(compacted.report.tokens_after < compacted.report.tokens_before);
    assert_eq!(compacted.format, "openai");
    let (back, format) = formats::parse(&compacted.transcript, "answer").unwrap();
    assert_eq!(format, formats::Format::OpenAi);
    assert_ne!(back.entries, formats::parse(&sent, "sent").unwrap().0.entries, "the answer is the compacted context");
    let archive = compacted.report.archive_id.clone().unwrap();

    let shown = harness.show(ShowRequest { conversation: "app".into(), archive_id: Some(archive.clone()) }).unwrap();
    assert_eq!(shown.compaction.unwrap()["archive_id"], archive);

    let restored = harness.undo(UndoRequest { conversation: "app".into(), archive_id: None, transcript: Some(compacted.transcript), path: None }).unwrap();
    assert_eq!(restored.undone, [archive]);
    assert_eq!(restored.format, "openai");
    assert_eq!(formats::parse(&restored.transcript, "restored").unwrap().0.entries.len(), session.entries.len());

    // Nothing is left to undo: refused, not an internal failure.
    let (code, message) = code(harness.undo(UndoRequest { conversation: "app".into(), archive_id: None, transcript: None, path: None }));
    assert_eq!(code, "refused", "{message}");
    assert!(message.contains("no compaction to undo"), "{message}");
}

#[test]
fn every_failure_carries_the_code_of_its_kind() {
    let home = tempfile::tempdir().unwrap();
    let harness = harness(home.path());
    let whole = formats::write_openai(&sample::coding_session(4));
    let archive = harness.compact(compact("app", whole.clone())).unwrap().report.archive_id.unwrap();

    let show = |conversation: &str, archive_id: Option<&str>| harness.show(ShowRequest { conversation: conversation.into(), archive_id: archive_id.map(str::to_string) });
    assert_eq!(code(show("nobody", None)).0, "not-found");
    assert_eq!(code(show("app", Some("a-0123456789abcdef"))).0, "not-found");
    assert_eq!(code(show("Not A Key!", None)).0, "invalid-request");

    let both: CompactRequest = serde_json::from_value(serde_json::json!({ "conversation": "app", "transcript": whole, "path": "/etc/hostname" })).unwrap();
    assert_eq!(code(harness.compact(both)).0, "invalid-request");
    let neither: CompactRequest = serde_json::from_value(serde_json::json!({ "conversation": "app" })).unwrap();
    assert_eq!(code(harness.compact(neither)).0, "invalid-request");

    let (kind, message) = code(harness.compact(compact("app", "{\"cairn\":\"transcript\",\"version\":1}\n{not json\n".into())));
    assert_eq!(kind, "transcript-invalid", "{message}");
    assert!(message.starts_with("transcript:2:"), "the line is named: {message}");

    // A host that serves remote callers never reads its own disk for them.
    let remote = harness.clone().refusing_files("no files here");
    let by_path: CompactRequest = serde_json::from_value(serde_json::json!({ "conversation": "app", "path": "/etc/passwd" })).unwrap();
    assert_eq!(code(remote.compact(by_path)), ("forbidden", "no files here".to_string()));

    // An incremental boundary the record cannot follow: the code says "send it whole".
    let since: BoundaryRequest = serde_json::from_value(serde_json::json!({ "conversation": "app", "turn": 9, "window": 200000, "transcript": "[]", "since": "no-such-entry" })).unwrap();
    let (kind, message) = code(harness.boundary(since));
    assert_eq!(kind, "diverged", "{message}");
    assert!(message.starts_with("diverged:"), "old clients match the first word: {message}");
    let bad_format: BoundaryRequest = serde_json::from_value(serde_json::json!({ "conversation": "app", "turn": 9, "window": 200000, "transcript": "x", "since": "e", "format": "word" })).unwrap();
    let (kind, message) = code(harness.boundary(bad_format));
    assert_eq!(kind, "invalid-request");
    assert!(message.contains("unknown format \"word\"") && message.contains("anthropic"), "the formats are listed: {message}");

    let pin = |ids: &[&str]| PinRequest { conversation: "app".into(), ids: ids.iter().map(|s| s.to_string()).collect() };
    assert_eq!(code(harness.pin(pin(&["no-such-entry"]))).0, "not-found");
    assert_eq!(code(harness.unpin(pin(&["no-such-entry"]))).0, "refused");
    assert_eq!(code(harness.acknowledge(AckRequest { conversation: "nobody".into(), ids: vec!["n-1".into()] })).0, "not-found");
    assert!(harness.notices(ConversationRequest { conversation: "app".into() }).is_ok());

    assert_eq!(code(harness.artifact(ArtifactRequest { uri: "https://example.com".into() })).0, "invalid-request");
    assert_eq!(code(harness.artifact(ArtifactRequest { uri: format!("artifact://{archive}/9999") })).0, "not-found");
}

#[test]
fn a_pi_fragment_without_its_header_is_read_and_one_without_ids_is_named() {
    let home = tempfile::tempdir().unwrap();
    let harness = harness(home.path());
    let request =
        |text: &str| -> BoundaryRequest { serde_json::from_value(serde_json::json!({ "conversation": "pi", "turn": 1, "window": 200000, "transcript": text, "since": "x", "format": "pi" })).unwrap() };
    let no_id = "{\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n";
    let (kind, message) = code(harness.boundary(request(no_id)));
    assert_eq!(kind, "transcript-invalid", "{message}");
    assert!(message.contains("transcript:1") && message.contains("session version 2"), "{message}");
    // With ids it is read (and then diverges: nothing was acknowledged in this conversation).
    let with_id = "{\"type\":\"message\",\"id\":\"m1\",\"parentId\":null,\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n";
    assert_eq!(code(harness.boundary(request(with_id))).0, "diverged");
}

/// The operations by name, JSON in and out, as the Python and Node packages call them: the
/// same answers as the typed calls, and a request that does not fit its type, an unknown
/// operation or a `history` without a conversation is `invalid-request`.
#[test]
fn every_operation_answers_by_name_in_json() {
    let home = tempfile::tempdir().unwrap();
    let harness = harness(home.path());
    let sent = formats::write_openai(&sample::coding_session(30));
    let compacted = harness.call("compact", serde_json::json!({"conversation": "app", "transcript": sent})).unwrap();
    assert_eq!(compacted["format"], "openai");
    assert_eq!(compacted["committed"], true, "the report's fields at the top, as MCP answers: {compacted:#}");
    let archive = compacted["archive_id"].as_str().unwrap().to_string();
    let shown = harness.call("show", serde_json::json!({"conversation": "app"})).unwrap();
    assert!(shown["timeline"]["moments"].as_array().is_some_and(|m| !m.is_empty()), "{shown:#}");
    let found = harness.call("history", serde_json::json!({"conversation": "app", "action": "summary"})).unwrap();
    assert!(found.to_string().contains(&archive), "{found:#}");
    for op in harness::OPERATIONS {
        let (code, message) = code(harness.call(op, serde_json::json!({"conversation": "app", "no_such_field": 1})));
        assert!(code == "invalid-request" || (*op == "history" && code != "internal"), "{op}: {code}: {message}");
    }
    assert_eq!(code(harness.call("compress", serde_json::json!({}))).0, "invalid-request");
    assert_eq!(code(harness.call("history", serde_json::json!({"action": "summary"}))).0, "invalid-request");
}
