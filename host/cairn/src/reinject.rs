//! What Cairn adds back after an agent compacted by itself must be only what the agent lost.
//! Agents keep part of the history word for word (Codex's compacted history keeps the
//! operator's messages, Gemini CLI keeps the newest part after its snapshot) and answer
//! requests before they compact: adding those again repeats the operator to the model, and a
//! "next action" naming a request already answered sends the model back to done work. These
//! are the two tests the re-injection applies to each item of the record before adding it.

use crate::transcript::{Entry, Origin, Part, Role};

/// Lowercase, whitespace collapsed: agents re-wrap and re-indent what they keep.
pub fn normalized(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

/// Below this many characters, an item is held only by an entry that is exactly it: a short
/// message ("yes", "go on") is inside almost any text and would always look kept.
const MIN_CONTAINED_CHARS: usize = 24;

/// The text an agent's compacted context still holds, to tell what it kept verbatim.
pub struct Retained {
    /// Each entry's text, normalized.
    texts: Vec<String>,
}

impl Retained {
    /// `entries`: the context as the agent holds it after its compaction (its summary, what it
    /// kept, what came since).
    pub fn of(entries: &[Entry]) -> Self {
        Retained { texts: entries.iter().map(|e| normalized(&e.model_text())).filter(|t| !t.is_empty()).collect() }
    }

    /// Whether the context still holds `item` word for word (whitespace and case aside): an
    /// entry that is the item, or, for an item long enough to be unmistakable, one that holds it.
    pub fn holds(&self, item: &str) -> bool {
        let item = normalized(item);
        if item.is_empty() {
            return false;
        }
        let contained = item.chars().count() >= MIN_CONTAINED_CHARS;
        self.texts.iter().any(|t| *t == item || contained && t.contains(&item))
    }
}

/// Whether the agent answered, in `history`, the operator's request `request` names (the
/// record's next action: a request, or its first sentence): the last operator message holding
/// it is followed, before the operator speaks again, by an agent reply that ends the turn (it
/// says something and leaves no tool call to run). A request the agent is still working on
/// (its last response calls tools) or never reached is not answered.
pub fn answered(history: &[Entry], request: &str) -> bool {
    // A long request is named by its head, clipped with an ellipsis the message does not hold.
    let request = normalized(request.trim_end().trim_end_matches('…').trim_end_matches("..."));
    if request.is_empty() {
        return false;
    }
    let operator = |e: &Entry| e.role == Role::User && e.origin == Origin::Operator;
    let Some(at) = history.iter().rposition(|e| operator(e) && normalized(&e.model_text()).contains(&request)) else { return false };
    let turn = &history[at + 1..];
    let turn = &turn[..turn.iter().position(operator).unwrap_or(turn.len())];
    turn.iter()
        .rev()
        .find(|e| e.role == Role::Assistant)
        .is_some_and(|reply| reply.tool_call_ids().next().is_none() && reply.parts.iter().any(|p| matches!(p, Part::Text { text } if !text.trim().is_empty())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn operator(id: &str, text: &str) -> Entry {
        Entry::text(id, Role::User, Origin::Operator, text)
    }
    fn reply(id: &str, text: &str) -> Entry {
        Entry::text(id, Role::Assistant, Origin::Agent, text)
    }
    fn calling(id: &str) -> Entry {
        let mut e = reply(id, "Running the tests.");
        e.parts.push(Part::ToolCall { id: "c1".into(), name: "exec_command".into(), args: "{}".into() });
        e
    }
    fn result(id: &str) -> Entry {
        let mut e = Entry::text(id, Role::Tool, Origin::Tool, "");
        e.parts = vec![Part::ToolResult { call_id: "c1".into(), content: "2 passed".into(), is_error: false, elided: None }].into();
        e
    }

    #[test]
    fn what_the_agent_kept_word_for_word_is_held_and_nothing_else() {
        let kept = Retained::of(&[
            Entry::text("s", Role::User, Origin::Summary, "The notes were read; the build runs with make."),
            operator("u1", "Never edit files under vendor/;\n  the deploy key is KEY-7f3a9c."),
            reply("a1", "yes, understood"),
        ]);
        // Re-wrapped, re-cased: still the operator's message, kept.
        assert!(kept.holds("never edit files under vendor/; the deploy key is KEY-7f3a9c."));
        // A sentence of it (a constraint the record extracted) is held inside it.
        assert!(kept.holds("Never edit files under vendor/"));
        // What the agent dropped is not.
        assert!(!kept.holds("Also check module_3 of the spotter build and report its size."));
        // A short message is held only by an entry that is exactly it, not by any text holding it.
        assert!(!kept.holds("yes"));
        assert!(kept.holds("Yes, understood"));
        assert!(!kept.holds("  "));
    }

    #[test]
    fn a_request_is_answered_once_the_agents_reply_ends_its_turn() {
        let request = "Run the tests in crates/core and report.";
        let next = "Run the tests in crates/core and report.";
        // Answered: tool calls, results, then a reply that calls nothing.
        let done = [operator("u1", request), calling("a1"), result("t1"), reply("a2", "All 2 tests pass.")];
        assert!(answered(&done, next));
        // Still working: the last response calls a tool.
        assert!(!answered(&done[..3], next));
        // Not reached yet: no reply at all.
        assert!(!answered(&done[..1], next));
        // A reply to the next request does not answer this one.
        let later = [operator("u1", "Summarize the notes."), reply("a1", "Done."), operator("u2", request), calling("a2")];
        assert!(!answered(&later, next));
        // The first sentence of a request names it; a request never made is never answered.
        let two = [operator("u1", "Fix the parser. Then run the tests."), reply("a1", "Fixed and tested.")];
        assert!(answered(&two, "Fix the parser."));
        assert!(!answered(&two, "Deploy to staging."));
        // A long request's head, clipped as the record clips it, names it too.
        let long = format!("Read these build logs: {}", "module ok; ".repeat(100));
        let clipped = format!("{}…", long.chars().take(300).collect::<String>());
        assert!(answered(&[operator("u1", &long), reply("a1", "Noted.")], &clipped));
        assert!(!answered(&two, ""));
    }
}
