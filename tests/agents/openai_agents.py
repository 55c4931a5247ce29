"""Drives the OpenAI Agents SDK (unmodified) against $AGENT_BASE_URL.

Three filesystem tools over $AGENT_DIR; `OpenAIChatCompletionsModel`;
`Runner.run` or `Runner.run_streamed` (AGENT_STREAM=1); `max_turns` from
AGENT_MAX_STEPS; each prompt of AGENT_PROMPTS (a JSON list) is a new run with
the history so far (after MaxTurnsExceeded too). Prints a JSON summary.
"""

import asyncio
import json
import os
import sys

import httpx
from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from agents.exceptions import MaxTurnsExceeded
from openai import APIStatusError, AsyncOpenAI

set_tracing_disabled(True)

DIR = os.environ.get("AGENT_DIR", os.getcwd())


def inside(p: str) -> str:
    return os.path.join(DIR, os.path.basename(p or ""))


@function_tool(name_override="read")
def read(path: str) -> str:
    """Read a file and return its content."""
    try:
        with open(inside(path)) as f:
            return f.read()
    except OSError:
        return "ENOENT"


@function_tool(name_override="write")
def write(path: str, content: str) -> str:
    """Write a file."""
    with open(inside(path), "w") as f:
        f.write(content)
    return "ok"


@function_tool(name_override="list")
def list_files() -> str:
    """List the files."""
    return "\n".join(sorted(os.listdir(DIR)))


async def main() -> None:
    requests = 0

    async def count(_request: httpx.Request) -> None:
        nonlocal requests
        requests += 1

    client = AsyncOpenAI(
        base_url=os.environ["AGENT_BASE_URL"],
        api_key="test-key",
        max_retries=0,
        http_client=httpx.AsyncClient(event_hooks={"request": [count]}, timeout=60),
    )
    model = OpenAIChatCompletionsModel(
        model=os.environ.get("AGENT_MODEL", "test-model"), openai_client=client
    )
    agent = Agent(
        name="files",
        instructions="You are a file agent.",
        model=model,
        tools=[read, write, list_files],
    )
    prompts = json.loads(os.environ.get("AGENT_PROMPTS", '["Read a.txt and b.txt."]'))
    max_turns = int(os.environ.get("AGENT_MAX_STEPS", "20"))
    stream = os.environ.get("AGENT_STREAM") == "1"

    history: list = []
    turns = []
    error = None
    for prompt in prompts:
        history.append({"role": "user", "content": prompt})
        result = None
        try:
            if stream:
                result = Runner.run_streamed(agent, history, max_turns=max_turns)
                async for _ in result.stream_events():
                    pass
            else:
                result = await Runner.run(agent, history, max_turns=max_turns)
            history = result.to_input_list()
            turns.append({"text": str(result.final_output)})
        except MaxTurnsExceeded as e:
            # The agent stopped its loop: keep what happened and go on.
            if stream and result is not None:
                history = result.to_input_list()
            elif e.run_data is not None:
                history = list(e.run_data.input) if isinstance(e.run_data.input, list) else history
                history += [item.to_input_item() for item in e.run_data.new_items]
            turns.append({"max_turns": True})
        except APIStatusError as e:
            error = f"{e.status_code} {e.response.text}"
            turns.append({"error": error})
            break
        except Exception as e:  # noqa: BLE001 - report whatever the agent raised
            error = f"{type(e).__name__}: {e}"
            turns.append({"error": error})
            break
    final = turns[-1].get("text", "") if turns else ""
    summary = {
        "agent": "openai-agents",
        "final": final,
        "requests": requests,
        "error": error,
        "turns": turns,
        "history": history,
    }
    sys.stdout.write(json.dumps(summary, default=str) + "\n")


asyncio.run(main())
