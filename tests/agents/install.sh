#!/usr/bin/env bash
# Installs the real agents and SDKs that the tests drive (tests/it/
# real_agents.rs, sdk_clients.rs, ...), unmodified:
#   npm:  opencode-ai, ai, @ai-sdk/openai-compatible, @ai-sdk/openai, @openai/codex,
#         @anthropic-ai/claude-code, @google/gemini-cli, @google/genai
#   PyPI: openai-agents, langgraph, langchain-openai, langchain-google-genai,
#         langchain-anthropic, anthropic, google-genai (in a venv);
#         llama-index-core, llama-index-llms-openai (in venv-llamaindex: its
#         OpenAI LLM wants openai<3, openai-agents openai>=3)
# into $CODEMODE_AGENTS_DIR (default ~/.cache/codemode-agents; `.agents-cache` in
# the repo is gitignored for that use). Idempotent: when the installed versions
# match the pins in package.json and requirements*.txt it does nothing.
# Prints what it did; the tests find the agents through the same directory.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
DIR="${CODEMODE_AGENTS_DIR:-$HOME/.cache/codemode-agents}"
# A relative directory is relative to the repository, as the tests read it.
case "$DIR" in /*) ;; *) DIR="$HERE/../../$DIR" ;; esac
mkdir -p "$DIR/node"
DIR="$(cd "$DIR" && pwd)"

# Pins live in package.json / requirements*.txt next to this script; a change
# there (or a missing install) triggers an install, nothing else does.
stamp() { cat "$HERE/package.json" "$HERE/requirements.txt" "$HERE/requirements-llamaindex.txt" | sha256sum | cut -c1-16; }
want="$(stamp)"

t0=$(date +%s)
node_ok() { [ -f "$DIR/node/.stamp" ] && [ "$(cat "$DIR/node/.stamp")" = "$want" ] && [ -x "$DIR/node/node_modules/.bin/opencode" ] && [ -x "$DIR/node/node_modules/.bin/codex" ] && [ -x "$DIR/node/node_modules/.bin/claude" ] && [ -x "$DIR/node/node_modules/.bin/gemini" ]; }
# venv_ok NAME: the venv $DIR/NAME holds the pinned packages.
venv_ok() { [ -f "$DIR/$1/.stamp" ] && [ "$(cat "$DIR/$1/.stamp")" = "$want" ] && [ -x "$DIR/$1/bin/python" ]; }

if node_ok; then
    echo "agents: npm packages already installed in $DIR/node"
else
    echo "agents: installing npm packages into $DIR/node"
    cp "$HERE/package.json" "$DIR/node/package.json"
    (cd "$DIR/node" && npm install --no-audit --no-fund --loglevel=error \
        --cache "$DIR/npm-cache" --prefer-offline)
    # opencode, codex and claude ship their binaries as optional dependencies,
    # and gemini-cli needs node >= 20; check they run.
    "$DIR/node/node_modules/.bin/opencode" --version >/dev/null
    "$DIR/node/node_modules/.bin/codex" --version >/dev/null
    "$DIR/node/node_modules/.bin/claude" --version >/dev/null
    "$DIR/node/node_modules/.bin/gemini" --version >/dev/null
    echo "$want" > "$DIR/node/.stamp"
fi

# venv NAME REQUIREMENTS: installs the pinned packages into $DIR/NAME.
venv() {
    if venv_ok "$1"; then
        echo "agents: Python packages already installed in $DIR/$1"
        return
    fi
    echo "agents: installing Python packages into $DIR/$1"
    [ -x "$DIR/$1/bin/python" ] || python3 -m venv "$DIR/$1"
    "$DIR/$1/bin/python" -m pip install --quiet --disable-pip-version-check \
        --cache-dir "$DIR/pip-cache" -r "$HERE/$2"
    echo "$want" > "$DIR/$1/.stamp"
}
venv venv requirements.txt
venv venv-llamaindex requirements-llamaindex.txt

echo "agents: ready in $DIR ($(( $(date +%s) - t0 ))s)"
