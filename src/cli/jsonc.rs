//! Where things are in a JSON settings file, so that an edit changes only the bytes it must:
//! a parser that keeps the byte span of every value, and reads what settings files carry
//! beyond JSON (`//` and `/* */` comments, trailing commas).

/// A value and where it is in the text.
#[derive(Debug)]
pub(crate) struct Node {
    /// The value's bytes: `start..end` of the text.
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) kind: Kind,
}

#[derive(Debug)]
pub(crate) enum Kind {
    /// The members, in the text's order: each key (unescaped) and its value.
    Object(Vec<(String, Node)>),
    Array(Vec<Node>),
    String(String),
    /// A number, `true`, `false` or `null`.
    Other,
}

impl Node {
    /// The value of member `key` of an object.
    pub(crate) fn get(&self, key: &str) -> Option<&Node> {
        match &self.kind {
            Kind::Object(members) => members.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The value of member `key` of an object (in `text`, the text it was parsed from); a key
    /// given twice is refused, since readers differ on which one counts (JavaScript's
    /// `JSON.parse` takes the last, others the first). Linear in the object's members.
    pub(crate) fn unique(&self, text: &str, key: &str) -> Result<Option<&Node>, String> {
        let Kind::Object(members) = &self.kind else {
            return Ok(None);
        };
        let mut found = members.iter().filter(|(k, _)| k == key).map(|(_, v)| v);
        let first = found.next();
        match (first, found.next()) {
            (Some(first), Some(again)) => Err(format!(
                "\"{key}\" is given twice (lines {} and {}): which one the agent reads is unclear",
                line_of(text, first.start),
                line_of(text, again.start)
            )),
            _ => Ok(first),
        }
    }

    /// The string, if it is one.
    pub(crate) fn as_str(&self) -> Option<&str> {
        match &self.kind {
            Kind::String(s) => Some(s),
            _ => None,
        }
    }

    /// The items of an array (none for anything else).
    pub(crate) fn items(&self) -> &[Node] {
        match &self.kind {
            Kind::Array(items) => items,
            _ => &[],
        }
    }

    /// The values in an object or array, in order.
    pub(crate) fn children(&self) -> Vec<&Node> {
        match &self.kind {
            Kind::Object(members) => members.iter().map(|(_, v)| v).collect(),
            Kind::Array(items) => items.iter().collect(),
            _ => Vec::new(),
        }
    }
}

/// Parse `text` (one value, comments and whitespace around it). Linear in the text's length.
pub(crate) fn parse(text: &str) -> Result<Node, String> {
    let mut parser = Parser { text, at: 0 };
    let node = parser.value(0)?;
    parser.skip_blank()?;
    if parser.at != text.len() {
        return Err(parser.error("text after the value"));
    }
    Ok(node)
}

/// Where blank text (whitespace and comments) starting at `at` ends.
pub(crate) fn skip_blank(text: &str, at: usize) -> usize {
    let mut parser = Parser { text, at };
    match parser.skip_blank() {
        Ok(()) => parser.at,
        Err(_) => text.len(),
    }
}

/// The line (from 1) that byte `at` of `text` is on.
fn line_of(text: &str, at: usize) -> usize {
    text.as_bytes()[..at.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Deeper nesting is refused (a settings file is a few levels deep).
const MAX_DEPTH: usize = 256;

struct Parser<'a> {
    text: &'a str,
    at: usize,
}

impl Parser<'_> {
    fn error(&self, what: &str) -> String {
        format!("line {}: {what}", line_of(self.text, self.at))
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    fn skip_blank(&mut self) -> Result<(), String> {
        loop {
            let rest = &self.text[self.at..];
            let trimmed = rest.trim_start_matches([' ', '\t', '\n', '\r']);
            self.at += rest.len() - trimmed.len();
            if trimmed.starts_with("//") {
                self.at += trimmed.find('\n').unwrap_or(trimmed.len());
            } else if let Some(comment) = trimmed.strip_prefix("/*") {
                let end = comment
                    .find("*/")
                    .ok_or_else(|| self.error("a comment that does not end"))?;
                self.at += end + 4;
            } else {
                return Ok(());
            }
        }
    }

    fn value(&mut self, depth: usize) -> Result<Node, String> {
        if depth > MAX_DEPTH {
            return Err(self.error("nested too deeply"));
        }
        self.skip_blank()?;
        let start = self.at;
        let kind = match self.peek() {
            Some(b'{') => self.container(b'}', depth, true)?,
            Some(b'[') => self.container(b']', depth, false)?,
            Some(b'"') => Kind::String(self.string()?),
            Some(_) => {
                let rest = &self.text[self.at..];
                let len = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || "+-.".contains(c)))
                    .unwrap_or(rest.len());
                if len == 0 {
                    return Err(self.error("a value was expected"));
                }
                self.at += len;
                Kind::Other
            }
            None => return Err(self.error("the text ends where a value was expected")),
        };
        Ok(Node {
            start,
            end: self.at,
            kind,
        })
    }

    /// An object or an array, from its opening bracket to `close`; a trailing comma is read.
    fn container(&mut self, close: u8, depth: usize, object: bool) -> Result<Kind, String> {
        self.at += 1;
        let (mut members, mut items) = (Vec::new(), Vec::new());
        loop {
            self.skip_blank()?;
            if self.peek() == Some(close) {
                self.at += 1;
                break;
            }
            if object {
                if self.peek() != Some(b'"') {
                    return Err(self.error("a key was expected"));
                }
                let key = self.string()?;
                self.skip_blank()?;
                if self.peek() != Some(b':') {
                    return Err(self.error("':' was expected"));
                }
                self.at += 1;
                members.push((key, self.value(depth + 1)?));
            } else {
                items.push(self.value(depth + 1)?);
            }
            self.skip_blank()?;
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(c) if c == close => {}
                _ => return Err(self.error("',' or a closing bracket was expected")),
            }
        }
        Ok(match object {
            true => Kind::Object(members),
            false => Kind::Array(items),
        })
    }

    /// A string literal, unescaped (by serde_json).
    fn string(&mut self) -> Result<String, String> {
        let start = self.at;
        self.at += 1;
        loop {
            match self.peek() {
                Some(b'"') => break,
                Some(b'\\') => self.at += 2,
                Some(_) => self.at += 1,
                None => return Err(self.error("a string that does not end")),
            }
        }
        self.at += 1;
        serde_json::from_str(&self.text[start..self.at]).map_err(|err| self.error(&err.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_comments_and_trailing_commas() {
        let text =
            "// settings\n{\n  \"a\": [1, 2,], /* note */\n  \"b\": {\"c\": \"d\\\"\"},\n}\n";
        let root = parse(text).unwrap();
        let a = root.get("a").unwrap();
        assert_eq!(&text[a.start..a.end], "[1, 2,]");
        assert_eq!(a.items().len(), 2);
        let c = root.get("b").unwrap().get("c").unwrap();
        assert_eq!(c.as_str(), Some("d\""));
        assert!(parse("{\"a\": 1").is_err());
        assert!(parse("{} x").is_err());
        assert!(parse("/* open").is_err());
    }
}
