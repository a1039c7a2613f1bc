//! The host-native clip: a tool output too large for the context is cut to its head and tail,
//! with an `artifact://` to the original, byte for byte. No entry is then too big to touch: a
//! 3 MB log in the newest turn is clipped like an old one. The call stays, and so does
//! everything that is not a tool output: the system prompt, pinned entries and the operator's
//! own words are never clipped. It cannot fail or break pairing, so it runs where the
//! strategies could not reach (the verbatim tail) and inside the last resort.

use super::{Step, StepAnswer, StepError, StepInput, StrategyOutput};
use crate::transcript::{Artifact, Entry, Part, Role};

pub const CLIP: &str = "clip";

/// Chars kept of a clipped output per token of its limit: under any tokenizer's chars per
/// token for text (about 4), so a clipped output stays within its limit.
const CHARS_PER_TOKEN: usize = 2;

/// Clips every tool output in the step's window larger than `limit` tokens, but those in
/// `leave` (indices of the step's entries: what the policy's strategies may reach themselves).
pub struct Clip {
    pub limit: u64,
    pub leave: std::ops::Range<usize>,
}

impl Step for Clip {
    fn name(&self) -> String {
        format!("{CLIP}@{}", env!("CARGO_PKG_VERSION"))
    }

    fn run(&self, input: &StepInput<'_>) -> StepAnswer {
        clip(input, self.limit, &self.leave)
    }

    fn trusted(&self) -> bool {
        true
    }
}

/// Whether `entry` is a tool output over `limit` tokens that may be clipped.
pub fn oversized(entry: &Entry, limit: u64) -> bool {
    entry.role == Role::Tool && !entry.pinned && entry.tokens as u64 > limit && entry.parts.iter().any(|p| matches!(p, Part::ToolResult { elided: None, .. }))
}

/// No output is clipped below this many tokens.
pub const MIN_TOKENS: u64 = 1_000;

pub(super) fn clip(input: &StepInput<'_>, limit: u64, leave: &std::ops::Range<usize>) -> StepAnswer {
    let entries = input.entries;
    let (from, to) = (input.window.protected_head, input.window.tail_start);
    let over: Vec<usize> = (from..to).filter(|&i| !leave.contains(&i) && oversized(&entries[i], limit)).collect();
    let (Some(&first), Some(&last)) = (over.first(), over.last()) else {
        return StepAnswer::new(Err(StepError::NoProgress(format!("no tool output is over {limit} tokens"))));
    };
    let keep_chars = (limit as usize).saturating_mul(CHARS_PER_TOKEN).max(200);
    let mut artifacts = Vec::new();
    let mut replacement = entries[first..=last].to_vec();
    for &i in &over {
        let original = &entries[i].parts;
        let entry = &mut replacement[i - first];
        for (n, part) in original.iter().enumerate() {
            let Part::ToolResult { content, elided: None, .. } = part else { continue };
            if content.chars().count() <= keep_chars {
                continue;
            }
            let uri = format!("artifact://{}/{}", input.archive_id, input.artifacts_before + artifacts.len() + 1);
            let clipped = head_and_tail(content, keep_chars, entry.tokens, &uri);
            // The artifact is the original's text, shared; the entry gets the clip.
            artifacts.extend(Artifact::shared(original, n));
            if let Part::ToolResult { content, elided, .. } = &mut entry.parts[n] {
                (*content, *elided) = (clipped, Some(uri));
            }
        }
    }
    if artifacts.is_empty() {
        return StepAnswer::new(Err(StepError::NoProgress(format!("no tool output over {limit} tokens has text to clip"))));
    }
    let output = StrategyOutput { first: entries[first].id.clone(), last: entries[last].id.clone(), replacement, checkpoint: None, seed: None, retrospective: None };
    StepAnswer { output: Ok(output), artifacts, refused: Vec::new(), model: None }
}

/// The first and last `keep / 2` chars of `text` around a line that says what was cut and
/// where the whole is.
fn head_and_tail(text: &str, keep: usize, tokens: u32, uri: &str) -> String {
    let chars = text.chars().count();
    let half = keep / 2;
    let head_end = text.char_indices().nth(half).map_or(text.len(), |(at, _)| at);
    let tail_start = text.char_indices().nth(chars - half).map_or(text.len(), |(at, _)| at);
    format!(
        "{}\n[… Cairn clipped {} of {chars} chars (~{tokens} tokens in all) from the middle of this output — the whole output: {uri} …]\n{}",
        &text[..head_end],
        chars - 2 * half,
        &text[tail_start..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain::{Purpose, Window};
    use crate::tokenizer::Tokenizer;
    use crate::transcript::Origin;

    fn input<'a>(entries: &'a [Entry], window: &'a Window) -> StepInput<'a> {
        StepInput {
            purpose: Purpose::Compact,
            entries,
            window,
            archive_id: "a-0123456789abcdef",
            artifacts_before: 2,
            archive: None,
            preserve: None,
            resume: None,
            previous_checkpoint: None,
            previous_checkpoint_through: None,
            deadline: std::time::Instant::now(),
            reject_unverified: false,
            budget: None,
        }
    }

    fn call(id: &str) -> Entry {
        Entry { parts: vec![Part::ToolCall { id: id.into(), name: "bash".into(), args: "{}".into() }].into(), ..Entry::text(format!("c-{id}"), Role::Assistant, Origin::Agent, "") }
    }

    fn result(id: &str, content: String) -> Entry {
        Entry { parts: vec![Part::ToolResult { call_id: id.into(), content, is_error: false, elided: None }].into(), ..Entry::text(format!("r-{id}"), Role::Tool, Origin::Tool, "") }
    }

    #[test]
    fn only_big_tool_outputs_are_clipped_and_the_original_is_the_artifact() {
        let tokenizer = Tokenizer::default();
        let log: String = (0..20_000).map(|i| format!("line {i}: ok\n")).collect();
        let mut entries = vec![
            Entry::text("sys", Role::System, Origin::Harness, "You are an agent."),
            Entry::text("u1", Role::User, Origin::Operator, "x ".repeat(5_000)),
            call("t1"),
            result("t1", log.clone()),
            call("t2"),
            result("t2", "short".into()),
        ];
        entries.iter_mut().for_each(|e| tokenizer.count_entry(e));
        let window = Window { protected_head: 1, tail_start: entries.len(), token_target: 0 };
        let answer = clip(&input(&entries, &window), 1_000, &(0..0));
        let output = answer.output.unwrap();
        assert_eq!((output.first.as_str(), output.last.as_str()), ("r-t1", "r-t1"), "the operator's long message is not touched");
        assert_eq!(answer.artifacts, std::slice::from_ref(&log), "byte for byte");
        assert_eq!(answer.artifacts[0].as_ptr(), entries[3].parts[0].text().as_ptr(), "the original's own text, not a copy");
        let Part::ToolResult { content, elided, .. } = &output.replacement[0].parts[0] else { panic!() };
        assert_eq!(elided.as_deref(), Some("artifact://a-0123456789abcdef/3"));
        assert!(content.starts_with("line 0: ok") && content.ends_with("line 19999: ok\n"), "head and tail");
        assert!(content.contains("artifact://a-0123456789abcdef/3"));
        let applied = crate::chain::apply(&entries, &window, output, "a-0123456789abcdef", &tokenizer).unwrap();
        assert!(applied.context[3].tokens < 1_100, "{} tokens", applied.context[3].tokens);
        assert!(crate::chain::pairing_problems(&applied.context).is_empty());
        // Nothing over the limit: no progress, nothing invented.
        assert!(clip(&input(&applied.context, &window), 1_000, &(0..0)).output.is_err());
        // What the strategies can reach is left to them.
        assert!(clip(&input(&entries, &window), 1_000, &(1..5)).output.is_err());
    }
}
