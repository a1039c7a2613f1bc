//! The lifecycle from the command line, for harnesses that are not written in Rust:
//! `cairn boundary` reports one turn boundary, `cairn request` records an agent request,
//! `cairn notices` takes and acknowledges notices.

use std::path::PathBuf;

use anyhow::{Context, Result};
use cairn::lifecycle::{Action, AgentRequest, BoundaryOutcome, BoundaryReport, RequestKind, Usage};
use cairn::storage::{ConversationKey, Home};
use cairn::transcript::formats;
use cairn::Lifecycle;

use crate::setup;

#[derive(clap::Args)]
pub struct Common {
    /// Cairn's home (default: $CAIRN_HOME, else ~/.local/share/cairn).
    #[arg(long)]
    home: Option<PathBuf>,
    /// The conversation's key in the home: the harness picks one per session and keeps it.
    #[arg(long)]
    conversation: String,
    /// Policy file (TOML): trigger, commit policy, chain, cooldown; the embedded default when absent.
    #[arg(long)]
    policy: Option<PathBuf>,
    /// A folder of plugins (`.wasm` beside a `.toml` manifest) to load beside the bundled ones.
    #[arg(long)]
    plugin_dir: Vec<PathBuf>,
    /// The agent's working directory: compactions stamp the files the conversation touched
    /// there, and the boundary reports those changed since (`stale_files`).
    #[arg(long)]
    workspace: Option<PathBuf>,
}

impl Common {
    fn lifecycle(&self) -> Result<(Lifecycle, ConversationKey, Home)> {
        let key = ConversationKey::parse(&self.conversation)?;
        let home_path = setup::home_path(self.home.clone());
        let (cairn, policy) = setup::host_and_policy(&self.plugin_dir, self.policy.as_deref())?;
        let mut lifecycle = Lifecycle::new(cairn, Home::open(&home_path)?, policy);
        if let Some(workspace) = &self.workspace {
            lifecycle = lifecycle.with_workspace(workspace);
        }
        Ok((lifecycle, key, Home::open(&home_path)?))
    }

    /// For a dry run: the same lifecycle on the home as it is, creating nothing (a home that
    /// does not exist is stood for by an empty temporary one, removed when the guard drops).
    fn preview_lifecycle(&self) -> Result<(Lifecycle, ConversationKey, Option<tempfile::TempDir>)> {
        let key = ConversationKey::parse(&self.conversation)?;
        let (cairn, policy) = setup::host_and_policy(&self.plugin_dir, self.policy.as_deref())?;
        let (home, _, scratch) = setup::preview(self.home.clone(), &key)?;
        let mut lifecycle = Lifecycle::new(cairn, home, policy);
        if let Some(workspace) = &self.workspace {
            lifecycle = lifecycle.with_workspace(workspace);
        }
        Ok((lifecycle, key, scratch))
    }
}

#[derive(clap::Args)]
pub struct BoundaryArgs {
    /// The working context as the model would see it next (any supported format).
    file: PathBuf,
    #[command(flatten)]
    common: Common,
    /// The number of the turn that just ended (the cooldown counts turns).
    #[arg(long)]
    turn: u32,
    /// The model's context window in tokens.
    #[arg(long)]
    window: u64,
    /// Tokens of the window kept free for the model's answer: the trigger reads the window less this.
    #[arg(long, default_value_t = 16_384)]
    reserve: u64,
    /// Tokens the provider reported for the context up to its last call; without it (and
    /// without --count) usage is unknown and nothing happens automatically.
    #[arg(long)]
    reported_tokens: Option<u64>,
    /// Entries at the end of FILE that came after that report.
    #[arg(long, default_value_t = 0)]
    entries_after: usize,
    /// Let the host count the whole context.
    #[arg(long)]
    count: bool,
    /// Use the usage FILE records (Pi, Claude Code and Codex keep each reply's billed
    /// tokens): the last figure plus the host's count of what came after, else a count.
    #[arg(long, conflicts_with_all = ["reported_tokens", "count"])]
    from_transcript: bool,
    /// A tool call is still running.
    #[arg(long)]
    tool_running: bool,
    /// The turn is not complete yet (its review is pending).
    #[arg(long)]
    turn_incomplete: bool,
    /// Write the working context after this boundary here (Cairn JSONL).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Decide and run as this boundary would, and report it (`"dry_run": true` in the
    /// report), writing nothing to the home: no record, no state, no notices. `--out` is
    /// still written.
    #[arg(long)]
    dry_run: bool,
    /// Print one JSON object for scripts (what the MCP `boundary` tool answers).
    #[arg(long)]
    json: bool,
}

pub fn boundary(args: BoundaryArgs) -> Result<()> {
    let (transcript, _) = setup::read_transcript(&args.file)?;
    let unrecognized = transcript.unrecognized.clone();
    let (lifecycle, key, _scratch) = if args.dry_run {
        args.common.preview_lifecycle()?
    } else {
        let (lifecycle, key, _) = args.common.lifecycle()?;
        (lifecycle, key, None)
    };
    let usage = match (args.reported_tokens, args.count, args.from_transcript) {
        (Some(tokens), ..) => Usage::Reported { tokens, entries_after: args.entries_after },
        (None, true, _) => Usage::Counted,
        (None, false, true) => Usage::recorded_or_counted(&transcript.entries),
        (None, false, false) => Usage::Unknown,
    };
    let report = BoundaryReport {
        conversation: key,
        turn: args.turn,
        turn_complete: !args.turn_incomplete,
        tool_call_outstanding: args.tool_running,
        window: args.window,
        reserve: args.reserve,
        usage,
        transcript,
    };
    let outcome = if args.dry_run { lifecycle.dry_run_blocking(report)? } else { lifecycle.boundary_blocking(report)? };
    if let Some(out) = &args.out {
        std::fs::write(out, formats::write_cairn(&outcome.transcript)).with_context(|| format!("writing {}", out.display()))?;
    }
    if args.json {
        let mut value = serde_json::to_value(&outcome)?;
        value["unrecognized"] = serde_json::json!(unrecognized);
        if args.dry_run {
            value["dry_run"] = serde_json::json!(true);
        }
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        print_outcome(&outcome, &args, lifecycle.home());
    }
    Ok(())
}

/// The boundary for a person: what happened and why, then what the harness should do.
fn print_outcome(outcome: &BoundaryOutcome, args: &BoundaryArgs, home: &Home) {
    let dry = if args.dry_run { " (dry run: nothing written)" } else { "" };
    let usage = match outcome.usage {
        Some(tokens) => format!("{tokens} of {} usable tokens (window {} less reserve {})", args.window.saturating_sub(args.reserve), args.window, args.reserve),
        None => "usage unknown".to_string(),
    };
    let what = match &outcome.action {
        Action::None => "nothing to do".to_string(),
        Action::Advised => "advised the agent".to_string(),
        Action::Compacted => "compacted".to_string(),
        Action::HandedOver => "handed over to a fresh session".to_string(),
        Action::Deferred(reason) => format!("deferred — {reason}"),
        Action::Paused => "paused: automatic maintenance stopped after passes that freed too little (`cairn notices --resume` lifts it)".to_string(),
        Action::Failed => "maintenance ran and committed nothing".to_string(),
    };
    let why = outcome.why.as_deref().map(|why| format!(" — {why}")).unwrap_or_default();
    say!("turn {}: {what}{why}{dry}", outcome.turn);
    say!("  context: {usage}");
    if let Some(advice) = &outcome.advice {
        say!("  advice for the agent: {advice}");
    }
    if let Some(report) = &outcome.report {
        super::compact::print_report(report, &args.file.display().to_string(), home);
    }
    for file in &outcome.stale_files {
        say!("  {} since the last compaction described it: {}", file.change.word(), file.path);
    }
    if !outcome.notices.is_empty() {
        say!("  notices queued: {} (read them with `cairn notices --conversation {}`)", outcome.notices.join(", "), args.common.conversation);
    }
    match &args.out {
        Some(out) => say!("the working context after this boundary: {}", out.display()),
        None if outcome.before.is_some() => say!("the working context changed: `--out FILE` writes it, or `cairn context --conversation {}`", args.common.conversation),
        None => {}
    }
}

#[derive(clap::Args)]
pub struct RequestArgs {
    #[command(flatten)]
    common: Common,
    /// What the agent asks for: a compaction or a handover to a fresh session.
    #[arg(value_enum)]
    kind: Kind,
    /// What must survive.
    #[arg(long, default_value = "")]
    preserve: String,
    /// How to resume afterwards.
    #[arg(long, default_value = "")]
    resume: String,
    /// Print one JSON object for scripts.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Kind {
    Compact,
    Handover,
}

pub fn request(args: RequestArgs) -> Result<()> {
    let (lifecycle, key, _) = args.common.lifecycle()?;
    let kind = match args.kind {
        Kind::Compact => RequestKind::Compact,
        Kind::Handover => RequestKind::Handover,
    };
    lifecycle.request_blocking(&key, AgentRequest { kind, preserve: args.preserve, resume: args.resume })?;
    let word = match kind {
        RequestKind::Compact => "compact",
        RequestKind::Handover => "handover",
    };
    if args.json {
        println!("{}", serde_json::json!({ "conversation": key.to_string(), "recorded": word }));
    } else {
        say!("{word} request recorded for conversation {key}; it runs at the next boundary the cooldown allows");
    }
    Ok(())
}

#[derive(clap::Args)]
pub struct NoticesArgs {
    /// Cairn's home (default: $CAIRN_HOME, else ~/.local/share/cairn).
    #[arg(long)]
    home: Option<PathBuf>,
    /// The conversation's key in the home (as `cairn compact` or the agent's hook named it).
    #[arg(long)]
    conversation: String,
    /// Acknowledge these notice ids (they are not delivered again).
    #[arg(long)]
    ack: Vec<String>,
    /// Lift an automatic pause of maintenance first (a notice says so).
    #[arg(long)]
    resume: bool,
    /// Print one JSON object for scripts.
    #[arg(long)]
    json: bool,
}

/// Prints the notices not yet acknowledged, after moving owed ones to the outbox.
/// Without `--ack` or `--resume` it is a read: the home must exist and nothing is written.
pub fn notices(args: NoticesArgs) -> Result<()> {
    let location = setup::home_path(args.home);
    let writes = args.resume || !args.ack.is_empty();
    let home = if writes { Home::open(&location)? } else { Home::open_existing(&location)? };
    let key = ConversationKey::parse(&args.conversation)?;
    if args.resume {
        cairn::lifecycle::resume(&home, &key)?;
    }
    if !args.ack.is_empty() {
        let mut store = home.conversation(&key)?;
        for id in &args.ack {
            store.ack_notice(id)?;
        }
    }
    let notices = cairn::lifecycle::take_notices(&home, &key)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&notices)?);
        return Ok(());
    }
    if args.resume {
        say!("automatic maintenance resumed for conversation {key}");
    }
    if !args.ack.is_empty() {
        say!("acknowledged: {}", args.ack.join(", "));
    }
    match setup::missing_conversation(&home, &key)? {
        // A person who mistyped the key is told so, with the keys the home holds.
        Some(missing) => say!("no notices: {missing}"),
        None => print_notices(&key, &notices),
    }
    Ok(())
}

/// The notices for a person: one line each, oldest first, with the id `--ack` takes.
fn print_notices(key: &ConversationKey, notices: &[cairn::record::Notice]) {
    if notices.is_empty() {
        say!("no notices for conversation {key}");
        return;
    }
    for notice in notices {
        say!("{}  {:<13} {}  {}", crate::commands::show::when(notice.at), notice.kind, notice.id, notice.text);
    }
    say!("acknowledge them with `cairn notices --conversation {key} --ack ID` (they are not delivered again)");
}
