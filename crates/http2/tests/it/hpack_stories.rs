//! The hpack-test-case stories (tests/data/README.md): every header block
//! that four independent encoders produced, decoded by sluice's decoder
//! in order on one decoder per story, gives the fields the story lists;
//! and every story's fields, encoded by sluice's encoder, decode to the
//! same fields with sluice's decoder and with the `h2` crate's.

use std::{io::Read, ops::ControlFlow};

use bytes::BytesMut;
use http2::{head::FieldSection, hpack};

/// A field's name and value.
type Field = (Vec<u8>, Vec<u8>);

struct Story {
    name: String,
    /// Each block: its wire bytes and the fields it decodes to.
    blocks: Vec<(Vec<u8>, Vec<Field>)>,
}

fn stories() -> Vec<Story> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/hpack-stories.txt.gz"
    );
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let mut stories: Vec<Story> = Vec::new();
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("story ") {
            stories.push(Story {
                name: name.to_string(),
                blocks: Vec::new(),
            });
        } else if line.starts_with("size ") {
            // The encoder's table size for the next block: its wire
            // carries the size update that says so.
        } else if let Some(wire) = line.strip_prefix("wire ") {
            let bytes = (0..wire.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&wire[i..i + 2], 16).unwrap())
                .collect();
            stories.last_mut().unwrap().blocks.push((bytes, Vec::new()));
        } else {
            let (name, value) = line.split_once('\t').unwrap();
            let block = stories.last_mut().unwrap().blocks.last_mut().unwrap();
            block
                .1
                .push((name.as_bytes().to_vec(), value.as_bytes().to_vec()));
        }
    }
    stories
}

fn fields(section: &FieldSection) -> Vec<Field> {
    section
        .iter()
        .map(|(n, v)| (n.to_vec(), v.to_vec()))
        .collect()
}

#[test]
fn every_story_decodes_to_its_fields() {
    let stories = stories();
    assert_eq!(stories.len(), 127);
    let mut blocks = 0;
    for story in &stories {
        let mut decoder = hpack::Decoder::new(4096);
        for (i, (wire, expected)) in story.blocks.iter().enumerate() {
            let mut out = FieldSection::new();
            decoder
                .decode(wire, 1 << 20, &mut out)
                .unwrap_or_else(|err| panic!("{} block {i}: {err:?}", story.name));
            assert_eq!(&fields(&out), expected, "{} block {i}", story.name);
            blocks += 1;
        }
    }
    assert_eq!(blocks, 13_419);
}

/// The `h2` crate's decoder, as an independent reader.
fn h2_decode(decoder: &mut h2::hpack::Decoder, block: &[u8]) -> Vec<Field> {
    let mut out = Vec::new();
    let mut buf = BytesMut::from(block);
    decoder
        .decode(&mut std::io::Cursor::new(&mut buf), |header| {
            let (name, value) = match header {
                h2::hpack::Header::Field { name, value } => {
                    (name.as_str().as_bytes().to_vec(), value.as_bytes().to_vec())
                }
                h2::hpack::Header::Authority(v) => (b":authority".to_vec(), v.as_bytes().to_vec()),
                h2::hpack::Header::Method(m) => {
                    (b":method".to_vec(), m.as_str().as_bytes().to_vec())
                }
                h2::hpack::Header::Scheme(v) => (b":scheme".to_vec(), v.as_bytes().to_vec()),
                h2::hpack::Header::Path(v) => (b":path".to_vec(), v.as_bytes().to_vec()),
                h2::hpack::Header::Protocol(v) => {
                    (b":protocol".to_vec(), v.as_str().as_bytes().to_vec())
                }
                h2::hpack::Header::Status(s) => {
                    (b":status".to_vec(), s.as_str().as_bytes().to_vec())
                }
            };
            out.push((name, value));
            ControlFlow::Continue(())
        })
        .unwrap();
    out
}

#[test]
fn every_storys_fields_encoded_by_sluice_decode_the_same_in_both_decoders() {
    for story in stories() {
        let mut ours = hpack::Decoder::new(4096);
        let mut theirs = h2::hpack::Decoder::new(4096);
        for huffman in [false, true] {
            for (i, (_, expected)) in story.blocks.iter().enumerate() {
                let mut block = Vec::new();
                for (name, value) in expected {
                    hpack::encode_field(name, value, huffman, &mut block);
                }
                let mut out = FieldSection::new();
                ours.decode(&block, 1 << 20, &mut out).unwrap();
                assert_eq!(&fields(&out), expected, "{} block {i}", story.name);
                assert_eq!(
                    &h2_decode(&mut theirs, &block),
                    expected,
                    "h2: {} block {i}",
                    story.name
                );
            }
        }
    }
}
