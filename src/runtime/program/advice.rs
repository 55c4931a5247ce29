//! Errors that name the fix: where in the model's program, what it looks
//! like instead (Python, a shell command), and how a program reaches what a
//! host API would have given it (only through `tools`).

use super::strip::HOST_GLOBALS;

/// Host APIs a program may reach for that the runtime does not have, beyond
/// those the parse catches ([`HOST_GLOBALS`]); named when a run hits one.
const MISSING_APIS: &[&str] = &[
    "setTimeout",
    "setInterval",
    "setImmediate",
    "queueMicrotask",
    "Buffer",
    "TextEncoder",
    "TextDecoder",
    "URL",
    "atob",
    "btoa",
    "crypto",
    "performance",
    "structuredClone",
];

/// Python's names, which a program written in Python by mistake reaches.
const PYTHON_NAMES: &[&str] = &[
    "print", "len", "range", "str", "int", "float", "dict", "list", "True", "False", "None",
    "self", "elif", "def", "input", "open",
];

/// Commands a program written as a shell script by mistake starts with.
const SHELL_COMMANDS: &[&str] = &[
    "ls", "cd", "cat", "grep", "rg", "find", "git", "npm", "npx", "pnpm", "yarn", "pip", "python",
    "python3", "echo", "mkdir", "rm", "cp", "mv", "curl", "wget", "sed", "awk", "make", "cargo",
    "go", "node", "sudo", "apt", "apt-get", "docker", "head", "tail", "wc", "touch", "chmod",
];

/// How many tool names an error lists before saying how many more there are.
const LISTED_TOOLS: usize = 12;

/// The error a program that does not parse ends with: the other language
/// it looks like, or the parser's message with its line and column.
pub(super) fn syntax(source: &str, at: u32, message: &str, tools: &[String]) -> String {
    let quoted = quote(source, at);
    if looks_like_python(source) {
        let tool = tools.first().map_or("read", String::as_str);
        return format!(
            "SyntaxError: this looks like Python, but run_code runs JavaScript or TypeScript: call a tool as `const out = await tools.{tool}({{ ... }})` and print with `console.log(out)` ({quoted})"
        );
    }
    if looks_like_shell(source) {
        let how = match shell_tool(tools) {
            Some(tool) => format!("run commands with `await tools.{tool}({{ ... }})`"),
            None => format!(
                "call the tools as `await tools.<name>({{ ... }})` ({})",
                listing(tools)
            ),
        };
        return format!(
            "SyntaxError: this looks like a shell command, but run_code runs JavaScript or TypeScript: {how} ({quoted})"
        );
    }
    format!("SyntaxError: {message} ({quoted})")
}

/// Why a host global is not there, and the way that is.
pub(super) fn host_global(name: &str, tools: &[String]) -> String {
    format!("`{name}` is not available: {}", only_through_tools(tools))
}

/// How a program reaches what a host API would have given it.
pub(super) fn only_through_tools(tools: &[String]) -> String {
    format!(
        "programs reach files, the network and the shell only through tools, as `await tools.<name>({{ ... }})` ({})",
        listing(tools)
    )
}

/// A run's `error`, with the fix where the error is one a model makes by
/// writing for another host or language (a `ReferenceError` naming a host
/// API, a Python name, or a tool called without `tools.`).
pub(super) fn runtime_advice(error: &str, tools: &[String]) -> String {
    let Some(name) = undefined_name(error) else {
        return error.to_owned();
    };
    if tools.iter().any(|t| t == name) {
        return format!(
            "{error}: tools are called through `tools`, as `await tools.{name}({{ ... }})`"
        );
    }
    if HOST_GLOBALS.contains(&name) || MISSING_APIS.contains(&name) {
        return format!("ReferenceError: {}", host_global(name, tools));
    }
    if PYTHON_NAMES.contains(&name) {
        return format!(
            "{error}: run_code runs JavaScript or TypeScript, not Python (print with `console.log(...)`)"
        );
    }
    error.to_owned()
}

/// The name in QuickJS's `ReferenceError: 'x' is not defined`.
fn undefined_name(error: &str) -> Option<&str> {
    let rest = error.strip_prefix("ReferenceError: ")?;
    let name = rest.strip_suffix(" is not defined")?;
    Some(name.trim_matches('\''))
}

/// `the tools are: a, b, c` (the first few, and how many more).
fn listing(tools: &[String]) -> String {
    if tools.is_empty() {
        return "this program has no tools".to_owned();
    }
    let mut out = String::from("the tools are: ");
    out.push_str(&tools[..tools.len().min(LISTED_TOOLS)].join(", "));
    if tools.len() > LISTED_TOOLS {
        out.push_str(&format!(" and {} more", tools.len() - LISTED_TOOLS));
    }
    out
}

/// The tool a shell command would go through.
fn shell_tool(tools: &[String]) -> Option<&str> {
    const SHELLS: &[&str] = &["bash", "shell", "exec", "command", "terminal", "run"];
    tools
        .iter()
        .map(String::as_str)
        .find(|t| SHELLS.iter().any(|s| t.to_ascii_lowercase().contains(s)))
}

/// A line that only Python writes: a `def` or a block opened with a colon,
/// `elif`, or an import with no quotes.
fn looks_like_python(source: &str) -> bool {
    const BLOCKS: &[&str] = &[
        "def ", "if ", "elif ", "else", "for ", "while ", "with ", "try", "except", "class ",
    ];
    source.lines().map(str::trim).any(|l| {
        (l.ends_with(':') && BLOCKS.iter().any(|b| l.starts_with(b)))
            || l.starts_with("elif ")
            || ((l.starts_with("import ") || l.starts_with("from "))
                && !l.contains(['"', '\'', '{', '*', ';'])
                && (l.starts_with("import ") || l.contains(" import ")))
    })
}

/// A first line that starts with a command a shell runs.
fn looks_like_shell(source: &str) -> bool {
    let Some(first) = source.lines().map(str::trim).find(|l| !l.is_empty()) else {
        return false;
    };
    if first.starts_with("#!") || first.starts_with("$ ") {
        return true;
    }
    let word = first.split_whitespace().next().unwrap_or("");
    SHELL_COMMANDS.contains(&word)
}

/// `line L, column C: `the line``, for byte offset `at` of `source`.
pub(super) fn quote(source: &str, at: u32) -> String {
    let (line, column) = line_column(source, at as usize);
    quote_line(source, line, column)
}

/// `line L, column C: `the line``, the line trimmed and cut short.
pub(super) fn quote_line(source: &str, line: usize, column: usize) -> String {
    const LONGEST: usize = 80;
    let text = source.lines().nth(line - 1).unwrap_or("").trim();
    let mut shown: String = text.chars().take(LONGEST).collect();
    if text.chars().count() > LONGEST {
        shown.push('…');
    }
    if shown.is_empty() {
        format!("line {line}, column {column}")
    } else {
        format!("line {line}, column {column}: `{shown}`")
    }
}

/// The 1-based line and column (in characters) of byte offset `at`.
pub(super) fn line_column(source: &str, at: usize) -> (usize, usize) {
    let at = at.min(source.len());
    let mut at = at;
    while !source.is_char_boundary(at) {
        at -= 1;
    }
    let before = &source[..at];
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[start..].chars().count() + 1)
}
