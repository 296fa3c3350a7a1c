"""mcprl's sandboxes as TRL's ``environment_factory``: ``GRPOTrainer(..., environment_factory=Environment)``."""

from __future__ import annotations

import functools
import inspect
import json
import types
import urllib.request
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from .client import Session, server_url

# The dataset columns a reset forwards: a task of the server's task file by id, or the task inline.
_TASK_FIELDS = ("task_id", "id", "task", "system_prompt", "ground_truth_assertions", "fixture")


_T = TypeVar("_T")


class _NotATool(Generic[_T]):
    """A method that TRL does not offer the model as a tool.

    TRL's ``environment_factory`` offers every public function of the class (but ``reset`` and ``get_reward``) to
    the model; a method wrapped here is no function on the class (``inspect.isfunction`` is false for it), so the
    model never sees it, while ``instance.method()`` works as usual.
    """

    def __init__(self, fn: Callable[..., _T]) -> None:
        self._fn = fn
        functools.update_wrapper(self, fn)

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        return self if obj is None else types.MethodType(self._fn, obj)


class Environment:
    """One rollout's live sandbox on ``mcprl env serve``: each ``reset`` starts an episode in its own fork.

    TRL makes instances with no argument (the server is ``mcprl_env.server_url()``: ``set_server_url`` or
    ``$MCPRL_ENV_URL``), calls ``reset(**row)`` with the dataset row, offers the public methods below to the model
    as tools, and adds ``get_reward`` as a reward (the server's configured reward: ``--rewards``, assertions by
    default, checked live in the episode's fork).
    """

    def __init__(self) -> None:
        self._session = Session()
        self._result: dict[str, Any] | None = None
        self.observation: dict[str, Any] = {}

    def reset(self, **kwargs: Any) -> str | None:
        """Starts an episode of the row's task in a fresh fork.

        The row names a task of the server's task file (``task_id`` or ``id``) or carries the task inline
        (``task``, ``ground_truth_assertions``, ``fixture``, ``system_prompt``). Returns None when the row has a
        ``prompt`` (TRL's prompt already holds the task), else the task's text for TRL to append.
        """
        fields = {k: kwargs[k] for k in _TASK_FIELDS if k in kwargs and kwargs[k] is not None}
        self._result = None
        self.observation = self._session.reset(**fields)
        return None if "prompt" in kwargs else str(self.observation.get("task", ""))

    def query_database(self, sql: str) -> str:
        """Runs one SQL statement against the task's database and returns the result as a text table.

        Args:
            sql: One SQL statement, e.g. SELECT COUNT(*) FROM customers.

        Returns:
            The rows as a table, the number of rows changed, or the database's error message.
        """
        return self._call("query_database", {"sql": sql})

    def run_linter(self, path: str) -> str:
        """Lints a file of the task's workspace (SQL against the live schema, JSON, YAML) and returns its findings.

        Args:
            path: The file's path inside the workspace, e.g. inactive_customers.sql.

        Returns:
            The findings as path:line: message lines and the linter's exit code.
        """
        return self._call("run_linter", {"path": path})

    def get_reward(self) -> float:
        """The episode's reward as the server scores it (ending the episode if no reward function did)."""
        result = self._finish(None)
        reward = result.get("reward")
        return float(reward) if reward is not None else 0.0

    def _fork(self) -> Environment:
        """A new Environment whose episode starts from this one's as it is now: the same task, the database as this
        episode's calls left it, and those calls (so the server scores the continuation as a whole episode), in a
        fork of its own. Neither sees the other's later calls. For branching at a setback (examples/trl/branching.py).
        """
        snapshot = self._session.fork()
        child = type(self)()
        child.observation = child._session.reset(fork_id=snapshot["fork_id"])
        return child

    fork = _NotATool(_fork)

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        obs = self._session.call_tool(name, arguments)
        if obs.get("error"):
            # The tool server failed or timed out: TRL records the exception as a failed call.
            raise RuntimeError(f"{name}: {obs['error'].get('message')} ({obs['error'].get('error_type')})")
        return str(obs["result"]["data"])

    def _finish(self, completion: str | list[dict[str, Any]] | None) -> dict[str, Any]:
        """Ends the episode once, scored with the completion (its text or TRL's messages)."""
        if self._result is None:
            self._result = self._session.finish(completion)
        return self._result

    def _rewards(self, completion: str | list[dict[str, Any]] | None) -> dict[str, float]:
        return {k: float(v) for k, v in self._finish(completion)["observation"]["rewards"].items()}

    def _close(self) -> None:
        self._session.close()


_JSON_TYPES = {"string": str, "integer": int, "number": float, "boolean": bool, "array": list, "object": dict}


def environment_class(url: str | None = None, fixture: str | None = None) -> type[Environment]:
    """An Environment subclass with a typed method for every tool the fixture declares beyond the built-in two.

    It reads the catalog from the server's ``tools/list`` (``fixture`` names the fixture when the server has
    several) and gives each external tool a method whose signature and Google-style docstring come from its input
    schema, so that TRL offers it to the model like the built-in ones.
    """
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"fixture": fixture} if fixture else {}}
    req = urllib.request.Request(
        (url or server_url()).rstrip("/") + "/mcp",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        answer = json.load(resp)
    if "error" in answer:
        raise RuntimeError(f"tools/list: {answer['error'].get('message')}")
    methods: dict[str, Any] = {}
    for tool in answer["result"]["tools"]:
        name = tool["name"]
        if name in ("query_database", "run_linter") or not name.isidentifier() or name.startswith("_"):
            continue
        if name in ("reset", "get_reward"):
            raise ValueError(f"fixture tool {name!r} would shadow Environment.{name}")
        methods[name] = _tool_method(name, tool.get("description", ""), tool.get("inputSchema") or {})
    return type("Environment", (Environment,), methods)


def _tool_method(name: str, description: str, schema: dict[str, Any]) -> Any:
    props: dict[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {"return": str}
    doc_args = []
    for arg, spec in props.items():
        typ = _JSON_TYPES.get(spec.get("type") if isinstance(spec.get("type"), str) else "", str)
        default = inspect.Parameter.empty if arg in required else None
        params.append(inspect.Parameter(arg, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=typ))
        annotations[arg] = typ if arg in required else (typ | None)
        doc_args.append(f"    {arg}: {(spec.get('description') or arg).strip()}")

    def method(self: Environment, **kwargs: Any) -> str:
        return self._call(name, {k: v for k, v in kwargs.items() if v is not None})

    method.__name__ = method.__qualname__ = name
    method.__signature__ = inspect.Signature(params, return_annotation=str)  # type: ignore[attr-defined]
    method.__annotations__ = annotations
    summary = (description or f"Calls the fixture's {name} tool.").strip()
    args = "\n\nArgs:\n" + "\n".join(doc_args) if doc_args else ""
    method.__doc__ = f"{summary}{args}\n\nReturns:\n    The tool's result as text."
    return method
