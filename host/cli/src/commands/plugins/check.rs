//! `cairn plugins check FILE.wasm`: the plugin author's friend. It diagnoses the file before
//! trusting its manifest (component or core module, world, imports against the manifest),
//! prints the grants a policy must give, then runs the plugin through a host on built-in
//! sample sessions under the host's invariants and prints each case's outcome.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use cairn::inspect::{BinaryKind, Import, Inspection};
use cairn::record::{AgentRequest, Boundary, CommitDecision, OutcomeClass, Proposal, RequestKind, TriggerDecision, TriggerInput};
use cairn::storage::{ConversationKey, Home};
use cairn::transcript::{sample, Transcript};
use cairn::{Cairn, CheckedPolicy, Manifest, World};
use cairn_rules::thousands;
use serde::Serialize;

#[derive(clap::Args)]
pub struct Args {
    /// The component to check.
    file: PathBuf,
    /// Its manifest [default: `<file>.toml` beside it, else `cairn-plugin.toml` in its folder or the one above].
    #[arg(long)]
    manifest: Option<PathBuf>,
    /// The plugin's config for the sample runs (JSON), as a policy step would give it.
    #[arg(long)]
    config: Option<String>,
    /// The step's memory cap, as in a policy.
    #[arg(long, default_value_t = 128)]
    memory_mib: u64,
    /// The step's deadline, as in a policy.
    #[arg(long, default_value_t = 10_000)]
    timeout_ms: u64,
    /// Print one JSON object for scripts.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Level {
    Ok,
    Warning,
    Error,
}

#[derive(Serialize)]
struct Finding {
    level: Level,
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    fix: Option<String>,
}

#[derive(Serialize)]
struct Case {
    name: &'static str,
    passed: bool,
    outcome: String,
    detail: String,
    millis: u64,
}

#[derive(Serialize, Default)]
struct Report {
    file: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    plugin: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    world: Option<World>,
    /// The `cairn:compaction` version the component was built against.
    #[serde(skip_serializing_if = "Option::is_none")]
    contract: Option<String>,
    findings: Vec<Finding>,
    /// The `grants` a policy step running this plugin needs.
    grants: Vec<&'static str>,
    cases: Vec<Case>,
    passed: bool,
}

impl Report {
    fn add(&mut self, level: Level, message: impl Into<String>, fix: Option<String>) {
        self.findings.push(Finding { level, message: message.into(), fix });
    }

    fn has_errors(&self) -> bool {
        self.findings.iter().any(|f| f.level == Level::Error)
    }
}

pub fn run(args: Args) -> Result<()> {
    let report = check(&args)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_text(&report);
    }
    if !report.passed {
        let errors = report.findings.iter().filter(|f| f.level == Level::Error).count();
        let failed = report.cases.iter().filter(|c| !c.passed).count();
        bail!("{}: {errors} error(s), {failed} failing case(s)", report.file);
    }
    Ok(())
}

fn check(args: &Args) -> Result<Report> {
    let file = args.file.display().to_string();
    let mut report = Report { file: file.clone(), ..Report::default() };
    let bytes = std::fs::read(&args.file).with_context(|| format!("reading {file}"))?;
    match BinaryKind::of(&bytes) {
        BinaryKind::Component => {}
        BinaryKind::CoreModule => {
            report.add(
                Level::Error,
                "this is a core Wasm module, not a component: the host loads only components",
                Some("build it with `cairn plugins build` (a Rust cdylib is turned into a component), or run `wasm-tools component new FILE -o OUT`".into()),
            );
            return Ok(report);
        }
        BinaryKind::NotWasm => {
            report.add(Level::Error, "not a Wasm binary (no `\\0asm` header)", None);
            return Ok(report);
        }
    }
    let mut cairn = Cairn::new()?;
    let inspection = match cairn.inspect(&bytes) {
        Ok(inspection) => inspection,
        Err(e) => {
            report.add(Level::Error, format!("the component does not compile: {e:#}"), None);
            return Ok(report);
        }
    };

    let Some((manifest_path, manifest_text)) = find_manifest(args)? else {
        report.add(Level::Error, "no manifest found", Some(format!("copy the project's cairn-plugin.toml beside it as {}, or pass --manifest", args.file.with_extension("toml").display())));
        return Ok(report);
    };
    let manifest = match Manifest::parse(&manifest_text, &manifest_path) {
        Ok(manifest) => manifest,
        Err(e) => {
            report.add(Level::Error, format!("{e:#}"), None);
            return Ok(report);
        }
    };
    report.plugin = Some(manifest.label());
    report.world = inspection.world;
    report.contract = inspection.contract.clone();
    report.add(Level::Ok, format!("manifest {manifest_path}: {} `{}`", manifest.kind, manifest.label()), None);
    check_contract(&mut report, &inspection, &bytes);
    check_world(&mut report, &manifest, &inspection);
    check_imports(&mut report, &manifest, &inspection);
    report.grants = manifest.capabilities.iter().map(|c| grant(c)).collect();
    if !manifest.optional_capabilities.is_empty() {
        let optional: Vec<&str> = manifest.optional_capabilities.iter().map(|c| grant(c)).collect();
        report.add(Level::Ok, format!("optional (a policy may leave them ungranted): {}", optional.join(", ")), None);
    }
    if report.has_errors() {
        return Ok(report);
    }

    if let Err(e) = cairn.add_plugin(&manifest_text, &bytes, &file) {
        report.add(Level::Error, format!("the host refuses it: {e:#}"), None);
        return Ok(report);
    }
    let policy = match cairn.load_policy(&policy_text(&manifest, &report.grants, args)?, "<plugins check>") {
        Ok(policy) => policy,
        Err(e) => {
            report.add(Level::Error, format!("{e:#}"), Some("--config must be what the plugin accepts as its config".into()));
            return Ok(report);
        }
    };
    report.cases = match manifest.kind {
        World::Strategy => strategy_cases(&cairn, &policy)?,
        World::Trigger => trigger_cases(&cairn, &policy),
        World::CommitPolicy => commit_cases(&cairn, &policy),
    };
    report.passed = !report.has_errors() && report.cases.iter().all(|c| c.passed);
    Ok(report)
}

/// `--manifest`, else `<file>.toml`, else `cairn-plugin.toml` in the file's folder or its parent
/// (a project's `dist/` sits below its manifest).
fn find_manifest(args: &Args) -> Result<Option<(String, String)>> {
    let dir = args.file.parent().unwrap_or(Path::new("."));
    let candidates: Vec<PathBuf> = match &args.manifest {
        Some(path) => vec![path.clone()],
        None => vec![args.file.with_extension("toml"), dir.join("cairn-plugin.toml"), dir.join("../cairn-plugin.toml")],
    };
    for path in candidates {
        if path.is_file() || args.manifest.is_some() {
            let text = std::fs::read_to_string(&path).with_context(|| format!("reading manifest {}", path.display()))?;
            return Ok(Some((path.display().to_string(), text)));
        }
    }
    Ok(None)
}

fn world_export(world: World) -> &'static str {
    match world {
        World::Strategy => "compact(history, request)",
        World::Trigger => "decide(input)",
        World::CommitPolicy => "decide(boundary, proposal)",
    }
}

fn check_world(report: &mut Report, manifest: &Manifest, inspection: &Inspection) {
    match inspection.world {
        None => report.add(
            Level::Error,
            format!("it exports none of the functions the host calls (it exports: {})", list_or_nothing(&inspection.exports)),
            Some(format!("a {} exports `{}`: build against world `{}` of wit/0.2.0", manifest.kind, world_export(manifest.kind), manifest.kind)),
        ),
        Some(world) if world != manifest.kind => report.add(
            Level::Error,
            format!("the manifest says kind = \"{}\" but the component exports the `{world}` world's `{}`", manifest.kind, world_export(world)),
            Some(format!("set kind = \"{world}\" in the manifest, or build against world `{}`", manifest.kind)),
        ),
        Some(world) => report.add(Level::Ok, format!("exports the `{world}` world: {}", inspection.exports.join(", ")), None),
    }
}

/// Which contract version it speaks; the host links each of `CONTRACT_VERSIONS`. An older
/// contract is never an error, and the fix offered is one that works for the component's
/// language: the JavaScript SDK builds strategies for 0.1.0 on purpose.
fn check_contract(report: &mut Report, inspection: &Inspection, bytes: &[u8]) {
    let newest = cairn::CONTRACT_VERSIONS.last().copied().unwrap_or_default();
    match inspection.contract.as_deref() {
        Some(version) if version == newest => report.add(Level::Ok, format!("built against contract cairn:compaction@{version}"), None),
        Some(version) if cairn::CONTRACT_VERSIONS.contains(&version) => {
            let supported = format!("built against contract cairn:compaction@{version}, which this host links (as it does @{newest}); it keeps working");
            let lent = format!("@{newest} lends a strategy the conversation instead of copying every entry into the component at each call");
            match (inspection.world, cairn::inspect::built_by_quickjs(bytes)) {
                (Some(World::Strategy), true) => report.add(
                    Level::Ok,
                    format!("{supported}. The JavaScript SDK builds strategies for @{version} on purpose ({lent}, but componentize-qjs cannot yet end such a call), so there is nothing to rebuild"),
                    None,
                ),
                (Some(World::Strategy), false) => report.add(
                    Level::Warning,
                    format!("{supported}, but every entry crosses into the component at each call"),
                    Some(format!("optional: {lent}; the Rust and Python SDKs build @{newest} strategies (`cairn plugins build`); the JavaScript SDK builds @{version} ones for now")),
                ),
                _ => report.add(
                    Level::Warning,
                    supported,
                    Some(format!("optional: rebuild with the current SDK (Rust, Python and JavaScript all build @{newest} {}s)", inspection.world.map_or("plugin".to_string(), |w| w.to_string()))),
                ),
            }
        }
        Some(version) => report.add(Level::Error, format!("built against contract cairn:compaction@{version}, which this host does not link"), Some(format!("rebuild against wit/{newest}"))),
        None => report.add(Level::Ok, "imports nothing of cairn:compaction (a contract version is not named)", None),
    }
}

fn check_imports(report: &mut Report, manifest: &Manifest, inspection: &Inspection) {
    for import in &inspection.imports {
        match import {
            Import::Capability { interface, name } if !manifest.declares(interface) => report.add(
                Level::Error,
                format!("it imports `{name}` but the manifest does not declare the `{interface}` capability"),
                Some(format!("add \"{interface}\" to `capabilities` (or to `optional_capabilities` if it works without it)")),
            ),
            Import::Other { name } => report.add(
                Level::Error,
                format!("it imports `{name}`, which no Cairn world provides"),
                Some("remove what pulls it in: plugins get only log, tokens, model, archive, a strategy its lent conversation (and WASI, denied everything)".into()),
            ),
            _ => {}
        }
    }
    let imported: Vec<&str> = inspection.capabilities().collect();
    for declared in manifest.capabilities.iter().chain(&manifest.optional_capabilities) {
        if !imported.contains(&declared.as_str()) {
            report.add(
                Level::Warning,
                format!("the manifest declares `{declared}` but the component never imports it"),
                Some(format!("remove \"{declared}\" from the manifest, so no policy has to grant it")),
            );
        }
    }
    let wasi: Vec<&str> = inspection.wasi().collect();
    if !wasi.is_empty() {
        report.add(
            Level::Warning,
            format!(
                "it imports {} WASI interfaces ({}{}): the host links them denying everything (no files, network or environment; clocks end at the call's deadline)",
                wasi.len(),
                wasi.iter().take(3).copied().collect::<Vec<_>>().join(", "),
                if wasi.len() > 3 { ", …" } else { "" }
            ),
            Some("expected for Python and JavaScript plugins; a Rust plugin built for wasm32-unknown-unknown (as `cairn plugins build` does) imports none".into()),
        );
    }
    if !imported.is_empty() {
        report.add(Level::Ok, format!("capabilities imported: {}", imported.join(", ")), None);
    }
}

fn list_or_nothing(items: &[String]) -> String {
    if items.is_empty() {
        "nothing".into()
    } else {
        items.join(", ")
    }
}

/// The grant a capability needs; `archive` is granted as `archive:write` (which includes
/// reading; a read-only plugin can do with `archive:read`).
fn grant(capability: &str) -> &'static str {
    match capability {
        "log" => "log",
        "tokens" => "tokens",
        "model" => "model",
        _ => "archive:write",
    }
}

/// A policy running just this plugin, in the slot its world takes.
fn policy_text(manifest: &Manifest, grants: &[&str], args: &Args) -> Result<String> {
    #[derive(Serialize)]
    struct Step<'a> {
        plugin: &'a str,
        grants: &'a [&'a str],
        memory_mib: u64,
        timeout_ms: u64,
        config: toml::Table,
    }
    #[derive(Serialize, Default)]
    struct Doc<'a> {
        #[serde(skip_serializing_if = "Vec::is_empty")]
        chain: Vec<Step<'a>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        trigger: Option<Step<'a>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        commit: Option<Step<'a>>,
    }
    let config = match &args.config {
        None => toml::Table::new(),
        Some(json) => {
            let value: serde_json::Value = serde_json::from_str(json).context("--config is not JSON")?;
            match toml::Value::try_from(value).context("--config cannot be a policy config (null values?)")? {
                toml::Value::Table(table) => table,
                _ => bail!("--config must be a JSON object"),
            }
        }
    };
    let step = Step { plugin: &manifest.name, grants, memory_mib: args.memory_mib, timeout_ms: args.timeout_ms, config };
    let doc = match manifest.kind {
        World::Strategy => Doc { chain: vec![step], ..Doc::default() },
        World::Trigger => Doc { trigger: Some(step), ..Doc::default() },
        World::CommitPolicy => Doc { commit: Some(step), ..Doc::default() },
    };
    Ok(toml::to_string(&doc)?)
}

fn strategy_cases(cairn: &Cairn, policy: &CheckedPolicy) -> Result<Vec<Case>> {
    let temp = tempfile::tempdir()?;
    let home = Home::open(temp.path())?;
    let mut store = home.conversation(&ConversationKey::parse("plugins-check")?)?;
    let mut run = |name: &'static str, transcript: &Transcript| -> Result<(Case, Transcript)> {
        let started = Instant::now();
        let report = cairn.compact(policy, &mut store, transcript, name)?;
        let step = &report.steps[0];
        // A strategy may find nothing to do or lack a model; what it may never do is trap, time
        // out, exhaust memory, break an invariant or return garbage.
        let passed = matches!(step.outcome, OutcomeClass::Ok | OutcomeClass::NoProgress | OutcomeClass::Unavailable);
        let mut detail = match step.outcome {
            OutcomeClass::Ok => format!("{} → {} tokens", thousands(report.tokens_before), thousands(report.tokens_after)),
            _ => format!("{} tokens, unchanged by the plugin", thousands(report.tokens_before)),
        };
        if let Some(message) = &step.message {
            detail.push_str(&format!(": {message}"));
        }
        if !step.refused.is_empty() {
            detail.push_str(&format!(" (refused: {})", step.refused.join(", ")));
        }
        let case = Case { name, passed, outcome: step.outcome.to_string(), detail, millis: started.elapsed().as_millis() as u64 };
        Ok((case, report.transcript))
    };
    let (long, compacted) = run("a 30-turn coding session", &sample::coding_session(30))?;
    let (again, _) = run("the same session, compacted again", &compacted)?;
    let (short, _) = run("a 2-turn session", &sample::coding_session(2))?;
    Ok(vec![long, again, short])
}

fn trigger_cases(cairn: &Cairn, policy: &CheckedPolicy) -> Vec<Case> {
    let step = policy.trigger.as_ref().expect("a trigger policy");
    let input =
        |context: Option<u64>| TriggerInput { context_tokens: context, window: 200_000, reserve: 16_384, turn: 40, turns_since_maintenance: Some(30), cooldown_left: 0, pending: None, recent: vec![] };
    let cases: Vec<(&'static str, TriggerInput)> = vec![
        ("usage unknown", input(None)),
        ("30% of the window", input(Some(60_000))),
        ("80% of the window", input(Some(160_000))),
        ("95% of the window", input(Some(190_000))),
        ("the agent asked to compact, 50%", TriggerInput { pending: Some(request()), ..input(Some(100_000)) }),
        ("in cooldown at 95%", TriggerInput { cooldown_left: 3, ..input(Some(190_000)) }),
    ];
    cases
        .into_iter()
        .map(|(name, input)| {
            let started = Instant::now();
            let answer = cairn.ask_trigger(step, &input, policy.compaction.breaker());
            let millis = started.elapsed().as_millis() as u64;
            match answer {
                Ok(decision) => {
                    let acts = !matches!(decision, TriggerDecision::None | TriggerDecision::Advise(_));
                    // With no usage figure the contract says no automatic action.
                    let passed = !(input.context_tokens.is_none() && input.pending.is_none() && acts);
                    let mut detail = trigger_words(&decision);
                    if !passed {
                        detail.push_str(" — with usage unknown a trigger must not act");
                    }
                    Case { name, passed, outcome: "ok".into(), detail, millis }
                }
                Err(e) => Case { name, passed: false, outcome: e.class().to_string(), detail: e.message().to_string(), millis },
            }
        })
        .collect()
}

fn trigger_words(decision: &TriggerDecision) -> String {
    match decision {
        TriggerDecision::None => "none".into(),
        TriggerDecision::Advise(why) => format!("advise: {why}"),
        TriggerDecision::Compact(why) => format!("compact: {why}"),
        TriggerDecision::Handover(why) => format!("handover: {why}"),
    }
}

fn request() -> AgentRequest {
    AgentRequest { kind: RequestKind::Compact, preserve: "the failing test name".into(), resume: "rerun the tests".into() }
}

fn commit_cases(cairn: &Cairn, policy: &CheckedPolicy) -> Vec<Case> {
    let step = policy.commit.as_ref().expect("a commit policy");
    let boundary = |turn_complete, tool_call_outstanding| Boundary { turn: 40, turn_complete, tool_call_outstanding };
    let proposal = |kept: &[&str]| Proposal {
        strategy: "shake-elide".into(),
        tokens_before: 150_000,
        tokens_after: 60_000,
        replaced_ids: (3..40).map(|i| format!("e{i}")).collect(),
        kept_summary_ids: kept.iter().map(|s| s.to_string()).collect(),
    };
    let cases = vec![
        ("turn complete, nothing running", boundary(true, false), proposal(&[])),
        ("a tool call still running", boundary(true, true), proposal(&[])),
        ("the turn not complete", boundary(false, false), proposal(&[])),
        ("an earlier summary in the kept range", boundary(true, false), proposal(&["s1"])),
    ];
    cases
        .into_iter()
        .map(|(name, boundary, proposal)| {
            let started = Instant::now();
            let answer = cairn.ask_commit(step, &boundary, &proposal, policy.compaction.breaker());
            let millis = started.elapsed().as_millis() as u64;
            match answer {
                Ok(decision) => {
                    let mut detail = match &decision {
                        CommitDecision::Commit => "commit".to_string(),
                        CommitDecision::Defer(why) => format!("defer: {why}"),
                        CommitDecision::Reject(why) => format!("reject: {why}"),
                    };
                    if boundary.tool_call_outstanding && decision == CommitDecision::Commit {
                        detail.push_str(" — warning: swapping while a tool call runs can leave its result with no call");
                    }
                    Case { name, passed: true, outcome: "ok".into(), detail, millis }
                }
                Err(e) => Case { name, passed: false, outcome: e.class().to_string(), detail: e.message().to_string(), millis },
            }
        })
        .collect()
}

fn print_text(report: &Report) {
    let title = match (&report.plugin, report.world) {
        (Some(plugin), Some(world)) => format!("plugin {plugin} ({world})"),
        (Some(plugin), None) => format!("plugin {plugin}"),
        _ => "plugin".into(),
    };
    println!("{title} — {}", report.file);
    for finding in &report.findings {
        let level = match finding.level {
            Level::Ok => "ok",
            Level::Warning => "warning",
            Level::Error => "error",
        };
        println!("  {level:<8} {}", finding.message);
        if let Some(fix) = &finding.fix {
            println!("  {:<8} fix: {fix}", "");
        }
    }
    if !report.grants.is_empty() || report.plugin.is_some() {
        let grants: Vec<String> = report.grants.iter().map(|g| format!("\"{g}\"")).collect();
        println!("  {:<8} a policy step needs: grants = [{}]", "grants", grants.join(", "));
    }
    if !report.cases.is_empty() {
        println!("sample runs:");
        for case in &report.cases {
            let mark = if case.passed { "pass" } else { "FAIL" };
            println!("  {mark:<5} {:<38} {:<12} {} ({} ms)", case.name, case.outcome, case.detail, case.millis);
        }
    }
    let warnings = report.findings.iter().filter(|f| f.level == Level::Warning).count();
    let verdict = if report.passed { "passed" } else { "failed" };
    println!("{verdict}: {} case(s), {warnings} warning(s)", report.cases.len());
}
