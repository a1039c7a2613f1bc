//! Pi 0.73.1 (`@mariozechner/pi-coding-agent`, pinned in `npm.rs`) with Cairn's Pi extension
//! (`examples/pi-extension`) installed as a user installs it (`pi install PATH`), against the
//! scripted chat-completions server: print mode (`pi -p`, `pi -c -p`) and JSON mode
//! (`--mode json`). Every `pi` must exit by itself; Pi's automatic compaction must be Cairn's
//! (the session file's compaction entry carries Cairn's `archive_id`, Pi's own summarization
//! prompt never reaches the model); the next request starts with Cairn's summary with every tool
//! call paired; `session_history` finds what was compacted away; and `--mode json` prints the
//! event stream Pi prints without extensions (every `turn_end`, `agent_end`); and the extension's
//! `boundary` calls are incremental (whole once per `pi` run, then only the entries Pi appended
//! after the one Cairn acknowledged: a wrapper around `cairn serve` records the MCP traffic). The
//! TUI (in tmux): a turn, Pi's automatic compaction answered by Cairn, `/quit` leaves cleanly.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::model_server::openai_chat::{self as chat, Usage};
use super::model_server::{ModelServer, Request};
use super::{kill_group, npm, tail};
use crate::support::node_packages;

const MODEL_WINDOW: u64 = 32_000;
const PLANTED: &str = "PLANTED-7f3a9c";
const RUN_TIMEOUT: Duration = Duration::from_secs(180);

/// A small reply's usage, and one over Pi's threshold (window − reserveTokens).
const LOW: Usage = Usage { prompt_tokens: 3_000, completion_tokens: 40 };
const HIGH: Usage = Usage { prompt_tokens: MODEL_WINDOW - 1_500, completion_tokens: 60 };

/// The scripted model: what it answers depends on the run (a tag in the operator's message)
/// and on the last message (the operator's, or which tool result came back).
fn script(req: &Request) -> super::model_server::Reply {
    if chat::is_pi_summarization(req) {
        return chat::text("## Goal\nPI'S OWN SUMMARY (must not happen)", LOW);
    }
    let user = chat::last_user_text(req);
    let last_result = chat::tool_results(req).last().map(|(id, _)| id.clone()).filter(|_| chat::last_role(req) == "tool");
    let run = ["RUN1", "RUN2", "RUN3", "RUN4", "RUN5"].into_iter().find(|r| user.contains(r)).unwrap_or("");
    match (run, last_result.as_deref()) {
        ("RUN1", None) => chat::tool_calls(&[("call_r1_bash", "bash", json!({"command": "cat build.log"}))], LOW),
        ("RUN1", Some("call_r1_bash")) => chat::tool_calls(&[("call_r1_read", "read", json!({"path": "notes.txt"}))], LOW),
        ("RUN1", Some(_)) => chat::text("RUN1 done: the build log and the notes are read.", LOW),
        ("RUN2", None) => chat::tool_calls(&[("call_r2_bash", "bash", json!({"command": "cat build2.log"}))], HIGH),
        ("RUN2", Some(_)) => chat::text("RUN2 done: the second log is read.", HIGH),
        ("RUN3", None) => chat::tool_calls(&[("call_r3_history", "session_history", json!({"action": "search", "query": PLANTED}))], LOW),
        ("RUN3", Some(_)) => chat::text("RUN3 done: found it in the session history.", LOW),
        // JSON mode, with the extension (RUN4) and without (RUN5): a tool call, then the answer.
        ("RUN4" | "RUN5", None) => chat::tool_calls(&[(&format!("call_{}_read", run.to_lowercase()), "read", json!({"path": "notes.txt"}))], LOW),
        ("RUN4" | "RUN5", Some(_)) => chat::text(&format!("{run} done."), LOW),
        _ => chat::text("unscripted", LOW),
    }
}

struct Run {
    args: Vec<String>,
    status: Option<std::process::ExitStatus>,
    stdout: String,
    stderr: String,
    elapsed: Duration,
}

struct Pi {
    bin: PathBuf,
    home: tempfile::TempDir,
    project: tempfile::TempDir,
    cairn_home: tempfile::TempDir,
    /// `cairn` as the extension starts it (CAIRN_BIN): the real binary behind a recording wrapper.
    recorder: tempfile::TempDir,
    /// The extension runs Cairn in Pi's process (`cairn-compaction` installed beside it): no
    /// `cairn` binary may be spawned.
    in_process: bool,
    _extension: tempfile::TempDir,
    server: ModelServer,
    runs: Vec<Run>,
}

/// One `boundary` call the extension made, and the server's answer.
struct BoundaryCall {
    since: Option<String>,
    format: Option<String>,
    /// UTF-8 bytes of the `transcript` argument.
    bytes: usize,
    /// The JSON-RPC `result` (null when no answer was recorded).
    answer: Value,
}

impl BoundaryCall {
    fn failed(&self) -> bool {
        self.answer.is_null() || self.answer["isError"] == true
    }

    fn acknowledged(&self) -> Option<&str> {
        self.answer["structuredContent"]["acknowledged"].as_str()
    }

    fn describe(&self) -> String {
        let outcome = if self.answer.is_null() {
            "no answer".to_string()
        } else if self.failed() {
            format!("error {}", tail(&self.answer["content"].to_string(), 300))
        } else {
            format!("{} → acknowledged {:?}", self.answer["structuredContent"]["action"]["kind"], self.acknowledged())
        };
        format!("since {:?} format {:?} transcript {} bytes: {outcome}", self.since, self.format, self.bytes)
    }
}

/// How the extension reaches Cairn.
enum Cairn {
    /// `cairn serve` children (the binary behind a recording wrapper).
    Serve,
    /// In Pi's process: the Node package's tarballs installed beside the extension.
    InProcess(node_packages::Packed),
}

impl Pi {
    fn setup(cairn: Cairn) -> Pi {
        let install = npm::install(npm::PI, false);
        let bin = npm::bin(&install, "pi");
        let server = ModelServer::start(script);
        let home = tempfile::tempdir().unwrap();
        let agent = home.path().join(".pi/agent");
        std::fs::create_dir_all(&agent).unwrap();
        let models = json!({"providers": {"scripted": {
            "baseUrl": format!("{}/v1", server.base_url),
            "api": "openai-completions",
            "apiKey": "scripted-key",
            "models": [{"id": "scripted-model", "name": "Scripted", "reasoning": false, "input": ["text"],
                        "contextWindow": MODEL_WINDOW, "maxTokens": 4096,
                        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}}],
        }}});
        std::fs::write(agent.join("models.json"), serde_json::to_string_pretty(&models).unwrap()).unwrap();
        let settings = json!({
            "defaultProvider": "scripted",
            "defaultModel": "scripted-model",
            "quietStartup": true,
            "compaction": {"enabled": true, "reserveTokens": 4_000, "keepRecentTokens": 1_500},
        });
        std::fs::write(agent.join("settings.json"), serde_json::to_string_pretty(&settings).unwrap()).unwrap();

        let project = tempfile::tempdir().unwrap();
        let lines = |tag: &str, n: usize| -> String { (0..n).map(|i| format!("{tag} line {i:04}: compiling module_{i} ... ok (warnings: {})\n", i % 7)).collect() };
        // The planted id is in a tool output that Cairn's compaction sets aside (into its archive).
        let mut build = lines("build", 600);
        let at = build.match_indices('\n').nth(299).unwrap().0 + 1;
        build.insert_str(at, &format!("build line 0300: release signed with deploy token {PLANTED}\n"));
        std::fs::write(project.path().join("build.log"), build).unwrap();
        std::fs::write(project.path().join("build2.log"), lines("rebuild", 300)).unwrap();
        std::fs::write(project.path().join("notes.txt"), "Notes: the service listens on port 8431; do not touch vendor/.\n").unwrap();

        let extension = packaged_extension();
        let in_process = matches!(cairn, Cairn::InProcess(_));
        if let Cairn::InProcess(packed) = &cairn {
            // As a user adds it: `npm install cairn-compaction` in the extension's folder.
            let out = Command::new("npm")
                .args(["install", "--omit=dev", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"])
                .arg(&packed.main)
                .arg(&packed.native)
                .current_dir(extension.path())
                .output()
                .unwrap_or_else(|e| panic!("npm: {e}"));
            assert!(out.status.success(), "npm install of the cairn-compaction tarballs failed:\n{}", String::from_utf8_lossy(&out.stderr));
        }
        let mut pi = Pi { bin, home, project, cairn_home: tempfile::tempdir().unwrap(), recorder: recording_cairn(), in_process, _extension: extension, server, runs: Vec::new() };
        let ext_path = pi._extension.path().to_str().unwrap().to_string();
        let i = pi.run(&["install", &ext_path]);
        pi.expect_success(i);
        let settings: Value = serde_json::from_str(&std::fs::read_to_string(agent.join("settings.json")).unwrap()).unwrap();
        // Pi records the path relative to ~/.pi/agent.
        let name = pi._extension.path().file_name().unwrap().to_str().unwrap().to_string();
        assert!(settings["packages"].to_string().contains(&name), "pi install recorded no package: {settings}");
        pi
    }

    /// Runs `pi ARGS` in the project, as a user; kills it (and fails) after RUN_TIMEOUT.
    fn run(&mut self, args: &[&str]) -> usize {
        let mut cmd = Command::new(&self.bin);
        cmd.args(args)
            .current_dir(self.project.path())
            .env("HOME", self.home.path())
            .env("CAIRN_BIN", if self.in_process { self.recorder.path().join("no-cairn-binary-in-process") } else { self.recorder.path().join("cairn") })
            .env("CAIRN_HOME", self.cairn_home.path())
            .env("PI_OFFLINE", "1")
            .env("PI_SKIP_VERSION_CHECK", "1")
            .env("PI_TELEMETRY", "0")
            .env_remove("PI_CODING_AGENT_DIR")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
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
        let out = drain(Box::new(child.stdout.take().unwrap()));
        let err = drain(Box::new(child.stderr.take().unwrap()));
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break Some(status);
            }
            if started.elapsed() > RUN_TIMEOUT {
                // The whole process group: pi and whatever it left running (a `cairn serve`).
                let _ = kill_group(child.id());
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let elapsed = started.elapsed();
        if status.is_some() {
            // Whatever pi left behind in its group must not outlive it either.
            let _ = kill_group(child.id());
        }
        self.runs.push(Run { args: args.iter().map(|s| s.to_string()).collect(), status, stdout: out.join().unwrap(), stderr: err.join().unwrap(), elapsed });
        self.runs.len() - 1
    }

    fn expect_success(&self, i: usize) {
        let run = &self.runs[i];
        match run.status {
            None => self.fail(&format!("`pi {}` did not exit by itself within {RUN_TIMEOUT:?}", run.args.join(" "))),
            Some(s) if !s.success() => self.fail(&format!("`pi {}` failed: {s}", run.args.join(" "))),
            Some(_) => {}
        }
        for bad in ["ctx is stale", "Extension error", "could not start"] {
            if run.stderr.contains(bad) {
                self.fail(&format!("`pi {}` reported {bad:?} on stderr", run.args.join(" ")));
            }
        }
    }

    /// The session files Pi wrote (~/.pi/agent/sessions/<cwd>/<time>_<id>.jsonl).
    fn session_files(&self) -> Vec<PathBuf> {
        fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    walk(&path, out);
                } else if path.extension().is_some_and(|e| e == "jsonl") {
                    out.push(path);
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.home.path().join(".pi/agent/sessions"), &mut out);
        out.sort();
        out
    }

    fn session_entries(&self) -> Vec<Value> {
        let files = self.session_files();
        if files.len() != 1 {
            self.fail(&format!("expected one session file, found {files:?}"));
        }
        std::fs::read_to_string(&files[0]).unwrap().lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
    }

    /// The `boundary` calls each `cairn serve` the extension started received (one server per
    /// `pi` run), servers in the order they started, calls in the order they were sent.
    fn boundary_calls(&self) -> Vec<(String, Vec<BoundaryCall>)> {
        let mut inputs: Vec<PathBuf> = std::fs::read_dir(self.recorder.path()).unwrap().flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "in")).collect();
        inputs.sort();
        let lines = |path: &Path| -> Vec<Value> { std::fs::read_to_string(path).unwrap_or_default().lines().filter_map(|l| serde_json::from_str(l).ok()).collect() };
        inputs
            .iter()
            .map(|input| {
                let answers: HashMap<String, Value> =
                    lines(&input.with_extension("out")).into_iter().filter(|m| !m["id"].is_null() && m.get("result").is_some()).map(|m| (m["id"].to_string(), m["result"].clone())).collect();
                let calls = lines(input)
                    .into_iter()
                    .filter(|m| m["method"] == "tools/call" && m["params"]["name"] == "boundary")
                    .map(|m| {
                        let args = &m["params"]["arguments"];
                        BoundaryCall {
                            since: args["since"].as_str().map(str::to_string),
                            format: args["format"].as_str().map(str::to_string),
                            bytes: args["transcript"].as_str().map_or(0, str::len),
                            answer: answers.get(&m["id"].to_string()).cloned().unwrap_or(Value::Null),
                        }
                    })
                    .collect();
                (input.file_stem().unwrap().to_string_lossy().into_owned(), calls)
            })
            .collect()
    }

    /// Within each `pi` run the extension sends the whole branch once, then only what Pi
    /// appended: a later `boundary` names the entry the previous answer acknowledged (`since`),
    /// sends a Pi fragment (`format: "pi"`) smaller than the whole, and is answered.
    fn expect_incremental_boundaries(&self) {
        let servers = self.boundary_calls();
        let mut report = String::new();
        for (name, calls) in &servers {
            report.push_str(&format!("{name}:\n"));
            for (n, call) in calls.iter().enumerate() {
                report.push_str(&format!("  #{n} {}\n", call.describe()));
            }
        }
        eprintln!("boundary calls per `cairn serve`:\n{report}");
        let fail = |what: String| -> ! { self.fail(&format!("{what}\n=== boundary calls per `cairn serve` (recorded by {})\n{report}", self.recorder.path().display())) };
        let mut followed = 0;
        for (name, calls) in &servers {
            let Some(first) = calls.first() else { continue };
            if first.since.is_some() || first.failed() {
                fail(format!("{name}: the first boundary is not an answered whole transcript"));
            }
            if calls.len() < 2 {
                continue;
            }
            let incremental = calls
                .windows(2)
                .filter(|pair| {
                    let (before, call) = (&pair[0], &pair[1]);
                    call.since.is_some() && call.since.as_deref() == before.acknowledged() && call.format.as_deref() == Some("pi") && call.bytes < first.bytes && !call.failed()
                })
                .count();
            if incremental == 0 {
                fail(format!("{name}: {} boundaries in one `pi` run, none of them incremental", calls.len()));
            }
            followed += 1;
        }
        if followed == 0 {
            fail("no `pi` run made two boundaries".into());
        }
    }

    /// Fails with everything needed to see why: each run's output, the session file, the requests.
    fn fail(&self, message: &str) -> ! {
        let mut report = format!("{message}\n");
        for run in &self.runs {
            report.push_str(&format!(
                "\n=== pi {} → {:?} after {:?}\n--- stdout\n{}\n--- stderr\n{}\n",
                run.args.join(" "),
                run.status,
                run.elapsed,
                tail(&run.stdout, 4_000),
                tail(&run.stderr, 8_000)
            ));
        }
        for file in self.session_files() {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            report.push_str(&format!("\n=== session {}\n", file.display()));
            for line in text.lines() {
                report.push_str(&tail(line, 600));
                report.push('\n');
            }
        }
        report.push_str("\n=== model requests\n");
        for (n, req) in self.server.requests().iter().enumerate() {
            let roles: Vec<&str> = chat::messages(req).iter().map(|m| m["role"].as_str().unwrap_or("?")).collect();
            report.push_str(&format!("#{n} {} {} roles={roles:?} pi-summarization={} last-user={:?}\n", req.method, req.path, chat::is_pi_summarization(req), tail(&chat::last_user_text(req), 300)));
        }
        panic!("{report}");
    }
}

/// A `cairn` for CAIRN_BIN that runs the real binary (same argv, same process: `exec`) and
/// records one server's MCP traffic: what the extension sends (stdin) in `serve-<time>-<pid>.in`,
/// what the server answers (stdout) in `….out`. The `tee`s end with the pipes they copy.
fn recording_cairn() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let script =
        format!("#!/bin/bash\nlog='{}'/serve-$(date +%s%N)-$$\nexec '{}' \"$@\" < <(exec tee -a \"$log.in\") > >(exec tee -a \"$log.out\")\n", dir.path().display(), env!("CARGO_BIN_EXE_cairn"));
    let path = dir.path().join("cairn");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    dir
}

/// The extension packaged as `pi install PATH` takes it: the checked-in package (package.json
/// with `pi.extensions`, the lockfile, src/) copied to a temp folder, its runtime dependencies
/// installed there with `npm ci --omit=dev` (never in the checked-in folder, where other tests
/// run npm at the same time).
fn packaged_extension() -> tempfile::TempDir {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/pi-extension");
    let dir = tempfile::tempdir().unwrap();
    for file in ["package.json", "package-lock.json", "README.md"] {
        std::fs::copy(source.join(file), dir.path().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    }
    std::fs::create_dir(dir.path().join("src")).unwrap();
    for entry in std::fs::read_dir(source.join("src")).unwrap().flatten() {
        std::fs::copy(entry.path(), dir.path().join("src").join(entry.file_name())).unwrap();
    }
    let out = Command::new("npm").args(["ci", "--omit=dev", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]).current_dir(dir.path()).output().unwrap_or_else(|e| panic!("npm: {e}"));
    assert!(out.status.success(), "npm ci --omit=dev failed:\n{}", String::from_utf8_lossy(&out.stderr));
    dir
}

/// Steps 1–3 of a Pi session with the extension: two print-mode runs, the second over Pi's
/// threshold so that Pi compacts, and that compaction is Cairn's; the next run's request starts
/// with Cairn's summary, every tool call paired, and `session_history` finds the planted id;
/// Cairn reads back the session file Pi wrote.
fn compaction_is_cairns_and_recall_finds_the_id(pi: &mut Pi) {
    // 1. A first prompt with tool calls (Pi's bash and read); build.log holds the planted id.
    let r1 = pi.run(&["-p", "RUN1: read build.log and notes.txt."]);
    pi.expect_success(r1);
    // 2. Continued; the model reports usage over Pi's threshold: Pi compacts after agent_end,
    //    which in print mode is after the prompt returned (the session is shutting down).
    let r2 = pi.run(&["-c", "-p", "RUN2: now read build2.log."]);
    pi.expect_success(r2);

    let entries = pi.session_entries();
    let compactions: Vec<&Value> = entries.iter().filter(|e| e["type"] == "compaction").collect();
    if compactions.is_empty() {
        pi.fail("Pi wrote no compaction entry");
    }
    for c in &compactions {
        let archive = c["details"]["archive_id"].as_str().unwrap_or("");
        if c["details"]["cairn"] != true || archive.is_empty() {
            pi.fail(&format!("a compaction that is not Cairn's: {}", tail(&c.to_string(), 800)));
        }
    }
    let summary = compactions.last().unwrap()["summary"].as_str().unwrap_or("").to_string();

    // 3. The next prompt: its request starts with Cairn's summary; the model asks
    //    session_history for the planted id, and the tool result Pi sends back has it.
    let before = pi.server.requests().len();
    let r3 = pi.run(&["-c", "-p", "RUN3: which deploy token did build.log name?"]);
    pi.expect_success(r3);
    let requests = pi.server.requests();
    let run3: Vec<&Request> = requests[before..].iter().filter(|r| chat::last_user_text(r).contains("RUN3")).collect();
    let Some(first) = run3.first() else { pi.fail("RUN3 reached no model") };
    let opening = chat::conversation(first).first().map(|m| chat::content_text(m)).unwrap_or_default();
    let head: String = summary.chars().take(200).collect();
    if summary.is_empty() || !opening.contains(&head) {
        pi.fail(&format!("RUN3's first request does not start with Cairn's summary; it starts with {:?}", tail(&opening, 500)));
    }
    let (unanswered, orphans) = chat::unpaired(first);
    if !unanswered.is_empty() || !orphans.is_empty() {
        pi.fail(&format!("after compaction: calls without results {unanswered:?}, results without calls {orphans:?}"));
    }
    let history =
        run3.iter().flat_map(|r| chat::tool_results(r)).find(|(id, _)| id == "call_r3_history").map(|(_, text)| text).unwrap_or_else(|| pi.fail("session_history's result never reached the model"));
    if !history.contains(PLANTED) {
        pi.fail(&format!("session_history did not find {PLANTED}: {}", tail(&history, 1_500)));
    }
    // Cairn reads the session file Pi wrote: nothing unrecognized, every call paired, and the
    // context opening with Cairn's summary as Pi builds it.
    for file in pi.session_files() {
        let (read, format) = cairn::transcript::formats::parse(&std::fs::read_to_string(&file).unwrap(), &file.display().to_string()).unwrap();
        assert_eq!(format.to_string(), "pi", "{}", file.display());
        assert!(read.unrecognized.is_empty(), "{}: {}", file.display(), read.unrecognized);
        assert_eq!(cairn::chain::pairing_problems(&read.entries), Default::default(), "{}", file.display());
        assert!(read.entries.first().is_some_and(|e| e.origin == cairn::transcript::Origin::Summary && e.model_text().contains(&head)), "{}: the context opens with Cairn's summary", file.display());
    }
}

#[test]
#[cfg_attr(no_npm, ignore = "needs Node.js 20+ with npm")]
fn print_and_json_mode_compaction_is_cairns_and_pi_exits() {
    let mut pi = Pi::setup(Cairn::Serve);
    compaction_is_cairns_and_recall_finds_the_id(&mut pi);

    // 4. JSON mode: two turns (a tool call, then the answer), one JSON event a line, and pi exits
    //    by itself. Pi prints an agent event only once every extension handler for it returned,
    //    and stops printing when the prompt returns: the extension's turn_end and agent_end
    //    handlers must not hold Pi's event queue back (they call Cairn in the background). The
    //    stream must be the one Pi prints without extensions (RUN5, `--no-extensions`), with
    //    every turn_end and the agent_end.
    let r4 = pi.run(&["-c", "--mode", "json", "RUN4: read notes.txt again."]);
    pi.expect_success(r4);
    let r5 = pi.run(&["-c", "--no-extensions", "--mode", "json", "RUN5: read notes.txt again."]);
    pi.expect_success(r5);
    let events = |run: usize| -> Vec<Value> { pi.runs[run].stdout.lines().filter_map(|l| serde_json::from_str(l).ok()).collect() };
    // Event types in order, without the streaming deltas.
    let shape = |events: &[Value]| -> Vec<String> { events.iter().map(|e| e["type"].as_str().unwrap_or("?").to_string()).filter(|t| t != "message_update").collect() };
    let (with, without) = (events(r4), events(r5));
    for (run, events, tag) in [(r4, &with, "RUN4"), (r5, &without, "RUN5")] {
        let args = pi.runs[run].args.join(" ");
        if events.first().map(|e| &e["type"]) != Some(&json!("session")) {
            pi.fail(&format!("`pi {args}` did not start with the session header"));
        }
        let lifecycle: Vec<String> = shape(events).into_iter().filter(|t| ["agent_start", "turn_start", "turn_end", "agent_end"].contains(&t.as_str())).collect();
        if lifecycle != ["agent_start", "turn_start", "turn_end", "turn_start", "turn_end", "agent_end"] {
            pi.fail(&format!("`pi {args}` printed the lifecycle events {lifecycle:?}, not two turns and agent_end"));
        }
        let answer = format!("{tag} done");
        let last_turn = events.iter().rfind(|e| e["type"] == "turn_end");
        if !last_turn.is_some_and(|e| e["message"]["role"] == "assistant" && e["message"].to_string().contains(&answer)) {
            pi.fail(&format!("`pi {args}`: the last turn_end does not carry the answer"));
        }
        if !events.iter().any(|e| e["type"] == "agent_end" && e["messages"].to_string().contains(&answer)) {
            pi.fail(&format!("`pi {args}`: agent_end does not carry the answer"));
        }
    }
    if shape(&with) != shape(&without) {
        pi.fail(&format!("--mode json with the extension printed {:?}; without extensions {:?}", shape(&with), shape(&without)));
    }

    // Never Pi's own summarization.
    if let Some(n) = pi.server.requests().iter().position(chat::is_pi_summarization) {
        pi.fail(&format!("request #{n} is Pi's own summarization (SUMMARIZATION_SYSTEM_PROMPT)"));
    }

    // 5. The boundaries of every run were incremental after the first (whole) one.
    pi.expect_incremental_boundaries();
}

/// Pi's TUI in a pseudo-terminal (a private tmux server), driven as a user types.
struct Tui<'a> {
    pi: &'a Pi,
    socket: String,
    exited: PathBuf,
}

impl Tui<'_> {
    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux").arg("-L").arg(&self.socket).args(args).output().expect("tmux");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", "pi"])
    }

    fn type_line(&self, text: &str) {
        self.tmux(&["send-keys", "-t", "pi", "-l", text]);
        std::thread::sleep(Duration::from_millis(300));
        self.tmux(&["send-keys", "-t", "pi", "Enter"]);
    }

    /// Waits until `done` holds, else fails with the screen.
    fn wait(&self, what: &str, timeout: Duration, mut done: impl FnMut(&Self) -> bool) {
        let started = Instant::now();
        while !done(self) {
            if started.elapsed() > timeout {
                self.pi.fail(&format!("TUI: no {what} within {timeout:?}; the screen:\n{}", self.screen()));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Tui<'_> {
    fn drop(&mut self) {
        let _ = Command::new("tmux").args(["-L", &self.socket, "kill-server"]).stderr(Stdio::null()).status();
    }
}

#[test]
#[cfg_attr(no_npm, ignore = "needs Node.js 20+ with npm")]
fn tui_compaction_is_cairns_and_quit_leaves_cleanly() {
    let pi = Pi::setup(Cairn::Serve);
    let exited = pi.home.path().join("pi-exited");
    let tui = Tui { pi: &pi, socket: format!("cairn-pi-{}", std::process::id()), exited: exited.clone() };
    let command = format!("'{}'; echo $? > '{}'", pi.bin.display(), exited.display());
    let mut args: Vec<String> = ["new-session", "-d", "-s", "pi", "-x", "200", "-y", "50", "-c"].map(String::from).to_vec();
    args.push(pi.project.path().display().to_string());
    for (k, v) in [
        ("HOME", pi.home.path().display().to_string()),
        ("CAIRN_BIN", env!("CARGO_BIN_EXE_cairn").to_string()),
        ("CAIRN_HOME", pi.cairn_home.path().display().to_string()),
        ("PI_OFFLINE", "1".into()),
        ("PI_SKIP_VERSION_CHECK", "1".into()),
        ("PI_TELEMETRY", "0".into()),
    ] {
        args.push("-e".into());
        args.push(format!("{k}={v}"));
    }
    args.push(command);
    let status = Command::new("tmux").arg("-L").arg(&tui.socket).args(&args).status().expect("tmux");
    assert!(status.success(), "tmux new-session failed");

    tui.wait("start-up (the model in the footer)", Duration::from_secs(60), |t| t.screen().contains("scripted-model"));
    tui.type_line("RUN1: read build.log and notes.txt.");
    tui.wait("answer to RUN1", Duration::from_secs(120), |t| t.screen().contains("RUN1 done"));
    // A second turn over Pi's threshold: Pi compacts automatically after it. (A `/compact` right
    // after the first turn is not used: there Cairn's policy commits nothing, everything being in
    // its protected recent window, and the extension leaves that compaction to Pi by design.)
    tui.type_line("RUN2: now read build2.log.");
    tui.wait("compaction entry in the session file", Duration::from_secs(120), |t| {
        t.pi.session_files().first().is_some_and(|f| std::fs::read_to_string(f).unwrap_or_default().contains("\"type\":\"compaction\""))
    });
    tui.type_line("/quit");
    tui.wait("exit after /quit", Duration::from_secs(30), |t| t.exited.is_file());
    let code = std::fs::read_to_string(&exited).unwrap();
    if code.trim() != "0" {
        pi.fail(&format!("pi exited with {code} after /quit"));
    }

    let entries = pi.session_entries();
    let compaction = entries.iter().find(|e| e["type"] == "compaction").unwrap();
    if compaction["details"]["cairn"] != true || compaction["details"]["archive_id"].as_str().unwrap_or("").is_empty() {
        pi.fail(&format!("the TUI's /compact was not Cairn's: {}", tail(&compaction.to_string(), 800)));
    }
    if let Some(n) = pi.server.requests().iter().position(chat::is_pi_summarization) {
        pi.fail(&format!("request #{n} is Pi's own summarization (SUMMARIZATION_SYSTEM_PROMPT)"));
    }
}

/// The extension with `cairn-compaction` installed beside it runs Cairn in Pi's process: the same
/// session as with `cairn serve`, and no `cairn` binary anywhere (CAIRN_BIN names no file, so a
/// fallback to `cairn serve` could not start; none was attempted: the recorder saw no server).
#[test]
#[cfg_attr(no_npm, ignore = "needs Node.js 20+ with npm")]
fn in_process_compaction_is_cairns_with_no_cairn_binary() {
    let packages = tempfile::tempdir().unwrap();
    let Some(packed) = node_packages::packed(packages.path()) else { return };
    let mut pi = Pi::setup(Cairn::InProcess(packed));
    compaction_is_cairns_and_recall_finds_the_id(&mut pi);
    let servers = std::fs::read_dir(pi.recorder.path()).unwrap().flatten().filter(|e| e.path().extension().is_some_and(|x| x == "in")).count();
    if servers != 0 {
        pi.fail(&format!("the extension started {servers} `cairn serve` beside the in-process host"));
    }
}
