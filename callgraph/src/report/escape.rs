//! Escaping for human-readable output. Class, method, thread and jar names,
//! and the text the agent or the JVM sends, come from the profiled program:
//! a name holding terminal control sequences would rewrite the user's
//! terminal when printed raw, and one holding Unicode bidirectional
//! controls would make the terminal show its text in another order than
//! it has (a method that reads as another one). Every text report, `sprig list`, the status
//! and warning lines and the error line print such text through
//! [`escape`]. (JSON output escapes control characters itself.)

use std::borrow::Cow;

/// `text` with every control character written out: `\t`, `\n` and `\r`
/// as such, the other C0 characters and DEL as `\xHH`, the C1 characters
/// (U+0080 to U+009F, which some terminals read as ESC sequences) as
/// `\u{HH}`, and the Unicode bidirectional controls (see [`is_bidi`]) as
/// `\u{HHHH}`. An escape sequence loses its ESC and prints as plain text;
/// a bidirectional override or isolate shows where it is instead of
/// reordering what follows. Text without such characters is returned as is.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| c.is_control() || is_bidi(c)) {
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
            c if is_bidi(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// The Unicode bidirectional formatting characters (Unicode's UAX #9): the
/// embeddings and overrides U+202A to U+202E, the isolates U+2066 to
/// U+2069, and the implicit marks LRM (U+200E), RLM (U+200F) and ALM
/// (U+061C). Letters of right-to-left scripts are not among them.
fn is_bidi(c: char) -> bool {
    matches!(
        c,
        '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
    )
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

    /// The Unicode bidirectional controls: embeddings, overrides and
    /// isolates, and the marks (LRM, RLM, ALM).
    const BIDI: &[char] = &[
        '\u{061c}', '\u{200e}', '\u{200f}', '\u{202a}', '\u{202b}', '\u{202c}', '\u{202d}',
        '\u{202e}', '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}',
    ];

    #[test]
    fn bidi_controls_are_written_out() {
        // A method name that a terminal would show reordered ("Trojan
        // Source"): RLO ... PDF makes `evil` read as `live`.
        assert_eq!(
            escape("a.B::\u{202e}live\u{202c}::x"),
            "a.B::\\u{202e}live\\u{202c}::x"
        );
        assert_eq!(escape("\u{2066}\u{2069}"), "\\u{2066}\\u{2069}");
        assert_eq!(
            escape("\u{200e}\u{200f}\u{61c}"),
            "\\u{200e}\\u{200f}\\u{61c}"
        );
        for &c in BIDI {
            let e = escape(&c.to_string()).into_owned();
            assert_eq!(e, format!("\\u{{{:x}}}", c as u32));
        }
        // Other format characters and right-to-left letters stay as they are.
        assert!(matches!(escape("\u{200d}\u{5d0}\u{627}"), Cow::Borrowed(_)));
        for c in (0..0x110000).filter_map(char::from_u32) {
            let s = c.to_string();
            let e = escape(&s);
            assert!(!e.chars().any(|c| BIDI.contains(&c)), "{c:?} -> {e:?}");
        }
    }
}
