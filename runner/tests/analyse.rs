//! Golden tests of `vmrepro analyse`: recorded run folders (`tests/fixtures/runs/`,
//! see their README) are analysed again with no VM, and
//!
//! 1. for runs recorded before the measurement layer, every number the old analysis
//!    computed from the same raw outputs (`results.schema1.json`, written by vmrepro at
//!    commit a8e775a) is found unchanged in the new `results.json` (schema 2), field by
//!    field;
//! 2. the normalised value of a fixture named after its suite matches the suite's
//!    result snapshot (`snapshots/<suite>__result.snap`), the same snapshot
//!    `tests/suites.rs` checks live runs against; a fixture named otherwise records an
//!    earlier form of its suite (`nfs-udp-rto-carryover-3-reads`: three reads per
//!    kernel) and has a snapshot of its own (`snapshots/analyse__<fixture>__result.snap`);
//! 3. the printed tables are snapshotted (`snapshots/analyse__<fixture>.snap`);
//! 4. the `vmrepro analyse` binary prints the same tables and exits 0.

mod support;

use std::path::{Path, PathBuf};

use serde_json::Value;
use vmrepro::analyse::analyse_dir;
use vmrepro::measure::analysis::counted_values;

fn fixtures() -> Vec<PathBuf> {
    support::recorded_runs()
}

/// A private copy of a fixture (analysis writes `results.json` and `nfs/` into it).
fn copy(fixture: &Path) -> tempfile::TempDir {
    support::copy_run(fixture)
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Asserts `new[key] == old[key]` for each key, with a readable message.
fn same(what: &str, old: &Value, new: &Value, keys: &[(&str, &str)], mismatches: &mut Vec<String>) {
    for (o, n) in keys {
        if old[o] != new[n] {
            mismatches.push(format!("{what}: {o} was {} and is now {} ({n})", old[o], new[n]));
        }
    }
}

#[test]
fn analysing_a_recorded_run_changes_no_number() {
    let mut compared = 0;
    for fixture in fixtures().into_iter().filter(|f| f.join("results.schema1.json").is_file()) {
        compared += 1;
        let name = fixture.file_name().unwrap().to_string_lossy().into_owned();
        let dir = copy(&fixture);
        let a = analyse_dir(dir.path()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let new = serde_json::to_value(&a.results).unwrap();
        let old = read_json(&fixture.join("results.schema1.json"));
        let m = new["measurements"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["preset"] == "nfs_read")
            .expect("the preset's measurement");
        let nfs = &new["nfs_read"];
        let mut bad = Vec::new();
        same(
            &name,
            &old,
            nfs,
            &[("file_bytes", "file_bytes"), ("baseline", "baseline"), ("notes", "notes"), ("server", "server")],
            &mut bad,
        );
        assert_eq!(old["problems"], m["problems"], "{name}: problems");
        let old_clients = old["clients"].as_array().unwrap();
        assert_eq!(old_clients.len(), m["vms"].as_array().unwrap().len(), "{name}: clients");
        for (i, oc) in old_clients.iter().enumerate() {
            let nv = &m["vms"][i];
            let nc = &nfs["clients"][i];
            let who = format!("{name}: {}", oc["vm"]);
            same(
                &who,
                oc,
                nv,
                &[
                    ("vm", "vm"),
                    ("kernel_release", "kernel_release"),
                    ("elapsed_s", "elapsed_s"),
                    ("median_mb_s", "median_mb_s"),
                    ("ratio_to_baseline", "ratio_to_baseline"),
                ],
                &mut bad,
            );
            // Every field the old comparison had is unchanged (the new one adds the
            // rule, the Mann–Whitney test and the smallest detectable change).
            if let Some(old) = oc["comparison"].as_object() {
                let keys: Vec<(&str, &str)> = old.keys().map(|k| (k.as_str(), k.as_str())).collect();
                same(&who, &oc["comparison"], &nv["comparison"], &keys, &mut bad);
            } else {
                same(&who, oc, nv, &[("comparison", "comparison")], &mut bad);
            }
            same(&who, oc, nc, &[("mount", "mount")], &mut bad);
            for k in [
                "ip_reassembly_failures",
                "ip_fragments_dropped_after_timeout",
                "rpc_calls",
                "rpc_retransmissions",
                "tcp_segments_retransmitted",
            ] {
                same(&who, oc, &nv["totals"], &[(k, k)], &mut bad);
            }
            let reads = oc["reads"].as_array().unwrap();
            assert_eq!(reads.len(), nv["iterations"].as_array().unwrap().len(), "{who}: reads");
            for (j, or) in reads.iter().enumerate() {
                let ni = &nv["iterations"][j];
                let nr = &nc["reads"][j];
                let who = format!("{who} read {}", or["repeat"]);
                same(&who, or, ni, &[("repeat", "iteration"), ("appeared_counters", "appeared_counters")], &mut bad);
                same(&who, or, nr, &[("mount", "mount"), ("rpc_read", "rpc_read")], &mut bad);
                let om = &or["metrics"];
                same(
                    &who,
                    om,
                    ni,
                    &[
                        ("bytes_read", "bytes"),
                        ("elapsed_s", "elapsed_s"),
                        ("user_s", "user_s"),
                        ("system_s", "system_s"),
                        ("exit_status", "exit_status"),
                        ("throughput_mb_s", "throughput_mb_s"),
                    ],
                    &mut bad,
                );
                for (k, v) in om.as_object().unwrap() {
                    if let Some(nvk) = ni["metrics"].get(k) {
                        if nvk != v {
                            bad.push(format!("{who}: metric {k} was {v} and is now {nvk}"));
                        }
                    }
                }
                // Every counter that moved then moves by the same amount now (the new
                // analysis also reports the mountstats observer's counters).
                for (k, v) in or["changed_counters"].as_object().unwrap() {
                    if ni["changed_counters"][k] != *v {
                        bad.push(format!("{who}: counter {k} was {v} and is now {}", ni["changed_counters"][k]));
                    }
                }
                let extra: Vec<&String> = ni["changed_counters"]
                    .as_object()
                    .unwrap()
                    .keys()
                    .filter(|k| or["changed_counters"].get(k.as_str()).is_none() && !k.starts_with("mountstats."))
                    .collect();
                assert!(extra.is_empty(), "{who}: counters that moved only now: {extra:?}");
                let old_netem: Vec<(Value, Value, Value)> = or["netem"]
                    .as_array()
                    .map(|v| {
                        v.iter()
                            .map(|x| (x["vm"].clone(), x["sent_packets"].clone(), x["dropped_packets"].clone()))
                            .collect()
                    })
                    .unwrap_or_default();
                let new_netem: Vec<(Value, Value, Value)> = ni["remote"]
                    .as_array()
                    .map(|v| {
                        v.iter()
                            .map(|x| (x["vm"].clone(), x["sent_packets"].clone(), x["dropped_packets"].clone()))
                            .collect()
                    })
                    .unwrap_or_default();
                if old_netem != new_netem {
                    bad.push(format!("{who}: netem was {old_netem:?} and is now {new_netem:?}"));
                }
            }
        }
        assert!(bad.is_empty(), "numbers changed:\n  {}", bad.join("\n  "));
    }
    assert!(compared >= 2, "expected a TCP and a seeded-UDP run recorded before schema 2");
}

#[test]
fn a_recorded_run_normalises_to_its_suites_result_snapshot() {
    let mut live = 0;
    for fixture in fixtures() {
        let name = fixture.file_name().unwrap().to_string_lossy().into_owned();
        let dir = copy(&fixture);
        let a = analyse_dir(dir.path()).expect("analyse");
        let normalised = vmrepro::report::snapshot::normalise(&a).expect("normalise");
        let mut settings = support::snapshot_settings();
        settings.set_omit_expression(false);
        settings.set_input_file(support::repo_root().join("suites").join(format!("{}.yaml", a.record.suite)));
        let snapshot = if name == a.record.suite {
            live += 1;
            format!("{}__result", a.record.suite)
        } else {
            format!("analyse__{name}__result")
        };
        settings.bind(|| insta::assert_yaml_snapshot!(snapshot, normalised));
    }
    assert!(live >= 3, "expected at least 3 fixtures recording their suite as it is now, found {live}");
}

#[test]
fn tables_of_recorded_runs() {
    for fixture in fixtures() {
        let name = fixture.file_name().unwrap().to_string_lossy().into_owned();
        let dir = copy(&fixture);
        let a = analyse_dir(dir.path()).expect("analyse");
        let tables = vmrepro::report::tables(&a);
        support::snapshot_settings().bind(|| insta::assert_snapshot!(format!("analyse__{name}"), tables));

        // The binary prints the same, with no VM and exit 0.
        let dir = copy(&fixture);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_vmrepro"))
            .arg("analyse")
            .arg(dir.path())
            .env("VMREPRO_QEMU", "/bin/false")
            .output()
            .expect("vmrepro analyse");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(stdout.contains(&tables), "{name}: vmrepro analyse prints the tables:\n{stdout}");
        assert!(dir.path().join("results.json").is_file());
    }
}

#[test]
fn analyse_of_a_folder_that_is_not_a_run_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let out =
        std::process::Command::new(env!("CARGO_BIN_EXE_vmrepro")).arg("analyse").arg(tmp.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(vmrepro::exit::CONFIG_ERROR));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not a run folder") && err.contains("plan.json is missing"), "{err}");
}

/// A run folder for a two-VM `measure:` suite whose iterations ended as `ends` say
/// (per VM: the step status, the script's exit code, and its stdout), built from the
/// suite's real compiled plan. Only the analysis reads it: no VM is involved.
fn synthetic_run(compare: &str, ends: &[(&str, &str, Option<i64>, &str)]) -> tempfile::TempDir {
    synthetic_run_with(&format!("compare: {compare}"), ends)
}

/// As [`synthetic_run`], with `extra` (YAML lines of the measurement, indented by the
/// caller after the first) instead of `compare:`.
fn synthetic_run_with(extra: &str, ends: &[(&str, &str, Option<i64>, &str)]) -> tempfile::TempDir {
    synthetic_run_in("{ subnet: 10.90.0.0/24 }", extra, ends)
}

/// As [`synthetic_run_with`], with `network` (a YAML flow mapping) as the suite's network.
fn synthetic_run_in(network: &str, extra: &str, ends: &[(&str, &str, Option<i64>, &str)]) -> tempfile::TempDir {
    let suite = format!(
        "name: outcomes\nnetwork: {network}\nvms:\n  - {{ name: old, kernel: {{ debian: \"5.10\" }}, address: 10.90.0.2 }}\n  - {{ name: new, kernel: {{ debian: \"6.12\" }}, address: 10.90.0.3 }}\nmeasure:\n  - name: mount\n    on: [old, new]\n    repeat: 1\n    run: mount -t nfs -o proto=udp 10.90.0.9:/srv/export /mnt\n    {extra}\n"
    );
    run_of_plan(&suite, "passed", |vm, _| {
        ends.iter().find(|(v, ..)| *v == vm).map(|(_, status, exit_code, stdout)| End::new(status, *exit_code, stdout))
    })
}

/// How one step of a built run folder ended: its status, exit code, stdout and error.
struct End {
    status: String,
    exit_code: Option<i64>,
    stdout: String,
    error: Option<String>,
}

impl End {
    fn new(status: &str, exit_code: Option<i64>, stdout: &str) -> End {
        End { status: status.into(), exit_code, stdout: stdout.into(), error: None }
    }
}

/// A run folder of suite `suite` (YAML text), built from the suite's real compiled plan:
/// each step of the plan for which `end(vm, step)` says how it ended is a step of
/// `run.json` in the runner's format (its kind and fields as the plan has them, its
/// stdout in `vms/VM/NN-STEP.stdout`); `status` is the run's. Only the analysis reads
/// it: no VM is involved.
fn run_of_plan(suite: &str, status: &str, end: impl Fn(&str, &str) -> Option<End>) -> tempfile::TempDir {
    let root = support::repo_root();
    let file =
        vmrepro::schema::load::parse_suite(&root.join("suites/outcomes.yaml"), suite.to_string()).expect("suite");
    let catalog = vmrepro::infra::images::Catalog::load(&root.join("images")).expect("images/");
    let plan = vmrepro::suite::compile(&file, &catalog).expect("compiles");
    let dir = tempfile::tempdir().unwrap();
    let plan = serde_json::to_value(&plan).unwrap();
    std::fs::write(dir.path().join("plan.json"), plan.to_string()).unwrap();
    let mut vms = Vec::new();
    for vp in plan["vms"].as_array().unwrap() {
        let vm = vp["name"].as_str().unwrap();
        let mut steps = Vec::new();
        for (i, sp) in vp["steps"].as_array().unwrap().iter().enumerate() {
            let name = sp["name"].as_str().unwrap();
            let Some(e) = end(vm, name) else { continue };
            let rel = format!("vms/{vm}/{:02}-{name}.stdout", i + 1);
            std::fs::create_dir_all(dir.path().join(format!("vms/{vm}"))).unwrap();
            std::fs::write(dir.path().join(&rel), &e.stdout).unwrap();
            let mut step = serde_json::json!({
                "name": name, "status": e.status, "exit_code": e.exit_code, "signal": null, "expect_exit": 0,
                "duration_s": 1.0, "stdout": rel, "stderr": null, "error": e.error, "snapshot": false
            });
            for k in ["kind", "measurement", "iteration", "warmup", "when", "action", "round"] {
                if let Some(v) = sp.get(k) {
                    step[k] = v.clone();
                }
            }
            steps.push(step);
        }
        vms.push(serde_json::json!({
            "name": vm, "kernel": "k", "kernel_release": format!("{vm}-release"), "address": "", "mac": "", "tap": "",
            "accel": "tcg", "pid": null, "boot_s": 1.0, "ending": "quit", "console_log": "", "qemu_cmdline": "",
            "clock": null, "steps": steps
        }));
    }
    let run = serde_json::json!({
        "schema": 2, "suite": plan["suite"], "suite_file": "suites/outcomes.yaml", "started": "", "status": status,
        "error": null, "accel": "tcg", "accel_notice": null, "subnet": "10.90.0.0/24", "mtu": 1500, "temp_dir": null,
        "network_namespace": null, "images": [],
        "timings": { "images_s": 0.0, "boot_s": 0.0, "steps_s": 0.0, "teardown_s": 0.0, "total_s": 0.0 }, "vms": vms
    });
    std::fs::write(dir.path().join("run.json"), serde_json::to_string(&run).unwrap()).unwrap();
    dir
}

/// What the iteration script prints when `run` exited with `status` (GNU time 1.9;
/// without `uname`: the kernel release then comes from `run.json`).
fn ran(status: i32) -> String {
    ran_for(status, 0.05)
}

/// As [`ran`], with GNU time's elapsed `elapsed_s` (under a minute, 10 ms resolution).
fn ran_for(status: i32, elapsed_s: f64) -> String {
    let m = vmrepro::measure::script::SECTION_MARKER;
    let exited = if status == 0 { String::new() } else { format!("Command exited with non-zero status {status}\n") };
    format!("{m}time\n{exited}0.00user 0.01system 0:{elapsed_s:05.2}elapsed 20%CPU (0avgtext+0avgdata 2048maxresident)k\n0inputs+0outputs (0major+90minor)pagefaults 0swaps\n")
}

/// An Ethernet/IPv4/UDP frame from `src` port 800 to `dst` port 2049 (or back, for a
/// reply) holding the RPC message of 32-bit words `words`.
fn rpc_frame(src: [u8; 4], dst: [u8; 4], reply: bool, words: &[u32]) -> Vec<u8> {
    let payload: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
    let (sport, dport) = if reply { (2049, 800) } else { (800, 2049) };
    let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4(src, dst, 64)
        .udp(sport, dport);
    let mut out = Vec::with_capacity(b.size(payload.len()));
    b.write(&mut out, &payload).unwrap();
    out
}

/// The wire's counters of each measured iteration come from the frames its step wrote
/// (`capture_bytes` in run.json), are kept in results.json, and can be the verdict's
/// metric: here an NFSv3 READ sent three times on `old` (and an earlier call outside the
/// iteration, not counted), once on `new`.
#[test]
fn wire_counters_per_iteration_are_derived_from_the_saved_capture() {
    let (client, server) = ([10, 90, 0, 2], [10, 90, 0, 9]);
    let read = |xid: u32| vec![xid, 0, 2, 100003, 3, 6, 0, 0, 0, 0];
    let answer = |xid: u32| vec![xid, 1, 0, 0, 0, 0];
    let dir = synthetic_run_in(
        "{ subnet: 10.90.0.0/24, capture: measured }",
        "compare: wire.rpc.retransmissions\n    table: [wire.rpc.calls, wire.rpc.wait_max_ms]",
        &[("old", "passed", Some(0), &ran(0)), ("new", "passed", Some(0), &ran(0))],
    );
    // Per VM: (stamp in µs, frame bytes).
    type Frames = Vec<(u64, Vec<u8>)>;
    let frames: [(&str, Frames); 2] = [
        (
            "old",
            vec![
                (1_000_000, rpc_frame(client, server, false, &read(7))),
                (5_000_000, rpc_frame(client, server, false, &read(8))),
                (5_700_000, rpc_frame(client, server, false, &read(8))),
                (7_100_000, rpc_frame(client, server, false, &read(8))),
                (7_100_400, rpc_frame(server, client, true, &answer(8))),
            ],
        ),
        (
            "new",
            vec![
                (2_000_000, rpc_frame(client, server, false, &read(9))),
                (2_000_300, rpc_frame(server, client, true, &answer(9))),
            ],
        ),
    ];
    let mut run: Value = read_json(&dir.path().join("run.json"));
    for (i, (vm, frames)) in frames.iter().enumerate() {
        let mut w = pcap_file::pcap::PcapWriter::new(Vec::new()).unwrap();
        // After the 24-byte file header each frame takes a 16-byte record header and
        // its bytes; on `old` the iteration starts at the second frame.
        let skip = usize::from(*vm == "old");
        let from = 24 + frames[..skip].iter().map(|(_, d)| 16 + d.len() as u64).sum::<u64>();
        for (t, data) in frames {
            let p = pcap_file::pcap::PcapPacket::new(std::time::Duration::from_micros(*t), data.len() as u32, data);
            w.write_packet(&p).unwrap();
        }
        let bytes = w.into_writer();
        std::fs::write(dir.path().join(format!("vms/{vm}/capture.pcap")), &bytes).unwrap();
        let v = &mut run["vms"][i];
        v["capture"] = serde_json::json!({"file": format!("vms/{vm}/capture.pcap"), "bytes": bytes.len(),
            "max_bytes": 67108864, "measured_only": true});
        v["steps"][0]["capture_bytes"] = serde_json::json!([from, bytes.len()]);
    }
    std::fs::write(dir.path().join("run.json"), serde_json::to_string(&run).unwrap()).unwrap();

    let a = analyse_dir(dir.path()).expect("analyse");
    let r = &a.results.measurements[0];
    assert_eq!(r.problems, Vec::<String>::new());
    assert_eq!(r.metric, "wire.rpc.retransmissions");
    let old = &r.vm("old").unwrap().iterations[0].wire;
    assert_eq!((old["wire.rpc.calls"], old["wire.rpc.retransmissions"], old["wire.rpc.replies"]), (1.0, 2.0, 1.0));
    assert_eq!(old["wire.rpc.wait_max_ms"], 1400.0);
    assert_eq!(r.vm("old").unwrap().metric.as_ref().map(|s| s.median), Some(2.0));
    assert_eq!(r.vm("new").unwrap().iterations[0].wire["wire.rpc.retransmissions"], 0.0);
    let results = serde_json::to_value(&a.results).unwrap();
    assert_eq!(results["measurements"][0]["vms"][1]["iterations"][0]["wire"]["wire.rpc.calls"], 1.0);

    // The capture stopped before the iteration: no counters, a problem (its metric is
    // a wire counter), and the run's note stays in run.json.
    run["vms"][0]["steps"][0]["capture_bytes"] = Value::Null;
    run["vms"][0]["capture"]["stopped"] = "stopped at 70000 bytes: network.capture_max_bytes is 65536".into();
    std::fs::write(dir.path().join("run.json"), serde_json::to_string(&run).unwrap()).unwrap();
    let a = analyse_dir(dir.path()).expect("analyse");
    let r = &a.results.measurements[0];
    assert!(r.vm("old").unwrap().iterations[0].wire.is_empty());
    assert_eq!(r.problems, vec!["old: mount-1: no capture of this iteration".to_string()]);
}

#[test]
fn outcomes_are_compared_when_the_measurement_says_so() {
    let m = vmrepro::measure::script::SECTION_MARKER;
    let setup_failed = format!("{m}setup\nmount.nfs: Protocol not supported\n{m}setup-exit\n32\n");
    let dir =
        synthetic_run("outcome", &[("old", "passed", Some(0), &ran(0)), ("new", "failed", Some(10), &setup_failed)]);
    let a = analyse_dir(dir.path()).expect("analyse");
    let r = &a.results.measurements[0];
    assert_eq!(r.problems, Vec::<String>::new(), "outcomes compared are not problems");
    assert_eq!(r.vm("new").unwrap().outcome_words(), "setup failed (exit 32) ×1");
    assert_eq!(r.vm("new").unwrap().verdict.as_deref(), Some("different outcome"));
    let table = vmrepro::report::tables(&a);
    assert!(table.contains("outcomes differ: `mount` exit 0 ×1 on old-release (old, baseline); setup failed (exit 32) ×1 on new-release (new)"), "{table}");
    let n = serde_json::to_value(vmrepro::report::snapshot::normalise(&a).unwrap()).unwrap();
    assert_eq!(n["measurements"][0]["vms"][1]["outcomes"], serde_json::json!(["setup failed (exit 32)"]));
    assert_eq!(n["measurements"][0]["vms"][1]["verdict"], "different outcome");

    // The same exit statuses from `run` itself, then a timeout.
    let dir = synthetic_run("outcome", &[("old", "passed", Some(0), &ran(0)), ("new", "passed", Some(0), &ran(32))]);
    let r = &analyse_dir(dir.path()).unwrap().results.measurements[0];
    assert_eq!(r.vm("new").unwrap().verdict.as_deref(), Some("different outcome"));
    assert_eq!(r.vm("new").unwrap().outcome_words(), "exit 32 ×1");
    let dir = synthetic_run("outcome", &[("old", "passed", Some(0), &ran(0)), ("new", "timed_out", None, "")]);
    let r = &analyse_dir(dir.path()).unwrap().results.measurements[0];
    assert_eq!(r.vm("new").unwrap().outcome_words(), "timed out ×1");
}

#[test]
fn a_number_the_command_prints_is_the_metric_and_a_missing_one_fails_the_iteration() {
    let m = vmrepro::measure::script::SECTION_MARKER;
    let printed = |stdout: &str| format!("{}{m}stdout\n{stdout}\n", ran(0));
    let json = "metric: { name: iops, json: /jobs/0/read/iops, unit: IOPS, better: higher }";
    let dir = synthetic_run_with(
        json,
        &[
            ("old", "passed", Some(0), &printed(r#"{"jobs": [{"read": {"iops": 812.5}}]}"#)),
            ("new", "passed", Some(0), &printed("fio: io_u error on file /mnt/nfs/f: Input/output error")),
        ],
    );
    let a = analyse_dir(dir.path()).unwrap();
    let r = &a.results.measurements[0];
    assert_eq!(
        (r.metric.as_str(), r.unit.as_deref(), r.better),
        ("iops", Some("IOPS"), vmrepro::plan::measurement::Better::Higher)
    );
    assert_eq!(r.vm("old").unwrap().metric.as_ref().map(|s| s.median), Some(812.5));
    assert_eq!(r.vm("old").unwrap().iterations[0].output_metrics.get("iops"), Some(&812.5));
    assert_eq!(
        r.problems,
        vec![
            r#"new: mount-1: metric iops: in stdout: the output is not JSON (expected ident at line 1 column 2): "fio: io_u error on file /mnt/nfs/f: Input/output error\n""#
        ]
    );
    let new = r.vm("new").unwrap();
    assert!(!new.iterations[0].counted && new.metric.is_none(), "no value, not a zero");
    assert_eq!(vmrepro::cli::exit_code(a.record.status, a.results.problems().len()), vmrepro::exit::TEST_FAILURE);
    let table = vmrepro::report::tables(&a);
    assert!(
        table.contains(
            "measurement mount: iops in IOPS, printed by `run` (stdout, JSON /jobs/0/read/iops) (higher is better)"
        ),
        "{table}"
    );
    let results = serde_json::to_value(&a.results).unwrap();
    assert_eq!(results["measurements"][0]["vms"][0]["iterations"][0]["output_metrics"]["iops"], 812.5);

    // From a file `run` wrote, by a regex: a file that is not there is quoted too.
    let regex = "metric: { name: failures, from: { file: /tmp/out.txt }, regex: 'failures: ([0-9]+)' }";
    let file = |text: &str| format!("{}{m}metric-file\n{text}\n", ran(0));
    let dir = synthetic_run_with(
        regex,
        &[
            ("old", "passed", Some(0), &file("run 1\nfailures: 3 of 100")),
            (
                "new",
                "passed",
                Some(0),
                &file("head: cannot open '/tmp/out.txt' for reading: No such file or directory"),
            ),
        ],
    );
    let r = &analyse_dir(dir.path()).unwrap().results.measurements[0];
    assert_eq!(r.vm("old").unwrap().metric.as_ref().map(|s| s.median), Some(3.0));
    assert_eq!(
        r.problems,
        vec![
            r#"new: mount-1: metric failures: in file /tmp/out.txt: no match for "failures: ([0-9]+)": "head: cannot open '/tmp/out.txt' for reading: No such file or directory\n""#
        ]
    );
}

#[test]
fn a_failed_hung_or_crashed_iteration_is_a_problem_when_times_are_compared() {
    for (status, code, out, words) in [
        ("passed", Some(0), ran(32), "the command exit 32, expected exit 0"),
        ("timed_out", None, String::new(), "timed out"),
        ("error", None, String::new(), "crashed"),
        ("skipped", None, String::new(), "did not run (skipped)"),
    ] {
        let dir = synthetic_run("elapsed_s", &[("old", "passed", Some(0), &ran(0)), ("new", status, code, &out)]);
        let a = analyse_dir(dir.path()).unwrap();
        let r = &a.results.measurements[0];
        assert_eq!(r.problems, vec![format!("new: mount-1: {words}")], "{status}");
        assert!(!r.vm("new").unwrap().iterations[0].counted);
        assert_eq!(vmrepro::cli::exit_code(a.record.status, a.results.problems().len()), vmrepro::exit::TEST_FAILURE);
    }
}

/// Sets the snapshot policy of `plan.json`'s first measurement in `dir`.
fn set_snapshot_policy(dir: &Path, verdict: &str, by_vm: Value) {
    let path = dir.join("plan.json");
    let mut plan = read_json(&path);
    plan["measurements"][0]["snapshot"]["verdict"] = verdict.into();
    plan["measurements"][0]["snapshot"]["verdict_by_vm"] = by_vm;
    std::fs::write(&path, serde_json::to_string(&plan).unwrap()).unwrap();
}

#[test]
fn a_per_vm_snapshot_verdict_overrides_the_suites_for_that_vm_only() {
    // The recorded flagship run: client-5-10 is the baseline, two clients compared.
    let dir = copy(&fixtures().into_iter().find(|p| p.ends_with("nfs-read-100mb")).expect("nfs-read-100mb"));
    let verdicts = |dir: &Path| -> Vec<(String, Value)> {
        let n =
            serde_json::to_value(vmrepro::report::snapshot::normalise(&analyse_dir(dir).unwrap()).unwrap()).unwrap();
        let clients = n["nfs_read"]["clients"].as_array().expect("nfs_read clients").clone();
        clients.iter().map(|c| (c["vm"].as_str().unwrap().to_string(), c["verdict"].clone())).collect()
    };
    set_snapshot_policy(dir.path(), "direction", serde_json::json!({}));
    let all = verdicts(dir.path());
    assert_eq!(all[0], ("client-5-10".to_string(), Value::Null), "the baseline has no verdict");
    assert!(all[1..].iter().all(|(_, v)| v.is_string()), "{all:?}");
    set_snapshot_policy(dir.path(), "direction", serde_json::json!({ "client-6-1": "none" }));
    let some = verdicts(dir.path());
    assert_eq!(some[1], ("client-6-1".to_string(), Value::Null), "{some:?}");
    assert_eq!(some[2], all[2], "the other client keeps the suite's policy");

    // A `measure:` measurement: the override drops one VM's verdict, not another's.
    let m = vmrepro::measure::script::SECTION_MARKER;
    let failed = format!("{m}setup\nmount.nfs: Protocol not supported\n{m}setup-exit\n32\n");
    let dir = synthetic_run("outcome", &[("old", "passed", Some(0), &ran(0)), ("new", "failed", Some(10), &failed)]);
    let new_verdict = |dir: &Path| {
        let n =
            serde_json::to_value(vmrepro::report::snapshot::normalise(&analyse_dir(dir).unwrap()).unwrap()).unwrap();
        n["measurements"][0]["vms"][1]["verdict"].clone()
    };
    assert_eq!(new_verdict(dir.path()), "different outcome");
    set_snapshot_policy(dir.path(), "ratio_class", serde_json::json!({ "new": "none" }));
    assert_eq!(new_verdict(dir.path()), Value::Null);
}

/// The recorded runs analysed again under the default rule (exact Mann–Whitney at
/// α = 0.01, floor 10 %) instead of the ranges rule they were made with: with 3 (or 1)
/// repeats per VM no comparison can be decided (the smallest two-sided p of 3 and 3 is
/// 0.10), and the lines say so, with the p-values, the intervals and the smallest
/// change the runs could have flagged. With 5 and 5 (the A/A suite) the rule can decide
/// (its smallest p is 7.94e-3), and two clients of one kernel come out `same`.
#[test]
fn recorded_runs_under_the_mann_whitney_rule() {
    for fixture in fixtures() {
        let name = fixture.file_name().unwrap().to_string_lossy().into_owned();
        let dir = copy(&fixture);
        let path = dir.path().join("plan.json");
        let mut plan = read_json(&path);
        for m in plan["measurements"].as_array_mut().unwrap() {
            m["verdict"] = serde_json::to_value(vmrepro::plan::measurement::VerdictPolicy::default()).unwrap();
        }
        std::fs::write(&path, serde_json::to_string(&plan).unwrap()).unwrap();
        let a = analyse_dir(dir.path()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let lines: String = a.results.measurements.iter().map(vmrepro::report::verdict_lines).collect();
        for m in &a.results.measurements {
            // The sample sizes the rule compares: each VM's counted values of the metric.
            let repeats = |vm: &str| m.vm(vm).map_or(0, |v| counted_values(&m.metric, v).len());
            for v in m.vms.iter().filter(|v| v.vm != m.baseline && v.comparison.is_some()) {
                let n = repeats(&v.vm).min(repeats(&m.baseline));
                let want = if n <= 3 { "undecided" } else { "same" };
                assert!(name != "nfs-aa-same-kernel" || n == 5, "{name}: {} has {n} repeats", v.vm);
                assert_eq!(v.verdict.as_deref(), Some(want), "{name}: {} with {n} repeats", v.vm);
            }
        }
        support::snapshot_settings().bind(|| insta::assert_snapshot!(format!("analyse__{name}__mann_whitney"), lines));
    }
}

#[test]
fn a_report_of_compared_outcomes_speaks_of_outcomes_not_medians() {
    let m = vmrepro::measure::script::SECTION_MARKER;
    let setup_failed = format!("{m}setup\nmount.nfs: Protocol not supported\n{m}setup-exit\n32\n");
    let dir =
        synthetic_run("outcome", &[("old", "passed", Some(0), &ran(0)), ("new", "failed", Some(10), &setup_failed)]);
    let a = analyse_dir(dir.path()).expect("analyse");
    let r = &a.results.measurements;
    let head = vmrepro::report::published::headline("outcomes", r);
    assert_eq!(
        head,
        "[vmrepro] outcomes: different outcome of mount on new-release (new): setup failed (exit 32) ×1 vs exit 0 ×1 on old-release (old)"
    );
    let (base, cand) = (r[0].vm("old").unwrap(), r[0].vm("new").unwrap());
    let line = vmrepro::report::published::summary_line(&r[0], base, cand);
    assert_eq!(
        line,
        "mount.outcome: different outcome: new-release (new) vs old-release (old): setup failed (exit 32) ×1 vs exit 0 ×1"
    );
    vmrepro::report::published::write_analysed(&a).expect("report");
    let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(!md.contains("median"), "no medians in an outcome report:\n{md}");
    let words = md.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(words.contains("Verdict rule (compare: outcome): a VM has the same outcome"), "{md}");

    // Every VM ended alike: the headline says so, in outcomes.
    let dir = synthetic_run("outcome", &[("old", "passed", Some(0), &ran(0)), ("new", "passed", Some(0), &ran(0))]);
    let a = analyse_dir(dir.path()).unwrap();
    assert_eq!(
        vmrepro::report::published::headline("outcomes", &a.results.measurements),
        "[vmrepro] outcomes: same outcome of mount on every VM: exit 0 ×1"
    );
}

#[test]
fn a_vm_whose_baseline_never_succeeded_says_why_it_was_not_compared() {
    let dir = synthetic_run("elapsed_s", &[("old", "timed_out", None, ""), ("new", "passed", Some(0), &ran(0))]);
    let a = analyse_dir(dir.path()).unwrap();
    let table = vmrepro::report::tables(&a);
    let row = table.lines().find(|l| l.contains("(new)")).expect("new's row");
    assert!(row.contains("no comparison"), "{table}");
    assert!(table.contains("no comparison for new: baseline old: 1 of 1 iterations failed (timed out ×1)"), "{table}");
}

#[test]
fn mount_options_granted_otherwise_are_shown_and_the_udp_note_only_where_udp_was_possible() {
    let fixture = fixtures().into_iter().find(|p| p.ends_with("nfs-aa-same-kernel")).expect("nfs-aa-same-kernel");
    let with_options = |options: &str| {
        let dir = copy(&fixture);
        let path = dir.path().join("plan.json");
        let mut plan = read_json(&path);
        plan["nfs_read"]["mount_options"] = options.into();
        std::fs::write(&path, serde_json::to_string(&plan).unwrap()).unwrap();
        let a = analyse_dir(dir.path()).expect("analyse");
        (vmrepro::report::tables(&a), a.results.nfs_read.clone().expect("nfs_read results").notes)
    };
    // The recorded server grants at most 8192 bytes (the 2.4.19 profile).
    let (table, notes) = with_options("vers=3,proto=tcp,rsize=1048576");
    assert!(
        table.contains("negotiated otherwise than asked, client-a: rsize 1048576 asked, 8192 negotiated"),
        "{table}"
    );
    assert!(
        table.lines().any(|l| l.contains("(client-a)") && l.ends_with("v3/tcp rsize=8192 wsize=8192 (not as asked)")),
        "{table}"
    );
    assert!(notes.iter().all(|n| !n.contains("UDP")), "TCP asked for and granted: no UDP note: {notes:?}");
    let (table, notes) = with_options("defaults");
    assert!(!table.contains("negotiated otherwise"), "{table}");
    assert!(notes.iter().any(|n| n.contains("CONFIG_NFS_DISABLE_UDP_SUPPORT")), "v3 left to negotiation: {notes:?}");
}

/// The recorded runs with packet captures: `analyse` derives each captured read's wire
/// counters again from the saved `capture.pcap` (their snapshot is checked above), and
/// they agree with the client's own counters as `tests/suites.rs` checks live runs
/// ([`support::wire_check`]: the wire's READ retransmissions equal mountstats', its NFS
/// retransmissions nfsstat's over the read plus the mount's, ReasmFails within what the
/// wire allows).
#[test]
fn recorded_captures_agree_with_the_clients_counters() {
    let mut checked = Vec::new();
    for fixture in fixtures() {
        let dir = copy(&fixture);
        let a = analyse_dir(dir.path()).expect("analyse");
        checked.extend(support::wire_check::wire_against_counters(&a));
    }
    assert!(checked.len() >= 2, "expected a recorded run with two captured reads: {checked:?}");
    assert!(checked.iter().all(|c| c.wire.2 > 0 && c.reasm.is_some()), "{checked:?}");
}

/// The report's side-by-side chart of a recorded RTO run: both kernels sent the same
/// calls and resent the same ones the same number of times (row by row), and the
/// unpatched `mainline` waited longer in all.
#[test]
fn the_wire_chart_of_a_recorded_rto_run_lines_up_the_same_resends() {
    let mut charts = 0;
    for fixture in fixtures() {
        let dir = copy(&fixture);
        let a = analyse_dir(dir.path()).expect("analyse");
        if a.record.suite != "nfs-udp-rto-carryover" {
            continue;
        }
        for section in vmrepro::report::published::wire::wire_sections(&a) {
            for b in &section.blocks {
                let vmrepro::report::published::document::Block::Chart(svg) = b else { continue };
                let doc = roxmltree::Document::parse(svg).expect("well-formed");
                let mut rows: std::collections::BTreeMap<(String, String), (String, f64)> = Default::default();
                for g in doc.descendants().filter(|n| n.attribute("class") == Some("call")) {
                    let waited: f64 =
                        g.attribute("data-waits-ms").unwrap().split(',').filter_map(|w| w.parse::<f64>().ok()).sum();
                    rows.insert(
                        (g.attribute("data-row").unwrap().to_string(), g.attribute("data-vm").unwrap().to_string()),
                        (g.attribute("data-sends").unwrap().to_string(), waited),
                    );
                }
                let row_ids: std::collections::BTreeSet<&String> = rows.keys().map(|(r, _)| r).collect();
                assert!(row_ids.len() >= 10, "{} rows", row_ids.len());
                let (mut patched, mut mainline) = (0.0, 0.0);
                for r in row_ids {
                    let p = &rows[&(r.clone(), "no-carryover".to_string())];
                    let m = &rows[&(r.clone(), "mainline".to_string())];
                    assert_eq!(p.0, m.0, "row {r}: sends on no-carryover and mainline");
                    patched += p.1;
                    mainline += m.1;
                }
                assert!(mainline > patched, "mainline waited {mainline} ms, no-carryover {patched} ms");
                charts += 1;
            }
        }
    }
    assert!(charts >= 1, "no recorded RTO run with captures");
}

/// `vmrepro wire` on each recorded run with captures: what it prints, snapshotted
/// (`snapshots/analyse__<fixture>__wire.snap`), with no VM and exit 0.
#[test]
fn vmrepro_wire_on_recorded_captures() {
    let mut seen = 0;
    for fixture in fixtures().into_iter().filter(|f| {
        f.join("vms").read_dir().is_ok_and(|mut d| {
            d.any(|v| v.is_ok_and(|v| v.path().join(vmrepro::wire::run_dir::CAPTURE_FILE).is_file()))
        })
    }) {
        let name = fixture.file_name().unwrap().to_string_lossy().into_owned();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_vmrepro"))
            .arg("wire")
            .arg(&fixture)
            .env("VMREPRO_QEMU", "/bin/false")
            .output()
            .expect("vmrepro wire");
        assert_eq!(out.status.code(), Some(0), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        support::snapshot_settings().bind(|| insta::assert_snapshot!(format!("analyse__{name}__wire"), text));
        seen += 1;
    }
    assert!(seen >= 1, "no recorded run with a capture");
}

/// The wire section says what each capture holds, from run.json: only the measured
/// iterations (`capture: measured`), or the whole run (`capture: true`), and never
/// that a `measured` capture spans the whole run.
#[test]
fn the_wire_section_says_what_each_capture_holds() {
    use vmrepro::report::published::document::Block;
    let fixture = fixtures().into_iter().find(|f| f.ends_with("nfs-udp-rto-carryover-400kb")).expect("the fixture");
    let items = |dir: &Path| -> Vec<String> {
        let a = analyse_dir(dir).expect("analyse");
        let sections = vmrepro::report::published::wire::wire_sections(&a);
        assert_eq!(sections.iter().map(|s| s.title.as_str()).collect::<Vec<_>>(), ["On the wire: nfs-read"]);
        sections[0]
            .blocks
            .iter()
            .filter_map(|b| match b {
                Block::Items(i) => Some(i.clone()),
                _ => None,
            })
            .flatten()
            .collect()
    };
    let dir = copy(&fixture);
    let measured = items(dir.path());
    assert_eq!(measured.len(), 2, "{measured:?}");
    assert!(
        measured[0].starts_with("no-carryover: capture: measured, so only its measured iterations' steps are in it")
    );
    assert!(measured.iter().all(|i| !i.contains("whole run")), "{measured:?}");
    let run = dir.path().join("run.json");
    let text = std::fs::read_to_string(&run).unwrap().replace("\"measured_only\": true", "\"measured_only\": false");
    std::fs::write(&run, text).unwrap();
    let whole = items(dir.path());
    assert!(
        whole[1].starts_with(
            "mainline: capture: true, the whole run from boot (below: its measured iterations' frames only)"
        ),
        "{whole:?}"
    );
}

/// `baseline: {axis, value}`: each group of variants is compared with its own group's
/// baseline, not with one baseline for all. Loaded against idle on two kernels, timed
/// so that the answers differ: on 5.10 the loaded client takes twice as long as its idle
/// one, on 6.12 as long as its idle one, which itself takes four times as long as 5.10's
/// (so against 5.10's idle client every 6.12 client would be `slower`).
#[test]
fn each_group_of_variants_is_compared_with_its_own_baseline() {
    let suite = "name: groups\nnetwork: { subnet: 10.90.0.0/24 }\nvms:\n  - name: client\n    kernel: { debian: \"6.1\" }\n    address: 10.90.0.10\n    variants:\n      kernel: { v5-10: { debian: \"5.10\" }, v6-12: { debian: \"6.12\" } }\n      env.LOAD: { idle: \"0\", busy: \"2\" }\nmeasure:\n  - name: write\n    on: [client]\n    baseline: { axis: env.LOAD, value: idle }\n    repeat: 3\n    verdict: { rule: ranges }\n    run: dd if=/dev/zero of=/tmp/f bs=1M count=32 conv=fsync\n";
    let times: [(&str, [f64; 3]); 4] = [
        ("client-v5-10-idle", [1.00, 1.05, 1.10]),
        ("client-v5-10-busy", [2.00, 2.10, 2.20]),
        ("client-v6-12-idle", [4.00, 4.20, 4.40]),
        ("client-v6-12-busy", [4.10, 4.20, 4.30]),
    ];
    let dir = run_of_plan(suite, "passed", |vm, step| {
        let (_, t) = times.iter().find(|(v, _)| *v == vm)?;
        let n: usize = step.strip_prefix("write-")?.parse().ok()?;
        Some(End::new("passed", Some(0), &ran_for(0, t[n - 1])))
    });
    let a = analyse_dir(dir.path()).expect("analyse");
    let r = &a.results.measurements[0];
    assert_eq!(r.problems, Vec::<String>::new());
    let vms: Vec<&str> = r.vms.iter().map(|v| v.vm.as_str()).collect();
    assert_eq!(vms, times.iter().map(|(v, _)| *v).collect::<Vec<_>>(), "every variant measured");
    let groups: Vec<(&str, &str, Vec<&str>)> = r
        .groups
        .iter()
        .map(|g| (g.name.as_str(), g.baseline.as_str(), g.vms.iter().map(String::as_str).collect()))
        .collect();
    assert_eq!(
        groups,
        vec![
            ("client-v5-10", "client-v5-10-idle", vec!["client-v5-10-idle", "client-v5-10-busy"]),
            ("client-v6-12", "client-v6-12-idle", vec!["client-v6-12-idle", "client-v6-12-busy"]),
        ]
    );
    let got = |vm: &str| {
        let v = r.vm(vm).unwrap();
        (v.ratio_to_baseline.map(|x| (x * 100.0).round() / 100.0), v.verdict.clone())
    };
    // Each idle client is a baseline (its own ratio 1, no verdict); each loaded client
    // has its ratio to, and verdict against, the idle client of its kernel.
    assert_eq!(got("client-v5-10-idle"), (Some(1.0), None));
    assert_eq!(
        got("client-v6-12-idle"),
        (Some(1.0), None),
        "6.12's idle client is a baseline, not compared with 5.10's"
    );
    let (ratio, verdict) = got("client-v5-10-busy");
    assert_eq!(ratio, Some(2.0));
    assert!(verdict.as_deref().is_some_and(|v| v.starts_with("slower")), "{verdict:?}");
    assert_eq!(got("client-v6-12-busy"), (Some(1.0), Some("same".to_string())));

    // The table: one heading per group, the rows of its VMs under it.
    let table = vmrepro::report::tables(&a);
    let lines: Vec<&str> = table.lines().collect();
    let at =
        |needle: &str| lines.iter().position(|l| l.contains(needle)).unwrap_or_else(|| panic!("{needle}:\n{table}"));
    let row = |vm: &str| lines[at(&format!("({vm})"))];
    assert!(at("group client-v5-10 (baseline client-v5-10-idle):") < at("(client-v5-10-idle)"), "{table}");
    assert!(at("(client-v5-10-busy)") < at("group client-v6-12 (baseline client-v6-12-idle):"), "{table}");
    assert!(at("group client-v6-12 (baseline client-v6-12-idle):") < at("(client-v6-12-idle)"), "{table}");
    assert!(row("client-v6-12-idle").contains(" baseline "), "{table}");
    assert!(row("client-v6-12-busy").contains(" 1.00 ") && row("client-v6-12-busy").contains(" same "), "{table}");
    assert!(row("client-v5-10-busy").contains(" 2.00 ") && row("client-v5-10-busy").contains(" slower"), "{table}");

    // The report compares each loaded client with its own kernel's idle client.
    vmrepro::report::published::write_analysed(&a).expect("report");
    let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    let words = md.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains(
            "a baseline per group: client-v5-10-idle (group client-v5-10), client-v6-12-idle (group client-v6-12)"
        ),
        "{md}"
    );
    for (base, cand) in [("client-v5-10-idle", "client-v5-10-busy"), ("client-v6-12-idle", "client-v6-12-busy")] {
        assert!(
            md.contains(&format!("baseline:  {base}-release ({base})\ncandidate: {cand}-release ({cand})")),
            "{cand} against {base}:\n{md}"
        );
    }
    assert_eq!(md.matches("candidate: ").count(), 2, "only the loaded clients are candidates:\n{md}");
}

/// A failed `each:` action fails its iteration: outcome `action failed`, left out of the
/// statistics, a problem that names the action, its VM and command and quotes its
/// output; the VM's other iterations still count, and the run exits 1. The folder is
/// what the runner writes when the server's restart fails before the second iteration:
/// the action failed (exit 1), the iteration waiting for it skipped, the `after` action
/// (which waits for the iteration however it ended) passed, the run `failed`.
#[test]
fn a_failed_action_fails_its_iteration_and_the_run() {
    let suite = "name: actions\nnetwork: { subnet: 10.90.0.0/24 }\nvms:\n  - { name: server, kernel: { debian: \"6.1\" }, address: 10.90.0.1 }\n  - { name: client, kernel: { debian: \"6.1\" }, address: 10.90.0.10 }\nmeasure:\n  - name: create\n    on: [client]\n    repeat: 3\n    each:\n      before: [{ on: server, run: \"rpc.nfsd 0 && rpc.nfsd 8\" }]\n      after: [{ on: server, run: \"cat /proc/fs/nfsd/versions\" }]\n    run: touch /mnt/nfs/new\n";
    let restart_failed = "rpc.nfsd: unable to set any sockets for nfsd";
    let dir = run_of_plan(suite, "failed", |vm, step| {
        Some(match (vm, step) {
            ("server", "action-before-1-client-create-2") => End::new("failed", Some(1), restart_failed),
            ("server", s) if s.starts_with("action-before-") => End::new("passed", Some(0), ""),
            ("server", s) if s.starts_with("action-after-") => End::new("passed", Some(0), "+3 +4 +4.1 +4.2"),
            ("client", "create-2") => End {
                error: Some("dependency server/action-before-1-client-create-2 failed".into()),
                ..End::new("skipped", None, "")
            },
            ("client", s) => End::new("passed", Some(0), &ran_for(0, if s == "create-1" { 1.5 } else { 2.5 })),
            _ => return None,
        })
    });
    let run = read_json(&dir.path().join("run.json"));
    let server: Vec<&str> =
        run["vms"][0]["steps"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(server.len(), 6, "one before and one after action per iteration: {server:?}");

    let a = analyse_dir(dir.path()).expect("analyse");
    let r = &a.results.measurements[0];
    let client = r.vm("client").unwrap();
    let second = &client.iterations[1];
    assert_eq!(second.outcome, vmrepro::measure::analysis::Outcome::ActionFailed);
    assert!(!second.counted);
    assert_eq!(second.actions.len(), 2, "{:?}", second.actions);
    assert_eq!(
        (second.actions[0].key.as_str(), second.actions[0].exit_code, second.actions[0].output.as_str()),
        ("each.before[0]", Some(1), restart_failed)
    );
    assert_eq!(
        r.problems,
        vec![format!(
            "client: create-2: action each.before[0] on server (\"rpc.nfsd 0 && rpc.nfsd 8\") exited 1: \"{restart_failed}\""
        )],
        "one problem, naming the action, its VM and command: the skipped iteration is no news of its own"
    );
    assert_eq!(client.outcome_words(), "exit 0 ×2, action failed ×1");
    let counted: Vec<bool> = client.iterations.iter().map(|i| i.counted).collect();
    assert_eq!(counted, vec![true, false, true]);
    let stats = client.metric.as_ref().expect("the other iterations count");
    assert_eq!((stats.n, stats.min, stats.max), (2, 1.5, 2.5));
    let table = vmrepro::report::tables(&a);
    assert!(table.lines().any(|l| l.contains("(client)") && l.ends_with("0 action 0")), "{table}");
    // A failed iteration alone fails the run, even if run.json said it passed.
    assert_eq!(
        vmrepro::cli::exit_code(vmrepro::run::record::RunStatus::Passed, a.results.problems().len()),
        vmrepro::exit::TEST_FAILURE
    );
    // `vmrepro analyse` of the folder as the runner left it: exit 1 and the problem.
    let out =
        std::process::Command::new(env!("CARGO_BIN_EXE_vmrepro")).arg("analyse").arg(dir.path()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(vmrepro::exit::TEST_FAILURE),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("action each.before[0] on server (\"rpc.nfsd 0 && rpc.nfsd 8\") exited 1"), "{stdout}");
}
