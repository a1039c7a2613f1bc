//! codex, for real (being built; see issue 21).
