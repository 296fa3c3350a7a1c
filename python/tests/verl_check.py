"""mcprl_env's verl adapters run through verl's own classes (verl 0.9.1, python/verl-requirements.lock).

Runs in the verl environment (scripts/verl-setup.sh), not in the reference one: verl pins transformers<5.11 where
TRL needs 5.23. test_env_verl.py starts `mcprl env serve` and runs this file as
`verl-python verl_check.py URL`; every check is an assert, and the last line printed is a JSON summary.

What runs here is verl's code: BaseTool and ToolResponse (the subclass check), tool_registry's
initialize_tools_from_config and load_all_tools on examples/verl/mcprl_tool_config.yaml, AgentData, ToolAgentLoop
(its state machine, Continuous Token builder, hermes tool parser and _call_tool's create/execute/release per call),
and trainer.ppo.reward.get_custom_reward_fn loading compute_score both ways verl's docs allow (pkg:// and a file
path). What does not: the LLM server behind ToolAgentLoop's server_manager (vLLM or SGLang replicas that
AgentLoopManager starts as Ray actors on GPUs) is a scripted stand-in that returns fixed token ids, and so
AgentLoopWorker / AgentLoopManager (Ray, the rollout replicas) and the PPO trainer around them do not run.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import pathlib
import sys
import tempfile
from typing import Any

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))  # mcprl_env as it is in this checkout

import verl  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402
from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap  # noqa: E402
from verl.experimental.agent_loop.tool_agent_loop import AgentData, ToolAgentLoop  # noqa: E402
from verl.tools.base_tool import BaseTool  # noqa: E402
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse  # noqa: E402
from verl.tools.tool_registry import initialize_tools_from_config, load_all_tools  # noqa: E402
from verl.trainer.ppo.reward import get_custom_reward_fn  # noqa: E402
from verl.workers.rollout.replica import TokenOutput  # noqa: E402

import mcprl_env.verl as adapter  # noqa: E402
from mcprl_env.verl import MCPRLTool  # noqa: E402

TASKS = REPO / "examples" / "customers" / "tasks.jsonl"
TOKENIZER = REPO / "examples" / "trl" / "base"  # Qwen2.5's chat template (tools, <tool_call>) on a 2048-token vocab


def check_base_tool() -> None:
    """The adapter's classes are verl's: a BaseTool subclass whose coroutines take what verl passes."""
    assert issubclass(MCPRLTool, BaseTool)
    assert adapter.ToolResponse is ToolResponse, "the adapter must return verl's ToolResponse where verl is installed"
    for name in ("create", "execute", "calc_reward", "release"):
        ours, theirs = getattr(MCPRLTool, name), getattr(BaseTool, name)
        assert inspect.iscoroutinefunction(ours), name
        params = inspect.signature(ours).parameters
        for p in inspect.signature(theirs).parameters.values():
            if p.kind is p.VAR_KEYWORD:
                assert any(q.kind is q.VAR_KEYWORD for q in params.values()), f"{name} must take **kwargs"
            else:
                assert p.name in params, f"{name} lacks {p.name}"


def load_tools(url: str, tmp: pathlib.Path) -> list[Any]:
    """verl's tool config loader on the example YAML, its url pointed at the live server."""
    cfg = OmegaConf.load(REPO / "examples" / "verl" / "mcprl_tool_config.yaml")
    for t in cfg.tools:
        t.config.url = url
    path = tmp / "tool_config.yaml"
    OmegaConf.save(cfg, path)
    tools = initialize_tools_from_config(str(path))
    assert [t.name for t in tools] == ["query_database", "run_linter"], [t.name for t in tools]
    for t in tools:
        assert isinstance(t, MCPRLTool) and isinstance(t, BaseTool)
        assert isinstance(t.tool_schema, OpenAIFunctionToolSchema)
        assert t.get_openai_tool_schema() is t.tool_schema
        assert t.url == url and t.session_ttl == 600
    assert [t.name for t in load_all_tools(str(path), None)] == ["query_database", "run_linter"]
    return tools


async def check_lifecycle(tools: list[Any], task: dict[str, Any]) -> float:
    """create / execute / release per call as ToolAgentLoop._call_tool does, with verl's own AgentData; calc_reward."""
    query, lint = tools
    create_kwargs = {"task_id": task["id"]}

    def agent_data(request_id: str) -> AgentData:
        return AgentData([], None, None, None, None, {}, request_id, {})

    async def call(tool: Any, request_id: str, args: dict[str, Any]) -> tuple[ToolResponse, float, dict[str, Any]]:
        iid, created = await tool.create(create_kwargs=create_kwargs)
        assert isinstance(created, ToolResponse)
        try:
            return await tool.execute(iid, args, agent_data=agent_data(request_id))
        finally:
            await tool.release(iid)

    resp, reward, metrics = await call(query, "life-a", {"sql": "UPDATE customers SET status = 'gone' WHERE id <= 3"})
    assert isinstance(resp, ToolResponse) and reward == 0.0 and metrics == {"is_error": False}, (resp, metrics)
    a, _, _ = await call(query, "life-a", {"sql": "SELECT COUNT(*) FROM customers WHERE status = 'gone'"})
    b, _, _ = await call(query, "life-b", {"sql": "SELECT COUNT(*) FROM customers WHERE status = 'gone'"})
    assert "\n3\n" in a.text and "\n0\n" in b.text, (a.text, b.text)
    linted, _, metrics = await call(lint, "life-a", {"path": "inactive_customers.sql"})
    assert "exit code 0" in linted.text and metrics == {"is_error": False}, linted.text
    bad, _, metrics = await call(query, "life-a", {"sql": "SELECT * FROM nowhere"})
    assert metrics["is_error"] is True, (bad.text, metrics)
    iid, _ = await query.create(create_kwargs=create_kwargs)
    reward = await query.calc_reward(iid, agent_data=agent_data("life-a"))
    await query.release(iid)
    assert isinstance(reward, float) and 0.0 <= reward <= 1.0, reward
    return reward


class ScriptedServer:
    """Stands in for verl's LLM server manager (vLLM / SGLang replicas on GPUs): each rollout's turns are fixed
    texts, returned as token ids of the real tokenizer, so that verl's agent loop runs everything else."""

    def __init__(self, tokenizer: Any, turns: dict[str, list[str]]) -> None:
        self.tokenizer = tokenizer
        self.turns = turns  # first user message -> the assistant's turns
        self.requests: dict[str, str] = {}  # request id -> rollout
        self.prompts: dict[str, list[str]] = {}

    async def generate(self, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any) -> TokenOutput:
        prompt = self.tokenizer.decode(prompt_ids)
        rollout = next(k for k in self.turns if k in prompt)
        self.requests[request_id] = rollout
        self.prompts.setdefault(rollout, []).append(prompt)
        text = self.turns[rollout][len(self.prompts[rollout]) - 1]
        return TokenOutput(token_ids=self.tokenizer.encode(text + "<|im_end|>", add_special_tokens=False), stop_reason="completed")


def tool_call(name: str, **arguments: Any) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


async def check_agent_loop(tools: list[Any], task: dict[str, Any]) -> dict[str, Any]:
    """verl's ToolAgentLoop, two rollouts at once: the writing rollout's calls share one fork, the other's
    never see its write; tool results reach the next prompt through verl's token builder."""
    tokenizer = AutoTokenizer.from_pretrained(str(TOKENIZER))
    writer, reader = "rollout W: " + task["task"], "rollout R: " + task["task"]
    count = tool_call("query_database", sql="SELECT COUNT(*) FROM customers WHERE status = 'gone'")
    server = ScriptedServer(
        tokenizer,
        {
            writer: [tool_call("query_database", sql="UPDATE customers SET status = 'gone' WHERE id <= 4"), count, "Four are gone."],
            reader: [count + "\n" + tool_call("run_linter", path="inactive_customers.sql"), "None are gone."],
        },
    )
    config = OmegaConf.create(
        {
            "actor_rollout_ref": {
                "rollout": {
                    "prompt_length": 2048,
                    "response_length": 2048,
                    "full_determinism": False,
                    "multi_turn": {
                        "max_user_turns": 5,
                        "max_assistant_turns": 5,
                        "max_parallel_calls": 2,
                        "max_tool_response_length": 4096,
                        "tool_response_truncate_side": "middle",
                        "format": "hermes",
                    },
                }
            }
        }
    )
    loop = ToolAgentLoop(
        trainer_config=DictConfigWrap(config),
        server_manager=server,
        tokenizer=tokenizer,
        processor=None,
        dataset_cls=None,
        data_config=DictConfigWrap(OmegaConf.create({})),
        hf_model_type="qwen2",
        tools=ToolListWrap(tools),
    )
    tools_kwargs = {name: {"create_kwargs": {"task_id": task["id"]}} for name in ("query_database", "run_linter")}

    async def rollout(first: str) -> Any:
        return await loop.run({}, raw_prompt=[{"role": "user", "content": first}], tools_kwargs=tools_kwargs)

    out_w, out_r = await asyncio.gather(rollout(writer), rollout(reader))
    w, r = server.prompts[writer], server.prompts[reader]
    assert len(w) == 3 and len(r) == 2, (len(w), len(r))
    assert "<tool_response>" in w[2] and "\n4\n" in w[2].split("<tool_response>")[-1], w[2][-400:]
    assert "\n0\n" in r[1] and "exit code 0" in r[1], r[1][-600:]
    assert out_w.num_turns == 6 and out_r.num_turns == 4, (out_w.num_turns, out_r.num_turns)
    assert 0 in out_w.response_mask and 1 in out_w.response_mask  # tool tokens masked out, the model's kept  (num_turns: assistant + user turns + 1)
    rid = {v: k for k, v in server.requests.items()}
    iid, _ = await tools[0].create()
    rewards = {k: await tools[0].calc_reward(iid, agent_data=AgentData([], None, None, None, None, {}, rid[k], {})) for k in (writer, reader)}
    await tools[0].release(iid)
    return {"turns": [out_w.num_turns, out_r.num_turns], "rewards": list(rewards.values())}


def check_score(url: str, task: dict[str, Any]) -> list[float]:
    """compute_score loaded by verl's get_custom_reward_fn, as pkg:// and as a file path."""
    golden = "\n".join(
        (m.get("content") or "") + "".join("\n" + tool_call(c["name"], **c["arguments"]) for c in m.get("tool_calls", []))
        for m in task["golden"]
        if m["role"] == "assistant"
    )
    scores = []
    for path in ("pkg://mcprl_env.verl", adapter.__file__):
        cfg = OmegaConf.create({"reward": {"custom_reward_function": {"path": path, "name": "compute_score", "reward_kwargs": {}}}})
        fn = get_custom_reward_fn(cfg)
        assert fn is not None
        info = {"task_id": task["id"], "url": url}
        scores.append(fn(data_source="mcprl", solution_str=golden, ground_truth=task["ground_truth_assertions"], extra_info=info))
        scores.append(fn(data_source="mcprl", solution_str="I did nothing.", ground_truth=task["ground_truth_assertions"], extra_info=info))
    assert scores == [1.0, 0.0, 1.0, 0.0], scores
    return scores


def main() -> None:
    url = sys.argv[1]
    task = json.loads(TASKS.read_text().splitlines()[0])
    check_base_tool()
    with tempfile.TemporaryDirectory() as tmp:
        tools = load_tools(url, pathlib.Path(tmp))

    async def run() -> tuple[float, dict[str, Any]]:
        return await check_lifecycle(tools, task), await check_agent_loop(tools, task)

    life_reward, agent = asyncio.run(run())
    scores = check_score(url, task)
    print(json.dumps({"verl": verl.__version__, "calc_reward": life_reward, "agent_loop": agent, "scores": scores}))


if __name__ == "__main__":
    main()
