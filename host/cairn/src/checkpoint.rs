//! The continuation checkpoint's JSON Schema (published in `wit/checkpoint/`), and the host-side
//! validation every outcome's checkpoint passes before it is committed.

use std::sync::OnceLock;

/// `wit/checkpoint/2.schema.json`: version 2, which every version-1 checkpoint satisfies.
pub const SCHEMA: &str = include_str!("../../../wit/checkpoint/2.schema.json");

/// Checks a checkpoint's JSON text against the schema; the error lists what is wrong.
pub fn validate(json: &str) -> Result<(), String> {
    static VALIDATOR: OnceLock<jsonschema::Validator> = OnceLock::new();
    let validator = VALIDATOR.get_or_init(|| {
        let schema: serde_json::Value = serde_json::from_str(SCHEMA).expect("the checkpoint schema is JSON");
        jsonschema::validator_for(&schema).expect("the checkpoint schema is a valid JSON Schema")
    });
    let value: serde_json::Value = serde_json::from_str(json).map_err(|e| format!("checkpoint is not JSON: {e}"))?;
    let problems: Vec<String> = validator.iter_errors(&value).take(5).map(|e| format!("{} at {}", e, e.instance_path())).collect();
    if problems.is_empty() {
        Ok(())
    } else {
        // Schema errors quote the plugin's values: clip them like any plugin text.
        Err(crate::record::clip_message(&format!("checkpoint does not match the schema: {}", problems.join("; "))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = r#"{"task_objective":"fix it","negative_constraints":["never push to main"],"accepted_decisions":[],
        "rejected_hypotheses":[{"approach":"retry","reason":"flaky"}],"completed_milestones":[],"pending_work":[],
        "verification":{"passed":["cargo test"],"failed":[],"not_run":[]},"external_artifacts":[],
        "next_immediate_action":"run tests","files_read":["a.rs"],"files_modified":[]}"#;

    #[test]
    fn a_complete_checkpoint_validates() {
        validate(VALID).unwrap();
    }

    #[test]
    fn missing_extra_or_mistyped_keys_are_named() {
        let missing = VALID.replace(r#""next_immediate_action":"run tests","#, "");
        assert!(validate(&missing).unwrap_err().contains("next_immediate_action"));
        let extra = VALID.replace(r#""files_modified":[]"#, r#""files_modified":[],"mood":"great""#);
        assert!(validate(&extra).unwrap_err().contains("mood"));
        let mistyped = VALID.replace(r#""negative_constraints":["never push to main"]"#, r#""negative_constraints":"never""#);
        assert!(validate(&mistyped).unwrap_err().contains("negative_constraints"));
        assert!(validate("not json").unwrap_err().contains("not JSON"));
    }
}
