//! The OpenAI Responses API (Codex), with SSE (being built).
