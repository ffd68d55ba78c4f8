use super::*;

#[test]
fn child_escapes_keys_as_jsonptr_does() {
    for key in ["plain", "a/b", "~", "a~1/b", "//~~", "é/ü~", ""] {
        let expected = format!("/spec/{}/3", jsonptr::Token::new(key).encoded());
        assert_eq!(child("/spec", [key.into(), 3.into()]), expected, "{key:?}");
    }
}
