//! `cairn claude-code`: the settings it installs and removes, and its hooks replayed on the
//! recorded Claude Code sessions with Claude Code's own compaction summaries.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};

use crate::support::shared;

fn cairn(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cairn")).args(args).env("CAIRN_LOG", "error").stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("running cairn");
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

/// A message the operator pinned with the `!pin` marker comes back verbatim after Claude
/// Code's own summary, first, ahead of everything else Cairn adds.
#[test]
#[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
fn a_pinned_message_is_reinjected_verbatim_after_claude_codes_summary() {
    const PINNED: &str = "!pin The staging database is read-only: run migrations against spotter-dev only.";
    let file = std::fs::read_dir(shared("claude-code")).unwrap().map(|e| e.unwrap().path()).find(|f| std::fs::read_to_string(f).unwrap().contains("\"compact_boundary\"")).unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    let session_id = file.file_name().unwrap().to_string_lossy().trim_start_matches("spotter__").trim_end_matches(".jsonl").to_string();
    let lines: Vec<&str> = text.lines().collect();
    let first_request = lines.iter().position(|l| l.contains("\"type\":\"user\"") || l.contains("\"type\": \"user\"")).unwrap();
    let pin = json!({"parentUuid": null, "isSidechain": false, "sessionId": session_id, "type": "user", "message": {"role": "user", "content": PINNED}, "uuid": "cairn-test-pin"});
    let mut pinned: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    pinned.insert(first_request + 1, pin.to_string());
    let pinned = pinned.join("\n") + "\n";
    let dir = tempfile::tempdir().unwrap();
    let transcript = dir.path().join(format!("{session_id}.jsonl"));
    let context = injected(&dir.path().join("home"), &session_id, &transcript, &before_compaction(&pinned), &pinned);
    let section = context.split("## Pinned (verbatim; kept through every compaction)\n").nth(1).unwrap_or_else(|| panic!("no pinned section in\n{context}"));
    assert!(section.starts_with(PINNED), "the pinned message comes first, verbatim:\n{context}");
    let pinned_at = context.find("## Pinned").unwrap();
    assert!(context.find("## Operator").is_none_or(|other| other > pinned_at), "pins come before the other sections");
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

/// `cairn ARGS` with HOME set (the user's settings and `~/.claude.json` live there), through a
/// shell that sets `umask` first; its stdout.
fn cairn_at(home: &Path, umask: &str, args: &[&str]) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("umask {umask} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_cairn"))
        .args(args)
        .env("HOME", home)
        // The warm cache: install compiles the plugins into it, not into this HOME.
        .env("CAIRN_CACHE_DIR", crate::support::shared_cache())
        .env("CAIRN_LOG", "error")
        .output()
        .unwrap();
    assert!(out.status.success(), "cairn {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

fn json_file(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Everything under `dir`, as relative paths, sorted.
fn tree(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()) {
            out.push(entry.strip_prefix(root).unwrap().display().to_string());
            if entry.is_dir() {
                walk(root, &entry, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// The server `cairn serve` must run as, for the hooks' home, policy and project: the MCP
/// line `install` prints names all three, absolute, and so do the hooks.
#[test]
fn install_names_the_hooks_home_policy_and_project_in_the_mcp_command() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("spotter");
    std::fs::create_dir(&project).unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "[lifecycle]\nreinject_budget_tokens = 2000\n").unwrap();
    // A relative home, as typed in a shell in `dir`.
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["claude-code", "install", "--project", "spotter", "--home", "cairn-home", "--policy", "policy.toml"])
        .current_dir(dir.path())
        .env("HOME", dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let root = dir.path().canonicalize().unwrap();
    let (home, policy, project) = (root.join("cairn-home"), root.join("policy.toml"), root.join("spotter"));
    let line = stdout.lines().find(|l| l.contains("claude mcp add")).unwrap_or_else(|| panic!("no MCP line in {stdout}"));
    let expected = format!("serve --expose recall --home {} --policy {} --project {}", home.display(), policy.display(), project.display());
    assert!(line.contains("--scope project cairn -- ") && line.ends_with(&expected), "{line}\nwants …{expected}");
    let settings = json_file(&dir.path().join("spotter/.claude/settings.json"));
    let hook = settings["hooks"]["PreCompact"][0]["hooks"][0]["command"].as_str().unwrap();
    assert!(hook.ends_with(&format!("claude-code pre-compact --home {} --policy {}", home.display(), policy.display())), "{hook}");
    // Nothing registered without --mcp.
    assert!(!project.join(".mcp.json").exists());
}

/// `--mcp` for a project: the server in `.mcp.json`, approved in the settings. Uninstall of a
/// project that had neither file leaves the project as it was: no file, no `.claude/`.
#[test]
fn install_mcp_registers_the_server_for_the_project_and_uninstall_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("spotter");
    std::fs::create_dir(&project).unwrap();
    std::fs::write(project.join("README.md"), "spotter\n").unwrap();
    let (p, home) = (project.to_str().unwrap(), dir.path().join("cairn-home"));
    let said = cairn_at(dir.path(), "022", &["claude-code", "install", "--project", p, "--home", home.to_str().unwrap(), "--mcp"]);
    assert!(said.contains("Registered Cairn's MCP server"), "{said}");

    let mcp = json_file(&project.join(".mcp.json"));
    let server = &mcp["mcpServers"]["cairn"];
    assert_eq!(server["type"], "stdio");
    assert_eq!(Path::new(server["command"].as_str().unwrap()), Path::new(env!("CARGO_BIN_EXE_cairn")).canonicalize().unwrap());
    let canonical = project.canonicalize().unwrap();
    assert_eq!(server["args"], json!(["serve", "--expose", "recall", "--home", home.to_str().unwrap(), "--project", canonical.to_str().unwrap()]));
    let settings = json_file(&project.join(".claude/settings.json"));
    assert_eq!(settings["enabledMcpjsonServers"], json!(["cairn"]), "approved, so Claude Code does not ask");
    assert_eq!(mode(&project.join(".mcp.json")), 0o644);
    assert_eq!(mode(&project.join(".claude/settings.json")), 0o644);

    // Again: nothing changes.
    let (mcp_text, settings_text) = (std::fs::read_to_string(project.join(".mcp.json")).unwrap(), std::fs::read_to_string(project.join(".claude/settings.json")).unwrap());
    let again = cairn_at(dir.path(), "022", &["claude-code", "install", "--project", p, "--home", home.to_str().unwrap(), "--mcp"]);
    assert!(again.contains("hooks are already in") && again.contains("MCP server is already registered"), "{again}");
    assert_eq!(std::fs::read_to_string(project.join(".mcp.json")).unwrap(), mcp_text);
    assert_eq!(std::fs::read_to_string(project.join(".claude/settings.json")).unwrap(), settings_text);

    cairn_at(dir.path(), "022", &["claude-code", "uninstall", "--project", p]);
    assert_eq!(tree(&project), ["README.md"], "uninstall removes the files and the folder install created");

    // Hooks alone, the same.
    cairn_at(dir.path(), "022", &["claude-code", "install", "--project", p]);
    assert_eq!(tree(&project), [".claude", ".claude/settings.json", "README.md"]);
    cairn_at(dir.path(), "022", &["claude-code", "uninstall", "--project", p]);
    assert_eq!(tree(&project), ["README.md"]);
}

/// Files that were there keep their bytes and the other entries of theirs: the user's own MCP
/// servers and approvals, a `.claude/` with more in it.
#[test]
fn uninstall_mcp_restores_the_projects_own_files_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("spotter");
    std::fs::create_dir_all(project.join(".claude")).unwrap();
    let mcp = "{\n  \"mcpServers\": {\n    \"github\": {\n      \"type\": \"http\",\n      \"url\": \"https://api.example.com/mcp\"\n    }\n  }\n}\n";
    std::fs::write(project.join(".mcp.json"), mcp).unwrap();
    std::fs::write(project.join(".claude/settings.json"), SETTINGS).unwrap();
    let local = "{\n  \"enabledMcpjsonServers\": [\n    \"github\"\n  ]\n}\n";
    std::fs::write(project.join(".claude/settings.local.json"), local).unwrap();
    let p = project.to_str().unwrap();

    cairn_at(dir.path(), "022", &["claude-code", "install", "--project", p, "--mcp"]);
    assert_eq!(json_file(&project.join(".mcp.json"))["mcpServers"].as_object().unwrap().keys().collect::<Vec<_>>(), ["github", "cairn"]);
    cairn_at(dir.path(), "022", &["claude-code", "uninstall", "--project", p]);
    assert_eq!(std::fs::read_to_string(project.join(".mcp.json")).unwrap(), mcp);
    assert_eq!(std::fs::read_to_string(project.join(".claude/settings.json")).unwrap(), SETTINGS);

    // The local settings file of the same project: approved there, the server in `.mcp.json`.
    let file = project.join(".claude/settings.local.json");
    cairn_at(dir.path(), "022", &["claude-code", "install", "--settings", file.to_str().unwrap(), "--mcp"]);
    assert_eq!(json_file(&file)["enabledMcpjsonServers"], json!(["github", "cairn"]));
    assert!(json_file(&project.join(".mcp.json"))["mcpServers"]["cairn"].is_object());
    cairn_at(dir.path(), "022", &["claude-code", "uninstall", "--settings", file.to_str().unwrap()]);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), local);
    assert_eq!(std::fs::read_to_string(project.join(".mcp.json")).unwrap(), mcp);

    // Someone else's server named `cairn` is left alone, and install says so.
    let theirs = "{\n  \"mcpServers\": {\n    \"cairn\": {\n      \"command\": \"npx\",\n      \"args\": [\n        \"cairn-mcp\"\n      ]\n    }\n  }\n}\n";
    std::fs::write(project.join(".mcp.json"), theirs).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cairn")).args(["claude-code", "install", "--project", p, "--mcp"]).env("HOME", dir.path()).output().unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("not Cairn's"), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_to_string(project.join(".mcp.json")).unwrap(), theirs);
    assert_eq!(std::fs::read_to_string(project.join(".claude/settings.json")).unwrap(), SETTINGS, "nothing written when refused");
}

/// `--mcp` for the user: `~/.claude.json`'s `mcpServers` (user scope, no approval), with
/// Claude Code's own 0600 and everything else in it kept.
#[test]
fn install_mcp_for_the_user_registers_the_server_in_claude_json() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    cairn_at(home, "022", &["claude-code", "install", "--mcp"]);
    let config = home.join(".claude.json");
    assert_eq!(json_file(&config)["mcpServers"]["cairn"]["args"], json!(["serve", "--expose", "recall"]), "the project comes from CLAUDE_PROJECT_DIR");
    assert_eq!(mode(&config), 0o600, "Claude Code's own mode for a file that holds its state");
    cairn_at(home, "022", &["claude-code", "uninstall"]);
    assert_eq!(tree(home), Vec::<String>::new(), "nothing left in a HOME that had nothing");

    // A `~/.claude.json` Claude Code wrote: kept byte for byte, and its mode.
    let state = "{\n  \"numStartups\": 3,\n  \"projects\": {\n    \"/work/spotter\": {\n      \"allowedTools\": []\n    }\n  },\n  \"userID\": \"abc\"\n}\n";
    std::fs::write(&config, state).unwrap();
    std::fs::set_permissions(&config, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    cairn_at(home, "022", &["claude-code", "install", "--mcp"]);
    assert_eq!(json_file(&config)["numStartups"], 3);
    assert_eq!(mode(&config), 0o600);
    cairn_at(home, "022", &["claude-code", "uninstall"]);
    assert_eq!(std::fs::read_to_string(&config).unwrap(), state);
    assert_eq!(mode(&config), 0o600);
    assert_eq!(tree(home), [".claude.json"]);

    // A settings file outside any project: no place to register the server.
    let out = Command::new(env!("CARGO_BIN_EXE_cairn")).args(["claude-code", "install", "--settings", home.join("x.json").to_str().unwrap(), "--mcp"]).env("HOME", home).output().unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("--project"), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!home.join("x.json").exists());
}

/// The atomic replace keeps a file's permissions (it used to leave 0600, the temporary file's);
/// a new file gets a normal file's: 0666 less the umask.
#[test]
fn install_and_uninstall_keep_the_settings_files_permissions() {
    let dir = tempfile::tempdir().unwrap();
    for existing in [0o644, 0o640, 0o664] {
        let path = dir.path().join(format!("settings-{existing:o}.json"));
        std::fs::write(&path, SETTINGS).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(existing)).unwrap();
        cairn_at(dir.path(), "077", &["claude-code", "install", "--settings", path.to_str().unwrap()]);
        assert_eq!(mode(&path), existing, "install kept {existing:o}");
        cairn_at(dir.path(), "077", &["claude-code", "uninstall", "--settings", path.to_str().unwrap()]);
        assert_eq!(mode(&path), existing, "uninstall kept {existing:o}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), SETTINGS);
    }
    for (umask, expected) in [("022", 0o644), ("002", 0o664), ("077", 0o600)] {
        let path = dir.path().join(format!("new-{umask}/settings.json"));
        cairn_at(dir.path(), umask, &["claude-code", "install", "--settings", path.to_str().unwrap()]);
        assert_eq!(mode(&path), expected, "a new file under umask {umask}");
    }
}
