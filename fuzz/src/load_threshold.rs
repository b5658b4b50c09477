//! `sluice load`'s thresholds (crates/load/src/threshold.rs): any text
//! gives a threshold or an error, never a panic; an error is one line
//! that quotes nothing past the threshold's length limit; a threshold
//! read keeps its text, and reading that text again gives it back.

use load::Threshold;

pub fn check(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    match Threshold::parse(&text) {
        Ok(threshold) => {
            assert_eq!(threshold.text, text.trim());
            let again = Threshold::parse(&threshold.text).expect("its own text reads again");
            assert_eq!(again, threshold);
        }
        Err(error) => {
            assert!(!error.is_empty());
            assert!(error.len() <= 2 * text.len() + 400, "{error}");
            if !text.contains(['\n', '\r']) {
                assert!(!error.contains('\n'), "{error}");
            }
        }
    }
}
