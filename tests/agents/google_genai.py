"""Drives Google's Python SDK (`google-genai`, unmodified) with automatic
function calling: two Python functions over $AGENT_DIR as tools, one
`generate_content` (or `generate_content_stream` with AGENT_STREAM=1) on the
SDK's defaults (its default API version), against $AGENT_BASE_URL (the
server root). Prints a JSON summary: {agent, final, error, tools} where
`tools` lists each call the SDK ran: {name, args, result}.
"""

import json
import os
import sys
import warnings

warnings.filterwarnings("ignore")

from google import genai  # noqa: E402
from google.genai import types  # noqa: E402

from work_dir_tools import list_files, ran, read_file  # noqa: E402

def main() -> None:
    client = genai.Client(
        api_key="test-gemini-key",
        http_options=types.HttpOptions(base_url=os.environ["AGENT_BASE_URL"]),
    )
    model = os.environ.get("AGENT_MODEL", "gemini-2.5-flash")
    prompt = json.loads(os.environ.get("AGENT_PROMPTS", '["What do the files say?"]'))[0]
    config = types.GenerateContentConfig(tools=[list_files, read_file])
    final, error = "", None
    try:
        if os.environ.get("AGENT_STREAM") == "1":
            for chunk in client.models.generate_content_stream(model=model, contents=prompt, config=config):
                # The answer is the text after the last turn with calls.
                final = "" if chunk.function_calls else final + (chunk.text or "")
        else:
            final = client.models.generate_content(model=model, contents=prompt, config=config).text or ""
    except Exception as e:  # noqa: BLE001 - report whatever the SDK raised
        error = f"{type(e).__name__}: {e}"
    summary = {"agent": "google-genai", "final": final, "error": error, "tools": ran}
    sys.stdout.write(json.dumps(summary) + "\n")


main()
