//! `cairn serve --http` through the real binary, with an HTTP client speaking MCP's Streamable
//! HTTP by hand (initialize, the session header, notifications/initialized, tools/call): bearer
//! tokens from `cairn tokens`, tenants kept apart, the body limit, health, graceful shutdown.
//! What depends on storage runs on a local home and on a scratch PostgreSQL database (where
//! `CAIRN_TEST_POSTGRES` names a server; always under CI).

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cairn::storage::testing::ScratchDatabase;
use cairn::storage::{ConversationKey, Home, Tenant};
use cairn::transcript::{formats, sample};
use serde_json::{json, Value};
use sha2::Digest;

const PROTOCOL: &str = "2025-06-18";

fn cairn(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_cairn")).args(args).env("CAIRN_LOG", "error").output().expect("running cairn")
}

/// Runs `test` on a local home (a directory in a temporary folder), then on a scratch
/// PostgreSQL database when there is a server. It gets the home and a folder for the rest.
fn on_every_backend(test: impl Fn(&str, &Path)) {
    let dir = tempfile::tempdir().unwrap();
    test(dir.path().join("home").to_str().unwrap(), dir.path());
    if let Some(db) = ScratchDatabase::create() {
        let dir = tempfile::tempdir().unwrap();
        test(&db.url, dir.path());
    }
}

/// `cairn tokens create --tenant T --json` in `home`: (id, secret).
pub(crate) fn token(home: &str, tenant: &str) -> (String, String) {
    let out = cairn(&["tokens", "create", "--tenant", tenant, "--name", &format!("{tenant} harness"), "--home", home, "--json"]);
    assert!(out.status.success(), "tokens create: {}", String::from_utf8_lossy(&out.stderr));
    let created: Value = serde_json::from_slice(&out.stdout).unwrap();
    (created["id"].as_str().unwrap().to_string(), created["secret"].as_str().unwrap().to_string())
}

/// A running `cairn serve --http 127.0.0.1:0`, killed when dropped.
pub(crate) struct Server {
    child: Child,
    addr: String,
    log: PathBuf,
}

impl Server {
    /// Logs go to `dir`/serve-N.log.
    pub(crate) fn start(home: &str, dir: &Path, extra: &[&str]) -> Server {
        let log = (0..).map(|n| dir.join(format!("serve-{n}.log"))).find(|p| !p.exists()).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_cairn"))
            .args(["serve", "--http", "127.0.0.1:0", "--home", home, "--expose", "all", "--conversation", "shared", "--no-watch"])
            .args(extra)
            .env("CAIRN_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("starting cairn serve --http");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let listening: Value = serde_json::from_str(&line).unwrap_or_else(|_| panic!("the first line is {line:?}; log:\n{}", std::fs::read_to_string(&log).unwrap_or_default()));
        let addr = listening["listening"].as_str().expect("{\"listening\": ADDR}").to_string();
        assert!(addr.starts_with("127.0.0.1:") && !addr.ends_with(":0"), "the bound address: {addr}");
        Server { child, addr, log }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill").args([&format!("-{name}"), &self.child.id().to_string()]).status().unwrap();
        assert!(status.success());
    }

    /// Waits for the process to end by itself.
    fn wait(&mut self, limit: Duration) -> std::process::ExitStatus {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(started.elapsed() < limit, "the server is still running after {limit:?}; log:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(Duration::from_secs(120))).build().into()
}

/// An HTTP answer: status, selected headers, body.
pub(crate) struct Answer {
    pub(crate) status: u16,
    session: Option<String>,
    authenticate: Option<String>,
    pub(crate) content_type: String,
    pub(crate) body: String,
}

impl Answer {
    /// The JSON-RPC message of the answer: the body, or the last `data:` of an event stream.
    pub(crate) fn message(&self) -> Value {
        if self.content_type.starts_with("text/event-stream") {
            let last = self.body.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim).rfind(|d| d.starts_with('{'));
            serde_json::from_str(last.unwrap_or_else(|| panic!("no message in the stream: {:?}", self.body))).unwrap()
        } else {
            serde_json::from_str(&self.body).unwrap_or_else(|_| panic!("not JSON ({}): {:?}", self.status, self.body))
        }
    }
}

fn read(response: ureq::http::Response<ureq::Body>) -> Answer {
    let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
    let (status, session, authenticate, content_type) = (response.status().as_u16(), header("mcp-session-id"), header("www-authenticate"), header("content-type").unwrap_or_default());
    let body = response.into_body().with_config().limit(64 * 1024 * 1024).read_to_string().unwrap();
    Answer { status, session, authenticate, content_type, body }
}

/// One MCP client: a bearer token (or none) and, once initialized, its session.
pub(crate) struct Client {
    agent: ureq::Agent,
    url: String,
    token: Option<String>,
    session: Option<String>,
    next_id: u64,
}

impl Client {
    pub(crate) fn new(server: &Server, token: Option<&str>) -> Client {
        Client { agent: agent(), url: server.url("/mcp"), token: token.map(str::to_string), session: None, next_id: 1 }
    }

    fn request(&self) -> ureq::RequestBuilder<ureq::typestate::WithBody> {
        let mut request = self.agent.post(&self.url).header("accept", "application/json, text/event-stream").header("mcp-protocol-version", PROTOCOL).content_type("application/json");
        if let Some(token) = &self.token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        if let Some(session) = &self.session {
            request = request.header("mcp-session-id", session);
        }
        request
    }

    pub(crate) fn post(&self, message: &Value) -> Answer {
        let body = message.to_string();
        read(self.request().send(body.as_bytes()).expect("the server answers"))
    }

    /// `initialize` then `notifications/initialized`; panics unless both are accepted.
    pub(crate) fn initialize(&mut self) -> &mut Self {
        let answer = self.try_initialize();
        assert_eq!(answer.status, 200, "initialize: {}", answer.body);
        self
    }

    fn try_initialize(&mut self) -> Answer {
        let answer = self.post(&json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": { "protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": { "name": "serve_http test", "version": "1" } }
        }));
        if answer.status == 200 {
            assert_eq!(answer.message()["result"]["serverInfo"]["name"], "cairn", "{}", answer.body);
            self.session = Some(answer.session.clone().expect("a session id"));
            let initialized = self.post(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
            assert_eq!(initialized.status, 202, "notifications/initialized: {}", initialized.body);
        }
        answer
    }

    fn call_raw(&mut self, tool: &str, arguments: Value) -> Answer {
        self.next_id += 1;
        self.post(&json!({ "jsonrpc": "2.0", "id": self.next_id, "method": "tools/call", "params": { "name": tool, "arguments": arguments } }))
    }

    /// A tool call: Ok(structured content) or Err(the tool error's text).
    pub(crate) fn call(&mut self, tool: &str, arguments: Value) -> Result<Value, String> {
        let answer = self.call_raw(tool, arguments);
        assert_eq!(answer.status, 200, "{tool}: {}", answer.body);
        tool_result(&answer.message())
    }

    pub(crate) fn ok(&mut self, tool: &str, arguments: Value) -> Value {
        self.call(tool, arguments.clone()).unwrap_or_else(|e| panic!("{tool} {arguments}: {e}"))
    }
}

fn tool_result(message: &Value) -> Result<Value, String> {
    let result = &message["result"];
    assert!(result.is_object(), "not a result: {message}");
    if result["isError"] == true {
        Err(result["content"].as_array().into_iter().flatten().filter_map(|c| c["text"].as_str()).collect::<Vec<_>>().join("\n"))
    } else {
        Ok(result["structuredContent"].clone())
    }
}

pub(crate) fn session_text() -> String {
    formats::write_cairn(&sample::coding_session(12))
}

fn compact_args(conversation: &str, transcript: &str) -> Value {
    json!({ "conversation": conversation, "transcript": transcript, "include_transcript": false })
}

/// The conversations a tenant has in the home, read through the library.
pub(crate) fn conversations(home: &str, tenant: &str) -> Vec<String> {
    tenant_home(home, tenant).conversations().unwrap().iter().map(|k| k.as_str().to_string()).collect()
}

fn tenant_home(home: &str, tenant: &str) -> Home {
    Home::open(Path::new(home)).unwrap().for_tenant(&Tenant::parse(tenant).unwrap())
}

fn get(server: &Server, path: &str) -> Answer {
    read(agent().get(&server.url(path)).call().expect("the server answers"))
}

#[test]
fn health_needs_no_token_and_fails_when_the_home_cannot_be_listed() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let server = Server::start(home.to_str().unwrap(), dir.path(), &[]);
    let health = get(&server, "/healthz");
    assert_eq!((health.status, health.body.as_str()), (200, "ok"));
    // Everything else needs a token: an unknown path is not found, /mcp is refused.
    assert_eq!(get(&server, "/mcp").status, 401);
    // A home whose conversations cannot be listed (a file where their folder was).
    std::fs::remove_dir_all(home.join("conversations")).unwrap();
    std::fs::write(home.join("conversations"), "not a folder").unwrap();
    let health = get(&server, "/healthz");
    assert_eq!(health.status, 503, "{}", health.body);
    assert!(server.log().contains("health check"), "the cause is logged:\n{}", server.log());
}

#[test]
fn requests_without_a_valid_token_are_refused_before_anything_runs() {
    on_every_backend(refused_without_a_valid_token);
}

fn refused_without_a_valid_token(home: &str, dir: &Path) {
    let (_, alpha) = token(home, "alpha");
    let (revoked_id, revoked) = token(home, "alpha");
    let server = Server::start(home, dir, &[]);
    let transcript = session_text();

    // No token, a wrong one: 401 with a Bearer challenge, no session.
    for token in [None, Some("cairn_0000"), Some(&alpha[..alpha.len() - 1])] {
        let answer = Client::new(&server, token).try_initialize();
        assert_eq!(answer.status, 401, "{token:?}: {}", answer.body);
        assert!(answer.authenticate.as_deref().is_some_and(|c| c.starts_with("Bearer")), "{:?}", answer.authenticate);
        assert!(answer.session.is_none());
        assert!(answer.message()["error"].as_str().is_some(), "a JSON error: {}", answer.body);
    }
    // Another scheme is no bearer token either.
    let basic = agent().post(&server.url("/mcp")).header("authorization", format!("Basic {alpha}")).content_type("application/json").send("{}").unwrap();
    assert_eq!(read(basic).status, 401);

    // A session opened with a valid token, then used without it or with a wrong one.
    let mut client = Client::new(&server, Some(&alpha));
    client.initialize();
    for token in [None, Some("cairn_nope".to_string())] {
        let mut stolen = Client { token, ..Client::new(&server, None) };
        stolen.session = client.session.clone();
        let answer = stolen.call_raw("compact", compact_args("shared", &transcript));
        assert_eq!(answer.status, 401, "{}", answer.body);
    }

    // A token that worked, revoked while the server runs: refused from the next request on.
    let mut before = Client::new(&server, Some(&revoked));
    before.initialize();
    before.ok("session_history", json!({ "action": "summary" }));
    let out = cairn(&["tokens", "revoke", &revoked_id, "--home", home]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let answer = before.call_raw("compact", compact_args("shared", &transcript));
    assert_eq!(answer.status, 401, "{}", answer.body);
    assert_eq!(Client::new(&server, Some(&revoked)).try_initialize().status, 401);

    // Nothing was recorded, for the tenant or the home's default.
    assert_eq!(conversations(home, "alpha"), Vec::<String>::new());
    assert_eq!(conversations(home, "default"), Vec::<String>::new());
    // And the valid token still works.
    let history = client.ok("session_history", json!({ "action": "summary" }));
    assert!(history["text"].as_str().unwrap().contains("Nothing in this conversation has been compacted yet"), "{history}");
}

#[test]
fn each_tenant_reaches_only_its_own_conversations() {
    on_every_backend(tenants_apart);
}

fn tenants_apart(home: &str, dir: &Path) {
    let (_, alpha) = token(home, "alpha");
    let (_, beta) = token(home, "beta");
    let server = Server::start(home, dir, &[]);
    let mut a = Client::new(&server, Some(&alpha));
    a.initialize();
    let mut b = Client::new(&server, Some(&beta));
    b.initialize();

    // Alpha compacts its conversation "shared" (the server's own conversation too).
    let compacted = a.ok("compact", compact_args("shared", &session_text()));
    assert_eq!(compacted["committed"], true, "{compacted}");
    let archive = compacted["archive_id"].as_str().unwrap().to_string();
    let artifacts: Vec<String> = compacted["artifacts"].as_array().unwrap().iter().map(|u| u.as_str().unwrap().to_string()).collect();
    assert!(!artifacts.is_empty(), "the compaction set outputs aside: {compacted}");
    let summary = a.ok("session_history", json!({ "action": "summary" }));
    assert!(summary.to_string().contains(&archive), "{summary}");
    let hits = a.ok("session_history", json!({ "action": "search", "query": "negative amounts" }));
    assert!(hits["total"].as_u64().unwrap() > 0, "{hits}");
    a.ok("session_history", json!({ "action": "page", "archive_id": archive }));
    let original = a.ok("artifact_get", json!({ "uri": artifacts[0] }));
    assert!(original["bytes"].as_u64().unwrap() > 0);
    a.ok("session_history", json!({ "action": "artifact", "uri": artifacts[0] }));

    // Beta, with the same conversation key and alpha's ids in hand, finds nothing of it.
    let summary = b.ok("session_history", json!({ "action": "summary" }));
    assert!(summary["text"].as_str().unwrap().contains("Nothing in this conversation has been compacted yet"), "{summary}");
    let hits = b.ok("session_history", json!({ "action": "search", "query": "negative amounts" }));
    assert_eq!(hits["total"], 0, "{hits}");
    let page = b.call("session_history", json!({ "action": "page", "archive_id": archive }));
    assert!(page.as_ref().is_err_and(|e| e.contains("not found") || e.contains("no conversation")), "{page:?}");
    let artifact = b.call("session_history", json!({ "action": "artifact", "uri": artifacts[0] }));
    assert!(artifact.is_err(), "{artifact:?}");
    let artifact = b.call("artifact_get", json!({ "uri": artifacts[0] }));
    assert!(artifact.as_ref().is_err_and(|e| e.contains("not found")), "{artifact:?}");
    let notices = b.ok("notices_take", json!({ "conversation": "shared" }));
    assert_eq!(notices["notices"], json!([]), "{notices}");
    let boundary = b.ok("boundary", json!({ "conversation": "shared", "turn": 1, "transcript": "[]", "window": 128000, "include_transcript": false }));
    assert_eq!(boundary["action"]["kind"], "none", "{boundary}");
    let requested = b.ok("context_maintenance", json!({ "action": "compact", "preserve": "beta's notes", "resume": "go on" }));
    assert_eq!(requested["recorded"], true);

    // Beta's own "shared" is another conversation, with its own archive.
    let own = b.ok("compact", compact_args("shared", &formats::write_cairn(&sample::coding_session(14))));
    let beta_archive = own["archive_id"].as_str().unwrap().to_string();
    assert_ne!(beta_archive, archive);
    let beta_summary = b.ok("session_history", json!({ "action": "summary" })).to_string();
    assert!(beta_summary.contains(&beta_archive) && !beta_summary.contains(&archive), "{beta_summary}");
    let alpha_summary = a.ok("session_history", json!({ "action": "summary" })).to_string();
    assert!(alpha_summary.contains(&archive) && !alpha_summary.contains(&beta_archive), "{alpha_summary}");

    // In the home: one "shared" per tenant, none in the default tenant.
    assert_eq!(conversations(home, "alpha"), ["shared"]);
    assert_eq!(conversations(home, "beta"), ["shared"]);
    assert_eq!(conversations(home, "default"), Vec::<String>::new());
    let events = tenant_home(home, "alpha").existing_conversation(&ConversationKey::parse("shared").unwrap()).unwrap().events().len();
    assert!(events > 0);

    // A session is its opener's: beta's token on alpha's session is refused.
    let mut hijack = Client::new(&server, Some(&beta));
    hijack.session = a.session.clone();
    let refused = hijack.call("session_history", json!({ "action": "summary" }));
    assert!(refused.as_ref().is_err_and(|e| e.contains("another tenant")), "{refused:?}");
    let refused = hijack.call("artifact_get", json!({ "uri": artifacts[0] }));
    assert!(refused.as_ref().is_err_and(|e| e.contains("another tenant")), "{refused:?}");
}

#[test]
fn a_body_over_the_limit_is_refused_quickly_and_the_server_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let home = home.to_str().unwrap();
    let (_, alpha) = token(home, "alpha");
    let server = Server::start(home, dir.path(), &[]);
    let mut client = Client::new(&server, Some(&alpha));
    client.initialize();

    // 33 MiB of transcript against the default limit of 32 MiB.
    let huge = "x".repeat(33 * 1024 * 1024);
    let started = Instant::now();
    let answer = client.call_raw("compact", compact_args("shared", &huge));
    assert_eq!(answer.status, 413, "{}", &answer.body[..answer.body.len().min(300)]);
    assert!(started.elapsed() < Duration::from_secs(20), "took {:?}", started.elapsed());
    let refusal = answer.message();
    assert_eq!(refusal["error"]["code"], -32600, "{refusal}");
    assert!(refusal["error"]["message"].as_str().unwrap().contains("limit of 33554432 bytes"), "{refusal}");
    assert_eq!(conversations(home, "alpha"), Vec::<String>::new());

    // The next call on the same session is served.
    let compacted = client.ok("compact", compact_args("shared", &session_text()));
    assert_eq!(compacted["committed"], true, "{compacted}");

    // A smaller limit is the operator's: a 2 KiB body over --max-request-bytes 1024.
    drop(server);
    let server = Server::start(home, dir.path(), &["--max-request-bytes", "1024"]);
    let mut client = Client::new(&server, Some(&alpha));
    client.initialize();
    let answer = client.call_raw("compact", compact_args("shared", &"y".repeat(2048)));
    assert_eq!(answer.status, 413, "{}", answer.body);
    assert!(answer.message()["error"]["message"].as_str().unwrap().contains("limit of 1024 bytes"), "{}", answer.body);
}

#[test]
fn sigterm_lets_the_call_in_flight_answer_then_exits_0() {
    on_every_backend(sigterm_with_a_call_in_flight);
}

fn sigterm_with_a_call_in_flight(home: &str, dir: &Path) {
    let (_, alpha) = token(home, "alpha");
    let mut server = Server::start(home, dir, &[]);
    let mut client = Client::new(&server, Some(&alpha));
    client.initialize();

    // Hold alpha's conversation "slow" from this process: the server's compaction waits for it.
    let alpha_home = tenant_home(home, "alpha");
    let held = alpha_home.conversation(&ConversationKey::parse("slow").unwrap()).unwrap();

    let body = json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": { "name": "compact", "arguments": compact_args("slow", &session_text()) } }).to_string();
    // The call is in flight once its event stream has opened (the headers are in).
    let response = client.request().send(body.as_bytes()).unwrap();
    assert_eq!(response.status(), 200);
    server.signal("TERM");
    // No new connections once the signal is handled.
    let started = Instant::now();
    while std::net::TcpStream::connect(&server.addr).is_ok() {
        assert!(started.elapsed() < Duration::from_secs(10), "still accepting connections after SIGTERM; log:\n{}", server.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(server.child.try_wait().unwrap().is_none(), "the server left with a call in flight; log:\n{}", server.log());
    let slow = ConversationKey::parse("slow").unwrap();
    assert!(alpha_home.existing_conversation(&slow).unwrap().events().is_empty(), "the call is still waiting");
    drop(held);

    let mut body = String::new();
    response.into_body().into_reader().read_to_string(&mut body).unwrap();
    let answer = Answer { status: 200, session: None, authenticate: None, content_type: "text/event-stream".into(), body };
    let message = answer.message();
    assert_eq!(message["id"], 7, "{message}");
    let compacted = tool_result(&message).unwrap();
    assert_eq!(compacted["committed"], true, "{compacted}");
    let status = server.wait(Duration::from_secs(30));
    assert!(status.success(), "exit status {status:?}; log:\n{}", server.log());
    assert!(!alpha_home.existing_conversation(&slow).unwrap().events().is_empty(), "the call was recorded in alpha's conversation");
}

#[test]
fn ctrl_c_stops_an_idle_server_with_status_0() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let mut server = Server::start(home.to_str().unwrap(), dir.path(), &[]);
    server.signal("INT");
    let status = server.wait(Duration::from_secs(30));
    assert!(status.success(), "exit status {status:?}; log:\n{}", server.log());
}

#[test]
fn tokens_are_created_listed_and_revoked_and_their_secrets_shown_once() {
    on_every_backend(|home, _| tokens_round_trip(home));
}

fn tokens_round_trip(home_arg: &str) {
    // `tokens list` is a read: it creates no home, so the directory home exists first.
    if !home_arg.starts_with("postgres") {
        std::fs::create_dir_all(home_arg).unwrap();
    }
    let out = cairn(&["tokens", "list", "--home", home_arg]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("no tokens"));

    // Human output: the secret alone on stdout, the rest on stderr.
    let out = cairn(&["tokens", "create", "--tenant", "acme", "--name", "ci runner", "--home", home_arg]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let human_secret = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(human_secret.len() >= 32 && !human_secret.contains(' '), "{human_secret:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("acme"));
    let (id, secret) = token(home_arg, "globex");
    assert_ne!(secret, human_secret);

    for args in [&["tokens", "list", "--home", home_arg][..], &["tokens", "list", "--json", "--home", home_arg][..]] {
        let out = cairn(args);
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        for shown_once in [&secret, &human_secret] {
            let hash: String = sha2::Sha256::digest(shown_once.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
            assert!(!text.contains(shown_once.as_str()) && !text.contains(&hash) && !text.contains(&hash[..16]), "{args:?} shows a secret or its hash:\n{text}");
        }
        assert!(text.contains("acme") && text.contains("globex") && text.contains(&id), "{text}");
    }
    let list: Value = serde_json::from_slice(&cairn(&["tokens", "list", "--json", "--home", home_arg]).stdout).unwrap();
    let globex = list.as_array().unwrap().iter().find(|t| t["id"] == id.as_str()).unwrap();
    assert_eq!((globex["tenant"].as_str(), globex["name"].as_str(), globex["revoked"].as_bool()), (Some("globex"), Some("globex harness"), Some(false)));

    let out = cairn(&["tokens", "revoke", &id, "--home", home_arg]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let list: Value = serde_json::from_slice(&cairn(&["tokens", "list", "--json", "--home", home_arg]).stdout).unwrap();
    assert_eq!(list.as_array().unwrap().iter().find(|t| t["id"] == id.as_str()).unwrap()["revoked"], true);
    let human = String::from_utf8(cairn(&["tokens", "list", "--home", home_arg]).stdout).unwrap();
    assert!(human.lines().any(|l| l.contains(&id) && l.contains("revoked")), "{human}");

    // Mistakes are errors: an unknown id, an invalid tenant.
    let out = cairn(&["tokens", "revoke", "t-000000000000", "--home", home_arg]);
    assert!(!out.status.success());
    let out = cairn(&["tokens", "create", "--tenant", "../etc", "--home", home_arg]);
    assert!(!out.status.success());
    assert_eq!(cairn(&["tokens", "list", "--json", "--home", home_arg]).stdout.iter().filter(|b| **b == b'{').count(), 2);
}

/// The node-wide tools (`policy_reload`, `plugins_list`) act for every tenant: a tenant's token
/// gets a JSON-RPC error saying `forbidden:` and the scope needed; an operator's token (listed
/// with its scope) calls them; the tenant's own tools still work for the tenant.
#[test]
fn node_wide_tools_need_an_operator_token() {
    on_every_backend(operator_scope);
}

fn operator_scope(home: &str, dir: &Path) {
    let (_, tenant_secret) = token(home, "acme");
    let out = cairn(&["tokens", "create", "--tenant", "ops", "--scope", "operator", "--home", home, "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let created: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(created["scope"], "operator");
    let operator_secret = created["secret"].as_str().unwrap().to_string();
    let listed = String::from_utf8(cairn(&["tokens", "list", "--home", home]).stdout).unwrap();
    assert!(listed.lines().next().unwrap().contains("SCOPE"), "{listed}");
    assert!(listed.lines().any(|l| l.contains("acme") && l.contains("tenant")) && listed.lines().any(|l| l.contains("ops") && l.contains("operator")), "{listed}");

    let server = Server::start(home, dir, &[]);
    let mut tenant = Client::new(&server, Some(&tenant_secret));
    tenant.initialize();
    for tool in ["policy_reload", "plugins_list"] {
        let message = tenant.call_raw(tool, json!({})).message();
        let error = message["error"]["message"].as_str().unwrap_or_else(|| panic!("{tool}: not a JSON-RPC error: {message}"));
        assert!(error.starts_with("forbidden:") && error.contains(tool) && error.contains("operator"), "{tool}: {error}");
    }
    tenant.ok("compact", compact_args("mine", &session_text()));

    let mut operator = Client::new(&server, Some(&operator_secret));
    operator.initialize();
    assert!(operator.ok("plugins_list", json!({}))["plugins"].as_array().is_some_and(|p| !p.is_empty()));
    assert_eq!(operator.ok("policy_reload", json!({}))["swapped"], true);
}

/// `n` connections to `addr` that never finish a request: every other one sends half a request
/// line, the rest nothing.
pub(crate) fn idle_sockets(addr: &str, n: usize) -> Vec<std::net::TcpStream> {
    use std::io::Write;
    (0..n)
        .map(|i| {
            let mut socket = std::net::TcpStream::connect(addr).unwrap();
            if i % 2 == 1 {
                socket.write_all(b"GET /heal").unwrap();
            }
            socket
        })
        .collect()
}

/// Whether the server closed `socket` (EOF or reset) within `within`.
pub(crate) fn closed_by_server(socket: &mut std::net::TcpStream, within: Duration) -> bool {
    socket.set_read_timeout(Some(within)).unwrap();
    match socket.read(&mut [0u8; 64]) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    }
}

/// Idle connections cannot starve the server: with 200 open that never send a request, a real
/// call is served; each is closed once the header timeout passes; a kept-alive connection is
/// closed after the idle timeout; past the per-address cap a connection is closed at once.
#[test]
fn idle_connections_are_closed_and_capped() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (_, secret) = token(home.to_str().unwrap(), "acme");
    let server = Server::start(home.to_str().unwrap(), dir.path(), &["--header-timeout", "2", "--idle-timeout", "3", "--max-connections-per-ip", "300"]);
    let mut idle = idle_sockets(&server.addr, 200);
    let started = Instant::now();
    let mut client = Client::new(&server, Some(&secret));
    client.initialize();
    client.ok("compact", compact_args("mine", &session_text()));
    assert_eq!(get(&server, "/healthz").status, 200);
    assert!(!closed_by_server(&mut idle[0], Duration::from_millis(200)), "closed before the header timeout");
    for socket in &mut idle {
        assert!(closed_by_server(socket, Duration::from_secs(5)), "an idle connection still open after {:?}", started.elapsed());
    }

    // A kept-alive connection: served, then closed once idle for --idle-timeout (3 s), not the
    // header timeout (2 s).
    use std::io::Write;
    let mut kept = std::net::TcpStream::connect(&server.addr).unwrap();
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut answer = [0u8; 256];
    let n = kept.read(&mut answer).unwrap();
    assert!(String::from_utf8_lossy(&answer[..n]).starts_with("HTTP/1.1 200"), "{}", String::from_utf8_lossy(&answer[..n]));
    let served = Instant::now();
    assert!(!closed_by_server(&mut kept, Duration::from_millis(2500)), "a kept-alive connection closed before --idle-timeout");
    assert!(closed_by_server(&mut kept, Duration::from_secs(3)), "a kept-alive connection still open {:?} after its answer", served.elapsed());

    // Past the cap per address: closed at once, and said in the log.
    let capped = Server::start(home.to_str().unwrap(), dir.path(), &["--max-connections-per-ip", "4"]);
    let mut sockets = idle_sockets(&capped.addr, 5);
    assert!(closed_by_server(&mut sockets[4], Duration::from_secs(2)), "the fifth connection from one address is not refused");
    assert!(!closed_by_server(&mut sockets[0], Duration::from_millis(300)));
    assert!(capped.log().contains("WARN") && capped.log().contains("max-connections-per-ip"), "{}", capped.log());
}

/// A body that is not JSON gets JSON-RPC's parse error, one that is JSON but no JSON-RPC
/// message its invalid request, both as JSON with a null id; the session goes on.
#[test]
fn malformed_bodies_get_json_rpc_errors() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (_, secret) = token(home.to_str().unwrap(), "acme");
    let server = Server::start(home.to_str().unwrap(), dir.path(), &[]);
    let mut client = Client::new(&server, Some(&secret));
    client.initialize();
    for (body, code) in [("{\"jsonrpc\": \"2.0\", \"id\": 1, ", -32700), ("not json", -32700), ("{\"hello\": 1}", -32600), ("[1, 2]", -32600)] {
        let answer = read(client.request().send(body.as_bytes()).unwrap());
        assert_eq!(answer.status, 400, "{body}: {}", answer.body);
        let message = answer.message();
        assert_eq!((&message["jsonrpc"], &message["id"], &message["error"]["code"]), (&json!("2.0"), &Value::Null, &json!(code)), "{body}: {message}");
    }
    client.ok("session_history", json!({ "action": "summary" }));
}
