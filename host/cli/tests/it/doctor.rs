//! Hooks that never fail silently, and `cairn doctor`: a failing hook is recorded in the home
//! and told once by the next `session-start`; doctor names each broken piece of a setup, and
//! nothing on a healthy one.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};

const EXE: &str = env!("CARGO_BIN_EXE_cairn");

/// The binary with `args`, `stdin` and `env`; its status is the caller's to check.
fn run(args: &[&str], stdin: &str, env: &[(&str, &Path)]) -> Output {
    let mut command = Command::new(EXE);
    command.args(args).env("CAIRN_LOG", "error").stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = command.spawn().expect("running cairn");
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn line(uuid: &str, parent: Option<&str>, kind: &str, content: Value) -> String {
    json!({"parentUuid": parent, "isSidechain": false, "sessionId": "s1", "type": kind, "message": {"role": kind, "content": content}, "uuid": uuid}).to_string()
}

/// A Claude Code session of `turns` requests and replies.
fn session(turns: usize) -> String {
    let mut text = String::new();
    let mut parent: Option<String> = None;
    for i in 0..turns {
        let (u, a) = (format!("u{i}"), format!("a{i}"));
        text += &line(&u, parent.as_deref(), "user", json!(format!("Step {i}: fix the parser for case {i}. {}", "Details of the case. ".repeat(30))));
        text += "\n";
        let reply = format!("Looking at src/parser_{i}.rs. {}", "Reasoning about it. ".repeat(40));
        text += &line(&a, Some(&u), "assistant", json!([{"type": "text", "text": reply}]));
        text += "\n";
        parent = Some(a);
    }
    text
}

fn payload(event: &str, transcript: &Path, cwd: &Path) -> String {
    json!({"session_id": "s1", "transcript_path": transcript, "cwd": cwd, "hook_event_name": event, "trigger": "auto", "source": "compact"}).to_string()
}

fn additional_context(out: &Output) -> String {
    assert!(out.status.success(), "session-start: {}", text(&out.stderr));
    let output: Value = serde_json::from_slice(&out.stdout).expect("SessionStart prints JSON");
    output["hookSpecificOutput"]["additionalContext"].as_str().unwrap().to_string()
}

#[test]
fn a_failing_hook_is_recorded_and_told_once_atop_the_next_session_start() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("spotter");
    std::fs::create_dir(&project).unwrap();
    let home = dir.path().join("home");
    let home_arg = home.to_str().unwrap();
    let transcript = dir.path().join("session.jsonl");
    std::fs::write(&transcript, format!("{}\n{{not json\n", line("u1", None, "user", json!("Fix the parser.")))).unwrap();

    let out = run(&["claude-code", "pre-compact", "--home", home_arg], &payload("PreCompact", &transcript, &project), &[]);
    assert_eq!(out.status.code(), Some(1), "a failing hook exits 1, never 2 (which would block the compaction)");
    let recorded = std::fs::read_to_string(home.join("hook-failures.jsonl")).expect("the failure is recorded in the home");
    let failure: Value = serde_json::from_str(recorded.lines().next().unwrap()).unwrap();
    assert_eq!((failure["agent"].as_str(), failure["hook"].as_str(), failure["session_id"].as_str()), (Some("claude-code"), Some("pre-compact"), Some("s1")));
    assert_eq!(failure["transcript_path"], json!(transcript));
    let at_line = format!("{}:2:", transcript.display());
    assert!(failure["error"].as_str().unwrap().contains(&at_line), "the error names file and line: {failure}");

    // The next compaction works (a session long enough to hand over); its session-start tells
    // the earlier failure first.
    std::fs::write(&transcript, session(40)).unwrap();
    let out = run(&["claude-code", "pre-compact", "--home", home_arg], &payload("PreCompact", &transcript, &project), &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = run(&["claude-code", "session-start", "--home", home_arg], &payload("SessionStart", &transcript, &project), &[]);
    let context = additional_context(&out);
    let (notice, rest) = context.split_once("\n\n").unwrap();
    assert!(notice.starts_with("Cairn: the pre-compact hook failed at "), "{context}");
    assert!(notice.contains(&at_line) && notice.contains("nothing was archived for that compaction") && notice.contains("`cairn doctor`"), "{notice}");
    assert!(!notice.contains('\n'));
    assert!(rest.starts_with("# Cairn: the record of this session"), "the usual context follows: {context}");
    let output: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(output["systemMessage"], json!(notice), "the user is told too");

    let again = additional_context(&run(&["claude-code", "session-start", "--home", home_arg], &payload("SessionStart", &transcript, &project), &[]));
    assert!(again.starts_with("# Cairn: the record"), "told once: {again}");
    let failures = std::fs::read_to_string(home.join("hook-failures.jsonl")).unwrap();
    assert!(failures.contains("\"told\":true"), "and kept, marked told: {failures}");
}

#[test]
fn session_start_with_nothing_else_to_add_still_tells_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let home_arg = home.to_str().unwrap();
    let transcript = dir.path().join("session.jsonl");
    std::fs::write(&transcript, format!("{}\n{{not json\n", line("u1", None, "user", json!("Fix the parser.")))).unwrap();
    let out = run(&["claude-code", "pre-compact", "--home", home_arg], &payload("PreCompact", &transcript, dir.path()), &[]);
    assert_eq!(out.status.code(), Some(1));

    let out = run(&["claude-code", "session-start", "--home", home_arg], &payload("SessionStart", &transcript, dir.path()), &[]);
    let context = additional_context(&out);
    assert!(context.starts_with("Cairn: the pre-compact hook failed at ") && !context.contains('\n'), "only the notice: {context}");
    assert!(context.contains(&format!("{}:2:", transcript.display())), "{context}");
    let out = run(&["claude-code", "session-start", "--home", home_arg], &payload("SessionStart", &transcript, dir.path()), &[]);
    assert!(out.status.success() && out.stdout.is_empty(), "nothing to say the second time: {}", text(&out.stdout));
}

/// Doctor's checks as JSON: (check, status, message).
fn checks(out: &Output) -> Vec<(String, String, String)> {
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)));
    report["checks"].as_array().unwrap().iter().map(|c| (c["check"].as_str().unwrap().into(), c["status"].as_str().unwrap().into(), c["message"].as_str().unwrap().into())).collect()
}

#[test]
fn doctor_names_each_broken_piece_of_a_setup() {
    let dir = tempfile::tempdir().unwrap();
    let user = dir.path().join("user");
    let project = dir.path().join("project");
    std::fs::create_dir_all(project.join(".claude")).unwrap();
    std::fs::create_dir_all(&user).unwrap();
    let home = dir.path().join("the home");
    let home_file = dir.path().join("home-file");
    std::fs::write(&home_file, "a file, not a home").unwrap();
    let policy = dir.path().join("broken.toml");
    std::fs::write(&policy, "[lifecycle]\nreinject_budget_tokens = \"many\"\n").unwrap();
    let missing = dir.path().join("gone/cairn");
    // A hook failure recorded in the home the session-start hook uses.
    let transcript = dir.path().join("session.jsonl");
    std::fs::write(&transcript, format!("{}\n{{not json\n", line("u1", None, "user", json!("Fix it.")))).unwrap();
    let out = run(&["claude-code", "pre-compact", "--home", home.to_str().unwrap()], &payload("PreCompact", &transcript, &project), &[]);
    assert_eq!(out.status.code(), Some(1));

    let settings = json!({"hooks": {
        "PreCompact": [{"matcher": "", "hooks": [{"type": "command", "command": format!("{} claude-code pre-compact --home {} --policy {}", missing.display(), home_file.display(), policy.display())}]}],
        "SessionStart": [{"matcher": "compact", "hooks": [{"type": "command", "command": format!("{EXE} claude-code session-start --home '{}'", home.display())}]}],
    }});
    std::fs::write(project.join(".claude/settings.json"), serde_json::to_string_pretty(&settings).unwrap()).unwrap();
    let other = dir.path().join("other-home");
    let mcp = json!({"mcpServers": {"cairn": {"type": "stdio", "command": EXE, "args": ["serve", "--expose", "agent", "--home", other]}}});
    std::fs::write(project.join(".mcp.json"), mcp.to_string()).unwrap();

    let env: &[(&str, &Path)] = &[("HOME", &user), ("CAIRN_CACHE_DIR", &crate::support::shared_cache())];
    let project_arg = project.to_str().unwrap();
    let out = run(&["doctor", "--project", project_arg, "--home", home_file.to_str().unwrap(), "--json"], "", env);
    assert!(!out.status.success(), "a failed check fails doctor");
    let checks = checks(&out);
    let has = |check: &str, status: &str, words: &[&str]| {
        assert!(checks.iter().any(|(c, s, m)| c == check && s == status && words.iter().all(|w| m.contains(w))), "no {status} {check} check with {words:?} in {checks:#?}")
    };
    let missing = missing.display().to_string();
    let home_file = home_file.display().to_string();
    has("hooks", "fail", &["PreCompact", &missing, "does not exist"]);
    has("hooks", "fail", &["PreCompact", "cannot use its home", &home_file, "is not a directory"]);
    has("hooks", "fail", &["PreCompact", &policy.display().to_string(), "does not load"]);
    has("hooks", "ok", &["SessionStart", &home.display().to_string()]);
    has("mcp", "fail", &[".mcp.json", &other.display().to_string(), &home.display().to_string(), "session_history"]);
    has("home", "fail", &[&home_file, "is not a directory"]);
    has("hook-failures", "warn", &["pre-compact", &format!("{}:2:", transcript.display()), "not told yet"]);

    // The same in words, one line per check.
    let out = run(&["doctor", "--project", project_arg, "--home", home_file.as_str()], "", env);
    assert!(!out.status.success());
    let stdout = text(&out.stdout);
    assert!(stdout.lines().any(|l| l.starts_with("fail  hooks: ") && l.contains(&missing)), "{stdout}");
    assert!(stdout.lines().any(|l| l.starts_with("fail  mcp: ")), "{stdout}");
    assert!(text(&out.stderr).contains("checks failed"), "{}", text(&out.stderr));
}

#[test]
fn doctor_passes_a_healthy_setup() {
    let dir = tempfile::tempdir().unwrap();
    let user = dir.path().join("user");
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::create_dir_all(&user).unwrap();
    let home = dir.path().join("home");
    let cache = dir.path().join("cache");
    let bin = Path::new(EXE).parent().unwrap();
    let path = std::env::join_paths(std::iter::once(bin.to_path_buf()).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()))).unwrap();
    let env: &[(&str, &Path)] = &[("HOME", &user), ("CAIRN_CACHE_DIR", &cache), ("PATH", Path::new(&path))];

    let (project_arg, home_arg) = (project.to_str().unwrap(), home.to_str().unwrap());
    let out = run(&["claude-code", "install", "--project", project_arg, "--home", home_arg], "", env);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mcp = json!({"mcpServers": {"cairn": {"type": "stdio", "command": EXE, "args": ["serve", "--expose", "agent", "--home", home]}}});
    std::fs::write(project.join(".mcp.json"), mcp.to_string()).unwrap();

    let out = run(&["doctor", "--project", project_arg, "--home", home_arg, "--json"], "", env);
    let checks = checks(&out);
    assert!(out.status.success(), "{checks:#?}\n{}", text(&out.stderr));
    assert!(checks.iter().all(|(_, s, _)| s == "ok"), "{checks:#?}");
    for check in ["path", "hooks", "mcp", "home", "cache", "hook-failures"] {
        assert!(checks.iter().any(|(c, _, _)| c == check), "no {check} check in {checks:#?}");
    }
    assert_eq!(checks.iter().filter(|(c, _, _)| c == "hooks").count(), 2, "both hooks checked: {checks:#?}");

    let out = run(&["doctor", "--project", project_arg, "--home", home_arg], "", env);
    assert!(out.status.success());
    assert!(text(&out.stdout).lines().all(|l| l.starts_with("ok    ")), "{}", text(&out.stdout));
}

/// Cairn installed in Codex, Gemini CLI and OpenCode (and not in Claude Code): doctor checks
/// each agent's hooks and server, says nothing of the missing Claude Code setup, and names
/// each piece once broken.
#[test]
fn doctor_checks_cairn_in_codex_gemini_cli_and_opencode() {
    let dir = tempfile::tempdir().unwrap();
    let (user, project, home, cache) = (dir.path().join("user"), dir.path().join("project"), dir.path().join("home"), dir.path().join("cache"));
    for d in [&user, &project] {
        std::fs::create_dir_all(d).unwrap();
    }
    let bin = Path::new(EXE).parent().unwrap();
    let path = std::env::join_paths(std::iter::once(bin.to_path_buf()).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()))).unwrap();
    let env: &[(&str, &Path)] = &[("HOME", &user), ("CAIRN_CACHE_DIR", &cache), ("PATH", Path::new(&path)), ("CODEX_HOME", &user.join(".codex"))];
    let (project_arg, home_arg) = (project.to_str().unwrap(), home.to_str().unwrap());
    for agent in ["codex", "gemini", "opencode"] {
        let out = run(&[agent, "install", "--project", project_arg, "--home", home_arg], "", env);
        assert!(out.status.success(), "{agent} install: {}", text(&out.stderr));
    }

    let out = run(&["doctor", "--project", project_arg, "--home", home_arg, "--json"], "", env);
    let found = checks(&out);
    assert!(out.status.success(), "{found:#?}\n{}", text(&out.stderr));
    assert!(found.iter().all(|(_, s, _)| s == "ok"), "{found:#?}");
    let count = |check: &str| found.iter().filter(|(c, _, _)| c == check).count();
    assert_eq!((count("codex"), count("gemini"), count("opencode")), (3, 3, 2), "two hooks and the server each; OpenCode's server and plugin: {found:#?}");
    assert_eq!((count("hooks"), count("mcp")), (0, 0), "no warning about Claude Code, where Cairn is not set up: {found:#?}");

    // Broken: Gemini CLI's server on another home, OpenCode's plugin gone, Codex's config unreadable.
    let settings = project.join(".gemini/settings.json");
    let other = dir.path().join("other-home");
    std::fs::write(&settings, std::fs::read_to_string(&settings).unwrap().replace(home_arg, other.to_str().unwrap()).replacen(other.to_str().unwrap(), home_arg, 2)).unwrap();
    std::fs::remove_file(project.join(".opencode/plugin/cairn.ts")).unwrap();
    let config = user.join(".codex/config.toml");
    std::fs::write(&config, format!("{}\n[mcp_servers\n", std::fs::read_to_string(&config).unwrap())).unwrap();
    let out = run(&["doctor", "--project", project_arg, "--home", home_arg], "", env);
    let stdout = text(&out.stdout);
    assert!(!out.status.success(), "{stdout}");
    assert!(stdout.lines().any(|l| l.starts_with("fail  gemini: ") && l.contains("reads home") && l.contains(other.to_str().unwrap())), "{stdout}");
    assert!(stdout.lines().any(|l| l.starts_with("warn  opencode: ") && l.contains("cairn.ts is missing")), "{stdout}");
    assert!(stdout.lines().any(|l| l.starts_with("fail  codex: ") && l.contains("config.toml:") && l.contains("Codex cannot read it")), "{stdout}");
}

/// With Cairn set up in no agent, doctor says which agents this machine has and how to set
/// Cairn up in each — or that it found none — instead of speaking only of Claude Code.
#[test]
fn doctor_without_cairn_in_any_agent_names_the_agents_it_finds() {
    let dir = tempfile::tempdir().unwrap();
    let user = dir.path().join("user");
    std::fs::create_dir_all(&user).unwrap();
    let cache = crate::support::shared_cache();
    let bare = Path::new("/usr/bin:/bin");
    let env: &[(&str, &Path)] = &[("HOME", &user), ("CAIRN_CACHE_DIR", &cache), ("PATH", bare)];
    let out = text(&run(&["doctor"], "", env).stdout);
    assert!(out.contains("warn  agents: no supported agent found on this machine (Claude Code, Codex, Gemini CLI, OpenCode, Pi"), "{out}");
    assert!(!out.contains("Claude Code compacts without Cairn") && !out.contains("claude mcp add"), "no Claude Code advice without Claude Code: {out}");

    std::fs::create_dir_all(user.join(".codex")).unwrap();
    std::fs::create_dir_all(user.join(".claude")).unwrap();
    let out = text(&run(&["doctor"], "", env).stdout);
    assert!(out.contains("Cairn is set up in none of the agents found here; Claude Code: `cairn claude-code install`; Codex: `cairn codex install`"), "{out}");
    assert!(out.contains("Claude Code compacts without Cairn"), "Claude Code is here: its setup is checked: {out}");
}
