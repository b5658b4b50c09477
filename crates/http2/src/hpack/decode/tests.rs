//! RFC 7541 Appendix C, every example: each block decoded on one decoder
//! per sequence (the dynamic table carries from block to block), the
//! fields and the table's size after each as the RFC gives them; and the
//! limits.

use super::*;

fn hex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap_or("00"), 16).unwrap_or(0))
        .collect()
}

fn decoded(decoder: &mut Decoder, block: &str) -> Vec<(String, String)> {
    let mut out = FieldSection::new();
    decoder
        .decode(&hex(block), 1 << 20, &mut out)
        .expect("decodes");
    out.iter()
        .map(|(n, v)| {
            (
                String::from_utf8_lossy(n).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            )
        })
        .collect()
}

fn pairs(fields: &[(&str, &str)]) -> Vec<(String, String)> {
    fields
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

#[test]
fn c2_single_representations() {
    let mut d = Decoder::new(4096);
    let got = decoded(
        &mut d,
        "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572",
    );
    assert_eq!(got, pairs(&[("custom-key", "custom-header")]));
    assert_eq!(d.table_size(), 55);
    let mut d = Decoder::new(4096);
    let got = decoded(&mut d, "040c 2f73 616d 706c 652f 7061 7468");
    assert_eq!(got, pairs(&[(":path", "/sample/path")]));
    assert_eq!(d.table_size(), 0);
    let got = decoded(&mut d, "1008 7061 7373 776f 7264 0673 6563 7265 74");
    assert_eq!(got, pairs(&[("password", "secret")]));
    assert_eq!(decoded(&mut d, "82"), pairs(&[(":method", "GET")]));
    assert_eq!(d.table_size(), 0);
}

const REQ1: [(&str, &str); 4] = [
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    (":authority", "www.example.com"),
];

fn requests(blocks: [&str; 3]) {
    let mut d = Decoder::new(4096);
    assert_eq!(decoded(&mut d, blocks[0]), pairs(&REQ1));
    assert_eq!(d.table_size(), 57);
    let second = [&REQ1[..], &[("cache-control", "no-cache")]].concat();
    assert_eq!(decoded(&mut d, blocks[1]), pairs(&second));
    assert_eq!(d.table_size(), 110);
    let third = [
        (":method", "GET"),
        (":scheme", "https"),
        (":path", "/index.html"),
        (":authority", "www.example.com"),
        ("custom-key", "custom-value"),
    ];
    assert_eq!(decoded(&mut d, blocks[2]), pairs(&third));
    assert_eq!(d.table_size(), 164);
}

#[test]
fn c3_requests_without_huffman() {
    requests([
        "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
        "8286 84be 5808 6e6f 2d63 6163 6865",
        "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
    ]);
}

#[test]
fn c4_requests_with_huffman() {
    requests([
        "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
        "8286 84be 5886 a8eb 1064 9cbf",
        "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
    ]);
}

fn responses(blocks: [&str; 3]) {
    // The examples' peer was told a table of 256 bytes.
    let mut d = Decoder::new(256);
    let first = [
        (":status", "302"),
        ("cache-control", "private"),
        ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
        ("location", "https://www.example.com"),
    ];
    assert_eq!(decoded(&mut d, blocks[0]), pairs(&first));
    assert_eq!(d.table_size(), 222);
    let second = [(":status", "307"), first[1], first[2], first[3]];
    assert_eq!(decoded(&mut d, blocks[1]), pairs(&second));
    assert_eq!(d.table_size(), 222);
    let third = [
        (":status", "200"),
        first[1],
        ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
        first[3],
        ("content-encoding", "gzip"),
        (
            "set-cookie",
            "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
        ),
    ];
    assert_eq!(decoded(&mut d, blocks[2]), pairs(&third));
    assert_eq!(d.table_size(), 215);
}

#[test]
fn c5_responses_without_huffman() {
    responses([
        "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
        "4803 3330 37c1 c0bf",
        "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d 54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e 3d31",
    ]);
}

#[test]
fn c6_responses_with_huffman() {
    responses([
        "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        "4883 640e ff c1 c0 bf",
        "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
    ]);
}

#[test]
fn bad_indexes_and_size_updates_are_compression_errors() {
    let mut out = FieldSection::new();
    let mut d = Decoder::new(4096);
    assert!(
        matches!(
            d.decode(&[0x80], 4096, &mut out),
            Err(DecodeError::Compression(_))
        ),
        "index 0"
    );
    assert!(
        matches!(
            d.decode(&[0xbe], 4096, &mut out),
            Err(DecodeError::Compression(_))
        ),
        "62, empty table"
    );
    // A size update past the advertised 4096, and one after a field.
    assert!(matches!(
        d.decode(&[0x3f, 0xe2, 0x1f], 4096, &mut out),
        Err(DecodeError::Compression(_))
    ));
    assert!(matches!(
        d.decode(&[0x82, 0x20], 4096, &mut out),
        Err(DecodeError::Compression(_))
    ));
    assert!(
        d.decode(&[0x20, 0x3f, 0xe1, 0x1f, 0x82], 4096, &mut out)
            .is_ok(),
        "0 then 4096, then a field"
    );
    assert!(
        matches!(
            d.decode(&[0x40, 0x05, b'a'], 4096, &mut out),
            Err(DecodeError::Compression(_))
        ),
        "truncated"
    );
}

#[test]
fn a_list_past_the_limit_is_too_large_and_the_table_keeps_step() {
    let mut d = Decoder::new(4096);
    // custom-key: custom-header, indexed (55 bytes), then :method GET.
    let block = hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572 82");
    let mut out = FieldSection::new();
    assert_eq!(d.decode(&block, 50, &mut out), Err(DecodeError::TooLarge));
    assert!(out.is_empty());
    // The entry was kept: index 62 names it in the next block.
    assert_eq!(
        decoded(&mut d, "be"),
        pairs(&[("custom-key", "custom-header")])
    );
    // An HPACK bomb: one large entry named 4,000 times in 4,000 bytes.
    let mut d = Decoder::new(4096);
    let mut bomb = vec![0x40, 0x01, b'x', 0x7f, 0xa1, 0x1e];
    bomb.extend(std::iter::repeat_n(b'y', 4000));
    bomb.extend(std::iter::repeat_n(0xbe, 4000));
    let mut out = FieldSection::new();
    assert_eq!(
        d.decode(&bomb, 16_384, &mut out),
        Err(DecodeError::TooLarge)
    );
    assert!(out.is_empty());
}
