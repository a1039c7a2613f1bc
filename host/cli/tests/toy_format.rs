//! A transcript format added from outside the library, as a harness with a log of its own adds
//! one: one file implementing `TranscriptFormat`, one `register` call. The CLI's verbs, run
//! in-process, then read it (detection) and write it (`compact --out-format`) like a built-in
//! format. Its own test binary: the registration is process-wide and must not reach the
//! other tests.

use std::collections::HashMap;
use std::process::ExitCode;

use cairn::transcript::formats::{self, Format, TranscriptError, TranscriptFormat};
use cairn::transcript::{Entry, Origin, Part, Role, Transcript};

/// "toy": a `#toy` line, then one line per part — `user: …`, `assistant: …`, `system: …`,
/// `call ID NAME ARGS`, `result ID: …` — newlines written `\n`. No ids of its own: they come
/// from content, the library's rule for such formats.
struct Toy;

const HEADER: &str = "#toy";

impl TranscriptFormat for Toy {
    fn name(&self) -> &'static str {
        "toy"
    }

    fn detect(&self, _head: Option<&serde_json::Value>, text: &str) -> bool {
        text.trim_start().starts_with(HEADER)
    }

    fn parse(&self, text: &str, source_name: &str) -> Result<Transcript, TranscriptError> {
        let mut seen = HashMap::new();
        let mut entries = Vec::new();
        for (n, line) in text.lines().enumerate().skip_while(|(_, l)| l.trim().is_empty()).skip(1) {
            let unescape = |s: &str| s.replace("\\n", "\n");
            let fail = |message: &str| TranscriptError { source_name: source_name.into(), line: Some(n + 1), message: message.into() };
            let (role, origin, part) = if let Some(rest) = line.strip_prefix("call ") {
                let mut words = rest.splitn(3, ' ');
                let (Some(id), Some(name), Some(args)) = (words.next(), words.next(), words.next()) else { return Err(fail("a call needs an id, a name and arguments")) };
                (Role::Assistant, Origin::Agent, Part::ToolCall { id: id.into(), name: name.into(), args: unescape(args) })
            } else if let Some(rest) = line.strip_prefix("result ") {
                let (id, content) = rest.split_once(": ").ok_or_else(|| fail("a result needs `ID: content`"))?;
                (Role::Tool, Origin::Tool, Part::ToolResult { call_id: id.into(), content: unescape(content), is_error: false, elided: None })
            } else {
                let (who, said) = line.split_once(": ").ok_or_else(|| fail("expected `user: …`, `assistant: …`, `call …` or `result …`"))?;
                let (role, origin) = match who {
                    "user" => (Role::User, Origin::Operator),
                    "assistant" => (Role::Assistant, Origin::Agent),
                    "system" => (Role::System, Origin::Harness),
                    "summary" => (Role::User, Origin::Summary),
                    other => return Err(fail(&format!("unknown speaker {other}"))),
                };
                (role, origin, Part::Text { text: unescape(said) })
            };
            let parts = vec![part];
            let id = formats::content_id(role, &parts, &mut seen);
            entries.push(Entry { parts: parts.into(), ..Entry::text(id, role, origin, "") });
        }
        Ok(Transcript::new(entries))
    }

    fn writer(&self) -> Option<fn(&Transcript) -> String> {
        Some(write)
    }
}

fn write(t: &Transcript) -> String {
    let escape = |s: &str| s.replace('\n', "\\n");
    let mut out = format!("{HEADER}\n");
    for entry in &t.entries {
        let who = match (entry.role, entry.origin) {
            (_, Origin::Summary) => "summary",
            (Role::User, _) => "user",
            (Role::System, _) => "system",
            _ => "assistant",
        };
        for part in entry.parts.iter() {
            let line = match part {
                Part::ToolCall { id, name, args } => format!("call {id} {name} {}", escape(args)),
                Part::ToolResult { call_id, content, .. } => format!("result {call_id}: {}", escape(content)),
                Part::Thinking { .. } => continue,
                other => format!("{who}: {}", escape(other.text())),
            };
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}

/// A coding session long enough to compact: the operator's rule first, tool calls with long
/// outputs, a planted id in the last output, the latest request at the end.
fn session() -> String {
    let mut text = format!("{HEADER}\nuser: Fix the flaky parser test. Never edit the generated files under gen/.\n");
    for i in 0..30 {
        let log: String = (0..80).map(|l| format!("step {i} line {l}: compiling module_{l} ok\\n")).collect();
        text.push_str(&format!("assistant: Running the tests, round {i}.\ncall c{i} bash {{\"command\":\"cargo test round_{i}\"}}\nresult c{i}: {log}\n"));
    }
    text.push_str("assistant: The failure is in parse_header; build id ZEBRA-7431.\nuser: Now make parse_header accept tabs.\n");
    text
}

fn cairn(args: &[&str]) -> ExitCode {
    cairn_cli::run(std::iter::once("cairn").chain(args.iter().copied()))
}

#[test]
fn a_registered_format_is_read_and_written_by_compact() {
    let toy = formats::register(Toy).expect("a new name");
    assert_eq!(Format::named("toy"), Ok(toy));
    assert!(Format::writable_ones().any(|f| f == toy), "a registered writer is offered to --out-format");
    assert!(formats::register(Toy).is_err(), "a name registers once");

    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let input = dir.path().join("session.toy");
    let output = dir.path().join("compacted.toy");
    std::fs::write(&input, session()).unwrap();
    let (read, format) = formats::parse(&std::fs::read_to_string(&input).unwrap(), "session.toy").unwrap();
    assert_eq!(format, toy, "detected by the registered detector");

    let status = cairn(&["compact", input.to_str().unwrap(), "--home", home.to_str().unwrap(), "--out", output.to_str().unwrap(), "--out-format", "toy"]);
    assert_eq!(status, ExitCode::SUCCESS, "compact of a toy session");

    let written = std::fs::read_to_string(&output).unwrap();
    assert!(written.starts_with(HEADER), "written in the toy format: {}", &written[..written.len().min(200)]);
    let (back, format) = formats::parse(&written, "compacted.toy").unwrap_or_else(|e| panic!("the toy output reads back: {e}"));
    assert_eq!(format, toy);
    let before = std::fs::read_to_string(&input).unwrap();
    assert!(written.len() * 2 < before.len(), "compacted: {} of {} bytes", written.len(), before.len());
    assert!(written.contains("artifact://"), "what was set aside is named where the model reads it:\n{written}");
    assert!(!back.entries.is_empty() && back.entries.len() <= read.entries.len());
    assert!(written.contains("Never edit the generated files under gen/"), "the operator's rule survives");
    assert!(written.contains("user: Now make parse_header accept tabs."), "the latest request stays verbatim");
    for entry in &back.entries {
        for call in entry.tool_call_ids() {
            assert!(back.entries.iter().any(|e| e.tool_result_ids().any(|r| r == call)), "call {call} keeps its result");
        }
    }

    // Compacting the compacted file again goes through the same registered reader.
    let again = dir.path().join("again.toy");
    let status = cairn(&["compact", output.to_str().unwrap(), "--home", home.to_str().unwrap(), "--out", again.to_str().unwrap(), "--out-format", "toy"]);
    assert!(status == ExitCode::SUCCESS || status == ExitCode::from(3), "a second compaction reads its own output");
}
