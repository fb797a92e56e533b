//! `ovs-ofctl dump-flows`-style text for matches and actions.
//! (Stub: being implemented.)
