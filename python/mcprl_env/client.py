"""A session with `mcprl env serve` over OpenEnv's WebSocket protocol."""

from __future__ import annotations

import json
import os
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

#: Environment variable naming the server, e.g. ``http://127.0.0.1:8000``.
SERVER_URL_ENV = "MCPRL_ENV_URL"
DEFAULT_SERVER_URL = "http://127.0.0.1:8000"
#: Environment variable holding the bearer token of a server started with ``--token-env``.
TOKEN_ENV = "MCPRL_ENV_TOKEN"

_server_url: str | None = None


def set_server_url(url: str | None) -> None:
    """Sets the server every new session connects to (overrides ``MCPRL_ENV_URL``; None clears it)."""
    global _server_url
    _server_url = url


def server_url() -> str:
    """The server new sessions connect to: set_server_url's, else ``$MCPRL_ENV_URL``, else loopback port 8000."""
    return _server_url or os.environ.get(SERVER_URL_ENV) or DEFAULT_SERVER_URL


def _ws_url(url: str) -> str:
    url = url.rstrip("/")
    if url.startswith("https://"):
        url = "wss://" + url[len("https://") :]
    elif url.startswith("http://"):
        url = "ws://" + url[len("http://") :]
    return url + "/ws"


class ServerError(RuntimeError):
    """An error message from the server: ``code`` is OpenEnv's (VALIDATION_ERROR, EXECUTION_ERROR, ...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{message} (code: {code})")
        self.code = code
        self.message = message


class Session:
    """One session with the server: one episode at a time, each in its own sandbox fork.

    The connection opens on first use. A session the server freed (idle timeout) is reconnected by the next
    ``reset``; a call in an episode that is gone raises.
    """

    def __init__(self, url: str | None = None, timeout: float = 60.0) -> None:
        self.url = url or server_url()
        self.timeout = timeout
        self._ws: ClientConnection | None = None

    def _connect(self) -> ClientConnection:
        if self._ws is None:
            # Keepalive pings tell the server this session is alive while the trainer generates for minutes;
            # no pong deadline here: a trainer busy on the GIL must not drop its own episodes (the server frees
            # sessions whose peer stops answering its own pings).
            token = os.environ.get(TOKEN_ENV, "").strip()
            headers = {"Authorization": f"Bearer {token}"} if token else None
            self._ws = connect(
                _ws_url(self.url),
                open_timeout=self.timeout,
                max_size=64 * 1024 * 1024,
                ping_interval=30,
                ping_timeout=None,
                additional_headers=headers,
            )
        return self._ws

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        """Sends one message and returns the answer's data; an error answer raises ServerError."""
        ws = self._connect()
        try:
            ws.send(json.dumps(message))
            raw = ws.recv(timeout=self.timeout)
        except (ConnectionClosed, TimeoutError):
            self._ws = None
            ws.close()
            raise
        answer = json.loads(raw)
        data = answer.get("data", {})
        if answer.get("type") == "error":
            raise ServerError(str(data.get("code", "UNKNOWN")), str(data.get("message", "unknown error")))
        return data

    def reset(self, **fields: Any) -> dict[str, Any]:
        """Starts an episode in a fresh fork: ``task_id=...`` or the task inline; returns the observation."""
        message = {"type": "reset", "data": fields}
        try:
            data = self.request(message)
        except ConnectionClosed:
            data = self.request(message)  # the server freed an idle session: a new one
        return data["observation"]

    def step(self, action: dict[str, Any]) -> dict[str, Any]:
        """Runs one action; returns OpenEnv's step result: observation, reward, done."""
        return self.request({"type": "step", "data": action})

    def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Calls a tool in the episode's fork; returns the observation (tool_name, result, error)."""
        return self.step({"type": "call_tool", "tool_name": name, "arguments": arguments})["observation"]

    def finish(self, completion: str | list[dict[str, Any]] | None = None, replay: bool = False) -> dict[str, Any]:
        """Ends the episode and scores it; returns the step result (reward, done, observation.rewards)."""
        action: dict[str, Any] = {"type": "finish"}
        if completion is not None:
            action["completion"] = completion
        if replay:
            action["replay"] = True
        return self.step(action)

    def state(self) -> dict[str, Any]:
        """The episode's state, with its reward so far."""
        return self.request({"type": "state"})

    def fork(self) -> dict[str, Any]:
        """Snapshots the running episode on the server: ``fork_id``, ``episode_id``, ``step_count``.

        ``reset(fork_id=...)`` on any session then starts an episode from the snapshot (its task, database state and
        calls so far) in a fork of its own; a fork id serves any number of resets until the server's idle timeout.
        """
        return self.request({"type": "fork"})

    def close(self) -> None:
        """Ends the session; the server frees its fork."""
        if self._ws is not None:
            try:
                self._ws.send(json.dumps({"type": "close"}))
            except ConnectionClosed:
                pass
            self._ws.close()
            self._ws = None

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
