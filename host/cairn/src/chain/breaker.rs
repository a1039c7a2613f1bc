//! A circuit breaker per plugin: after repeated malfunctions (trap, timeout, oom, invalid or
//! invariant outcomes in a row) the plugin is skipped for a cooldown, and the step record says
//! so. It lives as long as the host, so a harness's long-running process benefits.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::OutcomeClass;

#[derive(Default)]
pub struct CircuitBreaker {
    plugins: Mutex<HashMap<String, Circuit>>,
}

#[derive(Default)]
struct Circuit {
    failures: u32,
    open_until: Option<Instant>,
}

/// When a circuit opens and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerSettings {
    pub failures: u32,
    pub cooldown: Duration,
}

impl CircuitBreaker {
    /// `Some(reason)` while the plugin's circuit is open.
    pub fn refuses(&self, plugin: &str) -> Option<String> {
        let plugins = self.plugins.lock().unwrap_or_else(|e| e.into_inner());
        let circuit = plugins.get(plugin)?;
        let until = circuit.open_until?;
        let left = until.checked_duration_since(Instant::now())?;
        Some(format!("circuit open after {} malfunctions in a row; skipped for another {}s", circuit.failures, left.as_secs() + 1))
    }

    pub fn record(&self, plugin: &str, outcome: OutcomeClass, settings: BreakerSettings) {
        let malfunction = matches!(outcome, OutcomeClass::Trap | OutcomeClass::Timeout | OutcomeClass::Oom | OutcomeClass::Invalid | OutcomeClass::Invariant);
        let mut plugins = self.plugins.lock().unwrap_or_else(|e| e.into_inner());
        let circuit = plugins.entry(plugin.to_string()).or_default();
        if outcome == OutcomeClass::Ok {
            *circuit = Circuit::default();
        } else if malfunction {
            circuit.failures += 1;
            if circuit.failures >= settings.failures {
                circuit.open_until = Some(Instant::now() + settings.cooldown);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_after_repeated_malfunctions_and_closes_on_success() {
        let breaker = CircuitBreaker::default();
        let settings = BreakerSettings { failures: 2, cooldown: Duration::from_secs(60) };
        breaker.record("p", OutcomeClass::Trap, settings);
        assert!(breaker.refuses("p").is_none());
        breaker.record("p", OutcomeClass::NoProgress, settings);
        assert!(breaker.refuses("p").is_none(), "no-progress is not a malfunction");
        breaker.record("p", OutcomeClass::Timeout, settings);
        assert!(breaker.refuses("p").unwrap().contains("2 malfunctions"));
        assert!(breaker.refuses("q").is_none());
        breaker.record("p", OutcomeClass::Ok, settings);
        assert!(breaker.refuses("p").is_none());
    }

    #[test]
    fn the_cooldown_ends() {
        let breaker = CircuitBreaker::default();
        let settings = BreakerSettings { failures: 1, cooldown: Duration::from_millis(1) };
        breaker.record("p", OutcomeClass::Oom, settings);
        std::thread::sleep(Duration::from_millis(5));
        assert!(breaker.refuses("p").is_none());
    }
}
