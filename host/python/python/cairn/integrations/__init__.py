"""Cairn inside the agent frameworks people build harnesses with, one module each, each
importing its framework only when used: `cairn.integrations.langchain` (LangChain 1.x
`create_agent` middleware), `cairn.integrations.pydantic_ai` (Pydantic AI's history
processor), `cairn.integrations.openai_agents` (the OpenAI Agents SDK's model-input filter)."""
