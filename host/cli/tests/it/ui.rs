//! `cairn ui` in a real browser: a home with a recorded Pi session compacted twice, the server
//! started as a user starts it, and headless Chromium driven by puppeteer-core (`ui/drive.mjs`,
//! pinned, installed with npm by the test) through the conversations page, the timeline, a
//! compaction and one of its artifacts, then undo, pin and unpin. The first compaction is the
//! default policy's two stages: its page must list, stage by stage, what was elided (with the
//! placeholder) and kept verbatim with non-zero tokens that add up, and the offline checkpoint
//! step as "offline by policy". Screenshots of each page go to
//! `target/test-artifacts/ui/`; the record must hold the undo afterwards.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::agents::npm;

/// The browser driver, pinned (a bump is one line here).
const PUPPETEER_CORE: (&str, &str) = ("puppeteer-core", "24.43.1");

fn chromium() -> Option<PathBuf> {
    let path = PathBuf::from(std::env::var_os("CHROME").unwrap_or_else(|| "/usr/bin/chromium".into()));
    path.is_file().then_some(path)
}

fn compact(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_cairn")).arg("compact").args(args).env("CAIRN_LOG", "error").output().expect("running cairn compact")
}

fn screenshots_dir() -> PathBuf {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().expect("the target directory").to_path_buf();
    target.join("test-artifacts/ui")
}

#[test]
#[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
#[cfg_attr(no_npm, ignore = "needs npm (puppeteer-core)")]
fn the_page_shows_conversations_timeline_and_compaction_and_undoes_in_a_browser() {
    let Some(chrome) = chromium() else {
        assert!(std::env::var("CI").as_deref() != Ok("true"), "CI must have Chromium at /usr/bin/chromium (or $CHROME): .ci/run installs it");
        eprintln!("skipped: no Chromium at /usr/bin/chromium (set CHROME)");
        return;
    };
    let session = crate::support::shared("pi").join("pi-mono__large-session.jsonl");
    assert!(session.is_file(), "missing {}", session.display());
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let key = "ui-test";

    // Two compactions of the large Pi session: the default policy's, then, on its result, the
    // host's last resort alone (a policy of one step), which drops the oldest entries.
    let c1 = dir.path().join("c1.jsonl");
    let first = compact(&[&s(&session), "--home", &s(&home), "--conversation", key, "--out", &s(&c1)]);
    assert!(first.status.success(), "cairn compact: {}", String::from_utf8_lossy(&first.stderr));
    let dropping = dir.path().join("last-resort.toml");
    std::fs::write(&dropping, "[[chain]]\nplugin = \"last-resort\"\n").unwrap();
    let second = compact(&[&s(&c1), "--home", &s(&home), "--conversation", key, "--policy", &s(&dropping)]);
    assert!(second.status.success(), "cairn compact (again): {}", String::from_utf8_lossy(&second.stderr));

    // The server, as a user starts it.
    let mut ui = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["ui", "--home", &s(&home), "--json"])
        .env("CAIRN_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("starting cairn ui");
    let mut line = String::new();
    BufReader::new(ui.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let started: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("cairn ui --json printed {line:?}: {e}"));
    let url = started["url"].as_str().unwrap().to_string();
    let port = started["port"].as_u64().unwrap();
    eprintln!("cairn ui: {url}");
    let token = url.split_once("?token=").map(|(_, t)| t).unwrap();
    assert!(url.starts_with(&format!("http://127.0.0.1:{port}/?token=")), "{url}");
    assert!(token.len() == 32 && token.chars().all(|c| c.is_ascii_hexdigit()), "{url}");

    let puppeteer = npm::install(PUPPETEER_CORE, false);
    let shots = screenshots_dir();
    std::fs::create_dir_all(&shots).unwrap();
    for old in ["1-conversations", "2-timeline", "3-compaction", "3b-dropped", "4-artifact", "5-after-undo"] {
        let _ = std::fs::remove_file(shots.join(format!("{old}.png")));
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/ui/drive.mjs");
    let mut node = Command::new("node");
    node.arg(&script).env("UI_URL", &url).env("CONVERSATION", key).env("PUPPETEER_DIR", &puppeteer).env("OUT_DIR", &shots).env("CHROME", &chrome).env("HOME", dir.path());
    let (code, out, err) = crate::agents::run(node, &dir.path().join("drive"), Duration::from_secs(240));
    eprintln!("{out}");

    // Stop the server as an operator would: SIGTERM, and it exits 0.
    let _ = Command::new("kill").args(["-s", "TERM", "--", &ui.id().to_string()]).status();
    let status = ui.wait().unwrap();
    assert_eq!(code, Some(0), "drive.mjs failed:\n{out}\n{err}");
    assert!(status.success(), "cairn ui after SIGTERM: {status}");

    for name in ["1-conversations", "2-timeline", "3-compaction", "3b-dropped", "4-artifact", "5-after-undo"] {
        let png = shots.join(format!("{name}.png"));
        let bytes = std::fs::read(&png).unwrap_or_else(|e| panic!("{}: {e}", png.display()));
        assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "{} is not a PNG", png.display());
        assert!(bytes.len() > 5_000, "{} holds only {} bytes", png.display(), bytes.len());
        eprintln!("screenshot {} ({} KB)", png.display(), bytes.len() / 1024);
    }

    // The undo is in the record, and the compaction it took back reads as undone.
    let home = cairn::storage::Home::open(&home).unwrap();
    let store = home.existing_conversation(&cairn::storage::ConversationKey::parse(key).unwrap()).unwrap();
    let timeline = serde_json::to_value(cairn::show::timeline(&store)).unwrap();
    let moments = timeline["moments"].as_array().unwrap();
    let undo = moments.iter().find(|m| m["kind"] == "undo").unwrap_or_else(|| panic!("no undo in the record: {timeline:#}"));
    let undone = undo["undone"][0].as_str().unwrap();
    let compaction = moments.iter().find(|m| m["archive_id"] == undone).unwrap();
    assert_eq!(compaction["status"], "undone", "{timeline:#}");
    assert_eq!(moments.iter().filter(|m| m["kind"] == "compaction").count(), 2, "{timeline:#}");
    // The pin and the unpin the page made are recorded too, and nothing is left pinned.
    let pins: Vec<bool> = moments.iter().filter(|m| m["kind"] == "pin").map(|m| m["pinned"].as_bool().unwrap()).collect();
    assert_eq!(pins, [true, false], "{timeline:#}");
    assert!(store.pinned_ids().is_empty());
}

/// `cairn ui` bounds its connections as `serve --http` does: with 200 idle connections open the
/// page is served, and each idle one is closed once `--header-timeout` passes.
#[test]
fn idle_connections_to_the_page_are_closed_after_the_header_timeout() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let mut ui = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["ui", "--home", dir.path().join("home").to_str().unwrap(), "--json", "--header-timeout", "2", "--max-connections-per-ip", "300"])
        .env("CAIRN_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .expect("starting cairn ui");
    let mut line = String::new();
    BufReader::new(ui.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let url = serde_json::from_str::<Value>(&line).unwrap()["url"].as_str().unwrap().to_string();
    // Killed even when an assertion fails: a server left running would hold the test's output.
    struct Stop(std::process::Child);
    impl Drop for Stop {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _stop = Stop(ui);
    let addr = url.trim_start_matches("http://").split('/').next().unwrap().to_string();
    let mut idle = crate::serve_http::idle_sockets(&addr, 200);

    let mut page = std::net::TcpStream::connect(&addr).unwrap();
    let path = url.split_once(&addr).unwrap().1;
    page.write_all(format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes()).unwrap();
    let mut answer = String::new();
    page.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200") && answer.contains("<html"), "{}", &answer[..answer.len().min(300)]);

    for socket in &mut idle {
        assert!(crate::serve_http::closed_by_server(socket, Duration::from_secs(5)), "an idle connection to the page is still open");
    }
}
