"""A real `openai` client pointed at the proxy in code mode.

Run by tests/python_client.rs, which starts a fake provider that first
answers with a native `read` call (which the proxy must deny and repair)
and then with a `run_code` call. The client must see run_code only.
"""

import json
import os

from openai import OpenAI

from file_agent import chat_tool, run


TOOLS = [
    chat_tool("read", "Read a file.", {"path": {"type": "string"}}, ["path"]),
    chat_tool("write", "Write a file.", {"path": {"type": "string"}, "content": {"type": "string"}}, ["path", "content"]),
    chat_tool("list", "List a directory.", {"path": {"type": "string"}}, []),
    chat_tool("run_code", "Run a JavaScript program that calls tools.", {"code": {"type": "string"}}, ["code"]),
]


def streamed(client):
    """The SDK's own stream accumulator (strict about indices and ids)."""
    with client.chat.completions.stream(
        model="test-model",
        messages=[{"role": "user", "content": "Summarise a.txt"}],
        tools=TOOLS,
        stream_options={"include_usage": True},
    ) as stream:
        seen = []
        for event in stream:
            if event.type == "tool_calls.function.arguments.done":
                seen.append(event.name)
        completion = stream.get_final_completion()
    calls = completion.choices[0].message.tool_calls or []
    names = [c.function.name for c in calls]
    assert seen == names == ["run_code"], f"the streaming client saw {seen} / {names}"
    json.loads(calls[0].function.arguments)
    print(json.dumps({"names": names, "usage": completion.usage.total_tokens, "text": completion.choices[0].message.content}))


def main():
    client = OpenAI(base_url=os.environ["PROXY_BASE_URL"], api_key="sk-test", max_retries=0)
    if os.environ.get("STREAM") == "1":
        streamed(client)
        return
    completion = client.chat.completions.create(
        model="test-model",
        messages=[
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "Summarise a.txt"},
        ],
        tools=TOOLS,
    )
    calls = completion.choices[0].message.tool_calls or []
    names = [c.function.name for c in calls]
    assert names == ["run_code"], f"the client saw {names}"
    json.loads(calls[0].function.arguments)
    print(json.dumps({"names": names, "usage": completion.usage.total_tokens}))


if __name__ == "__main__":
    run(main)
