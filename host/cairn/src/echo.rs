//! Caller input, and text from a transcript, fit to show. Every error and log line that
//! echoes what a caller sent (an id, an archive id, a key, an artifact URI, search text) goes
//! through [`input`]: an error cannot be made into a flood of a log or a terminal by sending a
//! long string, and what comes back still names the start of it. Human output of a record's
//! text goes through [`terminal`], so a transcript cannot drive the operator's terminal.

use std::borrow::Cow;
use std::fmt;

/// How many characters of caller input an error or log line repeats.
pub const INPUT_CHARS: usize = 80;

/// `text` as an error echoes it: quoted and escaped like `{:?}`, its first [`INPUT_CHARS`]
/// characters only, with how long it was when cut (`"a-aaaa…" (100000 bytes)`).
pub fn input(text: &str) -> Input<'_> {
    Input(text)
}

/// See [`input`].
pub struct Input<'a>(&'a str);

impl fmt::Display for Input<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = cairn_rules::clip_chars(self.0, INPUT_CHARS);
        if shown.len() == self.0.len() {
            write!(f, "{shown:?}")
        } else {
            write!(f, "\"{}…\" ({} bytes)", shown.escape_debug(), self.0.len())
        }
    }
}

impl fmt::Debug for Input<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Each item of `items` as [`input`] shows it, at most `max` of them, joined by `, `.
pub fn inputs<S: AsRef<str>>(items: &[S], max: usize) -> String {
    let mut shown: Vec<String> = items.iter().take(max).map(|item| input(item.as_ref()).to_string()).collect();
    if items.len() > max {
        shown.push(format!("and {} more", items.len() - max));
    }
    shown.join(", ")
}

/// `text` safe to print on a terminal: every control character but newline and tab (ESC, the
/// C1 controls, carriage return, backspace, …) written as its escape (`\u{1b}`), so a transcript
/// holding `ESC [2J` shows those characters instead of clearing the screen.
pub fn terminal(text: &str) -> Cow<'_, str> {
    let unsafe_char = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if unsafe_char(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_input_is_cut_and_says_so() {
        let long = format!("a-{}", "f".repeat(100_000));
        let shown = input(&long).to_string();
        assert!(shown.len() < 200, "{} bytes", shown.len());
        assert!(shown.starts_with("\"a-fff") && shown.ends_with("(100002 bytes)"), "{shown}");
        assert_eq!(input("a-12").to_string(), "\"a-12\"");
        assert_eq!(input("x\u{1b}y").to_string(), "\"x\\u{1b}y\"");
        assert_eq!(inputs(&["a", "b", "c"], 2), "\"a\", \"b\", and 1 more");
    }

    #[test]
    fn terminal_text_loses_its_control_characters() {
        assert_eq!(terminal("clear\u{1b}[2J\r\u{9b}x\nnext\tcol"), "clear\\u{1b}[2J\\r\\u{9b}x\nnext\tcol");
        assert!(matches!(terminal("plain ünïcode\n"), Cow::Borrowed(_)));
    }
}
