//! The operator's verbs: `cairn show`, `cairn undo`, `cairn pin`/`unpin`, `--dry-run` on
//! `compact` and `boundary`, and the same over MCP.

use crate::support::mcp::Mcp;
use crate::support::shared;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use cairn::tokenizer::Tokenizer;
use cairn::transcript::{formats, Entry, Part, Transcript};
use serde_json::{json, Value};

fn cairn(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cairn")).args(args).env("CAIRN_LOG", "error").output().expect("running cairn")
}

fn ok(args: &[&str]) -> String {
    let out = cairn(args);
    assert!(out.status.success(), "cairn {args:?} failed ({}):\n{}\n{}", out.status, String::from_utf8_lossy(&out.stderr), String::from_utf8_lossy(&out.stdout));
    String::from_utf8(out.stdout).unwrap()
}

fn ok_json(args: &[&str]) -> Value {
    let text = ok(args);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("cairn {args:?}: not JSON ({e}):\n{text}"))
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The largest Pi session of the shared transcripts.
/// Both recorded Pi sessions (`pi-mono__large-session.jsonl` and the larger
/// `pi-mono__before-compaction.jsonl`).
fn pi_sessions() -> Vec<PathBuf> {
    let mut sessions: Vec<PathBuf> = std::fs::read_dir(shared("pi")).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "jsonl")).collect();
    sessions.sort();
    assert!(sessions.iter().any(|p| p.ends_with("pi-mono__large-session.jsonl")), "the large Pi session is in the shared transcripts: {sessions:?}");
    sessions
}

fn parse_file(path: &Path) -> Transcript {
    formats::parse(&std::fs::read_to_string(path).unwrap(), s(path)).unwrap().0
}

/// The session as it was up to the first operator message past `fraction` of its entries,
/// written to `dest` as Cairn JSONL (the session as parsed: ids and parts as the record has them).
fn pi_prefix(full: &Transcript, fraction: f64, dest: &Path) {
    let at = (full.entries.len() as f64 * fraction) as usize;
    let cut = (at..full.entries.len()).find(|&i| is_operator(&full.entries[i])).unwrap();
    std::fs::write(dest, formats::write_cairn(&Transcript::new(full.entries[..cut].to_vec()))).unwrap();
}

fn is_operator(entry: &Entry) -> bool {
    entry.role == cairn::transcript::Role::User && entry.origin == cairn::transcript::Origin::Operator
}

/// The conversation going on after a compaction: `previous` (a compacted context, Cairn
/// JSONL) then the whole session's entries that came after it, up to the first operator
/// message past `fraction` of them (all when 1.0), written to `dest` as Cairn JSONL.
fn continued(previous: &Path, full: &Transcript, fraction: f64, dest: &Path) {
    let mut entries = parse_file(previous).entries;
    let last = &entries.last().unwrap().id;
    let from = full.entries.iter().position(|e| &e.id == last).unwrap() + 1;
    let at = (full.entries.len() as f64 * fraction) as usize;
    let upto = if fraction >= 1.0 { full.entries.len() } else { (at.max(from)..full.entries.len()).find(|&i| is_operator(&full.entries[i])).unwrap() };
    entries.extend(full.entries[from..upto].iter().cloned());
    std::fs::write(dest, formats::write_cairn(&Transcript::new(entries))).unwrap();
}

/// Archive ids of the compactions in `cairn show --json`'s timeline, with their status.
fn compactions(timeline: &Value) -> Vec<(String, String)> {
    timeline["moments"].as_array().unwrap().iter().filter(|m| m["kind"] == "compaction").map(|m| (m["archive_id"].as_str().unwrap().to_string(), m["status"].as_str().unwrap().to_string())).collect()
}

#[test]
#[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
fn undoing_two_compactions_of_the_large_pi_session_restores_it_byte_for_byte() {
    for session in pi_sessions() {
        undo_two_compactions(&session);
    }
}

fn undo_two_compactions(session: &Path) {
    let full = parse_file(session);
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let [start, c1, more, c2, restored] = ["start.jsonl", "c1.jsonl", "more.jsonl", "c2.jsonl", "r.jsonl"].map(|f| dir.path().join(f));
    let k = "pi-large";
    let common = ["--home", s(&home), "--conversation", k, "--json", "--out-format", "cairn"];

    // The session half way, compacted; then the rest of it after the compacted context, compacted.
    pi_prefix(&full, 0.5, &start);
    let first = ok_json(&[&["compact", s(&start), "--out", s(&c1)][..], &common].concat());
    let a1 = first["archive_id"].as_str().expect("the first compaction commits").to_string();
    continued(&c1, &full, 1.0, &more);
    let second = ok_json(&[&["compact", s(&more), "--out", s(&c2)][..], &common].concat());
    let a2 = second["archive_id"].as_str().expect("the second compaction commits").to_string();
    eprintln!("{}: {} → {} → {} tokens", session.display(), first["tokens_before"], first["tokens_after"], second["tokens_after"]);

    let timeline = ok_json(&["show", "--conversation", k, "--home", s(&home), "--json"]);
    assert_eq!(compactions(&timeline), vec![(a1.clone(), "committed".into()), (a2.clone(), "committed".into())], "{timeline:#}");
    for archive in [&a1, &a2] {
        let view = ok_json(&["show", "--conversation", k, archive, "--home", s(&home), "--json"]);
        let stages = view["stages"].as_array().unwrap();
        let changed: usize = stages.iter().flat_map(|stage| ["summarized", "elided", "dropped"].map(|part| stage[part]["count"].as_u64().unwrap() as usize)).sum();
        assert!(changed > 0, "{archive} shows nothing it changed: {view:#}");
        assert!(view["steps"].as_array().is_some_and(|s| !s.is_empty()), "{view:#}");
        let human = ok(&["show", "--conversation", k, archive, "--home", s(&home)]);
        assert!(human.contains("stage ") && human.contains("  step ") && human.contains(archive.as_str()), "{human}");
    }

    let undone = ok_json(&["undo", "--conversation", k, "--archive", &a1, "--out", s(&restored), "--out-format", "cairn", "--home", s(&home), "--json"]);
    assert_eq!(undone["undone"], json!([a2, a1]), "{undone:#}");

    let mut reference = Transcript::new(full.entries.clone());
    Tokenizer::default().count_transcript(&mut reference);
    let expected = formats::write_cairn(&reference);
    let got = std::fs::read_to_string(&restored).unwrap();
    assert!(
        got == expected,
        "the restored context differs from the original session's ({} vs {} bytes; first difference at byte {})",
        got.len(),
        expected.len(),
        got.bytes().zip(expected.bytes()).position(|(a, b)| a != b).unwrap_or(got.len().min(expected.len()))
    );

    let timeline = ok_json(&["show", "--conversation", k, "--home", s(&home), "--json"]);
    assert_eq!(compactions(&timeline), vec![(a1.clone(), "undone".into()), (a2.clone(), "undone".into())], "{timeline:#}");
    assert!(timeline["moments"].as_array().unwrap().iter().any(|m| m["kind"] == "undo"), "{timeline:#}");
    let human = ok(&["show", "--conversation", k, "--home", s(&home)]);
    assert!(human.contains("undo") && human.contains("undone"), "{human}");
}

#[test]
#[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
fn a_pinned_first_turn_entry_survives_three_compactions_verbatim() {
    for session in pi_sessions() {
        pin_through_three_compactions(&session);
    }
}

fn pin_through_three_compactions(session: &Path) {
    let original = parse_file(session);
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let k = "pi-pinned";
    let start = dir.path().join("start.jsonl");
    pi_prefix(&original, 0.4, &start);
    // A first-turn entry that is not the opening message: a tool result, else the next one.
    let first_turn = original.entries[0].turn;
    let pinned: &Entry = original.entries.iter().find(|e| e.turn == first_turn && e.parts.iter().any(|p| matches!(p, Part::ToolResult { .. }))).unwrap_or(&original.entries[1]);
    // Pinned before any compaction: `--transcript` tells the record the entries first.
    let pins = ok_json(&["pin", "--conversation", k, &pinned.id, "--transcript", s(&start), "--home", s(&home), "--json"]);
    assert_eq!(pins["pinned"], json!([pinned.id]), "{pins:#}");

    // Three compactions, the conversation going on between them.
    let mut input = start.clone();
    for cycle in 1..=3 {
        if cycle > 1 {
            let more = dir.path().join(format!("in{cycle}.jsonl"));
            continued(&input, &original, if cycle == 2 { 0.7 } else { 1.0 }, &more);
            input = more;
        }
        let out = dir.path().join(format!("o{cycle}.jsonl"));
        let report = ok_json(&["compact", s(&input), "--home", s(&home), "--conversation", k, "--json", "--out", s(&out), "--out-format", "cairn"]);
        assert_eq!(report["committed"], true, "cycle {cycle}: {report:#}");
        assert!(report["pinned"].as_array().is_some_and(|p| p.contains(&json!(pinned.id))), "cycle {cycle}: {report:#}");
        input = out;
    }
    let last = parse_file(&input);
    let kept = last.entries.iter().find(|e| e.id == pinned.id).unwrap_or_else(|| panic!("{} is gone after three compactions", pinned.id));
    assert_eq!(kept.parts, pinned.parts, "{} changed", pinned.id);

    let unpinned = ok_json(&["unpin", "--conversation", k, &pinned.id, "--home", s(&home), "--json"]);
    assert_eq!(unpinned["pinned"], json!([]));
    let out = cairn(&["unpin", "--conversation", k, &pinned.id, "--home", s(&home)]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains(&pinned.id), "{out:?}");
}

/// An OpenAI session of `turns` turns, each reading a long file; the first call reads
/// AGENTS.md, and the operator's first message says `!pin` when `marked`.
fn synthetic(turns: usize, marked: bool) -> String {
    let task = if marked { "Fix the failing build. !pin Never edit the vendored folder." } else { "Fix the failing build." };
    let mut messages = vec![json!({"role": "system", "content": "You are a coding agent."}), json!({"role": "user", "content": task})];
    for i in 0..turns {
        let path = if i == 0 { "AGENTS.md".to_string() } else { format!("src/module_{i}.rs") };
        let call = format!("call_{i}");
        let output: String = (0..120).map(|j| format!("line {j} of {path}: fn item_{i}_{j}() -> u64 {{ {} }}\n", i * 1000 + j)).collect();
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": call, "type": "function", "function": {"name": "read", "arguments": json!({"path": path}).to_string()}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": call, "content": output}));
        messages.push(json!({"role": "assistant", "content": format!("Read {path}; step {i} done.")}));
        messages.push(json!({"role": "user", "content": format!("Continue with step {}.", i + 1)}));
    }
    serde_json::to_string_pretty(&messages).unwrap()
}

fn default_policy_with(pins: &str) -> String {
    format!("{}\n[pins]\n{pins}\n", include_str!("../../../cairn/src/policy/default.toml"))
}

#[test]
fn the_pin_marker_and_a_policy_rule_pin_entries_and_a_pin_over_the_budget_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let file = dir.path().join("session.json");
    std::fs::write(&file, synthetic(30, true)).unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, default_policy_with("files = [\"AGENTS.md\"]")).unwrap();
    let input = parse_file(&file);
    let marked = input.entries.iter().find(|e| e.model_text().contains("!pin")).unwrap();
    let agents_result = input.entries.iter().find(|e| e.tool_result_ids().any(|id| id == "call_0")).unwrap();

    let out = dir.path().join("out.jsonl");
    let report = ok_json(&["compact", s(&file), "--home", s(&home), "--conversation", "marked", "--policy", s(&policy), "--json", "--out", s(&out)]);
    assert_eq!(report["committed"], true, "{report:#}");
    let pinned = report["pinned"].as_array().cloned().unwrap_or_default();
    assert!(pinned.contains(&json!(marked.id)), "the !pin message is not pinned: {report:#}");
    assert!(pinned.contains(&json!(agents_result.id)), "the AGENTS.md result is not pinned: {report:#}");
    let output = parse_file(&out);
    for entry in [marked, agents_result] {
        let kept = output.entries.iter().find(|e| e.id == entry.id).unwrap_or_else(|| panic!("{} was not kept", entry.id));
        assert_eq!(kept.parts, entry.parts, "{} changed", entry.id);
    }
    // Without the rule, the same long AGENTS.md output is set aside like the others.
    let plain = dir.path().join("plain.jsonl");
    ok_json(&["compact", s(&file), "--home", s(&home), "--conversation", "plain", "--json", "--out", s(&plain)]);
    let plain = parse_file(&plain);
    assert!(plain.entries.iter().find(|e| e.id == agents_result.id).is_none_or(|e| e.parts != agents_result.parts), "AGENTS.md was kept without a rule");

    // Over the budget: refused, naming the entry and the budget.
    let tight = dir.path().join("tight.toml");
    std::fs::write(&tight, default_policy_with("budget_tokens = 10")).unwrap();
    let big = input.entries.iter().find(|e| e.tool_result_ids().any(|id| id == "call_5")).unwrap();
    let refused = cairn(&["pin", "--conversation", "plain", &big.id, "--home", s(&home), "--policy", s(&tight)]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "a pin over the budget was accepted");
    assert!(stderr.contains(&big.id) && stderr.contains("10"), "{stderr}");
    let timeline = ok_json(&["show", "--conversation", "plain", "--home", s(&home), "--json"]);
    assert_eq!(timeline["pinned"], json!([]), "{timeline:#}");
}

/// Every file under `dir`, with its bytes.
fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                files.insert(path.clone(), Vec::new());
                stack.push(path);
            } else {
                files.insert(path.clone(), std::fs::read(&path).unwrap());
            }
        }
    }
    files
}

#[test]
fn a_dry_run_writes_nothing_to_the_home() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let file = dir.path().join("session.json");
    std::fs::write(&file, synthetic(30, false)).unwrap();
    let k = "dry";
    // The conversation holds an earlier compaction (of another file: the same original again
    // would be reported already compacted).
    let earlier = dir.path().join("earlier.json");
    std::fs::write(&earlier, synthetic(20, false)).unwrap();
    ok_json(&["compact", s(&earlier), "--home", s(&home), "--conversation", k, "--json"]);
    let before = tree(&home);
    let again = ok_json(&["compact", s(&earlier), "--home", s(&home), "--conversation", k, "--json", "--dry-run"]);
    assert_eq!(again["already_compacted"], true, "{again:#}");

    let report = ok_json(&["compact", s(&file), "--home", s(&home), "--conversation", k, "--json", "--dry-run"]);
    assert_eq!(report["dry_run"], true, "{report:#}");
    assert_eq!(report["committed"], true, "{report:#}");
    assert!(report["cache_rewrite"].as_array().is_some_and(|c| !c.is_empty()), "{report:#}");
    let human = ok(&["compact", s(&file), "--home", s(&home), "--conversation", k, "--dry-run"]);
    assert!(human.contains("dry run: nothing written") && human.contains("would commit") && human.contains("would replace"), "{human}");

    let tokens = parse_file(&file).entries.len();
    let boundary = ok_json(&["boundary", s(&file), "--home", s(&home), "--conversation", k, "--turn", "100", "--window", "40000", "--reserve", "0", "--count", "--dry-run", "--json"]);
    assert_eq!(boundary["dry_run"], true, "{boundary:#}");
    assert_eq!(boundary["action"]["kind"], "compacted", "({tokens} entries) {boundary:#}");
    assert_eq!(boundary["report"]["dry_run"], true, "{boundary:#}");
    assert!(tree(&home) == before, "a dry run changed the home");

    // A conversation the home does not hold is not created; a home that does not exist neither.
    let fresh = ok_json(&["compact", s(&file), "--home", s(&home), "--conversation", "never", "--json", "--dry-run"]);
    assert_eq!(fresh["committed"], true, "{fresh:#}");
    ok_json(&["boundary", s(&file), "--home", s(&home), "--conversation", "never", "--turn", "3", "--window", "40000", "--reserve", "0", "--count", "--dry-run", "--json"]);
    assert!(tree(&home) == before, "a dry run created a conversation");
    let nowhere = dir.path().join("no-home");
    ok_json(&["compact", s(&file), "--home", s(&nowhere), "--json", "--dry-run"]);
    assert!(!nowhere.exists(), "a dry run created its home");
}

#[test]
fn the_mcp_tools_dry_run_pin_show_and_undo() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let session = synthetic(30, false);
    let input = formats::parse(&session, "session").unwrap().0;
    let mut mcp = Mcp::start(&home);
    let k = "mcp-ops";

    let dry = mcp.tool("compact", json!({"conversation": k, "transcript": session, "dry_run": true})).unwrap();
    assert_eq!(dry["dry_run"], true, "{dry:#}");
    assert_eq!(dry["committed"], true, "{dry:#}");
    assert!(mcp.tool("show", json!({"conversation": k})).is_err(), "a dry run created the conversation");
    let boundary = mcp.tool("boundary", json!({"conversation": k, "turn": 40, "transcript": session, "window": 40000, "reserve": 0, "dry_run": true, "include_transcript": false})).unwrap();
    assert_eq!(boundary["dry_run"], true, "{boundary:#}");

    let run = mcp.tool("compact", json!({"conversation": k, "transcript": session, "include_transcript": false})).unwrap();
    let archive = run["archive_id"].as_str().expect("committed").to_string();
    let first_user = input.entries.iter().find(|e| e.model_text().contains("Fix the failing build")).unwrap();
    let pins = mcp.tool("pin", json!({"conversation": k, "ids": [first_user.id]})).unwrap();
    assert_eq!(pins["pinned"], json!([first_user.id]), "{pins:#}");
    let not = mcp.tool("unpin", json!({"conversation": k, "ids": ["nope"]})).unwrap_err();
    assert!(not.contains("nope"), "{not}");

    let timeline = mcp.tool("show", json!({"conversation": k})).unwrap();
    let kinds: Vec<&str> = timeline["timeline"]["moments"].as_array().unwrap().iter().map(|m| m["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["compaction", "pin"], "{timeline:#}");
    let view = mcp.tool("show", json!({"conversation": k, "archive_id": archive})).unwrap();
    assert_eq!(view["compaction"]["archive_id"], json!(archive), "{view:#}");

    let undone = mcp.tool("undo", json!({"conversation": k, "transcript": session})).unwrap();
    assert_eq!(undone["undone"], json!([archive]), "{undone:#}");
    assert_eq!(undone["format"], "openai", "{undone:#}");
    let restored = formats::parse(undone["transcript"].as_str().unwrap(), "restored").unwrap().0;
    assert_eq!(restored.entries.len(), input.entries.len());
    assert!(mcp.tool("undo", json!({"conversation": k})).unwrap_err().contains("no compaction to undo"));

    // What Pi's extension puts in Pi's compaction entry carries the pinned message whole.
    let again = mcp.tool("compact", json!({"conversation": k, "transcript": session, "include_transcript": false})).unwrap();
    assert!(again["pinned"].as_array().is_some_and(|p| p.contains(&json!(first_user.id))), "{again:#}");
    let prefix = again["prefix_summary"].as_str().unwrap();
    assert!(prefix.contains(&format!("[pinned user] {}", first_user.model_text().trim())), "{prefix}");
}

/// The probe of issue 35: a context written out in each writable format (OpenAI chat names entries by content),
/// compacted again in the same conversation, then undone without the caller's context: the
/// record's context is the one the harness sent back, not the first outcome with it appended.
#[test]
fn undo_without_the_transcript_after_a_round_trip_restores_what_was_sent_back() {
    // Every format `--out-format` writes: some keep the record's ids (cairn, pi), some name
    // entries by content (openai, anthropic), and the record must fold either.
    for (format, file) in [("openai", "c1.json"), ("anthropic", "c1.json"), ("cairn", "c1.jsonl"), ("pi", "c1.jsonl")] {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let session = dir.path().join("s.jsonl");
        let (c1, u) = (dir.path().join(file), dir.path().join(format!("u-{file}")));
        std::fs::write(&session, formats::write_cairn(&cairn::transcript::sample::coding_session(60))).unwrap();
        let k = "round-trip";
        let first = ok_json(&["compact", s(&session), "--home", s(&home), "--conversation", k, "--out", s(&c1), "--out-format", format, "--json"]);
        assert!(first["archive_id"].is_string(), "{format}: the first compaction commits: {first:#}");
        let second = ok_json(&["compact", s(&c1), "--home", s(&home), "--conversation", k, "--json"]);
        assert!(second["archive_id"].is_string(), "{format}: the second compaction commits: {second:#}");
        let said = ok(&["undo", "--conversation", k, "--home", s(&home), "--out", s(&u), "--out-format", format]);
        // The embedded policy's cooldown, by its number (it printed the setting's name).
        assert!(said.contains("automatic maintenance waits 5 turns again"), "{format}: {said}");

        let read = |p: &Path| parse_file(p).entries.iter().map(|e| (e.role, e.model_text())).collect::<Vec<_>>();
        let tokens = |messages: &[(cairn::transcript::Role, String)]| messages.iter().map(|(_, text)| Tokenizer::default().count(text) as usize).sum::<usize>();
        let (sent, restored) = (read(&c1), read(&u));
        eprintln!("{format}: {file}: {} messages, {} tokens; undone: {} messages, {} tokens", sent.len(), tokens(&sent), restored.len(), tokens(&restored));
        assert_eq!(restored.len(), sent.len(), "{format}: undo restored a different number of messages than {file} holds");
        assert_eq!(tokens(&restored), tokens(&sent), "{format}");
        assert!(restored == sent, "{format}: undo restored other messages than {file} holds");
    }
}
