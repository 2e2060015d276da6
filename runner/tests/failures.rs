//! Failing guests, failing hosts and interrupted runs: each test boots real VMs (QEMU,
//! Debian kernels, the bookworm rootfs, the private bridge) with a suite of
//! `tests/fixtures/failing-suites/`, makes something fail, checks what the user sees
//! (message, exit code, `run.json`, files kept), and ends with the leftovers checker
//! (`support::Sandbox::assert_no_leftovers`): no QEMU, temp folder, socket, network
//! namespace or tap of the run survives it.
//!
//! The tests run `vmrepro` itself (`CARGO_BIN_EXE_vmrepro`): exit codes and signals are
//! part of what they check, and each run gets its own `TMPDIR`, so what it leaves behind
//! is known to be its own. They take the VM lock one at a time (`support::vm_lock`, shared
//! with `tests/suites.rs`), so `cargo test --test failures` runs one VM test at a time
//! even though the harness runs tests in parallel threads.
//!
//! Needs what `tests/suites.rs` needs (QEMU, the images in the cache, namespaces), plus
//! `unshare`/`nsenter` and tmpfs mounts in a private mount namespace for the cache tests.
//! The pinned 5.10 kernel package is served from the cache by a local HTTP server
//! standing in for the Debian archive, so those tests need no network.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use support::*;
use vmrepro::exit::{INFRASTRUCTURE as EXIT_INFRA, INTERRUPTED as EXIT_INTERRUPTED, SUCCESS as EXIT_OK};
use vmrepro::infra::qemu::args::HOST_CMDLINE_ENV;

/// Longest any of these runs may take before the test gives up on it.
const RUN_LIMIT: Duration = Duration::from_secs(240);

fn assert_contains(haystack: &str, needle: &str, what: &str) {
    assert!(haystack.contains(needle), "{what}: expected {needle:?} in:\n{haystack}");
}

/// The step output file of a `run.json` step, read from `run_dir`.
fn step_stdout(run_dir: &Path, run: &serde_json::Value, vm_name: &str, step_name: &str) -> String {
    let s = step(run, vm_name, step_name);
    let rel = s["stdout"].as_str().unwrap_or_else(|| panic!("step {vm_name}/{step_name} has no stdout file: {s:#}"));
    std::fs::read_to_string(run_dir.join(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"))
}

/// `cmd` with `mem=24M` on the guest's kernel command line, from the host's user
/// ([`HOST_CMDLINE_ENV`]; a suite can't ask for it, `vmrepro check` refuses a memory
/// limit below the VM's memory): the kernel runs out of memory while it unpacks the
/// initramfs and panics ("System is deadlocked on memory") within 2 s of guest time.
fn panicking(mut cmd: std::process::Command) -> std::process::Command {
    cmd.env(HOST_CMDLINE_ENV, "mem=24M");
    cmd
}

#[test]
fn kernel_panic_at_boot_fails_in_seconds_with_the_console_tail() {
    let _lock = vm_lock();
    let sb = Sandbox::new("kernel-panic");
    let fin = sb.run(panicking(sb.command(&fixture("kernel-panic"))), RUN_LIMIT);

    assert_eq!(fin.code, EXIT_INFRA, "a guest that panics is an infrastructure error; output:\n{}", fin.output);
    // On a fresh machine the run first builds its images: only the time after that counts.
    let images_s = read_json(&sb.run_dir().join("run.json"))["timings"]["images_s"].as_f64().unwrap_or(0.0);
    let after_images = fin.took.saturating_sub(Duration::from_secs_f64(images_s));
    assert!(
        after_images < Duration::from_secs(30),
        "the panic must end the run in seconds, not at the 300 s boot timeout; took {after_images:?} after images"
    );
    assert_contains(&fin.output, "VM doomed: QEMU exited", "the error names the VM");
    assert_contains(
        &fin.output,
        "(the guest kernel panicked: Kernel panic - not syncing",
        "the error says the kernel panicked, with the panic's line",
    );
    assert_contains(&fin.output, "last console lines:", "the error shows the console tail");
    assert_contains(&fin.output, "Kernel panic - not syncing", "the console tail shows the panic");

    let dir = sb.run_dir();
    let run = read_json(&dir.join("run.json"));
    assert_eq!(run["status"], "infrastructure_error");
    assert_contains(run["error"].as_str().unwrap_or_default(), "Kernel panic", "run.json's error");
    assert_eq!(vm(&run, "doomed")["ending"], "already_exited");
    assert_eq!(step(&run, "doomed", "never-runs")["status"], "skipped");
    let console = std::fs::read_to_string(dir.join("vms/doomed/console.log")).unwrap();
    assert_contains(&console, "Kernel panic", "the console log is kept");
    sb.assert_no_leftovers();
}

#[test]
fn guest_agent_that_never_answers_is_a_boot_timeout() {
    let _lock = vm_lock();
    let sb = Sandbox::new("agent-never-up");
    let mut cmd = sb.command(&fixture("agent-never-up"));
    // The kernel refuses the virtio-serial driver (a module in Debian's cloud kernels),
    // so the agent's port never appears. The suite can't ask for this (`vmrepro check`
    // refuses blacklisting a driver the guest needs): the host's user adds it.
    cmd.env(HOST_CMDLINE_ENV, "module_blacklist=virtio_console");
    let fin = sb.run(cmd, RUN_LIMIT);

    assert_eq!(fin.code, EXIT_INFRA, "output:\n{}", fin.output);
    assert_contains(
        &fin.output,
        "VM mute: guest agent did not answer within boot_timeout (20s)",
        "the error names the VM and the limit",
    );
    let run = read_json(&sb.run_dir().join("run.json"));
    // On a fresh machine the run first builds its images: only the time after that counts.
    let images_s = run["timings"]["images_s"].as_f64().unwrap_or(0.0);
    let after_images = fin.took.saturating_sub(Duration::from_secs_f64(images_s));
    assert!(fin.took >= Duration::from_secs(20), "the run gave up before boot_timeout: {:?}", fin.took);
    assert!(
        after_images < Duration::from_secs(60),
        "the run must end soon after boot_timeout: {after_images:?} after images"
    );

    assert_eq!(run["status"], "infrastructure_error");
    let ending = vm(&run, "mute")["ending"].as_str().unwrap_or_default().to_string();
    assert!(
        ["quit", "terminated", "killed"].contains(&ending.as_str()),
        "QEMU was running and must be stopped: {ending}"
    );
    sb.assert_no_leftovers();
}

#[test]
fn more_guest_memory_than_the_host_has_is_refused_before_anything_is_built() {
    // 16 VMs × 16 GiB; the test means nothing on a host with 256 GiB of RAM or more.
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let host_mib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap()
        / 1024;
    assert!(host_mib < 16 * 16384, "this host has {host_mib} MiB: the fixture would fit");
    let _lock = vm_lock();
    let sb = Sandbox::new("host-memory");
    let fin = sb.run(sb.command(&fixture("host-memory")), RUN_LIMIT);

    assert_eq!(fin.code, EXIT_INFRA, "the host can't run it: infrastructure; output:\n{}", fin.output);
    assert_contains(
        &fin.output,
        &format!("the suite's 16 VMs have 262144 MiB of memory together (vms[].memory), more than this host's {host_mib} MiB of RAM"),
        "the error gives the total and the host's RAM",
    );
    assert!(fin.took < Duration::from_secs(30), "refused at once, took {:?}", fin.took);
    let run = read_json(&sb.run_dir().join("run.json"));
    assert_eq!(run["status"], "infrastructure_error");
    assert_eq!(run["images"].as_array().map_or(0, Vec::len), 0, "no image was resolved: {:#}", run["images"]);
    assert_eq!(run["vms"].as_array().map_or(0, Vec::len), 0, "no VM was prepared");
    sb.assert_no_leftovers();
}

/// `vmrepro run SUITE 2>&1 | head -1`: once the reader has gone, every line the run
/// still writes (progress on stderr, the summary on stdout) meets a closed pipe. The
/// run must go on to its end and its own exit status, not die of the write (exit 101,
/// no run.json, its VMs killed).
#[test]
fn a_closed_output_pipe_does_not_stop_the_run() {
    use std::io::BufRead;
    let _lock = vm_lock();
    let sb = Sandbox::new("closed-pipe");
    let mut cmd = sb.command(&fixture("concurrent"));
    cmd.stdin(std::process::Stdio::null()).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stderr.take().unwrap()).read_line(&mut first).unwrap();
    drop(child.stdout.take());
    assert!(!first.is_empty(), "the run wrote a first line");
    let deadline = Instant::now() + RUN_LIMIT;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "the run did not end within {RUN_LIMIT:?}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(status.code(), Some(EXIT_OK), "the run must pass with nobody reading its output: {status}");
    let run = read_json(&sb.run_dir().join("run.json"));
    assert_eq!(run["status"], "passed");
    sb.assert_no_leftovers();
}

/// `vmrepro run --pin` by a process allowed one CPU (`taskset -c 0`): nothing to pin
/// the VMs apart on, so the run goes on unpinned, says why, and records it in run.json
/// (the published report then says --pin was asked for and not applied).
#[test]
fn pin_with_one_usable_cpu_runs_unpinned_and_records_why() {
    let _lock = vm_lock();
    let sb = Sandbox::new("pin-one-cpu");
    let run = sb.command(&fixture("concurrent"));
    let mut cmd = std::process::Command::new("taskset");
    cmd.arg("-c").arg("0").arg(run.get_program()).args(run.get_args()).arg("--pin");
    cmd.envs(run.get_envs().filter_map(|(k, v)| Some((k, v?))));
    let fin = sb.run(cmd, RUN_LIMIT);
    assert_eq!(fin.code, EXIT_OK, "the run goes on unpinned; output:\n{}", fin.output);
    let why = vmrepro::infra::qemu::pin::PinError::TooFewCpus(1).to_string();
    assert_contains(&fin.output, &why, "the run says why it is not pinned");
    let record = read_json(&sb.run_dir().join("run.json"));
    assert_eq!(record["pin_notice"], why.as_str(), "run.json records why");
    assert!(record["vms"].as_array().unwrap().iter().all(|v| v["pinned_cpu"].is_null()), "{record}");
    sb.assert_no_leftovers();
}

#[test]
fn hanging_step_times_out_and_the_other_vm_is_shut_down() {
    let _lock = vm_lock();
    let sb = Sandbox::new("step-hangs");
    let mut r = sb.spawn(sb.command(&fixture("step-hangs")));
    let hang_started = r.wait_for_line("vm hangs: step hang running", RUN_LIMIT);
    let fin = r.wait(RUN_LIMIT);

    assert_eq!(fin.code, EXIT_INFRA, "a step timeout is an infrastructure error; output:\n{}", fin.output);
    assert_contains(
        &fin.output,
        "VM hangs: step hang did not finish within its timeout (5s)",
        "the error names the VM, the step and the limit",
    );
    let after = fin.ended - hang_started;
    assert!(
        after < Duration::from_secs(20),
        "the run must end soon after the 5 s step timeout, with `other` shut down at once (not after its 90 s step); \
         it ended {after:?} after the step started"
    );

    let dir = sb.run_dir();
    let run = read_json(&dir.join("run.json"));
    assert_eq!(run["status"], "infrastructure_error");
    assert_eq!(step(&run, "hangs", "hello")["status"], "passed");
    assert_eq!(step(&run, "hangs", "hang")["status"], "timed_out");
    assert_eq!(step(&run, "hangs", "never-runs")["status"], "skipped");
    assert_eq!(step(&run, "other", "hello")["status"], "passed");
    let long = step(&run, "other", "long");
    assert_eq!(long["status"], "cancelled", "the other VM's running step: {long:#}");
    assert_contains(long["error"].as_str().unwrap_or_default(), "while this step ran", "why it was cancelled");
    assert_eq!(step_stdout(&dir, &run, "hangs", "hello"), "hello from hangs\n", "finished steps are kept on disk");
    assert_eq!(step_stdout(&dir, &run, "other", "hello"), "hello from other\n", "finished steps are kept on disk");
    assert_eq!(vm(&run, "other")["ending"], "quit", "the other VM is shut down through QMP");
    assert_eq!(vm(&run, "hangs")["ending"], "quit");
    sb.assert_no_leftovers();
}

/// A measurement run one VM after another (issue 26 item 7): client-a's iteration
/// hangs. The hang is client-a's, with what it printed so far and its diagnostics;
/// client-b, which waited for it, still runs its iterations; the run fails on its
/// problems, the suite line says so, and client-b's comparison says why there is none.
#[test]
fn a_hang_in_a_sequential_measurement_lands_on_the_vm_that_hung() {
    let _lock = vm_lock();
    let sb = Sandbox::new("sequential-hang");
    let fin = sb.run(sb.command(&fixture("sequential-hang")), RUN_LIMIT);

    assert_eq!(fin.code, vmrepro::exit::TEST_FAILURE, "a hung iteration is a test failure; output:\n{}", fin.output);
    let headline = fin.output.lines().find(|l| l.starts_with("suite sequential-hang:")).unwrap_or_default();
    assert!(headline.starts_with("suite sequential-hang: Failed ("), "the suite line: {headline:?}\n{}", fin.output);
    let dir = sb.run_dir();
    let run = read_json(&dir.join("run.json"));
    assert_eq!(run["status"], "passed", "no infrastructure error: {:#}", run["error"]);
    let hung = step(&run, "client-a", "hang-1");
    assert_eq!(hung["status"], "timed_out", "the hang is charged to the VM that hung: {hung:#}");
    assert_contains(hung["error"].as_str().unwrap_or_default(), "client-a", "the hang's error names its VM");
    // Its output so far, in the iteration's sections.
    let out = step_stdout(&dir, &run, "client-a", "hang-1");
    assert_contains(&out, "begun on client-a", "the partial stdout");
    let err_rel = hung["stderr"].as_str().expect("a stderr file");
    let err = std::fs::read_to_string(dir.join(err_rel)).expect("readable");
    assert_contains(&(out.clone() + &err), "to stderr on client-a", "the partial stderr");
    // Its diagnostics: the kernel log from the iteration's start, the blocked tasks.
    let diag = std::fs::read_to_string(dir.join(hung["diagnostics"].as_str().expect("diagnostics"))).expect("readable");
    assert_contains(&diag, "== dmesg since the step began", "the log starts at the iteration");
    let log = diag.split("== blocked tasks").next().unwrap_or_default();
    let first = log.lines().nth(1).unwrap_or_default();
    assert_contains(first, "vmrepro: iteration hang-1 begins", "the first kernel line is the iteration's mark");
    assert_contains(&diag, "== blocked tasks", "the blocked tasks");
    let later = step(&run, "client-a", "hang-2");
    assert_eq!(later["status"], "skipped");
    assert_contains(later["error"].as_str().unwrap_or_default(), "hang-1 hung", "why client-a's next one did not run");
    // client-b waited for the hang and then ran both its iterations.
    for n in ["hang-1", "hang-2"] {
        assert_eq!(step(&run, "client-b", n)["status"], "passed", "client-b/{n}");
    }
    assert_contains(
        &fin.output,
        "no comparison for client-b: baseline client-a: 2 of 2 iterations failed (timed out ×1, not run ×1)",
        "the comparison says why there is none",
    );
    sb.assert_no_leftovers();
}

#[test]
fn qemu_killed_from_outside_is_noticed_at_once() {
    let _lock = vm_lock();
    let sb = Sandbox::new("qemu-killed");
    let mut r = sb.spawn(sb.command(&fixture("qemu-killed")));
    r.wait_for_line("vm victim: step sleep running", RUN_LIMIT);
    let victim = qemu_of(r.pid(), "victim").expect("the victim's QEMU is a child of vmrepro");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(victim.pid as i32), Signal::SIGKILL).unwrap();
    let killed = Instant::now();
    let fin = r.wait(RUN_LIMIT);

    assert_eq!(fin.code, EXIT_INFRA, "output:\n{}", fin.output);
    let noticed = fin.line_time("vm victim: step sleep error").expect("the step is reported as an error") - killed;
    assert!(
        noticed < Duration::from_secs(2),
        "QEMU's death must be noticed at once, not at the 120 s step timeout: {noticed:?}"
    );
    assert!(fin.ended - killed < Duration::from_secs(15), "the run must end quickly: {:?}", fin.ended - killed);
    assert_contains(&fin.output, "VM victim: QEMU exited (signal: 9 (SIGKILL)) during step sleep", "the error");

    let dir = sb.run_dir();
    let run = read_json(&dir.join("run.json"));
    assert_eq!(run["status"], "infrastructure_error");
    assert_eq!(vm(&run, "victim")["pid"], victim.pid, "run.json records the QEMU PID");
    assert_eq!(vm(&run, "victim")["ending"], "already_exited");
    assert_eq!(step(&run, "victim", "sleep")["status"], "error");
    assert_eq!(vm(&run, "bystander")["ending"], "quit", "the other VM is shut down through QMP");
    assert_eq!(step(&run, "bystander", "sleep")["status"], "cancelled");
    assert_eq!(step_stdout(&dir, &run, "victim", "hello"), "hello from victim\n");
    assert_eq!(step_stdout(&dir, &run, "bystander", "hello"), "hello from bystander\n");
    sb.assert_no_leftovers();
}

/// QEMU answers QMP late while it loads a saved state on a busy host: in CI (stop 22)
/// a `query-status` took over the runner's 2 s, the runner gave it up, sent the next
/// one and aborted inside qapi ("QAPI duplicate command id 0"), taking every test of
/// the binary with it. Here alpha's QEMU is stopped for 4 s right after the runner
/// connected to its QMP, while it restores; the run must pass as on a slow host.
#[test]
fn a_qemu_that_stalls_while_restoring_its_saved_state_still_boots() {
    const STALL: Duration = Duration::from_secs(4);
    let _lock = vm_lock();
    let sb = Sandbox::new("stalled-restore");
    // The first run saves the kind's state, if no earlier run did.
    let first = sb.run(sb.command(&fixture("stalled-restore")), RUN_LIMIT);
    assert_eq!(first.code, EXIT_OK, "output:\n{}", first.output);

    let mut r = sb.spawn(sb.command(&fixture("stalled-restore")));
    r.wait_for_line("vm alpha: starting from its kind's saved state", RUN_LIMIT);
    let (alpha, qmp_socket) = loop {
        if let Some(p) = qemu_of(r.pid(), "alpha") {
            let socket = p.cmdline.split("socket,id=qmp,path=").nth(1).and_then(|s| s.split(',').next());
            if let Some(socket) = socket.map(PathBuf::from).filter(|s| s.exists()) {
                break (p, socket);
            }
        }
        assert!(!r.try_done(), "the run ended before alpha's QMP socket appeared:\n{}", r.output());
        std::thread::sleep(Duration::from_millis(10));
    };
    // Once the runner is connected (the accepted end is in the runner's network
    // namespace; QEMU's is the run's own) it negotiates at once and then polls
    // `query-status` every 10-100 ms until the guest runs. 50 ms later it is polling
    // (at 20 ms it was often still negotiating, which has a 5 s timeout of its own, and
    // the binary before the fix passed); the guest is not ready yet: that takes the
    // restore, the agent's sync and the identity command.
    while unix_socket_ends(r.pid(), &qmp_socket) < 1 {
        assert!(!r.try_done(), "the run ended before it connected to alpha's QMP:\n{}", r.output());
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(50));
    let pid = nix::unistd::Pid::from_raw(alpha.pid as i32);
    nix::sys::signal::kill(pid, Signal::SIGSTOP).unwrap();
    let stopped = Instant::now();
    std::thread::sleep(STALL);
    // Fails (ESRCH) if the runner died meanwhile and took its QEMUs with it: the exit
    // code below shows its output.
    let _ = nix::sys::signal::kill(pid, Signal::SIGCONT);
    let fin = r.wait(RUN_LIMIT);

    assert_eq!(fin.code, EXIT_OK, "output:\n{}", fin.output);
    let ready = fin.line_time("vm alpha: ready after").expect("alpha is reported ready");
    assert!(
        ready > stopped + STALL,
        "alpha was ready before the stall ended: the stall came too late to test anything"
    );
    assert!(qmp_socket.starts_with(&sb.tmp), "QMP socket {} is the run's", qmp_socket.display());
    assert_contains(&fin.output, "vm bravo: step ping-alpha passed", "bravo's step");
    let dirs = sb.run_dirs();
    let run = read_json(&dirs.last().expect("two run folders").join("run.json"));
    assert_eq!(run["status"], "passed");
    assert_eq!(vm(&run, "alpha")["ending"], "quit", "QMP still works after the stall: quit, not SIGTERM");
    sb.assert_no_leftovers();
}

/// A restored guest that never answers (CI, stop 37: a 6.12 guest QEMU reported
/// running, its agent silent for the whole 240 s boot_timeout, and the suite failed).
/// Here alpha's QEMU is stopped by SIGSTOP as soon as it starts restoring and never
/// continued: the runner must give the restore up after its 30 s limit, kill that
/// QEMU, boot alpha instead and pass, keeping the failed attempt's console.
#[test]
fn a_restored_guest_that_never_answers_is_booted_instead() {
    let _lock = vm_lock();
    let sb = Sandbox::new("silent-restore");
    let first = sb.run(sb.command(&fixture("stalled-restore")), RUN_LIMIT);
    assert_eq!(first.code, EXIT_OK, "output:\n{}", first.output);

    let mut r = sb.spawn(sb.command(&fixture("stalled-restore")));
    r.wait_for_line("vm alpha: starting from its kind's saved state", RUN_LIMIT);
    let alpha = loop {
        if let Some(p) = qemu_of(r.pid(), "alpha") {
            break p;
        }
        assert!(!r.try_done(), "the run ended before alpha's QEMU appeared:\n{}", r.output());
        std::thread::sleep(Duration::from_millis(5));
    };
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(alpha.pid as i32), Signal::SIGSTOP).unwrap();
    let stopped = Instant::now();
    let fin = r.wait(RUN_LIMIT);

    assert_eq!(fin.code, EXIT_OK, "output:\n{}", fin.output);
    assert_contains(
        &fin.output,
        "the restored guest's agent did not answer within 30 s); booting it instead",
        "the notice says why alpha booted",
    );
    let gave_up = fin.line_time("the restored guest's agent did not answer").expect("the notice") - stopped;
    assert!(
        gave_up >= Duration::from_secs(29) && gave_up < Duration::from_secs(45),
        "the restore is given up after its 30 s limit, not the boot_timeout: {gave_up:?}"
    );
    assert!(!Path::new(&format!("/proc/{}", alpha.pid)).exists(), "the stopped QEMU {} is left", alpha.pid);
    let dir = sb.run_dirs().last().expect("two run folders").clone();
    let run = read_json(&dir.join("run.json"));
    assert_eq!(run["status"], "passed");
    assert_eq!(vm(&run, "alpha")["start"], "booted", "{:#}", vm(&run, "alpha"));
    assert_eq!(vm(&run, "bravo")["start"], "restored");
    let restore_log = std::fs::read_to_string(dir.join("vms/alpha/console.restore.log")).unwrap_or_default();
    assert_contains(&restore_log, "alpha restored from the saved state", "the failed restore's console is kept");
    assert_contains(&fin.output, "vm bravo: step ping-alpha passed", "bravo reaches the booted alpha");
    sb.assert_no_leftovers();
}

/// How the interrupt tests deliver their signal.
#[derive(Debug, Clone, Copy)]
enum Delivery {
    /// To the runner's process group, as a terminal's Ctrl-C does.
    Group,
    /// To the runner only, as `kill PID` does.
    Process,
}

/// `sig` to `vmrepro run` while both VMs run their `sleep` step.
fn interrupt_mid_step(sig: Signal, delivery: Delivery) {
    let sb = Sandbox::new(&format!("interrupted-{}", sig.as_str().to_lowercase()));
    let mut r = sb.spawn(sb.command(&fixture("interrupted")));
    r.wait_for_line("vm alpha: step sleep running", RUN_LIMIT);
    r.wait_for_line("vm bravo: step sleep running", RUN_LIMIT);
    let qemus: Vec<Proc> = ["alpha", "bravo"].iter().map(|v| qemu_of(r.pid(), v).expect("a QEMU per VM")).collect();
    match delivery {
        Delivery::Group => r.signal_group(sig),
        Delivery::Process => r.signal(sig),
    }
    let sent = Instant::now();
    let fin = r.wait(RUN_LIMIT);

    assert_eq!(fin.code, EXIT_INTERRUPTED, "{sig}: output:\n{}", fin.output);
    assert!(fin.ended - sent < Duration::from_secs(15), "{sig}: the run must stop quickly: {:?}", fin.ended - sent);
    for q in &qemus {
        assert!(!Path::new(&format!("/proc/{}", q.pid)).exists(), "{sig}: QEMU {} survived: {}", q.pid, q.cmdline);
    }
    let dir = sb.run_dir();
    let run = read_json(&dir.join("run.json"));
    assert_eq!(run["status"], "interrupted", "{sig}: run.json: {run:#}");
    assert_contains(run["error"].as_str().unwrap_or_default(), "interrupted", "run.json's note");
    for v in ["alpha", "bravo"] {
        assert_eq!(vm(&run, v)["ending"], "quit", "{sig}: VM {v} is shut down through QMP");
        assert_eq!(step(&run, v, "hello")["status"], "passed");
        assert_eq!(step_stdout(&dir, &run, v, "hello"), format!("hello from {v}\n"), "collected outputs are kept");
        let s = step(&run, v, "sleep");
        assert_eq!(s["status"], "cancelled", "{sig}: {s:#}");
        assert_contains(s["error"].as_str().unwrap_or_default(), "interrupted", "why the step was cancelled");
        assert!(dir.join(format!("vms/{v}/console.log")).is_file(), "the console log is kept");
    }
    sb.assert_no_leftovers();
}

#[test]
fn sigint_mid_step_shuts_everything_down_and_keeps_the_results() {
    let _lock = vm_lock();
    interrupt_mid_step(Signal::SIGINT, Delivery::Group);
}

#[test]
fn sigterm_mid_step_shuts_everything_down_and_keeps_the_results() {
    let _lock = vm_lock();
    interrupt_mid_step(Signal::SIGTERM, Delivery::Process);
}

#[test]
fn a_qemu_that_ignores_quit_and_sigterm_is_killed() {
    let _lock = vm_lock();
    let sb = Sandbox::new("interrupted-hung-qemu");
    let mut r = sb.spawn(sb.command(&fixture("interrupted")));
    r.wait_for_line("vm alpha: step sleep running", RUN_LIMIT);
    r.wait_for_line("vm bravo: step sleep running", RUN_LIMIT);
    // A stopped process answers nothing and doesn't act on SIGTERM: only SIGKILL ends it.
    let bravo = qemu_of(r.pid(), "bravo").expect("bravo's QEMU");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(bravo.pid as i32), Signal::SIGSTOP).unwrap();
    r.signal(Signal::SIGTERM);
    let sent = Instant::now();
    let fin = r.wait(RUN_LIMIT);

    assert_eq!(fin.code, EXIT_INTERRUPTED, "output:\n{}", fin.output);
    let took = fin.ended - sent;
    assert!(took < Duration::from_secs(15), "QMP quit, SIGTERM and SIGKILL are each bounded: {took:?}");
    assert!(!Path::new(&format!("/proc/{}", bravo.pid)).exists(), "the stopped QEMU was killed");
    let run = read_json(&sb.run_dir().join("run.json"));
    assert_eq!(run["status"], "interrupted");
    assert_eq!(vm(&run, "alpha")["ending"], "quit");
    assert_eq!(vm(&run, "bravo")["ending"], "killed", "quit, then SIGTERM, then SIGKILL");
    sb.assert_no_leftovers();
}

#[test]
fn sigkill_to_the_runner_stops_its_vms_and_the_next_run_cleans_up() {
    let _lock = vm_lock();
    let sb = Sandbox::new("runner-killed");
    let mut r = sb.spawn(sb.command(&fixture("interrupted")));
    r.wait_for_line("vm alpha: step sleep running", RUN_LIMIT);
    r.wait_for_line("vm bravo: step sleep running", RUN_LIMIT);
    let qemus: Vec<Proc> = ["alpha", "bravo"].iter().map(|v| qemu_of(r.pid(), v).expect("a QEMU per VM")).collect();
    r.signal(Signal::SIGKILL);
    let fin = r.wait(RUN_LIMIT);
    assert_eq!(fin.code, 128 + 9);

    // QEMU and the namespace holder die with the runner (PR_SET_PDEATHSIG).
    let deadline = Instant::now() + Duration::from_secs(5);
    while qemus.iter().any(|q| Path::new(&format!("/proc/{}", q.pid)).exists()) {
        assert!(Instant::now() < deadline, "QEMU outlived its killed runner: {qemus:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    // What was collected is on disk; run.json says how far the run got.
    let dir = sb.run_dir();
    let run = read_json(&dir.join("run.json"));
    assert_eq!(run["status"], "running", "the last progress record: {run:#}");
    for v in ["alpha", "bravo"] {
        assert_eq!(step(&run, v, "hello")["status"], "passed");
        assert_eq!(step_stdout(&dir, &run, v, "hello"), format!("hello from {v}\n"));
        assert_eq!(step(&run, v, "sleep")["status"], "running");
    }
    let ns = run["network_namespace"]["inode"].as_u64().expect("namespace recorded");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !holders_of_netns(ns).is_empty() {
        assert!(Instant::now() < deadline, "the namespace outlived its killed runner: {:?}", holders_of_netns(ns));
        std::thread::sleep(Duration::from_millis(50));
    }
    // Only the temp folder is left (nothing can remove it as the runner dies); the next
    // run removes it.
    let stale = PathBuf::from(run["temp_dir"].as_str().expect("temp folder recorded"));
    assert!(stale.is_dir(), "expected the killed run's temp folder to be left");
    let next = sb.run(panicking(sb.command(&fixture("kernel-panic"))), RUN_LIMIT);
    assert_eq!(next.code, EXIT_INFRA, "output:\n{}", next.output);
    assert_contains(&next.output, &format!("removed {}", stale.display()), "the next run cleans up");
    sb.assert_no_leftovers();
}

/// The user's real cache (where the images are).
fn real_cache() -> PathBuf {
    vmrepro::infra::images::Cache::from_env().root().to_path_buf()
}

/// A stand-in Debian archive serving the pinned 5.10 package from the real cache (`None`
/// if it isn't there: the runs then fetch from the host's archive).
fn local_archive() -> Option<FileServer> {
    let catalog = vmrepro::infra::images::Catalog::load(&repo_root().join("images")).expect("the project's images/");
    let k = catalog.debian_kernel("5.10", vmrepro::infra::images::DEFAULT_FLAVOUR).expect("5.10 is pinned");
    let name = Path::new(&k.filename).file_name()?.to_string_lossy().into_owned();
    let deb = real_cache().join("debs").join(&k.sha256).join(&name);
    deb.is_file().then(|| FileServer::start(BTreeMap::from([(name, deb)])))
}

/// A cache folder for the cache tests: `dir` inside `ns`, holding only what makes the
/// suite cheap to run once the cache is usable (a link to the real cache's rootfs
/// entries, the remembered KVM probe); the kernel is what the test is about.
fn seed_cache(ns: &MountNs, dir: &Path) {
    // On a fresh machine this may be the first test to run: build the rootfs into the
    // real cache first, so the link below points at something.
    let catalog = vmrepro::infra::images::Catalog::load(&repo_root().join("images")).expect("the project's images/");
    vmrepro::infra::images::rootfs::resolve_rootfs(
        &vmrepro::infra::images::Cache::from_env(),
        &catalog,
        &vmrepro::infra::images::rootfs::RootfsRequest::new(vmrepro::infra::images::DEFAULT_ROOTFS, &[]),
    )
    .expect("building the rootfs into the real cache");
    ns.sh("ln", &["-s", &real_cache().join("rootfs").display().to_string(), &dir.join("rootfs").display().to_string()]);
    let probe = real_cache().join("accel-probe.json");
    if probe.is_file() {
        ns.sh("cp", &[&probe.display().to_string(), &dir.display().to_string()]);
    }
}

/// Complete entries of the cache at `dir` (seen from inside `ns`), the linked rootfs
/// entries left out.
fn own_entries(ns: &MountNs, dir: &Path) -> Vec<(String, String, PathBuf)> {
    vmrepro::infra::images::Cache::new(ns.path(dir))
        .list()
        .into_iter()
        .filter(|(kind, _, _)| kind != "rootfs")
        .collect()
}

/// The cache at `dir` (inside `ns`) that failed: no complete entry, no build folder left.
fn assert_cache_has_nothing_half_written(ns: &MountNs, dir: &Path) {
    assert_eq!(own_entries(ns, dir), vec![], "a failed build must not leave a cache entry");
    let tmp = ns.path(dir).join("tmp");
    let left: Vec<_> = std::fs::read_dir(&tmp).into_iter().flatten().flatten().map(|e| e.path()).collect();
    assert!(left.is_empty(), "a failed build must not leave its build folder: {left:?}");
}

/// After the failure: the same cache folder, now usable, must give a passing run that
/// builds (not reuses) the kernel.
fn assert_later_run_with_a_good_cache_works(sb: &Sandbox, ns: &MountNs, cache_dir: &Path, mirror: Option<&str>) {
    let mut cmd = sb.command(&fixture("cache-kernel-5-10"));
    cmd.env("VMREPRO_CACHE_DIR", cache_dir);
    if let Some(m) = mirror {
        cmd.env("VMREPRO_DEBIAN_MIRROR", m);
    }
    let fin = sb.run(ns.wrap(&cmd), RUN_LIMIT);
    assert_eq!(fin.code, EXIT_OK, "with a usable cache the suite must pass; output:\n{}", fin.output);
    let dirs = sb.run_dirs();
    let run = read_json(&dirs.last().expect("a run folder").join("run.json"));
    let kernel = run["images"]
        .as_array()
        .and_then(|a| a.iter().find(|i| i["what"].as_str().unwrap_or_default().starts_with("kernel")))
        .unwrap_or_else(|| panic!("no kernel image in run.json: {run:#}"))
        .clone();
    assert_eq!(kernel["outcome"], "built", "the kernel must be built afresh, not taken from a failed attempt");
    let kinds: Vec<String> = own_entries(ns, cache_dir).into_iter().map(|(k, _, _)| k).collect();
    // The package and the kernel built from it, and the state the booted VM saved.
    assert_eq!(kinds, ["debs", "kernel", "vmstate"].map(String::from), "complete entries now");
}

/// The cache tests' common run: the 5.10-kernel suite with `cache_dir` as its cache,
/// inside `ns`. It must fail as an infrastructure error naming `path` and `reason`,
/// boot nothing and leave nothing half-written; after `recover` (a remount) the same
/// cache must give a passing run that builds the kernel afresh.
fn cache_failure_then_recovery(name: &str, mount_opts: &str, path_in_error: &str, reason: &str, recover: &str) {
    let _lock = vm_lock();
    let sb = Sandbox::new(name);
    let archive = local_archive();
    let mirror = archive.as_ref().map(|a| format!("{}/debian", a.url));
    let ns = MountNs::new();
    let cache_dir = sb.root.join("cache");
    std::fs::create_dir_all(&cache_dir).unwrap();
    // Root ignores permission bits: a read-only (or tiny) mount is what stops root.
    ns.sh(
        "mount",
        &["-t", "tmpfs", "-o", mount_opts, &format!("vmrepro-test-{name}"), &cache_dir.display().to_string()],
    );
    let writable = !mount_opts.split(',').any(|o| o == "ro");
    if writable {
        seed_cache(&ns, &cache_dir);
    }

    let mut cmd = sb.command(&fixture("cache-kernel-5-10"));
    cmd.env("VMREPRO_CACHE_DIR", &cache_dir);
    if let Some(m) = &mirror {
        cmd.env("VMREPRO_DEBIAN_MIRROR", m);
    }
    let fin = sb.run(ns.wrap(&cmd), RUN_LIMIT);
    assert_eq!(fin.code, EXIT_INFRA, "output:\n{}", fin.output);
    assert_contains(&fin.output, &cache_dir.join(path_in_error).display().to_string(), "the error names the path");
    assert_contains(&fin.output, reason, "the error says why");
    let run = read_json(&sb.run_dir().join("run.json"));
    assert_eq!(run["status"], "infrastructure_error");
    assert_eq!(vms(&run).len(), 0, "nothing was booted");
    assert_cache_has_nothing_half_written(&ns, &cache_dir);
    sb.assert_no_leftovers();

    ns.sh("mount", &["-o", recover, &cache_dir.display().to_string()]);
    if !writable {
        seed_cache(&ns, &cache_dir);
    }
    assert_later_run_with_a_good_cache_works(&sb, &ns, &cache_dir, mirror.as_deref());
    sb.assert_no_leftovers();
}

#[test]
fn read_only_cache_dir_is_a_clear_error_and_leaves_no_entry() {
    cache_failure_then_recovery("cache-read-only", "ro,size=1m", "", "Read-only file system", "remount,rw,size=1g");
}

#[test]
fn full_cache_disk_is_a_clear_error_and_leaves_no_entry() {
    cache_failure_then_recovery("cache-disk-full", "size=1m", "tmp", "No space left on device", "remount,size=1g");
}

#[test]
fn two_runs_of_the_same_suite_at_once_share_nothing() {
    let _lock = vm_lock();
    let sb = Sandbox::new("concurrent");
    let mut a = sb.spawn(sb.command(&fixture("concurrent")));
    let mut b = sb.spawn(sb.command(&fixture("concurrent")));
    // Watch both runs: at some moment both QEMUs must run, in different namespaces.
    let mut both_seen: Option<(u64, u64)> = None;
    let deadline = Instant::now() + RUN_LIMIT;
    while !(a.try_done() && b.try_done()) && Instant::now() < deadline {
        if both_seen.is_none() {
            if let (Some(qa), Some(qb)) = (qemu_of(a.pid(), "solo"), qemu_of(b.pid(), "solo")) {
                if let (Some(na), Some(nb)) = (netns_inode(qa.pid), netns_inode(qb.pid)) {
                    both_seen = Some((na, nb));
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let (fa, fb) = (a.wait(RUN_LIMIT), b.wait(RUN_LIMIT));
    assert_eq!(fa.code, EXIT_OK, "first run; output:\n{}", fa.output);
    assert_eq!(fb.code, EXIT_OK, "second run; output:\n{}", fb.output);
    let (na, nb) = both_seen.expect("both runs' QEMUs ran at the same time");
    assert_ne!(na, nb, "each run has its own network namespace");
    assert!(na != sb.before.netns && nb != sb.before.netns, "no QEMU runs in the host's namespace");

    let dirs = sb.run_dirs();
    assert_eq!(dirs.len(), 2, "two run folders: {dirs:?}");
    let runs: Vec<serde_json::Value> = dirs.iter().map(|d| read_json(&d.join("run.json"))).collect();
    for r in &runs {
        assert_eq!(r["status"], "passed");
    }
    assert_ne!(runs[0]["temp_dir"], runs[1]["temp_dir"], "each run has its own temp folder (sockets, overlays)");
    assert_ne!(runs[0]["network_namespace"]["inode"], runs[1]["network_namespace"]["inode"]);
    let recorded: Vec<u64> = runs.iter().map(|r| r["network_namespace"]["inode"].as_u64().unwrap()).collect();
    let mut seen = vec![na, nb];
    seen.sort();
    let mut recorded_sorted = recorded.clone();
    recorded_sorted.sort();
    assert_eq!(seen, recorded_sorted, "run.json records the namespaces the QEMUs ran in");
    sb.assert_no_leftovers();
}

#[test]
fn guests_reach_only_their_bridge_and_the_runner_opens_no_port() {
    let _lock = vm_lock();
    let sb = Sandbox::new("isolation");
    let host_listeners_before = listeners(std::process::id());
    let mut r = sb.spawn(sb.command(&fixture("isolation")));
    r.wait_for_line("vm probe: step hold running", RUN_LIMIT);

    // While the VMs run: no listening TCP/UDP socket belongs to the runner or its
    // children, in the host's namespace or in the run's own.
    let family = family(r.pid());
    let qemus: Vec<&Proc> = family.iter().filter(|p| p.cmdline.contains("process=vmrepro-")).collect();
    assert_eq!(qemus.len(), 2, "two QEMUs run: {family:#?}");
    let mut problems = Vec::new();
    for p in &family {
        let ours = socket_inodes(p.pid);
        for l in listeners(p.pid) {
            if ours.contains(&l.inode) {
                problems.push(format!("process {} ({}) listens on {} {}", p.pid, p.cmdline, l.proto, l.local));
            }
        }
    }
    assert!(problems.is_empty(), "the runner must open no listening port:\n{}", problems.join("\n"));
    let new_host: Vec<Listener> =
        listeners(std::process::id()).into_iter().filter(|l| !host_listeners_before.contains(l)).collect();
    let all_ours: std::collections::BTreeSet<u64> = family.iter().flat_map(|p| socket_inodes(p.pid)).collect();
    let ours_on_host: Vec<&Listener> = new_host.iter().filter(|l| all_ours.contains(&l.inode)).collect();
    assert!(ours_on_host.is_empty(), "new listening sockets on the host are ours: {ours_on_host:?}");

    // QMP, QGA and shell (the second serial port, `vmrepro shell`) sockets are in a 0700
    // folder of ours, inside the run's 0700 temp folder.
    let uid = nix::unistd::geteuid().as_raw();
    for q in &qemus {
        let sockets: Vec<PathBuf> = q
            .cmdline
            .split_whitespace()
            .filter(|a| a.starts_with("socket,"))
            .filter_map(|a| a.split(',').find_map(|kv| kv.strip_prefix("path=")).map(PathBuf::from))
            .collect();
        assert_eq!(sockets.len(), 3, "QMP, QGA and shell sockets in {}", q.cmdline);
        for s in &sockets {
            assert!(s.starts_with(&sb.tmp), "socket {} is in the run's temp folder", s.display());
            let vm_dir = s.parent().unwrap();
            let run_tmp = vm_dir.parent().unwrap();
            for d in [vm_dir, run_tmp] {
                assert_eq!(mode_and_owner(d), (0o700, uid), "{} must be 0700 and ours", d.display());
            }
            assert!(run_tmp.file_name().unwrap().to_string_lossy().starts_with("vmrepro-run-"));
        }
    }

    let fin = r.wait(RUN_LIMIT);
    assert_eq!(fin.code, EXIT_OK, "output:\n{}", fin.output);
    let dir = sb.run_dir();
    let run = read_json(&dir.join("run.json"));
    // Routes: only the bridge subnet, no default route (IPv4 or IPv6).
    let routes = step_stdout(&dir, &run, "probe", "routes");
    let (v4, v6_default) = routes.split_once("--- ipv6 default:").expect("both parts");
    let v4: Vec<&str> = v4.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(v4.len(), 1, "one IPv4 route: {routes}");
    assert!(v4[0].starts_with("10.78.8.0/24 dev eth0"), "the only route is the bridge subnet: {routes}");
    assert_eq!(v6_default.trim(), "", "no IPv6 default route: {routes}");
    // The peer answers (the network works) …
    assert_eq!(step(&run, "probe", "peer")["status"], "passed", "guests reach each other");
    // … the would-be host address doesn't, and the outside is unreachable.
    let gw = step_stdout(&dir, &run, "probe", "gateway");
    assert!(!gw.contains("exit=0"), "nothing answers at 10.78.8.1: {gw}");
    assert_contains(&gw, "0 received", "the ping to 10.78.8.1");
    let outside = step_stdout(&dir, &run, "probe", "outside");
    assert_eq!(outside.matches("Network is unreachable").count(), 2, "ping and connect() to 1.1.1.1: {outside}");
    assert!(!outside.contains("exit=0"), "{outside}");
    sb.assert_no_leftovers();
}

/// The leftovers checker is not vacuous: it reports each kind of leftover it looks for
/// (except a new host network device, which this test won't create on a shared host).
/// Boots no VM.
#[test]
fn the_leftovers_checker_reports_what_is_left() {
    use std::os::unix::net::UnixListener;
    let sb = Sandbox::new("leftovers-checker");
    // A run folder whose run.json records a temp folder, a QEMU PID and a namespace.
    let run_dir = sb.results.join("fake/20260101T000000Z");
    std::fs::create_dir_all(&run_dir).unwrap();
    let stale_tmp = sb.tmp.join("vmrepro-run-fake");
    std::fs::create_dir_all(&stale_tmp).unwrap();
    let _socket = UnixListener::bind(stale_tmp.join("qmp.sock")).unwrap();
    // A process mentioning the sandbox, and one holding a network namespace of its own.
    let mut mentions =
        std::process::Command::new("sh").args(["-c", "sleep 30; :"]).arg(sb.root.join("qemu-like")).spawn().unwrap();
    let mut in_ns = std::process::Command::new("unshare").args(["--net", "sleep", "30"]).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let ino = loop {
        match netns_inode(in_ns.id()) {
            Some(i) if i != sb.before.netns => break i,
            _ => assert!(Instant::now() < deadline, "unshare --net did not start"),
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let run = serde_json::json!({
        "started": "fake",
        "temp_dir": stale_tmp,
        "network_namespace": { "holder_pid": in_ns.id(), "inode": ino },
        "vms": [],
    });
    std::fs::write(run_dir.join("run.json"), run.to_string()).unwrap();

    let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sb.assert_no_leftovers()))
        .expect_err("the checker must fail");
    let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
    let _ = mentions.kill();
    let _ = in_ns.kill();
    let _ = (mentions.wait(), in_ns.wait());
    for needle in [
        &format!("process {} (parent {}) survived", mentions.id(), std::process::id()),
        &format!("is not empty: [\"{}\"]", stale_tmp.display()),
        &format!("the run's temp folder {} still exists", stale_tmp.display()),
        &format!("a unix socket remains: {}", stale_tmp.join("qmp.sock").display()),
        &format!("net:[{ino}] is still held by process {}", in_ns.id()),
    ] {
        assert_contains(&msg, needle, "the checker's report");
    }
}
