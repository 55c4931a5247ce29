//! The first key a request repeats below its top level, and where, found
//! without building a tree (docs/security.md, "One reading of a request").
//!
//! A request's sub-trees arrive as [`RawValue`]s, which serde_json has
//! already checked while reading the top level: this pass reads only their
//! structure (strings skipped by memchr's vector scan, keys compared
//! unescaped), well under the instructions the top-level parse spends on
//! the same bytes, and no tree.
//!
//! Proto JSON, Google's reader, takes a message's field in lowerCamel and
//! in snake_case alike (`generationConfig`, `generation_config`): under
//! [`Keys::Proto`] the two spellings are one key, except where a field
//! holds free-form JSON (`Struct`: a call's `args`, a JSON schema) whose
//! keys are the client's own, or a map (`properties`, `labels`) whose keys
//! are names, not fields.

use std::borrow::Cow;
use std::collections::HashSet;

use serde_json::value::RawValue;

/// How a provider's reader tells an object's keys apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keys {
    /// As written, after unescaping (JSON's own; OpenAI, Anthropic).
    Exact,
    /// Proto JSON (Google): a field's lowerCamel and snake_case spellings
    /// are the same key.
    Proto,
}

/// A key a request repeats, by its path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Repeat {
    /// Where the key stands: `toolConfig.functionCallingConfig`,
    /// `messages[2].content[0].type`.
    pub path: String,
    /// The same key's path in its other spelling
    /// (`generation_config` beside `generationConfig`), when the repeat is
    /// one field written two ways.
    pub also: Option<String>,
}

/// `function_declarations` as `functionDeclarations`: proto JSON's
/// lowerCamel name of a field (a name without `_` is its own).
pub fn camel(key: &str) -> Cow<'_, str> {
    if !key.contains('_') {
        return key.into();
    }
    let mut out = String::with_capacity(key.len());
    let mut upper = false;
    for c in key.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out.into()
}

/// Fields of Google's request messages that hold free-form JSON
/// (`Struct`, `Value`), by their lowerCamel name: below them keys are the
/// client's, compared as written.
const FREE_FORM: &[&str] = &[
    "args",
    "response",
    "partMetadata",
    "parametersJsonSchema",
    "responseJsonSchema",
    "ResponseJsonSchema",
    "example",
    "default",
];

/// Map fields of Google's request messages: their keys are names, compared
/// as written; their values are messages again.
const MAPS: &[&str] = &["properties", "labels"];

/// What an object's keys are to the reader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Names {
    /// Compared as written, and so is everything below.
    Exact,
    /// A proto message's fields: compared in lowerCamel.
    Fields,
    /// A proto map's keys: compared as written; its values are messages.
    MapKeys,
}

impl Names {
    /// What the keys of the value under a key (as compared: lowerCamel in
    /// a message) of an object read as `self` are.
    fn below(self, compared: &str) -> Names {
        match self {
            Names::Exact => Names::Exact,
            Names::MapKeys => Names::Fields,
            Names::Fields if FREE_FORM.contains(&compared) => Names::Exact,
            Names::Fields if MAPS.contains(&compared) => Names::MapKeys,
            Names::Fields => Names::Fields,
        }
    }
}

impl Keys {
    /// How the keys of the value under the top-level field `key` read.
    fn under(self, key: &str) -> Names {
        match self {
            Keys::Exact => Names::Exact,
            Keys::Proto => Names::Fields.below(&camel(key)),
        }
    }
}

/// The first key repeated in `value` (the value of the top-level field
/// `key`) at any depth, with its path from `key`.
pub fn first_repeat(value: &RawValue, keys: Keys, key: &str) -> Option<Repeat> {
    Scan {
        text: value.get(),
        keys: Vec::new(),
        frames: Vec::new(),
    }
    .run(keys.under(key), key)
}

/// The first key repeated in `entries`, the elements of the top-level
/// array field `key` held apart, with its path from `key` as
/// [`first_repeat`] gives it for the whole array.
pub(super) fn first_repeat_in_entries(
    entries: &[Box<RawValue>],
    keys: Keys,
    key: &str,
) -> Option<Repeat> {
    let names = keys.under(key);
    entries.iter().enumerate().find_map(|(at, entry)| {
        let repeat = Scan {
            text: entry.get(),
            keys: Vec::new(),
            frames: Vec::new(),
        }
        .run(names, "")?;
        let prefix = format!("{key}[{at}]");
        Some(Repeat {
            path: format!("{prefix}{}", repeat.path),
            also: repeat.also.map(|also| format!("{prefix}{also}")),
        })
    })
}

/// Whether the top-level `keys` (distinct as written) name one proto
/// field twice: the first such pair, as a repeat.
pub(super) fn first_double_spelling<'a>(keys: impl Iterator<Item = &'a str>) -> Option<Repeat> {
    let mut seen: Vec<(&str, Cow<'_, str>)> = Vec::new();
    let mut set: HashSet<Cow<'_, str>> = HashSet::new();
    for key in keys {
        let folded = camel(key);
        if !set.insert(folded.clone()) {
            let first = seen.iter().find(|(_, f)| *f == folded).map(|(k, _)| *k)?;
            return Some(Repeat {
                path: shown(first).into_owned(),
                also: Some(shown(key).into_owned()),
            });
        }
        seen.push((key, folded));
    }
    None
}

/// Objects up to this many keys are checked by comparing each new key
/// with the ones before; larger ones keep a set.
const FEW_KEYS: usize = 16;

/// A key as written, and as the reader compares it.
struct Key<'a> {
    written: Cow<'a, str>,
    compared: Cow<'a, str>,
}

/// An object or array being read.
struct Frame<'a> {
    /// An object (else an array).
    object: bool,
    /// Where its keys start in [`Scan::keys`].
    start: usize,
    /// The element being read, in an array.
    index: usize,
    /// What its keys are.
    names: Names,
    /// Its keys as compared, once it has more than [`FEW_KEYS`].
    set: Option<HashSet<Cow<'a, str>>>,
}

struct Scan<'a> {
    text: &'a str,
    /// The keys of every open object, outermost first.
    keys: Vec<Key<'a>>,
    frames: Vec<Frame<'a>>,
}

impl<'a> Scan<'a> {
    /// Reads the value, whose objects' keys are `names`; `prefix` is the
    /// path to it.
    fn run(mut self, names: Names, prefix: &str) -> Option<Repeat> {
        let bytes = self.text.as_bytes();
        // What the next object's keys are: the value's own, an array's
        // elements', or what the key just read holds.
        let mut next = names;
        // After `{` or an object's `,`, the next string is a key.
        let mut expect_key = false;
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'"' => {
                    // Valid JSON text: every string ends.
                    let (end, escaped) = string_end(bytes, i + 1)?;
                    if expect_key {
                        let raw = &self.text[i + 1..end];
                        let written = match escaped {
                            false => Cow::Borrowed(raw),
                            // Valid JSON text reads; should it not, the key
                            // is compared as written.
                            true => serde_json::from_str(&self.text[i..=end])
                                .map_or(Cow::Borrowed(raw), Cow::Owned),
                        };
                        if let Some(repeat) = self.key(written, prefix) {
                            return Some(repeat);
                        }
                        if let (Some(frame), Some(key)) = (self.frames.last(), self.keys.last()) {
                            next = frame.names.below(&key.compared);
                        }
                        expect_key = false;
                    }
                    i = end + 1;
                    continue;
                }
                b'{' | b'[' => {
                    let object = bytes[i] == b'{';
                    self.frames.push(Frame {
                        object,
                        start: self.keys.len(),
                        index: 0,
                        names: next,
                        set: None,
                    });
                    // An array's elements read as the array does: `next`
                    // stays.
                    expect_key = object;
                }
                b'}' | b']' => {
                    if let Some(frame) = self.frames.pop() {
                        self.keys.truncate(frame.start);
                    }
                    expect_key = false;
                }
                b',' => match self.frames.last_mut() {
                    Some(frame) if frame.object => expect_key = true,
                    Some(frame) => {
                        frame.index += 1;
                        next = frame.names;
                    }
                    None => {}
                },
                _ => {}
            }
            i += 1;
        }
        None
    }

    /// Adds `written` to the innermost object's keys, or says where it
    /// repeats one.
    fn key(&mut self, written: Cow<'a, str>, prefix: &str) -> Option<Repeat> {
        let frame = self.frames.last_mut()?;
        let compared = match (frame.names, &written) {
            (Names::Fields, Cow::Borrowed(key)) => camel(key),
            (Names::Fields, Cow::Owned(key)) => Cow::Owned(camel(key).into_owned()),
            (Names::Exact | Names::MapKeys, _) => written.clone(),
        };
        let own = &self.keys[frame.start..];
        let repeated = match &mut frame.set {
            Some(set) => !set.insert(compared.clone()),
            None => {
                let repeated = own.iter().any(|k| k.compared == compared);
                if !repeated && own.len() == FEW_KEYS {
                    let mut set: HashSet<Cow<'a, str>> =
                        own.iter().map(|k| k.compared.clone()).collect();
                    set.insert(compared.clone());
                    frame.set = Some(set);
                }
                repeated
            }
        };
        if repeated {
            return Some(self.repeat(&written, &compared, prefix));
        }
        self.keys.push(Key { written, compared });
        None
    }

    /// The repeat of `written` (compared as `compared`) in the innermost
    /// object, by path.
    fn repeat(&self, written: &str, compared: &str, prefix: &str) -> Repeat {
        let mut path = prefix.to_owned();
        let last = self.frames.len() - 1;
        for (n, frame) in self.frames.iter().enumerate() {
            if !frame.object {
                path.push_str(&format!("[{}]", frame.index));
            } else if n < last {
                // The key whose value is being read: the object's last.
                let end = self.frames[n + 1].start;
                path.push('.');
                path.push_str(&shown(&self.keys[end - 1].written));
            }
        }
        let first = self.keys[self.frames[last].start..]
            .iter()
            .find(|k| k.compared == compared)
            .map_or(written, |k| &k.written);
        let at = |key: &str| format!("{path}.{}", shown(key));
        Repeat {
            path: at(first),
            also: (first != written).then(|| at(written)),
        }
    }
}

/// Where the string whose text starts at `at` ends (its closing quote),
/// and whether it holds an escape; `None` for text that is not JSON.
/// Strings are most of a request: they are read a word, then a vector, at
/// a time.
fn string_end(bytes: &[u8], mut at: usize) -> Option<(usize, bool)> {
    let mut escaped = false;
    loop {
        // Short strings (keys, ids, roles) end within a word, read at
        // once; longer ones are searched by memchr's vector scan.
        let next = match bytes.get(at..at + 8) {
            Some(chunk) => {
                let mut word = [0; 8];
                word.copy_from_slice(chunk);
                let word = u64::from_le_bytes(word);
                let found = holds(word, b'"') | holds(word, b'\\');
                match found {
                    // The lowest flagged byte is a quote or a backslash.
                    0 => memchr::memchr2(b'"', b'\\', &bytes[at + 8..]).map(|i| at + 8 + i),
                    _ => Some(at + (found.trailing_zeros() / 8) as usize),
                }
            }
            None => memchr::memchr2(b'"', b'\\', bytes.get(at..)?).map(|i| at + i),
        };
        at = next?;
        if bytes[at] == b'"' {
            return Some((at, escaped));
        }
        escaped = true;
        at += 2;
    }
}

/// Not zero when some byte of `word` is `byte`, and then its lowest set
/// bit is the high bit of the first such byte (bits above it may be set
/// wrongly, by a borrow).
const fn holds(word: u64, byte: u8) -> u64 {
    const ONES: u64 = u64::from_le_bytes([1; 8]);
    const HIGHS: u64 = u64::from_le_bytes([0x80; 8]);
    let x = word ^ (ONES * byte as u64);
    x.wrapping_sub(ONES) & !x & HIGHS
}

/// A key shortened for a message.
fn shown(key: &str) -> Cow<'_, str> {
    const SHOWN: usize = 64;
    match key.char_indices().nth(SHOWN) {
        Some((end, _)) => format!("{}...", &key[..end]).into(),
        None => key.into(),
    }
}

#[cfg(test)]
mod tests;
