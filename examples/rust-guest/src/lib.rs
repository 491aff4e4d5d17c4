//! An example code step written in Rust with the weft guest SDK: word
//! statistics of a text (words, lines, characters and the most frequent
//! words).
//!
//! Build it with
//! `cargo build -p weft-example-rust-guest --target wasm32-wasip2 --release`
//! and run it with
//! `weft step run target/wasm32-wasip2/release/weft_example_rust_guest.wasm --input '{"text": "a b a"}'`.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use weft_guest::{Context, StepError, step};

/// The text to look at.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct In {
    /// The text.
    pub text: String,
    /// How many of the most frequent words to list (default 3, at most 100).
    #[serde(default = "default_top")]
    #[schemars(range(max = 100))]
    pub top: usize,
}

fn default_top() -> usize {
    3
}

/// A word and how often it occurs.
#[derive(Serialize, JsonSchema, Debug, PartialEq)]
pub struct WordCount {
    /// The word, in lower case.
    pub word: String,
    /// How many times it occurs.
    pub count: usize,
}

/// What the text is made of.
#[derive(Serialize, JsonSchema, Debug, PartialEq)]
pub struct Out {
    /// Words: runs of letters, digits and apostrophes.
    pub words: usize,
    /// Distinct words, ignoring case.
    pub unique_words: usize,
    /// Lines (a final line without a newline counts).
    pub lines: usize,
    /// Characters (Unicode scalar values).
    pub chars: usize,
    /// The most frequent words, most frequent first, ties in code point order.
    pub top: Vec<WordCount>,
}

#[step(
    name = "word-stats",
    description = "Count the words, lines and characters of a text and list its most frequent words."
)]
fn run(ctx: &Context, input: In) -> Result<Out, StepError> {
    if input.top > 100 {
        return Err(StepError::invalid_input("`top` must be at most 100"));
    }
    weft_guest::log!("step {} attempt {}: {} bytes", ctx.step, ctx.attempt, input.text.len());
    let out = word_stats(&input.text, input.top);
    weft_guest::progress(&format!("{} words, {} distinct", out.words, out.unique_words));
    Ok(out)
}

/// The statistics themselves, separate from the step so they are easy to test.
pub fn word_stats(text: &str, top: usize) -> Out {
    let mut counts: HashMap<String, usize> = HashMap::new();
    let mut words = 0;
    for word in text
        .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '’'))
        .map(|w| w.trim_matches(|c| c == '\'' || c == '’'))
        .filter(|w| !w.is_empty())
    {
        words += 1;
        *counts.entry(word.to_lowercase()).or_default() += 1;
    }
    let unique_words = counts.len();
    let mut ranked: Vec<WordCount> = counts.into_iter().map(|(word, count)| WordCount { word, count }).collect();
    ranked.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.word.cmp(&b.word)));
    ranked.truncate(top);
    Out { words, unique_words, lines: text.lines().count(), chars: text.chars().count(), top: ranked }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts() {
        let out = word_stats("The cat and the hat.\nThe END, isn't it?\n", 2);
        assert_eq!(out.words, 9);
        assert_eq!(out.unique_words, 7);
        assert_eq!(out.lines, 2);
        assert_eq!(
            out.top,
            vec![WordCount { word: "the".into(), count: 3 }, WordCount { word: "and".into(), count: 1 },]
        );
    }

    #[test]
    fn empty() {
        let out = word_stats("", 3);
        assert_eq!((out.words, out.lines, out.chars, out.top.len()), (0, 0, 0, 0));
    }
}
