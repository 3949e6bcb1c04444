//! Text that came from outside (a file, an argument) made safe to print on one line: control
//! characters escaped (a NUL or an ESC from a saved run must not reach the terminal raw: ESC
//! starts terminal control sequences) and overlong words clipped (an error line echoes what it
//! refuses, and a 5,000-character argument should not become a 10 KB line).

use std::borrow::Cow;

/// Words longer than this are clipped when a message echoes them.
pub const MAX_WORD: usize = 200;
/// What is kept of a clipped word: its start.
const KEEP: usize = 64;

/// `s` with every control character (C0, DEL, C1) written as an escape: `\x1b`, `\x00`, `\u{9b}`.
pub fn escape_controls(s: &str) -> Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            c if (c as u32) < 0x80 && c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// What is kept of a clipped word's end (its closing quote and colon).
const KEEP_END: usize = 4;

/// `s` shortened to its start, its length and its end when it is longer than `max` characters:
/// `'AAAA…(5002 characters)…AA':`.
pub fn clip(s: &str, max: usize) -> Cow<'_, str> {
    let n = s.chars().count();
    if n <= max {
        return Cow::Borrowed(s);
    }
    let head: String = s.chars().take(KEEP.min(max)).collect();
    let tail: String = s.chars().skip(n - KEEP_END).collect();
    Cow::Owned(format!("{head}…({n} characters)…{tail}"))
}

/// A message line made safe to print: controls escaped, each word longer than `MAX_WORD`
/// characters clipped (`clip`), and no line breaks.
pub fn one_line(s: &str) -> String {
    let s = s.replace(['\n', '\r'], " ");
    let s = escape_controls(&s);
    if !s.split(' ').any(|w| w.chars().count() > MAX_WORD) {
        return s.into_owned();
    }
    s.split(' ').map(|w| clip(w, MAX_WORD)).collect::<Vec<_>>().join(" ")
}

/// Rewrite JSON text so that no string in it decodes to a control character: each escape that
/// would (`\u001b`, `\u0000`, `\n`, `\t`, ...) becomes the visible text of that escape (`\\u001b`).
/// Raw control characters cannot occur inside a JSON string (the parser refuses them), so after
/// this no string read from the file carries one, whichever output prints it. One pass, no parse.
pub fn defang_json(bytes: &[u8]) -> Cow<'_, [u8]> {
    let is_control_escape = |rest: &[u8]| -> bool {
        match rest.first() {
            Some(b'b' | b'f' | b'n' | b'r' | b't') => true,
            Some(b'u') if rest.len() >= 5 => std::str::from_utf8(&rest[1..5])
                .ok()
                .and_then(|h| u32::from_str_radix(h, 16).ok())
                .and_then(char::from_u32)
                .is_some_and(char::is_control),
            _ => false,
        }
    };
    let mut out: Option<Vec<u8>> = None;
    // bytes[..copied] are in `out` already.
    let mut copied = 0;
    let mut i = 0;
    while let Some(off) = bytes[i..].iter().position(|b| *b == b'\\') {
        let at = i + off;
        if at + 1 >= bytes.len() {
            break;
        }
        if is_control_escape(&bytes[at + 1..]) {
            let o = out.get_or_insert_with(|| Vec::with_capacity(bytes.len() + 16));
            o.extend_from_slice(&bytes[copied..at]);
            // A second backslash: the escape now reads as its own text.
            o.extend_from_slice(b"\\\\");
            copied = at + 1;
        }
        // Past the escaped character: an escaped backslash is not the start of another escape.
        i = at + 2;
    }
    match out {
        Some(mut o) => {
            o.extend_from_slice(&bytes[copied..]);
            Cow::Owned(o)
        }
        None => Cow::Borrowed(bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_escaped_and_long_words_clipped() {
        assert_eq!(escape_controls("plain µs"), "plain µs");
        assert_eq!(escape_controls("a\u{1b}[2Jb\0c\u{9b}"), "a\\x1b[2Jb\\x00c\\u{9b}");
        let long = "A".repeat(5000);
        let line = one_line(&format!("invalid size '{long}': use bytes"));
        assert!(line.len() < 200 && line.contains("(5003 characters)") && line.ends_with("A': use bytes"), "{line}");
        assert_eq!(one_line("two\nlines"), "two lines");
    }

    #[test]
    fn json_strings_never_decode_to_a_control() {
        let text = br#"{"a": "x\u001b[31my\u0000", "b": "tab\there \\u001b kept", "c": "\u00e9\n"}"#;
        let v: serde_json::Value = serde_json::from_slice(&defang_json(text)).unwrap();
        assert_eq!(v["a"], "x\\u001b[31my\\u0000");
        assert_eq!(v["b"], "tab\\there \\u001b kept", "an escaped backslash stays text");
        assert_eq!(v["c"], "é\\n");
        assert!(matches!(defang_json(br#"{"a": "\u00e9 \\ \""}"#), Cow::Borrowed(_)));
    }
}
