//! A model's program, made ready to run as its author meant it.
//!
//! Models write `run_code` programs in the language the SDK is shown in
//! (TypeScript declarations), often inside a Markdown fence, often shaped
//! as a script (`async function main() {...}` then `main();`, or a final
//! expression and no `return`). One parse (oxc) reads it as TypeScript and
//! the text that runs is the model's own with the fences and types blanked
//! out where they stand, so every line and column is still the model's;
//! the one change that moves text is the final expression statement's
//! value kept as the result (`$codemode$final.v = (...)`), and positions on
//! its line are moved back when an error is reported. What cannot run is
//! refused before anything runs, with a message that names the fix
//! (docs/embedded-runtime.md, "Programs").

mod advice;
mod strip;

#[cfg(test)]
mod tests;

use oxc_allocator::Allocator;
use oxc_ast::ast::Statement;
use oxc_parser::{ParseOptions, Parser};
use oxc_span::{GetSpan, SourceType};

/// What the wrapper QuickJS compiles an `AsyncFunction` body in puts
/// before its first line: positions in a stack trace are this many lines on.
const WRAPPER_LINES: usize = 2;

/// The parameter the program's final expression value is kept in: the
/// prelude compiles the program with it and reads `.v` when the program
/// returns nothing. Not `return`: QuickJS gives an error thrown in a
/// `return` statement no position in the program.
pub(super) const FINAL: &str = "$codemode$final";

/// What goes before the final expression statement, and after it.
const KEEP: (&str, &str) = ("$codemode$final.v = (", ")");

/// A program ready to run.
#[derive(Debug)]
pub struct Prepared {
    /// The JavaScript that runs: the body of an async function.
    pub text: String,
    /// Where [`KEEP`] opened: the line and column (1-based) in the program.
    kept_at: Option<(usize, usize)>,
    /// The program as the model wrote it, to quote its lines.
    source: String,
}

/// Prepares `code` to run; `Err` is the error the run ends with, one line
/// naming the fix.
pub fn prepare(code: &str, tools: &[String]) -> Result<Prepared, String> {
    let source = drop_fences(code);
    let allocator = Allocator::default();
    let parsed = Parser::new(&allocator, &source, SourceType::ts().with_module(true))
        .with_options(ParseOptions {
            allow_return_outside_function: true,
            ..ParseOptions::default()
        })
        .parse();
    if let Some(error) = parsed.errors.first() {
        let at = error
            .labels
            .as_ref()
            .and_then(|labels| labels.first())
            .map_or(0, |label| u32::try_from(label.offset()).unwrap_or(u32::MAX));
        return Err(advice::syntax(&source, at, &error.message, tools));
    }
    let edits = strip::edits(&parsed.program, &source);
    if let Some(refusal) = &edits.refused {
        let how = if refusal.host {
            format!(": {}", advice::only_through_tools(tools))
        } else {
            String::new()
        };
        return Err(format!(
            "SyntaxError: {}{how} ({})",
            refusal.message,
            advice::quote(&source, refusal.at)
        ));
    }
    if let Some((at, name)) = &edits.host_global {
        return Err(format!(
            "ReferenceError: {} ({})",
            advice::host_global(name, tools),
            advice::quote(&source, *at)
        ));
    }
    let kept = final_expression(&parsed.program.body, &edits.semis);
    let text = rewrite(&source, &edits, kept);
    let kept_at = kept.map(|(at, _)| advice::line_column(&source, at as usize));
    Ok(Prepared {
        text,
        kept_at,
        source,
    })
}

impl Prepared {
    /// `error` (`Name: message`), with the line and column in the model's
    /// program where it was thrown, read from the error's `stack`, and the
    /// fix where the error names one.
    pub(super) fn explain(&self, error: &str, stack: &str, tools: &[String]) -> String {
        let mut out = advice::runtime_advice(error, tools);
        if let Some((line, column)) = self.position(stack) {
            out.push_str(&format!(
                " ({})",
                advice::quote_line(&self.source, line, column)
            ));
        }
        out
    }

    /// The innermost position in the program in a QuickJS stack trace
    /// (`at f (<input>:5:3)`), as a line and column of the model's text.
    fn position(&self, stack: &str) -> Option<(usize, usize)> {
        let at = stack.find("<input>:")? + "<input>:".len();
        let mut numbers = stack[at..]
            .split(|c: char| !c.is_ascii_digit())
            .take(2)
            .map(str::parse::<usize>);
        let line = numbers.next()?.ok()?.checked_sub(WRAPPER_LINES)?;
        let mut column = numbers.next()?.ok()?;
        if let Some((l, c)) = self.kept_at {
            if l == line && column >= c + KEEP.0.len() {
                column -= KEEP.0.len();
            }
        }
        (line >= 1).then_some((line, column))
    }
}

/// `code` without a Markdown fence on its first and last lines: the fence
/// lines are emptied, not removed, so every other line keeps its number.
fn drop_fences(code: &str) -> String {
    let is_open = |l: &str| {
        let t = l.trim();
        t.strip_prefix("```").is_some_and(|lang| {
            lang.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '+')
        })
    };
    let lines: Vec<&str> = code.split('\n').collect();
    let first = lines.iter().position(|l| !l.trim().is_empty());
    let last = lines.iter().rposition(|l| !l.trim().is_empty());
    let (Some(first), Some(last)) = (first, last) else {
        return code.to_owned();
    };
    let open = is_open(lines[first]);
    let close = last != first && lines[last].trim() == "```";
    if !open && !close {
        return code.to_owned();
    }
    let mut out = String::with_capacity(code.len());
    for (i, line) in lines.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if !((open && i == first) || (close && i == last)) {
            out.push_str(line);
        }
    }
    out
}

/// Where the program's last statement's expression starts and ends, when
/// it is an expression statement (type-only statements, blanked, and empty
/// ones not counted): its value is the program's result.
fn final_expression(body: &[Statement<'_>], blanked: &[u32]) -> Option<(u32, u32)> {
    for statement in body.iter().rev() {
        match statement {
            Statement::EmptyStatement(_) => continue,
            s if blanked.contains(&s.span().start) => continue,
            Statement::ExpressionStatement(e) => {
                let span = e.expression.span();
                return Some((span.start, span.end));
            }
            _ => return None,
        }
    }
    None
}

/// `source` with the edits made: blanked bytes as spaces (one a character,
/// newlines kept), a `;` where a whole statement went, [`KEEP`] around `kept`.
fn rewrite(source: &str, edits: &strip::Edits, kept: Option<(u32, u32)>) -> String {
    let mut blanks = edits.blanks.clone();
    blanks.sort_unstable();
    let mut inserts: Vec<(usize, &str)> = kept
        .map(|(start, end)| vec![(start as usize, KEEP.0), (end as usize, KEEP.1)])
        .unwrap_or_default();
    inserts.reverse();
    let mut out = String::with_capacity(source.len() + KEEP.0.len() + KEEP.1.len());
    let mut next = 0usize;
    // Copies the source up to `upto`, with the inserts that fall in it.
    let mut copy = |out: &mut String, next: &mut usize, upto: usize| {
        while let Some(&(at, text)) = inserts.last() {
            if at > upto {
                break;
            }
            out.push_str(&source[*next..at]);
            out.push_str(text);
            *next = at;
            inserts.pop();
        }
        out.push_str(&source[*next..upto]);
        *next = upto;
    };
    for (start, end) in blanks {
        let (start, end) = (start as usize, end as usize);
        if end <= next {
            continue;
        }
        let start = start.max(next);
        copy(&mut out, &mut next, start);
        let semi = edits.semis.contains(&(start as u32));
        for (i, c) in source[start..end].chars().enumerate() {
            out.push(match c {
                '\n' | '\r' => c,
                _ if i == 0 && semi => ';',
                _ => ' ',
            });
        }
        next = end;
    }
    copy(&mut out, &mut next, source.len());
    out
}
