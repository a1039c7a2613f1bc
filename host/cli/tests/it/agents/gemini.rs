//! Gemini CLI 0.61.0, for real: `cairn gemini install --project` into a fresh project and HOME,
//! then `gemini -p` turns (resumed with `--resume latest`, each a new process, as a script runs
//! them) against the scripted Gemini API server. The operator plants a rule and an identifier
//! and the model reads a file; then the model's usage crosses the user's
//! `model.compressionThreshold` and Gemini CLI compresses by itself, its scripted snapshot
//! leaving both out. Asserted:
//! - `PreCompress` ran (and succeeded) before every turn of the model, yet Cairn archived only
//!   once, for the compression that ran;
//! - the rule reaches the model again, in `<hook_context>` with the first prompt after the
//!   compression (BeforeAgent: no hook can add to the request Gemini CLI sends right after the
//!   compression, in the same turn), and only once;
//! - the model calls `mcp_cairn_session_history`, Cairn's trusted MCP tool, which finds the
//!   identifier in the archive;
//! - Cairn reads the session file Gemini CLI wrote: nothing skipped, every call paired;
//! - `mcp_cairn_session_history` is in the very first request, from a cold compiled-code
//!   cache of the test's own (install fills it; it is emptied again, as a `cairn` updated after
//!   the install finds it): `cairn serve` answers at once while its plugins compile.
//!
//! The TUI (in tmux): its `/compress` (headless mode does not keep one) is archived, and the
//! next prompt carries the rule.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::model_server::{gemini, ModelServer, Reply, Request};
use super::{cairn, npm, run};

/// The operator's rule and identifier, planted in the first prompt.
const RULE: &str = "Never edit files under vendor/; the deploy key is KEY-7f3a9c.";
const PLANTED_ID: &str = "KEY-7f3a9c";
/// What the scripted compression answers: the work, without the rule or the key.
const SNAPSHOT: &str = "<state_snapshot>\n<overall_goal>Keep working on the spotter project.</overall_goal>\n<key_knowledge>notes.txt: the build runs with make.</key_knowledge>\n</state_snapshot>";
/// `model.compressionThreshold` in the user's settings.
const THRESHOLD: f64 = 0.2;
/// Prompt tokens reported on ordinary turns: far below the threshold.
const SMALL: u64 = 2_000;
/// Reported once: over 0.2 × 1,048,576 (Gemini models' limit), under the default 0.5, so only
/// a hook that reads the user's threshold predicts the compression.
const LARGE: u64 = 300_000;
/// The prompt whose first answer reports `LARGE`.
const GROW: &str = "LARGE";
/// Each CLI run's limit: killed and reported beyond it.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);
/// The MCP tool's name as Gemini CLI offers it.
const RECALL_TOOL: &str = "mcp_cairn_session_history";
/// What `--debug` prints for a PreCompress hook that ran and exited 0.
const PRE_COMPRESS_RAN: &str = "Hook execution for PreCompress: 1 hooks executed successfully";

/// The scripted model: one decision per request, from what the request holds.
fn script(request: &Request) -> Reply {
    if !gemini::is_generate(request) {
        return Reply::not_found();
    }
    if gemini::is_snapshot_request(request) || gemini::is_verification_request(request) {
        return gemini::text_reply(request, SNAPSHOT, SMALL);
    }
    if !gemini::is_stream(request) {
        return gemini::text_reply(request, "ok", SMALL);
    }
    if let Some((name, _)) = gemini::function_responses(request).pop() {
        let answer = if name == RECALL_TOOL { "The archive has it." } else { "notes.txt says the build runs with make." };
        return gemini::text_reply(request, answer, SMALL);
    }
    let prompt = gemini::last_prompt(request);
    if prompt.contains("RECALL") {
        return gemini::call_reply(request, RECALL_TOOL, json!({"action": "search", "query": PLANTED_ID}), SMALL);
    }
    if prompt.contains("notes.txt") {
        let tokens = if prompt.contains(GROW) { LARGE } else { SMALL };
        return gemini::call_reply(request, "read_file", json!({"file_path": "notes.txt"}), tokens);
    }
    gemini::text_reply(request, "Done; continuing.", SMALL)
}

/// One run of `gemini`: its output and the requests it sent.
struct Run {
    stdout: String,
    stderr: String,
    requests: Vec<Request>,
}

impl Run {
    fn streamed(&self) -> Vec<&Request> {
        self.requests.iter().filter(|r| gemini::is_stream(r)).collect()
    }

    /// How many PreCompress hooks ran and exited 0.
    fn pre_compress_runs(&self) -> usize {
        self.stderr.lines().filter(|l| l.contains(PRE_COMPRESS_RAN)).count()
    }
}

/// One fresh user of Gemini CLI: HOME, project, Cairn home, and the model server.
struct Session {
    _dir: tempfile::TempDir,
    gemini: PathBuf,
    home: PathBuf,
    project: PathBuf,
    cairn_home: PathBuf,
    /// The compiled-code cache of this test alone (`CAIRN_CACHE_DIR`), cold at first.
    cache: PathBuf,
    logs: PathBuf,
    server: ModelServer,
    runs: std::cell::Cell<usize>,
}

impl Session {
    fn new() -> Self {
        let gemini = npm::bin(&npm::install(npm::GEMINI_CLI, false), "gemini");
        let dir = tempfile::tempdir().unwrap();
        let (home, project, cairn_home, logs) = (dir.path().join("home"), dir.path().join("spotter"), dir.path().join("cairn"), dir.path().join("logs"));
        for d in [&home.join(".gemini"), &project, &logs] {
            std::fs::create_dir_all(d).unwrap();
        }
        let project = project.canonicalize().unwrap();
        let notes: String = (0..200).map(|i| format!("line {i}: the build runs with make; step {i} compiles module_{i} into the spotter binary\n")).collect();
        std::fs::write(project.join("notes.txt"), notes).unwrap();
        // The user's settings: an API key's auth, the threshold, nothing phoning home.
        let settings = json!({
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "model": {"name": "gemini-2.5-pro", "compressionThreshold": THRESHOLD},
            "general": {"enableAutoUpdate": false},
            "privacy": {"usageStatisticsEnabled": false},
        });
        std::fs::write(home.join(".gemini/settings.json"), serde_json::to_string_pretty(&settings).unwrap()).unwrap();
        // The project trusted, as Gemini CLI's first-run dialog records it: its settings and
        // hooks count only then.
        std::fs::write(home.join(".gemini/trustedFolders.json"), json!({project.display().to_string(): "TRUST_FOLDER"}).to_string()).unwrap();
        let server = ModelServer::start(script);
        let cache = dir.path().join("cache");
        Session { _dir: dir, gemini, home, project, cairn_home, cache, logs, server, runs: std::cell::Cell::new(0) }
    }

    /// `cairn gemini install` into the project and Cairn's home, as a user runs it (with this
    /// test's cache); what it printed.
    fn install(&self) -> String {
        let args = ["gemini", "install", "--project", self.project.to_str().unwrap(), "--home", self.cairn_home.to_str().unwrap()];
        let out = Command::new(env!("CARGO_BIN_EXE_cairn")).args(args).env("HOME", &self.home).env("CAIRN_CACHE_DIR", &self.cache).env("CAIRN_LOG", "error").output().unwrap();
        assert!(out.status.success(), "cairn {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `gemini -p PROMPT --output-format json --debug ARGS` in the project, offline; panics
    /// with everything needed to see why on a failure or a timeout.
    fn gemini(&self, prompt: &str, args: &[&str]) -> Run {
        let n = self.runs.get() + 1;
        self.runs.set(n);
        let before = self.server.requests().len();
        let mut command = Command::new(&self.gemini);
        command
            .args(["-p", prompt, "--output-format", "json", "--debug"])
            .args(args)
            .current_dir(&self.project)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("CAIRN_CACHE_DIR", &self.cache)
            .env("GEMINI_API_KEY", "offline-test-key")
            .env("GOOGLE_GEMINI_BASE_URL", &self.server.base_url)
            .env("CAIRN_LOG", "warn");
        let (status, stdout, stderr) = run(command, &self.logs.join(format!("gemini-{n}")), RUN_TIMEOUT);
        let requests = self.server.requests().split_off(before);
        let run = Run { stdout, stderr, requests };
        if status != Some(0) {
            self.fail(&format!(
                "gemini -p {prompt:?} {args:?} {}\n--- stdout ---\n{}\n--- stderr (hooks, MCP, errors) ---\n{}",
                status.map_or("timed out".to_string(), |c| format!("exited {c}")),
                run.stdout,
                interesting(&run.stderr)
            ));
        }
        run
    }

    fn session_id(run: &Run) -> String {
        let output: Value = serde_json::from_str(run.stdout.trim()).unwrap_or_else(|e| panic!("gemini's JSON output ({e}): {}", run.stdout));
        output["session_id"].as_str().unwrap_or_else(|| panic!("no session_id in {output}")).to_string()
    }

    /// How many compactions Cairn archived in the project's conversation.
    fn archives(&self) -> usize {
        let out = cairn(&["history", "--home", self.cairn_home.to_str().unwrap(), "--conversation", "spotter", "--json", "summary"], &self.home);
        let text = serde_json::from_str::<Value>(&out).unwrap()["text"].as_str().unwrap_or_default().to_string();
        if text.starts_with("Nothing in this conversation has been compacted yet") {
            return 0;
        }
        text.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("an unexpected history summary: {text}"))
    }

    /// The session file Gemini CLI wrote for `session_id` (a resume also starts a nearly empty
    /// one under the same id; the conversation is in the longest).
    fn session_file(&self, session_id: &str) -> PathBuf {
        let mut files: Vec<(usize, PathBuf)> = Vec::new();
        for project in std::fs::read_dir(self.home.join(".gemini/tmp")).unwrap().map(|e| e.unwrap().path()) {
            for file in std::fs::read_dir(project.join("chats")).into_iter().flatten().map(|e| e.unwrap().path()) {
                let text = std::fs::read_to_string(&file).unwrap_or_default();
                if text.lines().next().is_some_and(|l| l.contains(session_id)) {
                    files.push((text.lines().count(), file));
                }
            }
        }
        files.sort();
        files.pop().unwrap_or_else(|| self.fail(&format!("no session file of {session_id} under {}", self.home.join(".gemini/tmp").display()))).1
    }

    fn fail(&self, what: &str) -> ! {
        let mut out = format!("{what}\n--- requests ---\n");
        for (n, request) in self.server.requests().iter().enumerate() {
            out.push_str(&format!("#{n} {} {} tools={:?}\n", request.method, request.path, gemini::tool_names(request)));
            for content in gemini::contents(request) {
                let text = gemini::content_text(content);
                out.push_str(&format!("  {}: {}\n", content["role"].as_str().unwrap_or("?"), text.chars().take(300).collect::<String>().replace('\n', "⏎")));
            }
        }
        panic!("{out}")
    }
}

/// Lines of Cairn's own log or error output in `text` (a tracing event names its target,
/// `cairn::…`; Cairn's errors begin `cairn: `): a hook's stderr, which Gemini CLI shows the
/// user and saves in the session file, must hold none.
fn cairn_text(text: &str) -> Vec<String> {
    text.lines().filter(|l| l.contains("cairn::") || l.contains("unrecognized line kinds") || l.trim_start().starts_with("cairn: ")).map(|l| l.chars().take(300).collect()).collect()
}

/// Every session file Gemini CLI wrote under `home`, with its text.
fn session_files(home: &std::path::Path) -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    for project in std::fs::read_dir(home.join(".gemini/tmp")).into_iter().flatten().map(|e| e.unwrap().path()) {
        for file in std::fs::read_dir(project.join("chats")).into_iter().flatten().map(|e| e.unwrap().path()) {
            files.push((file.clone(), std::fs::read_to_string(&file).unwrap_or_default()));
        }
    }
    files
}

/// The lines of Gemini CLI's debug output about hooks, MCP and errors.
fn interesting(stderr: &str) -> String {
    stderr
        .lines()
        .filter(|l| {
            let l = l.to_lowercase();
            l.contains("hook") || l.contains("mcp") || l.contains("error") || l.contains("compress")
        })
        .map(|l| l.chars().take(400).collect::<String>())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
#[cfg_attr(no_npm, ignore = "needs Node.js 20+ with npm")]
fn cairn_archives_only_gemini_clis_real_compression_brings_the_rule_back_and_recalls_it_over_mcp() {
    let s = Session::new();

    // 1. Installed as a user installs it: hooks and MCP server in the project's settings, the
    // plugins compiled ahead.
    let said = s.install();
    eprintln!("{said}");
    let settings: Value = serde_json::from_str(&std::fs::read_to_string(s.project.join(".gemini/settings.json")).unwrap()).unwrap();
    assert_eq!(settings["mcpServers"]["cairn"]["trust"], true, "{settings}");
    assert!(said.contains(&format!("bundled plugins into the cache at {}", s.cache.display())), "install compiles the plugins ahead: {said}");
    // As a `cairn` updated after the install finds it: nothing compiled for it.
    std::fs::remove_dir_all(&s.cache).unwrap();

    // 2. The operator's rule, and a tool call: two turns of the model, no compression.
    let started = Instant::now();
    let first = s.gemini(&format!("{RULE} Start by reading notes.txt."), &[]);
    eprintln!("the first run, from a cold cache, took {:?}", started.elapsed());
    let session_id = Session::session_id(&first);
    let streamed = first.streamed();
    if !streamed.first().is_some_and(|r| gemini::tool_names(r).iter().any(|t| t == RECALL_TOOL)) {
        s.fail(&format!(
            "the first request to the model lacks {RECALL_TOOL}:
{}",
            interesting(&first.stderr)
        ));
    }
    let read = streamed.last().map(|r| gemini::function_responses(r)).unwrap_or_default();
    if !read.iter().any(|(name, output)| name == "read_file" && output.contains("the build runs with make")) {
        s.fail(&format!("read_file's result did not come back to the model: {read:?}"));
    }
    assert_eq!((streamed.len(), first.pre_compress_runs()), (2, 2), "a PreCompress hook before each of the two turns of the model:\n{}", interesting(&first.stderr));
    assert_eq!(s.archives(), 0, "no compression, so nothing archived");

    // 3. The model's usage crosses the threshold: Gemini CLI compresses before its next turn.
    let second = s.gemini(&format!("{GROW}: read notes.txt again."), &["--resume", "latest"]);
    assert_eq!(Session::session_id(&second), session_id);
    let snapshots = second.requests.iter().filter(|r| gemini::is_snapshot_request(r)).count();
    let checks = second.requests.iter().filter(|r| gemini::is_verification_request(r)).count();
    assert_eq!((snapshots, checks), (1, 1), "one compression (a snapshot and its check)");
    assert_eq!(second.pre_compress_runs(), 2, "{}", interesting(&second.stderr));
    assert_eq!(s.archives(), 1, "archived for the compression, and for nothing else");
    // The request Gemini CLI sends right after compressing: the snapshot, without the rule (the
    // BeforeAgent hook of this prompt ran before the compression; no hook can add to it).
    let after = *second.streamed().last().unwrap();
    let texts = gemini::text_parts(after);
    if !texts.iter().any(|(_, t)| t.contains(SNAPSHOT)) || texts.iter().any(|(_, t)| t.contains(RULE)) {
        s.fail("the request after the compression should hold the snapshot and not the rule");
    }

    // 4. The next prompt: the rule comes back, in the hook context, and nowhere else.
    let third = s.gemini("Next step, please.", &["--resume", "latest"]);
    let request = third.streamed().first().copied().unwrap_or_else(|| s.fail("the next prompt reached no model"));
    let context = gemini::last_hook_context(request);
    if !context.iter().any(|c| c.contains(RULE)) {
        s.fail(&format!("the first request after the compression does not carry the rule in <hook_context>: {context:?}"));
    }
    let elsewhere: Vec<String> = gemini::text_parts(request).into_iter().filter(|(_, t)| t.contains(RULE) && !t.starts_with(gemini::HOOK_CONTEXT)).map(|(r, t)| format!("{r}: {t}")).collect();
    if !elsewhere.is_empty() {
        s.fail(&format!("the rule is still in the context after the compression, so this proves nothing: {elsewhere:?}"));
    }
    eprintln!("the rule came back through BeforeAgent:\n{}", context.join("\n").chars().take(1500).collect::<String>());
    assert_eq!(third.pre_compress_runs(), 1);
    assert_eq!(s.archives(), 1, "no second archive without a second compression");

    // 5. Recall over MCP, the prompt after: no second injection for the same compression.
    let fourth = s.gemini("RECALL the deploy key from before.", &["--resume", "latest"]);
    let streamed = fourth.streamed();
    let Some(first_request) = streamed.first() else { s.fail("the recall prompt reached no model") };
    if !gemini::tool_names(first_request).iter().any(|t| t == RECALL_TOOL) {
        s.fail(&format!("{RECALL_TOOL} was not offered: {:?}", gemini::tool_names(first_request)));
    }
    let again = gemini::last_hook_context(first_request);
    assert!(again.is_empty(), "the record is added once per compression, not with every prompt: {again:?}");
    let recalled = streamed.last().map(|r| gemini::function_responses(r)).unwrap_or_default();
    let Some((_, answer)) = recalled.iter().find(|(name, _)| name == RECALL_TOOL) else { s.fail(&format!("no {RECALL_TOOL} result came back: {recalled:?}")) };
    if !answer.contains(PLANTED_ID) {
        s.fail(&format!("session_history did not find {PLANTED_ID}: {answer}"));
    }
    eprintln!("session_history answered: {}", answer.chars().take(600).collect::<String>());
    assert_eq!(s.archives(), 1);

    // 6. Cairn reads the session file Gemini CLI wrote: nothing skipped, every call paired.
    let file = s.session_file(&session_id);
    let out = s.logs.join("read.jsonl");
    let compact = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["compact", file.to_str().unwrap(), "--json", "--home", s.logs.join("cairn-read").to_str().unwrap(), "--out", out.to_str().unwrap()])
        .env("CAIRN_LOG", "error")
        .output()
        .unwrap();
    // 3: read and reported, but too small a session for the policy to commit a compaction.
    assert!(matches!(compact.status.code(), Some(0 | 3)), "cairn compact {}: {}", file.display(), String::from_utf8_lossy(&compact.stderr));
    let report: Value = serde_json::from_slice(&compact.stdout).unwrap();
    assert_eq!(report["input_format"], "gemini", "{report}");
    assert_eq!(report["unrecognized"]["skipped"], json!({}), "{}: {report}", file.display());
    let parts: Vec<Value> = std::fs::read_to_string(&out).unwrap().lines().skip(1).flat_map(|l| serde_json::from_str::<Value>(l).unwrap()["parts"].as_array().cloned().unwrap_or_default()).collect();
    let calls: Vec<&Value> = parts.iter().filter(|p| p["type"] == "tool-call").collect();
    let results: Vec<&Value> = parts.iter().filter(|p| p["type"] == "tool-result").collect();
    for call in &calls {
        let answered = results.iter().filter(|r| r["call_id"] == call["id"]).count();
        assert_eq!(answered, 1, "{}: call {} answered {answered} times", file.display(), call["id"]);
    }
    for result in &results {
        assert!(calls.iter().any(|c| c["id"] == result["call_id"]), "{}: a result without its call: {result}", file.display());
        assert!(!result["content"].as_str().unwrap_or_default().starts_with("[no result recorded"), "{}: {result}", file.display());
    }
    let recall = calls.iter().find(|c| c["name"] == RECALL_TOOL).unwrap_or_else(|| panic!("{}: the {RECALL_TOOL} call is not read", file.display()));
    let result = results.iter().find(|r| r["call_id"] == recall["id"]).unwrap();
    assert!(result["content"].as_str().unwrap_or_default().contains(PLANTED_ID), "{result}");
}

/// Gemini CLI's TUI in a pseudo-terminal (a private tmux server), driven as a user types.
struct Tui<'a> {
    session: &'a Session,
    socket: String,
}

impl Tui<'_> {
    fn start(session: &Session) -> Tui<'_> {
        let tui = Tui { session, socket: format!("cairn-gemini-{}", std::process::id()) };
        let mut args: Vec<String> = ["new-session", "-d", "-s", "gemini", "-x", "200", "-y", "50", "-c"].map(String::from).to_vec();
        args.push(session.project.display().to_string());
        for (k, v) in [
            ("HOME", session.home.display().to_string()),
            ("CAIRN_CACHE_DIR", session.cache.display().to_string()),
            ("GEMINI_API_KEY", "offline-test-key".into()),
            ("GOOGLE_GEMINI_BASE_URL", session.server.base_url.clone()),
            ("TERM", "xterm-256color".into()),
            ("CAIRN_LOG", "warn".into()),
        ] {
            args.extend(["-e".into(), format!("{k}={v}")]);
        }
        args.push(format!("'{}'", session.gemini.display()));
        // Gemini CLI's renderer (ink) draws nothing when it sees a CI variable (`is-in-ci`):
        // the server, and so the pane, starts without them.
        let mut tmux = Command::new("tmux");
        for (key, _) in std::env::vars_os() {
            if key == "CI" || key == "CONTINUOUS_INTEGRATION" || key.to_str().is_some_and(|k| k.starts_with("CI_")) {
                tmux.env_remove(key);
            }
        }
        let status = tmux.arg("-L").arg(&tui.socket).args(&args).status().expect("tmux");
        assert!(status.success(), "tmux new-session failed");
        tui
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux").arg("-L").arg(&self.socket).args(args).output().expect("tmux");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", "gemini"])
    }

    fn type_line(&self, text: &str) {
        self.tmux(&["send-keys", "-t", "gemini", "-l", text]);
        std::thread::sleep(Duration::from_millis(500));
        self.tmux(&["send-keys", "-t", "gemini", "Enter"]);
    }

    /// Waits until `done` holds, else fails with the screen.
    fn wait(&self, what: &str, timeout: Duration, mut done: impl FnMut(&Self) -> bool) {
        let started = Instant::now();
        while !done(self) {
            if started.elapsed() > timeout {
                self.session.fail(&format!("TUI: no {what} within {timeout:?}; the screen:\n{}", self.screen()));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Tui<'_> {
    fn drop(&mut self) {
        // Gemini CLI's launcher ignores SIGHUP: its process group goes first, by its id.
        if let Ok(pid) = self.tmux(&["display-message", "-p", "-t", "gemini", "#{pane_pid}"]).trim().parse::<u32>() {
            let _ = Command::new("kill").args(["-s", "KILL", "--", &format!("-{pid}")]).stderr(Stdio::null()).status();
        }
        let _ = Command::new("tmux").args(["-L", &self.socket, "kill-server"]).stderr(Stdio::null()).status();
    }
}

/// The TUI's `/compress` (the manual compression, which headless mode does not keep): Cairn
/// archives before it (PreCompress, trigger `manual`) and the next prompt carries the rule.
#[test]
#[cfg_attr(no_npm, ignore = "needs Node.js 20+ with npm")]
fn the_tuis_compress_is_archived_and_the_next_prompt_carries_the_rule() {
    let s = Session::new();
    s.install();
    let tui = Tui::start(&s);
    tui.wait("prompt (start-up)", Duration::from_secs(90), |t| t.screen().contains("Type your message"));
    tui.type_line(&format!("{RULE} Keep it in mind."));
    tui.wait("answer", Duration::from_secs(60), |t| t.screen().contains("Done; continuing."));
    assert_eq!(s.archives(), 0);
    // An empty notice, as the TUI records some: the hook that archives before /compress reads
    // it, and must not answer it with a warning on stderr, which the TUI shows and saves.
    let [(file, _)] = session_files(&s.home).try_into().unwrap_or_else(|files: Vec<_>| panic!("one session file, not {}", files.len()));
    let notice = json!({"id": "notice-1", "timestamp": "2026-12-01T18:45:04.582Z", "type": "info", "content": ""});
    std::io::Write::write_all(&mut std::fs::OpenOptions::new().append(true).open(&file).unwrap(), format!("{notice}\n").as_bytes()).unwrap();

    tui.type_line("/compress");
    tui.wait("compression", Duration::from_secs(60), |t| t.screen().contains("Chat history compressed"));
    assert_eq!(s.server.requests().iter().filter(|r| gemini::is_snapshot_request(r)).count(), 1);
    assert_eq!(s.archives(), 1, "archived before the manual compression");

    let before = s.server.requests().len();
    tui.type_line("Next step, please.");
    tui.wait("the next prompt's request", Duration::from_secs(60), |t| t.session.server.requests()[before..].iter().any(|r| gemini::last_prompt(r) == "Next step, please."));
    let requests = s.server.requests();
    let request = requests[before..].iter().find(|r| gemini::last_prompt(r) == "Next step, please.").unwrap();
    let context = gemini::last_hook_context(request);
    if !context.iter().any(|c| c.contains(RULE)) {
        s.fail(&format!("the prompt after /compress does not carry the rule in <hook_context>: {context:?}"));
    }
    if gemini::text_parts(request).iter().any(|(_, t)| t.contains(RULE) && !t.starts_with(gemini::HOOK_CONTEXT)) {
        s.fail("the rule survived /compress, so this proves nothing");
    }
    // The hooks said nothing Gemini CLI would show or keep: not on the screen, not in the session.
    let screen = tui.screen();
    assert!(cairn_text(&screen).is_empty(), "Cairn's text on Gemini CLI's screen:\n{screen}");
    let files = session_files(&s.home);
    assert!(!files.is_empty(), "the TUI saved no session");
    for (file, text) in files {
        assert!(cairn_text(&text).is_empty(), "{}: Cairn's text in Gemini CLI's session: {:?}", file.display(), cairn_text(&text));
    }
}
