//! Packet memory (being implemented).

/// Where the packet region comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum HugepageMode {
    /// hugetlbfs when available, memfd otherwise (logged).
    #[default]
    Auto,
    /// Fail if hugepages cannot be had.
    Require,
    /// Always memfd with normal pages.
    Never,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryConfig {
    /// Bytes per frame buffer including headroom: power of two, 2048..=65536.
    pub frame_size: usize,
    /// Number of frames in the pool, 1024..=4_194_304.
    pub frames: usize,
    pub hugepages: HugepageMode,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig { frame_size: 2048, frames: 32768, hugepages: HugepageMode::Auto }
    }
}
