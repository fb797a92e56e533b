//! [`BiasedLock`]: who enters by the bias, who revokes it, and that the
//! bias and the spin lock never let two holders in at once.

use super::*;
use crate::spin::ANY;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

const PMD: u8 = 2;
const CONTROL: u8 = 3;

/// Whether biasing can be tested here; says SKIPPED for the test when not.
fn barrier_or_skip(test: &str) -> bool {
    let ok = asymmetric_barrier_available();
    if !ok {
        nfv_testutil::skip(
            test,
            "membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) is refused here: the lock is \
             never biased (every user takes the spin lock)",
        );
    }
    ok
}

/// Table: what each way in finds, step by step, for one owner and the
/// others (`Some(true)`: entered by the bias; `Some(false)`: by the spin
/// lock; `None`: refused at once).
#[test]
fn the_owner_enters_by_its_bias_until_someone_else_takes_the_lock() {
    if !barrier_or_skip("the_owner_enters_by_its_bias_until_someone_else_takes_the_lock") {
        return;
    }
    enum Step {
        Owner(Option<bool>),
        Other,
        Control,
        ControlHeld,
        Release,
    }
    use Step::*;
    let cases: &[(&str, &[Step])] = &[
        (
            "granted on the first slow entry",
            &[Owner(Some(false)), Owner(Some(true)), Owner(Some(true))],
        ),
        (
            "another user revokes for good",
            &[
                Owner(Some(false)),
                Owner(Some(true)),
                Other,
                Owner(Some(false)),
                Owner(Some(false)),
            ],
        ),
        (
            "the control thread revokes, then lets it be granted again",
            &[
                Owner(Some(false)),
                Owner(Some(true)),
                Control,
                Owner(Some(false)),
                Owner(Some(true)),
            ],
        ),
        (
            "the owner never waits for the control thread",
            &[
                Owner(Some(false)),
                Owner(Some(true)),
                ControlHeld,
                Owner(None),
                Release,
                Owner(Some(false)),
            ],
        ),
        (
            "dropped bias: another may take it",
            &[Owner(Some(false)), Release],
        ),
    ];
    for (name, steps) in cases {
        let l = BiasedLock::new(0u32);
        let mut me = Bias::new();
        let mut held = None;
        for (i, step) in steps.iter().enumerate() {
            match step {
                Owner(want) => {
                    let got = l.lock_biased(&mut me, PMD, CONTROL).map(|g| g.by_bias());
                    assert_eq!(got, *want, "{name}: step {i}");
                }
                Other => {
                    assert!(!l.lock_as(ANY).by_bias(), "{name}: step {i}");
                    assert!(!l.is_biased(), "{name}: step {i} revoked");
                }
                Control => drop(l.lock_then_rebias(CONTROL)),
                ControlHeld => held = Some(l.lock_then_rebias(CONTROL)),
                Release => {
                    if held.take().is_none() {
                        l.drop_bias(&mut me);
                        let mut other = Bias::new();
                        drop(l.lock_biased(&mut other, PMD, CONTROL));
                        assert!(
                            other.is_granted(),
                            "{name}: step {i}: a dropped bias is free"
                        );
                    }
                }
            }
        }
    }
}

/// Three threads — the owner (bias), a control thread (revokes, rebiases)
/// and another user (revokes for good, now and then after a rebias) —
/// each check that nobody else is inside while they are.
#[test]
fn nobody_is_ever_inside_with_the_owner() {
    let owner_entries = 200_000u64;
    let l = Arc::new(BiasedLock::new((0u64, 0u64)));
    let by_bias = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    /// Enters: the two halves must agree, else someone else was inside.
    fn enter(v: &mut (u64, u64)) {
        let before = v.0;
        v.0 = before + 1;
        for _ in 0..100 {
            std::hint::spin_loop();
        }
        assert_eq!(v.1, before, "two holders inside at once");
        v.1 = before + 1;
    }
    let owner = {
        let (l, by_bias) = (l.clone(), by_bias.clone());
        std::thread::spawn(move || {
            let mut me = Bias::new();
            let mut n = 0;
            while n < owner_entries {
                // `None`: the control thread held it; try again.
                if let Some(mut g) = l.lock_biased(&mut me, PMD, CONTROL) {
                    if g.by_bias() {
                        by_bias.fetch_add(1, Ordering::Relaxed);
                    }
                    enter(&mut g);
                    n += 1;
                }
            }
        })
    };
    let others: Vec<_> = [(CONTROL, true), (ANY, false)]
        .into_iter()
        .map(|(holder, rebias)| {
            let (l, done) = (l.clone(), done.clone());
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !done.load(Ordering::Relaxed) {
                    let mut g = if rebias {
                        l.lock_then_rebias(holder)
                    } else {
                        l.lock_as(holder)
                    };
                    enter(&mut g);
                    drop(g);
                    n += 1;
                    if !rebias && n.is_multiple_of(4) {
                        l.rebias();
                    }
                    std::thread::sleep(std::time::Duration::from_micros(20));
                }
                n
            })
        })
        .collect();
    owner.join().expect("owner");
    done.store(true, Ordering::Relaxed);
    let other_entries: u64 = others.into_iter().map(|t| t.join().expect("other")).sum();
    let v = *l.lock_as(ANY);
    assert_eq!(
        v,
        (owner_entries + other_entries, owner_entries + other_entries)
    );
    let biased = by_bias.load(Ordering::Relaxed);
    eprintln!(
        "owner {owner_entries} entries ({biased} by the bias), others {other_entries}; \
         barrier available: {}",
        asymmetric_barrier_available()
    );
    if asymmetric_barrier_available() {
        assert!(biased > 0, "the owner never entered by its bias");
        assert!(other_entries > 0, "the others never got in");
    }
}
