"""Makes a captured request body neutral: the run's temp paths, home
directory and agent install path, session/device/installation ids become
fixed values. Works on the raw text, so the body keeps the agent's own
spelling (compact JSON, escapes); the result must still parse.

    python3 bench/requests/sanitize.py IN OUT
"""
import json
import re
import sys

text = open(sys.argv[1], encoding="utf-8").read()
RULES = [
    (r"/tmp/capture/ws-[a-z]+", "/home/user/project"),       # the agent's working directory
    (r"-tmp-capture-ws-[a-z]+", "-home-user-project"),      # Claude Code's project key
    (r"\bws-(claude|codex|opencode|gemini)\b", "project"),
    (r"/tmp/cm-(claude|codex|opencode|gemini)-[A-Za-z0-9]+", "/home/user"),  # the driver's fresh HOME
    (r"/root/\.cache/codemode-agents", "/usr/local"),      # where the agents are installed
    (r"\"/root\"", "\"/home/user\""),
    (r"/root\b", "/home/user"),
    (r"\b[0-9a-f]{64}\b", "0" * 64),                         # device ids
    (r"Linux \d+\.\d+\.\d+[-\w.]*", "Linux 6.1.0"),              # the kernel's release
]
for pat, rep in RULES:
    text = re.sub(pat, rep, text)
ids = {}
def uuid(m):
    n = ids.setdefault(m.group(0), len(ids) + 1)
    return f"00000000-0000-4000-8000-{n:012d}"
text = re.sub(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", uuid, text)
json.loads(text)
open(sys.argv[2], "w", encoding="utf-8").write(text)
