//! Gemini's generateContent and streamGenerateContent (Gemini CLI) (being built).
