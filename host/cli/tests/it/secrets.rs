//! What a careless user and an intruder would try against the record's secrets and files: a
//! PostgreSQL home's password planted in the URL never reaches an output, a log line or a file
//! name, whatever the verb; a directory home is private to its owner whatever the umask; a
//! verb whose reader closes its output early exits quietly.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use cairn::storage::testing::{self, ScratchDatabase};
use cairn::transcript::{formats, sample};
use serde_json::Value;

/// A role of its own on the test server, its password planted in every URL; dropped with its
/// database.
struct PlantedRole {
    admin: String,
    role: String,
    password: String,
    _database: ScratchDatabase,
    url: String,
}

impl PlantedRole {
    fn create() -> Option<PlantedRole> {
        let database = ScratchDatabase::create()?;
        let admin = testing::server()?;
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() % 1_000_000_000;
        let role = format!("cairn_planted_{}_{nanos}", std::process::id());
        // An unescaped `@` inside, as people type passwords: the part after it must not become
        // a host name, nor leak.
        let password = format!("Planted-{nanos}@Pw");
        let mut client = postgres::Client::connect(&admin, postgres::NoTls).unwrap();
        let name = database.url.rsplit('/').next().unwrap().to_string();
        client
            .batch_execute(&format!("CREATE ROLE {role} LOGIN PASSWORD '{password}'; GRANT {role} TO CURRENT_USER; ALTER DATABASE {name} OWNER TO {role}"))
            .unwrap_or_else(|e| panic!("creating a role (the test role needs CREATEROLE, as .ci/run grants): {e}"));
        let server = admin.split_once('@').unwrap().1.rsplit_once('/').unwrap().0.to_string();
        let url = format!("postgres://{role}:{password}@{server}/{name}");
        Some(PlantedRole { admin, role, password, _database: database, url })
    }

    /// The planted secret, and its tail after the `@` with the host (what a split at the first
    /// `@` would have shown).
    fn assert_absent(&self, what: &str, text: &str) {
        let secret = self.password.split('@').next().unwrap();
        assert!(!text.contains(secret) && !text.contains("@Pw@"), "{what} shows the planted password:\n{text}");
    }
}

impl Drop for PlantedRole {
    fn drop(&mut self) {
        // The database goes first (its guard), then the role; the guard drops after this.
        if let Ok(mut client) = postgres::Client::connect(&self.admin, postgres::NoTls) {
            let name = self.url.rsplit('/').next().unwrap();
            let _ = client.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE); DROP ROLE IF EXISTS {}", self.role));
        }
    }
}

/// Cairn's own crates and the database client's, at their most verbose.
const LOG: &str = "cairn=trace,tokio_postgres=trace,postgres=trace";

fn run(dir: &Path, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(args)
        .current_dir(dir)
        .env("CAIRN_LOG", LOG)
        .env("HOME", dir)
        .env("CAIRN_CACHE_DIR", crate::support::shared_cache())
        .env_remove("XDG_DATA_HOME")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// Every file and folder name below `dir`.
fn names(dir: &Path) -> String {
    let mut out = String::new();
    for entry in walk(dir) {
        out.push_str(&entry.to_string_lossy());
        out.push('\n');
    }
    out
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        found.push(path.clone());
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            found.extend(walk(&path));
        }
    }
    found
}

#[test]
fn a_planted_database_password_reaches_no_output_log_or_file_name() {
    let Some(planted) = PlantedRole::create() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let session = d.join("session.jsonl");
    std::fs::write(&session, formats::write_cairn(&sample::coding_session(30))).unwrap();
    let (url, s) = (planted.url.as_str(), session.to_str().unwrap());
    let out = d.join("out.json");

    let compact = run(d, &["compact", s, "--home", url, "--conversation", "k", "--json", "--out", out.to_str().unwrap(), "--out-format", "openai"], "");
    assert!(compact.status.success(), "compact on the planted URL: {}", String::from_utf8_lossy(&compact.stderr));
    let report: Value = serde_json::from_slice(&compact.stdout).unwrap();
    assert!(report["home"].as_str().unwrap().contains(":***@"), "the report names the home without its password: {report}");
    let archive = report["archive_id"].as_str().map(String::from);

    let mut verbs: Vec<Vec<String>> = [
        vec!["show", "--home", url, "--conversation", "k"],
        vec!["history", "--home", url, "--conversation", "k", "search", "test"],
        vec!["pin", "--home", url, "--conversation", "k", "no-such-entry"],
        vec!["boundary", "--home", url, "--conversation", "k", "--turn", "9", "--window", "1000000", s],
        vec!["request", "--home", url, "--conversation", "k", "compact"],
        vec!["notices", "--home", url, "--conversation", "k"],
        vec!["handover", s, "--home", url, "--conversation", "h", "--json"],
        vec!["artifact", "artifact://a-0000000000000000/1", "--home", url],
        vec!["tokens", "create", "--tenant", "t", "--name", "n", "--home", url],
        vec!["tokens", "list", "--home", url],
        vec!["tokens", "revoke", "t-000000000000", "--home", url],
        vec!["undo", "--home", url, "--conversation", "k"],
        vec!["doctor", "--home", url],
        // The password in a query parameter, and a wrong one: the errors name the home too.
        vec!["doctor", "--home", &format!("{}?password=QueryPlanted-{}", url.replace(&format!(":{}@", planted.password), "@"), planted.password.split('@').next().unwrap())],
        vec!["show", "--home", &url.replace("@Pw@", "@Wrong@"), "--conversation", "k"],
    ]
    .iter()
    .map(|v| v.iter().map(|a| a.to_string()).collect())
    .collect();
    if let Some(archive) = archive {
        verbs.push(["show", "--home", url, "--conversation", "k", &archive].iter().map(|a| a.to_string()).collect());
    }
    for args in &verbs {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = run(d, &args, "");
        planted.assert_absent(&format!("`cairn {}` stdout", args[0]), &String::from_utf8_lossy(&output.stdout));
        planted.assert_absent(&format!("`cairn {}` stderr at CAIRN_LOG=trace", args[0]), &String::from_utf8_lossy(&output.stderr));
    }

    // The servers log their home at start; a hook that fails records the failure in the
    // database, never in a folder named after the URL.
    let http = server_log(d, &["serve", "--http", "127.0.0.1:0", "--home", url, "--no-watch"]);
    planted.assert_absent("`cairn serve --http`'s log", &http);
    let stdio = run(d, &["serve", "--home", url, "--no-watch"], "");
    planted.assert_absent("`cairn serve`'s log", &String::from_utf8_lossy(&stdio.stderr));
    let payload = r#"{"session_id":"s1","transcript_path":"/nonexistent/transcript.jsonl","hook_event_name":"PreCompact","trigger":"auto"}"#;
    let mut hook = Command::new(env!("CARGO_BIN_EXE_cairn"));
    hook.args(["claude-code", "pre-compact"])
        .current_dir(d)
        .env("CAIRN_HOME", url)
        .env("CAIRN_LOG", LOG)
        .env("HOME", d)
        .env("CAIRN_CACHE_DIR", crate::support::shared_cache())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = hook.spawn().unwrap();
    child.stdin.take().unwrap().write_all(payload.as_bytes()).unwrap();
    let hooked = child.wait_with_output().unwrap();
    planted.assert_absent("the failing hook's output", &format!("{}{}", String::from_utf8_lossy(&hooked.stdout), String::from_utf8_lossy(&hooked.stderr)));
    planted.assert_absent("the names of the files in the working directory", &names(d));
    assert!(!d.join("postgres:").exists(), "the URL became a folder:\n{}", names(d));
    let doctor = run(d, &["doctor", "--home", url, "--json"], "");
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(text.contains("the claude-code pre-compact hook failed (session s1)"), "the hook's failure reached the database, and doctor lists it:\n{text}");
    planted.assert_absent("doctor after the hook", &text);
}

/// Starts a server, waits for its address, stops it: its log.
fn server_log(dir: &Path, args: &[&str]) -> String {
    let log = dir.join("server.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(args)
        .env("CAIRN_LOG", LOG)
        .env("CAIRN_CACHE_DIR", crate::support::shared_cache())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert!(line.contains("listening"), "{line}: {}", std::fs::read_to_string(&log).unwrap_or_default());
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let _ = child.wait();
    std::fs::read_to_string(&log).unwrap()
}

#[test]
fn the_record_is_private_to_its_owner_whatever_the_umask() {
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("session.jsonl");
    std::fs::write(&session, formats::write_cairn(&sample::coding_session(30))).unwrap();
    let home = dir.path().join("nested/home");
    // umask 0 would let every file be 0666 and every folder 0777.
    let status = Command::new("sh")
        .args(["-c", "umask 000 && exec \"$@\"", "sh", env!("CARGO_BIN_EXE_cairn"), "compact", session.to_str().unwrap(), "--home", home.to_str().unwrap(), "--conversation", "k"])
        .env("CAIRN_LOG", "error")
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let tokens = Command::new("sh")
        .args(["-c", "umask 000 && exec \"$@\"", "sh", env!("CARGO_BIN_EXE_cairn"), "tokens", "create", "--tenant", "t", "--home", home.to_str().unwrap()])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(tokens.success());
    let mut paths = walk(&home);
    paths.push(home.clone());
    assert!(paths.iter().any(|p| p.ends_with("events.jsonl")) && paths.iter().any(|p| p.ends_with("tokens.json")) && paths.iter().any(|p| p.to_string_lossy().contains("/archives/")), "{paths:?}");
    for path in paths {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let mode = meta.permissions().mode() & 0o777;
        let expected = if meta.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(mode, expected, "{} is {mode:o}", path.display());
    }
}

#[test]
fn doctor_warns_of_a_home_open_to_other_users_and_names_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cairn")).args(["doctor", "--home", home.to_str().unwrap(), "--json"]).env("HOME", dir.path()).output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let warning = report["checks"].as_array().unwrap().iter().find(|c| c["check"] == "home-private").unwrap_or_else(|| panic!("no warning: {report:#}"));
    assert_eq!(warning["status"], "warn");
    let message = warning["message"].as_str().unwrap();
    assert!(message.contains(&format!("chmod -R go-rwx {}", home.display())) && message.contains("755"), "{message}");
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cairn")).args(["doctor", "--home", home.to_str().unwrap(), "--json"]).env("HOME", dir.path()).output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(!report["checks"].as_array().unwrap().iter().any(|c| c["check"] == "home-private"), "{report:#}");
}

/// Each verb's output read by a reader that has gone before the verb writes (`| true`, or
/// `| head -1` after its line): the verb ends without a panic, quietly, with 0 or 141 as
/// coreutils' tools do.
#[test]
fn every_verb_exits_quietly_when_its_reader_closes_early() {
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("session.jsonl");
    std::fs::write(&session, formats::write_cairn(&sample::coding_session(60))).unwrap();
    let (home, s) = (dir.path().join("home"), session.to_str().unwrap());
    let h = home.to_str().unwrap();
    let compacted = Command::new(env!("CARGO_BIN_EXE_cairn")).args(["compact", s, "--home", h, "--conversation", "k", "--json"]).output().unwrap();
    assert!(compacted.status.success());
    let archive = serde_json::from_slice::<Value>(&compacted.stdout).unwrap()["archive_id"].as_str().unwrap().to_string();
    let verbs: &[&[&str]] = &[
        &["compact", s, "--home", h, "--conversation", "p", "--json"],
        &["compact", s, "--home", h, "--conversation", "q"],
        &["show", "--home", h, "--conversation", "k"],
        &["show", "--home", h, "--conversation", "k", &archive],
        &["history", "--home", h, "--conversation", "k", "page", &archive],
        &["plugins", "list", "--json"],
        &["plugins", "list"],
        &["doctor", "--home", h],
        &["simulate", s, "--window", "20000"],
        &["demo"],
    ];
    for args in verbs {
        let mut child = Command::new(env!("CARGO_BIN_EXE_cairn")).args(*args).env("CAIRN_LOG", "error").env("HOME", dir.path()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        drop(child.stdout.take());
        let mut stderr = String::new();
        child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
        let status = child.wait().unwrap();
        assert!(!stderr.contains("panicked") && !stderr.contains("Broken pipe"), "cairn {args:?} with its output closed early:\n{stderr}");
        assert!(matches!(status.code(), Some(0 | 141)), "cairn {args:?} with its output closed early: {status}\n{stderr}");
    }
}
