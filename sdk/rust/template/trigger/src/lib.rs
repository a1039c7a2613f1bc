//! `{{name}}`: compact when the context fills `compact_at` of the usable window (the window
//! minus the reserve kept for the reply). The agent's own request wins once any cooldown is
//! over; with usage unknown nothing starts automatically.

use cairn_sdk::types::*;
use cairn_sdk::{export_trigger, pending_request_decision, trigger_config, Trigger};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Config {
    /// Share of the usable window at which to compact.
    compact_at: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config { compact_at: 0.8 }
    }
}

struct Plugin;

impl Trigger for Plugin {
    fn decide(input: TriggerInput) -> TriggerDecision {
        decide(&input, &trigger_config(&input.config))
    }
}

/// The whole rule, free of host calls (so `cargo test` runs it natively).
fn decide(input: &TriggerInput, config: &Config) -> TriggerDecision {
    if let Some(requested) = pending_request_decision(input, None) {
        return requested;
    }
    let usable = input.usage.window.saturating_sub(input.usage.reserve);
    let (Some(used), true) = (input.usage.context_tokens, usable > 0) else {
        return TriggerDecision::None;
    };
    let share = used as f64 / usable as f64;
    if input.cooldown_left == 0 && share >= config.compact_at {
        return TriggerDecision::Compact(format!("context at {:.0}% of the usable window", share * 100.0));
    }
    TriggerDecision::None
}

export_trigger!(Plugin);

#[cfg(test)]
mod tests {
    use super::*;

    fn input(context_tokens: Option<u64>) -> TriggerInput {
        TriggerInput {
            usage: Usage { context_tokens, window: 100_000, reserve: 20_000 },
            turn: 10,
            turns_since_maintenance: None,
            cooldown_left: 0,
            pending_request: None,
            recent_outcomes: vec![],
            config: String::new(),
        }
    }

    #[test]
    fn compacts_from_the_threshold_only() {
        assert!(matches!(decide(&input(Some(50_000)), &Config::default()), TriggerDecision::None));
        assert!(matches!(decide(&input(Some(70_000)), &Config::default()), TriggerDecision::Compact(_)));
    }

    #[test]
    fn unknown_usage_starts_nothing() {
        assert!(matches!(decide(&input(None), &Config::default()), TriggerDecision::None));
    }
}
