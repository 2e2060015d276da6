//! Rules of the `measure:` block.

use std::collections::{BTreeMap, BTreeSet};

use super::{duration, exit_status, guest, is_name, limits, range, ValidationError};
use crate::measure::analysis::OUTCOME_METRIC;
use crate::measure::observer::derived_metrics;
use crate::measure::script::BUILTIN_SECTIONS;
use crate::plan::measurement::ObserverKind;
use crate::plan::names;
use crate::schema::measure::{MeasureSpec, MountstatsSpec, ObserverSpec};
use crate::schema::text::{non_ascii_hint, shown};
use crate::schema::SuiteSpec;
use crate::wire::summary::{COUNTERS as WIRE_COUNTERS, PREFIX as WIRE_PREFIX};

/// Metrics every measurement has.
const TIME_METRICS: &[&str] = &["elapsed_s", "user_s", "system_s"];

/// Checks every entry of `s.measure`.
pub(super) fn check(errs: &mut Vec<ValidationError>, s: &SuiteSpec) {
    let vm_names: BTreeSet<&str> = s.vms.iter().map(|v| v.name.as_str()).collect();
    let mut seen: BTreeMap<&str, String> = BTreeMap::new();
    if s.nfs_read.is_some() {
        seen.insert(names::NFS_READ_MEASUREMENT, "nfs_read".into());
    }
    for (i, m) in s.measure.iter().enumerate() {
        let k = format!("measure[{i}]");
        if !is_name(&m.name) {
            errs.push(ValidationError::BadName {
                key: format!("{k}.name"),
                what: "measurement name",
                value: m.name.clone(),
                pattern: "lowercase letters, digits and '-', starting with a letter, at most 32 characters",
            });
        } else if let Some(first) = seen.get(m.name.as_str()) {
            errs.push(ValidationError::Duplicate {
                key: format!("{k}.name"),
                what: "measurement name",
                value: m.name.clone(),
                first: first.clone(),
            });
        } else if vm_names.contains(m.name.as_str()) {
            errs.push(ValidationError::Rule {
                key: format!("{k}.name"),
                message: format!("{:?} is also a VM's name; `after` could not tell them apart", m.name),
            });
        } else if names::FIXED.contains(&m.name.as_str()) || names::PREFIXES.iter().any(|p| m.name.starts_with(p)) {
            errs.push(ValidationError::Rule {
                key: format!("{k}.name"),
                message: format!("{:?} is reserved for the steps the runner adds; choose another name", m.name),
            });
        }
        seen.insert(&m.name, format!("{k}.name"));
        check_one(errs, s, m, &k, &vm_names, &seen);
    }
}

/// The rules of one `measure:` entry `m` (key path `k`), one key after another.
fn check_one(
    errs: &mut Vec<ValidationError>,
    s: &SuiteSpec,
    m: &MeasureSpec,
    k: &str,
    vm_names: &BTreeSet<&str>,
    earlier: &BTreeMap<&str, String>,
) {
    check_vms_after(errs, m, k, vm_names, earlier);
    check_numbers_and_commands(errs, m, k);
    check_each(errs, m, k, vm_names);
    check_repeat(errs, s, m, k);
    check_calibrate(errs, m, k);
    let kinds = check_observers(errs, s, m, k);
    let records = check_records(errs, m, k);
    check_bytes(errs, m, k);
    super::output_metric::check(errs, m, k);
    check_metric_table(errs, m, k, &kinds);
    check_wire_metrics(errs, s, m, k);
    check_checks(errs, m, k, &records);
    if let Some(snap) = &m.snapshot {
        check_snapshot(errs, m, snap, k, &kinds, &records);
    }
}

/// `on` (known VMs, each once), `baseline` (one of them) and `after` (a VM or an
/// earlier measurement, not itself).
fn check_vms_after(
    errs: &mut Vec<ValidationError>,
    m: &MeasureSpec,
    k: &str,
    vm_names: &BTreeSet<&str>,
    earlier: &BTreeMap<&str, String>,
) {
    let rule = |errs: &mut Vec<ValidationError>, key: String, message: String| {
        errs.push(ValidationError::Rule { key, message })
    };
    if m.on.is_empty() {
        rule(errs, format!("{k}.on"), "at least one VM is measured".into());
    }
    let mut on = BTreeSet::new();
    for (j, vm) in m.on.iter().enumerate() {
        let key = format!("{k}.on[{j}]");
        if !vm_names.contains(vm.as_str()) {
            errs.push(ValidationError::Unknown { key, what: "VM", value: vm.clone(), hint: String::new() });
        } else if !on.insert(vm.as_str()) {
            errs.push(ValidationError::Duplicate { key, what: "VM", value: vm.clone(), first: format!("{k}.on") });
        }
    }
    if let Some(crate::schema::measure::BaselineSpec::Vm(b)) = &m.baseline {
        if !m.on.contains(b) {
            rule(
                errs,
                format!("{k}.baseline"),
                format!(
                    "{} is not one of the measured VMs ({k}.on: {}){}",
                    shown(b, 80),
                    m.on.join(", "),
                    non_ascii_hint(b)
                ),
            );
        }
    }
    for (j, a) in m.after.iter().enumerate() {
        // A measurement's name is accepted only for one defined before this one; VM
        // and step names are checked on the compiled plan.
        if !a.contains('/') && !vm_names.contains(a.as_str()) && !earlier.contains_key(a.as_str()) {
            let known: Vec<&str> = vm_names.iter().copied().chain(earlier.keys().copied()).collect();
            errs.push(ValidationError::Unknown {
                key: format!("{k}.after[{j}]"),
                what: "VM or earlier measurement",
                value: a.clone(),
                hint: format!(" (known: {})", known.join(", ")),
            });
        }
        if a == &m.name {
            rule(errs, format!("{k}.after[{j}]"), "a measurement can't wait for itself".into());
        }
    }
}

/// `repeat`, `warmup`, `expect_exit`, `timeout` and the commands (`run`, `setup`,
/// `teardown`).
fn check_numbers_and_commands(errs: &mut Vec<ValidationError>, m: &MeasureSpec, k: &str) {
    if let Some(w) = m.warmup {
        range(errs, &format!("{k}.warmup"), w, &limits::WARMUP, "");
    }
    if let Some(v) = &m.verdict {
        super::rules::verdict_spec(errs, &format!("{k}.verdict"), v);
    }
    if let Some(e) = m.expect_exit {
        exit_status(errs, &format!("{k}.expect_exit"), e);
    }
    if let Some(t) = m.timeout {
        duration(errs, &format!("{k}.timeout"), t);
    }
    for (field, v) in [("run", Some(&m.run)), ("setup", m.setup.as_ref()), ("teardown", m.teardown.as_ref())] {
        if let Some(v) = v {
            guest::check_command(errs, &format!("{k}.{field}"), v);
        }
    }
}

/// `each`: every action on a VM of the suite, with a command; at least one action.
fn check_each(errs: &mut Vec<ValidationError>, m: &MeasureSpec, k: &str, vm_names: &BTreeSet<&str>) {
    let Some(each) = &m.each else { return };
    if each.before.is_empty() && each.after.is_empty() {
        errs.push(ValidationError::Rule {
            key: format!("{k}.each"),
            message:
                "`each` has no actions: give `before` or `after` a list of {on: VM, run: COMMAND}, or leave `each` out"
                    .into(),
        });
    }
    for (list, actions) in [("before", &each.before), ("after", &each.after)] {
        if actions.len() > limits::ACTIONS {
            errs.push(ValidationError::OutOfRange {
                key: format!("{k}.each.{list}"),
                value: format!("{} actions", actions.len()),
                range: format!("at most {}", limits::ACTIONS),
            });
        }
        for (j, a) in actions.iter().enumerate() {
            let key = format!("{k}.each.{list}[{j}]");
            if !vm_names.contains(a.on.as_str()) {
                errs.push(ValidationError::Unknown {
                    key: format!("{key}.on"),
                    what: "VM",
                    value: a.on.clone(),
                    hint: format!(" (VMs: {})", vm_names.iter().copied().collect::<Vec<_>>().join(", ")),
                });
            }
            guest::check_command(errs, &format!("{key}.run"), &a.run);
        }
    }
}

/// `repeat`: a count within [`limits::REPEAT`]; adaptive bounds within it too, `min`
/// at most `max`, and a rule that can say `undecided` (the Mann–Whitney rule: the
/// ranges rule always decides, so its rounds would always stop at `min`) on a number
/// (`compare: outcome` has no test to decide).
fn check_repeat(errs: &mut Vec<ValidationError>, s: &SuiteSpec, m: &MeasureSpec, k: &str) {
    use crate::schema::measure::Rule;
    use crate::schema::repeat::RepeatSpec;
    let key = format!("{k}.repeat");
    let rule = |errs: &mut Vec<ValidationError>, message: String| {
        errs.push(ValidationError::Rule { key: key.clone(), message })
    };
    match m.repeat {
        None | Some(RepeatSpec::Auto) => {}
        Some(RepeatSpec::Count(r)) => range(errs, &key, r, &limits::REPEAT, ""),
        Some(RepeatSpec::Range { min, max }) => {
            range(errs, &format!("{key}.min"), min, &limits::REPEAT, "");
            range(errs, &format!("{key}.max"), max, &limits::REPEAT, "");
            if min > max {
                rule(errs, format!("min {min} is more than max {max}"));
            }
        }
    }
    if m.repeat.and_then(|r| r.bounds()).is_none() {
        return;
    }
    let verdict_rule = m.verdict.as_ref().and_then(|v| v.rule).or_else(|| s.verdict.as_ref().and_then(|v| v.rule));
    if verdict_rule == Some(Rule::Ranges) {
        rule(
            errs,
            "adaptive repeats need `verdict: {rule: mann_whitney}`: the ranges rule never says undecided, so every measurement would stop at `min`".into(),
        );
    }
    if m.compare.as_deref() == Some(OUTCOME_METRIC) {
        rule(errs, "adaptive repeats need a number to compare; `compare: outcome` has no test that decides".into());
    }
}

/// `calibrate: true`: an A/A copy that runs after the other VMs' iterations (not with
/// `concurrent: true`, where the copy could not overlap its own VM's iteration) and a
/// number to compare (not `compare: outcome`).
fn check_calibrate(errs: &mut Vec<ValidationError>, m: &MeasureSpec, k: &str) {
    if m.calibrate != Some(true) {
        return;
    }
    let key = format!("{k}.calibrate");
    if m.concurrent == Some(true) {
        errs.push(ValidationError::Rule {
            key: key.clone(),
            message: "`calibrate: true` runs the baseline's iterations a second time on its own VM, which can't overlap the first; leave out `concurrent: true` or `calibrate`".into(),
        });
    }
    if m.compare.as_deref() == Some(OUTCOME_METRIC) {
        errs.push(ValidationError::Rule {
            key,
            message: "`calibrate: true` measures the noise of a number; `compare: outcome` has none to measure".into(),
        });
    }
}

/// `observe`: each observer's own fields, a netem's VM, one observer of each kind.
/// Returns the kinds observed (a netem is another VM's, not a kind of this one).
fn check_observers(errs: &mut Vec<ValidationError>, s: &SuiteSpec, m: &MeasureSpec, k: &str) -> BTreeSet<ObserverKind> {
    let rule = |errs: &mut Vec<ValidationError>, key: String, message: String| {
        errs.push(ValidationError::Rule { key, message })
    };
    let mut kinds = BTreeSet::new();
    for (j, o) in m.observe.iter().enumerate() {
        let key = format!("{k}.observe[{j}]");
        let kind = match o {
            ObserverSpec::Local(kind, settings) => {
                if let Some(ms) = settings {
                    check_mount_settings(errs, &format!("{key}.{}", kind.name()), ms);
                }
                Some(*kind)
            }
            ObserverSpec::Netem(vm) => {
                match s.vms.iter().find(|v| &v.name == vm) {
                    None => errs.push(ValidationError::Unknown {
                        key: format!("{key}.netem"),
                        what: "VM",
                        value: vm.clone(),
                        hint: String::new(),
                    }),
                    Some(v) if v.net.as_ref().and_then(|n| n.egress.as_ref()).is_none() => rule(
                        errs,
                        format!("{key}.netem"),
                        format!("VM {vm} has no netem to observe: give it `net: {{egress: …}}`"),
                    ),
                    Some(_) => {}
                }
                if m.concurrent == Some(true) {
                    rule(
                        errs,
                        format!("{key}.netem"),
                        "with `concurrent: true` the iterations overlap, so a netem's counters can't be split between them".into(),
                    );
                }
                None
            }
        };
        if let Some(kind) = kind {
            if !kinds.insert(kind) {
                rule(
                    errs,
                    key,
                    format!("{} is observed twice; one observer of each kind per measurement", kind.name()),
                );
            }
        }
    }
    kinds
}

/// The settings of a kind of [`Settings::Mount`](crate::parse::observe::Settings)
/// (`mountstats`) at key `key`: the mount point and the operation names.
fn check_mount_settings(errs: &mut Vec<ValidationError>, key: &str, ms: &MountstatsSpec) {
    // Matched against /proc/self/mountstats, which escapes spaces and other odd
    // characters: only the strict form can match.
    if let Some(why) = guest::path_problem(&ms.mount, guest::MAX_PATH_BYTES) {
        errs.push(ValidationError::Rule {
            key: format!("{key}.mount"),
            message: format!("mount {} {why}", shown(&ms.mount, 80)),
        });
    }
    for (n, op) in ms.ops.iter().enumerate() {
        if op.is_empty() || !op.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_') {
            errs.push(ValidationError::Rule {
                key: format!("{key}.ops[{n}]"),
                message: format!(
                    "{op:?} is not an RPC operation name as the kernel prints it (e.g. READ, WRITE, COMMIT)"
                ),
            });
        }
    }
}

/// `record`: names that are not the script's own sections, each once, and their
/// commands. Returns the records' names.
fn check_records<'a>(errs: &mut Vec<ValidationError>, m: &'a MeasureSpec, k: &str) -> BTreeSet<&'a str> {
    let rule = |errs: &mut Vec<ValidationError>, key: String, message: String| {
        errs.push(ValidationError::Rule { key, message })
    };
    let mut records = BTreeSet::new();
    for (j, r) in m.record.iter().enumerate() {
        let key = format!("{k}.record[{j}]");
        if !is_name(&r.name)
            || BUILTIN_SECTIONS.contains(&r.name.as_str())
            || ObserverKind::all().any(|o| r.name == o.name() || r.name == format!("before-{}", o.name()))
        {
            rule(
                errs,
                format!("{key}.name"),
                format!(
                    "{} can't name a record: use lowercase letters, digits and '-', and none of the script's own sections ({}, an observer's name or before-<observer>){}",
                    shown(&r.name, 80),
                    BUILTIN_SECTIONS.join(", "),
                    non_ascii_hint(&r.name)
                ),
            );
        } else if !records.insert(r.name.as_str()) {
            errs.push(ValidationError::Duplicate {
                key: format!("{key}.name"),
                what: "record",
                value: r.name.clone(),
                first: format!("{k}.record"),
            });
        }
        guest::check_command(errs, &format!("{key}.run"), &r.run);
    }
    records
}

/// `bytes`: more than 0, within [`limits::MEASURE_BYTES`].
fn check_bytes(errs: &mut Vec<ValidationError>, m: &MeasureSpec, k: &str) {
    if m.bytes == Some(0) {
        errs.push(ValidationError::Rule {
            key: format!("{k}.bytes"),
            message: "0 bytes give no throughput; leave `bytes` out".into(),
        });
    } else if let Some(b) = m.bytes {
        range(errs, &format!("{k}.bytes"), b, &limits::MEASURE_BYTES, " bytes");
    }
}

/// `compare` and `table` (metrics the measurement has), `better` (not with
/// `compare: outcome`), `compare: outcome` only with two or more VMs.
fn check_metric_table(errs: &mut Vec<ValidationError>, m: &MeasureSpec, k: &str, kinds: &BTreeSet<ObserverKind>) {
    let rule = |errs: &mut Vec<ValidationError>, key: String, message: String| {
        errs.push(ValidationError::Rule { key, message })
    };
    if let Some(c) = m.compare.as_deref().filter(|c| *c != OUTCOME_METRIC) {
        if let Err(e) = metric_ok(m, kinds, c) {
            rule(errs, format!("{k}.compare"), e);
        }
    }
    let vms: BTreeSet<&String> = m.on.iter().collect();
    if m.compare.as_deref() == Some(OUTCOME_METRIC) && vms.len() < 2 {
        rule(
            errs,
            format!("{k}.compare"),
            format!(
                "`compare: outcome` compares how the iterations ended on each VM with the baseline's, and the measurement runs on {} VM; measure on two or more VMs (`on`), or compare a metric",
                vms.len()
            ),
        );
    }
    if m.compare.as_deref() == Some(OUTCOME_METRIC) && m.better.is_some() {
        rule(
            errs,
            format!("{k}.better"),
            "outcomes are the same or different, neither better nor worse; leave `better` out".into(),
        );
    }
    for (j, name) in m.table.iter().enumerate() {
        if let Err(e) = metric_ok(m, kinds, name) {
            rule(errs, format!("{k}.table[{j}]"), e);
        }
    }
}

/// `checks`: a section of the measurement, exactly one of `equals` (a scalar) and
/// `contains`.
fn check_checks(errs: &mut Vec<ValidationError>, m: &MeasureSpec, k: &str, records: &BTreeSet<&str>) {
    let rule = |errs: &mut Vec<ValidationError>, key: String, message: String| {
        errs.push(ValidationError::Rule { key, message })
    };
    for (j, c) in m.checks.iter().enumerate() {
        let key = format!("{k}.checks[{j}]");
        if !section_ok(records, &c.section) {
            rule(
                errs,
                format!("{key}.section"),
                format!(
                    "{} is not a section of this measurement (stdout, stderr, or a record's name){}",
                    shown(&c.section, 80),
                    non_ascii_hint(&c.section)
                ),
            );
        }
        if c.equals.as_ref().is_some_and(|v| {
            !matches!(v, serde_yaml::Value::String(_) | serde_yaml::Value::Number(_) | serde_yaml::Value::Bool(_))
        }) {
            rule(
                errs,
                format!("{key}.equals"),
                "`equals` takes a text or a number, which the section must equal".into(),
            );
        } else if let Some(why) =
            c.equals.as_ref().and_then(|v| super::sysctl::float_problem(v, "the section would have to be"))
        {
            rule(errs, format!("{key}.equals"), why);
        }
        if c.equals.is_some() == c.contains.is_some() {
            rule(errs, key, "give exactly one of `equals` or `contains`".into());
        }
    }
}

/// `snapshot`: its per-VM verdicts, signs (metrics) and sections, and that it keeps
/// something of the results.
fn check_snapshot(
    errs: &mut Vec<ValidationError>,
    m: &MeasureSpec,
    snap: &crate::schema::measure::MeasureSnapshotSpec,
    k: &str,
    kinds: &BTreeSet<ObserverKind>,
    records: &BTreeSet<&str>,
) {
    let rule = |errs: &mut Vec<ValidationError>, key: String, message: String| {
        errs.push(ValidationError::Rule { key, message })
    };
    super::verdict_overrides(errs, &format!("{k}.snapshot.verdict_by_vm"), &snap.verdict_by_vm, &m.on, &m.baselines());
    for (j, name) in snap.signs.iter().enumerate() {
        if let Err(e) = metric_ok(m, kinds, name) {
            rule(errs, format!("{k}.snapshot.signs[{j}]"), e);
        }
    }
    for (j, name) in snap.values.iter().enumerate() {
        if let Err(e) = metric_ok(m, kinds, name) {
            rule(errs, format!("{k}.snapshot.values[{j}]"), e);
        }
    }
    for (j, name) in snap.sections.iter().enumerate() {
        if !section_ok(records, name) {
            rule(
                errs,
                format!("{k}.snapshot.sections[{j}]"),
                format!(
                    "{} is not a section of this measurement (stdout, stderr, or a record's name){}",
                    shown(name, 80),
                    non_ascii_hint(name)
                ),
            );
        }
    }
    let keeps_outcomes = snap.outcome != Some(false);
    if m.compare.as_deref() == Some(OUTCOME_METRIC) && !keeps_outcomes {
        rule(
            errs,
            format!("{k}.snapshot.outcome"),
            "`compare: outcome` compares how the iterations ended, and `outcome: false` leaves that out of the snapshot, so a changed outcome (exit 32 becoming exit 1) would still match; keep `outcome: true` (the default) or compare a metric".into(),
        );
    } else if !keeps_outcomes
        && keeps_no_verdict(m, snap)
        && snap.signs.is_empty()
        && snap.values.is_empty()
        && snap.sections.is_empty()
    {
        rule(
            errs,
            format!("{k}.snapshot"),
            "this snapshot keeps nothing of the measurement's results (no verdict, no outcomes, no signs, no values, no sections), so its test would pass whatever the run did; keep at least one, or leave `snapshot` out for the defaults".into(),
        );
    }
}

/// Whether `name` is a metric measurement `m` has (for `compare`, `table` and
/// `snapshot.signs`), given its observer kinds `kinds`; the error says why not.
fn metric_ok(m: &MeasureSpec, kinds: &BTreeSet<ObserverKind>, name: &str) -> Result<(), String> {
    let derived = derived_metrics(kinds.iter().copied());
    if TIME_METRICS.contains(&name) || derived.contains_key(name) || super::output_metric::name(m) == Some(name) {
        return Ok(());
    }
    if name.starts_with(WIRE_PREFIX) {
        // Whether the VMs are captured is `check_wire_metrics`'s rule.
        return if WIRE_COUNTERS.contains(&name) {
            Ok(())
        } else {
            Err(format!("{} is not a wire counter: use one of {}", shown(name, 80), WIRE_COUNTERS.join(", ")))
        };
    }
    if name == "throughput_mb_s" {
        return if m.bytes.is_some() { Ok(()) } else { Err("throughput_mb_s needs `bytes`".into()) };
    }
    let namespace = name.split('.').next().unwrap_or_default();
    let providers: Vec<ObserverKind> = ObserverKind::all().filter(|k| k.def().namespace == namespace).collect();
    match providers.first() {
        Some(kind) if name.split('.').count() >= 2 => {
            if providers.iter().any(|p| kinds.contains(p)) {
                counter_ok(name, *kind, m)
            } else {
                Err(format!("{name} is a counter of the {} observer; add it to `observe`", kind.name()))
            }
        }
        _ => {
            let all = derived_metrics(ObserverKind::all());
            match all.get(name) {
                Some(_) => Err(format!("{name} comes from an observer this measurement lacks; add it to `observe`")),
                None => Err(format!(
                    "{} is not a metric: use elapsed_s, user_s, system_s, throughput_mb_s, the name of `metric` (a number `run` prints), a derived metric of the observers ({}), a counter name (netstat.Ip.ReasmFails, nfs.client.rpc.retrans, mountstats.READ.transmissions), or (for `compare`) outcome{}",
                    shown(name, 80),
                    all.keys().copied().collect::<Vec<_>>().join(", "),
                    non_ascii_hint(name)
                )),
            }
        }
    }
}

/// The wire counters `m` names (`compare`, `table`, `snapshot.signs`/`values`) need a capture
/// of every VM it measures: each of `on` that is a VM of the suite needs `capture:` on
/// (its own, or `network.capture`).
fn check_wire_metrics(errs: &mut Vec<ValidationError>, s: &SuiteSpec, m: &MeasureSpec, k: &str) {
    use crate::schema::capture::CaptureSpec;
    let signs = m.snapshot.iter().flat_map(|sn| {
        let signs = sn.signs.iter().enumerate().map(|(j, n)| (format!("snapshot.signs[{j}]"), n));
        signs.chain(sn.values.iter().enumerate().map(|(j, n)| (format!("snapshot.values[{j}]"), n)))
    });
    let named = m
        .compare
        .iter()
        .map(|c| ("compare".to_string(), c))
        .chain(m.table.iter().enumerate().map(|(j, n)| (format!("table[{j}]"), n)))
        .chain(signs);
    let Some((key, name)) = named.into_iter().find(|(_, n)| n.starts_with(WIRE_PREFIX)) else { return };
    let uncaptured: Vec<&str> =
        m.on.iter()
            .filter_map(|vm| s.vms.iter().find(|v| &v.name == vm))
            .filter(|v| v.capture.or(s.network.capture).unwrap_or(CaptureSpec::Off) == CaptureSpec::Off)
            .map(|v| v.name.as_str())
            .collect();
    if !uncaptured.is_empty() {
        errs.push(ValidationError::Rule {
            key: format!("{k}.{key}"),
            message: format!(
                "{name} is counted from the VM's packet capture, and {} has none; set `capture: measured` on it (or `network.capture`)",
                uncaptured.join(", ")
            ),
        });
    }
}

/// Whether `name` is a section of a measurement whose records are `records`.
fn section_ok(records: &BTreeSet<&str>, name: &str) -> bool {
    name == "stdout" || name == "stderr" || records.contains(name)
}

/// Whether `snap` keeps no verdict of measurement `m`: every VM compared with the
/// baseline (`baseline`, else the first of `on`) has `none` as its own or the
/// measurement's policy. True when no VM is compared.
fn keeps_no_verdict(m: &MeasureSpec, snap: &crate::schema::measure::MeasureSnapshotSpec) -> bool {
    let baselines = m.baselines();
    m.on.iter().filter(|vm| !baselines.contains(&vm.as_str())).all(|vm| {
        snap.verdict_by_vm.get(vm).copied().unwrap_or(snap.verdict.unwrap_or_default())
            == crate::schema::SnapshotVerdicts::None
    })
}

/// What can be known of counter `name` of `kind`'s namespace before a run: the parts
/// its parser produces (the row's `counter_name`), and for a kind with settings, an
/// operation its `ops:` keeps.
fn counter_ok(name: &str, kind: ObserverKind, m: &MeasureSpec) -> Result<(), String> {
    let parts: Vec<&str> = name.split('.').collect();
    (kind.def().counter_name)(&parts).map_err(|what| format!("{} is not a counter: {what}", shown(name, 80)))?;
    let ops = m.observe.iter().find_map(|o| match o {
        ObserverSpec::Local(k, Some(ms)) if k.def().namespace == kind.def().namespace && !ms.ops.is_empty() => {
            Some((k, &ms.ops))
        }
        _ => None,
    });
    match ops {
        Some((k, ops)) if !ops.iter().any(|o| o == parts[1]) => Err(format!(
            "{name}: the {} observer keeps only ops {} (its `ops:`), so {} is never recorded; add {} there",
            k.name(),
            ops.join(", "),
            parts[1],
            parts[1]
        )),
        _ => Ok(()),
    }
}
