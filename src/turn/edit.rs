//! What a judge asks to change in a whole answer, as data.
//!
//! A dialect's judge reads an answer through a shared reference and returns
//! its verdict (the judged calls) with a list of [`Edits`]: withholding a
//! call, giving an id-less call its id, cutting a list a client must not
//! read further. Only [`Edits::apply`] writes. So a judge cannot change
//! what the client reads without saying so, and an answer whose edits are
//! empty can go out as the provider's bytes, never parsed into a tree the
//! client gets re-serialised (the JSON driver does that). The commonest
//! such answer, one with nothing to judge, is found before any tree is
//! built (`super::quiet`).
//!
//! Stream events hold the same rule by other means, each one that cannot
//! forget a change: a chat chunk goes out as it came only when the chunk
//! the judge made equals the chunk it read; a Gemini chunk is judged
//! through a `Cow` that copies on the first write; Responses and Messages
//! pass only continuation events read through typed views, and write the
//! rest. An event repeating a key is always written anew.

use serde_json::{Map, Value};

/// One step of a path into an answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// An object's field.
    Key(&'static str),
    /// An array's element.
    Index(usize),
}

/// One change to an answer, at the object or array `at` names.
#[derive(Clone, Debug, PartialEq)]
pub enum Edit {
    /// Keep only the elements of the array whose flag is set (elements
    /// past the flags are dropped).
    Retain { at: Vec<Step>, keep: Vec<bool> },
    /// Cut the array to its first `len` elements.
    Truncate { at: Vec<Step>, len: usize },
    /// Set an object's field.
    Put {
        at: Vec<Step>,
        key: &'static str,
        value: Value,
    },
    /// Remove an object's field.
    Remove { at: Vec<Step>, key: &'static str },
}

/// The edits of one judged answer, applied in order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Edits(Vec<Edit>);

impl Edits {
    /// No edits: the answer reaches the client as the provider wrote it.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds an edit; a `Retain` that keeps everything is no edit.
    pub fn push(&mut self, edit: Edit) {
        if let Edit::Retain { keep, .. } = &edit {
            if keep.iter().all(|k| *k) {
                return;
            }
        }
        self.0.push(edit);
    }

    /// Writes every edit into `answer`, in order. An edit whose place is
    /// missing or of another type changes nothing: the judge read the
    /// same answer, so that only happens to an edit made moot by an
    /// earlier one.
    pub fn apply(self, answer: &mut Map<String, Value>) {
        for edit in self.0 {
            match edit {
                Edit::Retain { at, keep } => {
                    if let Some(Value::Array(items)) = place(answer, &at) {
                        let mut keep = keep.into_iter();
                        items.retain(|_| keep.next().unwrap_or(false));
                    }
                }
                Edit::Truncate { at, len } => {
                    if let Some(Value::Array(items)) = place(answer, &at) {
                        items.truncate(len);
                    }
                }
                Edit::Put { at, key, value } => {
                    if let Some(object) = object_at(answer, &at) {
                        object.insert(key.to_owned(), value);
                    }
                }
                Edit::Remove { at, key } => {
                    if let Some(object) = object_at(answer, &at) {
                        object.remove(key);
                    }
                }
            }
        }
    }
}

/// The value `at` names under the answer's top level.
fn place<'a>(answer: &'a mut Map<String, Value>, at: &[Step]) -> Option<&'a mut Value> {
    let (first, rest) = at.split_first()?;
    let Step::Key(key) = first else {
        return None;
    };
    let mut value = answer.get_mut(*key)?;
    for step in rest {
        value = match step {
            Step::Key(key) => value.get_mut(*key)?,
            Step::Index(i) => value.get_mut(*i)?,
        };
    }
    Some(value)
}

/// The object `at` names; the answer itself for an empty path.
fn object_at<'a>(
    answer: &'a mut Map<String, Value>,
    at: &[Step],
) -> Option<&'a mut Map<String, Value>> {
    if at.is_empty() {
        return Some(answer);
    }
    place(answer, at)?.as_object_mut()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn apply(answer: Value, edits: Vec<Edit>) -> Value {
        let mut answer = answer.as_object().unwrap().clone();
        let mut all = Edits::default();
        for e in edits {
            all.push(e);
        }
        all.apply(&mut answer);
        Value::Object(answer)
    }

    #[test]
    fn each_edit_writes_where_its_path_says_and_nowhere_else() {
        let answer = json!({"choices": [{"message": {"tool_calls": [{"a": 1}, {"b": 2}, {"c": 3}]}}], "x": 1});
        let calls = vec![
            Step::Key("choices"),
            Step::Index(0),
            Step::Key("message"),
            Step::Key("tool_calls"),
        ];
        let mut first = calls.clone();
        first.push(Step::Index(0));
        let out = apply(
            answer,
            vec![
                Edit::Put {
                    at: first,
                    key: "id",
                    value: json!("call_1"),
                },
                Edit::Retain {
                    at: calls,
                    keep: vec![true, false, true],
                },
                Edit::Remove {
                    at: vec![],
                    key: "x",
                },
            ],
        );
        assert_eq!(
            out,
            json!({"choices": [{"message": {"tool_calls": [{"a": 1, "id": "call_1"}, {"c": 3}]}}]})
        );
    }

    #[test]
    fn an_edit_whose_place_is_gone_changes_nothing() {
        let answer = json!({"output": "not a list", "n": [1, 2, 3]});
        let out = apply(
            answer.clone(),
            vec![
                Edit::Retain {
                    at: vec![Step::Key("output")],
                    keep: vec![false],
                },
                Edit::Put {
                    at: vec![Step::Key("missing"), Step::Index(3)],
                    key: "id",
                    value: json!(1),
                },
                Edit::Truncate {
                    at: vec![Step::Key("n")],
                    len: 5,
                },
            ],
        );
        assert_eq!(out, answer);
    }

    #[test]
    fn a_retain_that_keeps_everything_is_no_edit() {
        let mut edits = Edits::default();
        edits.push(Edit::Retain {
            at: vec![Step::Key("output")],
            keep: vec![true, true],
        });
        assert!(edits.is_empty());
        edits.push(Edit::Truncate {
            at: vec![Step::Key("choices")],
            len: 1,
        });
        assert!(!edits.is_empty());
    }
}
