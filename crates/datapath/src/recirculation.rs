//! The queue of packets `ct(table=N)` sends back through the pipeline:
//! filled by the interpreter, emptied by the element after the batch.

use crate::decision::KeyArray;
use nfv_flow::FlowKey;
use nfv_mem::{Batch, Packet};

/// Packets `ct(table=N)` sends back through the pipeline, with the keys
/// they go back with (their headers as they are now, their ct fields and
/// table N), until the end of the batch that sent them.
pub(crate) struct Recirculation {
    pub batch: Batch,
    pub keys: KeyArray,
}

impl Recirculation {
    /// Queues `pkt` with the key `build` writes in place (the 192-byte key
    /// is not built elsewhere and copied in); gives the packet back when a
    /// batch's worth wait.
    pub fn push(
        &mut self,
        pkt: Packet,
        build: impl FnOnce(&Packet, &mut FlowKey),
    ) -> Result<(), Packet> {
        let i = self.batch.len();
        if self.batch.is_full() {
            return Err(pkt);
        }
        build(&pkt, &mut self.keys[i]);
        self.batch.push(pkt);
        Ok(())
    }
}
