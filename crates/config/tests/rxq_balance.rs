//! `[pmd]` rx queue placement and auto load balance keys.

mod common;
use common::{Bad, check_all, parse};
use nfv_sched::{Algorithm, AutoLbConfig};

#[test]
fn defaults_follow_ovs() {
    let c = parse("").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.pmd.rxq_assign, Algorithm::Cycles);
    assert_eq!(c.pmd.load_interval_s, 5);
    assert_eq!(
        c.pmd.auto_lb,
        AutoLbConfig {
            enabled: false,
            load_threshold: 95,
            improvement_threshold: 25,
            interval_s: 60,
        }
    );
}

#[test]
fn every_key_is_read() {
    let c = parse(
        "[pmd]\ncores = [0, 1]\nrxq_assign = \"group\"\nload_interval_s = 1\nauto_lb = true\n\
         auto_lb_load_threshold = 70\nauto_lb_improvement_threshold = 40\nauto_lb_interval_s = 5\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.pmd.rxq_assign, Algorithm::Group);
    assert_eq!(c.pmd.load_interval_s, 1);
    assert_eq!(
        c.pmd.auto_lb,
        AutoLbConfig {
            enabled: true,
            load_threshold: 70,
            improvement_threshold: 40,
            interval_s: 5,
        }
    );
}

#[test]
fn bad_values_name_line_and_field() {
    check_all(&[
        Bad {
            name: "unknown algorithm",
            text: "[pmd]\nrxq_assign = \"busiest\"\n",
            line: 2,
            field: "pmd.rxq_assign",
            msg: "\"busiest\" is not an rx queue assignment (roundrobin, cycles, group)",
        },
        Bad {
            name: "interval 0",
            text: "[pmd]\nload_interval_s = 0\n",
            line: 2,
            field: "pmd.load_interval_s",
            msg: "0",
        },
        Bad {
            name: "threshold over 100",
            text: "[pmd]\nauto_lb_load_threshold = 101\n",
            line: 2,
            field: "pmd.auto_lb_load_threshold",
            msg: "101",
        },
        Bad {
            name: "negative improvement",
            text: "[pmd]\nauto_lb_improvement_threshold = -1\n",
            line: 2,
            field: "pmd.auto_lb_improvement_threshold",
            msg: "-1",
        },
        Bad {
            name: "rebalance interval 0",
            text: "[pmd]\nauto_lb_interval_s = 0\n",
            line: 2,
            field: "pmd.auto_lb_interval_s",
            msg: "0",
        },
        Bad {
            name: "auto_lb not a bool",
            text: "[pmd]\nauto_lb = \"yes\"\n",
            line: 2,
            field: "pmd.auto_lb",
            msg: "",
        },
    ]);
}
