//! A synthetic but realistic coding-agent session, generated deterministically: operator
//! requests with constraints, file reads (some re-read later), test runs, edits and replies
//! with code blocks. Used by `cairn demo` and by tests, so no recorded session is needed.

use super::{Entry, Origin, Part, Role, Transcript};

/// A session of `turns` operator turns.
pub fn coding_session(turns: usize) -> Transcript {
    let mut entries = vec![Entry::text("sys", Role::System, Origin::Harness, "You are a coding agent working in the `ledger` repository. Use the tools to read, edit and test code.")];
    let mut next = 0usize;
    let mut id = |prefix: &str| {
        next += 1;
        format!("{prefix}{next}")
    };
    for turn in 1..=turns {
        let module = MODULES[turn % MODULES.len()];
        let path = format!("src/{module}.rs");
        entries.push(Entry::text(
            id("u"),
            Role::User,
            Origin::Operator,
            format!(
                "Turn {turn}: make `{module}::apply` reject negative amounts. Do not change the public API of `{module}`, \
                 and never commit directly to main."
            ),
        ));
        let read_id = format!("call-read-{turn}");
        let test_id = format!("call-test-{turn}");
        let edit_id = format!("call-edit-{turn}");
        entries.push(assistant(id("a"), format!("I'll read `{path}` first."), &read_id, "read", &format!(r#"{{"path":"{path}"}}"#)));
        entries.push(tool_result(id("t"), &read_id, source_file(module, turn)));
        entries.push(assistant(id("a"), "Now the test suite.".into(), &test_id, "bash", r#"{"command":"cargo test"}"#));
        entries.push(tool_result(id("t"), &test_id, test_output(module, turn)));
        entries.push(assistant(id("a"), format!("Adding the check to `{module}::apply`."), &edit_id, "edit", &format!(r#"{{"path":"{path}","old":"fn apply(","new":"fn apply_checked("}}"#)));
        entries.push(tool_result(id("t"), &edit_id, format!("Edited {path}: 1 replacement.")));
        entries.push(Entry::text(
            id("a"),
            Role::Assistant,
            Origin::Agent,
            format!("Done: `{module}::apply` now rejects negative amounts. The new code:\n\n```rust\n{}```\n\nTests: {} passed, 0 failed.", code_block(module, turn), 40 + turn),
        ));
    }
    let mut transcript = Transcript::new(entries);
    transcript.number_turns();
    transcript
}

const MODULES: [&str; 5] = ["accounts", "journal", "ledger", "reports", "currency"];

fn assistant(id: String, text: String, call_id: &str, name: &str, args: &str) -> Entry {
    Entry { parts: vec![Part::Text { text }, Part::ToolCall { id: call_id.into(), name: name.into(), args: args.into() }].into(), ..Entry::text(id, Role::Assistant, Origin::Agent, "") }
}

fn tool_result(id: String, call_id: &str, content: String) -> Entry {
    Entry { parts: vec![Part::ToolResult { call_id: call_id.into(), content, is_error: false, elided: None }].into(), ..Entry::text(id, Role::Tool, Origin::Tool, "") }
}

fn source_file(module: &str, turn: usize) -> String {
    let mut out = format!("//! The `{module}` module (revision {turn}).\n\nuse crate::money::Amount;\n\n");
    for f in 0..40 {
        out.push_str(&format!(
            "/// Applies posting {f} of the {module} book.\npub fn apply_{f}(book: &mut Book, amount: Amount) -> Result<(), Error> {{\n    \
             book.balance_{f} = book.balance_{f}.checked_add(amount).ok_or(Error::Overflow {{ posting: {f} }})?;\n    Ok(())\n}}\n\n"
        ));
    }
    out
}

fn test_output(module: &str, turn: usize) -> String {
    let mut out = String::from("   Compiling ledger v0.3.0\n    Finished test profile\n     Running unittests src/lib.rs\n\n");
    for t in 0..40 + turn {
        out.push_str(&format!("test {module}::tests::posting_{t}_balances ... ok\n"));
    }
    out.push_str(&format!("\ntest result: ok. {} passed; 0 failed; 0 ignored\n", 40 + turn));
    out
}

fn code_block(module: &str, turn: usize) -> String {
    let mut out = String::new();
    for line in 0..60 {
        out.push_str(&format!("    // {module} check {turn}.{line}: amounts below zero are rejected before posting\n"));
    }
    out
}
