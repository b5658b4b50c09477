//! One response's compressor, whichever the coding: gzip (zlib-rs, the
//! deflate flate2 runs on, used directly for its `mem_level`), Brotli
//! (the `brotli` crate, with an allocator that counts what it holds) and
//! Zstandard (libzstd, whose context says its own size). Each input is
//! flushed as it comes (as Envoy's compressor filter does), so that a
//! streamed response (server-sent events) reaches the client event by
//! event; `finish` ends the stream.

use std::mem::size_of;

use brotli::enc::{
    encode::{BrotliEncoderOperation, BrotliEncoderParameter, BrotliEncoderStateStruct},
    BrotliAlloc,
};
use brotli::{Allocator, SliceWrapper, SliceWrapperMut};
use zstd::zstd_safe::{self, zstd_sys::ZSTD_EndDirective, CParameter};

use crate::config::{BrotliSettings, Encoding, GzipSettings, ZstdSettings};

/// Output room added per call when the output buffer runs out.
const ROOM: usize = 16 * 1024;

/// A compressor for one response body.
pub(crate) enum Encoder {
    Gzip(Box<zlib_rs::Deflate>),
    Br(Box<BrotliEncoderStateStruct<CountingAlloc>>),
    Zstd(zstd_safe::CCtx<'static>),
}

impl std::fmt::Debug for Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Encoder::Gzip(_) => "Encoder::Gzip",
            Encoder::Br(_) => "Encoder::Br",
            Encoder::Zstd(_) => "Encoder::Zstd",
        })
    }
}

/// Why a stream could not be compressed (a library refused its settings
/// or its input: never expected; the response is then cut short).
#[derive(Debug)]
pub(crate) struct EncodeError(pub &'static str);

/// The settings of each coding, as the handler was configured.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Levels {
    pub gzip: GzipSettings,
    pub br: BrotliSettings,
    pub zstd: ZstdSettings,
}

impl Encoder {
    /// A compressor for `encoding`; `size_hint`, the body's length when
    /// the upstream gave it, lets Brotli and Zstandard size their windows
    /// down (never up).
    pub(crate) fn new(
        encoding: Encoding,
        levels: &Levels,
        size_hint: Option<u64>,
    ) -> Result<Self, EncodeError> {
        Ok(match encoding {
            Encoding::Gzip => {
                let gzip = levels.gzip;
                Encoder::Gzip(Box::new(zlib_rs::Deflate::new_with_config(
                    zlib_rs::DeflateConfig {
                        level: i32::from(gzip.level),
                        method: zlib_rs::Method::Deflated,
                        // 16 more: the gzip wrapper (header, CRC-32, length).
                        window_bits: 16 + i32::from(gzip.window_bits),
                        mem_level: i32::from(gzip.memory_level),
                        strategy: zlib_rs::Strategy::Default,
                    },
                )))
            }
            Encoding::Br => {
                let mut state = BrotliEncoderStateStruct::new(CountingAlloc::default());
                let br = levels.br;
                let set = |state: &mut BrotliEncoderStateStruct<_>, p, v| {
                    state
                        .set_parameter(p, v)
                        .then_some(())
                        .ok_or(EncodeError("brotli refused a parameter"))
                };
                set(
                    &mut state,
                    BrotliEncoderParameter::BROTLI_PARAM_QUALITY,
                    u32::from(br.quality),
                )?;
                set(
                    &mut state,
                    BrotliEncoderParameter::BROTLI_PARAM_LGWIN,
                    u32::from(br.window_bits),
                )?;
                if let Some(hint) = size_hint.and_then(|n| u32::try_from(n).ok()) {
                    set(
                        &mut state,
                        BrotliEncoderParameter::BROTLI_PARAM_SIZE_HINT,
                        hint,
                    )?;
                }
                Encoder::Br(Box::new(state))
            }
            Encoding::Zstd => {
                let mut context = zstd_safe::CCtx::create();
                let zstd = levels.zstd;
                let refused = |_| EncodeError("zstd refused a parameter");
                context
                    .set_parameter(CParameter::CompressionLevel(i32::from(zstd.level)))
                    .map_err(refused)?;
                context
                    .set_parameter(CParameter::WindowLog(u32::from(zstd.window_log)))
                    .map_err(refused)?;
                if let Some(size) = size_hint {
                    context.set_pledged_src_size(Some(size)).map_err(refused)?;
                }
                Encoder::Zstd(context)
            }
        })
    }

    /// Compresses `input` into `out` and flushes, so that `out` holds
    /// everything the client needs to decode all input so far.
    pub(crate) fn flush(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeError> {
        self.run(input, out, false)
    }

    /// Compresses the last input and ends the stream (gzip's trailer,
    /// Brotli's last meta-block, Zstandard's epilogue).
    pub(crate) fn finish(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeError> {
        self.run(input, out, true)
    }

    /// The bytes the compressor holds now (gzip's one allocation, Brotli's
    /// counted blocks, Zstandard's context).
    pub(crate) fn memory(&self) -> usize {
        match self {
            Encoder::Gzip(_) => 0,
            Encoder::Br(state) => state.m8.live,
            Encoder::Zstd(context) => context.sizeof(),
        }
    }

    fn run(&mut self, input: &[u8], out: &mut Vec<u8>, end: bool) -> Result<(), EncodeError> {
        match self {
            Encoder::Gzip(deflate) => gzip(deflate, input, out, end),
            Encoder::Br(state) => brotli(state, input, out, end),
            Encoder::Zstd(context) => zstd(context, input, out, end),
        }
    }
}

fn gzip(
    deflate: &mut zlib_rs::Deflate,
    input: &[u8],
    out: &mut Vec<u8>,
    end: bool,
) -> Result<(), EncodeError> {
    let flush = match end {
        true => zlib_rs::DeflateFlush::Finish,
        false => zlib_rs::DeflateFlush::SyncFlush,
    };
    let mut taken = 0;
    loop {
        let start = out.len();
        out.resize(start + ROOM.max(input.len() - taken + 64), 0);
        let (before_in, before_out) = (deflate.total_in(), deflate.total_out());
        let status = deflate
            .compress(&input[taken..], &mut out[start..], flush)
            .map_err(|_| EncodeError("deflate failed"))?;
        taken += usize::try_from(deflate.total_in() - before_in).unwrap_or(0);
        let written = usize::try_from(deflate.total_out() - before_out).unwrap_or(0);
        let room = out.len() - start;
        out.truncate(start + written);
        let done = match status {
            zlib_rs::Status::StreamEnd => true,
            // All input taken and room to spare: the flush is complete.
            _ => taken == input.len() && written < room && !end,
        };
        if done {
            return Ok(());
        }
    }
}

fn brotli(
    state: &mut BrotliEncoderStateStruct<CountingAlloc>,
    input: &[u8],
    out: &mut Vec<u8>,
    end: bool,
) -> Result<(), EncodeError> {
    let op = match end {
        true => BrotliEncoderOperation::BROTLI_OPERATION_FINISH,
        false => BrotliEncoderOperation::BROTLI_OPERATION_FLUSH,
    };
    let (mut available_in, mut in_offset) = (input.len(), 0);
    loop {
        let start = out.len();
        out.resize(start + ROOM, 0);
        let (mut available_out, mut out_offset, mut total) = (ROOM, start, None);
        let ok = state.compress_stream(
            op,
            &mut available_in,
            input,
            &mut in_offset,
            &mut available_out,
            out,
            &mut out_offset,
            &mut total,
            &mut |_, _, _, _| (),
        );
        out.truncate(out_offset);
        if !ok {
            return Err(EncodeError("brotli failed"));
        }
        let done = match end {
            true => state.is_finished(),
            false => available_in == 0 && !state.has_more_output(),
        };
        if done {
            return Ok(());
        }
    }
}

fn zstd(
    context: &mut zstd_safe::CCtx<'static>,
    input: &[u8],
    out: &mut Vec<u8>,
    end: bool,
) -> Result<(), EncodeError> {
    let directive = match end {
        true => ZSTD_EndDirective::ZSTD_e_end,
        false => ZSTD_EndDirective::ZSTD_e_flush,
    };
    let mut input = zstd_safe::InBuffer::around(input);
    loop {
        out.reserve(ROOM);
        let mut output = zstd_safe::OutBuffer::around_pos(out, out.len());
        let left = context
            .compress_stream2(&mut output, &mut input, directive)
            .map_err(|_| EncodeError("zstd failed"))?;
        // Zero: everything given is compressed and flushed (or ended).
        if left == 0 && input.pos() == input.src.len() {
            return Ok(());
        }
    }
}

/// Brotli's allocator: the standard heap, with a count of the bytes it
/// holds, so that the budget sees what each compressor really uses.
#[derive(Debug, Default)]
pub(crate) struct CountingAlloc {
    pub(crate) live: usize,
    pub(crate) peak: usize,
}

/// A block Brotli was given.
#[derive(Debug, Default)]
pub(crate) struct Block<T>(Box<[T]>);

impl<T> SliceWrapper<T> for Block<T> {
    fn slice(&self) -> &[T] {
        &self.0
    }
}

impl<T> SliceWrapperMut<T> for Block<T> {
    fn slice_mut(&mut self) -> &mut [T] {
        &mut self.0
    }
}

impl<T: Clone + Default> Allocator<T> for CountingAlloc {
    type AllocatedMemory = Block<T>;

    fn alloc_cell(&mut self, len: usize) -> Block<T> {
        self.live += len * size_of::<T>();
        self.peak = self.peak.max(self.live);
        Block(vec![T::default(); len].into_boxed_slice())
    }

    fn free_cell(&mut self, data: Block<T>) {
        self.live = self.live.saturating_sub(data.0.len() * size_of::<T>());
    }
}

impl BrotliAlloc for CountingAlloc {}
