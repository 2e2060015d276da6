//! Working with a kept run as a person would, on a real VM: `vmrepro run
//! --keep=on-failure` in a terminal (tmux), `vmrepro shell` in a second one (typed
//! into with `send-keys`, read with `capture-pane`), `vmrepro images list|gc` while
//! the run holds its cache entries, then `vmrepro stop` and the leftovers checker.
//!
//! Needs what `tests/failures.rs` needs, plus tmux (installed by `.ci/install-deps`).
//! The run uses a cache of its own: hard links to the real cache's entries (so gc
//! here never touches the real cache, and nothing is copied).

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use support::*;
use vmrepro::exit::{SUCCESS, TEST_FAILURE};

const LIMIT: Duration = Duration::from_secs(240);

/// A tmux server of our own (`-L`), killed on drop.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn new(test: &str) -> Tmux {
        let t = Tmux { socket: format!("vmrepro-test-{test}-{}", std::process::id()) };
        let ok = Command::new("tmux").arg("-V").output().is_ok_and(|o| o.status.success());
        assert!(ok, "tmux is needed to drive the terminal (apt-get install tmux; .ci/install-deps does)");
        t
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.arg("-L").arg(&self.socket);
        c
    }

    /// Opens window `name` running `line` (a shell command line) in a 150×40 terminal.
    fn window(&self, name: &str, line: &str) {
        let has_session = self.cmd().args(["has-session", "-t", "ops"]).output().is_ok_and(|o| o.status.success());
        let mut c = self.cmd();
        if has_session {
            c.args(["new-window", "-t", "ops", "-n", name, line]);
        } else {
            c.args(["new-session", "-d", "-s", "ops", "-n", name, "-x", "150", "-y", "40", line]);
        }
        let out = c.output().expect("tmux");
        assert!(out.status.success(), "tmux: {}", String::from_utf8_lossy(&out.stderr));
    }

    fn keys(&self, window: &str, keys: &[&str]) {
        let out = self.cmd().args(["send-keys", "-t", &format!("ops:{window}")]).args(keys).output().expect("tmux");
        assert!(out.status.success(), "tmux send-keys: {}", String::from_utf8_lossy(&out.stderr));
    }

    fn screen(&self, window: &str) -> String {
        let out = self
            .cmd()
            .args(["capture-pane", "-p", "-J", "-S", "-200", "-t", &format!("ops:{window}")])
            .output()
            .expect("tmux");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits until `needle` is on window `window`'s screen; returns the screen.
    fn wait_for(&self, window: &str, needle: &str, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let s = self.screen(window);
            if s.contains(needle) {
                return s;
            }
            assert!(Instant::now() < deadline, "{needle:?} did not appear in window {window} within {limit:?}:\n{s}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Tmux {
    /// Kills the server and waits for it to be gone (its command line names the
    /// sandbox: the leftovers checker would report it).
    fn drop(&mut self) {
        let pid = self.cmd().args(["display-message", "-p", "#{pid}"]).output().ok();
        let pid = pid.and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse::<u32>().ok());
        let _ = self.cmd().arg("kill-server").output();
        let deadline = Instant::now() + Duration::from_secs(10);
        while pid.is_some_and(|p| Path::new(&format!("/proc/{p}")).exists()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// `s` quoted for a POSIX shell.
fn sh(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A cache for this test: hard links to the real cache's entries (and its KVM probe).
fn linked_cache(dir: &Path) {
    let real = vmrepro::infra::images::Cache::from_env().root().to_path_buf();
    std::fs::create_dir_all(dir).unwrap();
    for kind in ["debs", "kernel", "rootfs"] {
        if real.join(kind).is_dir() {
            let out = Command::new("cp").arg("-al").arg(real.join(kind)).arg(dir).output().unwrap();
            assert!(out.status.success(), "cp -al: {}", String::from_utf8_lossy(&out.stderr));
            // Not the lock files: linked, they would be the real cache's locks.
            for e in std::fs::read_dir(dir.join(kind)).unwrap().flatten() {
                if e.path().extension().is_some_and(|x| x == "lock") {
                    std::fs::remove_file(e.path()).unwrap();
                }
            }
        }
    }
    let _ = std::fs::copy(real.join("accel-probe.json"), dir.join("accel-probe.json"));
}

fn vmrepro(cache: &Path, args: &[&str]) -> (i32, String) {
    let out = Command::new(vmrepro_bin())
        .args(args)
        .env("VMREPRO_CACHE_DIR", cache)
        .env("VMREPRO_IMAGES", repo_root().join("images"))
        .output()
        .expect("running vmrepro");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().expect("exited"), text)
}

#[test]
fn a_kept_vm_can_be_shelled_into_its_entries_survive_gc_and_stop_leaves_nothing() {
    let _lock = vm_lock();
    let sb = Sandbox::new("keep-shell-stop");
    let cache = sb.root.join("cache");
    linked_cache(&cache);
    let suite_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ops-suites");
    let suite = suite_dir.join("keep-on-failure.yaml");
    // The catalog, so that entries of this suite can be told from the others.
    let catalog = vmrepro::infra::images::Catalog::load(&repo_root().join("images")).unwrap();
    let (suites, problems) = vmrepro::suite::images_of(std::slice::from_ref(&suite), &catalog.dir);
    let usage = vmrepro::infra::images::gc::scan(&catalog, &suites, problems);
    let used: Vec<(String, String)> = usage.suites.keys().cloned().collect();
    assert_eq!(used.len(), 3, "the suite needs a rootfs, a kernel and its package: {used:?}");

    let tmux = Tmux::new("keep");
    let run_line = format!(
        "cd {} && env TMPDIR={} VMREPRO_CACHE_DIR={} {} run --keep=on-failure {} --results {}; echo RUN-EXITED $?; sleep 3600",
        sh(&repo_root().display().to_string()),
        sh(&sb.tmp.display().to_string()),
        sh(&cache.display().to_string()),
        sh(&vmrepro_bin().display().to_string()),
        sh(&suite.display().to_string()),
        sh(&sb.results.display().to_string()),
    );
    tmux.window("run", &run_line);
    let screen = tmux.wait_for("run", "stop them:", LIMIT);
    assert!(screen.contains("kept running (--keep): alpha; steps: 1 failed, 1 passed (alpha/broken)"), "{screen}");
    let run_dir = sb.run_dir();
    let run_dir_s = run_dir.display().to_string();
    assert!(screen.contains(&format!("vmrepro shell {run_dir_s} alpha")), "the notice says how to reach it:\n{screen}");

    // While the run lives, its entries are held: list marks them, gc keeps them.
    let (code, list) = vmrepro(&cache, &["images", "list", &suite_dir.display().to_string()]);
    assert_eq!(code, SUCCESS, "{list}");
    let held: Vec<&str> = list.lines().filter(|l| l.contains("[held by a running suite")).collect();
    assert_eq!(held.len(), 2, "the rootfs and the kernel are held:\n{list}");
    let (code, gc) = vmrepro(&cache, &["images", "gc", "--older-than", "0s", &suite_dir.display().to_string()]);
    assert_eq!(code, SUCCESS, "{gc}");
    let kept: Vec<&str> = gc.lines().filter(|l| l.starts_with("kept ")).collect();
    assert_eq!(kept.len(), 2, "gc keeps the held rootfs and kernel:\n{gc}");
    for (kind, key) in &used {
        if kind != "debs" {
            assert!(cache.join(kind).join(key).is_dir(), "{kind}/{key} must survive gc while the run holds it\n{gc}");
        }
    }
    assert!(gc.contains("removed "), "what is not held goes:\n{gc}");

    // A shell, as a person uses it.
    let release = read_json(&run_dir.join("run.json"))["vms"][0]["kernel_release"].as_str().unwrap().to_string();
    let shell_line = |w: &str| {
        format!(
            "{} shell {} alpha; echo SHELL-EXITED-{w} $?; sleep 3600",
            sh(&vmrepro_bin().display().to_string()),
            sh(&run_dir_s)
        )
    };
    tmux.window("sh1", &shell_line("1"));
    tmux.wait_for("sh1", "connected to VM alpha", LIMIT);
    tmux.keys("sh1", &["uname -r; stty size; tty", "Enter"]);
    // `tty` answers last: wait for it, then read the whole answer off the screen.
    let s = tmux.wait_for("sh1", "/dev/ttyS1", Duration::from_secs(30));
    assert!(s.contains(&release), "{s}");
    assert!(s.contains("40 150"), "the terminal's size is passed on:\n{s}");
    tmux.keys("sh1", &["sleep 300", "Enter"]);
    std::thread::sleep(Duration::from_secs(1));
    tmux.keys("sh1", &["C-c"]);
    tmux.keys("sh1", &["echo rc=$?", "Enter"]);
    tmux.wait_for("sh1", "rc=130", Duration::from_secs(30));
    // A second client is refused while the first is attached.
    let (code, busy) = vmrepro(&cache, &["shell", &run_dir_s, "alpha"]);
    assert_eq!(code, vmrepro::exit::CONFIG_ERROR, "{busy}");
    assert!(busy.contains("another `vmrepro shell` is attached"), "{busy}");
    tmux.keys("sh1", &["C-]"]);
    tmux.wait_for("sh1", "SHELL-EXITED-1 0", Duration::from_secs(30));
    assert!(tmux.screen("sh1").contains("detached from alpha"));
    // Attach again: the same shell, still there; `exit` ends it and the client.
    tmux.window("sh2", &shell_line("2"));
    tmux.wait_for("sh2", "connected to VM alpha", LIMIT);
    tmux.keys("sh2", &["echo second-$((6*7))", "Enter"]);
    tmux.wait_for("sh2", "second-42", Duration::from_secs(30));
    tmux.keys("sh2", &["exit", "Enter"]);
    tmux.wait_for("sh2", "SHELL-EXITED-2 0", Duration::from_secs(30));
    assert!(tmux.screen("sh2").contains("the shell on alpha ended"));

    // Stop: the run tears down, prints its summary and exits with the steps' code.
    let (code, stop) = vmrepro(&cache, &["stop", &run_dir_s]);
    assert_eq!(code, SUCCESS, "{stop}");
    assert!(stop.contains(&format!("stopped run {run_dir_s}: failed")), "{stop}");
    let screen = tmux.wait_for("run", "RUN-EXITED", Duration::from_secs(30));
    assert!(screen.contains(&format!("RUN-EXITED {TEST_FAILURE}")), "{screen}");
    let run = read_json(&run_dir.join("run.json"));
    assert_eq!(run["status"], "failed");
    assert_eq!(step(&run, "alpha", "broken")["exit_code"], 3);
    assert_eq!(vm(&run, "alpha")["ending"], "quit");
    let (code, again) = vmrepro(&cache, &["stop", &run_dir_s]);
    assert_eq!(code, SUCCESS, "{again}");
    assert!(again.contains("nothing to stop"), "{again}");
    drop(tmux);
    sb.assert_no_leftovers();

    // Released: gc can take everything now.
    let (code, gc) = vmrepro(&cache, &["images", "gc", "--older-than", "0s", &suite_dir.display().to_string()]);
    assert_eq!(code, SUCCESS, "{gc}");
    assert!(!gc.lines().any(|l| l.starts_with("kept ")), "{gc}");
    let left: Vec<PathBuf> =
        vmrepro::infra::images::Cache::new(cache.clone()).list().into_iter().map(|e| e.2).collect();
    assert!(left.is_empty(), "{left:?}");
}

/// What one run of the saved-state fixture did, per VM: (start, state_saved, the
/// identity step's stdout).
fn saved_state_run(sb: &Sandbox, cache: &Path, suite: &Path) -> (Finished, Vec<(String, String, bool, String)>) {
    let mut cmd = sb.command(suite);
    cmd.env("VMREPRO_CACHE_DIR", cache).env("VMREPRO_IMAGES", repo_root().join("images"));
    let fin = sb.run(cmd, LIMIT);
    assert_eq!(fin.code, SUCCESS, "the run must pass; output:\n{}", fin.output);
    let dir = sb.run_dirs().into_iter().max().expect("a run folder");
    let run = read_json(&dir.join("run.json"));
    let rows = ["east", "west"]
        .iter()
        .map(|name| {
            let v = vm(&run, name);
            let out = std::fs::read_to_string(dir.join("vms").join(name).join("01-identity.stdout")).unwrap();
            (
                name.to_string(),
                v["start"].as_str().unwrap_or_default().to_string(),
                v["state_saved"].as_bool().unwrap_or_default(),
                out,
            )
        })
        .collect();
    (fin, rows)
}

/// Each VM has its own host name, MAC and address, and a clock within a minute of the
/// host's, however it started.
fn assert_identities(rows: &[(String, String, bool, String)], run: &serde_json::Value) {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    for (name, _, _, out) in rows {
        let lines: Vec<&str> = out.lines().collect();
        let v = vm(run, name);
        assert_eq!(lines.first(), Some(&name.as_str()), "host name of {name}: {out}");
        assert_eq!(lines.get(1).copied(), v["mac"].as_str(), "MAC of {name}: {out}");
        assert!(
            lines.get(2).is_some_and(|l| l.contains(&format!("inet {}", v["address"].as_str().unwrap()))),
            "address of {name}: {out}"
        );
        let clock: i64 = lines.get(3).and_then(|l| l.trim().parse().ok()).expect("date +%s");
        assert!((now - clock).abs() < 60, "clock of {name} is {clock}, host {now}");
    }
    // The generator is reseeded with host randomness: two clones of one saved guest
    // draw different bytes.
    let drawn: Vec<&str> = rows.iter().map(|r| r.3.lines().nth(4).unwrap_or_default()).collect();
    assert!(drawn.iter().all(|d| d.len() == 32), "16 bytes each: {drawn:?}");
    assert_ne!(drawn[0], drawn[1], "two VMs drew the same random bytes");
}

#[test]
fn a_kinds_state_is_saved_once_restored_later_and_a_broken_one_is_booted_instead() {
    let _lock = vm_lock();
    let sb = Sandbox::new("saved-state");
    let cache = sb.root.join("cache");
    linked_cache(&cache);
    let suite = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ops-suites/saved-state.yaml");
    let last_run = || read_json(&sb.run_dirs().into_iter().max().unwrap().join("run.json"));

    // 1. No saved state: both boot, one of them saves the kind's state.
    let (fin, rows) = saved_state_run(&sb, &cache, &suite);
    assert!(rows.iter().all(|r| r.1 == "booted"), "{rows:?}");
    assert_eq!(rows.iter().filter(|r| r.2).count(), 1, "exactly one VM saves the kind's state: {rows:?}");
    assert!(fin.output.contains("saved its state"), "{}", fin.output);
    assert_identities(&rows, &last_run());
    let states: Vec<PathBuf> =
        std::fs::read_dir(cache.join("vmstate")).unwrap().flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect();
    assert_eq!(states.len(), 1, "one kind, one entry: {states:?}");
    for f in ["state", "ram", "root.qcow2", "console.log", "meta.json"] {
        assert!(states[0].join(f).is_file(), "the entry has {f}");
    }
    // Mapped RAM (the default): the guest's memory is a file of its size, the migration
    // stream only the device state.
    let run = last_run();
    assert!(vms(&run).iter().all(|v| v["state_ram"] == "mapped"), "{run}");
    let memory_mib = read_json(&sb.run_dirs().into_iter().max().unwrap().join("plan.json"))["vms"][0]["memory_mib"]
        .as_u64()
        .expect("plan.json: vms[0].memory_mib");
    assert_eq!(std::fs::metadata(states[0].join("ram")).unwrap().len(), memory_mib << 20);
    let stream = std::fs::metadata(states[0].join("state")).unwrap().len();
    assert!(stream < 8 << 20, "the stream holds no RAM: {stream} bytes");

    // 2. Both start from it, each with its own identity, and reach each other.
    let (fin, rows) = saved_state_run(&sb, &cache, &suite);
    assert!(rows.iter().all(|r| r.1 == "restored" && !r.2), "{rows:?}\n{}", fin.output);
    assert_identities(&rows, &last_run());
    let dir = sb.run_dirs().into_iter().max().unwrap();
    let console = std::fs::read_to_string(dir.join("vms/east/console.log")).unwrap();
    assert!(console.contains("the boot log below is the saved guest's"), "{console}");
    assert!(console.contains("Linux version"), "the saved boot log is kept: {console}");

    // 3. A state QEMU can't load: both VMs boot instead, with a notice, the damaged
    //    state is removed and saved again, and the run passes; the next run restores.
    let state = states[0].join("state");
    let f = std::fs::OpenOptions::new().write(true).open(&state).unwrap();
    f.set_len(4096).unwrap();
    let (fin, rows) = saved_state_run(&sb, &cache, &suite);
    assert!(rows.iter().all(|r| r.1 == "booted"), "{rows:?}");
    assert!(fin.output.contains("the saved state can't be used (QEMU could not load it"), "{}", fin.output);
    assert!(fin.output.contains("the state was removed and will be saved again"), "{}", fin.output);
    assert_eq!(rows.iter().filter(|r| r.2).count(), 1, "the kind's state is saved again: {rows:?}");
    assert_identities(&rows, &last_run());
    let dir = sb.run_dirs().into_iter().max().unwrap();
    for f in ["qemu.restore-stderr", "console.restore.log"] {
        assert!(dir.join("vms/east").join(f).is_file(), "the failed restore's {f} is kept");
    }
    let cmdline = std::fs::read_to_string(dir.join("vms/east/qemu-cmdline.txt")).unwrap();
    assert!(!cmdline.contains("-incoming"), "qemu-cmdline.txt is the booting QEMU's: {cmdline}");
    let (_, rows) = saved_state_run(&sb, &cache, &suite);
    assert!(rows.iter().all(|r| r.1 == "restored"), "{rows:?}");

    // A damaged entry found before QEMU starts: both VMs boot with a notice naming it,
    // the entry is saved again, and the next run restores.
    let booted_instead_then_restored = |notice: &str| {
        let (fin, rows) = saved_state_run(&sb, &cache, &suite);
        assert!(rows.iter().all(|r| r.1 == "booted"), "{rows:?}");
        assert!(fin.output.contains(notice), "{}", fin.output);
        assert_eq!(rows.iter().filter(|r| r.2).count(), 1, "the kind's state is saved again: {rows:?}");
        let (_, rows) = saved_state_run(&sb, &cache, &suite);
        assert!(rows.iter().all(|r| r.1 == "restored"), "{rows:?}");
    };
    // 3b. A saved overlay qemu-img can't open.
    std::fs::write(states[0].join("root.qcow2"), b"not a qcow2 image").unwrap();
    booted_instead_then_restored("can't be used (creating overlay");
    // 3c. A RAM file that is not the guest's size (cut short).
    let ram = std::fs::OpenOptions::new().write(true).open(states[0].join("ram")).unwrap();
    ram.set_len(1 << 20).unwrap();
    booted_instead_then_restored("ram is missing, not a regular file, or not");

    // 4. `--fresh-boot` boots and saves nothing.
    std::fs::remove_dir_all(&states[0]).unwrap();
    let mut cmd = sb.command(&suite);
    cmd.arg("--fresh-boot").env("VMREPRO_CACHE_DIR", &cache).env("VMREPRO_IMAGES", repo_root().join("images"));
    let fin = sb.run(cmd, LIMIT);
    assert_eq!(fin.code, SUCCESS, "{}", fin.output);
    let run = last_run();
    assert!(vms(&run).iter().all(|v| v["start"] == "booted" && v["state"].is_null()), "{run}");
    assert_eq!(std::fs::read_dir(cache.join("vmstate")).unwrap().flatten().filter(|e| e.path().is_dir()).count(), 0);
    sb.assert_no_leftovers();
}
