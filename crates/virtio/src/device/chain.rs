//! Walking one descriptor chain (virtio §2.7.5, §2.7.5.3) in hostile
//! memory. Each descriptor is read once (volatile copy) and bounds-checked
//! once; the walk is bounded by the queue size (or the indirect table's
//! entries), so loops end with [`ChainError::TooLong`].

use crate::layout::{Desc, VIRTQ_DESC_F_INDIRECT, VIRTQ_DESC_F_NEXT, VIRTQ_DESC_F_WRITE};
use crate::memory::GuestMemory;

/// Why a chain was rejected; each maps to one [`super::QueueErrors`] field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChainError {
    DescId,
    BadAddr,
    TooLong,
    IndirectLen,
    IndirectNested,
    IndirectAddr,
    LenOverflow,
    WrongDirection,
    Short,
}

/// One validated buffer: `len` bytes at host address `ptr`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Seg {
    pub ptr: *mut u8,
    pub len: u32,
    pub write: bool,
}

/// Most entries accepted in an indirect table: `next` is a u16, so no
/// chain can use more (Linux vhost has the same limit).
const MAX_INDIRECT: u32 = 65536;

/// Iterator state over one chain.
pub(crate) struct Chain {
    table: *const Desc,
    table_len: u32,
    next: u32,
    budget: u32,
    indirect: bool,
    done: bool,
}

impl Chain {
    /// A chain starting at `head` (the caller checked `head < size`) in the
    /// queue's descriptor table of `size` entries.
    #[inline(always)]
    pub fn new(desc: *const Desc, size: u16, head: u16) -> Chain {
        debug_assert!(head < size);
        Chain {
            table: desc,
            table_len: size as u32,
            next: head as u32,
            budget: size as u32,
            indirect: false,
            done: false,
        }
    }

    /// The next buffer of the chain, `None` at its end. An indirect
    /// descriptor is followed into its table (virtio allows zero or more
    /// direct descriptors before it; a NEXT flag on it is ignored, the chain
    /// ends with the table). Indirect tables must be 8-byte aligned.
    #[inline(always)]
    pub fn next(&mut self, mem: &GuestMemory, hint: &mut usize) -> Result<Option<Seg>, ChainError> {
        loop {
            if self.done {
                return Ok(None);
            }
            if self.budget == 0 {
                return Err(ChainError::TooLong);
            }
            self.budget -= 1;
            // SAFETY: `next < table_len` always holds (checked before it is
            // stored; `new`'s caller checked `head`), `table` points to
            // `table_len` descriptors inside guest memory (the queue's table,
            // validated at setup, or an indirect table validated below), and
            // it is suitably aligned. One volatile copy: we validate the
            // copy and never re-read the descriptor.
            let d = unsafe { self.table.add(self.next as usize).read_volatile() };
            if d.flags & VIRTQ_DESC_F_INDIRECT != 0 {
                if self.indirect {
                    return Err(ChainError::IndirectNested);
                }
                if d.len == 0 || d.len & 15 != 0 || d.len / 16 > MAX_INDIRECT {
                    return Err(ChainError::IndirectLen);
                }
                let p = mem
                    .translate_hinted(d.addr, d.len as usize, hint)
                    .ok_or(ChainError::IndirectAddr)?;
                if (p as usize) & (std::mem::align_of::<Desc>() - 1) != 0 {
                    return Err(ChainError::IndirectAddr);
                }
                self.table = p.cast();
                self.table_len = d.len / 16;
                self.next = 0;
                self.budget = self.table_len;
                self.indirect = true;
                continue;
            }
            if d.flags & VIRTQ_DESC_F_NEXT != 0 {
                if d.next as u32 >= self.table_len {
                    return Err(ChainError::DescId);
                }
                self.next = d.next as u32;
            } else {
                self.done = true;
            }
            let ptr = mem
                .translate_hinted(d.addr, d.len as usize, hint)
                .ok_or(ChainError::BadAddr)?;
            return Ok(Some(Seg {
                ptr,
                len: d.len,
                write: d.flags & VIRTQ_DESC_F_WRITE != 0,
            }));
        }
    }
}
