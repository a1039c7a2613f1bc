//! `{{name}}`: clips tool outputs longer than `max_chars` to their first and last lines, with a
//! placeholder between that names where the whole output was stored. Tool calls are never
//! touched, so every call keeps its result, and only the entries the host offers (between the
//! protected head and the verbatim tail, not pinned) change.

use cairn_sdk::types::*;
use cairn_sdk::{count_tokens, export_strategy, log_info, parse_config, placeholder_text, range_of, recount, replaceable_range, store_artifact, Strategy};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Config {
    /// Outputs up to this many chars stay whole.
    max_chars: usize,
    /// Chars kept from the start and from the end of a clipped output.
    keep_chars: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config { max_chars: 4_000, keep_chars: 600 }
    }
}

struct Plugin;

impl Strategy for Plugin {
    fn compact(request: CompactRequest) -> Result<Outcome, StrategyError> {
        let config: Config = parse_config(&request.config)?;
        let mut changed = Vec::new();
        for i in replaceable_range(&request)? {
            let mut entry = request.entries[i].clone();
            if entry.pinned {
                continue;
            }
            let mut clipped = false;
            for part in entry.parts.iter_mut() {
                if let Part::ToolResult(result) = part {
                    if result.elided.is_some() {
                        continue;
                    }
                    if let Some((head, tail)) = clip(&result.content, &config) {
                        let tokens = count_tokens(&result.content);
                        let uri = store_artifact(&result.content)?;
                        result.content = format!("{head}\n{}\n{tail}", placeholder_text("clipped", tokens, &uri));
                        result.elided = Some(uri);
                        clipped = true;
                    }
                }
            }
            if clipped {
                recount(&mut entry);
                changed.push((i, entry));
            }
        }
        let (Some(&(first, _)), Some(&(last, _))) = (changed.first(), changed.last()) else {
            return Err(StrategyError::NothingToDo(format!("no tool output longer than {} chars", config.max_chars)));
        };
        log_info(&format!("clipped {} tool outputs", changed.len()));
        // The outcome replaces one contiguous range: changed entries, and the rest as they were.
        let mut changed = changed.into_iter().peekable();
        let replacement = (first..=last)
            .map(|i| changed.next_if(|(j, _)| *j == i).map(|(_, e)| e).unwrap_or_else(|| request.entries[i].clone()))
            .collect();
        Ok(Outcome::new(range_of(&request.entries, first, last), replacement))
    }
}

/// The head and tail of `text` when it is longer than `max_chars`.
fn clip<'a>(text: &'a str, config: &Config) -> Option<(&'a str, &'a str)> {
    let chars = text.chars().count();
    if chars <= config.max_chars || chars <= 2 * config.keep_chars {
        return None;
    }
    let head_end = text.char_indices().nth(config.keep_chars).map_or(text.len(), |(at, _)| at);
    let tail_start = text.char_indices().nth(chars - config.keep_chars).map_or(text.len(), |(at, _)| at);
    Some((&text[..head_end], &text[tail_start..]))
}

export_strategy!(Plugin);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_outputs_stay_whole() {
        assert_eq!(clip("ok", &Config::default()), None);
    }

    #[test]
    fn long_outputs_keep_their_head_and_tail() {
        let text = format!("{}{}{}", "a".repeat(700), "b".repeat(5_000), "c".repeat(700));
        let (head, tail) = clip(&text, &Config::default()).expect("clipped");
        assert_eq!(head, "a".repeat(600));
        assert_eq!(tail, "c".repeat(600));
    }
}
