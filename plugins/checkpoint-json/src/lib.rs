//! `checkpoint-json`: replaces the range by the typed continuation checkpoint, rendered as
//! markdown, and returns the checkpoint JSON for the host to validate and keep.
//!
//! Mode: the model is asked once. If the policy does not grant `model` (the call answers
//! `denied`) the checkpoint comes from deterministic extraction instead; any other model error
//! makes the step `unavailable`, so the chain moves on.

use cairn_sdk::checkpoint::{self, Checkpoint, CheckpointConfig};
use cairn_sdk::chunks::{model_context_window, model_or_fallback, Summarizer};
use cairn_sdk::ledger;
use cairn_sdk::prompt::{agent_notes, conversation_prompt_start, request_entries};
use cairn_sdk::types::*;
use cairn_sdk::{ask_model, count_tokens, export_strategy, log_info, parse_config, range_of, replaceable_range, summary_replacement, Strategy};

const SYSTEM: &str = "You extract a continuation checkpoint from a conversation between an operator and an AI coding agent, so the agent can continue after its history is compacted. Reply with exactly one JSON object and nothing else.";

const RULES: &str = "Rules:
- task_objective: what the operator asked for, in their words where possible.
- negative_constraints: every prohibition the operator stated (don't, never, avoid, must not, …), quoted verbatim.
- accepted_decisions: decisions taken that still hold, each with a short reason.
- rejected_hypotheses: approaches tried or considered and rejected, each {\"approach\", \"reason\"}.
- completed_milestones / pending_work: what is done / what remains.
- verification: test, build and lint commands by outcome; not_run lists checks still due since the last change.
- external_artifacts: URLs and artifact:// URIs needed later, each {\"name\", \"uri\"}.
- next_immediate_action: the single next step.
- files_read / files_modified: file paths.
Use empty strings or lists where nothing applies.";

struct CheckpointJson;

impl Strategy for CheckpointJson {
    fn compact(request: CompactRequest) -> Result<Outcome, StrategyError> {
        let config: CheckpointConfig = parse_config(&request.config)?;
        let range = replaceable_range(&request)?;
        let entries = &request.entries;
        // The record's checkpoint; else the one Cairn wrote into the context before, handed back
        // by the harness in whatever format it keeps (merged, never read as operator words).
        let previous = checkpoint::previous(request.previous_checkpoint.as_deref()).or_else(|| ledger::recovered(&entries[range.clone()]));
        let budget = config.operator_budget_tokens;
        // A history larger than the model's window goes in chunks: each chunk's checkpoint is the
        // "checkpoint from before" of the next.
        let window = model_context_window(&request.config);
        let summarizer = Summarizer { system: SYSTEM, max_tokens: config.max_tokens, window, clamp_chars: config.clamp_chars };
        let prompt = |conversation: &str, earlier: Option<&str>| prompt(&request, conversation, earlier);
        let first = previous.as_ref().map(Checkpoint::to_json);
        let run = summarizer.run(request_entries(&request), first, &prompt, &mut ask_model, &count_tokens);
        let cp = match model_or_fallback(run, "extracting the checkpoint deterministically")? {
            Some(done) => {
                log_info(&format!("checkpoint from the model in {} chunk(s){}", done.chunks, if done.retried { " (a too-long prompt was retried smaller)" } else { "" }));
                from_model(&done.reply, entries, previous.as_ref(), budget, &count_tokens)?
            }
            None => checkpoint::update(previous.as_ref(), request.previous_checkpoint_through.as_deref(), entries, budget),
        };
        // Under a budget the context shows what fits its room, by value; the record keeps all.
        let shown = match ledger::room(&request, &range) {
            Some(room) => ledger::fit(&cp, room, &ledger::visible_text(&request), &count_tokens),
            None => cp.clone(),
        };
        if !shown.left_out.is_empty() {
            log_info(&format!("left out for the budget: {}", ledger::left_out_list(&shown.left_out)));
        }
        let mut cp = cp;
        cp.left_out = shown.left_out.clone();
        let mut outcome = Outcome::new(range_of(entries, *range.start(), *range.end()), summary_replacement(&entries[range], ledger::summary_text(&shown)));
        outcome.checkpoint = Some(cp.to_json());
        Ok(outcome)
    }
}

/// The model sees everything after the protected head (the kept tail too: the checkpoint
/// describes the whole state) as `conversation` — all of it, or one chunk — then the checkpoint
/// from before it (the previous checkpoint, or the one from the chunks before), and the key list.
fn prompt(request: &CompactRequest, conversation: &str, previous: Option<&str>) -> String {
    let mut out = conversation_prompt_start(conversation);
    if let Some(previous) = previous {
        out.push_str(&format!("The checkpoint from before this conversation; carry forward what still holds:\n{previous}\n\n"));
    }
    out.push_str(&agent_notes(request));
    out.push_str(&format!(
        "Write the checkpoint as one JSON object with exactly these keys, all required and no others: {}. Shape:\n{}\n\n{RULES}",
        checkpoint::FIELDS.join(", "),
        Checkpoint::skeleton()
    ));
    out
}

/// The model's checkpoint, checked against the schema. Operator constraints found verbatim by
/// extraction (or kept by the previous checkpoint) are added if the model dropped or reworded
/// them, and the file lists are completed from the tool calls: both are exact where a model guesses.
fn from_model(reply: &str, entries: &[Entry], previous: Option<&Checkpoint>, budget: u32, count: &dyn Fn(&str) -> u32) -> Result<Checkpoint, StrategyError> {
    let mut cp = checkpoint::parse(reply).map_err(StrategyError::Failed)?;
    let found = checkpoint::extract_with(entries, budget, count);
    let kept = previous.map(|p| p.negative_constraints.clone()).unwrap_or_default();
    for constraint in kept.into_iter().chain(found.negative_constraints.iter().cloned()) {
        if !cp.negative_constraints.contains(&constraint) {
            cp.negative_constraints.push(constraint);
        }
    }
    // The operator's rules, facts, goal state and decisions, as extraction quotes them: what
    // the model's summary left out is there all the same.
    let model_ledger = cp.clone();
    ledger::merge(&found, &model_ledger, &mut cp);
    if let Some(previous) = previous {
        let now = cp.clone();
        ledger::merge(previous, &now, &mut cp);
    }
    for (list, exact) in [(&mut cp.files_read, found.files_read), (&mut cp.files_modified, found.files_modified)] {
        list.extend(exact.into_iter().filter(|f| !list.contains(f)).collect::<Vec<_>>());
    }
    let modified = cp.files_modified.clone();
    cp.files_read.retain(|f| !modified.contains(f));
    Ok(cp)
}

export_strategy!(CheckpointJson);

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_sdk::prompt::DATA_NOT_INSTRUCTIONS;

    fn quarter(text: &str) -> u32 {
        text.chars().count().div_ceil(4) as u32
    }
    fn entry(role: Role, origin: Origin, parts: Vec<Part>) -> Entry {
        Entry { id: "e".into(), role, origin, parts, tokens: 0, turn: 0, pinned: false }
    }
    fn entries() -> Vec<Entry> {
        let call = ToolCall { id: "c1".into(), name: "Write".into(), args: r#"{"file_path":"src/a.rs"}"#.into() };
        let result = ToolResult { call_id: "c1".into(), content: "written".into(), is_error: false, elided: None };
        vec![
            entry(Role::User, Origin::Operator, vec![Part::Text("Add logging. Never log secrets.".into())]),
            entry(Role::Assistant, Origin::Agent, vec![Part::ToolCall(call)]),
            entry(Role::Tool, Origin::Tool, vec![Part::ToolResult(result)]),
        ]
    }

    #[test]
    fn a_model_checkpoint_keeps_verbatim_constraints_and_exact_files() {
        let model = Checkpoint { task_objective: "Add logging".into(), negative_constraints: vec!["no secrets in logs".into()], files_read: vec!["src/a.rs".into()], ..Default::default() };
        let previous = Checkpoint { negative_constraints: vec!["Stay on stable Rust.".into()], ..Default::default() };
        let reply = format!("```json\n{}\n```", model.to_json());
        let cp = from_model(&reply, &entries(), Some(&previous), 4000, &quarter).unwrap();
        assert_eq!(cp.task_objective, "Add logging");
        assert_eq!(cp.negative_constraints, ["no secrets in logs", "Stay on stable Rust.", "Never log secrets."]);
        assert_eq!(cp.files_modified, ["src/a.rs"]);
        assert!(cp.files_read.is_empty());
    }

    #[test]
    fn schema_violations_fail() {
        let json = Checkpoint::default().to_json();
        for bad in [json.replace("\"pending_work\":[],", ""), json.replace("{", "{\"extra\":1,"), "Sorry, I cannot.".to_string()] {
            assert!(matches!(from_model(&bad, &entries(), None, 4000, &quarter), Err(StrategyError::Failed(_))), "{bad}");
        }
    }

    #[test]
    fn the_prompt_lists_every_key_and_the_previous_checkpoint() {
        let request = CompactRequest {
            purpose: RequestKind::Compact,
            archive_id: "a-1".into(),
            entries: entries(),
            protected_head: 0,
            tail_start: 2,
            token_target: 100,
            preserve: Some("the logging format".into()),
            resume: None,
            previous_checkpoint: None,
            previous_checkpoint_through: None,
            config: String::new(),
        };
        let previous = Checkpoint { task_objective: "earlier goal".into(), ..Default::default() };
        let conversation = cairn_sdk::prompt::conversation_as_data(request_entries(&request), 2000);
        let prompt = prompt(&request, &conversation, Some(&previous.to_json()));
        for key in checkpoint::FIELDS {
            assert!(prompt.contains(key), "{key}");
        }
        assert!(prompt.contains("earlier goal") && prompt.contains("the logging format"));
        assert!(prompt.starts_with(DATA_NOT_INSTRUCTIONS));
    }
}
