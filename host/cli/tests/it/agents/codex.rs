//! Codex 0.169.0, for real: `cairn codex install` into a fresh HOME and CODEX_HOME whose
//! config.toml the user wrote (a custom Responses-API provider on our scripted server, so
//! compaction is Codex's local one), then `codex exec` and `codex exec resume --last` turns.
//! The operator plants a rule and an identifier; the model runs a shell command; a long operator
//! message pushes the rule out of the user messages Codex keeps through a compaction (it keeps
//! the newest ones up to 20,000 tokens); reported usage above `model_auto_compact_token_limit`
//! makes Codex compact before the next turn, and the scripted summary leaves rule and key out.
//!
//! What Codex 0.169.0 allows, and this test asserts:
//! - `PreCompact` runs `cairn codex pre-compact` before the compaction (notify-only: its output
//!   can stop Codex, never add context): the rollout is archived in Cairn's home;
//! - after a compaction Codex queues a `SessionStart` with source `compact` and runs it at the
//!   start of the next turn (`replace_compacted_history` → `queue_pending_session_start_source`
//!   in `codex-rs/core/src/session/mod.rs`); its `additionalContext` reaches the model as a
//!   developer message in the first request after the compaction: the rule is back there, and
//!   only there. So it is after a compaction in the middle of a turn (a tool call's answer
//!   reported above the limit): Codex runs the queued SessionStart before that turn's next
//!   request;
//! - the model calls `session_history` (namespace `mcp__cairn`) and the result holds the key;
//! - `session_history` is in the very first request, from a cold compiled-code cache of the
//!   test's own (install fills it; it is emptied again, as a `cairn` updated after the install
//!   finds it): Codex does not wait for a slow MCP server, and `cairn serve` answers it at once
//!   while its plugins compile;
//! - Cairn reads the rollout Codex wrote: no line kind skipped, every call answered;
//! - `cairn codex compact` replaces Codex's compaction between two runs: `codex exec resume`
//!   goes on from the `compacted` line it appends (Cairn's summary and kept entries).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cairn::record::Event;
use cairn::storage::{ConversationKey, Home};
use cairn::transcript::{formats, Origin, Part};
use serde_json::json;

use super::model_server::openai_responses::{self as responses, Usage};
use super::model_server::{ModelServer, Reply, Request};
use super::{npm, run};

/// The operator's rule and identifier, planted in the first prompt.
const RULE: &str = "Never edit files under vendor/; the deploy key is KEY-7f3a9c.";
const PLANTED_ID: &str = "KEY-7f3a9c";
/// What the scripted summarizer answers: the work, without the rule or the key.
const SUMMARY: &str = "The user asked to see the project notes; they were shown (the build runs with make). Next: continue the work.";
/// Begins the long operator message that pushes the rule out of what Codex keeps.
const FILLER: &str = "FILLER";
/// `model_auto_compact_token_limit` in the user's config, and what the filler turn reports.
const AUTO_COMPACT_LIMIT: u64 = 50_000;
const FILLER_USAGE: u64 = 100_000;
const SMALL_USAGE: u64 = 900;
/// Each `codex exec` run's limit: killed and reported beyond it.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// The scripted model: one decision per request, from what the request holds (and whether the
/// mid-turn tool call was made: after that compaction the call is no longer in the context).
fn script(request: &Request, mid_turn_called: &AtomicBool) -> Reply {
    if !responses::is_responses(request) {
        return Reply::not_found();
    }
    let small = Usage::new(SMALL_USAGE, 20);
    if responses::is_compaction_request(request) {
        return responses::text(SUMMARY, small);
    }
    match responses::last_tool_output(request) {
        Some((id, _)) if id == "call_recall" => return responses::text("The archive has it.", small),
        Some((id, _)) if id == "call_shell" => return responses::text("notes.txt says the build runs with make.", small),
        _ => {}
    }
    let prompt = responses::last_prompt(request);
    if prompt.contains("MIDTURN") {
        if mid_turn_called.swap(true, Ordering::SeqCst) {
            return responses::text("The step is done.", small);
        }
        return responses::function_call("call_mid", "exec_command", json!({"cmd": "echo step"}), Usage::new(FILLER_USAGE, 20));
    }
    if prompt.contains("RECALL") {
        return responses::namespaced_call("call_recall", "mcp__cairn", "session_history", json!({"action": "search", "query": PLANTED_ID}), small);
    }
    if prompt.contains("notes.txt") {
        return responses::function_call("call_shell", "exec_command", json!({"cmd": "cat notes.txt"}), small);
    }
    if prompt.starts_with(FILLER) {
        return responses::text("Noted.", Usage::new(FILLER_USAGE, 20));
    }
    responses::text("Done; continuing.", small)
}

/// The user's own config, as they wrote it: Cairn's install must keep every byte of it.
fn user_config(base_url: &str) -> String {
    format!(
        r#"# My Codex settings: a local model server.
model = "scripted-model"
model_provider = "scripted"
approval_policy = "never"   # no questions in exec mode
sandbox_mode = "danger-full-access"
model_context_window = 1000000
model_auto_compact_token_limit = {AUTO_COMPACT_LIMIT}

[model_providers.scripted]
name = "scripted"
base_url = "{base_url}/v1"
env_key = "SCRIPTED_API_KEY"
wire_api = "responses"

# A hook of my own, never trusted (so Codex skips it): Cairn's group comes second.
[[hooks.PreCompact]]
[[hooks.PreCompact.hooks]]
type = "command"
command = "echo mine"
"#
    )
}

/// One fresh user of Codex: HOME, CODEX_HOME, project, Cairn home, and the model server.
struct Session {
    _dir: tempfile::TempDir,
    codex: PathBuf,
    home: PathBuf,
    codex_home: PathBuf,
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
        // The package's native binary comes as an optional dependency: no install script needed.
        let codex = npm::bin(&npm::install(npm::CODEX, false), "codex");
        let dir = tempfile::tempdir().unwrap();
        let (home, project, cairn_home, logs) = (dir.path().join("home"), dir.path().join("spotter"), dir.path().join("cairn"), dir.path().join("logs"));
        let (codex_home, cache) = (home.join(".codex"), dir.path().join("cache"));
        for d in [&codex_home, &project, &logs] {
            std::fs::create_dir_all(d).unwrap();
        }
        let notes: String = (0..300).map(|i| format!("line {i}: the build runs with make; step {i} compiles module_{i}\n")).collect();
        std::fs::write(project.join("notes.txt"), notes).unwrap();
        let mid_turn_called = AtomicBool::new(false);
        let server = ModelServer::start(move |request| script(request, &mid_turn_called));
        std::fs::write(codex_home.join("config.toml"), user_config(&server.base_url)).unwrap();
        Session { _dir: dir, codex, home, codex_home, project, cairn_home, cache, logs, server, runs: std::cell::Cell::new(0) }
    }

    /// `codex exec ARGS` in the project, offline; its stderr (where Codex reports hook runs).
    /// On a failure or a timeout it panics with everything needed to see why.
    fn exec(&self, args: &[&str]) -> String {
        let n = self.runs.get() + 1;
        self.runs.set(n);
        let mut command = Command::new(&self.codex);
        command
            .arg("exec")
            .arg("--skip-git-repo-check")
            .args(args)
            .current_dir(&self.project)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("CODEX_HOME", &self.codex_home)
            .env("CAIRN_CACHE_DIR", &self.cache)
            .env("SCRIPTED_API_KEY", "offline-test")
            .env("CAIRN_LOG", "warn");
        let (status, stdout, stderr) = run(command, &self.logs.join(format!("codex-{n}")), RUN_TIMEOUT);
        if status != Some(0) {
            let head: Vec<String> = args.iter().map(|a| a.chars().take(80).collect()).collect();
            self.fail(&format!("codex exec {head:?} {}\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}", status.map_or("timed out".to_string(), |c| format!("exited {c}"))));
        }
        stderr
    }

    /// Panics with `what` and the requests so far.
    fn fail(&self, what: &str) -> ! {
        panic!("{what}\n{}", self.diagnostics())
    }

    fn diagnostics(&self) -> String {
        let mut out = String::from("--- requests ---\n");
        for (n, request) in self.server.requests().iter().enumerate() {
            out.push_str(&format!("#{n} {} {} tools={:?}\n", request.method, request.path, responses::tool_names(request)));
            for item in responses::input(request) {
                let text = match item["type"].as_str() {
                    Some("function_call") => format!("call {} {}{} {}", item["call_id"], item["namespace"].as_str().unwrap_or(""), item["name"], item["arguments"]),
                    Some("function_call_output") => format!("output {} {}", item["call_id"], item["output"]),
                    _ => format!("{}: {}", item["role"].as_str().unwrap_or("?"), responses::text_of(&item)),
                };
                out.push_str(&format!("  {}\n", text.chars().take(300).collect::<String>().replace('\n', "⏎")));
            }
        }
        out
    }

    fn requests_since(&self, from: usize) -> Vec<Request> {
        self.server.requests().into_iter().skip(from).filter(responses::is_responses).collect()
    }

    /// The one rollout Codex wrote for this session.
    fn rollout(&self) -> PathBuf {
        fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    walk(&path, found);
                } else if path.file_name().is_some_and(|n| n.to_string_lossy().starts_with("rollout-")) {
                    found.push(path);
                }
            }
        }
        let mut found = Vec::new();
        walk(&self.codex_home.join("sessions"), &mut found);
        match found.as_slice() {
            [one] => one.clone(),
            _ => self.fail(&format!("expected one rollout, found {found:?}")),
        }
    }
}

/// What a request carries that a rollout can hold (its `instructions`, the base prompt, and its
/// input items), in Cairn's tokens; and apart, its tool schemas, which no rollout line records.
fn request_tokens(request: &Request) -> (u64, u64) {
    let tokenizer = cairn::tokenizer::Tokenizer::default();
    let count = |text: &str| u64::from(tokenizer.count(text));
    let mut context = count(request.body["instructions"].as_str().unwrap_or_default());
    for item in responses::input(request) {
        context += match item["type"].as_str() {
            Some("function_call") => count(item["name"].as_str().unwrap_or_default()) + count(item["arguments"].as_str().unwrap_or_default()),
            Some("function_call_output") => count(&item["output"].as_str().map_or_else(|| item["output"].to_string(), str::to_string)),
            _ => count(&responses::text_of(&item)),
        };
    }
    (context, count(&request.body["tools"].to_string()))
}

fn cairn(args: &[&str], s: &Session) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_cairn")).args(args).env("HOME", &s.home).env("CODEX_HOME", &s.codex_home).env("CAIRN_CACHE_DIR", &s.cache).env("CAIRN_LOG", "error").output().unwrap();
    assert!(out.status.success(), "cairn {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
#[cfg_attr(no_npm, ignore = "needs Node.js 20+ with npm")]
fn cairn_brings_the_operators_rule_back_after_codexs_compaction_and_recalls_it_over_mcp() {
    let s = Session::new();
    let config_path = s.codex_home.join("config.toml");
    let users = std::fs::read_to_string(&config_path).unwrap();

    // 1. Installed as a user installs it: into $CODEX_HOME/config.toml, after the user's text.
    let said = cairn(&["codex", "install", "--home", s.cairn_home.to_str().unwrap()], &s);
    eprintln!("{said}");
    let installed = std::fs::read_to_string(&config_path).unwrap();
    assert!(installed.starts_with(&users) && installed.contains("[mcp_servers.cairn]"), "{installed}");
    assert!(said.contains(&format!("bundled plugins into the cache at {}", s.cache.display())), "install compiles the plugins ahead: {said}");
    // As a `cairn` updated after the install finds it: nothing compiled for it.
    std::fs::remove_dir_all(&s.cache).unwrap();

    // 2. The operator's first request, with the rule; the model runs a shell command.
    s.exec(&[&format!("{RULE} Start by showing me notes.txt.")]);
    let first = s.requests_since(0);
    let Some(last) = first.last() else { s.fail("the first turn reached no model") };
    if responses::namespace_tools(&first[0], "mcp__cairn") != ["session_history"] {
        s.fail("the first request to the model lacks Cairn's session_history: the server did not answer Codex in time");
    }
    if !responses::tool_outputs(last).iter().any(|(id, out)| id == "call_shell" && out.contains("the build runs with make")) {
        s.fail("the shell command's output did not come back to the model");
    }
    if responses::namespace_tools(last, "mcp__cairn") != ["session_history"] {
        s.fail("Cairn's MCP server should offer session_history alone (nothing in Codex carries out context_maintenance)");
    }
    // Cairn counts the session as the model received it: the turn's last request (the rollout
    // adds only the final answer) — its base prompt included — within 15%. Over by some: the
    // rollout records the whole base prompt, and Codex leaves its `update_plan` sections out of
    // the request when that tool is off (here, ~900 tokens). The tool schemas the request also
    // carries are in no rollout line: said, not counted. (Without the base prompt Cairn
    // counted under half the request.)
    let (request, tools) = request_tokens(last);
    let rollout = s.rollout();
    let (mut transcript, _) = formats::parse(&std::fs::read_to_string(&rollout).unwrap(), &rollout.display().to_string()).unwrap();
    cairn::tokenizer::Tokenizer::default().count_transcript(&mut transcript);
    let counted = transcript.total_tokens();
    eprintln!("the first turn's last request: {request} tokens of instructions and input (+{tools} of tool schemas); Cairn counts the rollout at {counted}");
    if counted.abs_diff(request) * 100 > request * 15 {
        s.fail(&format!("Cairn counts the rollout at {counted} tokens, the request Codex sent holds {request} (outside 15%)"));
    }

    // 3. A long operator message; the model reports a context above the compaction limit.
    let filler: String = std::iter::once(FILLER.to_string()).chain((0..2_100).map(|i| format!("log line {i}: compiler output for module_{i} ok"))).collect::<Vec<_>>().join(" ");
    s.exec(&["resume", "--last", &filler]);

    // 4. The next turn: Codex compacts first. (a) PreCompact archived the rollout.
    let before = s.server.requests().len();
    let said = s.exec(&["resume", "--last", "Next step, please."]);
    for hook in ["PreCompact", "SessionStart"] {
        if !said.contains(&format!("hook: {hook} Completed")) {
            s.fail(&format!("Codex did not report Cairn's {hook} hook as completed:\n{said}"));
        }
    }
    let rollout = s.rollout();
    let store = Home::open(&s.cairn_home).unwrap().existing_conversation(&ConversationKey::derive("spotter")).unwrap();
    let source = rollout.display().to_string();
    assert!(store.events().iter().any(|e| matches!(e, Event::Snapshot { source: s, .. } if *s == source)), "pre-compact recorded no snapshot of {source}");
    let archive_id = store
        .events()
        .iter()
        .find_map(|e| match e {
            Event::Compaction(c) if c.committed_by.is_some() => Some(c.archive_id.clone()),
            _ => None,
        })
        .unwrap_or_else(|| s.fail("pre-compact committed no handover"));
    assert!(s.cairn_home.join("conversations/spotter/archives").join(&archive_id).exists(), "archive {archive_id} is not in Cairn's home");

    // (b) The first request after the compaction shows the model the rule, in Cairn's
    //     SessionStart context and nowhere else: Codex's compaction really dropped it.
    let requests = s.requests_since(before);
    let Some(compaction) = requests.iter().position(responses::is_compaction_request) else { s.fail("no compaction request in the third turn") };
    let Some(after) = requests.get(compaction + 1) else { s.fail("no request after the compaction") };
    assert!(!SUMMARY.contains(PLANTED_ID));
    let messages = responses::messages(after);
    assert!(messages.iter().any(|(role, text)| role == "user" && text.starts_with(responses::SUMMARY_PREFIX) && text.contains(SUMMARY)), "Codex's summary is in the context");
    let Some((_, context)) = messages.iter().find(|(role, text)| role == "developer" && text.starts_with("# Cairn: the record of this session before compaction")) else {
        s.fail("the request after the compaction has no Cairn context")
    };
    if !context.contains(RULE) || !context.contains("before Codex compacted it") {
        s.fail(&format!("Cairn's context does not carry the rule {RULE:?}:\n{context}"));
    }
    let elsewhere: Vec<&(String, String)> = messages.iter().filter(|(_, text)| text.contains(RULE) && !std::ptr::eq(text, context)).collect();
    if !elsewhere.is_empty() {
        s.fail(&format!("the rule is still in Codex's own context after the compaction, so this proves nothing: {elsewhere:?}"));
    }
    eprintln!("the rule came back through the SessionStart hook:\n{context}");
    //     Only what Codex lost: not the long message Codex kept (its head, word for word), and
    //     no answered request as the next action (both earlier requests had their answer).
    if !messages.iter().any(|(role, text)| role == "user" && text.starts_with(FILLER)) {
        s.fail("Codex did not keep the long message through its compaction, so this proves nothing");
    }
    if context.contains(FILLER) {
        s.fail(&format!("Cairn's context repeats the long operator message Codex kept:\n{context}"));
    }
    let next = context.split("## Next action in the record\n").nth(1).and_then(|rest| rest.lines().next());
    if let Some(next) = next.filter(|n| n.contains(FILLER) || n.contains("Start by showing me notes.txt") || RULE.contains(n.trim_start_matches("- "))) {
        s.fail(&format!("Cairn's context names a request Codex already answered as the next action: {next}\n{context}"));
    }

    // (c) Recall over MCP: session_history finds the key in the archive.
    let before = s.server.requests().len();
    s.exec(&["resume", "--last", "RECALL the deploy key from before."]);
    let requests = s.requests_since(before);
    let Some(last) = requests.last() else { s.fail("no request in the recall turn") };
    let call = responses::tool_calls(last).into_iter().find(|(id, ..)| id == "call_recall");
    assert_eq!(call.map(|(_, ns, name, _)| (ns, name)), Some(("mcp__cairn".to_string(), "session_history".to_string())));
    let Some((_, recalled)) = responses::tool_outputs(last).into_iter().find(|(id, _)| id == "call_recall") else { s.fail("no session_history result came back") };
    if !recalled.contains(PLANTED_ID) || recalled.contains("requires approval") {
        s.fail(&format!("session_history did not find {PLANTED_ID}: {recalled}"));
    }
    let (unanswered, orphans) = responses::unpaired(last);
    assert!(unanswered.is_empty() && orphans.is_empty(), "calls without results {unanswered:?}, results without calls {orphans:?}");
    eprintln!("session_history answered: {}", recalled.chars().take(600).collect::<String>());

    // (d) Cairn reads the rollout Codex wrote: nothing skipped, every call answered, Codex's
    //     summary as the compaction's summary entry.
    let text = std::fs::read_to_string(&rollout).unwrap();
    let (transcript, format) = formats::parse(&text, &source).unwrap();
    assert_eq!(format.to_string(), "codex");
    assert!(transcript.unrecognized.skipped.is_empty(), "line kinds skipped: {:?}", transcript.unrecognized);
    let calls: Vec<&str> = transcript.entries.iter().flat_map(|e| e.tool_call_ids()).collect();
    let results: Vec<&str> = transcript.entries.iter().flat_map(|e| e.tool_result_ids()).collect();
    assert!(calls.contains(&"call_recall"), "the recall call is read: {calls:?}");
    assert_eq!(calls.iter().filter(|c| !results.contains(c)).count() + results.iter().filter(|r| !calls.contains(r)).count(), 0, "calls {calls:?}, results {results:?}");
    let recall = transcript.entries.iter().flat_map(|e| &e.parts).find_map(|p| match p {
        Part::ToolCall { id, name, .. } if id == "call_recall" => Some(name.clone()),
        _ => None,
    });
    assert_eq!(recall.as_deref(), Some("mcp__cairn__session_history"));
    let summary = transcript.entries.iter().find(|e| e.origin == Origin::Summary).map(|e| e.model_text()).unwrap_or_default();
    assert!(summary.contains(SUMMARY), "the summary entry: {summary:?}");

    // 5. A compaction in the middle of a turn: the tool's answer reports a context above the
    //    limit, Codex compacts before the turn's next request, and that request has the rule.
    let before = s.server.requests().len();
    s.exec(&["resume", "--last", "MIDTURN: run the next step."]);
    let requests = s.requests_since(before);
    let Some(compaction) = requests.iter().position(responses::is_compaction_request) else { s.fail("no compaction in the middle of the turn") };
    let Some(after) = requests.get(compaction + 1) else { s.fail("no request after the mid-turn compaction") };
    assert!(responses::last_prompt(after).contains("MIDTURN") && responses::last_user_text(after).starts_with(responses::SUMMARY_PREFIX), "the same turn goes on after the summary");
    let messages = responses::messages(after);
    if !messages.iter().any(|(role, text)| role == "developer" && text.starts_with("# Cairn: the record") && text.contains(RULE)) {
        s.fail("the request after the mid-turn compaction does not carry the rule in Cairn's context");
    }

    // 6. Cairn's compaction in place of Codex's, between two runs: `cairn codex compact`
    //    appends a `compacted` line, and the resumed session goes on from Cairn's context: its
    //    summary (with the rule), without the long message, every call answered.
    let said = cairn(&["codex", "compact", rollout.to_str().unwrap(), "--home", s.cairn_home.to_str().unwrap()], &s);
    eprintln!("{said}");
    let text = std::fs::read_to_string(&rollout).unwrap();
    let written: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(written["type"], "compacted", "{written}");
    let cairns_summary = written["payload"]["message"].as_str().unwrap().to_string();
    let before = s.server.requests().len();
    s.exec(&["resume", "--last", "After Cairn's compaction: next step."]);
    let requests = s.requests_since(before);
    let Some(first) = requests.first() else { s.fail("the turn after Cairn's compaction reached no model") };
    let messages = responses::messages(first);
    if !messages.iter().any(|(role, text)| role == "user" && *text == cairns_summary) || !cairns_summary.contains(RULE) {
        s.fail(&format!("the resumed session does not start from Cairn's summary (holding the rule):\n{cairns_summary}"));
    }
    if messages.iter().any(|(_, text)| text.starts_with(FILLER)) {
        s.fail("the long message Cairn compacted away is still in the resumed context");
    }
    let (unanswered, orphans) = responses::unpaired(first);
    assert!(unanswered.is_empty() && orphans.is_empty(), "calls without results {unanswered:?}, results without calls {orphans:?}");
    let (transcript, _) = formats::parse(&std::fs::read_to_string(&rollout).unwrap(), &source).unwrap();
    assert!(transcript.unrecognized.skipped.is_empty(), "{:?}", transcript.unrecognized);
    let summary = transcript.entries.iter().find(|e| e.origin == Origin::Summary).map(|e| e.model_text());
    assert_eq!(summary.as_deref().map(str::trim_end), Some(cairns_summary.as_str()), "Cairn reads its own compaction back as the summary");

    // 7. Uninstall gives the user their config back, byte for byte.
    cairn(&["codex", "uninstall"], &s);
    assert_eq!(std::fs::read_to_string(&config_path).unwrap(), users);
}
