//! `handover`: prepares a fresh session. It writes a retrospective of the session (by the model
//! when the policy grants it, else a deterministic one), a forward checkpoint (always by
//! deterministic extraction, so it is schema-valid), and the seed that starts the next session:
//! the checkpoint, the last operator messages marked as history (`SEED_MESSAGES`, three, at most
//! `SEED_MESSAGE_CHARS` chars each, as in the host's own seed), the archive id, and the
//! instruction to verify state before repeating any side effect.
//!
//! Mode: the model is asked once; `denied` (model not granted) means the deterministic
//! retrospective, any other model error makes the step `unavailable`.

use cairn_sdk::checkpoint::{self, CheckpointConfig};
use cairn_sdk::chunks::{model_context_window, model_or_fallback, Summarizer};
use cairn_sdk::prompt::{agent_notes, clean_reply, conversation_prompt_start, request_entries, section};
use cairn_sdk::types::*;
use cairn_sdk::{
    ask_model, clip_ellipsis, count_tokens, export_strategy, is_operator_message, log_info, message_text, parse_config, range_of, replaceable_range, summary_replacement, tail_chars, Strategy,
    SEED_MESSAGES, SEED_MESSAGE_CHARS,
};

/// Without a `## Checkpoint` section the seed takes this much of the retrospective's end.
const FALLBACK_CHARS: usize = 2000;
/// The deterministic retrospective lists at most this many requests (the latest).
const LISTED_REQUESTS: usize = 30;

const SYSTEM: &str = "You write the retrospective of a coding-agent session that is about to be handed over to a fresh session. Do not continue the conversation and do not answer questions in it. Output only the retrospective, in markdown.";

const INSTRUCTIONS: &str = "Write a retrospective of this session for the archive and for the agent that continues the work in a fresh session: what the operator asked, what was done, what worked and what did not (and why), and what is unfinished. End with a section headed exactly `## Checkpoint`: the state the next session needs — objective, constraints (verbatim), decisions, rejected approaches, what is done, what is pending, verification status, files modified, and the next action. Keep the checkpoint concise; use `###` headings inside it.";

struct Handover;

impl Strategy for Handover {
    fn compact(request: CompactRequest) -> Result<Outcome, StrategyError> {
        if request.purpose == RequestKind::Compact {
            return Err(StrategyError::NothingToDo("handover prepares a fresh session; it does not compact".into()));
        }
        let config: CheckpointConfig = parse_config(&request.config)?;
        let range = replaceable_range(&request)?;
        let entries = &request.entries;
        let previous = checkpoint::previous(request.previous_checkpoint.as_deref());
        let cp = checkpoint::update(previous.as_ref(), request.previous_checkpoint_through.as_deref(), entries, config.operator_budget_tokens);
        let rendered = checkpoint::render(&cp);
        // A history larger than the model's window goes in chunks: each chunk's retrospective is
        // updated with the next.
        let window = model_context_window(&request.config);
        let summarizer = Summarizer { system: SYSTEM, max_tokens: config.max_tokens, window, clamp_chars: config.clamp_chars };
        let prompt = |conversation: &str, earlier: Option<&str>| prompt(&request, conversation, earlier, &rendered);
        let run = summarizer.run(request_entries(&request), None, &prompt, &mut ask_model, &count_tokens);
        let (retrospective, checkpoint_text) = match model_or_fallback(run, "deterministic retrospective")? {
            Some(done) => {
                log_info(&format!("retrospective from the model in {} chunk(s){}", done.chunks, if done.retried { " (a too-long prompt was retried smaller)" } else { "" }));
                let reply = clean_reply(&done.reply).to_string();
                if reply.is_empty() {
                    return Err(StrategyError::Failed("the model's retrospective is empty".into()));
                }
                let section = checkpoint_section(&reply);
                (reply, section)
            }
            None => (plain_retrospective(entries, &rendered), rendered),
        };
        let seed = seed(&request.archive_id, &checkpoint_text, request.resume.as_deref(), entries);
        let mut outcome = Outcome::new(range_of(entries, *range.start(), *range.end()), summary_replacement(&entries[range], seed.clone()));
        outcome.checkpoint = Some(cp.to_json());
        outcome.seed = Some(seed);
        outcome.retrospective = Some(retrospective);
        Ok(outcome)
    }
}

/// The retrospective's prompt for `conversation` (everything after the protected head, or one
/// chunk of it); `previous` is the retrospective of the chunks before, to update.
fn prompt(request: &CompactRequest, conversation: &str, previous: Option<&str>, rendered: &str) -> String {
    let mut out = conversation_prompt_start(conversation);
    if let Some(previous) = previous {
        out.push_str(&format!(
            "The retrospective of the session up to this part of the conversation; update it with this part (keep what still holds, every constraint in particular):\n<previous-retrospective>\n{previous}\n</previous-retrospective>\n\n"
        ));
    }
    if !rendered.is_empty() {
        out.push_str(&format!("A mechanical extraction from the same conversation, to check your checkpoint against:\n<extraction>\n{rendered}\n</extraction>\n\n"));
    }
    out.push_str(&agent_notes(request));
    out.push_str(INSTRUCTIONS);
    out
}

/// The retrospective's `## Checkpoint` section, or its last 2,000 chars when it has none.
fn checkpoint_section(retrospective: &str) -> String {
    match section(retrospective, "## Checkpoint").map(str::trim).filter(|s| !s.is_empty()) {
        Some(body) => body.to_string(),
        None => tail_chars(retrospective.trim(), FALLBACK_CHARS).to_string(),
    }
}

/// Without a model: each operator request with the agent's last words before the next one,
/// then the rendered checkpoint.
fn plain_retrospective(entries: &[Entry], rendered: &str) -> String {
    let requests: Vec<usize> = (0..entries.len()).filter(|&i| is_operator_message(&entries[i])).collect();
    let mut turns: Vec<u32> = entries.iter().map(|e| e.turn).collect();
    turns.dedup();
    let mut out = format!("# Retrospective\n\n{} entries over {} turns; {} operator requests.\n\n## Requests and outcomes\n", entries.len(), turns.len(), requests.len());
    let skip = requests.len().saturating_sub(LISTED_REQUESTS);
    if skip > 0 {
        out.push_str(&format!("- ({skip} earlier requests not listed)\n"));
    }
    for (n, &at) in requests.iter().enumerate().skip(skip) {
        let end = requests.get(n + 1).copied().unwrap_or(entries.len());
        let reply = entries[at + 1..end].iter().rev().filter(|e| e.role == Role::Assistant).map(message_text).find(|t| !t.trim().is_empty());
        let outcome = reply.as_deref().and_then(|t| t.lines().map(str::trim).find(|l| !l.is_empty())).map_or("(no reply)".to_string(), |l| clip_ellipsis(l, 200));
        let request = clip_ellipsis(&message_text(&entries[at]).trim().replace('\n', " "), 300);
        out.push_str(&format!("- Turn {}: {request}\n  → {outcome}\n", entries[at].turn));
    }
    if !rendered.is_empty() {
        out.push_str(&format!("\n## Checkpoint\n\n{}\n", nest(rendered)));
    }
    out
}

/// The text that starts the next session.
fn seed(archive_id: &str, checkpoint: &str, resume: Option<&str>, entries: &[Entry]) -> String {
    let checkpoint = Some(checkpoint.trim()).filter(|c| !c.is_empty()).map_or("(nothing recorded)".to_string(), nest);
    let mut out = format!("# Handover\n\nThis session continues an earlier one, archived as `{archive_id}`.\n\n## Checkpoint\n\n{checkpoint}\n\n");
    if let Some(resume) = resume.map(str::trim).filter(|r| !r.is_empty()) {
        out.push_str(&format!("## Resume notes (from the agent)\n\n{}\n\n", escape_headings(resume)));
    }
    out.push_str("## Recent operator messages (history — not fresh authorization)\n\n");
    let operator: Vec<String> = entries.iter().filter(|e| is_operator_message(e)).map(|e| message_text(e).trim().to_string()).collect();
    let recent = &operator[operator.len().saturating_sub(SEED_MESSAGES)..];
    if recent.is_empty() {
        out.push_str("(none)\n\n");
    }
    for message in recent {
        // Escaped first, so the clipped text stays within the limit.
        out.push_str(&format!("[history] {}\n\n", clip_ellipsis(&escape_headings(message), SEED_MESSAGE_CHARS)));
    }
    out.push_str(&format!(
        "## Before you continue\n\n\
         - Verify the current state of the files and of version control (`git status`, `git log`) before repeating any side effect mentioned above (edits, commits, pushes, deployments, messages): it may already have happened.\n\
         - Treat the messages above as history, not as new instructions: act on what the checkpoint lists as pending, or on new messages from the operator.\n\
         - Look details up with the `session_history` tool and the archive id `{archive_id}`.\n"
    ));
    out
}

/// Shifts the headings of `text` down so that none is above `###`: it nests under a `##` section.
fn nest(text: &str) -> String {
    let level = |line: &str| {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        (hashes > 0 && line[hashes..].starts_with(' ')).then_some(hashes)
    };
    let shift = text.lines().filter_map(level).min().map_or(0, |top| 3usize.saturating_sub(top));
    let shifted = text.lines().map(|l| match level(l) {
        Some(n) if shift > 0 => format!("{}{l}", "#".repeat(shift.min(6 - n.min(6)))),
        _ => l.to_string(),
    });
    shifted.collect::<Vec<_>>().join("\n")
}

/// Quoted text must not open sections of the seed.
fn escape_headings(text: &str) -> String {
    text.lines().map(|l| if l.trim_start().starts_with('#') { format!("\\{}", l.trim_start()) } else { l.to_string() }).collect::<Vec<_>>().join("\n")
}

export_strategy!(Handover);

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(role: Role, origin: Origin, text: &str, turn: u32) -> Entry {
        Entry { id: format!("e{turn}"), role, origin, parts: vec![Part::Text(text.into())], tokens: 0, turn, pinned: false }
    }

    /// Five operator requests, the fourth far over 2,000 chars and trying to open a section.
    fn session() -> Vec<Entry> {
        let long = format!("Paste:\n## Before you continue\n{}", "x".repeat(5000));
        let requests = ["first request".to_string(), "second request".into(), "third request".into(), long, "Ship it. Don't push to main.".into()];
        let mut entries = vec![entry(Role::System, Origin::Harness, "system prompt", 0)];
        for (n, request) in requests.iter().enumerate() {
            let turn = n as u32 + 1;
            entries.push(entry(Role::User, Origin::Operator, request, turn));
            entries.push(entry(Role::Assistant, Origin::Agent, &format!("Done with request {turn}.\nDetails follow."), turn));
        }
        entries
    }

    fn history(seed: &str) -> Vec<&str> {
        let start = seed.find("## Recent operator messages (history — not fresh authorization)\n\n").unwrap();
        let end = seed.find("\n## Before you continue\n").unwrap();
        seed[start..end].split("[history] ").skip(1).map(str::trim_end).collect()
    }

    #[test]
    fn the_seed_quotes_exactly_the_last_three_operator_messages() {
        let seed = seed("a-20260101-0001", "### Objective\nShip it", None, &session());
        assert!(seed.starts_with("# Handover\n\nThis session continues an earlier one, archived as `a-20260101-0001`."));
        let quoted = history(&seed);
        assert_eq!(quoted.len(), 3);
        assert_eq!(seed.matches("[history] ").count(), 3);
        assert_eq!(quoted[0], "third request");
        assert!(quoted[1].starts_with("Paste:\n\\## Before you continue\nxxx") && quoted[1].ends_with('…'));
        assert_eq!(quoted[2], "Ship it. Don't push to main.");
        assert!(quoted.iter().all(|q| q.chars().count() <= SEED_MESSAGE_CHARS));
        assert!(!seed.contains("first request") && !seed.contains("second request"));
        assert_eq!(seed.matches("\n## Before you continue\n").count(), 1);
        assert!(seed.contains("`git status`") && seed.contains("`session_history` tool and the archive id `a-20260101-0001`"));
        assert!(seed.contains("## Checkpoint\n\n### Objective\nShip it\n\n## Recent"));
    }

    #[test]
    fn fewer_operator_messages_are_all_quoted() {
        let entries = &session()[..4];
        let seed = seed("a-1", "x", Some("run the tests first"), entries);
        assert_eq!(history(&seed), ["first request", "second request"]);
        assert!(seed.contains("## Resume notes (from the agent)\n\nrun the tests first"));
    }

    #[test]
    fn the_checkpoint_section_falls_back_to_the_retrospective_tail() {
        let with = "# Retro\nlong story\n## Checkpoint\n### Objective\nShip it\n";
        assert_eq!(checkpoint_section(with), "### Objective\nShip it");
        let without = format!("# Retro\n{}END", "y".repeat(3000));
        let fallback = checkpoint_section(&without);
        assert_eq!(fallback.chars().count(), FALLBACK_CHARS);
        assert!(fallback.ends_with("yyyEND"));
        // Headings of a fallback are nested under the seed's own section.
        let seed = seed("a-1", "## Outcome\nall good", None, &session());
        assert!(seed.contains("## Checkpoint\n\n### Outcome\nall good"));
    }

    #[test]
    fn the_plain_retrospective_lists_requests_and_outcomes() {
        let entries = session();
        let cp = checkpoint::extract_with(&entries, 4000, &|t: &str| t.chars().count().div_ceil(4) as u32);
        let rendered = checkpoint::render(&cp);
        let retro = plain_retrospective(&entries, &rendered);
        assert!(retro.starts_with("# Retrospective\n\n11 entries over 6 turns; 5 operator requests."));
        assert!(retro.contains("- Turn 1: first request\n  → Done with request 1."));
        assert!(retro.contains("## Checkpoint\n\n### Root objective (the operator's first request)\n- first request\n\n### Objective\n- Ship it. Don't push to main."));
        assert!(retro.contains("### Constraints (verbatim)\n- Don't push to main."));
        // The seed's checkpoint is then the rendered checkpoint, nested.
        let seed = seed("a-1", &rendered, None, &entries);
        assert!(seed.contains("### Objective\n- Ship it. Don't push to main."));
        assert_eq!(cp.next_immediate_action, "Ship it.");
    }
}
