"""Adapters that plug the recovery runtime into agent frameworks, each at the
framework's own hook; so that one layer owns retrying, each turns the
framework's inner retries off where it sends the request itself (PydanticAI's
`max_retries=0` setting) and says how to elsewhere (a client's
`max_retries=0`).

| module | framework (extra) | hook |
| --- | --- | --- |
| `agent_recovery.integrations.pydantic_ai` | PydanticAI (`pydantic-ai`) | a `WrapperModel` whose requests go through the door; tools wrapped with `recover(errors="model")` |
| `agent_recovery.integrations.openai_agents` | OpenAI Agents SDK (`openai-agents`) | `ModelRetrySettings(policy=...)` and a tool `failure_error_function` |
| `agent_recovery.integrations.langgraph` | LangGraph (`langgraph`) | a node wrapper, a `RetryPolicy.retry_on` predicate, a node `error_handler` |
| `agent_recovery.integrations.llama_index` | LlamaIndex workflows (`llama-index`) | a step `RetryPolicy` |
| `agent_recovery.integrations.google_adk` | Google ADK (`google-adk`) | a plugin: `on_tool_error_callback`, `on_model_error_callback` |

Importing this package imports no framework; each module imports its
framework when it is imported itself (docs/integrations/frameworks.md).
"""
