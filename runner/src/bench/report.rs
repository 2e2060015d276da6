//! What `vmrepro bench` found, as data (`--json`) and as Markdown tables; and the
//! phase split of a suite's run, derived from its `run.json` alone. Pure: no I/O.

use serde::Serialize;

use crate::infra::qemu::vm::StartPhases;
use crate::measure::stats::{summarize, Summary};
use crate::plan::StepKind;
use crate::run::RunRecord;

/// Everything one `vmrepro bench` measured. Times in seconds (host monotonic clock),
/// memory in MiB (2^20 bytes).
#[derive(Debug, Clone, Default, Serialize)]
pub struct BenchReport {
    /// Repetitions of the interleaved boot and image measurements.
    pub reps: usize,
    /// Host CPUs (`available_parallelism`).
    pub host_cpus: usize,
    /// Accelerator the VMs used (`kvm` or `tcg`).
    pub accel: String,
    /// Kernel of the boot measurement (`kernel 6.1 (linux-image-…)`) and its release.
    pub boot_kernel: String,
    /// Bare QEMU: spawn → the rootfs's command ran → QEMU exited, one value per rep.
    pub bare_s: Vec<f64>,
    /// vmrepro, booting (`--fresh-boot`): QEMU spawn → ready (guest agent answered,
    /// identity set), per rep.
    pub agent_s: Vec<f64>,
    /// vmrepro, booting: QEMU spawn → the first command's output received, per rep.
    pub first_output_s: Vec<f64>,
    /// vmrepro, restoring a mapped saved state (its RAM file mapped copy-on-write, the
    /// default): QEMU spawn → ready, per rep.
    pub restored_agent_s: Vec<f64>,
    /// vmrepro, restoring a mapped saved state: QEMU spawn → the first command's output.
    pub restored_first_output_s: Vec<f64>,
    /// vmrepro, restoring a copied saved state (the RAM in the migration stream, the
    /// fallback): QEMU spawn → ready, per rep.
    #[serde(default)]
    pub copied_agent_s: Vec<f64>,
    /// vmrepro, restoring a copied saved state: QEMU spawn → the first command's output.
    #[serde(default)]
    pub copied_first_output_s: Vec<f64>,
    /// vmrepro: the whole one-VM run (images, network, boot, step, teardown), per rep.
    pub run_s: Vec<f64>,
    /// Where each vmrepro start's time went (`run.json`'s `start_phases`), labelled
    /// `booting`, `restoring, mapped RAM` or `restoring, copied RAM`, one per rep.
    #[serde(default)]
    pub start_phases: Vec<(String, StartPhases)>,
    /// Warm resolution of the suite's images (cache lookups), per rep.
    pub images_warm_s: Vec<f64>,
    /// A cold build into an empty cache, when asked: what, and seconds.
    pub images_cold: Option<(String, f64)>,
    /// One entry per run of the benched suite.
    pub suite_runs: Vec<SuiteRun>,
    /// One entry per scaling point.
    pub scaling: Vec<ScalePoint>,
    /// Measurements that failed (they are left out of the numbers above).
    pub errors: Vec<String>,
}

/// One phase of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Phase {
    /// What it is.
    pub name: String,
    /// Start, seconds after the run started, when known.
    pub start_s: Option<f64>,
    /// Duration, seconds (for a VM's steps: first start → last end).
    pub seconds: f64,
    /// For a VM's steps: the sum of their durations (less than `seconds` when its
    /// steps waited for other VMs' steps in between).
    pub busy_s: Option<f64>,
}

/// One run of a suite, split into phases.
#[derive(Debug, Clone, Serialize)]
pub struct SuiteRun {
    /// Suite name.
    pub suite: String,
    /// Its run folder.
    pub run_dir: String,
    /// `run.json`'s status.
    pub status: String,
    /// The whole run, seconds.
    pub total_s: f64,
    /// Its phases ([`phases`]).
    pub phases: Vec<Phase>,
}

/// One VM's QEMU memory.
#[derive(Debug, Clone, Serialize)]
pub struct VmMemory {
    /// VM name.
    pub vm: String,
    /// Guest RAM, MiB.
    pub guest_mib: u64,
    /// Peak resident set of its QEMU (the larger of sampled `VmRSS` and `VmHWM`), MiB.
    pub peak_rss_mib: f64,
    /// Largest sampled proportional set size of its QEMU (`smaps_rollup` `Pss`), MiB:
    /// pages shared with other QEMUs count a share each.
    pub peak_pss_mib: f64,
    /// Whether it booted or was restored.
    pub start: Option<crate::run::VmStart>,
}

/// One point of the scaling measurement.
#[derive(Debug, Clone, Serialize)]
pub struct ScalePoint {
    /// NFS clients.
    pub clients: usize,
    /// How its saved states held the RAM (`None`: `--fresh-boot`, every VM booted).
    pub state_ram: Option<crate::infra::qemu::state::StateRam>,
    /// The run's status.
    pub status: String,
    /// The whole run, seconds.
    pub total_s: f64,
    /// Slowest boot (QEMU start → agent) of its VMs, seconds.
    pub boot_max_s: f64,
    /// Each VM's QEMU memory.
    pub vms: Vec<VmMemory>,
}

/// A run's phases from its record: images, network, boot (to the last agent), each
/// VM's steps (first step's start → last step's end, and their summed durations; for
/// `nfs_read` the server's setup and each client's reads), teardown, total, and the
/// overhead: total minus the summed durations of the measured iterations (`measure`
/// steps). A VM's steps only have a start in run folders that record `started_s`.
pub fn phases(r: &RunRecord) -> Vec<Phase> {
    let t = &r.timings;
    let phase =
        |name: &str, start_s: Option<f64>, seconds: f64| Phase { name: name.into(), start_s, seconds, busy_s: None };
    let mut out = vec![
        phase("images", Some(0.0), t.images_s),
        phase("network (namespace, bridge, taps)", None, t.network_s),
        phase("boot (probe, network, QEMU start → last agent)", Some(t.images_s), t.boot_s),
    ];
    let mut measured = 0.0;
    for v in &r.vms {
        let ran: Vec<_> = v.steps.iter().filter(|s| s.stdout.is_some() || s.duration_s > 0.0).collect();
        if ran.is_empty() {
            continue;
        }
        let busy: f64 = ran.iter().map(|s| s.duration_s).sum();
        measured +=
            ran.iter().filter(|s| matches!(s.kind, StepKind::Measure { .. })).map(|s| s.duration_s).sum::<f64>();
        let (start_s, seconds) = if ran.iter().all(|s| s.started_s.is_some()) {
            let first = ran.iter().filter_map(|s| s.started_s).fold(f64::INFINITY, f64::min);
            let end = ran.iter().map(|s| s.started_s.unwrap_or(0.0) + s.duration_s).fold(0.0, f64::max);
            (Some(first), end - first)
        } else {
            (None, busy)
        };
        out.push(Phase {
            name: format!("steps on {} ({} steps)", v.name, ran.len()),
            start_s,
            seconds,
            busy_s: Some(busy),
        });
    }
    out.push(phase("teardown", None, t.teardown_s));
    out.push(phase("total", Some(0.0), t.total_s));
    out.push(phase("total − measured iterations (overhead)", None, t.total_s - measured));
    out
}

/// `min / median / max` cells of `values` (`–` when empty).
fn cells(values: &[f64], digits: usize) -> String {
    match summarize(values) {
        Some(Summary { min, median, max, .. }) => {
            format!("{min:.digits$} | {median:.digits$} | {max:.digits$}")
        }
        None => "– | – | –".into(),
    }
}

/// The medians of each kind of start's [`StartPhases`] as a Markdown table (empty
/// without any): seconds since QEMU's spawn, `–` for a point no start of the kind
/// passed.
fn start_phases_table(all: &[(String, StartPhases)]) -> String {
    let mut kinds: Vec<&str> = all.iter().map(|(k, _)| k.as_str()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    if kinds.is_empty() {
        return String::new();
    }
    let mut s = "\nWhere a start's time goes (medians, seconds since QEMU's spawn):\n\n| start | n | QMP connected | state load started | running | agent answered | ready |\n|---|---|---|---|---|---|---|\n".to_string();
    let points: [fn(&StartPhases) -> Option<f64>; 5] =
        [|p| p.qmp_s, |p| p.load_started_s, |p| p.running_s, |p| p.agent_s, |p| p.ready_s];
    for kind in kinds {
        let of: Vec<&StartPhases> = all.iter().filter(|(k, _)| k == kind).map(|(_, p)| p).collect();
        s.push_str(&format!("| {kind} | {} |", of.len()));
        for point in points {
            let v: Vec<f64> = of.iter().filter_map(|p| point(p)).collect();
            match summarize(&v) {
                Some(sum) => s.push_str(&format!(" {:.3} |", sum.median)),
                None => s.push_str(" – |"),
            }
        }
        s.push('\n');
    }
    s
}

/// Per-rep ratios `a[i] / b[i]` (pairs where both were measured in the same rep).
pub fn ratios(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).filter(|(_, y)| **y > 0.0).map(|(x, y)| x / y).collect()
}

/// The report as Markdown: a boot table, the suite's phases, the scaling table.
pub fn markdown(r: &BenchReport) -> String {
    let mut s = format!(
        "Host: {} CPUs, accelerator {}; boot kernel {}; {} interleaved repetition(s).\n\n",
        r.host_cpus, r.accel, r.boot_kernel, r.reps
    );
    s.push_str("| measurement | n | min | median | max |\n|---|---|---|---|---|\n");
    let rows: [(&str, &[f64], usize); 9] = [
        ("bare QEMU: spawn → rootfs command → exit (s)", &r.bare_s, 2),
        ("vmrepro booting: QEMU spawn → ready (agent answered, identity set) (s)", &r.agent_s, 2),
        ("vmrepro booting: QEMU spawn → first command's output (s)", &r.first_output_s, 2),
        ("vmrepro restoring, mapped RAM: QEMU spawn → ready (s)", &r.restored_agent_s, 2),
        ("vmrepro restoring, mapped RAM: QEMU spawn → first command's output (s)", &r.restored_first_output_s, 2),
        ("vmrepro restoring, copied RAM: QEMU spawn → ready (s)", &r.copied_agent_s, 2),
        ("vmrepro restoring, copied RAM: QEMU spawn → first command's output (s)", &r.copied_first_output_s, 2),
        ("vmrepro: whole one-VM run (s)", &r.run_s, 2),
        ("warm image resolution of the suite (s)", &r.images_warm_s, 3),
    ];
    for (name, v, d) in rows {
        s.push_str(&format!("| {name} | {} | {} |\n", v.len(), cells(v, d)));
    }
    for (name, a) in [
        ("booting: ready", &r.agent_s),
        ("booting: first output", &r.first_output_s),
        ("restoring, mapped RAM: ready", &r.restored_agent_s),
        ("restoring, mapped RAM: first output", &r.restored_first_output_s),
        ("restoring, copied RAM: ready", &r.copied_agent_s),
    ] {
        let q = ratios(a, &r.bare_s);
        s.push_str(&format!("| ratio vmrepro {name} / bare (per rep) | {} | {} |\n", q.len(), cells(&q, 2)));
    }
    let q = ratios(&r.restored_agent_s, &r.copied_agent_s);
    s.push_str(&format!("| ratio restoring ready, mapped / copied RAM (per rep) | {} | {} |\n", q.len(), cells(&q, 2)));
    s.push_str(&start_phases_table(&r.start_phases));
    if let Some((what, secs)) = &r.images_cold {
        s.push_str(&format!("| cold image build: {what} (s) | 1 | {secs:.1} | {secs:.1} | {secs:.1} |\n"));
    }
    for run in &r.suite_runs {
        s.push_str(&format!(
            "\nSuite `{}` ({}, {:.1} s, {}):\n\n| phase | start s | seconds | busy s |\n|---|---|---|---|\n",
            run.suite, run.status, run.total_s, run.run_dir
        ));
        for p in &run.phases {
            let start = p.start_s.map_or("–".to_string(), |v| format!("{v:.1}"));
            let busy = p.busy_s.map_or("–".to_string(), |v| format!("{v:.1}"));
            s.push_str(&format!("| {} | {start} | {:.1} | {busy} |\n", p.name, p.seconds));
        }
    }
    if !r.scaling.is_empty() {
        s.push_str("\nScaling (server + N clients, 20 MB read each; PSS: each QEMU's largest proportional set size, pages shared between QEMUs counted once in the sum):\n\n");
        s.push_str("| clients | saved-state RAM | VMs (restored) | status | wall s | slowest boot s | QEMU peak RSS MiB (min–max) | summed peak PSS MiB | restored clients' PSS MiB (min–max) | guest RAM MiB | max RSS − RAM MiB |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
        for p in &r.scaling {
            let rss: Vec<f64> = p.vms.iter().map(|v| v.peak_rss_mib).collect();
            let over = p.vms.iter().map(|v| v.peak_rss_mib - v.guest_mib as f64).fold(f64::NEG_INFINITY, f64::max);
            let ram: Vec<String> = {
                let mut m: Vec<u64> = p.vms.iter().map(|v| v.guest_mib).collect();
                m.sort_unstable();
                m.dedup();
                m.iter().map(u64::to_string).collect()
            };
            let over = if over.is_finite() { format!("{over:.0}") } else { "–".into() };
            let range = |v: &[f64]| {
                let (lo, hi) = v.iter().fold((f64::INFINITY, 0.0_f64), |(lo, hi), v| (lo.min(*v), hi.max(*v)));
                if v.is_empty() {
                    "–".to_string()
                } else {
                    format!("{lo:.0}–{hi:.0}")
                }
            };
            let restored: Vec<&VmMemory> =
                p.vms.iter().filter(|v| v.start == Some(crate::run::VmStart::Restored)).collect();
            let restored_pss: Vec<f64> =
                restored.iter().filter(|v| v.vm.starts_with("client")).map(|v| v.peak_pss_mib).collect();
            let pss: f64 = p.vms.iter().map(|v| v.peak_pss_mib).sum();
            let how = p.state_ram.map_or("none (booted)".to_string(), |m| format!("{m:?}").to_lowercase());
            s.push_str(&format!(
                "| {} | {how} | {} ({}) | {} | {:.1} | {:.1} | {} | {pss:.0} | {} | {} | {over} |\n",
                p.clients,
                p.vms.len(),
                restored.len(),
                p.status,
                p.total_s,
                p.boot_max_s,
                range(&rss),
                range(&restored_pss),
                ram.join(", ")
            ));
        }
    }
    for e in &r.errors {
        s.push_str(&format!("\nerror: {e}\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> RunRecord {
        let json = r#"{
            "schema": 2, "suite": "s", "suite_file": "s.yaml", "started": "2026-11-30T00:00:00Z",
            "status": "passed", "error": null, "accel": "tcg", "accel_notice": null,
            "subnet": "10.0.0.0/24", "mtu": 1500, "temp_dir": null, "network_namespace": null,
            "teardown_problems": [], "images": [],
            "timings": {"images_s": 0.1, "boot_s": 9.0, "network_s": 0.4, "steps_s": 50.0, "teardown_s": 0.3, "total_s": 60.0},
            "vms": [
                {"name": "server", "kernel": "k", "kernel_release": "r", "address": "a", "mac": "m", "tap": "t",
                 "accel": "tcg", "pid": 1, "boot_s": 7.0, "ending": "quit", "console_log": "c", "qemu_cmdline": "q", "clock": null,
                 "steps": [
                    {"name": "p", "kind": "user", "status": "passed", "exit_code": 0, "signal": null, "expect_exit": 0,
                     "duration_s": 2.0, "started_s": 7.5, "stdout": "x", "stderr": "y", "error": null},
                    {"name": "f", "kind": "user", "status": "passed", "exit_code": 0, "signal": null, "expect_exit": 0,
                     "duration_s": 3.0, "started_s": 10.5, "stdout": "x", "stderr": "y", "error": null}]},
                {"name": "old", "kernel": "k", "kernel_release": "r", "address": "a", "mac": "m", "tap": "t",
                 "accel": "tcg", "pid": 2, "boot_s": 8.0, "ending": "quit", "console_log": "c", "qemu_cmdline": "q", "clock": null,
                 "steps": [
                    {"name": "r1", "kind": "measure", "measurement": "m", "iteration": 1, "warmup": false, "status": "passed", "exit_code": 0, "signal": null, "expect_exit": 0,
                     "duration_s": 4.0, "stdout": "x", "stderr": "y", "error": null},
                    {"name": "r2", "kind": "measure", "measurement": "m", "iteration": 2, "warmup": false, "status": "passed", "exit_code": 0, "signal": null, "expect_exit": 0,
                     "duration_s": 5.0, "stdout": "x", "stderr": "y", "error": null},
                    {"name": "never", "kind": "user", "status": "skipped", "exit_code": null, "signal": null, "expect_exit": 0,
                     "duration_s": 0.0, "stdout": null, "stderr": null, "error": "x"}]}]
        }"#;
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn phases_span_each_vms_steps_and_fall_back_to_summed_durations() {
        let p = phases(&record());
        let find = |n: &str| p.iter().find(|x| x.name.starts_with(n)).unwrap().clone();
        assert_eq!(find("images").seconds, 0.1);
        assert_eq!(find("network").seconds, 0.4);
        // 7.5 → 10.5 + 3.0 = 13.5: a span of 6 s starting at 7.5, 5 s of it in steps.
        assert_eq!(
            find("steps on server"),
            Phase { name: "steps on server (2 steps)".into(), start_s: Some(7.5), seconds: 6.0, busy_s: Some(5.0) }
        );
        // No start times (an older run folder): the durations of the steps that ran.
        assert_eq!(
            find("steps on old"),
            Phase { name: "steps on old (2 steps)".into(), start_s: None, seconds: 9.0, busy_s: Some(9.0) }
        );
        // r1 and r2 are measured iterations (9 s): 60 − 9.
        assert_eq!(find("total − measured").seconds, 51.0);
        assert_eq!(find("teardown").seconds, 0.3);
        assert_eq!(find("total").seconds, 60.0);
    }

    #[test]
    fn ratios_pair_reps_and_skip_missing_denominators() {
        assert_eq!(ratios(&[4.0, 6.0, 9.0], &[2.0, 0.0, 3.0]), vec![2.0, 3.0]);
        assert_eq!(ratios(&[4.0], &[]), Vec::<f64>::new());
    }

    #[test]
    fn markdown_has_min_median_max_and_the_ratio_and_scaling_rows() {
        let r = BenchReport {
            reps: 3,
            host_cpus: 2,
            accel: "tcg".into(),
            boot_kernel: "kernel 6.1".into(),
            bare_s: vec![2.0, 3.0, 2.5],
            agent_s: vec![4.0, 4.5, 5.0],
            first_output_s: vec![4.2, 4.8, 5.1],
            restored_agent_s: vec![1.0, 0.75, 1.25],
            restored_first_output_s: vec![1.1, 0.9, 1.3],
            copied_agent_s: vec![2.0, 3.0, 2.5],
            copied_first_output_s: vec![2.1, 3.1, 2.6],
            run_s: vec![6.0, 6.5, 7.0],
            start_phases: {
                let restore = |agent: f64| StartPhases {
                    qmp_s: Some(0.1),
                    load_started_s: Some(0.15),
                    running_s: Some(0.3),
                    agent_s: Some(agent),
                    ready_s: Some(agent + 0.1),
                };
                let boot = StartPhases { running_s: Some(0.0), agent_s: Some(3.0), ..StartPhases::default() };
                vec![
                    ("restoring, mapped RAM".into(), restore(0.4)),
                    ("booting".into(), boot),
                    ("restoring, mapped RAM".into(), restore(0.6)),
                ]
            },
            images_warm_s: vec![0.01, 0.02, 0.03],
            images_cold: None,
            suite_runs: vec![SuiteRun {
                suite: "s".into(),
                run_dir: "results/s/1".into(),
                status: "passed".into(),
                total_s: 60.0,
                phases: phases(&record()),
            }],
            scaling: vec![ScalePoint {
                clients: 1,
                state_ram: Some(crate::infra::qemu::state::StateRam::Mapped),
                status: "passed".into(),
                total_s: 30.0,
                boot_max_s: 9.5,
                vms: vec![
                    VmMemory {
                        vm: "server".into(),
                        guest_mib: 512,
                        peak_rss_mib: 540.4,
                        peak_pss_mib: 530.2,
                        start: Some(crate::run::VmStart::Booted),
                    },
                    VmMemory {
                        vm: "client-1".into(),
                        guest_mib: 384,
                        peak_rss_mib: 470.0,
                        peak_pss_mib: 300.4,
                        start: Some(crate::run::VmStart::Restored),
                    },
                ],
            }],
            errors: vec!["rep 2: bare QEMU: boom".into()],
        };
        let md = markdown(&r);
        assert!(md.contains("| bare QEMU: spawn → rootfs command → exit (s) | 3 | 2.00 | 2.50 | 3.00 |"), "{md}");
        assert!(md.contains("| warm image resolution of the suite (s) | 3 | 0.010 | 0.020 | 0.030 |"), "{md}");
        // Per-rep ratios 2.0, 1.5, 2.0 → min 1.50, median 2.00, max 2.00.
        assert!(md.contains("| ratio vmrepro booting: ready / bare (per rep) | 3 | 1.50 | 2.00 | 2.00 |"), "{md}");
        // Restoring: 0.5, 0.25, 0.5.
        assert!(
            md.contains("| ratio vmrepro restoring, mapped RAM: ready / bare (per rep) | 3 | 0.25 | 0.50 | 0.50 |"),
            "{md}"
        );
        // Mapped against copied, rep by rep: 0.5, 0.25, 0.5.
        assert!(
            md.contains("| ratio restoring ready, mapped / copied RAM (per rep) | 3 | 0.25 | 0.50 | 0.50 |"),
            "{md}"
        );
        assert!(md.contains("| steps on server (2 steps) | 7.5 | 6.0 | 5.0 |"), "{md}");
        assert!(md.contains("| teardown | – | 0.3 | – |"), "{md}");
        // RSS 470–540 MiB; the most over guest RAM is client-1's 86 MiB.
        // PSS 530.2 + 300.4 = 831; the one restored client's 300.
        assert!(
            md.contains("| 1 | mapped | 2 (1) | passed | 30.0 | 9.5 | 470–540 | 831 | 300–300 | 384, 512 | 86 |"),
            "{md}"
        );
        assert!(md.contains("error: rep 2: bare QEMU: boom"));
        // Each kind's medians; a point no start of the kind passed is `–`.
        assert!(md.contains("| booting | 1 | – | – | 0.000 | 3.000 | – |"), "{md}");
        assert!(md.contains("| restoring, mapped RAM | 2 | 0.100 | 0.150 | 0.300 | 0.500 | 0.600 |"), "{md}");
    }
}
