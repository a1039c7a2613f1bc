//! `cairn eval`: the scorecard tells a chain that keeps what work needs from one that does not.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::support::{misbehave_plugin_dir, shared};

fn scorecard(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_cairn")).arg("eval").args(args).arg("--json").env("CAIRN_LOG", "error").output().unwrap();
    assert!(out.status.success(), "cairn eval {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Verdict by scenario name.
fn eval(args: &[&str]) -> HashMap<String, String> {
    verdicts(&scorecard(args))
}

fn verdicts(card: &Value) -> HashMap<String, String> {
    card["scenarios"].as_array().unwrap().iter().map(|s| (s["name"].as_str().unwrap().to_string(), s["verdict"].as_str().unwrap().to_string())).collect()
}

fn transcripts() -> String {
    shared("").to_str().unwrap().to_string()
}

/// What the bundled policies keep, scenario by scenario, on the recorded sessions.
const KEPT: [&str; 11] = [
    "buried-constraint",
    "failed-hypothesis",
    "stale-file-edit",
    "unique-observation",
    "long-tool-turn",
    "background-worker",
    "cache-cost",
    "model-switch",
    "protocol-sequence",
    "six-cycles",
    "full-context",
];

#[test]
#[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
fn the_bundled_policies_pass_what_they_keep() {
    let offline = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/policies/offline.toml");
    for policy in [None, Some(offline.to_str().unwrap())] {
        let mut args = vec!["--transcripts", &transcripts()].into_iter().map(str::to_string).collect::<Vec<_>>();
        if let Some(p) = policy {
            args.extend(["--policy".to_string(), p.to_string()]);
        }
        let full = scorecard(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let card = verdicts(&full);
        assert_eq!(card.len(), 11, "eleven scenarios");
        // Beside Claude Code's own summaries of the recorded sessions that compacted.
        let beside = full["beside_claude_code"].as_array().unwrap();
        assert_eq!(beside.len(), 3);
        for row in beside {
            let items = row["items"].as_u64().unwrap();
            assert!(items > 0 && row["claude_code_kept"].as_u64().unwrap() <= items && row["cairn_kept"].as_u64().unwrap() <= items, "{row}");
        }
        for name in KEPT {
            assert_eq!(card[name], "pass", "{policy:?}: {name}");
        }
    }
}

/// A chain that keeps only the recent tail, dropping the operator's requests with the rest.
#[test]
#[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
fn a_chain_that_forgets_fails_the_constraint_scenarios() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = misbehave_plugin_dir(dir.path());
    let policy = dir.path().join("forget.toml");
    std::fs::write(&policy, "[[chain]]\nplugin = \"misbehave\"\ngrants = [\"archive:read\"]\nconfig = { mode = \"forget\" }\n").unwrap();
    let scenarios = ["buried-constraint", "failed-hypothesis", "six-cycles"];
    let mut args = vec!["--transcripts".to_string(), transcripts(), "--policy".into(), policy.to_str().unwrap().into(), "--plugin-dir".into(), plugins.to_str().unwrap().into()];
    for s in scenarios {
        args.extend(["--scenario".to_string(), s.to_string()]);
    }
    let card = eval(&args.iter().map(String::as_str).collect::<Vec<_>>());
    for name in scenarios {
        assert_eq!(card[name], "fail", "{name}");
    }
}

#[test]
fn an_unknown_scenario_is_named_with_the_known_ones() {
    let out = Command::new(env!("CARGO_BIN_EXE_cairn")).args(["eval", "--scenario", "nope"]).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unknown scenario \"nope\"") && stderr.contains("six-cycles"), "{stderr}");
}

/// Without recorded sessions the scenarios run on the generated session: offline, no files.
/// The HTML report charts each scenario's cycles with a legend naming both lines, shows a
/// single-cycle scenario as its two figures (no one-point chart), and has a column with the
/// tokens before the first cycle → after the last.
#[test]
fn runs_on_the_generated_session_and_writes_a_report() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("eval.html");
    let card = scorecard(&["--scenario", "six-cycles", "--scenario", "protocol-sequence", "--report", report.to_str().unwrap()]);
    let verdict = verdicts(&card);
    assert_eq!(verdict["six-cycles"], "pass");
    assert_eq!(verdict["protocol-sequence"], "pass");
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(html.contains("<td>six-cycles</td><td>pass</td>"), "{html}");
    assert!(html.contains("<th>tokens, first → last</th>"), "{html}");
    // A scenario's row, from its name to the next scenario's row (a chart spans lines).
    let row = |name: &str| {
        let start = html.find(&format!("<td>{name}</td>")).unwrap_or_else(|| panic!("no row for {name}: {html}"));
        let end = html[start..].find("<tr class=\"").map_or(html.len(), |n| start + n);
        html[start..end].to_string()
    };
    for scenario in card["scenarios"].as_array().unwrap() {
        let tokens = scenario["tokens"].as_array().unwrap();
        let (first, last) = (tokens[0]["before"].as_u64().unwrap(), tokens[tokens.len() - 1]["after"].as_u64().unwrap());
        let span = format!("<td class=\"span\">{} → {} (", cairn_rules::thousands(first), cairn_rules::thousands(last));
        assert!(row(scenario["name"].as_str().unwrap()).contains(&span), "{span} in {html}");
    }
    // Six cycles: one chart, whose legend names both lines.
    let six = row("six-cycles");
    assert_eq!(six.matches("<svg").count(), 1, "{six}");
    assert!(six.contains("\nbefore compaction\n</text>") && six.contains("\nafter compaction\n</text>"), "the chart's legend: {six}");
    // One cycle: no empty chart, the two figures instead.
    let one = row("protocol-sequence");
    assert_eq!(one.matches("<svg").count(), 0, "no one-point chart: {one}");
    assert!(one.contains("<table class=\"cycle\"><tr><th>cycle</th><th>before</th><th>after</th></tr>"), "{one}");
    assert_eq!(html.matches("<svg").count(), 1, "a chart only where there is more than one cycle");
}

/// The agent probe asks the policy's model each scenario's question over the compacted context
/// and grades the answer; it reports apart from the deterministic verdicts.
#[test]
fn the_agent_probe_grades_what_the_model_answers_over_the_compacted_context() {
    use crate::support::loopback::{openai_reply, Loopback, Reply};
    // A model that reads its context back whole, and one that finds nothing in it.
    let reader = Loopback::start(|_, request| {
        let body: Value = serde_json::from_str(&request.body).unwrap();
        Reply::ok(openai_reply(body["messages"][1]["content"].as_str().unwrap()))
    });
    let blind = Loopback::start(|_, _| Reply::ok(openai_reply("not in my context")));
    let dir = tempfile::tempdir().unwrap();
    for (name, model, answers) in [("reader", &reader, true), ("blind", &blind, false)] {
        let policy = dir.path().join(format!("{name}.toml"));
        std::fs::write(&policy, format!("{}\n[model]\nprovider = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"fake\"\n", cairn::policy::DEFAULT_POLICY, model.base_url)).unwrap();
        let report = dir.path().join(format!("{name}.html"));
        let card = scorecard(&[
            "--policy",
            policy.to_str().unwrap(),
            "--probe",
            "--report",
            report.to_str().unwrap(),
            "--scenario",
            "buried-constraint",
            "--scenario",
            "background-worker",
            "--scenario",
            "stale-file-edit",
        ]);
        let html = std::fs::read_to_string(&report).unwrap();
        assert_eq!(html.matches(if answers { "Agent probe: pass" } else { "Agent probe: FAIL" }).count(), 2, "{name}: the page shows each answer");
        for scenario in card["scenarios"].as_array().unwrap() {
            assert_eq!(scenario["verdict"], "pass", "the probe does not change the verdict: {scenario}");
            match scenario["name"].as_str().unwrap() {
                // No question for this one.
                "stale-file-edit" => assert!(scenario.get("probe").is_none(), "{scenario}"),
                _ => {
                    let probe = &scenario["probe"];
                    assert_eq!(probe["passed"], answers, "{name}: {probe}");
                    assert_eq!(probe["missing"].as_array().is_none(), answers, "{name}: {probe}");
                }
            }
        }
        assert_eq!(model.count(), 2, "{name}: one question per scenario that has one");
    }
    // Without a model there is nothing to ask: a clear error, not a silent skip.
    let out = Command::new(env!("CARGO_BIN_EXE_cairn")).args(["eval", "--probe", "--scenario", "buried-constraint"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("has no [model] section"), "{}", String::from_utf8_lossy(&out.stderr));
}

/// At a budget of 5,000 tokens (about Claude Code's own summary budget) every scenario still
/// keeps what it checks, and no compaction ends above the budget (`eval` fails a scenario that
/// does).
#[test]
#[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
fn every_scenario_passes_within_a_budget_of_5000_tokens() {
    let full = scorecard(&["--transcripts", &transcripts(), "--budget", "5000"]);
    assert_eq!(full["budget"], 5000);
    for scenario in full["scenarios"].as_array().unwrap() {
        assert_eq!(scenario["verdict"], "pass", "{}", serde_json::to_string_pretty(scenario).unwrap());
        for cycle in scenario["tokens"].as_array().unwrap() {
            assert!(cycle["after"].as_u64().unwrap() <= 5000, "{}: {cycle}", scenario["name"]);
        }
    }
}

/// `compaction-conformance-kit` (PyPI, pinned; `.ci/run` installs it), Cairn's own output fed
/// back every round: every goal met — the seeded session kept to round 5, every budget fitted,
/// survival and superseded values at 20 and 30 %, the generated corpus.
#[test]
fn the_conformance_kit_misses_no_goal() {
    let python = Command::new("python3").args(["-c", "import compaction_kit"]).output();
    if !python.is_ok_and(|o| o.status.success()) {
        assert!(std::env::var_os("CI").is_none(), "CI installs the kit: python3 -m pip install -r host/cli/src/commands/eval/kit/requirements.txt");
        eprintln!("skipped: the conformance kit is not installed");
        return;
    }
    let card = scorecard(&["--scenario", "six-cycles", "--kit"]);
    let kit = &card["conformance_kit"];
    assert_eq!(kit["missed"], serde_json::json!([]), "{}", serde_json::to_string_pretty(&kit["seeded"]).unwrap());
    // The adapter measured Cairn beside the kit's own compactors.
    assert!(kit["benchmark"]["entries"].as_array().unwrap().iter().any(|e| e["compactor"] == "pinned-rules"));
}
