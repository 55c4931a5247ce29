"""An agent with its own tool loop on the Responses API (client.responses),
knowing only read and write, stateless (store=False, the whole input each
turn, as Codex does). STREAM=1 streams every turn.

Run by tests/python_client.rs against the proxy in code mode with the
embedded runtime and a scripted model. It must get the right final answer
without ever seeing run_code.
"""

import json
import os

from openai import OpenAI

from file_agent import execute, run

FILES = {"a.txt": "alpha", "b.txt": "bravo"}

TOOLS = [
    {"type": "function", "name": "read", "description": "Read a file.",
     "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
    {"type": "function", "name": "write", "description": "Write a file.",
     "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                    "required": ["path", "content"]}},
]


def ask(client, items, stream):
    kwargs = dict(model="test-model", input=items, tools=TOOLS, store=False,
                  include=["reasoning.encrypted_content"])
    if not stream:
        return client.responses.create(**kwargs)
    final = None
    with client.responses.stream(**kwargs) as events:
        for event in events:
            if event.type == "response.completed":
                final = event.response
    assert final is not None, "the stream ended with response.completed"
    return final


def main():
    stream = os.environ.get("STREAM") == "1"
    client = OpenAI(base_url=os.environ["PROXY_BASE_URL"], api_key="sk-test", max_retries=0)
    items = [{"role": "user", "content": "Copy a.txt and b.txt into c.txt."}]
    executed = []
    for _ in range(10):
        response = ask(client, items, stream)
        calls = [o for o in response.output if o.type == "function_call"]
        items.extend(o.model_dump(exclude_none=True) for o in response.output)
        if not calls:
            print(json.dumps({"answer": response.output_text, "executed": executed, "files": FILES,
                              "usage": response.usage.model_dump() if response.usage else None}))
            return
        for call in calls:
            assert call.name != "run_code", "the agent must never see run_code"
            executed.append(call.name)
            result = execute(FILES, call.name, json.loads(call.arguments), ("read", "write"))
            items.append({"type": "function_call_output", "call_id": call.call_id, "output": result})
    raise AssertionError("the tool loop did not end")


if __name__ == "__main__":
    run(main)
