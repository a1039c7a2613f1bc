//! 8. Compact, then render the context for Anthropic and for OpenAI: both valid for their API
//!    (the first message the user's and roles alternating for Anthropic, every call answered
//!    right after it, no blocks of the other provider).

use serde_json::Value;

use super::{Cycle, Scenario, Score};
use crate::commands::eval::Lab;
use cairn::transcript::formats;

pub struct ModelSwitch;

impl Scenario for ModelSwitch {
    fn name(&self) -> &'static str {
        "model-switch"
    }

    fn run(&self, lab: &Lab) -> anyhow::Result<Score> {
        let (session, base) = lab.session("pi")?;
        let report = lab.compact("model-switch", &base)?;
        let cycles = vec![Cycle::from(&report)];
        let anthropic: Value = serde_json::from_str(&formats::write_anthropic(&report.transcript))?;
        let openai: Value = serde_json::from_str(&formats::write_openai(&report.transcript))?;
        let problems: Vec<String> = anthropic_problems(&anthropic).into_iter().map(|p| format!("anthropic: {p}")).chain(openai_problems(&openai).into_iter().map(|p| format!("openai: {p}"))).collect();
        Ok(match problems.first() {
            None => Score::new(true, format!("{session}: valid as an Anthropic request and as OpenAI chat"), cycles),
            Some(first) => Score::new(false, format!("{session}: {} problems, first: {first}", problems.len()), cycles),
        })
    }
}

fn anthropic_problems(body: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    if messages.first().is_some_and(|m| m["role"] != "user") {
        problems.push("the first message is not the user's".into());
    }
    for (i, pair) in messages.windows(2).enumerate() {
        if pair[0]["role"] == pair[1]["role"] {
            problems.push(format!("messages {i} and {} share a role", i + 1));
        }
    }
    for (i, m) in messages.iter().enumerate() {
        let blocks = m["content"].as_array().cloned().unwrap_or_default();
        for b in &blocks {
            let kind = b["type"].as_str().unwrap_or_default();
            if !["text", "tool_use", "tool_result"].contains(&kind) {
                problems.push(format!("message {i} has a {kind:?} block"));
            }
        }
        let calls: Vec<&str> = blocks.iter().filter(|b| b["type"] == "tool_use").filter_map(|b| b["id"].as_str()).collect();
        if calls.is_empty() {
            continue;
        }
        let next: Vec<Value> = messages.get(i + 1).and_then(|n| n["content"].as_array().cloned()).unwrap_or_default();
        let answered: Vec<&str> = next.iter().take_while(|b| b["type"] == "tool_result").filter_map(|b| b["tool_use_id"].as_str()).collect();
        for call in calls {
            if !answered.contains(&call) {
                problems.push(format!("tool_use {call} is not answered at the head of the next message"));
            }
        }
    }
    problems
}

fn openai_problems(messages: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let messages = messages.as_array().cloned().unwrap_or_default();
    for (i, m) in messages.iter().enumerate() {
        if m.to_string().contains("\"tool_use\"") || m.to_string().contains("\"tool_result\"") {
            problems.push(format!("message {i} carries Anthropic blocks"));
        }
        let calls: Vec<&str> = m["tool_calls"].as_array().into_iter().flatten().filter_map(|c| c["id"].as_str()).collect();
        let answered: Vec<&str> = messages[i + 1..].iter().take_while(|n| n["role"] == "tool").filter_map(|n| n["tool_call_id"].as_str()).collect();
        for call in calls {
            if !answered.contains(&call) {
                problems.push(format!("tool call {call} is not answered right after message {i}"));
            }
        }
    }
    problems
}
