"""Drives Google's Python SDK (`google-genai`, unmodified) on its
Interactions API (`client.interactions.create`, on the SDK's defaults: its
default API version, so `POST /v1/interactions`) against $AGENT_BASE_URL
(the server root), with a manual function-calling loop over one tool,
`get_weather`.

AGENT_STREAM=1 streams every turn (`stream=True`, the calls rebuilt from
`step.start` and the `arguments_delta` pieces). AGENT_STATELESS=1 sends
`store=False` and the whole history as steps on every turn; otherwise a
turn continues the last one with `previous_interaction_id`. AGENT_SYSTEM,
when set, is sent as `system_instruction` on every turn; AGENT_API_VERSION,
when set, replaces the SDK's default API version (`v1beta`: `POST
/v1beta/interactions`).

Each prompt of $AGENT_PROMPTS (a JSON list) is a user turn of one
conversation. Prints a JSON summary: {agent, final, finals, error, tools,
calls, interactions}: `finals` holds the answer to each prompt, `final` the
last; `tools` lists each call the driver ran: {name, args, result}; `calls` each
function call it was handed: {id, name}; `interactions` the id and status of
each interaction it got.
"""

import json
import os
import sys
import warnings

warnings.filterwarnings("ignore")

from google import genai  # noqa: E402
from google.genai import types  # noqa: E402

TOOLS = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "Get the current weather in a given location.",
        "parameters": {
            "type": "object",
            "properties": {"location": {"type": "string"}},
            "required": ["location"],
        },
    }
]
STREAM = os.environ.get("AGENT_STREAM") == "1"
STATELESS = os.environ.get("AGENT_STATELESS") == "1"
ran, calls, interactions = [], [], []


def get_weather(location: str) -> dict:
    result = {"forecast": f"sunny in {location}", "temperature": "22C"}
    ran.append({"name": "get_weather", "args": {"location": location}, "result": result})
    return result


def dump(x):
    """A step or event part as the JSON the SDK parsed it from."""
    if hasattr(x, "model_dump"):
        return x.model_dump(mode="json", exclude_none=True)
    return x


def turn(client, model, **kw):
    """One create; the interaction's id, status and steps (as JSON)."""
    if os.environ.get("AGENT_SYSTEM"):
        kw["system_instruction"] = os.environ["AGENT_SYSTEM"]
    if not STREAM:
        i = client.interactions.create(model=model, tools=TOOLS, **kw)
        return i.id, i.status, [dump(s) for s in (i.steps or [])]
    iid, status, steps, args = None, None, {}, {}
    for ev in client.interactions.create(model=model, tools=TOOLS, stream=True, **kw):
        et = ev.event_type
        if et in ("interaction.created", "interaction.completed"):
            iid = ev.interaction.id or iid
            status = ev.interaction.status or status
        elif et == "interaction.status_update":
            status = ev.status or status
        elif et == "step.start":
            steps[ev.index] = dump(ev.step)
            args[ev.index] = ""
        elif et == "step.delta":
            d = dump(ev.delta)
            s = steps.setdefault(ev.index, {})
            if d.get("type") == "text":
                content = s.setdefault("content", [])
                if not content or content[-1].get("type") != "text":
                    content.append({"type": "text", "text": ""})
                content[-1]["text"] += d.get("text", "")
            elif d.get("type") == "arguments_delta":
                args[ev.index] = args.get(ev.index, "") + (d.get("arguments") or "")
            elif d.get("type") == "thought_signature":
                s["signature"] = d.get("signature")
        elif et == "error":
            raise RuntimeError(f"error event: {dump(ev.error)}")
    for i, a in args.items():
        if a:
            steps[i]["arguments"] = json.loads(a)
    return iid, status, [steps[i] for i in sorted(steps)]


def user(prompt):
    return {"type": "user_input", "content": [{"type": "text", "text": prompt}]}


def main() -> None:
    client = genai.Client(
        api_key="test-gemini-key",
        # The SDK's default API version (v1) unless AGENT_API_VERSION says.
        http_options=types.HttpOptions(
            base_url=os.environ["AGENT_BASE_URL"], api_version=os.environ.get("AGENT_API_VERSION") or None
        ),
    )
    model = os.environ.get("AGENT_MODEL", "gemini-3-flash-preview")
    prompts = json.loads(os.environ.get("AGENT_PROMPTS", '["What is the weather in Paris?"]'))
    finals, error = [], None
    history, iid = [], None
    try:
        for prompt in prompts:
            # A new user turn: the whole history, or one continuing the last
            # interaction (the first continues nothing).
            if STATELESS:
                history.append(user(prompt))
                iid, status, steps = turn(client, model, input=history, store=False)
            elif iid is None:
                iid, status, steps = turn(client, model, input=prompt)
            else:
                iid, status, steps = turn(client, model, input=prompt, previous_interaction_id=iid)
            for _ in range(8):
                interactions.append({"id": iid, "status": status})
                fcs = [s for s in steps if s.get("type") == "function_call"]
                if not fcs:
                    finals.append("".join(
                        c.get("text", "")
                        for s in steps
                        if s.get("type") == "model_output"
                        for c in s.get("content") or []
                        if c.get("type") == "text"
                    ))
                    history += steps
                    break
                results = []
                for fc in fcs:
                    calls.append({"id": fc["id"], "name": fc["name"]})
                    if fc["name"] == "get_weather":
                        result = get_weather(**(fc.get("arguments") or {}))
                        results.append({"type": "function_result", "call_id": fc["id"], "name": fc["name"],
                                        "result": result})
                    else:
                        results.append({"type": "function_result", "call_id": fc["id"], "name": fc["name"],
                                        "result": f"unknown tool {fc['name']}", "is_error": True})
                if STATELESS:
                    history += steps + results
                    iid, status, steps = turn(client, model, input=history, store=False)
                else:
                    iid, status, steps = turn(client, model, input=results, previous_interaction_id=iid)
            else:
                raise RuntimeError("no final answer in 8 turns")
    except Exception as e:  # noqa: BLE001 - report whatever the SDK raised
        error = f"{type(e).__name__}: {e}"
    summary = {"agent": "google-genai interactions", "final": finals[-1] if finals else "", "finals": finals,
               "error": error, "tools": ran, "calls": calls, "interactions": interactions}
    sys.stdout.write(json.dumps(summary) + "\n")


main()
