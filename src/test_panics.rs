//! Panics on purpose where a test asks, to show that the daemon survives
//! them: `SESSIONFS_TEST_PANIC=SITE:TEXT` panics at `SITE` when what it
//! handles contains `TEXT`. Sites: `lookup` (the name looked up), `output`
//! (a chunk of a session's output). Debug builds only; release builds
//! compile it to nothing.

#[cfg(debug_assertions)]
pub fn maybe_panic(site: &str, text: &[u8]) {
    static SPEC: std::sync::OnceLock<Option<(String, String)>> = std::sync::OnceLock::new();
    let spec = SPEC.get_or_init(|| {
        let spec = std::env::var("SESSIONFS_TEST_PANIC").ok()?;
        let (site, text) = spec.split_once(':')?;
        (!text.is_empty()).then(|| (site.to_string(), text.to_string()))
    });
    if let Some((at, needle)) = spec {
        if at == site && text.windows(needle.len()).any(|w| w == needle.as_bytes()) {
            panic!("test panic at {site} on {needle:?}");
        }
    }
}

#[cfg(not(debug_assertions))]
#[inline(always)]
pub fn maybe_panic(_site: &str, _text: &[u8]) {}
