//! The fact-check of model-written summaries: before a step's outcome commits, what its model
//! wrote (the new replacement entries, the checkpoint's strings) is checked against the history
//! it replaces.
//! - **unverified**: a URL, a file path, a command in a code span (`cargo test -p auth`), a
//!   code-like identifier (`snake_case`, `camelCase`, `a.b`, `a::b`, a commit hash), a `--flag` or
//!   a number of two or more digits that appears nowhere in the history (text, tool calls and
//!   results, placeholders), the preserve/resume notes or the previous checkpoint;
//! - **stale**: an item the summary calls pending, in progress or next (checkpoint `pending_work`,
//!   `next_immediate_action`, `verification.not_run`; lines under such headings or prefixes, `[ ]`)
//!   whose key terms the history shows finished later: the last tool call naming it reported
//!   success (`test result: ok`, `12 passed`, exit code 0, ✓), or a later message says it is
//!   done, fixed or merged.
//!
//! Limits: the match is textual. A paraphrased command is flagged while an invention made of
//! words the history holds is not, plain-word claims are not checked, and "finished" is read from
//! success markers and completion words, not from what a command really did.

mod backing;
mod claims;
mod stale;

use std::collections::HashSet;

use super::{Applied, StepInput};
use crate::record::{FactFlag, FlagKind, MAX_FACT_FLAGS};
use crate::transcript::Entry;
use backing::{corpus, entry_text, json_strings, Index};
use claims::claims;
use stale::{clip, stale};

/// What bundled plugins write around a model's text themselves (the handover seed's closing
/// instructions): never the model's invention.
const PLUGIN_WORDING: &str = "`git status` `git log` session_history";

/// What a summary is checked against.
pub struct History<'a> {
    /// The step's whole input.
    pub entries: &'a [Entry],
    /// Entries from here on come after the replaced range (the verbatim tail): they back a claim
    /// but cannot make an item stale, since the summary sits before them.
    pub settled: usize,
    /// Other text the step was given: preserve and resume notes, the previous checkpoint, ids
    /// and URIs the host handed it.
    pub extra: &'a [&'a str],
}

/// What a model-written outcome claims.
#[derive(Debug, Default)]
pub struct Summary {
    /// The new replacement entries' text.
    pub text: String,
    /// The checkpoint, parsed.
    pub checkpoint: Option<serde_json::Value>,
}

impl Summary {
    /// The text of `new` entries (those the step wrote, not carried from the input) and the
    /// checkpoint JSON, if any.
    pub fn of(new: &[&Entry], checkpoint: Option<&str>) -> Self {
        let mut text = String::new();
        for entry in new {
            entry_text(entry, &mut text);
        }
        Summary { text, checkpoint: checkpoint.and_then(|c| serde_json::from_str(c).ok()) }
    }

    /// Everything checked for unverified claims: the text, then each checkpoint string.
    fn claim_text(&self) -> String {
        let mut out = self.text.clone();
        if let Some(checkpoint) = &self.checkpoint {
            json_strings(checkpoint, &mut |s| {
                out.push('\n');
                out.push_str(s);
            });
        }
        out
    }
}

/// The fact-check of a step's checked outcome (`applied`, `checkpoint`, the `artifacts` it
/// stored) against its input.
pub(crate) fn check_step(input: &StepInput<'_>, applied: &Applied, checkpoint: Option<&str>, artifacts: usize) -> Vec<FactFlag> {
    let known: HashSet<&str> = input.entries.iter().map(|e| e.id.as_str()).collect();
    let new: Vec<&Entry> = applied.replacement.iter().filter(|e| !known.contains(e.id.as_str())).collect();
    let summary = Summary::of(&new, checkpoint);
    // This step's own artifacts are named in its replacement; they are in no history yet.
    let own: Vec<String> = (1..=input.artifacts_before + artifacts).map(|n| format!("artifact://{}/{n}", input.archive_id)).collect();
    let extra: Vec<&str> =
        [input.preserve, input.resume, input.previous_checkpoint, Some(input.archive_id), Some(PLUGIN_WORDING)].into_iter().flatten().chain(own.iter().map(String::as_str)).collect();
    check(&History { entries: input.entries, settled: applied.last + 1, extra: &extra }, &summary)
}

/// The flags for `summary`: stale items first, then unverified claims in the order written; at
/// most [`MAX_FACT_FLAGS`].
pub fn check(history: &History<'_>, summary: &Summary) -> Vec<FactFlag> {
    let mut flags = stale(history, summary);
    let corpus = corpus(history);
    let index = Index::new(&corpus);
    for claim in claims(&summary.claim_text()) {
        if flags.len() >= MAX_FACT_FLAGS {
            break;
        }
        if !index.backs(&claim) {
            let why = format!("{} that appears nowhere in the history it replaces", claim.kind.noun());
            flags.push(FactFlag::new(FlagKind::Unverified, &claim.text, &why));
        }
    }
    flags.truncate(MAX_FACT_FLAGS);
    flags
}

/// The message of an outcome refused for its flags: `fact-check: ` and the first few.
pub(crate) fn rejection(flags: &[FactFlag]) -> String {
    const LISTED: usize = 3;
    let listed: Vec<String> = flags.iter().take(LISTED).map(|f| format!("{} {:?} ({})", f.kind, clip(&f.item, 120), f.why)).collect();
    let more = if flags.len() > LISTED { format!("; and {} more", flags.len() - LISTED) } else { String::new() };
    format!("fact-check: {} flag{}: {}{more}", flags.len(), if flags.len() == 1 { "" } else { "s" }, listed.join("; "))
}

#[cfg(test)]
mod tests {
    use super::stale::{completes, verdict};
    use super::*;
    use crate::transcript::Part;
    use crate::transcript::{Origin, Role};

    fn say(id: &str, role: Role, text: &str) -> Entry {
        let origin = match role {
            Role::User => Origin::Operator,
            Role::Tool => Origin::Tool,
            Role::System => Origin::Harness,
            Role::Assistant => Origin::Agent,
        };
        Entry::text(id, role, origin, text)
    }

    fn call(id: &str, text: &str, call_id: &str, name: &str, args: &str) -> Entry {
        Entry {
            parts: vec![Part::Text { text: text.into() }, Part::ToolCall { id: call_id.into(), name: name.into(), args: args.into() }].into(),
            ..Entry::text(id, Role::Assistant, Origin::Agent, "")
        }
    }

    fn result(id: &str, call_id: &str, content: &str) -> Entry {
        Entry { parts: vec![Part::ToolResult { call_id: call_id.into(), content: content.into(), is_error: false, elided: None }].into(), ..Entry::text(id, Role::Tool, Origin::Tool, "") }
    }

    /// An auth fix: read, failing test, edit, passing test.
    fn session() -> Vec<Entry> {
        vec![
            say("u1", Role::User, "The login endpoint returns 500 when the JWT has expired. Fix it and run the auth tests. Never touch `config/prod.toml`."),
            call("a1", "Reading the handler.", "c1", "read", r#"{"path":"src/auth/handler.rs"}"#),
            result("t1", "c1", "pub fn validate_token(token: &str) -> Result<Claims, AuthError> {\n    decode(token).map_err(AuthError::Decode)\n}"),
            call("a2", "Running the auth tests first.", "c2", "bash", r#"{"command":"cargo test -p auth --lib"}"#),
            result("t2", "c2", "running 12 tests\ntest token::expired_token_is_401 ... FAILED\n\ntest result: FAILED. 11 passed; 1 failed; 0 ignored"),
            call("a3", "Mapping the expiry error to 401 in `validate_token`.", "c3", "edit", r#"{"path":"src/auth/handler.rs","old":"AuthError::Decode","new":"AuthError::expired_or_decode"}"#),
            result("t3", "c3", "Edited src/auth/handler.rs: 1 replacement."),
            call("a4", "Re-running them.", "c4", "bash", r#"{"command":"cargo test -p auth --lib"}"#),
            result("t4", "c4", "running 12 tests\n\ntest result: ok. 12 passed; 0 failed; 0 ignored; finished in 0.42s"),
            say("a5", Role::Assistant, "Fixed: expired tokens now get 401. See https://docs.rs/jsonwebtoken/9.3.0/jsonwebtoken/ for the error kinds."),
        ]
    }

    fn flags_for(entries: &[Entry], text: &str) -> Vec<FactFlag> {
        check(&History { entries, settled: entries.len(), extra: &[] }, &Summary { text: text.into(), checkpoint: None })
    }

    fn items(flags: &[FactFlag], kind: FlagKind) -> Vec<&str> {
        flags.iter().filter(|f| f.kind == kind).map(|f| f.item.as_str()).collect()
    }

    const FAITHFUL: &str = "## Goal\nFix the login endpoint returning 500 when the JWT has expired.\n\n\
        ## Constraints & Preferences\n- Never touch `config/prod.toml`.\n\n\
        ## Progress\n### Done\n- [x] Mapped the expiry error to 401 in `validate_token` (src/auth/handler.rs, now `AuthError::expired_or_decode`).\n\
        - [x] `cargo test -p auth --lib`: 12 passed, 0 failed (it had 1 failure before the fix).\n\
        ### In Progress\n- none\n\n### Blocked\n- (none)\n\n\
        ## Key Decisions\n- **Return 401, not 500**: an expired token is the client's problem.\n\n\
        ## Next Steps\n1. Tell the operator the fix is in, and what was changed.\n2. Wait for review.\n\n\
        ## Critical Context\n- Error kinds: https://docs.rs/jsonwebtoken/9.3.0/jsonwebtoken/\n";

    #[test]
    fn a_faithful_summary_of_a_realistic_history_gets_no_flags() {
        let flags = flags_for(&session(), FAITHFUL);
        assert!(flags.is_empty(), "{flags:#?}");
    }

    #[test]
    fn a_faithful_summary_of_the_sample_session_gets_no_flags() {
        let transcript = crate::transcript::sample::coding_session(10);
        let text = "## Goal\nMake `ledger::apply` (and the other modules' `apply`) reject negative amounts.\n\n\
            ## Constraints & Preferences\n- Do not change the public API of `ledger`; never commit directly to main.\n\n\
            ## Progress\n### Done\n- [x] `accounts::apply`, `journal::apply`, `ledger::apply`, `reports::apply` and `currency::apply` reject \
            negative amounts (src/ledger.rs: `fn apply(` became `fn apply_checked(`).\n- [x] `cargo test`: 50 passed, 0 failed (ledger v0.3.0).\n\
            ### In Progress\n- (none)\n\n## Next Steps\n1. Run the test suite again after the next change.\n\n\
            <modified-files>\nsrc/ledger.rs\nsrc/journal.rs\n</modified-files>\n";
        let flags = flags_for(&transcript.entries, text);
        assert!(flags.is_empty(), "{flags:#?}");
    }

    #[test]
    fn plain_english_is_never_flagged() {
        let prose = "## Goal\nThe operator wants a quicker build, better error messages and fewer surprises; nothing else.\n\
            ## Next Steps\n- Ask whether the e.g. and/or i.e. wording in the README is fine, then wrap up.\n\
            Input/output and read/write paths were discussed (TCP/IP, I/O). It's about 3 files; 1. done.\n";
        let flags = flags_for(&session(), prose);
        assert!(flags.is_empty(), "{flags:#?}");
    }

    #[test]
    fn an_invented_path_is_flagged() {
        let text = format!("{FAITHFUL}- The token cache lives in src/auth/cache.rs and `src/auth/handler.rs:42`.\n");
        let flags = flags_for(&session(), &text);
        assert_eq!(items(&flags, FlagKind::Unverified), ["src/auth/cache.rs"], "{flags:#?}");
        assert!(flags[0].why.contains("path"), "{flags:#?}");
    }

    #[test]
    fn urls_numbers_commands_identifiers_and_flags() {
        let text = "- See https://docs.rs/jsonwebtoken/9.3.0/jsonwebtoken/ and https://example.com/made-up.\n\
            - 12 passed; the suite takes 850ms; version 9.3.0 and 9.4.1.\n\
            - Run `cargo test -p auth --lib` then `cargo test -p auth --release`; also `cargo clippy --all-targets`.\n\
            - `validate_token` calls `refresh_session`; `AuthError::Decode` and `AuthError::Expired`; TokenCache; run with --nocapture.\n";
        let flags = flags_for(&session(), text);
        assert_eq!(
            items(&flags, FlagKind::Unverified),
            ["https://example.com/made-up", "850", "9.4.1", "cargo test -p auth --release", "cargo clippy --all-targets", "refresh_session", "AuthError::Expired", "TokenCache", "--nocapture",],
            "{flags:#?}"
        );
    }

    #[test]
    fn the_preserve_notes_and_the_previous_checkpoint_back_claims() {
        let entries = session();
        let summary = Summary { text: "Keep `docs/SECURITY.md` and the ticket AUTH_1234 in mind.".into(), checkpoint: None };
        let bare = check(&History { entries: &entries, settled: entries.len(), extra: &[] }, &summary);
        assert_eq!(items(&bare, FlagKind::Unverified), ["docs/SECURITY.md", "AUTH_1234"]);
        let previous = r#"{"files_read":["docs/SECURITY.md"]}"#;
        let extra = [previous, "remember ticket AUTH_1234"];
        assert!(check(&History { entries: &entries, settled: entries.len(), extra: &extra }, &summary).is_empty());
    }

    #[test]
    fn checkpoint_strings_are_checked_too() {
        let checkpoint = serde_json::json!({
            "task_objective": "fix expired JWTs", "files_modified": ["src/auth/handler.rs", "src/auth/session.rs"],
            "verification": { "passed": ["cargo test -p auth --lib"], "failed": [], "not_run": [] },
        });
        let flags = check(&History { entries: &session(), settled: 10, extra: &[] }, &Summary { text: String::new(), checkpoint: Some(checkpoint) });
        assert_eq!(items(&flags, FlagKind::Unverified), ["src/auth/session.rs"], "{flags:#?}");
    }

    #[test]
    fn a_pending_item_the_history_shows_passing_later_is_stale() {
        let text = "## Progress\n### In Progress\n- [ ] run the auth tests\n\n## Next Steps\n1. Run `cargo test -p auth --lib` again\n";
        let flags = flags_for(&session(), text);
        assert_eq!(items(&flags, FlagKind::Stale), ["run the auth tests", "Run `cargo test -p auth --lib` again"], "{flags:#?}");
        assert!(flags[0].why.contains("cargo test -p auth --lib") && flags[0].why.contains("entry t4"), "{flags:#?}");
    }

    #[test]
    fn a_pending_item_never_finished_is_not_stale() {
        let text = "Pending: deploy the auth service to staging\nNext: open a pull request for the auth fix\nTODO: add a regression test for refresh tokens\n";
        let flags = flags_for(&session(), text);
        assert!(items(&flags, FlagKind::Stale).is_empty(), "{flags:#?}");
        // A run of the tests that failed last is not finished either.
        let mut failing = session();
        failing.truncate(5);
        let flags = flags_for(&failing, "In progress: run the auth tests\n");
        assert!(flags.is_empty(), "{flags:#?}");
    }

    #[test]
    fn a_later_request_reopens_a_finished_item() {
        let mut entries = session();
        entries.push(say("u2", Role::User, "Run the auth tests once more after rebasing, they may break."));
        let flags = flags_for(&entries, "In progress: run the auth tests\n");
        assert!(flags.is_empty(), "{flags:#?}");
        // …until they pass again.
        entries.push(call("a6", "", "c6", "bash", r#"{"command":"cargo test -p auth"}"#));
        entries.push(result("t6", "c6", "exit code 0"));
        let flags = flags_for(&entries, "In progress: run the auth tests\n");
        assert_eq!(items(&flags, FlagKind::Stale), ["run the auth tests"], "{flags:#?}");
    }

    #[test]
    fn a_completion_message_makes_a_pending_item_stale_but_a_promise_does_not() {
        let mut entries = session();
        entries.push(say("u2", Role::User, "Also update the CHANGELOG entry for the expiry fix."));
        let pending = "## Next Steps\n- Update the CHANGELOG entry for the expiry fix\n";
        entries.push(say("a6", Role::Assistant, "I will update the CHANGELOG entry for the expiry fix next."));
        assert!(flags_for(&entries, pending).is_empty());
        entries.push(say("a7", Role::Assistant, "Done: the CHANGELOG entry for the expiry fix is updated."));
        let flags = flags_for(&entries, pending);
        assert_eq!(items(&flags, FlagKind::Stale), ["Update the CHANGELOG entry for the expiry fix"], "{flags:#?}");
        assert!(flags[0].why.contains("entry a7"));
    }

    #[test]
    fn checkpoint_pending_work_and_next_action_are_checked_for_staleness() {
        let checkpoint = serde_json::json!({ "pending_work": ["run the auth tests"], "next_immediate_action": "deploy to staging", "verification": { "not_run": ["cargo test -p auth --lib"] } });
        let flags = check(&History { entries: &session(), settled: 10, extra: &[] }, &Summary { text: String::new(), checkpoint: Some(checkpoint) });
        assert_eq!(items(&flags, FlagKind::Stale), ["run the auth tests", "cargo test -p auth --lib"], "{flags:#?}");
    }

    #[test]
    fn what_comes_after_the_replaced_range_backs_claims_but_does_not_make_items_stale() {
        let entries = session();
        // The summary replaces the first five entries (through the failing run).
        let history = History { entries: &entries, settled: 5, extra: &[] };
        let flags = check(&history, &Summary { text: "In progress: make `cargo test -p auth --lib` pass (12 tests).".into(), checkpoint: None });
        assert!(flags.is_empty(), "{flags:#?}");
    }

    #[test]
    fn one_plain_word_does_not_tie_an_item_to_a_success() {
        let flags = flags_for(&session(), "## Next Steps\n- run the tests\n");
        assert!(flags.is_empty(), "{flags:#?}");
    }

    #[test]
    fn markup_tags_are_no_paths() {
        let text = "<read-files>\nsrc/auth/handler.rs\n</read-files>\n<br/> a < b and c > d; <summary>ok</summary>";
        assert!(flags_for(&session(), text).is_empty());
    }

    #[test]
    fn flags_are_capped() {
        let text: String = (0..40).map(|n| format!("- src/invented_{n}.rs\n")).collect();
        let flags = flags_for(&session(), &text);
        assert_eq!(flags.len(), MAX_FACT_FLAGS);
        assert_eq!(flags[0].item, "src/invented_0.rs");
    }

    #[test]
    fn verdicts_of_tool_results() {
        for ok in ["test result: ok. 3 passed; 0 failed", "Ran 4 tests\n\nOK\n4 passed", "✓ 18 tests", "Process exited with code 0", "exit code: 0"] {
            assert_eq!(verdict(ok), Some(true), "{ok}");
        }
        for bad in ["test result: FAILED. 1 passed; 2 failed", "error[E0308]: mismatched types", "Traceback (most recent call last):", "exit status 2", "test foo ... FAILED"] {
            assert_eq!(verdict(bad), Some(false), "{bad}");
        }
        for neither in ["Edited src/a.rs: 1 replacement.", "pub fn apply() -> Result<(), Error> { Err(Error::Overflow) }"] {
            assert_eq!(verdict(neither), None, "{neither}");
        }
        assert!(completes("Fixed: expired tokens now get 401."));
        assert!(completes("Tests: 12 passed, 0 failed."));
        for not in ["The fix is not done yet.", "I haven't finished it.", "Is it fixed?", "It will be merged tomorrow.", "2 failed, 10 passed."] {
            assert!(!completes(not), "{not}");
        }
    }

    #[test]
    fn the_rejection_message_lists_the_first_flags() {
        let flags: Vec<FactFlag> = (0..5).map(|n| FactFlag::new(FlagKind::Unverified, &format!("src/x{n}.rs"), "a path that appears nowhere")).collect();
        let message = rejection(&flags);
        assert!(message.starts_with("fact-check: 5 flags: unverified \"src/x0.rs\""), "{message}");
        assert!(message.ends_with("and 2 more"), "{message}");
    }
}
