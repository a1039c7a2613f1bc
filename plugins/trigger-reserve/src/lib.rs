//! `trigger-reserve`: Pi's rule. Compact once the context no longer leaves a reserve of the
//! window free; an agent's own request wins once any cooldown is over. Never advises, never
//! hands over on its own, and unknown usage never starts anything automatically.

use cairn_sdk::types::*;
use cairn_sdk::{export_trigger, pending_request_decision, thousands, trigger_config, Trigger};
use serde::Deserialize;

/// Used when neither the config nor the harness names a reserve.
const DEFAULT_RESERVE: u64 = 16_384;

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Config {
    /// Tokens to keep free. Unset: the harness's `usage.reserve` when above 0, else 16,384.
    reserve_tokens: Option<u64>,
}

struct TriggerReserve;

impl Trigger for TriggerReserve {
    fn decide(input: TriggerInput) -> TriggerDecision {
        decide(&input, &trigger_config(&input.config))
    }
}

fn reserve(config: &Config, usage: &Usage) -> u64 {
    config.reserve_tokens.unwrap_or(if usage.reserve > 0 { usage.reserve } else { DEFAULT_RESERVE })
}

/// The whole rule, free of host calls.
fn decide(input: &TriggerInput, config: &Config) -> TriggerDecision {
    if input.cooldown_left > 0 {
        return TriggerDecision::None;
    }
    if let Some(requested) = pending_request_decision(input, None) {
        return requested;
    }
    let (Some(tokens), window) = (input.usage.context_tokens, input.usage.window) else {
        return TriggerDecision::None;
    };
    if window == 0 {
        return TriggerDecision::None;
    }
    let reserve = reserve(config, &input.usage);
    let limit = window.saturating_sub(reserve);
    if tokens > limit {
        return TriggerDecision::Compact(format!("context exceeds window minus reserve ({} > {} - {} = {} tokens)", thousands(tokens), thousands(window), thousands(reserve), thousands(limit)));
    }
    TriggerDecision::None
}

export_trigger!(TriggerReserve);

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_sdk::parse_config;

    fn load_config(text: &str) -> Result<Config, String> {
        parse_config(text).map_err(StrategyError::into_message)
    }

    fn input(tokens: Option<u64>, reserve: u64) -> TriggerInput {
        TriggerInput {
            usage: Usage { context_tokens: tokens, window: 128_000, reserve },
            turn: 3,
            turns_since_maintenance: Some(3),
            cooldown_left: 0,
            pending_request: None,
            recent_outcomes: Vec::new(),
            config: String::new(),
        }
    }

    fn run(input: &TriggerInput) -> TriggerDecision {
        decide(input, &load_config(&input.config).unwrap())
    }

    fn is_none(d: &TriggerDecision) -> bool {
        matches!(d, TriggerDecision::None)
    }

    fn request(kind: RequestKind) -> Option<AgentRequest> {
        Some(AgentRequest { kind, preserve: String::new(), resume: String::new() })
    }

    #[test]
    fn config() {
        assert_eq!(load_config("").unwrap(), Config::default());
        assert_eq!(load_config(r#"{"reserve_tokens": 20000}"#).unwrap().reserve_tokens, Some(20_000));
        assert!(load_config(r#"{"reserve": 20000}"#).unwrap_err().contains("unknown field"));
    }

    #[test]
    fn unknown_usage_does_nothing() {
        assert!(is_none(&run(&input(None, 0))));
        let mut zero = input(Some(500_000), 0);
        zero.usage.window = 0;
        assert!(is_none(&run(&zero)));
    }

    #[test]
    fn default_reserve_is_16384_when_the_harness_gives_none() {
        // 128,000 - 16,384 = 111,616.
        assert!(is_none(&run(&input(Some(111_616), 0))));
        match run(&input(Some(111_617), 0)) {
            TriggerDecision::Compact(why) => {
                assert_eq!(why, "context exceeds window minus reserve (111,617 > 128,000 - 16,384 = 111,616 tokens)")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn harness_reserve_then_config_reserve() {
        // The harness says 8,000: limit 120,000.
        assert!(is_none(&run(&input(Some(115_000), 8_000))));
        assert!(matches!(run(&input(Some(120_001), 8_000)), TriggerDecision::Compact(_)));
        // The config overrides the harness: limit 98,000.
        let mut i = input(Some(100_000), 8_000);
        i.config = r#"{"reserve_tokens": 30000}"#.into();
        assert!(matches!(run(&i), TriggerDecision::Compact(why) if why.contains("- 30,000 = 98,000")));
        // A reserve as large as the window leaves no room: anything compacts.
        let mut i = input(Some(1), 0);
        i.config = r#"{"reserve_tokens": 200000}"#.into();
        assert!(matches!(run(&i), TriggerDecision::Compact(_)));
    }

    #[test]
    fn cooldown_suppresses_everything() {
        let mut i = input(Some(127_000), 0);
        i.cooldown_left = 1;
        assert!(is_none(&run(&i)));
        i.pending_request = request(RequestKind::Compact);
        assert!(is_none(&run(&i)));
    }

    #[test]
    fn pending_request_acts_after_the_cooldown() {
        let mut i = input(Some(1_000), 0);
        i.pending_request = request(RequestKind::Handover);
        i.cooldown_left = 2;
        assert!(is_none(&run(&i)));
        i.cooldown_left = 0;
        assert!(matches!(run(&i), TriggerDecision::Handover(why) if why == "handover requested by the agent"));
        i.pending_request = request(RequestKind::Compact);
        assert!(matches!(run(&i), TriggerDecision::Compact(why) if why == "compaction requested by the agent"));
        // Also when the usage is unknown.
        i.usage.context_tokens = None;
        assert!(matches!(run(&i), TriggerDecision::Compact(_)));
    }
}
