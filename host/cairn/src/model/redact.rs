//! Keeps the API key, and endpoint-supplied bulk, out of every message a provider hands on.
//!
//! The rule: a message loses every stretch that matches, ignoring case, the whole key or any
//! run of at least [`MIN_WINDOW`] consecutive characters of it (an endpoint that echoes the
//! key upper-cased or cut short must not get it through), and endpoint-supplied text is
//! clipped to [`MAX_ENDPOINT_BYTES`] before it goes into a message.

use std::collections::HashSet;

/// The shortest run of the key's characters that counts as key material. Shorter keys are
/// matched whole.
pub const MIN_WINDOW: usize = 8;

/// The most bytes of endpoint-supplied text an error message carries.
pub const MAX_ENDPOINT_BYTES: usize = 300;

/// What a redacted stretch becomes.
const MASK: &str = "***";

/// Finds the key in text, ignoring case, whole or in runs of `MIN_WINDOW` characters or more.
pub struct Redactor {
    /// Every `window`-character run of `key`.
    windows: HashSet<Vec<char>>,
    window: usize,
}

impl Redactor {
    pub fn new(key: &str) -> Self {
        let key: Vec<char> = key.chars().map(fold).collect();
        let window = MIN_WINDOW.min(key.len());
        let windows = if window == 0 { HashSet::new() } else { key.windows(window).map(<[char]>::to_vec).collect() };
        Redactor { windows, window }
    }

    /// `text` with every stretch of key material replaced by `***`.
    pub fn redact(&self, text: &str) -> String {
        if self.window == 0 || text.is_empty() {
            return text.to_string();
        }
        let chars: Vec<char> = text.chars().collect();
        let folded: Vec<char> = chars.iter().copied().map(fold).collect();
        let mut hidden = vec![false; chars.len()];
        let mut any = false;
        // A character is key material exactly when some `window`-character run around it
        // matches the key: a longer match is a chain of such runs.
        for start in 0..folded.len().saturating_sub(self.window - 1) {
            if self.windows.contains(&folded[start..start + self.window]) {
                hidden[start..start + self.window].iter_mut().for_each(|h| *h = true);
                any = true;
            }
        }
        if !any {
            return text.to_string();
        }
        let mut out = String::with_capacity(text.len());
        for (i, c) in chars.iter().enumerate() {
            if !hidden[i] {
                out.push(*c);
            } else if i == 0 || !hidden[i - 1] {
                out.push_str(MASK);
            }
        }
        out
    }
}

/// A character compared without case. API keys are ASCII; other characters fold to the first
/// character of their lower case.
fn fold(c: char) -> char {
    if c.is_ascii() {
        c.to_ascii_lowercase()
    } else {
        c.to_lowercase().next().unwrap_or(c)
    }
}

/// At most `max` bytes of `text` (cut at a character boundary), marked when cut.
pub fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes in all)", &text[..end], text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-ant-Secret-0123456789abcdef";

    #[test]
    fn the_key_goes_whole_upper_cased_and_cut_short() {
        let r = Redactor::new(KEY);
        assert_eq!(r.redact(&format!("bad key {KEY}!")), "bad key ***!");
        assert_eq!(r.redact(&format!("bad key {}!", KEY.to_uppercase())), "bad key ***!");
        assert_eq!(r.redact(&format!("bad key {}...", &KEY[..12])), "bad key ***...");
        assert_eq!(r.redact(&format!("tail {} end", &KEY[KEY.len() - 9..])), "tail *** end");
        assert_eq!(r.redact(&format!("mid {} end", &KEY[5..13].to_uppercase())), "mid *** end");
        assert_eq!(r.redact(&format!("{KEY}{KEY}")), "***");
        assert_eq!(r.redact(&format!("a{}b{}c", &KEY[..8], &KEY[3..20])), "a***b***c");
    }

    #[test]
    fn short_runs_and_unrelated_text_stay() {
        let r = Redactor::new(KEY);
        assert_eq!(r.redact("sk-ant-S is seven... no, eight"), "*** is seven... no, eight");
        assert_eq!(r.redact("sk-ant- stays"), "sk-ant- stays");
        assert_eq!(r.redact("invalid x-api-key — ünïcode ok"), "invalid x-api-key — ünïcode ok");
        assert_eq!(Redactor::new("").redact("anything"), "anything");
        assert_eq!(Redactor::new("abc").redact("xABCx abx"), "x***x abx");
    }

    #[test]
    fn clipping_is_bounded_and_keeps_characters_whole() {
        assert_eq!(clip("short", 10), "short");
        let long = "é".repeat(1000);
        let clipped = clip(&long, 301);
        assert!(clipped.len() < 350, "{}", clipped.len());
        assert!(clipped.starts_with(&"é".repeat(150)) && clipped.ends_with("(2000 bytes in all)"));
    }
}
