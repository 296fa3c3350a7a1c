"""mcprl_env and OpenEnv's own clients against `mcprl env serve`: tools, rewards, verl's tool and score."""

from __future__ import annotations

import asyncio
import json
import pathlib
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from conftest import run_mcprl
from env_server import env_serve, stats, tasks

import mcprl_env
from mcprl_env.verl import MCPRLTool, compute_score


@pytest.fixture(scope="module")
def server(mcprl: pathlib.Path) -> Iterator[str]:
    with env_serve(mcprl, "--rewards", "assertions") as url:
        mcprl_env.set_server_url(url)
        yield url
        mcprl_env.set_server_url(None)


def golden_text(task: dict) -> str:
    """A task's golden trajectory as the model writes it (the calls in Qwen2.5's form)."""
    parts = []
    for m in task["golden"]:
        if m["role"] != "assistant":
            continue
        s = m.get("content", "")
        for c in m.get("tool_calls", []):
            s += "\n<tool_call>\n" + json.dumps({"name": c["name"], "arguments": c["arguments"]}) + "\n</tool_call>"
        parts.append(s)
    return "\n".join(parts)


def test_environment_is_what_trl_needs(server: str) -> None:
    """TRL's view: a no-argument constructor, reset(**row), typed documented tools (transformers' own schema
    reader accepts them), results from the episode's fork, get_reward from the server."""
    from transformers.utils import get_json_schema

    schema = get_json_schema(mcprl_env.Environment.query_database)
    assert schema["function"]["name"] == "query_database"
    assert schema["function"]["parameters"]["properties"]["sql"]["type"] == "string"
    assert get_json_schema(mcprl_env.Environment.run_linter)["function"]["parameters"]["required"] == ["path"]

    task = tasks()[0]
    env = mcprl_env.Environment()
    before = stats(server)
    assert env.reset(prompt=[{"role": "user", "content": task["task"]}], task_id=task["id"], other_column=1) is None
    assert env.observation["task"] == task["task"]
    assert "36" in env.query_database("SELECT COUNT(*) FROM customers")
    env.query_database("UPDATE customers SET status = 'gone' WHERE id <= 5")
    assert "\n5\n" in env.query_database("SELECT COUNT(*) FROM customers WHERE status = 'gone'")
    assert "exit code 0" in env.run_linter("inactive_customers.sql")
    assert env.run_linter("../../etc/passwd").startswith("run_linter refused")
    after = stats(server)
    assert after["tool_calls"] - before["tool_calls"] == 5
    assert after["forks_created"] - before["forks_created"] == 1
    # Another instance is another fork: the UPDATE above is not there.
    other = mcprl_env.Environment()
    other.reset(task_id=task["id"], prompt=[])
    assert "\n0\n" in other.query_database("SELECT COUNT(*) FROM customers WHERE status = 'gone'")
    # The golden trajectory holds every assertion live; a bare episode holds none.
    env.reset(task_id=task["id"], prompt=[])
    for m in task["golden"]:
        for c in m.get("tool_calls", []):
            getattr(env, c["name"])(**c["arguments"])
    assert env.get_reward() == 1.0
    other.reset(task_id=task["id"], prompt=[])
    assert other.get_reward() == 0.0
    env._close()
    other._close()


def test_rewards_equal_mcprl_score(server: str, mcprl: pathlib.Path, tmp_path: pathlib.Path) -> None:
    """compute_mcp_reward (through the rollouts' episodes, and without them) equals `mcprl score --reward compute_mcp_reward`
    on the same texts, and assertions_reward equals `mcprl score --reward assertions` (calls replayed)."""
    task = tasks()[0]
    texts = [
        golden_text(task),
        '<tool_call>\n{"name": "query_database", "arguments": {"sql": "SELECT 1"}}\n</tool_call>',
        '<tool_call>{"name": "drop_everything", "arguments": {}}</tool_call>',
        "<tool_call>{not json</tool_call>",
        "no call at all",
    ]
    envs = []
    for text in texts:
        env = mcprl_env.Environment()
        env.reset(task_id=task["id"], prompt=[])
        for m in task["golden"] if text == texts[0] else []:
            for c in m.get("tool_calls", []):
                getattr(env, c["name"])(**c["arguments"])
        envs.append(env)
    ids = [task["id"]] * len(texts)
    seed = mcprl_env.compute_mcp_reward(texts, environments=envs, task_id=ids)
    assertions = mcprl_env.assertions_reward(texts, environments=envs, task_id=ids)
    alone = mcprl_env.compute_mcp_reward(texts, task_id=ids)
    alone_assertions = mcprl_env.assertions_reward(texts, task_id=ids)
    assert [e.get_reward() for e in envs] == assertions

    comp = tmp_path / "completions.jsonl"
    comp.write_text("".join(json.dumps({"task_id": task["id"], "completion": t}) + "\n" for t in texts))
    fixtures = str(pathlib.Path(mcprl_env.__file__).resolve().parents[2] / "examples" / "fixtures")
    taskfile = str(pathlib.Path(fixtures).parent / "customers" / "tasks.jsonl")

    def score(name: str) -> list[float]:
        out = run_mcprl(mcprl, "score", "--reward", name, "--tasks", taskfile, "--fixtures", fixtures, "--completions", str(comp))
        return [json.loads(line)["reward"] for line in out.splitlines()]

    assert seed == score("compute_mcp_reward") == score("seed") == alone
    assert seed == [1.0, 0.6, -0.5, 0.1, 0.0]
    assert assertions == score("assertions") == alone_assertions
    assert assertions[0] == 1.0
    for env in envs:
        env._close()


def test_openenv_clients_unchanged(server: str) -> None:
    """OpenEnv's own GenericEnvClient and MCPToolClient (openenv-core, pinned) drive the server as they are."""
    from openenv.core.generic_client import GenericEnvClient
    from openenv.core.mcp_client import MCPToolClient

    task = tasks()[0]
    with GenericEnvClient(base_url=server).sync() as env:
        r = env.reset(task_id=task["id"])
        assert r.observation["task"] == task["task"] and not r.done
        r = env.step({"type": "call_tool", "tool_name": "query_database", "arguments": {"sql": "SELECT COUNT(*) FROM customers"}})
        assert "36" in r.observation["result"]["data"]
        st = env.state()
        assert st["step_count"] == 1
        with pytest.raises(RuntimeError, match="VALIDATION_ERROR"):
            env.step({"type": "call_tool"})
        r = env.step({"type": "finish", "completion": golden_text(task)})
        assert r.done and r.reward is not None

    async def mcp() -> None:
        async with MCPToolClient(base_url=server) as client:
            await client.reset(task_id=task["id"])
            names = [t.name for t in await client.list_tools()]
            assert names == ["query_database", "run_linter"]
            out = await client.call_tool("query_database", sql="SELECT COUNT(*) FROM customers WHERE status = 'inactive'")
            assert "\n7\n" in out
            lint = await client.call_tool("run_linter", path="cleanup_inactive.sql")
            assert "exit code" in lint

    asyncio.run(mcp())


def test_fork_episode(server: str) -> None:
    """Environment.fork() (and Session.fork()) branch a live episode: the child starts with the parent's state and
    calls, each goes on in its own fork, and TRL is not offered fork as a tool. OpenEnv's GenericEnvClient reaches
    the same through its generic message path (EnvClient._send_and_receive) and reset's keyword arguments."""
    from openenv.core.generic_client import GenericEnvClient

    assert [t.__name__ for t in mcprl_env.environment_tools()] == ["query_database", "run_linter"]
    parent = mcprl_env.Environment()
    parent.reset(task_id="customers-inactive-variants-002")
    parent.query_database(sql="DELETE FROM orders WHERE id <= 10")
    child = parent.fork()
    assert child.observation["fork_of"] and child.observation["step_count"] == 1
    parent.query_database(sql="DELETE FROM orders")
    assert "\n30\n" in child.query_database(sql="SELECT COUNT(*) FROM orders")
    child.query_database(sql="DELETE FROM customers WHERE id NOT IN (SELECT customer_id FROM orders)")
    assert "\n36\n" in parent.query_database(sql="SELECT COUNT(*) FROM customers")
    grandchild = child.fork()
    assert "\n0\n" not in grandchild.query_database(sql="SELECT COUNT(*) FROM orders")
    assert child.get_reward() >= 0.0 and parent.get_reward() >= 0.0  # each scored by the server, on its own calls
    for env in (parent, child, grandchild):
        env._close()

    async def generic() -> None:
        env = GenericEnvClient(base_url=server)
        async with env:
            await env.reset(task_id="customers-inactive-variants-002")
            await env.step({"type": "call_tool", "tool_name": "query_database", "arguments": {"sql": "DELETE FROM orders"}})
            answer = await env._send_and_receive({"type": "fork"})
            assert answer["type"] == "fork"
            fork_id = answer["data"]["fork_id"]
        async with GenericEnvClient(base_url=server) as other:
            r = await other.reset(fork_id=fork_id)
            assert r.observation["fork_of"] == fork_id
            r = await other.step({"type": "call_tool", "tool_name": "query_database", "arguments": {"sql": "SELECT COUNT(*) FROM orders"}})
            assert "\n0\n" in r.observation["result"]["data"]
            with pytest.raises(RuntimeError, match="VALIDATION_ERROR"):
                await other.reset(fork_id="nope")

    asyncio.run(generic())


def test_verl_tool_keyed_by_request(server: str) -> None:
    """verl creates, executes and releases a tool instance per call: calls of one rollout (request id) share a
    fork, another rollout's do not; compute_score replays a rollout's text and scores it."""
    task = tasks()[0]
    schema = {"type": "function", "function": {"name": "query_database", "description": "SQL", "parameters": {}}}
    tool = MCPRLTool({"url": server}, schema)
    create_kwargs = {"task_id": task["id"]}

    async def call(request_id: str, sql: str) -> str:
        iid, _ = await tool.create(create_kwargs=create_kwargs)
        resp, reward, metrics = await tool.execute(iid, {"sql": sql}, agent_data=SimpleNamespace(request_id=request_id))
        await tool.release(iid)
        return resp.text

    async def run() -> tuple[str, str]:
        await call("rollout-a", "UPDATE customers SET status = 'gone' WHERE id <= 3")
        a = await call("rollout-a", "SELECT COUNT(*) FROM customers WHERE status = 'gone'")
        b = await call("rollout-b", "SELECT COUNT(*) FROM customers WHERE status = 'gone'")
        return a, b

    a, b = asyncio.run(run())
    assert "\n3\n" in a and "\n0\n" in b
    assert compute_score("mcprl", golden_text(task), task["ground_truth_assertions"], {"task_id": task["id"]}) == 1.0
    assert compute_score("mcprl", "I did nothing.", task["ground_truth_assertions"], {"task_id": task["id"]}) == 0.0
    seed = compute_score("mcprl", golden_text(task), None, {"task_id": task["id"], "reward": "compute_mcp_reward"})
    assert seed == 1.0  # the golden's first query names "inactive": the user's full score


def test_token(mcprl: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server started with --token-env refuses a session without the token and serves one that sends
    $MCPRL_ENV_TOKEN."""
    from websockets.exceptions import InvalidStatus

    monkeypatch.setenv("MCPRL_ENV_TOKEN", "s3cret")
    with env_serve(mcprl, "--token-env", "MCPRL_ENV_TOKEN") as url:
        task = tasks()[0]
        s = mcprl_env.Session(url)
        assert s.reset(task_id=task["id"])["task"] == task["task"]
        s.close()
        monkeypatch.delenv("MCPRL_ENV_TOKEN")
        with pytest.raises(InvalidStatus, match="401"):
            mcprl_env.Session(url).reset(task_id=task["id"])
