//! Escaping for human-readable output. Class, method, thread and jar names,
//! and the text the agent or the JVM sends, come from the profiled program:
//! a name holding terminal control sequences would rewrite the user's
//! terminal when printed raw. Every text report, `sprig list`, the status
//! and warning lines and the error line print such text through
//! [`escape`]. (JSON output escapes control characters itself.)

use std::borrow::Cow;

/// `text` with every control character written out: `\t`, `\n` and `\r`
/// as such, the other C0 characters and DEL as `\xHH`, the C1 characters
/// (U+0080 to U+009F, which some terminals read as ESC sequences) as
/// `\u{HH}`. An escape sequence loses its ESC and prints as plain text.
/// Text without control characters is returned as is.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\0'..='\u{1f}' | '\u{7f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
            '\u{80}'..='\u{9f}' => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_written_out() {
        assert!(matches!(escape("com.acme.Ünïcode$1"), Cow::Borrowed(_)));
        assert_eq!(
            escape("a\u{1b}[2J\u{1b}]0;x\u{7}b"),
            "a\\x1b[2J\\x1b]0;x\\x07b"
        );
        assert_eq!(escape("\t\n\r\0\u{7f}"), "\\t\\n\\r\\x00\\x7f");
        assert_eq!(escape("\u{9b}31m\u{85}\u{a0}"), "\\u{9b}31m\\u{85}\u{a0}");
        for c in (0..0x110000).filter_map(char::from_u32) {
            let s = c.to_string();
            let e = escape(&s);
            assert!(!e.chars().any(char::is_control), "{c:?} -> {e:?}");
        }
    }
}
