"""Drives LangGraph's `create_react_agent` + `ChatOpenAI` (unmodified).

Three filesystem tools over $AGENT_DIR; invoke, or stream (AGENT_STREAM=1);
`recursion_limit` = 2 * AGENT_MAX_STEPS (a model node and a tools node per
step; AGENT_RECURSION_LIMIT overrides); an in-memory checkpointer keeps the
thread, so each prompt of AGENT_PROMPTS (a JSON list) continues it, also after
GraphRecursionError. Prints a JSON summary.
"""

import json
import os
import sys
import warnings

warnings.filterwarnings("ignore")

import httpx  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.errors import GraphRecursionError  # noqa: E402
from langgraph.prebuilt import create_react_agent  # noqa: E402

DIR = os.environ.get("AGENT_DIR", os.getcwd())


def inside(p: str) -> str:
    return os.path.join(DIR, os.path.basename(p or ""))


@tool("read")
def read(path: str) -> str:
    """Read a file and return its content."""
    try:
        with open(inside(path)) as f:
            return f.read()
    except OSError:
        return "ENOENT"


@tool("write")
def write(path: str, content: str) -> str:
    """Write a file."""
    with open(inside(path), "w") as f:
        f.write(content)
    return "ok"


@tool("list")
def list_files() -> str:
    """List the files."""
    return "\n".join(sorted(os.listdir(DIR)))


def text_of(message) -> str:
    c = message.content
    if isinstance(c, str):
        return c
    return "".join(p.get("text", "") for p in c if isinstance(p, dict))


def main() -> None:
    requests = 0

    def count(_request: httpx.Request) -> None:
        nonlocal requests
        requests += 1

    stream = os.environ.get("AGENT_STREAM") == "1"
    llm = ChatOpenAI(
        model=os.environ.get("AGENT_MODEL", "test-model"),
        base_url=os.environ["AGENT_BASE_URL"],
        api_key="test-key",
        max_retries=0,
        streaming=stream,
        stream_usage=True,
        http_client=httpx.Client(event_hooks={"request": [count]}, timeout=60),
    )
    agent = create_react_agent(
        llm, [read, write, list_files], prompt="You are a file agent.", checkpointer=InMemorySaver()
    )
    steps = int(os.environ.get("AGENT_MAX_STEPS", "20"))
    limit = int(os.environ.get("AGENT_RECURSION_LIMIT", str(2 * steps)))
    config = {"configurable": {"thread_id": "t1"}, "recursion_limit": limit}
    prompts = json.loads(os.environ.get("AGENT_PROMPTS", '["Read a.txt and b.txt."]'))

    turns = []
    error = None
    for prompt in prompts:
        inputs = {"messages": [{"role": "user", "content": prompt}]}
        try:
            if stream:
                for _ in agent.stream(inputs, config, stream_mode="messages"):
                    pass
            else:
                agent.invoke(inputs, config)
            last = agent.get_state(config).values["messages"][-1]
            turns.append({"text": text_of(last)})
        except GraphRecursionError:
            turns.append({"recursion_limit": True})
        except Exception as e:  # noqa: BLE001 - report whatever the agent raised
            error = f"{type(e).__name__}: {e}"
            turns.append({"error": error})
            break
    messages = agent.get_state(config).values.get("messages", [])
    summary = {
        "agent": "langgraph",
        "final": turns[-1].get("text", "") if turns else "",
        "requests": requests,
        "error": error,
        "turns": turns,
        "history": [m.model_dump(include={"type", "content", "tool_calls", "tool_call_id"}) for m in messages],
    }
    sys.stdout.write(json.dumps(summary, default=str) + "\n")


main()
