//! `cairn bench --fleet`: `cairn serve --http` nodes as a deployment runs them, measured from
//! the outside in one run: compactions per second and per-call latency (p50, p99) for one node
//! on a local directory, then 1, 2 and 3 nodes sharing one PostgreSQL database.
//!
//! Each configuration gets a fresh home (a temporary directory, or a scratch database all its
//! nodes share) and a bearer token; its nodes are child processes of this binary, killed (and
//! waited for) when the configuration ends, on error too. Client threads speak MCP's Streamable
//! HTTP by hand and drive conversations that grow between compactions (turns appended, as a
//! session does), each call going to the next node in turn, so one conversation's compactions
//! land on every node and its lock and record cross processes.
//!
//! Per configuration, after a warm-up call on each node: the floor (a tool that compacts
//! nothing, one call at a time), one client alone (latency without queueing), then `CLIENTS`
//! threads at once (throughput, latency under load, and CPU time per call from /proc).
//! `--stateless` runs the nodes as `serve --http --stateless` (no MCP sessions).
//!
//! Where throughput stops growing with nodes is said from the numbers: the gain per added node,
//! and how busy this machine's cores were meanwhile (from /proc: the nodes, PostgreSQL when it
//! runs here, this client, everything else).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use cairn::storage::testing::{self, ScratchDatabase};
use cairn::storage::{Home, Tenant};
use cairn::transcript::{formats, sample};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use serde_json::{json, Value};

use super::percentile;

const PROTOCOL: &str = "2025-06-18";
/// Client threads: calls in flight at once.
const CLIENTS: usize = 8;
/// A gain below this per added node is "no longer growing".
const GROWING: f64 = 1.10;
/// Busier than this, the machine's cores are what limits.
const SATURATED: f64 = 0.85;
/// Calls of a tool that compacts nothing, for the floor under every call.
const FLOOR_CALLS: usize = 10;
/// A floor above this, for a call that does almost nothing on a loopback connection, is worth a line.
const SLOW_FLOOR_MS: f64 = 20.0;

pub struct Options {
    /// The PostgreSQL server (a role that may create databases).
    pub postgres: Option<String>,
    /// Nodes run `serve --http --stateless`: no MCP sessions, JSON responses.
    pub stateless: bool,
    pub quick: bool,
    pub json: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Backend {
    Local,
    Postgres,
}

impl Backend {
    fn name(self) -> &'static str {
        match self {
            Backend::Local => "local directory",
            Backend::Postgres => "PostgreSQL",
        }
    }
}

/// How busy the machine was during a configuration's measured calls, as shares of all its
/// cores' time (1.0 = every core busy throughout).
#[derive(Clone, Copy, Serialize)]
struct Cpu {
    busy: f64,
    nodes: f64,
    /// PostgreSQL's server processes, when they run on this machine (else 0).
    postgres: f64,
    /// This process: the client threads.
    client: f64,
    other: f64,
    /// The cores /proc/stat counts, whose time the shares divide.
    #[serde(skip)]
    cores: usize,
}

#[derive(Clone, Copy, Serialize)]
struct PerCall {
    nodes: f64,
    postgres: f64,
}

/// One configuration's figures.
#[derive(Serialize)]
struct Measured {
    backend: Backend,
    nodes: usize,
    /// Calls under load answered without error.
    calls: usize,
    /// Calls that failed, alone or under load.
    failed: usize,
    /// Calls that committed a compaction.
    committed: usize,
    wall_s: f64,
    /// Calls answered per second of wall time, all client threads together.
    compactions_per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
    /// p50 / the local directory's p50.
    ratio_p50_to_local: Option<f64>,
    /// p50 of one client alone, one call at a time (no queueing), before the others start.
    alone_p50_ms: f64,
    /// alone_p50_ms / the local directory's.
    alone_ratio_to_local: Option<f64>,
    /// p50 of a call that compacts nothing (`plugins_list`), alone: the transport's share of
    /// every figure.
    floor_p50_ms: f64,
    cpu: Option<Cpu>,
    /// CPU time per answered call (ms): the nodes', and PostgreSQL's when it runs here.
    cpu_ms_per_call: Option<PerCall>,
    /// The first failures, each naming its node and call.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    errors: Vec<String>,
}

#[derive(Serialize)]
struct Report {
    /// The nodes ran `serve --http --stateless`.
    stateless: bool,
    conversations: usize,
    /// Compacted by one client alone, before the others.
    alone_conversations: usize,
    compactions_per_conversation: usize,
    clients: usize,
    cores: usize,
    configurations: Vec<Measured>,
    /// Where throughput stops growing with nodes, and why, from the figures above.
    scaling: String,
    /// PostgreSQL's p50 per call against the local directory's, for the goal of ≤ 1.5×.
    goal: String,
    /// The floor under every call, and what it suggests when it is high.
    floor: String,
}

pub fn run(options: Options) -> Result<()> {
    if cfg!(debug_assertions) {
        eprintln!("note: a debug build; measure with `cargo build --release` and `target/release/cairn bench --fleet`.");
    }
    let server = options.postgres.clone().or_else(|| std::env::var(testing::ENV).ok()).filter(|u| !u.is_empty());
    let Some(server) = server else {
        bail!("--fleet needs a PostgreSQL server whose role may create databases: --postgres postgres://USER:PW@HOST:PORT/DB or ${}", testing::ENV);
    };
    // Scratch databases are made on the server testing::ENV names; one now, to fail early.
    std::env::set_var(testing::ENV, &server);
    drop(scratch_database()?);

    let (conversations, alone, rounds) = if options.quick { (16, 4, 3) } else { (96, 16, 5) };
    // Round r sends the session at 12 + 4r turns: 4 turns appended since the last compaction.
    let transcripts: Vec<String> = (0..rounds).map(|r| serde_json::to_string(&formats::write_cairn(&sample::coding_session(12 + 4 * r)))).collect::<Result<_, _>>()?;
    let configurations = [(Backend::Local, 1), (Backend::Postgres, 1), (Backend::Postgres, 2), (Backend::Postgres, 3)];
    let progress = ProgressBar::new((configurations.len() * (conversations + alone) * rounds) as u64);
    progress.set_style(ProgressStyle::with_template("{spinner} {bar:30} {pos}/{len} {msg}").expect("a valid template"));
    let plan = Plan { stateless: options.stateless, conversations, alone, transcripts, progress: progress.clone() };

    let exe = crate::setup::cairn_exe().context("finding this executable")?;
    let mut measured: Vec<Measured> = Vec::new();
    for (backend, nodes) in configurations {
        progress.set_message(format!("{} × {nodes}", backend.name()));
        let figures = configuration(&exe, backend, nodes, &plan).with_context(|| format!("{} × {nodes} node(s)", backend.name()));
        let mut figures = figures.inspect_err(|_| progress.finish_and_clear())?;
        let local = measured.first().filter(|m| m.backend == Backend::Local).unwrap_or(&figures);
        let ratio = |ours: f64, local: f64| (local > 0.0).then(|| ours / local);
        (figures.ratio_p50_to_local, figures.alone_ratio_to_local) = (ratio(figures.p50_ms, local.p50_ms), ratio(figures.alone_p50_ms, local.alone_p50_ms));
        measured.push(figures);
    }
    progress.finish_and_clear();

    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let report = Report {
        stateless: options.stateless,
        conversations,
        alone_conversations: alone,
        compactions_per_conversation: rounds,
        clients: CLIENTS,
        cores,
        scaling: scaling(&measured, cores),
        goal: goal(&measured),
        floor: floor(&measured),
        configurations: measured,
    };
    if options.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&report);
    }
    let failed: usize = report.configurations.iter().map(|m| m.failed).sum();
    if failed > 0 {
        let first = report.configurations.iter().flat_map(|m| m.errors.first()).next().map_or("", String::as_str);
        bail!("{failed} call(s) failed; the first: {first}");
    }
    Ok(())
}

/// What every configuration runs.
struct Plan {
    stateless: bool,
    conversations: usize,
    /// Conversations the lone client compacts.
    alone: usize,
    /// Round r's transcript, already a JSON string literal.
    transcripts: Vec<String>,
    progress: ProgressBar,
}

/// One configuration: a fresh home, its nodes, the calls, the nodes stopped.
fn configuration(exe: &Path, backend: Backend, nodes: usize, plan: &Plan) -> Result<Measured> {
    let dir = tempfile::tempdir()?;
    // Declared before the fleet: dropped after its nodes are gone.
    let scratch;
    let home = match backend {
        Backend::Local => dir.path().join("home").into_os_string().into_string().map_err(|_| anyhow!("a temporary directory that is not UTF-8"))?,
        Backend::Postgres => {
            scratch = scratch_database()?;
            scratch.url.clone()
        }
    };
    let (_, secret) = Home::open(Path::new(&home))?.tokens().create(&Tenant::parse("bench")?, "bench", cairn::storage::TokenScope::Operator)?;
    let fleet = Fleet::start(exe, &home, nodes, plan.stateless, dir.path())?;
    let addrs: Vec<String> = fleet.nodes.iter().map(|n| n.addr.clone()).collect();

    // Warm every node (plugins instantiated, tokenizer loaded, pool connected): not measured.
    for (i, addr) in addrs.iter().enumerate() {
        let mut client = Client::new(addrs.clone(), &secret);
        client.call(i, &format!("warm-{i}"), &plan.transcripts[0]).with_context(|| format!("warming node {i} ({addr})"))?;
    }

    // The floor under every call: a tool that compacts nothing, one call at a time.
    let mut client = Client::new(addrs.clone(), &secret);
    let mut floor = (0..FLOOR_CALLS)
        .map(|i| {
            let started = Instant::now();
            client.tool(i % nodes, "plugins_list", "{}").with_context(|| format!("node {} ({}), plugins_list", i % nodes, addrs[i % nodes]))?;
            Ok(started.elapsed().as_secs_f64() * 1e3)
        })
        .collect::<Result<Vec<f64>>>()?;
    floor.sort_by(f64::total_cmp);

    // One client alone, one call at a time: latency without queueing.
    let alone: Vec<Sample> = drive(addrs.clone(), &secret, "alone-", &(0..plan.alone).collect::<Vec<_>>(), plan, &AtomicUsize::new(0), None);

    // CLIENTS clients at once: throughput, and latency under load.
    let next_node = AtomicUsize::new(0);
    let start = Barrier::new(CLIENTS + 1);
    let (samples, wall, cpu) = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..CLIENTS)
            .map(|t| {
                let (addrs, secret, next_node, start) = (addrs.clone(), secret.clone(), &next_node, &start);
                // Thread t owns conversations t, t + CLIENTS, …
                let owned: Vec<usize> = (t..plan.conversations).step_by(CLIENTS).collect();
                scope.spawn(move || drive(addrs, &secret, "c-", &owned, plan, next_node, Some(start)))
            })
            .collect();
        start.wait();
        let before = cpu_ticks(&fleet.pids());
        let started = Instant::now();
        let samples: Vec<Sample> = threads.into_iter().flat_map(|t| t.join().expect("a client thread panicked")).collect();
        let wall = started.elapsed();
        let cpu = before.zip(cpu_ticks(&fleet.pids())).map(|(b, a)| a.since(&b));
        (samples, wall, cpu)
    });

    let mut errors: Vec<String> = alone.iter().chain(&samples).filter_map(|s| s.outcome.as_ref().err().cloned()).collect();
    let failed = errors.len();
    errors.truncate(5);
    if failed > 0 {
        errors.extend(fleet.nodes.iter().enumerate().map(|(i, n)| format!("node {i} ({}) log, last lines:\n{}", n.addr, tail(&n.log, 20))));
    }
    drop(fleet);

    let answered = |samples: &[Sample]| {
        let mut ms: Vec<f64> = samples.iter().filter(|s| s.outcome.is_ok()).map(|s| s.ms).collect();
        ms.sort_by(f64::total_cmp);
        ms
    };
    let (latencies, alone) = (answered(&samples), answered(&alone));
    let calls = latencies.len();
    // Shares of every core's time, back to CPU milliseconds.
    let per_call = |share: f64, cores: usize| share * cores as f64 * wall.as_secs_f64() * 1e3 / calls.max(1) as f64;
    Ok(Measured {
        backend,
        nodes,
        calls,
        failed,
        committed: samples.iter().filter(|s| s.outcome == Ok(true)).count(),
        wall_s: wall.as_secs_f64(),
        compactions_per_s: calls as f64 / wall.as_secs_f64(),
        p50_ms: percentile(&latencies, 0.50),
        p99_ms: percentile(&latencies, 0.99),
        ratio_p50_to_local: None,
        alone_p50_ms: percentile(&alone, 0.50),
        alone_ratio_to_local: None,
        floor_p50_ms: percentile(&floor, 0.50),
        cpu_ms_per_call: cpu.map(|c| PerCall { nodes: per_call(c.nodes, c.cores), postgres: per_call(c.postgres, c.cores) }),
        cpu,
        errors,
    })
}

/// One call: its latency and whether it committed, or what went wrong.
struct Sample {
    ms: f64,
    outcome: Result<bool, String>,
}

/// Compacts the conversations `{prefix}{n}` for each n of `owned` round by round, each
/// round with the session grown by 4 turns, every call on the next node in turn. The sessions
/// with the nodes are opened first, then `start` (if any) is waited for.
fn drive(addrs: Vec<String>, secret: &str, prefix: &str, owned: &[usize], plan: &Plan, next_node: &AtomicUsize, start: Option<&Barrier>) -> Vec<Sample> {
    let mut client = Client::new(addrs, secret);
    // A node that refuses a session shows in every call made to it.
    let opened: Vec<Result<(), String>> = (0..client.addrs.len()).map(|n| client.session(n).map(|_| ()).map_err(|e| format!("{e:#}"))).collect();
    if let Some(start) = start {
        start.wait();
    }
    let mut samples = Vec::new();
    for (round, transcript) in plan.transcripts.iter().enumerate() {
        for conversation in owned {
            let node = next_node.fetch_add(1, Ordering::Relaxed) % client.addrs.len();
            let key = format!("{prefix}{conversation}");
            let started = Instant::now();
            let outcome = match &opened[node] {
                Err(e) => Err(anyhow!("opening an MCP session: {e}")),
                Ok(()) => client.call(node, &key, transcript),
            };
            let ms = started.elapsed().as_secs_f64() * 1e3;
            let outcome = outcome.map_err(|e| format!("node {node} ({}), compact {key} round {round}: {e:#}", client.addrs[node]));
            samples.push(Sample { ms, outcome });
            plan.progress.inc(1);
        }
    }
    samples
}

/// An MCP client over Streamable HTTP with one session per node.
struct Client {
    agent: ureq::Agent,
    addrs: Vec<String>,
    authorization: String,
    /// Per node, once initialized: its session id (none from a stateless node).
    sessions: Vec<Option<Option<String>>>,
    next_id: u64,
}

impl Client {
    fn new(addrs: Vec<String>, secret: &str) -> Client {
        let agent = ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(Duration::from_secs(120))).build().into();
        Client { agent, sessions: vec![None; addrs.len()], addrs, authorization: format!("Bearer {secret}"), next_id: 0 }
    }

    /// POSTs one JSON-RPC message to node `node`: the session header answered, and for a
    /// request (`id`) its result, from the event stream's `data:` line with that id when the
    /// node streams.
    fn post(&self, node: usize, session: Option<&str>, body: &str, id: Option<u64>) -> Result<(Option<String>, Option<Value>)> {
        let mut request = self
            .agent
            .post(format!("http://{}/mcp", self.addrs[node]))
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", PROTOCOL)
            .header("authorization", &self.authorization)
            .content_type("application/json");
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        let response = request.send(body.as_bytes())?;
        let status = response.status().as_u16();
        let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
        let (session, content_type) = (header("mcp-session-id"), header("content-type").unwrap_or_default());
        let text = response.into_body().with_config().limit(256 * 1024 * 1024).read_to_string()?;
        if status != 200 && status != 202 {
            bail!("HTTP {status}: {}", text.chars().take(500).collect::<String>());
        }
        let Some(id) = id else { return Ok((session, None)) };
        let message = if content_type.starts_with("text/event-stream") {
            text.lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
                .find(|m| m["id"] == id)
                .with_context(|| format!("no answer to request {id} in the event stream: {}", text.chars().take(500).collect::<String>()))?
        } else {
            serde_json::from_str(&text).with_context(|| format!("not JSON: {}", text.chars().take(500).collect::<String>()))?
        };
        if let Some(error) = message.get("error") {
            bail!("JSON-RPC error: {error}");
        }
        Ok((session, Some(message["result"].clone())))
    }

    /// The session on node `node`, opened (initialize, then notifications/initialized) on first
    /// use; none from a stateless node.
    fn session(&mut self, node: usize) -> Result<Option<String>> {
        if let Some(session) = &self.sessions[node] {
            return Ok(session.clone());
        }
        self.next_id += 1;
        let initialize = json!({
            "jsonrpc": "2.0", "id": self.next_id, "method": "initialize",
            "params": { "protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": { "name": "cairn bench --fleet", "version": env!("CARGO_PKG_VERSION") } }
        });
        let (session, _) = self.post(node, None, &initialize.to_string(), Some(self.next_id)).context("initialize")?;
        self.post(node, session.as_deref(), r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#, None).context("notifications/initialized")?;
        self.sessions[node] = Some(session.clone());
        Ok(session)
    }

    /// `compact` of `conversation` with `transcript` (a JSON string literal) on node `node`:
    /// whether it committed.
    fn call(&mut self, node: usize, conversation: &str, transcript: &str) -> Result<bool> {
        let arguments = format!(r#"{{"conversation":"{conversation}","transcript":{transcript},"include_transcript":false}}"#);
        let result = self.tool(node, "compact", &arguments)?;
        result["committed"].as_bool().with_context(|| format!("no `committed` in the result: {}", result.to_string().chars().take(500).collect::<String>()))
    }

    /// `tools/call` of `tool` with `arguments` (a JSON object's text) on node `node`: its
    /// structured content.
    fn tool(&mut self, node: usize, tool: &str, arguments: &str) -> Result<Value> {
        let session = self.session(node)?;
        self.next_id += 1;
        let id = self.next_id;
        let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments}}}}}"#);
        let (_, result) = self.post(node, session.as_deref(), &body, Some(id))?;
        let mut result = result.unwrap_or_default();
        if result["isError"] == true {
            let text: Vec<&str> = result["content"].as_array().into_iter().flatten().filter_map(|c| c["text"].as_str()).collect();
            bail!("{tool} failed: {}", text.join("\n"));
        }
        Ok(result["structuredContent"].take())
    }
}

/// A fresh database on the server testing::ENV names, dropped with the guard; testing's
/// panics (its way to fail a test) become an error here.
fn scratch_database() -> Result<ScratchDatabase> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let created = std::panic::catch_unwind(ScratchDatabase::create);
    std::panic::set_hook(hook);
    match created {
        Ok(Some(database)) => Ok(database),
        Ok(None) => bail!("no PostgreSQL server (${})", testing::ENV),
        Err(panic) => {
            let message = panic.downcast_ref::<String>().cloned().or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()));
            bail!("creating a scratch database: {}", message.unwrap_or_default())
        }
    }
}

/// One `cairn serve --http` child.
struct Node {
    child: Child,
    addr: String,
    log: PathBuf,
}

/// A configuration's nodes; dropping it kills them and waits for each.
struct Fleet {
    nodes: Vec<Node>,
}

impl Fleet {
    /// Starts `count` nodes on `home` (all at once) and waits for each to listen.
    fn start(exe: &Path, home: &str, count: usize, stateless: bool, logs: &Path) -> Result<Fleet> {
        let mut fleet = Fleet { nodes: Vec::new() };
        let mut lines = Vec::new();
        for i in 0..count {
            let log = logs.join(format!("node-{i}.log"));
            let mut child = Command::new(exe)
                .args(["serve", "--http", "127.0.0.1:0", "--home", home, "--conversation", "bench", "--no-watch"])
                .args(stateless.then_some("--stateless"))
                .env("CAIRN_LOG", "warn")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(std::fs::File::create(&log)?)
                .spawn()
                .with_context(|| format!("starting node {i}: {} serve --http", exe.display()))?;
            let stdout = child.stdout.take().expect("piped");
            // From here on the guard owns the child.
            fleet.nodes.push(Node { child, addr: String::new(), log });
            lines.push(first_line(stdout));
        }
        for (i, (node, line)) in fleet.nodes.iter_mut().zip(lines).enumerate() {
            node.addr = listening(&mut node.child, &line).map_err(|e| anyhow!("node {i} did not start: {e:#}; its log ({}):\n{}", node.log.display(), tail(&node.log, 20)))?;
        }
        Ok(fleet)
    }

    fn pids(&self) -> Vec<u32> {
        self.nodes.iter().map(|n| n.child.id()).collect()
    }
}

/// A thread that sends the first line of a node's stdout, then reads (and drops) the rest
/// until the node exits, so the node never writes to a closed or full pipe.
fn first_line(stdout: ChildStdout) -> mpsc::Receiver<std::io::Result<String>> {
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        let _ = send.send(reader.read_line(&mut line).map(|_| line));
        let _ = std::io::copy(&mut reader, &mut std::io::sink());
    });
    receive
}

/// The address a node prints when it listens, `{"listening":"127.0.0.1:PORT"}` as its first
/// line; an error if it exits or stays silent for two minutes.
fn listening(child: &mut Child, line: &mpsc::Receiver<std::io::Result<String>>) -> Result<String> {
    let deadline = Instant::now() + Duration::from_secs(120);
    let line = loop {
        match line.recv_timeout(Duration::from_millis(100)) {
            Ok(line) => break line?,
            Err(mpsc::RecvTimeoutError::Disconnected) => bail!("its stdout closed"),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Some(status) = child.try_wait()? {
                    bail!("it exited with {status}");
                }
                if Instant::now() > deadline {
                    bail!("no address printed within 120 s");
                }
            }
        }
    };
    let printed: Value = serde_json::from_str(&line).with_context(|| format!("its first line is {line:?}"))?;
    printed["listening"].as_str().map(str::to_string).with_context(|| format!("its first line is {line:?}"))
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            let _ = node.child.kill();
        }
        for node in &mut self.nodes {
            let _ = node.child.wait();
        }
    }
}

/// The last `lines` lines of a file.
fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Clock ticks from /proc: the machine's (all cores), and the busy ticks of each group.
#[derive(Clone, Copy)]
struct Ticks {
    total: u64,
    busy: u64,
    nodes: u64,
    postgres: u64,
    client: u64,
    cores: usize,
}

impl Ticks {
    fn since(&self, before: &Ticks) -> Cpu {
        let total = self.total.saturating_sub(before.total).max(1) as f64;
        let share = |a: u64, b: u64| a.saturating_sub(b) as f64 / total;
        let (busy, nodes, postgres, client) = (share(self.busy, before.busy), share(self.nodes, before.nodes), share(self.postgres, before.postgres), share(self.client, before.client));
        Cpu { busy, nodes, postgres, client, other: (busy - nodes - postgres - client).max(0.0), cores: self.cores }
    }
}

/// None where /proc cannot be read (not Linux).
fn cpu_ticks(nodes: &[u32]) -> Option<Ticks> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let fields: Vec<u64> = stat.lines().next()?.split_whitespace().skip(1).take(8).filter_map(|f| f.parse().ok()).collect();
    if fields.len() < 5 {
        return None;
    }
    let total: u64 = fields.iter().sum();
    // idle + iowait
    let busy = total - fields[3] - fields[4];
    let nodes = nodes.iter().filter_map(|pid| process_ticks(&format!("/proc/{pid}"))).sum();
    let client = process_ticks("/proc/self")?;
    let postgres = std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()))
        .filter(|e| std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.trim() == "postgres"))
        .filter_map(|e| process_ticks(&e.path().to_string_lossy()))
        .sum();
    let cores = stat.lines().filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit)).count().max(1);
    Some(Ticks { total, busy, nodes, postgres, client, cores })
}

/// utime + stime of a process (all its threads), in clock ticks.
fn process_ticks(dir: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("{dir}/stat")).ok()?;
    // After the command name's closing parenthesis: state is the first field, utime the 12th.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

fn percent(share: f64) -> String {
    format!("{:.0}%", share * 100.0)
}

/// Where PostgreSQL's throughput stops growing as nodes are added, and what was busy then.
fn scaling(measured: &[Measured], cores: usize) -> String {
    let postgres: Vec<&Measured> = measured.iter().filter(|m| m.backend == Backend::Postgres).collect();
    let series: Vec<String> = postgres.iter().map(|m| format!("{:.1}/s on {}", m.compactions_per_s, nodes(m.nodes))).collect();
    let busy = |m: &Measured| match m.cpu {
        Some(c) => format!(
            "at {} this machine's {cores} cores were {} busy (nodes {}, PostgreSQL {}, bench client {}, other {})",
            nodes(m.nodes),
            percent(c.busy),
            percent(c.nodes),
            percent(c.postgres),
            percent(c.client),
            percent(c.other)
        ),
        None => format!("CPU use at {} unknown (no /proc)", nodes(m.nodes)),
    };
    let stop = postgres.windows(2).find(|w| w[1].compactions_per_s < w[0].compactions_per_s * GROWING).map(|w| w[1]);
    match (stop, postgres.first(), postgres.last()) {
        (_, None, _) | (_, _, None) => "No PostgreSQL configuration was measured.".to_string(),
        (None, _, Some(last)) => format!("Throughput grew with every node added ({}, each step ≥ ×{GROWING:.2}); {}: no saturation up to {}.", series.join(", "), busy(last), nodes(last.nodes)),
        (Some(to), Some(first), _) => {
            let cause = match to.cpu {
                Some(c) if c.busy >= SATURATED => {
                    let shares = [(c.nodes, "the nodes'"), (c.postgres, "PostgreSQL's"), (c.client, "the bench client's"), (c.other, "other processes'")];
                    let largest = shares.into_iter().max_by(|a, b| a.0.total_cmp(&b.0)).map_or("", |l| l.1);
                    let shared = if c.postgres > 0.0 { ", which the database shares" } else { "" };
                    format!("this {cores}-core machine{shared}, saturated (busy ≥ {}; {largest} share the largest): another node only divides the same cores", percent(SATURATED))
                }
                Some(c) => format!("the database, not this machine's CPU ({} of it idle): the calls wait on PostgreSQL (locks, commits, I/O)", percent(1.0 - c.busy)),
                None => "unknown (no CPU figures)".to_string(),
            };
            let already = match first.cpu {
                Some(c) if first.nodes < to.nodes && c.busy >= SATURATED => format!(" (already {} busy at {})", percent(c.busy), nodes(first.nodes)),
                _ => String::new(),
            };
            format!("Throughput stops growing at {} ({}; a step below ×{GROWING:.2}); {}{already}. Limit: {cause}.", nodes(to.nodes), series.join(", "), busy(to))
        }
    }
}

fn nodes(n: usize) -> String {
    format!("{n} node{}", if n == 1 { "" } else { "s" })
}

fn goal(measured: &[Measured]) -> String {
    let verdict = |r: f64| format!("{r:.2}× {}", if r <= 1.5 { "met" } else { "missed" });
    let ratios: Vec<String> = measured
        .iter()
        .filter(|m| m.backend == Backend::Postgres)
        .map(|m| {
            let loaded = m.ratio_p50_to_local.map_or_else(|| "—".to_string(), verdict);
            let alone = m.alone_ratio_to_local.map_or_else(|| "—".to_string(), verdict);
            format!("{} {loaded} under load, {alone} alone", nodes(m.nodes))
        })
        .collect();
    format!("Goal, PostgreSQL's p50 per call ≤ 1.5× the local directory's: {}.", ratios.join("; "))
}

fn floor(measured: &[Measured]) -> String {
    let floors: Vec<String> = measured.iter().map(|m| format!("{:.1}", m.floor_p50_ms)).collect();
    let named: Vec<String> = measured.iter().map(|m| format!("{} × {}", m.backend.name(), m.nodes)).collect();
    let mut line = format!("Floor: a call that compacts nothing (plugins_list), alone, takes {} ms p50 ({}).", floors.join(" / "), named.join(", "));
    if measured.iter().any(|m| m.floor_p50_ms > SLOW_FLOOR_MS) {
        line.push_str(&format!(
            " Over {SLOW_FLOOR_MS} ms on loopback for next to no work is the mark of Nagle's algorithm meeting delayed ACKs \
             (a response written in two parts on a socket without TCP_NODELAY): it sits under every latency above and hides the backends' difference."
        ));
    }
    line
}

fn print_table(report: &Report) {
    println!(
        "{:<16} {:>5} {:>6} {:>6} {:>14} {:>8} {:>8} {:>12} {:>14} {:>9} {:>16} {:>14}",
        "configuration", "nodes", "calls", "failed", "compactions/s", "p50 ms", "p99 ms", "p50 / local", "alone p50 ms", "CPU busy", "node CPU ms/call", "PG CPU ms/call"
    );
    for m in &report.configurations {
        println!(
            "{:<16} {:>5} {:>6} {:>6} {:>14.1} {:>8.1} {:>8.1} {:>12} {:>14} {:>9} {:>16} {:>14}",
            m.backend.name(),
            m.nodes,
            m.calls,
            m.failed,
            m.compactions_per_s,
            m.p50_ms,
            m.p99_ms,
            m.ratio_p50_to_local.map_or_else(|| "—".to_string(), |r| format!("{r:.2}×")),
            format!("{:.1} ({})", m.alone_p50_ms, m.alone_ratio_to_local.map_or_else(|| "—".to_string(), |r| format!("{r:.2}×"))),
            m.cpu.map_or_else(|| "—".to_string(), |c| percent(c.busy)),
            m.cpu_ms_per_call.map_or_else(|| "—".to_string(), |c| format!("{:.1}", c.nodes)),
            m.cpu_ms_per_call.filter(|_| m.backend == Backend::Postgres).map_or_else(|| "—".to_string(), |c| format!("{:.1}", c.postgres))
        );
    }
    println!(
        "({} conversations compacted {} times each, 4 turns appended between compactions, from {} client threads on {} cores, every call to the next node in turn{}; \
         alone: {} conversations from one client, one call at a time, before; CPU from /proc over the loaded calls)",
        report.conversations,
        report.compactions_per_conversation,
        report.clients,
        report.cores,
        if report.stateless { ", the nodes stateless" } else { " in its MCP session there" },
        report.alone_conversations
    );
    println!("{}", report.scaling);
    println!("{}", report.goal);
    println!("{}", report.floor);
    for m in report.configurations.iter().filter(|m| m.failed > 0) {
        println!("{} × {}: {} failed call(s), e.g. {}", m.backend.name(), m.nodes, m.failed, m.errors.first().map_or("", String::as_str));
    }
}
