"""An agent with its own tool loop on the Anthropic Messages API
(client.messages), knowing only read and write, sending the whole history
each turn with the assistant's content replayed as received (thinking blocks
and their signatures included), as Claude Code does. STREAM=1 streams every
turn (client.messages.stream).

To be run against the proxy in code mode with the embedded runtime and a
scripted Messages model (PROXY_BASE_URL is the server root, no /v1: the
client appends /v1/messages). It must get the right final answer without
ever seeing run_code.
"""

import json
import os

from anthropic import Anthropic

from file_agent import execute, run

FILES = {"a.txt": "alpha", "b.txt": "bravo"}

TOOLS = [
    {"name": "read", "description": "Read a file.",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
    {"name": "write", "description": "Write a file.",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                      "required": ["path", "content"]}},
]

SYSTEM = [{"type": "text", "text": "You copy files.", "cache_control": {"type": "ephemeral"}}]


def ask(client, messages, stream):
    kwargs = dict(model="test-model", max_tokens=1024, system=SYSTEM, messages=messages, tools=TOOLS)
    if not stream:
        return client.messages.create(**kwargs)
    with client.messages.stream(**kwargs) as events:
        for _ in events:
            pass
        return events.get_final_message()


def main():
    stream = os.environ.get("STREAM") == "1"
    client = Anthropic(base_url=os.environ["PROXY_BASE_URL"], api_key="sk-ant-test", max_retries=0)
    messages = [{"role": "user", "content": "Copy a.txt and b.txt into c.txt."}]
    executed = []
    usage = {"input_tokens": 0, "output_tokens": 0}
    for _ in range(10):
        message = ask(client, messages, stream)
        usage["input_tokens"] += message.usage.input_tokens
        usage["output_tokens"] += message.usage.output_tokens
        calls = [b for b in message.content if b.type == "tool_use"]
        messages.append({"role": "assistant",
                         "content": [b.model_dump(exclude_none=True) for b in message.content]})
        if not calls:
            assert message.stop_reason == "end_turn", f"stop_reason {message.stop_reason}"
            answer = "".join(b.text for b in message.content if b.type == "text")
            print(json.dumps({"answer": answer, "executed": executed, "files": FILES,
                              "stop_reason": message.stop_reason, "usage": usage}))
            return
        assert message.stop_reason == "tool_use", f"stop_reason {message.stop_reason}"
        results = []
        for call in calls:
            assert call.name != "run_code", "the agent must never see run_code"
            executed.append(call.name)
            results.append({"type": "tool_result", "tool_use_id": call.id,
                            "content": execute(FILES, call.name, call.input, ("read", "write"))})
        # Every tool_result, first in the next user message.
        messages.append({"role": "user", "content": results})
    raise AssertionError("the tool loop did not end")


if __name__ == "__main__":
    run(main)
