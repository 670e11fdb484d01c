//! Conversations as prompts: [`Message`]s rendered by a [`ChatTemplate`], the Jinja text in a
//! GGUF file's `tokenizer.chat_template`, as `transformers` renders it.

use rtx::io::Gguf;
use rtx::{Error, Result};
use serde::{Deserialize, Serialize};

/// One message of a conversation: a role (`system`, `user`, `assistant`) and its text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Who speaks: `system`, `user` or `assistant`.
    pub role: String,
    /// What they say.
    pub content: String,
}

impl Message {
    /// A message of `role`.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Message {
        Message {
            role: role.into(),
            content: content.into(),
        }
    }

    /// A `user` message.
    pub fn user(content: impl Into<String>) -> Message {
        Message::new("user", content)
    }

    /// A `system` message.
    pub fn system(content: impl Into<String>) -> Message {
        Message::new("system", content)
    }

    /// An `assistant` message.
    pub fn assistant(content: impl Into<String>) -> Message {
        Message::new("assistant", content)
    }
}

/// A chat template: the Jinja text that turns a conversation into a model's prompt, rendered
/// as `transformers`' `apply_chat_template` renders it (blocks trimmed and left-stripped,
/// `messages`, `add_generation_prompt`, `bos_token` and `eos_token` defined,
/// `raise_exception` raising, Python's string methods available).
#[derive(Clone, Debug)]
pub struct ChatTemplate {
    source: String,
    bos_token: String,
    eos_token: String,
    /// Where the template came from, for messages.
    origin: String,
}

impl ChatTemplate {
    /// A template from its Jinja `source`, with the texts of the BOS and EOS tokens it may
    /// refer to.
    ///
    /// # Errors
    /// [`Error::BadArgument`] with minijinja's message when the template does not parse.
    pub fn new(
        source: impl Into<String>,
        bos_token: impl Into<String>,
        eos_token: impl Into<String>,
    ) -> Result<ChatTemplate> {
        let template = ChatTemplate {
            source: source.into(),
            bos_token: bos_token.into(),
            eos_token: eos_token.into(),
            origin: "chat template".into(),
        };
        template.environment()?;
        Ok(template)
    }

    /// The template in `gguf`'s `tokenizer.chat_template`, with its BOS and EOS tokens' texts
    /// from `tokenizer.ggml.tokens`.
    ///
    /// # Errors
    /// [`Error::Gguf`] naming the key when the template or a token is missing, and naming
    /// the file when the template does not parse.
    pub fn from_gguf(gguf: &Gguf) -> Result<ChatTemplate> {
        let source = gguf.get_str("tokenizer.chat_template")?;
        let tokens = gguf.get_array("tokenizer.ggml.tokens")?;
        let token = |key: &str| -> Result<String> {
            if !gguf.metadata().contains_key(key) {
                return Ok(String::new());
            }
            let id = gguf.get_u32(key)? as usize;
            tokens
                .get(id)
                .and_then(|t| t.as_str())
                .map(str::to_string)
                .ok_or_else(|| Error::Gguf {
                    file: gguf.path().to_path_buf(),
                    msg: format!("metadata key `{key}` is {id}, which `tokenizer.ggml.tokens` does not hold as a string"),
                })
        };
        let mut t = ChatTemplate::new(
            source,
            token("tokenizer.ggml.bos_token_id")?,
            token("tokenizer.ggml.eos_token_id")?,
        )
        .map_err(|e| Error::Gguf {
            file: gguf.path().to_path_buf(),
            msg: format!("metadata key `tokenizer.chat_template`: {e}"),
        })?;
        t.origin = format!("{}: tokenizer.chat_template", gguf.path().display());
        Ok(t)
    }

    /// The template's Jinja text.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The prompt for `messages`; with `add_generation_prompt` it ends where the assistant's
    /// reply starts.
    ///
    /// # Errors
    /// [`Error::BadArgument`] with minijinja's message (or the template's own
    /// `raise_exception`) when rendering fails.
    pub fn render(&self, messages: &[Message], add_generation_prompt: bool) -> Result<String> {
        let env = self.environment()?;
        let template = env.get_template("chat").map_err(|e| self.error(&e))?;
        template
            .render(minijinja::context! {
                messages => messages,
                add_generation_prompt => add_generation_prompt,
                bos_token => &self.bos_token,
                eos_token => &self.eos_token,
            })
            .map_err(|e| self.error(&e))
    }

    /// A minijinja environment holding the template as `chat`, set up as `transformers` sets
    /// up Jinja for chat templates.
    fn environment(&self) -> Result<minijinja::Environment<'_>> {
        let mut env = minijinja::Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function(
            "raise_exception",
            |msg: String| -> std::result::Result<String, minijinja::Error> {
                Err(minijinja::Error::new(
                    minijinja::ErrorKind::InvalidOperation,
                    msg,
                ))
            },
        );
        env.add_template("chat", &self.source)
            .map_err(|e| self.error(&e))?;
        Ok(env)
    }

    fn error(&self, e: &minijinja::Error) -> Error {
        let mut msg = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            msg.push_str(&format!(": {s}"));
            source = s.source();
        }
        Error::BadArgument {
            op: "ChatTemplate",
            msg: format!("{}: {msg}", self.origin),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_templates_render_as_transformers_sets_up_jinja() {
        // trim_blocks drops the newline after a tag, lstrip_blocks the indent before one.
        let source = "{% for m in messages %}\n{{ bos_token }}{{ m['role'] }}: {{ m['content'].strip() }}\n{% endfor %}\n    {% if add_generation_prompt %}\nassistant:{% endif %}";
        let t = ChatTemplate::new(source, "<s>", "</s>").unwrap();
        let text = t
            .render(&[Message::user("  hi  "), Message::assistant("yo")], true)
            .unwrap();
        assert_eq!(text, "<s>user: hi\n<s>assistant: yo\nassistant:");
        let raising =
            ChatTemplate::new("{{ raise_exception('roles must alternate') }}", "", "").unwrap();
        let e = raising.render(&[], false).unwrap_err();
        assert!(e.to_string().contains("roles must alternate"), "{e}");
        let e = ChatTemplate::new("{% for %}", "", "").unwrap_err();
        assert!(e.to_string().contains("chat template"), "{e}");
    }
}
