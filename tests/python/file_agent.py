"""What the test agents here share: the files their tools work on, the
tools' execution, the Chat Completions tool shape, and how a broken
expectation ends a run (FAIL on stderr, exit 1, which the Rust test shows).

Imported by the agents beside it (Python puts a script's own directory
first on its path).
"""

import sys


def chat_tool(name, description, properties, required):
    return {"type": "function", "function": {"name": name, "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required}}}


def execute(files, name, args, tools):
    """Runs the agent's tool `name` over `files`; `tools` are the names it has."""
    if name not in tools:
        raise AssertionError(f"the agent has no tool {name}")
    if name == "read":
        return files.get(args["path"], "ENOENT")
    if name == "write":
        files[args["path"]] = args["content"]
        return "ok"
    return "\n".join(sorted(files))


def run(main):
    try:
        main()
    except AssertionError as e:
        print(f"FAIL: {e}", file=sys.stderr)
        sys.exit(1)
