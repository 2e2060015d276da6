//! QEMU's memory per VM while a suite runs: a sampler thread that finds this process's
//! QEMU children and keeps each one's peak resident set size.
//!
//! Sources: `/proc/<pid>/stat` (field 4, the parent PID), `/proc/<pid>/cmdline` (QEMU's
//! `-name guest=<vm>,…`, as `infra::qemu::args` writes it) and `/proc/<pid>/status`
//! (`VmRSS`, the resident set now, and `VmHWM`, its high-water mark; both in kB,
//! which the kernel means as KiB), and `/proc/<pid>/smaps_rollup` (`Pss`, the
//! proportional set size: each resident page divided by the number of processes
//! mapping it, so that VMs restored from one mapped RAM file share its pages; Linux ≥
//! 4.14).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Resident memory of one process, KiB (`/proc/<pid>/status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProcMem {
    /// `VmRSS`: resident now.
    pub rss_kib: u64,
    /// `VmHWM`: the most it was resident at any time.
    pub hwm_kib: u64,
    /// `Pss` of `smaps_rollup` (0 where the kernel has none); as a peak, the largest
    /// sample.
    pub pss_kib: u64,
}

/// Parses `VmRSS` and `VmHWM` from the text of `/proc/<pid>/status`. `None` when
/// `VmRSS` is missing (a kernel thread, or a process that has become a zombie).
pub fn parse_status(text: &str) -> Option<ProcMem> {
    let rss_kib = kib_field(text, "VmRSS")?;
    Some(ProcMem { rss_kib, hwm_kib: kib_field(text, "VmHWM").unwrap_or(rss_kib).max(rss_kib), pss_kib: 0 })
}

/// Parses `Pss` (KiB) from the text of `/proc/<pid>/smaps_rollup`.
pub fn parse_pss(text: &str) -> Option<u64> {
    kib_field(text, "Pss")
}

/// The value of line `NAME: <n> kB` in a `/proc` file's text.
fn kib_field(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(name)?.strip_prefix(':')?;
        let mut it = rest.split_whitespace();
        let n = it.next()?.parse::<u64>().ok()?;
        (it.next() == Some("kB")).then_some(n)
    })
}

/// The parent PID from the text of `/proc/<pid>/stat` (the field after the command
/// name, which is in parentheses and may itself hold spaces and parentheses).
pub fn parse_ppid(stat: &str) -> Option<u32> {
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(1)?.parse().ok()
}

/// The VM name from a QEMU command line as `/proc/<pid>/cmdline` holds it (arguments
/// separated by NUL): the `guest=` of `-name`.
pub fn guest_name(cmdline: &[u8]) -> Option<String> {
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    let i = args.iter().position(|a| *a == b"-name")?;
    let value = String::from_utf8_lossy(args.get(i + 1)?).into_owned();
    value.split(',').find_map(|kv| kv.strip_prefix("guest=")).map(str::to_string)
}

/// The QEMU children of process `parent`: `(pid, vm name)`.
fn qemu_children(parent: u32) -> Vec<(u32, String)> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return vec![] };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            if parse_ppid(&stat)? != parent {
                return None;
            }
            let name = guest_name(&std::fs::read(format!("/proc/{pid}/cmdline")).ok()?)?;
            Some((pid, name))
        })
        .collect()
}

/// Peak memory of each VM's QEMU seen by a [`Sampler`], by VM name.
pub type Peaks = BTreeMap<String, ProcMem>;

/// Samples this process's QEMU children every `interval` on a thread of its own until
/// [`Sampler::finish`].
#[derive(Debug)]
pub struct Sampler {
    stop: Arc<AtomicBool>,
    peaks: Arc<Mutex<Peaks>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sampler {
    /// Starts sampling.
    pub fn start(interval: Duration) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let peaks: Arc<Mutex<Peaks>> = Arc::default();
        let (s, p) = (stop.clone(), peaks.clone());
        let me = std::process::id();
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                for (pid, name) in qemu_children(me) {
                    let Some(m) =
                        std::fs::read_to_string(format!("/proc/{pid}/status")).ok().as_deref().and_then(parse_status)
                    else {
                        continue;
                    };
                    let pss = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
                        .ok()
                        .as_deref()
                        .and_then(parse_pss)
                        .unwrap_or(0);
                    let mut peaks = p.lock().expect("not poisoned");
                    let e = peaks.entry(name).or_default();
                    e.rss_kib = e.rss_kib.max(m.rss_kib);
                    e.hwm_kib = e.hwm_kib.max(m.hwm_kib);
                    e.pss_kib = e.pss_kib.max(pss);
                }
                std::thread::sleep(interval);
            }
        });
        Sampler { stop, peaks, thread: Some(thread) }
    }

    /// Stops sampling and returns the peaks.
    pub fn finish(mut self) -> Peaks {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.peaks.lock().expect("not poisoned").clone()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &str = "Name:\tqemu-system-x86\nUmask:\t0022\nState:\tS (sleeping)\nVmPeak:\t 1722340 kB\nVmSize:\t 1657828 kB\nVmHWM:\t  412332 kB\nVmRSS:\t  398120 kB\nRssAnon:\t  371000 kB\nThreads:\t7\n";

    #[test]
    fn status_gives_rss_and_high_water_mark_in_kib() {
        assert_eq!(parse_status(STATUS), Some(ProcMem { rss_kib: 398_120, hwm_kib: 412_332, pss_kib: 0 }));
    }

    #[test]
    fn smaps_rollup_gives_the_proportional_set_size() {
        let rollup = "55d6a0000000-7ffd1b3fe000 ---p 00000000 00:00 0    [rollup]\nRss:              251332 kB\nPss:              163530 kB\nPss_Dirty:        120004 kB\nPss_Anon:         118000 kB\nPss_File:          45530 kB\n";
        assert_eq!(parse_pss(rollup), Some(163_530), "Pss, not Pss_Dirty or Pss_File");
        assert_eq!(parse_pss("Rss: 5 kB\n"), None);
    }

    #[test]
    fn a_kernel_thread_or_zombie_has_no_rss() {
        assert_eq!(parse_status("Name:\tkthreadd\nState:\tS (sleeping)\nThreads:\t1\n"), None);
        // `VmRSSx` is not `VmRSS`, and a value without its unit is not trusted.
        assert_eq!(parse_status("VmRSSx:\t 5 kB\nVmRSS:\t 7\n"), None);
    }

    #[test]
    fn ppid_is_found_after_a_command_name_with_spaces_and_parentheses() {
        assert_eq!(parse_ppid("4242 (qemu (x) 86) S 1717 4242 4242 0 -1"), Some(1717));
        assert_eq!(parse_ppid("garbage"), None);
    }

    #[test]
    fn the_vm_name_comes_from_qemus_name_option() {
        let cmdline = b"qemu-system-x86_64\0-name\0guest=client-6-1,process=vmrepro-client-6-1\0-nodefaults\0";
        assert_eq!(guest_name(cmdline).as_deref(), Some("client-6-1"));
        assert_eq!(guest_name(b"qemu-system-x86_64\0-display\0none\0"), None);
    }
}
