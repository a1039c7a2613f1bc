//! 7. Billed cost over 20 turns with compaction and without, under prompt caching: a
//!    compaction rewrites the cached prefix, so it pays only once the cheaper turns after it have
//!    made up for that rewrite. Priced for an Anthropic and an OpenAI model; reports both costs
//!    and the break-even turn. It passes when the compaction pays for itself within the 20 turns
//!    on both.

use super::{Cycle, Scenario, Score};
use crate::commands::eval::lab::{grown, tool_work};
use crate::commands::eval::Lab;

const TURNS: usize = 20;
/// New context per turn (tool work) and the reply's own tokens.
const OUTPUT_TOKENS: u64 = 600;

use cairn::pricing::{Prices, PRICES};

pub struct CacheCost;

impl Scenario for CacheCost {
    fn name(&self) -> &'static str {
        "cache-cost"
    }

    fn run(&self, lab: &Lab) -> anyhow::Result<Score> {
        let (session, base) = lab.session("pi")?;
        let report = lab.compact("cache-cost", &base)?;
        let cycles = vec![Cycle::from(&report)];
        // Tokens each turn adds, measured on real tool work.
        let step = {
            let mut one = grown(&Default::default(), tool_work("cc", 1));
            lab.cairn.tokenizer().count_transcript(&mut one);
            one.total_tokens()
        };
        let mut lines = Vec::new();
        let mut pays = true;
        for p in &PRICES {
            let without = costs(report.tokens_before, step, p, false);
            let with = costs(report.tokens_after, step, p, true);
            let even = (0..TURNS).find(|&t| with[t] <= without[t]);
            pays &= even.is_some();
            lines.push(format!(
                "{}: ${:.2} with vs ${:.2} without, {}",
                p.model,
                with[TURNS - 1],
                without[TURNS - 1],
                even.map_or_else(|| format!("no break-even in {TURNS} turns"), |t| format!("breaks even at turn {}", t + 1))
            ));
        }
        Ok(Score::new(pays, format!("{session}: {} → {} tokens; {}", report.tokens_before, report.tokens_after, lines.join("; ")), cycles))
    }
}

/// Cumulative cost after each turn for a context starting at `start` tokens that grows by
/// `step` a turn; `rewritten`: the first call after a compaction finds nothing cached.
fn costs(start: u64, step: u64, p: &Prices, rewritten: bool) -> Vec<f64> {
    let per = |tokens: u64, price: f64| tokens as f64 * price / 1e6;
    let mut total = 0.0;
    let mut out = Vec::with_capacity(TURNS);
    let mut context = start;
    for turn in 0..TURNS {
        // The cached prefix is last call's prompt and reply; the new part is written to cache.
        let (cached, fresh) = if turn == 0 && rewritten {
            (0, context)
        } else if turn == 0 {
            (context, 0)
        } else {
            (context - step - OUTPUT_TOKENS, step + OUTPUT_TOKENS)
        };
        total += per(cached, p.cached) + per(fresh, p.write) + per(OUTPUT_TOKENS, p.output);
        out.push(total);
        context += step + OUTPUT_TOKENS;
    }
    out
}
