//! OpenCode 1.18.33 (`opencode-ai`, pinned in `npm.rs`) with Cairn installed as a user installs
//! it (`cairn opencode install --project`: the plugin in `.opencode/plugin/`, the MCP server in
//! `opencode.json`), against the scripted chat-completions server, in headless mode
//! (`opencode run`, `--continue`). The operator plants a rule in the first prompt; a tool output
//! holds an id. A turn whose usage is over OpenCode's limit makes it compact by itself, and the
//! compaction must be Cairn's: the summary OpenCode saves and sends on is Cairn's (the scripted
//! summarizer's answer never reaches a later request, and its call carries no history), the rule
//! is in the next request, every tool call is paired; `cairn_session_history` finds the planted
//! id; Cairn reads `opencode export` of the session with nothing unrecognized; and uninstall
//! gives `opencode.json` back byte for byte. A 600-line log Cairn keeps is in the next request
//! to its last line (or behind an `artifact://` that reads back to it). And when Cairn commits
//! nothing (a one-turn session: nothing between the operator's request and the verbatim tail),
//! OpenCode's own summary is kept, Cairn's record with the operator's rule follows it, the user
//! is told, and recall still finds the planted id.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::model_server::openai_chat::{self as chat, Usage};
use super::model_server::{ModelServer, Reply, Request};
use super::{kill_group, npm, tail};
use crate::support::node_packages;

const CONTEXT: u64 = 32_000;
const OUTPUT: u64 = 4_000;
const RULE: &str = "Never edit files under vendor/ (rule R-5521).";
const PLANTED: &str = "PLANTED-7f3a9c";
/// What the scripted summarizer answers: it must never be the summary OpenCode keeps.
const SCRIPTED_SUMMARY: &str = "SCRIPTED SUMMARY (must not be kept)";
const RUN_TIMEOUT: Duration = Duration::from_secs(180);
/// The last line of the 600-line build2.log: in the context after the compaction, or recoverable.
const LAST_LINE: &str = "rebuild line 0599: all 599 modules built, artefact checksum END-91d2e7";

/// A small reply's usage, and one over OpenCode's limit (context − output).
const LOW: Usage = Usage { prompt_tokens: 3_000, completion_tokens: 40 };
const HIGH: Usage = Usage { prompt_tokens: CONTEXT - 1_000, completion_tokens: 60 };

/// The scripted model: by the run's tag in the operator's last message and the last tool result.
fn script(project: &Path) -> impl Fn(&Request) -> Reply + Send + Sync + 'static {
    let notes = project.join("notes.txt").display().to_string();
    move |req: &Request| {
        if chat::is_opencode_summarization(req) {
            return chat::text(SCRIPTED_SUMMARY, LOW);
        }
        if chat::is_opencode_title(req) {
            return chat::text("Reading logs", LOW);
        }
        let user = chat::last_user_text(req);
        let last_result = chat::tool_results(req).last().map(|(id, _)| id.clone()).filter(|_| chat::last_role(req) == "tool");
        let run = ["RUN1", "RUN2", "RUN3", "SOLO", "RECALL"].into_iter().find(|r| user.contains(r)).unwrap_or("");
        match (run, last_result.as_deref()) {
            ("RUN1", None) => chat::tool_calls(&[("call_r1_bash", "bash", json!({"command": "cat build.log", "description": "Show the build log"}))], LOW),
            ("RUN1", Some("call_r1_bash")) => chat::tool_calls(&[("call_r1_read", "read", json!({"filePath": notes}))], LOW),
            ("RUN1", Some(_)) => chat::text("RUN1 done: the build log and the notes are read.", LOW),
            ("RUN2", None) => chat::tool_calls(&[("call_r2_bash", "bash", json!({"command": "cat build2.log", "description": "Show the second log"}))], LOW),
            // Over OpenCode's limit: it compacts after this turn.
            ("RUN2", Some(_)) => chat::text("RUN2 done: the second log is read.", HIGH),
            ("RUN3", None) => chat::tool_calls(&[("call_r3_history", "cairn_session_history", json!({"action": "search", "query": PLANTED}))], LOW),
            ("RUN3", Some(_)) => chat::text("RUN3 done: found it in the session history.", LOW),
            // One turn, over OpenCode's limit at its end: nothing lies between the operator's
            // request and the verbatim tail for Cairn to compact.
            ("SOLO", None) => chat::tool_calls(&[("call_solo_bash", "bash", json!({"command": "cat token.txt", "description": "Show the token"}))], LOW),
            ("SOLO", Some("call_solo_bash")) => chat::text("SOLO done: the token file is read.", HIGH),
            ("RECALL", None) => chat::tool_calls(&[("call_recall_history", "cairn_session_history", json!({"action": "search", "query": PLANTED}))], LOW),
            ("RECALL", Some(_)) => chat::text("RECALL done.", LOW),
            _ => chat::text("Nothing more to do.", LOW),
        }
    }
}

struct Run {
    args: Vec<String>,
    status: Option<std::process::ExitStatus>,
    stdout: String,
    stderr: String,
    elapsed: Duration,
}

struct OpenCode {
    bin: PathBuf,
    home: tempfile::TempDir,
    _projects: tempfile::TempDir,
    project: PathBuf,
    /// `opencode.json` as the user wrote it, before `cairn opencode install`.
    config: String,
    cairn_home: tempfile::TempDir,
    server: ModelServer,
    runs: Vec<Run>,
}

impl OpenCode {
    /// OpenCode with Cairn installed in a fresh project; with `in_process`, the Node package's
    /// tarballs installed into the project too (`npm install`), where the plugin finds them.
    fn setup(in_process: Option<&node_packages::Packed>) -> OpenCode {
        let install = npm::install(npm::OPENCODE, false);
        // npm skips the package's postinstall; its platform binary runs as is.
        let bin = install.join("node_modules/opencode-linux-x64/bin/opencode");
        assert!(bin.is_file(), "{} is missing", bin.display());
        let projects = tempfile::tempdir().unwrap();
        let project = projects.path().join("shop");
        std::fs::create_dir(&project).unwrap();
        let project = project.canonicalize().unwrap();
        let server = ModelServer::start(script(&project));

        let lines = |tag: &str, n: usize| -> String { (0..n).map(|i| format!("{tag} line {i:04}: compiling module_{i} ... ok (warnings: {})\n", i % 7)).collect() };
        // The planted id is in a tool output that Cairn's compaction sets aside (into its archive).
        let mut build = lines("build", 600);
        let at = build.match_indices('\n').nth(299).unwrap().0 + 1;
        build.insert_str(at, &format!("build line 0300: release signed with deploy token {PLANTED}\n"));
        std::fs::write(project.join("build.log"), build).unwrap();
        std::fs::write(project.join("build2.log"), lines("rebuild", 599) + LAST_LINE + "\n").unwrap();
        std::fs::write(project.join("token.txt"), format!("deploy token {PLANTED}\n")).unwrap();
        std::fs::write(project.join("notes.txt"), "Notes: the service listens on port 8431.\n").unwrap();
        let config = json!({
            "$schema": "https://opencode.ai/config.json",
            "provider": {"scripted": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Scripted",
                "options": {"baseURL": format!("{}/v1", server.base_url), "apiKey": "scripted-key"},
                "models": {"scripted-model": {"name": "Scripted", "limit": {"context": CONTEXT, "output": OUTPUT}}},
            }},
            "model": "scripted/scripted-model",
            "small_model": "scripted/scripted-model",
        });
        let config = serde_json::to_string_pretty(&config).unwrap() + "\n";
        std::fs::write(project.join("opencode.json"), &config).unwrap();
        if let Some(packed) = in_process {
            let out = Command::new("npm")
                .args(["install", "--no-audit", "--no-fund", "--loglevel=error"])
                .arg(&packed.main)
                .arg(&packed.native)
                .current_dir(&project)
                .output()
                .unwrap_or_else(|e| panic!("npm: {e}"));
            assert!(out.status.success(), "npm install of the cairn-compaction tarballs failed:\n{}", String::from_utf8_lossy(&out.stderr));
        }

        let oc = OpenCode { bin, home: tempfile::tempdir().unwrap(), _projects: projects, project, config, cairn_home: tempfile::tempdir().unwrap(), server, runs: Vec::new() };
        let out = Command::new(env!("CARGO_BIN_EXE_cairn")).args(["opencode", "install", "--project"]).arg(&oc.project).arg("--home").arg(oc.cairn_home.path()).output().unwrap();
        assert!(out.status.success(), "cairn opencode install: {}", String::from_utf8_lossy(&out.stderr));
        oc
    }

    /// Runs `opencode ARGS` in the project, as a user; kills its process group (and fails) after
    /// RUN_TIMEOUT.
    fn run(&mut self, args: &[&str]) -> usize {
        let stdout_file = self.home.path().join(format!("stdout-{}.txt", self.runs.len()));
        let mut cmd = Command::new(&self.bin);
        cmd.args(args)
            .current_dir(&self.project)
            // OpenCode takes its directory from PWD when set (cargo's would be the repository).
            .env("PWD", &self.project)
            .env("HOME", self.home.path())
            .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
            .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
            .env("CAIRN_LOG", "error")
            .stdin(Stdio::null())
            // A file, not a pipe: OpenCode exits before a long stdout (an export) is written
            // through a pipe, and the reader gets it cut.
            .stdout(std::fs::File::create(&stdout_file).unwrap())
            .stderr(Stdio::piped());
        for var in ["XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME", "OPENCODE_CONFIG", "OPENCODE_CONFIG_DIR"] {
            cmd.env_remove(var);
        }
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let started = Instant::now();
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{}: {e}", self.bin.display()));
        let drain = |mut pipe: Box<dyn Read + Send>| {
            std::thread::spawn(move || {
                let mut out = Vec::new();
                let _ = pipe.read_to_end(&mut out);
                String::from_utf8_lossy(&out).into_owned()
            })
        };
        let err = drain(Box::new(child.stderr.take().unwrap()));
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break Some(status);
            }
            if started.elapsed() > RUN_TIMEOUT {
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        // The whole group: opencode and whatever it left running (MCP servers, `cairn serve`).
        let _ = kill_group(child.id());
        if status.is_none() {
            let _ = child.wait();
        }
        self.runs.push(Run {
            args: args.iter().map(|s| s.to_string()).collect(),
            status,
            stdout: std::fs::read_to_string(&stdout_file).unwrap_or_default(),
            stderr: err.join().unwrap(),
            elapsed: started.elapsed(),
        });
        let i = self.runs.len() - 1;
        match self.runs[i].status {
            None => self.fail(&format!("`opencode {}` did not exit within {RUN_TIMEOUT:?}", args.join(" "))),
            Some(s) if !s.success() => self.fail(&format!("`opencode {}` failed: {s}", args.join(" "))),
            Some(_) => {}
        }
        i
    }

    /// The one session's id (`opencode session list`).
    fn session_id(&mut self) -> String {
        let i = self.run(&["session", "list"]);
        let ids: Vec<String> = self.runs[i].stdout.split_whitespace().filter(|w| w.starts_with("ses_")).map(str::to_string).collect();
        if ids.len() != 1 {
            self.fail(&format!("expected one session, `opencode session list` named {ids:?}"));
        }
        ids[0].clone()
    }

    /// Fails unless `line` is in `text`, or in an artifact an `artifact://` URI of `text` names
    /// (read back as the recall tool reads it).
    fn recoverable(&self, text: &str, line: &str, what: &str) {
        if text.contains(line) {
            return;
        }
        let uris: Vec<&str> = text.match_indices("artifact://").map(|(at, _)| text[at..].split(|c: char| !(c.is_ascii_alphanumeric() || "-:/".contains(c))).next().unwrap()).collect();
        for uri in &uris {
            let out = Command::new(env!("CARGO_BIN_EXE_cairn")).args(["artifact", uri, "--home"]).arg(self.cairn_home.path()).env("CAIRN_LOG", "error").output().unwrap();
            if String::from_utf8_lossy(&out.stdout).contains(line) {
                return;
            }
        }
        let seen = text.rfind("rebuild line").map_or("", |at| &text[at.saturating_sub(300)..(at + 300).min(text.len())]);
        self.fail(&format!("{what} is neither in the request after the compaction nor in an artifact it names ({uris:?}); the log ends there with: {seen}"));
    }

    /// Fails with everything needed to see why: each run's output, OpenCode's log, the requests.
    fn fail(&self, message: &str) -> ! {
        let mut report = format!("{message}\n");
        for run in &self.runs {
            report.push_str(&format!(
                "\n=== opencode {} → {:?} after {:?}\n--- stdout\n{}\n--- stderr\n{}\n",
                run.args.join(" "),
                run.status,
                run.elapsed,
                tail(&run.stdout, 3_000),
                tail(&run.stderr, 6_000)
            ));
        }
        let logs = self.home.path().join(".local/share/opencode/log");
        for entry in std::fs::read_dir(&logs).into_iter().flatten().flatten() {
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            let wanted: Vec<&str> = text.lines().filter(|l| l.contains("ERROR") || l.contains("service=cairn") || l.contains("plugin")).collect();
            report.push_str(&format!("\n=== {} (errors, plugin lines)\n{}\n", entry.path().display(), tail(&wanted.join("\n"), 6_000)));
        }
        report.push_str("\n=== model requests\n");
        for (n, req) in self.server.requests().iter().enumerate() {
            let roles: Vec<&str> = chat::messages(req).iter().map(|m| m["role"].as_str().unwrap_or("?")).collect();
            report.push_str(&format!("#{n} {} roles={roles:?} summarizer={} last-user={:?}\n", req.path, chat::is_opencode_summarization(req), tail(&chat::last_user_text(req), 300)));
        }
        panic!("{report}");
    }
}

/// Steps 1–3 of an OpenCode session with Cairn: a turn over OpenCode's limit makes it compact,
/// and the compaction is Cairn's (summary, rule, the long log recoverable, pairing, the planted
/// id set aside); then `cairn_session_history` finds the planted id.
fn compaction_is_cairns_and_recall_finds_the_id(oc: &mut OpenCode) {
    // 1. The operator's rule, and tool calls (bash, read); build.log holds the planted id.
    oc.run(&["run", &format!("RUN1: {RULE} Read build.log and notes.txt.")]);
    // 2. Continued; the last reply's usage is over OpenCode's limit: it compacts, then goes on
    //    by itself ("Continue if you have next steps…").
    let before = oc.server.requests().len();
    oc.run(&["run", "--continue", "RUN2: now read build2.log."]);
    let requests = oc.server.requests();
    let Some(at) = requests.iter().position(chat::is_opencode_summarization) else { oc.fail("OpenCode did not compact (no summarizer call)") };
    if at < before {
        oc.fail("OpenCode compacted before RUN2");
    }
    // OpenCode cannot skip its summarizer's call; Cairn's plugin sends it no history.
    let summarizer = chat::request_text(&requests[at]);
    if summarizer.contains("build line") || summarizer.contains("RUN1") {
        oc.fail(&format!("the summarizer's call carries the history: {}", tail(&summarizer, 1_500)));
    }
    let Some(after) = requests[at + 1..].iter().find(|r| !chat::is_opencode_title(r)) else { oc.fail("no request after the compaction") };
    let text = chat::request_text(after);
    if !text.contains("condensed by Cairn (archive a-") {
        oc.fail(&format!("the request after the compaction does not carry Cairn's summary: {}", tail(&text, 2_000)));
    }
    if text.contains(SCRIPTED_SUMMARY) {
        oc.fail("the request after the compaction carries the scripted summarizer's answer");
    }
    if !text.contains(RULE) {
        oc.fail(&format!("the request after the compaction lost the operator's rule {RULE:?}: {}", tail(&text, 2_000)));
    }
    // The 600-line log Cairn keeps verbatim but OpenCode's tail does not: whole, to its last line.
    oc.recoverable(&text, LAST_LINE, "the last line of the 600-line build2.log");
    // The planted id was in a tool output Cairn set aside: only session_history brings it back.
    if text.contains(PLANTED) {
        oc.fail("the planted id is still in the context after the compaction: nothing was set aside");
    }
    let (unanswered, orphans) = chat::unpaired(after);
    if !unanswered.is_empty() || !orphans.is_empty() {
        oc.fail(&format!("after compaction: calls without results {unanswered:?}, results without calls {orphans:?}"));
    }
    let tools = chat::tool_names(after);
    if !tools.iter().any(|t| t == "cairn_session_history") || tools.iter().any(|t| t.contains("context_maintenance")) {
        oc.fail(&format!("OpenCode offers {tools:?}: cairn_session_history (and no context_maintenance) expected"));
    }

    // 3. The agent asks Cairn's session_history for the planted id; the result carries it.
    let before = oc.server.requests().len();
    oc.run(&["run", "--continue", "RUN3: which deploy token did build.log name?"]);
    let requests = oc.server.requests();
    let history = requests[before..]
        .iter()
        .flat_map(chat::tool_results)
        .find(|(id, _)| id == "call_r3_history")
        .map(|(_, text)| text)
        .unwrap_or_else(|| oc.fail("cairn_session_history's result never reached the model"));
    if !history.contains(PLANTED) {
        oc.fail(&format!("session_history did not find {PLANTED}: {}", tail(&history, 1_500)));
    }
    if requests.iter().any(|r| !chat::is_opencode_summarization(r) && chat::request_text(r).contains(SCRIPTED_SUMMARY)) {
        oc.fail("a later request carries the scripted summarizer's answer");
    }
}

#[test]
#[cfg_attr(no_npm, ignore = "needs Node.js 20+ with npm")]
fn automatic_compaction_is_cairns_and_recall_finds_what_it_set_aside() {
    let mut oc = OpenCode::setup(None);
    compaction_is_cairns_and_recall_finds_the_id(&mut oc);

    // 4. The session as OpenCode exports it: its summary is Cairn's, and Cairn reads it whole.
    let session = oc.session_id();
    let i = oc.run(&["export", &session]);
    let export = oc.runs[i].stdout.clone();
    let doc: Value = serde_json::from_str(&export).unwrap_or_else(|e| oc.fail(&format!("`opencode export` printed no JSON: {e}")));
    let summaries: Vec<&Value> = doc["messages"].as_array().into_iter().flatten().filter(|m| m["info"]["summary"] == true).collect();
    let kept = summaries.iter().flat_map(|m| m["parts"].as_array().into_iter().flatten()).filter_map(|p| p["text"].as_str()).collect::<String>();
    if summaries.len() != 1 || !kept.starts_with("The earlier part of this conversation, condensed by Cairn") {
        oc.fail(&format!("the summary OpenCode saved is not Cairn's: {}", tail(&kept, 1_000)));
    }
    let (transcript, format) = cairn::transcript::formats::parse(&export, "export.json").unwrap_or_else(|e| oc.fail(&format!("Cairn cannot read the export: {e}")));
    assert_eq!(format, cairn::transcript::formats::Format::OpenCode);
    assert!(transcript.unrecognized.is_empty(), "unrecognized in the export: {}", transcript.unrecognized);
    assert_eq!(transcript.entries[0].origin, cairn::transcript::Origin::Summary);
    assert!(transcript.entries[0].model_text().contains(RULE), "Cairn's summary as read back lost the rule");
    for (i, entry) in transcript.entries.iter().enumerate() {
        for (k, id) in entry.tool_call_ids().enumerate() {
            let answered = transcript.entries.get(i + 1 + k).is_some_and(|n| n.tool_result_ids().any(|r| r == id));
            assert!(answered, "call {id} of {} not answered in place", entry.id);
        }
    }
    let calls: Vec<&str> = transcript.entries.iter().flat_map(|e| e.tool_call_ids()).collect();
    assert!(calls.contains(&"call_r3_history"), "the export lost the session_history call: {calls:?}");

    // 5. Uninstall after OpenCode ran (it added files of its own to `.opencode/`): the config
    //    comes back byte for byte, the plugin is gone.
    let out = Command::new(env!("CARGO_BIN_EXE_cairn")).args(["opencode", "uninstall", "--project"]).arg(&oc.project).output().unwrap();
    assert!(out.status.success(), "cairn opencode uninstall: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_to_string(oc.project.join("opencode.json")).unwrap(), oc.config);
    assert!(!oc.project.join(".opencode/plugin/cairn.ts").exists());
}

#[test]
#[cfg_attr(no_npm, ignore = "needs Node.js 20+ with npm")]
fn when_cairn_commits_nothing_opencodes_summary_is_followed_by_the_rule_and_recall_finds_the_id() {
    let mut oc = OpenCode::setup(None);

    // One turn: the operator's rule, one tool call reading the planted id, a reply over
    // OpenCode's limit. OpenCode compacts at its end, and Cairn has nothing it may condense.
    // With OpenCode's log on stderr: its log file loses what is written as the run exits.
    let solo = oc.run(&["run", "--print-logs", &format!("SOLO: {RULE} Read token.txt.")]);
    let requests = oc.server.requests();
    let Some(at) = requests.iter().position(chat::is_opencode_summarization) else { oc.fail("OpenCode did not compact (no summarizer call)") };
    // OpenCode's own summarizer ran, on the history.
    if !chat::request_text(&requests[at]).contains(PLANTED) {
        oc.fail("OpenCode's summarizer call does not carry the history: Cairn's plugin took it away without compacting");
    }
    let Some(after) = requests[at + 1..].iter().find(|r| !chat::is_opencode_title(r)) else { oc.fail("no request after the compaction") };
    let text = chat::request_text(after);
    // OpenCode's summary, then Cairn's record of the session with the operator's rule.
    let (Some(summary), Some(archived)) = (text.find(SCRIPTED_SUMMARY), text.find("Cairn archived this whole session")) else {
        oc.fail(&format!("the request after the compaction lacks OpenCode's summary or Cairn's record after it: {}", tail(&text, 3_000)))
    };
    if summary > archived || !text[archived..].contains(RULE) {
        oc.fail(&format!("the operator's rule {RULE:?} does not follow OpenCode's summary: {}", tail(&text, 3_000)));
    }
    // Said in OpenCode's log as a warning (the case this test forces).
    let warned = oc.runs[solo]
        .stderr
        .lines()
        .any(|l| l.contains("level=WARN") && l.contains("Cairn committed nothing") && l.contains("OpenCode summarizes this time") && l.contains(&format!("usable window {} tokens", CONTEXT - OUTPUT)));
    if !warned {
        oc.fail("OpenCode's log has no warning from Cairn's plugin that it committed nothing for OpenCode's usable window and OpenCode summarizes");
    }
    // The user sees it in the session too: the summary OpenCode shows says what Cairn did.
    if !oc.runs[solo].stdout.contains("Cairn archived this whole session before OpenCode summarized it") {
        oc.fail("the summary OpenCode shows the user does not say that Cairn archived the session");
    }

    // Recall: the planted id is in Cairn's archive.
    let before = oc.server.requests().len();
    oc.run(&["run", "--continue", "RECALL: which deploy token did token.txt name?"]);
    let history = oc.server.requests()[before..]
        .iter()
        .flat_map(chat::tool_results)
        .find(|(id, _)| id == "call_recall_history")
        .map(|(_, text)| text)
        .unwrap_or_else(|| oc.fail("cairn_session_history's result never reached the model"));
    if !history.contains(PLANTED) {
        oc.fail(&format!("session_history did not find {PLANTED} after OpenCode summarized: {}", tail(&history, 1_500)));
    }
}

/// With `cairn-compaction` installed in the project, the plugin compacts in OpenCode's own process:
/// the same session as through the server, and no `cairn serve --expose harness` child (the
/// command in `opencode.json` goes through a wrapper that records each start). The recall tool
/// stays the MCP server OpenCode starts from `opencode.json` (`--expose recall`).
#[test]
#[cfg_attr(no_npm, ignore = "needs Node.js 20+ with npm")]
fn in_process_compaction_is_cairns_and_recall_finds_the_id() {
    let packages = tempfile::tempdir().unwrap();
    let Some(packed) = node_packages::packed(packages.path()) else { return };
    let mut oc = OpenCode::setup(Some(&packed));
    let starts = oc.home.path().join("cairn-starts.log");
    let wrapper = oc.home.path().join("cairn");
    std::fs::write(&wrapper, format!("#!/bin/bash\necho \"$*\" >> '{}'\nexec '{}' \"$@\"\n", starts.display(), env!("CARGO_BIN_EXE_cairn"))).unwrap();
    std::fs::set_permissions(&wrapper, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let config_path = oc.project.join("opencode.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&config_path).unwrap()).unwrap();
    config["mcp"]["cairn"]["command"][0] = json!(wrapper.to_str().unwrap());
    std::fs::write(&config_path, serde_json::to_string_pretty(&config).unwrap()).unwrap();

    compaction_is_cairns_and_recall_finds_the_id(&mut oc);
    let started = std::fs::read_to_string(&starts).unwrap_or_default();
    if !started.contains("--expose recall") {
        oc.fail(&format!("OpenCode never started the recall server through the wrapper: {started:?}"));
    }
    if started.contains("--expose harness") {
        oc.fail(&format!("the plugin started `cairn serve --expose harness` with cairn-compaction installed: {started}"));
    }
}
