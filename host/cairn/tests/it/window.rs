//! Every committed context fits its window. Each recorded session in `../shared/transcripts`
//! (Claude Code, Pi, OpenAI chat), with one giant tool output (a generated ~3.6 MB log: a call
//! and its result) put at the head, in the middle, in the newest turn and inside a batch of
//! calls of one response, compacted under the default policy and `examples/policies/offline.toml`
//! with a known usable window of 128,000 and 64,000 tokens: what is committed fits, pairing is
//! intact, every clipped or elided output comes back byte for byte, and the giant's call stays.
//! What cannot fit (the operator's own words over the window) is reported as such; a
//! compaction that commits nothing says so and writes no archive.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use crate::support::{host, policy, Rng};

use cairn::chain::{pairing_problems, safe_cuts};
use cairn::storage::{ArtifactUri, ConversationKey, Home};
use cairn::transcript::{formats, sample, Entry, Origin, Part, Role, Transcript};
use cairn::{Cairn, CheckedPolicy, CompactionReport, RunOptions};

const WINDOWS: [u64; 2] = [128_000, 64_000];
const GIANT_CALL: &str = "call_cairn_giant_log";

/// A ~3.6 MB build log, every line different (so nothing dedupes it), the same every run.
fn giant_log() -> &'static str {
    static LOG: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    LOG.get_or_init(|| {
        let mut rng = Rng(0x10c_b16);
        let mut log = String::with_capacity(3_700_000);
        let mut n = 0u64;
        while log.len() < 3_600_000 {
            let ms = rng.below(5_000);
            let level = ["INFO", "INFO", "INFO", "DEBUG", "WARN"][rng.below(5)];
            log.push_str(&format!(
                "2026-12-01T16:{:02}:{:02}.{:03}Z {level} worker-{} compiled crate_{n}/src/module_{}.rs in {ms}ms (cache {:08x})\n",
                (n / 60_000) % 60,
                (n / 1_000) % 60,
                n % 1_000,
                rng.below(16),
                rng.below(400),
                rng.next() as u32
            ));
            n += 1;
        }
        log
    })
}

fn giant_call_entry(turn: u32) -> Entry {
    Entry {
        parts: vec![Part::Text { text: "Reading the whole build log.".into() }, Part::ToolCall { id: GIANT_CALL.into(), name: "bash".into(), args: r#"{"command":"cat target/build.log"}"#.into() }]
            .into(),
        turn,
        ..Entry::text("cairn-giant-call", Role::Assistant, Origin::Agent, "")
    }
}

fn giant_result_entry(turn: u32) -> Entry {
    Entry {
        parts: vec![Part::ToolResult { call_id: GIANT_CALL.into(), content: giant_log().to_string(), is_error: false, elided: None }].into(),
        turn,
        ..Entry::text("cairn-giant-result", Role::Tool, Origin::Tool, "")
    }
}

#[derive(Debug, Clone, Copy)]
enum At {
    Head,
    Middle,
    Tail,
    Batch,
}

/// `t` with the giant call and its result at `at`; `None` when `t` has no batch to join.
fn with_giant(t: &Transcript, at: At, rng: &mut Rng) -> Option<Transcript> {
    let mut entries = t.entries.clone();
    let cuts = safe_cuts(&entries);
    let turn = |i: usize| entries.get(i.saturating_sub(1)).map_or(0, |e: &Entry| e.turn);
    // A safe cut at or after `from` (there is always one: the end).
    let cut_from = |from: usize| (from..=entries.len()).find(|&i| cuts[i]).unwrap();
    match at {
        At::Head => {
            let first_request = entries.iter().position(|e| e.role == Role::User && e.origin == Origin::Operator).map_or(0, |i| i + 1);
            let i = cut_from(first_request);
            let turn = turn(i);
            entries.splice(i..i, [giant_call_entry(turn), giant_result_entry(turn)]);
        }
        At::Middle => {
            let i = cut_from(entries.len() / 4 + rng.below(entries.len() / 2 + 1));
            let turn = turn(i);
            entries.splice(i..i, [giant_call_entry(turn), giant_result_entry(turn)]);
        }
        At::Tail => {
            let turn = turn(entries.len());
            entries.extend([giant_call_entry(turn), giant_result_entry(turn)]);
        }
        At::Batch => {
            // A calling entry answered right after it: the giant becomes one more call of that
            // response, its result the last of the block.
            let batches: Vec<usize> = (0..entries.len().saturating_sub(1)).filter(|&i| entries[i].tool_call_ids().next().is_some() && entries[i + 1].tool_result_ids().next().is_some()).collect();
            if batches.is_empty() {
                return None;
            }
            let i = batches[rng.below(batches.len())];
            let end = i + 1 + entries[i + 1..].iter().take_while(|e| e.tool_result_ids().next().is_some()).count();
            let call = giant_call_entry(entries[i].turn).parts.remove(1);
            entries[i].parts.push(call);
            let turn = entries[i].turn;
            entries.insert(end, giant_result_entry(turn));
        }
    }
    let out = Transcript { entries, unrecognized: t.unrecognized.clone() };
    assert_eq!(pairing_problems(&out.entries), pairing_problems(&t.entries), "the giant is inserted without breaking pairing ({at:?})");
    Some(out)
}

/// Every tool output of `t` by call id.
fn outputs(t: &Transcript) -> HashMap<String, String> {
    t.entries
        .iter()
        .flat_map(|e| e.parts.iter())
        .filter_map(|p| match p {
            Part::ToolResult { call_id, content, elided: None, .. } => Some((call_id.clone(), content.clone())),
            _ => None,
        })
        .collect()
}

struct Compacted {
    report: CompactionReport,
    home: Home,
    _dir: tempfile::TempDir,
}

fn compact(cairn: &Cairn, policy: &CheckedPolicy, t: &Transcript, key: &str, window: Option<u64>) -> Compacted {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::open(dir.path()).unwrap();
    let mut store = home.conversation(&ConversationKey::derive(key)).unwrap();
    let report = cairn.compact_with(policy, &mut store, t, key, RunOptions { window, ..RunOptions::default() }).unwrap_or_else(|e| panic!("{key}: {e:#}"));
    Compacted { report, home, _dir: dir }
}

/// What a committed compaction under `window` must hold: it fits (by the report and by a
/// fresh count), pairs as well as the input did, and every output it set aside is the
/// original byte for byte.
fn check_fits(cairn: &Cairn, label: &str, input: &Transcript, run: &Compacted, window: u64) {
    let report = &run.report;
    assert!(report.committed, "{label}: nothing committed: {:?}", report.not_committed);
    assert!(report.archive.is_some(), "{label}");
    assert!(report.tokens_after <= window, "{label}: {} → {} tokens, over the window of {window}; {}", report.tokens_before, report.tokens_after, brief(report));
    assert!(report.over_window.is_none(), "{label}: {:?}", report.over_window);
    let mut out = report.transcript.clone();
    cairn.tokenizer().count_transcript(&mut out);
    assert!(out.total_tokens() <= window, "{label}: recounted {} tokens", out.total_tokens());
    assert_eq!(out.total_tokens(), report.tokens_after, "{label}: the report counts what it returns");

    let before: BTreeSet<String> = pairing_problems(&input.entries);
    let after = pairing_problems(&out.entries);
    assert!(after.is_subset(&before), "{label}: new pairing problems: {:?}", after.difference(&before).collect::<Vec<_>>());

    let originals = outputs(input);
    let mut recovered = 0;
    for entry in &out.entries {
        for part in &entry.parts {
            match part {
                Part::ToolResult { call_id, elided: Some(uri), content, .. } => {
                    let stored = run.home.find_artifact(&uri.parse::<ArtifactUri>().unwrap()).unwrap_or_else(|e| panic!("{label}: {uri}: {e:#}"));
                    assert!(stored == originals[call_id].as_bytes(), "{label}: {uri} is not the original output of {call_id}");
                    assert!(content.contains(uri.as_str()), "{label}: the placeholder names {uri}");
                    recovered += 1;
                }
                Part::Placeholder { uri: Some(uri), .. } if uri.starts_with("artifact://") => {
                    let stored = String::from_utf8(run.home.find_artifact(&uri.parse::<ArtifactUri>().unwrap()).unwrap()).unwrap();
                    assert!(input.entries.iter().any(|e| e.model_text().contains(&stored)), "{label}: {uri} is not original content");
                }
                _ => {}
            }
        }
    }
    for uri in &report.artifacts {
        run.home.find_artifact(&uri.parse::<ArtifactUri>().unwrap()).unwrap_or_else(|e| panic!("{label}: {uri}: {e:#}"));
    }
    let _ = recovered;
}

/// The giant's call is still in the context, answered by its result, which points at the
/// log, byte for byte; or (only where a summarizing stage replaced that stretch of history)
/// both are in the archive.
fn check_giant(label: &str, input: &Transcript, run: &Compacted) {
    let out = &run.report.transcript.entries;
    let Some(call) = out.iter().position(|e| e.tool_call_ids().any(|id| id == GIANT_CALL)) else {
        // A summarizing stage replaced the stretch of history it was in: the call and its
        // result are among the replaced originals, and the log is an artifact, byte for byte.
        let carrier = input.entries.iter().find(|e| e.tool_call_ids().any(|id| id == GIANT_CALL)).unwrap();
        let forgotten = |id: &str| run.report.forgotten.iter().any(|f| f == id);
        assert!(forgotten(&carrier.id) && forgotten("cairn-giant-result"), "{label}: the giant's call is gone, not replaced");
        assert!(run.report.committed_by.as_deref().is_some_and(|by| !by.contains("last-resort")), "{label}: {:?}", run.report.committed_by);
        let kept = run.report.artifacts.iter().any(|uri| run.home.find_artifact(&uri.parse().unwrap()).unwrap() == giant_log().as_bytes());
        assert!(kept, "{label}: the giant's call was summarized away and the log is not among the artifacts");
        return;
    };
    let (content, uri) = out[call + 1..]
        .iter()
        .take_while(|e| e.tool_result_ids().next().is_some())
        .flat_map(|e| e.parts.iter())
        .find_map(|p| match p {
            Part::ToolResult { call_id, content, elided, .. } if call_id == GIANT_CALL => Some((content, elided)),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{label}: the giant's call has no result right after it"));
    let uri = uri.as_ref().unwrap_or_else(|| panic!("{label}: the giant output is in the context whole ({} chars)", content.len()));
    assert_eq!(run.home.find_artifact(&uri.parse().unwrap()).unwrap(), giant_log().as_bytes(), "{label}: {uri}");
}

fn shared_sessions() -> Vec<(String, Transcript)> {
    let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/transcripts");
    let mut sessions = Vec::new();
    for dir in ["claude-code", "pi", "openai-chat"] {
        let mut files: Vec<_> = std::fs::read_dir(shared.join(dir)).unwrap().map(|f| f.unwrap().path()).collect();
        files.sort();
        for file in files {
            let name = format!("{dir}/{}", file.file_name().unwrap().to_string_lossy());
            let (t, _) = formats::parse(&std::fs::read_to_string(&file).unwrap(), &name).unwrap_or_else(|e| panic!("{e}"));
            sessions.push((name, t));
        }
    }
    assert!(sessions.len() >= 10, "only {} recorded sessions", sessions.len());
    sessions
}

fn every_session_with_a_giant_output_fits(policy_text: Option<&str>, seed: u64) {
    let cairn = host();
    let policy = match policy_text {
        Some(text) => policy(&cairn, text),
        None => cairn.default_policy().unwrap(),
    };
    let mut rng = Rng(seed);
    let mut runs = 0;
    for (name, session) in shared_sessions() {
        for at in [At::Head, At::Middle, At::Tail, At::Batch] {
            let Some(input) = with_giant(&session, at, &mut rng) else {
                eprintln!("{name}: no batch of calls to join");
                continue;
            };
            for window in WINDOWS {
                let label = format!("{name} giant at {at:?}, window {window}");
                let run = compact(&cairn, &policy, &input, &label, Some(window));
                eprintln!("{label}: {} → {} tokens ({})", run.report.tokens_before, run.report.tokens_after, run.report.committed_by.as_deref().unwrap_or("nothing"));
                check_fits(&cairn, &label, &input, &run, window);
                check_giant(&label, &input, &run);
                runs += 1;
            }
        }
    }
    assert!(runs >= 80, "only {runs} compactions");
}

#[test]
#[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
fn a_giant_tool_output_anywhere_in_a_recorded_session_fits_the_window_under_the_default_policy() {
    every_session_with_a_giant_output_fits(None, 0x5eed_0128);
}

#[test]
#[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
fn a_giant_tool_output_anywhere_in_a_recorded_session_fits_the_window_under_the_offline_policy() {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/policies/offline.toml")).unwrap();
    every_session_with_a_giant_output_fits(Some(&text), 0x5eed_0064);
}

/// The operator's own words over the window: nothing may clip or drop them, so the result is
/// `degraded` with `over_window` saying what takes the room, never reported as fitting.
#[test]
fn the_operators_own_messages_over_the_window_are_reported_not_hidden() {
    let cairn = host();
    let policy = cairn.default_policy().unwrap();
    let mut t = sample::coding_session(6);
    let words: String = (0..40_000).map(|i| format!("requirement{i} ")).collect();
    let mut paste = Entry::text("operator-paste", Role::User, Origin::Operator, format!("Here is the whole spec, keep all of it in mind:\n{words}"));
    paste.turn = t.entries.last().unwrap().turn + 1;
    t.entries.push(paste.clone());
    let paste_tokens = cairn.tokenizer().count(&paste.model_text()) as u64;
    assert!(paste_tokens > 64_000, "{paste_tokens}");

    let run = compact(&cairn, &policy, &t, "operator-over", Some(64_000));
    let report = &run.report;
    eprintln!("operator over the window: {} → {} tokens, committed {}", report.tokens_before, report.tokens_after, report.committed);
    assert!(report.degraded, "{}", brief(report));
    let why = report.over_window.as_deref().expect("over_window says why");
    assert!(why.contains("over the usable window of 64000") && why.contains("the operator's own messages take"), "{why}");
    let operator: u64 = why.split("the operator's own messages take ").nth(1).unwrap().split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap();
    assert!(operator >= paste_tokens, "{why}");
    assert!(report.transcript.entries.iter().any(|e| e.id == "operator-paste" && e.parts == paste.parts), "the operator's words are kept verbatim");
    // The record says so too, and --json/MCP carry it.
    let json = serde_json::to_value(report).unwrap();
    assert_eq!(json["over_window"], why);
    assert_eq!(json["degraded"], true);

    // The same session in a window it fits: nothing over it to report.
    let run = compact(&cairn, &policy, &t, "operator-fits", Some(128_000));
    assert!(run.report.committed && run.report.over_window.is_none(), "{}", brief(&run.report));
    assert!(run.report.tokens_after <= 128_000);
}

/// A report without its transcript, for assertion messages.
fn brief(report: &CompactionReport) -> String {
    let mut json = serde_json::to_value(report).unwrap();
    json.as_object_mut().unwrap().remove("transcript");
    format!("{json:#}")
}

/// Files under `dir` (none when it does not exist).
fn files_under(dir: &Path) -> Vec<String> {
    let Ok(read) = std::fs::read_dir(dir) else { return Vec::new() };
    read.flatten().flat_map(|e| if e.path().is_dir() { files_under(&e.path()) } else { vec![e.path().display().to_string()] }).collect()
}

fn check_not_committed(label: &str, run: &Compacted, key: &str, steps: &[&str]) {
    let report = &run.report;
    assert!(!report.committed, "{label}: {}", brief(report));
    assert_eq!(report.archive, None, "{label}");
    assert_eq!(report.committed_by, None, "{label}");
    assert_eq!(report.tokens_after, report.tokens_before, "{label}");
    let why = report.not_committed.as_deref().unwrap_or_else(|| panic!("{label}: no reason given"));
    for step in steps {
        assert!(why.contains(step), "{label}: the reason names {step}: {why}");
    }
    let json = serde_json::to_value(report).unwrap();
    assert_eq!(json["committed"], false, "{label}");
    assert!(json["archive_id"].is_null(), "{label}: {json}");
    assert_eq!(json["not_committed"], why, "{label}");
    // Nothing in the archives folder for it: no archive was written.
    let archives = run.home.path().join("conversations").join(ConversationKey::derive(key).as_str()).join("archives");
    assert!(files_under(&archives).is_empty(), "{label}: {:?}", files_under(&archives));
    assert!(!run.home.existing_conversation(&ConversationKey::derive(key)).unwrap().has_archive(&report.archive_id), "{label}");
}

#[test]
fn a_compaction_that_commits_nothing_says_so_and_writes_no_archive() {
    let cairn = host();
    // An already-small context under the default policy: nothing between the system prompt
    // and the verbatim tail.
    let small =
        Transcript::new(vec![Entry::text("sys", Role::System, Origin::Harness, "You are a coding agent."), Entry::text("u1", Role::User, Origin::Operator, "Fix the failing test in src/lib.rs.")]);
    let default = cairn.default_policy().unwrap();
    let run = compact(&cairn, &default, &small, "small", Some(128_000));
    check_not_committed("already small", &run, "small", &["last-resort"]);

    // A chain whose only step traps, and a last resort with nothing it may cut.
    let trap = policy(&cairn, "[[chain]]\nplugin = \"misbehave\"\ngrants = [\"archive:read\"]\nconfig = { mode = \"trap\" }\n");
    let run = compact(&cairn, &trap, &small, "trapped", None);
    check_not_committed("trap", &run, "trapped", &["misbehave", "trap", "last-resort"]);

    // A step that fails on a context the last resort could cut, refused by the commit policy.
    let session = sample::coding_session(8);
    let refuse = |_: &cairn::record::Proposal| cairn::record::CommitDecision::Reject("a tool call is running".into());
    let failing = policy(&cairn, "[[chain]]\nplugin = \"misbehave\"\ngrants = [\"archive:read\"]\nconfig = { mode = \"grow\" }\n");
    let dir = tempfile::tempdir().unwrap();
    let home = Home::open(dir.path()).unwrap();
    let mut store = home.conversation(&ConversationKey::derive("refused")).unwrap();
    let report = cairn.compact_with(&failing, &mut store, &session, "refused", RunOptions { approve: Some(&refuse), ..RunOptions::default() }).unwrap();
    let run = Compacted { report, home, _dir: dir };
    check_not_committed("refused", &run, "refused", &["the commit policy refused it", "a tool call is running"]);
}

/// A small window (a local model's): the verbatim tail the policy keeps is itself larger than
/// the usable window, and no single output in it is large. The host still makes it fit.
#[test]
fn a_window_smaller_than_the_verbatim_tail_still_fits() {
    let cairn = host();
    let policy = cairn.default_policy().unwrap();
    let t = sample::coding_session(40);
    for window in [24_000, 12_000, 8_000] {
        let run = compact(&cairn, &policy, &t, &format!("small-window-{window}"), Some(window));
        eprintln!("generated session, window {window}: {} → {} tokens ({})", run.report.tokens_before, run.report.tokens_after, run.report.committed_by.as_deref().unwrap_or("nothing"));
        check_fits(&cairn, &format!("window {window}"), &t, &run, window);
    }
}

/// The newest output is under the verbatim tail's share (no first clip) but over a small
/// window: the `fit` stage clips it, and the context fits with the output recoverable.
#[test]
fn the_fit_stage_clips_a_newest_output_the_policy_may_not_touch() {
    let cairn = host();
    let policy = cairn.default_policy().unwrap();
    let mut t = sample::coding_session(6);
    let turn = t.entries.last().unwrap().turn;
    let mut result = giant_result_entry(turn);
    let Part::ToolResult { content, .. } = &mut result.parts[0] else { unreachable!() };
    *content = giant_log()[..40_000].to_string();
    let output_tokens = cairn.tokenizer().count(content) as u64;
    assert!((12_000..20_000).contains(&output_tokens), "{output_tokens}");
    t.entries.extend([giant_call_entry(turn), result]);
    let run = compact(&cairn, &policy, &t, "fit-stage", Some(12_000));
    eprintln!("fit stage, window 12000: {} → {} tokens ({})", run.report.tokens_before, run.report.tokens_after, run.report.committed_by.as_deref().unwrap_or("nothing"));
    check_fits(&cairn, "fit stage", &t, &run, 12_000);
    assert!(run.report.steps.iter().any(|s| s.stage.as_deref() == Some("fit") && s.plugin.starts_with("clip@")), "{}", brief(&run.report));
    let Some(Part::ToolResult { elided: Some(uri), .. }) = run.report.transcript.entries.iter().flat_map(|e| &e.parts).find(|p| matches!(p, Part::ToolResult { call_id, .. } if call_id == GIANT_CALL))
    else {
        panic!("the newest output is not clipped: {}", brief(&run.report));
    };
    assert_eq!(run.home.find_artifact(&uri.parse().unwrap()).unwrap(), &giant_log().as_bytes()[..40_000]);
}

/// What the agent bills beyond the transcript (its system prompt and tool schemas, in the usage
/// it reports) takes room no compaction can free: the transcript is held to the window less
/// that. An agent's figure that leaves the transcript no room at all is not taken for one that
/// asks to drop everything.
#[test]
fn the_agents_usage_beyond_the_transcript_is_taken_off_the_window() {
    let cairn = host();
    let policy = cairn.default_policy().unwrap();
    let t = sample::coding_session(40);
    let counted = {
        let mut t = t.clone();
        cairn.tokenizer().count_transcript(&mut t);
        t.total_tokens()
    };
    let window = counted;
    let run_with = |key: &str, reported: u64| {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::open(dir.path()).unwrap();
        let mut store = home.conversation(&ConversationKey::derive(key)).unwrap();
        let usage = Some(cairn::lifecycle::Usage::Reported { tokens: reported, entries_after: 0 });
        let report = cairn.compact_with(&policy, &mut store, &t, key, RunOptions { window: Some(window), usage, ..RunOptions::default() }).unwrap();
        Compacted { report, home, _dir: dir }
    };

    let unmeasured = compact(&cairn, &policy, &t, "usage-unmeasured", Some(window));
    // The agent sent nine tenths of the window besides the transcript.
    let measured = run_with("usage-measured", counted + window * 9 / 10);
    eprintln!("window {window}: {counted} → {} tokens unmeasured, {} with the agent's usage", unmeasured.report.tokens_after, measured.report.tokens_after);
    check_fits(&cairn, "with the agent's usage", &t, &measured, window / 10);
    assert!(unmeasured.report.tokens_after > window / 10, "the case does not tell the two apart: {}", brief(&unmeasured.report));

    // Twice the window besides the transcript: held to the window alone, not dropped to nothing.
    let overfull = run_with("usage-overfull", counted + 2 * window);
    check_fits(&cairn, "with usage over the window", &t, &overfull, window);
    assert!(!overfull.report.degraded && overfull.report.tokens_after > window / 10, "{}", brief(&overfull.report));
}
