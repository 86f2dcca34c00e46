//! Faults a test asks for, at named sites, to show what the daemon does
//! under them. Debug builds only; release builds compile them to nothing.
//!
//! - `SESSIONFS_TEST_PANIC=SITE:TEXT` panics at `SITE` when what it
//!   handles contains `TEXT` (the daemon survives it).
//! - `SESSIONFS_TEST_PAUSE=SITE:TEXT:MS` waits `MS` milliseconds there
//!   instead (a request the daemon is slow to answer).
//!
//! Sites: `lookup` (the name looked up), `output` (a chunk of a session's
//! output).

#[cfg(debug_assertions)]
fn spec(
    var: &'static str,
    cell: &'static std::sync::OnceLock<Option<(String, String)>>,
) -> Option<&'static (String, String)> {
    cell.get_or_init(|| {
        let spec = std::env::var(var).ok()?;
        let (site, text) = spec.split_once(':')?;
        (!text.is_empty()).then(|| (site.to_string(), text.to_string()))
    })
    .as_ref()
}

#[cfg(debug_assertions)]
fn matches(at: &str, needle: &str, site: &str, text: &[u8]) -> bool {
    at == site && text.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[cfg(debug_assertions)]
pub fn maybe_panic(site: &str, text: &[u8]) {
    static SPEC: std::sync::OnceLock<Option<(String, String)>> = std::sync::OnceLock::new();
    if let Some((at, needle)) = spec("SESSIONFS_TEST_PANIC", &SPEC) {
        if matches(at, needle, site, text) {
            panic!("test panic at {site} on {needle:?}");
        }
    }
}

#[cfg(debug_assertions)]
pub fn maybe_pause(site: &str, text: &[u8]) {
    static SPEC: std::sync::OnceLock<Option<(String, String)>> = std::sync::OnceLock::new();
    let Some((at, rest)) = spec("SESSIONFS_TEST_PAUSE", &SPEC) else {
        return;
    };
    let Some((needle, ms)) = rest.rsplit_once(':') else {
        return;
    };
    if let (true, Ok(ms)) = (matches(at, needle, site, text), ms.parse::<u64>()) {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}

#[cfg(not(debug_assertions))]
#[inline(always)]
pub fn maybe_panic(_site: &str, _text: &[u8]) {}

#[cfg(not(debug_assertions))]
#[inline(always)]
pub fn maybe_pause(_site: &str, _text: &[u8]) {}
