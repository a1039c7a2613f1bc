//! The agents' hooks say nothing they do not mean: every agent shows a hook's stderr to the
//! user, and Gemini CLI saves it in the session file. A hook run on a session with records
//! Cairn does not know (at the default `CAIRN_LOG`) prints only its answer; the warning goes to
//! the home's hook log (`hook-log.txt`).

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};

/// `cairn ARGS` as an agent runs a hook: the payload on stdin, `CAIRN_LOG` unset.
fn hook(args: &[&str], payload: &Value) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(args)
        .env_remove("CAIRN_LOG")
        .env_remove("CLAUDE_PROJECT_DIR")
        .env_remove("GEMINI_PROJECT_DIR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running cairn");
    child.stdin.take().unwrap().write_all(payload.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "cairn {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out
}

/// Runs the archiving hook on `before`, then the context hook on `after`; asserts neither wrote
/// to stderr but `meant` lines, that stdout is empty or the hook's JSON answer, and that the
/// home's hook log has the warning the odd records raised, once per hook.
fn quiet(agent: &str, hooks: [(&str, &str); 2], transcripts: [&str; 2], extra: Value, meant: &str) {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("cairn");
    let transcript = dir.path().join("session.jsonl");
    for ((verb, event), text) in hooks.into_iter().zip(transcripts) {
        std::fs::write(&transcript, text).unwrap();
        let mut payload = json!({"session_id": "s1", "transcript_path": transcript, "cwd": "/work/spotter", "hook_event_name": event, "trigger": "manual", "source": "compact"});
        payload.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let out = hook(&[agent, verb, "--home", home.to_str().unwrap()], &payload);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stray: Vec<&str> = stderr.lines().filter(|l| meant.is_empty() || !l.starts_with(meant)).collect();
        assert!(stray.is_empty(), "cairn {agent} {verb} wrote to stderr, which the agent shows the user: {stray:?}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !stdout.trim().is_empty() {
            let answer: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("cairn {agent} {verb}: stdout is not its JSON answer ({e}): {stdout}"));
            assert_eq!(answer["hookSpecificOutput"]["hookEventName"], event, "{answer}");
        }
    }
    let log = std::fs::read_to_string(home.join("hook-log.txt")).expect("the hook log in the home");
    for (verb, _) in hooks {
        assert!(log.lines().any(|l| l.starts_with(&format!("{agent} {verb}: ")) && l.contains("unrecognized line kinds")), "no warning of {agent} {verb} in the hook log:\n{log}");
    }
}

#[test]
fn codex_hooks_log_odd_rollout_lines_to_the_home_not_to_stderr() {
    let line = |kind: &str, payload: Value| json!({"timestamp": "2026-12-01T16:53:58.405Z", "type": kind, "payload": payload}).to_string() + "\n";
    let message = |role: &str, text: &str| json!({"type": "message", "role": role, "content": [{"type": if role == "assistant" { "output_text" } else { "input_text" }, "text": text}]});
    let before = [
        line("session_meta", json!({"id": "s1", "cwd": "/work/spotter", "base_instructions": {"text": "You are Codex."}})),
        line("response_item", message("user", "Never edit files under vendor/. Show me notes.txt.")),
        line("response_item", message("assistant", "The build runs with make.")),
        line("a_future_line_kind", json!({})),
    ]
    .concat();
    let compacted = line("compacted", json!({"message": "SUMMARY", "replacement_history": [message("user", "SUMMARY")]}));
    let after = format!("{before}{compacted}{}", line("a_future_line_kind", json!({})));
    quiet("codex", [("pre-compact", "PreCompact"), ("session-start", "SessionStart")], [&before, &after], json!({}), "");
}

#[test]
fn gemini_hooks_log_odd_session_records_to_the_home_not_to_stderr() {
    let meta = json!({"sessionId": "s1", "projectHash": "p", "startTime": "t", "lastUpdated": "t"}).to_string();
    let record = |v: Value| v.to_string() + "\n";
    let before = [
        meta + "\n",
        record(json!({"id": "u1", "timestamp": "t", "type": "user", "content": [{"text": "Never edit files under vendor/. Read notes.txt."}]})),
        record(json!({"id": "g1", "timestamp": "t", "type": "gemini", "content": "The build runs with make."})),
        // The TUI's empty notice: a kind Cairn knows, no warning of its own.
        record(json!({"id": "i1", "timestamp": "t", "type": "info", "content": ""})),
        record(json!({"id": "n1", "timestamp": "t", "type": "a_future_kind", "content": "something new"})),
    ]
    .concat();
    let compressed = json!({"$set": {"messages": [
        {"id": "s1", "timestamp": "t", "type": "user", "content": [{"text": "<state_snapshot>The build runs with make.</state_snapshot>"}]},
        {"id": "s2", "timestamp": "t", "type": "gemini", "content": [{"text": "Got it."}]},
        {"id": "n2", "timestamp": "t", "type": "a_future_kind", "content": "something new"},
    ]}});
    let after = format!("{before}{compressed}\n");
    quiet("gemini", [("pre-compress", "PreCompress"), ("before-agent", "BeforeAgent")], [&before, &after], json!({"prompt": "Next step, please."}), "");
}

#[test]
fn claude_code_hooks_log_odd_transcript_lines_to_the_home_not_to_stderr() {
    let line = |v: Value| v.to_string() + "\n";
    let base = json!({"isSidechain": false, "sessionId": "s1"});
    let with = |extra: Value| {
        let mut v = base.clone();
        v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        line(v)
    };
    let before = [
        with(json!({"parentUuid": null, "type": "user", "message": {"role": "user", "content": "Never edit files in /config. Run the tests."}, "uuid": "u1"})),
        with(json!({"parentUuid": "u1", "type": "assistant", "message": {"id": "msg_1", "role": "assistant", "content": [{"type": "text", "text": "They pass."}]}, "uuid": "a1"})),
        with(json!({"parentUuid": "a1", "type": "a-future-line-kind", "uuid": "x1"})),
    ]
    .concat();
    let after = [
        before.clone(),
        with(json!({"parentUuid": "x1", "type": "system", "subtype": "compact_boundary", "content": "Conversation compacted", "uuid": "b1", "compactMetadata": {"trigger": "manual", "preTokens": 1000}})),
        with(json!({"parentUuid": "b1", "type": "user", "isCompactSummary": true, "message": {"role": "user", "content": "Summary: the tests pass."}, "uuid": "u2"})),
        with(json!({"parentUuid": "u2", "type": "a-future-line-kind", "uuid": "x2"})),
    ]
    .concat();
    // Claude Code shows a hook's stderr only in its debug log: pre-compact says what it archived there.
    quiet("claude-code", [("pre-compact", "PreCompact"), ("session-start", "SessionStart")], [&before, &after], json!({}), "cairn: archived ");
}
