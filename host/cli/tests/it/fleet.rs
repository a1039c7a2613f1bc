//! A fleet: three `cairn serve --http` nodes on one PostgreSQL database. 200 conversations (the
//! same 100 keys in two tenants), each driven through three boundaries that compact, by clients
//! that pick a node at random for every call; one node is killed (SIGKILL) mid-run and
//! restarted. Afterwards every record is whole and ordered, nothing was committed twice, every
//! archive a client was told of is readable from every node, and the tenants never meet.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use cairn::record::Event;
use cairn::storage::testing::ScratchDatabase;
use cairn::storage::{ConversationKey, Home, Tenant};
use cairn::transcript::{formats, sample};
use serde_json::{json, Value};

const NODES: usize = 3;
const KEYS: usize = 100;
const TENANTS: [&str; 2] = ["acme", "globex"];
const TURNS: [u32; 3] = [10, 20, 30];
const CLIENTS: usize = 8;
const PROTOCOL: &str = "2025-06-18";

/// A compaction a client was told of: its tenant, key, archive id and artifact URIs.
type Told = (String, String, String, Vec<String>);

/// One node: its process and address (a restarted node listens on a new port).
struct Node {
    child: Child,
    addr: String,
}

fn start(url: &str, log: &std::path::Path) -> Node {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["serve", "--http", "127.0.0.1:0", "--stateless", "--home", url, "--no-watch"])
        .env("CAIRN_LOG", "warn")
        .env("CAIRN_POSTGRES_POOL", "12")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap())
        .spawn()
        .expect("starting a node");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let listening: Value = serde_json::from_str(&line).unwrap_or_else(|_| panic!("a node printed {line:?}; log:\n{}", std::fs::read_to_string(log).unwrap_or_default()));
    Node { child, addr: listening["listening"].as_str().unwrap().to_string() }
}

struct Fleet {
    nodes: RwLock<Vec<Node>>,
    /// Boundaries in flight, per node address.
    busy: Mutex<HashMap<String, usize>>,
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for node in self.nodes.write().unwrap().iter_mut() {
            let _ = node.child.kill();
            let _ = node.child.wait();
        }
    }
}

/// A harness's client: a bearer token. The nodes run `--stateless`: no MCP session, so any
/// node serves any call, as behind a load balancer without sticky sessions.
struct Client {
    agent: ureq::Agent,
    token: String,
    next_id: u64,
}

impl Client {
    fn new(token: &str) -> Client {
        let agent = ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(Duration::from_secs(120))).build().into();
        Client { agent, token: token.to_string(), next_id: 1 }
    }

    /// A tool call on one node: Ok(Ok(structured content)), Ok(Err(tool error)), or Err(the
    /// node failed: retry elsewhere).
    fn call(&mut self, addr: &str, tool: &str, arguments: &Value) -> Result<Result<Value, String>, String> {
        self.next_id += 1;
        let message = json!({ "jsonrpc": "2.0", "id": self.next_id, "method": "tools/call", "params": { "name": tool, "arguments": arguments } });
        let response = self
            .agent
            .post(&format!("http://{addr}/mcp"))
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", PROTOCOL)
            .header("authorization", format!("Bearer {}", self.token))
            .content_type("application/json")
            .send(message.to_string().as_bytes())
            .map_err(|e| format!("{addr}: {e}"))?;
        let status = response.status().as_u16();
        let body = response.into_body().with_config().limit(64 << 20).read_to_string().map_err(|e| format!("{addr}: {e}"))?;
        if status != 200 {
            return Err(format!("{addr}: HTTP {status}: {body}"));
        }
        let answer: Value = serde_json::from_str(&body).map_err(|e| format!("{addr}: not JSON-RPC ({e}): {body:?}"))?;
        let result = &answer["result"];
        if !result.is_object() {
            return Err(format!("{addr}: {tool}: {answer}"));
        }
        Ok(if result["isError"] == true { Err(result["content"].to_string()) } else { Ok(result["structuredContent"].clone()) })
    }
}

/// A cheap per-thread random number: which node serves the next call.
fn pick(seed: &mut u64, n: usize) -> usize {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    (*seed % n as u64) as usize
}

/// The transcript of `tenant`'s conversation at boundary `k`: it grows by four turns each
/// time, and every entry id names the tenant (so a leak would show in the other's record).
fn transcript(tenant: &str, k: usize) -> String {
    let mut session = sample::coding_session(8 + 4 * k);
    for entry in &mut session.entries {
        entry.id = format!("{tenant}-{}", entry.id);
    }
    formats::write_cairn(&session)
}

#[test]
fn three_nodes_on_postgresql_lose_nothing_when_one_is_killed_mid_run() {
    let Some(db) = ScratchDatabase::create() else { return };
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("nodes.log");
    let home = Home::open(std::path::Path::new(&db.url)).unwrap();
    let tokens: HashMap<&str, String> = TENANTS.iter().map(|t| (*t, home.tokens().create(&Tenant::parse(t).unwrap(), "fleet", cairn::storage::TokenScope::Tenant).unwrap().1)).collect();
    let fleet = Arc::new(Fleet { nodes: RwLock::new((0..NODES).map(|_| start(&db.url, &log)).collect()), busy: Mutex::default() });

    // Work: (tenant, key), each worked through its boundaries in order by one client thread.
    let work: Vec<(&str, String)> = TENANTS.iter().flat_map(|t| (0..KEYS).map(move |i| (*t, format!("conv-{i}")))).collect();
    let work = Arc::new(Mutex::new(work.into_iter()));
    let done = Arc::new(AtomicUsize::new(0));
    let retries = Arc::new(AtomicUsize::new(0));
    // What clients were told: (tenant, key) → archive ids and artifact URIs of compactions.
    let told: Arc<Mutex<Vec<Told>>> = Arc::default();
    let transcripts: Vec<Vec<String>> = TENANTS.iter().map(|t| (0..TURNS.len()).map(|k| transcript(t, k)).collect()).collect();
    let transcripts = Arc::new(transcripts);

    let started = Instant::now();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|n| {
            let (fleet, work, done, retries, told, tokens, transcripts) = (fleet.clone(), work.clone(), done.clone(), retries.clone(), told.clone(), tokens.clone(), transcripts.clone());
            std::thread::spawn(move || {
                let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ (n as u64 + 1).wrapping_mul(0x2545_f491_4f6c_dd1d);
                let mut clients: HashMap<&str, Client> = TENANTS.iter().map(|t| (*t, Client::new(&tokens[t]))).collect();
                loop {
                    let Some((tenant, key)) = work.lock().unwrap().next() else { break };
                    let t = TENANTS.iter().position(|x| *x == tenant).unwrap();
                    let client = clients.get_mut(tenant).unwrap();
                    for (k, turn) in TURNS.iter().enumerate() {
                        let calls = [
                            ("request", json!({ "conversation": key, "kind": "compact" })),
                            ("boundary", json!({ "conversation": key, "turn": turn, "transcript": transcripts[t][k], "window": 200000, "include_transcript": false })),
                        ];
                        for (tool, arguments) in calls {
                            // The harness's retry: another node, until one answers.
                            let mut attempts = 0;
                            let answer = loop {
                                let addr = {
                                    let nodes = fleet.nodes.read().unwrap();
                                    nodes[pick(&mut seed, nodes.len())].addr.clone()
                                };
                                *fleet.busy.lock().unwrap().entry(addr.clone()).or_default() += 1;
                                let answer = client.call(&addr, tool, &arguments);
                                *fleet.busy.lock().unwrap().get_mut(&addr).unwrap() -= 1;
                                match answer {
                                    Ok(answer) => break answer,
                                    Err(e) => {
                                        attempts += 1;
                                        retries.fetch_add(1, Ordering::Relaxed);
                                        assert!(attempts < 50, "{tenant}/{key} {tool}: no node answered: {e}");
                                        std::thread::sleep(Duration::from_millis(50));
                                    }
                                }
                            };
                            let answer = answer.unwrap_or_else(|e| panic!("{tenant}/{key} {tool} at turn {turn}: {e}"));
                            let report = &answer["report"];
                            if tool == "boundary" && answer["action"]["kind"] == "compacted" {
                                let artifacts = report["artifacts"].as_array().into_iter().flatten().map(|a| a.as_str().unwrap().to_string()).collect();
                                told.lock().unwrap().push((tenant.to_string(), key.clone(), report["archive_id"].as_str().unwrap().to_string(), artifacts));
                            }
                        }
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();

    // Kill a node once a third of the boundaries are done, and bring it back a second later.
    let total = TENANTS.len() * KEYS * TURNS.len();
    while done.load(Ordering::Relaxed) < total / 3 {
        assert!(started.elapsed() < Duration::from_secs(600), "the fleet made no progress; log:\n{}", std::fs::read_to_string(&log).unwrap_or_default());
        std::thread::sleep(Duration::from_millis(20));
    }
    // In the middle of its calls: wait until the victim is serving at least two.
    let victim = fleet.nodes.read().unwrap()[1].addr.clone();
    while fleet.busy.lock().unwrap().get(&victim).copied().unwrap_or(0) < 2 {
        assert!(started.elapsed() < Duration::from_secs(600), "the victim never got busy");
        std::thread::sleep(Duration::from_millis(1));
    }
    let killed_at = done.load(Ordering::Relaxed);
    {
        let mut nodes = fleet.nodes.write().unwrap();
        nodes[1].child.kill().unwrap();
        nodes[1].child.wait().unwrap();
        // Until it is back, calls go to the survivors (and those picking its address fail).
        let dead = nodes.remove(1);
        drop(dead);
    }
    std::thread::sleep(Duration::from_secs(1));
    let restarted = start(&db.url, &log);
    fleet.nodes.write().unwrap().push(restarted);
    for client in clients {
        client.join().unwrap();
    }
    let elapsed = started.elapsed();
    assert!(retries.load(Ordering::Relaxed) > 0, "the calls the killed node was serving were retried elsewhere");
    eprintln!(
        "fleet: {total} boundaries on {NODES} nodes in {:.1}s; a node serving 2+ calls killed after {killed_at} boundaries; {} calls retried on another node",
        elapsed.as_secs_f64(),
        retries.load(Ordering::Relaxed)
    );

    // Every record whole and ordered: numbered 1..=n with no gap (the library refuses a gap),
    // no entry recorded twice, no attempt recorded twice, no more compactions than boundaries.
    let told = told.lock().unwrap().clone();
    let mut committed_archives: HashMap<(String, String), HashSet<String>> = HashMap::new();
    for tenant in TENANTS {
        let home = home.for_tenant(&Tenant::parse(tenant).unwrap());
        assert_eq!(home.conversations().unwrap().len(), KEYS, "{tenant}");
        for i in 0..KEYS {
            let key = format!("conv-{i}");
            let store = home.existing_conversation(&ConversationKey::parse(&key).unwrap()).unwrap();
            let mut entries = HashSet::new();
            let mut attempts = HashSet::new();
            let mut committed = HashSet::new();
            for event in store.events() {
                match event {
                    Event::Snapshot { entries: new, .. } => {
                        for entry in new {
                            assert!(entry.id.starts_with(&format!("{tenant}-")), "{tenant}/{key} holds another tenant's entry {}", entry.id);
                            assert!(entries.insert(entry.id.clone()), "{tenant}/{key}: entry {} recorded twice", entry.id);
                        }
                    }
                    Event::Compaction(c) => {
                        assert!(attempts.insert(c.archive_id.clone()), "{tenant}/{key}: attempt {} recorded twice", c.archive_id);
                        if c.committed_by.is_some() {
                            committed.insert(c.archive_id.clone());
                        }
                    }
                    _ => {}
                }
            }
            assert_eq!(entries.len(), sample::coding_session(8 + 4 * (TURNS.len() - 1)).entries.len(), "{tenant}/{key}: the record holds every entry sent");
            assert!(!committed.is_empty() && committed.len() <= TURNS.len(), "{tenant}/{key}: {} compactions committed for {} boundaries", committed.len(), TURNS.len());
            committed_archives.insert((tenant.to_string(), key), committed);
        }
    }
    let mut client = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
    let gaps: i64 = client.query_one("SELECT count(*) FROM (SELECT tenant, key FROM cairn_events GROUP BY tenant, key HAVING count(*) <> max(seq)) g", &[]).unwrap().get(0);
    assert_eq!(gaps, 0, "a conversation's events are not numbered 1..n");

    // What clients were told is what the record committed, and readable from every node;
    // the other tenant's token finds none of it.
    assert!(told.len() >= TENANTS.len() * KEYS, "every conversation compacted at least once: {} told", told.len());
    let nodes: Vec<String> = fleet.nodes.read().unwrap().iter().map(|n| n.addr.clone()).collect();
    let checkers: Vec<_> = told
        .chunks(told.len().div_ceil(CLIENTS))
        .map(|chunk| {
            let (chunk, nodes, tokens) = (chunk.to_vec(), nodes.clone(), tokens.clone());
            let committed = committed_archives.clone();
            std::thread::spawn(move || {
                let mut clients: HashMap<&str, Client> = TENANTS.iter().map(|t| (*t, Client::new(&tokens[t]))).collect();
                let mut read = 0;
                for (tenant, key, archive, artifacts) in &chunk {
                    assert!(committed[&(tenant.clone(), key.clone())].contains(archive), "{tenant}/{key}: a client was told of {archive}, which the record does not commit");
                    let other = TENANTS.iter().find(|t| *t != tenant).unwrap();
                    for uri in artifacts.iter().take(1) {
                        for addr in &nodes {
                            let mine = clients.get_mut(tenant.as_str()).unwrap().call(addr, "artifact_get", &json!({ "uri": uri })).unwrap();
                            assert!(mine.is_ok_and(|a| a["uri"] == uri.as_str()), "{tenant}/{key}: {uri} unreadable on {addr}");
                            let theirs = clients.get_mut(other).unwrap().call(addr, "artifact_get", &json!({ "uri": uri })).unwrap();
                            assert!(theirs.as_ref().is_err_and(|e| e.contains("not found")), "{other} read {tenant}'s {uri} on {addr}: {theirs:?}");
                            read += 1;
                        }
                    }
                }
                read
            })
        })
        .collect();
    let read: usize = checkers.into_iter().map(|c| c.join().unwrap()).sum();
    assert!(read > 0, "no compaction set an artifact aside: nothing was read across nodes");
    eprintln!("fleet: {read} artifact reads checked across {} nodes in {:.1}s", nodes.len(), started.elapsed().as_secs_f64() - elapsed.as_secs_f64());
}
