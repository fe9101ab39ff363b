//! Conversions between the JVM's spellings of a class name: the binary
//! name users write and reports show (`java.lang.String`), the internal
//! name of class files (`java/lang/String`) and the type descriptor JVMTI
//! returns as a class signature (`Ljava/lang/String;`).

/// `java/lang/String` → `java.lang.String`.
pub fn binary_name(internal: &str) -> String {
    internal.replace('/', ".")
}

/// `java.lang.String` → `java/lang/String`.
pub fn internal_name(binary: &str) -> String {
    binary.replace('.', "/")
}

/// The internal name of a class type descriptor: `Ljava/lang/String;` →
/// `java/lang/String`; `None` for array and primitive descriptors.
pub fn descriptor_class(descriptor: &str) -> Option<&str> {
    descriptor.strip_prefix('L')?.strip_suffix(';')
}

/// Validates a JVM method descriptor `(params)ret`.
pub fn check_method_descriptor(d: &str) -> Result<(), &'static str> {
    let Some(mut rest) = d.strip_prefix('(') else {
        return Err("must start with `(`");
    };
    loop {
        if let Some(r) = rest.strip_prefix(')') {
            rest = r;
            break;
        }
        if rest.is_empty() {
            return Err("missing `)`");
        }
        rest = field_type(rest)?;
    }
    if rest == "V" {
        return Ok(());
    }
    let tail = field_type(rest)?;
    if !tail.is_empty() {
        return Err("trailing characters after the return type");
    }
    Ok(())
}

/// Checks a field type at the start of `s`; returns the rest.
fn field_type(s: &str) -> Result<&str, &'static str> {
    let mut rest = s;
    let mut dims = 0;
    while let Some(r) = rest.strip_prefix('[') {
        rest = r;
        dims += 1;
        if dims > 255 {
            return Err("array type with more than 255 dimensions");
        }
    }
    let Some(c) = rest.chars().next() else {
        return Err("type expected");
    };
    match c {
        'B' | 'C' | 'D' | 'F' | 'I' | 'J' | 'S' | 'Z' => Ok(&rest[1..]),
        'L' => {
            let Some(end) = rest.find(';') else {
                return Err("class type `L...` without `;`");
            };
            let name = &rest[1..end];
            if name.is_empty() {
                return Err("empty class name in `L;`");
            }
            if name.contains(['.', '[', '(', ')']) {
                return Err("class names in descriptors use `/`, not `.`");
            }
            Ok(&rest[end + 1..])
        }
        _ => Err("unknown type character"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_convert_both_ways() {
        assert_eq!(binary_name("java/util/Map$Entry"), "java.util.Map$Entry");
        assert_eq!(internal_name("java.util.Map$Entry"), "java/util/Map$Entry");
        assert_eq!(
            descriptor_class("Ljava/lang/String;"),
            Some("java/lang/String")
        );
        assert_eq!(descriptor_class("[Ljava/lang/String;"), None);
        assert_eq!(descriptor_class("I"), None);
    }

    #[test]
    fn descriptors() {
        for ok in [
            "()V",
            "(I)V",
            "([[Ljava/lang/Object;JD)[I",
            "(ZBCSFJD)Ljava/util/List;",
        ] {
            assert_eq!(check_method_descriptor(ok), Ok(()), "{ok}");
        }
        for bad in ["", "I", "(", "()", "(L;)V", "()[V", "(I)VV"] {
            assert!(check_method_descriptor(bad).is_err(), "{bad}");
        }
    }
}
