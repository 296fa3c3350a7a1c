"""verl adapters: a tool class for verl's tool agent loop and a ``compute_score`` for its reward manager.

verl's ToolAgentLoop creates a tool instance, executes one call and releases the instance on every tool call, so
the episode cannot live in the instance: ``MCPRLTool`` keeps one server session per rollout, keyed by the rollout's
request id (``agent_data.request_id``), and every call of that rollout runs in the same fork. Sessions of finished
rollouts are closed after ``session_ttl`` seconds without a call (and the server frees idle ones on its own).
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from typing import Any

# Absolute imports: verl's custom_reward_function.path may name this file, which verl then runs as a module of no
# package (verl.utils.import_utils.load_module), where a relative import fails.
from mcprl_env.client import Session
from mcprl_env.env import _TASK_FIELDS

try:  # verl is not a dependency: with it installed, the tool is a real BaseTool.
    from verl.tools.base_tool import BaseTool as _Base  # type: ignore[import-not-found]
    from verl.tools.schemas import ToolResponse  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - exercised where verl is absent

    class _Base:  # type: ignore[no-redef]
        pass

    class ToolResponse:  # type: ignore[no-redef]
        """verl's ToolResponse (text, image, video), where verl is not installed."""

        def __init__(self, text: str | None = None, image: list[Any] | None = None, video: list[Any] | None = None) -> None:
            self.text, self.image, self.video = text, image, video


class _Rollout:
    # A plain class, not a dataclass: dataclasses look their module up in sys.modules, where a file that verl loads
    # by path is not.
    def __init__(self, session: Session) -> None:
        self.session = session
        self.last = time.monotonic()
        self.lock = threading.Lock()


class MCPRLTool(_Base):  # type: ignore[misc]
    """One mcprl tool (query_database, run_linter or a fixture's) for verl; configured in verl's tool YAML.

    ``config`` may set ``url`` (the server; default ``mcprl_env.server_url()``) and ``session_ttl`` (seconds).
    A rollout's task comes from ``tools_kwargs[name]["create_kwargs"]`` in the dataset: ``task_id`` or the task
    inline (``task``, ``ground_truth_assertions``, ``fixture``, ``system_prompt``).
    """

    _rollouts: dict[str, _Rollout] = {}
    _lock = threading.Lock()

    def __init__(self, config: dict[str, Any], tool_schema: Any) -> None:
        self.config = config or {}
        self.tool_schema = tool_schema
        function = getattr(tool_schema, "function", None)
        self.name = function.name if function is not None else tool_schema["function"]["name"]
        self.url: str | None = self.config.get("url")
        self.session_ttl = float(self.config.get("session_ttl", 600))
        self._instances: dict[str, dict[str, Any]] = {}

    def get_openai_tool_schema(self) -> Any:
        return self.tool_schema

    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, Any]:
        instance_id = instance_id or uuid.uuid4().hex
        self._instances[instance_id] = dict(kwargs.get("create_kwargs") or {})
        return instance_id, ToolResponse()

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any) -> tuple[Any, float, dict[str, Any]]:
        agent_data = kwargs.get("agent_data")
        request_id = str(getattr(agent_data, "request_id", None) or instance_id)
        task = self._instances.get(instance_id, {})
        obs = await asyncio.to_thread(self._call, request_id, task, parameters)
        if obs.get("error"):
            return ToolResponse(text=f"Error when executing tool: {obs['error'].get('message')}"), 0.0, {"error": True}
        result = obs["result"]
        return ToolResponse(text=result["data"]), 0.0, {"is_error": bool(result.get("isError"))}

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        agent_data = kwargs.get("agent_data")
        request_id = str(getattr(agent_data, "request_id", None) or instance_id)
        with self._lock:
            rollout = self._rollouts.get(request_id)
        if rollout is None:
            return 0.0
        state = await asyncio.to_thread(rollout.session.state)
        return float(state.get("reward") or 0.0)

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        # The instance lives for one call; the rollout's session outlives it (see the module's doc).
        self._instances.pop(instance_id, None)
        await asyncio.to_thread(self._sweep)

    def _call(self, request_id: str, task: dict[str, Any], parameters: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            rollout = self._rollouts.get(request_id)
            if rollout is None:
                rollout = self._rollouts[request_id] = _Rollout(Session(self.url))
        with rollout.lock:
            rollout.last = time.monotonic()
            if not rollout.session.state().get("episode_id"):
                fields = {k: task[k] for k in _TASK_FIELDS if k in task}
                rollout.session.reset(**(fields or {"task": "(verl rollout)"}))
            return rollout.session.call_tool(self.name, parameters)

    def _sweep(self) -> None:
        now = time.monotonic()
        with self._lock:
            stale = [k for k, r in self._rollouts.items() if now - r.last > self.session_ttl]
            closing = [self._rollouts.pop(k) for k in stale]
        for r in closing:
            r.session.close()


def compute_score(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: dict[str, Any] | None = None, **kwargs: Any
) -> float:
    """verl's ``custom_reward_function``: the server's reward for a rollout's text, its calls replayed in a fork.

    The task is ``extra_info``'s ``task_id`` (or its inline fields); ``ground_truth``, when a list, is the task's
    ``ground_truth_assertions``. ``extra_info["reward"]`` picks one of the server's rewards by name (``compute_mcp_reward``,
    ``assertions``, ...); by default the server's configured reward.
    """
    info = dict(extra_info or {})
    fields = {k: info[k] for k in _TASK_FIELDS if info.get(k) is not None}
    if "task_id" not in fields and "id" not in fields and isinstance(ground_truth, list):
        fields.setdefault("ground_truth_assertions", ground_truth)
        fields.setdefault("task", str(info.get("question", "")) or "(verl rollout)")
    with Session(info.get("url")) as s:
        s.reset(**fields)
        result = s.finish(solution_str, replay=True)
    name = info.get("reward")
    if name:
        return float(result["observation"]["rewards"][name])
    return float(result["reward"])
