//! Serving a mount: start, signals, clean unmount.

use crate::config::Config;
use crate::core::Core;
use crate::error::{Error, Result};
use crate::fs::SessionFs;
use fuser::{MountOption, SessionACL};
use nix::sys::signal::{SigSet, Signal};
use std::path::Path;

/// Options of `sessionfs mount`.
#[derive(Debug, Clone, Default)]
pub struct MountOptions {
    pub allow_other: bool,
}

/// Mounts at `mountpoint` and serves until unmounted or signalled. Sessions
/// keep running after it returns.
pub fn serve(config: Config, mountpoint: &Path, options: &MountOptions) -> Result<()> {
    let mountpoint = mountpoint
        .canonicalize()
        .map_err(|e| Error::io(&format!("mount point {}", mountpoint.display()), &e))?;
    if !mountpoint.is_dir() {
        return Err(Error::new(
            libc::ENOTDIR,
            format!("mount point {} is not a directory", mountpoint.display()),
        ));
    }
    // Signals go to the one thread that waits for them, never to a request thread.
    let mut signals = SigSet::empty();
    for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        signals.add(s);
    }
    signals
        .thread_block()
        .map_err(|e| Error::new(e as i32, format!("cannot block signals: {e}")))?;

    release_big_buffers();
    let core = Core::new(config, &mountpoint)?;
    core.attach_live();

    let mut fuse_config = fuser::Config::default();
    fuse_config.mount_options = vec![
        MountOption::FSName("sessionfs".into()),
        MountOption::Subtype("sessionfs".into()),
        MountOption::DefaultPermissions,
        MountOption::NoDev,
        MountOption::NoSuid,
    ];
    fuse_config.acl = if options.allow_other {
        SessionACL::All
    } else {
        SessionACL::Owner
    };
    // Several request threads: opening a session (a launch) must not stall reads.
    fuse_config.n_threads = Some(4);
    let mut session = fuser::Session::new(SessionFs::new(core), &mountpoint, &fuse_config)
        .map_err(|e| Error::io(&format!("cannot mount {}", mountpoint.display()), &e))?;
    log::info!("mounted at {}", mountpoint.display());
    let mut unmounter = session.unmount_callable();
    let signal_mountpoint = mountpoint.clone();
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let signal = signals.wait();
            log::info!("{signal:?}: unmounting {}", signal_mountpoint.display());
            if let Err(e) = unmounter.unmount() {
                // Still busy (a reader holds a file open): detach it lazily and go.
                log::warn!("unmount failed ({e}); detaching lazily");
                let _ = std::process::Command::new("fusermount3")
                    .args(["-u", "-z"])
                    .arg(&signal_mountpoint)
                    .status();
            }
            std::process::exit(0);
        })
        .map_err(|e| Error::io("cannot start the signal thread", &e))?;
    session
        .run()
        .map_err(|e| Error::io("serving the mount failed", &e))?;
    log::info!("unmounted {}", mountpoint.display());
    Ok(())
}

/// Listings of many sessions make buffers of megabytes on every request
/// thread. glibc's default raises its mmap threshold to the size of the
/// largest buffer freed, after which freed buffers stay in each thread's
/// arena: measured at 10,000 conversations, the daemon held twice the
/// memory it used. A fixed threshold keeps big buffers mmapped, so freeing
/// one returns it to the system.
fn release_big_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        const THRESHOLD: libc::c_int = 128 << 10;
        // SAFETY: mallopt only sets an allocator parameter; glibc takes the
        // arena locks itself, and any value is valid for M_MMAP_THRESHOLD.
        let set = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, THRESHOLD) };
        if set != 1 {
            log::debug!("mallopt(M_MMAP_THRESHOLD) was refused");
        }
    }
}
