//! What the operator said that work needs, by kind: rules of every form (prohibitions,
//! obligations, process, preferences), facts with their values, decisions and goal state. Each
//! statement is quoted verbatim, weighed by what it carries (a checkpoint under a budget keeps
//! the weightiest first), and a later statement on the same subject supersedes an earlier one.
//!
//! Nothing here keys on a particular wording of labels: a leading `Label:` of up to three words
//! ("Note:", "Reminder:", "Update:") is read past, whatever it says.

use crate::intent::{is_constraint, prose, sentences, word_positions};

/// The kind of an operator statement, most binding first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// "Never push to main", "Do not …", "No network calls".
    Prohibition,
    /// "Always …", "Only X may …", "… must …", "Report all times in UTC".
    Obligation,
    /// "Wait for my go-ahead", "… until the review", "ask before …".
    Process,
    /// "I prefer …", "reply in bullet points", "use metric units".
    Preference,
    /// "New plan: …", "final answer: let's …", "use Z instead".
    Decision,
    /// "Current task is …", "3 cases are failing", "next step is …", "blocked on …".
    Goal,
    /// "The staging URL is https://…", "Postgres 15 in us-west-2".
    Fact,
}

impl Kind {
    pub const ALL: [Kind; 7] = [Kind::Prohibition, Kind::Obligation, Kind::Process, Kind::Preference, Kind::Decision, Kind::Goal, Kind::Fact];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Prohibition => "prohibition",
            Kind::Obligation => "obligation",
            Kind::Process => "process",
            Kind::Preference => "preference",
            Kind::Decision => "decision",
            Kind::Goal => "goal",
            Kind::Fact => "fact",
        }
    }

    pub fn named(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Rules bind the agent's behaviour; the rest describe the work.
    pub fn is_rule(self) -> bool {
        matches!(self, Kind::Prohibition | Kind::Obligation | Kind::Process | Kind::Preference)
    }

    /// What a statement of this kind weighs before its values count.
    fn weight(self) -> u32 {
        match self {
            Kind::Prohibition => 6,
            Kind::Obligation | Kind::Process => 5,
            Kind::Preference | Kind::Decision | Kind::Goal => 4,
            Kind::Fact => 3,
        }
    }
}

/// One operator statement: its kind, its words (verbatim) and its weight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    pub kind: Kind,
    pub text: String,
    /// The kind's weight plus one per value it names (at most three).
    pub weight: u32,
}

/// The statements of one operator message, in order, sentence by sentence — but a sentence
/// that leans on the one before it on its line keeps it: a rule or a reference ("it", "this")
/// right after a sentence stating a value ("Budget cap is $500 total. Never exceed without
/// approval.", "The contact code is X-1. Use it in confirmations."), and a fact or goal
/// state right after another ("Current task is X. Steps 1-3 are done. Next is Y."). Rules stay
/// one a sentence: each binds on its own.
pub fn operator_statements(message: &str) -> Vec<Statement> {
    let prose = prose(message);
    let mut out: Vec<Statement> = Vec::new();
    for line in prose.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let line = line.trim_start_matches(['-', '*', '•']).trim();
        let parts = sentences(line);
        let mut previous_emitted = false;
        // Where the statement being built starts on the line.
        let mut from = 0;
        for (n, sentence) in parts.iter().enumerate() {
            let own = classify(sentence);
            let same_kind = previous_emitted && own.as_ref().is_some_and(|s| !s.kind.is_rule() && s.kind != Kind::Decision && out.last().is_some_and(|last| last.kind == s.kind));
            let leans = n > 0 && states_a_value(parts[n - 1]) && ((values(sentence).is_empty() && own.as_ref().is_some_and(|s| s.kind.is_rule())) || refers_back(sentence));
            if same_kind {
                let end = sentence.as_ptr() as usize - line.as_ptr() as usize + sentence.len();
                if let Some(joined) = classify(&line[from..end]) {
                    out.pop();
                    out.push(joined);
                    continue;
                }
            }
            if leans {
                let start = parts[n - 1].as_ptr() as usize - line.as_ptr() as usize;
                let end = sentence.as_ptr() as usize - line.as_ptr() as usize + sentence.len();
                if let Some(joined) = classify(&line[start..end]) {
                    if previous_emitted {
                        out.pop();
                    }
                    out.push(joined);
                    previous_emitted = true;
                    from = start;
                    continue;
                }
            }
            previous_emitted = own.is_some();
            from = sentence.as_ptr() as usize - line.as_ptr() as usize;
            out.extend(own);
        }
    }
    out
}

/// Words people write, not a pasted prompt, log line or JSON: three plain words at least, and
/// plain words the most of it.
fn is_prose(text: &str) -> bool {
    let words: Vec<&str> = text.split_whitespace().collect();
    let plain = words
        .iter()
        .filter(|w| {
            let w = w.trim_end_matches([',', '.', ';', ':', '!']);
            !w.is_empty() && w.chars().all(|c| c.is_alphabetic() || c == '\'' || c == '’')
        })
        .count();
    // A stack frame ("at Theme.load (src/theme.ts:251:27)") is output, however wordy.
    let frame = text.starts_with("at ") && text.ends_with(')');
    plain >= 3 && plain * 2 >= words.len() && !text.trim_start().starts_with(['{', '[']) && !frame
}

/// "Budget cap is $500 total.": a value and a copula, not a question.
fn states_a_value(sentence: &str) -> bool {
    let lower = sentence.to_lowercase();
    !sentence.ends_with('?') && !values(sentence).is_empty() && ["is", "are", "was", "were"].iter().any(|w| word_positions(&lower, w).next().is_some())
}

fn refers_back(sentence: &str) -> bool {
    let lower = sentence.to_lowercase();
    ["it", "this", "that", "them", "these", "those"].iter().any(|w| word_positions(&lower, w).next().is_some())
}

/// The statement `text` makes, if it makes one worth keeping; chatter ("Let's look at the
/// layout.", "Thanks!") and questions make none.
pub fn classify(text: &str) -> Option<Statement> {
    let text = text.trim();
    // Questions, titles ("Next steps:") and headings are not statements.
    if text.ends_with(['?', ':']) || text.starts_with('#') || !is_prose(text) {
        return None;
    }
    let body = unlabelled(text);
    let lower = body.to_lowercase().replace('’', "'");
    let has = |words: &[&str]| words.iter().any(|w| word_positions(&lower, w).next().is_some());
    let starts = |words: &[&str]| words.iter().any(|w| lower.starts_with(w) && lower[w.len()..].starts_with(|c: char| !c.is_alphanumeric()));
    // Labels are read past, but a decision often says so in its label ("New plan: …").
    let full = text.to_lowercase().replace('’', "'");
    let decides = DECISION.iter().any(|w| word_positions(&full, w).next().is_some());
    let found = values(body);
    let imperative = starts(IMPERATIVES);
    let kind = if is_constraint(body) || lower.starts_with("no ") || has(&["under no circumstances", "not allowed", "forbidden", "prohibited", "must never", "may not", "cannot"]) {
        Some(Kind::Prohibition)
    } else if has(PROCESS) || (imperative && has(&["before", "after", "first"])) {
        Some(Kind::Process)
    } else if has(PREFERENCE) {
        Some(Kind::Preference)
    } else if has(OBLIGATION) || starts(&["only"]) || (has(&["only"]) && has(&["may", "can"])) || (imperative && (has(QUANTIFIERS) || !found.is_empty())) {
        Some(Kind::Obligation)
    } else if decides || (has(&["instead"]) && imperative) {
        Some(Kind::Decision)
    } else if has(GOAL) {
        Some(Kind::Goal)
    } else if !found.is_empty() {
        Some(Kind::Fact)
    } else {
        None
    }?;
    Some(Statement { kind, text: text.to_string(), weight: kind.weight() + found.len().min(3) as u32 })
}

const OBLIGATION: &[&str] = &[
    "always",
    "must",
    "required",
    "requires",
    "need to",
    "needs to",
    "have to",
    "has to",
    "make sure",
    "ensure",
    "at all times",
    "at most",
    "at least",
    "mandatory",
    "below",
    "no more than",
    "ceiling",
    "limit",
    "cap",
];
const PROCESS: &[&str] =
    &["wait for", "until", "go-ahead", "go ahead", "approval", "approve", "approves", "approving", "sign-off", "sign off", "escalate", "ask me", "ask first", "check with", "confirm with", "reviews"];
/// Preferences, the output's among them: how answers look, which units, which language.
const PREFERENCE: &[&str] = &[
    "prefer",
    "prefers",
    "preferred",
    "preference",
    "would rather",
    "i'd rather",
    "wants",
    "want",
    "style",
    "tone",
    "reply in",
    "answer in",
    "respond in",
    "units",
    "format",
    "responses",
    "replies",
    "answers",
    "measurements",
    "metric",
    "imperial",
];
const DECISION: &[&str] = &["new plan", "final answer", "decided", "decision", "we'll go with", "go with", "going with", "switch to", "switched to", "from now on", "the plan is", "plan:"];
const GOAL: &[&str] = &[
    "current task",
    "next step",
    "next up",
    "working on",
    "in progress",
    "done",
    "completed",
    "finished",
    "blocked",
    "waiting",
    "awaiting",
    "open question",
    "failing",
    "fails",
    "phase",
    "milestone",
    "remaining",
    "left to do",
    "branch",
    "commit",
];
const QUANTIFIERS: &[&str] = &["all", "every", "each", "any"];
/// Words an operator's standing instruction starts with ("Report all times in …").
const IMPERATIVES: &[&str] = &[
    "use", "report", "keep", "run", "write", "send", "reply", "answer", "respond", "put", "show", "format", "stick", "follow", "include", "mention", "give", "call", "name", "store", "save", "log",
    "target", "set", "stay", "limit", "cap", "route", "deploy", "release", "ship",
];

/// `text` without a leading `Label:` of up to three words.
pub fn unlabelled(text: &str) -> &str {
    match text.split_once(':') {
        Some((label, rest))
            if !rest.is_empty() && rest.starts_with(' ') && label.split_whitespace().count() <= 3 && label.chars().all(|c| c.is_alphanumeric() || c == ' ' || c == '-' || c == '\'') =>
        {
            rest.trim_start()
        }
        _ => text,
    }
}

/// The values a statement names, in order: amounts, numbers, dates, URLs, paths, identifiers
/// (`ABCD-101`, `parse_v2`, `us-west-2`, `a1b2c3d`; not a plain `snake_case` word), all-capital names of five letters or more
/// (`LANTERN`, not `TTL`) and
/// capitalised words inside a sentence (`Priya Natarajan`, `Python`, `Monday`).
pub fn values(text: &str) -> Vec<&str> {
    let body = unlabelled(text);
    let mut out: Vec<&str> = Vec::new();
    let mut sentence_start = true;
    for raw in body.split(|c: char| c.is_whitespace()) {
        let word = raw.trim_matches(|c: char| matches!(c, ',' | ';' | ':' | '(' | ')' | '"' | '\'' | '`' | '!' | '?' | '[' | ']') || c == '.' && !raw.ends_with(".."));
        let word = word.trim_end_matches('.');
        let starts_sentence = sentence_start;
        // Markup before the first word ("##", "-", "**") does not start the sentence.
        sentence_start = raw.ends_with(['.', '!', '?']) || (starts_sentence && !raw.chars().any(char::is_alphanumeric));
        if word.is_empty() {
            continue;
        }
        let letters = word.chars().filter(|c| c.is_alphabetic()).count();
        let digits = word.chars().filter(|c| c.is_ascii_digit()).count();
        let is_value = word.starts_with('$')
            || digits > 0
            || occurs_in("://", word)
            || (word.contains('/') && letters > 1)
            || (word.contains(['_', '-']) && word.chars().skip(1).any(|c| c.is_ascii_uppercase()) && letters > 0)
            || (letters >= 5 && word.chars().all(|c| !c.is_alphabetic() || c.is_uppercase()))
            || (!starts_sentence && !SENTENCE_WORDS.contains(&word) && word.chars().next().is_some_and(char::is_uppercase) && word.chars().any(char::is_lowercase) && !word.starts_with("I'"));
        if is_value && !out.contains(&word) {
            out.push(word);
        }
    }
    out
}

/// Capitalised words that start a clause after a colon rather than name something.
const SENTENCE_WORDS: &[&str] = &["The", "A", "An", "We", "It", "This", "That", "You", "They", "Our", "My", "Please", "If", "When", "For", "Use", "Keep", "Do", "Don't", "Never", "Always"];

/// Words a statement uses to say it replaces an earlier one.
const UPDATE_MARKERS: &[&str] =
    &["update", "updated", "now", "changed", "moved", "rotated", "rotation", "new", "switched", "rebased", "rather", "no longer", "previous", "retired", "from now on", "instead", "anymore"];

/// Whether `later` supersedes `earlier`: the same statement with other values ("Budget cap is
/// $300" → "Budget cap is $700"), or a statement that says it is an update, drops a value of
/// the earlier one and shares its subject: two subject words, or one and a value of the same
/// kind ("Never disclose the vault code ab-12" → "The vault code rotated. Never disclose the
/// new vault code cd-34"; "Launch deadline is 2027-03-19" → "Update: the launch moved to
/// March 21"). The score says how much they share.
pub fn supersedes(later: &str, earlier: &str) -> Option<u32> {
    Later::new(later).supersedes(earlier)
}

/// A later statement, weighed against many earlier ones (`superseded_by`): what depends on it
/// alone is worked out once, and its masked form and subject words only if some earlier one
/// gets that far.
struct Later<'a> {
    text: &'a str,
    values: Vec<&'a str>,
    masked: std::cell::OnceCell<String>,
    marked_update: std::cell::OnceCell<bool>,
    subject_words: std::cell::OnceCell<Vec<String>>,
}

impl<'a> Later<'a> {
    fn new(text: &'a str) -> Self {
        Later { text, values: values(text), masked: Default::default(), marked_update: Default::default(), subject_words: Default::default() }
    }

    fn supersedes(&self, earlier: &str) -> Option<u32> {
        let earlier_values = values(earlier);
        let dropped = earlier_values.iter().any(|v| !self.values.iter().any(|l| l.eq_ignore_ascii_case(v)));
        if !dropped {
            return None;
        }
        if *self.masked.get_or_init(|| masked(self.text, &self.values)) == masked(earlier, &earlier_values) {
            return Some(u32::MAX);
        }
        let marked_update = *self.marked_update.get_or_init(|| {
            let lower = unlabelled(self.text).to_lowercase();
            UPDATE_MARKERS.iter().any(|m| word_positions(&lower, m).next().is_some())
        });
        if !marked_update {
            return None;
        }
        let (a, b) = (self.subject_words.get_or_init(|| subject_words(self.text, &self.values)), subject_words(earlier, &earlier_values));
        let shared = a.iter().filter(|w| b.contains(w)).count() as u32;
        let same_kind = self.values.iter().any(|l| earlier_values.iter().any(|e| value_kind(l) == value_kind(e)));
        (shared >= 2 || shared == 1 && same_kind).then_some(shared)
    }
}

/// What kind of value a word is: an amount, a date, a path or URL, an identifier, a number,
/// a name.
fn value_kind(value: &str) -> u8 {
    const MONTHS: [&str; 12] = ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"];
    let digits = value.chars().filter(char::is_ascii_digit).count();
    let dashes = value.matches('-').count();
    if value.starts_with('$') {
        0
    } else if MONTHS.contains(&value.to_lowercase().as_str()) || (digits >= 4 && dashes >= 1 && value.chars().all(|c| c.is_ascii_digit() || c == '-')) {
        1
    } else if value.contains('/') {
        2
    } else if digits > 0 && value.chars().any(char::is_alphabetic) {
        3
    } else if digits > 0 {
        4
    } else {
        5
    }
}

/// Of `earlier` statements, the one `later` supersedes, if any: the one it shares most with
/// (the latest of equals).
pub fn superseded_by<'a>(later: &str, earlier: impl IntoIterator<Item = &'a str>) -> Option<usize> {
    let later = Later::new(later);
    earlier.into_iter().enumerate().filter_map(|(n, e)| later.supersedes(e).map(|score| (score, n))).max().map(|(_, n)| n)
}

/// Whether `part` occurs in `whole`. Words and values are a few bytes: a byte-window scan costs
/// less than setting up `str::contains`'s two-way searcher for each pair, which was a quarter of
/// the guest's samples in a profile of warm compactions. The same answer as `whole.contains(part)`
/// (UTF-8 never matches inside a character).
fn occurs_in(part: &str, whole: &str) -> bool {
    part.len() <= whole.len() && (part.is_empty() || whole.as_bytes().windows(part.len()).any(|w| w == part.as_bytes()))
}

/// The statement with every value (`found`: its [`values`]) replaced by `#`, lowercased: its
/// subject and wording.
fn masked(text: &str, found: &[&str]) -> String {
    unlabelled(text).split_whitespace().map(|w| if found.iter().any(|v| occurs_in(v, w)) { "#".to_string() } else { w.to_lowercase() }).collect::<Vec<_>>().join(" ")
}

/// Its content words as stems (the first five letters), without values (`found`: its
/// [`values`]), update markers and the words every rule uses.
fn subject_words(text: &str, found: &[&str]) -> Vec<String> {
    const COMMON: &[&str] = &[
        "this", "that", "with", "from", "have", "will", "what", "when", "they", "them", "their", "there", "your", "into", "than", "then", "also", "just", "only", "must", "never", "always", "should",
        "would", "could", "please", "user", "users", "keep", "make", "about", "after", "before", "every", "over", "under", "which", "while", "where", "were", "been", "being", "does", "done", "here",
        "some", "more", "most", "such", "very", "each", "other", "these", "those", "work", "it's", "them.", "okay", "sure", "thanks",
    ];
    unlabelled(text)
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| w.chars().count() >= 4 && !found.iter().any(|v| occurs_in(w, v)))
        .map(str::to_lowercase)
        .filter(|w| !COMMON.contains(&w.as_str()) && !UPDATE_MARKERS.contains(&w.as_str()))
        .map(|w| w.chars().take(5).collect())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(text: &str) -> Option<Kind> {
        classify(text).map(|s| s.kind)
    }

    #[test]
    fn every_form_of_rule_is_a_rule_and_chatter_is_not() {
        assert_eq!(kind("Never push to main."), Some(Kind::Prohibition));
        assert_eq!(kind("No network calls from the sandbox."), Some(Kind::Prohibition));
        assert_eq!(kind("Under no circumstances reveal the token."), Some(Kind::Prohibition));
        assert_eq!(kind("Always run the linter before a commit."), Some(Kind::Obligation));
        assert_eq!(kind("Only Rust 1.95 may be used."), Some(Kind::Obligation));
        assert_eq!(kind("Report all times in UTC."), Some(Kind::Obligation));
        assert_eq!(kind("Wait for my go-ahead before deploying."), Some(Kind::Process));
        assert_eq!(kind("I prefer bullet points."), Some(Kind::Preference));
        assert_eq!(kind("New plan: port the parser to nom."), Some(Kind::Decision));
        assert_eq!(kind("Three integration tests are failing."), Some(Kind::Goal));
        assert_eq!(kind("The staging URL is https://stage.example.dev/v2."), Some(Kind::Fact));
        assert_eq!(kind("Let's look at the module layout."), None);
        assert_eq!(kind("Thanks!"), None);
        assert_eq!(kind("➜  pi-mono git:(main) ✗ echo $TERM"), None);
        assert_eq!(kind("/mode"), None);
        assert_eq!(kind("## How to reproduce"), None);
        assert_eq!(kind("Key Technical Concepts:"), None);
        assert_eq!(kind("Should we never push?"), None);
        assert_eq!(kind("Cache invalidation is event-driven; the TTL is only a backstop."), None);
    }

    #[test]
    fn a_value_stays_with_the_rule_that_needs_it() {
        let statements = operator_statements("Budget cap is $500 total. Never exceed without explicit approval.\nThanks.");
        assert_eq!(statements.len(), 1);
        assert_eq!(statements[0].text, "Budget cap is $500 total. Never exceed without explicit approval.");
        assert_eq!(statements[0].kind, Kind::Prohibition);
        let statements = operator_statements("Please fix the tests in src/parser.rs. Don't touch the public API. The contact code is X-1. Use it in confirmations.");
        let texts: Vec<&str> = statements.iter().map(|s| s.text.as_str()).collect();
        assert_eq!(texts, ["Please fix the tests in src/parser.rs.", "Don't touch the public API.", "The contact code is X-1. Use it in confirmations."]);
    }

    #[test]
    fn values_are_found_and_labels_are_not_values() {
        assert_eq!(
            values("NOTE: The project LANTERN ships 2026-11-15 from us-west-2 via https://x.dev/a, owner Priya Natarajan."),
            ["LANTERN", "2026-11-15", "us-west-2", "https://x.dev/a", "Priya", "Natarajan"]
        );
        assert_eq!(values("Eval cases ABCD-101 and parse_v2 cost $40, not fetch_all."), ["ABCD-101", "parse_v2", "$40"]);
        assert!(values("Let's review the layout. It is fine.").is_empty());
        assert_eq!(unlabelled("Quick update: keep spend low"), "keep spend low");
        assert_eq!(unlabelled("Note that: x"), "x");
        assert_eq!(unlabelled("See https://x.dev: y"), "See https://x.dev: y");
    }

    #[test]
    fn occurs_in_answers_as_str_contains() {
        let texts = ["", "a", "ab", "://", "https://x.dev", "ünïcode", "ï", "n", "code ab-12.", "ab-12", "$700", "Ünï"];
        for part in texts {
            for whole in texts {
                assert_eq!(occurs_in(part, whole), whole.contains(part), "{part:?} in {whole:?}");
            }
        }
    }

    #[test]
    fn later_statements_supersede_earlier_ones_on_the_same_subject_only() {
        assert!(supersedes("Budget cap is $700 total.", "Budget cap is $300 total.").is_some());
        assert!(supersedes("The vault code rotated. Never disclose the new vault code cd-34.", "Never disclose the vault code ab-12.").is_some());
        assert!(supersedes("Support duty now belongs to Ann Lee.", "Bob Ray is handling support escalation this week.").is_some());
        // Distinct subjects that look alike, and a restatement with the same values.
        assert!(supersedes("Conference spending ceiling is $300.", "Project spending ceiling is $550.").is_none());
        assert!(supersedes("Budget cap is $700 total, as said.", "Budget cap is $700 total.").is_none());
        let earlier = ["Project spending ceiling is $550.", "Field-trip expenses must stay at or below $700."];
        assert_eq!(superseded_by("New ceiling for trip costs: keep them below six hundred dollars.", earlier), Some(1));
    }
}
