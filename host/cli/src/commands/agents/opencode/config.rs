//! `opencode.json` edited as text, so that uninstall gives back the very bytes install found:
//! one member is inserted right after an object's `{` (`"mcp": {"cairn": …}` at the top, or
//! `"cairn": …` into an existing `mcp`), indented like the file, and removal takes out exactly
//! that text again. A file reformatted around the entry since falls back to a JSON rewrite.

use std::path::Path;

use anyhow::{bail, Result};
use serde_json::{json, Map, Value};

/// What a config install creates holds this besides Cairn's entry; deleted when that is all.
const CREATED: &str = "{\n  \"$schema\": \"https://opencode.ai/config.json\"\n}\n";

/// The config as a JSON object; errors name the file, line and column.
pub fn parse(text: &str, path: &Path) -> Result<Map<String, Value>> {
    match serde_json::from_str(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => bail!("{}: not a JSON object", path.display()),
        Err(e) => bail!("{}:{}:{}: {e} (a config with comments is edited by hand: add `mcp.cairn`)", path.display(), e.line(), e.column()),
    }
}

/// A new config holding only the schema and `mcp.<key>`.
pub fn created(key: &str, entry: &Value) -> String {
    insert(CREATED, key, entry).expect("the template is an object")
}

/// `text` with `mcp.<key>` = `entry` inserted (`text` has no `mcp.<key>`).
pub fn insert(text: &str, key: &str, entry: &Value) -> Result<String> {
    let top = object_start(text)?;
    let unit = indent_unit(text);
    let (at, depth, name, value) = match value_start(text, top, "mcp") {
        Some(mcp) if text.as_bytes()[mcp] == b'{' => (mcp, 2, key, entry.clone()),
        Some(_) => bail!("`mcp` is not an object"),
        None => (top, 1, "mcp", json!({ key: entry })),
    };
    let member = member(&unit, depth, name, &value, is_empty(text, at));
    Ok(format!("{}{member}{}", &text[..=at], &text[at + 1..]))
}

/// `text` without `mcp.<key>`; `None` when nothing but what install creates is left.
pub fn remove(text: &str, key: &str) -> Result<Option<String>> {
    let doc: Value = serde_json::from_str(text)?;
    let Some(entry) = doc.get("mcp").and_then(|m| m.get(key)) else { return Ok(Some(text.to_string())) };
    let top = object_start(text)?;
    let mcp = value_start(text, top, "mcp");
    // The step install saw, which the inserted lines may now hide (a one-line file).
    let seen = indent_unit(text);
    let units: Vec<String> = std::iter::once(seen.clone()).chain(["  ", "    ", "\t"].iter().map(|u| u.to_string()).filter(|u| *u != seen)).collect();
    let mut candidates = Vec::new();
    for unit in &units {
        for empty in [false, true] {
            candidates.push((top, member(unit, 1, "mcp", &json!({ key: entry }), empty)));
            candidates.extend(mcp.map(|at| (at, member(unit, 2, key, entry, empty))));
        }
    }
    let rest = candidates
        .into_iter()
        .find(|(at, member)| text[at + 1..].starts_with(member.as_str()))
        .map(|(at, member)| format!("{}{}", &text[..=at], &text[at + 1 + member.len()..]))
        .filter(|rest| serde_json::from_str::<Value>(rest).is_ok_and(|v| v == without(&doc, key, true) || v == without(&doc, key, false)));
    let rest = match rest {
        Some(rest) => rest,
        // Reformatted since: rewritten without the entry (and without `mcp` when it held only that).
        None => format!("{}\n", serde_json::to_string_pretty(&without(&doc, key, true))?),
    };
    Ok((rest != CREATED).then_some(rest))
}

/// `doc` without `mcp.<key>`, and without `mcp` too when that emptied it and `drop_empty`.
fn without(doc: &Value, key: &str, drop_empty: bool) -> Value {
    let mut doc = doc.clone();
    if let Some(Value::Object(mcp)) = doc.get_mut("mcp") {
        mcp.remove(key);
        if mcp.is_empty() && drop_empty {
            doc.as_object_mut().expect("an object").remove("mcp");
        }
    }
    doc
}

/// `"name": value` as a member right after an object's `{` at `depth`: followed by a comma when
/// the object had members, else closing the line before its `}`.
fn member(unit: &str, depth: usize, name: &str, value: &Value, empty: bool) -> String {
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(unit.as_bytes());
    serde::Serialize::serialize(value, &mut serde_json::Serializer::with_formatter(&mut out, formatter)).expect("JSON values serialize");
    let indent = unit.repeat(depth);
    let value = String::from_utf8(out).expect("JSON is UTF-8").replace('\n', &format!("\n{indent}"));
    let name = Value::String(name.to_string());
    if empty {
        format!("\n{indent}{name}: {value}\n{}", unit.repeat(depth - 1))
    } else {
        format!("\n{indent}{name}: {value},")
    }
}

/// Where the top-level object opens.
fn object_start(text: &str) -> Result<usize> {
    let at = text.len() - text.trim_start().len();
    if text.as_bytes().get(at) != Some(&b'{') {
        bail!("not a JSON object");
    }
    Ok(at)
}

/// The file's indentation step: the leading whitespace of its first indented line, else two spaces.
fn indent_unit(text: &str) -> String {
    text.lines().skip(1).map(|l| &l[..l.len() - l.trim_start().len()]).find(|w| !w.is_empty()).unwrap_or("  ").to_string()
}

/// Whether the object opening at `open` has no members.
fn is_empty(text: &str, open: usize) -> bool {
    text[open + 1..].trim_start().starts_with('}')
}

/// Where the value of `key` starts in the object opening at `open` (`text` is valid JSON).
fn value_start(text: &str, open: usize, key: &str) -> Option<usize> {
    let b = text.as_bytes();
    let mut i = open + 1;
    loop {
        i = skip_ws(b, i);
        match b.get(i)? {
            b'}' => return None,
            b',' => {
                i += 1;
                continue;
            }
            _ => {}
        }
        let end = string_end(b, i)?;
        let name: String = serde_json::from_str(&text[i..end]).ok()?;
        i = skip_ws(b, end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        i = skip_ws(b, i + 1);
        if name == key {
            return Some(i);
        }
        i = value_end(b, i)?;
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while b.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

/// The end of the string opening at `i`.
fn string_end(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    while j < b.len() {
        match b[j] {
            b'\\' => j += 2,
            b'"' => return Some(j + 1),
            _ => j += 1,
        }
    }
    None
}

/// The end of the value starting at `i`.
fn value_end(b: &[u8], i: usize) -> Option<usize> {
    match b.get(i)? {
        b'"' => string_end(b, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            while j < b.len() {
                match b[j] {
                    b'"' => {
                        j = string_end(b, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            None
        }
        _ => Some(i + b[i..].iter().position(|c| matches!(c, b',' | b'}' | b']') || c.is_ascii_whitespace()).unwrap_or(b.len() - i)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> Value {
        json!({"type": "local", "command": ["/bin/cairn", "serve", "--expose", "recall"], "enabled": true})
    }

    fn round_trip(text: &str) -> String {
        let added = insert(text, "cairn", &entry()).unwrap();
        let doc: Value = serde_json::from_str(&added).unwrap_or_else(|e| panic!("{e}:\n{added}"));
        assert_eq!(doc["mcp"]["cairn"], entry(), "{added}");
        assert_eq!(remove(&added, "cairn").unwrap().as_deref(), Some(text), "{added}");
        added
    }

    #[test]
    fn insert_then_remove_gives_the_bytes_back() {
        let added = round_trip("{\n  \"model\": \"mock/m\",\n  \"provider\": {}\n}\n");
        assert!(added.starts_with("{\n  \"mcp\": {\n    \"cairn\": {\n      \"type\": \"local\",\n"), "{added}");
        // Tabs, an existing `mcp` with a server, no final newline.
        let added = round_trip("{\n\t\"mcp\": {\n\t\t\"other\": {\"type\": \"remote\", \"url\": \"https://x\"}\n\t},\n\t\"a\": [1, {\"mcp\": 2}]\n}");
        assert!(added.contains("\n\t\t\"cairn\": {\n\t\t\t\"type\""), "{added}");
        round_trip("{\"mcp\":{},\"x\":\"}\\\"{\"}");
        round_trip("{}");
        round_trip("  {\"a\": {\"mcp\": {}}}\n");
    }

    #[test]
    fn created_config_is_deleted_again() {
        let text = created("cairn", &entry());
        let doc: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(doc["$schema"], "https://opencode.ai/config.json");
        assert_eq!(remove(&text, "cairn").unwrap(), None);
    }

    #[test]
    fn edited_around_the_entry_is_rewritten_without_it() {
        let added = insert("{\n  \"model\": \"m\"\n}\n", "cairn", &entry()).unwrap();
        let edited = added.replace("\"enabled\": true", "\"enabled\":true");
        assert_eq!(remove(&edited, "cairn").unwrap().as_deref(), Some("{\n  \"model\": \"m\"\n}\n"));
        let other = added.replace("\"model\": \"m\"", "\"model\": \"m\",\n  \"mine\": 1");
        let rest = remove(&other, "cairn").unwrap().unwrap();
        assert_eq!(serde_json::from_str::<Value>(&rest).unwrap(), json!({"model": "m", "mine": 1}));
    }

    #[test]
    fn not_an_object_is_refused() {
        assert!(insert("[1]", "cairn", &entry()).is_err());
        assert!(insert("{\"mcp\": 3}", "cairn", &entry()).is_err());
        let e = parse("{\n  // comment\n}", Path::new("opencode.json")).unwrap_err().to_string();
        assert!(e.starts_with("opencode.json:2:"), "{e}");
    }
}
