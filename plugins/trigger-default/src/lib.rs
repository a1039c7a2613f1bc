//! `trigger-default`: the seed trigger. An agent's own request wins (once any cooldown is over);
//! otherwise the share of the window in use decides: hand over (only with `auto_handover`),
//! compact, or every `advise_every` turns a one-line advice for the agent. No model call.
//! Unknown usage never starts anything automatically.

use cairn_sdk::types::*;
use cairn_sdk::{config_or_defaults, export_trigger, parse_config, pending_request_decision, thousands, Trigger};
use serde::Deserialize;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Config {
    /// From this share of the window, advise the agent (every `advise_every` turns).
    advise_at: f64,
    /// From this share, compact.
    compact_at: f64,
    /// From this share, hand over instead of compacting, if `auto_handover`.
    handover_at: f64,
    /// Advise on turns that are a multiple of this; 0 never advises.
    advise_every: u32,
    /// Hand over automatically at `handover_at`; otherwise only when the agent asks.
    auto_handover: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config { advise_at: 0.60, compact_at: 0.75, handover_at: 0.90, advise_every: 5, auto_handover: false }
    }
}

/// Parses and checks the config; the error says what is wrong.
fn load_config(text: &str) -> Result<Config, String> {
    let config: Config = parse_config(text).map_err(StrategyError::into_message)?;
    for (key, value) in [("advise_at", config.advise_at), ("compact_at", config.compact_at), ("handover_at", config.handover_at)] {
        if !(value.is_finite() && value > 0.0) {
            return Err(format!("config: {key} must be a share of the window above 0, not {value}"));
        }
    }
    Ok(config)
}

struct TriggerDefault;

impl Trigger for TriggerDefault {
    fn decide(input: TriggerInput) -> TriggerDecision {
        // A broken config must not stop maintenance altogether: say so and use the defaults.
        decide(&input, &config_or_defaults(load_config(&input.config)))
    }
}

/// The whole rule, free of host calls.
fn decide(input: &TriggerInput, config: &Config) -> TriggerDecision {
    let level = Level::of(&input.usage);
    let context = level.as_ref().map(|l| format!("context at {}", l.describe()));
    if let Some(requested) = pending_request_decision(input, context.as_deref()) {
        return requested;
    }
    // Unknown usage (or an unknown window): nothing automatic.
    let Some(level) = level else {
        return TriggerDecision::None;
    };
    if input.cooldown_left > 0 {
        return advice(input, config, &level);
    }
    if config.auto_handover && level.fraction >= config.handover_at {
        return TriggerDecision::Handover(format!("context at {}", level.describe()));
    }
    if level.fraction >= config.compact_at {
        return TriggerDecision::Compact(format!("context at {}", level.describe()));
    }
    advice(input, config, &level)
}

/// `Advise` when the context is past `advise_at` on an advice turn, else `None`.
fn advice(input: &TriggerInput, config: &Config, level: &Level) -> TriggerDecision {
    let due = config.advise_every > 0 && input.turn.is_multiple_of(config.advise_every);
    if !due || level.fraction < config.advise_at {
        return TriggerDecision::None;
    }
    let next = match (input.cooldown_left > 0, input.pending_request.is_some()) {
        (false, _) => "Consider finishing the current step; you may ask for compaction (context_maintenance), naming what to preserve.",
        (true, true) => "Your pending request will run when the cooldown after the last maintenance ends; finish the current step meanwhile.",
        (true, false) => "Compaction is cooling down after the last one; finish the current step and keep tool output small.",
    };
    TriggerDecision::Advise(format!("Context is at {}. {next}", level.describe_with_tokens()))
}

/// How full the context is.
struct Level {
    tokens: u64,
    window: u64,
    fraction: f64,
}

impl Level {
    /// None when the harness does not know the usage or the window.
    fn of(usage: &Usage) -> Option<Level> {
        let tokens = usage.context_tokens?;
        (usage.window > 0).then(|| Level { tokens, window: usage.window, fraction: tokens as f64 / usage.window as f64 })
    }

    /// Whole percent, rounded down so it never reads as past a threshold it is not past.
    fn percent(&self) -> u128 {
        self.tokens as u128 * 100 / self.window as u128
    }

    /// `63% of the window`.
    fn describe(&self) -> String {
        format!("{}% of the window", self.percent())
    }

    /// `63% of the window (80,640 of 128,000 tokens)`.
    fn describe_with_tokens(&self) -> String {
        format!("{} ({} of {} tokens)", self.describe(), thousands(self.tokens), thousands(self.window))
    }
}

export_trigger!(TriggerDefault);

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: u64 = 128_000;

    fn input(tokens: Option<u64>, turn: u32) -> TriggerInput {
        TriggerInput {
            usage: Usage { context_tokens: tokens, window: WINDOW, reserve: 16_384 },
            turn,
            turns_since_maintenance: None,
            cooldown_left: 0,
            pending_request: None,
            recent_outcomes: Vec::new(),
            config: String::new(),
        }
    }

    fn at(percent: u64, turn: u32) -> TriggerInput {
        input(Some(WINDOW * percent / 100), turn)
    }

    fn request(kind: RequestKind) -> Option<AgentRequest> {
        Some(AgentRequest { kind, preserve: "the failing test".into(), resume: "fix it".into() })
    }

    fn run(input: &TriggerInput) -> TriggerDecision {
        decide(input, &load_config(&input.config).unwrap())
    }

    fn is_none(d: &TriggerDecision) -> bool {
        matches!(d, TriggerDecision::None)
    }

    #[test]
    fn config_defaults_and_strictness() {
        assert_eq!(load_config("").unwrap(), Config::default());
        assert_eq!(load_config("{}").unwrap(), Config::default());
        let c = load_config(r#"{"compact_at": 0.8, "auto_handover": true}"#).unwrap();
        assert_eq!((c.compact_at, c.auto_handover, c.advise_at, c.advise_every), (0.8, true, 0.60, 5));
        assert!(load_config(r#"{"compact_ta": 0.8}"#).unwrap_err().contains("unknown field"));
        assert!(load_config(r#"{"advise_at": -0.1}"#).unwrap_err().contains("advise_at"));
        assert!(load_config(r#"{"compact_at": 0}"#).is_err());
        assert!(load_config("[").is_err());
    }

    #[test]
    fn unknown_usage_does_nothing_automatic() {
        assert!(is_none(&run(&input(None, 5))));
        assert!(is_none(&run(&input(None, 10))));
        let mut zero_window = at(95, 5);
        zero_window.usage.window = 0;
        assert!(is_none(&run(&zero_window)));
    }

    #[test]
    fn unknown_usage_still_honours_a_request() {
        let mut i = input(None, 3);
        i.pending_request = request(RequestKind::Compact);
        match run(&i) {
            TriggerDecision::Compact(why) => assert_eq!(why, "compaction requested by the agent"),
            other => panic!("{other:?}"),
        }
        i.cooldown_left = 1;
        assert!(is_none(&run(&i)));
    }

    #[test]
    fn below_advise_at_nothing() {
        assert!(is_none(&run(&at(59, 5))));
        assert!(is_none(&run(&at(0, 0))));
    }

    #[test]
    fn advice_from_advise_at_only_every_fifth_turn() {
        let i = input(Some(80_640), 10);
        match run(&i) {
            TriggerDecision::Advise(text) => assert_eq!(
                text,
                "Context is at 63% of the window (80,640 of 128,000 tokens). Consider finishing the current step; \
                 you may ask for compaction (context_maintenance), naming what to preserve."
            ),
            other => panic!("{other:?}"),
        }
        for turn in [11, 12, 13, 14] {
            assert!(is_none(&run(&input(Some(80_640), turn))), "turn {turn}");
        }
        assert!(matches!(run(&at(60, 15)), TriggerDecision::Advise(_)));
        assert!(matches!(run(&at(74, 0)), TriggerDecision::Advise(_)));
    }

    #[test]
    fn advise_every_is_configurable_and_zero_never_advises() {
        let mut i = at(65, 3);
        i.config = r#"{"advise_every": 3}"#.into();
        assert!(matches!(run(&i), TriggerDecision::Advise(_)));
        i.config = r#"{"advise_every": 0}"#.into();
        assert!(is_none(&run(&i)));
        i.turn = 0;
        assert!(is_none(&run(&i)));
    }

    #[test]
    fn compacts_from_compact_at_on_any_turn() {
        match run(&at(75, 7)) {
            TriggerDecision::Compact(why) => assert_eq!(why, "context at 75% of the window"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(run(&at(89, 1)), TriggerDecision::Compact(_)));
        // Just below: advice on an advice turn, nothing otherwise.
        assert!(matches!(run(&input(Some(95_999), 5)), TriggerDecision::Advise(_)));
        assert!(is_none(&run(&input(Some(95_999), 6))));
    }

    #[test]
    fn handover_threshold_needs_auto_handover() {
        // Off (the default): compaction even past handover_at.
        assert!(matches!(run(&at(95, 3)), TriggerDecision::Compact(_)));
        let mut i = at(90, 3);
        i.config = r#"{"auto_handover": true}"#.into();
        match run(&i) {
            TriggerDecision::Handover(why) => assert_eq!(why, "context at 90% of the window"),
            other => panic!("{other:?}"),
        }
        // On, but below handover_at: compaction.
        let mut i = at(80, 3);
        i.config = r#"{"auto_handover": true}"#.into();
        assert!(matches!(run(&i), TriggerDecision::Compact(_)));
        // Over the window counts too.
        let mut i = input(Some(WINDOW + 10), 3);
        i.config = r#"{"auto_handover": true}"#.into();
        assert!(matches!(run(&i), TriggerDecision::Handover(why) if why == "context at 100% of the window"));
    }

    #[test]
    fn cooldown_suppresses_compaction_and_handover_but_allows_advice() {
        let mut i = at(95, 4);
        i.cooldown_left = 2;
        i.config = r#"{"auto_handover": true}"#.into();
        assert!(is_none(&run(&i)), "not an advice turn");
        i.turn = 5;
        match run(&i) {
            TriggerDecision::Advise(text) => {
                assert!(text.starts_with("Context is at 95% of the window (121,600 of 128,000 tokens)."), "{text}");
                assert!(text.contains("cooling down"), "{text}");
            }
            other => panic!("{other:?}"),
        }
        // Below advise_at during cooldown: nothing.
        let mut i = at(50, 5);
        i.cooldown_left = 1;
        assert!(is_none(&run(&i)));
    }

    #[test]
    fn pending_request_waits_for_the_cooldown() {
        let mut i = at(30, 7);
        i.pending_request = request(RequestKind::Compact);
        i.cooldown_left = 3;
        assert!(is_none(&run(&i)));
        // During cooldown an advice turn tells the agent its request is waiting.
        let mut advise = at(70, 10);
        advise.pending_request = request(RequestKind::Compact);
        advise.cooldown_left = 1;
        assert!(matches!(run(&advise), TriggerDecision::Advise(text) if text.contains("request will run")));
        // Cooldown over: it acts, at any usage.
        i.cooldown_left = 0;
        match run(&i) {
            TriggerDecision::Compact(why) => assert_eq!(why, "compaction requested by the agent (context at 30% of the window)"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn handover_request_hands_over_even_without_auto_handover() {
        let mut i = at(10, 1);
        i.pending_request = request(RequestKind::Handover);
        assert!(matches!(run(&i), TriggerDecision::Handover(why) if why.starts_with("handover requested by the agent")));
        // A compact request past handover_at with auto_handover still compacts: the agent chose.
        let mut i = at(95, 1);
        i.config = r#"{"auto_handover": true}"#.into();
        i.pending_request = request(RequestKind::Compact);
        assert!(matches!(run(&i), TriggerDecision::Compact(why) if why.starts_with("compaction requested by the agent")));
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(80_640), "80,640");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
