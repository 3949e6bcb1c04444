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

/// Choices as a sentence names them: "a, b or c" (a help text's or a refusal's list of what an
/// option takes, from the registry the code uses).
pub fn or_list(items: &[&str]) -> String {
    match items.split_last() {
        None => String::new(),
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

/// Rewrite JSON text in place so that no string in it decodes to a control character. A `\uXXXX`
/// escape of one becomes the escape of its Unicode control picture (`\u001b` → `\u241b`, shown
/// as ␛; a C1 control becomes U+FFFD), a short escape (`\n`, `\t`, `\r`, `\b`, `\f`) two
/// spaces: the same length, so the file is rewritten where it lies. Raw C0 controls cannot occur
/// inside a JSON string (the parser refuses them); raw DEL and C1 controls can (JSON only
/// requires escaping C0): DEL becomes `?`, a C1 control (UTF-8 `C2 80`..`C2 9F`) `¤` (`C2 A4`).
/// After this no string read from the file carries a control character, whichever output prints
/// it. No parse, no allocation.
pub fn defang_json(bytes: &mut [u8]) {
    let mut i = 0;
    while let Some(off) = bytes[i..].iter().position(|b| matches!(*b, b'\\' | 0x7f | 0xc2)) {
        let at = i + off;
        i = at + 1;
        match bytes[at] {
            0x7f => bytes[at] = b'?',
            // In valid UTF-8, C2 is always the first byte of a two-byte character.
            0xc2 => {
                if let Some(b) = bytes.get_mut(at + 1).filter(|b| (0x80..=0x9f).contains(&**b)) {
                    *b = 0xa4;
                }
            }
            _ => {
                match bytes.get(at + 1) {
                    Some(b'b' | b'f' | b'n' | b'r' | b't') => bytes[at..at + 2].copy_from_slice(b"  "),
                    Some(b'u') if at + 6 <= bytes.len() => {
                        let code = std::str::from_utf8(&bytes[at + 2..at + 6])
                            .ok()
                            .and_then(|h| u32::from_str_radix(h, 16).ok());
                        let picture = match code {
                            Some(c @ 0..=0x1f) => Some(0x2400 + c),
                            Some(0x7f) => Some(0x2421),
                            Some(0x80..=0x9f) => Some(0xfffd),
                            _ => None,
                        };
                        if let Some(p) = picture {
                            bytes[at + 2..at + 6].copy_from_slice(format!("{p:04x}").as_bytes());
                        }
                    }
                    _ => {}
                }
                // Past the escaped character: an escaped backslash is not the start of another escape.
                i = (at + 2).min(bytes.len());
            }
        }
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
        let mut text =
            br#"{"a": "x\u001b[31my\u0000", "b": "tab\there \\u001b kept", "c": "\u00e9\n\u009b\u007f"}"#.to_vec();
        let len = text.len();
        defang_json(&mut text);
        assert_eq!(text.len(), len);
        let v: serde_json::Value = serde_json::from_slice(&text).unwrap();
        assert_eq!(v["a"], "x\u{241b}[31my\u{2400}");
        assert_eq!(v["b"], "tab  here \\u001b kept", "an escaped backslash stays text");
        assert_eq!(v["c"], "é  \u{fffd}\u{2421}");
        let mut raw = "{\"a\": \"c1 \u{9b}31m del \u{7f} é\"}".as_bytes().to_vec();
        defang_json(&mut raw);
        assert_eq!(String::from_utf8(raw).unwrap(), "{\"a\": \"c1 ¤31m del ? é\"}");
        let mut plain = br#"{"a": "\u00e9 \\ \""}"#.to_vec();
        let before = plain.clone();
        defang_json(&mut plain);
        assert_eq!(plain, before);
    }
}
