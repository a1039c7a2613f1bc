//! `cairn eval`: the failure scenarios of harness compaction, run against a policy's chain,
//! as a scorecard. Each check is deterministic on what the agent would see after compaction
//! (and on the record), so it runs offline. One file per scenario under `scenarios/`.

mod kit;
mod lab;
mod probe;
mod report;
mod scenarios;
mod side_by_side;

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use serde::Serialize;

pub use lab::Lab;

#[derive(clap::Args)]
pub struct Args {
    /// Policy file (TOML); the embedded default when absent.
    #[arg(long)]
    policy: Option<PathBuf>,
    /// Extra plugin directory; may repeat.
    #[arg(long)]
    plugin_dir: Vec<PathBuf>,
    /// Run only these scenarios (by name); may repeat.
    #[arg(long)]
    scenario: Vec<String>,
    /// Recorded sessions to build the scenarios from (`pi/`, `openai-chat/` inside); a
    /// generated coding session otherwise.
    #[arg(long)]
    transcripts: Option<PathBuf>,
    /// Print one JSON object for scripts.
    #[arg(long)]
    json: bool,
    /// Also write the scorecard as an HTML page with a chart of tokens per cycle.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Also ask the policy's model each scenario's question over the compacted context and
    /// grade its answer (needs a `[model]` section in the policy).
    #[arg(long)]
    probe: bool,
    /// Hold every compaction to this many tokens (the policy's `compaction.budget_tokens`): a
    /// scenario whose compaction ends above it fails.
    #[arg(long)]
    budget: Option<u64>,
    /// Also run the third-party compaction-conformance-kit (Python; `pip install` the version in
    /// `eval/kit/requirements.txt`) against this binary, its own output fed back each round.
    #[arg(long)]
    kit: bool,
}

#[derive(Serialize)]
struct Scorecard {
    policy: String,
    sessions: String,
    passed: usize,
    failed: usize,
    errors: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    budget: Option<u64>,
    scenarios: Vec<scenarios::Outcome>,
    /// `--kit`: the conformance kit's results, `missed` naming the goals not met.
    #[serde(skip_serializing_if = "Option::is_none")]
    conformance_kit: Option<serde_json::Value>,
    /// Beside Claude Code's own compaction summaries (with `--transcripts`).
    beside_claude_code: Vec<side_by_side::Row>,
}

pub fn run(args: Args) -> Result<()> {
    let all = scenarios::all();
    for wanted in &args.scenario {
        if !all.iter().any(|s| s.name() == wanted) {
            let names: Vec<&str> = all.iter().map(|s| s.name()).collect();
            bail!("unknown scenario {wanted:?}; the scenarios are: {}", names.join(", "));
        }
    }
    let chosen: Vec<_> = all.into_iter().filter(|s| args.scenario.is_empty() || args.scenario.iter().any(|w| w == s.name())).collect();
    let lab = Lab::new(&args.plugin_dir, args.policy.as_deref(), args.transcripts.clone(), args.budget)?;
    let model = match (&lab.policy.model, args.probe) {
        (_, false) => None,
        (Some(settings), true) => Some(settings.provider().context("--probe: the policy's model")?),
        (None, true) => bail!("--probe asks the policy's model, and {} has no [model] section (see examples/policies/model.toml)", lab.policy.source),
    };

    let bar = indicatif::ProgressBar::new(chosen.len() as u64);
    if args.json || !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    bar.set_style(indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}").expect("a valid template"));
    let mut outcomes = Vec::new();
    for scenario in chosen {
        bar.set_message(scenario.name());
        outcomes.push(scenarios::run(scenario.as_ref(), &lab, model.as_deref()));
        bar.inc(1);
    }
    bar.set_message("beside Claude Code");
    let beside_claude_code = match &args.transcripts {
        Some(dir) => side_by_side::rows(&lab, dir)?,
        None => Vec::new(),
    };
    bar.set_message("compaction-conformance-kit");
    let conformance_kit = if args.kit { Some(kit::run()?) } else { None };
    bar.finish_and_clear();

    let count = |v: scenarios::Verdict| outcomes.iter().filter(|o| o.verdict == v).count();
    let card = Scorecard {
        policy: args.policy.as_ref().map_or_else(|| "embedded default".to_string(), |p| p.display().to_string()),
        sessions: lab.sessions_name(),
        passed: count(scenarios::Verdict::Pass),
        failed: count(scenarios::Verdict::Fail),
        errors: count(scenarios::Verdict::Error),
        budget: args.budget,
        scenarios: outcomes,
        conformance_kit,
        beside_claude_code,
    };
    if let Some(path) = &args.report {
        std::fs::write(path, report::html(&card)?).with_context(|| format!("writing {}", path.display()))?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&card)?);
    } else {
        print_table(&card);
    }
    Ok(())
}

fn print_table(card: &Scorecard) {
    let budget = card.budget.map(|b| format!("; budget: {b} tokens")).unwrap_or_default();
    println!("cairn eval — policy: {}; sessions: {}{budget}\n", card.policy, card.sessions);
    println!("{:<22} {:<9} {:>22}  what was checked", "scenario", "result", "tokens (first → last)");
    for o in &card.scenarios {
        let tokens = match (o.tokens.first(), o.tokens.last()) {
            (Some(first), Some(last)) => format!("{} → {}", first.before, last.after),
            _ => "—".into(),
        };
        println!("{:<22} {:<9} {:>22}  {}", o.name, o.verdict.word(), tokens, o.detail);
    }
    let probes: Vec<_> = card.scenarios.iter().filter_map(|o| o.probe.as_ref().map(|p| (o.name, p))).collect();
    if !probes.is_empty() {
        println!("\nAgent probe: the policy's model asked over the compacted context");
        for (name, p) in &probes {
            let answer = p.answer.split_whitespace().collect::<Vec<_>>().join(" ");
            let missing = if p.missing.is_empty() { String::new() } else { format!(" (does not mention {})", p.missing.join(", ")) };
            println!("{:<22} {:<9} Q: {} A: {answer}{missing}", name, if p.passed { "pass" } else { "FAIL" }, p.question);
        }
    }
    println!("\n{} passed, {} failed, {} could not run", card.passed, card.failed, card.errors);
    if let Some(results) = &card.conformance_kit {
        kit::print(results);
    }
    if !card.beside_claude_code.is_empty() {
        println!("\nBeside Claude Code's own compaction: of what the record says work needs (constraints, failing checks, changed files, identifiers),");
        println!("{:<56} {:>6} {:>22} {:>22}", "session", "items", "Claude Code's summary", "this policy's context");
        for r in &card.beside_claude_code {
            println!("{:<56} {:>6} {:>22} {:>22}", r.session, r.items, format!("{} kept, {} tok", r.claude_code_kept, r.claude_code_tokens), format!("{} kept, {} tok", r.cairn_kept, r.cairn_tokens));
        }
    }
}
