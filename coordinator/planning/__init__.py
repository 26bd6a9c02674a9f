"""From a question to a plan: what it names and asks (reading, spans, meaning, intents), what each tool
takes (tools), the deterministic planner, and the plan it makes (a DAG, and what was not planned)."""
