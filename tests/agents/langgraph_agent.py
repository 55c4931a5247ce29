"""Drives LangGraph's `create_react_agent` + `ChatOpenAI` (unmodified), or
with AGENT_LLM=google LangChain's Gemini integration (`ChatGoogleGenerativeAI`,
langchain-google-genai) or with AGENT_LLM=anthropic its Anthropic one
(`ChatAnthropic`, langchain-anthropic), each on its defaults with
$AGENT_BASE_URL as its base URL (ending in /v1 for OpenAI, the server root
for the others).

Three filesystem tools over $AGENT_DIR; invoke, or stream (AGENT_STREAM=1);
`recursion_limit` = 2 * AGENT_MAX_STEPS (a model node and a tools node per
step; AGENT_RECURSION_LIMIT overrides); an in-memory checkpointer keeps the
thread, so each prompt of AGENT_PROMPTS (a JSON list) continues it, also after
GraphRecursionError. Prints a JSON summary; its `tools` lists each call the
agent ran: {name, args, result}.
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
ran = []


def inside(p: str) -> str:
    return os.path.join(DIR, os.path.basename(p or ""))


@tool("read")
def read(path: str) -> str:
    """Read a file and return its content."""
    try:
        with open(inside(path)) as f:
            result = f.read()
    except OSError:
        result = "ENOENT"
    ran.append({"name": "read", "args": {"path": path}, "result": result})
    return result


@tool("write")
def write(path: str, content: str) -> str:
    """Write a file."""
    with open(inside(path), "w") as f:
        f.write(content)
    ran.append({"name": "write", "args": {"path": path, "content": content}, "result": "ok"})
    return "ok"


@tool("list")
def list_files() -> str:
    """List the files."""
    result = "\n".join(sorted(os.listdir(DIR)))
    ran.append({"name": "list", "args": {}, "result": result})
    return result


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
    kind = os.environ.get("AGENT_LLM", "openai")
    if kind == "google":
        from langchain_google_genai import ChatGoogleGenerativeAI

        llm = ChatGoogleGenerativeAI(
            model=os.environ.get("AGENT_MODEL", "gemini-2.5-flash"),
            google_api_key="test-gemini-key",
            base_url=os.environ["AGENT_BASE_URL"],
        )
    elif kind == "anthropic":
        from langchain_anthropic import ChatAnthropic

        llm = ChatAnthropic(
            model=os.environ.get("AGENT_MODEL", "claude-sonnet-4-5"),
            api_key="test-key",
            base_url=os.environ["AGENT_BASE_URL"],
        )
    else:
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
        "tools": ran,
        "history": [m.model_dump(include={"type", "content", "tool_calls", "tool_call_id"}) for m in messages],
    }
    sys.stdout.write(json.dumps(summary, default=str) + "\n")


main()
