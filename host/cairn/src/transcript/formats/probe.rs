//! What format detection reads of a document, without building the document: a one-line
//! OpenAI or Anthropic file is the whole session on its first line, and a `serde_json::Value`
//! of a 30 MB session holds more than the session itself (its parse then runs beside it).

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Strings longer than this are cut: detection compares short tags and ids, never a text.
const STRING_BYTES: usize = 256;
/// How deep a probe keeps containers: deep enough for OpenCode's `messages[0].info`.
const DEPTH: u8 = 3;

/// `text` (one JSON document, checked whole) reduced to what detection reads: objects keep
/// every key, arrays only their first element, `DEPTH` levels deep (deeper containers are
/// empty ones of their kind); long strings are cut.
pub(super) fn reduced(text: &str) -> Result<Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = Reduced { depth: DEPTH }.deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

struct Reduced {
    depth: u8,
}

impl<'de> DeserializeSeed<'de> for Reduced {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Reduced {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        let mut end = v.len().min(STRING_BYTES);
        while !v.is_char_boundary(end) {
            end -= 1;
        }
        Ok(Value::String(v[..end].to_string()))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let first = match self.depth {
            0 => None,
            depth => seq.next_element_seed(Reduced { depth: depth - 1 })?,
        };
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Value::Array(first.into_iter().collect()))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut kept = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if self.depth == 0 {
                map.next_value::<IgnoredAny>()?;
            } else {
                kept.insert(key, map.next_value_seed(Reduced { depth: self.depth - 1 })?);
            }
        }
        Ok(Value::Object(kept))
    }
}

/// Content block types only Anthropic's Messages API has.
const ANTHROPIC_BLOCKS: &[&str] = &["tool_use", "tool_result", "thinking", "redacted_thinking", "image", "document"];

/// Whether a chat document (`{messages, …}` or `[…]`) is Anthropic's: it has a top-level
/// `system`, or a message's content holds a block only Anthropic has. Read as it streams by,
/// keeping nothing; a document that is neither shape (or not JSON) is not.
pub(super) fn is_anthropic(text: &str) -> bool {
    let mut de = serde_json::Deserializer::from_str(text);
    de.deserialize_any(ChatDocument).is_ok_and(|anthropic| anthropic) && de.end().is_ok()
}

/// `{system?, messages: [message]}` or `[message]`: whether it is Anthropic's.
struct ChatDocument;

impl<'de> Visitor<'de> for ChatDocument {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a chat document or a list of messages")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<bool, A::Error> {
        Messages.visit_seq(seq)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let (mut seen_system, mut system, mut blocks) = (false, false, None);
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match key.as_ref() {
                "system" if seen_system => return Err(serde::de::Error::duplicate_field("system")),
                "system" => (seen_system, system) = (true, map.next_value::<Option<IgnoredAny>>()?.is_some()),
                "messages" if blocks.is_some() => return Err(serde::de::Error::duplicate_field("messages")),
                "messages" => blocks = Some(map.next_value_seed(Messages)?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let Some(blocks) = blocks else { return Err(serde::de::Error::missing_field("messages")) };
        Ok(system || blocks)
    }
}

/// A list of messages: whether any holds an Anthropic block.
struct Messages;

impl<'de> DeserializeSeed<'de> for Messages {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Messages {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of messages")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        let mut any = false;
        while let Some(found) = seq.next_element_seed(Message)? {
            any |= found;
        }
        Ok(any)
    }
}

/// One message (an object): whether its `content` holds an Anthropic block.
struct Message;

impl<'de> DeserializeSeed<'de> for Message {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Message {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a message object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let mut found = false;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key == "content" {
                found |= map.next_value_seed(Content)?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// A scalar where content or a block may stand holds no Anthropic block.
macro_rules! scalars_hold_no_block {
    () => {
        fn visit_bool<E>(self, _: bool) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_i64<E>(self, _: i64) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_u64<E>(self, _: u64) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_f64<E>(self, _: f64) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_str<E>(self, _: &str) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_unit<E>(self) -> Result<bool, E> {
            Ok(false)
        }
    };
}

/// A message's content: any JSON; true for a list holding an object of an Anthropic `type`.
struct Content;

impl<'de> DeserializeSeed<'de> for Content {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Content {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("message content")
    }
    scalars_hold_no_block!();
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(false)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        let mut found = false;
        while let Some(block) = seq.next_element_seed(Block)? {
            found |= block;
        }
        Ok(found)
    }
}

/// One element of a content list: true for an object whose `type` is an Anthropic block's.
struct Block;

impl<'de> DeserializeSeed<'de> for Block {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Block {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a content block")
    }
    scalars_hold_no_block!();
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(false)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let mut found = false;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key == "type" {
                // The last `type` counts, as a `Value` object keeps it.
                found = map.next_value::<Value>()?.as_str().is_some_and(|t| ANTHROPIC_BLOCKS.contains(&t));
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reduced_document_keeps_keys_first_elements_and_kinds() {
        let big = "x".repeat(10_000);
        let text = format!(r#"{{"type":"session","info":{{"id":"s"}},"messages":[{{"info":{{"a":{{"b":1}}}},"parts":[1,2],"text":"{big}"}},{{"second":true}}],"n":null}}"#);
        let value = reduced(&text).unwrap();
        assert_eq!(value["type"], "session");
        assert_eq!(value["info"]["id"], "s");
        let messages = value["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 1, "only the first element");
        assert_eq!((&messages[0]["info"], &messages[0]["parts"]), (&serde_json::json!({}), &serde_json::json!([])), "deeper containers are empty ones of their kind");
        assert_eq!(messages[0]["text"].as_str().unwrap().len(), STRING_BYTES);
        assert!(value["n"].is_null());
        assert!(reduced(r#"{"a":1} trailing"#).is_err() && reduced(r#"{"a":[1,}"#).is_err(), "checked whole, as a Value would be");
    }

    #[test]
    fn anthropic_documents_are_told_apart_from_openai_ones() {
        let anthropic = [
            r#"{"system":"be brief","messages":[{"role":"user","content":"hi"}]}"#,
            r#"{"messages":[{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"tool_use","id":"t","name":"ls","input":{}}]}]}"#,
            r#"[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok"}]}]"#,
        ];
        let openai = [
            r#"{"system":null,"messages":[{"role":"user","content":"hi"}]}"#,
            r#"{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"u"}}]}]}"#,
            r#"[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"c","content":[1,"tool_use",{"kind":"thinking"}]}]"#,
            r#"{"system":"s"}"#,
            r#"{"system":"s","messages":["not a message"]}"#,
            r#"[{"role":"user","content":[{"type":"thinking"}]}] trailing"#,
            r#"{"messages":[{"role":"user","content":[{"type":"thinking"}]}],"messages":[]}"#,
        ];
        for text in anthropic {
            assert!(is_anthropic(text), "{text}");
        }
        for text in openai {
            assert!(!is_anthropic(text), "{text}");
        }
    }
}
