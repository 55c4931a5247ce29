//! The compact SDK's one line of description per tool: the first sentence.

use super::split_lines;

/// Longest first sentence kept; a longer one is cut at a word with `…`.
pub const FIRST_SENTENCE_MAX_BYTES: usize = 300;

/// Abbreviations whose period ends no sentence (lower case, no period).
const ABBREVIATIONS: [&str; 11] = [
    "eg", "ie", "cf", "vs", "approx", "incl", "esp", "resp", "viz", "al", "etc",
];

/// The first sentence of a tool's description, on one line.
///
/// The sentence ends at the first `.`, `!` or `?` followed by white space
/// (or the end), closing quotes and brackets allowed between; a period in
/// a URL, a file name or a number is followed by more text and ends
/// nothing, nor does one of an abbreviation (`e.g.`, `i.e.`, `vs.`; `etc.`
/// only before a capital letter). Without such a period the sentence is
/// the first paragraph: it stops at a blank line or at a line that opens a
/// list, a heading or a code fence. Lines inside it join with a space.
/// At most [`FIRST_SENTENCE_MAX_BYTES`]; empty for an empty description.
pub fn first_sentence(description: &str) -> String {
    let mut para = String::new();
    for line in split_lines(description.trim()) {
        let line = line.trim();
        if line.is_empty() || (!para.is_empty() && opens_block(line)) {
            break;
        }
        if !para.is_empty() {
            para.push(' ');
        }
        para.push_str(line);
    }
    let end = sentence_end(&para).unwrap_or(para.len());
    cap(para[..end].trim_end())
}

/// Whether a line starts a list item, a heading, a fence or a quote.
fn opens_block(line: &str) -> bool {
    let numbered = {
        let digits = line.bytes().take_while(u8::is_ascii_digit).count();
        digits > 0 && matches!(&line.as_bytes()[digits..], [b'.' | b')', b' ', ..])
    };
    numbered
        || ["- ", "* ", "+ ", "#", "```", "~~~", "> ", "|"]
            .iter()
            .any(|p| line.starts_with(p))
}

/// The byte just past the first sentence's terminator, if `text` has one.
fn sentence_end(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    for (i, c) in text.char_indices() {
        if !matches!(c, '.' | '!' | '?') {
            continue;
        }
        let mut j = i + 1;
        while j < bytes.len() && matches!(bytes[j], b')' | b']' | b'"' | b'\'' | b'`' | b'*') {
            j += 1;
        }
        let next = text[j..].chars().next();
        if next.is_some_and(|n| !n.is_whitespace()) {
            continue;
        }
        if c == '.' && is_abbreviation(&text[..i], text[j..].trim_start()) {
            continue;
        }
        return Some(j);
    }
    None
}

/// Whether the period after `before` belongs to an abbreviation, given
/// the text that follows it.
fn is_abbreviation(before: &str, after: &str) -> bool {
    let word = before
        .rsplit(|c: char| c.is_whitespace() || c == '(' || c == '[')
        .next()
        .unwrap_or("");
    if word.is_empty() {
        return false;
    }
    // `e.g`, `i.e`, `U.S`, `a.k.a`: letters in groups of one or two.
    if word.contains('.')
        && word
            .split('.')
            .all(|seg| (1..=2).contains(&seg.len()) && seg.chars().all(char::is_alphabetic))
    {
        return true;
    }
    let lower = word.to_ascii_lowercase();
    if !ABBREVIATIONS.contains(&lower.as_str()) {
        return false;
    }
    // `etc.` often ends a sentence: it does before a capital letter.
    !(lower == "etc" && after.chars().next().is_some_and(char::is_uppercase))
}

/// `text` cut to [`FIRST_SENTENCE_MAX_BYTES`] at a word, marked with `…`.
fn cap(text: &str) -> String {
    if text.len() <= FIRST_SENTENCE_MAX_BYTES {
        return text.to_owned();
    }
    let mut end = FIRST_SENTENCE_MAX_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let cut = text[..end]
        .rfind(char::is_whitespace)
        .filter(|&w| w > FIRST_SENTENCE_MAX_BYTES / 2)
        .unwrap_or(end);
    format!("{}…", text[..cut].trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_sentence_ends_at_its_period() {
        assert_eq!(
            first_sentence("Reads a file from disk. Use it for text files."),
            "Reads a file from disk."
        );
        assert_eq!(first_sentence("Is it done? Then stop."), "Is it done?");
        assert_eq!(
            first_sentence("Runs a command (in a shell.) Output follows."),
            "Runs a command (in a shell.)"
        );
    }

    #[test]
    fn abbreviations_do_not_end_the_sentence() {
        assert_eq!(
            first_sentence("Searches files, e.g. logs or i.e. text, by pattern. More here."),
            "Searches files, e.g. logs or i.e. text, by pattern."
        );
        assert_eq!(
            first_sentence("Compares a vs. b quickly. Next."),
            "Compares a vs. b quickly."
        );
        assert_eq!(
            first_sentence("Lists files, dirs, etc. and links. Next."),
            "Lists files, dirs, etc. and links."
        );
        assert_eq!(
            first_sentence("Lists files, dirs, etc. Use it often."),
            "Lists files, dirs, etc."
        );
    }

    #[test]
    fn urls_file_names_and_numbers_keep_their_dots() {
        assert_eq!(
            first_sentence("Fetches https://example.com/a.b?x=1 and config.ini v1.2. Then more."),
            "Fetches https://example.com/a.b?x=1 and config.ini v1.2."
        );
        assert_eq!(
            first_sentence("See https://docs.example.com. Then more."),
            "See https://docs.example.com."
        );
    }

    #[test]
    fn a_description_without_a_period_is_its_first_paragraph() {
        assert_eq!(first_sentence("Read a file"), "Read a file");
        assert_eq!(
            first_sentence("Run a command\nin a shell\n\nIMPORTANT: never rm."),
            "Run a command in a shell"
        );
        assert_eq!(
            first_sentence("Edits files with these rules:\n- one\n- two"),
            "Edits files with these rules:"
        );
    }

    #[test]
    fn a_sentence_may_span_lines() {
        assert_eq!(
            first_sentence("  Reads a file\r\nfrom the local filesystem. You can\nread any file."),
            "Reads a file from the local filesystem."
        );
    }

    #[test]
    fn empty_and_blank_descriptions_give_nothing() {
        assert_eq!(first_sentence(""), "");
        assert_eq!(first_sentence("  \n\t\n"), "");
    }

    #[test]
    fn a_long_sentence_is_cut_at_a_word() {
        let long = "word ".repeat(200);
        let s = first_sentence(&long);
        assert!(
            s.len() <= FIRST_SENTENCE_MAX_BYTES + '…'.len_utf8(),
            "{}",
            s.len()
        );
        assert!(s.ends_with("word…"), "{s}");
        let wide = "é".repeat(400);
        assert!(first_sentence(&wide).ends_with('…'));
    }
}
