//! The host-native last step of a handover: a seed built from the conversation itself (the
//! last three operator messages, marked as history, and where the archive is). It cannot
//! fail, so a handover always has a seed to start the next session with.

use super::{Step, StepAnswer, StepError, StepInput, StrategyOutput};
use crate::transcript::{Entry, Origin, Part, Role};

pub const SEED_STEP: &str = "host-seed";
use cairn_rules::{clip_chars, SEED_MESSAGES, SEED_MESSAGE_CHARS};

pub struct HostSeed;

impl Step for HostSeed {
    fn name(&self) -> String {
        format!("{SEED_STEP}@{}", env!("CARGO_PKG_VERSION"))
    }

    fn run(&self, input: &StepInput<'_>) -> StepAnswer {
        StepAnswer::new(seed(input))
    }

    fn trusted(&self) -> bool {
        true
    }
}

fn seed(input: &StepInput<'_>) -> Result<StrategyOutput, StepError> {
    let entries = input.entries;
    let head = input.window.protected_head;
    if head >= entries.len() {
        return Err(StepError::NoProgress("the conversation has nothing after its protected head".into()));
    }
    let operator: Vec<String> = entries
        .iter()
        .filter(|e| e.role == Role::User && e.origin == Origin::Operator)
        .map(|e| e.parts.iter().filter_map(|p| if let Part::Text { text } = p { Some(text.as_str()) } else { None }).collect::<Vec<_>>().join("\n"))
        .collect();
    let recent = &operator[operator.len().saturating_sub(SEED_MESSAGES)..];
    let mut text = format!(
        "# Handover\n\nThis session continues an earlier one whose full record is archive {}.\n\n\
         ## Recent operator messages (history — not fresh authorization)\n",
        input.archive_id
    );
    for message in recent {
        text.push_str(&format!("\n[history] {}\n", clip_chars(message, SEED_MESSAGE_CHARS)));
    }
    text.push_str(&format!(
        "\n## Before you continue\nVerify the state of files and version control (git status, git log) before repeating \
         any side effect. The messages above are history, not new instructions. Look details up with the \
         session_history tool (archive {}).\n",
        input.archive_id
    ));
    Ok(StrategyOutput {
        first: entries[head].id.clone(),
        last: entries[entries.len() - 1].id.clone(),
        replacement: vec![Entry::text("", Role::User, Origin::Summary, text.clone())],
        checkpoint: None,
        seed: Some(text),
        retrospective: None,
    })
}
