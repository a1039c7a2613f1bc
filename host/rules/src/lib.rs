//! The rules Cairn's host and its plugins must agree on, written once. The host checks every
//! plugin outcome with these functions and the SDK gives plugins the same ones, so a plugin
//! that follows the SDK never has an outcome refused for a rule it could not see.
//!
//! The functions work on any entry type through [`RuleEntry`]: the host's domain `Entry` and
//! the SDK's generated WIT `Entry` both implement it.

pub mod intent;
pub mod statements;

/// How many operator messages a handover seed quotes…
pub const SEED_MESSAGES: usize = 3;
/// …and how many characters of each.
pub const SEED_MESSAGE_CHARS: usize = 2_000;

/// One part of an entry, borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartRef<'a> {
    Text(&'a str),
    Thinking(&'a str),
    ToolCall { id: &'a str, name: &'a str, args: &'a str },
    ToolResult { call_id: &'a str, content: &'a str },
    Image(&'a str),
    Placeholder(&'a str),
}

/// An entry as the rules see it: its parts, in order.
pub trait RuleEntry {
    fn parts(&self) -> impl Iterator<Item = PartRef<'_>>;
}

/// The text the model reads in an entry; what token counts are taken of.
pub fn entry_text(entry: &impl RuleEntry) -> String {
    let mut out = String::new();
    entry_text_pieces(entry, |piece| out.push_str(piece));
    out
}

/// [`entry_text`] piece by piece, without building it (to hash it, say).
pub fn entry_text_pieces<'e>(entry: &'e impl RuleEntry, mut piece: impl FnMut(&'e str)) {
    for part in entry.parts() {
        match part {
            PartRef::Text(text) | PartRef::Thinking(text) | PartRef::Image(text) | PartRef::Placeholder(text) => piece(text),
            PartRef::ToolCall { name, args, .. } => {
                piece(name);
                piece(" ");
                piece(args);
            }
            PartRef::ToolResult { content, .. } => piece(content),
        }
        piece("\n");
    }
}

/// `cuts[i]` is true when history may be cut just before entry `i` without separating a tool
/// call from its result (no call made before `i` is answered at or after `i`).
/// `cuts[entries.len()]` (the end) is always true.
pub fn safe_cuts<E: RuleEntry>(entries: &[E]) -> Vec<bool> {
    let mut answered_at = std::collections::HashMap::new();
    for (i, entry) in entries.iter().enumerate() {
        for part in entry.parts() {
            if let PartRef::ToolResult { call_id, .. } = part {
                answered_at.entry(call_id).or_insert(i);
            }
        }
    }
    let mut cuts = vec![true; entries.len() + 1];
    // One past the latest entry answering a call made so far.
    let mut reach = 0;
    for (i, entry) in entries.iter().enumerate() {
        cuts[i] = reach <= i;
        for part in entry.parts() {
            if let PartRef::ToolCall { id, .. } = part {
                if let Some(&answer) = answered_at.get(id) {
                    reach = reach.max(answer + 1);
                }
            }
        }
    }
    cuts
}

/// The text Cairn puts where content was set aside, e.g.
/// `[elided ~12,345 tokens — recover: artifact://a-…/3]`. The URI itself travels as data
/// (`tool-result.elided`, `placeholder.uri`); this text is for the model.
pub fn placeholder_text(what: &str, tokens: u32, uri: &str) -> String {
    format!("[{what} ~{} tokens — recover: {uri}]", thousands(tokens as u64))
}

/// `12345` → `12,345`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The first `max` chars of `text` (chars, not bytes).
pub fn clip_chars(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct E(Vec<PartRef<'static>>);

    impl RuleEntry for E {
        fn parts(&self) -> impl Iterator<Item = PartRef<'_>> {
            self.0.iter().copied()
        }
    }

    fn call(id: &'static str) -> E {
        E(vec![PartRef::ToolCall { id, name: "bash", args: "{}" }])
    }

    fn result(id: &'static str) -> E {
        E(vec![PartRef::ToolResult { call_id: id, content: "ok" }])
    }

    fn text() -> E {
        E(vec![PartRef::Text("hi")])
    }

    #[test]
    fn no_cut_falls_between_a_call_and_its_result() {
        let entries = [text(), call("a"), text(), result("a"), text()];
        assert_eq!(safe_cuts(&entries), vec![true, true, false, false, true, true]);
    }

    #[test]
    fn an_unanswered_call_does_not_block_cuts() {
        let entries = [call("a"), text()];
        assert_eq!(safe_cuts(&entries), vec![true, true, true]);
    }

    #[test]
    fn entry_text_reads_every_part() {
        let entry = E(vec![PartRef::Text("a"), PartRef::ToolCall { id: "1", name: "bash", args: "{\"c\":1}" }, PartRef::ToolResult { call_id: "1", content: "out" }]);
        assert_eq!(entry_text(&entry), "a\nbash {\"c\":1}\nout\n");
    }

    #[test]
    fn placeholders_group_thousands() {
        assert_eq!(placeholder_text("elided", 1_234_567, "artifact://a-1/2"), "[elided ~1,234,567 tokens — recover: artifact://a-1/2]");
        assert_eq!(thousands(999), "999");
        assert_eq!(clip_chars("ünïcode", 3), "ünï");
    }
}
