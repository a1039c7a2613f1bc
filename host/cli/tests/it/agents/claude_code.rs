//! Claude Code 2.1.328, for real: `cairn claude-code install --mcp` into a fresh project and
//! HOME, then the CLI in print mode against the scripted Anthropic server. The operator plants
//! a rule and an identifier; the scripted summaries leave both out; after a manual (`/compact`)
//! and an automatic compaction, the model must still be shown the rule (through the
//! SessionStart hook's additional context), and over MCP `session_history` must find the
//! identifier in the archive `pre-compact` wrote.
//!
//! The automatic compaction is the one this version runs in print mode: the API answers "prompt
//! is too long", Claude Code compacts (`PreCompact` with trigger `auto`) and sends the turn again.
//! `CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=1` with large reported usage did not make it compact before
//! a request (it defers to the API's answer, "reactive mode"); it is set anyway.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::model_server::{anthropic, ModelServer, Reply, Request};
use super::{cairn, npm, run};

/// The operator's rule and identifier, planted in the first prompt.
const RULE: &str = "Never edit files under vendor/; the deploy key is KEY-7f3a9c.";
const PLANTED_ID: &str = "KEY-7f3a9c";
/// What the scripted summarizer answers: the work, without the rule or the key.
const SUMMARY: &str = "The user asked to see the project notes; they were shown (the build runs with make). Next: continue the work.";
/// Reported prompt size: far below Claude Code's threshold on its own, far above it once
/// `CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=1` lowers the threshold to 1% of the window.
const INPUT_TOKENS: u64 = 60_000;
/// The prompt of the turn the API refuses once as too long.
const OVERFLOW: &str = "OVERFLOW";
/// Each CLI run's limit: killed and reported beyond it.
const RUN_TIMEOUT: Duration = Duration::from_secs(90);

/// What the script remembers between requests.
#[derive(Default)]
struct State {
    /// The "prompt is too long" answer was given.
    overflowed: AtomicBool,
}

/// How many times the script retries `ToolSearch` (a second apart) while Claude Code is still
/// connecting the MCP server it starts in the background.
const TOOL_SEARCH_TRIES: usize = 30;

/// The scripted model: one decision per request, from what the request holds (the newest tool
/// result first: Claude Code merges a turn's results into one user message, newest last).
fn script(request: &Request, state: &State) -> Reply {
    if anthropic::is_count_tokens(request) {
        return anthropic::count_tokens_reply(INPUT_TOKENS);
    }
    if !anthropic::is_messages(request) {
        return Reply::not_found();
    }
    if anthropic::is_compaction_request(request) {
        return anthropic::summary_reply(SUMMARY, INPUT_TOKENS);
    }
    let search = |attempt: usize| anthropic::tool_use_reply(&format!("toolu_recall_search_{attempt}"), "ToolSearch", json!({"query": "select:mcp__cairn__session_history"}), INPUT_TOKENS);
    if let Some((id, text)) = anthropic::tool_results(request).pop() {
        if id == "toolu_recall_call" {
            return anthropic::text_reply("The archive has it.", INPUT_TOKENS);
        }
        if let Some(attempt) = id.strip_prefix("toolu_recall_search_").and_then(|n| n.parse::<usize>().ok()) {
            if text.contains("tool_reference:mcp__cairn__session_history") {
                return anthropic::tool_use_reply("toolu_recall_call", "mcp__cairn__session_history", json!({"action": "search", "query": PLANTED_ID}), INPUT_TOKENS);
            }
            if attempt + 1 < TOOL_SEARCH_TRIES {
                return anthropic::tool_use_reply(&format!("toolu_wait_{attempt}"), "Bash", json!({"command": "sleep 1", "description": "Wait for the MCP server"}), INPUT_TOKENS);
            }
            return anthropic::text_reply("ToolSearch never found session_history.", INPUT_TOKENS);
        }
        if let Some(attempt) = id.strip_prefix("toolu_wait_").and_then(|n| n.parse::<usize>().ok()) {
            return search(attempt + 1);
        }
        if id == "toolu_cat" {
            return anthropic::text_reply("notes.txt says the build runs with make.", INPUT_TOKENS);
        }
    }
    let last = anthropic::last_prompt(request);
    if last.contains(OVERFLOW) && !state.overflowed.swap(true, Ordering::SeqCst) {
        return anthropic::prompt_too_long();
    }
    if last.contains("RECALL") {
        return search(0);
    }
    if last.contains("notes.txt") {
        return anthropic::tool_use_reply("toolu_cat", "Bash", json!({"command": "cat notes.txt", "description": "Show notes.txt"}), INPUT_TOKENS);
    }
    anthropic::text_reply("Done; continuing.", INPUT_TOKENS)
}

/// One fresh user of Claude Code: HOME, project, Cairn home, and the model server.
struct Session {
    _dir: tempfile::TempDir,
    claude: PathBuf,
    home: PathBuf,
    project: PathBuf,
    cairn_home: PathBuf,
    logs: PathBuf,
    server: ModelServer,
    runs: std::cell::Cell<usize>,
}

impl Session {
    /// With a `notes.txt` of `lines` lines for the model to read.
    fn new(lines: usize) -> Self {
        let claude = npm::bin(&npm::install(npm::CLAUDE_CODE, true), "claude");
        let dir = tempfile::tempdir().unwrap();
        let (home, project, cairn_home, logs) = (dir.path().join("home"), dir.path().join("spotter"), dir.path().join("cairn"), dir.path().join("logs"));
        for d in [&home, &project, &logs] {
            std::fs::create_dir_all(d).unwrap();
        }
        let notes: String = (0..lines).map(|i| format!("line {i}: the build runs with make; step {i} compiles module_{i} into the spotter binary\n")).collect();
        std::fs::write(project.join("notes.txt"), notes).unwrap();
        let state = Arc::new(State::default());
        let server = ModelServer::start(move |request| script(request, &state));
        Session { _dir: dir, claude, home, project, cairn_home, logs, server, runs: std::cell::Cell::new(0) }
    }

    /// `claude ARGS` in the project, with the offline environment; its stdout. On a failure
    /// or a timeout it panics with everything needed to see why.
    fn claude(&self, args: &[&str], env: &[(&str, &str)]) -> String {
        let n = self.runs.get() + 1;
        self.runs.set(n);
        let debug = self.logs.join(format!("claude-{n}.debug.log"));
        let mut command = Command::new(&self.claude);
        command
            .args(args)
            .args(["--output-format", "json", "--debug-file", debug.to_str().unwrap()])
            .current_dir(&self.project)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("ANTHROPIC_BASE_URL", &self.server.base_url)
            .env("ANTHROPIC_API_KEY", "sk-ant-offline-test")
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_ERROR_REPORTING", "1")
            .env("CAIRN_LOG", "warn")
            .envs(env.iter().copied());
        let (status, stdout, stderr) = run(command, &self.logs.join(format!("claude-{n}")), RUN_TIMEOUT);
        if status != Some(0) {
            self.fail(&format!("claude {args:?} {}\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}", status.map_or("timed out".to_string(), |c| format!("exited {c}"))));
        }
        let result: Value = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
        if result["is_error"] == true {
            self.fail(&format!("claude {args:?} reported an error:\n{stdout}"));
        }
        stdout
    }

    /// The debug log of the latest `claude` run.
    fn last_debug_log(&self) -> String {
        std::fs::read_to_string(self.logs.join(format!("claude-{}.debug.log", self.runs.get()))).unwrap_or_default()
    }

    /// Asserts the latest run ran Cairn's PreCompact hook for `trigger`, and it succeeded.
    fn assert_pre_compact_ran(&self, trigger: &str) {
        let log = self.last_debug_log();
        let ran = log.lines().any(|l| l.contains(&format!("PreCompact:{trigger} [")) && l.contains("claude-code pre-compact") && l.contains("status 0"));
        if !ran {
            self.fail(&format!("no successful PreCompact:{trigger} hook run in the debug log"));
        }
    }

    /// Panics with `what`, the hook runs of every debug log, and the requests so far.
    fn fail(&self, what: &str) -> ! {
        panic!("{what}\n{}", self.diagnostics())
    }

    fn diagnostics(&self) -> String {
        let mut out = String::new();
        let mut logs: Vec<PathBuf> = std::fs::read_dir(&self.logs).unwrap().map(|e| e.unwrap().path()).filter(|p| p.to_string_lossy().ends_with(".debug.log")).collect();
        logs.sort();
        for log in logs {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            out.push_str(&format!("--- hooks and MCP in {} ---\n", log.display()));
            for line in text.lines().filter(|l| {
                let l = l.to_lowercase();
                l.contains("hook") || l.contains("mcp") || l.contains("compact") || l.contains("[error]")
            }) {
                out.push_str(&line.chars().take(600).collect::<String>());
                out.push('\n');
            }
        }
        out.push_str("--- requests ---\n");
        for (n, request) in self.server.requests().iter().enumerate() {
            out.push_str(&format!("#{n} {} {} tools={:?}\n", request.method, request.path, anthropic::tool_names(request)));
            for message in anthropic::messages(request) {
                let text = anthropic::content_text(&message["content"]);
                out.push_str(&format!("  {}: {}\n", message["role"].as_str().unwrap_or("?"), text.chars().take(400).collect::<String>().replace('\n', "⏎")));
            }
        }
        out
    }

    /// The Messages requests (not token counts) from `from` on.
    fn messages_since(&self, from: usize) -> Vec<Request> {
        self.server.requests().into_iter().skip(from).filter(anthropic::is_messages).collect()
    }

    /// Asserts the compaction that ran since request `from`: its summary request, then a
    /// request that shows the model the rule, in the hook's system message and nowhere else.
    fn assert_rule_survives(&self, from: usize, which: &str) {
        let requests = self.messages_since(from);
        let Some(compaction) = requests.iter().position(anthropic::is_compaction_request) else { self.fail(&format!("{which}: no compaction request since #{from}")) };
        let Some(after) = requests.get(compaction + 1) else { self.fail(&format!("{which}: no request after the compaction")) };
        assert!(!SUMMARY.contains(RULE) && !SUMMARY.contains(PLANTED_ID));
        let hook_context = anthropic::session_start_context(after);
        if !hook_context.iter().any(|m| m.contains(RULE)) {
            self.fail(&format!("{which}: the request after the compaction does not carry the rule {RULE:?} in the SessionStart context: {hook_context:?}"));
        }
        // Claude Code's compaction really dropped it: nothing else the model is shown holds it.
        let elsewhere: Vec<String> =
            anthropic::text_blocks(after).into_iter().map(|(role, text)| format!("{role}: {text}")).filter(|t| t.contains(RULE) && !t.contains("SessionStart hook additional context")).collect();
        if !elsewhere.is_empty() {
            self.fail(&format!("{which}: the rule is still in the context after the compaction, so this proves nothing: {elsewhere:?}"));
        }
        let context = hook_context.iter().find(|m| m.contains(RULE)).unwrap();
        let from = context.find("SessionStart hook additional context").unwrap_or(0);
        eprintln!("{which}: the rule came back through the SessionStart hook:\n{}", context[from..].chars().take(1500).collect::<String>());
    }
}

#[test]
#[cfg_attr(no_npm, ignore = "needs Node.js 20+ with npm")]
fn cairn_keeps_the_operators_rule_through_claude_codes_compactions_and_recalls_it_over_mcp() {
    let s = Session::new(300);
    let (project, cairn_home) = (s.project.to_str().unwrap(), s.cairn_home.to_str().unwrap());

    // 1. Installed as a user installs it: hooks and MCP server, for this project.
    let said = cairn(&["claude-code", "install", "--project", project, "--home", cairn_home, "--mcp"], &s.home);
    eprintln!("{said}");
    let mcp: Value = serde_json::from_str(&std::fs::read_to_string(s.project.join(".mcp.json")).unwrap()).unwrap();
    assert_eq!(mcp["mcpServers"]["cairn"]["args"][0], "serve", "{mcp}");

    // 2. The operator's first request, with the rule; the model runs a tool, then answers.
    let first = s.claude(&["-p", &format!("{RULE} Start by showing me notes.txt."), "--allowedTools", "Bash"], &[]);
    let session_id = serde_json::from_str::<Value>(first.trim()).unwrap()["session_id"].as_str().unwrap().to_string();
    let requests = s.messages_since(0);
    if !anthropic::all_tool_results(requests.last().unwrap()).iter().any(|(id, text)| id == "toolu_cat" && text.contains("the build runs with make")) {
        s.fail("the Bash result did not come back to the model");
    }

    // 3. A manual compaction, then a turn: the model sees the rule again.
    let before = s.server.requests().len();
    let compacted = s.claude(&["-p", "--continue", "/compact"], &[]);
    assert!(compacted.contains(&session_id), "the same session: {compacted}");
    s.assert_pre_compact_ran("manual");
    s.claude(&["-p", "--continue", "Next step, please."], &[]);
    s.assert_rule_survives(before, "manual compaction");

    // 4. An automatic compaction (the API refuses the turn as too long): the same.
    let before = s.server.requests().len();
    s.claude(&["-p", "--continue", &format!("{OVERFLOW}: keep going.")], &[("CLAUDE_AUTOCOMPACT_PCT_OVERRIDE", "1")]);
    s.assert_pre_compact_ran("auto");
    s.assert_rule_survives(before, "automatic compaction");

    // 5. Recall over MCP: ToolSearch loads the tool, session_history finds the key in the
    //    archive of the conversation before the compactions.
    let before = s.server.requests().len();
    s.claude(&["-p", "--continue", "RECALL the deploy key from before.", "--allowedTools", "Bash", "mcp__cairn__session_history"], &[]);
    let requests = s.messages_since(before);
    let Some(last) = requests.last() else { s.fail("no request in the recall turn") };
    let results = anthropic::all_tool_results(last);
    let Some((_, recalled)) = results.iter().find(|(id, _)| id == "toolu_recall_call") else { s.fail(&format!("no session_history result came back: {results:?}")) };
    if !recalled.contains(PLANTED_ID) {
        s.fail(&format!("session_history did not find {PLANTED_ID}: {recalled}"));
    }
    assert!(requests.iter().any(|r| anthropic::tool_names(r).iter().any(|t| t == "mcp__cairn__session_history")), "the tool was offered once loaded");
    eprintln!("session_history answered: {}", recalled.chars().take(800).collect::<String>());

    // 6. Cairn reads the transcript Claude Code wrote: no line kind unknown to it, every call
    //    paired, the context after the last compaction opening with Claude Code's summary.
    let transcript = s.home.join(".claude/projects").read_dir().unwrap().flatten().map(|d| d.path().join(format!("{session_id}.jsonl"))).find(|p| p.is_file());
    let Some(transcript) = transcript else { s.fail(&format!("no transcript of session {session_id} under ~/.claude/projects")) };
    let (read, format) = cairn::transcript::formats::parse(&std::fs::read_to_string(&transcript).unwrap(), &transcript.display().to_string()).unwrap();
    assert_eq!(format.to_string(), "claude-code");
    assert!(read.unrecognized.skipped.is_empty(), "line kinds skipped: {}", read.unrecognized);
    assert_eq!(cairn::chain::pairing_problems(&read.entries), Default::default(), "every call paired");
    let summary = read.entries.iter().find(|e| e.origin == cairn::transcript::Origin::Summary).map(|e| e.model_text()).unwrap_or_default();
    assert!(summary.contains(SUMMARY), "Claude Code's summary is the summary entry: {summary:?}");
    assert!(read.entries.iter().any(|e| e.model_text().contains("RECALL the deploy key")), "the last turn is read");
}

/// The same first steps on a short session: Claude Code compacts it on `/compact` whatever its
/// size. `pre-compact`'s handover used not to be committed when the checkpoint was larger than
/// the context ("the context would not shrink (62 → 293 tokens)" in the record), so
/// `session-start` found no committed compaction and injected nothing: the rule was lost.
#[test]
#[cfg_attr(no_npm, ignore = "needs Node.js 20+ with npm")]
fn a_short_sessions_rule_survives_compact_too() {
    let s = Session::new(1);
    let (project, cairn_home) = (s.project.to_str().unwrap(), s.cairn_home.to_str().unwrap());
    cairn(&["claude-code", "install", "--project", project, "--home", cairn_home, "--mcp"], &s.home);
    s.claude(&["-p", &format!("{RULE} Start by showing me notes.txt."), "--allowedTools", "Bash"], &[]);
    let before = s.server.requests().len();
    s.claude(&["-p", "--continue", "/compact"], &[]);
    s.assert_pre_compact_ran("manual");
    s.claude(&["-p", "--continue", "Next step, please."], &[]);
    s.assert_rule_survives(before, "manual compaction of a short session");
}
