//! Serving a mount: start, signals, clean unmount.

use crate::config::Config;
use crate::core::Core;
use crate::error::{Error, Result};
use crate::fs::{Guarded, SessionFs};
use crate::mounting;
use fuser::{MountOption, SessionACL};
use nix::sys::signal::{SigSet, Signal};
use std::path::Path;

/// Options of `sessionfs mount`.
#[derive(Debug, Clone, Default)]
pub struct MountOptions {
    pub allow_other: bool,
    /// Mount over a directory that has files in it (they are hidden).
    pub nonempty: bool,
    /// `share=read`: other users may read (never write); without it every
    /// file and listing is the mount owner's alone, even with `allow_other`.
    pub share_read: bool,
}

/// Mounts at `mountpoint` and serves until unmounted or signalled. Sessions
/// keep running after it returns.
pub fn serve(config: Config, mountpoint: &Path, options: &MountOptions) -> Result<()> {
    let mountpoint = mountpoint
        .canonicalize()
        .map_err(|e| Error::io(&format!("mount point {}", mountpoint.display()), &e))?;
    // First: a mount whose daemon is gone fails every look with ENOTCONN.
    crate::mounting::check_mount_point(&mountpoint, options.nonempty)?;
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
        .map_err(|e| Error::new(e as i32, format!("cannot block signals: {e}")).with_source(e))?;

    release_big_buffers();
    raise_open_files_limit();
    let state_dir = config.state_dir.clone();
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
    // Request threads do only quick work: whatever may wait on a session
    // (input, ctl, launches, stops, archives) is answered from the core's pool.
    fuse_config.n_threads = Some(4);
    let as_root = nix::unistd::geteuid().is_root();
    // Every request goes through the panic guard.
    let mut fs = SessionFs::new(core.clone(), options.share_read)
        .map_err(|e| Error::io("cannot start the follow timer thread", &e))?;
    fs.on_ready(ready_line_printer(&core, &mountpoint));
    let files = fs.files().clone();
    let fs = Guarded(fs);
    // Recorded before the mount appears, so a command that sees the mount
    // finds the record (a client also checks the mount is there).
    if let Err(e) = crate::mounts::record(&state_dir, &mountpoint) {
        log::warn!("cannot record the mount for `sessionfs` commands: {e}");
    }
    let mounted = |e: std::io::Error| {
        crate::mounts::forget(&state_dir);
        Error::io(&format!("cannot mount {}", mountpoint.display()), &e)
    };
    // As root fuser would mount the type as plain `fuse`; mount it ourselves.
    let mut session = if as_root {
        let fd = mounting::mount_as_root(&mountpoint, options.allow_other)?;
        let acl = fuse_config.acl;
        fuser::Session::from_fd(fs, fd, acl, fuse_config).map_err(mounted)?
    } else {
        fuser::Session::new(fs, &mountpoint, &fuse_config).map_err(mounted)?
    };
    log::info!("mounted at {}", mountpoint.display());
    let device = std::os::fd::AsFd::as_fd(&session)
        .try_clone_to_owned()
        .map_err(|e| Error::io("cannot duplicate the FUSE device", &e))?;
    let notices = crate::fs::KernelNotices::new(session.notifier(), device);
    let evict = notices
        .try_clone()
        .and_then(crate::fs::entry_eviction::start)
        .map_err(|e| Error::io("cannot start the entry-eviction thread", &e))?;
    files.on_evict(evict);
    let moved = crate::fs::MovedEntries::start(notices, mountpoint.clone())
        .map_err(|e| Error::io("cannot start the moved-entries thread", &e))?;
    let moved = std::sync::Arc::new(moved);
    let for_moves = moved.clone();
    // Weak: the core holds the hook.
    let weak_core = std::sync::Arc::downgrade(&core);
    core.on_moved(crate::core::MovesHook(Box::new(move |keys| {
        let Some(core) = weak_core.upgrade() else {
            return;
        };
        let moves = keys
            .iter()
            .map(|key| (key.clone(), core.is_archived(key)))
            .collect();
        for_moves.sessions_moved(moves)
    })));
    // Weak: the core holds the hook, and the files hold the core.
    let weak_files = std::sync::Arc::downgrade(&files);
    core.on_members_changed(crate::core::SessionHook(Box::new(move |key| {
        if let Some(files) = weak_files.upgrade() {
            moved.links_changed(key, files.referenced_links_of(key));
        }
    })));
    let mut unmounter = session.unmount_callable();
    let signal_mountpoint = mountpoint.clone();
    let stopping_core = core.clone();
    let signal_state_dir = state_dir.clone();
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let signal = signals.wait();
            log::info!("{signal:?}: unmounting {}", signal_mountpoint.display());
            stopping_core.stamp_activity();
            let result = if as_root {
                mounting::unmount_as_root(&signal_mountpoint)
            } else {
                unmounter
                    .unmount()
                    .map_err(|e| Error::io("unmount failed", &e))
                    .or_else(|e| {
                        // Still busy (a reader holds a file open): detach it lazily.
                        log::info!("{}; detaching lazily", e.message);
                        lazy_unmount(&signal_mountpoint)
                    })
            };
            if let Err(e) = result {
                log::error!("{}", e.message);
            }
            crate::mounts::forget(&signal_state_dir);
            say_unmounted(&signal_mountpoint);
            std::process::exit(0);
        })
        .map_err(|e| Error::io("cannot start the signal thread", &e))?;
    session
        .run()
        .map_err(|e| Error::io("serving the mount failed", &e))?;
    log::info!("unmounted {}", mountpoint.display());
    crate::mounts::forget(&state_dir);
    say_unmounted(&mountpoint);
    Ok(())
}

fn lazy_unmount(mount_point: &Path) -> Result<()> {
    let status = std::process::Command::new("fusermount3")
        .args(["-u", "-z"])
        .arg(mount_point)
        .status()
        .map_err(|e| Error::io("cannot run fusermount3", &e))?;
    if status.success() {
        Ok(())
    } else {
        Err(Error::new(
            libc::EBUSY,
            format!("fusermount3 -u -z: {status}"),
        ))
    }
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

/// Every live session holds a socket and its kept ring open: the soft limit
/// on open files (often 1024) goes up to the hard one. The masters and
/// programs it starts get the user's own limit back (see
/// [`crate::runtime::launch`]).
fn raise_open_files_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return;
    };
    if soft >= hard {
        return;
    }
    match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
        Ok(()) => crate::runtime::launch::keep_user_open_files_limit(soft),
        Err(e) => log::warn!("cannot raise the open files limit from {soft} to {hard}: {e}"),
    }
}

/// Prints one line to stdout once the kernel has connected: where the
/// mount is, how many sessions it lists, and two commands to try. Counted
/// on a thread of its own, off the request threads; nothing here asks the
/// mount itself (a daemon waiting on its own mount as it exits would never
/// end).
fn ready_line_printer(
    core: &std::sync::Arc<Core>,
    mountpoint: &Path,
) -> Box<dyn FnOnce() + Send + Sync> {
    let (core, mountpoint) = (core.clone(), mountpoint.to_path_buf());
    Box::new(move || {
        let spawned = std::thread::Builder::new()
            .name("ready".into())
            .spawn(move || println!("{}", ready_line(&mountpoint, core.session_count())));
        if let Err(e) = spawned {
            log::debug!("cannot start the ready thread: {e}");
        }
    })
}

fn ready_line(mountpoint: &Path, sessions: usize) -> String {
    let m = mountpoint.display();
    let found = match sessions {
        1 => "1 session".to_string(),
        n => format!("{n} sessions"),
    };
    format!(
        "sessionfs: ready at {m} with {found}; try `ls {m}`, or `mkdir {m}/shell:demo && echo 'echo hi' > {m}/shell:demo/input && tail -f {m}/shell:demo/scrollback`"
    )
}

/// One plain line when the mount goes, whichever way it went (a signal,
/// or `fusermount3 -u`), printed once. The second caller waits until the
/// first has printed it: the process may end as soon as either returns.
fn say_unmounted(mountpoint: &Path) {
    static SAID: std::sync::Mutex<bool> = std::sync::Mutex::new(false);
    let mut said = crate::sync::lock(&SAID);
    if !*said {
        println!(
            "sessionfs: unmounted {}; the sessions keep running, and the next mount reattaches them",
            mountpoint.display()
        );
        *said = true;
    }
}
