//! The thrash guard. A compaction cannot go below its floor: the protected head, the verbatim
//! tail, and what the harness adds back after a summary (files it re-reads, its plan, Cairn's
//! own session-start context). When that floor leaves too little of the window free, the next
//! turns trigger compaction again, each pass freeing less. The floor is judged twice: as the
//! compaction leaves it, plus the policy's re-injection budget, and at the next boundary, as
//! measured. Too high, and the next automatic maintenance is a handover, where automatic
//! handovers are allowed: a fresh session starts from its seed, with no tail to carry. Where they
//! are not, the notice tells the harness, and passes that free too little pause maintenance.

use super::ConversationState;
use crate::policy::LifecycleSettings;
use crate::record::Notice;

/// Marks the next automatic maintenance a handover, with a notice, when `floor` leaves less
/// free than the policy's headroom (once: a marked conversation is not marked again).
pub fn check(state: &mut ConversationState, settings: &LifecycleSettings, floor: u64, usable: u64, notice_id: String, what: &str) -> Option<Notice> {
    let free = usable.saturating_sub(floor);
    let wanted = (usable as f64 * settings.min_headroom_ratio) as u64;
    if usable == 0 || free >= wanted || state.handover_next.is_some() {
        return None;
    }
    let why = format!("{what}: a floor of {floor} tokens leaves {free} of {usable} usable free (the policy wants {wanted})");
    tracing::info!(%why, "thrash guard: the next automatic maintenance hands over");
    state.handover_next = Some(why.clone());
    Some(Notice::new(
        notice_id,
        "low-headroom",
        format!("Compacting again would free little and soon trigger again — {why}. The next automatic maintenance hands over to a fresh session, where automatic handovers are allowed."),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_floor_near_the_window_marks_a_handover_once() {
        let settings = LifecycleSettings::default();
        let mut state = ConversationState::default();
        assert!(check(&mut state, &settings, 50_000, 100_000, "n1".into(), "x").is_none(), "half the window is free");
        let notice = check(&mut state, &settings, 90_000, 100_000, "n2".into(), "the compaction left 80000 tokens").unwrap();
        assert_eq!(notice.kind, "low-headroom");
        assert!(notice.text.contains("10000 of 100000 usable free (the policy wants 15000)"), "{}", notice.text);
        assert!(state.handover_next.is_some());
        assert!(check(&mut state, &settings, 95_000, 100_000, "n3".into(), "x").is_none(), "one notice");
        let off = LifecycleSettings { min_headroom_ratio: 0.0, ..settings };
        assert!(check(&mut ConversationState::default(), &off, 100_000, 100_000, "n4".into(), "x").is_none(), "0 turns the guard off");
    }
}
