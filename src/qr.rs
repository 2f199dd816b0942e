//! QR codes as text: a URL drawn in half blocks, for the faces that show one in a terminal.

use qrcodegen::{QrCode, QrCodeEcc};

/// The modules of quiet zone drawn around the code.
const QUIET: i32 = 2;

/// A QR code of `text` in half blocks (two modules a character, light as `█`, dark as a space),
/// with its quiet zone, one string a row; empty when `text` does not fit a QR code.
pub fn half_blocks(text: &str) -> Vec<String> {
    let Ok(q) = QrCode::encode_text(text, QrCodeEcc::Low) else {
        return Vec::new();
    };
    let n = q.size();
    let dark = |x: i32, y: i32| q.get_module(x, y);
    (-QUIET..n + QUIET)
        .step_by(2)
        .map(|y| {
            (-QUIET..n + QUIET)
                .map(|x| match (dark(x, y), dark(x, y + 1)) {
                    (true, true) => ' ',
                    (true, false) => '▄',
                    (false, true) => '▀',
                    (false, false) => '█',
                })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pairing_url_fits_19_rows_of_37() {
        let url = format!("http://127.0.0.1:8080/pair#t={}", "0f".repeat(16));
        let rows = half_blocks(&url);
        assert_eq!(rows.len(), 19);
        assert!(rows.iter().all(|r| r.chars().count() == 37), "{rows:?}");
        // The quiet zone: the first row and the first column are light.
        assert!(rows[0].chars().all(|c| c == '█'));
        assert!(rows.iter().all(|r| r.starts_with('█')));
    }

    #[test]
    fn each_half_block_is_the_code_s_two_modules() {
        let url = format!("http://127.0.0.1:8080/pair#t={}", "a7".repeat(16));
        let q = QrCode::encode_text(&url, QrCodeEcc::Low).unwrap();
        let rows: Vec<Vec<char>> = half_blocks(&url)
            .iter()
            .map(|r| r.chars().collect())
            .collect();
        for y in -QUIET..q.size() + QUIET {
            for x in -QUIET..q.size() + QUIET {
                let c = rows[((y + QUIET) / 2) as usize][(x + QUIET) as usize];
                // The upper half of a cell is an even row (counted from the quiet zone's top).
                let upper = (y + QUIET) % 2 == 0;
                let light = match c {
                    '█' => true,
                    ' ' => false,
                    '▀' => upper,
                    '▄' => !upper,
                    other => panic!("{other:?}"),
                };
                assert_eq!(light, !q.get_module(x, y), "module ({x}, {y})");
            }
        }
    }

    #[test]
    fn text_too_long_for_a_code_gives_nothing() {
        assert!(half_blocks(&"x".repeat(5000)).is_empty());
    }
}
