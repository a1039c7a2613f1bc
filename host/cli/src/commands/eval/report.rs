//! `cairn eval --report FILE.html`: the scorecard as one self-contained page, with a chart of
//! the context's tokens before and after each compaction cycle, per scenario.

use anyhow::{anyhow, Result};

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
        rows.push_str(&format!(
            "<tr class=\"{class}\"><td>{}</td><td>{}</td><td>{}{probe}</td><td>{}</td></tr>\n",
            escape(o.name),
            o.verdict.word(),
            escape(&o.detail),
            if o.tokens.is_empty() { String::new() } else { chart(o)? }
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
         </style></head><body>\n<h1>cairn eval</h1>\n<p>Policy: {}; sessions: {}. {} passed, {} failed, {} could not run.</p>\n\
         <table><tr><th>scenario</th><th>result</th><th>what was checked</th><th>tokens per cycle (before, after)</th></tr>\n{rows}</table>\n{beside}</body></html>\n",
        escape(&card.policy),
        escape(&card.sessions),
        card.passed,
        card.failed,
        card.errors
    ))
}

fn chart(o: &Outcome) -> Result<String> {
    use plotters::prelude::*;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (360, 180)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
        let top = o.tokens.iter().map(|c| c.before.max(c.after)).max().unwrap_or(1) * 11 / 10;
        let cycles = o.tokens.len() as u32;
        let mut chart = ChartBuilder::on(&root).margin(8).x_label_area_size(24).y_label_area_size(56).build_cartesian_2d(0u32..cycles + 1, 0u64..top.max(1)).map_err(|e| anyhow!("{e}"))?;
        chart.configure_mesh().x_desc("cycle").x_labels(cycles as usize + 2).draw().map_err(|e| anyhow!("{e}"))?;
        let points = |f: fn(&super::scenarios::Cycle) -> u64| o.tokens.iter().enumerate().map(move |(i, c)| (i as u32 + 1, f(c))).collect::<Vec<_>>();
        for (series, color) in [(points(|c| c.before), BLUE), (points(|c| c.after), GREEN)] {
            chart.draw_series(LineSeries::new(series.clone(), color.stroke_width(2))).map_err(|e| anyhow!("{e}"))?;
            chart.draw_series(series.into_iter().map(|p| Circle::new(p, 3, color.filled()))).map_err(|e| anyhow!("{e}"))?;
        }
        root.present().map_err(|e| anyhow!("{e}"))?;
    }
    Ok(svg)
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}
