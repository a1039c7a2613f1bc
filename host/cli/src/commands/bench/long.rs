//! `cairn bench --long SESSION`: a recorded Pi session grown turn by turn (its turns repeated
//! under fresh ids) to 30 MB and 1,000 turns, reported at every turn to a `cairn serve` child
//! over stdio as Pi's extension does — incremental (the first call whole, then only the lines
//! appended since the entry the server acknowledged) against whole (the session at every call).
//!
//! Per mode: the bytes written to the server's stdin, the time per boundary as the harness sees
//! it (request written → answer read) at turns 10, 100, 1,000 and the last, and the server's
//! peak resident memory. Sending the whole session at every turn moves O(turns²) bytes (about
//! 15 GB for 30 MB), so the whole mode is timed only on those turns (each window after an
//! untimed call that brings the record up to date) and its bytes for the whole replay are
//! computed exactly from the requests it would write. The window is so large that no boundary
//! compacts: what is measured is the cost of a boundary, not of a compaction.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use serde_json::{json, Value};

use super::{ms, percentile};

/// A window no session here comes near: no boundary compacts.
const WINDOW: u64 = 1 << 40;
/// Turns timed at each reported turn: the ten ending there.
const SAMPLES: usize = 10;
const PROTOCOL: &str = "2025-06-18";

pub struct Options {
    pub target_bytes: usize,
    pub min_turns: usize,
    pub json: bool,
}

/// A session grown by repeating its turns: the header line and each turn's entry lines
/// (turn 0 is what precedes the first user message, sent with turn 1).
struct Grown {
    header: String,
    turns: Vec<Vec<String>>,
}

impl Grown {
    /// Bytes of the session file up to and including `turn` (1-based).
    fn bytes_through(&self, turn: usize) -> usize {
        self.header.len() + 1 + self.turns[..=turn].iter().flatten().map(|l| l.len() + 1).sum::<usize>()
    }

    /// The session file up to and including `turn`, as Pi's extension sends it whole.
    fn whole(&self, turn: usize) -> String {
        let mut text = String::with_capacity(self.bytes_through(turn));
        for line in std::iter::once(&self.header).chain(self.turns[..=turn].iter().flatten()) {
            text.push_str(line);
            text.push('\n');
        }
        text
    }

    fn lines(&self, turn: usize) -> String {
        self.turns[turn].iter().map(|l| format!("{l}\n")).collect()
    }

    /// The length of `turn`'s lines once escaped into a JSON string (without the quotes).
    fn escaped_len(&self, turn: usize) -> usize {
        self.turns[turn].iter().map(|l| serde_json::to_string(&format!("{l}\n")).map_or(0, |s| s.len() - 2)).sum()
    }

    fn last_turn(&self) -> usize {
        self.turns.len() - 1
    }
}

/// Reads a Pi session and repeats its turns, each copy under fresh entry and tool-call ids,
/// in one linear branch (session version 3: every entry with `id` and `parentId`), until it
/// holds `target_bytes` and `min_turns` user turns. Compaction and branch-summary entries are
/// left out: the session grows as an uncompacted one does.
fn grow(file: &Path, target_bytes: usize, min_turns: usize) -> Result<Grown> {
    let text = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    let (_, first) = lines.next().with_context(|| format!("{}: empty", file.display()))?;
    let mut header: Value = serde_json::from_str(first).with_context(|| format!("{}:1: not JSON", file.display()))?;
    if header["type"] != "session" {
        bail!("{}:1: not a Pi session (its first line is not the `session` header); --long grows a Pi session", file.display());
    }
    header["version"] = json!(3);
    header["id"] = json!("bench-long");
    let mut source: Vec<Vec<Value>> = vec![Vec::new()];
    for (n, line) in lines {
        let entry: Value = serde_json::from_str(line).with_context(|| format!("{}:{}: not JSON", file.display(), n + 1))?;
        if matches!(entry["type"].as_str(), Some("compaction" | "branch_summary" | "session")) {
            continue;
        }
        if entry["type"] == "message" && entry["message"]["role"] == "user" {
            source.push(Vec::new());
        }
        source.last_mut().expect("one turn at least").push(entry);
    }
    if source.len() < 2 {
        bail!("{}: no user message, so no turn to repeat", file.display());
    }
    let mut grown = Grown { header: header.to_string(), turns: vec![Vec::new()] };
    let (mut bytes, mut parent, mut serial) = (grown.header.len() + 1, Value::Null, 0usize);
    for copy in 0.. {
        for (index, turn) in source.iter().enumerate() {
            if index == 0 && copy > 0 {
                continue; // the prelude once
            }
            if index > 0 && bytes >= target_bytes && grown.turns.len() > min_turns {
                return Ok(grown);
            }
            let mut lines = Vec::with_capacity(turn.len());
            for entry in turn {
                let mut entry = entry.clone();
                if copy > 0 {
                    fresh_tool_ids(&mut entry["message"], copy);
                }
                serial += 1;
                let id = format!("{serial:08x}");
                entry["id"] = json!(id);
                entry["parentId"] = parent;
                parent = json!(id);
                let line = entry.to_string();
                bytes += line.len() + 1;
                lines.push(line);
            }
            if index == 0 {
                grown.turns[0] = lines;
            } else {
                grown.turns.push(lines);
            }
        }
    }
    unreachable!("the loop returns once the session is grown")
}

/// Tool-call ids in a copy of a message made unique to that copy (calls and results stay paired).
fn fresh_tool_ids(value: &mut Value, copy: usize) {
    match value {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                match (key.as_str(), value) {
                    ("id" | "toolCallId", Value::String(id)) => *id = format!("{id}-{copy}"),
                    (_, value) => fresh_tool_ids(value, copy),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| fresh_tool_ids(v, copy)),
        _ => {}
    }
}

/// A `cairn serve` child spoken to over stdio: newline-delimited JSON-RPC, as the MCP stdio
/// transport is.
pub(super) struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
    /// Bytes written to its stdin.
    sent: u64,
    log: std::path::PathBuf,
}

impl Server {
    pub(super) fn start(exe: &Path, home: &Path, extra: &[&str]) -> Result<Server> {
        let log = home.with_extension("log");
        let mut child = Command::new(exe)
            .args(["serve", "--no-watch", "--home"])
            .arg(home)
            .args(extra)
            .env("CAIRN_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .context("starting `cairn serve`")?;
        let (stdin, stdout) = (child.stdin.take().expect("piped"), BufReader::new(child.stdout.take().expect("piped")));
        let mut server = Server { child, stdin, stdout, next_id: 0, sent: 0, log };
        server.request("initialize", json!({"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "cairn bench --long", "version": env!("CARGO_PKG_VERSION")}}))?;
        server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string())?;
        server.sent = 0;
        Ok(server)
    }

    fn send(&mut self, line: &str) -> Result<()> {
        self.stdin.write_all(line.as_bytes())?;
        self.stdin.write_all(b"\n")?;
        self.stdin.flush()?;
        self.sent += line.len() as u64 + 1;
        Ok(())
    }

    fn request(&mut self, method: &str, params: Value) -> Result<Value> {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string())?;
        let mut line = String::new();
        loop {
            line.clear();
            if self.stdout.read_line(&mut line)? == 0 {
                let log = std::fs::read_to_string(&self.log).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(20).collect();
                bail!("`cairn serve` closed its output; its last log lines:\n{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
            }
            let mut message: Value = serde_json::from_str(&line).with_context(|| format!("`cairn serve` wrote a line that is not JSON: {line:.200}"))?;
            if message["id"] != id {
                continue; // a notification
            }
            if let Some(error) = message.get("error") {
                bail!("{method}: JSON-RPC error {error}");
            }
            return Ok(message["result"].take());
        }
    }

    /// A tool's structured answer, or the tool's error.
    pub(super) fn tool(&mut self, name: &str, arguments: Value) -> Result<Value> {
        let mut result = self.request("tools/call", json!({"name": name, "arguments": arguments}))?;
        if result["isError"] == true {
            bail!("{name} failed: {}", result["content"][0]["text"].as_str().unwrap_or_default());
        }
        Ok(result["structuredContent"].take())
    }

    /// The child's peak resident memory so far (MiB), from /proc.
    fn peak_mib(&self) -> Option<f64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let kib = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?.trim().trim_end_matches("kB").trim().parse::<f64>().ok()?;
        Some(kib / 1024.0)
    }

    pub(super) fn stop(mut self) -> Result<()> {
        drop(self.stdin);
        let status = self.child.wait()?;
        if !status.success() {
            bail!("`cairn serve` exited with {status}");
        }
        Ok(())
    }
}

/// `boundary`'s arguments as Pi's extension sends them: whole, or (`since`) the lines appended.
fn arguments(turn: usize, transcript: String, since: Option<&str>) -> Value {
    let mut args = json!({"conversation": "bench-long", "turn": turn, "window": WINDOW, "transcript": transcript, "include_transcript": false});
    if let Some(since) = since {
        args["since"] = json!(since);
        args["format"] = json!("pi");
    }
    args
}

/// The bytes of the `tools/call` line that sends the session whole at `turn`, given its text's
/// length escaped into a JSON string with its quotes (as `Server::request` writes it).
/// Request ids as in the incremental replay: `initialize` is 1, turn t's boundary t + 1.
fn whole_request_bytes(turn: usize, escaped_transcript: usize) -> u64 {
    let empty = json!({"jsonrpc": "2.0", "id": turn + 1, "method": "tools/call", "params": {"name": "boundary", "arguments": arguments(turn, String::new(), None)}}).to_string();
    (empty.len() - 2 + escaped_transcript + 1) as u64
}

/// Whether the boundary at `turn` is one of the `SAMPLES` timed for reported turn `r`: those
/// ending there, but never a server's first call.
fn timed(turn: usize, r: usize) -> bool {
    turn > 1 && turn + SAMPLES > r && turn <= r
}

/// The late turn the early one is compared with: turn 1,000, else the last.
fn late(at: &[AtTurn]) -> &AtTurn {
    at.iter().find(|a| a.turn == 1_000).unwrap_or_else(|| at.last().expect("the last turn is reported"))
}

/// Timings (ms) of one mode at one reported turn.
#[derive(Serialize, Clone, Copy)]
struct Timing {
    p50_ms: f64,
    p99_ms: f64,
}

impl Timing {
    fn of(mut samples: Vec<f64>) -> Timing {
        samples.sort_by(f64::total_cmp);
        Timing { p50_ms: percentile(&samples, 0.5), p99_ms: percentile(&samples, 0.99) }
    }
}

#[derive(Serialize)]
struct AtTurn {
    turn: usize,
    session_mb: f64,
    incremental: Timing,
    whole: Timing,
}

#[derive(Serialize)]
struct Report {
    session: String,
    turns: usize,
    session_mb: f64,
    samples_per_turn: usize,
    at: Vec<AtTurn>,
    /// Bytes written to the server over the whole replay.
    incremental_mb_sent: f64,
    whole_mb_sent: f64,
    /// Incremental bytes over the final session's: goal < 3.
    incremental_sent_per_session_byte: f64,
    /// Incremental p50 at turn 1,000 (else the last) over turn 10's: goal ≤ 1.5.
    incremental_late_over_early: f64,
    incremental_peak_mib: Option<f64>,
    whole_peak_mib: Option<f64>,
}

pub fn run(exe: &Path, file: &Path, options: Options) -> Result<()> {
    let session = file.file_name().unwrap_or_default().to_string_lossy().into_owned();
    let grown = grow(file, options.target_bytes, options.min_turns)?;
    let last = grown.last_turn();
    let reported: Vec<usize> = [10, 100, 1_000].into_iter().filter(|&t| t < last).chain([last]).collect();
    let temp = tempfile::tempdir()?;
    let progress = ProgressBar::new((last + reported.len() * (SAMPLES + 1)) as u64);
    progress.set_style(ProgressStyle::with_template("{spinner} {bar:30} {pos}/{len} {msg}").expect("a valid template"));

    // Incremental: every turn; the first whole, then what was appended since `acknowledged`.
    progress.set_message("incremental");
    let mut server = Server::start(exe, &temp.path().join("incremental"), &[])?;
    let mut incremental = vec![Vec::new(); reported.len()];
    let mut acknowledged: Option<String> = None;
    for turn in 1..=last {
        let args = match &acknowledged {
            None => arguments(turn, grown.whole(turn), None),
            Some(since) => arguments(turn, grown.lines(turn), Some(since)),
        };
        let started = Instant::now();
        let answer = server.tool("boundary", args).with_context(|| format!("incremental boundary at turn {turn}"))?;
        let elapsed = ms(started.elapsed());
        acknowledged = Some(answer["acknowledged"].as_str().with_context(|| format!("turn {turn}: no `acknowledged` in {answer:.300}"))?.to_string());
        for (i, &r) in reported.iter().enumerate() {
            if timed(turn, r) {
                incremental[i].push(elapsed);
            }
        }
        progress.inc(1);
    }
    let incremental_sent = server.sent;
    let incremental_peak = server.peak_mib();
    server.stop()?;

    // Whole: the session at every call, on the reported turns only (see the module doc).
    progress.set_message("whole");
    // A whole 30 MB session escaped into JSON is over the server's default request limit.
    let mut server = Server::start(exe, &temp.path().join("whole"), &["--max-request-bytes", "1073741824"])?;
    let mut whole = Vec::new();
    for &r in &reported {
        let first = r.saturating_sub(SAMPLES).max(1);
        let mut samples = Vec::new();
        for turn in first..=r {
            let started = Instant::now();
            server.tool("boundary", arguments(turn, grown.whole(turn), None)).with_context(|| format!("whole boundary at turn {turn}"))?;
            if timed(turn, r) {
                samples.push(ms(started.elapsed()));
            }
            progress.inc(1);
        }
        whole.push(samples);
    }
    let whole_peak = server.peak_mib();
    server.stop()?;
    progress.finish_and_clear();

    // What the whole mode writes over the whole replay: each turn's request, exactly.
    let mut escaped = serde_json::to_string(&format!("{}\n", grown.header))?.len() + grown.escaped_len(0);
    let mut whole_sent = 0u64;
    for turn in 1..=last {
        escaped += grown.escaped_len(turn);
        whole_sent += whole_request_bytes(turn, escaped);
    }

    let mb = |bytes: f64| bytes / 1e6;
    let at: Vec<AtTurn> = reported
        .iter()
        .enumerate()
        .map(|(i, &turn)| AtTurn { turn, session_mb: mb(grown.bytes_through(turn) as f64), incremental: Timing::of(incremental[i].clone()), whole: Timing::of(whole[i].clone()) })
        .collect();
    let late = late(&at);
    let report = Report {
        session,
        turns: last,
        session_mb: mb(grown.bytes_through(last) as f64),
        samples_per_turn: SAMPLES,
        incremental_mb_sent: mb(incremental_sent as f64),
        whole_mb_sent: mb(whole_sent as f64),
        incremental_sent_per_session_byte: incremental_sent as f64 / grown.bytes_through(last) as f64,
        incremental_late_over_early: late.incremental.p50_ms / at[0].incremental.p50_ms,
        incremental_peak_mib: incremental_peak,
        whole_peak_mib: whole_peak,
        at,
    };
    if options.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print(&report);
    }
    Ok(())
}

fn print(report: &Report) {
    println!("{} grown to {} turns, {:.1} MB, through `cairn serve` (stdio)", report.session, report.turns, report.session_mb);
    println!("{:<10} {:>11} {:>22} {:>22}", "turn", "session", "incremental p50 / p99", "whole p50 / p99");
    for a in &report.at {
        println!("{:<10} {:>8.1} MB {:>9.2} / {:>6.2} ms {:>9.2} / {:>6.2} ms", a.turn, a.session_mb, a.incremental.p50_ms, a.incremental.p99_ms, a.whole.p50_ms, a.whole.p99_ms);
    }
    let peak = |p: Option<f64>| p.map(|p| format!("{p:.0} MiB")).unwrap_or_else(|| "—".into());
    println!("bytes sent, whole replay   incremental {:.1} MB, whole {:.1} MB ({:.0}×)", report.incremental_mb_sent, report.whole_mb_sent, report.whole_mb_sent / report.incremental_mb_sent);
    println!("incremental sent / final session   {:.2}×   (goal < 3×)", report.incremental_sent_per_session_byte);
    println!("incremental p50, turn {} / turn {}   {:.2}×   (goal ≤ 1.5×)", late(&report.at).turn, report.at[0].turn, report.incremental_late_over_early);
    println!("server peak memory   incremental {}, whole {}", peak(report.incremental_peak_mib), peak(report.whole_peak_mib));
    println!("(p99 of {} boundaries per turn is their slowest; the whole mode's bytes are computed for every turn, its times measured on these turns)", report.samples_per_turn);
}
