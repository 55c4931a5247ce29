"""Drives the `anthropic` SDK's tool runner (`client.beta.messages.tool_runner`,
unmodified, on its defaults; streaming with AGENT_STREAM=1) with two
`@beta_tool` functions over $AGENT_DIR, against $AGENT_BASE_URL (the server
root). Prints a JSON summary: {agent, final, error, tools, unthreaded}
where `tools` lists each call the runner ran: {name, args, result}, and
`unthreaded` says what the SDK logged when the server could not thread a
request (a Messages thread, beta) and it went on without one.
"""

import json
import logging
import os
import sys
import warnings

warnings.filterwarnings("ignore")

import anthropic  # noqa: E402
from anthropic import beta_tool  # noqa: E402

import work_dir_tools  # noqa: E402

unthreaded = []


class Unthreaded(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "continuing without a thread" in message:
            unthreaded.append(message)


threads_log = logging.getLogger("anthropic.lib.threads")
threads_log.setLevel(logging.INFO)
threads_log.addHandler(Unthreaded())


@beta_tool
def list_files() -> str:
    """List the files in the work directory, one a line."""
    return work_dir_tools.list_files()


@beta_tool
def read_file(path: str) -> str:
    """Read a file of the work directory and return its content.

    Args:
        path: the file's name.
    """
    return work_dir_tools.read_file(path)


def main() -> None:
    client = anthropic.Anthropic(api_key="test-key", base_url=os.environ["AGENT_BASE_URL"])
    prompt = json.loads(os.environ.get("AGENT_PROMPTS", '["What do the files say?"]'))[0]
    extra = {"stream": True} if os.environ.get("AGENT_STREAM") == "1" else {}
    final, error = "", None
    try:
        runner = client.beta.messages.tool_runner(
            model=os.environ.get("AGENT_MODEL", "claude-sonnet-4-5"),
            max_tokens=1024,
            tools=[list_files, read_file],
            messages=[{"role": "user", "content": prompt}],
            **extra,
        )
        message = runner.until_done()
        final = "".join(b.text for b in message.content if b.type == "text")
    except Exception as e:  # noqa: BLE001 - report whatever the SDK raised
        error = f"{type(e).__name__}: {e}"
    summary = {"agent": "anthropic-tool-runner", "final": final, "error": error, "tools": work_dir_tools.ran, "unthreaded": unthreaded}
    sys.stdout.write(json.dumps(summary) + "\n")


main()
