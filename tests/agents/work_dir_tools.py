"""The two tools the SDK drivers here give their clients, over $AGENT_DIR:
plain functions (the SDKs read their names, signatures and docstrings),
each recording the call it ran in `ran` for the driver's summary.

Imported by the drivers beside it (Python puts a script's own directory
first on its path).
"""

import os

DIR = os.environ.get("AGENT_DIR", os.getcwd())
ran = []


def list_files() -> str:
    """List the files in the work directory, one a line."""
    result = "\n".join(sorted(os.listdir(DIR)))
    ran.append({"name": "list_files", "args": {}, "result": result})
    return result


def read_file(path: str) -> str:
    """Read a file of the work directory and return its content."""
    try:
        with open(os.path.join(DIR, os.path.basename(path))) as f:
            result = f.read()
    except OSError:
        result = "ENOENT"
    ran.append({"name": "read_file", "args": {"path": path}, "result": result})
    return result
