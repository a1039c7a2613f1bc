//! `cairn bench SESSION…`: Cairn beside its baselines, measured in one run on the same files,
//! each figure with its ratio (these machines are noisy: only ratios mean anything).
//! - Pi 0.73.1's own compaction code in node (`pi.rs`): cold process, warm end to end, the
//!   per-turn replay, peak memory;
//! - shake-elide built natively (`native.rs`) against the same crate as a Wasm component;
//! - warm instantiation, a 1 MiB transcript across the component boundary, start-up with every
//!   bundled plugin from the code cache, the tokenizer against raw tiktoken-rs (a build with
//!   `--features tiktoken-baseline`; without it those rows say so).
//!
//! `cairn bench --long SESSION` grows one session to 30 MB through `cairn serve`, incremental
//! boundaries against whole ones (`long.rs`).
//!
//! `cairn bench --fleet` measures `serve --http` nodes instead (`fleet.rs`): compactions per
//! second and per-call latency, PostgreSQL on 1–3 nodes beside the local directory on one.

mod fleet;
mod long;
mod native;
mod pi;
mod python;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use cairn::chain::{StepInput, Window};
use cairn::record::{Purpose, TriggerInput};
use cairn::storage::{ConversationKey, Home};
use cairn::transcript::{formats, sample, Origin, Role, Transcript};
use cairn::Lifecycle;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use crate::setup;

#[derive(clap::Args)]
pub struct Args {
    /// Pi session files (e.g. ../shared/transcripts/pi/*.jsonl).
    #[arg(required_unless_present = "fleet")]
    files: Vec<PathBuf>,
    /// Instead: `serve --http` nodes on PostgreSQL (1, 2, 3) and on a local directory (1),
    /// driven over HTTP: compactions per second, p50/p99 per call.
    #[arg(long)]
    fleet: bool,
    /// With --fleet: the PostgreSQL server, as a role that may create databases (each
    /// configuration gets a scratch one) [default: $CAIRN_TEST_POSTGRES].
    #[arg(long, value_name = "URL", requires = "fleet")]
    postgres: Option<String>,
    /// With --fleet: the nodes run `serve --http --stateless` (no MCP sessions, JSON responses).
    #[arg(long, requires = "fleet")]
    stateless: bool,
    /// Instead: the first session grown turn by turn (its turns repeated under fresh ids) and
    /// reported at every turn to `cairn serve`, incremental against whole: bytes sent, time
    /// per boundary at turns 10, 100 and 1,000, the server's peak memory.
    #[arg(long, conflicts_with = "fleet")]
    long: bool,
    /// With --long: grow the session to this many MB [default: 30; 2 with --quick].
    #[arg(long, value_name = "MB", requires = "long")]
    long_mb: Option<usize>,
    /// With --long: and to at least this many turns [default: 1000; 100 with --quick].
    #[arg(long, value_name = "TURNS", requires = "long")]
    long_turns: Option<usize>,
    /// Fewer iterations (CI).
    #[arg(long)]
    quick: bool,
    /// Leave out Pi's baseline (no node needed).
    #[arg(long)]
    no_pi: bool,
    /// The Node package `cairn-compaction` with its addon (`host/node` once built, or an
    /// installed `node_modules/cairn-compaction`): adds warm compaction through the addon in node.
    #[arg(long, value_name = "DIR")]
    node_package: Option<PathBuf>,
    /// A Python interpreter with the wheel `cairn-compaction` installed (e.g. a virtual
    /// environment's `bin/python`): adds warm compaction through the wheel in Python.
    #[arg(long, value_name = "PYTHON")]
    python: Option<PathBuf>,
    /// Print one JSON object for scripts.
    #[arg(long)]
    json: bool,
}

/// One figure beside its baseline.
#[derive(Serialize)]
struct Row {
    figure: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<String>,
    unit: &'static str,
    /// `None` only for a figure that needs a baseline this build lacks.
    cairn: Option<f64>,
    baseline_name: &'static str,
    baseline: Option<f64>,
    /// cairn / baseline: below 1 Cairn is ahead.
    ratio: Option<f64>,
    goal: &'static str,
    /// Why the baseline is missing and how to get it.
    #[serde(skip_serializing_if = "Option::is_none")]
    unavailable: Option<String>,
    /// The figure over its session's floor (what no compaction of it can beat here).
    #[serde(skip_serializing_if = "Option::is_none")]
    floor_ratio: Option<f64>,
}

/// The addon row runs in node, beside Pi's baseline.
const NO_NODE: &str = "the Node addon's row runs in node beside Pi's baseline: drop --no-pi";
const NO_ADDON: &str = "for the Node addon's row: cargo build --release -p cairn-node && cp target/release/libcairn_node.so host/node/cairn.linux-x64-gnu.node, then --node-package host/node";

const NO_WHEEL: &str = "for the Python wheel's row: maturin build --release -m host/python/Cargo.toml, pip install the wheel into a virtual environment, then --python VENV/bin/python";

/// Rows whose baseline is raw tiktoken-rs, in a build without it.
const NO_TIKTOKEN: &str = "tiktoken-rs is not in this build; for its rows: cargo run --release --features tiktoken-baseline -- bench …";

struct Bench {
    iterations: usize,
    progress: ProgressBar,
    rows: Vec<Row>,
}

impl Bench {
    #[allow(clippy::too_many_arguments)]
    fn row(&mut self, figure: &'static str, file: Option<&str>, unit: &'static str, cairn: f64, baseline_name: &'static str, baseline: Option<f64>, goal: &'static str) {
        let ratio = baseline.filter(|b| *b > 0.0).map(|b| cairn / b);
        self.rows.push(Row { figure, file: file.map(str::to_string), unit, cairn: Some(cairn), baseline_name, baseline, ratio, goal, unavailable: None, floor_ratio: None });
        self.progress.inc(1);
    }

    /// A host figure whose baseline this build lacks: kept, with `why`, never left out.
    #[allow(clippy::too_many_arguments)]
    fn unavailable(&mut self, figure: &'static str, file: Option<&str>, unit: &'static str, cairn: Option<f64>, baseline_name: &'static str, goal: &'static str, why: impl Into<String>) {
        self.rows.push(Row { figure, file: file.map(str::to_string), unit, cairn, baseline_name, baseline: None, ratio: None, goal, unavailable: Some(why.into()), floor_ratio: None });
        self.progress.inc(1);
    }
}

pub fn run(args: Args) -> Result<()> {
    if args.fleet {
        return fleet::run(fleet::Options { postgres: args.postgres, stateless: args.stateless, quick: args.quick, json: args.json });
    }
    if args.long {
        let options = long::Options {
            target_bytes: args.long_mb.unwrap_or(if args.quick { 2 } else { 30 }) * 1_000_000,
            min_turns: args.long_turns.unwrap_or(if args.quick { 100 } else { 1_000 }),
            json: args.json,
        };
        return long::run(&crate::setup::cairn_exe()?, &args.files[0], options);
    }
    if cfg!(debug_assertions) {
        eprintln!("note: a debug build; the native baselines are unoptimized here. Measure with `cargo run --release -- bench …`.");
    }
    let iterations = if args.quick { 3 } else { 20 };
    let pi = if args.no_pi { None } else { pi::Baseline::install()? };
    // Rows: per session, peak memory only beside Pi; the host's seven.
    let per_file = if pi.is_some() { 13 } else { 12 };
    let progress = ProgressBar::new((args.files.len() * per_file + 7) as u64);
    progress.set_style(ProgressStyle::with_template("{spinner} {bar:30} {pos}/{len} {msg}").expect("a valid template"));
    let mut bench = Bench { iterations, progress, rows: Vec::new() };

    for file in &args.files {
        let name = file.file_name().unwrap_or_default().to_string_lossy().into_owned();
        bench.progress.set_message(name.clone());
        per_session(&mut bench, file, &name, pi.as_ref(), Embedded { node_package: args.node_package.as_deref(), python: args.python.as_deref() })?;
    }
    bench.progress.set_message("host");
    host_figures(&mut bench)?;
    bench.progress.finish_and_clear();

    if args.json {
        println!("{}", serde_json::to_string_pretty(&bench.rows)?);
    } else {
        print_table(&bench.rows, iterations);
    }
    Ok(())
}

/// Cairn's packages for other languages, when the bench is given them.
struct Embedded<'a> {
    node_package: Option<&'a Path>,
    python: Option<&'a Path>,
}

fn per_session(bench: &mut Bench, file: &Path, name: &str, pi: Option<&pi::Baseline>, embedded: Embedded) -> Result<()> {
    let text = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let exe = crate::setup::cairn_exe()?;
    let temp = tempfile::tempdir()?;
    let first_row = bench.rows.len();
    let floor = floor_ms(bench.iterations, file, name, temp.path())?;
    bench.row(FLOOR, Some(name), "ms", floor, "—", None, "");

    // Cold: one whole process each (the code cache warm, as after the first run).
    let cold = (0..bench.iterations.min(5)).map(|i| cold_cairn(&exe, file, temp.path(), &format!("cold-{i}"))).collect::<Result<Vec<_>>>()?;
    let (cold_ms, cold_rss) = (median(cold.iter().map(|c| c.0).collect()), cold.iter().map(|c| c.1).fold(0.0, f64::max));
    let pi_cold = pi.map(|p| p.cold(file, bench.iterations.min(5))).transpose()?;
    bench.row("cold compaction (process)", Some(name), "ms", cold_ms, "Pi cold process", pi_cold.as_ref().map(|c| c.ms), "≤ 0.5×");

    // The per-turn replay: the median of three, each in a fresh home with no entry of the
    // session counted yet (the warm runs below would leave every count kept, which Pi's replay
    // does not have), as the floors' medians count afresh.
    let (transcript, _) = formats::parse(&text, name)?;
    let (replay_host, replay_policy) = setup::host_and_policy(&[], None)?;
    // The tables are built on first use; a warm server has them (`serve` loads them at start).
    let tokenizer = replay_host.tokenizer();
    tokenizer.load();
    let lifecycle = Lifecycle::new(replay_host, Home::open(&temp.path().join("replay"))?, replay_policy);
    let key = ConversationKey::derive(&format!("replay-{name}"));
    let replays = (0..bench.iterations.min(3))
        .map(|i| {
            tokenizer.forget_kept_counts();
            let lifecycle = lifecycle.with_home(Home::open(&temp.path().join(format!("replay-{i}")))?);
            let started = Instant::now();
            crate::commands::simulate::replay(&lifecycle, &key, &transcript, name.to_string(), 128_000, RESERVE, |_| {})?;
            Ok(ms(started.elapsed()))
        })
        .collect::<Result<Vec<_>>>()?;
    let replay_ms = median(replays);
    let pi_replay = pi.map(|p| p.replay(file)).transpose()?;
    bench.row(REPLAY, Some(name), "ms", replay_ms, "Pi turn-by-turn replay", pi_replay, "≤ 1×");
    let replay_floor = replay_floor_ms(bench.iterations.min(5), file, name, temp.path())?;
    bench.row(REPLAY_FLOOR, Some(name), "ms", replay_floor, "—", None, "");
    // Warm, in process, end to end from the text.
    let cairn = setup::host(&[])?;
    let policy = cairn.default_policy()?;
    let home = Home::open(&temp.path().join("warm"))?;
    let warm = warm_p50(bench.iterations, |i| {
        let started = Instant::now();
        let (transcript, _) = formats::parse(&text, name)?;
        let mut store = home.conversation(&ConversationKey::parse(&format!("warm-{i}"))?)?;
        cairn.compact(&policy, &mut store, &transcript, name)?;
        Ok(ms(started.elapsed()))
    })?;
    let pi_warm = pi.map(|p| p.warm(file, bench.iterations)).transpose()?;
    bench.row("warm compaction, end to end from text (p50)", Some(name), "ms", warm, "Pi warm prepareCompaction", pi_warm, "≤ 1×");
    // The same, of a conversation its boundaries have recorded already (a harness on `cairn
    // serve` or the hooks): the parse and the compaction timed, the earlier snapshot not.
    let recorded = warm_p50(bench.iterations, |i| {
        let started = Instant::now();
        let (transcript, _) = formats::parse(&text, name)?;
        let parsed = started.elapsed();
        let mut store = home.conversation(&ConversationKey::parse(&format!("recorded-{i}"))?)?;
        let mut counted = transcript.clone();
        cairn.tokenizer().count_transcript(&mut counted);
        store.record_snapshot("boundary", &counted.entries)?;
        let started = Instant::now();
        cairn.compact(&policy, &mut store, &transcript, name)?;
        Ok(ms(parsed + started.elapsed()))
    })?;
    bench.row("warm compaction of a recorded conversation (p50)", Some(name), "ms", recorded, "Pi warm prepareCompaction", pi_warm, "≤ 1×");
    let (in_process, in_process_policy) = setup::host_and_policy(&[], None)?;
    let harness = cairn::harness::Harness::new(Lifecycle::new(in_process, Home::open(&temp.path().join("incremental"))?, in_process_policy));
    let incremental = incremental_boundary_ms(bench.iterations, &text, name, |boundary| boundary.in_process(&harness))?;
    bench.row("warm compaction at an incremental boundary (p50)", Some(name), "ms", incremental, "Pi warm prepareCompaction", pi_warm, "≤ 1×");

    // As a harness outside this process calls it: `cairn serve` over MCP (JSON-RPC on a child's
    // stdio, the text sent and the compacted context answered), the Node package's addon in node
    // (the text and the answer across Node-API) and the Python wheel in Python. A fresh
    // conversation per call, as above.
    let mut server = long::Server::start(&exe, &temp.path().join("mcp"), &[])?;
    let through_serve = warm_p50(bench.iterations, |i| {
        let started = Instant::now();
        server.tool("compact", serde_json::json!({"conversation": format!("mcp-{i}"), "transcript": text}))?;
        Ok(ms(started.elapsed()))
    })?;
    let serve_incremental = incremental_boundary_ms(bench.iterations, &text, name, |boundary| boundary.through_serve(&mut server))?;
    server.stop()?;
    bench.row("warm compaction through `cairn serve` (MCP over stdio, p50)", Some(name), "ms", through_serve, "Pi warm prepareCompaction", pi_warm, "≤ 1×");
    bench.row("warm compaction at an incremental boundary through `cairn serve` (MCP over stdio, p50)", Some(name), "ms", serve_incremental, "Pi warm prepareCompaction", pi_warm, "≤ 1×");
    match (pi, embedded.node_package) {
        (Some(pi), Some(package)) => {
            let addon = pi.addon(file, bench.iterations, package, &temp.path().join("addon"))?;
            bench.row("warm compaction through the Node addon (p50)", Some(name), "ms", addon, "Pi warm prepareCompaction", pi_warm, "≤ 1×");
        }
        (None, _) => bench.unavailable("warm compaction through the Node addon (p50)", Some(name), "ms", None, "Pi warm prepareCompaction", "≤ 1×", NO_NODE),
        (_, None) => bench.unavailable("warm compaction through the Node addon (p50)", Some(name), "ms", None, "Pi warm prepareCompaction", "≤ 1×", NO_ADDON),
    }
    // In Python, beside LangChain's own compaction: the same session as OpenAI chat messages.
    const WHEEL: &str = "warm compaction through the Python wheel (p50)";
    const LANGCHAIN: &str = "the wheel on chat messages vs LangChain's SummarizationMiddleware (p50)";
    const LANGCHAIN_BASELINE: &str = "LangChain preparing its summary (fake model)";
    match embedded.python {
        Some(python) => {
            let messages = temp.path().join("messages.json");
            std::fs::write(&messages, formats::write_openai(&transcript))?;
            let wheel = python::warm(python, file, &messages, bench.iterations, &temp.path().join("python"))?;
            bench.row(WHEEL, Some(name), "ms", wheel.text_ms, "Pi warm prepareCompaction", pi_warm, "≤ 1×");
            match wheel.langchain_ms {
                Ok(langchain) => bench.row(LANGCHAIN, Some(name), "ms", wheel.messages_ms, LANGCHAIN_BASELINE, Some(langchain), "≤ 1×"),
                Err(why) => bench.unavailable(LANGCHAIN, Some(name), "ms", Some(wheel.messages_ms), LANGCHAIN_BASELINE, "≤ 1×", why),
            }
        }
        None => {
            bench.unavailable(WHEEL, Some(name), "ms", None, "Pi warm prepareCompaction", "≤ 1×", NO_WHEEL);
            bench.unavailable(LANGCHAIN, Some(name), "ms", None, LANGCHAIN_BASELINE, "≤ 1×", NO_WHEEL);
        }
    }

    if pi.is_some() {
        bench.row("peak memory, cold compaction", Some(name), "MiB", cold_rss, "Pi cold process", pi_cold.map(|c| c.rss_mib), "≤ 1×");
    }

    // shake-elide: the Wasm component (as the chain calls it) against the same crate natively.
    let (wasm, native) = shake_elide_wasm_vs_native(bench.iterations, &cairn, &policy, transcript)?;
    bench.row("shake-elide: Wasm component vs native build", Some(name), "ms", wasm, "the same crate, native", Some(native), "≤ 1.3×");

    for row in bench.rows[first_row..].iter_mut().filter(|r| r.unit == "ms" && r.figure != FLOOR && r.figure != REPLAY_FLOOR) {
        let floor = if row.figure == REPLAY { replay_floor } else { floor };
        row.floor_ratio = row.cairn.map(|ms| ms / floor);
    }
    Ok(())
}

/// The case harnesses live in (median ms): every boundary reported incrementally, so the record
/// holds the session when one compacts. Per conversation, the session up to its last user
/// message is reported whole (untimed, a window nothing fills); then the boundary that sends only
/// the last turn's entries (`since` the entry acknowledged) in a window the session fills to 80 %
/// (the default trigger compacts at 75 %) is timed until the compacted context is back, through
/// `send` (the harness API in this process, or `cairn serve`'s `boundary` tool over MCP).
fn incremental_boundary_ms(iterations: usize, text: &str, name: &str, mut send: impl FnMut(Boundary) -> Result<Answered>) -> Result<f64> {
    let (mut whole, _) = formats::parse(text, name)?;
    cairn::tokenizer::Tokenizer::default().count_transcript(&mut whole);
    let window = (whole.total_tokens() as f64 / 0.8) as u64;
    // Sent as Cairn's own JSONL (every entry with its id, whatever version of Pi wrote the
    // file): the context up to its last user message, then that last turn.
    let last_turn = whole
        .entries
        .iter()
        .rposition(|e| e.role == Role::User && e.origin != Origin::Summary)
        .filter(|&i| i > 0)
        .with_context(|| format!("{name}: no user message after the first entry, so no turn to report incrementally"))?;
    let part = |entries: &[cairn::transcript::Entry]| formats::write_cairn(&Transcript { entries: entries.to_vec(), ..Transcript::default() });
    let (earlier, last) = (part(&whole.entries[..last_turn]), part(&whole.entries[last_turn..]));
    warm_p50(iterations, |i| {
        let conversation = format!("incremental-{i}");
        let recorded = send(Boundary { conversation: conversation.clone(), turn: 1, transcript: earlier.clone(), window: 1 << 40, since: None })?;
        let since = recorded.acknowledged.with_context(|| format!("{name}: the first boundary acknowledged no entry"))?;
        let started = Instant::now();
        let answer = send(Boundary { conversation, turn: 2, transcript: last.clone(), window, since: Some(since) })?;
        let elapsed = ms(started.elapsed());
        anyhow::ensure!(answer.kind == "compacted", "{name}: the incremental boundary did not compact ({}: {})", answer.kind, answer.reason);
        Ok(elapsed)
    })
}

/// One boundary as `incremental_boundary_ms` reports it, and what it reads of the answer.
struct Boundary {
    conversation: String,
    turn: u32,
    transcript: String,
    window: u64,
    since: Option<String>,
}

struct Answered {
    acknowledged: Option<String>,
    /// The action's kind and its reason ("" when it gave none).
    kind: String,
    reason: String,
}

impl Boundary {
    /// Through the harness API in this process, as the packages call it.
    fn in_process(self, harness: &cairn::harness::Harness) -> Result<Answered> {
        let answer = harness.boundary(cairn::harness::BoundaryRequest {
            conversation: self.conversation,
            turn: self.turn,
            transcript: Some(self.transcript),
            path: None,
            window: self.window,
            reserve: Some(RESERVE),
            usage: None,
            turn_complete: None,
            tool_call_outstanding: None,
            include_transcript: None,
            dry_run: None,
            format: None,
            since: self.since,
        })?;
        Ok(Answered { acknowledged: answer.acknowledged, kind: answer.action.kind, reason: answer.action.reason.unwrap_or_default() })
    }

    /// Through `cairn serve`'s `boundary` tool over MCP.
    fn through_serve(self, server: &mut long::Server) -> Result<Answered> {
        let mut request = serde_json::json!({"conversation": self.conversation, "turn": self.turn, "transcript": self.transcript, "window": self.window, "reserve": RESERVE});
        if let Some(since) = self.since {
            request["since"] = since.into();
        }
        let answer = server.tool("boundary", request)?;
        let (action, text) = (&answer["action"], |v: &serde_json::Value| v.as_str().map(str::to_string));
        Ok(Answered { acknowledged: text(&answer["acknowledged"]), kind: text(&action["kind"]).unwrap_or_default(), reason: text(&action["reason"]).unwrap_or_default() })
    }
}

/// The median of `run(i)`'s figures (ms) for i in 1..=iterations, after run(0) warms the caches.
fn warm_p50(iterations: usize, mut run: impl FnMut(usize) -> Result<f64>) -> Result<f64> {
    run(0)?;
    Ok(median((1..=iterations).map(&mut run).collect::<Result<_>>()?))
}

/// Tokens kept free for the reply, as harnesses report by default.
const RESERVE: u64 = 16_384;

const FLOOR: &str = "the floor: read, parse, count once, one synced write";
const REPLAY: &str = "per-turn replay (simulate, window 128k)";
const REPLAY_FLOOR: &str = "the floor of a per-turn replay: the same, one synced append per boundary";

/// What no compaction of the session can beat on this machine (median ms): reading and parsing
/// it once, counting its tokens once (none kept from earlier counts), and one synced write of
/// its entries as the record stores them.
fn floor_ms(iterations: usize, file: &Path, name: &str, temp: &Path) -> Result<f64> {
    let record = temp.join("floor.json");
    read_parse_count_then(iterations, file, name, |transcript| {
        // Serialized whole, then written: straight into the file, serde_json would make a
        // system call per token of JSON (millions for a large session).
        let bytes = serde_json::to_vec(&transcript.entries)?;
        let mut out = std::fs::File::create(&record)?;
        out.write_all(&bytes)?;
        Ok(out.sync_data()?)
    })
}

/// What no per-turn replay of the session can beat (median ms): [`floor_ms`]'s read, parse
/// and count, and a boundary per turn that records that turn's entries as Cairn promises to
/// (synced before it answers, so an entry acknowledged is never lost) — one synced append per
/// boundary, where the floor has one write for the whole session.
fn replay_floor_ms(iterations: usize, file: &Path, name: &str, temp: &Path) -> Result<f64> {
    let record = temp.join("replay-floor.jsonl");
    read_parse_count_then(iterations, file, name, |transcript| {
        let mut out = std::fs::File::create(&record)?;
        // A session's entries come in turn order: one run of entries per turn.
        for turn in transcript.entries.chunk_by(|a, b| a.turn == b.turn) {
            let mut line = serde_json::to_vec(turn)?;
            line.push(b'\n');
            out.write_all(&line)?;
            out.sync_data()?;
        }
        Ok(())
    })
}

/// The median ms of reading and parsing the session, counting its tokens afresh, and `write`.
fn read_parse_count_then(iterations: usize, file: &Path, name: &str, mut write: impl FnMut(&Transcript) -> Result<()>) -> Result<f64> {
    let tokenizer = cairn::tokenizer::Tokenizer::default();
    tokenizer.load();
    let samples = (0..iterations)
        .map(|_| {
            let started = Instant::now();
            let text = std::fs::read_to_string(file)?;
            let (transcript, _) = formats::parse(&text, name)?;
            let tokens: u64 = transcript.entries.iter().map(|e| u64::from(tokenizer.count_afresh(&e.model_text()))).sum();
            anyhow::ensure!(tokens > 0, "{name}: nothing to count");
            write(&transcript)?;
            Ok(ms(started.elapsed()))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(median(samples))
}

fn host_figures(bench: &mut Bench) -> Result<()> {
    // Start-up with every bundled plugin from the code cache (warmed by the runs above), and the
    // tokenizer's first load, which start-up excludes.
    let started = Instant::now();
    let cairn = setup::host(&[])?;
    let startup = ms(started.elapsed());
    bench.row("start-up, every bundled plugin from the cache", None, "ms", startup, "budget: 10 ms", Some(10.0), "≤ 10 ms + tokenizer");

    // Warm instantiation and one call: the trigger in a fresh store each time.
    let policy = cairn.default_policy()?;
    let trigger = policy.trigger.as_ref().context("the default policy has a trigger")?;
    let input = TriggerInput { context_tokens: Some(50_000), window: 128_000, reserve: 16_384, turn: 7, turns_since_maintenance: None, cooldown_left: 0, pending: None, recent: vec![] };
    let mut calls: Vec<f64> = (0..bench.iterations * 50)
        .map(|_| {
            let started = Instant::now();
            let _ = cairn.ask_trigger(trigger, &input, policy.compaction.breaker());
            started.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    calls.sort_by(f64::total_cmp);
    bench.row("warm instantiation + call, p50", None, "µs", percentile(&calls, 0.50), "—", None, "");
    bench.row("warm instantiation + call, p99", None, "µs", percentile(&calls, 0.99), "—", None, "");

    // A 1 MiB transcript into the component and its outcome back.
    let mut big = sample::coding_session(8);
    while big.entries.iter().map(|e| e.model_text().len()).sum::<usize>() < 1 << 20 {
        let more = sample::coding_session(8);
        let offset = big.entries.len();
        big.entries.extend(more.entries.into_iter().skip(1).map(|mut e| {
            e.id = format!("{}-{offset}", e.id);
            e
        }));
    }
    let (across, native) = shake_elide_wasm_vs_native(bench.iterations, &cairn, &policy, big.clone())?;
    bench.row("1 MiB transcript through shake-elide, Wasm vs native", None, "ms", across, "the same crate, native", Some(native), "≤ 1.3×");
    // Contract 0.2.0's two ways to read the lent conversation, in the same component: the
    // outlines and only the texts a decision needs, or the window's entries in one batch.
    let batched = cairn.load_policy(READ_WINDOW_IN_ONE_BATCH, "bench")?;
    let (in_one_batch, _) = shake_elide_wasm_vs_native(bench.iterations, &cairn, &batched, big.clone())?;
    bench.row("1 MiB, shake-elide reading lent vs window batch", None, "ms", across, "the window in one batch", Some(in_one_batch), "≤ 1×");

    // The tokenizer: Cairn's counting (pieces at pre-token boundaries) against raw tiktoken-rs.
    let text: String = big.entries.iter().map(|e| e.model_text()).collect();
    let tokenizer = cairn.tokenizer();
    let started = Instant::now();
    let ours = tokenizer.count(&text);
    let ours_mbs = text.len() as f64 / 1e6 / started.elapsed().as_secs_f64();
    match tiktoken(&text) {
        Some((theirs, raw_mbs)) => {
            bench.row("tokenizer throughput", None, "MB/s", ours_mbs, "tiktoken-rs encode_ordinary", Some(raw_mbs), "≥ 1×");
            let exact = if theirs == 0 { 100.0 } else { 100.0 * (1.0 - (ours as f64 - theirs as f64).abs() / theirs as f64) };
            bench.row("tokenizer exactness (1 MiB session)", None, "%", exact, "tiktoken-rs", Some(100.0), "= 100 %");
        }
        None => {
            bench.unavailable("tokenizer throughput", None, "MB/s", Some(ours_mbs), "tiktoken-rs: not in build", "≥ 1×", NO_TIKTOKEN);
            bench.unavailable("tokenizer exactness (1 MiB session)", None, "%", None, "tiktoken-rs: not in build", "= 100 %", NO_TIKTOKEN);
        }
    }
    Ok(())
}

/// Raw tiktoken-rs on `text`: its token count and MB/s (its tables loaded before the clock).
#[cfg(feature = "tiktoken-baseline")]
fn tiktoken(text: &str) -> Option<(usize, f64)> {
    let raw = tiktoken_rs::o200k_base_singleton();
    let started = Instant::now();
    let tokens = raw.encode_ordinary(text).len();
    Some((tokens, text.len() as f64 / 1e6 / started.elapsed().as_secs_f64()))
}

/// The shipped binary carries one tokenizer table, Cairn's own.
#[cfg(not(feature = "tiktoken-baseline"))]
fn tiktoken(_text: &str) -> Option<(usize, f64)> {
    None
}

/// The default policy's shake-elide step, reading the window's entries in one batch.
const READ_WINDOW_IN_ONE_BATCH: &str = r#"
[[chain]]
plugin = "shake-elide"
grants = ["log", "tokens", "archive:write"]
config = { min_tokens = 200, protected_tools = [], read_window_in_one_batch = true }
"#;

/// Median ms of shake-elide (the default chain's first step) on `transcript` as a Wasm
/// component through the host, and of its source built natively, on the same window.
fn shake_elide_wasm_vs_native(iterations: usize, cairn: &cairn::Cairn, policy: &cairn::CheckedPolicy, mut transcript: Transcript) -> Result<(f64, f64)> {
    cairn.tokenizer().count_transcript(&mut transcript);
    let total = transcript.total_tokens();
    let settings = &policy.compaction;
    let window = Window::compute(&transcript.entries, settings.keep_recent(total), settings.target(total));
    let input = StepInput {
        purpose: Purpose::Compact,
        entries: &transcript.entries,
        window: &window,
        archive_id: "a-0000000000000000",
        artifacts_before: 0,
        archive: None,
        preserve: None,
        resume: None,
        previous_checkpoint: None,
        previous_checkpoint_through: None,
        deadline: Instant::now() + Duration::from_secs(600),
        reject_unverified: false,
        budget: None,
    };
    let wasm = (0..iterations)
        .map(|_| {
            let started = Instant::now();
            let answer = cairn.run_step(policy, 0, &input).context("the default chain has a first step")?;
            anyhow::ensure!(answer.output.is_ok(), "shake-elide failed in Wasm: {:?}", answer.output.err());
            Ok(ms(started.elapsed()))
        })
        .collect::<Result<Vec<_>>>()?;
    let native_ms: Vec<f64> = (0..iterations).map(|_| ms(native::shake_elide(&transcript, &window, &policy.stages[0].chain[0].config))).collect();
    Ok((median(wasm), median(native_ms)))
}

/// One process run to completion: wall time (ms), stdout and stderr.
fn timed_process(command: &mut Command) -> Result<(f64, String, String)> {
    let started = Instant::now();
    let out = command.stdin(Stdio::null()).output().with_context(|| format!("starting {command:?}"))?;
    let elapsed = ms(started.elapsed());
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
    if !out.status.success() {
        bail!("{command:?} failed: {stderr}");
    }
    Ok((elapsed, stdout, stderr))
}

/// A cold `cairn compact`: wall time and the process's own peak memory (MiB), which it
/// reports on stderr when `CAIRN_PEAK_RSS` is set (getrusage would count the bench's own
/// pages, copied at fork).
fn cold_cairn(exe: &Path, file: &Path, home: &Path, conversation: &str) -> Result<(f64, f64)> {
    let (ms, _, stderr) = timed_process(Command::new(exe).args(["compact"]).arg(file).arg("--home").arg(home).args(["--conversation", conversation]).env("CAIRN_PEAK_RSS", "1"))?;
    let kib = stderr.lines().find_map(|l| l.strip_prefix("cairn: peak-rss-kib ")).and_then(|n| n.trim().parse::<f64>().ok()).context("cairn reported no peak memory")?;
    Ok((ms, kib / 1024.0))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    percentile(&values, 0.5)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted.get(((sorted.len().saturating_sub(1)) as f64 * p).round() as usize).copied().unwrap_or(0.0)
}

fn print_table(rows: &[Row], iterations: usize) {
    println!("{:<52} {:<28} {:>12} {:>12}  {:<28} {:>7} {:>8}  goal", "figure", "session", "cairn", "baseline", "baseline is", "ratio", "× floor");
    for row in rows {
        let value = |v: f64| format!("{v:.2} {}", row.unit);
        let ratio = |r: Option<f64>| r.map(|r| format!("{r:.2}×")).unwrap_or_else(|| "—".into());
        println!(
            "{:<52} {:<28} {:>12} {:>12}  {:<28} {:>7} {:>8}  {}",
            row.figure,
            row.file.as_deref().unwrap_or(""),
            row.cairn.map(value).unwrap_or_else(|| "—".into()),
            row.baseline.map(value).unwrap_or_else(|| "—".into()),
            row.baseline_name,
            ratio(row.ratio),
            ratio(row.floor_ratio),
            row.goal
        );
    }
    println!("({iterations} iterations per figure; ratios below 1 mean Cairn is ahead; these machines are noisy)");
    let mut missing: Vec<&str> = rows.iter().filter_map(|r| r.unavailable.as_deref()).collect();
    missing.dedup();
    for why in missing {
        println!("({why})");
    }
}
