//! Pinning each QEMU process to one host CPU (`vmrepro run --pin`).
//!
//! Under TCG a guest's speed is the host CPU time its QEMU gets, so VMs that share
//! cores with each other, the runner and whatever else runs on the host make elapsed
//! times noisy. With `--pin`, every QEMU process (all its threads: vCPUs, I/O, RCU) is
//! bound with `sched_setaffinity(2)` to one CPU before it starts:
//!
//! - the VMs that serve (those with a server `profile:`) share the first CPU this
//!   process may use;
//! - the others (the clients, which run the measurements) take the remaining CPUs in
//!   turn, round robin, in suite order;
//! - a suite without a serving VM spreads all its VMs over all CPUs the same way.
//!
//! On the 2-core machine of BENCHMARKS.md ("Pinning and `-icount`, measured") this is
//! server on core 0, clients on core 1, and it cut the A/A run-to-run coefficient of
//! variation of a client's read time from 0.22 to 0.035–0.06. The runner itself and
//! other host processes are not pinned. It needs at least 2 CPUs; with 1 nothing is
//! pinned ([`PinError`]).

use std::collections::BTreeSet;

/// Why VMs can't be pinned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PinError {
    /// This process may use fewer than two CPUs (`sched_getaffinity`).
    #[error("--pin needs at least 2 host CPUs, and this process may use {0}; the VMs run unpinned")]
    TooFewCpus(usize),
    /// `sched_getaffinity` failed.
    #[error("--pin: cannot read this process's CPU affinity ({0}); the VMs run unpinned")]
    Affinity(String),
}

/// The CPUs this process may run on (`sched_getaffinity(2)` of the calling thread),
/// ascending. Errors: [`PinError::Affinity`] with the system's error.
pub fn allowed_cpus() -> Result<Vec<usize>, PinError> {
    use nix::sched::{sched_getaffinity, CpuSet};
    let set = sched_getaffinity(nix::unistd::Pid::from_raw(0)).map_err(|e| PinError::Affinity(e.to_string()))?;
    Ok((0..CpuSet::count()).filter(|&c| set.is_set(c).unwrap_or(false)).collect())
}

/// One host CPU per VM: `serves[i]` tells whether VM `i` serves (see the module docs),
/// `cpus` are the usable host CPUs (at least 2, ascending and distinct, as
/// [`allowed_cpus`] gives them). Returns the CPU of each VM, in the same order.
///
/// Errors: [`PinError::TooFewCpus`] when `cpus` holds fewer than 2 distinct CPUs.
pub fn assign(serves: &[bool], cpus: &[usize]) -> Result<Vec<usize>, PinError> {
    let cpus: Vec<usize> = cpus.iter().copied().collect::<BTreeSet<_>>().into_iter().collect();
    if cpus.len() < 2 {
        return Err(PinError::TooFewCpus(cpus.len()));
    }
    let any_server = serves.iter().any(|&s| s);
    let pool = if any_server { &cpus[1..] } else { &cpus[..] };
    let mut next = 0usize;
    Ok(serves
        .iter()
        .map(|&s| {
            if s {
                cpus[0]
            } else {
                let c = pool[next % pool.len()];
                next += 1;
                c
            }
        })
        .collect())
}

/// Binds the calling process to `cpu`. Async-signal-safe (one system call on a stack
/// value): for a `pre_exec` closure, so that QEMU and every thread it starts run only
/// there. Errors: the system's, e.g. `EINVAL` for a CPU this process may not use.
pub(crate) fn bind_to(cpu: usize) -> std::io::Result<()> {
    let mut set = nix::sched::CpuSet::new();
    set.set(cpu).map_err(std::io::Error::from)?;
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).map_err(std::io::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_gets_the_first_cpu_and_the_clients_share_the_rest_in_turn() {
        // The flagship's shape on 2 CPUs: server, then three clients.
        assert_eq!(assign(&[true, false, false, false], &[0, 1]).unwrap(), vec![0, 1, 1, 1]);
        // On 4 CPUs each client has its own.
        assert_eq!(assign(&[true, false, false, false], &[0, 1, 2, 3]).unwrap(), vec![0, 1, 2, 3]);
        // The server need not come first, and a sparse affinity mask is respected.
        assert_eq!(assign(&[false, false, true, false], &[2, 5, 7]).unwrap(), vec![5, 7, 2, 5]);
        // Two serving VMs share the first CPU.
        assert_eq!(assign(&[true, true, false], &[0, 1, 2]).unwrap(), vec![0, 0, 1]);
    }

    #[test]
    fn without_a_server_every_cpu_takes_vms_in_turn() {
        assert_eq!(assign(&[false, false, false], &[0, 1]).unwrap(), vec![0, 1, 0]);
        assert_eq!(assign(&[], &[0, 1]).unwrap(), Vec::<usize>::new());
    }

    #[test]
    fn one_cpu_or_a_repeated_one_is_too_few() {
        assert_eq!(assign(&[true, false], &[3]), Err(PinError::TooFewCpus(1)));
        assert_eq!(assign(&[true, false], &[1, 1]), Err(PinError::TooFewCpus(1)));
        assert_eq!(assign(&[true], &[]), Err(PinError::TooFewCpus(0)));
    }

    #[test]
    fn a_bound_child_runs_only_on_its_cpu() {
        // A real process bound the way QEMU is: its affinity list, as the kernel
        // reports it in /proc/self/status, is that one CPU.
        let cpus = allowed_cpus().expect("affinity readable");
        let cpu = *cpus.last().expect("at least one CPU");
        let mut cmd = std::process::Command::new("grep");
        cmd.args(["Cpus_allowed_list", "/proc/self/status"]);
        // SAFETY: bind_to is async-signal-safe.
        unsafe { std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || bind_to(cpu)) };
        let out = cmd.output().expect("grep runs");
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(text.split_whitespace().last(), Some(cpu.to_string().as_str()), "{text}");
    }
}
