//! `cairn claude-code`: the settings it installs and removes, and its hooks replayed on the
//! recorded Claude Code sessions with Claude Code's own compaction summaries.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};

use crate::support::shared;

fn cairn(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(args)
        .env("CAIRN_LOG", "error")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running cairn");
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "cairn {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out
}

/// Settings as Claude Code writes them (two-space JSON, a final newline), with hooks of the
/// user's own on the same events.
const SETTINGS: &str = r#"{
  "permissions": {
    "allow": [
      "Bash(npm run lint)"
    ]
  },
  "hooks": {
    "SessionStart": [
      {
        "matcher": "startup",
        "hooks": [
          {
            "type": "command",
            "command": "bd prime"
          }
        ]
      }
    ],
    "PreCompact": [
      {
        "matcher": "auto",
        "hooks": [
          {
            "type": "command",
            "command": "~/.claude/hooks/backup.sh",
            "timeout": 30
          }
        ]
      }
    ],
    "Stop": []
  },
  "model": "opus",
  "env": {
    "ZED": "1",
    "ALPHA": "2"
  }
}
"#;

#[test]
fn install_then_uninstall_leaves_the_settings_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("settings.json");
    std::fs::write(&path, SETTINGS).unwrap();
    let file = path.to_str().unwrap();

    cairn(&["claude-code", "install", "--settings", file], "");
    let installed: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let commands = |event: &str| -> Vec<String> {
        installed["hooks"][event].as_array().unwrap().iter().flat_map(|g| g["hooks"].as_array().unwrap()).map(|h| h["command"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(commands("PreCompact").len(), 2, "the user's hook stays beside Cairn's");
    assert!(commands("PreCompact")[1].ends_with("claude-code pre-compact"));
    let session_start = installed["hooks"]["SessionStart"].as_array().unwrap();
    assert_eq!(session_start[1]["matcher"], "compact", "Cairn injects only after a compaction");
    assert!(commands("SessionStart")[1].ends_with("claude-code session-start"));
    assert_eq!(installed["permissions"], json!({"allow": ["Bash(npm run lint)"]}));

    // A second install changes nothing.
    let once = std::fs::read_to_string(&path).unwrap();
    cairn(&["claude-code", "install", "--settings", file], "");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), once);

    cairn(&["claude-code", "uninstall", "--settings", file], "");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), SETTINGS, "uninstall restores the file byte for byte");
}

#[test]
fn a_broken_settings_file_is_refused_with_its_line_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("settings.json");
    let broken = "{\n  \"hooks\": {\n    \"PreCompact\": [,]\n  }\n}\n";
    std::fs::write(&path, broken).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cairn")).args(["claude-code", "install", "--settings", path.to_str().unwrap()]).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("{}:3:", path.display())), "{stderr}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), broken);
}

/// Rules an operator gives early; Claude Code's real summaries never saw them.
const RULES: [&str; 2] = ["Never edit files in /config.", "Do not push to main without asking me first."];

/// `text` with the operator's rules added after the first operator message.
fn with_rules(text: &str, session_id: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let first_request = lines.iter().position(|l| l.contains("\"type\":\"user\"") || l.contains("\"type\": \"user\"")).unwrap();
    let rule = json!({"parentUuid": null, "isSidechain": false, "sessionId": session_id, "type": "user",
        "message": {"role": "user", "content": RULES.join(" ")}, "uuid": "cairn-test-rule"});
    let mut out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    out.insert(first_request + 1, rule.to_string());
    out.join("\n") + "\n"
}

/// The lines before the last `compact_boundary`: the transcript `PreCompact` saw.
fn before_compaction(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let boundary = lines.iter().rposition(|l| l.contains("\"compact_boundary\"")).unwrap();
    lines[..boundary].join("\n") + "\n"
}

/// Replays both hooks on one transcript file, as Claude Code does: first as it stood before
/// the compaction, then with the compaction written.
fn injected(home: &Path, session_id: &str, transcript: &Path, before: &str, after: &str) -> String {
    injected_with(home, &[], session_id, transcript, before, after)
}

/// [`injected`] with more arguments for both hooks (a policy).
fn injected_with(home: &Path, extra: &[&str], session_id: &str, transcript: &Path, before: &str, after: &str) -> String {
    let home = home.to_str().unwrap();
    let payload = |event: &str| json!({"session_id": session_id, "transcript_path": transcript, "cwd": "/work/spotter", "hook_event_name": event, "trigger": "auto", "source": "compact"}).to_string();
    std::fs::write(transcript, before).unwrap();
    cairn(&[&["claude-code", "pre-compact", "--home", home], extra].concat(), &payload("PreCompact"));
    std::fs::write(transcript, after).unwrap();
    let out = cairn(&[&["claude-code", "session-start", "--home", home], extra].concat(), &payload("SessionStart"));
    let output: Value = serde_json::from_slice(&out.stdout).expect("SessionStart prints JSON");
    assert_eq!(output["hookSpecificOutput"]["hookEventName"], "SessionStart");
    output["hookSpecificOutput"]["additionalContext"].as_str().unwrap().to_string()
}

/// The real sessions, replayed: `PreCompact` gets the transcript as it stood before Claude
/// Code compacted, `SessionStart` the transcript with Claude Code's own summary.
#[test]
#[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
fn the_hooks_inject_what_claude_codes_own_summary_left_out() {
    let mut sessions = 0;
    for file in std::fs::read_dir(shared("claude-code")).unwrap().map(|e| e.unwrap().path()) {
        let text = std::fs::read_to_string(&file).unwrap();
        if !text.contains("\"compact_boundary\"") {
            continue;
        }
        sessions += 1;
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        let session_id = name.trim_start_matches("spotter__").trim_end_matches(".jsonl").to_string();
        let summary = text.lines().find(|l| l.contains("\"isCompactSummary\"")).unwrap();
        let dir = tempfile::tempdir().unwrap();

        // As recorded: whatever the summary left out is added, within Claude Code's limit.
        let transcript = dir.path().join(format!("{session_id}.jsonl"));
        let context = injected(&dir.path().join("home"), &session_id, &transcript, &before_compaction(&text), &text);
        assert!(context.chars().count() <= 10_000, "{name}: {} characters", context.chars().count());
        assert!(context.contains("session_history"), "{name}: says how to recall the rest");
        let constraints = context.split("## Operator constraints").nth(1).map_or(0, |s| s.split("\n## ").next().unwrap().lines().filter(|l| l.starts_with("- ")).count());
        let dropped = |heading: &str| context.split(heading).nth(1).map_or(0, |s| s.split("\n## ").next().unwrap().lines().filter(|l| l.starts_with("- ")).count());
        eprintln!(
            "{name}: {constraints} operator constraints recorded; not in Claude Code's summary: {} operator messages, {} failing checks, {} changed files, {} identifiers",
            dropped("## Operator messages the summary leaves out"),
            dropped("## Failing checks the summary does not mention"),
            dropped("## Files changed that the summary does not name"),
            dropped("## Identifiers the summary does not keep"),
        );
        // Nothing the summary already names is repeated as dropped.
        for line in context.split("## Identifiers the summary does not keep").nth(1).unwrap_or("").split("\n## ").next().unwrap().lines() {
            if let Some(uri) = line.strip_prefix("- ").filter(|u| u.contains("://")) {
                assert!(!summary.contains(uri), "{name}: {uri} is in the summary yet reported dropped");
            }
        }

        // With operator rules the summary never saw: each comes back verbatim.
        let ruled = with_rules(&text, &session_id);
        let context = injected(&dir.path().join("home-ruled"), &session_id, &transcript, &before_compaction(&ruled), &ruled);
        for rule in RULES {
            assert!(!summary.contains(rule));
            assert!(context.contains(&format!("- {rule}")), "{name}: rule {rule:?} missing from\n{context}");
        }
        assert!(context.chars().count() <= 10_000);

        // A second compaction whose summary drops the rules again: they still come back.
        let again = format!(
            "{ruled}{}\n{}\n",
            json!({"parentUuid": null, "isSidechain": false, "sessionId": session_id, "type": "system", "subtype": "compact_boundary", "content": "Conversation compacted", "uuid": "cairn-test-b2"}),
            json!({"parentUuid": "cairn-test-b2", "isSidechain": false, "sessionId": session_id, "type": "user", "isCompactSummary": true, "message": {"role": "user", "content": "Summary: the work continues."}, "uuid": "cairn-test-s2"}),
        );
        let context = injected(&dir.path().join("home-ruled"), &session_id, &transcript, &ruled, &again);
        for rule in RULES {
            assert!(context.contains(&format!("- {rule}")), "{name}: after a second compaction, rule {rule:?} missing from\n{context}");
        }
    }
    assert_eq!(sessions, 3, "the recorded sessions with a compaction");
}

/// What Cairn re-injects keeps to the policy's re-injection budget, most important first: the
/// operator's rules and the way to recall the rest stay when the budget is small.
#[test]
#[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
fn session_start_keeps_to_the_policys_reinjection_budget() {
    let file = std::fs::read_dir(shared("claude-code")).unwrap().map(|e| e.unwrap().path()).find(|f| std::fs::read_to_string(f).unwrap().contains("\"compact_boundary\"")).unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    let session_id = file.file_name().unwrap().to_string_lossy().trim_start_matches("spotter__").trim_end_matches(".jsonl").to_string();
    let ruled = with_rules(&text, &session_id);
    let dir = tempfile::tempdir().unwrap();
    let transcript = dir.path().join(format!("{session_id}.jsonl"));
    let tokenizer = cairn::tokenizer::Tokenizer::default();
    let full = injected(&dir.path().join("home"), &session_id, &transcript, &before_compaction(&ruled), &ruled);
    let policy = dir.path().join("small.toml");
    std::fs::write(&policy, format!("{}reinject_budget_tokens = 400\n", cairn::policy::DEFAULT_POLICY)).unwrap();
    let small = injected_with(&dir.path().join("home-small"), &["--policy", policy.to_str().unwrap()], &session_id, &transcript, &before_compaction(&ruled), &ruled);
    let (full_tokens, small_tokens) = (tokenizer.count(&full), tokenizer.count(&small));
    assert!(full_tokens > 400, "the default budget lets the whole context through ({full_tokens} tokens)");
    assert!(small_tokens <= 400, "{small_tokens} tokens:\n{small}");
    for rule in RULES {
        assert!(small.contains(&format!("- {rule}")), "the rules come first: {rule:?} missing from\n{small}");
    }
    assert!(small.contains("session_history"), "and how to recall the rest:\n{small}");
}

#[test]
fn installing_with_a_policy_checks_it_and_names_it_in_both_hooks() {
    let dir = tempfile::tempdir().unwrap();
    let settings = dir.path().join("settings.json");
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "[lifecycle]\nreinject_budget_tokens = 2000\n").unwrap();
    cairn(&["claude-code", "install", "--settings", settings.to_str().unwrap(), "--policy", policy.to_str().unwrap()], "");
    let installed: Value = serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    for (event, verb) in [("PreCompact", "pre-compact"), ("SessionStart", "session-start")] {
        let command = installed["hooks"][event][0]["hooks"][0]["command"].as_str().unwrap();
        assert!(command.contains(&format!("claude-code {verb} --policy {}", policy.canonicalize().unwrap().display())), "{command}");
    }
    // A broken policy is refused with its line, and the settings are left alone.
    let broken = dir.path().join("broken.toml");
    std::fs::write(&broken, "[lifecycle]\nreinject_budget = 2000\n").unwrap();
    let before = std::fs::read_to_string(&settings).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cairn")).args(["claude-code", "install", "--settings", settings.to_str().unwrap(), "--policy", broken.to_str().unwrap()]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("broken.toml:2:1"), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), before);
}

#[test]
fn session_start_without_a_record_or_after_a_plain_start_adds_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let payload = |source: &str| json!({"session_id": "s-1", "transcript_path": dir.path().join("none.jsonl"), "hook_event_name": "SessionStart", "source": source}).to_string();
    for source in ["compact", "startup"] {
        let out = cairn(&["claude-code", "session-start", "--home", home.to_str().unwrap()], &payload(source));
        assert!(out.stdout.is_empty(), "{source}: {}", String::from_utf8_lossy(&out.stdout));
    }
}
