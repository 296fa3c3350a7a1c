"""Client of ``mcprl env serve``: mcprl's live MCP sandboxes as an environment for TRL, verl and OpenEnv.

- ``Environment``: TRL GRPOTrainer's ``environment_factory`` (one fork per rollout; ``query_database`` and
  ``run_linter`` as tools; ``get_reward`` from the server). ``environment_class()`` adds the fixture's other tools.
- ``compute_mcp_reward``, ``assertions_reward``, ``server_reward(name)``: TRL ``reward_funcs`` scored by mcprl.
- ``mcprl_env.verl``: ``MCPRLTool`` for verl's tool agent loop and ``compute_score`` for its reward manager.
- ``trl_system_prompt(tokenizer)``: the system message TRL renders for the environment's tools, as a task's
  ``system_prompt`` for warming a policy up with ``mcprl sft`` on the exact prompt TRL will show it.
- ``Session``: the protocol itself (OpenEnv's WebSocket messages); OpenEnv's own ``GenericEnvClient`` and
  ``MCPToolClient`` connect to the same server unchanged.

The server is ``set_server_url(...)``'s, else ``$MCPRL_ENV_URL``, else ``http://127.0.0.1:8000``.
"""

from .client import SERVER_URL_ENV, TOKEN_ENV, ServerError, Session, server_url, set_server_url
from .env import Environment, environment_class
from .rewards import assertions_reward, compute_mcp_reward, server_reward
from .trl import environment_tools, trl_system_prompt

__all__ = [
    "SERVER_URL_ENV",
    "TOKEN_ENV",
    "Environment",
    "ServerError",
    "Session",
    "assertions_reward",
    "compute_mcp_reward",
    "environment_class",
    "environment_tools",
    "server_reward",
    "server_url",
    "set_server_url",
    "trl_system_prompt",
]
