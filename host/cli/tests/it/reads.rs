//! Reads write nothing (the home byte for byte as it was, a missing home an error), inputs
//! echoed in errors are cut short, and human output escapes a transcript's control characters.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use cairn::transcript::{formats, sample, Part};
use serde_json::{json, Value};

use crate::support::mcp::Mcp;

fn cairn(args: &[&str], log: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cairn")).args(args).env("CAIRN_LOG", log).output().expect("running cairn")
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Every name, mode and byte under `root` (symlinks as their targets' names).
fn tree(root: &Path) -> BTreeMap<String, (u32, Vec<u8>)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let name = path.strip_prefix(root).unwrap().display().to_string();
            let bytes = if meta.is_dir() {
                stack.push(path.clone());
                Vec::new()
            } else if meta.file_type().is_symlink() {
                std::fs::read_link(&path).unwrap().display().to_string().into_bytes()
            } else {
                std::fs::read(&path).unwrap()
            };
            out.insert(name, (meta.permissions().mode(), bytes));
        }
    }
    out
}

/// A home holding conversation `c`, compacted once; returns the archive id. `operator_text`
/// replaces the text of the operator's second request (an entry the compaction keeps).
fn compacted_home(dir: &Path, operator_text: Option<&str>) -> String {
    let mut session = sample::coding_session(12);
    if let Some(text) = operator_text {
        // The last request: in the verbatim tail, whose requests `show` lists with their text.
        let entry = session.entries.iter_mut().rev().find(|e| e.id.starts_with('u')).expect("the sample's last request");
        entry.parts = vec![Part::Text { text: text.to_string() }].into();
    }
    let file = dir.join("c.jsonl");
    std::fs::write(&file, formats::write_cairn(&session)).unwrap();
    let out = cairn(&["compact", s(&file), "--home", s(&dir.join("home")), "--conversation", "c", "--json"], "error");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    report["archive_id"].as_str().expect("the compaction commits").to_string()
}

#[test]
fn reads_leave_the_home_byte_for_byte_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let archive = compacted_home(dir.path(), None);
    let home = dir.path().join("home");
    let before = tree(&home);
    let h = s(&home);
    let reads: Vec<Vec<&str>> = vec![
        vec!["show", "--conversation", "c", "--home", h],
        vec!["show", "--conversation", "c", &archive, "--home", h],
        vec!["show", "--conversation", "unknown", "--home", h],
        vec!["history", "--home", h, "--conversation", "c", "summary"],
        vec!["history", "--home", h, "--conversation", "unknown", "summary"],
        vec!["tokens", "--home", h, "list"],
        vec!["notices", "--home", h, "--conversation", "c"],
        vec!["notices", "--home", h, "--conversation", "unknown"],
        vec!["artifact", "artifact://a-0123456789abcdef/1", "--home", h],
    ];
    for args in &reads {
        cairn(args, "error");
        assert!(tree(&home) == before, "cairn {args:?} changed the home");
    }
    let mut mcp = Mcp::start(&home);
    for (tool, args) in [
        ("notices_take", json!({"conversation": "unknown"})),
        ("notices_take", json!({"conversation": "c"})),
        ("show", json!({"conversation": "unknown"})),
        ("show", json!({"conversation": "c", "archive_id": archive})),
        ("pin", json!({"conversation": "unknown", "ids": ["x"]})),
        ("undo", json!({"conversation": "unknown"})),
    ] {
        let _ = mcp.tool(tool, args.clone());
        assert!(tree(&home) == before, "MCP {tool} {args} changed the home");
    }
}

#[test]
fn a_read_on_a_missing_home_errors_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("nowhere");
    for args in [
        vec!["show", "--conversation", "c", "--home", s(&home)],
        vec!["history", "--home", s(&home), "--conversation", "c", "summary"],
        vec!["tokens", "--home", s(&home), "list"],
        vec!["notices", "--home", s(&home), "--conversation", "c"],
        vec!["artifact", "artifact://a-0123456789abcdef/1", "--home", s(&home)],
    ] {
        let out = cairn(&args, "error");
        assert!(!out.status.success(), "cairn {args:?} succeeded on a missing home");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("no Cairn home at"), "cairn {args:?}: {stderr}");
        assert!(!home.exists(), "cairn {args:?} created the home");
    }
}

/// The error is short and still names the start of what was sent.
fn assert_cut_short(what: &str, error: &str, sent: &str) {
    assert!(error.len() < 1024, "{what}: a {} byte error", error.len());
    assert!(error.contains(&sent[..40]), "{what} does not name the input: {error}");
}

#[test]
fn long_ids_come_back_cut_short() {
    let dir = tempfile::tempdir().unwrap();
    compacted_home(dir.path(), None);
    let home = dir.path().join("home");
    let long = format!("a-{}", "f".repeat(100_000));
    for args in [
        vec!["show", "--conversation", "c", &long, "--home", s(&home)],
        vec!["undo", "--conversation", "c", "--archive", &long, "--home", s(&home)],
        vec!["pin", "--conversation", "c", &long, "--home", s(&home)],
    ] {
        let out = cairn(&args, "debug");
        assert!(!out.status.success(), "cairn {}", args[0]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.lines().all(|line| line.len() < 1024), "cairn {} at CAIRN_LOG=debug wrote a line of {} bytes", args[0], stderr.lines().map(str::len).max().unwrap());
        let error = stderr.lines().find(|l| l.contains(&long[..40])).unwrap_or_else(|| panic!("cairn {}: {stderr}", args[0]));
        assert_cut_short(args[0], error, &long);
    }
    let mut mcp = Mcp::start(&home);
    for (tool, args) in [("show", json!({"conversation": "c", "archive_id": long})), ("undo", json!({"conversation": "c", "archive_id": long})), ("pin", json!({"conversation": "c", "ids": [long]}))] {
        let error = mcp.tool(tool, args).expect_err("a 100 kB id is refused");
        assert_cut_short(tool, &error, &long);
    }
}

#[test]
fn a_transcripts_escape_sequence_is_printed_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let archive = compacted_home(dir.path(), Some("\u{1b}[2J\u{1b}[31mred alert: the screen was cleared"));
    let home = dir.path().join("home");
    let out = cairn(&["show", "--conversation", "c", &archive, "--home", s(&home)], "error");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(!stdout.contains('\u{1b}'), "cairn show passed an ESC to the terminal:\n{stdout}");
    assert!(stdout.contains("\\u{1b}[2J"), "cairn show does not show the sequence escaped:\n{stdout}");
    let out = cairn(&["history", "--home", s(&home), "--conversation", "c", "search", "alert"], "error");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(!stdout.contains('\u{1b}'), "cairn history passed an ESC to the terminal:\n{stdout}");
}

/// The page's writes that fail (an unknown conversation, entry or archive, a bad value) answer
/// an error and leave the home byte for byte as it was: no folder, no lock, no event.
#[test]
fn the_pages_failing_writes_leave_the_home_as_it_was() {
    use std::io::{BufRead, BufReader, Read, Write};
    let dir = tempfile::tempdir().unwrap();
    compacted_home(dir.path(), None);
    let home = dir.path().join("home");
    let before = tree(&home);
    let mut ui =
        Command::new(env!("CARGO_BIN_EXE_cairn")).args(["ui", "--home", s(&home), "--json"]).env("CAIRN_LOG", "error").stdout(std::process::Stdio::piped()).spawn().expect("starting cairn ui");
    let mut line = String::new();
    BufReader::new(ui.stdout.take().unwrap()).read_line(&mut line).unwrap();
    struct Stop(std::process::Child);
    impl Drop for Stop {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _stop = Stop(ui);
    let url = serde_json::from_str::<Value>(&line).unwrap()["url"].as_str().unwrap().to_string();
    let addr = url.trim_start_matches("http://").split('/').next().unwrap().to_string();
    let token = url.split_once("token=").unwrap().1.to_string();
    for query in [
        "/api/pin?conversation=unknown&id=u1&pinned=true",
        "/api/pin?conversation=c&id=no-such-entry&pinned=true",
        "/api/pin?conversation=c&id=u1&pinned=false",
        "/api/pin?conversation=c&id=u1&pinned=maybe",
        "/api/pin?conversation=../escape&id=u1&pinned=true",
        "/api/undo?conversation=unknown",
        "/api/undo?conversation=c&archive=a-0000000000000000",
    ] {
        let mut socket = std::net::TcpStream::connect(&addr).unwrap();
        write!(socket, "POST {query}&token={token} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").unwrap();
        let mut answer = String::new();
        socket.read_to_string(&mut answer).unwrap();
        let status = answer.split(' ').nth(1).unwrap_or_default();
        assert!(status.starts_with('4'), "POST {query} answered {}", answer.lines().next().unwrap_or_default());
        assert!(tree(&home) == before, "POST {query} changed the home");
    }
}
