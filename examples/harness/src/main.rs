//! A harness embedding Cairn's lifecycle: at every turn boundary it reports usage, appends the
//! advice line Cairn returns to the turn, swaps in the compacted context when Cairn acted, lets
//! the agent request a handover, and takes and acknowledges notices.
//! Run with `cargo run -p cairn-example-harness`.

use anyhow::Result;
use cairn::lifecycle::{Action, AgentRequest, BoundaryReport, RequestKind, Usage};
use cairn::storage::{ConversationKey, Home};
use cairn::transcript::{sample, Entry, Transcript};
use cairn::{Cairn, Lifecycle};

const WINDOW: u64 = 60_000;

#[tokio::main]
async fn main() -> Result<()> {
    let mut cairn = Cairn::new()?;
    for plugin in cairn_bundle::BUNDLED {
        cairn.add_plugin(plugin.manifest, plugin.component, "bundled")?;
    }
    let home = tempfile::tempdir()?;
    let policy = cairn.default_policy()?;
    let lifecycle = Lifecycle::new(cairn, Home::open(home.path())?, policy);
    let conversation = ConversationKey::parse("example-agent")?;

    // The "agent" replays a generated session; a real harness appends what its model says.
    let session = sample::coding_session(40);
    let mut context: Vec<Entry> = Vec::new();
    for turn in 0..=40 {
        context.extend(session.entries.iter().filter(|e| e.turn == turn).cloned());
        if turn == 33 {
            // The agent decides a fresh session would serve it better.
            let request = AgentRequest { kind: RequestKind::Handover, preserve: "the ledger constraints".into(), resume: "continue with the reports module".into() };
            lifecycle.request(conversation.clone(), request).await?;
        }
        let outcome = lifecycle
            .boundary(BoundaryReport {
                conversation: conversation.clone(),
                turn,
                turn_complete: true,
                tool_call_outstanding: false,
                window: WINDOW,
                reserve: 8_000,
                usage: Usage::Counted,
                transcript: Transcript::new(context.clone()),
            })
            .await?;
        if let Some(advice) = &outcome.advice {
            println!("turn {turn:>2}: advice appended to the turn: {advice}");
        }
        match &outcome.action {
            Action::Compacted | Action::HandedOver => {
                let report = outcome.report.as_ref().expect("a maintenance has a report");
                println!("turn {turn:>2}: {:?} by {}: {} → {} tokens", outcome.action, report.committed_by.as_deref().unwrap_or("?"), report.tokens_before, report.tokens_after);
                context = outcome.transcript.entries.clone();
            }
            Action::Deferred(why) => println!("turn {turn:>2}: deferred: {why}"),
            Action::Paused | Action::Failed => println!("turn {turn:>2}: {:?}", outcome.action),
            Action::None | Action::Advised => {}
        }
        for notice in lifecycle.take_notices(conversation.clone()).await? {
            println!("          notice {}: {}", notice.id, notice.text);
            lifecycle.acknowledge(conversation.clone(), notice.id).await?;
        }
    }
    Ok(())
}
