//! What the proxy and a sandbox worker say over the worker's pipes: one
//! frame each way per run, a 4-byte big-endian length then that many bytes
//! of JSON.
//!
//! The types derive their encoding from the runtime's own (`Limits`,
//! `ToolDocs`, `CallRecord`, `RunOutcome`), so a field added there travels
//! without a change here.

use std::io::{Read, Write};

use crate::runtime::sandbox::{CallRecord, RunOutcome};
use crate::runtime::Limits;
use crate::sdk::ToolDocs;

/// The largest frame either side accepts: a run's inputs are bounded by the
/// request body and its reply by the output caps, both far below this, so a
/// larger length means a broken or hostile peer.
pub(crate) const MAX_FRAME: usize = 256 << 20;

/// Bumped when a frame changes shape: a worker from another build of the
/// binary is refused at its hello, not misread.
pub(crate) const VERSION: u32 = 1;

/// The worker's first frame, once it is confined and before it reads a run.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Hello {
    pub(crate) version: u32,
    /// What the kernel enforces on the worker, for the start-up log line.
    pub(crate) confinement: String,
    /// Why the worker could not confine itself; it exits after saying so.
    pub(crate) error: Option<String>,
}

/// A run's inputs, as the proxy sends them.
#[derive(serde::Serialize)]
pub(crate) struct Request<'a> {
    pub(crate) code: &'a str,
    pub(crate) tools: &'a [String],
    pub(crate) freeform: &'a [String],
    pub(crate) docs: &'a ToolDocs,
    pub(crate) replay: &'a [CallRecord],
    pub(crate) seed: u64,
    pub(crate) now_ms: u64,
    pub(crate) limits: &'a Limits,
}

/// A run's inputs, as the worker reads them.
#[derive(serde::Deserialize)]
pub(crate) struct OwnedRequest {
    pub(crate) code: String,
    pub(crate) tools: Vec<String>,
    pub(crate) freeform: Vec<String>,
    pub(crate) docs: ToolDocs,
    pub(crate) replay: Vec<CallRecord>,
    pub(crate) seed: u64,
    pub(crate) now_ms: u64,
    pub(crate) limits: Limits,
}

/// A run's outcome, as the worker answers.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Reply {
    pub(crate) outcome: RunOutcome,
    /// The worker used most of its CPU rlimit: the proxy replaces it rather
    /// than let the kernel kill it in a later run.
    pub(crate) retire: bool,
}

/// `value` as one frame.
pub(crate) fn encode<T: serde::Serialize>(value: &T) -> Result<Vec<u8>, String> {
    let mut frame = vec![0u8; 4];
    serde_json::to_writer(&mut frame, value).map_err(|e| e.to_string())?;
    let len = frame.len() - 4;
    if len > MAX_FRAME {
        return Err(format!(
            "a frame of {len} bytes is over the {MAX_FRAME}-byte limit"
        ));
    }
    frame[..4].copy_from_slice(&(len as u32).to_be_bytes());
    Ok(frame)
}

/// The length a frame's header announces, refused past [`MAX_FRAME`].
pub(crate) fn frame_len(header: [u8; 4]) -> Result<usize, String> {
    let len = u32::from_be_bytes(header) as usize;
    if len > MAX_FRAME {
        return Err(format!(
            "a frame announced {len} bytes, over the {MAX_FRAME}-byte limit"
        ));
    }
    Ok(len)
}

/// Reads one frame from a blocking reader (the worker's stdin); `None` at
/// a clean end of input between frames.
pub(crate) fn read_frame(input: &mut impl Read) -> Result<Option<Vec<u8>>, String> {
    let mut header = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match input.read(&mut header[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err("the input ended inside a frame header".to_owned()),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    let mut body = vec![0u8; frame_len(header)?];
    input.read_exact(&mut body).map_err(|e| e.to_string())?;
    Ok(Some(body))
}

/// Writes one frame to a blocking writer (the worker's stdout).
pub(crate) fn write_frame(output: &mut impl Write, frame: &[u8]) -> Result<(), String> {
    output.write_all(frame).map_err(|e| e.to_string())?;
    output.flush().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_reads_back_and_an_oversized_length_is_refused() {
        let frame = encode(&Reply {
            outcome: RunOutcome::Finished {
                output: "hi".into(),
                value: "1".into(),
            },
            retire: false,
        })
        .expect("encodes");
        let mut input = &frame[..];
        let body = read_frame(&mut input).expect("reads").expect("a frame");
        let reply: Reply = serde_json::from_slice(&body).expect("decodes");
        assert!(matches!(reply.outcome, RunOutcome::Finished { .. }));
        assert_eq!(read_frame(&mut input), Ok(None));
        let mut huge = &u32::MAX.to_be_bytes()[..];
        assert!(read_frame(&mut huge).is_err());
    }
}
