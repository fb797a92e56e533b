//! Reading fuzz input as a stream of small decisions: past its end every
//! read returns zeros, so any input is a complete program.

pub(crate) struct Bytes<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Bytes<'a> {
    pub fn new(data: &'a [u8]) -> Bytes<'a> {
        Bytes { data, at: 0 }
    }
    pub fn u8(&mut self) -> u8 {
        let b = self.data.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    pub fn is_empty(&self) -> bool {
        self.at >= self.data.len()
    }
    /// The rest of the input.
    pub fn rest(&mut self) -> &'a [u8] {
        let r = self.data.get(self.at..).unwrap_or(&[]);
        self.at = self.data.len();
        r
    }
}
