//! Bytes → the CLI's document reader. Never panics; every document read
//! renders as YAML that reads back as the same value (what `mutate -o yaml`
//! prints must survive the next tool in the pipe).
#![no_main]

use kserve_injector::reader::{documents, to_yaml};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut input = data;
    let Ok(docs) = documents(&mut input) else {
        return;
    };
    for doc in docs {
        let Ok(doc) = doc else {
            return;
        };
        let text = to_yaml(&doc).expect("a JSON value renders as YAML");
        let mut again = text.as_bytes();
        let back: Vec<_> = documents(&mut again)
            .expect("readable")
            .collect::<Result<_, _>>()
            .unwrap_or_else(|e| panic!("rendered YAML does not read back: {e}\n{text}"));
        let want: Vec<_> = Some(doc).into_iter().filter(|d| !d.is_null()).collect();
        assert_eq!(back, want, "rendered as\n{text}");
    }
});
