//! The queue of packets `ct(table=N)` sends back through the pipeline:
//! filled by the interpreter, emptied by the element after the batch.

use crate::ct::CtFields;
use crate::decision::KeyArray;
use nfv_flow::action::CtAction;
use nfv_flow::{FlowKey, PortNo};
use nfv_mem::{Batch, Packet, PoolCache};
use nfv_ports::{DropReason, QueueCounters};

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

    /// `ct(table=t)`'s second half: queues `pkt`, tracked with the fields
    /// `f`, with the key it goes back to table `t` with — the key the
    /// decision looked up (`looked_up`, while nothing has edited the
    /// packet) or its headers extracted again (received on `in_port`),
    /// the pipeline's metadata at the `ct`, and its ct fields (`f`'s wide
    /// ones are set only where some rule matches them, see
    /// [`CtFields::label`]: other keys keep within the base words, hashed
    /// and compared at IPv4's cost). Gives the packet back when a batch's
    /// worth wait.
    pub fn queue_tracked(
        &mut self,
        pkt: Packet,
        looked_up: Option<&FlowKey>,
        in_port: PortNo,
        ct: &CtAction,
        t: u8,
        f: &CtFields,
    ) -> Result<(), Packet> {
        self.push(pkt, |pkt, key| {
            // Straight into the queue's slot: a `match` yielding the key
            // built it on the stack and copied it twice (2 x 192 bytes).
            match looked_up {
                Some(k) => key.clone_from(k),
                None => *key = nfv_flow::extract::extract(in_port, pkt.data()),
            }
            key.set_table(t);
            key.set_metadata(ct.recirc_metadata);
            let orig = f.orig.map(|o| nfv_flow::key::CtOrig {
                ipv6: o.family == nfv_conntrack::Family::V6,
                src: o.src,
                dst: o.dst,
                proto: o.proto,
                tp_src: o.src_port,
                tp_dst: o.dst_port,
            });
            key.set_ct(f.state(), f.zone(), f.mark(), f.label, orig);
        })
    }

    /// What becomes of a packet the queue gave back (a batch's worth was
    /// waiting): a `recirc_limit` drop on the in port's counters.
    pub fn drop_refused(queued: Result<(), Packet>, rx: &QueueCounters, pool: &mut PoolCache) {
        if let Err(pkt) = queued {
            rx.drop(DropReason::RecircLimit, 1);
            pool.free(pkt);
        }
    }
}
