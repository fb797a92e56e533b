//! OpenFlow 1.3 framing: the message header, the numbers the protocol
//! assigns (message types, error types and codes), and a bounds-checked
//! reader and a writer for the big-endian structures that follow it.
//! Every length a peer sends is checked here before anything is read
//! past it: a short or lying message is a [`OfError`], never a panic.

/// The only version spoken (`OFP13_VERSION`).
pub const VERSION: u8 = 0x04;
/// Bytes of the header every message starts with.
pub const HEADER_LEN: usize = 8;
/// Largest message: the header's length is 16 bits.
pub const MAX_MESSAGE: usize = 0xffff;

/// Message types (`ofp_type`).
pub mod msg {
    pub const HELLO: u8 = 0;
    pub const ERROR: u8 = 1;
    pub const ECHO_REQUEST: u8 = 2;
    pub const ECHO_REPLY: u8 = 3;
    pub const EXPERIMENTER: u8 = 4;
    pub const FEATURES_REQUEST: u8 = 5;
    pub const FEATURES_REPLY: u8 = 6;
    pub const GET_CONFIG_REQUEST: u8 = 7;
    pub const GET_CONFIG_REPLY: u8 = 8;
    pub const SET_CONFIG: u8 = 9;
    pub const PACKET_IN: u8 = 10;
    pub const FLOW_REMOVED: u8 = 11;
    pub const PORT_STATUS: u8 = 12;
    pub const PACKET_OUT: u8 = 13;
    pub const FLOW_MOD: u8 = 14;
    pub const GROUP_MOD: u8 = 15;
    pub const PORT_MOD: u8 = 16;
    pub const TABLE_MOD: u8 = 17;
    pub const MULTIPART_REQUEST: u8 = 18;
    pub const MULTIPART_REPLY: u8 = 19;
    pub const BARRIER_REQUEST: u8 = 20;
    pub const BARRIER_REPLY: u8 = 21;
    pub const QUEUE_GET_CONFIG_REQUEST: u8 = 22;
    pub const QUEUE_GET_CONFIG_REPLY: u8 = 23;
    pub const ROLE_REQUEST: u8 = 24;
    pub const ROLE_REPLY: u8 = 25;
    pub const GET_ASYNC_REQUEST: u8 = 26;
    pub const GET_ASYNC_REPLY: u8 = 27;
    pub const SET_ASYNC: u8 = 28;
    pub const METER_MOD: u8 = 29;
}

/// Reserved port numbers (`ofp_port_no`).
pub mod port {
    /// Largest number of a physical (here: any configured) port.
    pub const MAX: u32 = 0xffff_ff00;
    pub const IN_PORT: u32 = 0xffff_fff8;
    pub const TABLE: u32 = 0xffff_fff9;
    pub const NORMAL: u32 = 0xffff_fffa;
    pub const FLOOD: u32 = 0xffff_fffb;
    pub const ALL: u32 = 0xffff_fffc;
    pub const CONTROLLER: u32 = 0xffff_fffd;
    pub const LOCAL: u32 = 0xffff_fffe;
    pub const ANY: u32 = 0xffff_ffff;
}

/// `OFPG_ANY`: no group filter.
pub const GROUP_ANY: u32 = 0xffff_ffff;
/// `OFPG_ALL`: every group (group delete and stats).
pub const GROUP_ALL: u32 = 0xffff_fffc;
/// `OFPM_ALL`: every meter.
pub const METER_ALL: u32 = 0xffff_ffff;
/// `OFPTT_ALL`: every table (flow delete and stats).
pub const TABLE_ALL: u8 = 0xff;
/// The in_port of a packet a controller sent, in the switch's 16-bit
/// port numbers (OpenFlow 1.0's `OFPP_CONTROLLER`).
pub const FROM_CONTROLLER: u16 = 0xfffd;

/// `OFP_NO_BUFFER`: the switch buffers no packets.
pub const NO_BUFFER: u32 = 0xffff_ffff;

/// An OpenFlow error (`ofp_error_msg`'s type and code): what a refused
/// request is answered with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("OpenFlow error type {kind} code {code} ({})", describe(*kind, *code))]
pub struct OfError {
    pub kind: u16,
    pub code: u16,
}

/// Error types (`ofp_error_type`) and the codes used here.
pub mod err {
    use super::OfError;
    const fn e(kind: u16, code: u16) -> OfError {
        OfError { kind, code }
    }
    pub const HELLO_INCOMPATIBLE: OfError = e(0, 0);

    pub const BAD_VERSION: OfError = e(1, 0);
    pub const BAD_TYPE: OfError = e(1, 1);
    pub const BAD_MULTIPART: OfError = e(1, 2);
    pub const BAD_EXPERIMENTER: OfError = e(1, 3);
    pub const REQUEST_EPERM: OfError = e(1, 5);
    pub const BAD_LEN: OfError = e(1, 6);
    pub const BUFFER_UNKNOWN: OfError = e(1, 8);
    pub const BAD_TABLE_ID: OfError = e(1, 9);
    pub const IS_SLAVE: OfError = e(1, 10);
    pub const BAD_PORT: OfError = e(1, 11);
    pub const BAD_PACKET: OfError = e(1, 12);

    pub const ACTION_BAD_TYPE: OfError = e(2, 0);
    pub const ACTION_BAD_LEN: OfError = e(2, 1);
    pub const ACTION_BAD_EXPERIMENTER: OfError = e(2, 2);
    pub const ACTION_BAD_OUT_PORT: OfError = e(2, 4);
    pub const ACTION_BAD_ARGUMENT: OfError = e(2, 5);
    pub const ACTION_BAD_OUT_GROUP: OfError = e(2, 9);
    pub const ACTION_MATCH_INCONSISTENT: OfError = e(2, 10);
    pub const ACTION_UNSUPPORTED_ORDER: OfError = e(2, 11);
    pub const ACTION_BAD_SET_TYPE: OfError = e(2, 13);
    pub const ACTION_BAD_SET_LEN: OfError = e(2, 14);
    pub const ACTION_BAD_SET_ARGUMENT: OfError = e(2, 15);

    pub const INST_UNKNOWN: OfError = e(3, 0);
    pub const INST_UNSUPPORTED: OfError = e(3, 1);
    pub const INST_BAD_TABLE_ID: OfError = e(3, 2);
    pub const INST_BAD_EXPERIMENTER: OfError = e(3, 5);
    pub const INST_BAD_LEN: OfError = e(3, 7);

    pub const MATCH_BAD_TYPE: OfError = e(4, 0);
    pub const MATCH_BAD_LEN: OfError = e(4, 1);
    pub const MATCH_BAD_FIELD: OfError = e(4, 6);
    pub const MATCH_BAD_VALUE: OfError = e(4, 7);
    pub const MATCH_BAD_MASK: OfError = e(4, 8);
    pub const MATCH_BAD_PREREQ: OfError = e(4, 9);
    pub const MATCH_DUP_FIELD: OfError = e(4, 10);

    pub const FLOW_MOD_UNKNOWN: OfError = e(5, 0);
    pub const FLOW_MOD_BAD_TABLE_ID: OfError = e(5, 2);
    pub const FLOW_MOD_OVERLAP: OfError = e(5, 3);
    pub const FLOW_MOD_BAD_COMMAND: OfError = e(5, 6);
    pub const FLOW_MOD_BAD_FLAGS: OfError = e(5, 7);

    pub const GROUP_EXISTS: OfError = e(6, 0);
    pub const GROUP_INVALID: OfError = e(6, 1);
    pub const GROUP_CHAINING_UNSUPPORTED: OfError = e(6, 5);
    pub const GROUP_WATCH_UNSUPPORTED: OfError = e(6, 6);
    pub const GROUP_UNKNOWN: OfError = e(6, 8);
    pub const GROUP_BAD_TYPE: OfError = e(6, 10);
    pub const GROUP_BAD_COMMAND: OfError = e(6, 11);
    pub const GROUP_BAD_BUCKET: OfError = e(6, 12);
    pub const GROUP_BAD_WATCH: OfError = e(6, 13);

    pub const PORT_MOD_EPERM: OfError = e(7, 4);
    pub const TABLE_MOD_EPERM: OfError = e(8, 2);
    pub const SWITCH_CONFIG_BAD_FLAGS: OfError = e(10, 0);
    pub const ROLE_STALE: OfError = e(11, 0);
    pub const ROLE_BAD_ROLE: OfError = e(11, 2);

    pub const METER_UNKNOWN: OfError = e(12, 0);
    pub const METER_EXISTS: OfError = e(12, 1);
    pub const METER_INVALID: OfError = e(12, 2);
    pub const METER_UNKNOWN_METER: OfError = e(12, 3);
    pub const METER_BAD_COMMAND: OfError = e(12, 4);
    pub const METER_BAD_FLAGS: OfError = e(12, 5);
    pub const METER_BAD_RATE: OfError = e(12, 6);
    pub const METER_BAD_BURST: OfError = e(12, 7);
    pub const METER_BAD_BAND: OfError = e(12, 8);
    pub const METER_OUT_OF_BANDS: OfError = e(12, 11);

    pub const TABLE_FEATURES_EPERM: OfError = e(13, 5);
}

/// The spec's names, for logs and error text.
pub fn describe(kind: u16, code: u16) -> &'static str {
    match (kind, code) {
        (0, _) => "HELLO_FAILED",
        (1, 0) => "BAD_REQUEST/BAD_VERSION",
        (1, 1) => "BAD_REQUEST/BAD_TYPE",
        (1, 2) => "BAD_REQUEST/BAD_MULTIPART",
        (1, 3) => "BAD_REQUEST/BAD_EXPERIMENTER",
        (1, 5) => "BAD_REQUEST/EPERM",
        (1, 6) => "BAD_REQUEST/BAD_LEN",
        (1, 8) => "BAD_REQUEST/BUFFER_UNKNOWN",
        (1, 9) => "BAD_REQUEST/BAD_TABLE_ID",
        (1, 10) => "BAD_REQUEST/IS_SLAVE",
        (1, 11) => "BAD_REQUEST/BAD_PORT",
        (1, 12) => "BAD_REQUEST/BAD_PACKET",
        (1, _) => "BAD_REQUEST",
        (2, 0) => "BAD_ACTION/BAD_TYPE",
        (2, 1) => "BAD_ACTION/BAD_LEN",
        (2, 4) => "BAD_ACTION/BAD_OUT_PORT",
        (2, 5) => "BAD_ACTION/BAD_ARGUMENT",
        (2, 9) => "BAD_ACTION/BAD_OUT_GROUP",
        (2, 10) => "BAD_ACTION/MATCH_INCONSISTENT",
        (2, 13) => "BAD_ACTION/BAD_SET_TYPE",
        (2, 15) => "BAD_ACTION/BAD_SET_ARGUMENT",
        (2, _) => "BAD_ACTION",
        (3, 0) => "BAD_INSTRUCTION/UNKNOWN_INST",
        (3, 1) => "BAD_INSTRUCTION/UNSUP_INST",
        (3, 2) => "BAD_INSTRUCTION/BAD_TABLE_ID",
        (3, _) => "BAD_INSTRUCTION",
        (4, 0) => "BAD_MATCH/BAD_TYPE",
        (4, 1) => "BAD_MATCH/BAD_LEN",
        (4, 6) => "BAD_MATCH/BAD_FIELD",
        (4, 7) => "BAD_MATCH/BAD_VALUE",
        (4, 8) => "BAD_MATCH/BAD_MASK",
        (4, 9) => "BAD_MATCH/BAD_PREREQ",
        (4, 10) => "BAD_MATCH/DUP_FIELD",
        (4, _) => "BAD_MATCH",
        (5, 2) => "FLOW_MOD_FAILED/BAD_TABLE_ID",
        (5, 3) => "FLOW_MOD_FAILED/OVERLAP",
        (5, 6) => "FLOW_MOD_FAILED/BAD_COMMAND",
        (5, 7) => "FLOW_MOD_FAILED/BAD_FLAGS",
        (5, _) => "FLOW_MOD_FAILED",
        (6, 0) => "GROUP_MOD_FAILED/GROUP_EXISTS",
        (6, 8) => "GROUP_MOD_FAILED/UNKNOWN_GROUP",
        (6, _) => "GROUP_MOD_FAILED",
        (7, _) => "PORT_MOD_FAILED",
        (8, _) => "TABLE_MOD_FAILED",
        (10, _) => "SWITCH_CONFIG_FAILED",
        (11, _) => "ROLE_REQUEST_FAILED",
        (12, 1) => "METER_MOD_FAILED/METER_EXISTS",
        (12, 3) => "METER_MOD_FAILED/UNKNOWN_METER",
        (12, _) => "METER_MOD_FAILED",
        (13, _) => "TABLE_FEATURES_FAILED",
        _ => "unknown",
    }
}

/// A message's fixed header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub version: u8,
    pub kind: u8,
    pub length: u16,
    pub xid: u32,
}

impl Header {
    /// The header at the start of `bytes` (at least [`HEADER_LEN`] long).
    pub fn parse(bytes: &[u8]) -> Option<Header> {
        let b = bytes.get(..HEADER_LEN)?;
        Some(Header {
            version: b[0],
            kind: b[1],
            length: u16::from_be_bytes([b[2], b[3]]),
            xid: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
        })
    }
}

/// Reads big-endian fields from a slice; every read past the end is
/// `BAD_LEN` (or the error the caller chose with [`Reader::with_error`]).
#[derive(Clone)]
pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    short: OfError,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader {
            bytes,
            at: 0,
            short: err::BAD_LEN,
        }
    }

    /// The error a read past the end gives (`BAD_MATCH/BAD_LEN` inside a
    /// match, say).
    pub fn with_error(mut self, short: OfError) -> Reader<'a> {
        self.short = short;
        self
    }

    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], OfError> {
        let end = self.at.checked_add(n).ok_or(self.short)?;
        let b = self.bytes.get(self.at..end).ok_or(self.short)?;
        self.at = end;
        Ok(b)
    }

    pub fn skip(&mut self, n: usize) -> Result<(), OfError> {
        self.bytes(n).map(|_| ())
    }

    pub fn rest(&mut self) -> &'a [u8] {
        let b = &self.bytes[self.at..];
        self.at = self.bytes.len();
        b
    }

    pub fn u8(&mut self) -> Result<u8, OfError> {
        Ok(self.bytes(1)?[0])
    }

    pub fn u16(&mut self) -> Result<u16, OfError> {
        Ok(u16::from_be_bytes(
            self.bytes(2)?.try_into().unwrap_or_default(),
        ))
    }

    pub fn u32(&mut self) -> Result<u32, OfError> {
        Ok(u32::from_be_bytes(
            self.bytes(4)?.try_into().unwrap_or_default(),
        ))
    }

    pub fn u64(&mut self) -> Result<u64, OfError> {
        Ok(u64::from_be_bytes(
            self.bytes(8)?.try_into().unwrap_or_default(),
        ))
    }

    /// A sub-reader over the next `n` bytes (a TLV's body), with this
    /// reader's error.
    pub fn sub(&mut self, n: usize) -> Result<Reader<'a>, OfError> {
        let short = self.short;
        Ok(Reader::new(self.bytes(n)?).with_error(short))
    }
}

/// Builds one message: [`Writer::finish`] writes its length.
#[derive(Default)]
pub struct Writer {
    pub buf: Vec<u8>,
}

impl Writer {
    /// A message of type `kind` answering (or sent as) `xid`.
    pub fn message(kind: u8, xid: u32) -> Writer {
        let mut w = Writer {
            buf: Vec::with_capacity(64),
        };
        w.u8(VERSION);
        w.u8(kind);
        w.u16(0);
        w.u32(xid);
        w
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    pub fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    pub fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }

    pub fn zeros(&mut self, n: usize) {
        self.buf.resize(self.buf.len() + n, 0);
    }

    /// `text` in a fixed, zero-padded field of `n` bytes (cut to leave a
    /// terminating zero).
    pub fn fixed_str(&mut self, text: &str, n: usize) {
        let b = text.as_bytes();
        let take = b.len().min(n - 1);
        self.bytes(&b[..take]);
        self.zeros(n - take);
    }

    /// Zeros up to the next multiple of 8 bytes.
    pub fn pad8(&mut self) {
        let n = self.buf.len().next_multiple_of(8) - self.buf.len();
        self.zeros(n);
    }

    /// Writes the 16-bit length of the structure starting at `start`
    /// into its bytes `start + at .. start + at + 2`.
    pub fn patch_len(&mut self, start: usize, at: usize) {
        let len = (self.buf.len() - start) as u16;
        self.buf[start + at..start + at + 2].copy_from_slice(&len.to_be_bytes());
    }

    /// The finished message (its header's length written).
    pub fn finish(mut self) -> Vec<u8> {
        self.patch_len(0, 2);
        self.buf
    }
}

/// An `OFPT_ERROR` answering the message `request` (its first 64 bytes
/// echoed, as the spec asks).
pub fn error_message(xid: u32, e: OfError, request: &[u8]) -> Vec<u8> {
    let mut w = Writer::message(msg::ERROR, xid);
    w.u16(e.kind);
    w.u16(e.code);
    w.bytes(&request[..request.len().min(64)]);
    w.finish()
}
