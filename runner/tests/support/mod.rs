//! Helpers shared by the test binaries:
//!
//! - [`repo_root`], [`snapshot_settings`], [`regex_literal`]: where things are, and the
//!   insta settings every snapshot test uses (snapshots in `<repo>/snapshots`, plain
//!   names, the repository path redacted);
//!
//! and, for the tests that boot real VMs and make them fail (`tests/failures.rs`):
//!
//! - [`vm_lock`]: one VM test at a time (the lock file `tests/suites.rs` uses too), and
//!   [`beside_lock`] for the suites that run beside it;
//! - [`Sandbox`]: a fresh folder per test holding the `TMPDIR` and results folder of the
//!   `vmrepro` processes it starts, and what the host looked like before;
//! - [`Runner`]: `vmrepro run` as a child process, its progress lines timestamped;
//! - [`Sandbox::assert_no_leftovers`]: the leftovers checker every test ends with;
//! - [`MountNs`]: a private mount namespace (for a read-only or tiny cache folder);
//! - [`FileServer`]: a one-file HTTP server standing in for the Debian archive;
//!
//! and [`wire_check`]: a capture against the client's own counters (issue 28).

#![allow(dead_code)] // each test binary uses a subset

pub mod wire_check;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The `vmrepro` binary the tests run: `$VMREPRO_BIN` if set (a copy of this
/// worktree's binary when several worktrees share one target folder, and with it one
/// `target/debug/vmrepro`), else the one cargo built for this test.
pub fn vmrepro_bin() -> PathBuf {
    std::env::var_os("VMREPRO_BIN").map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_vmrepro")), PathBuf::from)
}

/// The tests' scratch folder: `$VMREPRO_TEST_TMPDIR` if set (e.g. for a user who
/// can't write to the build's target folder, or a CI shard that uploads what is in
/// it), else cargo's `CARGO_TARGET_TMPDIR`. Created if missing (a nextest archive
/// run elsewhere doesn't have it).
pub fn test_tmpdir() -> PathBuf {
    let dir = std::env::var_os("VMREPRO_TEST_TMPDIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")), PathBuf::from);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    dir
}

/// The recorded run folders under `tests/fixtures/runs/` (see their README), sorted.
pub fn recorded_runs() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/runs");
    let mut dirs: Vec<PathBuf> =
        std::fs::read_dir(&root).expect("fixtures/runs").flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect();
    dirs.sort();
    assert!(dirs.len() >= 2, "expected recorded runs in {}", root.display());
    dirs
}

/// A private copy of a recorded run folder (analysis writes `results.json` and `nfs/`
/// into it; a test may edit it).
pub fn copy_run(fixture: &Path) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("tempdir");
    let status = Command::new("cp").arg("-r").arg(format!("{}/.", fixture.display())).arg(tmp.path()).status();
    assert!(status.is_ok_and(|s| s.success()), "copying {}", fixture.display());
    tmp
}

/// The project's root folder (canonical).
pub fn repo_root() -> PathBuf {
    std::fs::canonicalize(Path::new(env!("CARGO_MANIFEST_DIR")).join("..")).expect("the repository root")
}

/// Escapes `s` for use as a literal in an insta filter (a regex).
pub fn regex_literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Snapshot settings of every snapshot test: snapshots in `<repo>/snapshots`, names as
/// given (no module prefix), no expression, and the repository's path replaced by
/// `[repo]` (so paths read the same on every machine).
pub fn snapshot_settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path(repo_root().join("snapshots"));
    s.set_prepend_module_to_snapshot(false);
    s.set_omit_expression(true);
    s.add_filter(&regex_literal(&repo_root().display().to_string()), "[repo]");
    s
}

/// [`snapshot_settings`], but paths under the repository read relative to it
/// (`runner/tests/…`), as when `vmrepro` runs at the repository's root.
pub fn snapshot_settings_relative() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path(repo_root().join("snapshots"));
    s.set_prepend_module_to_snapshot(false);
    s.set_omit_expression(true);
    s.add_filter(&regex_literal(&format!("{}/", repo_root().display())), "");
    s
}

/// A suite of `runner/tests/fixtures/failing-suites/`.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/failing-suites").join(format!("{name}.yaml"))
}

/// Holds the VM test lock; dropping it lets the next VM test start.
pub struct VmLock(#[allow(dead_code)] nix::fcntl::Flock<std::fs::File>);

/// Waits until no other VM test (of this file or of `tests/suites.rs`, same
/// [`test_tmpdir`]) runs. `cargo test` runs a file's tests in parallel threads: every test that
/// boots a VM takes this first.
pub fn vm_lock() -> VmLock {
    lock_file("vm-suites.lock")
}

/// Waits until no other suite of `tests/suites.rs`'s `BESIDE_OTHERS` runs: those run
/// beside the VM test that holds [`vm_lock`], one at a time.
pub fn beside_lock() -> VmLock {
    lock_file("vm-suites-beside.lock")
}

/// An exclusive `flock(2)` on `name` in [`test_tmpdir`], waiting as long as it is held.
fn lock_file(name: &str) -> VmLock {
    let path = test_tmpdir().join(name);
    let file = std::fs::File::create(&path).unwrap_or_else(|e| panic!("creating {}: {e}", path.display()));
    match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive) {
        Ok(l) => VmLock(l),
        Err((_, e)) => panic!("locking {}: {e}", path.display()),
    }
}

/// What the host looked like before a test, to compare with after it.
#[derive(Debug, Clone)]
pub struct HostState {
    /// Network devices of the host's (our) namespace.
    pub links: BTreeSet<String>,
    /// Inode of the host's network namespace.
    pub netns: u64,
}

impl HostState {
    /// Reads the current state.
    pub fn now() -> HostState {
        let links = std::fs::read_dir("/sys/class/net")
            .map(|rd| rd.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        HostState { links, netns: netns_inode(std::process::id()).expect("our own network namespace") }
    }
}

/// The inode of process `pid`'s network namespace.
pub fn netns_inode(pid: u32) -> Option<u64> {
    std::fs::metadata(format!("/proc/{pid}/ns/net")).ok().map(|m| m.ino())
}

/// One test's private folder: `<target tmp>/failures/<test>/` with `tmp/` (the `TMPDIR`
/// of every `vmrepro` it starts, so the runs' temp folders are known to be ours) and
/// `results/`.
pub struct Sandbox {
    /// The folder.
    pub root: PathBuf,
    /// `TMPDIR` of the runs.
    pub tmp: PathBuf,
    /// `--results` of the runs.
    pub results: PathBuf,
    /// The host before the test.
    pub before: HostState,
    /// PIDs of the `vmrepro` processes started.
    runners: Mutex<Vec<u32>>,
}

impl Sandbox {
    /// A fresh sandbox for `test` (anything left from an earlier run is removed).
    pub fn new(test: &str) -> Sandbox {
        let root = test_tmpdir().join("failures").join(test);
        if root.exists() {
            std::fs::remove_dir_all(&root).unwrap_or_else(|e| panic!("removing {}: {e}", root.display()));
        }
        let tmp = root.join("tmp");
        let results = root.join("results");
        std::fs::create_dir_all(&tmp).unwrap();
        std::fs::create_dir_all(&results).unwrap();
        Sandbox { root, tmp, results, before: HostState::now(), runners: Mutex::default() }
    }

    /// `vmrepro run <suite> --results <results>` with `TMPDIR` set to the sandbox's.
    pub fn command(&self, suite: &Path) -> Command {
        let mut cmd = Command::new(vmrepro_bin());
        cmd.arg("run").arg(suite).arg("--results").arg(&self.results);
        cmd.env("TMPDIR", &self.tmp);
        cmd
    }

    /// Starts `cmd` (from [`Sandbox::command`], possibly wrapped) in a process group of
    /// its own, like a shell's foreground job (so [`Runner::signal_group`] is a Ctrl-C);
    /// stdout and stderr are collected line by line with their arrival time.
    pub fn spawn(&self, mut cmd: Command) -> Runner {
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("starting {cmd:?}: {e}"));
        self.runners.lock().unwrap().push(child.id());
        let lines: Arc<Mutex<Vec<(Instant, String)>>> = Arc::default();
        let readers = [
            Box::new(child.stdout.take().expect("piped")) as Box<dyn Read + Send>,
            Box::new(child.stderr.take().expect("piped")),
        ]
        .into_iter()
        .map(|r| {
            let lines = lines.clone();
            std::thread::spawn(move || {
                for l in BufReader::new(r).lines().map_while(Result::ok) {
                    lines.lock().unwrap().push((Instant::now(), l));
                }
            })
        })
        .collect();
        Runner { child, lines, readers, started: Instant::now() }
    }

    /// Runs `cmd` to its end (at most `limit`).
    pub fn run(&self, cmd: Command, limit: Duration) -> Finished {
        self.spawn(cmd).wait(limit)
    }

    /// Every run folder under the results folder (`<results>/<suite>/<stamp>/`).
    pub fn run_dirs(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for suite in std::fs::read_dir(&self.results).into_iter().flatten().flatten() {
            for run in std::fs::read_dir(suite.path()).into_iter().flatten().flatten() {
                if run.path().is_dir() {
                    out.push(run.path());
                }
            }
        }
        out.sort();
        out
    }

    /// The only run folder (panics if there is not exactly one).
    pub fn run_dir(&self) -> PathBuf {
        let dirs = self.run_dirs();
        assert_eq!(dirs.len(), 1, "expected one run folder under {}, found {dirs:?}", self.results.display());
        dirs[0].clone()
    }

    /// The leftovers checker: after the runs of this sandbox ended, nothing of theirs
    /// may remain on the host. Panics naming what remained:
    /// - a process whose command line mentions the sandbox (QEMU's sockets and overlay
    ///   are under its `TMPDIR`), a QEMU (`process=vmrepro-…`) child of one of our
    ///   runners, or a recorded QEMU PID that is still a vmrepro QEMU;
    /// - anything in the runs' `TMPDIR` (their `vmrepro-run-*` temp folders), or a
    ///   recorded temp folder;
    /// - a unix socket anywhere in the sandbox (results included);
    /// - a process, or an open file descriptor, in a network namespace the runs created
    ///   (inodes recorded in `run.json`);
    /// - a network device of the host's namespace that wasn't there before (a tap).
    pub fn assert_no_leftovers(&self) {
        let runners = self.runners.lock().unwrap().clone();
        let runs: Vec<serde_json::Value> =
            self.run_dirs().iter().filter_map(|d| read_json_opt(&d.join("run.json"))).collect();
        let mut problems = Vec::new();

        let recorded_pids: BTreeSet<u32> =
            runs.iter().flat_map(vms).filter_map(|v| v["pid"].as_u64()).map(|p| p as u32).collect();
        let tmp_text = self.root.display().to_string();
        for p in all_processes() {
            if p.pid == std::process::id() {
                continue;
            }
            let qemu = p.cmdline.contains("process=vmrepro-");
            if p.cmdline.contains(&tmp_text) || (qemu && (runners.contains(&p.ppid) || recorded_pids.contains(&p.pid)))
            {
                problems.push(format!("process {} (parent {}) survived the run: {}", p.pid, p.ppid, p.cmdline));
            }
        }

        let left: Vec<String> = std::fs::read_dir(&self.tmp)
            .map(|rd| rd.flatten().map(|e| e.path().display().to_string()).collect())
            .unwrap_or_default();
        if !left.is_empty() {
            problems.push(format!("the runs' TMPDIR {} is not empty: {left:?}", self.tmp.display()));
        }
        for r in &runs {
            if let Some(t) = r["temp_dir"].as_str() {
                if Path::new(t).exists() {
                    problems.push(format!("the run's temp folder {t} still exists"));
                }
            }
        }

        for s in sockets_under(&self.root) {
            problems.push(format!("a unix socket remains: {}", s.display()));
        }

        for r in &runs {
            let Some(ino) = r["network_namespace"]["inode"].as_u64() else { continue };
            if ino == self.before.netns {
                problems.push(format!("run {} used the host's network namespace", r["started"]));
            }
            for holder in holders_of_netns(ino) {
                problems.push(format!("the run's network namespace net:[{ino}] is still held by {holder}"));
            }
        }

        let now = HostState::now();
        let new_links: Vec<&String> = now.links.difference(&self.before.links).collect();
        if !new_links.is_empty() {
            problems.push(format!("new network devices in the host's namespace: {new_links:?}"));
        }

        assert!(
            problems.is_empty(),
            "leftovers after the run(s) of {}:\n- {}",
            self.root.display(),
            problems.join("\n- ")
        );
    }
}

/// `vmrepro run` running as a child process.
pub struct Runner {
    child: Child,
    lines: Arc<Mutex<Vec<(Instant, String)>>>,
    readers: Vec<std::thread::JoinHandle<()>>,
    /// When it was started.
    pub started: Instant,
}

/// How a [`Runner`] ended.
#[derive(Debug)]
pub struct Finished {
    /// Exit code; 128 + the signal number if a signal killed it (as shells say).
    pub code: i32,
    /// stdout and stderr lines, interleaved in arrival order.
    pub output: String,
    /// Lines with their arrival time.
    pub lines: Vec<(Instant, String)>,
    /// Start → exit.
    pub took: Duration,
    /// When it exited (as seen by the test).
    pub ended: Instant,
}

impl Finished {
    /// When the first line containing `needle` arrived.
    pub fn line_time(&self, needle: &str) -> Option<Instant> {
        self.lines.iter().find(|(_, l)| l.contains(needle)).map(|(t, _)| *t)
    }
}

impl Runner {
    /// The runner's PID.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Output so far.
    pub fn output(&self) -> String {
        self.lines.lock().unwrap().iter().map(|(_, l)| l.as_str()).collect::<Vec<_>>().join("\n")
    }

    /// Waits until a line containing `needle` was printed; returns when it arrived.
    /// Panics (showing the output) after `limit`, or if the runner exits first.
    pub fn wait_for_line(&mut self, needle: &str, limit: Duration) -> Instant {
        let deadline = Instant::now() + limit;
        loop {
            if let Some((t, _)) = self.lines.lock().unwrap().iter().find(|(_, l)| l.contains(needle)) {
                return *t;
            }
            if let Ok(Some(st)) = self.child.try_wait() {
                std::thread::sleep(Duration::from_millis(200));
                panic!("vmrepro exited ({st}) before printing {needle:?}; output:\n{}", self.output());
            }
            if Instant::now() > deadline {
                panic!("vmrepro did not print {needle:?} within {limit:?}; output:\n{}", self.output());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends `sig` to the runner (only to it, as `kill PID` does).
    pub fn signal(&self, sig: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid() as i32), sig).expect("signalling vmrepro");
    }

    /// Sends `sig` to the runner's process group, as a terminal does on Ctrl-C.
    pub fn signal_group(&self, sig: nix::sys::signal::Signal) {
        nix::sys::signal::killpg(nix::unistd::Pid::from_raw(self.pid() as i32), sig).expect("signalling vmrepro");
    }

    /// Whether it has exited.
    pub fn try_done(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Waits for the end (at most `limit`; then it is killed and the test fails).
    pub fn wait(mut self, limit: Duration) -> Finished {
        let deadline = self.started + limit;
        let status = loop {
            if let Some(st) = self.child.try_wait().expect("waiting for vmrepro") {
                break st;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("vmrepro did not finish within {limit:?}; output:\n{}", self.output());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let ended = Instant::now();
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
        let lines = self.lines.lock().unwrap().clone();
        let output = lines.iter().map(|(_, l)| l.as_str()).collect::<Vec<_>>().join("\n");
        let code = status
            .code()
            .or_else(|| std::os::unix::process::ExitStatusExt::signal(&status).map(|s| 128 + s))
            .expect("exited or killed");
        Finished { code, output, lines, took: ended - self.started, ended }
    }
}

/// Reads a JSON file, panicking with the path on error.
pub fn read_json(path: &Path) -> serde_json::Value {
    read_json_opt(path).unwrap_or_else(|| panic!("cannot read JSON {}", path.display()))
}

fn read_json_opt(path: &Path) -> Option<serde_json::Value> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

/// The `vms` array of a `run.json`.
pub fn vms(run: &serde_json::Value) -> Vec<serde_json::Value> {
    run["vms"].as_array().cloned().unwrap_or_default()
}

/// VM `name` of a `run.json`.
pub fn vm<'a>(run: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    run["vms"]
        .as_array()
        .and_then(|a| a.iter().find(|v| v["name"] == name))
        .unwrap_or_else(|| panic!("no VM {name} in run.json: {run:#}"))
}

/// Step `name` of VM `vm_name` of a `run.json`.
pub fn step<'a>(run: &'a serde_json::Value, vm_name: &str, name: &str) -> &'a serde_json::Value {
    vm(run, vm_name)["steps"]
        .as_array()
        .and_then(|a| a.iter().find(|s| s["name"] == name))
        .unwrap_or_else(|| panic!("no step {vm_name}/{name} in run.json: {run:#}"))
}

/// One entry of `/proc`.
#[derive(Debug, Clone)]
pub struct Proc {
    /// PID.
    pub pid: u32,
    /// Parent PID.
    pub ppid: u32,
    /// Command line, arguments joined with spaces.
    pub cmdline: String,
}

/// Every process we can see.
pub fn all_processes() -> Vec<Proc> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // `pid (comm) state ppid …`; comm may hold spaces and parentheses.
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else { continue };
        let ppid = after.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " ").trim().to_string())
            .unwrap_or_default();
        out.push(Proc { pid, ppid, cmdline });
    }
    out
}

/// `pid` and all its descendants.
pub fn family(pid: u32) -> Vec<Proc> {
    let procs = all_processes();
    let mut ids = BTreeSet::from([pid]);
    loop {
        let before = ids.len();
        for p in &procs {
            if ids.contains(&p.ppid) {
                ids.insert(p.pid);
            }
        }
        if ids.len() == before {
            break;
        }
    }
    procs.into_iter().filter(|p| ids.contains(&p.pid)).collect()
}

/// The QEMU of VM `vm` started by runner `runner` (a descendant whose command line has
/// `process=vmrepro-<vm>`).
pub fn qemu_of(runner: u32, vm: &str) -> Option<Proc> {
    let tag = format!("process=vmrepro-{vm} ");
    family(runner).into_iter().find(|p| format!("{} ", p.cmdline).contains(&tag))
}

/// How many unix sockets named `path` the network namespace of process `pid` has
/// (`/proc/<pid>/net/unix`). A server's listening socket is in its own namespace; each
/// connection it accepted is in the namespace of the process that connected.
pub fn unix_socket_ends(pid: u32, path: &Path) -> usize {
    let table = std::fs::read_to_string(format!("/proc/{pid}/net/unix")).unwrap_or_default();
    let path = path.to_string_lossy();
    table.lines().filter(|l| l.split_whitespace().nth(7) == Some(&*path)).count()
}

/// Processes, or open file descriptors, in network namespace `inode`, described.
pub fn holders_of_netns(inode: u64) -> Vec<String> {
    let target = format!("net:[{inode}]");
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default().trim().to_string();
        if std::fs::read_link(format!("/proc/{pid}/ns/net")).is_ok_and(|l| l.to_string_lossy() == target) {
            out.push(format!("process {pid} ({comm}) running in it"));
        }
        for fd in std::fs::read_dir(format!("/proc/{pid}/fd")).into_iter().flatten().flatten() {
            if std::fs::read_link(fd.path()).is_ok_and(|l| l.to_string_lossy() == target) {
                out.push(format!("process {pid} ({comm}) holding it open as {}", fd.path().display()));
            }
        }
    }
    out
}

/// Unix sockets anywhere under `dir`.
pub fn sockets_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                stack.push(e.path());
            } else if ft.is_socket() {
                out.push(e.path());
            }
        }
    }
    out
}

/// Socket inodes (`socket:[N]`) among the open files of `pid`.
pub fn socket_inodes(pid: u32) -> BTreeSet<u64> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter_map(|l| {
            l.to_string_lossy().strip_prefix("socket:[").and_then(|s| s.strip_suffix(']')).and_then(|n| n.parse().ok())
        })
        .collect()
}

/// A TCP socket in state LISTEN, or any bound UDP socket, from `/proc/<pid>/net/*`
/// (that is, in `pid`'s network namespace).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Listener {
    /// `tcp`, `tcp6`, `udp` or `udp6`.
    pub proto: String,
    /// Local address as the kernel prints it (hex `ADDR:PORT`).
    pub local: String,
    /// Socket inode.
    pub inode: u64,
}

/// The listening sockets of `pid`'s network namespace.
pub fn listeners(pid: u32) -> Vec<Listener> {
    let mut out = Vec::new();
    for proto in ["tcp", "tcp6", "udp", "udp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{proto}")).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 10 {
                continue;
            }
            let listening = if proto.starts_with("tcp") { f[3] == "0A" } else { true };
            if listening {
                out.push(Listener { proto: proto.into(), local: f[1].into(), inode: f[9].parse().unwrap_or(0) });
            }
        }
    }
    out
}

/// Permission bits and owner of `path`.
pub fn mode_and_owner(path: &Path) -> (u32, u32) {
    let m = std::fs::metadata(path).unwrap_or_else(|e| panic!("stat {}: {e}", path.display()));
    (m.mode() & 0o7777, m.uid())
}

/// A private mount namespace, held by a `sleep` child (killed on drop, and when the test
/// process dies): mounts made in it vanish with it.
pub struct MountNs {
    holder: Child,
}

impl MountNs {
    /// Creates it (`unshare --mount --propagation private`; with `--map-root-user` when
    /// not root).
    pub fn new() -> MountNs {
        let mut cmd = Command::new("unshare");
        if !nix::unistd::geteuid().is_root() {
            cmd.arg("--map-root-user");
        }
        cmd.args(["--mount", "--propagation", "private", "sleep", "infinity"]).stdin(Stdio::null());
        // SAFETY: prctl is async-signal-safe.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let holder = cmd.spawn().expect("unshare");
        let ns = MountNs { holder };
        // Wait until unshare has exec'd sleep in the new namespace.
        let deadline = Instant::now() + Duration::from_secs(10);
        let ours = std::fs::read_link("/proc/self/ns/mnt").unwrap();
        while std::fs::read_link(format!("/proc/{}/ns/mnt", ns.holder.id())).is_ok_and(|l| l == ours) {
            assert!(Instant::now() < deadline, "unshare did not create a mount namespace");
            std::thread::sleep(Duration::from_millis(20));
        }
        ns
    }

    /// A command that runs `program` inside the namespace (via `nsenter`).
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.arg("-t").arg(self.holder.id().to_string());
        if !nix::unistd::geteuid().is_root() {
            cmd.args(["-U", "--preserve-credentials"]);
        }
        cmd.arg("-m").arg("--").arg(program);
        cmd
    }

    /// Wraps a prepared command (program, arguments, environment) to run in the namespace.
    pub fn wrap(&self, inner: &Command) -> Command {
        let mut cmd = self.command(inner.get_program());
        cmd.args(inner.get_args());
        for (k, v) in inner.get_envs() {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        cmd
    }

    /// Runs `program args…` in the namespace; panics with its output if it fails.
    pub fn sh(&self, program: &str, args: &[&str]) {
        let out = self.command(program).args(args).output().expect("nsenter");
        assert!(
            out.status.success(),
            "{program} {args:?} in the mount namespace: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `path` as seen from inside the namespace (through `/proc/<holder>/root`).
    pub fn path(&self, path: &Path) -> PathBuf {
        Path::new(&format!("/proc/{}/root", self.holder.id())).join(path.strip_prefix("/").unwrap_or(path))
    }
}

impl Drop for MountNs {
    fn drop(&mut self) {
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}

/// A minimal HTTP/1.0 server on 127.0.0.1 answering every GET whose path ends with a
/// known file name with that file (404 otherwise); stopped on drop.
pub struct FileServer {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FileServer {
    /// Serves `files` (name in the URL → file on disk).
    pub fn start(files: BTreeMap<String, PathBuf>) -> FileServer {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binding 127.0.0.1");
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                let Ok((mut conn, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                };
                let _ = conn.set_nonblocking(false);
                let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && conn.read(&mut byte).is_ok_and(|n| n == 1) {
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head);
                let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
                let name = path.rsplit('/').next().unwrap_or_default();
                match files.get(name).and_then(|p| std::fs::read(p).ok()) {
                    Some(body) => {
                        let _ = write!(conn, "HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n", body.len());
                        let _ = conn.write_all(&body);
                    }
                    None => {
                        let _ = conn.write_all(b"HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n");
                    }
                }
            }
        });
        FileServer { url, stop, thread: Some(thread) }
    }
}

impl Drop for FileServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Copies the tree `from` to `to` (regular files and folders only).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

/// Every entry under `dir` (links not followed) with its SHA-256 or link target: the
/// canary check of tests/hostile.rs and hostile_images.rs.
pub fn fingerprint(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let t = e.file_type().unwrap();
            let v = if t.is_dir() {
                stack.push(e.path());
                "folder".to_string()
            } else if t.is_symlink() {
                format!("link {}", std::fs::read_link(e.path()).unwrap().display())
            } else {
                vmrepro::run::environment::file_sha256(&e.path()).unwrap()
            };
            out.insert(e.path(), v);
        }
    }
    out
}
