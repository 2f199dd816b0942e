//! JSON merged without rewriting what loopx leaves alone: only the objects and arrays on the
//! way to loopx's own keys are parsed; every other value keeps its original text (a
//! `RawValue`), so big numbers, `1.0`, `1e5` and `\u` escapes come back byte for byte.

use std::fmt;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use super::refuse;
use crate::kernel::Result;

/// A JSON value: parsed where loopx edits it, else the file's own text.
pub enum Node {
    /// The value's text as the file has it.
    Raw(Box<RawValue>),
    /// An object loopx looks into.
    Obj(Obj),
    /// An array loopx looks into.
    Arr(Vec<Node>),
    /// A value loopx writes.
    New(Value),
}

/// An object, its keys in the file's order.
#[derive(Default)]
pub struct Obj(Vec<(String, Node)>);

impl Node {
    /// The value, parsed (for reading only: numbers may lose precision).
    pub fn value(&self) -> Value {
        to_value(self).unwrap_or(Value::Null)
    }
}

/// True when `a` and `b` mean the same JSON, reading no number they share as text: an
/// untouched value is equal to itself however large, one loopx set is compared by value.
fn same(a: &Node, b: &Node) -> bool {
    match (a, b) {
        (Node::Raw(x), Node::Raw(y)) if x.get() == y.get() => true,
        (Node::Obj(x), Node::Obj(y)) => x.same(y),
        (Node::Arr(x), Node::Arr(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Node::Raw(r), n @ (Node::Obj(_) | Node::Arr(_)))
        | (n @ (Node::Obj(_) | Node::Arr(_)), Node::Raw(r)) => {
            expand(r).is_some_and(|e| same(&e, n))
        }
        _ => match (to_value(a), to_value(b)) {
            (Some(x), Some(y)) => x == y,
            _ => false,
        },
    }
}

/// A raw object or array, parsed one level.
fn expand(r: &RawValue) -> Option<Node> {
    if starts(r, OBJECT) {
        serde_json::from_str(r.get()).ok().map(Node::Obj)
    } else if starts(r, ARRAY) {
        let items: Vec<Box<RawValue>> = serde_json::from_str(r.get()).ok()?;
        Some(Node::Arr(items.into_iter().map(Node::Raw).collect()))
    } else {
        None
    }
}

/// The value, when every number in it reads as one.
fn to_value(n: &Node) -> Option<Value> {
    match n {
        Node::Raw(r) => serde_json::from_str(r.get()).ok(),
        Node::New(v) => Some(v.clone()),
        _ => serde_json::from_str(&serde_json::to_string(n).ok()?).ok(),
    }
}

/// How an object's text starts.
const OBJECT: char = '{';
/// How an array's text starts.
const ARRAY: char = '[';

/// True when a raw value's text starts with `open` ([`OBJECT`] or [`ARRAY`]).
fn starts(r: &RawValue, open: char) -> bool {
    r.get().trim_start().starts_with(open)
}

impl Obj {
    /// Parses a file's text: a JSON object, else refused naming `rel` and the line.
    pub fn parse(rel: &str, text: &str) -> Result<Obj> {
        let raw: Box<RawValue> = serde_json::from_str(text)
            .map_err(|e| refuse(rel, Some(e.line().max(1)), format!("is not JSON: {e}")))?;
        if !starts(&raw, OBJECT) {
            return Err(refuse(rel, Some(1), "is not a JSON object"));
        }
        serde_json::from_str(raw.get())
            .map_err(|e| refuse(rel, Some(e.line().max(1)), format!("is not JSON: {e}")))
    }

    /// True when both mean the same JSON object (keys in any order).
    pub fn same(&self, other: &Obj) -> bool {
        self.0.len() == other.0.len()
            && self.0.iter().all(|(k, v)| {
                other
                    .0
                    .iter()
                    .find(|(k2, _)| k2 == k)
                    .is_some_and(|(_, v2)| same(v, v2))
            })
    }

    fn slot(&mut self, key: &str, new: impl FnOnce() -> Node) -> &mut Node {
        let i = match self.0.iter().position(|(k, _)| k == key) {
            Some(i) => i,
            None => {
                self.0.push((key.to_string(), new()));
                self.0.len() - 1
            }
        };
        &mut self.0[i].1
    }

    /// Sets `key` to `v`, in its place when it is there, else at the end.
    pub fn set(&mut self, key: &str, v: Value) {
        *self.slot(key, || Node::Obj(Obj::default())) = Node::New(v);
    }

    /// The object under `key`, made if absent; refused if it is there and not an object.
    pub fn object(&mut self, key: &str, rel: &str) -> Result<&mut Obj> {
        let not = || refuse(rel, None, format!("`{key}` is not a JSON object"));
        let n = self.slot(key, || Node::Obj(Obj::default()));
        if let Node::Raw(r) = n {
            if !starts(r, OBJECT) {
                return Err(not());
            }
            *n = Node::Obj(serde_json::from_str(r.get()).map_err(|_| not())?);
        }
        match n {
            Node::Obj(o) => Ok(o),
            _ => Err(not()),
        }
    }

    /// The array under `key`, made if absent; refused if it is there and not an array.
    pub fn array(&mut self, key: &str, rel: &str) -> Result<&mut Vec<Node>> {
        let not = || refuse(rel, None, format!("`{key}` is not a JSON array"));
        let n = self.slot(key, || Node::Arr(Vec::new()));
        if let Node::Raw(r) = n {
            if !starts(r, ARRAY) {
                return Err(not());
            }
            let items: Vec<Box<RawValue>> = serde_json::from_str(r.get()).map_err(|_| not())?;
            *n = Node::Arr(items.into_iter().map(Node::Raw).collect());
        }
        match n {
            Node::Arr(a) => Ok(a),
            _ => Err(not()),
        }
    }

    /// The text as `setup` writes it: pretty, with a final newline.
    pub fn text(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }
}

impl Serialize for Node {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Node::Raw(r) => r.serialize(s),
            Node::Obj(o) => o.serialize(s),
            Node::Arr(a) => a.serialize(s),
            Node::New(v) => v.serialize(s),
        }
    }
}

impl Serialize for Obj {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for Obj {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Obj, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Obj;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> std::result::Result<Obj, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = a.next_entry::<String, Box<RawValue>>()? {
                    out.push((k, Node::Raw(v)));
                }
                Ok(Obj(out))
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untouched_values_keep_their_text() {
        let text = "{\"n\": 12345678901234567890123, \"f\": [1.0, 1e5], \"s\": \"caf\\u00e9\",\n \"o\": {\"x\": 1.50}}";
        let mut o = Obj::parse("t.json", text).unwrap();
        o.object("o", "t.json").unwrap().set("y", Value::Bool(true));
        let out = o.text();
        for kept in [
            "12345678901234567890123",
            "[1.0, 1e5]",
            "caf\\u00e9",
            "1.50",
        ] {
            assert!(out.contains(kept), "{out}");
        }
        assert!(out.contains("\"y\": true"), "{out}");
        assert!(Obj::parse("t.json", "[1]").is_err());
        assert!(o.array("n", "t.json").is_err());
    }
}
