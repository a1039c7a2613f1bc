//! Operator intent in text: which sentences of what the operator wrote are rules ("never push
//! to main", "do not change the lexer"). The SDK's checkpoint quotes them; the host's last
//! resort carries them past the history it drops. And the root objective every checkpoint
//! anchors.

/// The root objective (the operator's first request) is quoted up to this many chars.
pub const ROOT_OBJECTIVE_CHARS: usize = 2_000;

/// The root objective as a checkpoint anchors it: the operator's first request, trimmed and
/// clipped at [`ROOT_OBJECTIVE_CHARS`] (with "…"), so host and plugins quote it alike.
pub fn root_objective(first_request: &str) -> String {
    let text = first_request.trim();
    if text.chars().count() <= ROOT_OBJECTIVE_CHARS {
        text.to_string()
    } else {
        format!("{}…", crate::clip_chars(text, ROOT_OBJECTIVE_CHARS - 1).trim_end())
    }
}

/// The first line of every checkpoint Cairn writes into a context. Host and plugins both know
/// it: whatever format carried the context back, an entry starting with it is Cairn's own
/// summary, never the operator's words.
pub const CHECKPOINT_TITLE: &str = "# Checkpoint (Cairn: earlier history, compacted)";

/// Whether `text` is a checkpoint Cairn wrote.
pub fn is_checkpoint_text(text: &str) -> bool {
    text.trim_start().starts_with(CHECKPOINT_TITLE)
}

/// The root objective a checkpoint text of Cairn's quotes, if it quotes one: its root objective
/// section's item, or the quote the host appended.
pub fn checkpoint_root_objective(text: &str) -> Option<String> {
    const SECTION: &str = "\n## Root objective (the operator's first request)\n- ";
    const APPENDED: &str = "Root objective (the operator's first request, verbatim):\n";
    if !is_checkpoint_text(text) {
        return None;
    }
    let quoted = if let Some(at) = text.find(SECTION) {
        let mut lines = text[at + SECTION.len()..].split('\n');
        let first = lines.next().unwrap_or("").to_string();
        lines.take_while(|l| l.starts_with("  ")).fold(first, |item, l| item + "\n" + &l[2..])
    } else {
        let at = text.find(APPENDED)?;
        text[at + APPENDED.len()..].split("\n\n").next().unwrap_or("").to_string()
    };
    Some(quoted.trim().to_string()).filter(|q| !q.is_empty())
}

/// Words that make an operator's sentence a rule.
pub const CONSTRAINT_MARKERS: &[&str] = &["don't", "dont", "do not", "never", "must not", "mustn't", "avoid", "avoiding", "without", "no longer", "stop", "stopping"];

/// The operator's rules in `message`, verbatim, in order.
pub fn constraint_sentences(message: &str) -> Vec<String> {
    sentences(&prose(message)).into_iter().filter(|s| is_constraint(s)).map(str::to_string).collect()
}

/// What the operator wrote themselves: without fenced blocks, quotes, tables and diff lines
/// they pasted.
pub fn prose(message: &str) -> String {
    let mut fenced = false;
    let mut out = String::new();
    for line in message.lines() {
        let t = line.trim_start();
        if t.starts_with("```") {
            fenced = !fenced;
        } else if !fenced && !t.starts_with(['>', '|', '+']) {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

pub fn is_constraint(sentence: &str) -> bool {
    if sentence.ends_with('?') {
        return false; // a question, not a rule
    }
    // "I don't understand …" is no rule.
    const NOT_RULES: &[&str] = &["think", "tink", "understand", "know", "see", "get", "remember", "believe", "recall"];
    let lower = sentence.to_lowercase().replace('’', "'");
    CONSTRAINT_MARKERS.iter().any(|m| {
        word_positions(&lower, m).any(|end| {
            let next = lower[end..].split(|c: char| !c.is_alphanumeric()).find(|w| !w.is_empty()).unwrap_or("");
            !(["don't", "dont", "do not"].contains(m) && NOT_RULES.contains(&next))
        })
    })
}

/// Sentences and lines: split at newlines and at `.`/`!`/`?` followed by whitespace.
pub fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let end = match c {
            '\n' => Some((i, i + 1)),
            '.' | '!' | '?' if chars.peek().is_none_or(|(_, n)| n.is_whitespace()) => Some((i + 1, i + 1)),
            _ => None,
        };
        if let Some((end, next)) = end {
            let s = text[start..end].trim();
            if !s.is_empty() {
                out.push(s);
            }
            start = next;
        }
    }
    let s = text[start..].trim();
    if !s.is_empty() {
        out.push(s);
    }
    out
}

/// Where `word` ends in `lower`, wherever it has no letter or digit on either side.
pub fn word_positions<'a>(lower: &'a str, word: &'a str) -> impl Iterator<Item = usize> + 'a {
    lower
        .match_indices(word)
        .map(move |(at, _)| (at, at + word.len()))
        .filter(move |&(at, end)| lower[..at].chars().next_back().is_none_or(|c| !c.is_alphanumeric()) && lower[end..].chars().next().is_none_or(|c| !c.is_alphanumeric()))
        .map(|(_, end)| end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_are_found_verbatim_and_pasted_text_and_questions_are_not() {
        let message = "Fix the parser. Never push to main! Don't you think it's odd?\nI don't understand the lexer.\n```\nnever mind this code\n```\n> do not quote me\nDo not change the lexer.";
        assert_eq!(constraint_sentences(message), ["Never push to main!", "Do not change the lexer."]);
    }
}
