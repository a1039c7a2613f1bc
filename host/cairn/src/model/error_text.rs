//! Figures read out of a provider's error message ("prompt is too long: 210000 tokens >
//! 200000 maximum"): each provider's reader (`anthropic`, `openai`) uses them, below the
//! HTTP client that calls those readers.

/// The number written right after `marker` in `text` ("… is 8192 tokens" → 8192).
pub(super) fn number_after(text: &str, marker: &str) -> Option<u32> {
    let start = text.find(marker)? + marker.len();
    let digits: String = text[start..].trim_start().chars().take_while(|c| c.is_ascii_digit() || *c == ',').filter(|c| *c != ',').collect();
    digits.parse().ok()
}
