//! The suites `vmrepro bench` generates (from fixed templates, into its own temp
//! folder): one VM with one command, for the boot measurement; and one NFS server with
//! N clients reading a small file, for the scaling measurement. They are ordinary
//! suites, loaded and run by the runner's own code.

/// Subnet of the generated suites (each run has its own private namespace, so it
/// can't collide with another run's).
const SUBNET: &str = "10.79.0";

/// The kernel series a Debian pin is named by (`5.10`, `6.1`, `6.12`): digits and dots
/// only, so that it can be written into a template as it is.
pub fn valid_series(series: &str) -> bool {
    !series.is_empty()
        && series.split('.').all(|p| !p.is_empty() && p.len() <= 4 && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Name of the one VM of [`boot_suite`].
pub const BOOT_VM: &str = "vm";
/// Name of [`boot_suite`]'s one step; its output is the bench's "first output".
pub const BOOT_STEP: &str = "first";

/// One VM on Debian kernel `series` with `memory_mib` MiB and one vCPU, whose one step
/// prints a line: QEMU start → agent, and → that line received, are the runner's boot.
/// `series` must pass [`valid_series`].
pub fn boot_suite(series: &str, memory_mib: u64) -> String {
    format!(
        "name: bench-boot
description: vmrepro bench, one VM to its first command's output.
network:
  subnet: {SUBNET}.0/24
defaults:
  memory: {memory_mib}
  boot_timeout: 300s
  step_timeout: 60s
vms:
  - name: {BOOT_VM}
    kernel: {{ debian: \"{series}\" }}
    address: {SUBNET}.2
    steps:
      - name: {BOOT_STEP}
        run: echo vmrepro-bench
"
    )
}

/// The scaling suite: an NFS server (Debian 5.10, 512 MiB, the 2.4.19-style profile,
/// as in the flagship) and `clients` clients on Debian `series` with `memory_mib` MiB,
/// each reading a 20 MB file once, one client after another. `clients` is 1..=50;
/// `series` must pass [`valid_series`].
pub fn scaling_suite(clients: usize, series: &str, memory_mib: u64) -> String {
    let mut s = format!(
        "name: bench-scale-{clients}
description: vmrepro bench scaling, one NFS server and {clients} client(s) reading 20 MB each.
network:
  subnet: {SUBNET}.0/24
defaults:
  memory: {memory_mib}
  boot_timeout: 900s
  step_timeout: 600s
vms:
  - name: server
    kernel: {{ debian: \"5.10\" }}
    address: {SUBNET}.1
    memory: 512
    profile: nfs-server-2.4.19
"
    );
    let names: Vec<String> = (1..=clients).map(|i| format!("client-{i}")).collect();
    for (i, n) in names.iter().enumerate() {
        s.push_str(&format!(
            "  - name: {n}\n    kernel: {{ debian: \"{series}\" }}\n    address: {SUBNET}.{}\n",
            10 + i
        ));
    }
    s.push_str(&format!(
        "nfs_read:
  server: server
  export: /home
  file: {{ name: user/bench.bytes, block_size: 1000000, count: 20 }}
  clients: [{}]
  mount_point: /mnt/home
  mount_options: defaults
  repeat: 1
  snapshot_verdicts: none
",
        names.join(", ")
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_are_digits_and_dots() {
        for ok in ["5.10", "6.1", "6.12"] {
            assert!(valid_series(ok), "{ok}");
        }
        for bad in ["", "6.", ".1", "6.1\"", "6.1\n  evil: 1", "latest"] {
            assert!(!valid_series(bad), "{bad:?}");
        }
    }

    /// The templates are suites the real loader accepts, with the VMs and steps the
    /// bench relies on.
    #[test]
    fn generated_suites_load_as_planned() {
        let images = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../images");
        let d = tempfile::tempdir().unwrap();
        let boot = d.path().join("boot.yaml");
        std::fs::write(&boot, boot_suite("6.1", 384)).unwrap();
        let (plan, _) = crate::suite::load(&boot, Some(&images)).unwrap();
        assert_eq!(plan.vms.len(), 1);
        assert_eq!(plan.vms[0].name, BOOT_VM);
        assert_eq!(plan.vms[0].memory_mib, 384);
        assert!(plan.vms[0].steps.iter().any(|s| s.name == BOOT_STEP));
        for n in [1, 8] {
            let p = d.path().join(format!("scale-{n}.yaml"));
            std::fs::write(&p, scaling_suite(n, "6.1", 256)).unwrap();
            let (plan, _) = crate::suite::load(&p, Some(&images)).unwrap();
            assert_eq!(plan.vms.len(), n + 1);
            assert_eq!(plan.vms.iter().filter(|v| v.memory_mib == 256).count(), n);
            assert_eq!(plan.suite, format!("bench-scale-{n}"));
        }
    }
}
