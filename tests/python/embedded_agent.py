"""An agent with its own tool loop that knows only read, write and list.

Run by tests/python_client.rs against the proxy in code mode with the
embedded runtime and a scripted model. It must get the right final answer
without ever seeing run_code.
"""

import json
import os

from openai import OpenAI

from file_agent import chat_tool, execute, run

FILES = {"a.txt": "alpha\nbeta", "b.txt": "gamma", "c.txt": "delta\nepsilon\nzeta"}


TOOLS = [
    chat_tool("read", "Read a file.", {"path": {"type": "string"}}, ["path"]),
    chat_tool("write", "Write a file.", {"path": {"type": "string"}, "content": {"type": "string"}}, ["path", "content"]),
    chat_tool("list", "List the files.", {}, []),
]


def main():
    client = OpenAI(base_url=os.environ["PROXY_BASE_URL"], api_key="sk-test", max_retries=0)
    messages = [{"role": "user", "content": "How many lines do the files have?"}]
    executed = []
    for _ in range(10):
        completion = client.chat.completions.create(model="test-model", messages=messages, tools=TOOLS)
        message = completion.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            print(json.dumps({"answer": message.content, "executed": executed, "files": FILES}))
            return
        for call in message.tool_calls:
            assert call.function.name != "run_code", "the agent must never see run_code"
            executed.append(call.function.name)
            result = execute(FILES, call.function.name, json.loads(call.function.arguments), ("read", "write", "list"))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    raise AssertionError("the tool loop did not end")


if __name__ == "__main__":
    run(main)
