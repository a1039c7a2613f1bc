//! The fact-check of model-written summaries with the real `native-summary` and a fake model:
//! an invented path is flagged `unverified` and a finished task kept "in progress" is flagged
//! `stale`, in the step's report and in the durable record; with `reject_unverified` the flagged
//! summary is refused and the next step commits; an honest summary gets no flag. And on the
//! real agents' own summaries in `../shared/transcripts`, the check stays quiet.

use crate::support;

use std::sync::Arc;
use std::time::Instant;

use cairn::chain::fact_check::{check, History, Summary};
use cairn::model::{ModelError, ModelProvider, ModelRequest};
use cairn::record::{CompactionReport, Event, FlagKind, OutcomeClass, StepReport};
use cairn::storage::{ConversationKey, Home};
use cairn::transcript::{formats, Entry, Origin, Part, Role, Transcript};
use cairn::Cairn;

/// A model that answers every prompt with the same text.
struct Canned(&'static str);

impl ModelProvider for Canned {
    fn complete(&self, _: &ModelRequest, _: Instant) -> Result<String, ModelError> {
        Ok(self.0.to_string())
    }
    fn describe(&self) -> String {
        "canned test model".into()
    }
}

fn call(id: &str, text: &str, call_id: &str, name: &str, args: &str) -> Entry {
    Entry { parts: vec![Part::Text { text: text.into() }, Part::ToolCall { id: call_id.into(), name: name.into(), args: args.into() }].into(), ..Entry::text(id, Role::Assistant, Origin::Agent, "") }
}

fn result(id: &str, call_id: &str, content: String) -> Entry {
    Entry { parts: vec![Part::ToolResult { call_id: call_id.into(), content, is_error: false, elided: None }].into(), ..Entry::text(id, Role::Tool, Origin::Tool, "") }
}

fn test_run(passing: bool) -> String {
    let mut out = String::from("   Compiling auth v0.4.1\n     Running unittests src/lib.rs\n\nrunning 12 tests\n");
    for n in 0..11 {
        out.push_str(&format!("test token::tests::claims_round_trip_{n} ... ok\n"));
    }
    if passing {
        out.push_str("test token::expired_token_is_401 ... ok\n\ntest result: ok. 12 passed; 0 failed; 0 ignored\n");
    } else {
        out.push_str("test token::expired_token_is_401 ... FAILED\n\ntest result: FAILED. 11 passed; 1 failed; 0 ignored\n");
    }
    out
}

/// An operator's bug fix: read, a failing test run, an edit, a passing run; then a new request,
/// alone in the verbatim tail.
fn session() -> Transcript {
    let handler: String = (0..30)
        .map(|n| format!("/// Checks claim {n} of the token.\npub fn check_claim_{n}(claims: &Claims) -> Result<(), AuthError> {{\n    claims.require({n}).map_err(AuthError::Decode)\n}}\n\n"))
        .collect();
    let mut transcript = Transcript::new(vec![
        Entry::text("sys", Role::System, Origin::Harness, "You are a coding agent in the `auth` service repository."),
        Entry::text("u1", Role::User, Origin::Operator, "The login endpoint returns 500 when the JWT has expired. Fix it and run the auth tests. Never touch `config/prod.toml`."),
        call("a1", "Reading the handler.", "c1", "read", r#"{"path":"src/auth/handler.rs"}"#),
        result("t1", "c1", handler),
        call("a2", "Running the auth tests first.", "c2", "bash", r#"{"command":"cargo test -p auth"}"#),
        result("t2", "c2", test_run(false)),
        call("a3", "Mapping the expiry error to 401 in `validate_token`.", "c3", "edit", r#"{"path":"src/auth/handler.rs","old":"AuthError::Decode","new":"AuthError::Expired"}"#),
        result("t3", "c3", "Edited src/auth/handler.rs: 1 replacement.".into()),
        call("a4", "Re-running the auth tests.", "c4", "bash", r#"{"command":"cargo test -p auth"}"#),
        result("t4", "c4", test_run(true)),
        Entry::text("a5", Role::Assistant, Origin::Agent, "Fixed: expired tokens now get 401 instead of 500."),
        Entry::text("u2", Role::User, Origin::Operator, "Thanks. Now add an entry for the expiry fix to CHANGELOG.md, under the 0.4.1 heading."),
    ]);
    transcript.number_turns();
    transcript
}

/// A faithful summary of the session's first turn, in native-summary's sections.
const HONEST: &str = "## Goal\nFix the login endpoint returning 500 when the JWT has expired.\n\n\
    ## Constraints & Preferences\n- Never touch `config/prod.toml`.\n\n\
    ## Progress\n### Done\n- [x] Mapped the expiry error to 401 in `validate_token` (src/auth/handler.rs, now `AuthError::Expired`).\n\
    - [x] `cargo test -p auth`: 12 passed, 0 failed (`token::expired_token_is_401` failed before the fix).\n\n\
    ### In Progress\n- (none)\n\n### Blocked\n- (none)\n\n\
    ## Key Decisions\n- **401, not 500**: an expired token is the client's error.\n\n\
    ## Next Steps\n1. Add the expiry fix to CHANGELOG.md under 0.4.1.\n\n\
    ## Critical Context\n- (none)\n";

/// The honest summary plus a file the session never saw.
const INVENTED_PATH: &str = "## Goal\nFix the login endpoint returning 500 when the JWT has expired.\n\n\
    ## Constraints & Preferences\n- Never touch `config/prod.toml`.\n\n\
    ## Progress\n### Done\n- [x] Mapped the expiry error to 401 in src/auth/handler.rs.\n\n\
    ### In Progress\n- (none)\n\n### Blocked\n- (none)\n\n\
    ## Key Decisions\n- **401, not 500**: an expired token is the client's error.\n\n\
    ## Next Steps\n1. Add the expiry fix to CHANGELOG.md under 0.4.1.\n\n\
    ## Critical Context\n- The expiry check itself lives in `src/auth/expiry_guard.rs`.\n";

/// Keeps "run the auth tests" in progress though the history shows them passing.
const STALE: &str = "## Goal\nFix the login endpoint returning 500 when the JWT has expired.\n\n\
    ## Constraints & Preferences\n- Never touch `config/prod.toml`.\n\n\
    ## Progress\n### Done\n- [x] Mapped the expiry error to 401 in src/auth/handler.rs.\n\n\
    ### In Progress\n- [ ] Run the auth tests\n\n### Blocked\n- (none)\n\n\
    ## Key Decisions\n- (none)\n\n\
    ## Next Steps\n1. Add the expiry fix to CHANGELOG.md under 0.4.1.\n\n\
    ## Critical Context\n- (none)\n";

/// native-summary with `model`, then checkpoint-json without it (deterministic: no model, no
/// fact-check), and the host's last resort.
fn policy_text(reject_unverified: bool) -> String {
    format!(
        "[compaction]\nkeep_recent_tokens = 1\nkeep_recent_at_most = 0.25\ntarget_ratio = 0.5\nreject_unverified = {reject_unverified}\nbreaker_failures = 1\n\n\
         [[chain]]\nplugin = \"native-summary\"\ngrants = [\"log\", \"tokens\", \"model\"]\nmemory_mib = 256\ntimeout_ms = 60000\n\n\
         [[chain]]\nplugin = \"checkpoint-json\"\ngrants = [\"log\", \"tokens\"]\nmemory_mib = 256\ntimeout_ms = 60000\n"
    )
}

fn host_with(reply: &'static str) -> Cairn {
    let mut cairn = support::host();
    cairn.set_model_provider(Arc::new(Canned(reply)));
    cairn
}

/// One compaction of [`session`]; the report and the step records of the durable record.
fn compact_with(cairn: &Cairn, reject_unverified: bool) -> (CompactionReport, Vec<StepReport>) {
    let dir = tempfile::tempdir().unwrap();
    let key = ConversationKey::parse("fact-check").unwrap();
    let mut store = Home::open(dir.path()).unwrap().conversation(&key).unwrap();
    let policy = support::policy(cairn, &policy_text(reject_unverified));
    let report = cairn.compact(&policy, &mut store, &session(), "session").unwrap();
    let store = Home::open(dir.path()).unwrap().existing_conversation(&key).unwrap();
    let recorded = store.events().iter().rev().find_map(|e| if let Event::Compaction(c) = e { Some(c.steps.clone()) } else { None }).expect("a compaction event");
    (report, recorded)
}

fn outcomes(report: &CompactionReport) -> Vec<(String, OutcomeClass)> {
    report.steps.iter().map(|s| (s.plugin.split('@').next().unwrap().to_string(), s.outcome)).collect()
}

fn ok(plugin: &str) -> (String, OutcomeClass) {
    (plugin.to_string(), OutcomeClass::Ok)
}

#[test]
fn an_invented_path_is_flagged_unverified_in_the_report_and_the_record() {
    let (report, recorded) = compact_with(&host_with(INVENTED_PATH), false);
    assert_eq!(outcomes(&report), [ok("native-summary")], "{:#?}", report.steps);
    let flags = &report.steps[0].flags;
    assert_eq!(flags.len(), 1, "{flags:#?}");
    assert_eq!((flags[0].kind, flags[0].item.as_str()), (FlagKind::Unverified, "src/auth/expiry_guard.rs"));
    assert!(flags[0].why.contains("path") && flags[0].why.contains("appears nowhere"), "{flags:#?}");
    assert_eq!(recorded[0].flags, *flags, "the durable record has the flags");
    // In the record's JSON as the stable words.
    let json = serde_json::to_value(&recorded[0]).unwrap();
    assert_eq!(json["flags"][0]["kind"], "unverified");
    assert_eq!(json["flags"][0]["item"], "src/auth/expiry_guard.rs");
}

#[test]
fn a_finished_task_kept_in_progress_is_flagged_stale() {
    let (report, recorded) = compact_with(&host_with(STALE), false);
    assert_eq!(outcomes(&report), [ok("native-summary")], "{:#?}", report.steps);
    let flags = &report.steps[0].flags;
    assert_eq!(flags.len(), 1, "{flags:#?}");
    assert_eq!((flags[0].kind, flags[0].item.as_str()), (FlagKind::Stale, "Run the auth tests"));
    assert!(flags[0].why.contains("cargo test -p auth") && flags[0].why.contains("entry t4"), "{flags:#?}");
    assert_eq!(recorded[0].flags, *flags);
    assert_eq!(serde_json::to_value(&recorded[0]).unwrap()["flags"][0]["kind"], "stale");
}

#[test]
fn with_reject_unverified_a_flagged_summary_is_refused_and_the_next_step_commits() {
    let cairn = host_with(INVENTED_PATH);
    // Twice: a refusal is no malfunction, so the circuit (open after one failure here) stays closed.
    for _ in 0..2 {
        let (report, recorded) = compact_with(&cairn, true);
        assert_eq!(outcomes(&report), [("native-summary".to_string(), OutcomeClass::Rejected), ok("checkpoint-json")], "{:#?}", report.steps);
        let refused = &report.steps[0];
        let message = refused.message.as_deref().unwrap();
        assert!(message.starts_with("fact-check: 1 flag: unverified \"src/auth/expiry_guard.rs\""), "{message}");
        assert_eq!(refused.flags.len(), 1);
        assert!(refused.model.is_some_and(|m| m.calls > 0));
        assert!(report.steps[1].flags.is_empty(), "no model, no fact-check");
        assert!(report.committed_by.as_deref().unwrap().starts_with("checkpoint-json@"));
        assert_eq!(recorded[0].outcome, OutcomeClass::Rejected);
        assert_eq!(recorded[0].flags, refused.flags);
    }
}

#[test]
fn an_honest_summary_gets_no_flags_and_commits_even_under_reject_unverified() {
    for reject in [false, true] {
        let (report, recorded) = compact_with(&host_with(HONEST), reject);
        assert_eq!(outcomes(&report), [ok("native-summary")], "{:#?}", report.steps);
        assert!(report.steps[0].flags.is_empty(), "{:#?}", report.steps[0].flags);
        assert!(recorded[0].flags.is_empty());
        assert!(!serde_json::to_string(&recorded[0]).unwrap().contains("flags"), "no flags, no key");
        assert!(report.steps[0].model.is_some_and(|m| m.calls > 0));
    }
}

/// Real agents' own compaction summaries (Claude Code's, Pi's), each checked against the history
/// it replaced: nothing stale, and only what is really absent from that history is unverified
/// (the transcript path Claude Code appends itself; a `bd close` command planned by analogy).
#[test]
#[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
fn real_agent_summaries_get_few_flags() {
    let shared = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/transcripts/");
    let mut cases: Vec<(String, String, String, String)> = Vec::new();
    for name in ["spotter__8463c716-a2ea-4c14-9efa-87158ebd9f20", "spotter__258c7280-ae70-4798-800f-63464d01a85d", "spotter__ae4a77f8-aedd-4bc1-888f-c94edc91af04"] {
        let path = format!("{shared}claude-code/{name}.jsonl");
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let boundary = lines.iter().position(|l| l.contains("\"compact_boundary\"")).unwrap();
        let line = lines.iter().find(|l| l.contains("\"isCompactSummary\":true")).unwrap();
        let content = &serde_json::from_str::<serde_json::Value>(line).unwrap()["message"]["content"];
        let summary = match content {
            serde_json::Value::String(s) => s.clone(),
            other => other.as_array().unwrap().iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n"),
        };
        cases.push((name.to_string(), path, lines[..boundary].join("\n"), summary));
    }
    let path = format!("{shared}pi/pi-mono__before-compaction.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    for (n, at) in lines.iter().enumerate().filter(|(_, l)| l.contains("\"type\":\"compaction\"")).map(|(at, _)| at).enumerate() {
        let summary = serde_json::from_str::<serde_json::Value>(lines[at]).unwrap()["summary"].as_str().unwrap().to_string();
        cases.push((format!("pi compaction {n}"), path.clone(), lines[..at].join("\n"), summary));
    }
    assert_eq!(cases.len(), 5);
    for (name, path, history, summary) in cases {
        let (transcript, _) = formats::parse(&history, &path).unwrap();
        let flags = check(&History { entries: &transcript.entries, settled: transcript.entries.len(), extra: &[] }, &Summary { text: summary, checkpoint: None });
        eprintln!("{name}: {} entries, {} flags: {:?}", transcript.entries.len(), flags.len(), flags.iter().map(|f| &f.item).collect::<Vec<_>>());
        assert!(flags.len() <= 2, "{name}: {flags:#?}");
        for flag in &flags {
            assert_eq!(flag.kind, FlagKind::Unverified, "{name}: {flag:#?}");
            assert!(flag.item.starts_with("/home/USER/.claude/projects/") || flag.item.starts_with("bd close "), "{name}: {flag:#?}");
        }
    }
}
