"""Drives llama-index's `FunctionAgent` (unmodified, on its defaults: it
streams) with its OpenAI LLM (`llama_index.llms.openai.OpenAI`; the model
name is one llama-index knows, as it requires) and two function tools over
$AGENT_DIR, against $AGENT_BASE_URL (ending in /v1). Runs from its own venv
(venv-llamaindex). Prints a JSON summary: {agent, final, error, tools}
where `tools` lists each call the agent ran: {name, args, result}.
"""

import asyncio
import json
import os
import sys
import warnings

warnings.filterwarnings("ignore")

from llama_index.core.agent.workflow import FunctionAgent  # noqa: E402
from llama_index.llms.openai import OpenAI  # noqa: E402

from work_dir_tools import list_files, ran, read_file  # noqa: E402

async def main() -> None:
    llm = OpenAI(
        model=os.environ.get("AGENT_MODEL", "gpt-4o-mini"),
        api_base=os.environ["AGENT_BASE_URL"],
        api_key="test-key",
    )
    agent = FunctionAgent(tools=[list_files, read_file], llm=llm, system_prompt="You are a file agent.")
    prompt = json.loads(os.environ.get("AGENT_PROMPTS", '["What do the files say?"]'))[0]
    final, error = "", None
    try:
        final = str(await agent.run(user_msg=prompt))
    except Exception as e:  # noqa: BLE001 - report whatever the agent raised
        error = f"{type(e).__name__}: {e}"
    summary = {"agent": "llamaindex", "final": final, "error": error, "tools": ran}
    sys.stdout.write(json.dumps(summary) + "\n")


asyncio.run(main())
