//! `cairn gemini`: the settings it installs and removes, and its hooks replayed on session files
//! shaped as Gemini CLI 0.61.0 writes them (the conformance suite runs the real binary).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};

/// `cairn ARGS` with HOME (Gemini CLI's settings live there) and stdin; asserts success.
fn cairn(home: &Path, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(args)
        .env("HOME", home)
        // The warm cache: install compiles the plugins into it, not into this HOME.
        .env("CAIRN_CACHE_DIR", crate::support::shared_cache())
        .env_remove("GEMINI_CLI_HOME")
        .env_remove("GEMINI_PROJECT_DIR")
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

fn failing(home: &Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_cairn")).args(args).env("HOME", home).env_remove("GEMINI_CLI_HOME").output().unwrap();
    assert!(!out.status.success(), "cairn {args:?} should fail");
    String::from_utf8_lossy(&out.stderr).into_owned()
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

/// Settings as Gemini CLI writes them (two-space JSON), with a hook and an MCP server of the
/// user's own.
const SETTINGS: &str = r#"{
  "security": {
    "auth": {
      "selectedType": "gemini-api-key"
    }
  },
  "hooks": {
    "BeforeAgent": [
      {
        "matcher": "*",
        "hooks": [
          {
            "type": "command",
            "command": "~/.gemini/hooks/prime.sh",
            "timeout": 30000
          }
        ]
      }
    ],
    "AfterTool": []
  },
  "mcpServers": {
    "github": {
      "httpUrl": "https://api.example.com/mcp"
    }
  },
  "model": {
    "name": "gemini-2.5-pro"
  }
}
"#;

#[test]
fn install_then_uninstall_leaves_gemini_settings_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("settings.json");
    std::fs::write(&path, SETTINGS).unwrap();
    let file = path.to_str().unwrap();
    let home = dir.path().join("cairn-home");

    cairn(dir.path(), &["gemini", "install", "--settings", file, "--home", home.to_str().unwrap()], "");
    let installed = json_file(&path);
    let commands = |event: &str| -> Vec<String> {
        installed["hooks"][event].as_array().unwrap().iter().flat_map(|g| g["hooks"].as_array().unwrap()).map(|h| h["command"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(commands("BeforeAgent").len(), 2, "the user's hook stays beside Cairn's");
    assert!(commands("BeforeAgent")[1].ends_with(&format!("gemini before-agent --home {}", home.display())), "{:?}", commands("BeforeAgent"));
    assert!(commands("PreCompress")[0].ends_with(&format!("gemini pre-compress --home {}", home.display())));
    let server = &installed["mcpServers"]["cairn"];
    assert_eq!(Path::new(server["command"].as_str().unwrap()), Path::new(env!("CARGO_BIN_EXE_cairn")).canonicalize().unwrap());
    assert_eq!(server["args"], json!(["serve", "--expose", "recall", "--home", home.to_str().unwrap()]), "a settings file in no project: serve takes Gemini CLI's folder");
    assert_eq!(server["trust"], true, "headless Gemini CLI cannot ask before a call");
    assert_eq!(installed["mcpServers"].as_object().unwrap().keys().collect::<Vec<_>>(), ["github", "cairn"]);

    // A second install changes nothing.
    let once = std::fs::read_to_string(&path).unwrap();
    let said = String::from_utf8(cairn(dir.path(), &["gemini", "install", "--settings", file, "--home", home.to_str().unwrap()], "").stdout).unwrap();
    assert!(said.contains("already"), "{said}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), once);

    cairn(dir.path(), &["gemini", "uninstall", "--settings", file], "");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), SETTINGS, "uninstall restores the file byte for byte");
}

/// `--project`: `.gemini/settings.json` created with the server on the project's
/// conversation; uninstall leaves the project as it was, no file, no `.gemini/`.
#[test]
fn install_for_a_project_then_uninstall_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("spotter");
    std::fs::create_dir(&project).unwrap();
    std::fs::write(project.join("README.md"), "spotter\n").unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "[lifecycle]\nreinject_budget_tokens = 2000\n").unwrap();
    let p = project.to_str().unwrap();
    cairn(dir.path(), &["gemini", "install", "--project", p, "--policy", policy.to_str().unwrap()], "");
    let settings = json_file(&project.join(".gemini/settings.json"));
    let policy = policy.canonicalize().unwrap();
    let canonical = project.canonicalize().unwrap();
    assert_eq!(settings["mcpServers"]["cairn"]["args"], json!(["serve", "--expose", "recall", "--policy", policy.to_str().unwrap(), "--project", canonical.to_str().unwrap()]));
    for (event, verb) in [("PreCompress", "pre-compress"), ("BeforeAgent", "before-agent")] {
        let hook = &settings["hooks"][event][0];
        assert_eq!(hook["matcher"], "*");
        assert!(hook["hooks"][0]["command"].as_str().unwrap().ends_with(&format!("gemini {verb} --policy {}", policy.display())), "{hook}");
    }
    assert!(!dir.path().join(".gemini").exists(), "the user's settings are left alone");
    cairn(dir.path(), &["gemini", "uninstall", "--project", p], "");
    assert_eq!(tree(&project), ["README.md"]);
}

/// Without a target: the user's `~/.gemini/settings.json`, its other entries kept.
#[test]
fn install_for_the_user_keeps_their_settings() {
    let dir = tempfile::tempdir().unwrap();
    let user = dir.path().join(".gemini/settings.json");
    std::fs::create_dir_all(user.parent().unwrap()).unwrap();
    std::fs::write(&user, SETTINGS).unwrap();
    cairn(dir.path(), &["gemini", "install"], "");
    assert_eq!(json_file(&user)["security"]["auth"]["selectedType"], "gemini-api-key");
    assert!(json_file(&user)["mcpServers"]["cairn"].is_object());
    cairn(dir.path(), &["gemini", "uninstall"], "");
    assert_eq!(std::fs::read_to_string(&user).unwrap(), SETTINGS);
    assert_eq!(tree(dir.path()), [".gemini", ".gemini/settings.json"]);
}

/// Refusals name the file and line, and leave everything as it was: a settings file Cairn
/// cannot write back as it was (comments), someone else's `cairn` server, a broken policy.
#[test]
fn install_refuses_what_it_cannot_undo_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("settings.json");
    let commented = "{\n  // mine\n  \"model\": {}\n}\n";
    std::fs::write(&path, commented).unwrap();
    let error = failing(dir.path(), &["gemini", "install", "--settings", path.to_str().unwrap()]);
    assert!(error.contains(&format!("{}:2:", path.display())), "{error}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), commented);

    let theirs = "{\n  \"mcpServers\": {\n    \"cairn\": {\n      \"command\": \"npx\",\n      \"args\": [\n        \"cairn-mcp\"\n      ]\n    }\n  }\n}\n";
    std::fs::write(&path, theirs).unwrap();
    let error = failing(dir.path(), &["gemini", "install", "--settings", path.to_str().unwrap()]);
    assert!(error.contains("not Cairn's"), "{error}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), theirs);
    // Uninstall leaves it too.
    cairn(dir.path(), &["gemini", "uninstall", "--settings", path.to_str().unwrap()], "");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), theirs);

    let broken = dir.path().join("broken.toml");
    std::fs::write(&broken, "[lifecycle]\nreinject_budget = 2000\n").unwrap();
    let fresh = dir.path().join("fresh.json");
    let error = failing(dir.path(), &["gemini", "install", "--settings", fresh.to_str().unwrap(), "--policy", broken.to_str().unwrap()]);
    assert!(error.contains("broken.toml:2:1"), "{error}");
    assert!(!fresh.exists());
}

/// The operator's rule, in the first prompt of the replayed session.
const RULE: &str = "Never edit files under vendor/; the deploy key is KEY-7f3a9c.";

/// A session file as Gemini CLI 0.61.0 writes it (records seen live): the metadata, the
/// history set at the start, the prompt, and a response reporting `prompt_tokens`.
fn session_before(prompt_tokens: u64) -> String {
    [
        json!({"sessionId": "9d4e8011", "projectHash": "dec139b8", "startTime": "2026-12-01T18:44:54.498Z", "lastUpdated": "2026-12-01T18:44:54.498Z", "kind": "main"}),
        json!({"$set": {"messages": [{"id": "ctx", "timestamp": "t", "type": "user", "content": [{"text": "<session_context>\nThis is the Gemini CLI.\n</session_context>"}]}], "lastUpdated": "t"}}),
        json!({"id": "p1", "timestamp": "t", "type": "user", "content": [{"text": format!("{RULE} Read notes.txt.")}]}),
        json!({"id": "g1", "timestamp": "t", "type": "gemini", "content": "", "tokens": {"input": prompt_tokens, "output": 5, "cached": 0, "thoughts": 0, "tool": 0, "total": prompt_tokens + 5}, "model": "gemini-2.5-pro",
               "toolCalls": [{"id": "read_file__1", "name": "read_file", "args": {"file_path": "notes.txt"}, "status": "success",
                              "result": [{"functionResponse": {"id": "read_file__1", "name": "read_file", "response": {"output": "the build runs with make"}}}]}]}),
        json!({"id": "r1", "timestamp": "t", "type": "user", "content": [{"functionResponse": {"id": "read_file__1", "name": "read_file", "response": {"output": "the build runs with make"}}}]}),
    ]
    .iter()
    .map(|v| format!("{v}\n"))
    .collect()
}

/// The same file after Gemini CLI compressed it: the history set again, its snapshot first.
fn session_after(before: &str) -> String {
    let compressed = json!({"$set": {"messages": [
        {"id": "ctx", "timestamp": "t", "type": "user", "content": [{"text": "<session_context>\nThis is the Gemini CLI.\n</session_context>"}]},
        {"id": "s1", "timestamp": "t", "type": "user", "content": [{"text": "<state_snapshot>The notes were read: the build runs with make.</state_snapshot>"}]},
        {"id": "s2", "timestamp": "t", "type": "gemini", "content": [{"text": "Got it. Thanks for the additional context!"}]},
    ], "lastUpdated": "t"}});
    format!("{before}{}\n{compressed}\n", json!({"$set": {"sessionId": "9d4e8011"}}))
}

fn payload(event: &str, transcript: &Path, cwd: &Path, extra: Value) -> String {
    let mut payload = json!({"session_id": "9d4e8011", "transcript_path": transcript, "cwd": cwd, "hook_event_name": event, "timestamp": "2026-12-01T18:45:04.582Z"});
    payload.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    payload.to_string()
}

fn archives(user: &Path, home: &Path) -> usize {
    // A pre-compress that archives nothing leaves no home behind (reads do not create one).
    if !home.exists() {
        return 0;
    }
    let out = cairn(user, &["history", "--home", home.to_str().unwrap(), "--conversation", "spotter", "--json", "summary"], "");
    let text = serde_json::from_slice::<Value>(&out.stdout).unwrap()["text"].as_str().unwrap().to_string();
    if text.starts_with("Nothing") {
        0
    } else {
        text.split_whitespace().next().unwrap().parse().unwrap()
    }
}

/// PreCompress fires before every turn of the model: `pre-compress` archives only when Gemini
/// CLI's own test (last prompt tokens ≥ threshold × 1,048,576) says a compression follows, or
/// on a manual /compress; it reads the threshold from the user's and the project's settings.
#[test]
fn pre_compress_archives_only_before_a_real_compression() {
    let dir = tempfile::tempdir().unwrap();
    let (user, project, home) = (dir.path().join("user"), dir.path().join("spotter"), dir.path().join("cairn"));
    std::fs::create_dir_all(user.join(".gemini")).unwrap();
    std::fs::create_dir_all(project.join(".gemini")).unwrap();
    let transcript = dir.path().join("session.jsonl");
    let pre_compress = |trigger: &str| {
        let out = cairn(&user, &["gemini", "pre-compress", "--home", home.to_str().unwrap()], &payload("PreCompress", &transcript, &project, json!({"trigger": trigger})));
        assert!(out.stdout.is_empty(), "PreCompress's answer is ignored: nothing to print");
    };

    // 300,000 tokens: under the default threshold (0.5 → 524,288).
    std::fs::write(&transcript, session_before(300_000)).unwrap();
    pre_compress("auto");
    assert_eq!(archives(&user, &home), 0);
    // The user's threshold 0.2 (→ 209,715; comments allowed, as Gemini CLI allows them).
    std::fs::write(user.join(".gemini/settings.json"), "{\n  // compress early\n  \"model\": {\"compressionThreshold\": 0.2}\n}\n").unwrap();
    pre_compress("auto");
    assert_eq!(archives(&user, &home), 1);
    // The project's settings win over the user's: 0.4 → 419,430.
    std::fs::write(project.join(".gemini/settings.json"), r#"{"model": {"compressionThreshold": 0.4}}"#).unwrap();
    pre_compress("auto");
    assert_eq!(archives(&user, &home), 1);
    // A manual /compress always compresses.
    pre_compress("manual");
    assert_eq!(archives(&user, &home), 2);
    // Once compressed (or resumed), the count is Gemini CLI's estimate of the new history.
    std::fs::write(&transcript, session_after(&session_before(900_000))).unwrap();
    pre_compress("auto");
    assert_eq!(archives(&user, &home), 2);
}

/// After the compression, `before-agent` adds the rule the snapshot left out, with the first
/// prompt; once Gemini CLI recorded it (inside that prompt), not again.
#[test]
fn before_agent_adds_what_the_snapshot_left_out_once_per_compression() {
    let dir = tempfile::tempdir().unwrap();
    let (user, project, home) = (dir.path().join("user"), dir.path().join("spotter"), dir.path().join("cairn"));
    std::fs::create_dir_all(&user).unwrap();
    std::fs::create_dir_all(&project).unwrap();
    let transcript = dir.path().join("session.jsonl");
    let home_arg = home.to_str().unwrap();
    let before_agent = || {
        let out = cairn(&user, &["gemini", "before-agent", "--home", home_arg], &payload("BeforeAgent", &transcript, &project, json!({"prompt": "Next step, please."})));
        String::from_utf8(out.stdout).unwrap()
    };

    // Requests of the operator's the snapshot does not mention: more than a small budget holds.
    let requests: String = (0..20)
        .map(|i| format!("{}\n", json!({"id": format!("q{i}"), "timestamp": "t", "type": "user", "content": [{"text": format!("Also check module_{i} of the spotter build and report its size.")}]})))
        .collect();
    let before = format!("{}{requests}", session_before(900_000));
    std::fs::write(&transcript, &before).unwrap();
    assert_eq!(before_agent(), "", "no record yet");
    cairn(&user, &["gemini", "pre-compress", "--home", home_arg], &payload("PreCompress", &transcript, &project, json!({"trigger": "auto"})));
    assert_eq!(archives(&user, &home), 1);
    assert_eq!(before_agent(), "", "archived, but Gemini CLI has not compressed yet");

    std::fs::write(&transcript, session_after(&before)).unwrap();
    let output: Value = serde_json::from_str(&before_agent()).expect("BeforeAgent prints JSON");
    assert_eq!(output["hookSpecificOutput"]["hookEventName"], "BeforeAgent");
    let context = output["hookSpecificOutput"]["additionalContext"].as_str().unwrap().to_string();
    assert!(context.contains(&format!("- {RULE}")), "{context}");
    assert!(context.contains("before Gemini CLI compressed it") && context.contains("session_history"), "{context}");
    assert!(!context.contains("Claude Code"), "{context}");
    // Within the policy's re-injection budget, the rule first.
    let policy = dir.path().join("small.toml");
    std::fs::write(&policy, "[lifecycle]\nreinject_budget_tokens = 300\n").unwrap();
    let out =
        cairn(&user, &["gemini", "before-agent", "--home", home_arg, "--policy", policy.to_str().unwrap()], &payload("BeforeAgent", &transcript, &project, json!({"prompt": "Next step, please."})));
    let small: Value = serde_json::from_slice(&out.stdout).unwrap();
    let small = small["hookSpecificOutput"]["additionalContext"].as_str().unwrap();
    let tokens = cairn::tokenizer::Tokenizer::default().count(small);
    assert!(tokens <= 300 && small.contains(RULE), "{tokens} tokens:\n{small}");
    assert!(small.contains("more in the archive") && cairn::tokenizer::Tokenizer::default().count(&context) > 300, "the default budget lets more through:\n{context}");

    // Gemini CLI records the prompt with the context as a part of its own (`<`, `>` escaped).
    let recorded = json!({"id": "p2", "timestamp": "t", "type": "user",
        "content": [{"text": "Next step, please."}, {"text": format!("<hook_context>{}</hook_context>", context.replace('<', "&lt;").replace('>', "&gt;"))}],
        "displayContent": [{"text": "Next step, please."}]});
    std::fs::write(&transcript, format!("{}{recorded}\n", session_after(&before))).unwrap();
    assert_eq!(before_agent(), "", "added once per compression");

    // Archived again (a /compress Gemini CLI then did not keep, or a compression it gave up):
    // no new snapshot, so nothing was dropped and nothing is added.
    cairn(&user, &["gemini", "pre-compress", "--home", home_arg], &payload("PreCompress", &transcript, &project, json!({"trigger": "manual"})));
    assert_eq!(archives(&user, &home), 2);
    assert_eq!(before_agent(), "", "no compression since the last archive");
}

/// A hook that fails exits 1 (Gemini CLI warns and goes on) and is recorded under `gemini`; the
/// next `before-agent` tells the model and the user, once.
#[test]
fn a_failed_pre_compress_is_told_by_the_next_before_agent() {
    let dir = tempfile::tempdir().unwrap();
    let (user, project, home) = (dir.path().join("user"), dir.path().join("spotter"), dir.path().join("cairn"));
    std::fs::create_dir_all(&user).unwrap();
    std::fs::create_dir_all(&project).unwrap();
    let transcript = dir.path().join("session.jsonl");
    std::fs::write(&transcript, "{\"sessionId\": \"9d4e8011\", \"projectHash\": \"dec139b8\"}\n{torn\n").unwrap();
    let home_arg = home.to_str().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["gemini", "pre-compress", "--home", home_arg])
        .env("HOME", &user)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(payload("PreCompress", &transcript, &project, json!({"trigger": "manual"})).as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "a warning for Gemini CLI, never 2: {}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("session.jsonl:2"), "the error names the file and line: {}", String::from_utf8_lossy(&out.stderr));

    let before_agent = || String::from_utf8(cairn(&user, &["gemini", "before-agent", "--home", home_arg], &payload("BeforeAgent", &transcript, &project, json!({"prompt": "go on"}))).stdout).unwrap();
    let told: Value = serde_json::from_str(&before_agent()).expect("BeforeAgent prints JSON");
    let notice = told["systemMessage"].as_str().unwrap();
    assert!(notice.contains("the pre-compress hook failed") && notice.contains("cairn doctor"), "{notice}");
    assert!(told["hookSpecificOutput"]["additionalContext"].as_str().unwrap().contains("the pre-compress hook failed"));
    assert_eq!(before_agent(), "", "told once");
}
