//! List prices of two prompt-caching models, for what a compaction costs beyond its savings:
//! it rewrites the cached prefix, so the first call after it finds nothing cached. `cairn eval`
//! scores compactions with this table; a dry run reports the rewrite from it.

use serde::Serialize;

/// Dollars per million tokens: a cached input read, a new input token (written to the cache),
/// an output token.
pub struct Prices {
    pub model: &'static str,
    pub cached: f64,
    pub write: f64,
    pub output: f64,
}

pub const PRICES: [Prices; 2] = [
    // Anthropic: input $3, 5-minute cache write $3.75, cache read $0.30, output $15.
    Prices { model: "claude-sonnet-4-5", cached: 0.30, write: 3.75, output: 15.0 },
    // OpenAI bills no cache writes: a new token is plain input ($1.25), a cached one $0.125.
    Prices { model: "gpt-5", cached: 0.125, write: 1.25, output: 10.0 },
];

/// What rewriting the cache costs for one model, and when the smaller context pays it back.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CacheRewrite {
    pub model: &'static str,
    /// The first call after the compaction: the whole new context written, nothing read.
    pub next_call_usd: f64,
    /// The same call without the compaction: the old context read from the cache.
    pub next_call_uncompacted_usd: f64,
    /// Calls after the first until the smaller cached reads have made up the difference
    /// (`None`: the compaction never pays at this price).
    pub break_even_calls: Option<u64>,
}

/// The cache rewrite of a compaction from `before` to `after` tokens, per model.
pub fn rewrite(before: u64, after: u64) -> Vec<CacheRewrite> {
    let usd = |tokens: u64, price: f64| tokens as f64 * price / 1e6;
    PRICES
        .iter()
        .map(|p| {
            let (next, uncompacted) = (usd(after, p.write), usd(before, p.cached));
            let saved_per_call = usd(before.saturating_sub(after), p.cached);
            let extra = next - uncompacted;
            let break_even_calls = if extra <= 0.0 {
                Some(0)
            } else if saved_per_call > 0.0 {
                Some((extra / saved_per_call).ceil() as u64)
            } else {
                None
            };
            CacheRewrite { model: p.model, next_call_usd: next, next_call_uncompacted_usd: uncompacted, break_even_calls }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_large_cut_pays_back_in_a_few_calls_and_no_cut_never_does() {
        let cut = super::rewrite(100_000, 20_000);
        assert_eq!(cut[0].model, "claude-sonnet-4-5");
        // 20k written at $3.75/M = $0.075 against 100k read at $0.30/M = $0.03; 80k fewer cached
        // reads save $0.024 a call: two calls.
        assert!((cut[0].next_call_usd - 0.075).abs() < 1e-9);
        assert_eq!(cut[0].break_even_calls, Some(2));
        assert_eq!(super::rewrite(100_000, 100_000)[0].break_even_calls, None);
    }
}
