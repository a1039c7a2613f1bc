//! `cairn doctor`: checks the whole setup and names each broken piece, one line per check
//! (`ok`, `warn`, `fail`), or one JSON object with `--json`; exits non-zero when a check fails.
//! - `path`: `cairn` on PATH, and its version beside this binary's;
//! - `hooks`: Cairn's Claude Code hooks in the user's `~/.claude/settings.json` and, with
//!   `--project DIR`, in `DIR/.claude/settings.json` and `DIR/.claude/settings.local.json`: each
//!   hook's binary exists and is executable, its `--home` is (or can be made) a writable
//!   directory, its `--policy` parses against the bundled plugins;
//! - `mcp`: the `cairn` MCP server (`DIR/.mcp.json`, `~/.claude.json`'s `mcpServers` and its
//!   entry for the project) runs an existing binary on the hooks' home: on another home the
//!   agent's `session_history` would not see what the hooks archive;
//! - `codex`, `gemini`, `opencode`: the same for Cairn in Codex (`$CODEX_HOME/config.toml`,
//!   else `~/.codex/config.toml`), Gemini CLI (`~/.gemini/settings.json`, with `--project` its
//!   `.gemini/settings.json`) and OpenCode (with `--project`, its `opencode.json` and Cairn's
//!   plugin in `.opencode/plugin/`), said only for an agent where Cairn is set up; then the
//!   Claude Code checks do not warn that Cairn is missing there;
//! - `home`: the home (`--home`, else `$CAIRN_HOME`, else the default) is, or can be made, a
//!   writable directory;
//! - `cache`: where compiled plugin code is cached, whether it is writable, its size, and
//!   whether it is warm (every bundled plugin compiled for this binary: else the first start
//!   compiles for seconds, and an agent that does not wait starts without Cairn's tools);
//! - `hook-failures`: the last hooks that failed, from every home above (`hook_failures`).
//!
//! Doctor changes nothing of the setup (loading a hook's policy may fill the compiled-code
//! cache).

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use cairn::storage;
use serde::Serialize;
use serde_json::{json, Value};

use crate::{hook_failures, setup};

#[derive(clap::Args)]
pub struct Args {
    /// A project whose `.claude/settings.json`, `.claude/settings.local.json`, `.mcp.json`,
    /// `.gemini/settings.json`, `opencode.json` and OpenCode plugin are checked too.
    #[arg(long)]
    project: Option<PathBuf>,
    /// The home to check [default: $CAIRN_HOME, else ~/.local/share/cairn].
    #[arg(long)]
    home: Option<PathBuf>,
    /// Print one JSON object (`{"ok", "checks": [{"check", "status", "message"}]}`).
    #[arg(long)]
    json: bool,
}

/// How many recorded hook failures are shown per home.
const SHOWN_FAILURES: usize = 5;

#[derive(Serialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Status {
    Ok,
    Warn,
    Fail,
}

#[derive(Serialize)]
struct Check {
    check: &'static str,
    status: Status,
    message: String,
}

#[derive(Default)]
struct Checks(Vec<Check>);

impl Checks {
    fn add(&mut self, check: &'static str, status: Status, message: impl Into<String>) {
        self.0.push(Check { check, status, message: message.into() });
    }
}

/// A Cairn hook found in a settings file.
struct Hook {
    settings: PathBuf,
    event: String,
    home: PathBuf,
}

pub fn run(args: Args) -> Result<()> {
    let mut checks = Checks::default();
    let user = std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
    let project = args.project.as_deref().map(std::path::absolute).transpose()?;
    // Looked up first: checking a hook's policy below compiles what it loads.
    let cold = cold_bundled_plugins();
    on_path(&mut checks);
    // The other agents are looked at first (whether Cairn is set up anywhere decides what the
    // Claude Code checks say) and listed after them.
    let mut others = Checks::default();
    let (other_hooks, elsewhere) = other_agents(&mut others, user.as_deref(), project.as_deref());
    let found = installed_agents(user.as_deref());
    // Claude Code's missing setup is news only where Claude Code is.
    let quiet = elsewhere || !found.iter().any(|a| a.name == "Claude Code");
    let mut hooks = hooks(&mut checks, user.as_deref(), project.as_deref(), quiet);
    mcp(&mut checks, user.as_deref(), project.as_deref(), &hooks, quiet);
    if hooks.is_empty() && !elsewhere {
        agents_without_cairn(&mut checks, &found);
    }
    checks.0.append(&mut others.0);
    hooks.extend(other_hooks);
    let home = setup::home_path(args.home);
    check_home(&mut checks, &home);
    cache(&mut checks, cold);
    let mut homes = vec![home];
    for hook in &hooks {
        if !homes.iter().any(|h| same_path(h, &hook.home)) {
            homes.push(hook.home.clone());
        }
    }
    // Where a hook records its failure when its database cannot be reached.
    let fallback = setup::default_home();
    if homes.iter().any(|h| storage::is_database(h)) && !homes.iter().any(|h| same_path(h, &fallback)) {
        homes.push(fallback);
    }
    failures(&mut checks, &homes);

    let failed = checks.0.iter().filter(|c| c.status == Status::Fail).count();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&json!({"ok": failed == 0, "checks": checks.0}))?);
    } else {
        for c in &checks.0 {
            let status = match c.status {
                Status::Ok => "ok",
                Status::Warn => "warn",
                Status::Fail => "fail",
            };
            println!("{status:<4}  {}: {}", c.check, c.message);
        }
    }
    if failed > 0 {
        bail!("{failed} of {} checks failed", checks.0.len());
    }
    Ok(())
}

/// An agent Cairn works in, as this machine shows it.
struct KnownAgent {
    name: &'static str,
    /// Its command, looked for on PATH.
    command: &'static str,
    /// Its folder in the user's home.
    folder: &'static str,
    /// How Cairn is set up in it.
    setup: &'static str,
}

const KNOWN_AGENTS: &[KnownAgent] = &[
    KnownAgent { name: "Claude Code", command: "claude", folder: ".claude", setup: "`cairn claude-code install`" },
    KnownAgent { name: "Codex", command: "codex", folder: ".codex", setup: "`cairn codex install`" },
    KnownAgent { name: "Gemini CLI", command: "gemini", folder: ".gemini", setup: "`cairn gemini install`" },
    KnownAgent { name: "OpenCode", command: "opencode", folder: ".config/opencode", setup: "`cairn opencode install --project DIR`" },
    KnownAgent { name: "Pi", command: "pi", folder: ".pi", setup: "the extension in examples/pi-extension (see docs/src/agents/pi.md)" },
];

/// The agents this machine has: their command on PATH, or their folder in the user's home.
fn installed_agents(user: Option<&Path>) -> Vec<&'static KnownAgent> {
    let path: Vec<PathBuf> = std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
    KNOWN_AGENTS.iter().filter(|a| path.iter().any(|d| executable(&d.join(a.command))) || user.is_some_and(|u| u.join(a.folder).is_dir())).collect()
}

/// Cairn is set up in no agent: which agents are here, and how to set Cairn up in each.
fn agents_without_cairn(checks: &mut Checks, found: &[&KnownAgent]) {
    if found.is_empty() {
        let names: Vec<&str> = KNOWN_AGENTS.iter().map(|a| a.name).collect();
        checks.add(
            "agents",
            Status::Warn,
            format!("no supported agent found on this machine ({}: by command on PATH or folder in the home directory); see docs/src/agents/ for how to set each up", names.join(", ")),
        );
        return;
    }
    let each: Vec<String> = found.iter().map(|a| format!("{}: {}", a.name, a.setup)).collect();
    checks.add("agents", Status::Warn, format!("Cairn is set up in none of the agents found here; {}", each.join("; ")));
}

fn on_path(checks: &mut Checks) {
    const INSTALL: &str = "install it with `cargo install --locked --path host/cli` in Cairn's repository";
    let ours = env!("CARGO_PKG_VERSION");
    let Some(found) = std::env::var_os("PATH").and_then(|p| std::env::split_paths(&p).map(|d| d.join("cairn")).find(|p| executable(p))) else {
        checks.add("path", Status::Warn, format!("`cairn` is not on PATH (the hooks name their binary by path, but `cairn doctor` and `cairn history` cannot be run by name): {INSTALL}"));
        return;
    };
    match version(&found) {
        Some(v) if v == ours => checks.add("path", Status::Ok, format!("{} is version {v}, as this binary", found.display())),
        Some(v) => checks.add("path", Status::Warn, format!("{} is version {v}, this binary {ours}: {INSTALL}", found.display())),
        None => checks.add("path", Status::Warn, format!("{} does not say its version (`--version`): {INSTALL}", found.display())),
    }
}

/// What `exe --version` says (`cairn 0.1.0`): its second word.
fn version(exe: &Path) -> Option<String> {
    let out = std::process::Command::new(exe).arg("--version").stdin(std::process::Stdio::null()).output().ok()?;
    String::from_utf8(out.stdout).ok()?.split_whitespace().nth(1).map(String::from)
}

/// Checks Cairn's hooks in every settings file Claude Code reads here; returns them. Says so
/// when there are none, unless Cairn is set up in another agent (`elsewhere`).
fn hooks(checks: &mut Checks, user: Option<&Path>, project: Option<&Path>, elsewhere: bool) -> Vec<Hook> {
    let mut files: Vec<PathBuf> = user.map(|u| u.join(".claude/settings.json")).into_iter().collect();
    if let Some(dir) = project {
        files.extend([dir.join(".claude/settings.json"), dir.join(".claude/settings.local.json")]);
    }
    let mut found = Vec::new();
    let mut policies = Vec::new();
    for file in &files {
        let Some(settings) = read_json(checks, "hooks", file) else { continue };
        found.extend(agent_hooks(checks, &CLAUDE_CODE, file, &settings, project, &mut policies));
    }
    if found.is_empty() && !elsewhere {
        let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
        let hint = if project.is_none() { " (a project's settings are checked with --project DIR)" } else { "" };
        checks.add("hooks", Status::Warn, format!("no Cairn hooks in {}{hint}: Claude Code compacts without Cairn; run `cairn claude-code install`", names.join(", ")));
    }
    found
}

/// An agent whose hooks run `cairn <agent> <verb>`, in a config of Claude Code's shape
/// (`hooks: {event: [{hooks: [{command}]}]}`; Gemini CLI's settings and Codex's `config.toml`
/// read as JSON have it too).
struct Agent {
    /// The check's name in doctor's output.
    check: &'static str,
    /// Its `cairn` verb: `cairn <word> install`.
    word: &'static str,
    /// The hook verbs Cairn installs, with their events.
    hooks: &'static [(&'static str, &'static str)],
}

const CLAUDE_CODE: Agent = Agent { check: "hooks", word: "claude-code", hooks: &[("pre-compact", "PreCompact"), ("session-start", "SessionStart")] };
const CODEX: Agent = Agent { check: "codex", word: "codex", hooks: &[("pre-compact", "PreCompact"), ("session-start", "SessionStart")] };
const GEMINI: Agent = Agent { check: "gemini", word: "gemini", hooks: &[("pre-compress", "PreCompress"), ("before-agent", "BeforeAgent")] };

/// Cairn's hooks in one config `file` of `agent`, each checked; a missing one said.
fn agent_hooks(checks: &mut Checks, agent: &Agent, file: &Path, config: &Value, project: Option<&Path>, policies: &mut Vec<(PathBuf, Result<(), String>)>) -> Vec<Hook> {
    let mut found = Vec::new();
    let mut verbs = Vec::new();
    let events = config.get("hooks").and_then(Value::as_object).into_iter().flatten();
    for (event, groups) in events {
        let handlers = groups.as_array().into_iter().flatten().filter_map(|g| g.get("hooks")?.as_array()).flatten();
        for command in handlers.filter_map(|h| h.get("command")?.as_str()) {
            let Some(words) = shell_words(command) else {
                if command.contains(&format!(" {} ", agent.word)) {
                    checks.add(agent.check, Status::Fail, format!("{}: the {event} hook `{command}` has an unclosed quote", file.display()));
                }
                continue;
            };
            let Some(at) = words.iter().position(|w| w == agent.word) else { continue };
            let Some(verb) = words.get(at + 1).filter(|v| agent.hooks.iter().any(|(h, _)| *h == v.as_str())) else { continue };
            verbs.push(verb.clone());
            found.push(check_hook(checks, agent, file, event, &words, project, policies));
        }
    }
    if !verbs.is_empty() {
        for (verb, event) in agent.hooks.iter().filter(|(v, _)| !verbs.iter().any(|w| w.as_str() == *v)) {
            let word = agent.word;
            checks.add(agent.check, Status::Warn, format!("{}: Cairn's {event} hook (`{word} {verb}`) is missing: run `cairn {word} install` again", file.display()));
        }
    }
    found
}

/// One hook's binary, home and policy: a line for each problem, or one `ok` line.
fn check_hook(checks: &mut Checks, agent: &Agent, file: &Path, event: &str, words: &[String], project: Option<&Path>, policies: &mut Vec<(PathBuf, Result<(), String>)>) -> Hook {
    let at = |problem: String| format!("{}: the {event} hook {problem}", file.display());
    let (check, word) = (agent.check, agent.word);
    let mut ok = true;
    let exe = resolve(&words[0], project);
    if !exe.exists() {
        checks.add(check, Status::Fail, at(format!("runs {}, which does not exist: run `cairn {word} install` again", exe.display())));
        ok = false;
    } else if !executable(&exe) {
        checks.add(check, Status::Fail, at(format!("runs {}, which is not an executable file", exe.display())));
        ok = false;
    } else if let Some(v) = version(&exe).filter(|v| v != env!("CARGO_PKG_VERSION")) {
        let ours = env!("CARGO_PKG_VERSION");
        checks.add(check, Status::Warn, at(format!("runs {} version {v}, this binary is {ours}: run `cairn {word} install` again with the new one", exe.display())));
    }
    let flag = |name: &str| words.iter().position(|w| w == name).and_then(|i| words.get(i + 1)).map(|w| resolve(w, project));
    let home = flag("--home").unwrap_or_else(|| setup::home_path(None));
    let home_state = match home_state(&home) {
        Ok(state) => state,
        Err(problem) => {
            checks.add(check, Status::Fail, at(format!("cannot use its home: {problem}; the hook can record nothing")));
            ok = false;
            String::new()
        }
    };
    let policy = flag("--policy");
    if let Some(policy) = &policy {
        let parsed = match policies.iter().find(|(p, _)| p == policy) {
            Some((_, parsed)) => parsed.clone(),
            None => {
                let parsed = setup::host_and_policy(&[], Some(policy.as_path())).map(|_| ()).map_err(|e| format!("{e:#}"));
                policies.push((policy.clone(), parsed.clone()));
                parsed
            }
        };
        if let Err(e) = parsed {
            checks.add(check, Status::Fail, at(format!("uses policy {} that does not load: {e}", policy.display())));
            ok = false;
        }
    }
    if ok {
        let policy = policy.map_or("the default policy".to_string(), |p| format!("policy {} (loads)", p.display()));
        checks.add(check, Status::Ok, at(format!("runs {}, home {} ({home_state}), {policy}", exe.display(), storage::shown(&home))));
    }
    Hook { settings: file.to_path_buf(), event: event.to_string(), home }
}

/// Checks every `cairn` MCP server entry Claude Code reads here against the hooks' homes.
fn mcp(checks: &mut Checks, user: Option<&Path>, project: Option<&Path>, hooks: &[Hook], elsewhere: bool) {
    let mut entries: Vec<(String, Value)> = Vec::new();
    if let Some(dir) = project {
        let file = dir.join(".mcp.json");
        if let Some(value) = read_json(checks, "mcp", &file) {
            entries.extend(value.pointer("/mcpServers/cairn").map(|e| (file.display().to_string(), e.clone())));
        }
    }
    if let Some(user) = user {
        let file = user.join(".claude.json");
        if let Some(value) = read_json(checks, "mcp", &file) {
            entries.extend(value.pointer("/mcpServers/cairn").map(|e| (file.display().to_string(), e.clone())));
            // `claude mcp add`'s default (local) scope: the project's entry in that file.
            let local = project.and_then(|dir| value.get("projects")?.get(dir.to_str()?)?.pointer("/mcpServers/cairn"));
            entries.extend(local.map(|e| (format!("{} (project {})", file.display(), project.unwrap().display()), e.clone())));
        }
    }
    if entries.is_empty() && elsewhere {
        return;
    }
    if entries.is_empty() {
        let home = hooks.first().map_or_else(|| setup::home_path(None), |h| h.home.clone());
        let exe = crate::setup::cairn_exe().map_or("cairn".into(), |e| e.display().to_string());
        checks.add(
            "mcp",
            Status::Warn,
            format!(
                "no `cairn` MCP server{}: the agent has no session_history tool; add it with `claude mcp add cairn -- {exe} serve --expose recall --home {}`",
                if project.is_none() { " in ~/.claude.json (a project's .mcp.json is checked with --project DIR)" } else { "" },
                storage::shown(&home)
            ),
        );
        return;
    }
    for (file, entry) in entries {
        check_server(checks, "mcp", &file, &entry, project, hooks);
    }
}

/// One `cairn` MCP server entry (in `file`; `{command, args, env}`): its binary runs, its
/// arguments start with `serve`, and it reads the home the `hooks` write, else the agent's
/// `session_history` would not see what they archive.
fn check_server(checks: &mut Checks, check: &'static str, file: &str, entry: &Value, project: Option<&Path>, hooks: &[Hook]) {
    let args: Vec<String> = entry.get("args").and_then(Value::as_array).into_iter().flatten().filter_map(|a| a.as_str().map(String::from)).collect();
    let env_home = entry.pointer("/env/CAIRN_HOME").and_then(Value::as_str).map(PathBuf::from);
    let command = entry.get("command").and_then(Value::as_str);
    let mut ok = true;
    match command {
        Some(command) => {
            let exe = resolve(command, project);
            if !executable(&exe) {
                let problem = if exe.exists() { "is not an executable file" } else { "does not exist" };
                checks.add(check, Status::Fail, format!("{file}: the `cairn` MCP server runs {}, which {problem}", exe.display()));
                ok = false;
            }
        }
        None => {
            checks.add(check, Status::Fail, format!("{file}: the `cairn` MCP server has no command"));
            ok = false;
        }
    }
    if args.first().map(String::as_str) != Some("serve") {
        checks.add(check, Status::Warn, format!("{file}: the `cairn` MCP server's arguments {args:?} do not start with `serve`"));
    }
    let flag = args.iter().position(|a| a == "--home").and_then(|i| args.get(i + 1)).map(|h| resolve(h, project));
    let home = flag.or(env_home).unwrap_or_else(|| setup::home_path(None));
    for hook in hooks.iter().filter(|h| !same_path(&h.home, &home)) {
        checks.add(
            check,
            Status::Fail,
            format!(
                "{file}: the `cairn` MCP server reads home {}, but the {} hook in {} writes home {}: the agent's session_history would not see what the hooks archive",
                storage::shown(&home),
                hook.event,
                hook.settings.display(),
                storage::shown(&hook.home)
            ),
        );
        ok = false;
    }
    if ok {
        let same = if hooks.is_empty() { "" } else { ", the hooks' home" };
        checks.add(check, Status::Ok, format!("{file}: the `cairn` MCP server reads home {}{same}", storage::shown(&home)));
    }
}

/// Cairn in Codex (`$CODEX_HOME/config.toml`, else `~/.codex`), Gemini CLI (the user's and the
/// project's `.gemini/settings.json`) and OpenCode (the project's `opencode.json` and plugin):
/// each hook and MCP server checked as Claude Code's are; nothing said of an agent without
/// Cairn. The hooks found, and whether Cairn is set up in any of them.
fn other_agents(checks: &mut Checks, user: Option<&Path>, project: Option<&Path>) -> (Vec<Hook>, bool) {
    let mut all = Vec::new();
    let mut any = false;
    let mut policies = Vec::new();
    let codex_home = std::env::var_os("CODEX_HOME").filter(|h| !h.is_empty()).map(PathBuf::from).or_else(|| user.map(|u| u.join(".codex")));
    if let Some(file) = codex_home.map(|d| d.join("config.toml")) {
        if let Some(config) = read_toml(checks, &file) {
            let hooks = agent_hooks(checks, &CODEX, &file, &config, project, &mut policies);
            if let Some(server) = config.pointer("/mcp_servers/cairn") {
                check_server(checks, CODEX.check, &file.display().to_string(), server, project, &hooks);
                any = true;
            }
            any |= !hooks.is_empty();
            all.extend(hooks);
        }
    }
    let gemini_files = user.map(|u| u.join(".gemini/settings.json")).into_iter().chain(project.map(|d| d.join(".gemini/settings.json")));
    for file in gemini_files {
        let Some(settings) = read_json(checks, GEMINI.check, &file) else { continue };
        let hooks = agent_hooks(checks, &GEMINI, &file, &settings, project, &mut policies);
        if let Some(server) = settings.pointer("/mcpServers/cairn") {
            check_server(checks, GEMINI.check, &file.display().to_string(), server, project, &hooks);
            any = true;
        }
        any |= !hooks.is_empty();
        all.extend(hooks);
    }
    if let Some(dir) = project {
        let (file, plugin) = (dir.join("opencode.json"), dir.join(".opencode/plugin/cairn.ts"));
        let server = read_json(checks, "opencode", &file).and_then(|c| c.pointer("/mcp/cairn").cloned());
        if let Some(server) = &server {
            // OpenCode's local server is one `command` list: the binary, then its arguments.
            let words = server.get("command").and_then(Value::as_array).cloned().unwrap_or_default();
            let entry = json!({"command": words.first(), "args": words.get(1..).unwrap_or_default()});
            check_server(checks, "opencode", &file.display().to_string(), &entry, project, &[]);
        }
        match (server.is_some(), plugin.is_file()) {
            (_, true) => checks.add("opencode", Status::Ok, format!("{}: Cairn's plugin is there: OpenCode's compaction is Cairn's", plugin.display())),
            (true, false) => {
                checks.add("opencode", Status::Warn, format!("{} is missing: OpenCode compacts without Cairn; run `cairn opencode install --project {}` again", plugin.display(), dir.display()))
            }
            (false, false) => {}
        }
        any |= server.is_some() || plugin.is_file();
    }
    (all, any)
}

/// Codex's `config.toml`, as JSON: none when absent; a `fail` naming its line when broken.
fn read_toml(checks: &mut Checks, file: &Path) -> Option<Value> {
    let text = read_config(checks, CODEX.check, file)?;
    match text.parse::<toml::Table>() {
        Ok(table) => serde_json::to_value(table).ok(),
        Err(e) => {
            let line = e.span().map_or(0, |span| text[..span.start].matches('\n').count() + 1);
            checks.add(CODEX.check, Status::Fail, format!("{}:{line}: {}: Codex cannot read it", file.display(), e.message()));
            None
        }
    }
}

/// `cold`: how many bundled plugins the cache held no compiled code of when doctor started.
fn cache(checks: &mut Checks, cold: Result<usize>) {
    let Some(dir) = cairn::cache_dir() else {
        checks.add("cache", Status::Warn, "the compiled-code cache is off (CAIRN_CACHE_DIR is empty): every start compiles its plugins again");
        return;
    };
    let size = std::fs::read_dir(&dir).map(|listing| {
        let (bytes, entries) = listing.filter_map(|e| e.ok()?.metadata().ok()).filter(|m| m.is_file()).fold((0u64, 0usize), |(b, n), m| (b + m.len(), n + 1));
        format!(", {:.1} MB in {entries} files", bytes as f64 / 1e6)
    });
    match writable_dir(&dir) {
        Ok(state) => match cold {
            Ok(0) => checks.add("cache", Status::Ok, format!("{}: {state}{}, the bundled plugins compiled", dir.display(), size.unwrap_or_default())),
            Ok(cold) => checks.add(
                "cache",
                Status::Warn,
                format!(
                    "{}: {state}{}; cold: {cold} of the {} bundled plugins are not compiled for this cairn, so its next start compiles them for seconds (an agent that does not wait for its MCP server starts without Cairn's tools); compile them now: `cairn plugins list`",
                    dir.display(),
                    size.unwrap_or_default(),
                    cairn_bundle::BUNDLED.len()
                ),
            ),
            Err(error) => checks.add("cache", Status::Warn, format!("{}: {state}; whether the bundled plugins are compiled there cannot be told: {error:#}", dir.display())),
        },
        Err(problem) => checks.add("cache", Status::Warn, format!("compiled code cannot be cached: {problem}; every start compiles its plugins again (CAIRN_CACHE_DIR moves the cache)")),
    }
}

/// How many bundled plugins the cache holds no compiled code of for this binary's engine
/// (looked up, never compiled).
fn cold_bundled_plugins() -> Result<usize> {
    let cairn = cairn::Cairn::new()?;
    Ok(cairn_bundle::BUNDLED.iter().filter(|plugin| !cairn.is_compiled_in_cache(plugin.sha256)).count())
}

fn failures(checks: &mut Checks, homes: &[PathBuf]) {
    // A home that is not a directory has failed its own check already.
    for home in homes.iter().filter(|h| storage::is_database(h) || h.is_dir() || !h.exists()) {
        let shown = storage::shown(home);
        let failures = match hook_failures::list(home) {
            Ok(failures) => failures,
            Err(e) => {
                checks.add("hook-failures", Status::Warn, format!("cannot read the hook failures in {shown}: {e:#}"));
                continue;
            }
        };
        if failures.is_empty() {
            checks.add("hook-failures", Status::Ok, format!("no hook failures recorded in {shown}"));
            continue;
        }
        for f in failures.iter().rev().take(SHOWN_FAILURES) {
            let session = f.session_id.as_deref().map(|s| format!(" (session {s})")).unwrap_or_default();
            let told = if f.told { "told to the agent" } else { "not told yet" };
            checks.add("hook-failures", Status::Warn, format!("{}: the {} {} hook failed{session}: {} [{told}]", f.time(), f.agent, f.hook, f.error));
        }
        if failures.len() > SHOWN_FAILURES {
            checks.add("hook-failures", Status::Warn, format!("{} earlier hook failures in {shown}", failures.len() - SHOWN_FAILURES));
        }
    }
}

/// A config file's text: none when absent or blank; a `fail` when unreadable.
fn read_config(checks: &mut Checks, check: &'static str, file: &Path) -> Option<String> {
    match std::fs::read_to_string(file) {
        Ok(text) if text.trim().is_empty() => None,
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            checks.add(check, Status::Fail, format!("cannot read {}: {e}", file.display()));
            None
        }
    }
}

/// A JSON file an agent reads: none when absent; a `fail` naming its line when broken.
fn read_json(checks: &mut Checks, check: &'static str, file: &Path) -> Option<Value> {
    let text = read_config(checks, check, file)?;
    match serde_json::from_str(&text) {
        Ok(value) => Some(value),
        Err(e) => {
            checks.add(check, Status::Fail, format!("{}:{}:{}: {e}: Claude Code cannot read it", file.display(), e.line(), e.column()));
            None
        }
    }
}

/// The `home` check: a database is reached (its URL shown without the password); a directory
/// is (or can be made) writable and is private to its owner.
fn check_home(checks: &mut Checks, home: &Path) {
    let shown = storage::shown(home);
    if storage::is_database(home) {
        match cairn::storage::Home::open(home).and_then(|h| h.conversations()) {
            Ok(keys) => checks.add("home", Status::Ok, format!("{shown}: a PostgreSQL database, reachable, {} conversations", keys.len())),
            Err(e) => checks.add("home", Status::Fail, format!("{shown}: {e:#}: Cairn cannot store anything there")),
        }
        return;
    }
    match writable_dir(home) {
        Ok(state) => checks.add("home", Status::Ok, format!("{shown}: {state}{}", conversations(home))),
        Err(problem) => checks.add("home", Status::Fail, format!("{problem}: Cairn cannot store anything there")),
    }
    if let Some(mode) = shared_mode(home) {
        let quoted = shell_quote(&shown);
        checks.add(
            "home-private",
            Status::Warn,
            format!("{shown} is open to other local users (mode {mode:o}): the record holds whatever the agent read; `chmod -R go-rwx {quoted}` makes it private"),
        );
    }
}

/// A directory's mode when users other than its owner may enter or read it.
fn shared_mode(dir: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir).ok().filter(|m| m.is_dir())?.permissions().mode() & 0o777;
    (mode & 0o077 != 0).then_some(mode)
}

/// `text` as one word for a POSIX shell.
fn shell_quote(text: &str) -> String {
    if !text.is_empty() && text.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+:@%".contains(c)) {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

/// How a hook's home stands: a database is named as one (a hook's check does not connect).
fn home_state(home: &Path) -> Result<String, String> {
    if storage::is_database(home) {
        Ok("a PostgreSQL database".into())
    } else {
        writable_dir(home)
    }
}

/// Whether `path` is (or can be made) a writable directory: how it stands, or what is wrong.
fn writable_dir(path: &Path) -> Result<String, String> {
    match std::fs::metadata(path) {
        Ok(m) if !m.is_dir() => Err(format!("{} is not a directory", path.display())),
        Ok(_) => match tempfile::tempfile_in(path) {
            Ok(_) => Ok("writable".into()),
            Err(e) => Err(format!("{} is not writable ({e})", path.display())),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let Some(existing) = path.ancestors().skip(1).find(|a| a.exists()) else {
                return Err(format!("{} cannot be created: none of its parents exists", path.display()));
            };
            match (existing.is_dir(), tempfile::tempfile_in(existing)) {
                (true, Ok(_)) => Ok("does not exist yet, can be created".into()),
                _ => Err(format!("{} cannot be created: {} is not a writable directory", path.display(), existing.display())),
            }
        }
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// `home`'s conversations, as `, N conversations`.
fn conversations(home: &Path) -> String {
    match std::fs::read_dir(home.join("conversations")) {
        Ok(listing) => format!(", {} conversations", listing.filter_map(|e| e.ok()).filter(|e| e.path().is_dir()).count()),
        Err(_) => String::new(),
    }
}

fn executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A path from a hook command or MCP entry: `~/` is the user's home; a relative path is taken
/// from the project (Claude Code runs hooks there), else from here.
fn resolve(word: &str, project: Option<&Path>) -> PathBuf {
    if storage::is_database(Path::new(word)) {
        return PathBuf::from(word);
    }
    if let (Some(rest), Some(home)) = (word.strip_prefix("~/"), std::env::var_os("HOME")) {
        return PathBuf::from(home).join(rest);
    }
    let path = PathBuf::from(word);
    match project {
        Some(dir) if path.is_relative() => dir.join(path),
        _ => std::path::absolute(&path).unwrap_or(path),
    }
}

fn same_path(a: &Path, b: &Path) -> bool {
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()));
    canonical(a) == canonical(b)
}

/// A command line split as a POSIX shell splits it (quotes and backslashes; no expansions):
/// none when a quote is left open.
fn shell_words(line: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '\'' => break,
                        c => word.push(c),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '"' => break,
                        '\\' => match chars.next()? {
                            '\n' => {}
                            c @ ('"' | '\\' | '$' | '`') => word.push(c),
                            c => word.extend(['\\', c]),
                        },
                        c => word.push(c),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some('\n') => {}
                    Some(c) => word.push(c),
                    None => word.push('\\'),
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Some(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_split_as_a_shell_splits_them() {
        let words = |line| shell_words(line).unwrap();
        assert_eq!(words("/bin/cairn claude-code pre-compact --home /h"), ["/bin/cairn", "claude-code", "pre-compact", "--home", "/h"]);
        assert_eq!(words(r"'/my dir/cairn' claude-code session-start --home '/it'\''s home'"), ["/my dir/cairn", "claude-code", "session-start", "--home", "/it's home"]);
        assert_eq!(words(r#""/a \"b\"/c\d" x\ y  ''"#), [r#"/a "b"/c\d"#, "x y", ""]);
        assert_eq!(shell_words("'open"), None);
        assert_eq!(shell_words("\"open"), None);
    }
}
