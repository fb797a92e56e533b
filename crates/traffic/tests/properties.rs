//! Property tests: finding and parsing a stamp never panics on arbitrary
//! bytes, `parse(emit(x)) == x`, a single corrupted byte is always
//! rejected, and the receiver's counters always add up.

use nfv_traffic::TrafficReceiver;
use nfv_traffic::stamp::{SEQ_MAX, STAMP_LEN, STAMP_OFFSET, Stamp};
use proptest::prelude::*;

fn frame(s: &Stamp) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[23] = 17;
    s.emit(f[STAMP_OFFSET..].first_chunk_mut().unwrap());
    f
}

proptest! {
    #[test]
    fn arbitrary_frames_never_panic(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = Stamp::from_frame(&data);
        let _ = Stamp::parse(&data);
        let mut r = TrafficReceiver::new(2_000_000_000);
        let _ = r.receive(&data, 12345);
    }

    #[test]
    fn round_trip(stream in any::<u32>(), seq in 0..=SEQ_MAX, tsc in any::<u64>()) {
        let s = Stamp { stream, seq, tsc };
        prop_assert_eq!(Stamp::from_frame(&frame(&s)), Ok(s));
    }

    #[test]
    fn one_corrupted_byte_is_rejected(
        stream in any::<u32>(), seq in 0..=SEQ_MAX, tsc in any::<u64>(),
        at in 0..STAMP_LEN, flip in 1..=255u8,
    ) {
        let s = Stamp { stream, seq, tsc };
        let mut f = frame(&s);
        f[STAMP_OFFSET + at] ^= flip;
        prop_assert!(Stamp::from_frame(&f).is_err());
    }

    #[test]
    fn counters_add_up_for_any_arrival_order(seqs in proptest::collection::vec(0u64..300, 0..600)) {
        let mut r = TrafficReceiver::new(1_000_000_000);
        for &seq in &seqs {
            r.receive(&frame(&Stamp { stream: 1, seq, tsc: 0 }), 10);
        }
        let snap = r.shared().snapshot();
        if seqs.is_empty() {
            prop_assert!(snap.streams.is_empty());
        } else {
            let s = &snap.streams[0];
            let distinct = seqs.iter().collect::<std::collections::BTreeSet<_>>().len() as u64;
            let highest = *seqs.iter().max().unwrap();
            prop_assert_eq!(s.received, seqs.len() as u64);
            prop_assert_eq!(s.unique(), distinct);
            prop_assert_eq!(s.expected, highest + 1);
            prop_assert_eq!(s.lost(), highest + 1 - distinct);
            prop_assert_eq!(s.latency().unwrap().samples, distinct);
        }
    }
}
