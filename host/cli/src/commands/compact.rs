//! `cairn compact FILE`: one compaction of a transcript file, recorded in the home (or, with
//! `--dry-run`, only reported).

use std::path::PathBuf;

use anyhow::{Context, Result};
use cairn::storage::Home;
use cairn::transcript::formats::{self, Format};
use cairn::CompactionReport;
use serde_json::json;

use crate::setup;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    session: setup::SessionArgs,
    /// Write the compacted transcript here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// The format of `--out`.
    #[arg(long, default_value = "cairn", value_parser = OutFormat::parser())]
    out_format: OutFormat,
    /// Print one JSON object for scripts.
    #[arg(long)]
    json: bool,
    /// The agent's working directory: the files the conversation touched there are stamped
    /// in the record (`cairn boundary --workspace` then reports those changed since).
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// The usable context window in tokens (the model's window less its output reserve):
    /// the result is held to it — tool outputs clipped, then the oldest history dropped — or
    /// reported `degraded` with the reason when nothing may make it fit.
    #[arg(long)]
    window: Option<u64>,
    /// The context the compaction may leave, in tokens (overrides the policy's
    /// `compaction.budget_tokens`): the checkpoint, placeholders and verbatim tail share it,
    /// filled by value, most important first; what did not fit is listed.
    #[arg(long)]
    budget: Option<u64>,
    /// Run the chain and report what it would commit — what would be replaced, the prompt
    /// cache rewrite — writing nothing to the home (not even a new conversation). `--out`
    /// is still written.
    #[arg(long)]
    dry_run: bool,
}

/// `--out-format`: a format Cairn writes, by the name the library's format registry gives it
/// (the possible values are that registry's writable formats).
#[derive(Clone, Copy)]
pub struct OutFormat(Format);

impl OutFormat {
    pub fn parser() -> impl clap::builder::TypedValueParser<Value = OutFormat> {
        use clap::builder::TypedValueParser;
        clap::builder::PossibleValuesParser::new(Format::writable_ones().map(Format::name)).map(|name| OutFormat(Format::named(&name).expect("a name the registry listed")))
    }

    pub fn name(self) -> &'static str {
        self.0.name()
    }

    /// `transcript` in this format.
    pub fn write(self, transcript: &cairn::transcript::Transcript) -> String {
        formats::write(self.0, transcript).expect("a format the registry lists as writable")
    }
}

pub fn run(args: Args) -> Result<()> {
    let setup::Session { name, transcript, format, policy, cairn, home, mut store, scratch } = args.session.open_as(args.dry_run)?;
    // A dry run on a home that does not exist ran in an empty stand-in: name the home asked for.
    let home_shown = if scratch.is_some() { setup::home_path(args.session.home.clone()) } else { home.path().to_path_buf() };
    // The same original compacted before into this conversation: say so, write nothing.
    if let Some(earlier) = store.already_compacted(&transcript.entries) {
        let home_flag = args.session.home.as_ref().map(|h| format!(" --home {}", h.display())).unwrap_or_default();
        let key = store.key().to_string();
        if let Some(out) = &args.out {
            let context = cairn::transcript::Transcript::new(store.context()?);
            std::fs::write(out, args.out_format.write(&context)).with_context(|| format!("writing {}", out.display()))?;
        }
        if args.json {
            let value = json!({
                "conversation": key,
                "already_compacted": true,
                "committed": false,
                "archive_id": null,
                "already_compacted_by": earlier.archive_id,
                "tokens_before": earlier.tokens_before,
                "tokens_after": earlier.tokens_after,
                "out": args.out.as_ref().map(|p| p.display().to_string()),
            });
            println!("{}", serde_json::to_string_pretty(&value)?);
        } else {
            println!(
                "{name}: already compacted into conversation {key} by {} ({} → {} tokens); nothing written{}",
                earlier.archive_id,
                earlier.tokens_before,
                earlier.tokens_after,
                if args.out.is_some() { " but --out (the compacted context)" } else { "" }
            );
            println!("  the compacted context: cairn context --conversation {key}{home_flag}");
            println!("  what it did: cairn show --conversation {key}{home_flag} {}", earlier.archive_id);
            println!("  to compact the original anew: cairn undo --conversation {key}{home_flag}, then cairn compact again");
        }
        return Ok(());
    }
    let options = cairn::RunOptions { workspace: args.workspace.as_deref(), window: args.window, budget: args.budget, dry_run: args.dry_run, ..Default::default() };
    let report = cairn.compact_with(&policy, &mut store, &transcript, &name, options)?;
    if !args.json && !transcript.unrecognized.is_empty() {
        eprintln!("note: {name}: line kinds this reader does not know: {}", transcript.unrecognized);
    }

    if let Some(out) = &args.out {
        std::fs::write(out, args.out_format.write(&report.transcript)).with_context(|| format!("writing {}", out.display()))?;
    }
    if args.json {
        let mut value = serde_json::to_value(&report)?;
        value["input_format"] = json!(format.to_string());
        value["unrecognized"] = json!(transcript.unrecognized);
        value["home"] = json!(cairn::storage::shown(&home_shown));
        value["out"] = json!(args.out.as_ref().map(|p| p.display().to_string()));
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        print_report(&report, &name, &home);
        if report.dry_run {
            print_dry_run(&report);
        } else if report.committed && args.out.is_none() {
            // The home keeps the compacted context; a person needs the command that prints it.
            let home_flag = args.session.home.as_ref().map(|h| format!(" --home {}", h.display())).unwrap_or_default();
            println!("the compacted context is in the home (no --out given): cairn context --conversation {}{home_flag} --out FILE", report.conversation);
        }
    }
    if !report.committed {
        return Err(super::NothingCommitted.into());
    }
    Ok(())
}

pub fn print_report(report: &CompactionReport, name: &str, home: &Home) {
    if let Some(why) = &report.over_window {
        eprintln!("warning: {name}: {why}");
    } else if report.degraded {
        eprintln!("warning: no strategy could compact {name}; the host's last resort dropped the oldest entries (kept in archive {})", report.archive_id);
    }
    say!("{name}: {} → {} tokens ({})", report.tokens_before, report.tokens_after, percent(report));
    if !report.left_out.is_empty() {
        let list: Vec<String> = report.left_out.iter().map(|(section, n)| format!("{n} {section}")).collect();
        say!("  left out of the checkpoint for the budget (the record keeps them): {}", list.join(", "));
    }
    for step in &report.steps {
        // A step run without an optional capability its policy does not grant says so
        // ("offline by policy"), not as an error.
        let note = cairn::show::StepView::of(step).note;
        let message = step.message.iter().chain(&note).map(String::as_str).collect::<Vec<_>>().join("; ");
        let message = if message.is_empty() { message } else { format!(" — {message}") };
        say!("  {:<24} {:<12} {:>6} ms{message}", step.plugin, step.outcome.to_string(), step.millis);
    }
    match &report.committed_by {
        Some(plugin) if report.dry_run => {
            say!("would commit {plugin}: {} entries replaced, {} artifacts set aside (conversation {})", report.replaced, report.artifacts.len(), report.conversation)
        }
        Some(plugin) => say!(
            "committed {plugin}: {} entries replaced, {} artifacts set aside in archive {} (conversation {}, home {})",
            report.replaced,
            report.artifacts.len(),
            report.archive_id,
            report.conversation,
            home.path().display()
        ),
        None => say!("nothing committed, no archive written: {}; the transcript is unchanged", report.not_committed.as_deref().unwrap_or("every step failed")),
    }
}

/// What a dry run would have done beyond the report's lines: what the context would replace,
/// and what rewriting the provider's prompt cache would cost.
pub fn print_dry_run(report: &CompactionReport) {
    say!("dry run: nothing written");
    if report.committed {
        // Of the replaced entries, those the context would no longer hold (summarized or
        // dropped); the others stay, elided or verbatim.
        let gone = &report.forgotten;
        let shown: Vec<&str> = gone.iter().take(12).map(String::as_str).collect();
        let more = if gone.len() > shown.len() { format!(", … {} more", gone.len() - shown.len()) } else { String::new() };
        let listed = if shown.is_empty() { String::new() } else { format!(": {}{more}", shown.join(", ")) };
        say!("  would replace {} entries, {} of them summarized or dropped{listed}", report.replaced, gone.len());
    }
    for cost in &report.cache_rewrite {
        let even = cost.break_even_calls.map(|n| format!("pays back after {n} calls")).unwrap_or_else(|| "never pays back".into());
        say!("  cache rewrite {:<24} next call ${:.4} (uncompacted ${:.4}), {even}", cost.model, cost.next_call_usd, cost.next_call_uncompacted_usd);
    }
}

fn percent(report: &CompactionReport) -> String {
    if report.tokens_before == 0 {
        return "empty".into();
    }
    let saved = 100.0 * (report.tokens_before - report.tokens_after) as f64 / report.tokens_before as f64;
    format!("-{saved:.1}%")
}
