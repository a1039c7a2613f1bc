//! gemini, for real (being built; see issue 21).
