//! `cairn simulate FILE --window N`: replays a recorded session turn by turn through trigger →
//! commit policy → chain, exactly as a harness embedding the lifecycle would, and reports when
//! advice, compaction and handover happen and how large the context is at every turn.

use std::path::{Path, PathBuf};

use anyhow::Result;
use cairn::lifecycle::{Action, BoundaryReport, Usage};
use cairn::storage::{ConversationKey, Home};
use cairn::transcript::{Entry, Transcript};
use cairn::Lifecycle;
use serde::Serialize;

use crate::setup;

#[derive(clap::Args)]
pub struct Args {
    /// The session to replay (any format `cairn compact` reads).
    file: PathBuf,
    /// The model's context window in tokens.
    #[arg(long)]
    window: u64,
    /// Tokens of the window kept free for the model's answer: the trigger reads the window less this.
    #[arg(long, default_value_t = 16_384)]
    reserve: u64,
    /// Policy file (TOML); the embedded default when absent.
    #[arg(long)]
    policy: Option<PathBuf>,
    /// A folder of plugins (`.wasm` beside a `.toml` manifest) to load beside the bundled ones.
    #[arg(long)]
    plugin_dir: Vec<PathBuf>,
    /// Keep the simulation's records here [default: a temporary home].
    #[arg(long)]
    home: Option<PathBuf>,
    /// Print one JSON object for scripts.
    #[arg(long)]
    json: bool,
    /// Draw context size per turn, thresholds and events as an SVG chart.
    #[arg(long)]
    plot: Option<PathBuf>,
}

#[derive(Serialize)]
pub struct Event {
    turn: u32,
    pub kind: &'static str,
    tokens_before: u64,
    tokens_after: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<String>,
}

#[derive(Serialize)]
struct Point {
    turn: u32,
    /// Context size the harness reported at the boundary, and after Cairn acted.
    tokens_before: u64,
    tokens_after: u64,
}

#[derive(Serialize)]
struct Threshold {
    label: String,
    tokens: u64,
}

#[derive(Serialize)]
pub struct Simulation {
    file: String,
    window: u64,
    pub turns: u32,
    /// The trigger's thresholds in tokens, read from the policy.
    thresholds: Vec<Threshold>,
    pub events: Vec<Event>,
    series: Vec<Point>,
    max_tokens: u64,
}

pub fn run(args: Args) -> Result<()> {
    let name = args.file.display().to_string();
    let (transcript, _) = setup::read_transcript(&args.file)?;
    let temp = tempfile::tempdir()?;
    let home = Home::open(args.home.as_deref().unwrap_or(temp.path()))?;
    let (cairn, policy) = setup::host_and_policy(&args.plugin_dir, args.policy.as_deref())?;
    let lifecycle = Lifecycle::new(cairn, home, policy);
    let key = ConversationKey::derive(&format!("simulate-{}", args.file.file_stem().unwrap_or_default().to_string_lossy()));
    let progress = |event: &Event| {
        if !args.json {
            let Event { turn, kind, tokens_before: before, tokens_after: after, detail } = event;
            eprintln!("turn {turn:>4}: {kind:<9} {before:>8} → {after:>8} tokens{}", detail.as_deref().map(|d| format!("  ({d})")).unwrap_or_default());
        }
    };
    let sim = replay(&lifecycle, &key, &transcript, name, args.window, args.reserve, progress)?;
    if let Some(plot) = &args.plot {
        draw(&sim, plot)?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&sim)?);
    } else {
        let count = |k: &str| sim.events.iter().filter(|e| e.kind == k).count();
        println!(
            "{} turns, window {}: {} advice, {} compactions, {} handovers, {} deferred; peak context {} tokens ({:.0}% of the window)",
            sim.turns,
            args.window,
            count("advice"),
            count("compact"),
            count("handover"),
            count("deferred"),
            sim.max_tokens,
            100.0 * sim.max_tokens as f64 / args.window as f64
        );
    }
    Ok(())
}

/// Replays `transcript` turn by turn through `lifecycle` as a harness would: each turn's
/// entries join the working context, then the boundary is reported (`cairn bench` times this).
pub fn replay(lifecycle: &Lifecycle, key: &ConversationKey, transcript: &Transcript, name: String, window: u64, reserve: u64, mut progress: impl FnMut(&Event)) -> Result<Simulation> {
    let thresholds = thresholds(lifecycle.policy(), window, reserve);
    let turns = transcript.entries.iter().map(|e| e.turn).max().unwrap_or(0);
    let mut context: Vec<Entry> = Vec::new();
    // The recorded usage describes the recorded context; once Cairn has compacted, its own
    // context is smaller and only a count describes it.
    let mut recorded_usage_holds = true;
    let mut sim = Simulation { file: name, window, turns, thresholds, events: Vec::new(), series: Vec::new(), max_tokens: 0 };
    for turn in 0..=turns {
        context.extend(transcript.entries.iter().filter(|e| e.turn == turn).cloned());
        let outcome = lifecycle.boundary_blocking(BoundaryReport {
            conversation: key.clone(),
            turn,
            turn_complete: true,
            tool_call_outstanding: outstanding_call(&context),
            window,
            reserve,
            usage: if recorded_usage_holds { Usage::recorded_or_counted(&context) } else { Usage::Counted },
            transcript: Transcript::new(std::mem::take(&mut context)),
        })?;
        recorded_usage_holds &= !matches!(outcome.action, Action::Compacted | Action::HandedOver);
        let before = outcome.usage.unwrap_or(0);
        context = outcome.transcript.entries;
        let after: u64 = context.iter().map(|e| e.tokens as u64).sum();
        sim.max_tokens = sim.max_tokens.max(before);
        sim.series.push(Point { turn, tokens_before: before, tokens_after: after });
        let (kind, detail) = match &outcome.action {
            Action::None => continue,
            Action::Advised => ("advice", outcome.advice.clone()),
            Action::Compacted => ("compact", outcome.report.as_ref().and_then(|r| r.committed_by.clone())),
            Action::HandedOver => ("handover", outcome.report.as_ref().and_then(|r| r.committed_by.clone())),
            Action::Deferred(why) => ("deferred", Some(why.clone())),
            Action::Paused => ("paused", None),
            // Say why: the commit policy's refusal, else the last step's message.
            Action::Failed => ("failed", outcome.report.as_ref().and_then(|r| r.rejected.clone().or_else(|| r.steps.last().and_then(|s| s.message.clone())))),
        };
        let event = Event { turn, kind, tokens_before: before, tokens_after: after, detail };
        progress(&event);
        sim.events.push(event);
    }
    Ok(sim)
}

/// The levels the policy's trigger acts at: every `*_at` share of the window in its config
/// (trigger-default's advise/compact/handover), else the window minus the reserve (Pi's rule).
fn thresholds(policy: &cairn::CheckedPolicy, window: u64, reserve: u64) -> Vec<Threshold> {
    let mut found: Vec<Threshold> = policy
        .policy()
        .trigger
        .iter()
        .flat_map(|spec| spec.config.get_ref().iter())
        .filter_map(|(key, value)| {
            let share = value.as_float().filter(|s| *s > 0.0 && *s <= 1.0)?;
            let what = key.strip_suffix("_at")?;
            Some(Threshold { label: format!("{:.0}% {what}", share * 100.0), tokens: (window as f64 * share) as u64 })
        })
        .collect();
    if found.is_empty() && policy.trigger.is_some() {
        let reserve = policy.policy().trigger.as_ref().and_then(|t| t.config.get_ref().get("reserve_tokens")).and_then(|v| v.as_integer()).map_or(reserve, |r| r as u64);
        found.push(Threshold { label: "window − reserve".into(), tokens: window.saturating_sub(reserve) });
    }
    found.sort_by_key(|t| std::cmp::Reverse(t.tokens));
    found
}

/// Whether the context ends with a tool call still waiting for its result.
fn outstanding_call(context: &[Entry]) -> bool {
    let answered: std::collections::HashSet<&str> = context.iter().flat_map(|e| e.tool_result_ids()).collect();
    context.last().is_some_and(|e| e.tool_call_ids().any(|id| !answered.contains(id)))
}

fn draw(sim: &Simulation, path: &Path) -> Result<()> {
    use plotters::prelude::*;
    let root = SVGBackend::new(path, (1000, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
    let top = (sim.window as f64 * 1.05) as u64;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("Context per turn — {} (window {})", sim.file.rsplit('/').next().unwrap_or(""), sim.window), ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(70)
        .build_cartesian_2d(0u32..sim.turns.max(1), 0u64..top)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    chart.configure_mesh().x_desc("turn").y_desc("tokens").draw().map_err(|e| anyhow::anyhow!("{e}"))?;
    let palette = [MAGENTA, RGBColor(230, 120, 0), RGBColor(200, 170, 0), CYAN];
    let lines = std::iter::once(("window".to_string(), sim.window, RED)).chain(sim.thresholds.iter().zip(palette.iter().cycle()).map(|(t, c)| (t.label.clone(), t.tokens, *c)));
    for (label, y, color) in lines {
        chart
            .draw_series(LineSeries::new([(0, y), (sim.turns, y)], color.stroke_width(1)))
            .map_err(|e| anyhow::anyhow!("{e}"))?
            .label(label)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], color));
    }
    chart
        .draw_series(LineSeries::new(sim.series.iter().map(|p| (p.turn, p.tokens_before)), BLUE.stroke_width(2)))
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .label("context at boundary")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], BLUE));
    for (kind, color) in [("compact", GREEN), ("handover", MAGENTA), ("advice", RGBColor(200, 170, 0))] {
        chart
            .draw_series(sim.events.iter().filter(|e| e.kind == kind).map(|e| Circle::new((e.turn, e.tokens_before), 5, color.filled())))
            .map_err(|e| anyhow::anyhow!("{e}"))?
            .label(kind)
            .legend(move |(x, y)| Circle::new((x + 8, y), 4, color.filled()));
    }
    chart.configure_series_labels().border_style(BLACK).background_style(WHITE.mix(0.9)).draw().map_err(|e| anyhow::anyhow!("{e}"))?;
    root.present().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(())
}
