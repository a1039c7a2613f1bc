//! Cairn's own JSONL: a header line `{"cairn":"transcript","version":1}`,
//! then one serde-serialized `Entry` per line.

use std::collections::HashMap;

use serde::Deserialize;

use super::TranscriptError;
use crate::transcript::{Entry, Transcript};

const VERSION: u64 = 1;

#[derive(Deserialize)]
struct Header {
    cairn: String,
    version: u64,
}

/// Cairn's own JSONL: a `{"cairn": …}` header, then one entry per line.
pub(super) struct CairnJsonl;

impl super::TranscriptFormat for CairnJsonl {
    fn name(&self) -> &'static str {
        "cairn"
    }

    fn detect(&self, head: Option<&serde_json::Value>, _: &str) -> bool {
        super::transcript_format::object(head).is_some_and(|h| h.contains_key("cairn"))
    }

    fn parse(&self, text: &str, source_name: &str) -> Result<Transcript, TranscriptError> {
        parse(text, source_name)
    }

    fn writer(&self) -> Option<fn(&Transcript) -> String> {
        Some(write)
    }

    fn records_turns(&self) -> bool {
        true
    }
}

pub(super) fn parse(text: &str, source_name: &str) -> Result<Transcript, TranscriptError> {
    let err = |line, msg: String| TranscriptError::new(source_name, Some(line), msg);
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l)).filter(|(_, l)| !l.trim().is_empty());
    let (n, first) = lines.next().ok_or_else(|| TranscriptError::new(source_name, None, "empty transcript"))?;
    let header: Header = serde_json::from_str(first).map_err(|e| TranscriptError::in_line(source_name, n, &e))?;
    if header.cairn != "transcript" {
        return Err(err(n, format!("expected a `\"cairn\":\"transcript\"` header, found `{}`", header.cairn)));
    }
    if header.version != VERSION {
        return Err(err(n, format!("unsupported cairn transcript version {} (this build reads version {VERSION})", header.version)));
    }

    let mut entries = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (n, line) in lines {
        let entry: Entry = serde_json::from_str(line).map_err(|e| TranscriptError::in_line(source_name, n, &e))?;
        if let Some(first) = seen.insert(entry.id.clone(), n) {
            return Err(err(n, format!("duplicate entry id `{}` (first at line {first})", entry.id)));
        }
        entries.push(entry);
    }
    Ok(Transcript::new(entries))
}

pub(super) fn write(t: &Transcript) -> String {
    let mut out = format!("{{\"cairn\":\"transcript\",\"version\":{VERSION}}}\n");
    for entry in &t.entries {
        out.push_str(&serde_json::to_string(entry).expect("an Entry always serializes"));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::{Origin, Part, Role};

    fn sample() -> Transcript {
        let mut t = Transcript::new(vec![
            Entry::text("s", Role::System, Origin::Harness, "be brief"),
            Entry::text("u", Role::User, Origin::Operator, "list files"),
            Entry { parts: vec![Part::ToolCall { id: "c1".into(), name: "ls".into(), args: r#"{"path":"."}"#.into() }].into(), tokens: 12, ..Entry::text("a", Role::Assistant, Origin::Agent, "") },
            Entry {
                parts: vec![
                    Part::ToolResult { call_id: "c1".into(), content: "a\nb".into(), is_error: false, elided: None },
                    Part::Placeholder { text: "[set aside]".into(), uri: Some("artifact://x".into()) },
                    Part::Image { reference: "image/png image, 8 bytes base64".into() },
                ]
                .into(),
                pinned: true,
                ..Entry::text("r", Role::Tool, Origin::Tool, "")
            },
        ]);
        t.number_turns();
        t
    }

    #[test]
    fn round_trips_exactly() {
        let t = sample();
        let text = write(&t);
        assert!(text.starts_with("{\"cairn\":\"transcript\",\"version\":1}\n"));
        assert_eq!(text.lines().count(), 5);
        assert_eq!(parse(&text, "t.jsonl").unwrap(), t);
    }

    #[test]
    fn keeps_recorded_turns_and_defaults_missing_fields() {
        let text = "{\"cairn\":\"transcript\",\"version\":1}\n\
                    {\"id\":\"x\",\"role\":\"user\",\"origin\":\"operator\",\"parts\":[],\"turn\":9}\n\
                    {\"id\":\"y\",\"role\":\"assistant\",\"origin\":\"agent\",\"parts\":[]}\n";
        let t = super::super::parse_as(super::super::Format::Cairn, text, "t.jsonl").unwrap();
        assert_eq!((t.entries[0].turn, t.entries[1].turn, t.entries[1].tokens), (9, 0, 0));
    }

    #[test]
    fn rejects_unknown_version() {
        let e = parse("{\"cairn\":\"transcript\",\"version\":2}\n", "t.jsonl").unwrap_err();
        assert_eq!(e.line, Some(1));
        assert!(e.message.contains("unsupported cairn transcript version 2"), "{e}");
    }

    #[test]
    fn bad_json_names_its_line() {
        let mut text = write(&sample());
        text.push_str("{\"id\":\"z\",\"role\":\n");
        let e = parse(&text, "t.jsonl").unwrap_err();
        assert_eq!(e.line, Some(6));
        assert!(e.to_string().starts_with("t.jsonl:6: "), "{e}");

        let text = "{\"cairn\":\"transcript\",\"version\":1}\n{\"id\":\"z\",\"role\":\"robot\",\"origin\":\"agent\",\"parts\":[]}";
        let e = parse(text, "t.jsonl").unwrap_err();
        assert_eq!(e.line, Some(2));
        assert!(e.message.contains("unknown variant `robot`"), "{e}");
    }

    #[test]
    fn rejects_duplicate_ids() {
        let mut text = write(&sample());
        text.push_str(&serde_json::to_string(&Entry::text("u", Role::User, Origin::Operator, "again")).unwrap());
        let e = parse(&text, "t.jsonl").unwrap_err();
        assert_eq!(e.line, Some(6));
        assert!(e.message.contains("duplicate entry id `u` (first at line 3)"), "{e}");
    }
}
