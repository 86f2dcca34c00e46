//! Listings carry their entries' attributes (READDIRPLUS): `ls -l` of the
//! root with many sessions, or of one session's directory, is not one
//! lookup per entry; the lookups a listing hands the kernel are forgotten
//! like any other.

mod common;

use common::{require, require_root, sh_ok, wait_for, Host, Mount};

const SESSIONS: usize = 60;

/// The tests count the kernel's lookups, and one drops the machine's
/// caches: they run one at a time.
fn alone() -> std::sync::MutexGuard<'static, ()> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Lookups the daemon has answered: each is a line of its log at `trace`.
fn lookups(m: &Mount) -> usize {
    m.log_text().matches("] lookup \"").count()
}

/// A host whose daemons log a line per lookup.
fn traced() -> Host {
    Host::new().with_env("RUST_LOG", "info,sessionfs::core::tree::requests=trace")
}

fn inodes(m: &Mount) -> u64 {
    m.json("status")["inodes"].as_u64().expect("status.inodes")
}

/// Lets the kernel drop every entry and inode it does not use: each
/// inode it held goes back with a forget. False where `/proc/sys` is
/// read-only (a container).
fn drop_caches() -> bool {
    std::fs::write("/proc/sys/vm/drop_caches", "2").is_ok()
}

/// Lookups the daemon answered for `ls -l PATH`, nothing in `PATH` looked
/// up before; and the lines `ls` printed.
fn lookups_of_ls_l(m: &Mount, rel: &str) -> (usize, usize) {
    let before = lookups(m);
    let out = sh_ok(&format!("LC_ALL=C ls -l {}", m.q(rel)));
    let after = lookups(m);
    (after - before, out.lines().count())
}

#[test]
fn ls_l_takes_attributes_from_the_listing() {
    let _alone = alone();
    let host = traced();
    let mut m = host.mount("mnt");
    for i in 0..SESSIONS {
        std::fs::create_dir(m.path(&format!("shell:s{i:02}"))).unwrap();
    }
    // A new mount: the kernel holds nothing of it.
    m.terminate();
    let m = host.mount("mnt");
    // The root: one line per session besides the root's own files, and
    // lookups for a few of those only.
    let (root_lookups, lines) = lookups_of_ls_l(&m, "");
    assert!(lines > SESSIONS, "{lines} lines");
    eprintln!("ls -l of the root with {SESSIONS} sessions: {root_lookups} lookups");
    assert!(
        root_lookups < 10,
        "ls -l of {SESSIONS} sessions took {root_lookups} lookups"
    );
    // A session's directory. Without attributes in the listing `ls -l`
    // looks up each file and the directory, and the five metadata files
    // (whose entries are never kept) once more for its ACL query; with
    // them, `input`, `ctl` and `prompt` (kept) are not looked up. The
    // others' entries are kept for no time: `ls` asks for them again.
    let (dir_lookups, lines) = lookups_of_ls_l(&m, "shell:s07");
    let files = sh_ok(&format!("ls -A {}", m.q("shell:s07")))
        .lines()
        .count();
    assert_eq!(lines, files + 1, "ls -l prints a total and each file");
    eprintln!("ls -l of a session's {files} files: {dir_lookups} lookups");
    let without = files + 1 + 5;
    assert!(
        dir_lookups + 3 <= without,
        "ls -l of {files} files took {dir_lookups} lookups"
    );
    // Attributes from the listing are the ones a lookup gives.
    let listed = sh_ok(&format!(
        "LC_ALL=C ls -ln --time-style=+%s {}",
        m.q("shell:s07")
    ));
    let stat = |name: &str| {
        sh_ok(&format!(
            "stat -c '%A %s' {}",
            m.q(&format!("shell:s07/{name}"))
        ))
    };
    for name in ["input", "ctl", "meta.json", "title"] {
        let line = listed
            .lines()
            .find(|l| l.ends_with(&format!(" {name}")))
            .unwrap_or_else(|| panic!("{name} in {listed}"));
        let want = stat(name);
        let mut want = want.split_whitespace();
        let (mode, size) = (want.next().unwrap(), want.next().unwrap());
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(fields[0], mode, "{line}");
        assert_eq!(fields[4], size, "{line}");
    }
}

/// A view's links come with the listing and are kept for a moment: `ls
/// -l` of a view (a `lstat` and a `readlink` a link) looks none up.
#[test]
fn ls_l_of_a_view_looks_no_link_up() {
    let _alone = alone();
    let host = traced();
    let mut m = host.mount("mnt");
    for i in 0..SESSIONS {
        let key = format!("shell:v{i:02}");
        std::fs::create_dir(m.path(&key)).unwrap();
        std::fs::write(m.path(&format!("{key}/favourite")), "1\n").unwrap();
    }
    m.terminate();
    let m = host.mount("mnt");
    let (view_lookups, lines) = lookups_of_ls_l(&m, "favourites");
    assert_eq!(lines, SESSIONS + 1, "a total and each link");
    eprintln!("ls -l of a view of {SESSIONS} links: {view_lookups} lookups");
    assert!(
        view_lookups < 10,
        "ls -l of {SESSIONS} links took {view_lookups} lookups"
    );
}

#[test]
fn lookups_a_listing_hands_out_are_forgotten() {
    let _alone = alone();
    let test = "lookups_a_listing_hands_out_are_forgotten";
    if !require_root(test, "it writes /proc/sys/vm/drop_caches")
        || !require(
            test,
            "a writable /proc/sys/vm/drop_caches",
            drop_caches(),
            Some("SESSIONFS_SKIP_DROP_CACHES"),
        )
    {
        return;
    }
    let host = Host::new();
    let m = host.mount("mnt");
    for i in 0..SESSIONS {
        let key = format!("shell:f{i:02}");
        std::fs::create_dir(m.path(&key)).unwrap();
        std::fs::write(m.path(&format!("{key}/favourite")), "1\n").unwrap();
    }
    // The links of `favourites/` are numbered while the kernel holds them.
    drop_caches();
    wait_for(10, "the kernel to forget what setting up held", || {
        let before = inodes(&m);
        drop_caches();
        inodes(&m) == before
    });
    let before = inodes(&m);
    let out = sh_ok(&format!("LC_ALL=C ls -l {}", m.q("favourites")));
    assert_eq!(out.lines().count(), SESSIONS + 1, "{out}");
    let held = inodes(&m);
    assert!(
        held >= before + SESSIONS as u64,
        "{held} numbers while the kernel holds {SESSIONS} links (from {before})"
    );
    // Every lookup the listing counted comes back as a forget.
    drop_caches();
    wait_for(10, "the listing's lookups to be forgotten", || {
        inodes(&m) == before
    });
}
