//! Wire formats (smoltcp style): one module per protocol, each with a checked
//! zero-copy view `Xxx<T: AsRef<[u8]>>` and a `XxxRepr` with `parse`/`emit`.
//! No I/O, no allocation, no `unsafe`. (Being implemented.)
#![forbid(unsafe_code)]
#![no_std]
