//! The chain with real components: the bundled shake-elide and the `misbehave` fixture, which
//! traps, loops, eats memory or lies as its config says. Each failure gets its class, the
//! chain still commits, and the durable record holds every step.

use crate::support;

use cairn::record::{CompactionReport, Event, OutcomeClass};
use cairn::storage::{ArtifactUri, ConversationKey, Home};
use cairn::transcript::{sample, Part};
use support::{host, policy};

const SHAKE: &str = r#"
[[chain]]
plugin = "shake-elide"
grants = ["log", "tokens", "archive:write"]
"#;

fn misbehaving(mode: &str, extra: &str) -> String {
    format!("[[chain]]\nplugin = \"misbehave\"\ngrants = [\"log\", \"archive:read\"]\nconfig = {{ mode = \"{mode}\" }}\n{extra}\n{SHAKE}")
}

fn compact(text: &str) -> (CompactionReport, tempfile::TempDir) {
    let cairn = host();
    let policy = policy(&cairn, text);
    let dir = tempfile::tempdir().unwrap();
    let home = Home::open(dir.path()).unwrap();
    let mut store = home.conversation(&ConversationKey::parse("test").unwrap()).unwrap();
    let report = cairn.compact(&policy, &mut store, &sample::coding_session(12), "sample").unwrap();
    (report, dir)
}

fn outcomes(report: &CompactionReport) -> Vec<(String, OutcomeClass)> {
    report.steps.iter().map(|s| (s.plugin.split('@').next().unwrap().to_string(), s.outcome)).collect()
}

fn assert_first_step_then_shake(mode: &str, extra: &str, expected: OutcomeClass) -> CompactionReport {
    let (report, _dir) = compact(&misbehaving(mode, extra));
    assert_eq!(outcomes(&report), vec![("misbehave".into(), expected), ("shake-elide".into(), OutcomeClass::Ok)], "mode {mode}: {:#?}", report.steps);
    assert!(report.tokens_after < report.tokens_before);
    assert_eq!(report.committed_by.as_deref().map(|p| p.starts_with("shake-elide")), Some(true));
    report
}

#[test]
fn a_trapping_plugin_is_a_trap() {
    let report = assert_first_step_then_shake("trap", "", OutcomeClass::Trap);
    assert!(report.steps[0].message.as_deref().unwrap().contains("misbehave@0.1.0"), "errors name the plugin");
}

#[test]
fn an_endless_loop_is_a_timeout() {
    let report = assert_first_step_then_shake("loop", "timeout_ms = 300", OutcomeClass::Timeout);
    assert!(report.steps[0].millis < 5_000, "the deadline fired: {:?}", report.steps[0]);
}

#[test]
fn unbounded_allocation_is_oom() {
    assert_first_step_then_shake("oom", "memory_mib = 32", OutcomeClass::Oom);
}

#[test]
fn an_invented_entry_id_is_an_invariant_breach() {
    let report = assert_first_step_then_shake("invent-id", "", OutcomeClass::Invariant);
    assert!(report.steps[0].message.as_deref().unwrap().contains("invents entry id"));
}

#[test]
fn separating_a_tool_call_from_its_result_is_an_invariant_breach() {
    let report = assert_first_step_then_shake("split-pair", "", OutcomeClass::Invariant);
    assert!(report.steps[0].message.as_deref().unwrap().contains("pairing"));
}

#[test]
fn an_unknown_range_is_invalid() {
    assert_first_step_then_shake("unknown-range", "", OutcomeClass::Invalid);
}

#[test]
fn growing_the_context_is_no_progress() {
    assert_first_step_then_shake("grow", "", OutcomeClass::NoProgress);
}

#[test]
fn writing_without_a_write_grant_is_denied() {
    let report = assert_first_step_then_shake("write-artifact", "", OutcomeClass::Denied);
    assert!(report.steps[0].message.as_deref().unwrap().contains("archive:write"));
}

#[test]
fn a_step_that_does_not_grant_what_its_plugin_imports_is_a_policy_error() {
    let text = format!("[[chain]]\nplugin = \"misbehave\"\ngrants = [\"log\"]\nconfig = {{ mode = \"trap\" }}\n{SHAKE}");
    let err = host().load_policy(&text, "mine.toml").err().unwrap().to_string();
    assert!(err.starts_with("mine.toml:2:10: plugin `misbehave` needs the `archive` capability"), "{err}");
    assert!(err.contains("archive:read"), "the error says how to fix it: {err}");
}

#[test]
fn when_every_plugin_fails_the_last_resort_commits() {
    let policy = "[[chain]]\nplugin = \"misbehave\"\ngrants = [\"archive:read\"]\nconfig = { mode = \"trap\" }\n";
    let (report, _dir) = compact(policy);
    assert_eq!(outcomes(&report), vec![("misbehave".into(), OutcomeClass::Trap), ("last-resort".into(), OutcomeClass::Ok)]);
    assert!(report.tokens_after <= report.tokens_before / 2 + 100, "{} -> {}", report.tokens_before, report.tokens_after);
}

/// A compaction holds the session's text once: the record's snapshot and the new context share
/// the input's entries (a 30 MB session used to be held five times over at the peak), and an
/// entry the plugin hands back unchanged is the original again, not the copy it returned.
#[test]
fn a_compaction_shares_the_inputs_text_instead_of_copying_it() {
    let cairn = host();
    let policy = policy(&cairn, SHAKE);
    let dir = tempfile::tempdir().unwrap();
    let mut store = Home::open(dir.path()).unwrap().conversation(&ConversationKey::parse("shared").unwrap()).unwrap();
    let before = sample::coding_session(12);
    let report = cairn.compact(&policy, &mut store, &before, "sample").unwrap();
    assert!(report.committed_by.is_some());
    let input: std::collections::HashMap<&str, &cairn::transcript::Entry> = before.entries.iter().map(|e| (e.id.as_str(), e)).collect();
    let Event::Snapshot { entries, .. } = &store.events()[0] else { panic!("{:?}", store.events()[0]) };
    assert_eq!(entries.len(), before.entries.len());
    assert!(entries.iter().zip(&before.entries).all(|(recorded, given)| recorded.parts.shares(&given.parts)), "the record's snapshot copies the input");
    let (mut same, mut changed) = (0, 0);
    for entry in &report.transcript.entries {
        let Some(original) = input.get(entry.id.as_str()) else { continue };
        if entry.parts == original.parts {
            assert!(entry.parts.shares(&original.parts), "entry {} is a copy of the original", entry.id);
            same += 1;
        } else {
            changed += 1;
        }
    }
    assert!(same > 0 && changed > 0, "{same} kept, {changed} elided");
}

#[test]
fn shake_elide_keeps_every_original_recoverable_and_records_the_event() {
    let cairn = host();
    let policy = policy(&cairn, SHAKE);
    let dir = tempfile::tempdir().unwrap();
    let home = Home::open(dir.path()).unwrap();
    let key = ConversationKey::parse("demo").unwrap();
    let mut store = home.conversation(&key).unwrap();
    let before = sample::coding_session(12);
    let report = cairn.compact(&policy, &mut store, &before, "sample").unwrap();
    assert!(report.tokens_after * 2 < report.tokens_before, "{} -> {}", report.tokens_before, report.tokens_after);
    assert!(!report.artifacts.is_empty());

    // Every placeholder resolves to exactly the content it replaced.
    let originals: std::collections::HashMap<_, _> = before
        .entries
        .iter()
        .flat_map(|e| e.parts.iter())
        .filter_map(|p| match p {
            Part::ToolResult { call_id, content, .. } => Some((call_id.clone(), content.clone())),
            _ => None,
        })
        .collect();
    let mut resolved = 0;
    for part in report.transcript.entries.iter().flat_map(|e| e.parts.iter()) {
        if let Part::ToolResult { call_id, content, elided: Some(uri), .. } = part {
            assert!(content.contains(uri.as_str()), "the placeholder text names its URI: {content}");
            let uri: ArtifactUri = uri.parse().unwrap();
            assert_eq!(home.find_artifact(&uri).unwrap(), originals[call_id].as_bytes());
            resolved += 1;
        }
    }
    assert!(resolved >= 10, "only {resolved} placeholders");

    // The record survives reopening: a snapshot, then the compaction with its steps.
    let store = home.existing_conversation(&key).unwrap();
    let events = store.events();
    assert!(matches!(&events[0], Event::Snapshot { entries, .. } if entries.len() == before.entries.len()));
    let Event::Compaction(event) = &events[1] else { panic!("second event is not a compaction") };
    assert_eq!(event.artifacts, report.artifacts);
    assert_eq!(event.steps, report.steps);
    assert!(event.committed_by.is_some());

    // The protected tail is untouched.
    let tail = |entries: &[cairn::transcript::Entry]| -> Vec<_> { entries[entries.len() - 3..].iter().map(|e| (e.id.clone(), e.parts.clone())).collect() };
    assert_eq!(tail(&report.transcript.entries), tail(&before.entries));
}

#[test]
fn the_policy_names_unknown_plugins_with_their_line() {
    let err = host().load_policy("[compaction]\nkeep_recent_tokens = 10\n\n[[chain]]\nplugin = \"nope\"\n", "mine.toml").err().unwrap().to_string();
    assert!(err.starts_with("mine.toml:5:10: unknown strategy plugin `nope`"), "{err}");
}

#[test]
fn a_failed_step_stores_nothing() {
    // With a write grant, `write-artifact` stores "sneaky" and then fails: nothing of it may land.
    let policy = format!("[[chain]]\nplugin = \"misbehave\"\ngrants = [\"archive:write\"]\nconfig = {{ mode = \"write-artifact\" }}\n{SHAKE}");
    let (report, dir) = compact(&policy);
    assert_eq!(report.steps[0].outcome, OutcomeClass::Invalid);
    let home = Home::open(dir.path()).unwrap();
    for uri in &report.artifacts {
        assert_ne!(home.find_artifact(&uri.parse().unwrap()).unwrap(), b"sneaky");
    }
}

#[test]
fn when_nothing_can_be_committed_the_attempt_is_still_recorded() {
    let cairn = host();
    let policy = policy(&cairn, "[[chain]]\nplugin = \"misbehave\"\ngrants = [\"archive:read\"]\nconfig = { mode = \"trap\" }\n");
    let dir = tempfile::tempdir().unwrap();
    let home = Home::open(dir.path()).unwrap();
    let key = ConversationKey::parse("tiny").unwrap();
    let mut store = home.conversation(&key).unwrap();
    // One turn: everything is head or verbatim tail, so even the last resort has nothing to do.
    let tiny = sample::coding_session(1);
    let tiny = cairn::transcript::Transcript::new(tiny.entries[..2].to_vec());
    let report = cairn.compact(&policy, &mut store, &tiny, "tiny").unwrap();
    assert_eq!(outcomes(&report), vec![("misbehave".into(), OutcomeClass::Trap), ("last-resort".into(), OutcomeClass::NoProgress)]);
    assert_eq!(report.committed_by, None);
    assert_eq!(report.tokens_after, report.tokens_before);
    let store = home.existing_conversation(&key).unwrap();
    let Event::Compaction(event) = &store.events()[1] else { panic!("no compaction event") };
    assert_eq!(event.committed_by, None);
    assert!(event.artifacts.is_empty() && event.forgotten.is_empty());
    assert_eq!(event.steps.len(), 2);
}

#[test]
fn a_wasi_component_gets_a_deny_all_sandbox() {
    let policy = format!("[[chain]]\nplugin = \"wasi-probe\"\n{SHAKE}");
    let cairn = host();
    assert!(cairn.plugins().any(|p| p.manifest.name == "wasi-probe" && p.uses_wasi), "the probe imports WASI");
    let (report, _dir) = compact(&policy);
    assert_eq!(report.steps[0].outcome, OutcomeClass::Invalid, "{:#?}", report.steps);
    let message = report.steps[0].message.as_deref().unwrap();
    for seen in ["env=0", "args=0", "passwd=Err", "root=Err", "cwd=Err", "write=Err"] {
        assert!(message.contains(seen), "{seen} not in {message}");
    }
    assert_eq!(report.steps[1].outcome, OutcomeClass::Ok);
}

#[test]
fn a_trap_carries_what_the_plugin_wrote_to_stderr_before_it() {
    // A trap alone says only `unreachable`; Rust's panic message (on WASI, written to stderr)
    // says why and where.
    let policy = format!("[[chain]]\nplugin = \"wasi-probe\"\nconfig = {{ mode = \"panic\" }}\n{SHAKE}");
    let (report, _dir) = compact(&policy);
    assert_eq!(report.steps[0].outcome, OutcomeClass::Trap, "{:#?}", report.steps);
    let said = report.steps[0].message.as_deref().unwrap();
    assert!(said.starts_with("plugin wasi-probe@0.1.0: trapped: wasm trap: wasm `unreachable` instruction executed — its stderr ended: "), "{said}");
    assert!(said.contains("wasi-probe/src/lib.rs:") && said.contains("the probe panics on purpose"), "{said}");
    assert!(!said.contains('\n'), "one line: {said}");
    assert_eq!(report.steps[1].outcome, OutcomeClass::Ok);
}

#[test]
fn every_capability_refusal_is_recorded_alike_naming_plugin_and_capability() {
    // misbehave must have `archive`; `log`, `tokens` and `model` are optional, so a policy may
    // leave them out and the plugin's calls are refused at run time.
    for (mode, capability, action) in [("log", "log", "log"), ("tokens", "tokens", "count tokens"), ("model", "model", "call a model"), ("write-artifact", "archive:write", "store artifacts")] {
        let policy = format!("[[chain]]\nplugin = \"misbehave\"\ngrants = [\"archive:read\"]\nconfig = {{ mode = \"{mode}\" }}\n{SHAKE}");
        let (report, _dir) = compact(&policy);
        let step = &report.steps[0];
        assert_eq!(step.outcome, OutcomeClass::Denied, "{mode}: {step:#?}");
        assert_eq!(step.refused, vec![capability.to_string()], "{mode}");
        let message = step.message.as_deref().unwrap();
        assert_eq!(message, format!("plugin misbehave@0.1.0 may not {action}: the policy does not grant it `{capability}`"), "{mode}");
        assert!(report.steps[1].plugin.starts_with("shake-elide@"), "the chain goes on after {mode}");
        assert_eq!(report.steps[1].outcome, OutcomeClass::Ok);
    }
}

#[test]
fn granted_capabilities_are_not_refused() {
    let policy = format!("[[chain]]\nplugin = \"misbehave\"\ngrants = [\"archive:read\", \"tokens\", \"log\"]\nconfig = {{ mode = \"tokens\" }}\n{SHAKE}");
    let (report, _dir) = compact(&policy);
    assert_eq!(report.steps[0].outcome, OutcomeClass::Invalid, "the fixture reports its count as a failure");
    assert!(report.steps[0].message.as_deref().unwrap().contains("counted 2"), "{:#?}", report.steps[0]);
    assert!(report.steps[0].refused.is_empty());
}

#[test]
fn a_replacement_with_too_many_entries_is_invalid() {
    let (report, _dir) = compact(&misbehaving("many-entries", ""));
    assert_eq!(report.steps[0].outcome, OutcomeClass::Invalid, "{:#?}", report.steps);
    assert!(report.steps[0].message.as_deref().unwrap().contains("replacement is too large"));
}

#[test]
fn a_log_flood_is_bounded_and_does_not_stop_the_chain() {
    let started = std::time::Instant::now();
    let (report, _dir) = compact(&misbehaving("log-flood", ""));
    assert_eq!(report.steps[0].outcome, OutcomeClass::Invalid);
    assert!(report.steps[0].refused.is_empty(), "log is granted");
    assert_eq!(report.steps[1].outcome, OutcomeClass::Ok);
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
}

#[test]
fn a_plugin_sleeping_inside_wasi_ends_by_its_deadline() {
    let policy = format!("[[chain]]\nplugin = \"wasi-probe\"\ntimeout_ms = 500\nconfig = {{ mode = \"sleep\" }}\n{SHAKE}");
    let started = std::time::Instant::now();
    let (report, _dir) = compact(&policy);
    assert_eq!(report.steps[0].outcome, OutcomeClass::Timeout, "{:#?}", report.steps);
    // Before the fix the probe slept the full 30 s inside the host's poll.
    assert!(report.steps[0].millis < 1_500, "took {} ms against a 500 ms timeout", report.steps[0].millis);
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}

#[test]
fn a_huge_token_count_is_refused_and_the_chain_goes_on() {
    let policy = format!("[[chain]]\nplugin = \"misbehave\"\ngrants = [\"archive:read\", \"tokens\"]\nconfig = {{ mode = \"count-huge\" }}\n{SHAKE}");
    let started = std::time::Instant::now();
    let (report, _dir) = compact(&policy);
    assert_eq!(report.steps[0].outcome, OutcomeClass::Trap, "{:#?}", report.steps);
    assert!(report.steps[0].message.as_deref().unwrap().contains("at most 8388608"), "{:#?}", report.steps[0]);
    assert!(started.elapsed() < std::time::Duration::from_secs(15));
}

/// An embedder's transcript with two entries under one id is refused before anything is
/// recorded or run: ids name entries in the record and in every plugin's answer.
#[test]
fn duplicate_entry_ids_are_refused_before_anything_runs() {
    let cairn = host();
    let policy = cairn.default_policy().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let home = Home::open(dir.path()).unwrap();
    let mut store = home.conversation(&ConversationKey::parse("dup").unwrap()).unwrap();
    let mut t = sample::coding_session(3);
    t.entries[5].id = t.entries[1].id.clone();
    let err = cairn.compact(&policy, &mut store, &t, "embedded").unwrap_err().to_string();
    assert!(err.contains(&format!("embedded: entry id {:?} is used twice (entries 2 and 6)", t.entries[1].id)), "{err}");
    assert!(store.events().is_empty(), "nothing recorded");
}
