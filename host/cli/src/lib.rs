//! `cairn`: compact agent transcripts with sandboxed Wasm strategies. The command line as a
//! library, so that a host embedding Cairn (the Python and Node packages, a test that registers
//! a transcript format) runs the same verbs in its own process; `src/main.rs` is the binary.

mod commands;
mod hook_failures;
mod hook_log;
mod net;
mod setup;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cairn", version, about = "Sandboxed, swappable, auditable context compaction for LLM agent harnesses")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Compact a transcript file (any format `cairn` reads: Pi, Claude Code, Codex, Gemini CLI, OpenCode, OpenAI, Anthropic, Cairn JSONL).
    Compact(commands::compact::Args),
    /// Archive a session and prepare the seed of a fresh one.
    Handover(commands::handover::Args),
    /// Print a conversation's working context as the record holds it now (any format Cairn writes).
    Context(commands::context::Args),
    /// Print a stored original (`artifact://…`) byte for byte.
    Artifact(commands::artifact::Args),
    /// Read what compaction set aside: summary, search, page (the agent's session_history tool).
    History(commands::history::Args),
    /// What each compaction did: the conversation's timeline, or one compaction part by part.
    Show(commands::show::Args),
    /// Take back a compaction (default the latest) and every later one; write the restored context.
    Undo(commands::undo::Args),
    /// Pin entries by id: they survive every compaction verbatim, within the policy's pin budget.
    Pin(commands::pin::Args),
    /// Unpin entries pinned with `cairn pin`.
    Unpin(commands::pin::Args),
    /// Start a plugin project in Rust, Python or JavaScript (`cairn new strategy NAME --lang python`).
    New(commands::new::Args),
    /// List, check and build plugins.
    Plugins {
        #[command(subcommand)]
        command: commands::plugins::Command,
    },
    /// Report a turn boundary: the trigger, commit policy and chain decide what happens.
    Boundary(commands::boundary::BoundaryArgs),
    /// Record an agent request (compact or handover) for the next allowed boundary.
    Request(commands::boundary::RequestArgs),
    /// Take notices (and acknowledge them with --ack).
    Notices(commands::boundary::NoticesArgs),
    /// Replay a session turn by turn as a harness would, and report what Cairn did when.
    Simulate(commands::simulate::Args),
    /// Serve a warm host over MCP (stdio, or HTTP with --http): tools for the harness and for its agent.
    Serve(commands::serve::Args),
    /// Bearer tokens for `cairn serve --http`, each scoped to one tenant: create, list, revoke.
    Tokens(commands::tokens::Args),
    /// Measure Cairn beside Pi's own compaction code and its native builds (ratios, one run).
    Bench(commands::bench::Args),
    /// Compact a long generated session into a temporary home and show before and after.
    Demo(commands::demo::Args),
    /// Score a policy's chain on the failure scenarios of harness compaction.
    Eval(commands::eval::Args),
    /// Cairn inside Claude Code through its hooks: install, uninstall, and the hook handlers.
    ClaudeCode {
        #[command(subcommand)]
        command: commands::agents::claude_code::Command,
    },
    /// Cairn inside Codex: its MCP server and hooks in Codex's config (install, uninstall, hook handlers).
    Codex {
        #[command(subcommand)]
        command: commands::agents::codex::Command,
    },
    /// Cairn inside Gemini CLI: its MCP server and hooks in Gemini CLI's settings (install, uninstall, hook handlers).
    Gemini {
        #[command(subcommand)]
        command: commands::agents::gemini::Command,
    },
    /// Cairn inside OpenCode: a plugin that lets Cairn's policy do OpenCode's compaction, and its MCP server.
    Opencode {
        #[command(subcommand)]
        command: commands::agents::opencode::Command,
    },
    /// Check the whole setup (binary, agent hooks, MCP server, home, cache, hook failures).
    Doctor(commands::doctor::Args),
    /// A local page (loopback, with a token) to look at conversations, timelines and compactions, and undo or pin.
    Ui(commands::ui::Args),
}

/// `CAIRN_LOG` as an `EnvFilter`. A bare level more verbose than `warn` applies to Cairn's own
/// crates: at `trace` for all, the compiler Cairn embeds logs every instruction of every plugin
/// it compiles, and a cold start takes minutes. Directives name any crate (`cranelift=trace`).
fn log_filter(setting: Option<&str>) -> tracing_subscriber::EnvFilter {
    let setting = setting.map(str::trim).filter(|s| !s.is_empty()).unwrap_or("warn");
    let directives = match setting.parse::<tracing_subscriber::filter::LevelFilter>() {
        Ok(level) if level > tracing_subscriber::filter::LevelFilter::WARN => format!("warn,cairn={level}"),
        _ => setting.to_string(),
    };
    tracing_subscriber::EnvFilter::try_new(&directives).unwrap_or_else(|error| {
        eprintln!("cairn: CAIRN_LOG={setting:?} is not a log filter ({error}); logging warnings only");
        tracing_subscriber::EnvFilter::new("warn")
    })
}

impl Command {
    /// An agent's hook verb (`codex pre-compact`) and its arguments: its log goes to the home.
    fn hook(&self) -> Option<(String, &commands::agents::shared::HookArgs)> {
        use commands::agents::{claude_code, codex, gemini};
        let (agent, verb, args) = match self {
            Command::ClaudeCode { command: claude_code::Command::PreCompact(args) } => ("claude-code", "pre-compact", args),
            Command::ClaudeCode { command: claude_code::Command::SessionStart(args) } => ("claude-code", "session-start", args),
            Command::Codex { command: codex::Command::PreCompact(args) } => ("codex", "pre-compact", args),
            Command::Codex { command: codex::Command::SessionStart(args) } => ("codex", "session-start", args),
            Command::Gemini { command: gemini::Command::PreCompress(args) } => ("gemini", "pre-compress", args),
            Command::Gemini { command: gemini::Command::BeforeAgent(args) } => ("gemini", "before-agent", args),
            _ => return None,
        };
        Some((format!("{agent} {verb}"), args))
    }
}

/// Why [`harness`] could not open a host.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The policy file could not be read, or fails its checks (the message names
    /// `file:line:column`).
    #[error("{0:#}")]
    PolicyInvalid(anyhow::Error),
    /// A plugin directory could not be loaded (the message names the plugin).
    #[error("{0:#}")]
    PluginsInvalid(anyhow::Error),
    /// The home could not be opened (a path that is a file, a database that cannot be reached).
    #[error("{0:#}")]
    HomeUnavailable(anyhow::Error),
}

impl OpenError {
    /// The stable machine code: `policy-invalid`, `plugins-invalid` or `home-unavailable`.
    pub fn code(&self) -> &'static str {
        match self {
            OpenError::PolicyInvalid(_) => "policy-invalid",
            OpenError::PluginsInvalid(_) => "plugins-invalid",
            OpenError::HomeUnavailable(_) => "home-unavailable",
        }
    }
}

/// The harness API on a host as the `cairn` command builds it: the bundled plugins and those in
/// `plugin_dirs`, `policy` (a TOML file; the embedded default without one) checked against
/// them, over `home` (default: `$CAIRN_HOME`, else `~/.local/share/cairn`). What the Python and
/// Node packages open, so that they run exactly what the command runs.
pub fn harness(home: Option<std::path::PathBuf>, policy: Option<&std::path::Path>, plugin_dirs: &[std::path::PathBuf]) -> Result<cairn::Harness, OpenError> {
    let cairn = setup::host(plugin_dirs).map_err(OpenError::PluginsInvalid)?;
    let policy = match policy {
        None => cairn.default_policy(),
        Some(path) => std::fs::read_to_string(path)
            .map_err(anyhow::Error::from)
            .and_then(|text| cairn.load_policy(&text, &path.display().to_string()))
            .map_err(|e| e.context(format!("policy {}", path.display()))),
    }
    .map_err(OpenError::PolicyInvalid)?;
    let home = cairn::storage::Home::open(&setup::home_path(home)).map_err(OpenError::HomeUnavailable)?;
    Ok(cairn::Harness::new(cairn::Lifecycle::new(cairn, home, policy)))
}

/// The `cairn` binary: [`command`] with this process's arguments.
pub fn main() -> ExitCode {
    ExitCode::from(command(std::env::args_os()))
}

/// The `cairn` command as a program runs it (the binary, the Python package's console script):
/// [`run_code`], where a closed stdout ends the process quietly with 141 as coreutils' tools do.
pub fn command(args: impl IntoIterator<Item = impl Into<OsString> + Clone>) -> u8 {
    quiet_on_closed_output();
    run_code(args)
}

/// Runs `cairn` with `args` (the first is the program's name, as in `std::env::args_os`) in
/// this process, and answers its exit status. Usage errors print as the binary prints them.
pub fn run(args: impl IntoIterator<Item = impl Into<OsString> + Clone>) -> ExitCode {
    ExitCode::from(run_code(args))
}

/// [`run`], its status as a number (0 success, 1 an error, 2 usage, 3 nothing committed).
pub fn run_code(args: impl IntoIterator<Item = impl Into<OsString> + Clone>) -> u8 {
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(error) => {
            let _ = error.print();
            return u8::try_from(error.exit_code()).unwrap_or(2);
        }
    };
    let filter = log_filter(std::env::var("CAIRN_LOG").ok().as_deref());
    // A hook's stderr is the agent's to show (and to save, for Gemini CLI): its log goes to the home.
    let hook_log = cli.command.hook().map(|(hook, args)| hook_log::Capture::new(hook, setup::home_path(args.home.clone())));
    match &hook_log {
        Some(capture) => {
            let capture = capture.clone();
            // `try_init`: a process that runs several verbs keeps the first one's subscriber.
            tracing_subscriber::fmt().with_env_filter(filter).with_writer(move || capture.clone()).with_ansi(false).try_init().ok();
        }
        None => {
            tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())).try_init().ok();
        }
    }
    let result = match cli.command {
        Command::Compact(args) => commands::compact::run(args),
        Command::Handover(args) => commands::handover::run(args),
        Command::Context(args) => commands::context::run(args),
        Command::Artifact(args) => commands::artifact::run(args),
        Command::History(args) => commands::history::run(args),
        Command::Show(args) => commands::show::run(args),
        Command::Undo(args) => commands::undo::run(args),
        Command::Pin(args) => commands::pin::pin(args),
        Command::Unpin(args) => commands::pin::unpin(args),
        Command::Plugins { command } => commands::plugins::run(command),
        Command::New(args) => commands::new::run(args),
        Command::Demo(args) => commands::demo::run(args),
        Command::Eval(args) => commands::eval::run(args),
        Command::Serve(args) => commands::serve::run(args),
        Command::Tokens(args) => commands::tokens::run(args),
        Command::Bench(args) => commands::bench::run(args),
        Command::Boundary(args) => commands::boundary::boundary(args),
        Command::Request(args) => commands::boundary::request(args),
        Command::Notices(args) => commands::boundary::notices(args),
        Command::Simulate(args) => commands::simulate::run(args),
        Command::ClaudeCode { command } => commands::agents::claude_code::run(command),
        Command::Codex { command } => commands::agents::codex::run(command),
        Command::Gemini { command } => commands::agents::gemini::run(command),
        Command::Opencode { command } => commands::agents::opencode::run(command),
        Command::Doctor(args) => commands::doctor::run(args),
        Command::Ui(args) => commands::ui::run(args),
    };
    if let Some(capture) = &hook_log {
        capture.keep();
    }
    if std::env::var_os("CAIRN_PEAK_RSS").is_some() {
        report_peak_rss();
    }
    match result {
        Ok(()) => 0,
        // Not an error: the transcript is unchanged and the report said why.
        Err(error) if error.is::<commands::NothingCommitted>() => commands::NothingCommitted::EXIT,
        Err(error) if closed_output(&error) => CLOSED_OUTPUT,
        Err(error) => {
            eprintln!("cairn: {error:#}");
            1
        }
    }
}

/// The exit status of a verb whose reader went away (`cairn show … | head`): 128 + SIGPIPE, as
/// coreutils' tools die with, so a pipeline reads it as the usual early close, not a failure.
const CLOSED_OUTPUT: u8 = 141;

/// Whether `error` is a write into a pipe whose reader has closed.
fn closed_output(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| cause.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe))
}

/// `println!` panics when its reader has gone (`| head -1`): that exit is quiet here, with
/// [`CLOSED_OUTPUT`]. Why a hook and not `SIGPIPE`'s default action: verbs that feed a child
/// process (`bench`) or serve a pipe (`serve`) must see a closed pipe as an error to report,
/// never die of a signal mid-write. Any other panic keeps the default report.
fn quiet_on_closed_output() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info.payload().downcast_ref::<String>().map(String::as_str).or_else(|| info.payload().downcast_ref::<&str>().copied()).unwrap_or_default();
        // std's words for a print macro's failed write (`failed printing to stdout: Broken pipe (os error 32)`).
        if message.starts_with("failed printing to std") && message.contains("Broken pipe") {
            std::process::exit(CLOSED_OUTPUT.into());
        }
        report(info);
    }));
}

/// For `cairn bench`: this process's own peak memory (VmHWM), on stderr.
fn report_peak_rss() {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    if let Some(kib) = status.lines().find_map(|l| l.strip_prefix("VmHWM:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok()) {
        eprintln!("cairn: peak-rss-kib {kib}");
    }
}

#[cfg(test)]
mod tests {
    use super::log_filter;

    /// The filter's directives, in any order.
    fn directives(setting: Option<&str>) -> std::collections::BTreeSet<String> {
        log_filter(setting).to_string().split(',').map(str::to_string).collect()
    }

    #[test]
    fn a_bare_level_applies_to_cairn_and_directives_reach_any_crate() {
        let set = |list: &[&str]| list.iter().map(|d| d.to_string()).collect::<std::collections::BTreeSet<_>>();
        assert_eq!(directives(Some("trace")), set(&["warn", "cairn=trace"]));
        assert_eq!(directives(Some(" debug ")), set(&["warn", "cairn=debug"]));
        assert_eq!(directives(Some("error")), set(&["error"]));
        assert_eq!(directives(None), set(&["warn"]));
        assert_eq!(directives(Some("info,cranelift_codegen=trace")), set(&["info", "cranelift_codegen=trace"]));
    }
}

#[cfg(test)]
mod help_and_json {
    use clap::CommandFactory;

    /// Every leaf verb with its path (`plugins check`), skipping clap's own `help`.
    fn verbs(command: &clap::Command, path: String, out: &mut Vec<(String, clap::Command)>) {
        let children: Vec<_> = command.get_subcommands().filter(|c| c.get_name() != "help").collect();
        if children.is_empty() {
            out.push((path, command.clone()));
            return;
        }
        for child in children {
            let name = if path.is_empty() { child.get_name().to_string() } else { format!("{path} {}", child.get_name()) };
            verbs(child, name, out);
        }
    }

    fn all_verbs() -> Vec<(String, clap::Command)> {
        let mut cli = super::Cli::command();
        cli.build(); // propagates global flags (`history --json`) to the verbs under them
        let mut out = Vec::new();
        verbs(&cli, String::new(), &mut out);
        out
    }

    /// `cairn X --help` explains every flag and argument a person can pass.
    #[test]
    fn every_flag_and_argument_has_help_text() {
        let mut missing = Vec::new();
        for (verb, command) in all_verbs() {
            for arg in command.get_arguments() {
                if matches!(arg.get_id().as_str(), "help" | "version") {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("cairn {verb}: {}", arg.get_long().map(|l| format!("--{l}")).unwrap_or_else(|| arg.get_id().to_string())));
                }
            }
        }
        assert!(missing.is_empty(), "flags without help text:\n{}", missing.join("\n"));
    }

    /// Verbs whose output is not a report: a byte stream, a server, an agent's hook protocol,
    /// or a file they write.
    const NOT_REPORTS: &[&str] =
        &["serve", "artifact", "claude-code pre-compact", "claude-code session-start", "codex pre-compact", "codex session-start", "gemini pre-compress", "gemini before-agent"];

    /// Scripts read any verb's report with `--json`; people read the same report without it.
    #[test]
    fn every_verb_that_reports_has_a_json_form() {
        let missing: Vec<String> = all_verbs()
            .into_iter()
            .filter(|(verb, _)| !NOT_REPORTS.contains(&verb.as_str()))
            .filter(|(_, command)| !command.get_arguments().any(|arg| arg.get_long() == Some("json")))
            .map(|(verb, _)| format!("cairn {verb}"))
            .collect();
        assert!(missing.is_empty(), "verbs without --json:\n{}", missing.join("\n"));
    }
}
