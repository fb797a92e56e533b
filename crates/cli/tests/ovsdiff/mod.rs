//! Helpers of `ovs_differential.rs`: the packet model, the generator,
//! each switch's harness and trace reader, and the comparison.
#![allow(dead_code)]

pub mod compare;
pub mod key;
pub mod nfv;
pub mod ovs;
pub mod random;
