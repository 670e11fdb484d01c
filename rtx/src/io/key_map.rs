//! [`KeyMap`]: a declared mapping from a checkpoint's tensor names to a model's, for loading
//! checkpoints written by other code (Hugging Face's `BertModel` calls a layer
//! `encoder.layer.3.attention.self.query` where an rtx model may call it `layers.3.attn.query`).
//!
//! Rules match whole dotted components from the start of a key, so a rule can never cut a
//! name in the middle (`embeddings.LayerNorm` does not match `embeddings.LayerNorms.weight`),
//! and the first rule that matches decides; keys no rule matches keep their name.

/// Renames from a checkpoint's keys to a model's, and keys of the checkpoint to leave out.
///
/// A pattern is a dotted prefix whose components are literal or `*` (any one component); the
/// replacement puts the components that the `*`s matched back in order, and the rest of the
/// key follows unchanged.
///
/// ```
/// use rtx::io::KeyMap;
/// let map = KeyMap::new()
///     .rename("encoder.layer.*.attention.self", "layers.*.attn")
///     .rename("embeddings.LayerNorm", "embeddings.norm")
///     .ignore("pooler");
/// assert_eq!(
///     map.apply("encoder.layer.3.attention.self.query.weight").as_deref(),
///     Some("layers.3.attn.query.weight")
/// );
/// assert_eq!(map.apply("embeddings.LayerNorm.bias").as_deref(), Some("embeddings.norm.bias"));
/// assert_eq!(map.apply("embeddings.word.weight").as_deref(), Some("embeddings.word.weight"));
/// assert_eq!(map.apply("pooler.dense.weight"), None);
/// ```
#[derive(Clone, Debug, Default)]
pub struct KeyMap {
    renames: Vec<(Vec<String>, Vec<String>)>,
    ignored: Vec<Vec<String>>,
}

impl KeyMap {
    /// A map that keeps every key as it is.
    pub fn new() -> Self {
        KeyMap::default()
    }

    /// Renames keys that start with the components of `from` to start with `to` instead.
    ///
    /// # Panics
    /// When `to` has a different number of `*` components than `from`, or either is empty:
    /// the map is part of the program, so this is a bug in it, not bad input.
    #[track_caller]
    pub fn rename(mut self, from: &str, to: &str) -> Self {
        let (from, to) = (components(from), components(to));
        let stars = |p: &[String]| p.iter().filter(|c| *c == "*").count();
        assert!(
            !from.is_empty() && !to.is_empty() && stars(&from) == stars(&to),
            "KeyMap::rename(\"{}\", \"{}\"): both sides need the same number of `*` components",
            from.join("."),
            to.join(".")
        );
        self.renames.push((from, to));
        self
    }

    /// Leaves out keys that start with the components of `pattern` (tensors of the checkpoint
    /// the model has no use for, such as BERT's pooler under a mean-pooling head); they are
    /// then not reported as unexpected.
    pub fn ignore(mut self, pattern: &str) -> Self {
        self.ignored.push(components(pattern));
        self
    }

    /// The model's name for the checkpoint key `key`, or `None` when the key is ignored.
    pub fn apply(&self, key: &str) -> Option<String> {
        let parts: Vec<&str> = key.split('.').collect();
        if self.ignored.iter().any(|p| matches(p, &parts).is_some()) {
            return None;
        }
        for (from, to) in &self.renames {
            let Some(stars) = matches(from, &parts) else {
                continue;
            };
            let mut stars = stars.into_iter();
            let mut out: Vec<&str> = to
                .iter()
                .map(|c| match c.as_str() {
                    "*" => stars.next().unwrap_or("*"),
                    lit => lit,
                })
                .collect();
            out.extend(&parts[from.len()..]);
            return Some(out.join("."));
        }
        Some(key.to_string())
    }
}

/// A pattern's dotted components.
fn components(pattern: &str) -> Vec<String> {
    pattern
        .trim_matches('.')
        .split('.')
        .filter(|c| !c.is_empty())
        .map(str::to_string)
        .collect()
}

/// The components matched by `*`, when `pattern` matches the start of `key`.
fn matches<'k>(pattern: &[String], key: &[&'k str]) -> Option<Vec<&'k str>> {
    if pattern.is_empty() || pattern.len() > key.len() {
        return None;
    }
    let mut stars = Vec::new();
    for (p, k) in pattern.iter().zip(key) {
        match p.as_str() {
            "*" => stars.push(*k),
            lit if lit == *k => {}
            _ => return None,
        }
    }
    Some(stars)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_match_whole_components_and_the_first_wins() {
        let map = KeyMap::new()
            .rename("a.*.b", "x.*")
            .rename("a", "y")
            .ignore("a.*.skip");
        assert_eq!(map.apply("a.7.b.w").as_deref(), Some("x.7.w"));
        assert_eq!(map.apply("a.7.bb.w").as_deref(), Some("y.7.bb.w"));
        assert_eq!(map.apply("ab.w").as_deref(), Some("ab.w"));
        assert_eq!(map.apply("a.7.skip.w"), None);
        assert_eq!(map.apply("a").as_deref(), Some("y"));
    }

    #[test]
    #[should_panic(expected = "the same number of `*` components")]
    fn a_replacement_must_use_every_star() {
        let _ = KeyMap::new().rename("a.*.b", "x");
    }
}
