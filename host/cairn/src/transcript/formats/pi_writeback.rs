//! Pi session write-back: a compacted transcript as a Pi v3 session file
//! (`packages/coding-agent/src/core/session-manager.ts`) that Pi opens as is: a `session`
//! header, one entry per message chained by `parentId`, and — where the transcript starts with
//! a summary — a `compaction` entry after the kept messages, whose `firstKeptEntryId` names the
//! first of them, so Pi's `buildSessionContext` yields the summary, then those messages.
//! - System entries and harness text become `custom_message` entries (Pi keeps its own system
//!   prompt); a summary further in becomes a `custom_message` too (only a leading one is Pi's
//!   compaction).
//! - Each reply's usage is Cairn's count of the context up to it: the billed figures describe
//!   the context before compaction, and zeros would tell Pi's trigger the context is empty.

use std::collections::{HashMap, HashSet};

use serde_json::{json, Value};

use crate::transcript::{Entry, Origin, Part, Role, Transcript};

pub(super) fn write(t: &Transcript) -> String {
    // The clock here, not `record`'s: a transcript format depends on nothing above `transcript`.
    let start = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
    let iso = |ms: u64| iso8601(ms);
    let mut lines = vec![json!({"type": "session", "version": 3, "id": session_id(t), "timestamp": iso(start), "cwd": ""})];

    // The leading summaries (after any system entries) are Pi's compaction.
    let lead = t.entries.iter().take_while(|e| e.role == Role::System).count();
    let summaries = t.entries[lead..].iter().take_while(|e| e.origin == Origin::Summary).count();
    let summary: Vec<String> = t.entries[lead..lead + summaries].iter().map(|e| e.model_text().trim_end().to_string()).collect();

    let names: HashMap<&str, &str> = t
        .entries
        .iter()
        .flat_map(|e| &e.parts)
        .filter_map(|p| match p {
            Part::ToolCall { id, name, .. } => Some((id.as_str(), name.as_str())),
            _ => None,
        })
        .collect();
    let mut used = HashSet::new();
    let mut parent: Option<String> = None;
    let mut first_kept: Option<String> = None;
    // The summary comes first in Pi's context, then the written entries in order.
    let size = |e: &Entry| if e.tokens > 0 { e.tokens as u64 } else { e.model_text().len() as u64 / 4 };
    let mut context: u64 = t.entries[lead..lead + summaries].iter().map(size).sum();
    for (n, entry) in t.entries.iter().enumerate() {
        if (lead..lead + summaries).contains(&n) {
            continue;
        }
        let id = unique(&entry.id, &mut used);
        let at = start + n as u64;
        let before = context;
        context += size(entry);
        let mut line = match entry_json(entry, &names, at, (before, context - before)) {
            EntryJson::Message(message) => json!({"type": "message", "message": message}),
            EntryJson::Custom(text) => json!({"type": "custom_message", "customType": "cairn", "content": text, "display": true}),
        };
        line["id"] = json!(id);
        line["parentId"] = json!(parent);
        line["timestamp"] = json!(iso(at));
        // Kept from the first written entry on: a system entry before the summary would
        // otherwise fall out of Pi's context.
        if first_kept.is_none() {
            first_kept = Some(id.clone());
        }
        parent = Some(id);
        lines.push(line);
    }
    if summaries > 0 {
        let id = unique("cairn-compaction", &mut used);
        let tokens_before: u64 = t.entries.iter().map(|e| e.tokens as u64).sum();
        lines.push(json!({
            "type": "compaction", "id": id, "parentId": parent, "timestamp": iso(start + t.entries.len() as u64),
            "summary": summary.join("\n\n"), "firstKeptEntryId": first_kept.unwrap_or_else(|| id.clone()),
            "tokensBefore": tokens_before, "details": {"writtenBy": "cairn"},
        }));
    }
    let mut out: String = lines.iter().map(|l| l.to_string() + "\n").collect();
    out.shrink_to_fit();
    out
}

enum EntryJson {
    Message(Value),
    Custom(String),
}

/// `usage`: (context tokens before this entry, its own tokens).
fn entry_json(entry: &Entry, names: &HashMap<&str, &str>, at: u64, usage: (u64, u64)) -> EntryJson {
    let text = |p: &Part| match p {
        Part::Text { text } | Part::Placeholder { text, .. } => Some(text.clone()),
        Part::Image { reference } => Some(format!("[image: {reference}]")),
        _ => None,
    };
    match (entry.role, entry.origin) {
        (Role::Assistant, Origin::Agent) => {
            let content: Vec<Value> = entry
                .parts
                .iter()
                .filter_map(|p| match p {
                    Part::Thinking { text } => Some(json!({"type": "thinking", "thinking": text})),
                    Part::ToolCall { id, name, args } => {
                        let arguments = serde_json::from_str::<Value>(args).ok().filter(Value::is_object).unwrap_or_else(|| json!({ "arguments": args }));
                        Some(json!({"type": "toolCall", "id": id, "name": name, "arguments": arguments}))
                    }
                    other => text(other).map(|t| json!({"type": "text", "text": t})),
                })
                .collect();
            let stop = if entry.tool_call_ids().next().is_some() { "toolUse" } else { "stop" };
            EntryJson::Message(json!({
                "role": "assistant", "content": content, "api": "cairn", "provider": "cairn", "model": "cairn",
                "usage": {"input": usage.0, "output": usage.1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": usage.0 + usage.1,
                          "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
                "stopReason": stop, "timestamp": at,
            }))
        }
        (Role::Tool, _) => match entry.parts.first() {
            Some(Part::ToolResult { call_id, content, is_error, .. }) => {
                let mut blocks = vec![json!({"type": "text", "text": content})];
                blocks.extend(entry.parts[1..].iter().filter_map(text).map(|t| json!({"type": "text", "text": t})));
                EntryJson::Message(json!({
                    "role": "toolResult", "toolCallId": call_id, "toolName": names.get(call_id.as_str()).copied().unwrap_or("unknown"),
                    "content": blocks, "isError": is_error, "timestamp": at,
                }))
            }
            _ => EntryJson::Custom(entry.model_text().trim_end().to_string()),
        },
        (Role::User, Origin::Operator) => {
            let content: Vec<Value> = entry.parts.iter().filter_map(text).map(|t| json!({"type": "text", "text": t})).collect();
            EntryJson::Message(json!({"role": "user", "content": content, "timestamp": at}))
        }
        // System prompts, harness text, summaries further in, anything else a harness said.
        _ => EntryJson::Custom(entry.model_text().trim_end().to_string()),
    }
}

/// `id`, or `id-2`, `id-3`… when an earlier entry took it.
fn unique(id: &str, used: &mut HashSet<String>) -> String {
    let mut candidate = id.to_string();
    let mut n = 1;
    while !used.insert(candidate.clone()) {
        n += 1;
        candidate = format!("{id}-{n}");
    }
    candidate
}

/// A stable id for the written session, from its entries' ids.
fn session_id(t: &Transcript) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for e in &t.entries {
        hasher.update(e.id.as_bytes());
        hasher.update([0]);
    }
    let d = hasher.finalize();
    let hex: String = d[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
}

/// Milliseconds since the epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ` (civil-from-days, proleptic
/// Gregorian).
pub fn iso8601(ms: u64) -> String {
    let (secs, millis) = (ms / 1000, ms % 1000);
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::real_files;
    use super::super::{parse, Format};
    use super::*;

    #[test]
    fn dates_are_iso_8601() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(1_763_681_630_793), "2025-11-20T23:33:50.793Z");
        assert_eq!(iso8601(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn a_leading_summary_becomes_pis_compaction_and_reads_back() {
        let t = Transcript::new(vec![
            Entry::text("s1", Role::User, Origin::Summary, "Earlier: the parser was fixed."),
            Entry::text("u1", Role::User, Origin::Operator, "Now add tests."),
            Entry { parts: vec![Part::ToolCall { id: "c1".into(), name: "bash".into(), args: r#"{"command":"cargo test"}"#.into() }].into(), ..Entry::text("a1", Role::Assistant, Origin::Agent, "") },
            Entry { parts: vec![Part::ToolResult { call_id: "c1".into(), content: "ok".into(), is_error: false, elided: None }].into(), ..Entry::text("t1", Role::Tool, Origin::Tool, "") },
        ]);
        let written = write(&t);
        let lines: Vec<Value> = written.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines[0]["version"], 3);
        let compaction = lines.last().unwrap();
        assert_eq!(compaction["type"], "compaction");
        assert_eq!(compaction["firstKeptEntryId"], "u1");
        assert_eq!(compaction["parentId"], "t1");
        assert_eq!(lines[3]["message"]["toolName"], "bash");
        let (back, format) = parse(&written, "w.jsonl").unwrap();
        assert_eq!(format, Format::Pi);
        let shape: Vec<(&str, Origin)> = back.entries.iter().map(|e| (e.id.as_str(), e.origin)).collect();
        assert_eq!(shape, [("cairn-compaction", Origin::Summary), ("u1", Origin::Operator), ("a1", Origin::Agent), ("t1", Origin::Tool)]);
        assert_eq!(back.entries[0].model_text().trim_end(), "Earlier: the parser was fixed.");
        assert_eq!(back.entries[2].parts, t.entries[2].parts);
    }

    /// Every recorded session written as Pi reads back with the same messages.
    #[test]
    #[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
    fn real_sessions_write_back_as_pi() {
        for (sub, ext) in [("pi", "jsonl"), ("claude-code", "jsonl"), ("openai-chat", "json")] {
            for (name, text) in real_files(sub, ext) {
                let (t, _) = parse(&text, &name).unwrap();
                let (back, format) = parse(&write(&t), &name).unwrap_or_else(|e| panic!("{name}: {e}"));
                assert_eq!(format, Format::Pi);
                assert_eq!(back.entries.len(), t.entries.len(), "{name}");
                for (a, b) in t.entries.iter().zip(&back.entries) {
                    assert_eq!(a.role == Role::Tool, b.role == Role::Tool, "{name}: {}", a.id);
                    assert_eq!(a.tool_call_ids().collect::<Vec<_>>(), b.tool_call_ids().collect::<Vec<_>>(), "{name}: {}", a.id);
                }
            }
        }
    }
}
