//! `cairn eval --report FILE.html`: the scorecard as one self-contained page: per scenario the
//! context's tokens from before its first compaction to after its last, and a chart (with a
//! legend) of the tokens before and after each cycle — or, for a single cycle, a small table,
//! since a chart of one point says nothing.

use anyhow::{anyhow, Result};
use cairn_rules::thousands;

use super::scenarios::{Outcome, Verdict};
use super::Scorecard;

pub fn html(card: &Scorecard) -> Result<String> {
    let mut rows = String::new();
    for o in &card.scenarios {
        let class = match o.verdict {
            Verdict::Pass => "pass",
            Verdict::Fail | Verdict::Error => "fail",
        };
        // The agent probe's question and answer under what was checked.
        let probe = o
            .probe
            .as_ref()
            .map_or_else(String::new, |p| format!("<p class=\"probe\"><b>Agent probe: {}</b> — Q: {} A: {}</p>", if p.passed { "pass" } else { "FAIL" }, escape(p.question), escape(&p.answer)));
        let cycles = match o.tokens.len() {
            0 => "<span class=\"none\">no compaction</span>".to_string(),
            1 => one_cycle(&o.tokens[0]),
            _ => chart(o)?,
        };
        rows.push_str(&format!(
            "<tr class=\"{class}\"><td>{}</td><td>{}</td><td>{}{probe}</td><td class=\"span\">{}</td><td>{cycles}</td></tr>\n",
            escape(o.name),
            o.verdict.word(),
            escape(&o.detail),
            first_to_last(&o.tokens),
        ));
    }
    let mut beside = String::new();
    if !card.beside_claude_code.is_empty() {
        beside.push_str("<h2>Beside Claude Code's own compaction</h2>\n<p>Of what the record says work needs (constraints, failing checks, changed files, identifiers):</p>\n<table><tr><th>session</th><th>items</th><th>Claude Code's summary</th><th>this policy's context</th></tr>\n");
        for r in &card.beside_claude_code {
            beside.push_str(&format!(
                "<tr><td>{}</td><td>{}</td><td>{} kept, {} tokens</td><td>{} kept, {} tokens</td></tr>\n",
                escape(&r.session),
                r.items,
                r.claude_code_kept,
                r.claude_code_tokens,
                r.cairn_kept,
                r.cairn_tokens
            ));
        }
        beside.push_str("</table>\n");
    }
    Ok(format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>cairn eval</title>\n<style>\
         body{{font-family:sans-serif;margin:2em}} table{{border-collapse:collapse}} td,th{{border:1px solid #ccc;padding:6px;vertical-align:top}}\
         tr.pass td:nth-child(2){{color:#080}} tr.fail td:nth-child(2){{color:#b00;font-weight:bold}}\
         td.span{{white-space:nowrap;text-align:right}} table.cycle td,table.cycle th{{border:none;padding:2px 8px;text-align:right}} .none{{color:#888}}\
         </style></head><body>\n<h1>cairn eval</h1>\n<p>Policy: {}; sessions: {}. {} passed, {} failed, {} could not run.</p>\n\
         <table><tr><th>scenario</th><th>result</th><th>what was checked</th><th>tokens, first → last</th><th>tokens per cycle (before, after)</th></tr>\n{rows}</table>\n{beside}</body></html>\n",
        escape(&card.policy),
        escape(&card.sessions),
        card.passed,
        card.failed,
        card.errors
    ))
}

/// Before the first compaction → after the last, and the share that went.
fn first_to_last(cycles: &[super::scenarios::Cycle]) -> String {
    let (Some(first), Some(last)) = (cycles.first(), cycles.last()) else {
        return "—".into();
    };
    let went = if first.before > 0 { format!(" (−{:.0}%)", (first.before.saturating_sub(last.after)) as f64 * 100.0 / first.before as f64) } else { String::new() };
    format!("{} → {}{went}", thousands(first.before), thousands(last.after))
}

/// One cycle: its two figures, no chart.
fn one_cycle(cycle: &super::scenarios::Cycle) -> String {
    format!("<table class=\"cycle\"><tr><th>cycle</th><th>before</th><th>after</th></tr><tr><td>1</td><td>{}</td><td>{}</td></tr></table>", thousands(cycle.before), thousands(cycle.after))
}

const BEFORE_LABEL: &str = "before compaction";
const AFTER_LABEL: &str = "after compaction";

fn chart(o: &Outcome) -> Result<String> {
    use plotters::prelude::*;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (360, 220)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
        // Headroom above the highest point keeps the legend (upper right) off the lines.
        let top = o.tokens.iter().map(|c| c.before.max(c.after)).max().unwrap_or(1) * 17 / 10;
        let cycles = o.tokens.len() as u32;
        let mut chart = ChartBuilder::on(&root).margin(8).x_label_area_size(32).y_label_area_size(56).build_cartesian_2d(0u32..cycles + 1, 0u64..top.max(1)).map_err(|e| anyhow!("{e}"))?;
        chart.configure_mesh().x_desc("cycle").y_desc("tokens").x_labels(cycles as usize + 2).draw().map_err(|e| anyhow!("{e}"))?;
        let points = |f: fn(&super::scenarios::Cycle) -> u64| o.tokens.iter().enumerate().map(move |(i, c)| (i as u32 + 1, f(c))).collect::<Vec<_>>();
        for (series, color, label) in [(points(|c| c.before), BLUE, BEFORE_LABEL), (points(|c| c.after), GREEN, AFTER_LABEL)] {
            chart
                .draw_series(LineSeries::new(series.clone(), color.stroke_width(2)))
                .map_err(|e| anyhow!("{e}"))?
                .label(label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2)));
            chart.draw_series(series.into_iter().map(|p| Circle::new(p, 3, color.filled()))).map_err(|e| anyhow!("{e}"))?;
        }
        chart.configure_series_labels().position(SeriesLabelPosition::UpperRight).background_style(WHITE.mix(0.8)).border_style(BLACK.mix(0.3)).draw().map_err(|e| anyhow!("{e}"))?;
        root.present().map_err(|e| anyhow!("{e}"))?;
    }
    Ok(svg)
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}
